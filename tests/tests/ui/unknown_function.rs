use warpforge::prelude::*;

#[kernel]
pub fn sync_then_copy(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    syncthreads();
    y[i] = x[i];
}

fn main() {}
