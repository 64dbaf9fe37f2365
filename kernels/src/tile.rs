//! Device functions the tiled kernels share, and that users' kernels may
//! call: the order in which blocks take their tiles, the swizzle of shared
//! tiles, the copies of a multistage `cp.async` pipeline, the `ldmatrix`
//! fragment loads, and the schedule of such a pipeline's main loop.
//!
//! # The pipelined main loop
//! The Tensor Core GEMMs (`gemm_tc`, `gemm_sparse`) run one main loop,
//! [`pipeline`], each with its own k step as a closure, and keep `STAGES`
//! k-tiles of their operands in shared memory. Step `t` of the main loop issues the
//! copies of k-tile `t` into stage `t % STAGES` and commits them as one
//! group; from step `STAGES - 1` on it also computes k-tile `t - (STAGES -
//! 1)`, in `STEPS` MMA k steps, and issues its copies among those MMAs, a
//! slice per k step ([`copy_slices`]; all at the first k step with two
//! stages). Each k step's fragments are loaded one k step before its MMAs.
//! Before the tile's last k step the block waits until at most `STAGES - 2`
//! groups are in flight and meets at a barrier ([`end_k_step`]): that lands
//! the next tile, whose first fragments then load under the last k step's
//! MMAs, and frees this tile's stage for the next step's copies (CUTLASS's
//! multistage order). A step takes one of three forms ([`takes_path`]),
//! uniform over the block, each one block of straight-line code for ptxas
//! to schedule: 0 computes and copies a tile wholly inside the matrices with
//! plain 16-byte copies, 1 computes and copies at an edge with zero-filling
//! ones, 2 (the first `STAGES - 1` steps) only copies.

use warpforge::prelude::*;

/// The tile of C this block computes in a GEMM launched on the plain grid of
/// (n tiles, m tiles) blocks of `BM x BN` outputs: its first row and column.
///
/// Blocks start in launch order (x fastest). Renumbered so that consecutive
/// blocks walk a group of 8 tile rows column by column, the blocks in flight
/// share a few panels of A and of B in L2 instead of every panel of B.
#[device]
pub fn grouped_tile_order<const BM: u32, const BN: u32>() -> (u32, u32) {
    let tiles_n = grid_dim().x;
    grouped_tile::<BM, BN>(
        block_idx().y * tiles_n + block_idx().x,
        grid_dim().y,
        tiles_n,
    )
}

/// Tile `id` of a `tiles_m x tiles_n` grid of `BM x BN` tiles of C in
/// [`grouped_tile_order`]'s order: its first row and column. A persistent
/// kernel walks the ids itself.
#[device]
pub fn grouped_tile<const BM: u32, const BN: u32>(
    id: u32,
    tiles_m: u32,
    tiles_n: u32,
) -> (u32, u32) {
    let group_first = id / (8 * tiles_n) * 8;
    let group_rows = (tiles_m - group_first).min(8);
    let in_group = id % (8 * tiles_n);
    let row0 = (group_first + in_group % group_rows) * BM;
    let col0 = in_group / group_rows * BN;
    (row0, col0)
}

/// The swizzle of row `row` of a shared tile whose rows are `ROW_BYTES`
/// long (64 bytes or a multiple of 128): its 16-byte chunk `ch` is stored
/// at chunk `ch ^ swizzle::<ROW_BYTES>(row)` (docs/ptx.md, "Shared-tile
/// swizzle"). The 8 rows an `ldmatrix` matrix reads at one chunk, and the
/// copies of 8 consecutive threads, then fall in 8 distinct 16-byte bank
/// groups. Rows of 128 bytes or more: `row % 8`, which keeps a chunk inside
/// its group of 8; two 64-byte rows share 128 bytes: `(row / 2) % 4`.
#[device]
pub fn swizzle<const ROW_BYTES: u32>(row: u32) -> u32 {
    if ROW_BYTES >= 128 {
        row % 8
    } else {
        row / (128 / ROW_BYTES) % (ROW_BYTES / 16)
    }
}

