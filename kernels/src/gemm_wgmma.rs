//! Hopper GEMMs (sm_90a): warpgroup MMA (`wgmma`) on shared tiles that the
//! TMA fills, one producer warpgroup and two consumer warpgroups that
//! hand stages to each other through mbarriers, written in the DSL over
//! the device functions below, [`crate::tile`] and [`crate::epilogue`].
//! Built as `gemm_wgmma_f16`, `gemm_wgmma_bf16`, `gemm_wgmma_tf32`,
//! `gemm_wgmma_s8`, `gemm_wgmma_e4m3` and `gemm_wgmma_e5m2`, and with other
//! outputs `gemm_wgmma_f16_f32`, `gemm_wgmma_bf16_f32` (f32 C) and
//! `gemm_wgmma_e4m3_f16`, `_e4m3_f32`, `_e5m2_f16`, `_e5m2_f32`.

use warpforge::prelude::*;
use warpforge::tune::LoadedResources;
use warpforge::{
    BufferMut, BufferRef, DeviceBuffer, DeviceScalar, KernelArg, KernelVariant, MatrixLayout,
};

use warpforge::__private::KernelDef;

use crate::gemm_problem::{
    launch_with, Chunks, GemmVariant, KernelProblem, VariantLayouts, VariantTakes,
};
use crate::{epilogue, tile};

/// The producer's loop over one tile: for each k-tile of 128 bytes of k,
/// wait until the consumers have released its stage of the ring (which
/// starts empty: the first wait of a stage is on the phase before its
/// first, which counts as completed), expect the bytes of both tiles on the
/// stage's `full` barrier, and issue the TMA loads of A's `BM x BK` and B's
/// `BN x BK` tile of the batch into it, from k-tile `k0` of the tile's on.
/// `ring` is the number of k-tiles the block loaded before these, which
/// places the first in the ring. In a
/// cluster of `CLUSTER` blocks along m (which share B's tile), each block
/// loads its own A and multicasts one of B's `CLUSTER` parts of `BP` rows
/// (its rank's) to every block of the cluster (each block's `empty` hears
/// from every block's consumers, so the stage is free everywhere the copies
/// write). Run by one thread.
#[device]
pub fn load_stages<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const STAGES: u32,
    const CLUSTER: u32,
    const BP: u32,
    T,
>(
    #[shared] a_tiles: &mut [[[T; BK]; BM]; STAGES],
    #[shared] b_tiles: &mut [[[[T; BK]; BP]; CLUSTER]; STAGES],
    #[shared] full: &mut [u64; STAGES],
    #[shared] empty: &mut [u64; STAGES],
    a: &[T],
    b: &[T],
    origin: (u32, u32, u32),
    k0: u32,
    ring: u32,
    k_tiles: u32,
) {
    let (batch, row0, col0) = origin;
    let mut s = ring % STAGES;
    let mut phase = ring / STAGES % 2;
    for kt in k0..k0 + k_tiles {
        mbarrier_wait(&empty[s], phase ^ 1);
        mbarrier_arrive_expect_tx(&mut full[s], (BM + BN) * BK * T::BYTES);
        tma_load(
            &mut a_tiles[s][0][0],
            a,
            (batch, row0, kt * BK),
            &mut full[s],
        );
        if CLUSTER == 1 {
            tma_load(
                &mut b_tiles[s][0][0][0],
                b,
                (batch, col0, kt * BK),
                &mut full[s],
            );
        } else {
            let rank = cluster_rank();
            tma_load_multicast(
                &mut b_tiles[s][rank][0][0],
                b,
                (batch, col0 + rank * BP, kt * BK),
                &mut full[s],
                (1 << CLUSTER) - 1,
            );
        }
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
/// once all are done. One thread of each consumer warpgroup arrives on the
/// `empty` of each block of the cluster (its wgmma wait covers the whole
/// warpgroup's reads). `ring` places the first k-tile as in [`load_stages`]. (The
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
    const CLUSTER: u32,
    const BP: u32,
    T,
    D: Number,
>(
    acc: &mut [[[[D; 4]; NJ]; 1]; MB],
    #[shared] a_tiles: &[[[T; BK]; BM]; STAGES],
    #[shared] b_tiles: &[[[[T; BK]; BP]; CLUSTER]; STAGES],
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
                    matrix_desc(&b_tiles[s][0][0][kk * KS], 128),
                    kt > 0 || kk > 0,
                );
            }
        }
        wgmma_commit();
        wgmma_wait(1);
        if kt > 0 {
            release_stage::<STAGES, CLUSTER>(empty, previous);
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
        release_stage::<STAGES, CLUSTER>(empty, previous);
    }
}

