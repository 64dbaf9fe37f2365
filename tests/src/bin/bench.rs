//! `bench`: the stock kernels beside cuBLAS on this GPU, timed by one method
//! (`warpforge_tests::bench::method`: the GPU kept busy, warm-up, interleaved
//! rounds, the spread and the SM clock beside every median), written as a
//! table on stdout and `table.md`, `report.json` (every sample, every
//! variant's sweep sample, and each step's seconds by part) and charts in
//! `--out`.
//!
//! Sections (`--sections`, all by default):
//! - `gemm`: per dtype (f16, bf16, tf32, s8, e4m3) and shape, each architecture
//!   path the GPU runs (the sm_70 `wmma` kernel for f16, the sm_80 `mma.sync`
//!   family, on Hopper the sm_90a `wgmma` family: each path's finalists from
//!   a short sweep, timed in the case's rounds, the fastest by median standing
//!   for the path), the tuned dispatch (`TunedGemm`: the
//!   database's winner, else the heuristic default), and cuBLAS GemmEx, the
//!   baseline (for e4m3 cuBLASLt with fast accumulation, like the `wgmma`
//!   kernel, and beside it cuBLASLt with its partial sums promoted to f32,
//!   `torch._scaled_mm`'s default); every path's C checked against cuBLAS's
//!   (on the GPU: `warpforge_tests::compare::device_deviation`);
//! - `f32`: the SIMT f32 GEMM beside cuBLAS sgemm (no TF32);
//! - `sparse`: the 2:4 sparse f16 GEMM beside the dense one on the
//!   decompressed A and, where it loads, cuSPARSELt
//!   (`warpforge_tests::bench::cusparselt`);
//! - `stream`: the `cp.async` streaming kernel beside `cuMemcpyDtoD`;
//! - `mma`: per dtype the Tensor Core instruction rates, the compute
//!   ceilings the roofline draws: `mma.sync` (the sm_80 paths' instruction)
//!   and, on Hopper, `wgmma` (the sm_90a paths'); for f16 also the two
//!   sparse `mma.sp` forms;
//! - `wgpu`: the f32 GEMM's WGSL variants through wgpu (host wall clock:
//!   wgpu has no event timer here);
//! - `launch`: the host cost of a launch, bare cudarc beside the launcher and
//!   the dispatch.
//!
//! `bench report FILE` renders a recorded `report.json` again, and `bench
//! compare FIRST SECOND` compares two runs' ratios (no GPU needed for
//! either). Without a usable GPU, `bench` says so and exits 2.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use warpforge::tune::MissPolicy;
use warpforge::KernelVariant;
use warpforge::{
    bf16, e4m3, f16, DeviceBuffer, DeviceScalar, Error, GemmPrecision, Grid, MatrixLayout, Runtime,
};
use warpforge_codegen::KernelDef;
use warpforge_kernels::gemm_problem::{GemmProblem, GemmVariant};
use warpforge_kernels::gemm_sparse::{gemm_sparse_f16, gemm_sparse_with, SparseGemmVariant};
use warpforge_kernels::sparse::device::{compress, decompress};
use warpforge_kernels::tuned::{GemmElement, GemmKind, GemmOutput, TunedGemm};
use warpforge_kernels::{gemm, gemm_tc, gemm_wgmma, gemm_wmma, stream, tuned};
use warpforge_tests::bench::charts;
use warpforge_tests::bench::cusparselt::SparseGemm;
use warpforge_tests::bench::method::{compare, preload, Contender, Method, Shard, Spacer};
use warpforge_tests::bench::monitor::Monitor;
use warpforge_tests::bench::report::{
    self, Absent, Case, ContenderSamples, NotRun, Report, StepTime, Sweep, WorkUnit,
};
use warpforge_tests::compare::{deviation, device_deviation, DeviationElement};
use warpforge_tests::rates::{
    self, mma_sp_rate, rate_values, rate_words, rate_work, sparse_rate_words, wgmma_rate_values,
    RATE_META, RATE_THREADS, WGMMA_RATE_ITERS_PER_MMA_ITER,
};
use warpforge_tests::tuning::parse_shape;
use warpforge_tests::{run_seed, GemmFloat, Inputs};

/// Exit status when no GPU could be used: distinct from pass (0) and fail (1).
const NOT_RUN: u8 = 2;

/// The default shapes: squares 512 to 16384 and the shapes users have.
const DEFAULT_SHAPES: [(u32, u32, u32); 14] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16384, 16384, 16384),
    (4096, 11008, 4096),
    (11008, 4096, 4096),
    (8192, 8192, 1024),
    (16, 8192, 8192),
    (64, 8192, 8192),
    (128, 8192, 8192),
    (3001, 2999, 1000),
    (2048, 2048, 1020),
];

/// The shape the ladder and the other sections use.
const LADDER_SHAPE: (u32, u32, u32) = (8192, 8192, 8192);

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Benchmark the stock kernels beside cuBLAS on this GPU (module docs: the method and the sections)"
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The sections to run
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Section::all())]
    sections: Vec<Section>,
    /// The GEMM dtypes
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Dtype::all())]
    dtypes: Vec<Dtype>,
    /// The GEMM paths timed beside cuBLAS (each architecture's family, and
    /// the tuned dispatch, which may run any of them)
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = GemmPath::all())]
    paths: Vec<GemmPath>,
    /// The GEMM shapes, as MxNxK,MxNxK,... [default: squares 512 to 16384 and the shapes users have]
    #[arg(long, value_name = "MxNxK", value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<(u32, u32, u32)>,
    /// Only the GEMM variants whose kernel name or `Consts` text holds PATTERN (for profilers)
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// Interleaved rounds every comparison runs
    #[arg(long, default_value_t = Method::default().rounds)]
    rounds: usize,
    /// The most rounds a comparison runs while a ratio's 95% CI is too wide
    #[arg(long, default_value_t = Method::default().max_rounds)]
    max_rounds: usize,
    /// The half-width (percent of the median) every ratio's 95% CI is brought within
    #[arg(long, value_name = "PERCENT", default_value_t = Method::default().ratio_ci * 100.0)]
    ratio_ci: f64,
    /// GPU milliseconds of a comparison's samples after which it takes no rounds past --rounds
    #[arg(long, value_name = "MS", default_value_t = Method::default().extra_rounds_ms)]
    extra_rounds_ms: f64,
    /// Seconds the whole run may take (0: no limit): as they run out, each
    /// comparison gets a smaller share for rounds past --rounds
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BUDGET_S)]
    budget_s: f64,
    /// Where report.json, table.md and the charts go
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// Only load shard I/N of the GEMM variants of --dtypes and exit: what
    /// the run's helper processes do to fill the driver's JIT cache
    #[arg(long, value_name = "I/N", hide = true)]
    jit_shard: Option<Shard>,
}

