use warpforge::prelude::*;

#[kernel]
pub fn scale(x: Vec<f32>, factor: f32) {
    let i = thread_idx().x;
    x[i] = x[i] * factor;
}

fn main() {}
