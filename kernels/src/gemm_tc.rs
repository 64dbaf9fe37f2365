//! Tensor Core GEMMs (sm_80 `mma.sync` through `ldmatrix`, multistage
//! `cp.async` pipelines, XOR-swizzled shared tiles), written in the DSL.

use warpforge::prelude::*;
use warpforge::MatrixLayout;

use crate::gemm_problem::{
    gemm_kernel_parts, gemm_variant, mma_epilogue, Chunks, GemmProblem, GemmVariant,
    VariantLayouts, VariantTakes,
};

/// One kernel source for every Tensor Core GEMM whose operands `ldmatrix` can
/// load (16- and 8-bit elements). An MMA step takes 32 bytes of k from each
/// operand whatever the type (`m16n8k16` for f16/bf16, `m16n8k32` for s8), so
/// the tiling, swizzle, copies and fragment loads are the same in bytes; the
/// instantiations (below) give the element type and its zero, the
/// accumulator's zero, the output and scale types, `chunk` (elements in 16
/// bytes), the two k-tile widths `bk` (64- and 128-byte rows), whether the
/// operands are rounded to tf32 as they are loaded, a constraint of the
/// type's own that keeps every variant free of spills, the names of the
/// layout const parameters (16-bit types only: `ldmatrix.trans` moves 16-bit
/// elements), what to say of the layouts a kernel lacks, the bias stand-in
/// (see `gemm_variant!`), and, from `gemm_kernel_parts!`, whether the output
/// takes GELU, the parameters after A and B and their requirements, from
/// `mma_epilogue!` the epilogue's statements over the accumulator fragments,
/// and from `crate::tile::grouped_tile_order` the block's tile.
macro_rules! tensor_core_gemm {
    (@layouts $other:literal, $consts:ident) => {
        VariantLayouts::Fixed {
            a: MatrixLayout::RowMajor,
            b: MatrixLayout::ColMajor,
            other: $other,
        }
    };
    (@layouts $other:literal, $consts:ident, $a_col:ident, $b_row:ident) => {
        VariantLayouts::Fixed {
            a: if $consts.$a_col { MatrixLayout::ColMajor } else { MatrixLayout::RowMajor },
            b: if $consts.$b_row { MatrixLayout::RowMajor } else { MatrixLayout::ColMajor },
            other: $other,
        }
    };
    (
        $name:ident, $with:ident, $mma:ident,
        elem: $elem:ident = $ezero:tt,
        acc: $acc_zero:tt,
        out: $out:ident,
        scale: $scale:ident,
        chunk: $ch:tt,
        bk: [$bk0:tt, $bk1:tt],
        round_tf32: $round:tt,
        fits: $fits:tt,
        layouts: [$($a_col:ident, $b_row:ident)?],
        other_layouts: $other_layouts:literal,
        layout_requires: ($($layout_requires:tt)*),
        bias_stand_in: $stand_in:ident,
        gelu: $gelu:tt,
        params: ($($params:tt)*),
        requires: ($($requires:tt)*),
        epilogue: { $($epilogue:tt)* },
    ) => {
        /// A Tensor Core GEMM with an epilogue, for each of `batches` strided
        /// batches (the grid's z): `C = act(alpha * A B + beta * C + bias)`, A
        /// (m x k) and B (k x n) in the variant's layouts (row-major A and
        /// column-major B, the "TN" form, unless the 16-bit types' `A_COL_MAJOR`
        /// or `B_ROW_MAJOR` say otherwise), C row-major (m x n), any m, n and k.
        /// `bias_mode` and `activation` select the epilogue at run time (see
        /// `gemm_kernel_parts!`); batch `z` reads A, B and C from `z * stride_a`,
        /// `z * stride_b` and `z * stride_c`. Element, accumulator, output and
        /// scale types are the instantiation's (see `gemm_f16`, `gemm_bf16`,
        /// `gemm_s8`, `gemm_tf32` below). Launch it through `GemmVariant::run`,
        /// which checks a `GemmProblem` against the variant.
        ///
        /// `ALIGNED` variants copy global tiles with 16-byte `cp.async` and take
        /// leading dimensions (k for row-major A and column-major B, m for
        /// column-major A, n for row-major B) and batch strides that are multiples
        /// of the elements in 16 bytes (8 for 16-bit types, 16 for i8), so that
        /// every copied chunk starts 16-byte aligned; the others load element by
        /// element (synchronously, 2 stages) and take any shape.
        ///
        /// The block computes a `BM x BN` tile of C with `(BM / WARP) * (BN / WARP)`
        /// warps, each a `WARP x WARP` warp tile of 16 x 8 products: per 32-byte k
        /// step a warp loads `WARP / 16` A fragments and `WARP / 8` B fragments with
        /// `ldmatrix.x4` and issues `(WARP / 16) * (WARP / 8)` MMAs.
        ///
        /// Shared tiles hold `STAGES` k-tiles of A and B. A k-contiguous operand
        /// (row-major A, column-major B) is stored as rows of `BK` k values (A:
        /// `BM x BK`, B: `BN x BK`). Below in 16-bit terms (8 elements per chunk):
        /// a row of `BK` elements is `BK / 8` 16-byte chunks; chunk `ch` of row
        /// `r` is stored at chunk `ch ^ phase(r)`, `phase(r) = (r / (8 * $ch / BK)) % (BK / $ch)`
        /// (docs/ptx.md, "Shared-tile swizzle"): the 8 rows an `ldmatrix` matrix reads fall in 8
        /// distinct 16-byte bank groups (BK = 64: rows are 128 bytes and `phase = r % 8`;
        /// BK = 32: two rows share 128 bytes and `phase = (r / 2) % 4`), and so do the
        /// copies of 8 consecutive threads.
        ///
        /// An m- or n-contiguous operand (column-major A, row-major B) is stored
        /// as `BK` rows of `BM` (or `BN`) values, rows of 128 to 512 bytes, chunk
        /// `ch` of row `r` at `ch ^ (r % 8)`: the XOR keeps a chunk inside its
        /// group of 8 (128 bytes), so the 8 k rows an `ldmatrix` matrix reads at
        /// one chunk fall in 8 distinct bank groups, as do the copies of 8
        /// consecutive threads (8 consecutive chunks of one row).
        /// `ldmatrix.x4.trans` then gives the fragments: for A, lane `l` points at
        /// k row `l % 8 + 8 (l / 16)`, m chunk `l / 8 % 2` of the 16 x 16 block
        /// (matrices: m 0-7 and 8-15 at k 0-7, then at k 8-15: the registers of
        /// the `m16n8k16` A fragment); for B, at k row `l % 16`, n chunk `l / 16`
        /// (`{b0, b1}` of two 8-column tiles; docs/ptx.md, "ldmatrix").
        ///
        /// Pipeline (docs/ptx.md, "cp.async"): step `t` issues the copies of k-tile `t` into
        /// stage `t % STAGES` and commits them as one group; from step `STAGES - 1` on
        /// it also computes k-tile `t - (STAGES - 1)`, and issues its copies among
        /// those MMAs, a slice per 32-byte k step (all at the first step with two
        /// stages). Fragments are double-buffered in registers: each k step's
        /// `ldmatrix` loads come one step before its MMAs. Before the tile's last k
        /// step, the block waits until at most `STAGES - 2` groups are in flight and
        /// meets at a barrier; that lands the next tile, whose first fragments then
        /// load under the last step's MMAs, and frees this tile's stage for the next
        /// step's copies (CUTLASS's multistage order). A step inside the matrix (the
        /// common case, uniform over a block) copies with plain 16-byte `cp.async`;
        /// at the edges, copies past `m`, `n` or `k` read nothing and zero-fill, so
        /// ragged tiles need no branches around the math. One stage (copy, wait,
        /// compute) is not in the tune space: it was the slowest depth for every
        /// type (perf/LOG.md).
        #[kernel(
            arch(sm_80, sm_90),
            block(BM / WARP * (BN / WARP) * 32),
            tune(
                BM = [64, 128, 256],
                BN = [64, 128, 256],
                BK = [$bk0, $bk1],
                WARP = [32, 64],
                STAGES = [2, 3, 4, 5],
                ALIGNED = [true, false]
                $(, $a_col = [false, true], $b_row = [false, true])?
            ),
            constrain(
                BM / WARP * (BN / WARP) >= 4,
                BM / WARP * (BN / WARP) <= 8,
                BM <= 2 * BN,
                BN <= 2 * BM,
                ALIGNED || STAGES == 2 && BK == $bk0,
                // Element-wise copies of more than 64 elements per thread per tile
                // (i8 with 64x64 warp tiles) spill.
                ALIGNED || (BM + BN) * BK <= 64 * (BM / WARP * (BN / WARP) * 32),
                STAGES * (BM + BN) * BK * (16 / $ch) <= 163 * 1024,
                $fits
                $(,
                // The other layouts in a few tiles (the fastest TN ones and the
                // element-wise fallbacks), so that the build stays bounded. (With
                // ptxas 12.9, their element-wise copies beside 64 x 64 warp tiles
                // spill, and so does 64 x 64 x 32 with row-major A and B on sm_90.)
                !$a_col && !$b_row
                    || ALIGNED && STAGES == 3 && BK == 32 && WARP == 64
                    || ALIGNED && STAGES == 3 && BM * BN * BK == 64 * 64 * 32 && ($a_col || !$b_row)
                    || ALIGNED && STAGES == 3 && BM * BN * BK == 128 * 128 * 64
                    || !ALIGNED && BM == BN && WARP == 32,
                // An m- or n-contiguous tile's copies cover rows in steps of a
                // multiple of 8, so each thread's swizzle is one for all its rows.
                !$a_col || BM / WARP * (BN / WARP) * 32 / (BM / $ch) % 8 == 0,
                !$b_row || BM / WARP * (BN / WARP) * 32 / (BN / $ch) % 8 == 0
                )?
            ),
            requires(
                $($requires)*
                $($layout_requires)*
                !ALIGNED $(|| $a_col && $b_row)? || k % $ch == 0,
                $(!ALIGNED || !$a_col || m % $ch == 0, !ALIGNED || !$b_row || n % $ch == 0,)?
                !ALIGNED || batches == 1 || stride_a % $ch == 0 && stride_b % $ch == 0
            )
        )]
        pub fn $name<
            const BM: u32,
            const BN: u32,
            const BK: u32,
            const WARP: u32,
            const STAGES: u32,
            const ALIGNED: bool,
            $(const $a_col: bool, const $b_row: bool,)?
        >(
            a: &[$elem],
            b: &[$elem],
            $($params)*
        ) {
            // The block's threads; each thread's 16-byte copies per k-tile, of A,
            // of B and in all; the rows of a k-contiguous tile that one pass of
            // the threads copies, and the k rows of an m- or n-contiguous one; the
            // MMA k steps (32 bytes of k) per k-tile; and the slices a tile's
            // copies are issued in (see the main loop).
            const THREADS: u32 = BM / WARP * (BN / WARP) * 32;
            const A_COPIES: u32 = BM * (BK / $ch) / THREADS;
            const B_COPIES: u32 = BN * (BK / $ch) / THREADS;
            const COPIES: u32 = A_COPIES + B_COPIES;
            const ROWS: u32 = THREADS / (BK / $ch);
            const A_K_ROWS: u32 = THREADS / (BM / $ch);
            const B_K_ROWS: u32 = THREADS / (BN / $ch);
            const STEPS: u32 = BK / (2 * $ch);
            const COPY_SLICES: u32 = STEPS - 1 - (STEPS - 2) * (STAGES == 2) as u32;
            // A: BM rows of BK, or BK rows of BM when column-major; B: BN rows of
            // BK, or BK rows of BN when row-major.
            let mut a_tile: [[[$elem; BK $(* (1 - $a_col as u32) + BM * $a_col as u32)?];
                BM $(* (1 - $a_col as u32) + BK * $a_col as u32)?]; STAGES] = shared();
            let mut b_tile: [[[$elem; BK $(* (1 - $b_row as u32) + BN * $b_row as u32)?];
                BN $(* (1 - $b_row as u32) + BK * $b_row as u32)?]; STAGES] = shared();
            let tid = thread_idx().x;
            let lane = lane_id();
            let warp = tid / 32;
            let wm0 = warp / (BN / WARP) * WARP;
            let wn0 = warp % (BN / WARP) * WARP;
            // The block's tile: its first row and column of C.
            let (row0, col0) = crate::tile::grouped_tile_order::<BM, BN>();
            // A block past the last batch (a grid deeper than `batches`) reads the
            // last batch and writes nothing: a branch to the end instead makes
            // ptxas spill in the 255-register variants.
            let batch = block_idx().z.min(batches - 1);
            let a_at = batch * stride_a;
            let b_at = batch * stride_b;

            let mut acc = [[[$acc_zero; 4]; WARP / 8]; WARP / 16];
            let mut a_frag = [[[0u32; 4]; WARP / 16]; 2];
            let mut b_pair = [[0u32; 4]; WARP / 16];
            let mut b_frag = [[[0u32; 2]; WARP / 8]; 2];

            // Copy slots of k-contiguous tiles: thread `tid` copies chunk `cp_ch` of
            // rows `cp_row + l * ROWS` of each tile.
            // ROWS is a multiple of the swizzle period, so the swizzled chunk is the
            // same for all of them, and only the k offset changes from tile to tile:
            // everything else is computed once, here.
            let cp_ch = tid % (BK / $ch);
            let cp_row = tid / (BK / $ch);
            let cp_col = (cp_ch ^ (cp_row / (8 * $ch / BK) % (BK / $ch))) * $ch;
            $(
            // Copy slots of m- or n-contiguous tiles: chunk `a_cp_ch` (m) of k rows
            // `a_cp_row + l * A_K_ROWS`; the constraints make that step a
            // multiple of 8, so the swizzle `a_cp_row % 8` holds for every row.
            let a_cp_ch = if $a_col { tid % (BM / $ch) } else { 0 };
            let a_cp_row = if $a_col { tid / (BM / $ch) } else { 0 };
            let a_cp_col = if $a_col { (a_cp_ch ^ (a_cp_row % 8)) * $ch } else { 0 };
            let a_gm = if $a_col { row0 + a_cp_ch * $ch } else { 0 };
            let b_cp_ch = if $b_row { tid % (BN / $ch) } else { 0 };
            let b_cp_row = if $b_row { tid / (BN / $ch) } else { 0 };
            let b_cp_col = if $b_row { (b_cp_ch ^ (b_cp_row % 8)) * $ch } else { 0 };
            let b_gn = if $b_row { col0 + b_cp_ch * $ch } else { 0 };
            )?
            // Where the thread's copied rows start in global memory: its row `l`
            // of a tile at `a_first + l * a_step` (k-contiguous: row `cp_row + l *
            // ROWS` of the block's rows, k added per tile; m- or n-contiguous: k
            // row `a_cp_row + l * A_K_ROWS` at the thread's chunk, k times the leading
            // dimension added per tile). Two registers per operand, not one per
            // row: the copies are issued among the MMAs, whose fragments and
            // accumulators hold nearly all of the registers.
            let mut a_first = a_at + (row0 + cp_row) * k;
            let mut a_step = ROWS * k;
            let mut b_first = b_at + (col0 + cp_row) * k;
            let mut b_step = ROWS * k;
            // How many of the block's rows, from the thread's first copied one,
            // are inside the matrix (k-contiguous A: of m; B: of n): the edge
            // copies test `l * ROWS < room` rather than keep the tile's origin
            // live through the main loop.
            let a_room = if row0 + cp_row < m { m - row0 - cp_row } else { 0 };
            let b_room = if col0 + cp_row < n { n - col0 - cp_row } else { 0 };
            $(
            if $a_col {
                a_first = a_at + a_cp_row * m + a_gm;
                a_step = A_K_ROWS * m;
            }
            if $b_row {
                b_first = b_at + b_cp_row * n + b_gn;
                b_step = B_K_ROWS * n;
            }
            )?

            // ldmatrix rows: A lane `lane` reads row `lane % 16` of a 16-row block,
            // chunk `2 kk + lane / 16`; B lane reads row `lane % 8 + 8 (lane / 16)`,
            // chunk `2 kk + (lane / 8) % 2`. Block starts are multiples of 16, so the
            // swizzle phase depends on the lane only, and since the chunk's low bit
            // comes from the lane, `chunk ^ phase = 2 kk ^ (low bit ^ phase)`.
            let a_ld_row = wm0 + lane % 16;
            let a_ld_x = lane / 16 ^ (a_ld_row / (8 * $ch / BK) % (BK / $ch));
            let b_ld_row = wn0 + lane % 8 + lane / 16 * 8;
            let b_ld_x = lane / 8 % 2 ^ (b_ld_row / (8 * $ch / BK) % (BK / $ch));
            $(
            // Transposed loads (m- or n-contiguous tiles): the k row within a
            // 16-wide step and the chunk of the warp's first fragment. Every k row
            // a lane reads is `lane % 8` modulo 8, its swizzle.
            let a_ld_k = if $a_col { lane % 8 + lane / 16 * 8 } else { 0 };
            let a_ld_chunk = if $a_col { wm0 / $ch + lane / 8 % 2 } else { 0 };
            let b_ld_k = if $b_row { lane % 16 } else { 0 };
            let b_ld_chunk = if $b_row { wn0 / $ch + lane / 16 } else { 0 };
            )?

            let interior = row0 + BM <= m && col0 + BN <= n;
            let k_tiles = (k + BK - 1) / BK;
            // Shared stages: step `t` copies k-tile `t` into stage `ws` (`t % STAGES`)
            // and, from step `STAGES - 1` on, computes k-tile `t - (STAGES - 1)` from
            // stage `rs`; `ns` is the stage after `rs`. Counters, not `t % STAGES`:
            // no division per step.
            let mut ws = 0u32;
            let mut rs = 1 % STAGES;
            let mut ns = 2 % STAGES;
            for t in 0..k_tiles + STAGES - 1 {
                let k0 = t * BK;
                // Three forms of a step, uniform over the block, each one block of
                // straight-line code for ptxas to schedule: `path` 0 computes and
                // copies a tile wholly in bounds with plain 16-byte `cp.async` (one
                // instruction besides its address, where the zero-filling form costs
                // six); 1 computes and copies at an edge (and past the last tile,
                // whose copies zero-fill a stage that is never read); 2, the first
                // `STAGES - 1` steps, only copies.
                if !ALIGNED && t < k_tiles {
                    // Element by element, through registers, all at the top of
                    // the step: among the MMAs, the loaded values would stay live
                    // beside the fragments, and the 64 x 64 warp tiles spill.
                    // Tiles past the last are not copied (their stage is never
                    // read).
                    $(if $a_col {
                        #[unroll]
                        for l in 0..A_COPIES {
                            let r = a_cp_row + l * A_K_ROWS;
                            #[unroll]
                            for q in 0..$ch {
                                a_tile[ws][r][a_cp_col + q] = if a_gm + q < m && k0 + r < k {
                                    a[a_first + l * a_step + k0 * m + q]
                                } else {
                                    $ezero
                                };
                            }
                        }
                    } else)? {
                        #[unroll]
                        for l in 0..A_COPIES {
                            let r = cp_row + l * ROWS;
                            #[unroll]
                            for q in 0..$ch {
                                let gk = k0 + cp_ch * $ch + q;
                                a_tile[ws][r][cp_col + q] = if l * ROWS < a_room && gk < k {
                                    a[a_first + l * a_step + gk]
                                } else {
                                    $ezero
                                };
                            }
                        }
                    }
                    $(if $b_row {
                        #[unroll]
                        for l in 0..B_COPIES {
                            let r = b_cp_row + l * B_K_ROWS;
                            #[unroll]
                            for q in 0..$ch {
                                b_tile[ws][r][b_cp_col + q] = if b_gn + q < n && k0 + r < k {
                                    b[b_first + l * b_step + k0 * n + q]
                                } else {
                                    $ezero
                                };
                            }
                        }
                    } else)? {
                        #[unroll]
                        for l in 0..B_COPIES {
                            let r = cp_row + l * ROWS;
                            #[unroll]
                            for q in 0..$ch {
                                let gk = k0 + cp_ch * $ch + q;
                                b_tile[ws][r][cp_col + q] = if l * ROWS < b_room && gk < k {
                                    b[b_first + l * b_step + gk]
                                } else {
                                    $ezero
                                };
                            }
                        }
                    }
                }
                let full = ALIGNED && interior && k0 + BK <= k;
                let computing = t >= STAGES - 1;
                #[unroll]
                for path in 0..3u32 {
                    if ALIGNED && path == 0 && computing && full
                        || path == 1 && computing && !full
                        || path == 2 && !computing
                    {
                        // Iteration `kk` loads the fragments of k-step `kk` (for `kk ==
                        // STEPS`: step 0 of the next tile, from stage `ns`; the
                        // last copying step loads the first computed tile's) and
                        // multiplies those of step `kk - 1`, so each MMA's operands
                        // were loaded one step earlier. Among the MMAs, the copies of
                        // this step's tile, in `COPY_SLICES` slices: copy `e` of a
                        // thread's `COPIES` in slice `e * COPY_SLICES / COPIES`. Their
                        // address arithmetic then takes issue slots the MMAs leave idle;
                        // issued together at the top of the step, they held the
                        // block's warps off the Tensor Cores all at once (perf/LOG.md,
                        // session 6). With two stages they all go first, to land under
                        // the whole tile's MMAs. The barrier that lands the next tile
                        // (and frees this tile's stage for the next step's copies: its
                        // fragments are all loaded by then) comes before the last
                        // step's MMAs, which then cover the first loads from the next
                        // stage.
                        #[unroll]
                        for kk in 0..STEPS + 1 {
                            if path < 2 && kk > 0 || kk == STEPS && t == STAGES - 2 {
                                let ls = if kk < STEPS { rs } else { ns };
                                let kc = kk % STEPS;
                                #[unroll]
                                for i in 0..WARP / 16 {
                                    $(if $a_col {
                                        let col = ((a_ld_chunk + 2 * i) ^ (lane % 8)) * $ch;
                                        ldmatrix_x4_trans(
                                            &mut a_frag[kk % 2][i],
                                            &a_tile[ls][kc * 2 * $ch + a_ld_k][col],
                                        );
                                    } else)? {
                                        let col = (kc * 2 ^ a_ld_x) * $ch;
                                        ldmatrix_x4(
                                            &mut a_frag[kk % 2][i],
                                            &a_tile[ls][a_ld_row + i * 16][col],
                                        );
                                    }
                                    if $round {
                                        #[unroll]
                                        for w in 0..4u32 {
                                            let x = f32::from_bits(a_frag[kk % 2][i][w]);
                                            a_frag[kk % 2][i][w] = to_tf32(x);
                                        }
                                    }
                                }
                                // One x4 load gives the two k halves of two 8-column n tiles.
                                #[unroll]
                                for j in 0..WARP / 16 {
                                    $(if $b_row {
                                        let col = ((b_ld_chunk + 2 * j) ^ (lane % 8)) * $ch;
                                        ldmatrix_x4_trans(
                                            &mut b_pair[j],
                                            &b_tile[ls][kc * 2 * $ch + b_ld_k][col],
                                        );
                                    } else)? {
                                        let col = (kc * 2 ^ b_ld_x) * $ch;
                                        ldmatrix_x4(&mut b_pair[j], &b_tile[ls][b_ld_row + j * 16][col]);
                                    }
                                    b_frag[kk % 2][2 * j][0] = b_pair[j][0];
                                    b_frag[kk % 2][2 * j][1] = b_pair[j][1];
                                    b_frag[kk % 2][2 * j + 1][0] = b_pair[j][2];
                                    b_frag[kk % 2][2 * j + 1][1] = b_pair[j][3];
                                }
                                if $round {
                                    #[unroll]
                                    for j in 0..WARP / 8 {
                                        #[unroll]
                                        for w in 0..2u32 {
                                            let x = f32::from_bits(b_frag[kk % 2][j][w]);
                                            b_frag[kk % 2][j][w] = to_tf32(x);
                                        }
                                    }
                                }
                            }
                            if path < 2 && kk > 0 {
                                #[unroll]
                                for i in 0..WARP / 16 {
                                    #[unroll]
                                    for j in 0..WARP / 8 {
                                        $mma(
                                            &mut acc[i][j],
                                            &a_frag[(kk - 1) % 2][i],
                                            &b_frag[(kk - 1) % 2][j],
                                        );
                                    }
                                }
                            }
                            if kk < COPY_SLICES {
                                if path == 0 {
                                    let gk = k0 + cp_ch * $ch;
                                    $(if $a_col {
                                        let step = k0 * m;
                                        #[unroll]
                                        for l in 0..A_COPIES {
                                            if l * COPY_SLICES / COPIES == kk {
                                                let r = a_cp_row + l * A_K_ROWS;
                                                cp_async(&mut a_tile[ws][r][a_cp_col], &a[a_first + l * a_step + step], 16, 16);
                                            }
                                        }
                                    } else)? {
                                        #[unroll]
                                        for l in 0..A_COPIES {
                                            if l * COPY_SLICES / COPIES == kk {
                                                let r = cp_row + l * ROWS;
                                                cp_async(&mut a_tile[ws][r][cp_col], &a[a_first + l * a_step + gk], 16, 16);
                                            }
                                        }
                                    }
                                    $(if $b_row {
                                        let step = k0 * n;
                                        #[unroll]
                                        for l in 0..B_COPIES {
                                            if (A_COPIES + l) * COPY_SLICES / COPIES == kk {
                                                let r = b_cp_row + l * B_K_ROWS;
                                                cp_async(&mut b_tile[ws][r][b_cp_col], &b[b_first + l * b_step + step], 16, 16);
                                            }
                                        }
                                    } else)? {
                                        #[unroll]
                                        for l in 0..B_COPIES {
                                            if (A_COPIES + l) * COPY_SLICES / COPIES == kk {
                                                let r = cp_row + l * ROWS;
                                                cp_async(&mut b_tile[ws][r][cp_col], &b[b_first + l * b_step + gk], 16, 16);
                                            }
                                        }
                                    }
                                } else if ALIGNED {
                                    // At an edge: a chunk past the matrix reads nothing (and names
                                    // element 0) and zero-fills. The leading dimensions are
                                    // multiples of the chunk, so a chunk is wholly in or out.
                                    let gk = k0 + cp_ch * $ch;
                                    let k_bytes = if gk < k { (k - gk).min($ch) * (16 / $ch) } else { 0 };
                                    let k_at = if gk < k { gk } else { 0 };
                                    $(if $a_col {
                                        #[unroll]
                                        for l in 0..A_COPIES {
                                            if l * COPY_SLICES / COPIES == kk {
                                                let r = a_cp_row + l * A_K_ROWS;
                                                let inside = a_gm < m && k0 + r < k;
                                                let at = if inside { a_first + l * a_step + k0 * m } else { 0 };
                                                let bytes = if inside { 16u32 } else { 0 };
                                                cp_async(&mut a_tile[ws][r][a_cp_col], &a[at], 16, bytes);
                                            }
                                        }
                                    } else)? {
                                        #[unroll]
                                        for l in 0..A_COPIES {
                                            if l * COPY_SLICES / COPIES == kk {
                                                let r = cp_row + l * ROWS;
                                                let inside = l * ROWS < a_room;
                                                let at = if inside { a_first + l * a_step + k_at } else { 0 };
                                                let bytes = if inside { k_bytes } else { 0 };
                                                cp_async(&mut a_tile[ws][r][cp_col], &a[at], 16, bytes);
                                            }
                                        }
                                    }
                                    $(if $b_row {
                                        #[unroll]
                                        for l in 0..B_COPIES {
                                            if (A_COPIES + l) * COPY_SLICES / COPIES == kk {
                                                let r = b_cp_row + l * B_K_ROWS;
                                                let inside = b_gn < n && k0 + r < k;
                                                let at = if inside { b_first + l * b_step + k0 * n } else { 0 };
                                                let bytes = if inside { 16u32 } else { 0 };
                                                cp_async(&mut b_tile[ws][r][b_cp_col], &b[at], 16, bytes);
                                            }
                                        }
                                    } else)? {
                                        #[unroll]
                                        for l in 0..B_COPIES {
                                            if (A_COPIES + l) * COPY_SLICES / COPIES == kk {
                                                let r = cp_row + l * ROWS;
                                                let inside = l * ROWS < b_room;
                                                let at = if inside { b_first + l * b_step + k_at } else { 0 };
                                                let bytes = if inside { k_bytes } else { 0 };
                                                cp_async(&mut b_tile[ws][r][cp_col], &b[at], 16, bytes);
                                            }
                                        }
                                    }
                                }
                            }
                            if kk + 1 == COPY_SLICES {
                                cp_async_commit();
                            }
                            if kk + 1 == STEPS && (path < 2 || t == STAGES - 2) {
                                cp_async_wait(STAGES - 2);
                                sync_threads();
                            }
                        }
                    }
                }
                // The stages rotate: this step's read stage is the next step's
                // write stage.
                ws = rs;
                rs = ns;
                ns = if ns + 1 == STAGES { 0 } else { ns + 1 };
            }

            // The block's tile again, so that it is not live through the main loop.
            let (row0, col0) = crate::tile::grouped_tile_order::<BM, BN>();
            $($epilogue)*
        }

        gemm_variant!(
            $name: $elem, $out, $scale,
            takes: |consts| VariantTakes {
                layouts: tensor_core_gemm!(@layouts $other_layouts, consts $(, $a_col, $b_row)?),
                chunks: consts.ALIGNED.then_some(Chunks {
                    elements: $ch,
                    otherwise: "take a variant with ALIGNED = false, which loads element by element",
                }),
                gelu: $gelu,
            },
            bias_stand_in: $stand_in,
        );

        /// `C = alpha * A B + beta * C` (A row-major, B column-major, C row-major,
        /// one batch, no bias or activation) with the given variant: shorthand for
        /// [`GemmVariant::run`] on `GemmProblem::new((m, n, k), alpha, beta)`.
        #[allow(clippy::too_many_arguments)]
        pub fn $with(
            rt: &Runtime,
            consts: $name::Consts,
            a: &DeviceBuffer<$elem>,
            b: &DeviceBuffer<$elem>,
            c: &mut DeviceBuffer<$out>,
            dims: (u32, u32, u32),
            alpha: $scale,
            beta: $scale,
        ) -> Result<(), Error> {
            consts.run(rt, &GemmProblem::new(dims, alpha, beta), a, b, c, None)
        }
    };
}

