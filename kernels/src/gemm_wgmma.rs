//! Hopper GEMMs (sm_90a): warpgroup MMA (`wgmma`) on shared tiles that the
//! TMA fills, one producer warpgroup and two consumer warpgroups that
//! hand stages to each other through mbarriers, written in the DSL over
//! the device functions below, [`crate::tile`] and [`crate::epilogue`].
//! Built as `gemm_wgmma_f16`, `gemm_wgmma_bf16`, `gemm_wgmma_tf32`,
//! `gemm_wgmma_s8`, `gemm_wgmma_e4m3` and `gemm_wgmma_e5m2`.

use warpforge::prelude::*;
use warpforge::{BufferRef, KernelVariant, MatrixLayout};

use warpforge::__private::KernelDef;

use crate::gemm_problem::{Chunks, GemmVariant, KernelProblem, VariantLayouts, VariantTakes};
use crate::{epilogue, tile};

/// The producer's loop over one tile: for each k-tile of 128 bytes of k,
/// wait until the consumers have released its stage of the ring (which
/// starts empty: the first wait of a stage is on the phase before its
/// first, which counts as completed), expect the bytes of both tiles on the
/// stage's `full` barrier, and issue the TMA loads of A's `BM x BK` and B's
/// `BN x BK` tile of the batch into it. `ring` is the number of k-tiles the
/// block loaded before this tile, which places its first in the ring. Run
/// by one thread.
#[device]
pub fn load_stages<const BM: u32, const BN: u32, const BK: u32, const STAGES: u32, T>(
    #[shared] a_tiles: &mut [[[T; BK]; BM]; STAGES],
    #[shared] b_tiles: &mut [[[T; BK]; BN]; STAGES],
    #[shared] full: &mut [u64; STAGES],
    #[shared] empty: &mut [u64; STAGES],
    a: &[T],
    b: &[T],
    origin: (u32, u32, u32),
    ring: u32,
    k_tiles: u32,
) {
    let (batch, row0, col0) = origin;
    let mut s = ring % STAGES;
    let mut phase = ring / STAGES % 2;
    for kt in 0..k_tiles {
        mbarrier_wait(&empty[s], phase ^ 1);
        mbarrier_arrive_expect_tx(&mut full[s], (BM + BN) * BK * T::BYTES);
        tma_load(
            &mut a_tiles[s][0][0],
            a,
            (batch, row0, kt * BK),
            &mut full[s],
        );
        tma_load(
            &mut b_tiles[s][0][0],
            b,
            (batch, col0, kt * BK),
            &mut full[s],
        );
        s += 1;
        if s == STAGES {
            s = 0;
            phase ^= 1;
        }
    }
}

/// A consumer warpgroup's loop over one tile: for each k-tile, wait for its
/// stage to be full, accumulate its `MB` blocks of 64 rows from `m0` (block
/// `mb` into `acc[mb][0]`) times B's `BN` rows with wgmmas of 32 bytes of k
/// each (`wgmma_m64`: k16 for 16-bit `T`, k8 for tf32, k32 for the 8-bit
/// types), and once the previous k-tile's wgmmas are done (the wait leaves
/// this one's in flight) release that stage to the producer; the last stage
/// once all are done. Every thread of every consumer of the stage arrives
/// on `empty`. `ring` places the first k-tile as in [`load_stages`]. (The
/// `1` dimension of `acc` is the fragment rows of
/// [`epilogue::mma_epilogue`], which takes `acc[mb]`.)
#[device]
pub fn multiply_stages<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const STAGES: u32,
    const NJ: u32,
    const MB: u32,
    T,
    D: Number,
>(
    acc: &mut [[[[D; 4]; NJ]; 1]; MB],
    #[shared] a_tiles: &[[[T; BK]; BM]; STAGES],
    #[shared] b_tiles: &[[[T; BK]; BN]; STAGES],
    #[shared] full: &mut [u64; STAGES],
    #[shared] empty: &mut [u64; STAGES],
    m0: u32,
    ring: u32,
    k_tiles: u32,
) {
    // The elements of k one wgmma reads: 32 bytes.
    const KS: u32 = 32 / T::BYTES;
    let mut s = ring % STAGES;
    let mut phase = ring / STAGES % 2;
    let mut previous = 0u32;
    for kt in 0..k_tiles {
        mbarrier_wait(&full[s], phase);
        wgmma_fence();
        #[unroll]
        for kk in 0..BK / KS {
            #[unroll]
            for mb in 0..MB {
                wgmma_m64::<T, BN>(
                    &mut acc[mb][0],
                    matrix_desc(&a_tiles[s][m0 + 64 * mb][kk * KS], 128),
                    matrix_desc(&b_tiles[s][0][kk * KS], 128),
                    kt > 0 || kk > 0,
                );
            }
        }
        wgmma_commit();
        wgmma_wait(1);
        if kt > 0 {
            mbarrier_arrive(&mut empty[previous]);
        }
        previous = s;
        s += 1;
        if s == STAGES {
            s = 0;
            phase ^= 1;
        }
    }
    wgmma_wait(0);
    if k_tiles > 0 {
        mbarrier_arrive(&mut empty[previous]);
    }
}

