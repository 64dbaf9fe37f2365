//! Tensor Core GEMMs (sm_80 `mma.sync` through `ldmatrix`, multistage
//! `cp.async` pipelines, XOR-swizzled shared tiles), written in the DSL: one
//! kernel generic over its element, output and scale types, built as
//! `gemm_f16`, `gemm_bf16`, `gemm_s8` and `gemm_tf32`, over the device
//! functions of [`crate::tile`] and [`crate::epilogue`].

use warpforge::prelude::*;
use warpforge::{BufferRef, MatrixLayout};

use crate::gemm_problem::{Chunks, GemmVariant, VariantLayouts, VariantTakes};
use crate::{epilogue, tile};

/// A Tensor Core GEMM with an epilogue, for each of `batches` strided
/// batches (the grid's z): `C = act(alpha * A B + beta * C + bias)`, A (m x
/// k) and B (k x n) of the element type `T` in the variant's layouts
/// (row-major A and column-major B, the "TN" form, unless `A_COL_MAJOR` or
/// `B_ROW_MAJOR` say otherwise: 16-bit types only, `ldmatrix.trans` moves
/// 16-bit elements), C (m x n) row-major of `O`, accumulation and `alpha`,
/// `beta` in `S`; any m, n and k. Built as `gemm_f16`, `gemm_bf16`, `gemm_s8`
/// (exact integer arithmetic, wrapping past i32 as cuBLAS's
/// `CUBLAS_COMPUTE_32I`) and `gemm_tf32` (f32 operands rounded to tf32 as
/// they are loaded, to nearest, ties away from zero, as cuBLAS rounds).
/// `bias_mode` and `activation` select the epilogue at run time
/// ([`crate::epilogue`]); batch `z` reads A, B and C from `z * stride_a`,
/// `z * stride_b` and `z * stride_c`. Launch it through `GemmVariant::run`,
/// which checks a `GemmProblem` against the variant.
///
/// An MMA k step takes 32 bytes of k from each operand whatever the type
/// (`m16n8k16` for f16/bf16, `m16n8k32` for s8, `m16n8k8` for tf32:
/// `mma_m16n8::<T>`), so the tiling, swizzle, copies and fragment loads are
/// the same in bytes: `CH = 16 / T::BYTES` elements make a 16-byte chunk,
/// and k-tiles are 64 or 128 bytes wide (`BK * T::BYTES`).
///
/// `ALIGNED` variants copy global tiles with 16-byte `cp.async` and take
/// leading dimensions (k for row-major A and column-major B, m for
/// column-major A, n for row-major B) and batch strides that are multiples
/// of `CH`, so that every copied chunk starts 16-byte aligned; the others
/// load element by element (synchronously, 2 stages) and take any shape.
///
/// The block computes a `BM x BN` tile of C with `(BM / WARP) * (BN / WARP)`
/// warps, each a `WARP x WARP` warp tile of 16 x 8 products: per k step a
/// warp loads `WARP / 16` A fragments and `WARP / 8` B fragments with
/// `ldmatrix.x4` and issues `(WARP / 16) * (WARP / 8)` MMAs.
///
/// Shared tiles hold `STAGES` k-tiles of A and B. A k-contiguous operand
/// (row-major A, column-major B) is stored as rows of `BK` k values (A: `BM
/// x BK`, B: `BN x BK`), an m- or n-contiguous one (column-major A,
/// row-major B) as `BK` rows of `BM` (or `BN`) values, 128 to 512 bytes;
/// both swizzled by `tile::swizzle`. `ldmatrix.x4.trans` gives the
/// fragments of the second form: for A, lane `l` points at k row `l % 8 + 8
/// (l / 16)`, m chunk `l / 8 % 2` of the 16 x 16 block (matrices: m 0-7 and
/// 8-15 at k 0-7, then at k 8-15: the registers of the `m16n8k16` A
/// fragment); for B, at k row `l % 16`, n chunk `l / 16` (`{b0, b1}` of two
/// 8-column tiles; docs/ptx.md, "ldmatrix").
///
/// The main loop is [`crate::tile`]'s pipeline (CUTLASS's multistage
/// order); fragments are double-buffered in registers. A step inside the
/// matrix (the common case, uniform over a block) copies with plain 16-byte
/// `cp.async`; at the edges, copies past `m`, `n` or `k` read nothing and
/// zero-fill, so ragged tiles need no branches around the math. One stage
/// (copy, wait, compute) is not in the tune space: it was the slowest depth
/// for every type (perf/LOG.md).
#[kernel(
    arch(sm_80, sm_90),
    block(BM / WARP * (BN / WARP) * 32),
    instances(
        gemm_f16 = <f16, f16, f32>,
        gemm_bf16 = <bf16, bf16, f32>,
        gemm_s8 = <i8, i32, i32>,
        gemm_tf32 = <f32, f32, f32>
    ),
    tune(
        BM = [64, 128, 256],
        BN = [64, 128, 256],
        BK = [16, 32, 64, 128],
        WARP = [32, 64],
        STAGES = [2, 3, 4, 5],
        ALIGNED = [true, false],
        A_COL_MAJOR = [false, true],
        B_ROW_MAJOR = [false, true]
    ),
    constrain(
        // k-tiles of 64 and 128 bytes.
        BK * T::BYTES == 64 || BK * T::BYTES == 128,
        BM / WARP * (BN / WARP) >= 4,
        BM / WARP * (BN / WARP) <= 8,
        BM <= 2 * BN,
        BN <= 2 * BM,
        ALIGNED || STAGES == 2 && BK * T::BYTES == 64,
        // Element-wise copies of more than 64 elements per thread per tile
        // (i8 with 64x64 warp tiles) spill.
        ALIGNED || (BM + BN) * BK <= 64 * (BM / WARP * (BN / WARP) * 32),
        STAGES * (BM + BN) * BK * T::BYTES <= 163 * 1024,
        // tf32: at BK = 32 the rounding's temporaries make ptxas 12.9 spill
        // every other tile, and 64 x 64 with more than two stages on sm_90
        // (generated/manifest.json).
        T::BYTES != 4
            || BK == 16
            || BM * BN == 64 * 64 && STAGES == 2
            || BM * BN == 128 * 256 && STAGES > 1,
        // The other layouts for 16-bit types only, in a few tiles (the
        // fastest TN ones and the element-wise fallbacks), so that the build
        // stays bounded. (With ptxas 12.9, their element-wise copies beside
        // 64 x 64 warp tiles spill, and so does 64 x 64 x 32 with row-major A
        // and B on sm_90.)
        !A_COL_MAJOR && !B_ROW_MAJOR
            || T::BYTES == 2
                && (ALIGNED && STAGES == 3 && BK == 32 && WARP == 64
                    || ALIGNED && STAGES == 3 && BM * BN * BK == 64 * 64 * 32 && (A_COL_MAJOR || !B_ROW_MAJOR)
                    || ALIGNED && STAGES == 3 && BM * BN * BK == 128 * 128 * 64
                    || !ALIGNED && BM == BN && WARP == 32),
        // An m- or n-contiguous tile's copies cover rows in steps of a
        // multiple of 8, so each thread's swizzle is one for all its rows.
        !A_COL_MAJOR || BM / WARP * (BN / WARP) * 32 / (BM / 8) % 8 == 0,
        !B_ROW_MAJOR || BM / WARP * (BN / WARP) * 32 / (BN / 8) % 8 == 0
    ),
    // Eight 32 x 32 warp tiles over 72 KiB of stages: sm_90's shared memory
    // holds 3 such blocks, but ptxas gives them 88 registers, which hold an
    // SM to 2; at 80 (no spills) 3 fit. s8 128 x 64 x 128 and 64 x 128 x 128
    // in 3 stages, 80 registers before the device functions, took 1.085x and
    // 1.049x the time at 88 (H100, perf/LOG.md session 30). sm_80's shared
    // memory holds 2 blocks either way, and ptxas keeps 80 there.
    // Four 32 x 32 warp tiles over 24 KiB (16-bit and i8): ptxas gives them
    // 80 registers, 6 blocks of 128 threads per SM, and 72 with no spills
    // when asked for 7 (tf32's spill 8 bytes on sm_80), as the column-major
    // A tile had before the device functions.
    min_blocks_per_sm(
        1 + 2 * (WARP == 32
            && BM / WARP * (BN / WARP) == 8
            && STAGES * (BM + BN) * BK * T::BYTES == 72 * 1024) as u32
            + 6 * (WARP == 32
                && BM / WARP * (BN / WARP) == 4
                && T::BYTES <= 2
                && STAGES * (BM + BN) * BK * T::BYTES == 24 * 1024) as u32
    ),
    requires(
        batches >= 1,
        a.len() >= (batches - 1) * stride_a + m * k,
        b.len() >= (batches - 1) * stride_b + k * n,
        c.len() >= (batches - 1) * stride_c + m * n,
        bias_mode == 0 || bias_mode == 1 && bias.len() >= n || bias_mode == 2 && bias.len() >= m,
        a_col_major == A_COL_MAJOR,
        b_row_major == B_ROW_MAJOR,
        !ALIGNED || A_COL_MAJOR && B_ROW_MAJOR || k % (16 / T::BYTES) == 0,
        !ALIGNED || !A_COL_MAJOR || m % (16 / T::BYTES) == 0,
        !ALIGNED || !B_ROW_MAJOR || n % (16 / T::BYTES) == 0,
        !ALIGNED || batches == 1 || stride_a % (16 / T::BYTES) == 0 && stride_b % (16 / T::BYTES) == 0
    )
)]
pub fn gemm_tc<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WARP: u32,
    const STAGES: u32,
    const ALIGNED: bool,
    const A_COL_MAJOR: bool,
    const B_ROW_MAJOR: bool,
    T: Number,
    O: Number,
    S: Number,
