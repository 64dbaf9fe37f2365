//! 2:4 sparse Tensor Core GEMMs: A sparse (compressed by [`crate::sparse`]),
//! B dense, through sm_80 `mma.sp` m16n8k32, written in the DSL as one kernel
//! generic over f16 and bf16 on the dense family's device functions
//! ([`crate::tile`], [`crate::epilogue`]): multistage `cp.async`
//! pipelines, XOR-swizzled shared tiles, `ldmatrix`, and the dense family's
//! problem ([`GemmProblem`]: B and C in either layout, strided batches, bias,
//! ReLU and GELU epilogues). [`SparseGemmVariant::run`] launches one variant;
//! [`sparse_gemm_f16`] and [`sparse_gemm_bf16`] pick one, and on GPUs without
//! sparse Tensor Cores [`sparse_gemm_f16`] decompresses A and runs a dense
//! GEMM instead.
//!
//! # A sparse A in a [`GemmProblem`]
//! A is `m x k`, row-major (its 2:4 groups run along k), and given as a
//! [`DeviceCompressed`] of `cols == k`. Batch strides count elements of the
//! dense row-major A it stands for, as for a dense A: batch `i` is rows
//! `i * stride_a / k ..` of the compressed matrix. `stride_a` is a multiple
//! of `16 k`, so that every batch starts at a whole 16-row metadata tile;
//! then batch `i`'s compressed values start at `i * stride_a / k * vk` and
//! its metadata words at `i * stride_a / k / 16 * vk`, for `vk =
//! sparse::value_cols(k)` kept values per row (metadata words per 16-row
//! tile). So `count` batches of `m` rows, `m` a multiple of 16, are the
//! compression of the `count * m x k` stack
//! ([`crate::gemm_problem::GemmBatch::packed`]); other
//! `m` stack each batch padded with zero rows to a multiple of 16, and
//! `stride_a = m.next_multiple_of(16) * k`; 0 shares one A.

use warpforge::prelude::*;
use warpforge::{BufferMut, BufferRef, DeviceScalar, KernelArg, KernelVariant, MatrixLayout};

use crate::gemm_problem::{
    check_chunks, check_lengths, Chunks, GemmBatch, GemmProblem, GemmVariant, KernelProblem,
    Operands,
};
use crate::gemm_wmma::gemm_f16_wmma;
use crate::sparse::device::{decompress, DeviceCompressed, DeviceSparse};
use crate::sparse::value_cols;
use crate::{epilogue, tile};

