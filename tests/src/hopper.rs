//! The GPU tier's proofs of the Hopper constructs (issue 17) on their own,
//! before any kernel relies on them: what the PTX ISA describes but only a
//! device can confirm.
//!
//! - `wgmma_sw128` and `wgmma_plain`: one warpgroup stores a 64 x 64 tile
//!   of A and an N x 64 tile of B (both K-major: rows of k) in shared
//!   memory in the layout a swizzle needs (128-byte swizzle: chunk `c` of
//!   row `r` at `c ^ (r % 8)`; none: core matrices `[k / 8][row][k % 8]`),
//!   runs `STEPS` chained m64nNk16 wgmmas (k = 16 STEPS) from descriptors
//!   and stores the accumulators through their fragment layout (element
//!   `4j + 2h + i` of thread `t` is D[16 (t / 32) + t % 32 / 4 + 8h][8j + 2 (t % 4) + i]).
//!   A wrong descriptor field, swizzle or fragment layout moves whole rows,
//!   columns or chunks, which the float64 comparison reports by element.
//! - `mbarrier_phases`: warps 1-3 hand a buffer to warp 0 through a `full`
//!   mbarrier of 96 arrivals and get it back through a `free` one of 32, over
//!   several phases: a phase that completed early, a parity that did not
//!   flip, or a first wait on the phase before phase 0 that blocked would
//!   show as stale values or a hang.

use warpforge::prelude::*;

use crate::report::Report;
use crate::Inputs;

/// Writes a warpgroup's m64nN f32 accumulators (`H = N / 2` per thread) to
/// `c`, row-major 64 x N, through the wgmma fragment layout.
#[device]
pub fn store_wgmma_accumulators<const H: u32>(acc: &[f32; H], c: &mut [f32]) {
    let t = thread_idx().x;
    let w = t / 32;
    let g = t % 32 / 4;
    let q = t % 4;
    #[unroll]
    for e in 0..H {
        c[(16 * w + g + 8 * (e / 2 % 2)) * (2 * H) + 8 * (e / 4) + 2 * q + e % 2] = acc[e];
    }
}

