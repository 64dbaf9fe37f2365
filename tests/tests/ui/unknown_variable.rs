use warpforge::prelude::*;

#[kernel]
pub fn offset(x: &[f32], y: &mut [f32], shift: u32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i + shift < x.len() {
        y[i] = x[i + shfit];
    }
}

fn main() {}
