//! The checks of the stock kernels against the float64 references, one
//! function per kernel over every variant and the given sizes, on any
//! runtime: the GPU tier (`gpu-check`) runs them on CUDA, the wgpu test
//! (`tests/wgpu_lavapipe.rs`) on lavapipe. Each check draws fresh inputs from
//! `inputs`, poisons outputs with NaN so that an unwritten element fails, and
//! records one line per variant and size in `report`.

use warpforge::{bf16, f16, DeviceBuffer, Error, GemmPrecision, Grid, MatrixLayout, Runtime};
use warpforge_kernels::{gemm, gemm_tc, gemm_wmma, reduce, simple, softmax, stream};

use crate::compare::{self, deviation, GemmTolerance};
use crate::reference::{Activation, GemmReference, GemmSpec};
use crate::report::Report;
use crate::{reference, GemmFloat, Inputs};

/// An output buffer of `n` NaNs: any element the kernel fails to write fails the check.
pub fn poisoned(rt: &Runtime, n: usize) -> Result<DeviceBuffer<f32>, Error> {
    rt.upload(&vec![f32::NAN; n])
}

pub fn check_saxpy(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for &n in sizes {
        let what = format!("saxpy n={n}");
        let (x, y, a) = (inputs.f32s(n), inputs.f32s(n), 1.5f32);
        let expected = reference::saxpy(a, &x, &y);
        let run = || -> Result<Vec<f32>, Error> {
            let dx = rt.upload(&x)?;
            let mut dy = rt.upload(&y)?;
            simple::saxpy::launch(rt, Grid::linear(n, 256), a, &dx, &mut dy)?;
            rt.download(&dy)
        };
        match run() {
            Ok(out) => {
                let d = deviation(&out, &expected);
                report.check(&what, d.passes(1e-6), d);
            }
            Err(e) => report.error(&what, e),
        }
    }
}