#[derive(Subcommand)]
enum Command {
    /// Render a recorded report.json again: the table on stdout, table.md and
    /// the charts beside it (or in --out)
    Report {
        file: PathBuf,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare two recorded runs' ratios to the baseline, case by case: the
    /// largest moves first; exits 1 if any moved more than --within
    Compare {
        first: PathBuf,
        second: PathBuf,
        /// The largest move allowed, in percent
        #[arg(long, value_name = "PERCENT", default_value_t = 3.0)]
        within: f64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Section {
    Gemm,
    F32,
    Sparse,
    Stream,
    Mma,
    Wgpu,
    Launch,
}

impl Section {
    fn all() -> Vec<Section> {
        Section::value_variants().to_vec()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Dtype {
    F16,
    Bf16,
    Tf32,
    S8,
    E4m3,
}

impl Dtype {
    fn all() -> Vec<Dtype> {
        Dtype::value_variants().to_vec()
    }

    /// The kernels of its GEMM families, per architecture path ([`PATHS`]).
    fn kernels(self) -> [Option<&'static KernelDef>; 3] {
        match self {
            Dtype::F16 => F16::kernels(),
            Dtype::Bf16 => Bf16::kernels(),
            Dtype::Tf32 => Tf32::kernels(),
            Dtype::S8 => S8::kernels(),
            Dtype::E4m3 => E4m3::kernels(),
        }
    }
}

/// A warpforge GEMM path `bench` can time beside cuBLAS: an architecture's
/// family ([`PATHS`], in order) or the tuned dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum GemmPath {
    Sm70,
    Sm80,
    Sm90a,
    Tuned,
}

impl GemmPath {
    fn all() -> Vec<GemmPath> {
        GemmPath::value_variants().to_vec()
    }

    /// The architecture paths, in [`PATHS`]' order.
    const ARCHITECTURES: [GemmPath; 3] = [GemmPath::Sm70, GemmPath::Sm80, GemmPath::Sm90a];
}

fn main() -> ExitCode {
    // Parsed before the GPU is looked for, so that `--help`, a wrong argument
    // and `report` need none.
    let args = Args::parse();
    warpforge_tests::stderr_log::init();
    if let Some(Command::Report { file, out }) = &args.command {
        let dir = out
            .clone()
            .unwrap_or_else(|| file.parent().unwrap_or(Path::new(".")).to_path_buf());
        return match rerender(file, &dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("bench report failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Compare {
        first,
        second,
        within,
    }) = &args.command
    {
        return match compare_runs(first, second, *within) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                println!("bench compare failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = match Runtime::cuda(0) {
        Ok(rt) => rt,
        Err(e) => {
            println!("BENCH NOT RUN: no usable CUDA GPU: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    if let Some(shard) = args.jit_shard {
        preload(&rt, &gemm_kernels(&args.dtypes, &args.paths), shard);
        return ExitCode::SUCCESS;
    }
    match run(&rt, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn rerender(file: &Path, dir: &Path) -> BenchResult<()> {
    write_outputs(&read_report(file)?, dir)
}

fn read_report(file: &Path) -> BenchResult<Report> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bench report: {e}", file.display()).into())
}

/// Prints every ratio both runs have, the largest move first; whether all
/// moved at most `within` percent.
fn compare_runs(first: &Path, second: &Path, within: f64) -> BenchResult<bool> {
    let changes = report::ratio_changes(&read_report(first)?, &read_report(second)?);
    if changes.is_empty() {
        return Err("the two runs have no ratio in common (no case and contender in both)".into());
    }
    println!("| case | contender | first | second | change | variant | 95% CIs |");
    println!("|---|---|---|---|---|---|---|");
    for c in &changes {
        println!(
            "| {} | {} | {:.3}x | {:.3}x | {:+.2}% | {} | {} |",
            c.case,
            c.contender,
            c.first,
            c.second,
            c.change * 100.0,
            if c.same_detail { "same" } else { "other" },
            match c.intervals_overlap() {
                Some(true) => "overlap",
                Some(false) => "apart",
                None => "-",
            }
        );
    }
    let choices: Vec<String> = changes
        .iter()
        .filter_map(|c| {
            Some(format!(
                "- {} {}: {}",
                c.case,
                c.contender,
                c.choice.as_ref()?
            ))
        })
        .collect();
    if !choices.is_empty() {
        println!("\nwhere the runs chose other variants, from their sweeps:");
        println!("{}", choices.join("\n"));
    }
    let moved = |c: &&report::RatioChange| c.change.abs() * 100.0 > within;
    let over = changes.iter().filter(moved).count();
    let apart = |among_moved: bool| {
        changes
            .iter()
            .filter(|c| moved(c) == among_moved)
            .filter(|c| c.intervals_overlap() == Some(false))
            .count()
    };
    println!(
        "\n{} ratios, the largest move {:+.2}%; {over} moved more than {within}%, {} of them \
         beyond both runs' 95% intervals (the others, within them, more rounds would narrow); \
         {} more have intervals apart",
        changes.len(),
        changes[0].change * 100.0,
        apart(true),
        apart(false)
    );
    Ok(over == 0)
}

/// The table on stdout and in `table.md`, the JSON and the charts in `dir`.
fn write_outputs(report: &Report, dir: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let shape = shape_name(LADDER_SHAPE);
    let mut text = report::table(report);
    if let Some(ladder) = report::ladder(report, &shape) {
        text += &format!(
            "\n### The architecture ladder, GEMM {shape} (multiples of the sm_80 path)\n\n{ladder}"
        );
    }
    println!("\n{text}");
    std::fs::write(dir.join("table.md"), &text)?;
    save_json(report, dir)?;
    let charts = charts::write_all(report, dir, &shape)?;
    println!(
        "wrote {} and {} charts into {}",
        ["table.md", "report.json"].join(", "),
        charts.len(),
        dir.display()
    );
    Ok(())
}

/// `dir/report.json`.
fn save_json(report: &Report, dir: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)? + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()).into())
}

fn shape_name((m, n, k): (u32, u32, u32)) -> String {
    format!("{m}x{n}x{k}")
}

/// Everything one run needs beside the runtime.
struct Bench<'a> {
    rt: &'a Runtime,
    spacer: Spacer,
    monitor: Monitor,
    method: Method,
    only: Option<&'a str>,
    paths: &'a [GemmPath],
    inputs: Inputs,
    /// One step per section or GEMM case; what is printed goes above it.
    bar: ProgressBar,
    /// When the run's time budget ends, if it has one.
    deadline: Option<Instant>,
    /// The sweeps of the case being prepared ([`Bench::finalists`]), which
    /// [`Bench::case`] puts in it.
    sweeps: Vec<Sweep>,
    /// The seconds of the step under way by part, and when it began (the
    /// end of the step before): [`Bench::end_step`].
    step: StepTime,
    step_started: Instant,
}

fn run(rt: &Runtime, args: &Args) -> BenchResult<()> {
    let rounds = args.rounds.max(1);
    let method = Method {
        rounds,
        max_rounds: args.max_rounds.max(rounds),
        ratio_ci: args.ratio_ci / 100.0,
        extra_rounds_ms: args.extra_rounds_ms,
        ..Method::default()
    };
    let device = rt.device();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        device.name, device.compute_capability.0, device.compute_capability.1, device.sm_count
    );
    let monitor = Monitor::start(rt);
    if let Some(why) = &monitor.unavailable {
        println!("NO CLOCK READINGS: {why}");
    }
    let mut report = Report {
        gpu: device.name.clone(),
        compute_capability: device.compute_capability,
        gpu_facts: monitor.facts().clone(),
        monitor_unavailable: monitor.unavailable.clone(),
        commit: option_env!("WARPFORGE_COMMIT").map(str::to_string),
        budget_s: (args.budget_s > 0.0).then_some(args.budget_s),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        method,
        cases: Vec::new(),
        launch_cost: None,
        not_run: Vec::new(),
        steps: Vec::new(),
    };
    let mut bench = Bench {
        rt,
        spacer: Spacer::new(rt, method.spacer_ms)?,
        monitor,
        method,
        only: args.only.as_deref(),
        paths: &args.paths,
        inputs: Inputs::new(run_seed()),
        sweeps: Vec::new(),
        step: StepTime::default(),
        step_started: Instant::now(),
        bar: ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .expect("the template is valid")
                .progress_chars("=> "),
        ),
        deadline: (args.budget_s > 0.0)
            .then(|| Instant::now() + Duration::from_secs_f64(args.budget_s)),
    };
    let shapes = if args.shapes.is_empty() {
        DEFAULT_SHAPES.to_vec()
    } else {
        args.shapes.clone()
    };
    let has = |s: Section| args.sections.contains(&s);
    let f32_shapes: Vec<(u32, u32, u32)> = shapes
        .iter()
        .copied()
        // The SIMT kernel takes 30 ms at 8192^3: larger shapes would hold the run.
        .filter(|s| f64::from(s.0) * f64::from(s.1) * f64::from(s.2) <= 8192f64.powi(3))
        .collect();
    let steps = [
        (Section::Stream, 1),
        (Section::Mma, args.dtypes.len()),
        (Section::Gemm, args.dtypes.len() * shapes.len()),
        (Section::F32, f32_shapes.len()),
        (Section::Sparse, 1),
        (Section::Wgpu, 1),
        (Section::Launch, 1),
    ];
    bench.bar.set_prefix("bench");
    bench.bar.set_length(
        steps
            .iter()
            .filter(|(s, _)| has(*s))
            .map(|(_, n)| *n as u64)
            .sum(),
    );
    let mut failures = Vec::new();
    // Each section's cases go into the report as they come, and report.json
    // is rewritten after each, so that a run cut short keeps what it measured.
    let bar = bench.bar.clone();
    let mut record =
        |report: &mut Report, what: &str, result: BenchResult<Vec<Case>>, time: StepTime| {
            bar.inc(1);
            let samples_s = result
                .as_ref()
                .map_or(0.0, |cases| report::samples_seconds(cases));
            report.steps.push(StepTime { samples_s, ..time });
            match result {
                Ok(cases) => report.cases.extend(cases),
                Err(e) if e.is::<NothingRuns>() => {
                    bar.suspend(|| println!("{what}: NOT RUN: {e}"));
                    report.not_run.push(NotRun {
                        case: what.to_string(),
                        why: e.to_string(),
                    });
                }
                Err(e) => {
                    bar.suspend(|| println!("{what}: FAILED: {e}"));
                    failures.push(format!("{what}: {e}"));
                }
            }
            if let Err(e) = save_json(report, &args.out) {
                bar.suspend(|| println!("{e}"));
            }
        };
    if has(Section::Stream) {
        let result = bench.stream(1 << 28);
        record(&mut report, "stream", result, bench.end_step("stream"));
    }
    if has(Section::Mma) {
        for &dtype in &args.dtypes {
            let what = format!("mma {dtype:?}");
            bench.bar.set_message(what.clone());
            let result = bench.mma_rates(dtype).map(|c| vec![c]);
            record(&mut report, &what, result, bench.end_step(&what));
        }
    }
    if has(Section::F32) {
        for &shape in &f32_shapes {
            let what = format!("f32 {}", shape_name(shape));
            bench.bar.set_message(what.clone());
            let result = bench.gemm_f32(shape).map(|c| vec![c]);
            record(&mut report, &what, result, bench.end_step(&what));
        }
    }
    if has(Section::Sparse) {
        let result = bench.sparse(8192);
        record(&mut report, "sparse", result, bench.end_step("sparse"));
    }
    if has(Section::Wgpu) {
        let case = bench_wgpu(4096);
        if let Ok(case) = &case {
            bench.bar.suspend(|| print_case(case, 0.0));
        }
        record(
            &mut report,
            "wgpu",
            case.map(|c| vec![c]),
            bench.end_step("wgpu"),
        );
    }
    if has(Section::Launch) {
        let dir = std::env::temp_dir().join("warpforge-bench-empty-tune-db");
        let result = warpforge_tests::tuning::dispatch_overhead(rt, &dir).map(|o| {
            report.launch_cost = Some(o);
            Vec::new()
        });
        record(
            &mut report,
            "launch",
            result.map_err(Into::into),
            bench.end_step("launch"),
        );
    }
    // The GEMMs last: each step's rounds get an even share of the budget
    // left, and the few cheap steps of the other sections, when they came
    // after, left it unspent (67 s of 480 in session 29's second run).
    if has(Section::Gemm) {
        let kernels = gemm_kernels(&args.dtypes, &args.paths);
        let filled = fill_jit_cache(&args.dtypes, &args.paths);
        let (loaded, variants, seconds, threads) = preload(rt, &kernels, Shard::ALL);
        let loading = bench.end_step("gemm: the JIT cache and the variants' modules");
        report.steps.push(loading);
        bench.bar.suspend(|| {
            println!("{filled}");
            println!(
                "loaded {loaded} of the GEMM paths' {variants} variants in {seconds:.1} s on {threads} threads"
            )
        });
        for &dtype in &args.dtypes {
            for &shape in &shapes {
                let what = format!("gemm {dtype:?} {}", shape_name(shape));
                bench.bar.set_message(what.clone());
                let result = bench.gemm(dtype, shape).map(|c| vec![c]);
                record(&mut report, &what, result, bench.end_step(&what));
            }
        }
    }
    bench.bar.finish_and_clear();
    write_outputs(&report, &args.out)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} section(s) failed: {}",
            failures.len(),
            failures.join("; ")
        )
        .into())
    }
}

