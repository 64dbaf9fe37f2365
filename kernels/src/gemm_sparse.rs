//! 2:4 sparse Tensor Core GEMMs: A sparse (compressed by [`crate::sparse`]),
//! B dense, through sm_80 `mma.sp` m16n8k32, written in the DSL with the
//! structure of the dense family (`gemm_tc`): multistage `cp.async`
//! pipelines, XOR-swizzled shared tiles, `ldmatrix`, the same layouts and
//! epilogue. On GPUs without sparse Tensor Cores [`gemm_sparse_f16`]
//! decompresses A and runs a dense GEMM instead.

use warpforge::prelude::*;

use crate::gemm::tile_grid;
use crate::gemm_wmma::{gemm_f16_wmma, gemm_f16_wmma_with};
use crate::sparse::device::{decompress, DeviceCompressed};

/// One kernel source for both 16-bit element types: `$elem`, its packing
/// and its sparse MMA are the only differences.
macro_rules! sparse_gemm {
    ($name:ident, $with:ident, $elem:ident, $mma:ident) => {
        /// A 2:4 sparse GEMM with f32 accumulation: `C = alpha * A B + beta * C`
        /// for `A` (m x k) 2:4 sparse, given compressed as `a_values` and
        /// `a_meta` (the layout of `sparse::Compressed`: m rows of
        /// `(k + 63) / 64 * 32` kept values, and the `mma.sp` metadata words),
        /// column-major `B` (stored as n rows of k, the "TN" form) and
        /// row-major `C` (m x n); any m, n and k >= 1.
        ///
        /// `ALIGNED` variants copy B with 16-byte `cp.async` and take k a
        /// multiple of 8; the others load B element by element (2 stages)
        /// and take any k. A's compressed rows are padded to whole 64-column
        /// blocks, so A and its metadata always travel in 16-byte copies.
        ///
        /// The block computes a `BM x BN` tile of C with `(BM / WARP) * (BN / WARP)`
        /// warps, each a `WARP x WARP` warp tile. Per 32-wide k step a warp loads
        /// `WARP / 16` compressed A fragments (16 x 16 kept values each) and
        /// `WARP / 8` B fragments (32 x 8) with `ldmatrix.x4`, and issues
        /// `(WARP / 16) * (WARP / 8)` `mma.sp` m16n8k32, which do the work of
        /// twice as many dense m16n8k16. Each lane's metadata word of a 16-row
        /// tile covers two k steps (selectors 0 and 1): one 32-bit shared load
        /// per 16-row tile and 64 k, conflict-free (a warp reads 32 consecutive
        /// words).
        ///
        /// Shared tiles per stage: A `BM x BK / 2` kept values, B `BN x BK`,
        /// the metadata `BM / 16 x BK / 2` words. Rows of `W` elements are
        /// XOR-swizzled in 16-byte chunks (ptx-notes.md §7): chunk `ch` of row
        /// `r` is stored at `ch ^ (r / L % (8 / L))`, `L = (W + 63) / W` rows
        /// per 128 bytes, so the 8 rows an `ldmatrix` matrix reads and the
        /// copies of 8 consecutive threads fall in 8 distinct 16-byte bank
        /// groups.
        ///
        /// The pipeline and the block order are the dense family's
        /// (`gemm_tc`, CUTLASS's multistage order): each k step's fragments
        /// (A, B and the metadata words) are loaded one step before its MMAs,
        /// and the wait and barrier that land the next k-tile come before the
        /// tile's last k step, whose MMAs then cover the next tile's first
        /// loads. In bounds (the common case,
        /// uniform over a block) every copy is a plain 16-byte `cp.async`; at
        /// the edges, copies past the matrix zero-fill A and B (metadata copies
        /// past it read the first block instead, so every word a `mma.sp` sees
        /// is legal; the zero A values make its product zero).
        #[kernel(
                            arch(sm_80, sm_90),
                            block(BM / WARP * (BN / WARP) * 32),
                            tune(
                                BM = [64, 128, 256],
                                BN = [64, 128, 256],
                                BK = [64, 128],
                                WARP = [32, 64],
                                STAGES = [2, 3, 4],
                                ALIGNED = [true, false]
                            ),
                            constrain(
                                BM / WARP * (BN / WARP) >= 4,
                                BM / WARP * (BN / WARP) <= 8,
                                BM <= 2 * BN,
                                BN <= 2 * BM,
                                ALIGNED || STAGES == 2 && BK == 64,
                                BM / 16 * (BK / 8) <= BM / WARP * (BN / WARP) * 32,
                                STAGES * (BM * BK + BN * BK * 2 + BM * BK * 2 / 16) <= 163 * 1024
                            ),
                            requires(
                                k >= 1,
                                a_values.len() >= m * ((k + 63) / 64 * 32),
                                a_meta.len() >= (m + 15) / 16 * ((k + 63) / 64) * 32,
                                b.len() >= n * k,
                                c.len() >= m * n,
                                !ALIGNED || k % 8 == 0
                            )
                        )]
        pub fn $name<
            const BM: u32,
            const BN: u32,
            const BK: u32,
            const WARP: u32,
            const STAGES: u32,
            const ALIGNED: bool,
        >(
            a_values: &[$elem],
            a_meta: &[u32],
            b: &[$elem],
            c: &mut [$elem],
            m: u32,
            n: u32,
            k: u32,
            alpha: f32,
            beta: f32,
        ) {
            let mut a_tile: [[[$elem; BK / 2]; BM]; STAGES] = shared();
            let mut b_tile: [[[$elem; BK]; BN]; STAGES] = shared();
            let mut m_tile: [[[u32; BK / 2]; BM / 16]; STAGES] = shared();
            let tid = thread_idx().x;
            let lane = lane_id();
            let warp = tid / 32;
            let wm0 = warp / (BN / WARP) * WARP;
            let wn0 = warp % (BN / WARP) * WARP;
            // Blocks renumbered as in `gemm_tc`: consecutive blocks walk a group
            // of 8 tile rows column by column, so the blocks in flight share a
            // few panels of A and of B in L2.
            let tiles_n = grid_dim().x;
            let id = block_idx().y * tiles_n + block_idx().x;
            let group_first = id / (8 * tiles_n) * 8;
            let group_rows = (grid_dim().y - group_first).min(8);
            let in_group = id % (8 * tiles_n);
            let row0 = (group_first + in_group % group_rows) * BM;
            let col0 = in_group / group_rows * BN;
            // Kept values per row of A (and metadata words per 16-row tile).
            let kv = (k + 63) / 64 * 32;

            let mut acc = [[[0.0f32; 4]; WARP / 8]; WARP / 16];
            let mut a_frag = [[0u32; 4]; WARP / 16];
            let mut b_frag = [[0u32; 4]; WARP / 8];
            let mut e = [0u32; WARP / 16];

            // Copy slots, computed once (the dense family's scheme): thread `tid`
            // copies chunk `tid % CHUNKS` of rows `tid / CHUNKS + l * (threads /
            // CHUNKS)`; that row step is a multiple of the swizzle period, so the
            // swizzled chunk is the same for every row a thread copies.
            let a_ch = tid % (BK / 16);
            let a_row = tid / (BK / 16);
            let a_col = (a_ch
                ^ (a_row / ((BK / 2 + 63) / (BK / 2)) % (8 / ((BK / 2 + 63) / (BK / 2)))))
                * 8;
            let mut a_row_at = [0u32; BM * (BK / 16) / (BM / WARP * (BN / WARP) * 32)];
            let mut a_row_in = [false; BM * (BK / 16) / (BM / WARP * (BN / WARP) * 32)];
            #[unroll]
            for l in 0..BM * (BK / 16) / (BM / WARP * (BN / WARP) * 32) {
                let gr = row0 + a_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 16));
                a_row_in[l] = gr < m;
                a_row_at[l] = if gr < m { gr * kv } else { 0 };
            }
            let b_ch = tid % (BK / 8);
            let b_row = tid / (BK / 8);
            let b_col = (b_ch ^ (b_row / ((BK + 63) / BK) % (8 / ((BK + 63) / BK)))) * 8;
            let mut b_row_at = [0u32; BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32)];
            let mut b_row_in = [false; BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32)];
            #[unroll]
            for l in 0..BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                let gr = col0 + b_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 8));
                b_row_in[l] = gr < n;
                b_row_at[l] = if gr < n { gr * k } else { 0 };
            }
            // Metadata: thread `tid < BM / 16 * (BK / 8)` copies chunk `m_ch` (4
            // words) of 16-row tile `m_tile_row`; a tile's words of one k-tile are
            // contiguous in memory.
            let m_copies = tid < BM / 16 * (BK / 8);
            let m_ch = tid % (BK / 8);
            let m_tile_row = tid / (BK / 8);
            let m_global_tile = row0 / 16 + m_tile_row;
            let m_row_in = m_global_tile < (m + 15) / 16;
            let m_row_at = m_global_tile * kv;

            // ldmatrix rows (as in the dense family): A lane reads row `lane % 16`
            // of a 16-row block, chunk `2 kk + lane / 16`; B lane reads row
            // `lane % 8` of an 8-row block, chunk `4 kk + lane / 8`. Block starts
            // are multiples of the swizzle period, so the phase depends on the
            // lane only, and `chunk ^ phase = step ^ (lane part ^ phase)`.
            let a_ld_row = wm0 + lane % 16;
            let a_ld_x = lane / 16
                ^ (a_ld_row / ((BK / 2 + 63) / (BK / 2)) % (8 / ((BK / 2 + 63) / (BK / 2))));
            let b_ld_row = wn0 + lane % 8;
            let b_ld_x = lane / 8 ^ (b_ld_row / ((BK + 63) / BK) % (8 / ((BK + 63) / BK)));

            let interior = row0 + BM <= m && col0 + BN <= n;
            let k_tiles = (k + BK - 1) / BK;
            // Shared stages: step `t` copies k-tile `t` into stage `ws = t % STAGES`
            // and computes k-tile `t - (STAGES - 1)` from stage `rs = (t + 1) %
            // STAGES`; `ns` is the stage after `rs`.
            let mut ws = 0u32;
            let mut rs = 1 % STAGES;
            let mut ns = 2 % STAGES;
            for t in 0..k_tiles + STAGES - 1 {
                if t < k_tiles {
                    let k0 = t * BK;
                    // A: kept values `t * BK / 2 ..`; metadata: words `t * BK / 2 ..`
                    // of each 16-row tile (both in whole 16-byte chunks: rows are
                    // padded to 64-column blocks).
                    let ga = t * (BK / 2) + a_ch * 8;
                    let gm = t * (BK / 2) + m_ch * 4;
                    if ALIGNED && interior && k0 + BK <= k {
                        // The common case, uniform over the block: every row and
                        // chunk of this tile is in bounds, so each copy is a plain
                        // 16-byte `cp.async` (no src-size).
                        #[unroll]
                        for l in 0..BM * (BK / 16) / (BM / WARP * (BN / WARP) * 32) {
                            let r = a_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 16));
                            cp_async(
                                &mut a_tile[ws][r][a_col],
                                &a_values[a_row_at[l] + ga],
                                16,
                                16,
                            );
                        }
                        if m_copies {
                            cp_async(
                                &mut m_tile[ws][m_tile_row][m_ch * 4],
                                &a_meta[m_row_at + gm],
                                16,
                                16,
                            );
                        }
                        let gk = k0 + b_ch * 8;
                        #[unroll]
                        for l in 0..BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                            let r = b_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 8));
                            cp_async(&mut b_tile[ws][r][b_col], &b[b_row_at[l] + gk], 16, 16);
                        }
                    } else {
                        let a_in = ga < kv;
                        let a_at = if a_in { ga } else { 0 };
                        #[unroll]
                        for l in 0..BM * (BK / 16) / (BM / WARP * (BN / WARP) * 32) {
                            let r = a_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 16));
                            let bytes = if a_row_in[l] && a_in { 16u32 } else { 0 };
                            cp_async(
                                &mut a_tile[ws][r][a_col],
                                &a_values[a_row_at[l] + a_at],
                                16,
                                bytes,
                            );
                        }
                        if m_copies {
                            let at = if m_row_in && gm < kv {
                                m_row_at + gm
                            } else {
                                0
                            };
                            cp_async(&mut m_tile[ws][m_tile_row][m_ch * 4], &a_meta[at], 16, 16);
                        }
                        if ALIGNED {
                            let gk = k0 + b_ch * 8;
                            let k_bytes = if gk < k { (k - gk).min(8) * 2 } else { 0 };
                            let k_at = if gk < k { gk } else { 0 };
                            #[unroll]
                            for l in 0..BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                                let r = b_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 8));
                                let bytes = if b_row_in[l] { k_bytes } else { 0 };
                                cp_async(
                                    &mut b_tile[ws][r][b_col],
                                    &b[b_row_at[l] + k_at],
                                    16,
                                    bytes,
                                );
                            }
                        } else {
                            #[unroll]
                            for l in 0..BN * (BK / 8) / (BM / WARP * (BN / WARP) * 32) {
                                let r = b_row + l * (BM / WARP * (BN / WARP) * 32 / (BK / 8));
                                #[unroll]
                                for q in 0..8u32 {
                                    let gk = k0 + b_ch * 8 + q;
                                    b_tile[ws][r][b_col + q] = if b_row_in[l] && gk < k {
                                        b[b_row_at[l] + gk]
                                    } else {
                                        0.0
                                    };
                                }
                            }
                        }
                    }
                }
                cp_async_commit();
                if t >= STAGES - 1 {
                    // Computing k-tile `t - (STAGES - 1)` from stage `rs`. Iteration
                    // `kk` multiplies the fragments of k-step `kk - 1`, then loads
                    // those of k-step `kk` (for `kk == BK / 32`: step 0 of the next
                    // tile, from stage `ns`), so each step's operands are loaded one
                    // step before its MMAs (ptxas gives the loads their own
                    // registers and issues them under the MMAs: a double buffer).
                    // The first computed tile loads its step 0 itself; every other
                    // tile's was loaded under the previous tile's last MMAs. The
                    // barrier that lands the next tile (and frees this tile's stage
                    // for the next copies: its fragments are all loaded by then)
                    // comes before the last step's MMAs, which then cover the first
                    // loads from the next stage. A metadata word serves steps `2 q`
                    // and `2 q + 1` (selectors 0 and 1).
                    let fresh = t == STAGES - 1;
                    #[unroll]
                    for kk in 0..BK / 32 + 1 {
                        if kk > 0 {
                            #[unroll]
                            for i in 0..WARP / 16 {
                                #[unroll]
                                for j in 0..WARP / 8 {
                                    $mma(
                                        &mut acc[i][j],
                                        &a_frag[i],
                                        &b_frag[j],
                                        e[i],
                                        (kk - 1) % 2,
                                    );
                                }
                            }
                        }
                        if kk > 0 || fresh {
                            if kk == 0 {
                                cp_async_wait(STAGES - 2);
                                sync_threads();
                            }
                            let ls = if kk < BK / 32 { rs } else { ns };
                            let kc = kk % (BK / 32);
                            #[unroll]
                            for i in 0..WARP / 16 {
                                let col = (kc * 2 ^ a_ld_x) * 8;
                                ldmatrix_x4(&mut a_frag[i], &a_tile[ls][a_ld_row + i * 16][col]);
                            }
                            #[unroll]
                            for j in 0..WARP / 8 {
                                let col = (kc * 4 ^ b_ld_x) * 8;
                                ldmatrix_x4(&mut b_frag[j], &b_tile[ls][b_ld_row + j * 8][col]);
                            }
                            if kc % 2 == 0 {
                                #[unroll]
                                for i in 0..WARP / 16 {
                                    e[i] = m_tile[ls][wm0 / 16 + i][kc / 2 * 32 + lane];
                                }
                            }
                        }
                        if kk + 1 == BK / 32 {
                            cp_async_wait(STAGES - 2);
                            sync_threads();
                        }
                    }
                }
                // The stages rotate: this step's read stage is the next step's
                // write stage (counters, not `t % STAGES`: no division per step).
                ws = rs;
                rs = ns;
                ns = if ns + 1 == STAGES { 0 } else { ns + 1 };
            }

            // Accumulator element h * 2 + q of fragment (i, j) is C[g + 8 h][2 t4 + q]
            // of the 16 x 8 tile (ptx-notes.md §3, the same for mma.sp).
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
                                    c[idx] = v as $elem;
                                } else {
                                    c[idx] = (v + beta * c[idx] as f32) as $elem;
                                }
                            }
                        }
                    }
                }
            }
        }

        /// `C = alpha * A B + beta * C` (A 2:4 sparse, compressed; B column-major;
        /// C row-major; f32 accumulation) with the given variant.
        #[allow(clippy::too_many_arguments)]
        pub fn $with(
            rt: &Runtime,
            consts: $name::Consts,
            a: &DeviceCompressed<$elem>,
            b: &DeviceBuffer<$elem>,
            c: &mut DeviceBuffer<$elem>,
            (m, n, k): (u32, u32, u32),
            alpha: f32,
            beta: f32,
        ) -> Result<(), Error> {
            check_shape(a, m, k)?;
            $name::launch(
                rt,
                consts,
                tile_grid((consts.BM, consts.BN), m, n),
                a.values(),
                a.metadata(),
                b,
                c,
                m,
                n,
                k,
                alpha,
                beta,
            )
        }
    };
}