// f16 in and out, f32 accumulation and scale.
gemm_kernel_parts!(float f32 => f16, mma_epilogue! { c_col_major: 0, in_fours: true, tensor_core_gemm! {
    gemm_f16, gemm_f16_with, mma_m16n8k16_f16,
    elem: f16 = 0.0, acc: 0.0f32, out: f16, scale: f32, chunk: 8, bk: [32, 64], round_tf32: false,
    fits: (true),
    layouts: [A_COL_MAJOR, B_ROW_MAJOR],
    other_layouts: "the variants with the other values of A_COL_MAJOR and B_ROW_MAJOR read the \
                    other layouts (GemmVariant::variants_for lists those that take a problem)",
    layout_requires: (a_col_major == A_COL_MAJOR, b_row_major == B_ROW_MAJOR,),
    bias_stand_in: a,
} });
// bf16 in and out, f32 accumulation and scale.
gemm_kernel_parts!(float f32 => bf16, mma_epilogue! { c_col_major: 0, in_fours: true, tensor_core_gemm! {
    gemm_bf16, gemm_bf16_with, mma_m16n8k16_bf16,
    elem: bf16 = 0.0, acc: 0.0f32, out: bf16, scale: f32, chunk: 8, bk: [32, 64], round_tf32: false,
    fits: (true),
    layouts: [A_COL_MAJOR, B_ROW_MAJOR],
    other_layouts: "the variants with the other values of A_COL_MAJOR and B_ROW_MAJOR read the \
                    other layouts (GemmVariant::variants_for lists those that take a problem)",
    layout_requires: (a_col_major == A_COL_MAJOR, b_row_major == B_ROW_MAJOR,),
    bias_stand_in: a,
} });
// i8 in, i32 accumulation, output and scale: exact integer arithmetic
// (wrapping past i32, as cuBLAS's `CUBLAS_COMPUTE_32I`).
gemm_kernel_parts!(integer i32 => i32, mma_epilogue! { c_col_major: 0, in_fours: true, tensor_core_gemm! {
    gemm_s8, gemm_s8_with, mma_m16n8k32_s8,
    elem: i8 = 0, acc: 0i32, out: i32, scale: i32, chunk: 16, bk: [64, 128], round_tf32: false,
    fits: (true),
    layouts: [],
    other_layouts: "gemm_s8 reads row-major A and column-major B only (ldmatrix.trans, which \
                    would load the other layouts, moves 16-bit elements): store A row-major and \
                    B column-major",
    layout_requires: (!a_col_major, !b_row_major,),
    bias_stand_in: fresh,
} });
// f32 in and out, f32 accumulation and scale, on the tf32 Tensor Cores
// (m16n8k8): each operand word `ldmatrix` loads is rounded to tf32 (to nearest,
// ties away from zero, as cuBLAS rounds) before its MMA.
gemm_kernel_parts!(float f32 => f32, mma_epilogue! { c_col_major: 0, in_fours: true, tensor_core_gemm! {
    gemm_tf32, gemm_tf32_with, mma_m16n8k8_tf32,
    elem: f32 = 0.0, acc: 0.0f32, out: f32, scale: f32, chunk: 4, bk: [16, 32], round_tf32: true,
    // At BK = 32 the rounding's temporaries make ptxas 12.9 spill every other
    // tile, and 64 x 64 with more than two stages on sm_90
    // (generated/manifest.json).
    fits: (BK == 16 || BM * BN == 64 * 64 && STAGES == 2 || BM * BN == 128 * 256 && STAGES > 1),
    layouts: [],
    other_layouts: "gemm_tf32 reads row-major A and column-major B only (ldmatrix.trans, which \
                    would load the other layouts, moves 16-bit elements): store A row-major and \
                    B column-major",
    layout_requires: (!a_col_major, !b_row_major,),
    bias_stand_in: a,
} });