/// The kernels of `paths` of `dtypes`' GEMMs (all of them for the tuned
/// dispatch, which may run any).
fn gemm_kernels(dtypes: &[Dtype], paths: &[GemmPath]) -> Vec<&'static KernelDef> {
    let wanted = |path: &GemmPath| paths.contains(path) || paths.contains(&GemmPath::Tuned);
    dtypes
        .iter()
        .flat_map(|&dtype| dtype.kernels().into_iter().zip(&GemmPath::ARCHITECTURES))
        .filter_map(|(kernel, path)| kernel.filter(|_| wanted(path)))
        .collect()
}

/// `values`' command-line names, comma-separated.
fn arg_list<T: ValueEnum>(values: &[T]) -> String {
    values
        .iter()
        .filter_map(|v| v.to_possible_value().map(|v| v.get_name().to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Fills the driver's JIT cache with the GEMM variants of `dtypes`' `paths` from one
/// process per core (this one's `--jit-shard I/N`), since the JIT compiles
/// one module at a time in a process; what happened, for the log. Nothing
/// to do when the cache is off (`CUDA_CACHE_DISABLE=1`): this process then
/// compiles every module itself, as it would anyway.
fn fill_jit_cache(dtypes: &[Dtype], paths: &[GemmPath]) -> String {
    if std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|v| v == "1") {
        return "the JIT cache is off (CUDA_CACHE_DISABLE=1): no helper processes".into();
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return format!("no helper processes (the bench's own path: {e})"),
    };
    let count = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
    let (dtypes, paths) = (arg_list(dtypes), arg_list(paths));
    let started = Instant::now();
    let children: Vec<_> = (0..count)
        .filter_map(|index| {
            std::process::Command::new(&exe)
                .arg("--dtypes")
                .arg(&dtypes)
                .arg("--paths")
                .arg(&paths)
                .arg("--jit-shard")
                .arg(format!("{index}/{count}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    let finished = children
        .into_iter()
        .filter_map(|mut child| child.wait().ok())
        .filter(|status| status.success())
        .count();
    format!(
        "filled the JIT cache from {finished} of {count} helper processes in {:.1} s",
        started.elapsed().as_secs_f64()
    )
}

/// A contender of a case before it runs: named, with its launch.
fn contender<'a>(
    name: &str,
    detail: String,
    launch: impl FnMut(&Runtime) -> Result<(), Error> + 'a,
) -> Contender<'a> {
    Contender {
        name: name.to_string(),
        detail,
        launch: Box::new(launch),
    }
}

impl Bench<'_> {
    /// Times `contenders` (the baseline at `baseline`) and makes the case.
    #[allow(clippy::too_many_arguments)]
    fn case(
        &mut self,
        section: &str,
        dtype: &str,
        shape: String,
        dims: Option<(u32, u32, u32)>,
        (work, work_unit): (f64, WorkUnit),
        baseline: usize,
        mut contenders: Vec<Contender<'_>>,
        absent: Vec<Absent>,
    ) -> Result<Case, Error> {
        let method = self.within_budget();
        let started = Instant::now();
        let samples = compare(
            self.rt,
            &mut self.spacer,
            &self.monitor,
            &method,
            Some(baseline),
            &mut contenders,
        )?;
        self.step.rounds_s += started.elapsed().as_secs_f64();
        let contenders: Vec<ContenderSamples> = contenders
            .into_iter()
            .zip(samples)
            .map(|(c, samples)| ContenderSamples {
                name: c.name,
                detail: c.detail,
                samples,
            })
            .collect();
        let sweeps = std::mem::take(&mut self.sweeps)
            .into_iter()
            .map(|sweep| sweep.timed_in(&contenders))
            .collect();
        let case = Case {
            section: section.to_string(),
            dtype: dtype.to_string(),
            shape,
            dims,
            work,
            work_unit,
            baseline,
            contenders,
            absent,
            sweeps,
        };
        self.bar
            .suspend(|| print_case(&case, self.method.spacer_ms));
        Ok(case)
    }

    /// Ends the step under way, named `step` (its section the first word):
    /// its seconds by part, from the end of the one before; the next begins.
    fn end_step(&mut self, step: &str) -> StepTime {
        let section = step.split([' ', ':']).next().unwrap_or(step);
        let time = StepTime {
            section: section.to_string(),
            step: step.to_string(),
            total_s: self.step_started.elapsed().as_secs_f64(),
            ..std::mem::take(&mut self.step)
        };
        self.step_started = Instant::now();
        time
    }

    /// The method for the next comparison: the run's, with the samples past
    /// the minimum rounds cut to half of an even share of the time left
    /// among the steps left (the other half for the step's sweep, checks and
    /// uploads), so that a slow GPU, or a cold JIT cache, shortens the
    /// rounds instead of overrunning the budget.
    fn within_budget(&self) -> Method {
        let Some(deadline) = self.deadline else {
            return self.method;
        };
        let left_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            * 1e3;
        let steps_left = self
            .bar
            .length()
            .unwrap_or(0)
            .saturating_sub(self.bar.position());
        Method {
            extra_rounds_ms: self
                .method
                .extra_rounds_ms
                .min(left_ms / steps_left.max(1) as f64 / 2.0),
            ..self.method
        }
    }

    /// The finalists of `candidates`: one short sample each (behind the
    /// spacer, like the comparison's samples), then the few within
    /// [`FINALIST_MARGIN`] of the fastest sample, fastest first, to be timed
    /// in the case's own rounds where the lowest median stands for the
    /// family. One sample picks among variants a few percent apart by its
    /// luck as much as by their speed (the power cap moves samples 5-10% at
    /// large shapes); so did five rounds of the finalists alone, which
    /// chose another variant in each of two runs for 10 of the 14 ratios
    /// that moved more than 3% in session 26's (perf/LOG.md). Timed in the
    /// case's rounds, both runs time the same finalists as long as both
    /// sweeps keep them. A candidate whose launch is refused (a tensor
    /// map's stride, say) is left out; with none left, the `Err` is the
    /// first refusal, or says there were no candidates.
    fn finalists<'a>(
        &mut self,
        name: &str,
        candidates: Vec<Contender<'a>>,
    ) -> Result<Vec<Contender<'a>>, String> {
        let started = Instant::now();
        let finalists = self.sweep(name, candidates);
        self.step.sweeps_s += started.elapsed().as_secs_f64();
        finalists
    }

    /// [`Bench::finalists`], untimed.
    fn sweep<'a>(
        &mut self,
        name: &str,
        candidates: Vec<Contender<'a>>,
    ) -> Result<Vec<Contender<'a>>, String> {
        let sweep = self.method.brief(1, self.method.sample_ms / 4.0);
        let mut timed = Vec::new();
        let mut refused = None;
        let mut candidates: Vec<Option<Contender<'a>>> = candidates.into_iter().map(Some).collect();
        for (index, slot) in candidates.iter_mut().enumerate() {
            let Some(candidate) = slot else { continue };
            let ms = match compare(
                self.rt,
                &mut self.spacer,
                &self.monitor,
                &sweep,
                None,
                std::slice::from_mut(candidate),
            ) {
                Ok(samples) => samples[0][0].ms,
                Err(e) => {
                    refused.get_or_insert_with(|| format!("{}: {e}", candidate.detail));
                    continue;
                }
            };
            if self.only.is_some() {
                self.bar
                    .suspend(|| println!("  {:<72} {ms:>9.4} ms", candidate.detail));
            }
            timed.push((ms, index));
        }
        timed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(best_ms, _)) = timed.first() else {
            return Err(match (candidates.is_empty(), self.only) {
                (true, Some(_)) => "no variant takes the shape and matches --only".into(),
                (true, None) => "no variant takes the shape".into(),
                (false, _) => format!(
                    "every variant was refused, the first: {}",
                    refused.unwrap_or_default()
                ),
            });
        };
        let sampled: Vec<(String, f64)> = timed
            .iter()
            .filter_map(|&(ms, index)| Some((candidates[index].as_ref()?.detail.clone(), ms)))
            .collect();
        let finalists: Vec<Contender<'a>> = timed
            .iter()
            .take_while(|(ms, _)| *ms <= best_ms * (1.0 + FINALIST_MARGIN))
            .take(FINALISTS)
            .filter_map(|&(_, index)| candidates[index].take())
            .map(|finalist| Contender {
                name: name.to_string(),
                ..finalist
            })
            .collect();
        // `Bench::case` names the chosen one and the medians once timed.
        self.sweeps.push(Sweep {
            chosen: String::new(),
            sampled,
            finalists: finalists.iter().map(|f| (f.detail.clone(), 0.0)).collect(),
        });
        Ok(finalists)
    }
}

