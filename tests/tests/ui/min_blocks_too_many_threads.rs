use warpforge::prelude::*;

// Four blocks of 1024 threads are more than an SM holds in the variant
// THREADS = 1024: the error names the variant and says how many fit.
#[kernel(block(THREADS), tune(THREADS = [256, 1024]), min_blocks_per_sm(4))]
pub fn scale<const THREADS: u32>(a: f32, y: &mut [f32]) {
    let i = block_idx().x * THREADS + thread_idx().x;
    if i < y.len() {
        y[i] *= a;
    }
}

fn main() {}
