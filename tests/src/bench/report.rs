//! What a `bench` run found, as data: every sample with the GPU readings
//! beside it, the GPU, driver and commit; and the readers of it: the medians
//! and spreads ([`Case::summary`]), the terminal table ([`table`]) and the
//! architecture ladder ([`ladder`]). The JSON file is this [`Report`]
//! serialised; `bench report FILE` renders a recorded one again.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::method::Method;
use super::monitor::GpuFacts;
use crate::tuning::Overhead;

/// One `bench` run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// The GPU's name as CUDA reports it.
    pub gpu: String,
    pub compute_capability: (u32, u32),
    pub gpu_facts: GpuFacts,
    /// Why there are no clock and power readings, when there are none.
    pub monitor_unavailable: Option<String>,
    /// The commit the bench was built from (`git describe`), when known.
    pub commit: Option<String>,
    /// The seconds the run was given (`--budget-s`): the rounds past the
    /// minimum were cut to fit, when it had one.
    #[serde(default)]
    pub budget_s: Option<f64>,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: u64,
    pub method: Method,
    pub cases: Vec<Case>,
    /// The host cost of a launch (`launch` section), when it ran.
    pub launch_cost: Option<Overhead>,
    /// The cases no contender could run, and why.
    #[serde(default)]
    pub not_run: Vec<NotRun>,
    /// Where each step's wall-clock seconds went (empty in reports from
    /// before they were kept).
    #[serde(default)]
    pub steps: Vec<StepTime>,
}

/// Where one step of a run (a section's step, e.g. one GEMM case) spent its
/// wall-clock seconds: the samples are only part of the rounds, and a
/// budget spent outside them cuts the rounds that narrow the intervals.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StepTime {
    /// The section, e.g. "gemm".
    pub section: String,
    /// The step as the progress bar names it, e.g. "gemm F16 8192x8192x8192".
    pub step: String,
    /// From the end of the step before (the run's start for the first).
    pub total_s: f64,
    /// Sweeping kernel families' variants for their finalists.
    pub sweeps_s: f64,
    /// Running each contender again to check its output against the baseline's.
    pub checks_s: f64,
    /// The comparison: each contender's calibration, the warm-up and the rounds.
    pub rounds_s: f64,
    /// The GPU time of the step's samples (in its cases), within its rounds.
    #[serde(default)]
    pub samples_s: f64,
}

/// The GPU seconds of every sample of `cases`.
pub fn samples_seconds(cases: &[Case]) -> f64 {
    let samples = cases
        .iter()
        .flat_map(|c| &c.contenders)
        .flat_map(|c| &c.samples);
    samples.fold(0.0, |sum, s| sum + s.ms * f64::from(s.launches) / 1e3)
}

impl Report {
    /// Whether the run has a GEMM case (at `shape`, when given): the charts
    /// and the ladder draw nothing without one.
    pub fn has_gemm_at(&self, shape: Option<&str>) -> bool {
        self.cases
            .iter()
            .any(|c| c.section == "gemm" && shape.is_none_or(|s| c.shape == s))
    }
}

/// A case that no contender could run (cuBLAS and every path refuse the
/// shape, say): listed, not measured and not failed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NotRun {
    /// The case, e.g. "gemm e4m3 3001x2999x1000".
    pub case: String,
    /// Each contender's reason.
    pub why: String,
}

