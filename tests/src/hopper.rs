//! The GPU tier's proofs of the Hopper constructs (issue 17) on their own,
//! before any kernel relies on them: what the PTX ISA describes but only a
//! device can confirm.
//!
//! - `wgmma_sw128` and `wgmma_plain`, one instance per element type (f16,
//!   bf16, tf32 on `f32` tiles, s8, u8, e4m3, e5m2): one
//!   warpgroup stores a 64 x K tile of A and an N x K tile of B (both
//!   K-major: rows of K = 128 bytes of k) in shared memory in the layout a
//!   swizzle needs (128-byte swizzle: 16-byte chunk `c` of row `r` at
//!   `c ^ (r % 8)`; none: core matrices `[k / E][row][k % E]`, E elements
//!   in 16 bytes), runs `STEPS` chained wgmmas (32 bytes of k each: k16,
//!   k8 for tf32, k32 for the 8-bit types) from descriptors and stores the
//!   accumulators (`f32`, `i32` for s8/u8) through their fragment layout
//!   (element `4j + 2h + i` of thread `t` is D[16 (t / 32) + t % 32 / 4 + 8h][8j + 2 (t % 4) + i]).
//!   A wrong descriptor field, swizzle or fragment layout moves whole rows,
//!   columns or chunks, which the float64 comparison reports by element:
//!   exact for s8/u8 (every value drawn), within 1e-5 of the magnitude sum
//!   for f16/bf16 and for fp8 (values drawn so that the sums are exact in
//!   f32), and for tf32, whose unrounded f32 inputs wgmma reads with the
//!   low 13 mantissa bits dropped (measured on the H200).
//! - `tma_load_sw128`: TMA loads of a ragged f16 matrix into 128-byte
//!   swizzled tiles, read back through the swizzle the wgmma proofs use:
//!   a wrong coordinate order, swizzle or out-of-bounds fill (zeros) shows
//!   as misplaced or non-zero elements; a transaction count that clipped
//!   tiles did not complete would hang the wait.
//! - `tma_roundtrip`: a 3-D tensor (strided batches) loaded without a
//!   swizzle, changed by ordinary shared stores and stored back through
//!   the TMA after the async-proxy fence: clipped stores must leave every
//!   element outside the tensor as it was.
//! - `mbarrier_phases`: warps 1-3 hand a buffer to warp 0 through a `full`
//!   mbarrier of 96 arrivals and get it back through a `free` one of 32, over
//!   several phases: a phase that completed early, a parity that did not
//!   flip, or a first wait on the phase before phase 0 that blocked would
//!   show as stale values or a hang.
//! - `cluster_multicast`: clusters of two blocks along x, each block
//!   loading half of a 16-row tile of a ragged f16 matrix with
//!   `tma_load_multicast` (mask `0b11`) so that both blocks hold the whole
//!   tile, and each warp arriving on the other block's mbarrier with
//!   `mbarrier_arrive_cluster` before the block waits on its own: a wrong
//!   rank layout, a multicast that reached one block or missed a barrier, or
//!   a remote arrival that went astray shows as wrong rows, wrong ranks or a
//!   hang.

use warpforge::prelude::*;

use crate::report::Report;
use crate::Inputs;

/// Writes a warpgroup's m64nN accumulators (`H = N / 2` per thread, `f32`
/// or `i32`) to `c`, row-major 64 x N, through the wgmma fragment layout.
#[device]
pub fn store_wgmma_accumulators<D: Number, const H: u32>(acc: &[D; H], c: &mut [D]) {
    let t = thread_idx().x;
    let w = t / 32;
    let g = t % 32 / 4;
    let q = t % 4;
    #[unroll]
    for e in 0..H {
        c[(16 * w + g + 8 * (e / 2 % 2)) * (2 * H) + 8 * (e / 4) + 2 * q + e % 2] = acc[e];
    }
}

