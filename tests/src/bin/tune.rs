//! `tune` (`cargo xtask tune`): tunes the stock GEMM families over a set of
//! shapes (in the problem forms of `--forms`, `GemmForm`: by default
//! `TunedGemm::run`'s plain problem) on the CUDA GPU at hand, writes the
//! tuning database and a JSON report, and prints the winners against the runner-up and the heuristic
//! default. `--verify-exhaustive` also times every verified variant fully
//! and checks each winner against the sweep's best; `--dispatch` tunes
//! nothing: it dispatches the same families, forms and shapes (the options,
//! or their defaults) from the database, failing on any that would need
//! tuning, verifies and times the dispatched variants, and measures the
//! host overhead of a dispatched launch. `--export FILE` and
//! `--import FILE` tune nothing either: they write the database of the GPU
//! at hand to a file (to ship with an application, `warpforge::tune::ship`,
//! or to import on another machine) and merge such a file into it. Every
//! mode needs the CUDA GPU, which names the database; without one it says
//! so and exits with status 2: not run is never passed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use warpforge::tune::{default_dir, GpuModel, TuneDb};
use warpforge::{Error, Runtime};
use warpforge_kernels::tuned::{
    GemmForm, GEMM_BF16, GEMM_BF16_F32, GEMM_E4M3, GEMM_E4M3_F16, GEMM_E4M3_F32, GEMM_E5M2,
    GEMM_E5M2_F16, GEMM_E5M2_F32, GEMM_F16, GEMM_F16_F32, GEMM_F32, GEMM_S8, GEMM_TF32,
    SPARSE_GEMM_BF16, SPARSE_GEMM_F16,
};
use warpforge_tests::run_seed;
use warpforge_tests::tuning::{
    dispatch_overhead, dispatch_shape, parse_shape, tune_shape, DispatchedShape, Overhead,
    TunedShape, DEFAULT_SHAPES, EXHAUSTIVE_TOLERANCE, OVERHEAD_TARGET_US,
};

/// Exit status when no GPU could be used: distinct from pass (0) and fail (1).
const NOT_RUN: u8 = 2;
/// The stock GEMM families, in the order they are tuned; the Hopper-only
/// ones (fp8, and f32 C from 16-bit products) last, skipped on other GPUs.
const FAMILIES: [&str; 15] = [
    "gemm_f32",
    "gemm_f16",
    "gemm_bf16",
    "gemm_tf32",
    "gemm_s8",
    "gemm_sparse_f16",
    "gemm_sparse_bf16",
    "gemm_e4m3",
    "gemm_e5m2",
    "gemm_f16_f32",
    "gemm_bf16_f32",
    "gemm_e4m3_f16",
    "gemm_e4m3_f32",
    "gemm_e5m2_f16",
    "gemm_e5m2_f32",
];
/// The problem forms `--forms` takes: the names of `GemmForm::ALL`.
const FORMS: [&str; 4] = [
    GemmForm::ALL[0].name,
    GemmForm::ALL[1].name,
    GemmForm::ALL[2].name,
    GemmForm::ALL[3].name,
];

#[derive(Parser)]
#[command(
    name = "tune",
    about = "Tune the stock GEMMs on this GPU and write the tuning database"
)]
struct Args {
    /// Shapes as MxNxK, comma-separated [default: 4096x4096x4096,8192x8192x8192,3001x2999x1000,2048x2048x1020]
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<(u32, u32, u32)>,
    /// Families to tune, comma-separated; a family is skipped at a shape where no variant of it
    /// runs on this GPU (the fp8 and f32-output families run on compute capability 9.0 only,
    /// with k a multiple of 16 or 8) [default: every family]
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(FAMILIES))]
    families: Vec<String>,
    /// Problem forms, comma-separated: plain (one GEMM, A and C row-major, B in the family's
    /// layout), nn_bias_relu (row-major A and B, a bias, ReLU), batched (16 strided batches),
    /// col_c (column-major C); forms a family has no variant for are skipped [default: plain]
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(FORMS))]
    forms: Vec<String>,
    /// Also time every verified variant fully and check that each winner is within 3% of the best
    #[arg(long)]
    verify_exhaustive: bool,
    /// Tune nothing: dispatch the families, forms and shapes given (or their defaults) from
    /// the database, verify and time the dispatched variants, and measure the dispatch overhead
    #[arg(long, conflicts_with = "verify_exhaustive")]
    dispatch: bool,
    /// Tune nothing: write this GPU's database to FILE (the format `warpforge::tune::ShippedDb` reads)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["import", "dispatch", "verify_exhaustive", "shapes", "families", "forms"])]
    export: Option<PathBuf>,
    /// Tune nothing: merge FILE, written by --export on the same GPU model, into this GPU's database
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dispatch", "verify_exhaustive", "shapes", "families", "forms"])]
    import: Option<PathBuf>,
    /// The database directory [default: $WARPFORGE_TUNE_DIR, else ~/.cache/warpforge/tune]
    #[arg(long)]
    db_dir: Option<PathBuf>,
    /// Where to write the JSON report
    #[arg(long, default_value = "tune-report.json")]
    report: PathBuf,
}

