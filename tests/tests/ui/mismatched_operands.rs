use warpforge::prelude::*;

#[kernel]
pub fn ramp(y: &mut [f32], step: f32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < y.len() {
        y[i] = step * i;
    }
}

fn main() {}