/// One comparison: a kernel family at one shape, every contender timed in
/// the same interleaved rounds. Contenders that share a name are one
/// family's finalists ([`Sweep`]); the summary gives each name once.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// The section, e.g. "gemm", "sparse", "stream".
    pub section: String,
    /// The precision or element type, e.g. "f16", "s8".
    pub dtype: String,
    /// The problem, e.g. "8192x8192x8192", and its size in `work_unit`s.
    pub shape: String,
    /// The GEMM's m, n, k (None for other sections).
    pub dims: Option<(u32, u32, u32)>,
    /// Work per launch: floating-point (or integer) operations, or bytes moved.
    pub work: f64,
    pub work_unit: WorkUnit,
    /// The contender the ratios divide by (cuBLAS where it runs).
    pub baseline: usize,
    pub contenders: Vec<ContenderSamples>,
    /// Contenders that could not run this case, and why.
    pub absent: Vec<Absent>,
    /// How each contender that stands for a kernel family's variants was
    /// chosen (empty in reports from before they were kept).
    #[serde(default)]
    pub sweeps: Vec<Sweep>,
}

/// How a kernel family's variants were narrowed to the few the case times:
/// one short sample of each, then those close to the fastest sample timed
/// as contenders of one name in the case's own rounds, the lowest median
/// standing for the family ([`Case::summary`]). Kept so that two runs can
/// be read side by side: did both time the same finalists, and how far
/// apart were they?
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sweep {
    /// The finalist with the lowest median (its contender's `detail`).
    pub chosen: String,
    /// Every variant timed, and the milliseconds per launch of its sample
    /// (a variant whose launch was refused is left out).
    pub sampled: Vec<(String, f64)>,
    /// The variants close enough to the fastest sample to be timed in the
    /// case's rounds, and their medians there. (Reports from before the
    /// finalists were contenders timed them in rounds of their own and
    /// left this empty when only one was close.)
    pub finalists: Vec<(String, f64)>,
}

impl Sweep {
    /// The sweep with its finalists' medians in `contenders` (the case's,
    /// once timed) and the fastest of them chosen.
    pub fn timed_in(mut self, contenders: &[ContenderSamples]) -> Sweep {
        for (detail, median_ms) in &mut self.finalists {
            if let Some(c) = contenders.iter().find(|c| c.detail == *detail) {
                *median_ms = median(c.samples.iter().map(|s| s.ms).collect());
            }
        }
        if let Some((fastest, _)) = self.finalists.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
            self.chosen = fastest.clone();
        }
        self
    }
}

/// What `work` counts.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum WorkUnit {
    /// Operations (2 m n k for a GEMM): rates in TFLOP/s (TOP/s for integers).
    Operations,
    /// Bytes read plus written: rates in GB/s.
    Bytes,
}

impl WorkUnit {
    fn rate(self, work: f64, ms: f64) -> f64 {
        let per_second = work / (ms * 1e-3);
        match self {
            WorkUnit::Operations => per_second / 1e12,
            WorkUnit::Bytes => per_second / 1e9,
        }
    }

    /// The rate's unit.
    pub fn rate_unit(self) -> &'static str {
        match self {
            WorkUnit::Operations => "TFLOP/s",
            WorkUnit::Bytes => "GB/s",
        }
    }
}

/// A contender that has no samples in a case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Absent {
    pub name: String,
    pub why: String,
}

/// One contender's samples in a case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ContenderSamples {
    /// What is timed, e.g. "warpforge sm_90a" or "cuBLAS GemmEx".
    pub name: String,
    /// The variant or library call.
    pub detail: String,
    pub samples: Vec<Sample>,
}

/// One timed batch of back-to-back launches.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// The interleaved round it was taken in.
    pub round: usize,
    /// GPU milliseconds per launch.
    pub ms: f64,
    pub launches: u32,
    /// The GPU while its round's window ran; None without NVML or when no
    /// reading fell inside.
    pub gpu: Option<GpuReadings>,
    /// Host milliseconds to enqueue the sample's launches, over all its
    /// turns (None in reports from before it was kept). Above the spacer's
    /// time plus the sample's own, the GPU waited for the host: the sample
    /// timed the launch path.
    #[serde(default)]
    pub enqueue_ms: Option<f64>,
}

/// Whether the GPU waited for the host during `sample`, queued behind a
/// spacer of `spacer_ms`.
pub fn host_bound(sample: &Sample, spacer_ms: f64) -> bool {
    sample
        .enqueue_ms
        .is_some_and(|host| host > spacer_ms + sample.ms * f64::from(sample.launches))
}

