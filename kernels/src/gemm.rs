//! General matrix products.

use warpforge::prelude::*;
use warpforge::MatrixLayout;

use crate::gemm_problem::{
    gemm_kernel_parts, gemm_variant, GemmProblem, GemmVariant, VariantLayouts, VariantTakes,
};

/// The f32 SIMT GEMM's source, in a macro so that `gemm_kernel_parts!` can
/// hand it the parameters, requirements and epilogue it shares with the
/// other dense GEMMs (one instantiation, below).
macro_rules! simt_gemm {
    (gelu: true, params: ($($params:tt)*), requires: ($($requires:tt)*),
     epilogue: [$([($($when:tt)*) reads: $reads:tt, writes: $writes:tt { $($phase:tt)* }])*],) => {
        /// SIMT f32 GEMM with the dense family's epilogue and strided batches
        /// (see `gemm_tc`): for each of `batches` batches (the grid's z), `C =
        /// act(alpha * A B + beta * C + bias)` for `A` (m x k) row-major or
        /// column-major (`a_col_major`), `B` (k x n) row-major or column-major
        /// (`b_row_major`), `C` (m x n) row-major, any m, n, k (ragged tiles are
        /// predicated). The layouts are run-time parameters: they only change
        /// which thread loads which element into the shared tiles, a uniform
        /// branch per k-tile.
        ///
        /// The block computes a `BM x BN` tile of C with `(BM / TM) * (BN / TN)` threads,
        /// each holding a `TM x TN` register tile (TM and TN multiples of 4). As in
        /// CUTLASS's SIMT GEMMs, thread `(ty, tx)` owns groups of 4 consecutive rows
        /// and columns: rows `(i / 4) * (BM * 4 / TM) + ty * 4 + i % 4` and columns
        /// `(j / 4) * (BN * 4 / TN) + tx * 4 + j % 4`. Each group of 4 fragment
        /// elements is then 4 consecutive shared elements at a multiple of 4, which
        /// the backend reads with one 128-bit load (`ld.shared.v4.f32`): per k-step,
        /// `(TM + TN) / 4` shared loads feed `TM * TN` FMAs (8 x 8: 4 per 64, where
        /// one load per element took 16). A warp's B reads are 16-byte chunks side
        /// by side, so they are free of bank conflicts; its A reads are broadcasts.
        ///
        /// Both operands are stored k-major in shared memory (`a_tile[stage][kk][row]`,
        /// `b_tile[stage][kk][col]`) so that both are read along rows. Consecutive
        /// threads load consecutive elements of global memory (along k for a
        /// row-major A or a column-major B, along m or n otherwise). Rows are
        /// padded to `BM + 4` and `BN + 4` elements: the staging stores of a warp
        /// along k write `tile[s][e % BK][e / BK]` for 32 consecutive `e`, whose
        /// word address is `(e % BK) * (BM + 4) + e / BK`, or `4 * (e % BK) + e /
        /// BK` modulo the 32 banks (BM is a multiple of 32). For BK = 8 that is
        /// `4 * (lane % 8) + lane / 8` plus a constant: 32 distinct banks, where
        /// the unpadded `e / BK` alone hit 4 banks 8 ways (BK = 16: 2 ways instead
        /// of 16). `BM + 4` keeps every row, and so every group, 16-byte aligned.
        ///
        /// Pipeline: two shared-memory stages. In step `t` each thread loads tile `t`
        /// from global memory into registers, computes tile `t - 1` from shared memory
        /// while those loads are in flight, then stores tile `t` into the other stage;
        /// one barrier per step separates the writes of a stage from its next reads.
        #[kernel(
            block(BM / TM * (BN / TN)),
            tune(BM = [64, 128], BN = [64, 128], BK = [8, 16], TM = [4, 8], TN = [4, 8]),
            // 4x4 per thread: the slowest tiles (perf/LOG.md), and the only ones ptxas
            // spilled (16 bytes, under `.reqntid`).
            constrain(TM * TN >= 32),
            requires($($requires)*)
        )]
        pub fn gemm_f32<const BM: u32, const BN: u32, const BK: u32, const TM: u32, const TN: u32>(
            a: &[f32],
            b: &[f32],
            $($params)*
        ) {
            let mut a_tile: [[[f32; BM + 4]; BK]; 2] = shared();
            let mut b_tile: [[[f32; BN + 4]; BK]; 2] = shared();
            let tid = thread_idx().x;
            let tx = tid % (BN / TN);
            let ty = tid / (BN / TN);
            let row0 = block_idx().y * BM;
            let col0 = block_idx().x * BN;
            // A block past the last batch (a grid deeper than `batches`) reads the
            // last batch and writes nothing (see `gemm_tc`).
            let batch = block_idx().z.min(batches - 1);
            let a_at = batch * stride_a;
            let b_at = batch * stride_b;

            // Global -> register staging of one k-tile: BM * BK elements of A and
            // BK * BN of B, spread evenly over the BM / TM * (BN / TN) threads.
            let mut a_staged = [0.0f32; BK * TM * TN / BN];
            let mut b_staged = [0.0f32; BK * TM * TN / BM];
            let mut acc = [[0.0f32; TN]; TM];
            let mut a_frag = [0.0f32; TM];
            let mut b_frag = [0.0f32; TN];

            let k_tiles = (k + BK - 1) / BK;
            for t in 0..k_tiles + 1 {
                if t < k_tiles {
                    let k0 = t * BK;
                    // One branch per operand and k-tile, outside the unrolled loads.
                    if a_col_major {
                        #[unroll]
                        for l in 0..BK * TM * TN / BN {
                            let e = tid + l * (BM / TM * (BN / TN));
                            let r = row0 + e % BM;
                            let kk = k0 + e / BM;
                            a_staged[l] = if r < m && kk < k { a[a_at + kk * m + r] } else { 0.0 };
                        }
                    } else {
                        #[unroll]
                        for l in 0..BK * TM * TN / BN {
                            let e = tid + l * (BM / TM * (BN / TN));
                            let r = row0 + e / BK;
                            let kk = k0 + e % BK;
                            a_staged[l] = if r < m && kk < k { a[a_at + r * k + kk] } else { 0.0 };
                        }
                    }
                    if b_row_major {
                        #[unroll]
                        for l in 0..BK * TM * TN / BM {
                            let e = tid + l * (BM / TM * (BN / TN));
                            let kk = k0 + e / BN;
                            let col = col0 + e % BN;
                            b_staged[l] = if kk < k && col < n { b[b_at + kk * n + col] } else { 0.0 };
                        }
                    } else {
                        #[unroll]
                        for l in 0..BK * TM * TN / BM {
                            let e = tid + l * (BM / TM * (BN / TN));
                            let kk = k0 + e % BK;
                            let col = col0 + e / BK;
                            b_staged[l] = if kk < k && col < n { b[b_at + col * k + kk] } else { 0.0 };
                        }
                    }
                }
                if t > 0 {
                    let s = (t - 1) % 2;
                    #[unroll]
                    for kk in 0..BK {
                        #[unroll]
                        for i in 0..TM {
                            a_frag[i] = a_tile[s][kk][(i / 4) * (BM * 4 / TM) + ty * 4 + i % 4];
                        }
                        #[unroll]
                        for j in 0..TN {
                            b_frag[j] = b_tile[s][kk][(j / 4) * (BN * 4 / TN) + tx * 4 + j % 4];
                        }
                        #[unroll]
                        for i in 0..TM {
                            #[unroll]
                            for j in 0..TN {
                                acc[i][j] = a_frag[i].mul_add(b_frag[j], acc[i][j]);
                            }
                        }
                    }
                }
                if t < k_tiles {
                    let s = t % 2;
                    if a_col_major {
                        #[unroll]
                        for l in 0..BK * TM * TN / BN {
                            let e = tid + l * (BM / TM * (BN / TN));
                            a_tile[s][e / BM][e % BM] = a_staged[l];
                        }
                    } else {
                        #[unroll]
                        for l in 0..BK * TM * TN / BN {
                            let e = tid + l * (BM / TM * (BN / TN));
                            a_tile[s][e % BK][e / BK] = a_staged[l];
                        }
                    }
                    if b_row_major {
                        #[unroll]
                        for l in 0..BK * TM * TN / BM {
                            let e = tid + l * (BM / TM * (BN / TN));
                            b_tile[s][e / BN][e % BN] = b_staged[l];
                        }
                    } else {
                        #[unroll]
                        for l in 0..BK * TM * TN / BM {
                            let e = tid + l * (BM / TM * (BN / TN));
                            b_tile[s][e % BK][e / BK] = b_staged[l];
                        }
                    }
                }
                sync_threads();
            }

            // The batch read again, so that it is not live through the main loop.
            let c_at = block_idx().z * stride_c;
            $(
            if $($when)* {
                #[unroll]
                for i in 0..TM {
                    let r = row0 + (i / 4) * (BM * 4 / TM) + ty * 4 + i % 4;
                    #[unroll]
                    for j in 0..TN {
                        let col = col0 + (j / 4) * (BN * 4 / TN) + tx * 4 + j % 4;
                        if !$reads && !$writes || r < m && col < n && block_idx().z < batches {
                            let idx = c_at + r * n + col;
                            let mut v = acc[i][j];
                            $($phase)*
                            acc[i][j] = v;
                        }
                    }
                }
            }
            )*
        }
    };
}