/// How many of the indices `from..end` there are (none when `from >= end`):
/// the rows or elements of a tile still inside the matrix.
#[device]
pub fn room(from: u32, end: u32) -> u32 {
    if from < end {
        end - from
    } else {
        0
    }
}

/// How this thread copies the k-tiles of an operand whose tiles are `MN`
/// rows (of m or n) by `BK` values of k, in a block of `THREADS` threads:
/// the `copy` of [`copy_slice`]. The tile's 16-byte chunks are numbered
/// along its rows, of k (or, `K_ROWS`, of m or n): thread `tid` copies
/// chunk `tid % C` (`C` chunks per row) of rows `tid / C + l * THREADS / C`,
/// which is a multiple of the swizzle's period, so the swizzled chunk is the
/// same in every row it copies and in every tile. The block's tile starts at
/// row (or column) `mn0` of `mn`; the operand's matrix at `src[at]`, `k`
/// values deep.
#[device]
pub fn operand_copy<
    const MN: u32,
    const BK: u32,
    const THREADS: u32,
    const K_ROWS: bool,
    T: Number,
>(
    tid: u32,
    mn0: u32,
    mn: u32,
    k: u32,
    at: u32,
) -> (u32, u32, u32, u32, u32, u32, u32) {
    const CH: u32 = 16 / T::BYTES;
    const CHUNKS: u32 = MN / CH * K_ROWS as u32 + BK / CH * (1 - K_ROWS as u32);
    let ch = tid % CHUNKS;
    let row = tid / CHUNKS;
    let col = (ch ^ swizzle::<{ CHUNKS * 16 }>(row)) * CH;
    // K_ROWS: the chunk's first m or n index; rows of k, `mn` apart.
    let first_mn = mn0 + ch * CH;
    let ld = if K_ROWS { mn } else { k };
    let first = if K_ROWS {
        at + row * mn + first_mn
    } else {
        at + (mn0 + row) * k
    };
    let rows_in = if K_ROWS { 0 } else { room(mn0 + row, mn) };
    let chunk = if K_ROWS { first_mn } else { ch * CH };
    (row, col, first, THREADS / CHUNKS * ld, rows_in, chunk, ld)
}

/// Slice `slice` of a main-loop step's 16-byte copies of A's and of B's
/// k-tiles (at k `k0.0` and `k0.1`) in the step's form `path`, of the
/// operands `copied` names (an operand loaded element by element in this
/// step is not copied here): [`copy_slice`] for each. A's copies are the
/// step's first, B's are numbered from `B_BEFORE`, `ALL` in all.
#[device]
pub fn copy_slices<
    const A_N: u32,
    const A_ROWS: u32,
    const A_K_ROWS: bool,
    const B_N: u32,
    const B_ROWS: u32,
    const B_K_ROWS: bool,
    const B_BEFORE: u32,
    const SLICES: u32,
    const ALL: u32,
    const AW: u32,
    const AR: u32,
    const BW: u32,
    const BR: u32,
    T: Number,
>(
    #[shared] a_tile: &mut [[T; AW]; AR],
    #[shared] b_tile: &mut [[T; BW]; BR],
    a: &[T],
    b: &[T],
    a_copy: (u32, u32, u32, u32, u32, u32, u32),
    b_copy: (u32, u32, u32, u32, u32, u32, u32),
    k0: (u32, u32),
    k: u32,
    copied: (bool, bool),
    path: u32,
    slice: u32,
) {
    let order = (slice, SLICES, ALL);
    if copied.0 {
        copy_slice::<A_N, A_ROWS, A_K_ROWS, 0>(a_tile, a, a_copy, k0.0, k, path, order);
    }
    if copied.1 {
        copy_slice::<B_N, B_ROWS, B_K_ROWS, B_BEFORE>(b_tile, b, b_copy, k0.1, k, path, order);
    }
}