/// `c` (64 x N) = A (64 x K) times B (N x K) transposed over the first
/// `STEPS` instructions' k (32 bytes each), through 128-byte swizzled tiles
/// of rows of K = 128 bytes. `T` is the tiles' element type, which picks
/// the wgmma form, and `D` the accumulators'.
#[kernel(
    arch(sm_90a),
    block(128),
    tune(N = [64, 128, 256], STEPS = [1, 4]),
    instances(
        wgmma_sw128_f16 = <f16, f32>,
        wgmma_sw128_bf16 = <bf16, f32>,
        wgmma_sw128_tf32 = <f32, f32>,
        wgmma_sw128_s8 = <i8, i32>,
        wgmma_sw128_u8 = <u8, i32>,
        wgmma_sw128_e4m3 = <e4m3, f32>,
        wgmma_sw128_e5m2 = <e5m2, f32>
    )
)]
pub fn wgmma_sw128<T, D: Number, const N: u32, const STEPS: u32>(a: &[T], b: &[T], c: &mut [D]) {
    // Elements per 16-byte chunk, per 128-byte row, per instruction's k.
    const E: u32 = 16 / T::BYTES;
    const ROW: u32 = 8 * E;
    const KS: u32 = 2 * E;
    let mut a_tile: [[T; ROW]; 64] = shared();
    let mut b_tile: [[T; ROW]; N] = shared();
    let t = thread_idx().x;
    for i in (t..64 * ROW).step_by(128) {
        let r = i / ROW;
        let k = i % ROW;
        a_tile[r][(k / E ^ r % 8) * E + k % E] = a[i];
    }
    for i in (t..N * ROW).step_by(128) {
        let r = i / ROW;
        let k = i % ROW;
        b_tile[r][(k / E ^ r % 8) * E + k % E] = b[i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [D::ZERO; N / 2];
    wgmma_fence();
    #[unroll]
    for s in 0..STEPS {
        wgmma_m64::<T, N>(
            &mut acc,
            matrix_desc(&a_tile[0][s * KS], 128),
            matrix_desc(&b_tile[0][s * KS], 128),
            s > 0,
        );
    }
    wgmma_commit();
    wgmma_wait(0);
    store_wgmma_accumulators(&acc, c);
}

/// The same product through unswizzled core-matrix tiles.
#[kernel(
    arch(sm_90a),
    block(128),
    tune(N = [64, 128, 256], STEPS = [1, 4]),
    instances(
        wgmma_plain_f16 = <f16, f32>,
        wgmma_plain_bf16 = <bf16, f32>,
        wgmma_plain_tf32 = <f32, f32>,
        wgmma_plain_s8 = <i8, i32>,
        wgmma_plain_u8 = <u8, i32>,
        wgmma_plain_e4m3 = <e4m3, f32>,
        wgmma_plain_e5m2 = <e5m2, f32>
    )
)]
pub fn wgmma_plain<T, D: Number, const N: u32, const STEPS: u32>(a: &[T], b: &[T], c: &mut [D]) {
    const E: u32 = 16 / T::BYTES;
    const ROW: u32 = 8 * E;
    let mut a_tile: [[[T; E]; 64]; 8] = shared();
    let mut b_tile: [[[T; E]; N]; 8] = shared();
    let t = thread_idx().x;
    for i in (t..64 * ROW).step_by(128) {
        let r = i / ROW;
        let k = i % ROW;
        a_tile[k / E][r][k % E] = a[i];
    }
    for i in (t..N * ROW).step_by(128) {
        let r = i / ROW;
        let k = i % ROW;
        b_tile[k / E][r][k % E] = b[i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [D::ZERO; N / 2];
    wgmma_fence();
    #[unroll]
    for s in 0..STEPS {
        wgmma_m64::<T, N>(
            &mut acc,
            matrix_desc(&a_tile[s * 2][0][0], 0),
            matrix_desc(&b_tile[s * 2][0][0], 0),
            s > 0,
        );
    }
    wgmma_commit();
    wgmma_wait(0);
    store_wgmma_accumulators(&acc, c);
}

/// Round `r` of `rounds`: warps 1-3 write `r * 1000 + t` into the buffer,
/// warp 0 copies it to `out[r * 96 ..]` (see the module's doc).
#[kernel(arch(sm_90, sm_90a), block(128))]
pub fn mbarrier_phases(rounds: u32, out: &mut [u32]) {
    let mut full: [u64; 1] = shared();
    let mut free: [u64; 1] = shared();
    let mut buffer: [u32; 96] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut full[0], 96);
        // Every reader arrives: an arrival releases only its own thread's
        // loads, so one elected arrival would leave the other lanes' loads
        // unordered before the next round's stores.
        mbarrier_init(&mut free[0], 32);
        fence_mbarrier_init();
    }
    sync_threads();
    let mut parity = 0u32;
    for r in 0..rounds {
        if t >= 32 {
            // The phase before the first counts as completed: round 0 passes at once.
            mbarrier_wait(&free[0], parity ^ 1);
            buffer[t - 32] = r * 1000 + t;
            mbarrier_arrive(&mut full[0]);
        } else {
            mbarrier_wait(&full[0], parity);
            out[r * 96 + t] = buffer[t];
            out[r * 96 + t + 32] = buffer[t + 32];
            out[r * 96 + t + 64] = buffer[t + 64];
            mbarrier_arrive_expect_tx(&mut free[0], 0);
        }
        parity ^= 1;
    }
}