/// The default run's budget: 8 minutes, under the 10 it must take on one GPU
/// with room for what the budget cannot shorten (a step's sweep and checks).
const DEFAULT_BUDGET_S: f64 = 480.0;

/// How much slower than the sweep's fastest sample a variant may be and
/// still be a finalist, and how many may be: in session 26's two runs the
/// variant one run chose was among the other's four fastest samples for
/// 294 of 298 families, at most 8.7% behind the fastest. At the default
/// shapes the finalists double the samples of the minimum rounds (46 s to
/// 105 s, counted on that run's report).
const FINALIST_MARGIN: f64 = 0.10;
const FINALISTS: usize = 4;

/// A case no contender can run: listed in the report's `not_run`, not a failure.
#[derive(Debug)]
struct NothingRuns(String);

impl std::fmt::Display for NothingRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nothing runs it: {}", self.0)
    }
}

impl std::error::Error for NothingRuns {}

impl NothingRuns {
    /// The case's contenders were all `absent`: each one's reason.
    fn all_absent(absent: &[Absent]) -> NothingRuns {
        let reasons: Vec<String> = absent
            .iter()
            .map(|a| format!("{}: {}", a.name, a.why))
            .collect();
        NothingRuns(reasons.join("; "))
    }
}

/// Prints one case's rows as it finishes (the whole table comes at the end).
/// Samples whose enqueueing outlasted the spacer and the sample (the GPU
/// waited for the host) are counted under the rows, per contender.
fn print_case(case: &Case, spacer_ms: f64) {
    println!(
        "\n{} {} {} ({}):\n{}",
        case.section,
        case.dtype,
        case.shape,
        case.work_unit.rate_unit(),
        report::case_rows(case)
    );
    for contender in &case.contenders {
        let bound = contender
            .samples
            .iter()
            .filter(|s| report::host_bound(s, spacer_ms))
            .count();
        if bound > 0 {
            println!(
                "  {}: the GPU waited for the host in {bound} of {} samples (launch-bound)",
                contender.name,
                contender.samples.len()
            );
        }
    }
}

