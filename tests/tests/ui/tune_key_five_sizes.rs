use warpforge::prelude::*;

#[kernel(block(256), tune(ITEMS = [1, 2]), tune_key(b, m, n, k, x))]
pub fn batched<const ITEMS: u32>(x: &[f32], y: &mut [f32], b: u32, m: u32, n: u32, k: u32) {
    let i = (block_idx().x * 256 + thread_idx().x) * ITEMS;
    if i < b * m * n * k {
        y[i] = x[i];
    }
}

fn main() {}