/// How `blocks` blocks split `tiles` tiles of `k_tiles` k-tiles each in a
/// `gemm_wgmma` launch: `(whole, streamed, share)`. Tiles `0 .. whole` are
/// walked whole (block `b`'s unit `i` is tile `b + i * blocks`). With
/// `STREAM_K`, the `streamed` tiles after them, those past the grid's last
/// whole wave, which would leave the rest of that wave's blocks idle, are
/// shared out by k-tiles over every block instead (stream-K): block `b`
/// takes their k-tiles `b * share .. (b + 1) * share`, counted tile after
/// tile. The share is even but no less than a quarter of a tile's
/// k-tiles, and 8 (every further piece of a tile costs a round trip of its
/// partial sums through memory, about as long as a few k-tiles), and at
/// most `k_tiles`, so that a block's share spans at most two tiles. None is
/// streamed where the workspace (`partials`, `flags` elements) is too
/// small for the grid.
#[device]
pub fn work_split<const STREAM_K: bool, const BM: u32, const BN: u32>(
    tiles: u32,
    blocks: u32,
    k_tiles: u32,
    partials: u32,
    flags: u32,
) -> (u32, u32, u32) {
    let fits = partials >= blocks * BM * BN && flags >= blocks * 2 * BM;
    let streamed = if STREAM_K && fits && k_tiles > 0 {
        tiles % blocks
    } else {
        0
    };
    let even = (streamed * k_tiles + blocks - 1) / blocks;
    let least = k_tiles.min((k_tiles / 4).max(8));
    (tiles - streamed, streamed, even.max(least))
}

/// The number of tiles block `block` of `blocks` walks whole.
#[device]
pub fn whole_units(whole: u32, block: u32, blocks: u32) -> u32 {
    (whole + blocks - 1 - block.min(whole)) / blocks
}

/// Unit `u` of block `block` of `blocks` in a [`work_split`]: `(tile,
/// first k-tile, count)`, the tile past the last (`whole + streamed`) for
/// an empty unit. A block has [`whole_units`] units, then with `STREAM_K`
/// two more: its share's k-tiles in the next tile after the one the share
/// starts in (from that tile's first k-tile), then those in the tile it
/// starts in (to that tile's last). In that order every block reads, at
/// the `i`-th k-tile of its share, k-tile `i` to `i + k_tiles - share` of
/// its tile, so that the blocks read the same few k-tiles of A and B at
/// once and L2 serves them (counted from the start of each share, the
/// blocks read k-tiles spread over the whole of k, which measured the
/// streamed tiles up to 3x slower than a wave of whole ones: perf/LOG.md,
/// session 29). The block of a tile's last piece computes it last.
#[device]
pub fn work_unit<const STREAM_K: bool>(
    split: (u32, u32, u32),
    u: u32,
    block: u32,
    blocks: u32,
    k_tiles: u32,
) -> (u32, u32, u32) {
    let (whole, streamed, share) = split;
    let walked = whole_units(whole, block, blocks);
    // Without `STREAM_K` every unit is a whole tile, and the rest folds away.
    let piece = STREAM_K && u >= walked;
    // The block's share of the streamed k-tiles, `first .. last`, and the
    // end of the tile it starts in. (None streams without k-tiles: `per`
    // only keeps the divisions defined.)
    let per = k_tiles.max(1);
    let total = streamed * k_tiles;
    let first = (block * share).min(total);
    let last = (first + share).min(total);
    let boundary = (first / per + 1) * per;
    let next = u == walked;
    let start = if next { boundary.min(last) } else { first };
    let end = if next { last } else { last.min(boundary) };
    let empty = piece && end <= start;
    let tile = if empty {
        whole + streamed
    } else if piece {
        whole + start / per
    } else {
        block + u * blocks
    };
    let k0 = if piece { start % per } else { 0 };
    let count = if piece { end - start } else { k_tiles };
    (tile, k0, count)
}