/// What NVML read while a sample ran.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct GpuReadings {
    pub readings: usize,
    pub sm_mhz_min: u32,
    pub sm_mhz_mean: f64,
    pub power_w_mean: f64,
    /// NVML clock event reasons seen (bit mask: 0x4 SW power cap, 0x8 HW
    /// slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake).
    pub reasons: u64,
}

/// A contender's figures in a case.
#[derive(Clone, Debug, PartialEq)]
pub struct ContenderSummary {
    pub name: String,
    pub detail: String,
    /// Whether it is the case's baseline (its ratio is 1).
    pub baseline: bool,
    /// Median over rounds of the milliseconds per launch.
    pub median_ms: f64,
    /// (slowest - fastest) / median over the rounds.
    pub spread: f64,
    /// The work rate at the median.
    pub rate: f64,
    /// Median over rounds of the baseline's time divided by this one's in the
    /// same round (above 1: faster than the baseline), and its 95% confidence
    /// interval ([`median_interval`]; None under 6 rounds).
    pub ratio: f64,
    pub ratio_interval: Option<(f64, f64)>,
    /// The rounds the ratio is the median of.
    pub rounds: usize,
    /// The lowest SM clock read during its samples, and the mean.
    pub sm_mhz: Option<(u32, f64)>,
    /// The other contenders of its name timed in the same rounds (a
    /// family's other finalists), slower by median: each one's detail and
    /// median milliseconds.
    pub others: Vec<(String, f64)>,
}

