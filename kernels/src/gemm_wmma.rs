//! The Volta Tensor Core GEMM: `wmma` m16n16k16, written in the DSL for sm_70
//! (newer GPUs compile its PTX to their native instructions).

use warpforge::prelude::*;
use warpforge::BufferRef;

use crate::epilogue;
use crate::gemm_problem::{Chunks, GemmVariant, VariantLayouts, VariantTakes};

/// The Volta form of the f16 GEMM (f16 out, f32 accumulation) with the
/// dense family's epilogue and strided batches (see `gemm_tc`): for each
/// of `batches` batches (the grid's z), `C = act(alpha * A B + beta * C +
/// bias)`, A row-major or column-major (`a_col_major`), B column-major or
/// row-major (`b_row_major`), C row-major: `wmma` m16n16k16, the Tensor
/// Core operations sm_70 has, which also compile to native instructions
/// on newer GPUs (the sm_80 `mma.sync` path is faster there). The layouts
/// are run-time parameters, uniform branches between the `row` and `col`
/// forms of `wmma.load` and `wmma.mma`: this GEMM is not the fast path
/// past sm_70, so it takes every layout without more variants. Every
/// variant copies 16-byte chunks: the leading dimensions (k for
/// row-major A and column-major B, m for column-major A, n for row-major
/// B) and batch strides must be multiples of 8.
///
/// Each warp computes a 32 x 32 tile of C as 2 x 2 `wmma` accumulators.
/// Tiles of A and B are copied with 16-byte copies of a `pipeline` into a
/// ring of `STAGES` shared stages. A k-contiguous operand (row-major A,
/// column-major B) is stored as `BM` (or `BN`) rows of `BK + 16` elements;
/// an m- or n-contiguous one as `BK` rows of `BM + 16` (or `BN + 16`),
/// which fits the same space since `BK <= BM`: `wmma` needs 32-byte aligned
/// fragment starts and strides, and the padding spreads the rows of a
/// fragment over the banks. Leading dimensions that are multiples of 8
/// make every 8-element chunk wholly inside its row or wholly past the
/// matrix, so a copy reads 16 bytes or none (zero-filled), and always
/// names bytes inside the matrix.
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
        // An m- or n-contiguous tile fits a k-contiguous one's space.
        BK <= BM && BK <= BN,
        STAGES * (BM + BN) * (BK + 16) * 2 + BM / 32 * (BN / 32) * 1024 <= 96 * 1024
    ),
    requires(
        batches >= 1,
        a.len() >= (batches - 1) * stride_a + m * k,
        b.len() >= (batches - 1) * stride_b + k * n,
        c.len() >= (batches - 1) * stride_c + m * n,
        bias_mode == 0 || bias_mode == 1 && bias.len() >= n || bias_mode == 2 && bias.len() >= m,
        a_col_major && b_row_major || k % 8 == 0,
        !a_col_major || m % 8 == 0,
        !b_row_major || n % 8 == 0,
        batches == 1 || stride_a % 8 == 0 && stride_b % 8 == 0
    )
)]
pub fn gemm_f16_wmma<const BM: u32, const BN: u32, const BK: u32, const STAGES: u32>(
    a: &[f16],
    b: &[f16],
    c: &mut [f16],
    bias: &[f16],
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    stride_a: u32,
    stride_b: u32,
    stride_c: u32,
    alpha: f32,
    beta: f32,
    bias_mode: u32,
    activation: u32,
    a_col_major: bool,
    b_row_major: bool,
) {
    // Each stage: A as BM rows of BK + 16 or BK rows of BM + 16, B likewise
    // with BN, indexed `row * width + column`.
    let mut a_tile: [[f16; BM * (BK + 16)]; STAGES] = shared();
    let mut b_tile: [[f16; BN * (BK + 16)]; STAGES] = shared();
    let mut scratch: [[[f32; 16]; 16]; BM / 32 * (BN / 32)] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;
    let wm0 = warp / (BN / 32) * 32;
    let wn0 = warp % (BN / 32) * 32;
    let row0 = block_idx().y * BM;
    let col0 = block_idx().x * BN;
    // A block past the last batch (a grid deeper than `batches`) reads the
    // last batch and writes nothing (see `gemm_tc`).
    let batch = block_idx().z.min(batches - 1);
    let a_at = batch * stride_a;
    let b_at = batch * stride_b;
    let mut acc = [[0.0f32; 8]; 4];
    let mut fa = [[0u32; 8]; 2];
    let mut fb = [[0u32; 8]; 2];

    // Copy slots: thread `tid` copies chunk `tid % (BK / 8)` of rows
    // `tid / (BK / 8) + l * threads / (BK / 8)` of a k-contiguous tile, and
    // chunk `tid % (BM / 8)` (or BN) of k rows `tid / (BM / 8) + l * threads
    // / (BM / 8)` of an m- or n-contiguous one: the same number of chunks.
    let a_ch = if a_col_major {
        tid % (BM / 8)
    } else {
        tid % (BK / 8)
    };
    let a_row = if a_col_major {
        tid / (BM / 8)
    } else {
        tid / (BK / 8)
    };
    let a_rows = if a_col_major {
        BM / 32 * (BN / 32) * 32 / (BM / 8)
    } else {
        BM / 32 * (BN / 32) * 32 / (BK / 8)
    };
    let a_width = if a_col_major { BM + 16 } else { BK + 16 };
    let b_ch = if b_row_major {
        tid % (BN / 8)
    } else {
        tid % (BK / 8)
    };
    let b_row = if b_row_major {
        tid / (BN / 8)
    } else {
        tid / (BK / 8)
    };
    let b_rows = if b_row_major {
        BM / 32 * (BN / 32) * 32 / (BN / 8)
    } else {
        BM / 32 * (BN / 32) * 32 / (BK / 8)
    };
    let b_width = if b_row_major { BN + 16 } else { BK + 16 };
    let k_tiles = (k + BK - 1) / BK;
    for t in 0..k_tiles + STAGES - 1 {
        if STAGES > 1 && t >= STAGES - 1 {
            pipe.wait(STAGES - 2);
            sync_threads();
        }
        if t < k_tiles {
            let st = t % STAGES;
            let k0 = t * BK;
            // `pipe.commit()` below closes the group of these copies.
            const A_COPIES: u32 = BM * (BK / 8) / (BM / 32 * (BN / 32) * 32);
            const B_COPIES: u32 = BN * (BK / 8) / (BM / 32 * (BN / 32) * 32);
            copy_chunks::<A_COPIES>(
                &mut a_tile[st],
                a,
                a_at,
                row0,
                m,
                k0,
                k,
                a_col_major,
                a_ch,
                a_row,
                a_rows,
                a_width,
            );
            copy_chunks::<B_COPIES>(
                &mut b_tile[st],
                b,
                b_at,
                col0,
                n,
                k0,
                k,
                b_row_major,
                b_ch,
                b_row,
                b_rows,
                b_width,
            );
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
                    if a_col_major {
                        let at = kk * 16 * (BM + 16) + wm0 + i * 16;
                        wmma_load_a_col(&mut fa[i], &a_tile[s][at], BM + 16);
                    } else {
                        let at = (wm0 + i * 16) * (BK + 16) + kk * 16;
                        wmma_load_a_row(&mut fa[i], &a_tile[s][at], BK + 16);
                    }
                    if b_row_major {
                        let at = kk * 16 * (BN + 16) + wn0 + i * 16;
                        wmma_load_b_row(&mut fb[i], &b_tile[s][at], BN + 16);
                    } else {
                        let at = (wn0 + i * 16) * (BK + 16) + kk * 16;
                        wmma_load_b_col(&mut fb[i], &b_tile[s][at], BK + 16);
                    }
                }
                #[unroll]
                for i in 0..2u32 {
                    #[unroll]
                    for j in 0..2u32 {
                        if a_col_major && b_row_major {
                            wmma_mma_col_row(&mut acc[i * 2 + j], &fa[i], &fb[j]);
                        } else if a_col_major {
                            wmma_mma_col_col(&mut acc[i * 2 + j], &fa[i], &fb[j]);
                        } else if b_row_major {
                            wmma_mma_row_row(&mut acc[i * 2 + j], &fa[i], &fb[j]);
                        } else {
                            wmma_mma_row_col(&mut acc[i * 2 + j], &fa[i], &fb[j]);
                        }
                    }
                }
            }
        }
        if STAGES == 1 {
            sync_threads();
        }
    }

    // The batch read again, so that it is not live through the main loop.
    let c_at = block_idx().z * stride_c;
    #[unroll]
    for i in 0..2u32 {
        #[unroll]
        for j in 0..2u32 {
            wmma_store_row(&mut scratch[warp][0][0], &acc[i * 2 + j], 16);
            sync_threads();
            let mut values = [0.0f32; 8];
            #[unroll]
            for e in 0..8u32 {
                let at = lane * 8 + e;
                values[e] = scratch[warp][at / 16][at % 16];
            }
            #[unroll]
            for phase in 0..7 {
                if epilogue::phase_runs::<phase>(beta, bias_mode, activation) {
                    #[unroll]
                    for e in 0..8u32 {
                        let at = lane * 8 + e;
                        let r = row0 + wm0 + i * 16 + at / 16;
                        let col = col0 + wn0 + j * 16 + at % 16;
                        if !epilogue::phase_touches_memory::<phase>()
                            || r < m && col < n && block_idx().z < batches
                        {
                            let idx = c_at + r * n + col;
                            epilogue::apply_phase::<phase>(
                                &mut values,
                                e,
                                c,
                                bias,
                                idx,
                                r,
                                col,
                                alpha,
                                beta,
                            );
                        }
                    }
                }
            }
            sync_threads();
        }
    }
}

