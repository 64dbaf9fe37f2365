use warpforge::prelude::*;

#[device]
fn widen(x: f32) -> f32 {
    ((x as f64) * 2.0) as f32
}

#[kernel(arch(wgsl))]
pub fn k(y: &mut [f32]) {
    y[0] = widen(y[1]);
}

fn main() {}