/// The median of `values` (NaN for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A confidence interval of at least 95% for the median of the distribution
/// `values` were drawn from, assuming nothing of its shape: the `l`-th
/// smallest and the `l`-th largest value, `l` the largest rank such that the
/// median falls outside with probability at most 5% (each value lies below
/// the median with probability 1/2, so that count is Binomial(n, 1/2)). None
/// for fewer than 6 values, which no such pair covers.
pub fn median_interval(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    // P(fewer than l of n values lie below the median), for l = 1, 2, ...
    let mut below = 0.0;
    let mut choose = 1.0; // C(n, l - 1)
    let mut rank = 0;
    for l in 1..=n / 2 {
        below += choose / 2f64.powi(n as i32);
        if 2.0 * below > 0.05 {
            break;
        }
        rank = l;
        choose = choose * (n - (l - 1)) as f64 / l as f64;
    }
    if rank == 0 {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some((sorted[rank - 1], sorted[n - rank]))
}

/// Half the width of `interval` relative to `center`.
pub fn relative_half_width((low, high): (f64, f64), center: f64) -> f64 {
    (high - low) / 2.0 / center
}

/// The ratios of `samples` to `baseline` round by round (the baseline's time
/// over the contender's: above 1 is faster than the baseline), over the
/// rounds both have.
pub fn round_ratios(samples: &[Sample], baseline: &[Sample]) -> Vec<f64> {
    samples
        .iter()
        .filter_map(|s| {
            let base = baseline.iter().find(|b| b.round == s.round)?;
            Some(base.ms / s.ms)
        })
        .collect()
}

impl Case {
    /// Every contender's medians, spreads and ratios to the baseline, one
    /// per name: where several contenders share a name (a family's
    /// finalists, [`Sweep`]), the one with the lowest median stands for it
    /// and the others are listed in its `others`. The ratios divide by the
    /// baseline's name's fastest, round by round.
    pub fn summary(&self) -> Vec<ContenderSummary> {
        let medians: Vec<f64> = self
            .contenders
            .iter()
            .map(|c| median(c.samples.iter().map(|s| s.ms).collect()))
            .collect();
        let names: Vec<&str> = self.contenders.iter().map(|c| c.name.as_str()).collect();
        let groups = by_name(&names, &medians);
        let baseline = groups
            .iter()
            .find(|g| g.contains(&self.baseline))
            .map_or(self.baseline, |g| g[0]);
        let baseline_samples = &self.contenders[baseline].samples;
        groups
            .iter()
            .map(|group| {
                let c = &self.contenders[group[0]];
                let times: Vec<f64> = c.samples.iter().map(|s| s.ms).collect();
                let median_ms = medians[group[0]];
                let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
                let slowest = times.iter().copied().fold(0.0, f64::max);
                let ratios = round_ratios(&c.samples, baseline_samples);
                let readings: Vec<&GpuReadings> =
                    c.samples.iter().filter_map(|s| s.gpu.as_ref()).collect();
                let sm_mhz = (!readings.is_empty()).then(|| {
                    let lowest = readings.iter().map(|r| r.sm_mhz_min).min().unwrap_or(0);
                    let mean =
                        readings.iter().map(|r| r.sm_mhz_mean).sum::<f64>() / readings.len() as f64;
                    (lowest, mean)
                });
                ContenderSummary {
                    name: c.name.clone(),
                    detail: c.detail.clone(),
                    baseline: group[0] == baseline,
                    median_ms,
                    spread: (slowest - fastest) / median_ms,
                    rate: self.work_unit.rate(self.work, median_ms),
                    ratio: median(ratios.clone()),
                    ratio_interval: median_interval(&ratios),
                    rounds: ratios.len(),
                    sm_mhz,
                    others: group[1..]
                        .iter()
                        .map(|&other| (self.contenders[other].detail.clone(), medians[other]))
                        .collect(),
                }
            })
            .collect()
    }

    /// The summary of the contender named `name`.
    pub fn contender(&self, name: &str) -> Option<ContenderSummary> {
        self.summary().into_iter().find(|c| c.name == name)
    }
}

/// The contenders grouped by name, in order of each name's first
/// appearance, each group's indices fastest first by `medians`: a family's
/// finalists are one group, the first of which stands for it.
pub fn by_name(names: &[&str], medians: &[f64]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (index, name) in names.iter().enumerate() {
        match groups.iter_mut().find(|g| names[g[0]] == *name) {
            Some(group) => group.push(index),
            None => groups.push(vec![index]),
        }
    }
    for group in &mut groups {
        group.sort_by(|&a, &b| medians[a].total_cmp(&medians[b]));
    }
    groups
}

/// The terminal table: per case, every contender's rate, ratio to the
/// baseline with its confidence interval and rounds, spread and SM clock.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", header(report));
    let mut section = None;
    for case in &report.cases {
        if section != Some((&case.section, &case.dtype)) {
            section = Some((&case.section, &case.dtype));
            let unit = case.work_unit.rate_unit();
            let _ = writeln!(out, "\n### {} {}\n", case.section, case.dtype);
            let _ = writeln!(
                out,
                "| shape | contender | ms | {unit} | vs baseline (95% CI; rounds) | spread | SM MHz min/mean | variant |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        }
        out.push_str(&case_rows(case));
    }
    if !report.not_run.is_empty() {
        let _ = writeln!(out, "\n### not run\n");
        for n in &report.not_run {
            let _ = writeln!(out, "- {}: {}", n.case, n.why);
        }
    }
    if let Some(spent) = time_spent(report) {
        let _ = writeln!(
            out,
            "\n### where the run's time went (wall-clock seconds)\n\n{spent}"
        );
    }
    if let Some(o) = &report.launch_cost {
        let _ = writeln!(
            out,
            "\n### launch host cost ({} at {}x{}x{}, enqueue only, median of rounds)\n",
            o.variant, o.shape.0, o.shape.1, o.shape.2
        );
        let _ = writeln!(out, "| launch | us | vs bare |");
        let _ = writeln!(out, "|---|---|---|");
        for (row, us) in [
            ("bare (cuLaunchKernel through cudarc, same PTX)", o.bare_us),
            ("the kernel's launcher", o.launcher_us),
            ("gemm_with (the problem's checks too)", o.direct_us),
            ("TunedGemm::run (dispatched)", o.dispatched_us),
        ] {
            let _ = writeln!(out, "| {row} | {us:.3} | {:.2}x |", us / o.bare_us);
        }
    }
    out
}

/// Where the run's wall-clock time went, per section: the rounds (of which
/// the samples' own GPU time), the sweeps, the checks and the rest (inputs,
/// uploads, loading variants); None for a report without step times.
pub fn time_spent(report: &Report) -> Option<String> {
    if report.steps.is_empty() {
        return None;
    }
    let mut sections: Vec<&str> = Vec::new();
    for step in &report.steps {
        if !sections.contains(&step.section.as_str()) {
            sections.push(&step.section);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| section | steps | s | rounds | of them samples | sweeps | checks | rest |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    let mut row = |name: &str, section: Option<&str>| {
        let steps: Vec<&StepTime> = report
            .steps
            .iter()
            .filter(|t| section.is_none_or(|s| t.section == s))
            .collect();
        let sum = |part: fn(&StepTime) -> f64| steps.iter().fold(0.0, |sum, t| sum + part(t));
        let total = sum(|t| t.total_s);
        let parts = [
            sum(|t| t.rounds_s),
            sum(|t| t.samples_s),
            sum(|t| t.sweeps_s),
            sum(|t| t.checks_s),
        ];
        let rest = total - parts[0] - parts[2] - parts[3];
        let cells: Vec<String> = parts
            .iter()
            .chain([&rest])
            .map(|s| format!("{s:.1} ({:.0}%)", 100.0 * s / total.max(1e-9)))
            .collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {total:.1} | {} |",
            steps.len(),
            cells.join(" | ")
        );
    };
    for section in &sections {
        row(section, Some(section));
    }
    row("**run**", None);
    Some(out)
}

/// One case's rows of the table: every contender's median, rate, ratio to
/// the baseline with its confidence interval and rounds, spread and SM clock, then the
/// contenders that did not run and why.
pub fn case_rows(case: &Case) -> String {
    let mut out = String::new();
    for c in case.summary() {
        let clock = c
            .sm_mhz
            .map_or("-".to_string(), |(min, mean)| format!("{min}/{mean:.0}"));
        let ratio = if c.baseline {
            "baseline".to_string()
        } else {
            let interval = c.ratio_interval.map_or("no CI".to_string(), |(low, high)| {
                format!("{low:.3}-{high:.3}")
            });
            format!("**{:.3}x** ({interval}; {})", c.ratio, c.rounds)
        };
        let others = match c.others.first() {
            None => String::new(),
            Some((next, ms)) => format!(
                "; fastest of {} timed (next {next}, +{:.1}%)",
                c.others.len() + 1,
                (ms / c.median_ms - 1.0) * 100.0
            ),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.4} | {:.1} | {ratio} | {:.1}% | {clock} | {}{others} |",
            case.shape,
            c.name,
            c.median_ms,
            c.rate,
            c.spread * 100.0,
            c.detail
        );
    }
    for absent in &case.absent {
        let _ = writeln!(
            out,
            "| {} | {} | - | - | not run: {} | | | |",
            case.shape, absent.name, absent.why
        );
    }
    out
}

/// The run's header line: GPU, driver, clocks, commit, method.
pub fn header(report: &Report) -> String {
    let facts = &report.gpu_facts;
    let m = &report.method;
    format!(
        "bench on {} (sm_{}{}), driver {}, max SM clock {}, power limit {}; commit {}; {} \
         of ~{} ms samples {} behind a {} ms spacer each after {} ms of warm-up; clocks {}",
        report.gpu,
        report.compute_capability.0,
        report.compute_capability.1,
        facts.driver.as_deref().unwrap_or("unknown"),
        facts
            .max_sm_mhz
            .map_or("unknown".to_string(), |mhz| format!("{mhz} MHz")),
        facts
            .power_limit_w
            .map_or("unknown".to_string(), |w| format!("{w:.0} W")),
        report.commit.as_deref().unwrap_or("unknown"),
        match report.budget_s {
            Some(budget) => format!("{} within a {budget:.0} s run", m.rounds_text()),
            None => m.rounds_text(),
        },
        m.sample_ms,
        if m.turn_ms > 0.0 {
            format!("in turns of ~{} ms", m.turn_ms)
        } else {
            "in one block".to_string()
        },
        m.spacer_ms,
        m.warmup_ms,
        match &report.monitor_unavailable {
            None => "read through NVML".to_string(),
            Some(why) => format!("not read ({why})"),
        }
    )
}

/// One ratio of a case in two runs: how far the second moved from the first.
#[derive(Clone, Debug, PartialEq)]
pub struct RatioChange {
    /// "section dtype shape".
    pub case: String,
    pub contender: String,
    pub first: f64,
    pub second: f64,
    /// second / first - 1.
    pub change: f64,
    /// Whether both runs timed the same variant (or library call).
    pub same_detail: bool,
    /// Each run's 95% confidence interval of its ratio (None under 6
    /// rounds), to tell a move within the runs' own uncertainty from one
    /// beyond it ([`RatioChange::intervals_overlap`]).
    pub intervals: [Option<(f64, f64)>; 2],
    /// Where the runs chose different variants and both kept their sweeps:
    /// each variant's sample in each run ([`Sweep`]), to tell a close call
    /// from a sample that was off.
    pub choice: Option<String>,
}

/// Every ratio to the baseline that both runs have (same case and
/// contender), the largest move first: what "two runs agree within 3%"
/// is checked on.
pub fn ratio_changes(first: &Report, second: &Report) -> Vec<RatioChange> {
    type Ratios<'a> = Vec<((String, String), (ContenderSummary, &'a Case))>;
    fn ratios(report: &Report) -> Ratios<'_> {
        report
            .cases
            .iter()
            .flat_map(|case| {
                let name = format!("{} {} {}", case.section, case.dtype, case.shape);
                case.summary()
                    .into_iter()
                    .filter(|c| !c.baseline)
                    .map(move |c| ((name.clone(), c.name.clone()), (c, case)))
            })
            .collect()
    }
    let later = ratios(second);
    let mut changes: Vec<RatioChange> = ratios(first)
        .into_iter()
        .filter_map(|(key, (first, case))| {
            let (_, (second, second_case)) = later.iter().find(|(k, _)| *k == key)?;
            Some(RatioChange {
                case: key.0,
                contender: key.1,
                first: first.ratio,
                second: second.ratio,
                change: second.ratio / first.ratio - 1.0,
                same_detail: first.detail == second.detail,
                intervals: [first.ratio_interval, second.ratio_interval],
                choice: (first.detail != second.detail)
                    .then(|| choice([case, second_case], [&first.detail, &second.detail]))
                    .flatten(),
            })
        })
        .collect();
    changes.sort_by(|a, b| b.change.abs().total_cmp(&a.change.abs()));
    changes
}

