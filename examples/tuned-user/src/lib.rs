//! A user's crate with two tuned kernels of its own: [`scale_add`]
//! (`y = alpha * x + y`, in place) and [`row_sums`] (the sum of each row of
//! a matrix), each declared with `tune(..)` and `tune_key(..)`, so that the
//! macro gives it a tuned launch (`scale_add::tuned(&rt)?.launch(..)`), and
//! [`TUNE_JOBS`], the calls this workspace's `cargo xtask tune` makes to tune
//! them (beside the stock GEMMs' jobs, see `xtask/src/main.rs`).
//!
//! Both are built for sm_80 and WGSL: they tune and run on NVIDIA GPUs
//! through CUDA and on any Vulkan, Metal or DX12 adapter through wgpu.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::prelude::*;
use warpforge::tune::{Source, TuneJob};

/// `y[i] = alpha * x[i] + y[i]` for every `i`: each of the 256 threads of a
/// block handles `ITEMS` elements, `256` apart, so that a warp's loads stay
/// contiguous. Tuned on `y`'s length; untuned calls take 4 per thread.
#[kernel(
    arch(sm_80, wgsl),
    block(256),
    tune(ITEMS = [1, 2, 4, 8]),
    tune_key(y),
    tune_default(ITEMS = 4),
    requires(x.len() == y.len())
)]
pub fn scale_add<const ITEMS: u32>(alpha: f32, x: &[f32], y: &mut [f32]) {
    let first = block_idx().x * 256 * ITEMS + thread_idx().x;
    #[unroll]
    for item in 0..ITEMS {
        let i = first + item * 256;
        if i < y.len() {
            y[i] = alpha * x[i] + y[i];
        }
    }
}

/// The grid of [`scale_add`] for `n` elements at `ITEMS` per thread.
pub fn scale_add_grid(n: usize, items: u32) -> Grid {
    let per_block = 256 * items as usize;
    Grid::blocks([
        u32::try_from(n.div_ceil(per_block)).unwrap_or(u32::MAX),
        1,
        1,
    ])
}

/// `sums[r]` = the sum of row `r` of the row-major `rows x cols` matrix `x`:
/// a block of 256 threads sums `ROWS` rows, `256 / ROWS` threads per row,
/// each over a strided part of the row, then the row's threads add their
/// parts in shared memory. Few long rows want `ROWS = 1`, many short ones
/// more. Tuned on (rows, cols).
#[kernel(
    arch(sm_80, wgsl),
    block(256),
    tune(ROWS = [1, 2, 4, 8, 16]),
    tune_key(rows, cols),
    requires(x.len() == rows * cols, sums.len() == rows)
)]
pub fn row_sums<const ROWS: u32>(x: &[f32], sums: &mut [f32], rows: u32, cols: u32) {
    let per_row = 256 / ROWS;
    let t = thread_idx().x;
    let lane = t % per_row;
    let row = block_idx().x * ROWS + t / per_row;
    let mut part = 0.0f32;
    if row < rows {
        for c in (lane..cols).step_by(per_row) {
            part += x[row * cols + c];
        }
    }
    let mut parts: [f32; 256] = shared();
    parts[t] = part;
    sync_threads();
    let mut width = per_row / 2;
    while width > 0 {
        if lane < width {
            parts[t] += parts[t + width];
        }
        sync_threads();
        width /= 2;
    }
    if lane == 0 && row < rows {
        sums[row] = parts[t];
    }
}

/// The grid of [`row_sums`] for `rows` rows at `ROWS` per block.
pub fn row_sums_grid(rows: u32, rows_per_block: u32) -> Grid {
    Grid::blocks([rows.div_ceil(rows_per_block), 1, 1])
}

/// `y = alpha * x + y` through the tuned launch.
pub fn tuned_scale_add(
    rt: &Runtime,
    alpha: f32,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) -> Result<(), Error> {
    let n = y.len();
    scale_add::tuned(rt)?.launch(|c| scale_add_grid(n, c.ITEMS), alpha, x, y)?;
    Ok(())
}