/// Loads the 64 x 64 tile at block (x, y) of the row-major m x k matrix
/// `a` (rows `ld` apart) into a 128-byte swizzled shared tile through its
/// tensor map, and writes it unswizzled to `out`, a 64 * grid rows x 64 *
/// grid columns matrix: a tile reaching past the matrix reads zeros there.
#[kernel(arch(sm_90a), block(128))]
pub fn tma_load_sw128(
    #[tensor_map(shape = [m, k], strides = [ld], tile = [64, 64], swizzle = 128)] a: &[f16],
    m: u32,
    k: u32,
    ld: u32,
    out: &mut [f16],
) {
    let mut tile: [[f16; 64]; 64] = shared();
    let mut bar: [u64; 1] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut bar[0], 1);
        fence_mbarrier_init();
    }
    sync_threads();
    let (row0, col0) = (block_idx().y * 64, block_idx().x * 64);
    if t == 0 {
        // The whole tile's bytes, those outside the matrix included.
        mbarrier_arrive_expect_tx(&mut bar[0], 64 * 64 * 2);
        tma_load(&mut tile[0][0], a, (row0, col0), &mut bar[0]);
    }
    mbarrier_wait(&bar[0], 0);
    let width = grid_dim().x * 64;
    for i in (t..64 * 64).step_by(128) {
        let r = i / 64;
        let c = i % 64;
        out[(row0 + r) * width + col0 + c] = tile[r][(c / 8 ^ r % 8) * 8 + c % 8];
    }
}

/// Cluster `c` (blocks 2c and 2c + 1 along x, ranks 0 and 1) holds rows
/// 16c to 16c + 15 of the m x 64 row-major f16 matrix `a` in each block's
/// shared `tile`: rank r loads rows 16c + 8r to 16c + 8r + 7 into
/// `tile[r]` of both blocks. Every warp's lane 0 arrives on the other
/// block's `bars[1]` (4 arrivals a phase) and each block waits on its own,
/// so a block reads its tile only once the other has too. Block b writes
/// its tile to rows 16b to 16b + 15 of `out` (64 columns) and its rank to
/// `ranks[b]`.
#[kernel(arch(sm_90a), block(128), cluster(2))]
pub fn cluster_multicast(
    #[tensor_map(shape = [m, 64], strides = [64], tile = [8, 64])] a: &[f16],
    m: u32,
    out: &mut [f16],
    ranks: &mut [u32],
) {
    let mut tile: [[[f16; 64]; 8]; 2] = shared();
    let mut bars: [u64; 2] = shared();
    let t = thread_idx().x;
    let rank = cluster_rank();
    if t == 0 {
        mbarrier_init(&mut bars[0], 1);
        mbarrier_init(&mut bars[1], 4);
        fence_mbarrier_init();
    }
    // Both blocks' mbarriers are ready before either copies or arrives.
    cluster_sync();
    if t == 0 {
        // The whole tile's bytes: this block's half and the other's.
        mbarrier_arrive_expect_tx(&mut bars[0], 16 * 64 * 2);
        let row = block_idx().x / 2 * 16 + 8 * rank;
        tma_load_multicast(&mut tile[rank][0][0], a, (row, 0), &mut bars[0], 3);
    }
    if t % 32 == 0 {
        mbarrier_arrive_cluster(&mut bars[1], 1 - rank);
    }
    mbarrier_wait(&bars[0], 0);
    mbarrier_wait(&bars[1], 0);
    for i in (t..16 * 64).step_by(128) {
        out[block_idx().x * 16 * 64 + i] = tile[i / 512][i / 64 % 8][i % 64];
    }
    if t == 0 {
        ranks[block_idx().x] = rank;
    }
    // Neither block leaves while the other may still arrive on its mbarriers.
    cluster_sync();
}