impl RatioChange {
    /// Whether the two runs' 95% intervals overlap: a move within them is
    /// one more rounds would narrow; one outside them differs between the
    /// runs beyond what each run's rounds show (the GPU or process state,
    /// not the sampling). None where either run had under 6 rounds.
    pub fn intervals_overlap(&self) -> Option<bool> {
        let [Some(a), Some(b)] = self.intervals else {
            return None;
        };
        Some(a.0 <= b.1 && b.0 <= a.1)
    }
}

/// How each of two runs sampled the variant it chose and the one the other
/// chose (`details`, in run order), from their cases' sweeps: None where
/// either run kept no sweep for its choice.
fn choice(cases: [&Case; 2], details: [&str; 2]) -> Option<String> {
    let samples = cases
        .iter()
        .zip(details)
        .map(|(case, chosen)| {
            let sweep = case.sweeps.iter().find(|s| s.chosen == chosen)?;
            let sample = |detail: &str| {
                sweep
                    .sampled
                    .iter()
                    .find(|(d, _)| d == detail)
                    .map_or("not sampled".to_string(), |(_, ms)| format!("{ms:.4} ms"))
            };
            Some(format!("{} / {}", sample(details[0]), sample(details[1])))
        })
        .collect::<Option<Vec<String>>>()?;
    Some(format!(
        "first chose {}, second {}; their samples (first's / second's choice): first run {}, second run {}",
        details[0], details[1], samples[0], samples[1]
    ))
}

