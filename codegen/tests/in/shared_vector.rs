// Shared-memory vector accesses. Vectorized: 4-wide stores (of registers,
// of computed values) and loads of `tile[r][c * 4 + i]`, a pair of `let`s,
// a pair into one variable (the later value wins), f64 pairs with a u64
// index (four consecutive f64 make two pairs), a u32 pair. Scalar: an odd
// base, `c + i` (alignment unknown), stride 2, two different arrays, a
// statement in between, an index that reads the previous load's
// destination, and stores interleaved between two arrays.
#[kernel(arch(sm_70, sm_80, sm_90), block(64))]
fn shared_vector(x: &[f32], y: &mut [f32], d: &mut [f64], u: &mut [u32]) {
    let mut tile: [[f32; 68]; 4] = shared();
    let mut other: [[f32; 68]; 4] = shared();
    let mut wide: [f64; 256] = shared();
    let mut idx: [u32; 128] = shared();
    let t = thread_idx().x;
    let r = t / 16;
    let c = t % 16;
    let mut v = [0.0f32; 4];
    #[unroll]
    for i in 0..4u32 {
        v[i] = x[t * 4 + i];
    }
    // st.shared.v4.f32, of registers and of computed values
    #[unroll]
    for i in 0..4u32 {
        tile[r][c * 4 + i] = v[i];
    }
    #[unroll]
    for i in 0..4u32 {
        other[r][c * 4 + i] = v[i] * 2.0;
    }
    // Two st.shared.v2.f64
    #[unroll]
    for i in 0..4u32 {
        wide[(t as u64) * 4 + i as u64] = v[i] as f64;
    }
    // st.shared.v2.u32
    idx[t * 2] = t;
    idx[t * 2 + 1] = t + 1;
    sync_threads();

    // ld.shared.v4.f32
    #[unroll]
    for i in 0..4u32 {
        v[i] = tile[r][c * 4 + i];
    }
    // ld.shared.v2.f32 into two `let`s
    let a0 = tile[r][c * 4 + 2];
    let a1 = tile[r][c * 4 + 3];
    // ld.shared.v2.f32 into one variable: s ends as tile[r][c * 4 + 1]
    let mut s = 0.0f32;
    s = tile[r][c * 4];
    s = tile[r][c * 4 + 1];
    y[t] = v[0] + v[1] + v[2] + v[3] + a0 + a1 + s;

    // Two ld.shared.v2.f64 (a 32-byte vector does not exist)
    let mut w = [0.0f64; 4];
    #[unroll]
    for i in 0..4u32 {
        w[i] = wide[(t as u64) * 4 + i as u64];
    }
    d[t] = w[0] + w[1] + w[2] + w[3];

    // Scalar: odd base
    #[unroll]
    for i in 0..2u32 {
        v[i] = tile[r][c * 4 + 1 + i];
    }
    // Scalar: alignment of `c` unknown
    #[unroll]
    for i in 0..4u32 {
        v[i] += tile[r][c + i];
    }
    // Scalar: stride 2
    #[unroll]
    for i in 0..2u32 {
        v[i + 2] = tile[r][c * 4 + 2 * i];
    }
    y[t + 64] = v[0] + v[1] + v[2] + v[3];
    // Scalar: two arrays
    v[0] = tile[r][c * 4];
    v[1] = other[r][c * 4 + 1];
    // Scalar: a statement in between
    v[2] = tile[r][c * 4];
    y[t + 128] = v[0] + v[1];
    v[3] = tile[r][c * 4 + 1];
    y[t + 192] = v[2] + v[3];
    // Scalar: the second index reads the first load's destination
    let mut k = t;
    k = idx[k * 2];
    let j = idx[k * 2 + 1];
    u[t] = j;
    sync_threads();
    // Scalar: stores to two arrays, interleaved
    #[unroll]
    for i in 0..4u32 {
        tile[r][c * 4 + i] = v[i];
        other[r][c * 4 + i] = v[i];
    }
}