/// A GEMM with an epilogue on Hopper, for each of `batches` strided
/// batches (the grid's z): `C = act(alpha * A B + beta * C + bias)` with A
/// (m x k) row-major and B (k x n) column-major (both k-contiguous, the
/// "TN" form) of the element type `T`, C (m x n) row-major of `O`,
/// accumulation and `alpha`, `beta` in `S`; any m and n (the TMA reads
/// zeros past the edges), k and batch strides in whole 16-byte chunks (the
/// TMA's row strides). Built as `gemm_wgmma_f16`, `gemm_wgmma_bf16`,
/// `gemm_wgmma_tf32` (f32 operands, which wgmma reads as tf32 by dropping
/// the low 13 mantissa bits: truncation, where `gemm_tf32` and cuBLAS round
/// to nearest), `gemm_wgmma_s8` (exact, wrapping past i32) and
/// `gemm_wgmma_e4m3` and `gemm_wgmma_e5m2` (8-bit float operands, bf16 C:
/// the scales of a scaled fp8 product go in `alpha`).
///
/// A block computes `BM x BN` tiles of C with `1 + BM / 64` warpgroups:
/// the first runs the producer, `load_stages`, in one thread; the others
/// are consumers, which run `multiply_stages` and the epilogue from
/// registers, in one of two schedules:
/// - cooperative (`PINGPONG` false): each consumer computes 64 rows of
///   every tile (`BN / 2` accumulators a thread), both reading each stage;
///   while they store a tile's outputs, the Tensor Cores idle;
/// - ping-pong (`PINGPONG`, 128 x 128 tiles): the two consumers take the
///   block's tiles in turn, each computing a whole tile (128 accumulators a
///   thread), and the `turn` mbarriers order their main loops, so that one
///   stores its outputs while the other multiplies. (The order also keeps
///   each consumer's waits on a stage within one phase of it.) It pays
///   where the epilogue is long beside the main loop: 8-bit inputs, whose
///   k-tiles take half the time of 16-bit ones, and i32 outputs.
///
/// With two consumers the producer gives registers back (40 a thread) and
/// they take them (232).
/// Stages are k-tiles of 128 bytes of k (`BK = 128 / T::BYTES` elements),
/// 128-byte swizzled as the TMA writes them and the wgmma descriptors read
/// them, in a ring of `STAGES` with a `full` and an `empty` mbarrier each.
///
/// The grid is persistent: block `x` of `grid.x` computes tiles `x`, `x +
/// grid.x`, .. of the batches' tiles in `tile::grouped_tile`'s order, the
/// ring running on from tile to tile, so that the producer loads the next
/// tile's stages while the consumers store this one's outputs. Any grid of
/// blocks in x is correct; [`gemm_wgmma::persistent_grid`](crate::gemm_wgmma::persistent_grid) launches as many as the SMs
/// hold.
#[kernel(
    arch(sm_90a),
    block(128 + 128 * (BM / 64)),
    instances(
        gemm_wgmma_f16 = <f16, f16, f32>,
        gemm_wgmma_bf16 = <bf16, bf16, f32>,
        gemm_wgmma_tf32 = <f32, f32, f32>,
        gemm_wgmma_s8 = <i8, i32, i32>,
        gemm_wgmma_e4m3 = <e4m3, bf16, f32>,
        gemm_wgmma_e5m2 = <e5m2, bf16, f32>
    ),
    tune(BM = [64, 128], BN = [64, 128, 256], STAGES = [3, 4, 5, 6], PINGPONG = [false, true]),
    constrain(
        STAGES * (BM + BN) * 128 <= 224 * 1024,
        // The 64-row tile is for small m: narrow tiles, deep rings.
        BM == 128 && BN >= 128 && STAGES <= 5 || BM == 64 && BN <= 128 && STAGES >= 4,
        // A ping-pong consumer holds a whole tile: 128 x 128 is 128
        // accumulators a thread.
        !PINGPONG || BM == 128 && BN == 128
    ),
    requires(
        batches >= 1,
        a.len() >= (batches - 1) * stride_a + m * k,
        b.len() >= (batches - 1) * stride_b + k * n,
        c.len() >= (batches - 1) * stride_c + m * n,
        bias_mode == 0 || bias_mode == 1 && bias.len() >= n || bias_mode == 2 && bias.len() >= m,
        !a_col_major && !b_row_major,
        k % (16 / T::BYTES) == 0,
        batches == 1 || stride_a % (16 / T::BYTES) == 0 && stride_b % (16 / T::BYTES) == 0
    )
)]
pub fn gemm_wgmma<
    const BM: u32,
    const BN: u32,
    const STAGES: u32,
    const PINGPONG: bool,
    T,
    O: Number,
    S: Number,
