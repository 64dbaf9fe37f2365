//! General matrix products.

use warpforge::prelude::*;
use warpforge::{BufferMut, BufferRef, MatrixLayout};

use crate::epilogue;
use crate::gemm_problem::{GemmProblem, GemmVariant, VariantLayouts, VariantTakes};

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
    requires(
        batches >= 1,
        a.len() >= (batches - 1) * stride_a + m * k,
        b.len() >= (batches - 1) * stride_b + k * n,
        c.len() >= (batches - 1) * stride_c + m * n,
        bias_mode == 0 || bias_mode == 1 && bias.len() >= n || bias_mode == 2 && bias.len() >= m,
    )
)]
pub fn gemm_f32<const BM: u32, const BN: u32, const BK: u32, const TM: u32, const TN: u32>(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    bias: &[f32],
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
            stage_load::<BM, BK>(&mut a_staged, a, a_at, row0, m, k0, k, a_col_major, tid);
            stage_load::<BN, BK>(&mut b_staged, b, b_at, col0, n, k0, k, b_row_major, tid);
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
            stage_store::<BM>(&mut a_tile[s], &a_staged, a_col_major, tid);
            stage_store::<BN>(&mut b_tile[s], &b_staged, b_row_major, tid);
        }
        sync_threads();
    }

    // The batch read again, so that it is not live through the main loop.
    let c_at = block_idx().z * stride_c;
    #[unroll]
    for phase in 0..7 {
        if epilogue::phase_runs::<phase>(beta, bias_mode, activation) {
            #[unroll]
            for i in 0..TM {
                let r = row0 + (i / 4) * (BM * 4 / TM) + ty * 4 + i % 4;
                #[unroll]
                for j in 0..TN {
                    let col = col0 + (j / 4) * (BN * 4 / TN) + tx * 4 + j % 4;
                    if !epilogue::phase_touches_memory::<phase>()
                        || r < m && col < n && block_idx().z < batches
                    {
                        let idx = c_at + r * n + col;
                        epilogue::apply_phase::<phase>(
                            &mut acc[i],
                            j,
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
    }
}

/// Loads this thread's share of one k-tile of an operand into `staged`: the
/// `EXTENT x BK` tile at `mn0` (along m for A, n for B) and `k0` of a matrix
/// with `mn` rows (or columns) and `k` along k, starting at `at` of `src`,
/// stored with the m (or n) dimension contiguous (`mn_contiguous`: a
/// column-major A, a row-major B) or k contiguous. Consecutive threads load
/// consecutive elements of memory; out-of-range elements are 0.
#[device]
pub fn stage_load<const EXTENT: u32, const BK: u32, const COUNT: u32>(
    staged: &mut [f32; COUNT],
    src: &[f32],
    at: u32,
    mn0: u32,
    mn: u32,
    k0: u32,
    k: u32,
    mn_contiguous: bool,
    tid: u32,
) {
    // One branch per operand and k-tile, outside the unrolled loads.
    if mn_contiguous {
        #[unroll]
        for l in 0..COUNT {
            let e = tid + l * (EXTENT * BK / COUNT);
            let x = mn0 + e % EXTENT;
            let kk = k0 + e / EXTENT;
            staged[l] = if x < mn && kk < k {
                src[at + kk * mn + x]
            } else {
                0.0
            };
        }
    } else {
        #[unroll]
        for l in 0..COUNT {
            let e = tid + l * (EXTENT * BK / COUNT);
            let x = mn0 + e / BK;
            let kk = k0 + e % BK;
            staged[l] = if x < mn && kk < k {
                src[at + x * k + kk]
            } else {
                0.0
            };
        }
    }
}

/// Stores what [`stage_load`] loaded into one stage of a k-major shared tile
/// (`tile[kk][x]`, rows padded to `W` elements).
#[device]
pub fn stage_store<const EXTENT: u32, const W: u32, const BK: u32, const COUNT: u32>(
    #[shared] tile: &mut [[f32; W]; BK],
    staged: &[f32; COUNT],
    mn_contiguous: bool,
    tid: u32,
) {
    if mn_contiguous {
        #[unroll]
        for l in 0..COUNT {
            let e = tid + l * (EXTENT * BK / COUNT);
            tile[e / EXTENT][e % EXTENT] = staged[l];
        }
    } else {
        #[unroll]
        for l in 0..COUNT {
            let e = tid + l * (EXTENT * BK / COUNT);
            tile[e % BK][e / BK] = staged[l];
        }
    }
}

impl GemmVariant for gemm_f32::Consts {
    type Elem = f32;
    type Out = f32;
    type Scale = f32;

    fn takes(&self) -> VariantTakes {
        VariantTakes {
            layouts: VariantLayouts::Any,
            chunks: None,
            gelu: true,
        }
    }

    fn tile(&self) -> (u32, u32) {
        (self.BM, self.BN)
    }

    fn bias_stand_in(a: BufferRef<'_, f32>) -> Option<BufferRef<'_, f32>> {
        Some(a)
    }
}

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
pub fn gemm_f32_with<'a>(
    rt: &Runtime,
    consts: gemm_f32::Consts,
    a: impl Into<BufferRef<'a, f32>>,
    b: impl Into<BufferRef<'a, f32>>,
    c: impl Into<BufferMut<'a, f32>>,
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
