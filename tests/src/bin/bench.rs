//! Benchmarks beside cuBLAS, in one run: CUDA-event medians after warm-up, on
//! random inputs larger than L2.
//!
//! `bench` times the `cp_async` stream (`stream_scale`, every variant, the best
//! beside `cuMemcpyDtoD`), the dense and 2:4 sparse Tensor Core instruction
//! rates (`mma.sync` beside both forms of `mma.sp`), the 2:4 sparse f16 GEMM at
//! 8192^3 beside the best dense f16 variant, the f16, bf16, tf32 and s8 Tensor
//! Core GEMMs and the sm_70 `wmma` f16 GEMM (register-staged pipelines) at 8192^3
//! (A row-major, B column-major: every 16-byte-copy variant that reads those
//! layouts, the best beside cuBLAS, the best per pipeline depth),
//! every variant of the SIMT f32 GEMM at 8192^3 and the fastest against cuBLAS
//! sgemm (no TF32), checking that each agrees with cuBLAS. Then the
//! same GEMM's WGSL variants through wgpu on the same GPU (the portable path):
//! wgpu has no event timer here, so those are host wall-clock medians of
//! launch + wait, which include a submission (microseconds against milliseconds).
//! Last, the host time a dispatched launch (the autotuner's `TunedGemm::run`)
//! adds to a direct launch of the same variant.
//! `bench --only PATTERN` runs only the Tensor Core GEMM variants whose
//! kernel name or `Consts` debug text holds PATTERN (for profilers); `bench --sparse` only the sparse
//! sections; `--shape MxNxK` sets the shape of the GEMMs `--only` runs (`bench --help`
//! lists the options, and needs no GPU).

use std::process::ExitCode;

use clap::Parser;

use warpforge::{
    bf16, f16, DeviceBuffer, DeviceScalar, Error, GemmPrecision, Grid, MatrixLayout, Runtime,
};
use warpforge_kernels::gemm_problem::{gemm_with, GemmProblem, GemmVariant};
use warpforge_kernels::gemm_sparse::{gemm_sparse_f16, gemm_sparse_with, SparseGemmVariant};
use warpforge_kernels::sparse::device::{compress, decompress};
use warpforge_kernels::{gemm, gemm_tc, gemm_wgmma, gemm_wmma, stream};
use warpforge_tests::compare::deviation;
use warpforge_tests::sparse::{
    mma_dense_rate, mma_sp_rate, rate_words, RATE_CHAINS, RATE_META, RATE_THREADS,
};
use warpforge_tests::tuning::parse_shape;
use warpforge_tests::{run_seed, GemmFloat, Inputs};

/// Exit status when no GPU could be used: distinct from pass (0) and fail (1).
const NOT_RUN: u8 = 2;

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Benchmark the stock kernels beside cuBLAS on this GPU (all sections unless narrowed)"
)]
struct Args {
    /// Only the Tensor Core GEMM variants whose kernel name or `Consts` debug
    /// text holds PATTERN (for profilers), and nothing else
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// Only the 2:4 sparse sections (mma.sp rates, the sparse GEMM)
    #[arg(long, conflicts_with = "only")]
    sparse: bool,
    /// Only the host cost of a launch: bare cudarc, the launcher, `gemm_with`, `TunedGemm::run`
    #[arg(long, conflicts_with_all = ["only", "sparse"])]
    launch_cost: bool,
    /// The shape of the GEMMs `--only` runs, as MxNxK [default: 8192x8192x8192]
    #[arg(long, value_name = "MxNxK", value_parser = parse_shape, requires = "only")]
    shape: Option<(u32, u32, u32)>,
}

