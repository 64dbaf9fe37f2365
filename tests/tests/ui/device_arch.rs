use warpforge::prelude::*;

#[device]
fn mma(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
    mma_m16n8k16_f16(&mut acc, &a, &b);
}

#[kernel(arch(sm_70))]
pub fn k(y: &mut [f32]) {
    let a = [0u32; 4];
    let b = [0u32; 2];
    let mut acc = [0.0f32; 4];
    mma(&mut acc, &a, &b);
    y[0] = acc[0];
}

fn main() {}
