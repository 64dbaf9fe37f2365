use warpforge::prelude::*;

#[kernel]
pub fn sum_rows(m: &[f32], out: &mut [f32], cols: u32) {
    let row = block_idx().x * block_dim().x + thread_idx().x;
    let sum = 0.0;
    for c in 0..cols {
        sum += m[row * cols + c];
    }
    out[row] = sum;
}

fn main() {}
