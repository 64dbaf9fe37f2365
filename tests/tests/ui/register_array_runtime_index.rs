use warpforge::prelude::*;

#[kernel]
pub fn gather(x: &[f32], idx: &[u32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    let mut window = [0.0f32; 8];
    #[unroll]
    for k in 0..8u32 {
        window[k] = x[i * 8 + k];
    }
    y[i] = window[idx[i]];
}

fn main() {}
