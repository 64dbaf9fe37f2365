//! The tuning CLI of warpforge for any workspace.
//!
//! Each crate of kernels lists its tuned entry points as
//! [`TuneJob`]s (a `pub static TUNE_JOBS: &[TuneJob]`); the workspace's
//! `xtask` hands every list to [`main`]:
//!
//! ```no_run
//! # mod my_kernels { pub static TUNE_JOBS: &[warpforge::tune::TuneJob] = &[]; }
//! fn main() -> std::process::ExitCode {
//!     warpforge_tuner::main(&[my_kernels::TUNE_JOBS])
//! }
//! ```
//!
//! `cargo xtask tune` then runs every job at each of its shapes with the
//! runtime's miss policy set to tune ([`MissPolicy::TuneNow`]): each tuned
//! call's first launch verifies and times the variants, records the winner
//! in the tuning database of the GPU at hand, and the CLI prints one table
//! row per tuning (winner, runner-up, heuristic default, how the candidates
//! fared, seconds) and writes a JSON report. `cargo xtask tune --dispatch`
//! runs the same calls with the heuristic policy and fails unless every
//! call was dispatched from the database: the check that a second process
//! needs no tuning. `--export FILE` and `--import FILE` carry a database to
//! another machine with the same GPU. The device is the one
//! `warpforge::Runtime::new` picks (`WARPFORGE_BACKEND=cuda|wgpu` forces
//! one); without any, the CLI says so and exits with status 2: not run is
//! never passed.

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use warpforge::tune::{
    default_dir, DispatchStats, GpuModel, MissPolicy, Status, TuneDb, TuneJob, TuneSettings,
};
use warpforge::{Error, Runtime};

/// Exit status when no device could be used: distinct from pass (0) and fail (1).
pub const NOT_RUN: u8 = 2;

#[derive(Parser)]
#[command(name = "xtask", about = "The workspace's chores")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tune every registered kernel on this GPU and write the tuning database
    Tune(TuneArgs),
}

/// The options of `cargo xtask tune`.
#[derive(Args, Clone, Debug, Default)]
pub struct TuneArgs {
    /// Jobs to run, comma-separated [default: all]
    #[arg(long, value_delimiter = ',')]
    pub jobs: Vec<String>,
    /// Shapes to run instead of each job's own, comma-separated, sizes joined
    /// by `x` (`1048576`, `256x512`, `4096x4096x4096`); a job takes those with
    /// as many sizes as its own shapes
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub shapes: Vec<Vec<u64>>,
    /// Tune nothing: run the jobs with the heuristic policy and fail unless
    /// every call is dispatched from the database
    #[arg(long)]
    pub dispatch: bool,
    /// The database directory [default: $WARPFORGE_TUNE_DIR, else ~/.cache/warpforge/tune]
    #[arg(long)]
    pub db_dir: Option<PathBuf>,
    /// Where to write the JSON report
    #[arg(long, default_value = "tune-report.json")]
    pub report: PathBuf,
    /// Merge the records of FILE (written by --export on the same GPU model) into the database first
    #[arg(long)]
    pub import: Option<PathBuf>,
    /// Write the database of this GPU to FILE at the end
    #[arg(long)]
    pub export: Option<PathBuf>,
}

/// `1048576`, `256x512` or `4096x4096x4096`: one to four sizes.
fn parse_shape(text: &str) -> Result<Vec<u64>, String> {
    let sizes = text
        .split('x')
        .map(|part| part.trim().parse::<u64>())
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|_| {
            format!("`{text}` is not a shape: write sizes joined by `x`, e.g. 4096x4096")
        })?;
    if sizes.is_empty() || sizes.len() > warpforge::tune::MAX_KEY_SIZES {
        return Err(format!(
            "`{text}` has {} sizes: a shape has one to {}",
            sizes.len(),
            warpforge::tune::MAX_KEY_SIZES
        ));
    }
    Ok(sizes)
}

