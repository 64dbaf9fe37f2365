use warpforge::prelude::*;

#[kernel]
pub fn dot(a: &[f32], b: &[f32], out: &mut [f32], n: u32) {
    let mut acc = 0.0;
    #[unroll]
    for k in 0..n {
        acc += a[k] * b[k];
    }
    out[0] = acc;
}

fn main() {}