sparse_gemm!(
    gemm_sparse_f16,
    gemm_sparse_f16_with,
    f16,
    mma_sp_ordered_m16n8k32_f16
);
sparse_gemm!(
    gemm_sparse_bf16,
    gemm_sparse_bf16_with,
    bf16,
    mma_sp_ordered_m16n8k32_bf16
);

/// That `a` is the compressed form of an `m x k` matrix.
fn check_shape<T: warpforge::DeviceScalar>(
    a: &DeviceCompressed<T>,
    m: u32,
    k: u32,
) -> Result<(), Error> {
    if (a.rows(), a.cols()) == (m as usize, k as usize) {
        Ok(())
    } else {
        Err(Error::Buffer(format!(
            "the sparse A is {} x {}, but the GEMM was asked for an m x k = {m} x {k} A: \
             compress the A of this product, or pass its m and k",
            a.rows(),
            a.cols()
        )))
    }
}

/// The variant [`sparse_gemm_f16`] and [`sparse_gemm_bf16`] take (16-byte
/// copies when k % 8 == 0).
pub fn default_variant(k: u32) -> gemm_sparse_f16::Consts {
    let aligned = k.is_multiple_of(8);
    gemm_sparse_f16::Consts {
        BM: 128,
        BN: 128,
        BK: 64,
        WARP: 64,
        STAGES: if aligned { 3 } else { 2 },
        ALIGNED: aligned,
    }
}