#[derive(Serialize)]
struct RunReport {
    mode: &'static str,
    device: String,
    gpu: GpuModel,
    db_path: String,
    seed: u64,
    tuned: Vec<TunedShape>,
    dispatched: Vec<DispatchedShape>,
    overhead: Option<Overhead>,
    /// Shapes that could not be tuned or dispatched at all.
    errors: Vec<String>,
    /// Family, form and shape triples not run: no variant of the family takes
    /// the problem on this GPU.
    skipped: Vec<String>,
    passed: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    warpforge_tests::stderr_log::init();
    let rt = match Runtime::cuda(0) {
        Ok(rt) => rt,
        Err(e) => {
            println!("TUNE NOT RUN: no usable CUDA GPU: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    let outcome = match (&args.export, &args.import) {
        (Some(file), _) => export(&rt, &args, file).map(|()| true),
        (None, Some(file)) => import(&rt, &args, file).map(|()| true),
        (None, None) => run(&rt, &args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("tune failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The database directory the arguments name.
fn db_dir(args: &Args) -> PathBuf {
    args.db_dir.clone().unwrap_or_else(default_dir)
}

/// The database of `rt`'s GPU, its load warnings printed.
fn open_db(rt: &Runtime, args: &Args) -> Result<TuneDb, Error> {
    let db = TuneDb::open(Some(&db_dir(args)), &GpuModel::of(rt.device()))?;
    for warning in db.warnings() {
        println!("warning: {warning}");
    }
    Ok(db)
}

fn export(rt: &Runtime, args: &Args, file: &Path) -> Result<(), Error> {
    let db = open_db(rt, args)?;
    db.export(file)?;
    println!(
        "exported {} record(s) from {} to {}",
        db.len(),
        db.path().display(),
        file.display()
    );
    Ok(())
}

fn import(rt: &Runtime, args: &Args, file: &Path) -> Result<(), Error> {
    let mut db = open_db(rt, args)?;
    let count = db.import(file)?;
    println!(
        "imported {count} record(s) from {} into {} ({} record(s) now)",
        file.display(),
        db.path().display(),
        db.len()
    );
    Ok(())
}

fn run(rt: &Runtime, args: &Args) -> Result<bool, Error> {
    let shapes = if args.shapes.is_empty() {
        DEFAULT_SHAPES.to_vec()
    } else {
        args.shapes.clone()
    };
    let families: Vec<&str> = if args.families.is_empty() {
        FAMILIES.to_vec()
    } else {
        FAMILIES
            .into_iter()
            .filter(|f| args.families.iter().any(|g| g == f))
            .collect()
    };
    let dir = db_dir(args);
    let device = rt.device();
    let gpu = GpuModel::of(device);
    let db_path = TuneDb::open(Some(&dir), &gpu)?.path();
    let seed = run_seed();
    println!(
        "device: {} ({}, {} SMs), database: {}",
        device.name,
        device.sm_name(),
        device.sm_count,
        db_path.display()
    );
    println!("seed: {seed} (replay with WARPFORGE_SEED={seed})\n");
    let mut report = RunReport {
        mode: if args.dispatch { "dispatch" } else { "tune" },
        device: device.name.clone(),
        db_path: db_path.display().to_string(),
        gpu,
        seed,
        tuned: Vec::new(),
        dispatched: Vec::new(),
        overhead: None,
        errors: Vec::new(),
        skipped: Vec::new(),
        passed: false,
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    let forms: Vec<GemmForm> = if args.forms.is_empty() {
        vec![GemmForm::PLAIN]
    } else {
        GemmForm::ALL
            .into_iter()
            .filter(|f| args.forms.iter().any(|g| g == f.name))
            .collect()
    };
    for family in &families {
        for &form in &forms {
            for &dims in &shapes {
                let what = format!("{family} {} {}x{}x{}", form.name, dims.0, dims.1, dims.2);
                if let Some(why) = skip(rt, family, form, dims)? {
                    bar.suspend(|| println!("{what}: skipped: {why}"));
                    report.skipped.push(format!("{what}: {why}"));
                    continue;
                }
                bar.set_prefix(what.clone());
                bar.set_position(0);
                let result = if args.dispatch {
                    dispatch(rt, family, form, dims, &dir, seed).map(|shape| {
                        println!(
                            "{what}: dispatched {} from {} ({})",
                            shape.variant,
                            shape.source,
                            status(&shape.failures)
                        );
                        report.dispatched.push(shape);
                    })
                } else {
                    let exhaustive = args.verify_exhaustive;
                    tune_one(rt, family, form, dims, &dir, seed, exhaustive, &bar).map(|shape| {
                        // Printed above the bar; also when the bar is hidden (no terminal).
                        bar.suspend(|| {
                            println!(
                                "{what}: {} in {:.1} s ({})",
                                shape.winner.variant,
                                shape.tuning_s,
                                status(&shape.failures)
                            )
                        });
                        report.tuned.push(shape);
                    })
                };
                if let Err(e) = result {
                    bar.suspend(|| println!("{what}: FAILED: {e}"));
                    report.errors.push(format!("{what}: {e}"));
                }
            }
        }
    }
    bar.finish_and_clear();

    if args.dispatch {
        match dispatch_overhead(rt, &dir) {
            Ok(overhead) => report.overhead = Some(overhead),
            Err(e) => report.errors.push(format!("dispatch overhead: {e}")),
        }
        print_dispatched(&report);
    } else {
        print_tuned(&report.tuned, args.verify_exhaustive);
    }
    let failures: Vec<&String> = report
        .tuned
        .iter()
        .flat_map(|s| &s.failures)
        .chain(report.dispatched.iter().flat_map(|s| &s.failures))
        .chain(&report.errors)
        .collect();
    let overhead_ok = report.overhead.as_ref().is_none_or(|o| o.within_target);
    report.passed = failures.is_empty() && overhead_ok;
    if !failures.is_empty() {
        println!("\nfailures:");
        for failure in &failures {
            println!("  {failure}");
        }
    }
    write_report(&args.report, &report)?;
    println!(
        "\n{}: {} shape(s), {} failure(s); report: {}",
        if report.passed { "PASSED" } else { "FAILED" },
        report.tuned.len() + report.dispatched.len(),
        failures.len() + usize::from(!overhead_ok),
        args.report.display()
    );
    Ok(report.passed)
}

fn status(failures: &[String]) -> &'static str {
    if failures.is_empty() {
        "ok"
    } else {
        "FAILED"
    }
}

/// Runs `$body` with `$kind` bound to the stock family named `$family`
/// (one of [`FAMILIES`]): the one place that maps names to families.
macro_rules! with_family {
    ($family:expr, $kind:ident => $body:expr) => {
        match $family {
            "gemm_f32" => {
                let $kind = &GEMM_F32;
                $body
            }
            "gemm_f16" => {
                let $kind = &GEMM_F16;
                $body
            }
            "gemm_bf16" => {
                let $kind = &GEMM_BF16;
                $body
            }
            "gemm_tf32" => {
                let $kind = &GEMM_TF32;
                $body
            }
            "gemm_s8" => {
                let $kind = &GEMM_S8;
                $body
            }
            "gemm_sparse_f16" => {
                let $kind = &SPARSE_GEMM_F16;
                $body
            }
            "gemm_sparse_bf16" => {
                let $kind = &SPARSE_GEMM_BF16;
                $body
            }
            "gemm_e4m3" => {
                let $kind = &GEMM_E4M3;
                $body
            }
            "gemm_e5m2" => {
                let $kind = &GEMM_E5M2;
                $body
            }
            "gemm_f16_f32" => {
                let $kind = &GEMM_F16_F32;
                $body
            }
            "gemm_bf16_f32" => {
                let $kind = &GEMM_BF16_F32;
                $body
            }
            "gemm_e4m3_f16" => {
                let $kind = &GEMM_E4M3_F16;
                $body
            }
            "gemm_e4m3_f32" => {
                let $kind = &GEMM_E4M3_F32;
                $body
            }
            "gemm_e5m2_f16" => {
                let $kind = &GEMM_E5M2_F16;
                $body
            }
            "gemm_e5m2_f32" => {
                let $kind = &GEMM_E5M2_F32;
                $body
            }
            other => Err(unknown(other)),
        }
    };
}

/// Why `family` does not run `form` at `dims` on `rt`'s device (no variant
/// takes its problem: the s8 GEMM's NN form, an fp8 GEMM off Hopper or with
/// k not a multiple of 16), or `None`.
fn skip(
    rt: &Runtime,
    family: &str,
    form: GemmForm,
    dims: (u32, u32, u32),
) -> Result<Option<String>, Error> {
    with_family!(family, kind => kind.unrunnable(&form.problem(kind, dims), form.bias, rt.device()))
}

#[allow(clippy::too_many_arguments)]
fn tune_one(
    rt: &Runtime,
    family: &str,
    form: GemmForm,
    dims: (u32, u32, u32),
    dir: &Path,
    seed: u64,
    exhaustive: bool,
    bar: &ProgressBar,
) -> Result<TunedShape, Error> {
    with_family!(family, kind => tune_shape(rt, kind, form, dims, dir, seed, exhaustive, bar))
}

fn dispatch(
    rt: &Runtime,
    family: &str,
    form: GemmForm,
    dims: (u32, u32, u32),
    dir: &Path,
    seed: u64,
) -> Result<DispatchedShape, Error> {
    with_family!(family, kind => dispatch_shape(rt, kind, form, dims, dir, seed))
}

fn unknown(family: &str) -> Error {
    Error::Tune(format!(
        "`{family}` is not a stock GEMM family: use one of {}",
        FAMILIES.join(", ")
    ))
}

fn shape_name((m, n, k): (u32, u32, u32)) -> String {
    format!("{m}x{n}x{k}")
}

fn print_tuned(shapes: &[TunedShape], exhaustive: bool) {
    let time = |t: &Option<warpforge_tests::tuning::Timing>| {
        t.as_ref().map_or("| - | - ".to_string(), |t| {
            format!("| {} | {:.4} ", t.variant, t.ms)
        })
    };
    println!("\n| family | form | shape | winner | ms | TFLOP/s | runner-up | ms | heuristic | ms | heuristic / winner | candidates | tuning s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for s in shapes {
        let vs_heuristic = s
            .heuristic
            .as_ref()
            .map_or("-".to_string(), |h| format!("{:.3}x", h.ms / s.winner.ms));
        let fates: Vec<String> = s.fates.iter().map(|(f, n)| format!("{n} {f}")).collect();
        println!(
            "| {} | {} | {} | {} | {:.4} | {:.1} {}{}| {vs_heuristic} | {} | {:.1} |",
            s.family,
            s.form,
            shape_name(s.shape),
            s.winner.variant,
            s.winner.ms,
            s.winner.tflops,
            time(&s.runner_up),
            time(&s.heuristic),
            fates.join(", "),
            s.tuning_s
        );
    }
    if exhaustive {
        println!(
            "\nexhaustive sweep (every verified variant timed fully; winner and best re-timed \
             alternately), tolerance {:.0}%:",
            (EXHAUSTIVE_TOLERANCE - 1.0) * 100.0
        );
        println!("\n| family | form | shape | dispatched | sweep's best | swept | dispatched ms | best ms | ratio | within |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for s in shapes {
            if let Some(e) = &s.exhaustive {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {:.4} | {:.4} | {:.4} | {} |",
                    s.family,
                    s.form,
                    shape_name(s.shape),
                    s.dispatched,
                    e.best.variant,
                    e.swept,
                    e.winner_ms,
                    e.best_ms,
                    e.ratio,
                    if e.within_tolerance { "yes" } else { "NO" }
                );
            }
        }
    }
    let m8n8k4 = shapes.iter().filter(|s| s.dispatched_uses_m8n8k4).count();
    println!(
        "\ndispatched from the database by a fresh dispatcher: {}/{}; dispatched variants using \
         an m8n8k4 MMA: {m8n8k4}",
        shapes
            .iter()
            .filter(|s| s.dispatched_source == "Database")
            .count(),
        shapes.len()
    );
}

fn print_dispatched(report: &RunReport) {
    println!(
        "\n| family | form | shape | dispatched | source | recorded ms | measured ms | verified |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for s in &report.dispatched {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s.family,
            s.form,
            shape_name(s.shape),
            s.variant,
            s.source,
            s.recorded_ms.map_or("-".into(), |ms| format!("{ms:.4}")),
            s.measured
                .as_ref()
                .map_or("-".into(), |t| format!("{:.4}", t.ms)),
            if s.verified { "yes" } else { "NO" }
        );
    }
    let tuned_nothing = report.dispatched.iter().all(|s| s.source == "Database");
    println!(
        "\nthis process tuned nothing: {} ({} of {} shapes dispatched from the database)",
        if tuned_nothing { "yes" } else { "NO" },
        report
            .dispatched
            .iter()
            .filter(|s| s.source == "Database")
            .count(),
        report.dispatched.len()
    );
    if let Some(o) = &report.overhead {
        println!(
            "\ndispatch overhead ({} at {}): direct {:.3} us, dispatched {:.3} us per launch \
             (host, enqueue), overhead {:.3} us (target < {OVERHEAD_TARGET_US} us: {}); one \
             resolved select alone {:.0} ns",
            o.variant,
            shape_name(o.shape),
            o.direct_us,
            o.dispatched_us,
            o.overhead_us,
            if o.within_target { "met" } else { "MISSED" },
            o.select_ns
        );
        if let Some(k) = &o.tuned_kernel {
            println!(
                "tuned kernel launch (scale_add, 2^16 elements, tune_key): launcher {:.3} us, \
                 tuned {:.3} us per launch, overhead {:.3} us",
                k.direct_us, k.tuned_us, k.overhead_us
            );
        }
    }
}

fn write_report(path: &Path, report: &RunReport) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| Error::Tune(format!("cannot encode the report: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| {
        Error::Tune(format!(
            "cannot write the report to {}: {e}; pass --report with a writable path",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_skipped_where_no_variant_of_it_runs() {
        // The interpreter runs PTX up to sm_80, as an Ampere GPU would.
        let rt = Runtime::interpreter();
        let ragged = (3001, 2999, 1000);
        assert_eq!(
            skip(&rt, "gemm_f16", GemmForm::PLAIN, ragged).unwrap(),
            None
        );
        for family in ["gemm_e4m3", "gemm_f16_f32", "gemm_e5m2_f32"] {
            let why = skip(&rt, family, GemmForm::PLAIN, (4096, 4096, 4096))
                .unwrap()
                .unwrap_or_else(|| panic!("{family} has only sm_90a variants"));
            assert!(
                why.starts_with(&format!("no variant of `{family}` takes this problem on")),
                "{why}"
            );
            assert!(why.contains("sm_90a"), "{why}");
        }
        // The s8 GEMM has no variant for row-major B.
        assert!(
            skip(&rt, "gemm_s8", GemmForm::NN_BIAS_RELU, (256, 256, 256))
                .unwrap()
                .is_some()
        );
        // Every family name maps to a family.
        for family in FAMILIES {
            skip(&rt, family, GemmForm::PLAIN, (256, 256, 256)).unwrap();
        }
    }
}