/// A 2:4 sparse GEMM with f32 accumulation and the dense family's epilogue,
/// for each of `batches` strided batches (the grid's z): `C = act(alpha * A
/// B + beta * C + bias)` for `A` (m x k) 2:4 sparse, given compressed as `a`
/// (its kept values) and `a_meta` (the layout of `sparse::Compressed`: m
/// rows of `vk = (k + 63) / 64 * 32` kept values, and `vk` `mma.sp`
/// metadata words per 16-row tile), B (k x n) column-major or, with
/// `B_ROW_MAJOR`, row-major, and C (m x n) row-major or, with `c_col_major`
/// 1, column-major; any m, n and k >= 1; every matrix of the element type
/// `T` (f16: `gemm_sparse_f16`, bf16: `gemm_sparse_bf16`). Batch `z` reads
/// A's values from `z * stride_a` (a multiple of 16 `vk`: whole 16-row
/// tiles), its metadata from `z * stride_a / 16`, B from `z * stride_b` and C
/// from `z * stride_c` (see the module docs). `bias_mode` and `activation`
/// select the epilogue ([`crate::epilogue`]). Launch it through
/// `SparseGemmVariant::run`, which checks a `GemmProblem` against the
/// variant.
///
/// `ALIGNED` variants copy B with 16-byte `cp.async` and take B's leading
/// dimension (k column-major, n row-major) and batch stride multiples of 8;
/// the others load B element by element (2 stages) and take any shape. A's
/// compressed rows are padded to whole 64-column blocks, so A and its
/// metadata always travel in 16-byte copies.
///
/// The block computes a `BM x BN` tile of C with `(BM / WARP) * (BN / WARP)`
/// warps, each a `WARP x WARP` warp tile. Per 32-wide k step a warp loads
/// `WARP / 16` compressed A fragments (16 x 16 kept values each) and `WARP /
/// 8` B fragments (32 x 8) with `ldmatrix.x4`, and issues `(WARP / 16) *
/// (WARP / 8)` `mma.sp` m16n8k32, which do the work of twice as many dense
/// m16n8k16. Each lane's metadata word of a 16-row tile covers two k steps
/// (selectors 0 and 1): one 32-bit shared load per 16-row tile and 64 k,
/// conflict-free (a warp reads 32 consecutive words).
///
/// Shared tiles per stage: A `BM x BK / 2` kept values, B `BN x BK` (`BK x
/// BN` row-major), the metadata `BM / 16 x BK / 2` words, every row swizzled
/// by `tile::swizzle`. A row-major B's fragments come from
/// `ldmatrix.x4.trans`: lane `l` points at k row `l` of the 32-row step, the
/// warp tile's n chunk (matrix `i` of the x4 is k rows `8 i ..`, the
/// fragment's register `b_i`).
///
/// The pipeline is the dense family's ([`crate::tile`]): a tile's copies
/// are issued among the MMAs of an earlier one, each k step's fragments (A,
/// B and the metadata words) are loaded one step before its MMAs, and the
/// wait and barrier that land the next k-tile come before the tile's last k
/// step. In bounds every copy is a plain 16-byte `cp.async`; at the edges,
/// copies past the matrix zero-fill A and B (metadata copies past it read
/// the first block instead, so every word a `mma.sp` sees is legal; the
/// zero A values make its product zero).
#[kernel(
    arch(sm_80, sm_90),
    block(BM / WARP * (BN / WARP) * 32),
    instances(gemm_sparse_f16 = <f16>, gemm_sparse_bf16 = <bf16>),
    tune(
        BM = [64, 128, 256],
        BN = [64, 128, 256],
        BK = [64, 128],
        WARP = [32, 64],
        STAGES = [2, 3, 4],
        ALIGNED = [true, false],
        B_ROW_MAJOR = [false, true]
    ),
    constrain(
        BM / WARP * (BN / WARP) >= 4,
        BM / WARP * (BN / WARP) <= 8,
        BM <= 2 * BN,
        BN <= 2 * BM,
        ALIGNED || STAGES == 2 && BK == 64,
        // Element-wise B copies beside 64 x 64 warp tiles spill (ptxas
        // 12.9), as do three stages of 128-wide k-tiles on sm_80.
        ALIGNED || WARP == 32,
        BK == 64 || STAGES == 2 || WARP == 32,
        BM / 16 * (BK / 8) <= BM / WARP * (BN / WARP) * 32,
        STAGES * (BM * BK + BN * BK * 2 + BM * BK * 2 / 16) <= 163 * 1024,
        // Row-major B in a few tiles (128 x 64 and 64 x 128, a small one
        // and the element-wise fallbacks), so that the build stays
        // bounded. (With 64 x 64 warp tiles its transposed loads spill on
        // sm_80 with ptxas 12.9.)
        !B_ROW_MAJOR
            || ALIGNED && STAGES == 3 && BM * BN == 128 * 64 && BK == 64 && WARP == 32
            || ALIGNED && STAGES == 3 && BM * BN * BK == 64 * 64 * 64 && WARP == 32
            || !ALIGNED && BM == BN,
        // A row-major B tile's copies cover k rows in steps of a multiple
        // of 8, so each thread's swizzle is one for all its rows.
        !B_ROW_MAJOR || BM / WARP * (BN / WARP) * 32 / (BN / 8) % 8 == 0
    ),
    requires(
        batches >= 1,
        a.len() >= (batches - 1) * stride_a + m * ((k + 63) / 64 * 32),
        b.len() >= (batches - 1) * stride_b + k * n,
        c.len() >= (batches - 1) * stride_c + m * n,
        bias_mode == 0 || bias_mode == 1 && bias.len() >= n || bias_mode == 2 && bias.len() >= m,
        k >= 1,
        !a_col_major,
        b_row_major == B_ROW_MAJOR,
        batches == 1 || k == 0 || stride_a % (16 * ((k + 63) / 64 * 32)) == 0,
        a_meta.len() >= (batches - 1) * (stride_a / 16) + (m + 15) / 16 * ((k + 63) / 64) * 32,
        !ALIGNED || B_ROW_MAJOR || k % 8 == 0,
        !ALIGNED || !B_ROW_MAJOR || n % 8 == 0,
        !ALIGNED || batches == 1 || stride_b % 8 == 0
    )
)]
pub fn gemm_sparse<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WARP: u32,
    const STAGES: u32,
    const ALIGNED: bool,
    const B_ROW_MAJOR: bool,
    T: Half,