/// One GEMM dtype: its element types, its cuBLAS precision, its families per
/// path, its tuned kind and how results are compared.
trait GemmDtype {
    type In: GemmElement;
    type Out: GemmOutput + DeviationElement;
    const NAME: &'static str;
    const PRECISION: GemmPrecision;
    fn kind() -> &'static GemmKind<Self::In, Self::Out>;
    /// The kernels of its families per architecture path ([`PATHS`]), None
    /// where it has none.
    fn kernels() -> [Option<&'static KernelDef>; 3];
    fn values(inputs: &mut Inputs, n: usize) -> Vec<Self::In>;
    /// How far our C may be from cuBLAS's (relative L2, [`Deviation::passes`]);
    /// None: it must be equal, element by element.
    const TOLERANCE: Option<f64>;
    /// Per path (sm_70, sm_80, sm_90a), its variants for `problem`; None
    /// where the dtype has no family on that path (sm_70 has only f16).
    fn paths<'a>(
        bench: &GemmInputs<'a, Self>,
        problem: &GemmProblem<<Self::Out as GemmOutput>::Scale>,
    ) -> [Option<Vec<Contender<'a>>>; 3]
    where
        Self: Sized;
    /// Its Tensor Core instructions' rate kernels ([`rates`]), each owning
    /// its buffers: `mma.sync` (where its sm_80 path has one) with `iters`
    /// trips on `blocks` blocks, and `wgmma` doing the same work.
    fn rates(
        rt: &Runtime,
        inputs: &mut Inputs,
        blocks: u32,
        iters: u32,
    ) -> Result<Vec<Contender<'static>>, Error>;
}

/// A GEMM case's buffers: what every contender's launch borrows.
struct GemmInputs<'a, D: GemmDtype + ?Sized> {
    a: &'a DeviceBuffer<D::In>,
    b: &'a DeviceBuffer<D::In>,
    c: &'a RefCell<DeviceBuffer<D::Out>>,
    dims: (u32, u32, u32),
    only: Option<&'a str>,
}

impl<'a, D: GemmDtype> GemmInputs<'a, D> {
    /// The variants of family `V` that take `problem` (the 16-byte-copy ones
    /// when any does: element copies are the fallback) and match `--only`.
    fn family<V>(&self, problem: &GemmProblem<V::Scale>) -> Vec<Contender<'a>>
    where
        V: GemmVariant<Elem = D::In, Out = D::Out, Scale = <D::Out as GemmOutput>::Scale> + 'a,
    {
        let variants = V::variants_for(problem);
        let chunked = variants.iter().any(|v| v.takes().chunks.is_some());
        let (a, b, c, dims) = (self.a, self.b, self.c, self.dims);
        let (alpha, beta) = D::Out::PLAIN;
        variants
            .into_iter()
            .filter(|v| !chunked || v.takes().chunks.is_some())
            .filter(|v| {
                self.only
                    .is_none_or(|p| V::def().ir.name.contains(p) || format!("{v:?}").contains(p))
            })
            .map(|v| {
                let detail = format!("{} {v:?}", V::def().ir.name);
                contender("", detail, move |rt| {
                    let problem = GemmProblem::new(dims, alpha, beta);
                    v.run(rt, &problem, a, b, &mut *c.borrow_mut(), None)
                })
            })
            .collect()
    }
}

/// The paths' names, oldest first (as `report::LADDER` has them).
const PATHS: [&str; 3] = ["warpforge sm_70", "warpforge sm_80", "warpforge sm_90a"];

macro_rules! gemm_dtype {
    ($dtype:ident: $in:ty => $out:ty, $name:literal, $precision:ident, $kind:ident,
     values: $values:expr, tolerance: $tolerance:expr,
     paths: [$($sm70:ty)?; $($sm80:ty)?; $sm90:ty],
     rates: [$($mma:ident)?; $wgmma:ident => $acc:ty]) => {
        struct $dtype;
        impl GemmDtype for $dtype {
            type In = $in;
            type Out = $out;
            const NAME: &'static str = $name;
            const PRECISION: GemmPrecision = GemmPrecision::$precision;
            const TOLERANCE: Option<f64> = $tolerance;
            fn kind() -> &'static GemmKind<$in, $out> {
                &tuned::$kind
            }
            fn kernels() -> [Option<&'static KernelDef>; 3] {
                [
                    None $(.or(Some(<$sm70>::def())))?,
                    None $(.or(Some(<$sm80>::def())))?,
                    Some(<$sm90>::def()),
                ]
            }
            fn values(inputs: &mut Inputs, n: usize) -> Vec<$in> {
                ($values)(inputs, n)
            }
            fn paths<'a>(
                inputs: &GemmInputs<'a, Self>,
                problem: &GemmProblem<<$out as GemmOutput>::Scale>,
            ) -> [Option<Vec<Contender<'a>>>; 3] {
                let sm70 = None $(.or(Some(inputs.family::<$sm70>(problem))))?;
                let sm80 = None $(.or(Some(inputs.family::<$sm80>(problem))))?;
                [sm70, sm80, Some(inputs.family::<$sm90>(problem))]
            }
            fn rates(
                rt: &Runtime,
                inputs: &mut Inputs,
                blocks: u32,
                iters: u32,
            ) -> Result<Vec<Contender<'static>>, Error> {
                let bytes = <$in>::SCALAR.size_bytes();
                let k = 32 / bytes;
                let mut contenders = Vec::new();
                $(
                    let words = rt.upload(&rate_words(&Self::values(inputs, rate_values(bytes))))?;
                    let mut out = rt.alloc_zeroed::<$acc>((blocks * RATE_THREADS) as usize)?;
                    let grid = Grid::blocks([blocks, 1, 1]);
                    contenders.push(contender(
                        "mma.sync",
                        format!("m16n8k{k}, {blocks} blocks x {RATE_THREADS} threads"),
                        move |rt| rates::$mma::launch(rt, grid, &words, iters, &mut out),
                    ));
                )?
                let tiles = rt.upload(&Self::values(inputs, wgmma_rate_values(bytes)))?;
                let wg_blocks = blocks / WGMMA_RATE_ITERS_PER_MMA_ITER;
                let mut out = rt.alloc_zeroed::<$acc>((wg_blocks * RATE_THREADS) as usize)?;
                let grid = Grid::blocks([wg_blocks, 1, 1]);
                let trips = iters / WGMMA_RATE_ITERS_PER_MMA_ITER;
                contenders.push(contender(
                    "wgmma",
                    format!(
                        "m64n256k{k}, {wg_blocks} blocks x {RATE_THREADS} threads, A and B from shared memory"
                    ),
                    move |rt| rates::$wgmma::launch(rt, grid, &tiles, trips, &mut out),
                ));
                Ok(contenders)
            }
        }
    };
}

