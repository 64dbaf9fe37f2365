use warpforge::prelude::*;

#[kernel(block(256))]
pub fn block_sum(x: &[f32], out: &mut [f32]) {
    let mut partial = shared();
    let t = thread_idx().x;
    partial[t] = x[block_idx().x * 256 + t];
    sync_threads();
    if t == 0 {
        out[block_idx().x] = partial[0];
    }
}

fn main() {}