>(
    a: &[T],
    a_meta: &[u32],
    b: &[T],
    c: &mut [T],
    bias: &[T],
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    stride_a: u32,
    stride_b: u32,
    stride_c: u32,
    alpha: f32,
    beta: f32,
    bias_mode: u32,
    activation: u32,
    a_col_major: bool,
    b_row_major: bool,
    c_col_major: u32,
) {
    // The block's threads; 16-byte chunks per row of a B tile; each thread's
    // 16-byte copies per k-tile, of A's kept values, of B and in all (with at
    // most one of metadata); the rows one pass of the threads copies, of A
    // and of B; the `mma.sp` k steps (32 of k) per k-tile; and the slices a
    // tile's copies are issued in ([`tile`]).
    const THREADS: u32 = BM / WARP * (BN / WARP) * 32;
    const B_CHUNKS: u32 = BN / 8 * B_ROW_MAJOR as u32 + BK / 8 * (1 - B_ROW_MAJOR as u32);
    const A_COPIES: u32 = BM * (BK / 16) / THREADS;
    const B_COPIES: u32 = BN * (BK / 8) / THREADS;
    const COPIES: u32 = A_COPIES + 1 + B_COPIES;
    const A_ROWS: u32 = THREADS / (BK / 16);
    const B_ROWS: u32 = THREADS / B_CHUNKS;
    const STEPS: u32 = BK / 32;
    const COPY_SLICES: u32 = STEPS - 1 - (STEPS - 2) * (STAGES == 2) as u32;
    let mut a_tile: [[[T; BK / 2]; BM]; STAGES] = shared();
    // B: BN rows of BK, or BK rows of BN when row-major.
    let mut b_tile: [[[T; BK * (1 - B_ROW_MAJOR as u32) + BN * B_ROW_MAJOR as u32];
        BN * (1 - B_ROW_MAJOR as u32) + BK * B_ROW_MAJOR as u32]; STAGES] = shared();
    let mut m_tile: [[[u32; BK / 2]; BM / 16]; STAGES] = shared();
    let tid = thread_idx().x;
    let lane = lane_id();
    let warp = tid / 32;
    let wm0 = warp / (BN / WARP) * WARP;
    let wn0 = warp % (BN / WARP) * WARP;
    // The block's tile: its first row and column of C.
    let (row0, col0) = tile::grouped_tile_order::<BM, BN>();
    // Kept values per row of A (and metadata words per 16-row tile).
    let kv = (k + 63) / 64 * 32;
    // A block past the last batch (a grid deeper than `batches`) reads the
    // last batch and writes nothing, as in `gemm_tc`.
    let batch = block_idx().z.min(batches - 1);
    let a_at = batch * stride_a;
    let b_at = batch * stride_b;

    let mut acc = [[[0.0f32; 4]; WARP / 8]; WARP / 16];
    let mut a_frag = [[0u32; 4]; WARP / 16];
    let mut b_frag = [[0u32; 4]; WARP / 8];
    let mut e = [0u32; WARP / 16];

    // How the thread copies A's kept values (tiles of BM rows by BK / 2)
    // and B's k-tiles ([`tile::operand_copy`], as in `gemm_tc`).
    let a_copy = tile::operand_copy::<BM, { BK / 2 }, THREADS, false, T>(tid, row0, m, kv, a_at);
    let b_copy = tile::operand_copy::<BN, BK, THREADS, B_ROW_MAJOR, T>(tid, col0, n, k, b_at);
    // Metadata: thread `tid < BM / 16 * (BK / 8)` copies chunk `m_ch` (4
    // words) of 16-row tile `m_tile_row`; a tile's words of one k-tile are
    // contiguous in memory.
    let m_copies = tid < BM / 16 * (BK / 8);
    let m_ch = tid % (BK / 8);
    let m_tile_row = tid / (BK / 8);
    let m_global_tile = row0 / 16 + m_tile_row;
    let m_row_in = m_global_tile < (m + 15) / 16;
    let m_row_at = batch * (stride_a / 16) + m_global_tile * kv;

    // ldmatrix rows: A as in the dense family ([`tile::load_fragments`]); a
    // column-major B lane reads n row `lane % 8` of an 8-row block, chunk `4
    // kk + lane / 8`, stored at `4 kk ^ b_ld_x`; a row-major B lane reads k
    // row `lane` of the step.
    let a_ld_row = wm0 + lane % 16;
    let a_ld_x = lane / 16 ^ tile::swizzle::<BK>(a_ld_row);
    let b_ld_row = wn0 + lane % 8;
    let b_ld_x = lane / 8 ^ tile::swizzle::<{ BK * 2 }>(b_ld_row);

    let interior = row0 + BM <= m && col0 + BN <= n;
    // A step's first kept value of A's rows, and this thread's metadata
    // word: set once per step, at its start.
    let mut kept0 = 0u32;
    let mut gm = 0u32;
    tile::pipeline::<BK, STEPS, COPY_SLICES, STAGES, ALIGNED>(
        k,
        interior,
        // Metadata: words `t * BK / 2 ..` of each 16-row tile (in whole
        // 16-byte chunks: rows are padded to 64-column blocks). B element by
        // element, through registers, all at the top of the step (as in
        // `gemm_tc`).
        |t, k0, ws, copying| {
            kept0 = t * (BK / 2);
            gm = kept0 + m_ch * 4;
            if !ALIGNED && copying {
                if B_ROW_MAJOR {
                    tile::load_chunks::<B_COPIES, B_ROWS, true>(&mut b_tile[ws], b, b_copy, k0, k);
                } else {
                    // Column-major B: the copy rebased to the step's k
                    // ([`tile::rebased`]): 64 x 128 x 64 S2 on sm_80 takes
                    // 110 registers so against 128 (108 at 504b297).
                    let copy = tile::rebased(b_copy, k0);
                    tile::load_chunks::<B_COPIES, B_ROWS, false>(&mut b_tile[ws], b, copy, 0u32, k);
                }
            }
        },
        // Iteration `kk` multiplies the fragments of k step `kk - 1`, then
        // loads those of `kk` (ptxas gives the loads their own registers: a
        // double buffer), then issues slice `kk` of this step's copies (A's
        // values, the metadata chunk, B's). A metadata word serves steps `2
        // q` and `2 q + 1` (selectors 0 and 1).
        |t, k0, path, kk, ws, rs, ns| {
            if path < 2 && kk > 0 {
                #[unroll]
                for i in 0..WARP / 16 {
                    #[unroll]
                    for j in 0..WARP / 8 {
                        mma_sp_ordered_m16n8k32::<T>(
                            &mut acc[i][j],
                            &a_frag[i],
                            &b_frag[j],
                            e[i],
                            (kk - 1) % 2,
                        );
                    }
                }
            }
            if tile::loads_fragments::<STEPS, STAGES>(path, kk, t) {
                let ls = if kk < STEPS { rs } else { ns };
                let kc = kk % STEPS;
                tile::load_fragments(&mut a_frag, &a_tile[ls], a_ld_row, a_ld_x, kc);
                if B_ROW_MAJOR {
                    tile::load_fragments_trans::<{ WARP / 8 }, 1>(
                        &mut b_frag,
                        &b_tile[ls],
                        kc * 32 + lane,
                        wn0 / 8,
                        lane,
                    );
                } else {
                    #[unroll]
                    for j in 0..WARP / 8 {
                        let col = (kc * 4 ^ b_ld_x) * 8;
                        ldmatrix_x4(&mut b_frag[j], &b_tile[ls][b_ld_row + j * 8][col]);
                    }
                }
                if kc % 2 == 0 {
                    #[unroll]
                    for i in 0..WARP / 16 {
                        e[i] = m_tile[ls][wm0 / 16 + i][kc / 2 * 32 + lane];
                    }
                }
            }
            // Slice `kk` of the step's copies: A's kept values, B's (16-byte
            // copies only: the element-wise form loaded it at the top of the
            // step) and the metadata chunk.
            if kk < COPY_SLICES {
                tile::copy_slices::<
                    A_COPIES,
                    A_ROWS,
                    false,
                    B_COPIES,
                    B_ROWS,
                    B_ROW_MAJOR,
                    { A_COPIES + 1 },
                    COPY_SLICES,
                    COPIES,
                >(
                    &mut a_tile[ws],
                    &mut b_tile[ws],
                    a,
                    b,
                    a_copy,
                    b_copy,
                    (kept0, k0),
                    k,
                    (true, ALIGNED),
                    path,
                    kk,
                );
                if A_COPIES * COPY_SLICES / COPIES == kk && m_copies {
                    // At an edge, metadata past the matrix reads the first
                    // block instead (any word is legal; the zero values make
                    // its product zero).
                    let inside = path == 0 || m_row_in && gm < kv;
                    let at = if inside { m_row_at + gm } else { 0 };
                    cp_async(&mut m_tile[ws][m_tile_row][m_ch * 4], &a_meta[at], 16, 16);
                }
            }
        },
    );

    // C is stored in either layout: a column-major C cannot be computed as
    // C^T = B^T A^T (as the dense family does) when A is the sparse operand.
    // (`c_col_major` is a u32, 1 for column-major: a bool parameter becomes a
    // predicate at the kernel's entry, which ptxas keeps live through the
    // main loop.) Stored element-wise: with four outputs per store, ptxas
    // 12.9 rotates the accumulators of the main loop and spills in 128 x 128
    // x 128 W64 S2 on sm_90 (perf/LOG.md, session 7).
    // The tile computed again here, so that the main loop does not keep it live.
    let (row0, col0) = tile::grouped_tile_order::<BM, BN>();
    epilogue::mma_epilogue::<BM, BN, false>(
        &mut acc,
        c,
        bias,
        m,
        n,
        batches,
        stride_c,
        alpha,
        beta,
        bias_mode,
        activation,
        c_col_major,
        lane,
        wm0,
        wn0,
        (block_idx().z, row0, col0),
    );
}