/// Loads a 2 x 16 x 8 tile of the batched tensor `a` (`batches` matrices
/// of m x n, rows `ld` apart, matrices `batch_stride` apart) without a
/// swizzle, maps each element x to 2x + 1 with ordinary shared stores and
/// stores the tile to `c` (the same layout) through the TMA, which writes
/// only the elements inside the tensor.
#[kernel(arch(sm_90, sm_90a), block(32))]
pub fn tma_roundtrip(
    #[tensor_map(shape = [batches, m, n], strides = [batch_stride, ld], tile = [2, 16, 8])]
    a: &[f32],
    #[tensor_map(shape = [batches, m, n], strides = [batch_stride, ld], tile = [2, 16, 8])]
    c: &mut [f32],
    batches: u32,
    m: u32,
    n: u32,
    ld: u32,
    batch_stride: u32,
) {
    let mut tile: [[[f32; 8]; 16]; 2] = shared();
    let mut bar: [u64; 1] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut bar[0], 1);
        fence_mbarrier_init();
    }
    sync_threads();
    let origin = (block_idx().z * 2, block_idx().y * 16, block_idx().x * 8);
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bar[0], 2 * 16 * 8 * 4);
        tma_load(&mut tile[0][0][0], a, origin, &mut bar[0]);
    }
    mbarrier_wait(&bar[0], 0);
    for i in (t..2 * 16 * 8).step_by(32) {
        let x = tile[i / 128][i / 8 % 16][i % 8];
        tile[i / 128][i / 8 % 16][i % 8] = 2.0 * x + 1.0;
    }
    // The TMA reads the tile through the async proxy.
    fence_proxy_async();
    sync_threads();
    if t == 0 {
        tma_store(&tile[0][0][0], c, origin);
        tma_store_commit();
        tma_store_wait(0);
    }
}

/// The consts of one wgmma test variant: N and STEPS.
type WgmmaConsts = (u32, u32);

/// How the proofs draw one element type of the wgmma tiles and read it on
/// the host.
struct WgmmaType<T: 'static> {
    /// The type in the report's lines.
    name: &'static str,
    /// k per instruction, in elements (32 bytes); a tile row is 4 of them.
    k: usize,
    /// `n` fresh random elements.
    draw: fn(&mut Inputs, usize) -> Vec<T>,
    /// The value the hardware reads an element as.
    widen: fn(T) -> f64,
    /// The largest error allowed, relative to the sum of the magnitudes of
    /// an element's terms (0: exact).
    tolerance: f64,
}

/// One run of a wgmma test kernel (`launch` with its inputs) for each N
/// and step count, on fresh random inputs of `ty`, against the float64
/// product: one line per variant.
fn check_wgmma<T: Copy + 'static>(
    report: &mut Report,
    inputs: &mut Inputs,
    layout: &str,
    ty: &WgmmaType<T>,
    launch: impl Fn(WgmmaConsts, &[T], &[T]) -> Result<Vec<f64>, Error>,
) {
    let row = 4 * ty.k;
    for n in [64u32, 128, 256] {
        for steps in [1u32, 4] {
            let k = ty.k * steps as usize;
            let what = format!("wgmma {} {layout} N={n} STEPS={steps} (k = {k})", ty.name);
            let a = (ty.draw)(inputs, 64 * row);
            let b = (ty.draw)(inputs, n as usize * row);
            let n = n as usize;
            // The product and the sum of magnitudes of each element, in f64.
            let widen = ty.widen;
            let reference = |m: usize, j: usize| {
                let terms = (0..k).map(|p| widen(a[m * row + p]) * widen(b[j * row + p]));
                terms.fold((0.0, 0.0), |(sum, abs): (f64, f64), x| {
                    (sum + x, abs + x.abs())
                })
            };
            let out = match launch((n as u32, steps), &a, &b) {
                Ok(out) => out,
                Err(e) => {
                    report.error(&what, e);
                    continue;
                }
            };
            // The largest relative error and the first element beyond the
            // tolerance. Accumulation order is unspecified: a few ulps of the
            // magnitude sum; a layout error is off by O(1).
            let mut worst = 0.0f64;
            let mut wrong = None;
            for (at, got) in out.iter().enumerate().take(64 * n) {
                let (want, abs) = reference(at / n, at % n);
                let err = (got - want).abs() / (abs + 1e-30);
                // A NaN error is beyond every tolerance.
                let within = err <= ty.tolerance;
                if !within && wrong.is_none() {
                    wrong = Some(at);
                }
                worst = if err.is_nan() {
                    f64::INFINITY
                } else {
                    worst.max(err)
                };
            }
            let limit = if ty.tolerance == 0.0 {
                "exactly".to_string()
            } else {
                format!("within {:.0e}", ty.tolerance)
            };
            let detail = match wrong {
                Some(at) => format!(
                    "element (row {}, column {}) is {}, float64 gives {}; largest error {worst:.1e}",
                    at / n,
                    at % n,
                    out[at],
                    reference(at / n, at % n).0
                ),
                None => format!(
                    "all {} elements {limit} of the float64 product; largest error {worst:.1e}",
                    64 * n
                ),
            };
            report.check(&what, wrong.is_none(), detail);
        }
    }
}

