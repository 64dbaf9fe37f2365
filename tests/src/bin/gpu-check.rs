//! The GPU tier: every variant of every stock kernel against a float64 CPU
//! reference, on fresh random inputs (ragged sizes included), with outputs
//! poisoned (NaN) before each run so that an unwritten element fails.
//!
//! `gpu-check` runs everything; `gpu-check --quick` runs small shapes only (for
//! compute-sanitizer). Without a GPU it says so, lists the variants it would
//! have checked, and exits with status 2: not run is never passed.

use std::process::ExitCode;

use warpforge::{DeviceBuffer, Error, Grid, Runtime};
use warpforge_kernels::{gemm, reduce, simple, softmax};
use warpforge_tests::compare::deviation;
use warpforge_tests::report::Report;
use warpforge_tests::{reference, run_seed, Inputs};

/// Exit status when no GPU could be used: distinct from pass (0) and fail (1).
const NOT_RUN: u8 = 2;

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = match Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            println!("GPU TIER NOT RUN: no usable GPU: {e}");
            list_variants();
            println!("\n0 passed, 0 failed (not run: no GPU)");
            return ExitCode::from(NOT_RUN);
        }
    };
    let device = rt.device();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        device.name, device.compute_capability.0, device.compute_capability.1, device.sm_count
    );
    let seed = run_seed();
    println!("seed: {seed} (replay with WARPFORGE_SEED={seed})\n");
    let mut inputs = Inputs::new(seed);
    let mut report = Report::default();
    let sizes: &[usize] = if quick {
        &[1, 31, 4097]
    } else {
        &[1, 31, 1000, 4097, 1 << 20]
    };

    check_saxpy(&rt, &mut inputs, &mut report, sizes);
    check_histogram(&rt, &mut inputs, &mut report, sizes);
    check_sum(&rt, &mut inputs, &mut report, sizes);
    let softmax_shapes: &[(usize, usize)] = if quick {
        &[(1, 1), (3, 31), (2, 1000)]
    } else {
        &[(1, 1), (3, 31), (7, 1000), (2, 4097), (64, 1024)]
    };
    check_softmax(&rt, &mut inputs, &mut report, softmax_shapes);
    let gemm_shapes: &[(usize, usize, usize)] = if quick {
        &[(1, 1, 1), (31, 17, 5), (127, 255, 63)]
    } else {
        &[
            (1, 1, 1),
            (31, 17, 5),
            (127, 255, 63),
            (257, 1000, 33),
            (1000, 1000, 1000),
        ]
    };
    check_gemm(&rt, &mut inputs, &mut report, gemm_shapes);

    report.finish();
    if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What would have been checked, with each variant's PTX facts per target.
fn list_variants() {
    println!("\nthe stock kernels and their variants (PTX generated here, not run):");
    for def in warpforge_kernels::all() {
        for consts in def.variants() {
            let facts: Vec<String> = def
                .targets
                .iter()
                .filter_map(|target| target.arch())
                .map(
                    |arch| match warpforge_codegen::compile_ptx(def, &consts, arch) {
                        Ok(m) => format!(
                            "{} (PTX {}.{}, {} B shared)",
                            arch.name(),
                            m.version.0,
                            m.version.1,
                            m.shared_bytes
                        ),
                        Err(e) => format!("{}: {e}", arch.name()),
                    },
                )
                .collect();
            println!("  {:<48} {}", def.variant_name(&consts), facts.join(", "));
        }
    }
}

/// An output buffer of `n` NaNs: any element the kernel fails to write fails the check.
fn poisoned(rt: &Runtime, n: usize) -> Result<DeviceBuffer<f32>, Error> {
    rt.upload(&vec![f32::NAN; n])
}

fn check_saxpy(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
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

fn check_histogram(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
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

fn check_sum(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
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

fn check_softmax(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize)],
) {
    for consts in softmax::softmax_rows::variants() {
        for &(rows, cols) in shapes {
            let what = format!("softmax_rows[THREADS={}] {rows}x{cols}", consts.THREADS);
            let x: Vec<f32> = inputs.f32s(rows * cols).iter().map(|v| v * 8.0).collect();
            let expected = reference::softmax_rows(&x, rows, cols);
            let run = || -> Result<Vec<f32>, Error> {
                let dx = rt.upload(&x)?;
                let mut dy = poisoned(rt, rows * cols)?;
                softmax::softmax_rows::launch(
                    rt,
                    consts,
                    Grid::blocks([rows as u32, 1, 1]),
                    &dx,
                    &mut dy,
                    rows as u32,
                    cols as u32,
                )?;
                rt.download(&dy)
            };
            match run() {
                Ok(out) => {
                    let d = deviation(&out, &expected);
                    report.check(&what, d.passes(1e-5), d);
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

fn check_gemm(
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
        let expected: Vec<Vec<f64>> = cases
            .iter()
            .map(|&(alpha, beta)| {
                reference::gemm(&a, &b, &c_in, (m, n, k), alpha as f64, beta as f64)
            })
            .collect();
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
                        let d = deviation(&out, expected);
                        // f32 products accumulated in f32: error grows like sqrt(k) * eps.
                        report.check(&what, d.passes(1e-5), d);
                    }
                    Err(e) => report.error(&what, e),
                }
            }
        }
    }
}
