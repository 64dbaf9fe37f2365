//! warpforge on several GPUs, one thread and one runtime per GPU, NCCL
//! between them: `cargo run --release -p warpforge-example-multi-gpu`.
//!
//! For 1, 2, 4 and 8 GPUs (as many as the machine has), it runs
//! - a data-parallel step: each GPU multiplies its shard of the batch's
//!   rows by the weights with the tuned f16 GEMM
//!   (`warpforge_kernels::tuned`), turns the first `K x N` outputs into an
//!   f32 gradient with an epilogue kernel (ReLU), and the gradients are
//!   summed across GPUs by an NCCL all-reduce;
//! - a tensor-parallel GEMM: each GPU multiplies the whole A by its block of
//!   B's columns, and an all-gather gives every GPU all the blocks;
//!
//! checks both against the same GEMM on one GPU, and prints a scaling
//! table: throughput per GPU count and efficiency against linear scaling.
//! With one GPU it runs a one-rank communicator. Without a GPU, or without
//! libnccl, it says so and exits with 2 (not run).

use std::process::ExitCode;
use std::sync::Barrier;
use std::time::Instant;

use warpforge::nccl::{Communicator, NcclId, ReduceOp};
use warpforge::prelude::*;
use warpforge_kernels::tuned::{TunedGemm, GEMM_F16};

/// The batch's rows (split across GPUs in the data-parallel step), and the
/// GEMM's other sides.
const M: u32 = 8192;
const N: u32 = 4096;
const K: u32 = 4096;
/// Timed repetitions of each step, after one untimed.
const STEPS: u32 = 10;

/// `grad[i] = max(c[i], 0)` in f32: the backward pass's ReLU on the first
/// `grad.len()` outputs of a GEMM.
#[kernel(arch(sm_80))]
fn relu_gradient(c: &[f16], grad: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < grad.len() {
        let v = c[i] as f32;
        grad[i] = if v > 0.0 { v } else { 0.0 };
    }
}