/// The [`SparseGemmVariant`] of each instance of `gemm_sparse`.
macro_rules! sparse_variants {
    ($($name:ident: $elem:ident;)*) => {$(
        impl SparseGemmVariant for $name::Consts {
            type Elem = $elem;
            fn b_row_major(&self) -> bool {
                self.B_ROW_MAJOR
            }
            fn aligned(&self) -> bool {
                self.ALIGNED
            }
            fn tile(&self) -> (u32, u32) {
                (self.BM, self.BN)
            }
        }
    )*};
}

sparse_variants! {
    gemm_sparse_f16: f16;
    gemm_sparse_bf16: bf16;
}

/// `C = alpha * A B + beta * C` (A 2:4 sparse, compressed; B column-major; C
/// row-major; one batch, no bias or activation; f32 accumulation) with the
/// given variant: shorthand for [`SparseGemmVariant::run`] on
/// `GemmProblem::new((m, n, k), alpha, beta)`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_sparse_with<'a, V: SparseGemmVariant>(
    rt: &Runtime,
    consts: V,
    a: &DeviceCompressed<V::Elem>,
    b: impl Into<BufferRef<'a, V::Elem>>,
    c: impl Into<BufferMut<'a, V::Elem>>,
    dims: (u32, u32, u32),
    alpha: f32,
    beta: f32,
) -> Result<(), Error> {
    consts.run(rt, &GemmProblem::new(dims, alpha, beta), a, b, c, None)
}

/// One variant of a sparse GEMM (`gemm_sparse_f16`, `gemm_sparse_bf16`),
/// implemented by each kernel's `Consts`: the sparse counterpart of
/// [`GemmVariant`], whose A is a compressed 2:4 matrix (module docs). A tuner
/// picks one for a problem with [`SparseGemmVariant::variants_for`] and
/// launches it with [`SparseGemmVariant::run`].
pub trait SparseGemmVariant: KernelVariant {
    /// The element type of A, B, C and the bias.
    type Elem: DeviceSparse;

    /// Whether it reads B row-major (`B_ROW_MAJOR`).
    fn b_row_major(&self) -> bool;

    /// Whether it copies B in 16-byte chunks (`ALIGNED`).
    fn aligned(&self) -> bool;

    /// The `BM x BN` tile of C a block computes.
    fn tile(&self) -> (u32, u32);

    /// The layout of B it reads.
    fn b_layout(&self) -> MatrixLayout {
        if self.b_row_major() {
            MatrixLayout::RowMajor
        } else {
            MatrixLayout::ColMajor
        }
    }