fn main() -> ExitCode {
    // Parsed before the GPU is looked for, so that `--help` and a wrong
    // argument need none.
    let args = Args::parse();
    warpforge_tests::stderr_log::init();
    let rt = match Runtime::cuda(0) {
        Ok(rt) => rt,
        Err(e) => {
            println!("BENCH NOT RUN: no usable CUDA GPU: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    let (m, n, k) = args.shape.unwrap_or((8192, 8192, 8192));
    let shape = (m as usize, n as usize, k as usize);
    let (only, sparse_only) = (args.only.as_deref(), args.sparse);
    let result = match only {
        Some(pattern) => bench_gemm_16bit(&rt, shape, pattern),
        None if sparse_only => bench_mma_sp(&rt).and_then(|()| bench_gemm_sparse(&rt, 8192)),
        None if args.launch_cost => bench_dispatch_overhead(&rt),
        None => bench_stream(&rt, 1 << 28)
            .and_then(|()| bench_mma_sp(&rt))
            .and_then(|()| bench_gemm_sparse(&rt, 8192))
            .and_then(|()| bench_gemm_16bit(&rt, (8192, 8192, 8192), ""))
            .and_then(|()| bench_gemm_f32(&rt, 8192))
            .and_then(|ptx_ms| bench_gemm_f32_wgpu(8192, ptx_ms))
            .and_then(|()| bench_dispatch_overhead(&rt)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The WGSL variants of the same GEMM through wgpu, beside the PTX path's best time.
fn bench_gemm_f32_wgpu(size: usize, ptx_ms: f32) -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::wgpu()?;
    println!("\nwgpu: {} through {}", rt.device().name, rt.backend_name());
    let mut inputs = Inputs::new(run_seed());
    let a = rt.upload(&inputs.f32s(size * size))?;
    let b = rt.upload(&inputs.f32s(size * size))?;
    let mut c: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;
    let mut best: Option<(f32, gemm::gemm_f32::Consts)> = None;
    for consts in gemm::gemm_f32::variants() {
        let mut run = || -> Result<f32, Error> {
            let start = std::time::Instant::now();
            gemm::gemm_f32_with(&rt, consts, &a, &b, &mut c, (s, s, s), 1.0, 0.0)?;
            rt.synchronize()?;
            Ok(start.elapsed().as_secs_f32() * 1e3)
        };
        run()?;
        let mut times = (0..5).map(|_| run()).collect::<Result<Vec<_>, _>>()?;
        times.sort_by(f32::total_cmp);
        let ms = times[2];
        println!(
            "  {:<40} {:>8.3} ms {:>7.2} TFLOP/s",
            format!("{consts:?}"),
            ms,
            tflops(size, ms)
        );
        if best.is_none_or(|(b, _)| ms < b) {
            best = Some((ms, consts));
        }
    }
    let (ms, consts) = best.ok_or("gemm_f32 has no variants")?;
    println!("\n| path | best variant | ms | TFLOP/s |");
    println!("|---|---|---|---|");
    println!(
        "| PTX (CUDA events) | see above | {ptx_ms:.3} | {:.2} |",
        tflops(size, ptx_ms)
    );
    println!(
        "| WGSL via wgpu (wall clock) | {consts:?} | {ms:.3} | {:.2} |",
        tflops(size, ms)
    );
    Ok(())
}

/// The host time of a launch, from a bare driver launch of the same PTX to a
/// dispatched one ([`warpforge_tests::tuning::dispatch_overhead`]), with an empty database:
/// the heuristic default serves the call, and nothing is written.
fn bench_dispatch_overhead(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("warpforge-bench-empty-tune-db");
    let o = warpforge_tests::tuning::dispatch_overhead(rt, &dir)?;
    println!(
        "\nlaunch host cost ({} at {}x{}x{}, host time per launch, enqueue only):",
        o.variant, o.shape.0, o.shape.1, o.shape.2
    );
    println!("\n| launch | us | vs bare |");
    println!("|---|---|---|");
    let rows = [
        ("bare (cuLaunchKernel through cudarc, same PTX)", o.bare_us),
        ("the kernel's launcher (gemm_f16::launch)", o.launcher_us),
        ("direct (gemm_with)", o.direct_us),
        ("dispatched (TunedGemm::run)", o.dispatched_us),
    ];
    for (row, us) in rows {
        println!("| {row} | {us:.3} | {:.2}x |", us / o.bare_us);
    }
    println!(
        "\nlauncher / bare: {:.2}x (target <= {}x: {})",
        o.launcher_over_bare,
        warpforge_tests::tuning::LAUNCHER_TARGET,
        if o.launcher_over_bare <= warpforge_tests::tuning::LAUNCHER_TARGET {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "dispatch overhead: {:.3} us (target < {} us); one resolved TunedGemm::select: {:.3} us",
        o.overhead_us,
        warpforge_tests::tuning::OVERHEAD_TARGET_US,
        o.select_ns / 1e3
    );
    if !o.within_target {
        return Err(format!("dispatch adds {:.3} us per launch", o.overhead_us).into());
    }
    Ok(())
}

/// Median of `reps` timed runs of `work`, after `warmup` untimed ones.
fn median_ms(
    rt: &Runtime,
    warmup: usize,
    reps: usize,
    mut work: impl FnMut(&Runtime) -> Result<(), Error>,
) -> Result<f32, Error> {
    for _ in 0..warmup {
        work(rt)?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(rt.time_ms(&mut work)?);
    }
    times.sort_by(f32::total_cmp);
    Ok(times[reps / 2])
}

fn tflops(size: usize, ms: f32) -> f64 {
    gemm_tflops((size, size, size), ms)
}

/// TFLOP/s of an m x n x k GEMM (2 m n k operations) that took `ms`.
fn gemm_tflops((m, n, k): (usize, usize, usize), ms: f32) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (ms as f64 * 1e-3) / 1e12
}

/// Returns the best variant's median time in ms.
fn bench_gemm_f32(rt: &Runtime, size: usize) -> Result<f32, Box<dyn std::error::Error>> {
    let device = rt.device();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        device.name, device.compute_capability.0, device.compute_capability.1, device.sm_count
    );
    let mut inputs = Inputs::new(run_seed());
    let a = rt.upload(&inputs.f32s(size * size))?;
    let b = rt.upload(&inputs.f32s(size * size))?;
    let mut c: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;

    println!("\ngemm_f32 {size}^3, every variant (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for consts in gemm::gemm_f32::variants() {
        let ms = median_ms(rt, 2, 10, |rt| {
            gemm::gemm_f32_with(rt, consts, &a, &b, &mut c, (s, s, s), 1.0, 0.0)
        })?;
        println!(
            "  {:<40} {:>8.3} ms {:>7.2} TFLOP/s",
            format!("{consts:?}"),
            ms,
            tflops(size, ms)
        );
        results.push((ms, consts));
    }
    results.sort_by(|x, y| x.0.total_cmp(&y.0));
    let best = results[0].1;

    // The winner and cuBLAS, timed alternately so that drift hits both alike.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut reference: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            gemm::gemm_f32_with(rt, best, &a, &b, &mut c, (s, s, s), 1.0, 0.0)
        })?);
        theirs.push(median_ms(rt, 3, 20, |rt| {
            rt.cublas_sgemm(size, size, size, &a, &b, &mut reference)
        })?);
    }
    ours.sort_by(f32::total_cmp);
    theirs.sort_by(f32::total_cmp);
    let (ours, theirs) = (ours[2], theirs[2]);

    let cublas_result: Vec<f64> = rt.download(&reference)?.iter().map(|&v| v as f64).collect();
    // A zero difference is plausible (both accumulate k in order with FMA), so
    // show that the reference is not trivially zero.
    let reference_max = cublas_result.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let d = deviation(&rt.download(&c)?, &cublas_result);
    println!("\n| kernel | ms | TFLOP/s | vs cuBLAS |");
    println!("|---|---|---|---|");
    println!(
        "| warpforge gemm_f32 {best:?} | {ours:.3} | {:.2} | {:.3}x |",
        tflops(size, ours),
        theirs / ours
    );
    println!(
        "| cuBLAS sgemm (fp32, no TF32) | {theirs:.3} | {:.2} | 1.000x |",
        tflops(size, theirs)
    );
    println!("\nwarpforge vs cuBLAS result: {d} (max |cuBLAS| {reference_max:.3})");
    if !d.passes(1e-5) {
        return Err(format!("gemm_f32 disagrees with cuBLAS: {d}").into());
    }
    Ok(ours)
}