/// One slice of this thread's 16-byte copies of an operand's k-tile at k
/// `k0` into `tile` (a stage), in the main loop's form `path`.
///
/// `copy` says how the thread copies the operand, worked out once before
/// the main loop: `(row, col, first, step, room, chunk, end)`. Its copy `l`
/// writes row `row + l * ROWS` of the stage from element `col` and reads
/// `src[first + l * step + at]`, where the tile's offset `at` is
/// - in a k-contiguous tile (rows of k values) `k0 + chunk` (`chunk`: the
///   k of the thread's chunk within a tile); `room` of the rows from `row`
///   are inside the matrix (of m or n), and a row has `end` values;
/// - in a tile of k rows (`K_ROWS`: m- or n-contiguous) `k0 * end`: the
///   chunk starts at m or n index `chunk` of `end` (the leading dimension),
///   and row `l` holds k `k0 + row + l * ROWS`, inside below `k`.
///
/// Form 0 copies a tile inside the matrix; form 1 one at an edge, where a
/// chunk outside reads nothing, names element 0 and zero-fills. The leading
/// dimensions and `end` are multiples of the chunk (16-byte copies need
/// it), so a chunk is wholly in or out. The copies of a step are numbered across its
/// operands, these `BEFORE .. BEFORE + N` of `order.2`, and copy `e` is
/// issued in slice `e * order.1 / order.2`, among the MMAs of k step
/// `order.0` ([the main loop](self)).
#[device]
pub fn copy_slice<
    const N: u32,
    const ROWS: u32,
    const K_ROWS: bool,
    const BEFORE: u32,
    const W: u32,
    const R: u32,
    T: Number,
>(
    #[shared] tile: &mut [[T; W]; R],
    src: &[T],
    copy: (u32, u32, u32, u32, u32, u32, u32),
    k0: u32,
    k: u32,
    path: u32,
    order: (u32, u32, u32),
) {
    let (row, col, first, step, room, chunk, end) = copy;
    let (slice, slices, all) = order;
    let at = if K_ROWS { k0 * end } else { k0 + chunk };
    #[unroll]
    for l in 0..N {
        if (BEFORE + l) * slices / all == slice {
            let r = row + l * ROWS;
            if path == 0 {
                cp_async(&mut tile[r][col], &src[first + l * step + at], 16, 16);
            } else if K_ROWS {
                let inside = chunk < end && k0 + r < k;
                let from = if inside { first + l * step + at } else { 0 };
                let read = if inside { 16u32 } else { 0 };
                cp_async(&mut tile[r][col], &src[from], 16, read);
            } else {
                let inside = at < end && l * ROWS < room;
                let from = if inside { first + l * step + at } else { 0 };
                let read = if inside { 16u32 } else { 0 };
                cp_async(&mut tile[r][col], &src[from], 16, read);
            }
        }
    }
}

/// `copy` (of a k-contiguous tile, see [`operand_copy`]) rebased to the
/// k-tile at `k0`: the k of the thread's chunk, `gk`, taken into `first`
/// and the row's length `end` (its `room`), for [`load_chunks`] at k 0. The
/// copy then tests `q < end - gk` and reads `first + gk + q`, where at `k0`
/// it formed one index `gk + q` for both; from that one index ptxas 12.9
/// issues all of a step's loads ahead of their stores in some tiles (the
/// sparse GEMM's column-major B, 128 registers against 110) and the rebased
/// form in others (`gemm_tc`'s 32 x 32 warp tiles, 80 against 98). Fewer
/// registers are not always faster: `gemm_tc`'s 64 x 64 warp tiles took
/// 242 rebased against 252, and the f16 and bf16 256 x 128 x 32 S2 tiles
/// then ran 6% slower on an H100, so `gemm_tc` keeps the one index
/// (perf/LOG.md, sessions 33 to 35).
#[device]
pub fn rebased(
    copy: (u32, u32, u32, u32, u32, u32, u32),
    k0: u32,
) -> (u32, u32, u32, u32, u32, u32, u32) {
    let (row, col, first, step, rows_in, chunk, end) = copy;
    let gk = k0 + chunk;
    (row, col, first + gk, step, rows_in, 0u32, room(gk, end))
}

