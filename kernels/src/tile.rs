//! Device functions the tiled kernels share, and that users' kernels may
//! call: the order in which blocks take their tiles, the swizzle of shared
//! tiles, the copies of a multistage `cp.async` pipeline, the `ldmatrix`
//! fragment loads, and the schedule of such a pipeline's main loop.
//!
//! # The pipelined main loop
//! The Tensor Core GEMMs (`gemm_tc`, `gemm_sparse`) keep `STAGES` k-tiles
//! of their operands in shared memory. Step `t` of the main loop issues the
//! copies of k-tile `t` into stage `t % STAGES` and commits them as one
//! group; from step `STAGES - 1` on it also computes k-tile `t - (STAGES -
//! 1)`, in `STEPS` MMA k steps, and issues its copies among those MMAs, a
//! slice per k step ([`copy_slice`]; all at the first k step with two
//! stages). Each k step's fragments are loaded one k step before its MMAs.
//! Before the tile's last k step the block waits until at most `STAGES - 2`
//! groups are in flight and meets at a barrier ([`end_k_step`]): that lands
//! the next tile, whose first fragments then load under the last k step's
//! MMAs, and frees this tile's stage for the next step's copies (CUTLASS's
//! multistage order). A step takes one of three forms ([`takes_path`]),
//! uniform over the block, each one block of straight-line code for ptxas
//! to schedule: 0 computes and copies a tile wholly inside the matrices with
//! plain 16-byte copies, 1 computes and copies at an edge with zero-filling
//! ones ([`copy_slice_edge`]), 2 (the first `STAGES - 1` steps) only copies.

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
    let id = block_idx().y * tiles_n + block_idx().x;
    let group_first = id / (8 * tiles_n) * 8;
    let group_rows = (grid_dim().y - group_first).min(8);
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

/// One slice of this thread's 16-byte copies of a k-tile into `tile` (a
/// stage), all inside the matrix: copy `l` of `N` writes row `row + l *
/// ROWS`, chunk start `col`, from `src[first + l * step + at]`. The copies
/// of a step are numbered across its operands (these are `before .. before
/// + N` of `all`), and copy `e` is issued in slice `e * slices / all`,
/// among the MMAs of k step `slice` ([the main loop](self)).
#[device]
pub fn copy_slice<const N: u32, const ROWS: u32, const W: u32, const R: u32, T>(
    #[shared] tile: &mut [[T; W]; R],
    src: &[T],
    row: u32,
    col: u32,
    first: u32,
    step: u32,
    at: u32,
    slice: u32,
    before: u32,
    slices: u32,
    all: u32,
) {
    #[unroll]
    for l in 0..N {
        if (before + l) * slices / all == slice {
            let r = row + l * ROWS;
            cp_async(&mut tile[r][col], &src[first + l * step + at], 16, 16);
        }
    }
}

/// [`copy_slice`] at an edge of the matrix: a chunk inside it reads its
/// first `bytes` (and zero-fills the rest); one past it reads nothing,
/// names element 0 and zero-fills. Row `l` of a k-contiguous tile (rows of
/// k values) is inside when `l * ROWS < room` and `in_mn` (`true`, or the
/// sparse A's test that the chunk is inside its row); of a tile of k rows
/// (`K_ROWS`) when `in_mn` (the thread's chunk is inside m or n) and its k,
/// `k0 + row + l * ROWS`, is below `k`.
#[device]
pub fn copy_slice_edge<
    const N: u32,
    const ROWS: u32,
    const K_ROWS: bool,
    const W: u32,
    const R: u32,
    T,
>(
    #[shared] tile: &mut [[T; W]; R],
    src: &[T],
    row: u32,
    col: u32,
    first: u32,
    step: u32,
    at: u32,
    bytes: u32,
    room: u32,
    in_mn: bool,
    k0: u32,
    k: u32,
    slice: u32,
    before: u32,
    slices: u32,
    all: u32,
) {
    #[unroll]
    for l in 0..N {
        if (before + l) * slices / all == slice {
            let r = row + l * ROWS;
            if K_ROWS {
                let inside = in_mn && k0 + r < k;
                let from = if inside { first + l * step + at } else { 0 };
                let read = if inside { bytes } else { 0 };
                cp_async(&mut tile[r][col], &src[from], 16, read);
            } else {
                let inside = l * ROWS < room && in_mn;
                let from = if inside { first + l * step + at } else { 0 };
                let read = if inside { bytes } else { 0 };
                cp_async(&mut tile[r][col], &src[from], 16, read);
            }
        }
    }
}

/// This thread's chunks of a k-tile copied element by element through
/// registers (for leading dimensions without 16-byte alignment): element
/// `q` of chunk `l` (of `N`) goes to `tile[row + l * ROWS][col + q]`, read
/// where it is inside the matrix and zero otherwise. A k-contiguous tile
/// reads `src[first + l * step + at + q]` for `l * ROWS < room` (the row)
/// and `at + q < k` (the element's k: `at` is the chunk's); a tile of k rows
/// (`K_ROWS`) reads `src[first + l * step + at + q]` for `mn0 + q < mn`
/// (the element's m or n) and `k0 + row + l * ROWS < k` (the row's k).
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
    row: u32,
    col: u32,
    first: u32,
    step: u32,
    at: u32,
    room: u32,
    mn0: u32,
    mn: u32,
    k0: u32,
    k: u32,
) {
    #[unroll]
    for l in 0..N {
        let r = row + l * ROWS;
        #[unroll]
        for q in 0..16 / T::BYTES {
            if K_ROWS {
                tile[r][col + q] = if mn0 + q < mn && k0 + r < k {
                    src[first + l * step + at + q]
                } else {
                    T::ZERO
                };
            } else {
                let gk = at + q;
                tile[r][col + q] = if l * ROWS < room && gk < k {
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
