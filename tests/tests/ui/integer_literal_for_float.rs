use warpforge::prelude::*;

#[kernel]
pub fn double(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        y[i] = x[i] * 2;
    }
}

fn main() {}
