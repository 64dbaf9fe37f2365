// One warp computes a 16x16 tile with the Volta wmma operations: A from
// shared memory (row-major), B straight from global memory (column-major).
#[kernel(arch(sm_70, sm_80, sm_90), block(32))]
fn wmma(a: &[f16], b: &[f16], c: &mut [f32], k: u32) {
    let mut a_tile: [[f16; 16]; 16] = shared();
    let lane = lane_id();
    let mut fa = [0u32; 8];
    let mut fb = [0u32; 8];
    let mut acc = [0.0f32; 8];
    wmma_load_c_row(&mut acc, &c[0], 16);
    for k0 in (0..k).step_by(16) {
        #[unroll]
        for e in 0..8u32 {
            let i = lane * 8 + e;
            a_tile[i / 16][i % 16] = a[i / 16 * k + k0 + i % 16];
        }
        sync_threads();
        wmma_load_a_row(&mut fa, &a_tile[0][0], 16);
        wmma_load_b_col(&mut fb, &b[k0], k);
        wmma_mma_row_col(&mut acc, &fa, &fb);
        sync_threads();
    }
    #[unroll]
    for i in 0..8u32 {
        acc[i] = acc[i].max(0.0);
    }
    wmma_store_row(&mut c[0], &acc, 16);
}