/// Runs a wgmma test kernel's launcher on uploaded inputs; the output is
/// poisoned with `$poison` and read as f64.
macro_rules! wgmma_launch {
    ($rt:expr, $kernel:ident, $poison:expr) => {
        |(n, steps): WgmmaConsts, a: &[_], b: &[_]| -> Result<Vec<f64>, Error> {
            let (da, db) = ($rt.upload(a)?, $rt.upload(b)?);
            let mut dc = $rt.upload(&vec![$poison; 64 * n as usize])?;
            let consts = $kernel::Consts { N: n, STEPS: steps };
            $kernel::launch($rt, consts, Grid::blocks([1, 1, 1]), &da, &db, &mut dc)?;
            Ok($rt.download(&dc)?.into_iter().map(f64::from).collect())
        }
    };
}

/// Runs `check_wgmma` for each element type through both test kernels:
/// `TYPE => SW128_KERNEL, PLAIN_KERNEL, OUTPUT_POISON;`.
macro_rules! check_wgmma_types {
    ($rt:expr, $inputs:expr, $report:expr, $($ty:expr => $sw128:ident, $plain:ident, $poison:expr;)*) => {
        $(
            let sw128 = wgmma_launch!($rt, $sw128, $poison);
            check_wgmma($report, $inputs, "128-byte swizzle", &$ty, sw128);
            let plain = wgmma_launch!($rt, $plain, $poison);
            check_wgmma($report, $inputs, "no swizzle", &$ty, plain);
        )*
    };
}

/// `x` as wgmma reads an f32 operand: tf32, the low 13 bits of the
/// mantissa dropped.
fn tf32_truncated(x: f32) -> f64 {
    f64::from(f32::from_bits(x.to_bits() & !0x1FFF))
}

/// `n` random fp8 values (of the type whose byte `b` is `from_bits(b)`,
/// read by `value`) that are multiples of 1/2 up to 7 in magnitude: every
/// product is a multiple of 1/4 below 50, so the sums of up to 128 of them
/// are exact in f32 whatever the order.
fn fp8_draw<F: Copy>(
    inputs: &mut Inputs,
    n: usize,
    from_bits: fn(u8) -> F,
    value: fn(F) -> f64,
) -> Vec<F> {
    let codes: Vec<F> = (0..=255u8)
        .map(from_bits)
        .filter(|&x| value(x).abs() <= 7.0 && (2.0 * value(x)).fract() == 0.0)
        .collect();
    inputs
        .u32s(n)
        .into_iter()
        .map(|r| codes[r as usize % codes.len()])
        .collect()
}

const F16: WgmmaType<f16> = WgmmaType {
    name: "f16",
    k: 16,
    draw: |inputs, n| inputs.f32s(n).into_iter().map(f16::from_f32).collect(),
    widen: |x| x.to_f64(),
    tolerance: 1e-5,
};

const BF16: WgmmaType<bf16> = WgmmaType {
    name: "bf16",
    k: 16,
    draw: |inputs, n| inputs.f32s(n).into_iter().map(bf16::from_f32).collect(),
    widen: |x| x.to_f64(),
    tolerance: 1e-5,
};

/// Unrounded f32 inputs, which wgmma reads as tf32 by dropping the low 13
/// bits of the mantissa: on the H200 the products matched that reading to
/// 1.7e-7 of the magnitude sum and missed rounding to nearest by up to
/// 1.3e-3 (perf/LOG.md, session 10).
const TF32: WgmmaType<f32> = WgmmaType {
    name: "tf32",
    k: 8,
    draw: Inputs::f32s,
    widen: tf32_truncated,
    tolerance: 1e-5,
};

/// Every i8 value.
const S8: WgmmaType<i8> = WgmmaType {
    name: "s8",
    k: 32,
    draw: Inputs::i8s,
    widen: |x| f64::from(x),
    tolerance: 0.0,
};

/// Every u8 value.
const U8: WgmmaType<u8> = WgmmaType {
    name: "u8",
    k: 32,
    draw: |inputs, n| inputs.i8s(n).into_iter().map(|x| x as u8).collect(),
    widen: |x| f64::from(x),
    tolerance: 0.0,
};

const E4M3: WgmmaType<e4m3> = WgmmaType {
    name: "e4m3",
    k: 32,
    draw: |inputs, n| fp8_draw(inputs, n, e4m3::from_bits, |x| x.to_f64()),
    widen: |x| x.to_f64(),
    tolerance: 1e-5,
};

const E5M2: WgmmaType<e5m2> = WgmmaType {
    name: "e5m2",
    k: 32,
    draw: |inputs, n| fp8_draw(inputs, n, e5m2::from_bits, |x| x.to_f64()),
    widen: |x| x.to_f64(),
    tolerance: 1e-5,
};