>(
    #[tensor_map(
        shape = [batches, m, k],
        strides = [stride_a, k],
        tile = [1, BM, 128 / T::BYTES],
        swizzle = 128
    )]
    a: &[T],
    #[tensor_map(
        shape = [batches, n, k],
        strides = [stride_b, k],
        tile = [1, BN, 128 / T::BYTES],
        swizzle = 128
    )]
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
    const BK: u32 = 128 / T::BYTES;
    const CONSUMERS: u32 = BM / 64;
    // The consumers that read each stage, the row blocks of 64 each computes.
    const READERS: u32 = CONSUMERS - PINGPONG as u32 * (CONSUMERS - 1);
    const MB: u32 = 1 + PINGPONG as u32 * (CONSUMERS - 1);
    let mut a_tiles: [[[T; BK]; BM]; STAGES] = shared();
    let mut b_tiles: [[[T; BK]; BN]; STAGES] = shared();
    let mut full: [u64; STAGES] = shared();
    let mut empty: [u64; STAGES] = shared();
    let mut turn: [u64; 2] = shared();
    let tid = thread_idx().x;
    if tid == 0 {
        #[unroll]
        for s in 0..STAGES {
            mbarrier_init(&mut full[s], 1);
            mbarrier_init(&mut empty[s], 128 * READERS);
        }
        if PINGPONG {
            mbarrier_init(&mut turn[0], 128);
            mbarrier_init(&mut turn[1], 128);
        }
        fence_mbarrier_init();
    }
    sync_threads();
    let k_tiles = (k + BK - 1) / BK;
    let tiles_m = (m + BM - 1) / BM;
    let tiles_n = (n + BN - 1) / BN;
    let per_batch = tiles_m * tiles_n;
    let mut ring = 0u32;
    if tid < 128 {
        if CONSUMERS == 2 {
            setmaxnreg_dec(40);
        }
        if tid == 0 {
            for t in (block_idx().x..per_batch * batches).step_by(grid_dim().x) {
                let (row0, col0) = tile::grouped_tile::<BM, BN>(t % per_batch, tiles_m, tiles_n);
                load_stages(
                    &mut a_tiles,
                    &mut b_tiles,
                    &mut full,
                    &mut empty,
                    a,
                    b,
                    (t / per_batch, row0, col0),
                    ring,
                    k_tiles,
                );
                ring += k_tiles;
            }
        }
    } else {
        if CONSUMERS == 2 {
            setmaxnreg_inc(232);
        }
        let consumer = tid / 128 - 1;
        // Ping-pong: consumer c takes the block's tiles c, c + 2, ..; its
        // i-th waits for the other's main loop before it (`turn[c]`: the
        // first of consumer 0 waits on the phase before the first, which
        // counts as completed) and hands the turn over after its own.
        let first = if PINGPONG {
            block_idx().x + consumer * grid_dim().x
        } else {
            block_idx().x
        };
        let step = if PINGPONG {
            2 * grid_dim().x
        } else {
            grid_dim().x
        };
        let m0 = if PINGPONG { 0 } else { 64 * consumer };
        if PINGPONG {
            ring = consumer * k_tiles;
        }
        let mut turns = 0u32;
        for t in (first..per_batch * batches).step_by(step) {
            let mut acc = [[[[S::ZERO; 4]; BN / 8]; 1]; MB];
            if PINGPONG {
                mbarrier_wait(&turn[consumer], (turns + 1 + consumer) % 2);
            }
            multiply_stages(
                &mut acc, &a_tiles, &b_tiles, &mut full, &mut empty, m0, ring, k_tiles,
            );
            if PINGPONG {
                mbarrier_arrive(&mut turn[1 - consumer]);
                turns += 1;
                ring += 2 * k_tiles;
            } else {
                ring += k_tiles;
            }
            let (row0, col0) = tile::grouped_tile::<BM, BN>(t % per_batch, tiles_m, tiles_n);
            #[unroll]
            for mb in 0..MB {
                epilogue::mma_epilogue::<BM, BN, true>(
                    &mut acc[mb],
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
                    lane_id(),
                    m0 + 64 * mb + 16 * (tid / 32 % 4),
                    0,
                    (t / per_batch, row0, col0),
                );
            }
        }
    }
}

