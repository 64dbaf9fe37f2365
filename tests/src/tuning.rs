//! The GPU tier of the autotuner: what `tune` (`cargo xtask tune`) runs.
//!
//! - [`tune_shape`]: tunes one stock GEMM family for one shape, records the
//!   winner, checks that a fresh dispatcher sends the shape to it from the
//!   database and that its PTX uses no `m8n8k4` MMA, and with `exhaustive`
//!   times every verified variant fully and checks that the winner is
//!   within [`EXHAUSTIVE_TOLERANCE`] of the best (the two re-timed
//!   alternately, so that clock drift hits both alike);
//! - [`dispatch_shape`]: dispatches one shape from the database in a process
//!   that tunes nothing, verifies the dispatched variant and times it;
//! - [`dispatch_overhead`]: the host time of a dispatched launch against a
//!   direct launch of the same variant.

use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use warpforge::cudarc::driver::sys::{self, CUfunction_attribute};
use warpforge::cudarc::driver::{result, CudaStream, DevicePtr, DevicePtrMut, DriverError};
use warpforge::tune::{
    measure, sweep, tune, Call, Candidate, GpuModel, GpuTestbed, MissPolicy, ShapeBucket, Source,
    Status, Testbed, TuneDb, TuneKey, TuneOptions, TuneSettings, VariantResources, Workload,
};
use warpforge::{f16, select_arch, ArgInfo, DeviceBuffer, Error, Grid, KernelArg, Runtime, Scalar};
use warpforge_kernels::gemm_problem;
use warpforge_kernels::gemm_problem::GemmProblem;
use warpforge_kernels::gemm_tc::gemm_f16;
use warpforge_kernels::tuned::{
    GemmElement, GemmForm, GemmKind, GemmOutput, GemmWorkload, OperandA, TunedGemm, GEMM_F16,
};

/// A call of an in-place f32 kernel `(x: &mut [f32], n: u32)` on `n`
/// elements, for tuning tests: dtypes `f32`, the shape bucket of `n`, one
/// alignment fact, and the arguments; owned, [`InPlaceCall::call`] lends
/// them.
pub struct InPlaceCall {
    n: u32,
    alignments: [u32; 1],
    args: [ArgInfo; 2],
}

impl InPlaceCall {
    /// The call on `n` elements whose alignment fact is `alignment`.
    pub fn new(n: u32, alignment: u32) -> InPlaceCall {
        let x = ArgInfo::Buffer {
            elem: Scalar::F32,
            len: u64::from(n),
            mutable: true,
        };
        InPlaceCall {
            n,
            alignments: [alignment],
            args: [x, KernelArg::scalar(n).info()],
        }
    }

    /// The call as a dispatcher or the tuner takes it.
    pub fn call(&self) -> Call<'_> {
        Call {
            dtypes: "f32",
            shape: ShapeBucket::gemm(self.n.into(), 1, 1),
            alignments: &self.alignments,
            args: &self.args,
        }
    }
}

/// How much slower than the exhaustive sweep's best a tuned winner may be.
pub const EXHAUSTIVE_TOLERANCE: f64 = 1.03;
/// The host-side overhead a dispatched launch may add to a direct one.
pub const OVERHEAD_TARGET_US: f64 = 2.0;
/// How many times a bare cudarc launch of the same PTX a launcher may cost.
pub const LAUNCHER_TARGET: f64 = 1.5;

/// The shapes `tune` takes by default: two large squares, a ragged shape
/// (m and n fit no tile), and a k that is not a multiple of 8 (no 16-byte
/// copies: only the element-copy Tensor Core variants can take it).
pub const DEFAULT_SHAPES: [(u32, u32, u32); 4] = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (3001, 2999, 1000),
    (2048, 2048, 1020),
];

/// `4096x4096x4096` -> (4096, 4096, 4096): m x n x k, each at least 1.
pub fn parse_shape(text: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = text.trim().split(['x', 'X']).collect();
    let dims: Option<Vec<u32>> = parts
        .iter()
        .map(|p| p.trim().parse().ok().filter(|&d| d > 0))
        .collect();
    match dims.as_deref() {
        Some(&[m, n, k]) => Ok((m, n, k)),
        _ => Err(format!(
            "`{text}` is not a GEMM shape: write MxNxK with three positive integers, e.g. \
             4096x4096x4096"
        )),
    }
}

