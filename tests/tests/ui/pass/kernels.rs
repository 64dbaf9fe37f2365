//! Kernels that use most of the language compile without warnings, and their launchers have
//! the expected types.
#![deny(warnings, missing_docs)]

use warpforge::prelude::*;

/// y = a * x + y
#[kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// A tiled matrix product, c = a * b.
#[kernel(
    arch(sm_80, sm_90),
    block(BM * BN / (TM * TN)),
    tune(BM = [64, 128], BN = [64, 128], TM = [4, 8], TN = [4]),
    requires(a.len() >= m * k, b.len() >= k * n, c.len() >= m * n)
)]
pub fn gemm<const BM: u32, const BN: u32, const TM: u32, const TN: u32>(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: u32,
    n: u32,
    k: u32,
) {
    let mut a_tile: [[f32; 8]; BM] = shared();
    let mut acc = [[0.0; TN]; TM];
    let threads_per_row = BN / TN;
    let row0 = block_idx().y * BM + thread_idx().x / threads_per_row * TM;
    let col0 = block_idx().x * BN + thread_idx().x % threads_per_row * TN;
    for k0 in (0..k).step_by(8) {
        for r in (thread_idx().x..BM).step_by(BM * BN / (TM * TN)) {
            #[unroll]
            for kk in 0..8 {
                let row = block_idx().y * BM + r;
                a_tile[r][kk] = if row < m && k0 + kk < k { a[row * k + k0 + kk] } else { 0.0 };
            }
        }
        sync_threads();
        #[unroll]
        for kk in 0..8 {
            #[unroll]
            for i in 0..TM {
                #[unroll]
                for j in 0..TN {
                    let col = col0 + j;
                    if col < n && k0 + kk < k {
                        acc[i][j] += a_tile[row0 % BM + i][kk] * b[(k0 + kk) * n + col];
                    }
                }
            }
        }
        sync_threads();
    }
    #[unroll]
    for i in 0..TM {
        #[unroll]
        for j in 0..TN {
            if row0 + i < m && col0 + j < n {
                c[(row0 + i) * n + col0 + j] = acc[i][j];
            }
        }
    }
}

/// Counts values into bins.
#[kernel(tune(WIDE = [true, false]))]
fn histogram<const WIDE: bool>(data: &[u32], bins: &mut [u32], scale: f16) {
    let mut i = block_idx().x * block_dim().x + thread_idx().x;
    loop {
        if i >= data.len() {
            break;
        }
        let bin = if WIDE { data[i] >> 2 } else { data[i] & 255 };
        let _ = atomic_add(&mut bins[bin % bins.len()], 1);
        i += grid_dim().x * block_dim().x;
    }
    let _ = scale;
}

/// Takes no arguments at all.
#[kernel(block(32))]
pub fn barrier_only() {
    sync_threads();
}

fn main() {
    // Launchers are typed functions: calls that are never made (there is no
    // GPU here) check what they take, a whole buffer or a view of one.
    let _saxpy = |rt: &Runtime, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>| -> Result<(), Error> {
        saxpy::launch(rt, Grid::linear(1, 32), 2.0, x, &mut *y)?;
        saxpy::launch(rt, Grid::linear(1, 32), 2.0, x.slice(64..)?, y.slice_mut(..64)?)
    };
    let _gemm = |rt: &Runtime, a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>, c: &mut DeviceBuffer<f32>| {
        let consts = gemm::Consts { BM: 64, BN: 128, TM: 8, TN: 4 };
        gemm::launch(rt, consts, Grid::blocks([1, 1, 1]), a, b, c, 1u32, 1u32, 1u32)
    };
    let _histogram = |rt: &Runtime, data: &DeviceBuffer<u32>, bins: &mut DeviceBuffer<u32>| {
        let consts = histogram::Consts { WIDE: true };
        histogram::launch(rt, consts, Grid::blocks([1, 1, 1]), data, bins, f16::ONE)
    };
    let _: fn(&Runtime, Grid) -> Result<(), Error> = barrier_only::launch;
    let _: fn() -> &'static warpforge::__private::KernelDef = saxpy::def;
    let _: fn() -> Vec<gemm::Consts> = gemm::variants;
    let consts = gemm::Consts { BM: 64, BN: 128, TM: 8, TN: 4 };
    let _: Vec<i64> = consts.values();
}