/// Whether `def` is an instance of `gemm_wgmma`, whose blocks walk the
/// tiles themselves ([`persistent_grid`]).
pub fn walks_its_tiles(def: &KernelDef) -> bool {
    let instances = [
        gemm_wgmma_f16::def(),
        gemm_wgmma_bf16::def(),
        gemm_wgmma_tf32::def(),
        gemm_wgmma_s8::def(),
        gemm_wgmma_e4m3::def(),
        gemm_wgmma_e5m2::def(),
    ];
    instances.into_iter().any(|d| std::ptr::eq(d, def))
}

/// The grid of a `gemm_wgmma` launch whose plain grid (one block per tile
/// and batch) is `tiles`: as many blocks as the SMs hold at once (the
/// driver's occupancy of the variant), at most one per tile, in x.
pub fn persistent_grid(
    rt: &Runtime,
    def: &KernelDef,
    consts: &[i64],
    tiles: Grid,
) -> Result<Grid, Error> {
    let [x, y, z] = tiles.blocks;
    let tiles = x.saturating_mul(y).saturating_mul(z);
    let resident = rt
        .variant_resources(def, consts)?
        .loaded
        .and_then(|loaded| loaded.blocks_per_sm)
        .unwrap_or(1)
        .max(1);
    let blocks = tiles.min(rt.device().sm_count.saturating_mul(resident));
    Ok(Grid::blocks([blocks.max(1), 1, 1]))
}

/// What the refusals of a wgmma GEMM say to use instead, for layouts and
/// for k (or batch strides) in other than whole 16-byte chunks: the
/// messages of [`VariantLayouts::Fixed`] and [`Chunks`].
struct Instead {
    layouts: &'static str,
    chunks: &'static str,
}

/// [`Instead`] for an element type whose sm_80 family, `$family`, takes
/// every layout and k.
macro_rules! sm80_family_instead {
    ($family:literal) => {
        Instead {
            layouts: concat!(
                "the wgmma GEMMs read k-contiguous A and B: store A row-major and B \
                 column-major, or use a `",
                $family,
                "` variant of the layouts you have"
            ),
            chunks: concat!(
                "the TMA moves rows of whole 16-byte chunks: use a `",
                $family,
                "` variant with ALIGNED = false"
            ),
        }
    };
}

/// [`Instead`] for the 8-bit floats, which have no sm_80 family.
const FP8_INSTEAD: Instead = Instead {
    layouts: "the fp8 GEMMs read k-contiguous A and B (as cuBLASLt's fp8 GEMMs do): store A \
              row-major and B column-major (B transposed)",
    chunks: "the TMA moves rows of whole 16-byte chunks (16 fp8 elements): pad k, and the \
             batch strides, to a multiple of 16",
};

/// The [`GemmVariant`] of each instance: its types, the TN layouts (others
/// are refused with what to use instead), 16-byte chunks of `CH` elements,
/// GELU on float outputs, and the `bias` of a launch without one (A where
/// it has C's type).
macro_rules! wgmma_variants {
    ($($name:ident: $elem:ident => $out:ident, $scale:ident, $gelu:literal, $stand_in:expr, $instead:expr;)*) => {$(
        impl GemmVariant for $name::Consts {
            type Elem = $elem;
            type Out = $out;
            type Scale = $scale;
            fn takes(&self) -> VariantTakes {
                const INSTEAD: Instead = $instead;
                VariantTakes {
                    layouts: VariantLayouts::Fixed {
                        a: MatrixLayout::RowMajor,
                        b: MatrixLayout::ColMajor,
                        other: INSTEAD.layouts,
                    },
                    chunks: Some(Chunks {
                        elements: 16 / std::mem::size_of::<$elem>() as u32,
                        otherwise: INSTEAD.chunks,
                    }),
                    gelu: $gelu,
                }
            }
            fn tile(&self) -> (u32, u32) {
                (self.BM, self.BN)
            }
            fn grid(&self, rt: &Runtime, problem: &KernelProblem<$scale>) -> Result<Grid, Error> {
                persistent_grid(rt, Self::def(), &self.values(), problem.grid(self.tile()))
            }
            fn bias_stand_in(a: BufferRef<'_, $elem>) -> Option<BufferRef<'_, $out>> {
                $stand_in(a)
            }
        }
    )*};
}

wgmma_variants! {
    gemm_wgmma_f16: f16 => f16, f32, true, Some, sm80_family_instead!("gemm_f16");
    gemm_wgmma_bf16: bf16 => bf16, f32, true, Some, sm80_family_instead!("gemm_bf16");
    gemm_wgmma_tf32: f32 => f32, f32, true, Some, sm80_family_instead!("gemm_tf32");
    gemm_wgmma_s8: i8 => i32, i32, false, |_| None, sm80_family_instead!("gemm_s8");
    gemm_wgmma_e4m3: e4m3 => bf16, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_e5m2: e5m2 => bf16, f32, true, |_| None, FP8_INSTEAD;
}
