// One warpgroup multiplies a 64 x 64 tile of A by a 64 x N tile of B (both
// K-major in shared memory, f16 and bf16) with a chain of four m64nNk16
// wgmmas per tile: 128-byte swizzled tiles stepped along k inside the row,
// and unswizzled core-matrix tiles stepped by their k groups. The first
// wgmma of each chain overwrites the accumulators.
#[kernel(arch(sm_90a), block(128), tune(N = [64, 256]))]
fn wgmma<const N: u32>(a: &[f16], b: &[f16], c: &mut [f32]) {
    let mut a_swizzled: [[f16; 64]; 64] = shared();
    let mut b_swizzled: [[f16; 64]; N] = shared();
    let mut a_plain: [[[bf16; 8]; 64]; 8] = shared();
    let mut b_plain: [[[bf16; 8]; N]; 8] = shared();
    let t = thread_idx().x;
    for i in (t..64 * 64).step_by(128) {
        a_swizzled[i / 64][i % 64] = a[i];
        a_plain[i % 64 / 8][i / 64][i % 8] = a[i] as f32 as bf16;
    }
    for i in (t..N * 64).step_by(128) {
        b_swizzled[i / 64][i % 64] = b[i];
        b_plain[i % 64 / 8][i / 64][i % 8] = b[i] as f32 as bf16;
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [[0.0f32; N / 2]; 2];
    wgmma_fence();
    #[unroll]
    for k in 0..4u32 {
        wgmma_m64k16_f16::<N>(
            &mut acc[0],
            matrix_desc(&a_swizzled[0][k * 16], 128),
            matrix_desc(&b_swizzled[0][k * 16], 128),
            k > 0,
        );
        wgmma_m64k16_bf16::<N>(
            &mut acc[1],
            matrix_desc(&a_plain[k * 2][0][0], 0),
            matrix_desc(&b_plain[k * 2][0][0], 0),
            k > 0,
        );
    }
    wgmma_commit();
    wgmma_wait(0);
    #[unroll]
    for j in 0..N / 2 {
        c[t * N + j] = acc[0][j] + acc[1][j];
    }
}
