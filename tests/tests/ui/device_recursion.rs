use warpforge::prelude::*;

#[device]
fn sum_to(n: u32) -> u32 {
    if n == 0 { 0 } else { n + sum_to(n - 1) }
}

#[kernel]
pub fn k(y: &mut [u32]) {
    y[0] = sum_to(4);
}

fn main() {}