gemm_kernel_parts!(float f32 => f32, simt_gemm! {});

gemm_variant!(
    gemm_f32: f32, f32, f32,
    takes: |_| VariantTakes {
        layouts: VariantLayouts::Any,
        chunks: None,
        gelu: true,
    },
    bias_stand_in: a,
);

/// The variant [`sgemm`] uses until the autotuner chooses per GPU: the fastest
/// at 4096^3 on an H200 (38.3 TFLOP/s, 0.75x cuBLAS; perf/LOG.md).
pub const DEFAULT_F32: gemm_f32::Consts = gemm_f32::Consts {
    BM: 128,
    BN: 128,
    BK: 16,
    TM: 8,
    TN: 8,
};

/// The grid that covers an m x n output with `bm x bn` block tiles: one
/// block per tile, x along n and y along m (every GEMM here).
pub fn tile_grid((bm, bn): (u32, u32), m: u32, n: u32) -> Grid {
    Grid::blocks([n.div_ceil(bn), m.div_ceil(bm), 1])
}

/// `C = alpha * A B + beta * C` (row-major A, B and C, one batch, no bias
/// or activation) with the given variant: shorthand for [`GemmVariant::run`].
#[allow(clippy::too_many_arguments)]
pub fn gemm_f32_with(
    rt: &Runtime,
    consts: gemm_f32::Consts,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    dims: (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    let problem = GemmProblem {
        b_layout: MatrixLayout::RowMajor,
        ..GemmProblem::new(dims, alpha, beta)
    };
    consts.run(rt, &problem, a, b, c, None)
}

/// `C = alpha * A B + beta * C` (row-major f32) with [`DEFAULT_F32`].
pub fn sgemm(
    rt: &Runtime,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    dims: (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    gemm_f32_with(rt, DEFAULT_F32, a, b, c, dims, alpha, beta)
}