/// One measured variant.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub variant: String,
    pub ms: f64,
    pub tflops: f64,
}

impl Timing {
    /// `candidate` at `ms` per launch of `problem`.
    fn new<S>(candidate: &Candidate, ms: f64, problem: &GemmProblem<S>) -> Timing {
        let flops = 2.0
            * f64::from(problem.m)
            * f64::from(problem.n)
            * f64::from(problem.k)
            * f64::from(problem.batch.count);
        Timing {
            variant: candidate.name().to_string(),
            ms,
            tflops: flops / (ms * 1e-3) / 1e12,
        }
    }
}

/// The exhaustive comparison of one shape.
#[derive(Clone, Debug, Serialize)]
pub struct Exhaustive {
    /// Variants timed fully (every one that passed verification).
    pub swept: usize,
    /// The sweep's fastest.
    pub best: Timing,
    /// The winner and the sweep's best, re-timed alternately (median of the
    /// rounds' medians); equal when they are the same variant.
    pub winner_ms: f64,
    pub best_ms: f64,
    /// `winner_ms / best_ms`.
    pub ratio: f64,
    pub within_tolerance: bool,
}

/// What `tune` did for one family, form and shape.
#[derive(Clone, Debug, Serialize)]
pub struct TunedShape {
    pub family: String,
    /// The [`GemmForm`]'s name.
    pub form: String,
    pub shape: (u32, u32, u32),
    pub key: TuneKey,
    /// Creating and uploading the tuning inputs.
    pub inputs_s: f64,
    /// Pruning, verification and timing.
    pub tuning_s: f64,
    pub winner: Timing,
    pub runner_up: Option<Timing>,
    pub heuristic: Option<Timing>,
    /// Candidates per fate: `timed`, `dropped`, `rejected`, `pruned (rule)`.
    pub fates: BTreeMap<String, usize>,
    /// Rejected candidates and why (a correct family has none).
    pub rejected: Vec<(String, String)>,
    /// A fresh dispatcher's choice for the shape, and where it came from.
    pub dispatched: String,
    pub dispatched_source: String,
    /// Whether the dispatched variant's PTX (for the device's arch) holds an
    /// `m8n8k4` MMA: never.
    pub dispatched_uses_m8n8k4: bool,
    pub exhaustive: Option<Exhaustive>,
    /// What failed, if anything.
    pub failures: Vec<String>,
}

/// What `tune --dispatch` did for one family, form and shape.
#[derive(Clone, Debug, Serialize)]
pub struct DispatchedShape {
    pub family: String,
    /// The [`GemmForm`]'s name.
    pub form: String,
    pub shape: (u32, u32, u32),
    pub variant: String,
    pub source: String,
    /// The median the database recorded, and the one measured now.
    pub recorded_ms: Option<f64>,
    pub measured: Option<Timing>,
    pub verified: bool,
    pub failures: Vec<String>,
}

/// A testbed that shows which candidate is being verified.
struct Progress<'a, T> {
    inner: T,
    bar: &'a indicatif::ProgressBar,
    verified: usize,
}

impl<T: Testbed> Testbed for Progress<'_, T> {
    fn resources(&mut self, candidate: &Candidate) -> Result<VariantResources, Error> {
        self.inner.resources(candidate)
    }

    fn verify(&mut self, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        self.verified += 1;
        self.bar.set_position(self.verified as u64);
        self.bar.set_message(candidate.name().to_string());
        self.inner.verify(candidate)
    }

    fn time_ms(&mut self, candidate: &Candidate, launches: u32) -> Result<f64, Error> {
        self.inner.time_ms(candidate, launches)
    }
}

