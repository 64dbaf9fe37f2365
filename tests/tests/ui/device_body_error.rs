use warpforge::prelude::*;

#[device]
pub fn half(x: u32) -> u32 {
    x * 0.5
}

#[kernel]
pub fn k(y: &mut [u32]) {
    y[0] = half(4);
}

fn main() {}
