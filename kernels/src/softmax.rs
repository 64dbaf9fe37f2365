//! Row softmax.

use warpforge::prelude::*;
use warpforge::{DeviceBackend, DeviceInfo};

/// `y[r][j] = exp(x[r][j] - max_r) / sum_j exp(x[r][j] - max_r)` for a row-major
/// `rows x cols` matrix, one block per row. With `WARP_SHUFFLE` the row max and
/// sum are reduced within each warp by shuffles and across warps through shared
/// memory; without, through shared memory alone by a tree of barriers, which
/// runs where warp operations do not (wgpu adapters without 32-lane subgroups).
/// [`softmax::softmax`](crate::softmax::softmax) picks the form the device runs.
#[kernel(
    block(THREADS),
    tune(THREADS = [128, 256, 512], WARP_SHUFFLE = [true, false]),
    requires(x.len() >= rows * cols, y.len() >= rows * cols)
)]
pub fn softmax_rows<const THREADS: u32, const WARP_SHUFFLE: bool>(
    x: &[f32],
    y: &mut [f32],
    rows: u32,
    cols: u32,
) {
    // One partial per warp with shuffles (THREADS / 32), one per thread without.
    let mut partials: [f32; THREADS >> (5 * WARP_SHUFFLE as u32)] = shared();
    let row = block_idx().x;
    if row >= rows {
        return;
    }
    let base = row * cols;
    let tid = thread_idx().x;

    // The row max: per thread, then across the block.
    let mut m = f32::NEG_INFINITY;
    for j in (tid..cols).step_by(THREADS) {
        m = m.max(x[base + j]);
    }
    if WARP_SHUFFLE {
        #[unroll]
        for s in 0..5u32 {
            m = m.max(shfl_xor(m, 16u32 >> s));
        }
        if lane_id() == 0 {
            partials[tid / 32] = m;
        }
        sync_threads();
        m = partials[0];
        #[unroll]
        for w in 1..THREADS / 32 {
            m = m.max(partials[w]);
        }
    } else {
        partials[tid] = m;
        sync_threads();
        let mut half = THREADS / 2;
        while half > 0 {
            if tid < half {
                partials[tid] = partials[tid].max(partials[tid + half]);
            }
            sync_threads();
            half /= 2;
        }
        m = partials[0];
    }
    // Every thread has read the max before the partials are overwritten by sums.
    sync_threads();

    let mut total = 0.0;
    for j in (tid..cols).step_by(THREADS) {
        total += (x[base + j] - m).exp();
    }
    if WARP_SHUFFLE {
        #[unroll]
        for s in 0..5u32 {
            total += shfl_xor(total, 16u32 >> s);
        }
        if lane_id() == 0 {
            partials[tid / 32] = total;
        }
        sync_threads();
        total = 0.0;
        #[unroll]
        for w in 0..THREADS / 32 {
            total += partials[w];
        }
    } else {
        partials[tid] = total;
        sync_threads();
        let mut half = THREADS / 2;
        while half > 0 {
            if tid < half {
                partials[tid] += partials[tid + half];
            }
            sync_threads();
            half /= 2;
        }
        total = partials[0];
    }
    let scale = 1.0 / total;
    for j in (tid..cols).step_by(THREADS) {
        y[base + j] = (x[base + j] - m).exp() * scale;
    }
}

/// Whether `device` runs the `WARP_SHUFFLE` variants: CUDA warps of 32 lanes
/// (the interpreter's too), or a wgpu adapter whose subgroups all have 32
/// invocations (the WGSL launch refuses warp operations on any other).
pub fn runs_warp_shuffles(device: &DeviceInfo) -> bool {
    match &device.backend {
        DeviceBackend::Cuda | DeviceBackend::Interpreter => device.warp_size == 32,
        DeviceBackend::Wgpu(wgpu) => wgpu.subgroup_sizes == Some((32, 32)),
    }
}

/// The variant [`softmax`] takes for rows of `cols` elements on `device`:
/// warp shuffles where they run, and the smallest block that gives each thread
/// at most 8 elements of a row (the largest block for wider rows), so narrow
/// rows leave few threads idle. Not tuned yet: the autotuner will choose.
pub fn softmax_variant(device: &DeviceInfo, cols: u32) -> softmax_rows::Consts {
    let warp_shuffle = runs_warp_shuffles(device);
    let mut candidates: Vec<softmax_rows::Consts> = softmax_rows::variants()
        .into_iter()
        .filter(|c| c.WARP_SHUFFLE == warp_shuffle)
        .collect();
    candidates.sort_by_key(|c| c.THREADS);
    let widest = *candidates
        .last()
        .expect("softmax_rows has variants of both forms");
    candidates
        .into_iter()
        .find(|c| c.THREADS.saturating_mul(8) >= cols)
        .unwrap_or(widest)
}

/// The row softmax of the row-major `rows x cols` matrix `x` into `y` with the
/// given variant: one block per row.
pub fn softmax_with(
    rt: &Runtime,
    consts: softmax_rows::Consts,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    rows: u32,
    cols: u32,
) -> Result<(), Error> {
    softmax_rows::launch(rt, consts, Grid::blocks([rows, 1, 1]), x, y, rows, cols)
}

/// The row softmax of the row-major `rows x cols` matrix `x` into `y`, with
/// the variant [`softmax_variant`] picks for the runtime's device.
pub fn softmax(
    rt: &Runtime,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    rows: u32,
    cols: u32,
) -> Result<(), Error> {
    softmax_with(rt, softmax_variant(rt.device(), cols), x, y, rows, cols)
}