>(
    a: &[T],
    b: &[T],
    c: &mut [O],
    bias: &[O],
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    stride_a: u32,
    stride_b: u32,
    stride_c: u32,
    alpha: S,
    beta: S,
    bias_mode: u32,
    activation: u32,
    a_col_major: bool,
    b_row_major: bool,
) {
    // Elements per 16-byte chunk; the block's threads; each thread's 16-byte
    // copies per k-tile, of A, of B and in all; the rows of A's and of B's
    // tile that one pass of the threads copies (k rows of an m- or
    // n-contiguous one); the MMA k steps (32 bytes of k) per k-tile; and the
    // slices a tile's copies are issued in ([`tile`]).
    const CH: u32 = 16 / T::BYTES;
    const THREADS: u32 = BM / WARP * (BN / WARP) * 32;
    const A_COPIES: u32 = BM * (BK / CH) / THREADS;
    const B_COPIES: u32 = BN * (BK / CH) / THREADS;
    const COPIES: u32 = A_COPIES + B_COPIES;
    const A_ROWS: u32 =
        THREADS / (BK / CH) * (1 - A_COL_MAJOR as u32) + THREADS / (BM / CH) * A_COL_MAJOR as u32;
    const B_ROWS: u32 =
        THREADS / (BK / CH) * (1 - B_ROW_MAJOR as u32) + THREADS / (BN / CH) * B_ROW_MAJOR as u32;
    const STEPS: u32 = BK / (2 * CH);
    const COPY_SLICES: u32 = STEPS - 1 - (STEPS - 2) * (STAGES == 2) as u32;
    // A: BM rows of BK, or BK rows of BM when column-major; B: BN rows of
    // BK, or BK rows of BN when row-major.
    let mut a_tile: [[[T; BK * (1 - A_COL_MAJOR as u32) + BM * A_COL_MAJOR as u32];
        BM * (1 - A_COL_MAJOR as u32) + BK * A_COL_MAJOR as u32]; STAGES] = shared();
    let mut b_tile: [[[T; BK * (1 - B_ROW_MAJOR as u32) + BN * B_ROW_MAJOR as u32];
        BN * (1 - B_ROW_MAJOR as u32) + BK * B_ROW_MAJOR as u32]; STAGES] = shared();
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;
    let wm0 = warp / (BN / WARP) * WARP;
    let wn0 = warp % (BN / WARP) * WARP;
    // The block's tile: its first row and column of C.
    let (row0, col0) = tile::grouped_tile_order::<BM, BN>();
    // A block past the last batch (a grid deeper than `batches`) reads the
    // last batch and writes nothing: a branch to the end instead makes
    // ptxas spill in the 255-register variants.
    let batch = block_idx().z.min(batches - 1);
    let a_at = batch * stride_a;
    let b_at = batch * stride_b;

    let mut acc = [[[S::ZERO; 4]; WARP / 8]; WARP / 16];
    let mut a_frag = [[[0u32; 4]; WARP / 16]; 2];
    let mut b_pair = [[0u32; 4]; WARP / 16];
    let mut b_frag = [[[0u32; 2]; WARP / 8]; 2];

    // How the thread copies A's and B's k-tiles ([`tile::operand_copy`]):
    // a base and a stride per operand, not a register per copied row: the
    // copies are issued among the MMAs, whose fragments and accumulators
    // hold nearly all of the registers.
    let a_copy = tile::operand_copy::<BM, BK, THREADS, A_COL_MAJOR, T>(tid, row0, m, k, a_at);
    let b_copy = tile::operand_copy::<BN, BK, THREADS, B_ROW_MAJOR, T>(tid, col0, n, k, b_at);

    // ldmatrix rows ([`tile::load_fragments`]): A lane `lane` reads row
    // `lane % 16` of a 16-row block, B lane row `lane % 8 + 8 (lane / 16)`
    // (chunk `2 kk + (lane / 8) % 2`).
    let a_ld_row = wm0 + lane % 16;
    let a_ld_x = lane / 16 ^ tile::swizzle::<{ BK * T::BYTES }>(a_ld_row);
    let b_ld_row = wn0 + lane % 8 + lane / 16 * 8;
    let b_ld_x = lane / 8 % 2 ^ tile::swizzle::<{ BK * T::BYTES }>(b_ld_row);
    // Transposed loads (m- or n-contiguous tiles): the k row within a
    // 16-wide step and the chunk of the warp's first fragment.
    let a_ld_k = if A_COL_MAJOR {
        lane % 8 + lane / 16 * 8
    } else {
        0
    };
    let a_ld_chunk = if A_COL_MAJOR {
        wm0 / CH + lane / 8 % 2
    } else {
        0
    };
    let b_ld_k = if B_ROW_MAJOR { lane % 16 } else { 0 };
    let b_ld_chunk = if B_ROW_MAJOR { wn0 / CH + lane / 16 } else { 0 };

    let interior = row0 + BM <= m && col0 + BN <= n;
    tile::pipeline::<BK, STEPS, COPY_SLICES, STAGES, ALIGNED>(
        k,
        interior,
        // Element by element, through registers, all at the top of the step:
        // among the MMAs, the loaded values would stay live beside the
        // fragments, and the 64 x 64 warp tiles spill.
        |_, k0, ws, copying| {
            if !ALIGNED && copying {
                tile::load_chunks::<A_COPIES, A_ROWS, A_COL_MAJOR>(
                    &mut a_tile[ws],
                    a,
                    a_copy,
                    k0,
                    k,
                );
                tile::load_chunks::<B_COPIES, B_ROWS, B_ROW_MAJOR>(
                    &mut b_tile[ws],
                    b,
                    b_copy,
                    k0,
                    k,
                );
            }
        },
        // Iteration `kk` loads the fragments of k step `kk` (from stage `ns`
        // for `kk == STEPS`) and multiplies those of `kk - 1`; among the
        // MMAs, slice `kk` of this step's copies (all at the first k step
        // with two stages: they land under the whole tile's MMAs). Issued
        // together at the top of the step, they held the block's warps off
        // the Tensor Cores all at once (perf/LOG.md, session 6).
        |t, k0, path, kk, ws, rs, ns| {
            if tile::loads_fragments::<STEPS, STAGES>(path, kk, t) {
                let ls = if kk < STEPS { rs } else { ns };
                let kc = kk % STEPS;
                // (`T::BYTES == 2` first: the other types' kernels have
                // no transposed loads to compile.)
                if T::BYTES == 2 && A_COL_MAJOR {
                    tile::load_fragments_trans::<{ WARP / 16 }, 2>(
                        &mut a_frag[kk % 2],
                        &a_tile[ls],
                        kc * 2 * CH + a_ld_k,
                        a_ld_chunk,
                        lane,
                    );
                } else {
                    tile::load_fragments(&mut a_frag[kk % 2], &a_tile[ls], a_ld_row, a_ld_x, kc);
                }
                // One x4 load gives the two k halves of two 8-column n tiles.
                if T::BYTES == 2 && B_ROW_MAJOR {
                    tile::load_fragments_trans::<{ WARP / 16 }, 2>(
                        &mut b_pair,
                        &b_tile[ls],
                        kc * 2 * CH + b_ld_k,
                        b_ld_chunk,
                        lane,
                    );
                } else {
                    tile::load_fragments(&mut b_pair, &b_tile[ls], b_ld_row, b_ld_x, kc);
                }
                #[unroll]
                for j in 0..WARP / 16 {
                    b_frag[kk % 2][2 * j][0] = b_pair[j][0];
                    b_frag[kk % 2][2 * j][1] = b_pair[j][1];
                    b_frag[kk % 2][2 * j + 1][0] = b_pair[j][2];
                    b_frag[kk % 2][2 * j + 1][1] = b_pair[j][3];
                }
            }
            if path < 2 && kk > 0 {
                #[unroll]
                for i in 0..WARP / 16 {
                    #[unroll]
                    for j in 0..WARP / 8 {
                        mma_m16n8::<T>(
                            &mut acc[i][j],
                            &a_frag[(kk - 1) % 2][i],
                            &b_frag[(kk - 1) % 2][j],
                        );
                    }
                }
            }
            // Slice `kk` of the step's copies (16-byte copies only: the
            // element-wise form loaded the tile at the top).
            if kk < COPY_SLICES {
                tile::copy_slices::<
                    A_COPIES,
                    A_ROWS,
                    A_COL_MAJOR,
                    B_COPIES,
                    B_ROWS,
                    B_ROW_MAJOR,
                    A_COPIES,
                    COPY_SLICES,
                    COPIES,
                >(
                    &mut a_tile[ws],
                    &mut b_tile[ws],
                    a,
                    b,
                    a_copy,
                    b_copy,
                    (k0, k0),
                    k,
                    (ALIGNED, ALIGNED),
                    path,
                    kk,
                );
            }
        },
    );

    // The tile computed again here, so that the main loop does not keep it live.
    let (row0, col0) = tile::grouped_tile_order::<BM, BN>();
    epilogue::mma_epilogue::<BM, BN, true>(
        &mut acc,
        c,
        bias,
        m,
        n,
        batches,
        stride_c,
        alpha,
        beta,
        bias_mode,
        activation,
        0,
        lane,
        wm0,
        wn0,
        (block_idx().z, row0, col0),
    );
}

