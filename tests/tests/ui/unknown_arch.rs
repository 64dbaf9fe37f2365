use warpforge::prelude::*;

#[kernel(arch(sm_80, sm_75))]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < y.len() {
        y[i] += a * x[i];
    }
}

fn main() {}
