use warpforge::prelude::*;

#[device]
fn widen<T: Half>(x: &[T], i: u32) -> f32 {
    x[i] as f32
}

#[kernel]
pub fn k(x: &[f32], y: &mut [f32]) {
    y[0] = widen(x, 0);
}

fn main() {}
