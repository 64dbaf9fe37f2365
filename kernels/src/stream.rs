//! Streaming through shared memory: the pipelined `cp_async` pattern on its
//! own, measured against a device-to-device copy.

use warpforge::prelude::*;

/// `y[i] = alpha * x[i]`, streamed through a ring of `STAGES` shared tiles of
/// `THREADS * 4` f32. Block `b` takes tiles `b`, `b + grid`, ...; each thread
/// copies 16 bytes of a tile through a `pipeline` of `STAGES` stages and
/// later scales elements other threads copied (thread `tid` reads elements
/// `tid + e * THREADS`), so every tile crosses a barrier between its copy
/// and its use. The buffer's last partial chunk is loaded element by element.
///
/// Step `u` waits until tile `u - (STAGES - 1)` has landed (at most
/// `STAGES - 2` groups in flight) and meets the block at a barrier, which
/// also frees the stage that step refills; then it issues the copy of tile
/// `u` and commits it as one group, then writes out tile `u - (STAGES - 1)`.
/// With one stage the copy lands before its use and a second barrier keeps
/// the next copy from overwriting a tile still being read. On sm_70 the
/// copies are staged through registers (the load of tile `u` before the
/// write-out of the older tile, its store to shared memory after it).
#[kernel(
    block(THREADS),
    arch(sm_70, sm_80, sm_90),
    tune(THREADS = [128, 256], STAGES = [1, 2, 3, 4, 5]),
    requires(y.len() == x.len())
)]
pub fn stream_scale<const THREADS: u32, const STAGES: u32>(x: &[f32], y: &mut [f32], alpha: f32) {
    let mut ring: [[f32; THREADS * 4]; STAGES] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    let n = x.len();
    let tiles = (n + THREADS * 4 - 1) / (THREADS * 4);
    let first = block_idx().x;
    let stride = grid_dim().x;
    let mine = if first < tiles {
        (tiles - first + stride - 1) / stride
    } else {
        0
    };
    for u in 0..mine + STAGES - 1 {
        if STAGES > 1 && u >= STAGES - 1 {
            pipe.wait(STAGES - 2);
            sync_threads();
        }
        if u < mine {
            let at = (first + u * stride) * (THREADS * 4) + tid * 4;
            if at + 4 <= n {
                pipe.copy(&mut ring[u % STAGES][tid * 4], &x[at], 16, 16);
            } else {
                // The last, partial chunk: a 16-byte copy would name bytes
                // past the buffer (compute-sanitizer reports that even with
                // fewer source bytes), so it is loaded element by element.
                #[unroll]
                for e in 0..4u32 {
                    ring[u % STAGES][tid * 4 + e] = if at + e < n { x[at + e] } else { 0.0 };
                }
            }
        }
        pipe.commit();
        if STAGES == 1 {
            pipe.wait(0);
            sync_threads();
        }
        if u >= STAGES - 1 {
            let v = u - (STAGES - 1);
            let base = (first + v * stride) * (THREADS * 4);
            #[unroll]
            for e in 0..4u32 {
                let j = tid + e * THREADS;
                if base + j < n {
                    y[base + j] = alpha * ring[v % STAGES][j];
                }
            }
        }
        if STAGES == 1 {
            sync_threads();
        }
    }
}

/// Eight blocks per SM (every block loops over its tiles), fewer for short inputs.
pub fn stream_scale_grid(rt: &Runtime, consts: stream_scale::Consts, n: usize) -> Grid {
    let tiles = n.div_ceil(consts.THREADS as usize * 4).max(1);
    let blocks = tiles.min(rt.device().sm_count as usize * 8) as u32;
    Grid::blocks([blocks, 1, 1])
}

/// `y = alpha * x` with the given variant.
pub fn stream_scale_with(
    rt: &Runtime,
    consts: stream_scale::Consts,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    alpha: f32,
) -> Result<(), Error> {
    let grid = stream_scale_grid(rt, consts, x.len());
    stream_scale::launch(rt, consts, grid, x, y, alpha)
}
