use warpforge::prelude::*;

#[kernel(tune(TILE = [16, 32]))]
pub fn transpose<const TILE: u32, const PAD: u32>(x: &[f32], y: &mut [f32], n: u32) {
    let mut tile: [[f32; TILE + PAD]; TILE] = shared();
    let r = thread_idx().y;
    let c = thread_idx().x;
    tile[r][c] = x[(block_idx().y * TILE + r) * n + block_idx().x * TILE + c];
    sync_threads();
    y[(block_idx().x * TILE + r) * n + block_idx().y * TILE + c] = tile[c][r];
}

fn main() {}
