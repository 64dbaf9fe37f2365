use warpforge::prelude::*;

#[device]
fn swizzled(row: u32, chunk: u32) -> u32 {
    row * 8 + (chunk ^ (row % 8))
}

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    let i = thread_idx().x;
    y[swizled(i, 1)] = x[i];
}

fn main() {}