/// The contenders of the `mma` section that are a dtype's compute ceilings
/// (its GEMM paths' Tensor Core instructions, dense), in the roofline's
/// order; the section's sparse rates are not ceilings of a dense GEMM.
pub const CEILINGS: [&str; 2] = ["mma.sync", "wgmma"];

/// The contenders the ladder puts side by side, oldest path first.
pub const LADDER: [&str; 4] = [
    "warpforge sm_70",
    "warpforge sm_80",
    "warpforge sm_90a",
    "cuBLAS",
];

/// The architecture ladder: per GEMM dtype at `shape`, each path's rate and
/// its multiple of the sm_80 path (the one every dtype has), cuBLAS beside;
/// `None` when the run has no GEMM at `shape` (its sections left them out).
pub fn ladder(report: &Report, shape: &str) -> Option<String> {
    if !report.has_gemm_at(Some(shape)) {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| dtype | {} |",
        LADDER
            .map(|name| name.trim_start_matches("warpforge "))
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(LADDER.len()));
    for case in report
        .cases
        .iter()
        .filter(|c| c.section == "gemm" && c.shape == shape)
    {
        let base = case.contender("warpforge sm_80").map(|c| c.rate);
        let cells: Vec<String> = LADDER
            .iter()
            .map(|name| match case.contender(name) {
                Some(c) => match base {
                    Some(base) => format!("{:.1} ({:.2}x)", c.rate, c.rate / base),
                    None => format!("{:.1}", c.rate),
                },
                None => "-".to_string(),
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", case.dtype, cells.join(" | "));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_host_bound_when_enqueueing_outlasts_the_spacer_and_the_launches() {
        let mut s = Sample {
            launches: 300,
            enqueue_ms: Some(8.0),
            ..sample(0, 0.01)
        };
        // 300 launches of 10 us behind a 4 ms spacer: the GPU is busy for 7 ms.
        assert!(host_bound(&s, 4.0));
        s.enqueue_ms = Some(6.0);
        assert!(!host_bound(&s, 4.0));
        s.enqueue_ms = None;
        assert!(!host_bound(&s, 4.0));
    }

    fn sample(round: usize, ms: f64) -> Sample {
        Sample {
            enqueue_ms: None,
            round,
            ms,
            launches: 1,
            gpu: None,
        }
    }

    /// The samples of one contender, one per round.
    fn contender(name: &str, detail: &str, times: &[f64]) -> ContenderSamples {
        ContenderSamples {
            name: name.into(),
            detail: detail.into(),
            samples: times
                .iter()
                .enumerate()
                .map(|(round, &ms)| sample(round, ms))
                .collect(),
        }
    }

    /// A GEMM case of 2e9 operations.
    fn case_of(baseline: usize, contenders: Vec<ContenderSamples>) -> Case {
        Case {
            section: "gemm".into(),
            dtype: "f16".into(),
            shape: "1x1x1".into(),
            dims: Some((1, 1, 1)),
            work: 2e9,
            work_unit: WorkUnit::Operations,
            baseline,
            contenders,
            absent: vec![],
            sweeps: vec![],
        }
    }

    #[test]
    fn ratios_pair_samples_of_the_same_round() {
        let case = case_of(
            1,
            vec![
                contender("ours", "", &[1.0, 2.0, 1.0]),
                contender("theirs", "", &[1.1, 2.2, 1.2]),
            ],
        );
        let [ours, theirs] = <[_; 2]>::try_from(case.summary()).unwrap();
        // Rounds' ratios 1.1, 1.1, 1.2: the drift in round 1 hits both.
        assert!((ours.ratio - 1.1).abs() < 1e-12, "{}", ours.ratio);
        assert_eq!(ours.rounds, 3);
        assert_eq!(ours.ratio_interval, None, "3 rounds bound no 95% interval");
        assert_eq!(ours.median_ms, 1.0);
        assert_eq!(ours.spread, 1.0);
        assert!((ours.rate - 2.0).abs() < 1e-12, "2e9 operations in 1 ms");
        assert_eq!(theirs.ratio, 1.0);
    }

    #[test]
    fn a_familys_finalists_are_one_row_the_fastest_by_median() {
        // The baseline is the slower of its name's two: the faster is divided by.
        let case = case_of(
            1,
            vec![
                contender("ours", "a", &[1.2, 1.2, 1.3]),
                contender("theirs", "slow", &[2.4, 2.4, 2.4]),
                contender("ours", "b", &[1.0, 1.1, 1.0]),
                contender("theirs", "fast", &[2.0, 2.2, 2.0]),
            ],
        );
        let [ours, theirs] = <[_; 2]>::try_from(case.summary()).unwrap();
        assert_eq!((ours.detail.as_str(), ours.baseline), ("b", false));
        assert_eq!(ours.others, [("a".to_string(), 1.2)]);
        assert_eq!((theirs.detail.as_str(), theirs.baseline), ("fast", true));
        assert_eq!(theirs.others, [("slow".to_string(), 2.4)]);
        // Rounds' ratios fast / b: 2.0, 2.0, 2.0.
        assert!((ours.ratio - 2.0).abs() < 1e-12, "{}", ours.ratio);
        assert_eq!(theirs.ratio, 1.0);
        let rows = case_rows(&case);
        assert_eq!(rows.lines().count(), 2, "{rows}");
        assert!(
            rows.contains("fastest of 2 timed (next a, +20.0%)"),
            "{rows}"
        );
        let sweep = Sweep {
            chosen: String::new(),
            sampled: vec![("a".into(), 0.9), ("b".into(), 1.0), ("c".into(), 2.0)],
            finalists: vec![("a".into(), 0.0), ("b".into(), 0.0)],
        }
        .timed_in(&case.contenders);
        assert_eq!(sweep.chosen, "b");
        assert_eq!(sweep.finalists, [("a".into(), 1.2), ("b".into(), 1.0)]);
    }

    #[test]
    fn the_median_interval_takes_the_ranks_binomial_odds_allow() {
        let values = |n: usize| -> Vec<f64> { (1..=n).rev().map(|v| v as f64).collect() };
        // n = 5: even the whole range misses the median with odds 2/32 > 5%.
        assert_eq!(median_interval(&values(5)), None);
        // n = 6: the range, 1 - 2/64 = 96.9%.
        assert_eq!(median_interval(&values(6)), Some((1.0, 6.0)));
        // n = 9: ranks 2 and 8, 1 - 2 * 10/512 = 96.1% (rank 3: 82%).
        assert_eq!(median_interval(&values(9)), Some((2.0, 8.0)));
        // n = 41: ranks 14 and 28 (the normal approximation's 20.5 -/+ 6.3).
        assert_eq!(median_interval(&values(41)), Some((14.0, 28.0)));
        assert!((relative_half_width((0.98, 1.02), 1.0) - 0.02).abs() < 1e-12);
    }
}
