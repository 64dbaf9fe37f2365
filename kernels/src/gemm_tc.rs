//! Tensor Core GEMMs (sm_80 `mma.sync` through `ldmatrix`, multistage
//! `cp.async` pipelines, XOR-swizzled shared tiles), written in the DSL.

use warpforge::prelude::*;

/// f16 GEMM with f32 accumulation: `C = alpha * A B + beta * C` for row-major
/// `A` (m x k), column-major `B` (stored as n rows of k, the "TN" form) and
/// row-major f16 `C` (m x n); any m, n and k.
///
/// `ALIGNED` variants copy global tiles with 16-byte `cp.async` and take k a
/// multiple of 8 (so that every row starts 16-byte aligned); the others load
/// element by element (synchronously, 2 stages) and take any k.
///
/// The block computes a `BM x BN` tile of C with `(BM / WARP) * (BN / WARP)`
/// warps, each a `WARP x WARP` warp tile of `m16n8k16` products: per 16-wide
/// k step a warp loads `WARP / 16` A fragments and `WARP / 8` B fragments with
/// `ldmatrix.x4` and issues `(WARP / 16) * (WARP / 8)` MMAs.
///
/// Shared tiles hold `STAGES` k-tiles of A (`BM x BK`) and B (`BN x BK`), k
/// contiguous. A row of `BK` f16 is `BK / 8` 16-byte chunks; chunk `ch` of row
/// `r` is stored at chunk `ch ^ phase(r)`, `phase(r) = (r / (64 / BK)) % (BK / 8)`
/// (ptx-notes.md §7). The 8 rows an `ldmatrix` matrix reads then fall in 8
/// distinct 16-byte bank groups (BK = 64: rows are 128 bytes and `phase = r % 8`;
/// BK = 32: two rows share 128 bytes and `phase = (r / 2) % 4`), and so do the
/// copies of 8 consecutive threads.
///
/// Pipeline (ptx-notes.md §5): step `t` issues the copies of k-tile `t` into
/// stage `t % STAGES` and commits them as one group; from step `STAGES - 1` on
/// it also computes k-tile `t - (STAGES - 1)`, after waiting until at most
/// `STAGES - 2` groups are in flight and a barrier (which also frees the stage
/// the step refills: every warp has finished computing it). Copies past `k`
/// read nothing and zero-fill, so ragged tiles need no branches. `STAGES = 1`
/// waits for its own copies and puts a second barrier after the math.
#[kernel(
    arch(sm_80, sm_90),
    block(BM / WARP * (BN / WARP) * 32),
    tune(
        BM = [64, 128, 256],
        BN = [64, 128, 256],
        BK = [32, 64],
        WARP = [32, 64],
        STAGES = [1, 2, 3, 4, 5],
        ALIGNED = [true, false]
    ),
    constrain(
        BM / WARP * (BN / WARP) >= 4,
        BM / WARP * (BN / WARP) <= 8,
        BM <= 2 * BN,
        BN <= 2 * BM,
        ALIGNED || STAGES == 2,
        STAGES * (BM + BN) * BK * 2 <= 163 * 1024
    ),
    requires(a.len() >= m * k, b.len() >= n * k, c.len() >= m * n, !ALIGNED || k % 8 == 0)
)]
pub fn gemm_f16<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WARP: u32,
    const STAGES: u32,
    const ALIGNED: bool,
