//! The Volta Tensor Core GEMM: `wmma` m16n16k16, written in the DSL for sm_70
//! (newer GPUs compile its PTX to their native instructions).

use warpforge::prelude::*;

use crate::gemm_problem::{
    gemm_kernel_parts, gemm_variant, Chunks, GemmProblem, GemmVariant, VariantLayouts, VariantTakes,
};

/// The Volta GEMM's source, in a macro so that `gemm_kernel_parts!` can hand
/// it the parameters, requirements and epilogue it shares with the other
/// dense GEMMs (one instantiation, below).
macro_rules! wmma_gemm {
    (gelu: true, params: ($($params:tt)*), requires: ($($requires:tt)*),
     epilogue: [$([($($when:tt)*) reads: $reads:tt, writes: $writes:tt { $($phase:tt)* }])*],) => {
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
                $($requires)*
                a_col_major && b_row_major || k % 8 == 0,
                !a_col_major || m % 8 == 0,
                !b_row_major || n % 8 == 0,
                batches == 1 || stride_a % 8 == 0 && stride_b % 8 == 0
            )
        )]
        pub fn gemm_f16_wmma<const BM: u32, const BN: u32, const BK: u32, const STAGES: u32>(
            a: &[f16],
            b: &[f16],
            $($params)*
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
            let a_ch = if a_col_major { tid % (BM / 8) } else { tid % (BK / 8) };
            let a_row = if a_col_major { tid / (BM / 8) } else { tid / (BK / 8) };
            let a_rows = if a_col_major {
                BM / 32 * (BN / 32) * 32 / (BM / 8)
            } else {
                BM / 32 * (BN / 32) * 32 / (BK / 8)
            };
            let a_width = if a_col_major { BM + 16 } else { BK + 16 };
            let b_ch = if b_row_major { tid % (BN / 8) } else { tid % (BK / 8) };
            let b_row = if b_row_major { tid / (BN / 8) } else { tid / (BK / 8) };
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
                    #[unroll]
                    for l in 0..BM * (BK / 8) / (BM / 32 * (BN / 32) * 32) {
                        let r = a_row + l * a_rows;
                        // The chunk's row and k in A; it is wholly inside or wholly out.
                        let gm = if a_col_major { row0 + a_ch * 8 } else { row0 + r };
                        let gk = if a_col_major { k0 + r } else { k0 + a_ch * 8 };
                        let inside = gm < m && gk < k;
                        let bytes = if inside { 16u32 } else { 0 };
                        let src = if !inside {
                            0
                        } else if a_col_major {
                            a_at + gk * m + gm
                        } else {
                            a_at + gm * k + gk
                        };
                        pipe.copy(&mut a_tile[st][r * a_width + a_ch * 8], &a[src], 16, bytes);
                    }
                    #[unroll]
                    for l in 0..BN * (BK / 8) / (BM / 32 * (BN / 32) * 32) {
                        let r = b_row + l * b_rows;
                        let gn = if b_row_major { col0 + b_ch * 8 } else { col0 + r };
                        let gk = if b_row_major { k0 + r } else { k0 + b_ch * 8 };
                        let inside = gn < n && gk < k;
                        let bytes = if inside { 16u32 } else { 0 };
                        let src = if !inside {
                            0
                        } else if b_row_major {
                            b_at + gk * n + gn
                        } else {
                            b_at + gn * k + gk
                        };
                        pipe.copy(&mut b_tile[st][r * b_width + b_ch * 8], &b[src], 16, bytes);
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
                    $(
                    if $($when)* {
                        #[unroll]
                        for e in 0..8u32 {
                            let at = lane * 8 + e;
                            let r = row0 + wm0 + i * 16 + at / 16;
                            let col = col0 + wn0 + j * 16 + at % 16;
                            if !$reads && !$writes || r < m && col < n && block_idx().z < batches {
                                let idx = c_at + r * n + col;
                                let mut v = values[e];
                                $($phase)*
                                values[e] = v;
                            }
                        }
                    }
                    )*
                    sync_threads();
                }
            }
        }
    };
}

gemm_kernel_parts!(float f32 => f16, wmma_gemm! {});

gemm_variant!(
    gemm_f16_wmma: f16, f16, f32,
    takes: |_| VariantTakes {
        layouts: VariantLayouts::Any,
        chunks: Some(Chunks {
            elements: 8,
            otherwise: "every gemm_f16_wmma variant copies 16-byte chunks: pad the matrices, or use \
                        the sm_80 gemm_f16 with ALIGNED = false where the GPU has it",
        }),
        gelu: true,
    },
    bias_stand_in: a,
);

/// `C = alpha * A B + beta * C` (A row-major, B column-major, C row-major, one
/// batch, no bias or activation) with the `wmma` GEMM's given variant:
/// shorthand for [`GemmVariant::run`] on `GemmProblem::new((m, n, k), alpha, beta)`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f16_wmma_with(
    rt: &Runtime,
    consts: gemm_f16_wmma::Consts,
    a: &DeviceBuffer<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
    dims: (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    consts.run(rt, &GemmProblem::new(dims, alpha, beta), a, b, c, None)
}