/// This thread's chunks of a k-tile at k `k0` copied element by element
/// through registers (for leading dimensions without 16-byte alignment),
/// as [`copy_slice`] copies them (`copy` is the same): element `q` of chunk
/// `l` (of `N`) goes to `tile[row + l * ROWS][col + q]`, read where it is
/// inside the matrix and zero otherwise.
#[device]
pub fn load_chunks<
    const N: u32,
    const ROWS: u32,
    const K_ROWS: bool,
    const W: u32,
    const R: u32,
    T: Number,
>(
    #[shared] tile: &mut [[T; W]; R],
    src: &[T],
    copy: (u32, u32, u32, u32, u32, u32, u32),
    k0: u32,
    k: u32,
) {
    let (row, col, first, step, room, chunk, end) = copy;
    #[unroll]
    for l in 0..N {
        let r = row + l * ROWS;
        #[unroll]
        for q in 0..16 / T::BYTES {
            if K_ROWS {
                tile[r][col + q] = if chunk + q < end && k0 + r < k {
                    src[first + l * step + k0 * end + q]
                } else {
                    T::ZERO
                };
            } else {
                let gk = k0 + chunk + q;
                tile[r][col + q] = if l * ROWS < room && gk < end {
                    src[first + l * step + gk]
                } else {
                    T::ZERO
                };
            }
        }
    }
}

/// The `ldmatrix.x4` loads of k step `step` of `N` 16-row blocks of a
/// k-contiguous tile (rows of k values), block `i` at row `row + 16 i`:
/// lane `L` points at row `L % 16` of a block (`row` holds it) and 16-byte
/// chunk `2 step + L / 16`, stored at `2 step ^ x` for `x = L / 16 ^
/// swizzle(row)` (the lane's part of the chunk and the row's swizzle:
/// block starts are multiples of the swizzle's period). f32 words are
/// rounded to tf32 (to nearest, ties away from zero, as cuBLAS rounds) for
/// the tf32 MMA.
#[device]
pub fn load_fragments<const N: u32, const W: u32, const R: u32, T: Number>(
    frags: &mut [[u32; 4]; N],
    #[shared] tile: &[[T; W]; R],
    row: u32,
    x: u32,
    step: u32,
) {
    #[unroll]
    for i in 0..N {
        let col = (step * 2 ^ x) * (16 / T::BYTES);
        ldmatrix_x4(&mut frags[i], &tile[row + i * 16][col]);
        round_to_tf32::<T>(&mut frags[i]);
    }
}

/// The `ldmatrix.x4.trans` loads of `N` fragments of an m- or n-contiguous
/// tile (rows of k, 128 bytes or more, swizzled by [`swizzle`]): lane `L`
/// points at row `k_row` (its k row of the step) and 16-byte chunk `chunk +
/// CHUNK_STEP i` of fragment `i`; every k row a lane reads is `L % 8` modulo
/// 8, its swizzle. 16-bit elements only (`.trans` moves 16-bit elements): a
/// kernel generic over other types too calls it in a branch `if T::BYTES ==
/// 2 && ..`, which their instances do not compile.
#[device]
pub fn load_fragments_trans<
    const N: u32,
    const CHUNK_STEP: u32,
    const W: u32,
    const R: u32,
    T: Half,
>(
    frags: &mut [[u32; 4]; N],
    #[shared] tile: &[[T; W]; R],
    k_row: u32,
    chunk: u32,
    lane: u32,
) {
    #[unroll]
    for i in 0..N {
        let col = ((chunk + CHUNK_STEP * i) ^ (lane % 8)) * 8;
        ldmatrix_x4_trans(&mut frags[i], &tile[k_row][col]);
    }
}

/// `words` rounded to tf32 in place when `T` is f32 (its Tensor Core form);
/// nothing for the other types.
#[device]
pub fn round_to_tf32<T: Number, const N: u32>(words: &mut [u32; N]) {
    if T::IS_FLOAT && T::BYTES == 4 {
        #[unroll]
        for w in 0..N {
            words[w] = to_tf32(f32::from_bits(words[w]));
        }
    }
}