/// The whole CLI: parses `xtask tune [OPTIONS]` from the command line, runs
/// the jobs of every list in `jobs`, and returns the exit status (0 passed,
/// 1 failed, [`NOT_RUN`] with no device or when every call was skipped).
pub fn main(jobs: &[&[TuneJob]]) -> ExitCode {
    let Command::Tune(args) = Cli::parse().command;
    let rt = match Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            println!("TUNE NOT RUN: no device to tune on: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    match run(&rt, &args, jobs) {
        Ok(report) if report.calls.iter().all(|call| call.skipped.is_some()) => {
            println!(
                "TUNE NOT RUN: no job runs on {} (every call was skipped)",
                report.device
            );
            ExitCode::from(NOT_RUN)
        }
        Ok(report) if report.passed => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            println!("tune failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What one run did: the JSON report's content.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `tune` or `dispatch`.
    pub mode: &'static str,
    /// The device's name and backend.
    pub device: String,
    /// Its model, as the database keys it.
    pub gpu: GpuModel,
    /// The database file.
    pub db_path: String,
    /// One per job and shape, in order.
    pub calls: Vec<JobCall>,
    /// Records imported from `--import`.
    pub imported: Option<usize>,
    /// Whether every call ran and, with `--dispatch`, every call was
    /// dispatched from the database.
    pub passed: bool,
}

/// One job run at one shape.
#[derive(Clone, Debug, Serialize)]
pub struct JobCall {
    /// The job's name.
    pub job: String,
    /// The sizes it ran at.
    pub shape: Vec<u64>,
    /// Wall-clock seconds of the job's calls, tuning included.
    pub seconds: f64,
    /// The tunings the calls did (none when the database had every winner).
    pub tunings: Vec<Tuning>,
    /// How each family's calls resolved, as counts of resolutions.
    pub resolutions: BTreeMap<String, Resolutions>,
    /// The job's error, when it failed.
    pub error: Option<String>,
    /// Why the job did not run at this shape on this device (its
    /// [`TuneJob::skip`]), when it did not: neither passed nor failed.
    pub skipped: Option<String>,
}

/// How one family's calls of a job were resolved.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Resolutions {
    /// From the local database.
    pub database: u64,
    /// From a database the application shipped.
    pub shipped: u64,
    /// Another driver's winner, re-verified and re-timed first.
    pub revalidated: u64,
    /// Tuned on the spot.
    pub tuned: u64,
    /// From a nearby bucket's winner.
    pub nearest: u64,
    /// To the heuristic default.
    pub heuristic: u64,
    /// Stored winners that could not be used.
    pub stale: u64,
}

impl Resolutions {
    /// The resolutions between two snapshots of a dispatcher's stats.
    fn between(before: DispatchStats, after: DispatchStats) -> Resolutions {
        Resolutions {
            database: after.database - before.database,
            shipped: after.shipped - before.shipped,
            revalidated: after.revalidated - before.revalidated,
            tuned: after.tuned - before.tuned,
            nearest: after.nearest - before.nearest,
            heuristic: after.heuristic - before.heuristic,
            stale: after.stale - before.stale,
        }
    }

    /// Whether anything did not come from a database as stored: a
    /// re-validation measured variants, as tuning does.
    fn missed(&self) -> bool {
        self.revalidated + self.tuned + self.nearest + self.heuristic + self.stale > 0
    }

    fn is_empty(&self) -> bool {
        self.database + self.shipped == 0 && !self.missed()
    }
}

/// One tuning: its family and bucket, and what won.
#[derive(Clone, Debug, Serialize)]
pub struct Tuning {
    /// The family (a kernel's path, or a stock GEMM's name).
    pub family: String,
    /// The shape bucket, e.g. `4096x4096x4096`.
    pub bucket: String,
    /// The winner and its median per launch in milliseconds.
    pub winner: (String, f64),
    /// The runner-up, when another candidate was fully timed.
    pub runner_up: Option<(String, f64)>,
    /// The heuristic default, when it was fully timed.
    pub heuristic: Option<(String, f64)>,
    /// How many candidates ended how: `timed`, `dropped`, `rejected`, `pruned`.
    pub fates: BTreeMap<&'static str, usize>,
    /// Seconds the search took.
    pub seconds: f64,
}

/// Runs the jobs of `jobs` on `rt` as `args` say, printing progress and a
/// table, and writes the report (also returned). `Err` only for what stops
/// the whole run (an unusable database directory, an unwritable report);
/// a failing job is recorded in its [`JobCall`] and fails the run.
pub fn run(rt: &Runtime, args: &TuneArgs, jobs: &[&[TuneJob]]) -> Result<RunReport, Error> {
    let all: Vec<&TuneJob> = jobs.iter().flat_map(|list| list.iter()).collect();
    for name in &args.jobs {
        if !all.iter().any(|job| job.name == name) {
            let names: Vec<&str> = all.iter().map(|job| job.name).collect();
            return Err(Error::Tune(format!(
                "--jobs names `{name}`, which no crate registered: the jobs are {}",
                names.join(", ")
            )));
        }
    }
    let selected: Vec<&TuneJob> = all
        .into_iter()
        .filter(|job| args.jobs.is_empty() || args.jobs.iter().any(|n| n == job.name))
        .collect();
    let dir = args.db_dir.clone().unwrap_or_else(default_dir);
    let gpu = GpuModel::of(rt.device());
    let mut db = TuneDb::open(Some(&dir), &gpu)?;
    let device = format!("{} ({})", rt.device().name, rt.backend_name());
    println!("device: {device}, database: {}", db.path().display());
    let imported = match &args.import {
        Some(file) => {
            let count = db.import(file)?;
            println!("imported {count} record(s) from {}", file.display());
            Some(count)
        }
        None => None,
    };
    rt.set_tune_settings(TuneSettings {
        policy: Some(if args.dispatch {
            MissPolicy::Heuristic
        } else {
            MissPolicy::TuneNow
        }),
        dir: Some(dir.clone()),
    });

    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{prefix} {spinner} {elapsed} {msg}")
            .expect("the template is valid"),
    );
    let mut calls = Vec::new();
    for job in &selected {
        for shape in shapes_of(job, &args.shapes) {
            let what = format!("{} {}", job.name, shape_name(&shape));
            bar.set_prefix(what.clone());
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            let call = run_job(rt, job, &shape);
            bar.suspend(|| println!("{what}: {}", summary(&call, args.dispatch)));
            calls.push(call);
        }
    }
    bar.finish_and_clear();

    let failed: Vec<String> = calls
        .iter()
        .filter_map(|call| {
            let what = format!("{} {}", call.job, shape_name(&call.shape));
            if let Some(e) = &call.error {
                Some(format!("{what}: {e}"))
            } else if args.dispatch && call.resolutions.values().any(Resolutions::missed) {
                Some(format!(
                    "{what}: not every call was dispatched from the database"
                ))
            } else {
                None
            }
        })
        .collect();
    if args.dispatch {
        print_dispatched(&calls);
    } else {
        print_tunings(&calls);
    }
    for (name, dispatcher) in rt.tuned_dispatchers() {
        for warning in dispatcher.warnings() {
            println!("warning ({name}): {warning}");
        }
    }
    if let Some(file) = &args.export {
        TuneDb::open(Some(&dir), &gpu)?.export(file)?;
        println!(
            "exported the database of {} to {}",
            gpu.file_stem(),
            file.display()
        );
    }
    let report = RunReport {
        mode: if args.dispatch { "dispatch" } else { "tune" },
        device,
        gpu,
        db_path: db.path().display().to_string(),
        calls,
        imported,
        passed: failed.is_empty(),
    };
    write_report(&args.report, &report)?;
    if !failed.is_empty() {
        println!("\nfailures:");
        for failure in &failed {
            println!("  {failure}");
        }
    }
    println!(
        "\n{}: {} call(s), {} skipped on this device, {} failure(s); report: {}",
        if report.passed { "PASSED" } else { "FAILED" },
        report.calls.len(),
        report
            .calls
            .iter()
            .filter(|call| call.skipped.is_some())
            .count(),
        failed.len(),
        args.report.display()
    );
    Ok(report)
}

