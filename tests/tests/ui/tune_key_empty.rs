use warpforge::prelude::*;

#[kernel(block(256), tune(ITEMS = [1, 2]), tune_key())]
pub fn copy<const ITEMS: u32>(x: &[f32], y: &mut [f32]) {
    let i = (block_idx().x * 256 + thread_idx().x) * ITEMS;
    if i < y.len() {
        y[i] = x[i];
    }
}

fn main() {}
