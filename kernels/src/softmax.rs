//! Row softmax.

use warpforge::prelude::*;

/// `y[r][j] = exp(x[r][j] - max_r) / sum_j exp(x[r][j] - max_r)` for a row-major
/// `rows x cols` matrix, one block per row. The row max and sum are reduced
/// within each warp by shuffles and across warps through shared memory.
#[kernel(
    block(THREADS),
    tune(THREADS = [128, 256, 512]),
    requires(x.len() >= rows * cols, y.len() >= rows * cols)
)]
pub fn softmax_rows<const THREADS: u32>(x: &[f32], y: &mut [f32], rows: u32, cols: u32) {
    let mut warp_results: [f32; 32] = shared();
    let row = block_idx().x;
    if row >= rows {
        return;
    }
    let base = row * cols;
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;

    // The row max: per thread, per warp, then across warps.
    let mut m = f32::NEG_INFINITY;
    for j in (tid..cols).step_by(THREADS) {
        m = m.max(x[base + j]);
    }
    #[unroll]
    for s in 0..5u32 {
        m = m.max(shfl_xor(m, 16u32 >> s));
    }
    if lane == 0 {
        warp_results[warp] = m;
    }
    sync_threads();
    m = warp_results[0];
    #[unroll]
    for w in 1..THREADS / 32 {
        m = m.max(warp_results[w]);
    }
    // Every thread has read the maxima before they are overwritten by sums.
    sync_threads();

    let mut total = 0.0;
    for j in (tid..cols).step_by(THREADS) {
        total += (x[base + j] - m).exp();
    }
    #[unroll]
    for s in 0..5u32 {
        total += shfl_xor(total, 16u32 >> s);
    }
    if lane == 0 {
        warp_results[warp] = total;
    }
    sync_threads();
    total = 0.0;
    #[unroll]
    for w in 0..THREADS / 32 {
        total += warp_results[w];
    }
    let scale = 1.0 / total;
    for j in (tid..cols).step_by(THREADS) {
        y[base + j] = (x[base + j] - m).exp() * scale;
    }
}