/// The shapes `job` runs at: `--shapes` with as many sizes as the job's own,
/// when given, else its own.
fn shapes_of(job: &TuneJob, overrides: &[Vec<u64>]) -> Vec<Vec<u64>> {
    if overrides.is_empty() {
        return job.shapes.iter().map(|s| s.to_vec()).collect();
    }
    let arity = job.shapes.first().map_or(0, |s| s.len());
    overrides
        .iter()
        .filter(|s| s.len() == arity)
        .cloned()
        .collect()
}

/// Runs one job at one shape, unless its `skip` says why it cannot, and
/// gathers what the runtime's dispatchers did.
fn run_job(rt: &Runtime, job: &TuneJob, shape: &[u64]) -> JobCall {
    let not_run = |error: Option<String>, skipped: Option<String>| JobCall {
        job: job.name.to_string(),
        shape: shape.to_vec(),
        seconds: 0.0,
        tunings: Vec::new(),
        resolutions: BTreeMap::new(),
        error,
        skipped,
    };
    match (job.skip)(rt, shape) {
        Ok(None) => {}
        Ok(Some(why)) => return not_run(None, Some(why)),
        Err(e) => return not_run(Some(e.to_string()), None),
    }
    let before: BTreeMap<&str, DispatchStats> = rt
        .tuned_dispatchers()
        .into_iter()
        .map(|(name, d)| (name, d.stats()))
        .collect();
    let started = Instant::now();
    let result = (job.run)(rt, shape);
    let seconds = started.elapsed().as_secs_f64();
    let mut tunings = Vec::new();
    let mut resolutions = BTreeMap::new();
    for (name, dispatcher) in rt.tuned_dispatchers() {
        let family = dispatcher.family();
        for outcome in dispatcher.take_outcomes() {
            let report = &outcome.report;
            let named = |index: usize| {
                report
                    .median_ms(index)
                    .map(|ms| (family.candidates()[index].name().to_string(), ms))
            };
            let mut fates = BTreeMap::new();
            for status in &report.statuses {
                let fate = match status {
                    Status::Timed { .. } => "timed",
                    Status::Dropped { .. } => "dropped",
                    Status::Rejected { .. } => "rejected",
                    Status::Pruned { .. } => "pruned",
                };
                *fates.entry(fate).or_insert(0) += 1;
            }
            tunings.push(Tuning {
                family: name.to_string(),
                bucket: outcome.key.shape.to_string(),
                winner: named(report.winner).expect("the winner was timed"),
                runner_up: report.runner_up.and_then(named),
                heuristic: report.heuristic.and_then(named),
                fates,
                seconds: report.elapsed.as_secs_f64(),
            });
        }
        let resolved = Resolutions::between(
            before.get(name).copied().unwrap_or_default(),
            dispatcher.stats(),
        );
        if !resolved.is_empty() {
            resolutions.insert(name.to_string(), resolved);
        }
    }
    JobCall {
        job: job.name.to_string(),
        shape: shape.to_vec(),
        seconds,
        tunings,
        resolutions,
        error: result.err().map(|e| e.to_string()),
        skipped: None,
    }
}

