use warpforge::prelude::*;

#[kernel(requires(x[0] > 0.0, y.len() >= x.len()))]
pub fn normalize(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        y[i] = x[i] / x[0];
    }
}

fn main() {}