    /// Its 16-byte copies of B, if it makes them.
    fn chunks(&self) -> Option<Chunks> {
        self.aligned().then_some(Chunks {
            elements: 8,
            otherwise: "take a variant with ALIGNED = false, which loads B element by element",
        })
    }

    /// Launches this variant on a checked problem ([`SparseGemmVariant::check`]),
    /// C stored in `c_layout`.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        rt: &Runtime,
        kernel: &KernelProblem<f32>,
        c_layout: MatrixLayout,
        a: &DeviceCompressed<Self::Elem>,
        b: BufferRef<'_, Self::Elem>,
        c: BufferMut<'_, Self::Elem>,
        bias: Option<BufferRef<'_, Self::Elem>>,
    ) -> Result<(), Error> {
        rt.launch(
            Self::def(),
            &self.values(),
            kernel.grid(self.tile()),
            &mut sparse_args(kernel, c_layout, a, b, c, bias),
        )
    }

    /// Whether this variant computes `problem`: A row-major (module docs),
    /// k >= 1, A's batch stride, B's layout, the alignment of B's 16-byte
    /// copies. The `Err` names the constraint and what to do. C may be in
    /// either layout: the kernel stores both.
    fn check(&self, problem: &GemmProblem<f32>) -> Result<KernelProblem<f32>, Error> {
        let refuse = |message: String| Error::InvalidLaunch {
            kernel: self.name(),
            message,
        };
        let kernel = sparse_kernel_problem(problem).map_err(refuse)?;
        let b = self.b_layout();
        if problem.b_layout != b {
            return Err(refuse(format!(
                "it reads B {b}, and this problem gives B {}: the variants with the other value \
                 of B_ROW_MAJOR read the other layout (SparseGemmVariant::variants_for lists \
                 those that take a problem)",
                problem.b_layout
            )));
        }
        if let Some(chunks) = self.chunks() {
            check_chunks(problem, chunks, Operands::B).map_err(refuse)?;
        }
        Ok(kernel)
    }

    /// Checks `problem` against this variant and the buffers, then launches
    /// it: for each batch, `C = activation(alpha * A B + beta * C + bias)`
    /// (see [`GemmProblem`]) with A 2:4 sparse, compressed (module docs).
    /// Every input the variant cannot take is an `Err` naming the
    /// constraint, before anything runs; a problem with no output element
    /// does nothing.
    fn run<'a>(
        &self,
        rt: &Runtime,
        problem: &GemmProblem<f32>,
        a: &DeviceCompressed<Self::Elem>,
        b: impl Into<BufferRef<'a, Self::Elem>>,
        c: impl Into<BufferMut<'a, Self::Elem>>,
        bias: Option<BufferRef<'a, Self::Elem>>,
    ) -> Result<(), Error> {
        let (b, c) = (b.into(), c.into());
        let kernel = self.check(problem)?;
        let lengths = (None, b.len(), c.len(), bias.map(|bias| bias.len()));
        check_lengths(problem, lengths)
            .and_then(|()| check_compressed(problem, (a.rows(), a.cols())))
            .map_err(|message| Error::InvalidLaunch {
                kernel: self.name(),
                message,
            })?;
        if problem.m == 0 || problem.n == 0 || problem.batch.count == 0 {
            return Ok(());
        }
        self.launch(rt, &kernel, problem.c_layout, a, b, c, bias)
    }

    /// The variants that compute `problem`: the search space of a tuner.
    fn variants_for(problem: &GemmProblem<f32>) -> Vec<Self> {
        Self::variants()
            .into_iter()
            .filter(|variant| variant.check(problem).is_ok())
            .collect()
    }
}

/// The arguments of the sparse kernels, in the order `gemm_sparse` declares
/// them: A's kept values and metadata, B, C, the bias (B's buffer, unread,
/// without one), the dense family's scalars
/// ([`KernelProblem::scalar_args`]) and `c_col_major`.
pub(crate) fn sparse_args<'a, T: DeviceScalar>(
    kernel: &KernelProblem<f32>,
    c_layout: MatrixLayout,
    a: &'a DeviceCompressed<T>,
    b: BufferRef<'a, T>,
    c: BufferMut<'a, T>,
    bias: Option<BufferRef<'a, T>>,
) -> Vec<KernelArg<'a>> {
    let bias_mode = kernel.bias_mode(bias.is_some());
    let mut args = vec![
        KernelArg::buffer(a.values()),
        KernelArg::buffer(a.metadata()),
        KernelArg::buffer(b),
        KernelArg::buffer_mut(c),
        KernelArg::buffer(bias.unwrap_or(b)),
    ];
    args.extend(kernel.scalar_args(bias_mode));
    args.push(KernelArg::scalar(u32::from(
        c_layout == MatrixLayout::ColMajor,
    )));
    args
}

/// `problem` as the sparse kernels take it (operands as given, A's batch
/// stride in compressed values), after the checks every sparse path makes
/// of A ([`compressed_stride`]). The `Err` is the message.
pub(crate) fn sparse_kernel_problem(
    problem: &GemmProblem<f32>,
) -> Result<KernelProblem<f32>, String> {
    let mut kernel = problem.as_given();
    kernel.batch.stride_a = compressed_stride(problem)?;
    Ok(kernel)
}

/// The batches the sparse GEMMs take for `count` GEMMs of `dims` stored
/// back to back: as [`GemmBatch::packed`], A's batches padded to whole
/// 16-row tiles (`stride_a = m.next_multiple_of(16) * k`, module docs).
pub fn packed_sparse_batch(count: u32, (m, n, k): (u32, u32, u32)) -> GemmBatch {
    GemmBatch {
        stride_a: m.next_multiple_of(16).saturating_mul(k),
        ..GemmBatch::packed(count, (m, n, k))
    }
}