/// Launches variant `index` of a Tensor Core GEMM on (a, b, c) with (m, n, k).
type Launch<'a, I, O> = dyn Fn(
        &Runtime,
        usize,
        &DeviceBuffer<I>,
        &DeviceBuffer<I>,
        &mut DeviceBuffer<O>,
        (u32, u32, u32),
    ) -> Result<(), Error>
    + 'a;

/// Every `ALIGNED` variant of the f16, bf16, tf32 and s8 Tensor Core GEMMs,
/// and every variant of the `wmma` GEMM, at `shape` (m, n, k) whose name holds `only`.
fn bench_gemm_16bit(
    rt: &Runtime,
    shape: (usize, usize, usize),
    only: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let (m, n, k) = shape;
    let dims = (m as u32, n as u32, k as u32);
    // One Tensor Core GEMM `$module::$kernel`: its variants that read A
    // row-major and B column-major and pass `$keep` (the 16-byte-copy ones
    // of `gemm_tc`), launched with alpha = `$one` and beta = `$zero`.
    macro_rules! bench_variants {
        ($module:ident::$kernel:ident, $keep:expr, $precision:expr, $one:expr, $zero:expr, $values:expr, $agree:expr) => {{
            let problem = GemmProblem::new(dims, $one, $zero);
            let variants: Vec<_> = $module::$kernel::Consts::variants_for(&problem)
                .into_iter()
                .filter($keep)
                .collect();
            let names: Vec<(String, u32)> = variants
                .iter()
                .map(|c| (format!("{c:?}"), c.STAGES))
                .collect();
            bench_gemm_tc(
                rt,
                shape,
                only,
                stringify!($kernel),
                $precision,
                &names,
                &|rt, i, a, b, c, dims| gemm_with(rt, variants[i], a, b, c, dims, $one, $zero),
                $values,
                $agree,
            )
        }};
    }
    macro_rules! bench_aligned {
        ($kernel:ident, $($rest:tt)*) => {
            bench_variants!(gemm_tc::$kernel, |c| c.ALIGNED, $($rest)*)
        };
    }
    // f16: both round f32 sums of the same products to f16 (summation orders differ).
    bench_aligned!(
        gemm_f16,
        GemmPrecision::F16,
        1.0,
        0.0,
        &float_values::<f16>,
        &|ours, theirs| agree_within::<f16>(ours, theirs, 1e-3)
    )?;
    bench_aligned!(
        gemm_bf16,
        GemmPrecision::Bf16,
        1.0,
        0.0,
        &float_values::<bf16>,
        &|ours, theirs| agree_within::<bf16>(ours, theirs, 8e-3)
    )?;
    // tf32: both round the inputs to tf32 and sum in f32 in different orders.
    bench_aligned!(
        gemm_tf32,
        GemmPrecision::Tf32,
        1.0,
        0.0,
        &float_values::<f32>,
        &|ours, theirs| agree_within::<f32>(ours, theirs, 1e-3)
    )?;
    // s8: integer sums, exact in both.
    bench_aligned!(
        gemm_s8,
        GemmPrecision::I8,
        1,
        0,
        &|inputs: &mut Inputs, n| inputs.i8s(n),
        &exact
    )?;
    // The sm_90a form (wgmma fed by the TMA, warp-specialized), on Hopper only.
    if rt.device().compute_capability == (9, 0) {
        bench_variants!(
            gemm_wgmma::gemm_wgmma_f16,
            |_| true,
            GemmPrecision::F16,
            1.0,
            0.0,
            &float_values::<f16>,
            &|ours, theirs| agree_within::<f16>(ours, theirs, 1e-3)
        )?;
        bench_variants!(
            gemm_wgmma::gemm_wgmma_bf16,
            |_| true,
            GemmPrecision::Bf16,
            1.0,
            0.0,
            &float_values::<bf16>,
            &|ours, theirs| agree_within::<bf16>(ours, theirs, 8e-3)
        )?;
        // tf32: wgmma truncates the inputs to tf32 where cuBLAS rounds them.
        bench_variants!(
            gemm_wgmma::gemm_wgmma_tf32,
            |_| true,
            GemmPrecision::Tf32,
            1.0,
            0.0,
            &float_values::<f32>,
            &|ours, theirs| agree_within::<f32>(ours, theirs, 5e-3)
        )?;
        bench_variants!(
            gemm_wgmma::gemm_wgmma_s8,
            |_| true,
            GemmPrecision::I8,
            1,
            0,
            &|inputs: &mut Inputs, n| inputs.i8s(n),
            &exact
        )?;
    }
    // The sm_70 form: its copies are staged through registers, so STAGES
    // shows what that overlap is worth.
    let wmma_variants = gemm_wmma::gemm_f16_wmma::variants();
    let wmma_names: Vec<(String, u32)> = wmma_variants
        .iter()
        .map(|c| (format!("{c:?}"), c.STAGES))
        .collect();
    bench_gemm_tc(
        rt,
        shape,
        only,
        "gemm_f16_wmma",
        GemmPrecision::F16,
        &wmma_names,
        &|rt, i, a, b, c, dims| gemm_with(rt, wmma_variants[i], a, b, c, dims, 1.0, 0.0),
        &float_values::<f16>,
        &|ours, theirs| agree_within::<f16>(ours, theirs, 1e-3),
    )
}