fn summary(call: &JobCall, dispatch: bool) -> String {
    if let Some(e) = &call.error {
        return format!("FAILED: {e}");
    }
    if let Some(why) = &call.skipped {
        return format!("skipped: {why}");
    }
    if dispatch {
        let missed = call.resolutions.values().any(Resolutions::missed);
        return format!(
            "{} in {:.3} s",
            if missed {
                "NOT all from the database"
            } else {
                "dispatched from the database"
            },
            call.seconds
        );
    }
    let winners: Vec<String> = call.tunings.iter().map(|t| t.winner.0.clone()).collect();
    if winners.is_empty() {
        format!(
            "nothing to tune (already in the database), {:.3} s",
            call.seconds
        )
    } else {
        format!("{} in {:.1} s", winners.join(", "), call.seconds)
    }
}

fn shape_name(shape: &[u64]) -> String {
    let sizes: Vec<String> = shape.iter().map(u64::to_string).collect();
    sizes.join("x")
}

fn print_tunings(calls: &[JobCall]) {
    println!("\n| job | shape | family | bucket | winner | ms | runner-up ms | heuristic | ms | heuristic / winner | candidates | tuning s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for call in calls {
        for t in &call.tunings {
            let ms = |entry: &Option<(String, f64)>| {
                entry.as_ref().map_or("-".into(), |e| format!("{:.4}", e.1))
            };
            let fates: Vec<String> = t.fates.iter().map(|(f, n)| format!("{n} {f}")).collect();
            println!(
                "| {} | {} | {} | {} | {} | {:.4} | {} | {} | {} | {} | {} | {:.1} |",
                call.job,
                shape_name(&call.shape),
                t.family,
                t.bucket,
                t.winner.0,
                t.winner.1,
                ms(&t.runner_up),
                t.heuristic.as_ref().map_or("-", |h| h.0.as_str()),
                ms(&t.heuristic),
                t.heuristic
                    .as_ref()
                    .map_or("-".into(), |h| format!("{:.3}x", h.1 / t.winner.1)),
                fates.join(", "),
                t.seconds
            );
        }
    }
    let mut seconds: Vec<f64> = calls
        .iter()
        .flat_map(|c| &c.tunings)
        .map(|t| t.seconds)
        .collect();
    seconds.sort_by(f64::total_cmp);
    if let Some(median) = seconds.get(seconds.len() / 2) {
        println!("\n{} tuning(s), median {median:.1} s each", seconds.len());
    }
}

