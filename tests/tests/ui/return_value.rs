use warpforge::prelude::*;

#[kernel]
pub fn norm(x: &[f32]) -> f32 {
    let i = thread_idx().x;
    x[i] * x[i]
}

fn main() {}