/// Whether an integer GEMM's result equals cuBLAS's, element by element.
fn exact(ours: &[i32], theirs: &[i32]) -> (bool, String) {
    let differ = ours.iter().zip(theirs).filter(|(x, y)| x != y).count();
    (
        differ == 0,
        format!("{differ} of {} elements differ", ours.len()),
    )
}

/// Random values of a floating-point type for a GEMM's inputs.
fn float_values<T: GemmFloat>(inputs: &mut Inputs, n: usize) -> Vec<T> {
    inputs.f32s(n).into_iter().map(T::from_f32).collect()
}

/// Whether a floating-point GEMM's result is within `tolerance` (relative L2 and the
/// largest difference, scaled) of cuBLAS's, and the deviation.
fn agree_within<T: GemmFloat>(ours: &[T], theirs: &[T], tolerance: f64) -> (bool, String) {
    let ours: Vec<f32> = ours.iter().map(|x| x.to_f64() as f32).collect();
    let theirs: Vec<f64> = theirs.iter().map(|x| x.to_f64()).collect();
    let d = deviation(&ours, &theirs);
    (d.passes(tolerance), d.to_string())
}

/// The variants (debug name, stages) of one Tensor Core GEMM `kernel` at
/// `shape` (m, n, k; A row-major, B column-major) whose name holds `only`, then the best beside
/// cuBLAS GemmEx of the same precision, alternating, then the best per
/// pipeline depth. `values` draws the inputs; `agree` says whether our result
/// matches cuBLAS's, and how far apart they are.
#[allow(clippy::too_many_arguments)]
fn bench_gemm_tc<I: DeviceScalar, O: DeviceScalar>(
    rt: &Runtime,
    shape: (usize, usize, usize),
    only: &str,
    kernel: &str,
    precision: GemmPrecision,
    variants: &[(String, u32)],
    launch: &Launch<'_, I, O>,
    values: &dyn Fn(&mut Inputs, usize) -> Vec<I>,
    agree: &dyn Fn(&[O], &[O]) -> (bool, String),
) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let (m, n, k) = shape;
    let a = rt.upload(&values(&mut inputs, m * k))?;
    let b = rt.upload(&values(&mut inputs, n * k))?;
    let mut c: DeviceBuffer<O> = rt.alloc_zeroed(m * n)?;
    let dims = (m as u32, n as u32, k as u32);
    let tflops = |ms: f32| gemm_tflops(shape, ms);
    let kind = precision.name();
    println!("\n{kernel}, {kind} GEMM {m}x{n}x{k} (A row-major, B column-major), every 16-byte-copy variant (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for (index, (name, stages)) in variants
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| kernel.contains(only) || name.contains(only))
    {
        let ms = median_ms(rt, 2, 10, |rt| launch(rt, index, &a, &b, &mut c, dims))?;
        println!("  {name:<72} {ms:>8.3} ms {:>7.2} TFLOP/s", tflops(ms));
        results.push((ms, index, *stages));
    }
    results.sort_by(|x, y| x.0.total_cmp(&y.0));
    let Some(&(_, best, _)) = results.first() else {
        // `--only` picked another family's variants.
        println!("  (no variant of {kernel} matches `{only}`)");
        return Ok(());
    };

    let mut reference: DeviceBuffer<O> = rt.alloc_zeroed(m * n)?;
    // The same rounds with nothing in between: the alternating rounds below have
    // measured slower than this (and than the sweep) with unchanged SM clocks,
    // so both are printed; the ratio quoted is the alternating one.
    let mut alone = Vec::new();
    for _ in 0..5 {
        alone.push(median_ms(rt, 3, 20, |rt| {
            launch(rt, best, &a, &b, &mut c, dims)
        })?);
    }
    alone.sort_by(f32::total_cmp);
    let alone = alone[2];
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            launch(rt, best, &a, &b, &mut c, dims)
        })?);
        theirs.push(median_ms(rt, 3, 20, |rt| {
            rt.cublas_gemm(
                precision,
                shape,
                (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
                &a,
                &b,
                &mut reference,
            )
        })?);
    }
    ours.sort_by(f32::total_cmp);
    theirs.sort_by(f32::total_cmp);
    let (ours, theirs) = (ours[2], theirs[2]);
    let (agrees, difference) = agree(&rt.download(&c)?, &rt.download(&reference)?);
    println!("\n| kernel | ms | TFLOP/s | vs cuBLAS |");
    println!("|---|---|---|---|");
    println!(
        "| warpforge {kernel} {} | {ours:.3} | {:.1} | {:.3}x |",
        variants[best].0,
        tflops(ours),
        theirs / ours
    );
    println!(
        "| same, timed alone (not alternating) | {alone:.3} | {:.1} | {:.3}x |",
        tflops(alone),
        theirs / alone
    );
    println!(
        "| cuBLAS GemmEx {kind} | {theirs:.3} | {:.1} | 1.000x |",
        tflops(theirs)
    );
    println!("\nwarpforge vs cuBLAS result: {difference}");
    if !agrees {
        return Err(format!("{kernel} disagrees with cuBLAS: {difference}").into());
    }

    println!("\n| STAGES | best variant | ms | TFLOP/s |");
    println!("|---|---|---|---|");
    for stages in 1..=5 {
        if let Some((ms, index, _)) = results.iter().find(|r| r.2 == stages) {
            println!(
                "| {stages} | {} | {ms:.3} | {:.1} |",
                variants[*index].0,
                tflops(*ms)
            );
        }
    }
    Ok(())
}

