use warpforge::prelude::*;

// No `arch(..)`: built for every target, WGSL included, which has no f64.
#[kernel]
pub fn scale64(a: f64, x: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        x[i] = (x[i] as f64 * a) as f32;
    }
}

fn main() {}
