// The wgmma forms beyond the 16-bit ones, each a chain of two wgmmas that
// steps k by 32 bytes: tf32 (m64nNk8, `f32` tiles, 128-byte swizzle), s8
// and u8 (m64nNk32, `i32` accumulators; unswizzled core matrices and the
// generic form, 64-byte swizzle), e4m3 and e5m2 (m64nNk32: a 32-byte
// swizzled e4m3 A of one k step against a 64-byte swizzled B, and e5m2 in
// unswizzled core matrices). The first wgmma of each chain overwrites its
// accumulators.
#[kernel(arch(sm_90a), block(128), tune(N = [64, 256]))]
fn wgmma_types<const N: u32>(
    x: &[f32],
    q: &[i8],
    p: &[u8],
    e4: &[e4m3],
    e5: &[e5m2],
    c: &mut [f32],
    ci: &mut [i32],
) {
    let mut a_tf32: [[f32; 32]; 64] = shared();
    let mut b_tf32: [[f32; 32]; N] = shared();
    let mut a_s8: [[[i8; 16]; 64]; 4] = shared();
    let mut b_s8: [[[i8; 16]; N]; 4] = shared();
    let mut a_u8: [[u8; 64]; 64] = shared();
    let mut b_u8: [[u8; 64]; N] = shared();
    let mut a_e4m3: [[e4m3; 32]; 64] = shared();
    let mut b_e4m3: [[e4m3; 64]; N] = shared();
    let mut b_e5m2: [[[e5m2; 16]; N]; 4] = shared();
    let t = thread_idx().x;
    for i in (t..64 * 64).step_by(128) {
        a_tf32[i / 64][i % 32] = x[i];
        a_s8[i % 64 / 16][i / 64][i % 16] = q[i];
        a_u8[i / 64][i % 64] = p[i];
        a_e4m3[i / 64][i % 32] = e4[i];
    }
    for i in (t..N * 64).step_by(128) {
        b_tf32[i / 64][i % 32] = x[i];
        b_s8[i % 64 / 16][i / 64][i % 16] = q[i];
        b_u8[i / 64][i % 64] = p[i];
        b_e4m3[i / 64][i % 64] = e4[i];
        b_e5m2[i % 64 / 16][i / 64][i % 16] = e5[i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [[0.0f32; N / 2]; 3];
    let mut acc_int = [[0i32; N / 2]; 2];
    wgmma_fence();
    #[unroll]
    for k in 0..2u32 {
        wgmma_m64k8_tf32::<N>(
            &mut acc[0],
            matrix_desc(&a_tf32[0][k * 8], 128),
            matrix_desc(&b_tf32[0][k * 8], 128),
            k > 0,
        );
        wgmma_m64k32_s8::<N>(
            &mut acc_int[0],
            matrix_desc(&a_s8[k * 2][0][0], 0),
            matrix_desc(&b_s8[k * 2][0][0], 0),
            k > 0,
        );
        wgmma_m64k32::<u8, N>(
            &mut acc_int[1],
            matrix_desc(&a_u8[0][k * 32], 64),
            matrix_desc(&b_u8[0][k * 32], 64),
            k > 0,
        );
        wgmma_m64k32_e4m3::<N>(
            &mut acc[1],
            matrix_desc(&a_e4m3[0][0], 32),
            matrix_desc(&b_e4m3[0][k * 32], 64),
            k > 0,
        );
        wgmma_m64k32_e5m2::<N>(
            &mut acc[2],
            matrix_desc(&b_e5m2[k * 2][0][0], 0),
            matrix_desc(&b_e5m2[k * 2][0][0], 0),
            k > 0,
        );
    }
    wgmma_commit();
    wgmma_wait(0);
    #[unroll]
    for j in 0..N / 2 {
        c[t * N + j] = acc[0][j] + acc[1][j] + acc[2][j];
        ci[t * N + j] = acc_int[0][j] + acc_int[1][j];
    }
}
