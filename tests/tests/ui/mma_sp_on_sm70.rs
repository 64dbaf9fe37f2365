use warpforge::prelude::*;

// The sm_80 sparse Tensor Core instruction in a kernel that is also built for sm_70.
#[kernel(arch(sm_70, sm_80), block(32))]
pub fn sparse_tile(meta: &[u32], c: &mut [f32]) {
    let a = [0u32; 4];
    let b = [0u32; 4];
    let mut acc = [0.0f32; 4];
    mma_sp_ordered_m16n8k32_f16(&mut acc, &a, &b, meta[lane_id()], 0);
    c[lane_id()] = acc[0];
}

fn main() {}
