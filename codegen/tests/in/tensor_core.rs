// One warp multiplies a 16x16 f16 tile of A by a 16x8 tile of B four ways:
// f16 and bf16 (m16n8k16), tf32 (m16n8k8, operands rounded in registers) and
// s8 (m16n8k32), with ldmatrix (plain and transposed) from shared memory.
#[kernel(arch(sm_80, sm_90), block(32))]
fn tensor_core(a: &[f16], b: &[f16], x: &[f32], q: &[i8], c: &mut [f32], d: &mut [i32]) {
    let mut a_tile: [[f16; 16]; 16] = shared();
    let mut b_tile: [[f16; 16]; 8] = shared();
    let mut q_tile: [[i8; 32]; 16] = shared();
    let lane = lane_id();
    // Lanes 0..16 copy A, two 16-byte copies each (its row `lane`, zero-filled
    // past the slice), and B, one each; every lane copies 16 bytes of Q.
    if lane < 16 {
        #[unroll]
        for h in 0..2u32 {
            let chunk = lane * 2 + h;
            let at = chunk * 8;
            let bytes = if at < a.len() { (a.len() - at).min(8) * 2 } else { 0 };
            let src = if bytes > 0 { at } else { 0 };
            cp_async(&mut a_tile[chunk / 2][chunk % 2 * 8], &a[src], 16, bytes);
        }
        cp_async(&mut b_tile[lane / 2][lane % 2 * 8], &b[lane * 8], 16, 16);
    }
    cp_async(&mut q_tile[lane / 2][lane % 2 * 16], &q[lane * 16], 16, 16);
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();

    let mut fa = [0u32; 4];
    let mut fb = [0u32; 2];
    let mut fbt = [0u32; 2];
    ldmatrix_x4(&mut fa, &a_tile[lane % 16][lane / 16 * 8]);
    ldmatrix_x2(&mut fb, &b_tile[lane % 8][lane / 8 % 2 * 8]);
    ldmatrix_x2_trans(&mut fbt, &a_tile[lane % 16][0]);
    let mut acc = [[0.0f32; 4]; 3];
    mma_m16n8k16_f16(&mut acc[0], &fa, &fb);
    mma_m16n8k16_bf16(&mut acc[1], &fa, &fbt);

    let g = lane / 4;
    let t = lane % 4;
    let mut ta = [0u32; 4];
    let mut tb = [0u32; 2];
    #[unroll]
    for r in 0..4u32 {
        ta[r] = to_tf32(x[(g + r % 2 * 8) * 8 + t + r / 2 * 4]);
    }
    tb[0] = to_tf32(x[t * 8 + g]);
    tb[1] = pack_f16x2(x[g], x[t]) ^ pack_bf16x2(x[t], x[g]);
    mma_m16n8k8_tf32(&mut acc[2], &ta, &tb);

    let mut qa = [0u32; 4];
    let mut qb = [0u32; 2];
    ldmatrix_x4(&mut qa, &q_tile[lane % 16][lane / 16 * 16]);
    ldmatrix_x2(&mut qb, &q_tile[lane % 8][lane / 8 % 2 * 16]);
    let mut iacc = [0i32; 4];
    mma_m16n8k32_s8(&mut iacc, &qa, &qb);
    mma_m16n8k32_u8(&mut iacc, &qa, &qb);

    #[unroll]
    for i in 0..4u32 {
        c[lane * 4 + i] = acc[0][i] + acc[1][i] + acc[2][i];
        d[lane * 4 + i] = iacc[i];
    }
}