/// Tunes `kind` for `form`'s problem at `dims` on `rt` and records the
/// winner in `dir`'s database (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub fn tune_shape<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    rt: &Runtime,
    kind: &'static GemmKind<I, O, A>,
    form: GemmForm,
    dims: (u32, u32, u32),
    dir: &Path,
    seed: u64,
    exhaustive: bool,
    bar: &indicatif::ProgressBar,
) -> Result<TunedShape, Error> {
    let tuned = TunedGemm::with_policy(rt, kind, MissPolicy::Heuristic, Some(dir))?;
    let family = tuned.dispatcher().family();
    let candidates = family.candidates();
    let problem = form.problem(kind, dims);
    let gemm_call = kind.call(&problem, form.bias)?;
    let call = gemm_call.call();
    let key = tuned.dispatcher().key(&call);

    let started = Instant::now();
    let mut workload = GemmWorkload::new(rt, kind, &problem, form.bias, seed)?;
    let inputs_s = started.elapsed().as_secs_f64();
    bar.set_length(candidates.len() as u64);
    let options = TuneOptions::default();
    let mut testbed = Progress {
        inner: GpuTestbed::new(rt, &mut workload),
        bar,
        verified: 0,
    };
    let report = tune(family, &call, rt.device(), &mut testbed, &options)?;
    TuneDb::open(Some(dir), &GpuModel::of(rt.device()))?
        .record(key.clone(), report.record(family))?;

    let timing = |i: usize| {
        report
            .median_ms(i)
            .map(|ms| Timing::new(&candidates[i], ms, &problem))
    };
    let mut fates = BTreeMap::new();
    let mut rejected = Vec::new();
    for (candidate, status) in candidates.iter().zip(&report.statuses) {
        let fate = match status {
            Status::Timed { .. } => "timed".to_string(),
            Status::Dropped { .. } => "dropped".to_string(),
            Status::Rejected { reason } => {
                rejected.push((candidate.name().to_string(), reason.clone()));
                "rejected".to_string()
            }
            Status::Pruned { rule, .. } => format!("pruned ({rule})"),
        };
        *fates.entry(fate).or_insert(0) += 1;
    }
    let mut failures: Vec<String> = rejected
        .iter()
        .map(|(variant, reason)| format!("{variant} was rejected: {reason}"))
        .collect();

    // A second dispatcher reads the database as a later process would.
    let fresh = TunedGemm::with_policy(rt, kind, MissPolicy::Heuristic, Some(dir))?;
    let selection = fresh.select(rt, &problem, form.bias)?;
    let dispatched = fresh.dispatcher().candidate(selection);
    if selection.source != Source::Database || selection.candidate != report.winner {
        failures.push(format!(
            "a fresh dispatcher chose {} ({:?}), not the recorded winner {}",
            dispatched.name(),
            selection.source,
            candidates[report.winner].name()
        ));
    }
    let dispatched_uses_m8n8k4 = uses_m8n8k4(rt, dispatched)?;
    if dispatched_uses_m8n8k4 {
        failures.push(format!("{} uses an m8n8k4 MMA", dispatched.name()));
    }

    let exhaustive = if exhaustive {
        bar.set_message("exhaustive sweep");
        let verified: Vec<usize> = report
            .statuses
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Status::Timed { .. } | Status::Dropped { .. }))
            .map(|(i, _)| i)
            .collect();
        let mut testbed = GpuTestbed::new(rt, &mut workload);
        let swept = sweep(family, &verified, &mut testbed, &options)?;
        let Some((best, best_sweep_ms)) = fastest(&swept) else {
            return Err(Error::Tune(format!(
                "the exhaustive sweep of {} timed no variant",
                family.name()
            )));
        };
        let (winner_ms, best_ms) = if best == report.winner {
            (best_sweep_ms, best_sweep_ms)
        } else {
            alternate(
                &mut testbed,
                &candidates[report.winner],
                &candidates[best],
                &options,
            )?
        };
        let ratio = winner_ms / best_ms;
        let within_tolerance = ratio <= EXHAUSTIVE_TOLERANCE;
        if !within_tolerance {
            failures.push(format!(
                "the winner {} ({winner_ms:.4} ms) is {:.1}% slower than the sweep's best {} \
                 ({best_ms:.4} ms)",
                candidates[report.winner].name(),
                (ratio - 1.0) * 100.0,
                candidates[best].name()
            ));
        }
        Some(Exhaustive {
            swept: verified.len(),
            best: Timing::new(&candidates[best], best_sweep_ms, &problem),
            winner_ms,
            best_ms,
            ratio,
            within_tolerance,
        })
    } else {
        None
    };

    Ok(TunedShape {
        family: family.name().to_string(),
        form: form.name.to_string(),
        shape: dims,
        key,
        inputs_s,
        tuning_s: report.elapsed.as_secs_f64(),
        winner: timing(report.winner).expect("the winner is timed"),
        runner_up: report.runner_up.and_then(timing),
        heuristic: report.heuristic.and_then(timing),
        fates,
        rejected,
        dispatched: dispatched.name().to_string(),
        dispatched_source: format!("{:?}", selection.source),
        dispatched_uses_m8n8k4,
        exhaustive,
        failures,
    })
}