gemm_dtype!(F16: f16 => f16, "f16", F16, GEMM_F16,
    values: float_values::<f16>, tolerance: Some(1e-3),
    paths: [gemm_wmma::gemm_f16_wmma::Consts; gemm_tc::gemm_f16::Consts; gemm_wgmma::gemm_wgmma_f16::Consts],
    rates: [mma_rate_f16; wgmma_rate_f16 => f32]);
gemm_dtype!(Bf16: bf16 => bf16, "bf16", Bf16, GEMM_BF16,
    values: float_values::<bf16>, tolerance: Some(8e-3),
    paths: [; gemm_tc::gemm_bf16::Consts; gemm_wgmma::gemm_wgmma_bf16::Consts],
    rates: [mma_rate_bf16; wgmma_rate_bf16 => f32]);
// tf32: wgmma truncates the inputs to tf32 where cuBLAS rounds them.
gemm_dtype!(Tf32: f32 => f32, "tf32", Tf32, GEMM_TF32,
    values: float_values::<f32>, tolerance: Some(5e-3),
    paths: [; gemm_tc::gemm_tf32::Consts; gemm_wgmma::gemm_wgmma_tf32::Consts],
    rates: [mma_rate_tf32; wgmma_rate_tf32 => f32]);
// s8: integer sums, exact in both.
gemm_dtype!(S8: i8 => i32, "s8", I8, GEMM_S8,
    values: |inputs: &mut Inputs, n| inputs.i8s(n), tolerance: None,
    paths: [; gemm_tc::gemm_s8::Consts; gemm_wgmma::gemm_wgmma_s8::Consts],
    rates: [mma_rate_s8; wgmma_rate_s8 => i32]);
// e4m3: Hopper only; bf16 outputs of sums that both sides keep in fewer
// bits than f32 on the fp8 Tensor Cores.
gemm_dtype!(E4m3: e4m3 => bf16, "e4m3", E4m3, GEMM_E4M3,
    values: float_values::<e4m3>, tolerance: Some(2e-2),
    paths: [; ; gemm_wgmma::gemm_wgmma_e4m3::Consts],
    rates: [; wgmma_rate_e4m3 => f32]);

