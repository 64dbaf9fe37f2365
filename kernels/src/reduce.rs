//! Reductions.

use warpforge::prelude::*;

/// Per-block sums: block `b` adds the elements of `x` it visits in a
/// grid-stride loop, reduces them in shared memory through a tree of barriers,
/// and writes `partials[b]`. Summing the partials with one block finishes a
/// full reduction (see [`reduce::sum`](crate::reduce::sum)).
#[kernel(block(THREADS), tune(THREADS = [128, 256, 512]))]
pub fn block_sum<const THREADS: u32>(x: &[f32], partials: &mut [f32]) {
    let mut sums: [f32; THREADS] = shared();
    let tid = thread_idx().x;
    let mut acc = 0.0;
    for i in (block_idx().x * THREADS + tid..x.len()).step_by(grid_dim().x * THREADS) {
        acc += x[i];
    }
    sums[tid] = acc;
    sync_threads();
    let mut half = THREADS / 2;
    while half > 0 {
        if tid < half {
            sums[tid] += sums[tid + half];
        }
        sync_threads();
        half /= 2;
    }
    if tid == 0 && block_idx().x < partials.len() {
        partials[block_idx().x] = sums[0];
    }
}

/// The number of blocks [`sum`] uses for its first pass over `n` elements:
/// enough to fill a large GPU, never more than there is work for.
pub fn sum_blocks(n: usize, threads: u32) -> u32 {
    let per_block = threads as usize * 4;
    n.div_ceil(per_block).clamp(1, 1024) as u32
}

/// Sums `x` on the device in two passes of [`block_sum`]; the result is in `out[0]`.
/// `scratch` needs `sum_blocks(x.len(), consts.THREADS)` elements.
pub fn sum(
    rt: &Runtime,
    consts: block_sum::Consts,
    x: &DeviceBuffer<f32>,
    scratch: &mut DeviceBuffer<f32>,
    out: &mut DeviceBuffer<f32>,
) -> Result<(), Error> {
    let blocks = sum_blocks(x.len(), consts.THREADS);
    block_sum::launch(rt, consts, Grid::blocks([blocks, 1, 1]), x, &mut *scratch)?;
    block_sum::launch(rt, consts, Grid::blocks([1, 1, 1]), &*scratch, out)
}