/// What one GPU count measured.
struct Scaling {
    gpus: usize,
    data_parallel_ms: f64,
    tensor_parallel_ms: f64,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Outcome::NotRun(why)) => {
            eprintln!("NOT RUN: {why}");
            ExitCode::from(2)
        }
        Err(Outcome::Failed(why)) => {
            eprintln!("FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

enum Outcome {
    NotRun(String),
    Failed(String),
}

impl From<Error> for Outcome {
    fn from(e: Error) -> Outcome {
        Outcome::Failed(e.to_string())
    }
}

fn run() -> Result<(), Outcome> {
    let first = Runtime::cuda(0)
        .map_err(|e| Outcome::NotRun(format!("this example needs a CUDA GPU: {e}")))?;
    let available = (0..)
        .take_while(|&i| i == 0 || Runtime::cuda(i).is_ok())
        .count();
    NcclId::new().map_err(|e| Outcome::NotRun(e.to_string()))?;
    println!(
        "{available} x {} ({}); M x N x K = {M} x {N} x {K}, f16",
        first.device().name,
        first.device().sm_name()
    );

    let a = random_f16((M * K) as usize, 1);
    let b = random_f16((K * N) as usize, 2);
    let reference = one_gpu_gemm(&first, &a, &b)?;
    drop(first);

    let mut table = Vec::new();
    for gpus in [1, 2, 4, 8].into_iter().filter(|&g| g <= available) {
        let id = NcclId::new()?;
        let barrier = Barrier::new(gpus);
        let ranks: Vec<Result<RankResult, Error>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..gpus)
                .map(|rank| {
                    let (a, b, barrier) = (&a, &b, &barrier);
                    scope.spawn(move || rank_main(rank, gpus, &id, barrier, a, b))
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a rank's thread panicked"))
                .collect()
        });
        let ranks: Vec<RankResult> = ranks.into_iter().collect::<Result<_, _>>()?;
        check(gpus, &ranks[0], &reference).map_err(Outcome::Failed)?;
        table.push(Scaling {
            gpus,
            data_parallel_ms: ranks.iter().map(|r| r.data_parallel_ms).fold(0.0, f64::max),
            tensor_parallel_ms: ranks
                .iter()
                .map(|r| r.tensor_parallel_ms)
                .fold(0.0, f64::max),
        });
    }
    print_table(&table);
    Ok(())
}

/// What rank 0 (every rank holds the same) gathered and reduced, and each
/// rank's time per step.
struct RankResult {
    gradient: Vec<f32>,
    gathered: Vec<f16>,
    data_parallel_ms: f64,
    tensor_parallel_ms: f64,
}

/// One GPU's thread: its runtime, its rank, both steps, timed.
fn rank_main(
    rank: usize,
    gpus: usize,
    id: &NcclId,
    barrier: &Barrier,
    a: &[f16],
    b: &[f16],
) -> Result<RankResult, Error> {
    let rt = Runtime::cuda(rank)?;
    let comm = Communicator::for_rank(&rt, rank, gpus, id)?;
    let gemm = TunedGemm::new(&rt, &GEMM_F16)?;
    let (shard_rows, block_cols) = (M / gpus as u32, N / gpus as u32);

    // Data parallel: rows [rank * shard_rows, ..) of A times all of B (k x n, column-major).
    let rows = rank * (shard_rows * K) as usize..(rank + 1) * (shard_rows * K) as usize;
    let a_shard = rt.upload(&a[rows])?;
    let weights = rt.upload(b)?;
    let mut c_shard = rt.alloc_zeroed::<f16>((shard_rows * N) as usize)?;
    let mut gradient = rt.alloc_zeroed::<f32>((K * N) as usize)?;
    let data_parallel = |c: &mut DeviceBuffer<f16>, grad: &mut DeviceBuffer<f32>| {
        gemm.run(
            &rt,
            &a_shard,
            &weights,
            &mut *c,
            (shard_rows, N, K),
            1.0,
            0.0,
        )?;
        relu_gradient::launch(&rt, Grid::linear(grad.len(), 256), &*c, &mut *grad)?;
        comm.all_reduce_in_place(&mut *grad, ReduceOp::Sum)
    };
    let data_parallel_ms = timed(&rt, barrier, || data_parallel(&mut c_shard, &mut gradient))?;

    // Tensor parallel: all of A times columns [rank * block_cols, ..) of B,
    // which are contiguous in a column-major B.
    let whole_a = rt.upload(a)?;
    let cols = rank * (block_cols * K) as usize..(rank + 1) * (block_cols * K) as usize;
    let b_block = rt.upload(&b[cols])?;
    let mut c_block = rt.alloc_zeroed::<f16>((M * block_cols) as usize)?;
    let mut gathered = rt.alloc_zeroed::<f16>((M * N) as usize)?;
    let tensor_parallel = |c: &mut DeviceBuffer<f16>, all: &mut DeviceBuffer<f16>| {
        gemm.run(
            &rt,
            &whole_a,
            &b_block,
            &mut *c,
            (M, block_cols, K),
            1.0,
            0.0,
        )?;
        comm.all_gather(&*c, &mut *all)
    };
    let tensor_parallel_ms = timed(&rt, barrier, || {
        tensor_parallel(&mut c_block, &mut gathered)
    })?;

    Ok(RankResult {
        gradient: if rank == 0 {
            rt.download(&gradient)?
        } else {
            Vec::new()
        },
        gathered: if rank == 0 {
            rt.download(&gathered)?
        } else {
            Vec::new()
        },
        data_parallel_ms,
        tensor_parallel_ms,
    })
}

/// Milliseconds per run of `step` over [`STEPS`] runs after one untimed,
/// every rank starting together. The result the runs leave is the last
/// run's; the all-reduce sums in place, so the data-parallel gradient is
/// the sum of the last run alone (each run overwrites it first).
fn timed(
    rt: &Runtime,
    barrier: &Barrier,
    mut step: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    step()?;
    rt.synchronize()?;
    barrier.wait();
    let start = Instant::now();
    for _ in 0..STEPS {
        step()?;
    }
    rt.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / STEPS as f64)
}