impl Bench<'_> {
    fn gemm(&mut self, dtype: Dtype, dims: (u32, u32, u32)) -> BenchResult<Case> {
        match dtype {
            Dtype::F16 => self.gemm_of::<F16>(dims),
            Dtype::Bf16 => self.gemm_of::<Bf16>(dims),
            Dtype::Tf32 => self.gemm_of::<Tf32>(dims),
            Dtype::S8 => self.gemm_of::<S8>(dims),
            Dtype::E4m3 => self.gemm_of::<E4m3>(dims),
        }
    }

    /// One GEMM case: every path's fastest variant, the tuned dispatch and
    /// cuBLAS (A row-major, B column-major, C row-major).
    fn gemm_of<D: GemmDtype>(&mut self, dims: (u32, u32, u32)) -> BenchResult<Case> {
        // A sweep of a step that failed is not this one's.
        self.sweeps.clear();
        let rt = self.rt;
        let (m, n, k) = (dims.0 as usize, dims.1 as usize, dims.2 as usize);
        let a = rt.upload(&D::values(&mut self.inputs, m * k))?;
        let b = rt.upload(&D::values(&mut self.inputs, n * k))?;
        let c = RefCell::new(rt.alloc_zeroed::<D::Out>(m * n)?);
        let reference = RefCell::new(rt.alloc_zeroed::<D::Out>(m * n)?);
        let inputs = GemmInputs::<D> {
            a: &a,
            b: &b,
            c: &c,
            dims,
            only: self.only,
        };
        let (alpha, beta) = D::Out::PLAIN;
        let problem = GemmProblem::new(dims, alpha, beta);
        let fp8 = matches!(D::PRECISION, GemmPrecision::E4m3 | GemmPrecision::E5m2);
        // For fp8, cublas_gemm is cuBLASLt with fast accumulation (the Tensor
        // Cores keep the whole sum, as in the wgmma kernels): like for like.
        let cublas_detail = if fp8 {
            format!("cuBLASLt {} (fast accumulation)", D::PRECISION.name())
        } else {
            format!("GemmEx {}", D::PRECISION.name())
        };
        let mut cublas = contender("cuBLAS", cublas_detail, |rt| {
            rt.cublas_gemm(
                D::PRECISION,
                (m, n, k),
                (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
                &a,
                &b,
                &mut reference.borrow_mut(),
            )
        });
        // cuBLAS refuses some shapes (i8 wants n and k multiples of 4): then
        // the sm_80 path is the baseline and nothing is compared with cuBLAS.
        let mut absent = Vec::new();
        let mut contenders = Vec::new();
        let baseline_ran = match (cublas.launch)(rt) {
            Ok(()) => {
                contenders.push(cublas);
                true
            }
            Err(e) => {
                absent.push(Absent {
                    name: "cuBLAS".into(),
                    why: format!("{e}; the results were not compared with cuBLAS"),
                });
                false
            }
        };
        // fp8 also beside cuBLASLt's default (torch._scaled_mm's too): partial
        // sums promoted to f32, more accurate, maybe slower. After the baseline,
        // which the ratios divide by, so only where the baseline runs.
        if fp8 && baseline_ran {
            let name = "cuBLASLt (f32 promotion)";
            let detail = format!("cuBLASLt {} (no fast accumulation)", D::PRECISION.name());
            let (a, b, c) = (&a, &b, &c);
            let mut promoted = contender(name, detail, move |rt| {
                rt.cublaslt_fp8_gemm(D::PRECISION, (m, n, k), a, b, &mut c.borrow_mut(), false)
            });
            match (promoted.launch)(rt) {
                Ok(()) => contenders.push(promoted),
                Err(e) => absent.push(Absent {
                    name: name.into(),
                    why: e.to_string(),
                }),
            }
        }
        let mut checked = Vec::new();
        let paths = PATHS.iter().zip(D::paths(&inputs, &problem));
        for ((name, candidates), path) in paths.zip(GemmPath::ARCHITECTURES) {
            let Some(candidates) = candidates.filter(|_| self.paths.contains(&path)) else {
                continue;
            };
            match self.finalists(name, candidates) {
                Ok(finalists) => {
                    checked.extend(contenders.len()..contenders.len() + finalists.len());
                    contenders.extend(finalists);
                }
                Err(why) => absent.push(Absent {
                    name: name.to_string(),
                    why,
                }),
            }
        }
        if self.only.is_none() && self.paths.contains(&GemmPath::Tuned) {
            let tuned = TunedGemm::with_policy(rt, D::kind(), MissPolicy::Heuristic, None)
                .and_then(|tuned| {
                    let problem = D::kind().problem(dims, alpha, beta);
                    Ok((tuned.select(rt, &problem, false)?, tuned))
                });
            match tuned {
                Ok((selection, tuned)) => {
                    let detail = format!(
                        "{} ({:?})",
                        tuned.dispatcher().candidate(selection).name(),
                        selection.source
                    );
                    let (a, b, c) = (&a, &b, &c);
                    checked.push(contenders.len());
                    contenders.push(contender("warpforge tuned", detail, move |rt| {
                        tuned.run(rt, a, b, &mut *c.borrow_mut(), dims, alpha, beta)
                    }));
                }
                Err(e) => absent.push(Absent {
                    name: "warpforge tuned".into(),
                    why: e.to_string(),
                }),
            }
        }
        if contenders.is_empty() {
            return Err(NothingRuns::all_absent(&absent).into());
        }
        // Each warpforge contender's C against cuBLAS's, before timing,
        // compared on the GPU (a 16384^3 C is 512 MiB to download in f16).
        let started = Instant::now();
        for &index in checked.iter().filter(|_| baseline_ran) {
            (contenders[index].launch)(rt)?;
            let (deviation, differ) = device_deviation(rt, &c.borrow(), &reference.borrow())?;
            let (agrees, how) = match D::TOLERANCE {
                Some(tolerance) => (deviation.passes(tolerance), deviation.to_string()),
                None => (
                    differ == 0,
                    format!("{differ} of {} elements differ", m * n),
                ),
            };
            if !agrees {
                return Err(format!(
                    "{} ({}) disagrees with cuBLAS at {}: {how}",
                    contenders[index].name,
                    contenders[index].detail,
                    shape_name(dims)
                )
                .into());
            }
        }
        self.step.checks_s += started.elapsed().as_secs_f64();
        let work = 2.0 * m as f64 * n as f64 * k as f64;
        Ok(self.case(
            "gemm",
            D::NAME,
            shape_name(dims),
            Some(dims),
            (work, WorkUnit::Operations),
            0,
            contenders,
            absent,
        )?)
    }

    /// The SIMT f32 GEMM (its finalists) beside cuBLAS sgemm, no TF32.
    fn gemm_f32(&mut self, dims: (u32, u32, u32)) -> BenchResult<Case> {
        self.sweeps.clear();
        let rt = self.rt;
        let (m, n, k) = (dims.0 as usize, dims.1 as usize, dims.2 as usize);
        let a = rt.upload(&self.inputs.f32s(m * k))?;
        let b = rt.upload(&self.inputs.f32s(k * n))?;
        let c = RefCell::new(rt.alloc_zeroed::<f32>(m * n)?);
        let reference = RefCell::new(rt.alloc_zeroed::<f32>(m * n)?);
        let problem = GemmProblem::new(dims, 1.0, 0.0);
        let candidates: Vec<_> = gemm::gemm_f32::Consts::variants_for(&problem)
            .into_iter()
            .map(|v| {
                let (a, b, c) = (&a, &b, &c);
                contender("", format!("gemm_f32 {v:?}"), move |rt| {
                    gemm::gemm_f32_with(rt, v, a, b, &mut *c.borrow_mut(), dims, 1.0, 0.0)
                })
            })
            .collect();
        let finalists = self.finalists("warpforge sm_70", candidates)?;
        let mut contenders = vec![contender("cuBLAS", "sgemm (fp32, no TF32)".into(), |rt| {
            rt.cublas_sgemm(m, n, k, &a, &b, &mut reference.borrow_mut())
        })];
        let started = Instant::now();
        (contenders[0].launch)(rt)?;
        for mut finalist in finalists {
            (finalist.launch)(rt)?;
            let (d, _) = device_deviation(rt, &c.borrow(), &reference.borrow())?;
            if !d.passes(1e-5) {
                return Err(format!("{} disagrees with cuBLAS sgemm: {d}", finalist.detail).into());
            }
            contenders.push(finalist);
        }
        self.step.checks_s += started.elapsed().as_secs_f64();
        let work = 2.0 * m as f64 * n as f64 * k as f64;
        Ok(self.case(
            "gemm-simt",
            "f32",
            shape_name(dims),
            Some(dims),
            (work, WorkUnit::Operations),
            0,
            contenders,
            Vec::new(),
        )?)
    }

    /// The `cp.async` stream (its finalists) beside a device-to-device
    /// copy of the same buffers; bandwidth counts bytes read plus written.
    fn stream(&mut self, n: usize) -> BenchResult<Vec<Case>> {
        self.sweeps.clear();
        let rt = self.rt;
        let x = rt.upload(&self.inputs.f32s(n))?;
        let y = RefCell::new(rt.alloc_zeroed::<f32>(n)?);
        let candidates: Vec<_> = stream::stream_scale::variants()
            .into_iter()
            .map(|v| {
                let (x, y) = (&x, &y);
                contender("", format!("{v:?}"), move |rt| {
                    stream::stream_scale_with(rt, v, x, &mut y.borrow_mut(), 1.5)
                })
            })
            .collect();
        let finalists = self.finalists("warpforge stream_scale", candidates)?;
        let mut contenders = vec![contender(
            "cuMemcpyDtoD",
            "device-to-device copy".into(),
            |rt| rt.copy(&x, &mut y.borrow_mut()),
        )];
        contenders.extend(finalists);
        let bytes = 2.0 * 4.0 * n as f64;
        Ok(vec![self.case(
            "stream",
            "f32",
            format!("{n} elements"),
            None,
            (bytes, WorkUnit::Bytes),
            0,
            contenders,
            Vec::new(),
        )?])
    }

    /// The Tensor Core instruction rates of `dtype` ([`rates`]): the
    /// ceilings its GEMM paths are read against (the roofline draws them).
    /// `mma.sync` (the sm_80 path's instruction) is the baseline and
    /// `wgmma` (the sm_90a path's) beside it doing the same work, where the
    /// GPU runs them; for f16 also the 2:4 sparse `mma.sp` m16n8k32 in both
    /// PTX forms, whose work counts the dense-equivalent k = 32, so that its
    /// ratio is the most a 2:4 GEMM can gain. Independent MMAs back to back
    /// on every SM.
    fn mma_rates(&mut self, dtype: Dtype) -> BenchResult<Case> {
        match dtype {
            Dtype::F16 => self.mma_rates_of::<F16>(),
            Dtype::Bf16 => self.mma_rates_of::<Bf16>(),
            Dtype::Tf32 => self.mma_rates_of::<Tf32>(),
            Dtype::S8 => self.mma_rates_of::<S8>(),
            Dtype::E4m3 => self.mma_rates_of::<E4m3>(),
        }
    }

    fn mma_rates_of<D: GemmDtype>(&mut self) -> BenchResult<Case> {
        let rt = self.rt;
        let blocks = rt.device().sm_count * 4;
        let iters = 4096u32;
        let bytes = D::In::SCALAR.size_bytes();
        let mut candidates = D::rates(rt, &mut self.inputs, blocks, iters)?;
        if D::PRECISION == GemmPrecision::F16 {
            let words = Rc::new(rt.upload(&sparse_rate_words(&mut self.inputs))?);
            let grid = Grid::blocks([blocks, 1, 1]);
            for ordered in [false, true] {
                let form = if ordered {
                    "mma.sp::ordered_metadata"
                } else {
                    "mma.sp"
                };
                let words = Rc::clone(&words);
                let mut out = rt.alloc_zeroed::<f32>((blocks * RATE_THREADS) as usize)?;
                // Twice the dense work per instruction (k = 32): half the
                // trips, so that the case's one work figure holds.
                candidates.push(contender(
                    form,
                    format!("m16n8k32, dense-equivalent, {blocks} blocks x {RATE_THREADS} threads"),
                    move |rt| {
                        let consts = mma_sp_rate::Consts { ORDERED: ordered };
                        mma_sp_rate::launch(
                            rt,
                            consts,
                            grid,
                            &*words,
                            RATE_META,
                            iters / 2,
                            &mut out,
                        )
                    },
                ));
            }
        }
        // What this GPU cannot run (wgmma before Hopper) is listed, not failed.
        let mut contenders = Vec::new();
        let mut absent = Vec::new();
        for mut candidate in candidates {
            match (candidate.launch)(rt) {
                Ok(()) => contenders.push(candidate),
                Err(e) => absent.push(Absent {
                    name: candidate.name,
                    why: e.to_string(),
                }),
            }
        }
        if contenders.is_empty() {
            return Err(NothingRuns::all_absent(&absent).into());
        }
        Ok(self.case(
            "mma",
            D::NAME,
            "register-bound loops".to_string(),
            None,
            (rate_work(blocks, iters, bytes), WorkUnit::Operations),
            0,
            contenders,
            absent,
        )?)
    }

    /// The 2:4 sparse f16 GEMM at `size`^3 (A pruned and compressed on the
    /// GPU; its finalists) beside the dense sm_80 family's finalists on the
    /// decompressed A and, where it loads, cuSPARSELt on the same A; each C
    /// checked against the dense one first.
    /// Rates count the dense-equivalent work 2 m n k.
    fn sparse(&mut self, size: usize) -> BenchResult<Vec<Case>> {
        self.sweeps.clear();
        let rt = self.rt;
        let dense_a = rt.upload(&float_values::<f16>(&mut self.inputs, size * size))?;
        let a = compress(rt, &dense_a, size, size)?;
        let a_decompressed = decompress(rt, &a)?;
        drop(dense_a);
        let b = rt.upload(&float_values::<f16>(&mut self.inputs, size * size))?;
        let c_sparse = RefCell::new(rt.alloc_zeroed::<f16>(size * size)?);
        let c_dense = RefCell::new(rt.alloc_zeroed::<f16>(size * size)?);
        let c_library = RefCell::new(rt.alloc_zeroed::<f16>(size * size)?);
        let s = size as u32;
        let problem = GemmProblem::new((s, s, s), 1.0, 0.0);
        let sparse_candidates: Vec<_> = gemm_sparse_f16::Consts::variants_for(&problem)
            .into_iter()
            .filter(|v| v.ALIGNED)
            .map(|v| {
                let (a, b, c) = (&a, &b, &c_sparse);
                contender("", format!("gemm_sparse_f16 {v:?}"), move |rt| {
                    gemm_sparse_with(rt, v, a, b, &mut *c.borrow_mut(), (s, s, s), 1.0, 0.0)
                })
            })
            .collect();
        let dense_candidates: Vec<_> = gemm_tc::gemm_f16::Consts::variants_for(&problem)
            .into_iter()
            .filter(|v| v.ALIGNED)
            .map(|v| {
                let (a, b, c) = (&a_decompressed, &b, &c_dense);
                contender("", format!("gemm_f16 {v:?}"), move |rt| {
                    let problem = GemmProblem::new((s, s, s), 1.0, 0.0);
                    v.run(rt, &problem, a, b, &mut *c.borrow_mut(), None)
                })
            })
            .collect();
        let sparse = self.finalists("warpforge 2:4 sparse", sparse_candidates)?;
        let dense = self.finalists("warpforge dense sm_80", dense_candidates)?;
        let mut absent = Vec::new();
        // cuSPARSELt on the same 2:4 A (compressed its own way), where it loads.
        let dims = (size, size, size);
        let library =
            match SparseGemm::new(rt, dims, &a_decompressed, &b, &mut c_library.borrow_mut()) {
                Ok(mut library) => {
                    let (b, c) = (&b, &c_library);
                    Some(contender(
                        "cuSPARSELt",
                        "cusparseLtMatmul f16, f32 sums, its kernel searched".into(),
                        move |rt| library.run(rt, b, &mut c.borrow_mut()),
                    ))
                }
                Err(why) => {
                    absent.push(Absent {
                        name: "cuSPARSELt".into(),
                        why,
                    });
                    None
                }
            };
        // Every contender's C against the first dense finalist's.
        let outputs: Vec<&RefCell<DeviceBuffer<f16>>> = std::iter::repeat_n(&c_dense, dense.len())
            .chain(std::iter::repeat_n(&c_sparse, sparse.len()))
            .chain(library.iter().map(|_| &c_library))
            .collect();
        let mut contenders = dense;
        contenders.extend(sparse);
        contenders.extend(library);
        let started = Instant::now();
        let mut dense_result: Option<Vec<f64>> = None;
        for (contender, c) in contenders.iter_mut().zip(outputs) {
            (contender.launch)(rt)?;
            let result = rt.download(&c.borrow())?;
            let Some(reference) = &dense_result else {
                dense_result = Some(result.into_iter().map(f16::to_f64).collect());
                continue;
            };
            let result: Vec<f32> = result.into_iter().map(f16::to_f32).collect();
            let d = deviation(&result, reference);
            // Both round f32 sums of the same products to f16; summation orders differ.
            if !d.passes(1e-3) {
                return Err(format!(
                    "{} ({}) disagrees with the dense f16 GEMM: {d}",
                    contender.name, contender.detail
                )
                .into());
            }
        }
        self.step.checks_s += started.elapsed().as_secs_f64();
        let work = 2.0 * (size as f64).powi(3);
        Ok(vec![self.case(
            "sparse",
            "f16",
            shape_name((s, s, s)),
            Some((s, s, s)),
            (work, WorkUnit::Operations),
            0,
            contenders,
            absent,
        )?])
    }
}