>(
    a: &[f16],
    b: &[f16],
    c: &mut [f16],
    m: u32,
    n: u32,
    k: u32,
    alpha: f32,
    beta: f32,
) {
    let mut a_tile: [[[f16; BK]; BM]; STAGES] = shared();
    let mut b_tile: [[[f16; BK]; BN]; STAGES] = shared();
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;
    let wm0 = warp / (BN / WARP) * WARP;
    let wn0 = warp % (BN / WARP) * WARP;
    let row0 = block_idx().y * BM;
    let col0 = block_idx().x * BN;

    let mut acc = [[[0.0f32; 4]; WARP / 8]; WARP / 16];
    let mut a_frag = [[0u32; 4]; WARP / 16];
    let mut b_pair = [[0u32; 4]; WARP / 16];
    let mut b_frag = [[0u32; 2]; WARP / 8];

    let k_tiles = (k + BK - 1) / BK;
    for t in 0..k_tiles + STAGES - 1 {
        if STAGES > 1 && t >= STAGES - 1 {
            cp_async_wait(STAGES - 2);
            sync_threads();
        }
        if t < k_tiles {
            let st = t % STAGES;
            let k0 = t * BK;
            #[unroll]
            for l in 0..BM * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                let e = tid + l * (BM / WARP * (BN / WARP) * 32);
                let r = e / (BK / 8);
                let ch = e % (BK / 8);
                let gr = row0 + r;
                let gk = k0 + ch * 8;
                let ok = gr < m && gk < k;
                let bytes = if ok { (k - gk).min(8) * 2 } else { 0 };
                let src = if ok { gr * k + gk } else { 0 };
                let dst = (ch ^ (r / (64 / BK) % (BK / 8))) * 8;
                if ALIGNED {
                    cp_async(&mut a_tile[st][r][dst], &a[src], 16, bytes);
                } else {
                    #[unroll]
                    for q in 0..8u32 {
                        a_tile[st][r][dst + q] = if ok && gk + q < k { a[src + q] } else { 0.0 };
                    }
                }
            }
            #[unroll]
            for l in 0..BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                let e = tid + l * (BM / WARP * (BN / WARP) * 32);
                let r = e / (BK / 8);
                let ch = e % (BK / 8);
                let gr = col0 + r;
                let gk = k0 + ch * 8;
                let ok = gr < n && gk < k;
                let bytes = if ok { (k - gk).min(8) * 2 } else { 0 };
                let src = if ok { gr * k + gk } else { 0 };
                let dst = (ch ^ (r / (64 / BK) % (BK / 8))) * 8;
                if ALIGNED {
                    cp_async(&mut b_tile[st][r][dst], &b[src], 16, bytes);
                } else {
                    #[unroll]
                    for q in 0..8u32 {
                        b_tile[st][r][dst + q] = if ok && gk + q < k { b[src + q] } else { 0.0 };
                    }
                }
            }
        }
        cp_async_commit();
        if STAGES == 1 {
            cp_async_wait(0);
            sync_threads();
        }
        if t >= STAGES - 1 {
            let s = (t - (STAGES - 1)) % STAGES;
            #[unroll]
            for kk in 0..BK / 16 {
                #[unroll]
                for i in 0..WARP / 16 {
                    let r = wm0 + i * 16 + lane % 16;
                    let ch = kk * 2 + lane / 16;
                    let col = (ch ^ (r / (64 / BK) % (BK / 8))) * 8;
                    ldmatrix_x4(&mut a_frag[i], &a_tile[s][r][col]);
                }
                // One x4 load gives the two k halves of two 8-column n tiles.
                #[unroll]
                for j in 0..WARP / 16 {
                    let r = wn0 + j * 16 + lane % 8 + lane / 16 * 8;
                    let ch = kk * 2 + lane / 8 % 2;
                    let col = (ch ^ (r / (64 / BK) % (BK / 8))) * 8;
                    ldmatrix_x4(&mut b_pair[j], &b_tile[s][r][col]);
                    b_frag[2 * j][0] = b_pair[j][0];
                    b_frag[2 * j][1] = b_pair[j][1];
                    b_frag[2 * j + 1][0] = b_pair[j][2];
                    b_frag[2 * j + 1][1] = b_pair[j][3];
                }
                #[unroll]
                for i in 0..WARP / 16 {
                    #[unroll]
                    for j in 0..WARP / 8 {
                        mma_m16n8k16_f16(&mut acc[i][j], &a_frag[i], &b_frag[j]);
                    }
                }
            }
        }
        if STAGES == 1 {
            sync_threads();
        }
    }

    // Accumulator element h * 2 + q of fragment (i, j) is C[g + 8 h][2 t4 + q]
    // of the 16 x 8 tile (ptx-notes.md §3).
    let g = lane / 4;
    let t4 = lane % 4;
    #[unroll]
    for i in 0..WARP / 16 {
        #[unroll]
        for j in 0..WARP / 8 {
            #[unroll]
            for h in 0..2u32 {
                let r = row0 + wm0 + i * 16 + h * 8 + g;
                #[unroll]
                for q in 0..2u32 {
                    let col = col0 + wn0 + j * 8 + t4 * 2 + q;
                    if r < m && col < n {
                        let idx = r * n + col;
                        let v = alpha * acc[i][j][h * 2 + q];
                        // beta == 0 must not read C: it may hold anything, NaN included.
                        if beta == 0.0 {
                            c[idx] = v as f16;
                        } else {
                            c[idx] = (v + beta * c[idx] as f32) as f16;
                        }
                    }
                }
            }
        }
    }
}

/// The grid that covers an m x n output with `consts`' tiles.
pub fn gemm_f16_grid(consts: gemm_f16::Consts, m: u32, n: u32) -> Grid {
    Grid::blocks([n.div_ceil(consts.BN), m.div_ceil(consts.BM), 1])
}

/// `C = alpha * A B + beta * C` (A row-major, B column-major, C row-major;
/// f16 in and out, f32 accumulation) with the given variant.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f16_with(
    rt: &Runtime,
    consts: gemm_f16::Consts,
    a: &DeviceBuffer<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
    (m, n, k): (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    gemm_f16::launch(
        rt,
        consts,
        gemm_f16_grid(consts, m, n),
        a,
        b,
        c,
        m,
        n,
        k,
        alpha,
        beta,
    )
}