/// Stores a consumer thread's accumulators of a piece of a tile (not its
/// last) to slot `slot` of `partials` (`BM x BN` values a slot, thread
/// `c` of the block's `2 BM` consumer threads at every `2 BM`-th, so that
/// a warp's stores are contiguous), then signals them on its flag of
/// `flags`: the fence orders the stores before the count, for the block
/// that adds them up.
#[device]
pub fn store_partial<const BM: u32, const BN: u32, const NJ: u32, D: Number>(
    acc: &[[[D; 4]; NJ]; 1],
    partials: &mut [D],
    flags: &mut [u32],
    slot: u32,
    flag: u32,
    c: u32,
) {
    let threads = 2 * BM;
    let base = slot * BM * BN + c;
    #[unroll]
    for j in 0..NJ {
        #[unroll]
        for e in 0..4 {
            partials[base + (4 * j + e) * threads] = acc[0][j][e];
        }
    }
    fence_gpu();
    atomic_add(&mut flags[flag], 1u32);
}

/// Adds to a consumer thread's accumulators of a tile's last piece those
/// of its other pieces, from the slots of blocks `first .. end` (as
/// [`store_partial`] wrote them), once its flag has counted them all; then
/// zeroes the flag for the next launch.
#[device]
pub fn add_partials<const BM: u32, const BN: u32, const NJ: u32, D: Number>(
    acc: &mut [[[D; 4]; NJ]; 1],
    partials: &[D],
    flags: &mut [u32],
    first: u32,
    end: u32,
    flag: u32,
    c: u32,
) {
    let threads = 2 * BM;
    loop {
        if atomic_add(&mut flags[flag], 0u32) >= end - first {
            break;
        }
    }
    fence_gpu();
    flags[flag] = 0;
    for slot in first..end {
        let base = slot * BM * BN + c;
        #[unroll]
        for j in 0..NJ {
            #[unroll]
            for e in 0..4 {
                acc[0][j][e] += partials[base + (4 * j + e) * threads];
            }
        }
    }
}

