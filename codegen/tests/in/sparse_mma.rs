// One warp multiplies a 2:4 sparse 16x64 tile of A (compressed to 16x32 f16,
// loaded with ldmatrix.x4 per 32-wide k step) by a 64x8 tile of B: two
// m16n8k32 `mma.sp` steps whose metadata is one word per lane (selector 0,
// then 1), in both PTX forms (`ORDERED`), and the bf16 form on the same words.
#[kernel(arch(sm_80, sm_90), block(32), tune(ORDERED = [false, true]))]
fn sparse_mma<const ORDERED: bool>(a: &[f16], b: &[f16], meta: &[u32], c: &mut [f32]) {
    let mut a_tile: [[f16; 32]; 16] = shared();
    let lane = lane_id();
    // Two 16-byte copies per lane: the 16x32 tile is 64 chunks of 8.
    #[unroll]
    for h in 0..2u32 {
        let chunk = lane * 2 + h;
        cp_async(&mut a_tile[chunk / 4][chunk % 4 * 8], &a[chunk * 8], 16, 16);
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();

    let g = lane / 4;
    let t = lane % 4;
    let e = meta[lane];
    let mut acc = [[0.0f32; 4]; 2];
    let mut fa = [0u32; 4];
    let mut fb = [0u32; 4];
    #[unroll]
    for s in 0..2u32 {
        ldmatrix_x4(&mut fa, &a_tile[lane % 16][s * 16 + lane / 16 * 8]);
        #[unroll]
        for i in 0..4u32 {
            let k = s * 32 + 2 * t + 8 * i;
            fb[i] = pack_f16x2(b[g * 64 + k] as f32, b[g * 64 + k + 1] as f32);
        }
        if ORDERED {
            mma_sp_ordered_m16n8k32_f16(&mut acc[0], &fa, &fb, e, s);
            mma_sp_ordered_m16n8k32_bf16(&mut acc[1], &fa, &fb, e, s);
        } else {
            mma_sp_m16n8k32_f16(&mut acc[0], &fa, &fb, e, s);
            mma_sp_m16n8k32_bf16(&mut acc[1], &fa, &fb, e, s);
        }
    }
    #[unroll]
    for i in 0..4u32 {
        c[lane * 4 + i] = acc[0][i] + acc[1][i];
    }
}