/// Every `stream_scale` variant on `n` f32 (read once, written once), then
/// the best beside a device-to-device copy of the same buffers
/// (`cuMemcpyDtoD`), alternating; bandwidth counts bytes read plus written.
fn bench_stream(rt: &Runtime, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let x = rt.upload(&inputs.f32s(n))?;
    let mut y: DeviceBuffer<f32> = rt.alloc_zeroed(n)?;
    let bytes = 2.0 * 4.0 * n as f64;
    let gbps = |ms: f32| bytes / (ms as f64 * 1e-3) / 1e9;
    println!("\nstream_scale, {n} f32 (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for consts in stream::stream_scale::variants() {
        let ms = median_ms(rt, 2, 10, |rt| {
            stream::stream_scale_with(rt, consts, &x, &mut y, 1.5)
        })?;
        println!(
            "  {:<40} {ms:>8.3} ms {:>8.1} GB/s",
            format!("{consts:?}"),
            gbps(ms)
        );
        results.push((ms, consts));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let best = results[0].1;
    let (mut ours, mut copies) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            stream::stream_scale_with(rt, best, &x, &mut y, 1.5)
        })?);
        copies.push(median_ms(rt, 3, 20, |rt| rt.copy(&x, &mut y))?);
    }
    ours.sort_by(f32::total_cmp);
    copies.sort_by(f32::total_cmp);
    let (ours, copy) = (ours[2], copies[2]);
    println!("\n| kernel | ms | GB/s (read + written) | vs copy |");
    println!("|---|---|---|---|");
    println!(
        "| stream_scale {best:?} | {ours:.3} | {:.1} | {:.3}x |",
        gbps(ours),
        copy / ours
    );
    println!("| cuMemcpyDtoD | {copy:.3} | {:.1} | 1.000x |", gbps(copy));
    println!("\n| STAGES | best variant | ms | GB/s |");
    println!("|---|---|---|---|");
    for stages in 1..=5 {
        if let Some((ms, consts)) = results.iter().find(|(_, c)| c.STAGES == stages) {
            println!("| {stages} | {consts:?} | {ms:.3} | {:.1} |", gbps(*ms));
        }
    }
    Ok(())
}