/// Hands stage `s` back to the producers of the `CLUSTER` blocks whose
/// copies write it: thread `i < CLUSTER` of the warpgroup arrives on block
/// `i`'s `empty[s]`.
#[device]
pub fn release_stage<const STAGES: u32, const CLUSTER: u32>(
    #[shared] empty: &mut [u64; STAGES],
    s: u32,
) {
    let t = thread_idx().x % 128;
    if CLUSTER == 1 {
        if t == 0 {
            mbarrier_arrive(&mut empty[s]);
        }
    } else if t < CLUSTER {
        mbarrier_arrive_cluster(&mut empty[s], t);
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
/// the scales of a scaled fp8 product go in `alpha`); with f32 C from
/// 16-bit operands `gemm_wgmma_f16_f32` and `gemm_wgmma_bf16_f32`, and the
/// fp8 ones with f16 or f32 C, `gemm_wgmma_e4m3_f16` .. `gemm_wgmma_e5m2_f32`
/// (the output type changes only the epilogue's conversion and stores).
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
///
/// With `STREAM_K` (cooperative blocks, no cluster), the launch has every
/// block the GPU holds, and the tiles past the grid's last whole wave are
/// shared out by k-tiles over all of them
/// ([`gemm_wgmma::work_split`](crate::gemm_wgmma::work_split)), so that
/// the last wave leaves no SM idle. A block that computes an earlier piece
/// of a tile stores its partial sums to `partials` and counts them on its
/// threads' `flags`; the block of the tile's last piece, which computes it
/// after the others began theirs, waits for the counts, adds the sums and
/// runs the epilogue. The workspace holds `BM x
/// BN` sums and `2 BM` flags a block (with less, nothing is streamed), its
/// flags zero at the launch, as the launch leaves them; other variants do
/// not read it. A block waits only on blocks of lower index: a persistent
/// grid has every block resident at once, and where other kernels hold
/// SMs the GPU starts blocks in index order (in practice: CUDA does not
/// promise an order).
///
/// With `CLUSTER = 2` the blocks run in clusters of two along x, and
/// cluster `c` of `grid.x / 2` walks tiles of `2 BM x BN` (its blocks the
/// upper and lower `BM` rows): both read the same tile of B, each block
/// reading half of it from L2 and multicasting it to both, so that a pair
/// reads a third less from L2 (64 KiB a k-tile instead of 96).
#[kernel(
    arch(sm_90a),
    block(128 + 128 * (BM / 64)),
    instances(
        gemm_wgmma_f16 = <f16, f16, f32>,
        gemm_wgmma_bf16 = <bf16, bf16, f32>,
        gemm_wgmma_tf32 = <f32, f32, f32>,
        gemm_wgmma_s8 = <i8, i32, i32>,
        gemm_wgmma_e4m3 = <e4m3, bf16, f32>,
        gemm_wgmma_e5m2 = <e5m2, bf16, f32>,
        gemm_wgmma_f16_f32 = <f16, f32, f32>,
        gemm_wgmma_bf16_f32 = <bf16, f32, f32>,
        gemm_wgmma_e4m3_f16 = <e4m3, f16, f32>,
        gemm_wgmma_e4m3_f32 = <e4m3, f32, f32>,
        gemm_wgmma_e5m2_f16 = <e5m2, f16, f32>,
        gemm_wgmma_e5m2_f32 = <e5m2, f32, f32>
    ),
    cluster(CLUSTER),
    tune(BM = [64, 128], BN = [64, 128, 256], STAGES = [3, 4, 5, 6], PINGPONG = [false, true], CLUSTER = [1, 2], STREAM_K = [false, true]),
    constrain(
        STAGES * (BM + BN) * 128 <= 224 * 1024,
        // The 64-row tile is for small m: narrow tiles, deep rings.
        BM == 128 && BN >= 128 && STAGES <= 5 || BM == 64 && BN <= 128 && STAGES >= 4,
        // A ping-pong consumer holds a whole tile: 128 x 128 is 128
        // accumulators a thread.
        !PINGPONG || BM == 128 && BN == 128,
        // Pairs for the cooperative 128 x 256 tile, which the 8-bit types
        // run at large shapes. (Pairs of the ping-pong 128 x 128 measured 3
        // to 12% slower than that tile alone on the H100: perf/LOG.md,
        // session 22.)
        CLUSTER == 1 || BM == 128 && BN == 256 && !PINGPONG,
        // Stream-K pieces are a cooperative block's tile, alone.
        !STREAM_K || !PINGPONG && CLUSTER == 1
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
    const CLUSTER: u32,
    const STREAM_K: bool,
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
        tile = [1, BN / CLUSTER, 128 / T::BYTES],
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
    partials: &mut [S],
    flags: &mut [u32],
) {
    const BK: u32 = 128 / T::BYTES;
    const CONSUMERS: u32 = BM / 64;
    // The consumers that read each stage, the row blocks of 64 each computes.
    const READERS: u32 = CONSUMERS - PINGPONG as u32 * (CONSUMERS - 1);
    const MB: u32 = 1 + PINGPONG as u32 * (CONSUMERS - 1);
    let mut a_tiles: [[[T; BK]; BM]; STAGES] = shared();
    // B's tile in the cluster's parts (one part without a cluster),
    // contiguous: the wgmma descriptors read all `BN` rows as one.
    let mut b_tiles: [[[[T; BK]; BN / CLUSTER]; CLUSTER]; STAGES] = shared();
    let mut full: [u64; STAGES] = shared();
    let mut empty: [u64; STAGES] = shared();
    let mut turn: [u64; 2] = shared();
    let tid = thread_idx().x;
    if tid == 0 {
        #[unroll]
        for s in 0..STAGES {
            mbarrier_init(&mut full[s], 1);
            mbarrier_init(&mut empty[s], READERS * CLUSTER);
        }
        if PINGPONG {
            mbarrier_init(&mut turn[0], 128);
            mbarrier_init(&mut turn[1], 128);
        }
        fence_mbarrier_init();
    }
    // In a cluster, every block's mbarriers are ready before any block
    // multicasts into it or arrives on them.
    if CLUSTER == 1 {
        sync_threads();
    } else {
        cluster_sync();
    }
    let k_tiles = (k + BK - 1) / BK;
    // The cluster's tiles: `CLUSTER` tiles of BM rows, one a block.
    let tiles_m = (m + BM * CLUSTER - 1) / (BM * CLUSTER);
    let tiles_n = (n + BN - 1) / BN;
    let per_batch = tiles_m * tiles_n;
    let (cluster, clusters) = (block_idx().x / CLUSTER, grid_dim().x / CLUSTER);
    // A block alone is rank 0: no read of the rank register.
    let rank_row = if CLUSTER == 1 { 0 } else { BM * cluster_rank() };
    let (whole, streamed, share) = work_split::<STREAM_K, BM, BN>(
        per_batch * batches,
        clusters,
        k_tiles,
        partials.len(),
        flags.len(),
    );
    let split = (whole, streamed, share);
    let streamed_units = if STREAM_K { 2u32 } else { 0u32 };
    let units = whole_units(whole, cluster, clusters) + streamed_units;
    let mut ring = 0u32;
    if tid < 128 {
        if CONSUMERS == 2 {
            setmaxnreg_dec(40);
        }
        if tid == 0 {
            for u in 0..units {
                let (t, k0, count) = work_unit::<STREAM_K>(split, u, cluster, clusters, k_tiles);
                if t < whole + streamed {
                    let (rows, col0) =
                        tile::grouped_tile::<BM, BN>(t % per_batch, tiles_m, tiles_n);
                    let row0 = rows * CLUSTER + rank_row;
                    load_stages::<BM, BN, BK, STAGES, CLUSTER, { BN / CLUSTER }, T>(
                        &mut a_tiles,
                        &mut b_tiles,
                        &mut full,
                        &mut empty,
                        a,
                        b,
                        (t / per_batch, row0, col0),
                        k0,
                        ring,
                        count,
                    );
                    ring += count;
                }
            }
        }
    } else {
        if CONSUMERS == 2 {
            setmaxnreg_inc(232);
        }
        let consumer = tid / 128 - 1;
        // Ping-pong: consumer c takes the block's units (whole tiles) c, c
        // + 2, ..; its i-th waits for the other's main loop before it
        // (`turn[c]`: the first of consumer 0 waits on the phase before the
        // first, which counts as completed) and hands the turn over after
        // its own.
        let first = if PINGPONG { consumer } else { 0 };
        let step = if PINGPONG { 2u32 } else { 1u32 };
        let m0 = if PINGPONG { 0 } else { 64 * consumer };
        if PINGPONG {
            ring = consumer * k_tiles;
        }
        // This thread among the block's consumer threads, and the stream-K
        // flag of each streamed tile it waits on or signals.
        let thread = tid - 128;
        let mut turns = 0u32;
        for u in (first..units).step_by(step) {
            let (t, k0, count) = work_unit::<STREAM_K>(split, u, cluster, clusters, k_tiles);
            if t >= whole + streamed {
                continue;
            }
            let mut acc = [[[[S::ZERO; 4]; BN / 8]; 1]; MB];
            if PINGPONG {
                mbarrier_wait(&turn[consumer], (turns + 1 + consumer) % 2);
            }
            multiply_stages::<BM, BN, BK, STAGES, { BN / 8 }, MB, CLUSTER, { BN / CLUSTER }, T, S>(
                &mut acc, &a_tiles, &b_tiles, &mut full, &mut empty, m0, ring, count,
            );
            if PINGPONG {
                mbarrier_arrive(&mut turn[1 - consumer]);
                turns += 1;
                ring += 2 * k_tiles;
            } else {
                ring += count;
            }
            if STREAM_K && count < k_tiles {
                let flag = (t - whole) * 2 * BM + thread;
                if k0 + count < k_tiles {
                    // An earlier piece of a streamed tile: its sums go to
                    // the block of the tile's last piece.
                    store_partial::<BM, BN, { BN / 8 }, S>(
                        &acc[0], partials, flags, cluster, flag, thread,
                    );
                    continue;
                }
                // The earlier pieces are those of the blocks since the one
                // whose share holds the tile's first k-tile.
                let first = (t - whole) * k_tiles / share;
                add_partials::<BM, BN, { BN / 8 }, S>(
                    &mut acc[0],
                    partials,
                    flags,
                    first,
                    cluster,
                    flag,
                    thread,
                );
            }
            let (rows, col0) = tile::grouped_tile::<BM, BN>(t % per_batch, tiles_m, tiles_n);
            let row0 = rows * CLUSTER + rank_row;
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
    // No block leaves while another of its cluster may still arrive on its
    // mbarriers or multicast into its stages.
    if CLUSTER > 1 {
        cluster_sync();
    }
}

/// The grid of a `gemm_wgmma` launch whose plain grid (one block per tile
/// and batch: n tiles in x, m tiles in y) is `tiles`, in clusters of the
/// variant's `CLUSTER` blocks along m: as many clusters as the GPU holds at
/// once (the driver's occupancy of the variant), their blocks in x; at
/// most one per `CLUSTER` tiles of m, but for `STREAM_K` variants, which
/// share the tiles' k-tiles out over every block the GPU holds.
pub fn persistent_grid(
    rt: &Runtime,
    def: &KernelDef,
    consts: &[i64],
    tiles: Grid,
) -> Result<Grid, Error> {
    let cluster = const_value(def, consts, "CLUSTER").max(1);
    let loaded = rt.variant_resources(def, consts)?.loaded;
    let resident = match loaded {
        Some(LoadedResources {
            resident_clusters: Some(clusters),
            ..
        }) => clusters,
        _ => {
            let per_sm = loaded.and_then(|l| l.blocks_per_sm).unwrap_or(1).max(1);
            rt.device().sm_count.saturating_mul(per_sm) / cluster
        }
    };
    if const_value(def, consts, "STREAM_K") == 1 {
        return Ok(Grid::blocks([resident.max(1), 1, 1]));
    }
    Ok(cluster_grid(tiles, cluster, resident))
}

/// [`persistent_grid`]'s blocks for `resident` clusters of `cluster` blocks.
fn cluster_grid(tiles: Grid, cluster: u32, resident: u32) -> Grid {
    let [x, y, z] = tiles.blocks;
    let cluster_tiles = x.saturating_mul(y.div_ceil(cluster)).saturating_mul(z);
    let clusters = cluster_tiles.min(resident).max(1);
    Grid::blocks([clusters.saturating_mul(cluster), 1, 1])
}

/// A `gemm_wgmma` variant's value of const parameter `name` (`CLUSTER`,
/// `STREAM_K`: 1 for true); 0 for a value it does not have.
fn const_value(def: &KernelDef, consts: &[i64], name: &str) -> u32 {
    def.ir
        .const_params
        .iter()
        .zip(consts)
        .find(|(param, _)| param.name == name)
        .map_or(0, |(_, &value)| u32::try_from(value).unwrap_or(0))
}

/// What a stream-K launch's scratch buffers are lent for
/// ([`Runtime::lend_scratch`]): its partial sums, and the flags that count
/// them in, which every launch leaves zeroed.
const PARTIALS: &str = "gemm_wgmma stream-K partial sums";
const FLAGS: &str = "gemm_wgmma stream-K flags";

/// A `gemm_wgmma` launch's workspace, its last two arguments: for a
/// `STREAM_K` variant, `BM x BN` partial sums (of the accumulator type `S`)
/// and `2 BM` flags (one per consumer thread) for each block of the grid,
/// else one element of each, which the kernel does not read. Lent by the
/// runtime, and given back when dropped, after the launch is enqueued.
pub(crate) struct Workspace<'r, S: DeviceScalar> {
    rt: &'r Runtime,
    partials: Option<DeviceBuffer<S>>,
    flags: Option<DeviceBuffer<u32>>,
}

impl<'r, S: DeviceScalar> Workspace<'r, S> {
    /// The workspace of variant `consts` of `def` launched on `grid`.
    pub(crate) fn lend(
        rt: &'r Runtime,
        def: &KernelDef,
        consts: &[i64],
        grid: &Grid,
    ) -> Result<Workspace<'r, S>, Error> {
        let blocks = grid.blocks[0] as usize;
        let (bm, bn) = (
            const_value(def, consts, "BM"),
            const_value(def, consts, "BN"),
        );
        let (partials, flags) = match const_value(def, consts, "STREAM_K") {
            1 => (blocks * (bm * bn) as usize, blocks * 2 * bm as usize),
            _ => (1, 1),
        };
        Ok(Workspace {
            rt,
            partials: Some(rt.lend_scratch(PARTIALS, partials)?),
            flags: Some(rt.lend_scratch(FLAGS, flags)?),
        })
    }

    /// The kernel's `partials` and `flags` arguments.
    pub(crate) fn args(&mut self) -> Vec<KernelArg<'_>> {
        let partials = self.partials.iter_mut().map(KernelArg::buffer_mut);
        partials
            .chain(self.flags.iter_mut().map(KernelArg::buffer_mut))
            .collect()
    }
}

impl<S: DeviceScalar> Drop for Workspace<'_, S> {
    fn drop(&mut self) {
        if let Some(partials) = self.partials.take() {
            self.rt.keep_scratch(PARTIALS, partials);
        }
        if let Some(flags) = self.flags.take() {
            self.rt.keep_scratch(FLAGS, flags);
        }
    }
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

/// [`Instead`] for 16-bit inputs with f32 C, which only the wgmma GEMMs
/// compute.
const F32_OUT_INSTEAD: Instead = Instead {
    layouts: "the wgmma GEMMs read k-contiguous A and B: store A row-major and B column-major \
              (B transposed), or use the 16-bit-output family of your layouts",
    chunks: "the TMA moves rows of whole 16-byte chunks (8 16-bit elements): pad k, and the \
             batch strides, to a multiple of 8",
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
            fn launch(
                &self,
                rt: &Runtime,
                problem: &KernelProblem<$scale>,
                a: BufferRef<'_, $elem>,
                b: BufferRef<'_, $elem>,
                c: BufferMut<'_, $out>,
                bias: Option<BufferRef<'_, $out>>,
            ) -> Result<(), Error> {
                let grid = self.grid(rt, problem)?;
                let mut workspace =
                    Workspace::<$scale>::lend(rt, Self::def(), &self.values(), &grid)?;
                let buffers = (a, b, c, bias);
                launch_with(self, rt, problem, grid, buffers, Some(&mut workspace))
            }
        }
    )*
        /// Whether `def` is an instance of `gemm_wgmma`, whose blocks walk
        /// the tiles themselves ([`persistent_grid`]): a launch of one block
        /// per tile would have every row of blocks compute every tile.
        pub fn walks_its_tiles(def: &KernelDef) -> bool {
            [$($name::def()),*].into_iter().any(|d| std::ptr::eq(d, def))
        }
    };
}

