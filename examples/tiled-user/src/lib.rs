//! A user's crate of warpforge kernels: a tiled, scaled matrix transpose
//! (`y = alpha * x^T`) built from device functions, its own and one of
//! `warpforge-kernels`.
//!
//! Each block moves one `BM x BN` tile of `x`: it finds the tile with
//! [`grouped_tile_order`] (the tile order of the stock GEMMs), copies it into
//! a shared-memory tile with [`load_tile`], waits for the whole block, and
//! writes it transposed with [`store_transposed`]. Both copies walk global
//! memory along rows, so that consecutive threads touch consecutive
//! elements; the transpose itself happens in shared memory, whose rows are
//! padded by one element so that reading a column does not hit one bank
//! over and over.
//!
//! The kernel is generic over its element type ([`transpose_f32`],
//! [`transpose_i32`]) and its tile size (`BM`, `BN`), and is built for sm_80
//! and for WGSL, so it runs on NVIDIA GPUs through CUDA and on any Vulkan,
//! Metal or DX12 adapter through wgpu (Mesa's lavapipe included).
//! [`grid`] is its launch grid and [`transpose_reference`] the CPU result.

use std::ops::Mul;

use warpforge::prelude::*;
use warpforge_kernels::tile::grouped_tile_order;

/// The offset of element (`row`, `col`) of a row-major matrix with `ld`
/// elements per row.
#[device]
pub fn row_major(row: u32, col: u32, ld: u32) -> u32 {
    row * ld + col
}

/// This thread's index in its block and the number of threads in the block:
/// the start and the step of a loop that shares work among the block's
/// threads.
#[device]
pub fn block_thread() -> (u32, u32) {
    let nx = block_dim().x;
    let ny = block_dim().y;
    let tid = (thread_idx().z * ny + thread_idx().y) * nx + thread_idx().x;
    (tid, nx * ny * block_dim().z)
}

/// Copies the `BM x BN` tile whose first element is (`row0`, `col0`) of `x`
/// (row-major, `rows x cols`) into `tile`, all the block's threads together,
/// consecutive threads reading consecutive elements of a row. Elements past
/// the matrix's last row or column are not copied.
#[device]
pub fn load_tile<T: Number, const BM: u32, const BN: u32>(
    #[shared] tile: &mut [[T; BN + 1]; BM],
    x: &[T],
    rows: u32,
    cols: u32,
    row0: u32,
    col0: u32,
) {
    let (tid, threads) = block_thread();
    for e in (tid..BM * BN).step_by(threads) {
        let r = e / BN;
        let c = e % BN;
        if row0 + r < rows && col0 + c < cols {
            tile[r][c] = x[row_major(row0 + r, col0 + c, cols)];
        }
    }
}

/// Writes `alpha` times the transpose of the tile that [`load_tile`] copied
/// from (`row0`, `col0`) of a `rows x cols` matrix into `y` (row-major,
/// `cols x rows`): element (`r`, `c`) of the tile goes to (`col0 + c`,
/// `row0 + r`) of `y`. Consecutive threads write consecutive elements of a
/// row of `y`, so they read a column of the tile.
#[device]
pub fn store_transposed<T: Number, const BM: u32, const BN: u32>(
    #[shared] tile: &[[T; BN + 1]; BM],
    alpha: T,
    y: &mut [T],
    rows: u32,
    cols: u32,
    row0: u32,
    col0: u32,
) {
    let (tid, threads) = block_thread();
    for e in (tid..BM * BN).step_by(threads) {
        let c = e / BM;
        let r = e % BM;
        if row0 + r < rows && col0 + c < cols {
            y[row_major(col0 + c, row0 + r, rows)] = alpha * tile[r][c];
        }
    }
}

/// `y = alpha * x^T` for a row-major `rows x cols` matrix `x` (`y` is
/// `cols x rows`, row-major), one `BM x BN` tile of `x` per block of 256
/// threads. Launch it on the grid of [`crate::grid`]; every element of `y`
/// is written.
///
/// One kernel per element type: `transpose_f32` and `transpose_i32`, each
/// with its `Consts` (`BM`, `BN`) and `variants()`.
#[kernel(
    arch(sm_80, wgsl),
    block(256),
    tune(BM = [32, 64], BN = [32, 64]),
    instances(transpose_f32 = <f32>, transpose_i32 = <i32>),
    requires(x.len() == rows * cols, y.len() == x.len())
)]
pub fn transpose<T: Number, const BM: u32, const BN: u32>(
    alpha: T,
    x: &[T],
    y: &mut [T],
    rows: u32,
    cols: u32,
) {
    let mut tile: [[T; BN + 1]; BM] = shared();
    let (row0, col0) = grouped_tile_order::<BM, BN>();
    load_tile::<T, BM, BN>(&mut tile, x, rows, cols, row0, col0);
    sync_threads();
    store_transposed::<T, BM, BN>(&tile, alpha, y, rows, cols, row0, col0);
}

/// The grid of the transpose kernels ([`transpose_f32`], [`transpose_i32`])
/// for a `rows x cols` matrix in tiles of `bm x bn`: (column tiles, row
/// tiles) blocks, the plain grid that [`grouped_tile_order`] renumbers. An
/// empty matrix gives an empty grid, which the launch refuses.
pub fn grid(rows: u32, cols: u32, bm: u32, bn: u32) -> Grid {
    Grid::blocks([cols.div_ceil(bn), rows.div_ceil(bm), 1])
}

/// `alpha * x^T` on the CPU, for a row-major `rows x cols` matrix `x`.
pub fn transpose_reference<T: Copy + Mul<Output = T>>(
    alpha: T,
    x: &[T],
    rows: usize,
    cols: usize,
) -> Vec<T> {
    assert_eq!(x.len(), rows * cols, "x is not {rows} x {cols}");
    (0..cols * rows)
        .map(|at| {
            let (c, r) = (at / rows, at % rows);
            alpha * x[r * cols + c]
        })
        .collect()
}