pub fn check_histogram(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for consts in simple::histogram::variants() {
        for &n in sizes {
            let what = format!("histogram[BINS={}] n={n}", consts.BINS);
            let values = inputs.u32s(n);
            let expected = reference::histogram(&values, consts.BINS);
            let run = || -> Result<Vec<u32>, Error> {
                let dv = rt.upload(&values)?;
                let mut counts = rt.alloc_zeroed::<u32>(consts.BINS as usize)?;
                let blocks = (n as u32).div_ceil(256).min(1024);
                simple::histogram::launch(
                    rt,
                    consts,
                    Grid::blocks([blocks, 1, 1]),
                    &dv,
                    &mut counts,
                )?;
                rt.download(&counts)
            };
            match run() {
                Ok(out) => {
                    let wrong = out.iter().zip(&expected).filter(|(o, e)| o != e).count();
                    report.check(
                        &what,
                        wrong == 0,
                        format_args!("{wrong} of {} bins differ (exact)", out.len()),
                    );
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

pub fn check_sum(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for consts in reduce::block_sum::variants() {
        for &n in sizes {
            let what = format!("block_sum[THREADS={}] (two passes) n={n}", consts.THREADS);
            let x = inputs.f32s(n);
            let expected = reference::sum(&x);
            let magnitude: f64 = x.iter().map(|v| v.abs() as f64).sum();
            let run = || -> Result<f32, Error> {
                let dx = rt.upload(&x)?;
                let mut scratch = poisoned(rt, reduce::sum_blocks(n, consts.THREADS) as usize)?;
                let mut out = poisoned(rt, 1)?;
                reduce::sum(rt, consts, &dx, &mut scratch, &mut out)?;
                Ok(rt.download(&out)?[0])
            };
            match run() {
                Ok(out) => {
                    // f32 accumulation: error bounded by a small multiple of eps * sum |x|.
                    let err = (out as f64 - expected).abs();
                    let ok = out.is_finite() && err <= 1e-5 * magnitude.max(1.0);
                    report.check(
                        &what,
                        ok,
                        format_args!("got {out}, expected {expected:.6}, |err| {err:.2e}"),
                    );
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

/// Checks each of `variants` of `softmax_rows` on every shape, then
/// [`softmax::softmax`], which picks the variant for the device.
pub fn check_softmax(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    variants: &[softmax::softmax_rows::Consts],
    shapes: &[(usize, usize)],
) {
    let label = |consts: softmax::softmax_rows::Consts| {
        format!(
            "softmax_rows[THREADS={},WARP_SHUFFLE={}]",
            consts.THREADS, consts.WARP_SHUFFLE
        )
    };
    for &consts in variants {
        check_softmax_shapes(
            rt,
            inputs,
            report,
            shapes,
            |_| label(consts),
            |x, y, rows, cols| softmax::softmax_with(rt, consts, x, y, rows, cols),
        );
    }
    check_softmax_shapes(
        rt,
        inputs,
        report,
        shapes,
        |cols| {
            let picked = softmax::softmax_variant(rt.device(), cols);
            format!("softmax (picks {})", label(picked))
        },
        |x, y, rows, cols| softmax::softmax(rt, x, y, rows, cols),
    );
}

/// One line per shape for the softmax `run`, named by `name(cols)`.
fn check_softmax_shapes(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize)],
    name: impl Fn(u32) -> String,
    run: impl Fn(&DeviceBuffer<f32>, &mut DeviceBuffer<f32>, u32, u32) -> Result<(), Error>,
) {
    for &(rows, cols) in shapes {
        let what = format!("{} {rows}x{cols}", name(cols as u32));
        let x: Vec<f32> = inputs.f32s(rows * cols).iter().map(|v| v * 8.0).collect();
        let expected = reference::softmax_rows(&x, rows, cols);
        let result = || -> Result<Vec<f32>, Error> {
            let dx = rt.upload(&x)?;
            let mut dy = poisoned(rt, rows * cols)?;
            run(&dx, &mut dy, rows as u32, cols as u32)?;
            rt.download(&dy)
        };
        match result() {
            Ok(out) => {
                let d = deviation(&out, &expected);
                report.check(&what, d.passes(1e-5), d);
            }
            Err(e) => report.error(&what, e),
        }
    }
}

pub fn check_gemm(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
) {
    for &(m, n, k) in shapes {
        let (a, b) = (inputs.f32s(m * k), inputs.f32s(k * n));
        let c_in = inputs.f32s(m * n);
        // beta = 0 on a poisoned C (C must be neither read nor left unwritten), and
        // beta != 0 on a random C.
        let cases = [(1.5f32, 0.0f32), (0.75, -0.5)];
        let widen = |v: &[f32]| -> Vec<f64> { v.iter().map(|&x| x as f64).collect() };
        let expected: Vec<GemmReference> = cases
            .iter()
            .map(|&(alpha, beta)| {
                let spec = GemmSpec {
                    alpha: alpha as f64,
                    beta: beta as f64,
                    ..GemmSpec::new(m, n, k)
                };
                let c = (beta != 0.0).then(|| widen(&c_in));
                reference::gemm_general(&spec, &widen(&a), &widen(&b), c.as_deref(), None)
            })
            .collect();
        let tolerance = GemmTolerance {
            precision: GemmPrecision::F32,
            k,
            activation: Activation::Identity,
        };
        let uploaded = (|| Ok::<_, Error>((rt.upload(&a)?, rt.upload(&b)?)))();
        let (da, db) = match uploaded {
            Ok(v) => v,
            Err(e) => {
                report.error(&format!("gemm_f32 {m}x{n}x{k} upload"), e);
                continue;
            }
        };
        for consts in gemm::gemm_f32::variants() {
            for (&(alpha, beta), expected) in cases.iter().zip(&expected) {
                let what = format!(
                    "gemm_f32[BM={},BN={},BK={},TM={},TN={}] {m}x{n}x{k} alpha={alpha} beta={beta}",
                    consts.BM, consts.BN, consts.BK, consts.TM, consts.TN
                );
                let run = || -> Result<Vec<f32>, Error> {
                    let mut dc = if beta == 0.0 {
                        poisoned(rt, m * n)?
                    } else {
                        rt.upload(&c_in)?
                    };
                    gemm::gemm_f32_with(
                        rt,
                        consts,
                        &da,
                        &db,
                        &mut dc,
                        (m as u32, n as u32, k as u32),
                        alpha,
                        beta,
                    )?;
                    rt.download(&dc)
                };
                match run() {
                    Ok(out) => {
                        // Element by element within the f32 rounding bound, which
                        // scales with each element's magnitude, so a result that
                        // nearly cancels is judged by what rounding allows it.
                        let check = compare::check_gemm(&widen(&out), expected, &tolerance);
                        let d = deviation(&out, &expected.values);
                        report.check(
                            &what,
                            check.passes() && d.non_finite == 0,
                            format!("{check}; {d}"),
                        );
                    }
                    Err(e) => report.error(&what, e),
                }
            }
        }
    }
}

/// Launches variant `index` of a floating-point GEMM: (a, b, c, (m, n, k), alpha, beta).
type Launch<'a, T> = dyn Fn(
        usize,
        &DeviceBuffer<T>,
        &DeviceBuffer<T>,
        &mut DeviceBuffer<T>,
        (u32, u32, u32),
        f32,
        f32,
    ) -> Result<(), Error>
    + 'a;

/// A public check of one floating-point GEMM kernel: its variants (name, and
/// the multiple of k that a variant copying 16-byte chunks needs, if it does)
/// and its launcher, handed to [`check_gemm_float`].
macro_rules! gemm_float_check {
    ($(#[$doc:meta])* $check:ident, $module:ident::$kernel:ident, $with:ident, $elem:ty, $precision:expr, |$c:ident| $k_multiple:expr) => {
        $(#[$doc])*
        pub fn $check(
            rt: &Runtime,
            inputs: &mut Inputs,
            report: &mut Report,
            shapes: &[(usize, usize, usize)],
        ) {
            let variants = $module::$kernel::variants();
            let names: Vec<(String, Option<usize>)> = variants
                .iter()
                .map(|$c| ($module::$kernel::def().variant_name(&$c.values()), $k_multiple))
                .collect();
            let launch = |i: usize,
                          a: &DeviceBuffer<$elem>,
                          b: &DeviceBuffer<$elem>,
                          c: &mut DeviceBuffer<$elem>,
                          dims,
                          alpha,
                          beta| {
                $module::$with(rt, variants[i], a, b, c, dims, alpha, beta)
            };
            check_gemm_float(rt, inputs, report, shapes, $precision, &names, &launch);
        }
    };
}

gemm_float_check!(
    /// `gemm_f16` (A row-major, B column-major, f16 in and out, f32
    /// accumulation) over every variant; see [`check_gemm_float`].
    check_gemm_f16, gemm_tc::gemm_f16, gemm_f16_with, f16, GemmPrecision::F16, |c| c.ALIGNED.then_some(8)
);
gemm_float_check!(
    /// `gemm_bf16`, the same kernel source over bf16; see [`check_gemm_float`].
    check_gemm_bf16, gemm_tc::gemm_bf16, gemm_bf16_with, bf16, GemmPrecision::Bf16, |c| c.ALIGNED.then_some(8)
);
gemm_float_check!(
    /// `gemm_f16_wmma` (the sm_70 `wmma` form; every variant takes k a
    /// multiple of 8 only); see [`check_gemm_float`].
    check_gemm_f16_wmma, gemm_wmma::gemm_f16_wmma, gemm_f16_wmma_with, f16, GemmPrecision::F16, |_c| Some(8)
);
gemm_float_check!(
    /// `gemm_tf32` (f32 in and out, operands rounded to tf32 on the Tensor
    /// Cores, f32 accumulation) over every variant; see [`check_gemm_float`].
    check_gemm_tf32, gemm_tc::gemm_tf32, gemm_tf32_with, f32, GemmPrecision::Tf32, |c| c.ALIGNED.then_some(4)
);

/// A floating-point Tensor Core GEMM over every variant (`variants`: name,
/// and the multiple of k that a variant copying 16-byte chunks needs). Those
/// variants must refuse any other `k` with an `Err` naming the requirement; the others
/// must match the float64 reference element by element within the bound of
/// [`GemmTolerance`] for `precision` (f32-class accumulation over k, then the
/// rounding of the output). Inputs are values of the element type, so the
/// reference's products are exact; C is NaN-poisoned when beta = 0.
fn check_gemm_float<T: GemmFloat>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
    precision: GemmPrecision,
    variants: &[(String, Option<usize>)],
    launch: &Launch<'_, T>,
) {
    let narrow = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(T::from_f32).collect() };
    let widen = |v: &[T]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    for &(m, n, k) in shapes {
        let a = narrow(inputs.f32s(m * k));
        let b = narrow(inputs.f32s(n * k));
        let c_in = narrow(inputs.f32s(m * n));
        let cases = [(1.5f32, 0.0f32), (0.75, -0.5)];
        let expected: Vec<GemmReference> = cases
            .iter()
            .map(|&(alpha, beta)| {
                let spec = GemmSpec {
                    b_layout: MatrixLayout::ColMajor,
                    alpha: alpha as f64,
                    beta: beta as f64,
                    ..GemmSpec::new(m, n, k)
                };
                let c = (beta != 0.0).then(|| widen(&c_in));
                reference::gemm_general(&spec, &widen(&a), &widen(&b), c.as_deref(), None)
            })
            .collect();
        let uploaded = (|| Ok::<_, Error>((rt.upload(&a)?, rt.upload(&b)?)))();
        let (da, db) = match uploaded {
            Ok(v) => v,
            Err(e) => {
                report.error(&format!("{} GEMM {m}x{n}x{k} upload", precision.name()), e);
                continue;
            }
        };
        for (index, (name, k_multiple)) in variants.iter().enumerate() {
            for (&(alpha, beta), expected) in cases.iter().zip(&expected) {
                let what = format!("{name} {m}x{n}x{k} alpha={alpha} beta={beta}");
                let run = || -> Result<Vec<f64>, Error> {
                    let mut dc = if beta == 0.0 {
                        rt.upload(&vec![T::NAN; m * n])?
                    } else {
                        rt.upload(&c_in)?
                    };
                    launch(
                        index,
                        &da,
                        &db,
                        &mut dc,
                        (m as u32, n as u32, k as u32),
                        alpha,
                        beta,
                    )?;
                    Ok(widen(&rt.download(&dc)?))
                };
                judge_gemm_float(report, &what, run(), *k_multiple, expected, precision, k);
            }
        }
    }
}

/// `gemm_s8` (i8 A row-major, B column-major, i32 C, alpha and beta) over
/// every variant, which must equal the exact product: the float64 reference
/// is exact here (|alpha A B + beta C| stays far below 2^53). Variants that
/// copy 16-byte chunks must refuse a `k` that is not a multiple of 16 with an
/// `Err` naming the requirement; C is poisoned with `i32::MIN` when beta = 0.
pub fn check_gemm_s8(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
) {
    let widen_i8 = |v: &[i8]| -> Vec<f64> { v.iter().map(|&x| x as f64).collect() };
    let variants = gemm_tc::gemm_s8::variants();
    for &(m, n, k) in shapes {
        let a = inputs.i8s(m * k);
        let b = inputs.i8s(n * k);
        let c_in: Vec<i32> = inputs
            .u32s(m * n)
            .into_iter()
            .map(|x| (x % 2001) as i32 - 1000)
            .collect();
        let cases = [(1i32, 0i32), (2, -3)];
        let expected: Vec<Vec<f64>> = cases
            .iter()
            .map(|&(alpha, beta)| {
                let spec = GemmSpec {
                    b_layout: MatrixLayout::ColMajor,
                    alpha: alpha as f64,
                    beta: beta as f64,
                    ..GemmSpec::new(m, n, k)
                };
                let c: Option<Vec<f64>> =
                    (beta != 0).then(|| c_in.iter().map(|&x| x as f64).collect());
                reference::gemm_general(&spec, &widen_i8(&a), &widen_i8(&b), c.as_deref(), None)
                    .values
            })
            .collect();
        let uploaded = (|| Ok::<_, Error>((rt.upload(&a)?, rt.upload(&b)?)))();
        let (da, db) = match uploaded {
            Ok(v) => v,
            Err(e) => {
                report.error(&format!("s8 GEMM {m}x{n}x{k} upload"), e);
                continue;
            }
        };
        for consts in &variants {
            let name = gemm_tc::gemm_s8::def().variant_name(&consts.values());
            for (&(alpha, beta), expected) in cases.iter().zip(&expected) {
                let what = format!("{name} {m}x{n}x{k} alpha={alpha} beta={beta}");
                let run = || -> Result<Vec<i32>, Error> {
                    let mut dc = if beta == 0 {
                        rt.upload(&vec![i32::MIN; m * n])?
                    } else {
                        rt.upload(&c_in)?
                    };
                    let dims = (m as u32, n as u32, k as u32);
                    gemm_tc::gemm_s8_with(rt, *consts, &da, &db, &mut dc, dims, alpha, beta)?;
                    rt.download(&dc)
                };
                match run() {
                    Err(e) if consts.ALIGNED && k % 16 != 0 => {
                        let named = e.to_string().contains("k % 16 == 0");
                        report.check(&what, named, format!("refused as it must be: {e}"));
                    }
                    Ok(_) if consts.ALIGNED && k % 16 != 0 => {
                        report.check(
                            &what,
                            false,
                            "ran with k not a multiple of 16 instead of refusing",
                        );
                    }
                    Ok(out) => {
                        let wrong = out
                            .iter()
                            .zip(expected)
                            .position(|(&got, &want)| got as f64 != want);
                        let detail = match wrong {
                            None => format!("all {} elements exact", out.len()),
                            Some(i) => format!(
                                "element {i} (row {}, column {}) is {}, the exact value is {}",
                                i / n,
                                i % n,
                                out[i],
                                expected[i]
                            ),
                        };
                        report.check(&what, wrong.is_none(), detail);
                    }
                    Err(e) => report.error(&what, e),
                }
            }
        }
    }
}

/// Records one run of a floating-point GEMM variant on an m x n x k problem:
/// a variant that copies 16-byte chunks (`k_multiple`: the multiple of k it
/// needs) must refuse any other `k` with an `Err` naming the requirement; any
/// other run must match the float64 reference element by element within the
/// bound of [`GemmTolerance`] for `precision`, with a relative L2 error near
/// the output's rounding.
pub fn judge_gemm_float(
    report: &mut Report,
    what: &str,
    run: Result<Vec<f64>, Error>,
    k_multiple: Option<usize>,
    expected: &GemmReference,
    precision: GemmPrecision,
    k: usize,
) {
    let tolerance = GemmTolerance {
        precision,
        k,
        activation: Activation::Identity,
    };
    // Four times the relative L2 of rounding every output once (for tf32: of
    // rounding every input, 2^-11 relative, which dominates).
    let typical_error = match precision {
        GemmPrecision::Bf16 => 1e-2,
        GemmPrecision::Tf32 => 2e-3,
        _ => 1e-3,
    };
    let refuses = k_multiple.is_some_and(|multiple| k % multiple != 0);
    match run {
        Err(e) if refuses => {
            let requirement = format!("k % {} == 0", k_multiple.unwrap_or(1));
            let named = e.to_string().contains(&requirement);
            report.check(what, named, format!("refused as it must be: {e}"));
        }
        Ok(_) if refuses => {
            report.check(
                what,
                false,
                format!("ran with k not a multiple of {k_multiple:?} instead of refusing"),
            );
        }
        Ok(out) => {
            // The bound is a worst case (it grows with k); the relative L2 error
            // must also be near the output's rounding, which a missing or
            // doubled k-tile is not.
            let check = compare::check_gemm(&out, expected, &tolerance);
            let narrow: Vec<f32> = out.iter().map(|&v| v as f32).collect();
            let d = deviation(&narrow, &expected.values);
            let ok = check.passes() && d.rel_l2 <= typical_error;
            report.check(
                what,
                ok,
                format!("{check}; {d} (at most {typical_error:.0e})"),
            );
        }
        Err(e) => report.error(what, e),
    }
}

/// `stream_scale` (the pipelined `cp_async` stream) over every variant:
/// `y = alpha * x` exactly (one rounding, as the reference's f32 product).
pub fn check_stream(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for &n in sizes {
        let x = inputs.f32s(n);
        let alpha = 1.5f32;
        let expected: Vec<f64> = x.iter().map(|&v| (alpha * v) as f64).collect();
        let dx = match rt.upload(&x) {
            Ok(dx) => dx,
            Err(e) => {
                report.error(&format!("stream_scale n={n} upload"), e);
                continue;
            }
        };
        for consts in stream::stream_scale::variants() {
            let what = format!(
                "stream_scale[THREADS={},STAGES={}] n={n}",
                consts.THREADS, consts.STAGES
            );
            let run = || -> Result<Vec<f32>, Error> {
                let mut dy = poisoned(rt, n)?;
                stream::stream_scale_with(rt, consts, &dx, &mut dy, alpha)?;
                rt.download(&dy)
            };
            match run() {
                Ok(out) => {
                    let d = deviation(&out, &expected);
                    report.check(&what, d.passes(0.0) && d.max_abs == 0.0, d);
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}
