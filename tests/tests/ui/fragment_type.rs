use warpforge::prelude::*;

// Fragments are packed 32-bit words, not f16 values; the copy size is 4, 8 or 16 bytes.
#[kernel(arch(sm_80), block(32))]
pub fn bad_fragments(x: &[f16], c: &mut [f32]) {
    let mut tile: [[f16; 8]; 8] = shared();
    cp_async(&mut tile[0][0], &x[0], 12, 12);
    let mut a = [0.0f16; 8];
    ldmatrix_x4(&mut a, &tile[lane_id() % 8][0]);
    c[lane_id()] = 0.0;
}

fn main() {}
