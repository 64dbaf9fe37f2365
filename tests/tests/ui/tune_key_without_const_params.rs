use warpforge::prelude::*;

#[kernel(block(256), tune_key(y))]
pub fn scale(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * 256 + thread_idx().x;
    if i < y.len() {
        y[i] = a * x[i];
    }
}

fn main() {}