/// Every wgmma test variant: both swizzle modes, every element type, N of
/// 64, 128 and 256, one wgmma and a chain of four.
pub fn check_wgmma_layouts(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let nan = f32::NAN;
    check_wgmma_types!(rt, inputs, report,
        F16 => wgmma_sw128_f16, wgmma_plain_f16, nan;
        BF16 => wgmma_sw128_bf16, wgmma_plain_bf16, nan;
        TF32 => wgmma_sw128_tf32, wgmma_plain_tf32, nan;
        S8 => wgmma_sw128_s8, wgmma_plain_s8, i32::MIN;
        U8 => wgmma_sw128_u8, wgmma_plain_u8, i32::MIN;
        E4M3 => wgmma_sw128_e4m3, wgmma_plain_e4m3, nan;
        E5M2 => wgmma_sw128_e5m2, wgmma_plain_e5m2, nan;
    );
}

/// `mbarrier_phases` over 7 rounds (parities 0, 1, 0, ..): every value warp
/// 0 copied must be the one warps 1-3 wrote in that round.
pub fn check_mbarrier_phases(rt: &Runtime, report: &mut Report) {
    let what = "mbarrier_phases (96 arrivals per phase, 7 phases, parity waits)";
    let rounds = 7u32;
    let run = || -> Result<Vec<u32>, Error> {
        let mut out = rt.upload(&vec![u32::MAX; 96 * rounds as usize])?;
        mbarrier_phases::launch(rt, Grid::blocks([1, 1, 1]), rounds, &mut out)?;
        rt.download(&out)
    };
    match run() {
        Ok(out) => {
            let want = |at: usize| (at / 96) as u32 * 1000 + (at % 96) as u32 + 32;
            let wrong = (0..out.len()).find(|&at| out[at] != want(at));
            let detail = match wrong {
                None => format!("all {} values from their own round", out.len()),
                Some(at) => format!(
                    "round {} slot {} holds {}, its round wrote {}",
                    at / 96,
                    at % 96,
                    out[at],
                    want(at)
                ),
            };
            report.check(what, wrong.is_none(), detail);
        }
        Err(e) => report.error(what, e),
    }
}

/// `tma_load_sw128` over a ragged 100 x 150 f16 matrix (rows 152 apart)
/// in 2 x 3 tiles: every element read back unswizzled, zeros outside.
pub fn check_tma_load(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what = "tma_load_sw128 (100 x 150 f16, rows 152 apart, 64 x 64 tiles, 128-byte swizzle)";
    let (m, k, ld) = (100usize, 150usize, 152usize);
    let (rows, width) = (128usize, 192usize);
    let a: Vec<f16> = inputs.f32s(m * ld).into_iter().map(f16::from_f32).collect();
    let run = || -> Result<Vec<f16>, Error> {
        let da = rt.upload(&a)?;
        let mut out = rt.upload(&vec![f16::NAN; rows * width])?;
        let grid = Grid::blocks([3, 2, 1]);
        tma_load_sw128::launch(rt, grid, &da, m as u32, k as u32, ld as u32, &mut out)?;
        rt.download(&out)
    };
    match run() {
        Ok(out) => {
            let want = |r: usize, c: usize| {
                if r < m && c < k {
                    a[r * ld + c]
                } else {
                    f16::ZERO
                }
            };
            let wrong =
                (0..out.len()).find(|&i| out[i].to_bits() != want(i / width, i % width).to_bits());
            let detail = match wrong {
                None => format!(
                    "all {} elements, {} of them zeros outside the matrix",
                    out.len(),
                    out.len() - m * k
                ),
                Some(i) => format!(
                    "element (row {}, column {}) is {}, the matrix gives {}",
                    i / width,
                    i % width,
                    out[i],
                    want(i / width, i % width)
                ),
            };
            report.check(what, wrong.is_none(), detail);
        }
        Err(e) => report.error(what, e),
    }
}