/// The fastest timed entry of a sweep.
fn fastest(swept: &[(usize, Status)]) -> Option<(usize, f64)> {
    swept
        .iter()
        .filter_map(|(i, s)| match s {
            Status::Timed { median_ms } => Some((*i, *median_ms)),
            _ => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Rounds of re-timing two variants in turn.
const ALTERNATING_ROUNDS: usize = 5;

/// `a` and `b` timed in turn, [`ALTERNATING_ROUNDS`] times: the median of
/// each one's medians.
fn alternate(
    testbed: &mut impl Testbed,
    a: &Candidate,
    b: &Candidate,
    options: &TuneOptions,
) -> Result<(f64, f64), Error> {
    let (mut a_ms, mut b_ms) = (Vec::new(), Vec::new());
    for _ in 0..ALTERNATING_ROUNDS {
        a_ms.push(timed_median(measure(a, testbed, options, None)?, a)?);
        b_ms.push(timed_median(measure(b, testbed, options, None)?, b)?);
    }
    Ok((median(a_ms), median(b_ms)))
}

fn timed_median(status: Status, candidate: &Candidate) -> Result<f64, Error> {
    match status {
        Status::Timed { median_ms } => Ok(median_ms),
        other => Err(Error::Tune(format!(
            "{} could not be re-timed: {other:?}",
            candidate.name()
        ))),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Whether the candidate's PTX for the device's arch holds an `m8n8k4` MMA
/// (the Volta shape, which is slow on later GPUs).
fn uses_m8n8k4(rt: &Runtime, candidate: &Candidate) -> Result<bool, Error> {
    let arch = select_arch(candidate.def, rt.device())?;
    let ptx = warpforge_codegen::compile_ptx(candidate.def, &candidate.consts, arch)
        .map_err(|e| Error::Tune(format!("cannot build {}: {e}", candidate.name())))?;
    Ok(ptx.text.contains("m8n8k4"))
}

/// Dispatches `kind` for `form`'s problem at `dims` from `dir`'s database
/// without tuning, verifies the dispatched variant on fresh inputs and
/// times it.
pub fn dispatch_shape<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    rt: &Runtime,
    kind: &'static GemmKind<I, O, A>,
    form: GemmForm,
    dims: (u32, u32, u32),
    dir: &Path,
    seed: u64,
) -> Result<DispatchedShape, Error> {
    let tuned = TunedGemm::with_policy(rt, kind, MissPolicy::Heuristic, Some(dir))?;
    let problem = form.problem(kind, dims);
    let selection = tuned.select(rt, &problem, form.bias)?;
    let candidate = tuned.dispatcher().candidate(selection);
    let recorded_ms = tuned
        .dispatcher()
        .stored(&kind.call(&problem, form.bias)?.call())
        .map(|record| record.median_ms);
    let mut failures = Vec::new();
    if selection.source != Source::Database {
        failures.push(format!(
            "not dispatched from the database ({:?}): it has no usable record for this shape; \
             run `tune` first with the same WARPFORGE_TUNE_DIR, or give `--dispatch` the \
             `--families`, `--forms` and `--shapes` that were tuned",
            selection.source
        ));
    }
    let mut workload = GemmWorkload::new(rt, kind, &problem, form.bias, seed)?;
    let verified = match workload.verify(rt, candidate)? {
        Ok(()) => true,
        Err(why) => {
            failures.push(format!(
                "{} computed a wrong result: {why}",
                candidate.name()
            ));
            false
        }
    };
    let status = measure(
        candidate,
        &mut GpuTestbed::new(rt, &mut workload),
        &TuneOptions::default(),
        None,
    )?;
    let measured = match status {
        Status::Timed { median_ms } => Some(Timing::new(candidate, median_ms, &problem)),
        other => {
            failures.push(format!(
                "{} could not be timed: {other:?}",
                candidate.name()
            ));
            None
        }
    };
    if tuned.dispatcher().stats().tuned != 0 {
        failures.push("the dispatcher tuned".to_string());
    }
    Ok(DispatchedShape {
        family: kind.name.to_string(),
        form: form.name.to_string(),
        shape: dims,
        variant: candidate.name().to_string(),
        source: format!("{:?}", selection.source),
        recorded_ms,
        measured,
        verified,
        failures,
    })
}

/// The host-side cost of a launch, from the driver call up to dispatch.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Overhead {
    pub variant: String,
    pub shape: (u32, u32, u32),
    /// Host time per launch, enqueue only (median of the rounds): the same
    /// PTX launched through cudarc alone (the floor: the driver's own cost),
    /// through the kernel's launcher (every launch check), through
    /// `gemm_with` (the problem's checks too) and through `TunedGemm::run`.
    pub bare_us: f64,
    pub launcher_us: f64,
    pub direct_us: f64,
    pub dispatched_us: f64,
    /// `launcher_us / bare_us`: what the runtime's launch path costs.
    pub launcher_over_bare: f64,
    /// `dispatched_us - direct_us`.
    pub overhead_us: f64,
    /// One [`TunedGemm::select`] alone, resolved already.
    pub select_ns: f64,
    /// The macro's tuned launch; absent from reports recorded before it existed.
    #[serde(default)]
    pub tuned_kernel: Option<TunedKernelOverhead>,
    /// Both overheads under [`OVERHEAD_TARGET_US`].
    pub within_target: bool,
}

/// The host cost of the macro's tuned launch (`tune_key(..)`): the example
/// crate's `scale_add` on 2^16 elements through its launcher and through
/// `scale_add::tuned(rt)?.launch(..)` (the resolved variant each time).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TunedKernelOverhead {
    /// Host time per launch, enqueue only, medians of alternating rounds.
    pub direct_us: f64,
    pub tuned_us: f64,
    /// `tuned_us - direct_us`.
    pub overhead_us: f64,
}

/// Launches per timed round: few enough that the launch queue never fills
/// (the host would then wait for the GPU).
const LAUNCHES_PER_ROUND: usize = 200;
const OVERHEAD_ROUNDS: usize = 41;
const SELECTS: usize = 100_000;

/// The f16 GEMM at 128 x 128 x 60 (a few microseconds on the GPU; k not a
/// multiple of 8, so that the heuristic default is the sm_80 `gemm_f16`
/// whose PTX the bare launch loads, on Hopper too): the
/// host time of enqueueing launches of the dispatched variant through
/// cudarc's driver calls alone ([`BareLaunch`]), its launcher,
/// `gemm_with` and [`TunedGemm::run`], in alternating rounds of
/// [`LAUNCHES_PER_ROUND`] (the GPU drained between rounds), and the cost of
/// [`TunedGemm::select`] alone. `dir` holds the database (the
/// heuristic default serves a miss; nothing is written).
pub fn dispatch_overhead(rt: &Runtime, dir: &Path) -> Result<Overhead, Error> {
    let dims = (128u32, 128u32, 60u32);
    let (m, n, k) = (dims.0 as usize, dims.1 as usize, dims.2 as usize);
    let tuned = TunedGemm::with_policy(rt, &GEMM_F16, MissPolicy::Heuristic, Some(dir))?;
    let problem = GEMM_F16.problem(dims, 1.0, 0.0);
    let selection = tuned.select(rt, &problem, false)?;
    let candidate = tuned.dispatcher().candidate(selection);
    let consts = if candidate.def.ir.name == gemm_f16::def().ir.name {
        gemm_f16::variants()
            .into_iter()
            .find(|c| c.values() == candidate.consts)
    } else {
        None
    }
    .ok_or_else(|| {
        Error::Tune(format!(
            "the overhead bench compares with gemm_f16's direct launcher, and the dispatcher chose \
             {}: tune gemm_f16 at {m}x{n}x{k} or leave it untuned",
            candidate.name()
        ))
    })?;
    let a = rt.upload(&vec![f16::from_f32(0.5); m * k])?;
    let b = rt.upload(&vec![f16::from_f32(0.25); n * k])?;
    let mut c = rt.alloc_zeroed::<f16>(m * n)?;
    let mut c_bare = rt.alloc_zeroed::<f16>(m * n)?;
    let bare = BareLaunch::new(rt, consts, dims)?;
    // The launcher's arguments, as `gemm_with` passes them for this problem
    // (one batch, A row-major, B column-major, the bias stood in for by A).
    let grid = Grid::blocks([dims.1.div_ceil(consts.BN), dims.0.div_ceil(consts.BM), 1]);
    let launcher = |c: &mut DeviceBuffer<f16>| {
        let (sa, sb, sc) = (dims.0 * dims.2, dims.1 * dims.2, dims.0 * dims.1);
        gemm_f16::launch(
            rt, consts, grid, &a, &b, c, &a, dims.0, dims.1, dims.2, 1, sa, sb, sc, 1.0, 0.0, 0, 0,
            false, false,
        )
    };
    let mut times: [Vec<f64>; 4] = Default::default();
    for round in 0..=OVERHEAD_ROUNDS {
        for (path, samples) in times.iter_mut().enumerate() {
            rt.synchronize()?;
            let started = Instant::now();
            for _ in 0..LAUNCHES_PER_ROUND {
                match path {
                    0 => bare.launch(&a, &b, &mut c_bare)?,
                    1 => launcher(&mut c)?,
                    2 => gemm_problem::gemm_with(rt, consts, &a, &b, &mut c, dims, 1.0, 0.0)?,
                    _ => tuned.run(rt, &a, &b, &mut c, dims, 1.0, 0.0)?,
                }
            }
            let us = started.elapsed().as_secs_f64() * 1e6 / LAUNCHES_PER_ROUND as f64;
            // Round 0 warms every path up.
            if round > 0 {
                samples.push(us);
            }
        }
    }
    // The bare launch is a launch of the same kernel on the same arguments,
    // not a cheaper stand-in: it computes the same C.
    if rt.download(&c_bare)? != rt.download(&c)? {
        return Err(Error::Tune(format!(
            "the bare cudarc launch of {} computed another C than its launcher",
            candidate.name()
        )));
    }
    rt.synchronize()?;
    let started = Instant::now();
    for _ in 0..SELECTS {
        std::hint::black_box(tuned.select(rt, std::hint::black_box(&problem), false)?);
    }
    let select_ns = started.elapsed().as_secs_f64() * 1e9 / SELECTS as f64;
    let [bare_us, launcher_us, direct_us, dispatched_us] = times.map(median);
    let overhead_us = dispatched_us - direct_us;
    let tuned_kernel = tuned_kernel_overhead(rt, dir)?;
    Ok(Overhead {
        variant: candidate.name().to_string(),
        shape: dims,
        bare_us,
        launcher_us,
        direct_us,
        dispatched_us,
        launcher_over_bare: launcher_us / bare_us,
        overhead_us,
        select_ns,
        within_target: overhead_us < OVERHEAD_TARGET_US
            && tuned_kernel.overhead_us < OVERHEAD_TARGET_US,
        tuned_kernel: Some(tuned_kernel),
    })
}

/// [`TunedKernelOverhead`], resolved from `dir` with the heuristic policy
/// (nothing is written), in alternating rounds as in [`dispatch_overhead`].
/// The runtime's tune settings are put back afterwards.
fn tuned_kernel_overhead(rt: &Runtime, dir: &Path) -> Result<TunedKernelOverhead, Error> {
    use warpforge_example_tuned::{scale_add, scale_add_grid};
    let n = 1 << 16;
    let saved = rt.tune_settings();
    rt.set_tune_settings(TuneSettings {
        policy: Some(MissPolicy::Heuristic),
        dir: Some(dir.to_path_buf()),
    });
    let x = rt.upload(&vec![1.0f32; n])?;
    let mut y = rt.alloc_zeroed::<f32>(n)?;
    let tuned = scale_add::tuned(rt)?;
    let selection = tuned.launch(|c| scale_add_grid(n, c.ITEMS), 0.5, &x, &mut y)?;
    let items = tuned.kernel().dispatcher().candidate(selection).consts[0] as u32;
    let consts = scale_add::Consts { ITEMS: items };
    let mut times: [Vec<f64>; 2] = Default::default();
    for round in 0..=OVERHEAD_ROUNDS {
        for (path, samples) in times.iter_mut().enumerate() {
            rt.synchronize()?;
            let started = Instant::now();
            for _ in 0..LAUNCHES_PER_ROUND {
                if path == 0 {
                    scale_add::launch(rt, consts, scale_add_grid(n, items), 0.5, &x, &mut y)?;
                } else {
                    tuned.launch(|c| scale_add_grid(n, c.ITEMS), 0.5, &x, &mut y)?;
                }
            }
            let us = started.elapsed().as_secs_f64() * 1e6 / LAUNCHES_PER_ROUND as f64;
            if round > 0 {
                samples.push(us);
            }
        }
    }
    rt.synchronize()?;
    rt.set_tune_settings(saved);
    let [direct_us, tuned_us] = times.map(median);
    Ok(TunedKernelOverhead {
        direct_us,
        tuned_us,
        overhead_us: tuned_us - direct_us,
    })
}

/// A variant of `gemm_f16` loaded and launched through cudarc's driver
/// calls alone (`cuModuleLoadData`, `cuLaunchKernel`), on the runtime's
/// stream and context: the floor of what a launch of that PTX costs the host.
struct BareLaunch {
    stream: Arc<CudaStream>,
    module: sys::CUmodule,
    function: sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    dims: (u32, u32, u32),
}

impl BareLaunch {
    fn new(rt: &Runtime, consts: gemm_f16::Consts, dims: (u32, u32, u32)) -> Result<Self, Error> {
        let stream = rt
            .cuda_stream()
            .ok_or_else(|| Error::Tune("the bare launch needs a CUDA runtime".into()))?
            .clone();
        let def = gemm_f16::def();
        let arch = select_arch(def, rt.device())?;
        let ptx = warpforge_codegen::compile_ptx(def, &consts.values(), arch)
            .map_err(|e| Error::Tune(format!("compiling {consts:?} for the bare launch: {e}")))?;
        let block = ptx
            .block
            .ok_or_else(|| Error::Tune("gemm_f16 declares its block shape".into()))?;
        let driver =
            |what: &str, e: DriverError| Error::Tune(format!("the bare launch, {what}: {e}"));
        let text = CString::new(ptx.text).map_err(|_| Error::Tune("PTX holds a NUL".into()))?;
        let entry = CString::new(ptx.entry).map_err(|_| Error::Tune("entry holds a NUL".into()))?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver("making the context current", e))?;
        // SAFETY: `text` is NUL-terminated PTX; the context is current.
        let module = unsafe { result::module::load_data(text.as_ptr().cast()) }
            .map_err(|e| driver("loading the module", e))?;
        // Owned from here, so that an error below unloads the module.
        let mut bare = BareLaunch {
            stream,
            module,
            function: std::ptr::null_mut(),
            grid: (dims.1.div_ceil(consts.BN), dims.0.div_ceil(consts.BM), 1),
            block: (block[0], block[1], block[2]),
            shared_bytes: ptx.shared_bytes,
            dims,
        };
        // SAFETY: `module` is loaded and current; `entry` names its kernel.
        let function = unsafe { result::module::get_function(module, entry) }
            .map_err(|e| driver("finding its kernel", e))?;
        // SAFETY: `function` belongs to the loaded module.
        unsafe {
            result::function::set_function_attribute(
                function,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                ptx.shared_bytes as i32,
            )
        }
        .map_err(|e| driver("allowing its shared memory", e))?;
        bare.function = function;
        Ok(bare)
    }

    /// `c = a b` with the launcher's arguments (the bias stood in for by A,
    /// unread), packed as a cudarc user packs them.
    fn launch(
        &self,
        a: &DeviceBuffer<f16>,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f16>,
    ) -> Result<(), Error> {
        let cuda = "the bare launch takes CUDA buffers";
        let a = a.cuda_slice().ok_or_else(|| Error::Tune(cuda.into()))?;
        let b = b.cuda_slice().ok_or_else(|| Error::Tune(cuda.into()))?;
        let c = c.cuda_slice_mut().ok_or_else(|| Error::Tune(cuda.into()))?;
        let (m, n, k) = self.dims;
        let (a_ptr, _a_read) = a.device_ptr(&self.stream);
        let (b_ptr, _b_read) = b.device_ptr(&self.stream);
        let (c_len, (c_ptr, _c_write)) = (c.len() as u32, c.device_ptr_mut(&self.stream));
        let (mut a_ptr, mut b_ptr, mut c_ptr, mut bias_ptr) = (a_ptr, b_ptr, c_ptr, a_ptr);
        let (mut a_len, mut b_len, mut c_len, mut bias_len) =
            (a.len() as u32, b.len() as u32, c_len, a.len() as u32);
        let mut scalars = [m, n, k, 1, m * k, n * k, m * n];
        let (mut alpha, mut beta) = (1.0f32, 0.0f32);
        // bias_mode, activation, a_col_major, b_row_major.
        let mut codes = [0u32; 4];
        let mut params: [*mut c_void; 21] = [std::ptr::null_mut(); 21];
        let slots: [*mut c_void; 8] = [
            (&mut a_ptr as *mut u64).cast(),
            (&mut a_len as *mut u32).cast(),
            (&mut b_ptr as *mut u64).cast(),
            (&mut b_len as *mut u32).cast(),
            (&mut c_ptr as *mut u64).cast(),
            (&mut c_len as *mut u32).cast(),
            (&mut bias_ptr as *mut u64).cast(),
            (&mut bias_len as *mut u32).cast(),
        ];
        params[..8].copy_from_slice(&slots);
        for (param, value) in params[8..15].iter_mut().zip(scalars.iter_mut()) {
            *param = (value as *mut u32).cast();
        }
        params[15] = (&mut alpha as *mut f32).cast();
        params[16] = (&mut beta as *mut f32).cast();
        for (param, value) in params[17..].iter_mut().zip(codes.iter_mut()) {
            *param = (value as *mut u32).cast();
        }
        // SAFETY: `function` is loaded in the stream's context; `params`
        // points at one live value per kernel parameter, in the ABI's order
        // and types (`warpforge_runtime::cuda::launch`: pointer and u32
        // length per slice, then the scalars, bools as u32); the slices hold
        // what the lengths say and stay borrowed until the launch returns.
        unsafe {
            result::launch_kernel(
                self.function,
                self.grid,
                self.block,
                self.shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| Error::Tune(format!("the bare launch: {e}")))
    }
}

impl Drop for BareLaunch {
    fn drop(&mut self) {
        // SAFETY: nothing launched from the module is pending once the
        // stream is drained; the module is unloaded once.
        let _ = self.stream.synchronize();
        let _ = unsafe { result::module::unload(self.module) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(parse_shape("4096x4096x4096"), Ok((4096, 4096, 4096)));
        assert_eq!(parse_shape(" 3001X2999x1000 "), Ok((3001, 2999, 1000)));
        for bad in [
            "",
            "10x10",
            "1x2x3x4",
            "0x1x1",
            "-1x2x3",
            "axbxc",
            "99999999999x1x1",
        ] {
            let err = parse_shape(bad).unwrap_err();
            assert!(err.contains("MxNxK") && err.contains(bad), "{bad}: {err}");
        }
    }
}