/// `c` (64 x N) = A (64 x 64) times B (N x 64) transposed over the first
/// `16 STEPS` columns of k, through 128-byte swizzled tiles.
#[kernel(
    arch(sm_90a),
    block(128),
    tune(N = [64, 128, 256], STEPS = [1, 4]),
    instances(wgmma_sw128_f16 = <f16>, wgmma_sw128_bf16 = <bf16>)
)]
pub fn wgmma_sw128<T: Half, const N: u32, const STEPS: u32>(a: &[T], b: &[T], c: &mut [f32]) {
    let mut a_tile: [[T; 64]; 64] = shared();
    let mut b_tile: [[T; 64]; N] = shared();
    let t = thread_idx().x;
    for i in (t..64 * 64).step_by(128) {
        let r = i / 64;
        let k = i % 64;
        a_tile[r][(k / 8 ^ r % 8) * 8 + k % 8] = a[i];
    }
    for i in (t..N * 64).step_by(128) {
        let r = i / 64;
        let k = i % 64;
        b_tile[r][(k / 8 ^ r % 8) * 8 + k % 8] = b[i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [0.0f32; N / 2];
    wgmma_fence();
    #[unroll]
    for s in 0..STEPS {
        wgmma_m64k16::<T, N>(
            &mut acc,
            matrix_desc(&a_tile[0][s * 16], 128),
            matrix_desc(&b_tile[0][s * 16], 128),
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
    instances(wgmma_plain_f16 = <f16>, wgmma_plain_bf16 = <bf16>)
)]
pub fn wgmma_plain<T: Half, const N: u32, const STEPS: u32>(a: &[T], b: &[T], c: &mut [f32]) {
    let mut a_tile: [[[T; 8]; 64]; 8] = shared();
    let mut b_tile: [[[T; 8]; N]; 8] = shared();
    let t = thread_idx().x;
    for i in (t..64 * 64).step_by(128) {
        let r = i / 64;
        let k = i % 64;
        a_tile[k / 8][r][k % 8] = a[i];
    }
    for i in (t..N * 64).step_by(128) {
        let r = i / 64;
        let k = i % 64;
        b_tile[k / 8][r][k % 8] = b[i];
    }
    fence_proxy_async();
    sync_threads();
    let mut acc = [0.0f32; N / 2];
    wgmma_fence();
    #[unroll]
    for s in 0..STEPS {
        wgmma_m64k16::<T, N>(
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

/// The consts of one wgmma test variant: N and STEPS.
type WgmmaConsts = (u32, u32);

/// One run of a wgmma test kernel (`launch` with its inputs) for each N
/// and step count, on fresh random inputs rounded to `T`, against the
/// float64 product: one line per variant.
fn check_wgmma<T: Copy>(
    report: &mut Report,
    inputs: &mut Inputs,
    what: &str,
    round: impl Fn(f32) -> T,
    widen: impl Fn(T) -> f64,
    launch: impl Fn(WgmmaConsts, &[T], &[T]) -> Result<Vec<f32>, Error>,
) {
    for n in [64u32, 128, 256] {
        for steps in [1u32, 4] {
            let what = format!("{what} N={n} STEPS={steps} (k = {})", 16 * steps);
            let a: Vec<T> = inputs.f32s(64 * 64).into_iter().map(&round).collect();
            let b: Vec<T> = inputs
                .f32s(n as usize * 64)
                .into_iter()
                .map(&round)
                .collect();
            let k = 16 * steps as usize;
            let n = n as usize;
            // The product and the sum of magnitudes of each element, in f64.
            let reference = |m: usize, j: usize| {
                let terms = (0..k).map(|p| widen(a[m * 64 + p]) * widen(b[j * 64 + p]));
                terms.fold((0.0, 0.0), |(sum, abs): (f64, f64), x| {
                    (sum + x, abs + x.abs())
                })
            };
            match launch((n as u32, steps), &a, &b) {
                Ok(out) => {
                    // f32 accumulation in an unspecified order: a few ulps of the
                    // magnitude sum. A layout error is off by O(1).
                    let wrong = (0..64 * n).find(|&at| {
                        let (want, abs) = reference(at / n, at % n);
                        !((f64::from(out[at]) - want).abs() <= 1e-5 * (abs + 1e-30))
                    });
                    let detail = match wrong {
                        None => {
                            format!("all {} elements within 1e-5 of the float64 product", 64 * n)
                        }
                        Some(at) => format!(
                            "element (row {}, column {}) is {}, float64 gives {}",
                            at / n,
                            at % n,
                            out[at],
                            reference(at / n, at % n).0
                        ),
                    };
                    report.check(&what, wrong.is_none(), detail);
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

/// Runs a wgmma test kernel's launcher on uploaded inputs; NaN-poisoned output.
macro_rules! wgmma_launch {
    ($rt:expr, $kernel:ident) => {
        |(n, steps): WgmmaConsts, a: &[_], b: &[_]| -> Result<Vec<f32>, Error> {
            let (da, db) = ($rt.upload(a)?, $rt.upload(b)?);
            let mut dc = $rt.upload(&vec![f32::NAN; 64 * n as usize])?;
            let consts = $kernel::Consts { N: n, STEPS: steps };
            $kernel::launch($rt, consts, Grid::blocks([1, 1, 1]), &da, &db, &mut dc)?;
            $rt.download(&dc)
        }
    };
}

/// Every wgmma test variant: both swizzle modes, f16 and bf16, N of 64,
/// 128 and 256, one wgmma and a chain of four.
pub fn check_wgmma_layouts(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let (f16_of, bf16_of) = (f16::from_f32, bf16::from_f32);
    let (f16_wide, bf16_wide) = (|x: f16| x.to_f64(), |x: bf16| x.to_f64());
    check_wgmma(
        report,
        inputs,
        "wgmma_sw128_f16 (128-byte swizzle)",
        f16_of,
        f16_wide,
        wgmma_launch!(rt, wgmma_sw128_f16),
    );
    check_wgmma(
        report,
        inputs,
        "wgmma_sw128_bf16 (128-byte swizzle)",
        bf16_of,
        bf16_wide,
        wgmma_launch!(rt, wgmma_sw128_bf16),
    );
    check_wgmma(
        report,
        inputs,
        "wgmma_plain_f16 (no swizzle)",
        f16_of,
        f16_wide,
        wgmma_launch!(rt, wgmma_plain_f16),
    );
    check_wgmma(
        report,
        inputs,
        "wgmma_plain_bf16 (no swizzle)",
        bf16_of,
        bf16_wide,
        wgmma_launch!(rt, wgmma_plain_bf16),
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

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge_codegen::{compile_ptx, Arch};

    #[test]
    fn the_proofs_build_for_sm_90a_with_their_wgmmas() {
        for def in [wgmma_sw128_f16::def(), wgmma_plain_bf16::def()] {
            for consts in def.variants() {
                let ptx = compile_ptx(def, &consts, Arch::Sm90a)
                    .unwrap_or_else(|e| panic!("{}", e.message))
                    .text;
                let wgmmas = ptx
                    .lines()
                    .filter(|l| l.contains("wgmma.mma_async"))
                    .count();
                assert_eq!(wgmmas as i64, consts[1], "{}", def.variant_name(&consts));
            }
        }
        compile_ptx(mbarrier_phases::def(), &[], Arch::Sm90).unwrap();
    }
}
