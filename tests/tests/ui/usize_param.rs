use warpforge::prelude::*;

#[kernel]
pub fn fill(y: &mut [f32], n: usize, value: f32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < n {
        y[i] = value;
    }
}

fn main() {}