/// The whole GEMM on one GPU: the reference.
fn one_gpu_gemm(rt: &Runtime, a: &[f16], b: &[f16]) -> Result<Vec<f16>, Error> {
    let gemm = TunedGemm::new(rt, &GEMM_F16)?;
    let (a, b) = (rt.upload(a)?, rt.upload(b)?);
    let mut c = rt.alloc_zeroed::<f16>((M * N) as usize)?;
    gemm.run(rt, &a, &b, &mut c, (M, N, K), 1.0, 0.0)?;
    rt.download(&c)
}

/// Checks rank 0's results for `gpus` GPUs against the one-GPU GEMM `c`:
/// the gradient is the sum over shards of ReLU of each shard's first K x N
/// outputs; the gathered blocks are `c`'s column blocks, one after another.
fn check(gpus: usize, rank0: &RankResult, c: &[f16]) -> Result<(), String> {
    let shard = (M as usize / gpus) * N as usize;
    let expected_gradient: Vec<f64> = (0..(K * N) as usize)
        .map(|i| {
            (0..gpus)
                .map(|r| f64::from(c[r * shard + i].to_f32().max(0.0)))
                .sum()
        })
        .collect();
    let got: Vec<f64> = rank0.gradient.iter().map(|&v| f64::from(v)).collect();
    compare(
        &format!("{gpus} GPU(s): data-parallel gradient"),
        &got,
        &expected_gradient,
    )?;

    let block = N as usize / gpus;
    let mut expected_gathered = Vec::with_capacity(c.len());
    for r in 0..gpus {
        for row in 0..M as usize {
            let start = row * N as usize + r * block;
            expected_gathered.extend(
                c[start..start + block]
                    .iter()
                    .map(|v| f64::from(v.to_f32())),
            );
        }
    }
    let got: Vec<f64> = rank0
        .gathered
        .iter()
        .map(|v| f64::from(v.to_f32()))
        .collect();
    compare(
        &format!("{gpus} GPU(s): tensor-parallel GEMM"),
        &got,
        &expected_gathered,
    )
}

/// Within f16's rounding of one output (a shard's GEMM may run another
/// variant than the whole one's, which sums k in another order), per
/// element, relative to the output's magnitude.
fn compare(what: &str, got: &[f64], expected: &[f64]) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!(
            "{what}: {} values, expected {}",
            got.len(),
            expected.len()
        ));
    }
    let scale = expected.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let worst = got
        .iter()
        .zip(expected)
        .map(|(g, e)| (g - e).abs() / scale)
        .fold(0.0, f64::max);
    println!("{what}: max error {worst:.2e} of the largest value {scale:.3e}");
    if worst > 4e-3 {
        return Err(format!(
            "{what} disagrees with one GPU: max relative error {worst:.2e}"
        ));
    }
    Ok(())
}

/// The scaling table: per GPU count, each step's time, its GEMM throughput
/// (the whole problem's 2 M N K flops over the step's time) and the
/// efficiency against `gpus` times one GPU's throughput.
fn print_table(table: &[Scaling]) {
    let flops = 2.0 * f64::from(M) * f64::from(N) * f64::from(K);
    println!("\n| GPUs | data-parallel step (ms) | TFLOP/s | efficiency | tensor-parallel GEMM (ms) | TFLOP/s | efficiency |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let tflops = |ms: f64| flops / (ms * 1e-3) / 1e12;
    let (one_dp, one_tp) = (
        tflops(table[0].data_parallel_ms),
        tflops(table[0].tensor_parallel_ms),
    );
    for row in table {
        let (dp, tp) = (tflops(row.data_parallel_ms), tflops(row.tensor_parallel_ms));
        let linear = row.gpus as f64;
        println!(
            "| {} | {:.3} | {dp:.1} | {:.0}% | {:.3} | {tp:.1} | {:.0}% |",
            row.gpus,
            row.data_parallel_ms,
            100.0 * dp / (one_dp * linear),
            row.tensor_parallel_ms,
            100.0 * tp / (one_tp * linear),
        );
    }
}

/// `len` values in [-1, 1), from a fixed seed (a 64-bit LCG), so runs compare.
fn random_f16(len: usize, seed: u64) -> Vec<f16> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            f16::from_f32((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        })
        .collect()
}