/// The WGSL variants of the f32 GEMM through wgpu at `size`^3, the fastest
/// as the case: host wall clock of launch + wait per sample (wgpu has no
/// event timer here), so a submission is included.
fn bench_wgpu(size: usize) -> BenchResult<Case> {
    // No Vulkan (or Metal, DX12) adapter is a machine without the path, as a
    // shape cuBLAS refuses is: listed as not run, not a failure.
    let rt = Runtime::wgpu().map_err(|e| NothingRuns(e.to_string()))?;
    let mut inputs = Inputs::new(run_seed());
    let a = rt.upload(&inputs.f32s(size * size))?;
    let b = rt.upload(&inputs.f32s(size * size))?;
    let mut c: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;
    let mut best: Option<(f64, Vec<report::Sample>, gemm::gemm_f32::Consts)> = None;
    for consts in gemm::gemm_f32::variants() {
        let mut run = || -> Result<f64, Error> {
            let start = std::time::Instant::now();
            gemm::gemm_f32_with(&rt, consts, &a, &b, &mut c, (s, s, s), 1.0, 0.0)?;
            rt.synchronize()?;
            Ok(start.elapsed().as_secs_f64() * 1e3)
        };
        run()?;
        let samples = (0..5)
            .map(|round| {
                run().map(|ms| report::Sample {
                    round,
                    ms,
                    launches: 1,
                    gpu: None,
                    // The wall clock already counts the host.
                    enqueue_ms: None,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut times: Vec<f64> = samples.iter().map(|s| s.ms).collect();
        times.sort_by(f64::total_cmp);
        if best.as_ref().is_none_or(|(b, _, _)| times[2] < *b) {
            best = Some((times[2], samples, consts));
        }
    }
    let (_, samples, consts) = best.ok_or("gemm_f32 has no variants")?;
    let case = Case {
        section: "wgpu".into(),
        dtype: "f32".into(),
        shape: shape_name((s, s, s)),
        dims: Some((s, s, s)),
        work: 2.0 * (size as f64).powi(3),
        work_unit: WorkUnit::Operations,
        baseline: 0,
        contenders: vec![ContenderSamples {
            name: "warpforge WGSL (wall clock)".into(),
            detail: format!("gemm_f32 {consts:?} through {}", rt.backend_name()),
            samples,
        }],
        absent: Vec::new(),
        sweeps: Vec::new(),
    };
    Ok(case)
}

/// Random values of a floating-point type for a GEMM's inputs.
fn float_values<T: GemmFloat>(inputs: &mut Inputs, n: usize) -> Vec<T> {
    inputs.f32s(n).into_par_iter().map(T::from_f32).collect()
}