/// Whether the device has sparse Tensor Cores (`mma.sp`, sm_80 and newer).
pub fn has_sparse_tensor_cores(rt: &Runtime) -> bool {
    rt.device().compute_capability >= (8, 0)
}

/// `C = alpha * A B + beta * C` for a 2:4 sparse f16 A (compressed), B
/// column-major and C row-major, on any CUDA GPU: with [`gemm_sparse_f16`]
/// ([`default_variant`]) where the GPU has sparse Tensor Cores, else (sm_70)
/// with [`decompressed_gemm_f16`], which takes k a multiple of 8 only.
#[allow(clippy::too_many_arguments)]
pub fn sparse_gemm_f16(
    rt: &Runtime,
    a: &DeviceCompressed<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
    (m, n, k): (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    if has_sparse_tensor_cores(rt) {
        gemm_sparse_f16_with(rt, default_variant(k), a, b, c, (m, n, k), alpha, beta)
    } else {
        decompressed_gemm_f16(rt, a, b, c, (m, n, k), alpha, beta)
    }
}

/// The `wmma` GEMM variant of [`decompressed_gemm_f16`]: 8 warps, two stages
/// (sm_70 stages its copies through registers).
const FALLBACK: gemm_f16_wmma::Consts = gemm_f16_wmma::Consts {
    BM: 128,
    BN: 64,
    BK: 32,
    STAGES: 2,
};

/// The fallback of [`sparse_gemm_f16`], which any CUDA GPU runs: A
/// decompressed into a temporary dense matrix on the GPU, then the Volta
/// GEMM [`gemm_f16_wmma`] (k a multiple of 8).
#[allow(clippy::too_many_arguments)]
pub fn decompressed_gemm_f16(
    rt: &Runtime,
    a: &DeviceCompressed<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
    (m, n, k): (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    check_shape(a, m, k)?;
    let dense = decompress(rt, a)?;
    gemm_f16_wmma_with(rt, FALLBACK, &dense, b, c, (m, n, k), alpha, beta)
}

/// The bf16 form of [`sparse_gemm_f16`]. bf16 Tensor Cores (dense or sparse)
/// start at sm_80, so on older GPUs this is an error, as for dense bf16.
#[allow(clippy::too_many_arguments)]
pub fn sparse_gemm_bf16(
    rt: &Runtime,
    a: &DeviceCompressed<bf16>,
    b: &DeviceBuffer<bf16>,
    c: &mut DeviceBuffer<bf16>,
    (m, n, k): (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    if !has_sparse_tensor_cores(rt) {
        let (major, minor) = rt.device().compute_capability;
        return Err(Error::InvalidLaunch {
            kernel: "gemm_sparse_bf16".into(),
            message: format!(
                "bf16 GEMMs need sm_80 or newer (bf16 Tensor Cores), and this GPU is sm_{major}{minor}: \
                 use f16 (`sparse_gemm_f16`, which falls back to a dense GEMM there)"
            ),
        });
    }
    let d = default_variant(k);
    let consts = gemm_sparse_bf16::Consts {
        BM: d.BM,
        BN: d.BN,
        BK: d.BK,
        WARP: d.WARP,
        STAGES: d.STAGES,
        ALIGNED: d.ALIGNED,
    };
    gemm_sparse_bf16_with(rt, consts, a, b, c, (m, n, k), alpha, beta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_is_a_wmma_variant() {
        assert!(
            gemm_f16_wmma::variants().contains(&FALLBACK),
            "{FALLBACK:?}"
        );
    }

    #[test]
    fn the_default_variant_is_a_variant_for_every_k() {
        for k in [1, 63, 64, 4095, 8192] {
            let d = default_variant(k);
            assert!(gemm_sparse_f16::variants().contains(&d), "k = {k}: {d:?}");
            assert_eq!(d.ALIGNED, k % 8 == 0);
            let values = d.values();
            assert!(gemm_sparse_bf16::variants()
                .iter()
                .any(|c| c.values() == values));
        }
    }
}
