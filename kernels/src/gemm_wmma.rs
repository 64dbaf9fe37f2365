//! The Volta Tensor Core GEMM: `wmma` m16n16k16, written in the DSL for sm_70
//! (newer GPUs compile its PTX to their native instructions).

use warpforge::prelude::*;

use crate::gemm::tile_grid;

/// The Volta form of the f16 GEMM (A row-major, B column-major, f16 out, f32
/// accumulation; k a multiple of 8): `wmma` m16n16k16, the Tensor Core
/// operations sm_70 has, which also compile to native instructions on newer
/// GPUs (the sm_80 `mma.sync` path is faster there).
///
/// Each warp computes a 32 x 32 tile of C as 2 x 2 `wmma` accumulators. Tiles
/// of A (`BM x BK`) and B (`BN x BK`) are copied with 16-byte copies of a
/// `pipeline` into a ring of `STAGES` shared stages with rows of `BK + 16`
/// elements: `wmma` needs 32-byte aligned fragment starts and strides, and the
/// padding spreads the rows of a fragment over the banks. k a multiple of 8
/// makes every 8-element chunk wholly inside its row or wholly past `k`, so a
/// copy reads 16 bytes or none (zero-filled), and always names bytes inside
/// the matrix.
///
/// Pipeline: step `t` waits until k-tile `t - (STAGES - 1)` has landed (at
/// most `STAGES - 2` groups in flight) and meets the block at a barrier,
/// which also frees the stage the step refills; then it issues the copies of
/// k-tile `t` and computes k-tile `t - (STAGES - 1)`. `STAGES = 1` waits for
/// its own copies and puts a second barrier after the math. On sm_70 the
/// copies are staged through registers: the global loads of k-tile `t` are
/// in flight during the math on the older tile, and their stores to shared
/// memory follow it; more than two stages add nothing there but shared
/// memory, which the tune space shows.
///
/// Which accumulator elements a lane holds is unspecified, so the epilogue
/// stores each accumulator to a per-warp 16 x 16 f32 scratch tile with
/// `wmma_store_row` and writes C from there.
#[kernel(
    arch(sm_70),
    block(BM / 32 * (BN / 32) * 32),
    tune(BM = [64, 128], BN = [64, 128], BK = [32, 64], STAGES = [1, 2, 3, 4, 5]),
    constrain(
        BM / 32 * (BN / 32) <= 8,
        STAGES * (BM + BN) * (BK + 16) * 2 + BM / 32 * (BN / 32) * 1024 <= 96 * 1024
    ),
    requires(a.len() >= m * k, b.len() >= n * k, c.len() >= m * n, k % 8 == 0)
)]
pub fn gemm_f16_wmma<const BM: u32, const BN: u32, const BK: u32, const STAGES: u32>(
    a: &[f16],
    b: &[f16],
    c: &mut [f16],
    m: u32,
    n: u32,
    k: u32,
    alpha: f32,
    beta: f32,
) {
    let mut a_tile: [[[f16; BK + 16]; BM]; STAGES] = shared();
    let mut b_tile: [[[f16; BK + 16]; BN]; STAGES] = shared();
    let mut scratch: [[[f32; 16]; 16]; BM / 32 * (BN / 32)] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;
    let wm0 = warp / (BN / 32) * 32;
    let wn0 = warp % (BN / 32) * 32;
    let row0 = block_idx().y * BM;
    let col0 = block_idx().x * BN;
    let mut acc = [[0.0f32; 8]; 4];
    let mut fa = [[0u32; 8]; 2];
    let mut fb = [[0u32; 8]; 2];

    // Copy slots: thread `tid` copies chunk `cp_ch` of rows `cp_row + l * ROWS`
    // (ROWS = threads / (BK / 8)) of each tile.
    let cp_ch = tid % (BK / 8);
    let cp_row = tid / (BK / 8);
    let k_tiles = (k + BK - 1) / BK;
    for t in 0..k_tiles + STAGES - 1 {
        if STAGES > 1 && t >= STAGES - 1 {
            pipe.wait(STAGES - 2);
            sync_threads();
        }
        if t < k_tiles {
            let st = t % STAGES;
            let gk = t * BK + cp_ch * 8;
            let k_bytes = if gk < k { 16u32 } else { 0 };
            let k_at = if gk < k { gk } else { 0 };
            #[unroll]
            for l in 0..BM * (BK / 8) / (BM / 32 * (BN / 32) * 32) {
                let r = cp_row + l * (BM / 32 * (BN / 32) * 32 / (BK / 8));
                let bytes = if row0 + r < m { k_bytes } else { 0 };
                let src = if row0 + r < m {
                    (row0 + r) * k + k_at
                } else {
                    0
                };
                pipe.copy(&mut a_tile[st][r][cp_ch * 8], &a[src], 16, bytes);
            }
            #[unroll]
            for l in 0..BN * (BK / 8) / (BM / 32 * (BN / 32) * 32) {
                let r = cp_row + l * (BM / 32 * (BN / 32) * 32 / (BK / 8));
                let bytes = if col0 + r < n { k_bytes } else { 0 };
                let src = if col0 + r < n {
                    (col0 + r) * k + k_at
                } else {
                    0
                };
                pipe.copy(&mut b_tile[st][r][cp_ch * 8], &b[src], 16, bytes);
            }
        }
        pipe.commit();
        if STAGES == 1 {
            pipe.wait(0);
            sync_threads();
        }
        if t >= STAGES - 1 {
            let s = (t - (STAGES - 1)) % STAGES;
            #[unroll]
            for kk in 0..BK / 16 {
                #[unroll]
                for i in 0..2u32 {
                    wmma_load_a_row(&mut fa[i], &a_tile[s][wm0 + i * 16][kk * 16], BK + 16);
                    wmma_load_b_col(&mut fb[i], &b_tile[s][wn0 + i * 16][kk * 16], BK + 16);
                }
                #[unroll]
                for i in 0..2u32 {
                    #[unroll]
                    for j in 0..2u32 {
                        wmma_mma_row_col(&mut acc[i * 2 + j], &fa[i], &fb[j]);
                    }
                }
            }
        }
        if STAGES == 1 {
            sync_threads();
        }
    }

    #[unroll]
    for i in 0..2u32 {
        #[unroll]
        for j in 0..2u32 {
            wmma_store_row(&mut scratch[warp][0][0], &acc[i * 2 + j], 16);
            sync_threads();
            #[unroll]
            for e in 0..8u32 {
                let at = lane * 8 + e;
                let r = row0 + wm0 + i * 16 + at / 16;
                let col = col0 + wn0 + j * 16 + at % 16;
                if r < m && col < n {
                    let idx = r * n + col;
                    let v = alpha * scratch[warp][at / 16][at % 16];
                    // beta == 0 must not read C: it may hold anything, NaN included.
                    if beta == 0.0 {
                        c[idx] = v as f16;
                    } else {
                        c[idx] = (v + beta * c[idx] as f32) as f16;
                    }
                }
            }
            sync_threads();
        }
    }
}

/// `C = alpha * A B + beta * C` with the `wmma` GEMM's given variant.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f16_wmma_with(
    rt: &Runtime,
    consts: gemm_f16_wmma::Consts,
    a: &DeviceBuffer<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
    (m, n, k): (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    gemm_f16_wmma::launch(
        rt,
        consts,
        tile_grid((consts.BM, consts.BN), m, n),
        a,
        b,
        c,
        m,
        n,
        k,
        alpha,
        beta,
    )
}