/// The Tensor Core instruction rates: dense `mma.sync` m16n8k16 f16 and sparse
/// `mma.sp` m16n8k32 f16 in both PTX forms (plain and `::ordered_metadata`),
/// independent MMAs back to back on every SM, timed alternately. Sparse
/// TFLOP/s count the dense-equivalent work (k = 32), so the sparse/dense ratio
/// is the speedup a 2:4 GEMM can reach at most.
fn bench_mma_sp(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let words = rt.upload(&rate_words(&mut inputs))?;
    let blocks = rt.device().sm_count * 4;
    let mut out: DeviceBuffer<f32> = rt.alloc_zeroed((blocks * RATE_THREADS) as usize)?;
    let grid = Grid::blocks([blocks, 1, 1]);
    let iters = 4096u32;
    let mmas = f64::from(blocks * RATE_THREADS / 32) * f64::from(iters * RATE_CHAINS);
    let tflops_at = |k: f64, ms: f32| mmas * 2.0 * 16.0 * 8.0 * k / (ms as f64 * 1e-3) / 1e12;
    let sparse = |ordered: bool| mma_sp_rate::Consts { ORDERED: ordered };
    let (mut dense, mut plain, mut ordered) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        dense.push(median_ms(rt, 3, 20, |rt| {
            mma_dense_rate::launch(rt, grid, &words, iters, &mut out)
        })?);
        plain.push(median_ms(rt, 3, 20, |rt| {
            mma_sp_rate::launch(rt, sparse(false), grid, &words, RATE_META, iters, &mut out)
        })?);
        ordered.push(median_ms(rt, 3, 20, |rt| {
            mma_sp_rate::launch(rt, sparse(true), grid, &words, RATE_META, iters, &mut out)
        })?);
    }
    let median = |mut v: Vec<f32>| {
        v.sort_by(f32::total_cmp);
        v[2]
    };
    let (dense, plain, ordered) = (median(dense), median(plain), median(ordered));
    let dense_rate = tflops_at(16.0, dense);
    println!("\nTensor Core instruction rates, f16 in, f32 accumulation ({blocks} blocks of {RATE_THREADS} threads, {RATE_CHAINS} independent MMAs per step, 5 x median of 20, alternating):");
    println!("\n| instruction | ms | TFLOP/s (dense-equivalent) | vs dense |");
    println!("|---|---|---|---|");
    println!("| mma.sync m16n8k16 (dense) | {dense:.3} | {dense_rate:.1} | 1.000x |");
    for (form, ms) in [("mma.sp", plain), ("mma.sp::ordered_metadata", ordered)] {
        let rate = tflops_at(32.0, ms);
        println!(
            "| {form} m16n8k32 | {ms:.3} | {rate:.1} | {:.3}x |",
            rate / dense_rate
        );
    }
    let (faster, by) = if ordered <= plain {
        ("mma.sp::ordered_metadata", plain / ordered)
    } else {
        ("mma.sp", ordered / plain)
    };
    println!("\nfaster sparse form on this GPU: {faster} ({by:.3}x the other)");
    Ok(())
}

