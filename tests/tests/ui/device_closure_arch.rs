use warpforge::prelude::*;

/// Runs `body` twice.
#[device]
fn twice(mut body: impl FnMut()) {
    body();
    body();
}

#[kernel(arch(sm_70))]
pub fn k(y: &mut [f32]) {
    let a = [0u32; 4];
    let b = [0u32; 2];
    let mut acc = [0.0f32; 4];
    twice(|| {
        acc[0] += 1.0;
        mma_m16n8k16_f16(&mut acc, &a, &b);
    });
    y[0] = acc[0];
}

fn main() {}