/// What a variant of `gemm_tc` takes: its layouts, 16-byte chunks of `chunk`
/// elements when `ALIGNED`, GELU on float outputs. `other` says what to do
/// with the layouts it lacks.
fn tc_takes(
    (a_col_major, b_row_major, aligned): (bool, bool, bool),
    chunk: u32,
    other: &'static str,
    gelu: bool,
) -> VariantTakes {
    VariantTakes {
        layouts: VariantLayouts::Fixed {
            a: if a_col_major {
                MatrixLayout::ColMajor
            } else {
                MatrixLayout::RowMajor
            },
            b: if b_row_major {
                MatrixLayout::RowMajor
            } else {
                MatrixLayout::ColMajor
            },
            other,
        },
        chunks: aligned.then_some(Chunks {
            elements: chunk,
            otherwise: "take a variant with ALIGNED = false, which loads element by element",
        }),
        gelu,
    }
}

const OTHER_LAYOUTS_16: &str = "the variants with the other values of A_COL_MAJOR and B_ROW_MAJOR \
                                read the other layouts (GemmVariant::variants_for lists those that \
                                take a problem)";
const OTHER_LAYOUTS_TN: &str = "ldmatrix.trans, which would load the other layouts, moves 16-bit \
                                elements: store A row-major and B column-major";