/// `y = 2 x + y` on `n` random elements drawn from `seed`, through the
/// tuned launch, checked bit for bit against the CPU (one launch of any
/// variant computes each element once, on the caller's `y`, whatever tuning
/// ran before it): where the variant came from and its const values, or
/// what went wrong.
pub fn checked_scale_add(rt: &Runtime, n: usize, seed: u64) -> Result<(Source, Vec<i64>), String> {
    let (hx, hy) = (random(n, seed), random(n, seed + 1));
    let run = || -> Result<_, Error> {
        let x = rt.upload(&hx)?;
        let mut y = rt.upload(&hy)?;
        let tuned = scale_add::tuned(rt)?;
        let selection = tuned.launch(|c| scale_add_grid(n, c.ITEMS), 2.0, &x, &mut y)?;
        let consts = tuned
            .kernel()
            .dispatcher()
            .candidate(selection)
            .consts
            .clone();
        Ok((selection.source, consts, rt.download(&y)?))
    };
    let (source, consts, got) = run().map_err(|e| e.to_string())?;
    let want: Vec<f32> = hx.iter().zip(&hy).map(|(x, y)| 2.0 * x + y).collect();
    match got.iter().zip(&want).position(|(got, want)| got != want) {
        Some(i) => Err(format!(
            "element {i} of {n} is {}, and 2 x + y is {}",
            got[i], want[i]
        )),
        None => Ok((source, consts)),
    }
}

/// The row sums of `x` (`rows x cols`) into `sums` through the tuned launch.
pub fn tuned_row_sums(
    rt: &Runtime,
    x: &DeviceBuffer<f32>,
    sums: &mut DeviceBuffer<f32>,
    rows: u32,
    cols: u32,
) -> Result<(), Error> {
    row_sums::tuned(rt)?.launch(|c| row_sums_grid(rows, c.ROWS), x, sums, rows, cols)?;
    Ok(())
}

/// What `cargo xtask tune` runs to tune this crate's kernels: one tuned
/// call per shape on random inputs, its result checked against the CPU (so
/// a tuning that left the caller's data changed fails the job). `scale_add`
/// at 1 Mi and 16 Mi elements; `row_sums` for many short rows and for few
/// long ones.
pub static TUNE_JOBS: &[TuneJob] = &[
    TuneJob {
        name: "scale_add",
        shapes: &[&[1 << 20], &[1 << 24]],
        run: |rt, shape| {
            let n = shape[0] as usize;
            let (hx, hy) = (random(n, 1), random(n, 2));
            let x = rt.upload(&hx)?;
            let mut y = rt.upload(&hy)?;
            tuned_scale_add(rt, 1.5, &x, &mut y)?;
            let got = rt.download(&y)?;
            match (0..n).find(|&i| got[i] != 1.5 * hx[i] + hy[i]) {
                None => Ok(()),
                Some(i) => Err(Error::Tune(format!(
                    "scale_add computed y[{i}] = {} instead of {}",
                    got[i],
                    1.5 * hx[i] + hy[i]
                ))),
            }
        },
        skip: TuneJob::RUNS_ANYWHERE,
    },
    TuneJob {
        name: "row_sums",
        shapes: &[&[1 << 16, 64], &[256, 1 << 16]],
        run: |rt, shape| {
            let (Ok(rows), Ok(cols)) = (u32::try_from(shape[0]), u32::try_from(shape[1])) else {
                return Err(Error::Tune(format!(
                    "row_sums sizes {shape:?} must fit u32"
                )));
            };
            let hx = random(rows as usize * cols as usize, 3);
            let x = rt.upload(&hx)?;
            let mut sums = rt.alloc_zeroed::<f32>(rows as usize)?;
            tuned_row_sums(rt, &x, &mut sums, rows, cols)?;
            let got = rt.download(&sums)?;
            for (r, (&sum, row)) in got.iter().zip(hx.chunks_exact(cols as usize)).enumerate() {
                let want: f64 = row.iter().map(|&v| f64::from(v)).sum();
                // f32 sums of values in [-1, 1): well within 1e-5 of the row length.
                if (f64::from(sum) - want).abs() > 1e-5 * f64::from(cols) {
                    return Err(Error::Tune(format!(
                        "row_sums computed {sum} for row {r} instead of {want}"
                    )));
                }
            }
            Ok(())
        },
        skip: TuneJob::RUNS_ANYWHERE,
    },
];

/// `n` values uniform in [-1, 1) from `seed`.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}
