//! Device functions the tiled kernels share, and that users' kernels may
//! call: the order in which blocks take their tiles.

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
