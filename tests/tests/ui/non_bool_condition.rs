use warpforge::prelude::*;

#[kernel]
pub fn masked_copy(x: &[f32], mask: &[u32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if mask[i] {
        y[i] = x[i];
    }
}

fn main() {}