/// Every variant `launch(rt, index)` of `names` whose name holds `only`,
/// median of 10 after 2 warm-ups each, printed; returns (ms, index), fastest first.
fn sweep(
    rt: &Runtime,
    size: usize,
    names: &[String],
    mut launch: impl FnMut(&Runtime, usize) -> Result<(), Error>,
) -> Result<Vec<(f32, usize)>, Error> {
    let mut results = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let ms = median_ms(rt, 2, 10, |rt| launch(rt, index))?;
        println!(
            "  {name:<72} {ms:>8.3} ms {:>7.2} TFLOP/s",
            tflops(size, ms)
        );
        results.push((ms, index));
    }
    results.sort_by(|x, y| x.0.total_cmp(&y.0));
    Ok(results)
}

/// The 2:4 sparse f16 GEMM at `size`^3 (A pruned and compressed on the GPU,
/// B column-major): every 16-byte-copy variant, then the best beside the best
/// dense f16 variant (`gemm_f16`, swept in the same run, on the decompressed
/// A), alternating. TFLOP/s count the dense-equivalent work 2 m n k.
fn bench_gemm_sparse(rt: &Runtime, size: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let mut values =
        |n: usize| -> Vec<f16> { inputs.f32s(n).into_iter().map(f16::from_f32).collect() };
    let dense_a = rt.upload(&values(size * size))?;
    let a = compress(rt, &dense_a, size, size)?;
    let a_decompressed = decompress(rt, &a)?;
    drop(dense_a);
    let b = rt.upload(&values(size * size))?;
    let mut c_sparse: DeviceBuffer<f16> = rt.alloc_zeroed(size * size)?;
    let mut c_dense: DeviceBuffer<f16> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;

    let tn = GemmProblem::new((s, s, s), 1.0, 0.0);
    let sparse_variants: Vec<_> = gemm_sparse_f16::Consts::variants_for(&tn)
        .into_iter()
        .filter(|c| c.ALIGNED)
        .collect();
    let sparse_names: Vec<String> = sparse_variants.iter().map(|c| format!("{c:?}")).collect();
    println!("\n2:4 sparse f16 GEMM {size}^3 (A compressed, B column-major), every 16-byte-copy variant (median of 10 after 2 warm-ups; dense-equivalent TFLOP/s):");
    let sparse_results = sweep(rt, size, &sparse_names, |rt, i| {
        gemm_sparse_with(
            rt,
            sparse_variants[i],
            &a,
            &b,
            &mut c_sparse,
            (s, s, s),
            1.0,
            0.0,
        )
    })?;
    let dense_variants: Vec<_> = gemm_tc::gemm_f16::Consts::variants_for(&tn)
        .into_iter()
        .filter(|c| c.ALIGNED)
        .collect();
    let dense_names: Vec<String> = dense_variants.iter().map(|c| format!("{c:?}")).collect();
    println!("\ndense f16 GEMM {size}^3 on the decompressed A, every 16-byte-copy variant:");
    let dense_results = sweep(rt, size, &dense_names, |rt, i| {
        gemm_with(
            rt,
            dense_variants[i],
            &a_decompressed,
            &b,
            &mut c_dense,
            (s, s, s),
            1.0,
            0.0,
        )
    })?;
    let best_sparse = sparse_variants[sparse_results.first().ok_or("no sparse variant")?.1];
    let best_dense = dense_variants[dense_results.first().ok_or("no dense variant")?.1];

    let (mut sparse_ms, mut dense_ms) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        sparse_ms.push(median_ms(rt, 3, 20, |rt| {
            gemm_sparse_with(rt, best_sparse, &a, &b, &mut c_sparse, (s, s, s), 1.0, 0.0)
        })?);
        dense_ms.push(median_ms(rt, 3, 20, |rt| {
            gemm_with(
                rt,
                best_dense,
                &a_decompressed,
                &b,
                &mut c_dense,
                (s, s, s),
                1.0,
                0.0,
            )
        })?);
    }
    sparse_ms.sort_by(f32::total_cmp);
    dense_ms.sort_by(f32::total_cmp);
    let (sparse, dense) = (sparse_ms[2], dense_ms[2]);
    let to_f64 = |v: Vec<f16>| -> Vec<f64> { v.into_iter().map(f16::to_f64).collect() };
    let dense_result = to_f64(rt.download(&c_dense)?);
    let sparse_result: Vec<f32> = rt
        .download(&c_sparse)?
        .into_iter()
        .map(f16::to_f32)
        .collect();
    let d = deviation(&sparse_result, &dense_result);
    println!("\n| kernel | ms | TFLOP/s (dense-equivalent) | vs best dense |");
    println!("|---|---|---|---|");
    println!(
        "| warpforge 2:4 sparse f16 {best_sparse:?} | {sparse:.3} | {:.1} | {:.3}x |",
        tflops(size, sparse),
        dense / sparse
    );
    println!(
        "| warpforge dense f16 {best_dense:?} | {dense:.3} | {:.1} | 1.000x |",
        tflops(size, dense)
    );
    println!("\nsparse vs dense of the decompressed A: {d}");
    // Both round f32 sums of the same products to f16; summation orders differ.
    if !d.passes(1e-3) {
        return Err(format!("the sparse f16 GEMM disagrees with the dense one: {d}").into());
    }
    println!("\n| STAGES | best sparse variant | ms | TFLOP/s |");
    println!("|---|---|---|---|");
    for stages in 2..=4 {
        if let Some((ms, index)) = sparse_results
            .iter()
            .find(|(_, i)| sparse_variants[*i].STAGES == stages)
        {
            println!(
                "| {stages} | {} | {ms:.3} | {:.1} |",
                sparse_names[*index],
                tflops(size, *ms)
            );
        }
    }
    Ok(())
}