/// Which of the three forms of a main-loop step `path` is ([the main
/// loop](self)): a step inside the matrices (`full`, with 16-byte copies:
/// `aligned`), one at an edge, or one that only copies.
#[device]
pub fn takes_path(path: u32, aligned: bool, computing: bool, full: bool) -> bool {
    aligned && path == 0 && computing && full
        || path == 1 && computing && !full
        || path == 2 && !computing
}

/// Whether k step `kk` of a step of form `path` loads fragments: the
/// computing forms load those of k step `kk` (`kk == STEPS`: step 0 of the
/// next tile) before the MMAs of `kk - 1`; the last copying step (`t ==
/// STAGES - 2`) loads the first computed tile's first fragments.
#[device]
pub fn loads_fragments<const STEPS: u32, const STAGES: u32>(path: u32, kk: u32, t: u32) -> bool {
    path < 2 && kk > 0 || kk == STEPS && t == STAGES - 2
}

/// The end of k step `kk` of a main-loop step: after the last slice of
/// copies they commit as one group, and before the tile's last k step the
/// block waits for the next tile and meets at a barrier.
#[device]
pub fn end_k_step<const STEPS: u32, const SLICES: u32, const STAGES: u32>(
    kk: u32,
    path: u32,
    t: u32,
) {
    if kk + 1 == SLICES {
        cp_async_commit();
    }
    if kk + 1 == STEPS && (path < 2 || t == STAGES - 2) {
        cp_async_wait(STAGES - 2);
        sync_threads();
    }
}

/// The pipelined main loop ([the main loop](self)) over the `ceil(k / BK)`
/// k-tiles of a GEMM, in `STAGES` shared stages, `STEPS` MMA k steps per
/// tile and the copies in `COPY_SLICES` slices; `interior` says that the
/// block's tile of C lies inside the matrix, so that full k-tiles take the
/// plain form (with `ALIGNED`, 16-byte copies).
///
/// Step `t` (at k `k0`) writes stage `ws` and reads stage `rs`; `ns` is the
/// stage after `rs`. It starts with `start_step(t, k0, ws, copying)`, where
/// `copying` says that it has a k-tile to copy (`t < ceil(k / BK)`): a
/// kernel without 16-byte copies loads it there, element by element. Then,
/// for each k step `kk` in `0..=STEPS` of the step's form `path`
/// ([`takes_path`]), `k_step(t, k0, path, kk, ws, rs, ns)` loads
/// fragments, multiplies and issues its slice of copies as the kernel
/// does it ([`loads_fragments`], [`copy_slices`]), and [`end_k_step`]
/// commits, waits and meets at the barrier.
#[device]
pub fn pipeline<
    const BK: u32,
    const STEPS: u32,
    const COPY_SLICES: u32,
    const STAGES: u32,
    const ALIGNED: bool,
>(
    k: u32,
    interior: bool,
    mut start_step: impl FnMut(u32, u32, u32, bool),
    mut k_step: impl FnMut(u32, u32, u32, u32, u32, u32, u32),
) {
    let k_tiles = (k + BK - 1) / BK;
    // Counters, not `t % STAGES`: no division per step.
    let mut ws = 0u32;
    let mut rs = 1 % STAGES;
    let mut ns = 2 % STAGES;
    for t in 0..k_tiles + STAGES - 1 {
        let k0 = t * BK;
        start_step(t, k0, ws, t < k_tiles);
        let full = ALIGNED && interior && k0 + BK <= k;
        let computing = t >= STAGES - 1;
        #[unroll]
        for path in 0..3u32 {
            if takes_path(path, ALIGNED, computing, full) {
                #[unroll]
                for kk in 0..STEPS + 1 {
                    k_step(t, k0, path, kk, ws, rs, ns);
                    end_k_step::<STEPS, COPY_SLICES, STAGES>(kk, path, t);
                }
            }
        }
        // The stages rotate: this step's read stage is the next step's
        // write stage.
        ws = rs;
        rs = ns;
        ns = if ns + 1 == STAGES { 0 } else { ns + 1 };
    }
}