wgmma_variants! {
    gemm_wgmma_f16: f16 => f16, f32, true, Some, sm80_family_instead!("gemm_f16");
    gemm_wgmma_bf16: bf16 => bf16, f32, true, Some, sm80_family_instead!("gemm_bf16");
    gemm_wgmma_tf32: f32 => f32, f32, true, Some, sm80_family_instead!("gemm_tf32");
    gemm_wgmma_s8: i8 => i32, i32, false, |_| None, sm80_family_instead!("gemm_s8");
    gemm_wgmma_e4m3: e4m3 => bf16, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_e5m2: e5m2 => bf16, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_f16_f32: f16 => f32, f32, true, |_| None, F32_OUT_INSTEAD;
    gemm_wgmma_bf16_f32: bf16 => f32, f32, true, |_| None, F32_OUT_INSTEAD;
    gemm_wgmma_e4m3_f16: e4m3 => f16, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_e4m3_f32: e4m3 => f32, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_e5m2_f16: e5m2 => f16, f32, true, |_| None, FP8_INSTEAD;
    gemm_wgmma_e5m2_f32: e5m2 => f32, f32, true, |_| None, FP8_INSTEAD;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block's units of a 128 x 256 stream-K split (`MAX_UNITS` a
    /// block), `(tile, first k-tile, count)` each, for the host to check.
    #[kernel(arch(sm_80), block(1))]
    fn stream_k_units(out: &mut [u32], tiles: u32, k_tiles: u32, partials: u32, flags: u32) {
        let (block, blocks) = (block_idx().x, grid_dim().x);
        let split = work_split::<true, 128, 256>(tiles, blocks, k_tiles, partials, flags);
        let (whole, _, _) = split;
        let units = whole_units(whole, block, blocks) + 2;
        for u in 0..units {
            let (t, k0, count) = work_unit::<true>(split, u, block, blocks, k_tiles);
            let at = 3 * (block * 40 + u);
            out[at] = t;
            out[at + 1] = k0;
            out[at + 2] = count;
        }
    }

    const MAX_UNITS: usize = 40;

    /// `(block, tile, first k-tile, count)` of every non-empty unit, in each
    /// block's order, as the interpreter runs `stream_k_units`.
    fn units(blocks: u32, tiles: u32, k_tiles: u32, fits: bool) -> Vec<(u32, u32, u32, u32)> {
        let rt = Runtime::interpreter();
        let mut out = rt
            .upload(&vec![u32::MAX; 3 * MAX_UNITS * blocks as usize])
            .unwrap();
        let workspace = if fits { blocks * 128 * 256 } else { 0 };
        stream_k_units::launch(
            &rt,
            Grid::blocks([blocks, 1, 1]),
            &mut out,
            tiles,
            k_tiles,
            workspace,
            blocks * 256,
        )
        .unwrap();
        let out = rt.download(&out).unwrap();
        out.chunks(3)
            .enumerate()
            .filter(|(_, unit)| unit[0] < tiles)
            .map(|(i, unit)| ((i / MAX_UNITS) as u32, unit[0], unit[1], unit[2]))
            .collect()
    }

    #[test]
    fn a_stream_k_split_covers_every_k_tile_once_and_reads_k_in_step() {
        // 8192^3 and 4096^3 (f16, tf32) on 132 SMs, a grid of few tiles, an
        // exact number of waves, and k shorter than the least share.
        for (blocks, tiles, k_tiles) in [
            (132, 2048, 128),
            (132, 512, 64),
            (132, 512, 128),
            (132, 32, 128),
            (132, 4, 128),
            (132, 264, 16),
            (132, 1, 5),
            (7, 30, 3),
        ] {
            let units = units(blocks, tiles, k_tiles, true);
            let streamed = tiles % blocks;
            let mut covered = vec![0u32; (tiles * k_tiles) as usize];
            for &(block, t, k0, count) in &units {
                assert!(count > 0 && k0 + count <= k_tiles, "{units:?}");
                if t < tiles - streamed {
                    assert_eq!((t % blocks, k0, count), (block, 0, k_tiles));
                }
                for k in k0..k0 + count {
                    covered[(t * k_tiles + k) as usize] += 1;
                }
            }
            assert!(
                covered.iter().all(|&c| c == 1),
                "{blocks} {tiles} {k_tiles}"
            );
            // A streamed tile's last k-tiles are its highest block's, and a
            // block takes at most two pieces: the next tile's first, then
            // another's last, so that it waits only after every piece it
            // owes others is stored.
            for t in tiles - streamed..tiles {
                let pieces: Vec<_> = units.iter().filter(|u| u.1 == t).collect();
                let last = pieces.iter().max_by_key(|u| u.0).unwrap();
                assert_eq!(last.2 + last.3, k_tiles, "tile {t}: {pieces:?}");
            }
            for block in 0..blocks {
                let mine: Vec<_> = units
                    .iter()
                    .filter(|u| u.0 == block && u.1 >= tiles - streamed)
                    .collect();
                assert!(mine.len() <= 2, "{mine:?}");
                if let [first, second] = mine[..] {
                    assert!(first.2 == 0 && second.2 + second.3 == k_tiles, "{mine:?}");
                }
                // At the i-th k-tile of its share a block reads k-tile i to
                // i + k_tiles - share, as every other block does (L2).
                let share: u32 = mine.iter().map(|u| u.3).sum();
                let read = mine.iter().flat_map(|u| u.2..u.2 + u.3);
                for (i, k) in read.enumerate() {
                    let ahead = i64::from(k) - i as i64;
                    assert!(
                        (0..=i64::from(k_tiles - share)).contains(&ahead),
                        "block {block}: {mine:?}"
                    );
                }
            }
        }
        // Without room for the sums, every tile is walked whole; without
        // k-tiles too (each still stores `beta C + bias`).
        let whole = units(132, 512, 64, false);
        assert_eq!(whole.len(), 512);
        assert!(whole
            .iter()
            .all(|&(_, _, k0, count)| (k0, count) == (0, 64)));
        let no_k = units(132, 200, 0, true);
        assert_eq!(no_k.len(), 200);
        assert!(no_k
            .iter()
            .all(|&(block, t, _, count)| t % 132 == block && count == 0));
    }

    #[test]
    fn a_persistent_grid_is_whole_clusters_and_no_more_than_their_tiles() {
        // 8192^3 in 128 x 256 tiles: 32 x 64 tiles, 1024 pairs of them.
        let tiles = Grid::blocks([32, 64, 1]);
        assert_eq!(cluster_grid(tiles, 2, 66).blocks, [132, 1, 1]);
        assert_eq!(cluster_grid(tiles, 1, 132).blocks, [132, 1, 1]);
        // 3 m tiles make 2 pairs (the last half past m); 5 n tiles.
        assert_eq!(
            cluster_grid(Grid::blocks([5, 3, 1]), 2, 66).blocks,
            [20, 1, 1]
        );
        // None resident still launches one cluster.
        assert_eq!(
            cluster_grid(Grid::blocks([5, 3, 1]), 2, 0).blocks,
            [2, 1, 1]
        );
    }

    #[test]
    fn a_variant_names_its_cluster() {
        let def = gemm_wgmma_s8::def();
        let pairs = gemm_wgmma_s8::Consts {
            BM: 128,
            BN: 256,
            STAGES: 4,
            PINGPONG: false,
            CLUSTER: 2,
            STREAM_K: false,
        };
        assert_eq!(const_value(def, &pairs.values(), "CLUSTER"), 2);
        let single = gemm_wgmma_s8::Consts {
            CLUSTER: 1,
            ..pairs
        };
        assert_eq!(const_value(def, &single.values(), "CLUSTER"), 1);
        assert!(def.variants().contains(&pairs.values()));
    }
}