/// Issues this thread's 16-byte copies of one k-tile of an f16 operand into a
/// shared stage (the caller's pipeline commits them): `COUNT` chunks of 8
/// elements, the chunk `ch` of rows `row + l * rows` of the stage (rows of
/// `width` elements). The tile starts at `mn0` along m (A) or n (B), of
/// `mn`, and at `k0` along k, of `k`, in `src` from `at`, whose m (or n)
/// dimension is contiguous when `mn_contiguous`, else k. Leading dimensions
/// that are multiples of 8 make each chunk wholly inside its row or wholly
/// past the matrix: it reads 16 bytes or none (zero-filled), and always names
/// bytes inside the matrix.
#[device]
pub fn copy_chunks<const COUNT: u32, const SIZE: u32>(
    #[shared] stage: &mut [f16; SIZE],
    src: &[f16],
    at: u32,
    mn0: u32,
    mn: u32,
    k0: u32,
    k: u32,
    mn_contiguous: bool,
    ch: u32,
    row: u32,
    rows: u32,
    width: u32,
) {
    #[unroll]
    for l in 0..COUNT {
        let r = row + l * rows;
        // The chunk's row (or column) and k; it is wholly inside or wholly out.
        let g = if mn_contiguous { mn0 + ch * 8 } else { mn0 + r };
        let gk = if mn_contiguous { k0 + r } else { k0 + ch * 8 };
        let inside = g < mn && gk < k;
        let bytes = if inside { 16u32 } else { 0 };
        let from = if !inside {
            0
        } else if mn_contiguous {
            at + gk * mn + g
        } else {
            at + g * k + gk
        };
        cp_async(&mut stage[r * width + ch * 8], &src[from], 16, bytes);
    }
}

impl GemmVariant for gemm_f16_wmma::Consts {
    type Elem = f16;
    type Out = f16;
    type Scale = f32;

    fn takes(&self) -> VariantTakes {
        VariantTakes {
            layouts: VariantLayouts::Any,
            chunks: Some(Chunks {
                elements: 8,
                otherwise: "every gemm_f16_wmma variant copies 16-byte chunks: pad the matrices, \
                            or use the sm_80 gemm_f16 with ALIGNED = false where the GPU has it",
            }),
            gelu: true,
        }
    }

    fn tile(&self) -> (u32, u32) {
        (self.BM, self.BN)
    }

    fn bias_stand_in(a: BufferRef<'_, f16>) -> Option<BufferRef<'_, f16>> {
        Some(a)
    }
}