/// `cluster_multicast` over a ragged 44 x 64 f16 matrix in 3 clusters of
/// 2 blocks: each block holds the 16 rows of its cluster (zeros past row
/// 43), and the blocks of a cluster are consecutive along x with ranks 0, 1.
pub fn check_cluster_multicast(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what = "cluster_multicast (clusters of 2 along x, 44 x 64 f16, half a tile multicast by each block, remote arrivals)";
    let (m, clusters) = (44usize, 3usize);
    let blocks = 2 * clusters;
    let a: Vec<f16> = inputs.f32s(m * 64).into_iter().map(f16::from_f32).collect();
    let run = || -> Result<(Vec<f16>, Vec<u32>), Error> {
        let da = rt.upload(&a)?;
        let mut out = rt.upload(&vec![f16::NAN; blocks * 16 * 64])?;
        let mut ranks = rt.upload(&vec![u32::MAX; blocks])?;
        let grid = Grid::blocks([blocks as u32, 1, 1]);
        cluster_multicast::launch(rt, grid, &da, m as u32, &mut out, &mut ranks)?;
        Ok((rt.download(&out)?, rt.download(&ranks)?))
    };
    match run() {
        Ok((out, ranks)) => {
            let want = |block: usize, i: usize| {
                let row = block / 2 * 16 + i / 64;
                if row < m {
                    a[row * 64 + i % 64]
                } else {
                    f16::ZERO
                }
            };
            let wrong_rank = (0..blocks).find(|&b| ranks[b] != (b % 2) as u32);
            let wrong = (0..out.len())
                .find(|&at| out[at].to_bits() != want(at / (16 * 64), at % (16 * 64)).to_bits());
            let detail = match (wrong_rank, wrong) {
                (Some(b), _) => format!("block {b} has cluster rank {}, not {}", ranks[b], b % 2),
                (None, Some(at)) => {
                    let (block, i) = (at / (16 * 64), at % (16 * 64));
                    format!(
                        "block {block} holds {} at row {} column {} of its tile, the matrix gives {}",
                        out[at],
                        i / 64,
                        i % 64,
                        want(block, i)
                    )
                }
                (None, None) => format!(
                    "{blocks} blocks: ranks 0, 1 along x, each holding its cluster's 16 rows ({} zeros past the matrix)",
                    (clusters * 16 - m) * 64 * 2
                ),
            };
            report.check(what, wrong_rank.is_none() && wrong.is_none(), detail);
        }
        Err(e) => report.error(what, e),
    }
}