fn print_dispatched(calls: &[JobCall]) {
    println!(
        "\n| job | shape | family | from the database | tuned | nearest | heuristic | stale |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for call in calls {
        for (family, r) in &call.resolutions {
            println!(
                "| {} | {} | {family} | {} | {} | {} | {} | {} | {} | {} |",
                call.job,
                shape_name(&call.shape),
                r.database,
                r.shipped,
                r.revalidated,
                r.tuned,
                r.nearest,
                r.heuristic,
                r.stale
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
    fn shapes_parse_as_sizes_joined_by_x() {
        assert_eq!(parse_shape("1048576"), Ok(vec![1048576]));
        assert_eq!(parse_shape("256x512"), Ok(vec![256, 512]));
        assert!(parse_shape("1x2x3x4x5").unwrap_err().contains("one to 4"));
        assert!(parse_shape("12a").unwrap_err().contains("not a shape"));
    }

    #[test]
    fn only_stored_winners_count_as_dispatched_from_a_database() {
        let stats = |database, shipped, revalidated| DispatchStats {
            database,
            shipped,
            revalidated,
            ..DispatchStats::default()
        };
        let zero = DispatchStats::default();
        assert!(!Resolutions::between(zero, stats(2, 1, 0)).missed());
        assert!(Resolutions::between(zero, stats(2, 0, 1)).missed());
        assert!(!Resolutions::between(zero, stats(0, 1, 0)).is_empty());
    }

    #[test]
    fn a_skipped_call_is_neither_run_nor_failed() {
        let rt = Runtime::interpreter();
        let job = TuneJob {
            name: "j",
            shapes: &[&[1]],
            run: |_, _| Err(Error::Tune("the job ran".into())),
            skip: |_, shape| Ok((shape[0] == 1).then(|| "not on this device".into())),
        };
        let call = run_job(&rt, &job, &[1]);
        assert_eq!(call.skipped.as_deref(), Some("not on this device"));
        assert_eq!(call.error, None);
        assert_eq!(summary(&call, false), "skipped: not on this device");
        let call = run_job(&rt, &job, &[2]);
        assert_eq!(
            (call.skipped, call.error.as_deref()),
            (None, Some("the job ran"))
        );
    }

    #[test]
    fn overrides_apply_to_jobs_of_their_arity() {
        let job = TuneJob {
            name: "j",
            shapes: &[&[1, 2]],
            run: |_, _| Ok(()),
            skip: TuneJob::RUNS_ANYWHERE,
        };
        assert_eq!(shapes_of(&job, &[]), vec![vec![1, 2]]);
        let overrides = vec![vec![8], vec![16, 32], vec![64, 64]];
        assert_eq!(
            shapes_of(&job, &overrides),
            vec![vec![16, 32], vec![64, 64]]
        );
    }
}
