//! Device functions: the example of warpforge/docs/dsl.md ("Device functions"), calls across modules and
//! nested calls, and a call to a function that `warpforge-kernels` exports.
#![deny(warnings, missing_docs)]

use warpforge::prelude::*;

/// Functions in a module of their own, called by path and through `use`.
pub mod tile {
    use warpforge::prelude::*;

    /// The index of chunk `chunk` of row `row` in a tile whose 8 chunks per row are XOR-swizzled.
    #[device]
    pub fn swizzled(row: u32, chunk: u32) -> u32 {
        row * 8 + (chunk ^ (row % 8))
    }

    /// Scales a row of a register array (or the whole of a 1-D one) in place.
    #[device]
    pub fn scale<const N: u32>(row: &mut [f32; N], s: f32) {
        #[unroll]
        for j in 0..N {
            row[j] *= s;
        }
    }

    /// Copies one element into a shared tile.
    #[device]
    pub fn stage(#[shared] tile: &mut [[f32; 8]; 64], x: &[f32], at: u32) {
        tile[at / 8][swizzled(at / 8, at % 8) % 8] = x[at];
    }
}

use tile::{scale, stage};

/// The example of warpforge/docs/dsl.md.
#[kernel(arch(sm_80), block(64))]
pub fn k(x: &[f32], y: &mut [f32]) {
    let mut tile: [[f32; 8]; 64] = shared();
    let mut acc = [[1.0f32; 4]; 2];
    #[unroll]
    for i in 0..2 {
        scale(&mut acc[i], 2.0); // N = 4, from the row's size
    }
    stage(&mut tile, x, thread_idx().x);
    sync_threads();
    y[thread_idx().x] = tile[thread_idx().x / 8][0] + acc[1][3];
}

/// A kernel that takes its tile from `warpforge-kernels`' tile order.
#[kernel(arch(sm_80, wgsl), tune(BM = [64, 128]))]
pub fn tiles<const BM: u32>(y: &mut [u32]) {
    let (row0, col0) = warpforge_kernels::tile::grouped_tile_order::<BM, 32>();
    let at = tile::swizzled(row0 / BM, col0 / 32);
    y[at] = row0 + col0;
}

/// Runs `body(i, start + i)` for each of `N` rows, unrolled (warpforge/docs/dsl.md, "Closures").
#[device]
pub fn for_each_row<const N: u32>(start: u32, mut body: impl FnMut(u32, u32)) {
    #[unroll]
    for i in 0..N {
        body(i, start + i);
    }
}

/// The closures example of warpforge/docs/dsl.md.
#[kernel(arch(sm_80), block(64))]
pub fn rows(x: &[f32], y: &mut [f32]) {
    let t = thread_idx().x * 4;
    let mut acc = [0.0f32; 4];
    for_each_row::<4>(t, |i, row| {
        acc[i] = x[row] * 2.0; // `i` is the unroll variable: a register index
    });
    y[t] = acc[0] + acc[3];
}

fn main() {
    let _ = (k::def(), tiles::variants(), rows::def(), launch_both);
}

/// Twice `x`, in any float type, computed in f32.
#[device]
pub fn double<T: Float>(x: T) -> T {
    (x as f32 * 2.0) as T
}

/// One kernel per element type (warpforge/docs/dsl.md, "Element-type generics").
#[kernel(arch(sm_80), instances(scale_f16 = <f16>, scale_bf16 = <bf16>))]
pub fn scale<T: Half>(x: &[T], y: &mut [T]) {
    let i = thread_idx().x;
    y[i] = double(x[i]);
}

/// The instances are kernels with typed launchers.
pub fn launch_both(
    rt: &Runtime,
    x: &DeviceBuffer<f16>,
    y: &mut DeviceBuffer<f16>,
    u: &DeviceBuffer<bf16>,
    v: &mut DeviceBuffer<bf16>,
) -> Result<(), Error> {
    scale_f16::launch(rt, Grid::linear(64, 64), x, y)?;
    scale_bf16::launch(rt, Grid::linear(64, 64), u, v)
}
