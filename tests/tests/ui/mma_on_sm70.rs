use warpforge::prelude::*;

// An sm_80 Tensor Core instruction in a kernel that is also built for sm_70.
#[kernel(arch(sm_70, sm_80), block(32))]
pub fn mma_tile(c: &mut [f32]) {
    let a = [0u32; 4];
    let b = [0u32; 2];
    let mut acc = [0.0f32; 4];
    mma_m16n8k16_f16(&mut acc, &a, &b);
    c[lane_id()] = acc[0];
}

fn main() {}