/// A sparse A's batch stride in compressed values (the kernels'
/// `stride_a`), after the checks every sparse path makes of A in `problem`:
/// row-major, k >= 1, batches at whole 16-row tiles (module docs).
fn compressed_stride(problem: &GemmProblem<f32>) -> Result<u32, String> {
    let (k, stride_a) = (problem.k, problem.batch.stride_a);
    if problem.a_layout != MatrixLayout::RowMajor {
        return Err(
            "a 2:4 sparse A is compressed row by row (its groups of 4 run along k), so the \
             problem's A must be row-major: compress A as an m x k row-major matrix"
                .to_string(),
        );
    }
    if k == 0 {
        return Err(
            "k = 0: the sparse GEMMs need k >= 1 (with k = 0, A B is zero: scale C instead)"
                .to_string(),
        );
    }
    if problem.batch.count <= 1 {
        return Ok(0);
    }
    let tile = 16 * u64::from(k);
    if u64::from(stride_a) % tile != 0 {
        return Err(format!(
            "a sparse A's batches start at whole 16-row metadata tiles, so stride_a (in elements \
             of the dense row-major A) must be a multiple of 16 * k = {tile}, and it is \
             stride_a = {stride_a}: stack the batches 16-row aligned (pad each with zero rows to \
             a multiple of 16, stride_a = m.next_multiple_of(16) * k) and compress the stack"
        ));
    }
    let values = u64::from(stride_a) / u64::from(k) * value_cols(k as usize) as u64;
    u32::try_from(values).map_err(|_| {
        format!(
            "stride_a = {stride_a} is {values} compressed values, past the kernels' u32 \
             indices: split the batch into launches of fewer batches"
        )
    })
}

/// That a compressed A of `(rows, cols)` is the A of `problem`: `k`
/// columns, and rows for every batch (`(batch.count - 1) * stride_a / k +
/// m`). The `Err` is the message; the caller names the launch.
pub(crate) fn check_compressed(
    problem: &GemmProblem<f32>,
    (rows, cols): (usize, usize),
) -> Result<(), String> {
    let GemmProblem { m, k, batch, .. } = *problem;
    if cols != k as usize {
        return Err(format!(
            "the sparse A has {cols} columns, and the problem's k is {k}: compress the A of \
             this product, or pass its k"
        ));
    }
    let needed = match batch.count {
        0 => 0,
        count => {
            u64::from(count - 1) * u64::from(batch.stride_a) / u64::from(k.max(1)) + u64::from(m)
        }
    };
    if (rows as u64) < needed {
        return Err(format!(
            "the sparse A has {rows} rows, and the problem ({m} x {} x {k}, {} batches) needs \
             (batch.count - 1) * stride_a / k + m = {needed}: compress every batch's A, stacked \
             stride_a / k rows apart (module docs of gemm_sparse)",
            problem.n, batch.count
        ));
    }
    Ok(())
}

/// The const values (BM, BN, BK, WARP, STAGES, ALIGNED, B_ROW_MAJOR) of the
/// sparse GEMMs' defaults for B in `b_layout`, preferred first (see
/// [`default_variant`]): the 16-byte-copy one, then the element-wise one.
pub(crate) fn default_consts(b_layout: MatrixLayout) -> [[i64; 7]; 2] {
    let b_row = i64::from(b_layout == MatrixLayout::RowMajor);
    [
        if b_row == 1 {
            [128, 64, 64, 32, 3, 1, 1]
        } else {
            [128, 128, 64, 64, 3, 1, 0]
        },
        [64, 64, 64, 32, 2, 0, b_row],
    ]
}

/// The variant [`sparse_gemm`] runs `problem` with, in B's layout: 64-wide
/// k-tiles, three stages of 16-byte copies where B allows them, in 128 x 128
/// tiles of 64 x 64 warp tiles (column-major B) or 128 x 64 tiles of 32 x 32
/// warp tiles (row-major B: the largest without spills); else 64 x 64 tiles of
/// 32 x 32 warp tiles, two stages of element-wise loads (the largest
/// element-wise tile in both B layouts that does not spill). The `Err` is the
/// refusal of the 16-byte one when neither takes `problem`.
pub fn default_variant<V: SparseGemmVariant>(problem: &GemmProblem<f32>) -> Result<V, Error> {
    let variants = V::variants();
    let mut refusal = None;
    for values in default_consts(problem.b_layout) {
        let Some(&variant) = variants.iter().find(|v| v.values() == values) else {
            continue;
        };
        match variant.check(problem) {
            Ok(_) => return Ok(variant),
            Err(e) => {
                refusal.get_or_insert(e);
            }
        }
    }
    Err(refusal.unwrap_or_else(|| Error::InvalidLaunch {
        kernel: "sparse_gemm".into(),
        message: "the sparse GEMM lost its default variants (128 x 128 x 64 and 64 x 64 x 64 \
                  tiles): pick one with SparseGemmVariant::variants_for and run it"
            .into(),
    }))
}

/// Whether the device has sparse Tensor Cores (`mma.sp`, sm_80 and newer).
pub fn has_sparse_tensor_cores(rt: &Runtime) -> bool {
    rt.device().compute_capability >= (8, 0)
}