/// The [`GemmVariant`] of each instance of `gemm_tc`: its types, the
/// layouts it reads, GELU for float outputs, and the `bias` of a launch
/// without one (A where it has C's type).
macro_rules! tc_variants {
    ($($name:ident: $elem:ident => $out:ident, $scale:ident, $other:ident, $gelu:literal, $stand_in:expr;)*) => {$(
        impl GemmVariant for $name::Consts {
            type Elem = $elem;
            type Out = $out;
            type Scale = $scale;
            fn takes(&self) -> VariantTakes {
                let consts = (self.A_COL_MAJOR, self.B_ROW_MAJOR, self.ALIGNED);
                tc_takes(consts, 16 / std::mem::size_of::<$elem>() as u32, $other, $gelu)
            }
            fn tile(&self) -> (u32, u32) {
                (self.BM, self.BN)
            }
            fn bias_stand_in(a: BufferRef<'_, $elem>) -> Option<BufferRef<'_, $out>> {
                $stand_in(a)
            }
        }
    )*};
}

tc_variants! {
    gemm_f16: f16 => f16, f32, OTHER_LAYOUTS_16, true, Some;
    gemm_bf16: bf16 => bf16, f32, OTHER_LAYOUTS_16, true, Some;
    gemm_s8: i8 => i32, i32, OTHER_LAYOUTS_TN, false, |_| None;
    gemm_tf32: f32 => f32, f32, OTHER_LAYOUTS_TN, true, Some;
}
