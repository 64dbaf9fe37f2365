use warpforge::prelude::*;

#[kernel]
pub fn relu(x: &[f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        x[i] = x[i].max(0.0);
    }
}

fn main() {}
