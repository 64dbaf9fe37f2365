// C = A * B (row-major, m x k times k x n): shared tiles, a TM x TN register
// tile per thread, #[unroll]ed inner loops.
#[kernel(
    block(BM * BN / (TM * TN)),
    tune(BM = [64], BN = [64], BK = [8], TM = [4], TN = [4]),
    requires(a.len() >= m * k, b.len() >= k * n, c.len() >= m * n)
)]
fn gemm_simt<const BM: u32, const BN: u32, const BK: u32, const TM: u32, const TN: u32>(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: u32,
    n: u32,
    k: u32,
) {
    let mut a_tile: [[f32; BM]; BK] = shared();
    let mut b_tile: [[f32; BN]; BK] = shared();
    let mut acc = [[0.0f32; TN]; TM];
    let mut a_frag = [0.0f32; TM];
    let mut b_frag = [0.0f32; TN];
    let threads = BM * BN / (TM * TN);
    let t = thread_idx().x;
    let row0 = block_idx().y * BM;
    let col0 = block_idx().x * BN;
    let ty = t / (BN / TN);
    let tx = t % (BN / TN);
    let mut k0 = 0u32;
    while k0 < k {
        // Cooperative loads: A transposed into a_tile[kk][mm], B as is.
        let mut e = t;
        while e < BM * BK {
            let mm = e / BK;
            let kk = e % BK;
            let r = row0 + mm;
            let cc = k0 + kk;
            a_tile[kk][mm] = if r < m && cc < k { a[r * k + cc] } else { 0.0 };
            e += threads;
        }
        e = t;
        while e < BK * BN {
            let kk = e / BN;
            let nn = e % BN;
            let r = k0 + kk;
            let cc = col0 + nn;
            b_tile[kk][nn] = if r < k && cc < n { b[r * n + cc] } else { 0.0 };
            e += threads;
        }
        sync_threads();
        #[unroll]
        for kk in 0..BK {
            #[unroll]
            for i in 0..TM {
                a_frag[i] = a_tile[kk][ty * TM + i];
            }
            #[unroll]
            for j in 0..TN {
                b_frag[j] = b_tile[kk][tx * TN + j];
            }
            #[unroll]
            for i in 0..TM {
                #[unroll]
                for j in 0..TN {
                    acc[i][j] = a_frag[i].mul_add(b_frag[j], acc[i][j]);
                }
            }
        }
        sync_threads();
        k0 += BK;
    }
    #[unroll]
    for i in 0..TM {
        #[unroll]
        for j in 0..TN {
            let r = row0 + ty * TM + i;
            let cc = col0 + tx * TN + j;
            if r < m && cc < n {
                c[r * n + cc] = acc[i][j];
            }
        }
    }
}