/// `problem` ([`GemmProblem`], A 2:4 sparse and compressed: module docs) with
/// the [`default_variant`] of the sparse GEMM `V` (sm_80 and newer).
pub fn sparse_gemm<'a, V: SparseGemmVariant>(
    rt: &Runtime,
    problem: &GemmProblem<f32>,
    a: &DeviceCompressed<V::Elem>,
    b: impl Into<BufferRef<'a, V::Elem>>,
    c: impl Into<BufferMut<'a, V::Elem>>,
    bias: Option<BufferRef<'a, V::Elem>>,
) -> Result<(), Error> {
    default_variant::<V>(problem)?.run(rt, problem, a, b, c, bias)
}

/// `problem` with a 2:4 sparse f16 A (compressed: module docs) on any CUDA
/// GPU: with [`gemm_sparse_f16`] ([`default_variant`]) where the GPU has
/// sparse Tensor Cores, else (sm_70) with [`decompressed_gemm_f16`].
pub fn sparse_gemm_f16<'a>(
    rt: &Runtime,
    problem: &GemmProblem<f32>,
    a: &DeviceCompressed<f16>,
    b: impl Into<BufferRef<'a, f16>>,
    c: impl Into<BufferMut<'a, f16>>,
    bias: Option<BufferRef<'a, f16>>,
) -> Result<(), Error> {
    if has_sparse_tensor_cores(rt) {
        sparse_gemm::<gemm_sparse_f16::Consts>(rt, problem, a, b, c, bias)
    } else {
        decompressed_gemm_f16(rt, problem, a, b, c, bias)
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
/// decompressed into a temporary dense matrix on the GPU (the row-major
/// stack of its batches, `stride_a` apart), then the Volta GEMM
/// [`gemm_f16_wmma`] on the same problem, whose 16-byte copies need k, a
/// row-major B's n and the batch strides to be multiples of 8.
pub fn decompressed_gemm_f16<'a>(
    rt: &Runtime,
    problem: &GemmProblem<f32>,
    a: &DeviceCompressed<f16>,
    b: impl Into<BufferRef<'a, f16>>,
    c: impl Into<BufferMut<'a, f16>>,
    bias: Option<BufferRef<'a, f16>>,
) -> Result<(), Error> {
    compressed_stride(problem)
        .and_then(|_| check_compressed(problem, (a.rows(), a.cols())))
        .map_err(|message| Error::InvalidLaunch {
            kernel: "decompressed_gemm_f16".into(),
            message,
        })?;
    if problem.m == 0 || problem.n == 0 || problem.batch.count == 0 {
        return Ok(());
    }
    let (b, c) = (b.into(), c.into());
    let dense = decompress(rt, a)?;
    FALLBACK.run(rt, problem, &dense, b, c, bias)
}

/// [`sparse_gemm`] with a 2:4 sparse bf16 A. bf16 Tensor Cores (dense or
/// sparse) start at sm_80, so on older GPUs this is an error, as for dense
/// bf16.
pub fn sparse_gemm_bf16<'a>(
    rt: &Runtime,
    problem: &GemmProblem<f32>,
    a: &DeviceCompressed<bf16>,
    b: impl Into<BufferRef<'a, bf16>>,
    c: impl Into<BufferMut<'a, bf16>>,
    bias: Option<BufferRef<'a, bf16>>,
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
    sparse_gemm::<gemm_sparse_bf16::Consts>(rt, problem, a, b, c, bias)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_problem::{Activation, GemmBatch};
    use MatrixLayout::{ColMajor, RowMajor};

    #[test]
    fn the_fallback_is_a_wmma_variant() {
        assert!(
            gemm_f16_wmma::variants().contains(&FALLBACK),
            "{FALLBACK:?}"
        );
    }

    fn problem(dims: (u32, u32, u32), b: MatrixLayout, c: MatrixLayout) -> GemmProblem<f32> {
        GemmProblem {
            b_layout: b,
            c_layout: c,
            ..GemmProblem::new(dims, 1.0, 0.0)
        }
    }

    fn refusal(result: Result<KernelProblem<f32>, Error>) -> String {
        match result {
            Ok(_) => panic!("the variant took a problem it must refuse"),
            Err(e) => e.to_string(),
        }
    }

    fn default_f16(p: &GemmProblem<f32>) -> gemm_sparse_f16::Consts {
        default_variant(p).expect("a default variant takes the problem")
    }

    #[test]
    fn the_default_variant_takes_every_b_and_c_layout_and_any_shape() {
        for b in MatrixLayout::ALL {
            for c in MatrixLayout::ALL {
                for (dims, aligned) in [((64, 64, 64), true), ((3, 5, 63), false)] {
                    let p = problem(dims, b, c);
                    let d = default_f16(&p);
                    let tile = match (aligned, b) {
                        (true, ColMajor) => (128, 128, 64, 64),
                        (true, RowMajor) => (128, 64, 64, 32),
                        (false, _) => (64, 64, 64, 32),
                    };
                    assert_eq!((d.BM, d.BN, d.BK, d.WARP), tile);
                    assert_eq!((d.ALIGNED, d.B_ROW_MAJOR), (aligned, b == RowMajor));
                    assert!(d.check(&p).is_ok());
                    let bf16: gemm_sparse_bf16::Consts = default_variant(&p).unwrap();
                    assert_eq!(bf16.values(), d.values());
                }
            }
        }
        // A row-major B's leading dimension is n: k = 63 keeps the 16-byte copies.
        let d = default_f16(&problem((64, 64, 63), RowMajor, RowMajor));
        assert!(d.ALIGNED);
        let d = default_f16(&problem((64, 60, 64), RowMajor, RowMajor));
        assert!(!d.ALIGNED);
    }

    #[test]
    fn the_launcher_refuses_what_the_kernels_cannot_compute() {
        let tn = default_f16(&problem((64, 64, 64), ColMajor, RowMajor));
        let col_a = GemmProblem {
            a_layout: ColMajor,
            ..problem((64, 64, 64), ColMajor, RowMajor)
        };
        let message = refusal(tn.check(&col_a));
        assert!(
            message.contains("the problem's A must be row-major"),
            "{message}"
        );
        assert!(gemm_sparse_f16::Consts::variants_for(&col_a).is_empty());
        let default = default_variant::<gemm_sparse_f16::Consts>(&col_a);
        let message = default.unwrap_err().to_string();
        assert!(message.contains("row by row"), "{message}");
        let message = refusal(tn.check(&problem((64, 64, 0), ColMajor, RowMajor)));
        assert!(message.contains("k = 0"), "{message}");
        // B's layout is the variant's.
        let message = refusal(tn.check(&problem((64, 64, 64), RowMajor, RowMajor)));
        assert!(
            message.contains("it reads B column-major, and this problem gives B row-major")
                && message.contains("B_ROW_MAJOR"),
            "{message}"
        );
        // 16-byte copies of B: k for column-major B, n for row-major B, stride_b.
        let message = refusal(tn.check(&problem((64, 64, 63), ColMajor, RowMajor)));
        assert!(
            message.contains("it copies B in 16-byte chunks")
                && message.contains("B's leading dimension must be a multiple of 8 elements")
                && message.contains("k = 63")
                && message.contains("ALIGNED = false"),
            "{message}"
        );
        let nn = default_f16(&problem((64, 64, 64), RowMajor, RowMajor));
        let message = refusal(nn.check(&problem((64, 36, 64), RowMajor, RowMajor)));
        assert!(message.contains("n = 36"), "{message}");
        let mut batched = problem((64, 64, 64), ColMajor, ColMajor);
        batched.batch = GemmBatch {
            stride_b: 64 * 64 + 4,
            ..GemmBatch::packed(2, (64, 64, 64))
        };
        let message = refusal(tn.check(&batched));
        assert!(message.contains("stride_b = 4100"), "{message}");
        // A's batches start at whole 16-row tiles.
        batched.batch = GemmBatch::packed(2, (40, 64, 64));
        let message = refusal(tn.check(&batched));
        assert!(
            message.contains("multiple of 16 * k = 1024")
                && message.contains("stride_a = 2560")
                && message.contains("m.next_multiple_of(16) * k"),
            "{message}"
        );
        batched.batch.count = 1;
        assert!(tn.check(&batched).is_ok());
    }

    #[test]
    fn a_batched_sparse_a_is_strided_in_compressed_values_and_metadata() {
        let dims = (40, 24, 100);
        let p = GemmProblem {
            batch: GemmBatch {
                count: 3,
                stride_a: 48 * 100,
                stride_b: 0,
                stride_c: 40 * 24,
            },
            c_layout: ColMajor,
            activation: Activation::GeluTanh,
            ..GemmProblem::new(dims, 1.0, 0.5)
        };
        let kernel = default_f16(&p).check(&p).unwrap();
        // 48 rows of value_cols(100) = 64 kept values; the kernels take the
        // metadata's stride as a sixteenth of it (64 words per 16-row tile).
        assert_eq!(kernel.batch.stride_a, 48 * 64);
        assert_eq!((kernel.batch.stride_b, kernel.batch.stride_c), (0, 960));
        // A column-major C is stored by the kernel: nothing trades places.
        assert_eq!((kernel.m, kernel.n, kernel.k), dims);
        assert_eq!(kernel.bias_mode(true), 1);
        // The compressed A holds every batch's rows: 2 * 48 + 40.
        assert!(check_compressed(&p, (136, 100)).is_ok());
        let message = check_compressed(&p, (135, 100)).unwrap_err().to_string();
        assert!(
            message.contains("has 135 rows")
                && message.contains("(batch.count - 1) * stride_a / k + m = 136"),
            "{message}"
        );
        let message = check_compressed(&p, (136, 96)).unwrap_err().to_string();
        assert!(message.contains("96 columns") && message.contains("k is 100"));
        // A stride past the kernels' u32 indices is refused, not wrapped.
        let huge = GemmProblem {
            batch: GemmBatch {
                stride_a: 16 * 200_000_000,
                ..p.batch
            },
            ..GemmProblem::new((16, 8, 1), 1.0, 0.0)
        };
        let message = refusal(default_f16(&problem((16, 8, 8), ColMajor, RowMajor)).check(&huge));
        assert!(
            message.contains("past the kernels' u32 indices"),
            "{message}"
        );
    }

    #[test]
    fn row_major_b_stays_in_a_few_tiles() {
        let all = gemm_sparse_f16::variants();
        let row_major = all.iter().filter(|v| v.B_ROW_MAJOR).count();
        assert!((1..=4).contains(&row_major), "{row_major} of {}", all.len());
        assert_eq!(gemm_sparse_bf16::variants().len(), all.len());
    }
}