/// `tma_roundtrip` over 3 ragged 37 x 17 f32 matrices (rows 24 apart,
/// matrices 40 rows apart) in 2 x 3 x 3 tiles: 2x + 1 inside the tensor,
/// the rows past m and the matrices past the last untouched. Past n, the
/// TMA store writes the rest of a row's last 16-byte chunk (columns 17 to
/// 19 here, with the tile's values: 1, from the zeros the load read) and
/// nothing after it (measured on the H200: at n = 21 it wrote columns 21
/// to 23, at n = 17 this check says whether it stops at 19).
pub fn check_tma_roundtrip(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what =
        "tma_roundtrip (3 x 37 x 17 f32, rows 24 apart, matrices 960 apart, 2 x 16 x 8 tiles)";
    let (batches, m, n, ld, batch_stride) = (3usize, 37usize, 17usize, 24usize, 960usize);
    let a = inputs.f32s(batches * batch_stride);
    let poison = -7.0f32;
    let run = || -> Result<Vec<f32>, Error> {
        let da = rt.upload(&a)?;
        let mut dc = rt.upload(&vec![poison; a.len()])?;
        let grid = Grid::blocks([3, 3, 2]);
        tma_roundtrip::launch(
            rt,
            grid,
            &da,
            &mut dc,
            batches as u32,
            m as u32,
            n as u32,
            ld as u32,
            batch_stride as u32,
        )?;
        rt.download(&dc)
    };
    match run() {
        Ok(out) => {
            let inside = |i: usize| i % batch_stride / ld < m && i % ld < n;
            let chunk_end = n.next_multiple_of(16 / 4);
            let in_last_chunk =
                |i: usize| i % batch_stride / ld < m && (n..chunk_end).contains(&(i % ld));
            let want = |i: usize| match (inside(i), in_last_chunk(i)) {
                (true, _) => 2.0 * a[i] + 1.0,
                (false, true) => 1.0,
                (false, false) => poison,
            };
            let wrong: Vec<usize> = (0..out.len())
                .filter(|&i| out[i].to_bits() != want(i).to_bits())
                .collect();
            // Where the wrong elements lie says which rule broke: columns
            // past n, rows past m, matrices past the last, or values inside.
            let mut columns: Vec<usize> = wrong.iter().map(|i| i % ld).collect();
            let mut rows: Vec<usize> = wrong.iter().map(|i| i % batch_stride / ld).collect();
            columns.dedup();
            columns.sort_unstable();
            columns.dedup();
            rows.sort_unstable();
            rows.dedup();
            let detail = match wrong.first() {
                None => format!(
                    "all {} elements inside written, the {} in rows' last 16-byte chunks past n \
                     written with the tile's, the {} outside untouched",
                    batches * m * n,
                    batches * m * (chunk_end - n),
                    out.len() - batches * m * chunk_end
                ),
                Some(&i) => format!(
                    "{} elements wrong, {} of them inside, in columns {columns:?} and rows {rows:?}; \
                     the first: element {i} (matrix {}, row {}, column {}) is {}, expected {}",
                    wrong.len(),
                    wrong.iter().filter(|&&i| inside(i)).count(),
                    i / batch_stride,
                    i % batch_stride / ld,
                    i % ld,
                    out[i],
                    want(i)
                ),
            };
            report.check(what, wrong.is_empty(), detail);
        }
        Err(e) => report.error(what, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge_codegen::{compile_ptx, Arch};

    #[test]
    fn the_proofs_build_for_sm_90a_with_their_wgmmas() {
        let defs = [
            (wgmma_sw128_f16::def(), "k16.f32.f16.f16"),
            (wgmma_plain_bf16::def(), "k16.f32.bf16.bf16"),
            (wgmma_sw128_tf32::def(), "k8.f32.tf32.tf32"),
            (wgmma_plain_tf32::def(), "k8.f32.tf32.tf32"),
            (wgmma_sw128_s8::def(), "k32.s32.s8.s8"),
            (wgmma_plain_u8::def(), "k32.s32.u8.u8"),
            (wgmma_sw128_e4m3::def(), "k32.f32.e4m3.e4m3"),
            (wgmma_plain_e5m2::def(), "k32.f32.e5m2.e5m2"),
        ];
        for (def, form) in defs {
            let variants = def.variants();
            assert_eq!(variants.len(), 6, "{}", def.ir.name);
            for consts in variants {
                let ptx = compile_ptx(def, &consts, Arch::Sm90a)
                    .unwrap_or_else(|e| panic!("{}", e.message))
                    .text;
                let wgmmas = ptx
                    .lines()
                    .filter(|l| l.contains("wgmma.mma_async"))
                    .inspect(|l| assert!(l.contains(form), "{l}"))
                    .count();
                assert_eq!(wgmmas as i64, consts[1], "{}", def.variant_name(&consts));
            }
        }
        compile_ptx(mbarrier_phases::def(), &[], Arch::Sm90).unwrap();
        for (def, arch, copies) in [
            (
                tma_load_sw128::def(),
                Arch::Sm90a,
                "cp.async.bulk.tensor.2d",
            ),
            (tma_roundtrip::def(), Arch::Sm90, "cp.async.bulk.tensor.3d"),
            (
                cluster_multicast::def(),
                Arch::Sm90a,
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
            ),
        ] {
            let ptx = compile_ptx(def, &[], arch).unwrap_or_else(|e| panic!("{}", e.message));
            assert!(ptx.text.contains(copies), "{}", ptx.text);
        }
    }

    #[test]
    fn the_host_reads_fp8_and_tf32_as_the_formats_define_them() {
        // e4m3: bias 7, no infinities, S.1111.111 the only NaN (the
        // hardware's "e4m3fn"); e5m2: bias 15, IEEE-like.
        let e4 = |b: u8| e4m3::from_bits(b).to_f64();
        let e5 = |b: u8| e5m2::from_bits(b).to_f64();
        assert_eq!(e4(0x38), 1.0);
        assert_eq!(e4(0x7E), 448.0);
        assert_eq!(e4(0x01), 2f64.powi(-9));
        assert_eq!(e4(0xC4), -3.0);
        assert!(e4(0x7F).is_nan() && !e4(0x78).is_nan());
        assert_eq!(e5(0x3C), 1.0);
        assert_eq!(e5(0x7B), 57344.0);
        assert_eq!(e5(0x01), 2f64.powi(-16));
        assert!(e5(0x7C).is_infinite() && e5(0xFF).is_nan());
        let mut inputs = Inputs::new(1);
        let drawn: [Vec<f64>; 2] = [
            fp8_draw(&mut inputs, 4096, e4m3::from_bits, |x| x.to_f64())
                .into_iter()
                .map(|x| x.to_f64())
                .collect(),
            fp8_draw(&mut inputs, 4096, e5m2::from_bits, |x| x.to_f64())
                .into_iter()
                .map(|x| x.to_f64())
                .collect(),
        ];
        for values in drawn {
            assert!(values
                .iter()
                .all(|v| v.abs() <= 7.0 && (2.0 * v).fract() == 0.0));
            assert!(values.contains(&7.0) && values.contains(&-0.5) && values.contains(&2.5));
        }
        let y = f32::from_bits(0x3F80_1FFF); // just below 1 + 2^-10
        assert_eq!(tf32_truncated(y), 1.0);
        assert_eq!(tf32_truncated(-y), -1.0);
    }
}
