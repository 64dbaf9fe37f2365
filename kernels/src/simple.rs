//! Element-wise and atomic kernels.

use warpforge::prelude::*;

/// `y = a * x + y`.
#[kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() && i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// Counts `values` into `BINS` bins (`value % BINS`): per-block counts in shared
/// memory with shared atomics, then one global atomic per bin and block.
/// `counts` must start zeroed.
#[kernel(block(256), tune(BINS = [64, 256]), requires(counts.len() >= BINS))]
pub fn histogram<const BINS: u32>(values: &[u32], counts: &mut [u32]) {
    let mut local: [u32; BINS] = shared();
    let tid = thread_idx().x;
    for b in (tid..BINS).step_by(256) {
        local[b] = 0;
    }
    sync_threads();
    let stride = grid_dim().x * 256;
    for i in (block_idx().x * 256 + tid..values.len()).step_by(stride) {
        atomic_add(&mut local[values[i] % BINS], 1);
    }
    sync_threads();
    for b in (tid..BINS).step_by(256) {
        let count = local[b];
        if count > 0 {
            atomic_add(&mut counts[b], count);
        }
    }
}
