use warpforge::prelude::*;

#[kernel]
pub fn activate(x: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    let relu = |v: f32| v.max(0.0);
    x[i] = relu(x[i]);
}

fn main() {}
