//! How `bench` times a comparison, so that the same ratio comes back run after
//! run.
//!
//! What moved the old figures (device run A of session 13, perf/LOG.md: SM
//! clocks beside the GEMM benches at 50 ms): whenever heavy Tensor Core work
//! started on an idle GPU, the driver's power capping (NVML reason
//! `SW power cap`) pulled the SM clock from 1980 MHz down to 1425-1560 MHz for
//! 100-300 ms before it recovered, at a drawn power far below the 700 W limit.
//! A sample of a few launches after an idle gap (a host synchronisation, a
//! download, a sweep's next variant) lands in that dip or not, which is the
//! 20% spread. So:
//!
//! - **The GPU never idles inside a comparison.** Each round's window is
//!   queued behind a [`Spacer`] per contender (a kernel that keeps every
//!   SM's FMA pipes busy for a few milliseconds) while the host enqueues the
//!   window's launches, and the first event is recorded after the spacers;
//!   a window of more launches than the host enqueues during one spacer gets
//!   another spacer (untimed) before each further [`LAUNCHES_PER_SPACER`]
//!   ([`window_parts`]). The samples time back-to-back GPU work, not the
//!   host's launch rate, and the load never steps down.
//! - **Warm-up until the clock settles**: windows of every contender for at
//!   least [`Method::warmup_ms`] of GPU time before the first sample.
//! - **Interleaved rounds**: every round times each contender once, so that a
//!   drift hits every contender alike. Within a round the contenders'
//!   launches alternate in turns of about [`Method::turn_ms`], each timed
//!   apart, all in one window of back-to-back GPU work ([`window`]): under
//!   the power cap the SM clock swings over 100-200 ms (consecutive 20 ms
//!   samples correlated +0.36, then +0.15, -0.13, -0.20 at lags 2-4 in
//!   session 33's H100 runs), so a round that timed each contender in one
//!   block divided samples up to a whole round apart and inherited the
//!   swing; turns a few milliseconds long see the same clock. The orders
//!   follow a Williams design ([`turn_order`]), one row per turn: over a
//!   cycle of turns every contender follows every other equally often. A
//!   turn carries over the state its predecessor left (as a block did,
//!   spacer and all): in session 21's and 22's
//!   H100 runs, where the order only rotated (each contender always behind
//!   the same one), the tuned path's samples of the very variant the sm_90a
//!   path had just run spread 4-10% (interquartile range over the median)
//!   against the sm_90a path's 0.3-3%, and cuBLAS, always behind the tuned
//!   path, spread 4-9%. Balancing the predecessors shares that out instead of
//!   loading it on fixed contenders, the baseline among them.
//! - **Rounds until the ratios are known**: after [`Method::rounds`], rounds
//!   go on while any contender's ratio to the baseline has a 95% confidence
//!   interval wider than [`Method::ratio_ci`] either side of its median (the
//!   interval from order statistics, [`median_interval`]), up to
//!   [`Method::max_rounds`] rounds or [`Method::extra_rounds_ms`] of
//!   samples. The noisy comparisons (the `mma.sync` GEMMs at
//!   large shapes, held at 1455-1650 MHz by the power cap, 12-22% apart
//!   between rounds in session 13's runs) get the rounds they need; the quiet
//!   ones stop at the minimum. Seven rounds' medians of those noisy ratios
//!   moved up to 6.6% between two runs back to back.
//! - **Outpaced finalists drop out**: after the minimum rounds, a finalist
//!   slower than its family's fastest by more than [`OUTPACED_BY`] in every
//!   pairing the interval allows (the lower end of the 95% interval of
//!   their per-round ratio) is no longer timed, so that the rounds the
//!   reported ratios still need cost less. At the default shapes four
//!   finalists per path doubled the samples of a round (session 26), and
//!   rounds the budget cut left wide intervals: 11 of the 14 ratios that
//!   moved more than 3% between session 29's two runs.
//! - **Spread beside each median**: the report gives the median over rounds,
//!   its interval and the spread between rounds, and the SM clock and power
//!   NVML read during each sample ([`super::monitor`]).

use std::time::Instant;

use warpforge::prelude::*;
use warpforge_codegen::KernelDef;

use super::monitor::Monitor;
use super::report::{by_name, median, median_interval, relative_half_width, round_ratios, Sample};

/// The timing parameters of one comparison.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Method {
    /// GPU time every contender runs together before the first sample.
    pub warmup_ms: f64,
    /// GPU time one sample aims at (at least one launch).
    pub sample_ms: f64,
    /// Rounds every comparison runs (one sample per contender each).
    pub rounds: usize,
    /// The most rounds a comparison runs while a ratio's interval is wider
    /// than `ratio_ci` (0 in reports from before it existed: `rounds`).
    #[serde(default)]
    pub max_rounds: usize,
    /// The half-width, relative to the median, that every ratio's 95%
    /// confidence interval is brought within, rounds permitting.
    #[serde(default)]
    pub ratio_ci: f64,
    /// GPU time of a comparison's samples (every contender's) after which
    /// it takes no more rounds than `rounds`: the 16384^3 GEMMs spend ~250 ms
    /// a round, 41 rounds of them a tenth of the default run.
    #[serde(default)]
    pub extra_rounds_ms: f64,
    /// GPU time of the spacer, queued once per contender before each
    /// round's window (before each sample in reports from before windows).
    pub spacer_ms: f64,
    /// GPU time of one contender's turn in a round's window: the
    /// contenders' launches alternate in turns of about this long (0 in
    /// reports from before windows: one block of launches per contender).
    #[serde(default)]
    pub turn_ms: f64,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            warmup_ms: 300.0,
            sample_ms: 20.0,
            rounds: 7,
            max_rounds: 41,
            ratio_ci: 0.01,
            extra_rounds_ms: 4000.0,
            spacer_ms: 4.0,
            turn_ms: 2.0,
        }
    }
}

impl Method {
    /// `rounds` of `sample_ms` samples, no warm-up and no more rounds: for
    /// choosing among contenders, not for reporting them.
    pub fn brief(&self, rounds: usize, sample_ms: f64) -> Method {
        Method {
            warmup_ms: 0.0,
            sample_ms,
            rounds,
            max_rounds: rounds,
            ratio_ci: f64::INFINITY,
            extra_rounds_ms: 0.0,
            spacer_ms: self.spacer_ms,
            turn_ms: self.turn_ms,
        }
    }

    /// The rounds as the report's header gives them.
    pub fn rounds_text(&self) -> String {
        if self.max_rounds > self.rounds {
            format!(
                "{} to {} rounds (more while a ratio's 95% CI is wider than ±{}% and the \
                 samples have taken under {} ms)",
                self.rounds,
                self.max_rounds,
                self.ratio_ci * 100.0,
                self.extra_rounds_ms
            )
        } else {
            format!("{} rounds", self.rounds)
        }
    }

    /// Whether `samples` (per contender, one per round so far) need another
    /// round: under the minimum, or a ratio to the `baseline`'s samples
    /// whose interval is still wider than `ratio_ci`, below the maximum
    /// rounds and `extra_rounds_ms` of samples. Only the ratios the report
    /// gives count: of contenders sharing a name (`names`, a family's
    /// finalists) the one with the lowest median so far, and the baseline
    /// is its name's.
    fn needs_round(
        &self,
        samples: &[Vec<Sample>],
        baseline: Option<usize>,
        names: &[&str],
    ) -> bool {
        // The rounds so far: those of the contenders still timed.
        let Some(done) = samples.iter().map(Vec::len).max() else {
            return false;
        };
        if done < self.rounds {
            return true;
        }
        let sampled_ms: f64 = samples
            .iter()
            .flatten()
            .map(|s| s.ms * f64::from(s.launches))
            .sum();
        if done >= self.max_rounds || sampled_ms >= self.extra_rounds_ms {
            return false;
        }
        let Some(baseline) = baseline else {
            return false;
        };
        let medians: Vec<f64> = samples
            .iter()
            .map(|own| median(own.iter().map(|s| s.ms).collect()))
            .collect();
        let standing: Vec<(usize, bool)> = by_name(names, &medians)
            .iter()
            .map(|group| (group[0], group.contains(&baseline)))
            .collect();
        let Some(&(baseline, _)) = standing.iter().find(|(_, is_baseline)| *is_baseline) else {
            return false;
        };
        standing
            .iter()
            .filter(|(_, is_baseline)| !is_baseline)
            .any(|&(index, _)| {
                let ratios = round_ratios(&samples[index], &samples[baseline]);
                let center = median(ratios.clone());
                median_interval(&ratios)
                    .is_none_or(|interval| relative_half_width(interval, center) > self.ratio_ci)
            })
    }
}

/// Busy work for every SM: four independent FMA chains per thread, `iters`
/// steps long, one result per thread written so that nothing is removed.
#[kernel(arch(sm_70, sm_80, sm_90), block(256))]
pub fn spacer_fma(x: &mut [f32], iters: u32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    let mut a = x[i];
    let mut b = a + 1.0;
    let mut c = a + 2.0;
    let mut d = a + 3.0;
    for _ in 0..iters {
        a = a * 0.9999 + 0.0001;
        b = b * 0.9999 + 0.0001;
        c = c * 0.9999 + 0.0001;
        d = d * 0.9999 + 0.0001;
    }
    x[i] = a + b + c + d;
}

/// A kernel of a chosen GPU time that occupies every SM, queued before a
/// sample so that the host enqueues the sample while the GPU is busy.
pub struct Spacer {
    x: DeviceBuffer<f32>,
    grid: Grid,
    iters: u32,
}

/// Blocks of the spacer per SM: enough warps to fill the FMA pipes.
const SPACER_BLOCKS_PER_SM: u32 = 8;

impl Spacer {
    /// A spacer that runs about `ms` on this GPU (calibrated once).
    pub fn new(rt: &Runtime, ms: f64) -> Result<Spacer, Error> {
        let blocks = rt.device().sm_count.max(1) * SPACER_BLOCKS_PER_SM;
        let threads = blocks as usize * 256;
        let mut spacer = Spacer {
            x: rt.upload(&vec![0.5f32; threads])?,
            grid: Grid::blocks([blocks, 1, 1]),
            iters: 1 << 14,
        };
        spacer.run(rt)?;
        let probe_ms = f64::from(rt.time_ms(|rt| spacer.run(rt))?).max(1e-3);
        let iters = f64::from(spacer.iters) * ms / probe_ms;
        spacer.iters = iters.clamp(1.0, f64::from(u32::MAX)) as u32;
        Ok(spacer)
    }

    /// Enqueues the spacer.
    pub fn run(&mut self, rt: &Runtime) -> Result<(), Error> {
        spacer_fma::launch(rt, self.grid, &mut self.x, self.iters)
    }
}

/// Enqueues one launch of a contender (no synchronisation).
pub type Launch<'a> = Box<dyn FnMut(&Runtime) -> Result<(), Error> + 'a>;

/// One side of a comparison: what it is and how to launch it once.
pub struct Contender<'a> {
    /// What is timed, e.g. "warpforge sm_90a" or "cuBLAS GemmEx".
    pub name: String,
    /// The variant or library call behind it, for the report.
    pub detail: String,
    pub launch: Launch<'a>,
}

/// Times `contenders` by `method` ([module docs](self)): per contender, one
/// [`Sample`] per round, each the GPU time per launch of its launches in the
/// round's window ([`window`]), with the SM clock and power the monitor read
/// while the window ran. The ratios whose intervals decide the rounds divide
/// by the contender at `baseline` (None: the minimum rounds only).
pub fn compare(
    rt: &Runtime,
    spacer: &mut Spacer,
    monitor: &Monitor,
    method: &Method,
    baseline: Option<usize>,
    contenders: &mut [Contender<'_>],
) -> Result<Vec<Vec<Sample>>, Error> {
    // One timed launch each (after one untimed: the first loads the module)
    // gives the launches that fill `sample_ms`. Without a warm-up (a sweep's
    // brief method), a launch that fills a sample alone is the first
    // round's sample: timing another would take the same launch again, 140
    // ms for the slowest of a 16384^3 sweep's variants.
    let mut batch = Vec::with_capacity(contenders.len());
    let mut first: Vec<Option<Sample>> = Vec::with_capacity(contenders.len());
    for contender in contenders.iter_mut() {
        (contender.launch)(rt)?;
        let (ms, enqueue_ms, window) = timed(rt, spacer, 1, &mut contender.launch)?;
        let n = launches_for(method.sample_ms, ms);
        batch.push(n);
        first.push((method.warmup_ms <= 0.0 && n == 1).then(|| Sample {
            round: 0,
            ms,
            launches: 1,
            gpu: monitor.during(window),
            enqueue_ms: Some(enqueue_ms),
        }));
    }
    let everyone: Vec<usize> = (0..contenders.len()).collect();
    let mut warm_ms = 0.0;
    while warm_ms < method.warmup_ms {
        let (timings, _) = window(rt, spacer, method, 0, &everyone, &batch, contenders)?;
        warm_ms += timings
            .iter()
            .zip(&batch)
            .map(|(turns, &n)| turns.ms * f64::from(n))
            .sum::<f64>();
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); contenders.len()];
    let names: Vec<String> = contenders.iter().map(|c| c.name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut round = 0;
    let mut retired = vec![false; contenders.len()];
    while method.needs_round(&samples, baseline, &names) {
        if round >= method.rounds {
            for (retired, outpaced) in retired.iter_mut().zip(outpaced(&samples, &names)) {
                *retired |= outpaced;
            }
        }
        let mut timed_now = Vec::new();
        for index in (0..contenders.len()).filter(|&i| !retired[i]) {
            match first[index].take() {
                Some(sample) => samples[index].push(sample),
                None => timed_now.push(index),
            }
        }
        if timed_now.is_empty() {
            round += 1;
            continue;
        }
        let (timings, host_window) =
            window(rt, spacer, method, round, &timed_now, &batch, contenders)?;
        let gpu = monitor.during(host_window);
        for (&index, turns) in timed_now.iter().zip(timings) {
            samples[index].push(Sample {
                round,
                ms: turns.ms,
                launches: batch[index],
                gpu,
                enqueue_ms: Some(turns.enqueue_ms),
            });
        }
        round += 1;
    }
    Ok(samples)
}

/// Turns per window: each about [`Method::turn_ms`] of a contender's
/// launches, and no more than the most launches of a contender (`batch`).
/// A contender with fewer launches than turns (a launch longer than a turn)
/// takes part in as many turns as it has launches, so that one slow
/// contender does not turn the others' window back into blocks. Reports
/// from before windows (`turn_ms` 0) had one turn.
fn turns_per_window(method: &Method, batch: impl Iterator<Item = u32>) -> u32 {
    let most = batch.max().unwrap_or(1).max(1);
    if method.turn_ms <= 0.0 {
        return 1;
    }
    ((method.sample_ms / method.turn_ms).round() as u32).clamp(1, most)
}

/// What a [`window`] measured of one contender over its turns.
struct Turns {
    /// GPU milliseconds per launch.
    ms: f64,
    /// Host milliseconds its launches took to enqueue.
    enqueue_ms: f64,
}

/// One part of a round's window, in the order the GPU runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// A spacer, not timed: the host enqueues the pieces up to the next
    /// spacer while it runs.
    Spacer,
    /// `launches` of the contender at `place` (in the window's `timed`).
    Piece { place: usize, launches: u32 },
}

/// The parts of round `round`'s window over contenders launched `batch`
/// times each: their launches spread evenly over [`turns_per_window`]
/// turns, each turn one piece of every contender with launches in it, in
/// the order of a Williams design row per turn ([`turn_order`]); and a
/// spacer wherever the pieces since the last spacer (or the window's start,
/// behind the spacers [`window`] queues first) would pass
/// [`LAUNCHES_PER_SPACER`]. A window holds up to that many launches per
/// contender: queued all at once, the host fell behind the GPU at small
/// shapes (below).
fn window_parts(method: &Method, round: usize, batch: &[u32]) -> Vec<Part> {
    let turns = turns_per_window(method, batch.iter().copied());
    let pieces = (0..turns).flat_map(|turn| {
        let row = round * turns as usize + turn as usize;
        turn_order(batch.len(), row).into_iter().map(move |place| {
            let n = u64::from(batch[place]);
            let share = |turn: u32| n * u64::from(turn) / u64::from(turns);
            (place, (share(turn + 1) - share(turn)) as u32)
        })
    });
    let mut parts = Vec::new();
    let mut queued = 0;
    for (place, launches) in pieces.filter(|&(_, launches)| launches > 0) {
        if queued > 0 && queued + launches > LAUNCHES_PER_SPACER {
            parts.push(Part::Spacer);
            queued = 0;
        }
        queued += launches;
        parts.push(Part::Piece { place, launches });
    }
    parts
}

/// One round's window over the contenders at `timed` (indices into
/// `contenders`), each launched `batch[index]` times, as [`window_parts`]
/// lays it out, behind one spacer per contender (the GPU time a spacer per
/// sample took); each piece is timed apart ([`Runtime::time_parts_ms`]). A
/// swing of the SM clock, 100-200 ms long under the power cap (perf/LOG.md,
/// session 33), then reaches every contender of the window alike instead of
/// the one whose block of launches it fell on.
///
/// The spacers inside the window keep the GPU from waiting on the host. At
/// 512^3 a launch took 4-6 us of GPU time and 7-13 us of host time to
/// enqueue (session 35's H100 runs), and ten contenders' 3,000 launches
/// went in one window: the host, blocked while the launch queue was full,
/// then fell behind, the window's last pieces timed the host's launch rate,
/// and the per-round ratios spread 7% in one run against 0.2% in the
/// other (whose host enqueued faster). Behind each spacer the host has a
/// spacer's time to enqueue at most [`LAUNCHES_PER_SPACER`], as a block of
/// launches had before windows. Returns the [`Turns`] of each contender at
/// `timed` and the host's window around it all.
fn window(
    rt: &Runtime,
    spacer: &mut Spacer,
    method: &Method,
    round: usize,
    timed: &[usize],
    batch: &[u32],
    contenders: &mut [Contender<'_>],
) -> Result<(Vec<Turns>, (Instant, Instant)), Error> {
    let launches: Vec<u32> = timed.iter().map(|&index| batch[index]).collect();
    let parts = window_parts(method, round, &launches);
    for _ in timed {
        spacer.run(rt)?;
    }
    let started = Instant::now();
    let mut enqueue_ms = vec![0.0; timed.len()];
    let part_ms = rt.time_parts_ms(parts.len(), |rt, part| match parts[part] {
        Part::Spacer => spacer.run(rt),
        Part::Piece { place, launches } => {
            let enqueueing = Instant::now();
            let launch = &mut contenders[timed[place]].launch;
            (0..launches).try_for_each(|_| launch(rt))?;
            enqueue_ms[place] += enqueueing.elapsed().as_secs_f64() * 1e3;
            Ok(())
        }
    })?;
    let mut gpu_ms = vec![0.0; timed.len()];
    for (part, ms) in parts.iter().zip(part_ms) {
        if let Part::Piece { place, .. } = *part {
            gpu_ms[place] += f64::from(ms);
        }
    }
    let timings = gpu_ms
        .iter()
        .zip(&launches)
        .zip(enqueue_ms)
        .map(|((ms, &n), enqueue_ms)| Turns {
            ms: ms / f64::from(n),
            enqueue_ms,
        })
        .collect();
    Ok((timings, (started, Instant::now())))
}

/// How much slower than the fastest of its name a finalist must be, at the
/// lower end of the 95% interval of their per-round ratio, to be no longer
/// timed ([`outpaced`]). Above zero, so that a finalist whose median stops
/// moving cannot end below the fastest's as that one's rounds go on.
pub const OUTPACED_BY: f64 = 0.02;

/// Per contender, whether it shares its name (`names`: a family's
/// finalists) with a faster one by more than [`OUTPACED_BY`] in the
/// rounds both have, with 95% confidence (at 7 rounds: in every round).
fn outpaced(samples: &[Vec<Sample>], names: &[&str]) -> Vec<bool> {
    let medians: Vec<f64> = samples
        .iter()
        .map(|own| median(own.iter().map(|s| s.ms).collect()))
        .collect();
    let mut outpaced = vec![false; samples.len()];
    for group in by_name(names, &medians) {
        let fastest = group[0];
        for &index in &group[1..] {
            // This one's time over the fastest's, round by round: above 1 is slower.
            let slowdowns = round_ratios(&samples[fastest], &samples[index]);
            outpaced[index] =
                median_interval(&slowdowns).is_some_and(|(low, _)| low > 1.0 + OUTPACED_BY);
        }
    }
    outpaced
}

/// The order in which round `round` times `count` contenders: row
/// `round` of a Williams design (a Latin square balanced for first-order
/// carry-over), repeating every `count` rounds for an even count and every
/// `2 * count` for an odd one. Over such a cycle each contender takes each
/// place equally often and follows each other contender equally often.
pub fn turn_order(count: usize, round: usize) -> Vec<usize> {
    if count == 0 {
        return Vec::new();
    }
    // First row 0, 1, n-1, 2, n-2, ...; row r adds r (mod n); an odd count
    // also needs each row reversed, its second half-cycle.
    let first = (0..count).map(|place| match place {
        0 => 0,
        odd if !odd.is_multiple_of(2) => odd.div_ceil(2),
        even => count - even / 2,
    });
    let cycle = if count.is_multiple_of(2) {
        count
    } else {
        2 * count
    };
    let row = round % cycle;
    let mut order: Vec<usize> = first.map(|c| (c + row) % count).collect();
    if row >= count {
        order.reverse();
    }
    order
}

/// Launches per sample: as many as fill `sample_ms`, at least one, and few
/// enough that the host enqueues them while a spacer runs.
fn launches_for(sample_ms: f64, launch_ms: f64) -> u32 {
    (sample_ms / launch_ms.max(1e-4)).clamp(1.0, f64::from(LAUNCHES_PER_SPACER)) as u32
}

/// The most launches queued behind one spacer: at about 10 us of host time
/// per launch, 300 enqueue within a 4 ms spacer.
const LAUNCHES_PER_SPACER: u32 = 300;

/// GPU milliseconds per launch of `n` back-to-back launches queued behind the
/// spacer, the host's milliseconds to enqueue them, and the host's window
/// around them.
fn timed(
    rt: &Runtime,
    spacer: &mut Spacer,
    n: u32,
    launch: &mut (dyn FnMut(&Runtime) -> Result<(), Error> + '_),
) -> Result<(f64, f64, (Instant, Instant)), Error> {
    spacer.run(rt)?;
    let started = Instant::now();
    let mut enqueue_ms = 0.0;
    let ms = rt.time_ms(|rt| {
        let enqueued = (0..n).try_for_each(|_| launch(rt));
        enqueue_ms = started.elapsed().as_secs_f64() * 1e3;
        enqueued
    })?;
    Ok((
        f64::from(ms) / f64::from(n),
        enqueue_ms,
        (started, Instant::now()),
    ))
}

/// One of `count` disjoint parts of a list (every `count`-th item from
/// `index`), which `count` processes load at once: the driver's JIT cache
/// on disk then holds every module for the process that times them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole list.
    pub const ALL: Shard = Shard { index: 0, count: 1 };
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N`, with `I < N`.
    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if index < count => Ok(Shard { index, count }),
            _ => Err(format!(
                "`{text}` is not a shard: write I/N with I below N, e.g. 0/16"
            )),
        }
    }
}

/// Loads the variants of `kernels` in `shard` on `rt` (the driver
/// JIT-compiles each module) on every core (rayon's pool), before anything
/// is timed: the GEMM families' variants took 188 s on one thread of an H100
/// with the JIT cache empty, and 216 s on 16 (perf/LOG.md, sessions 20 and
/// 21: the JIT compiles one module at a time in a process), a third of the
/// 10 minutes the default run has. A variant the GPU cannot run is left to
/// the sweep, which reports it. Returns the variants loaded, the variants
/// of the shard, the seconds it took and the threads.
pub fn preload(rt: &Runtime, kernels: &[&KernelDef], shard: Shard) -> (usize, usize, f64, usize) {
    use rayon::prelude::*;
    let variants: Vec<(&KernelDef, Vec<i64>)> = kernels
        .iter()
        .flat_map(|&def| def.variants().into_iter().map(move |consts| (def, consts)))
        .enumerate()
        .filter(|(at, _)| at % shard.count == shard.index)
        .map(|(_, variant)| variant)
        .collect();
    let started = Instant::now();
    let loaded = variants
        .par_iter()
        .filter(|(def, consts)| rt.variant_resources(def, consts).is_ok())
        .count();
    (
        loaded,
        variants.len(),
        started.elapsed().as_secs_f64(),
        rayon::current_num_threads(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_fills_its_time_within_the_spacer_limit() {
        assert_eq!(launches_for(20.0, 2.0), 10);
        assert_eq!(launches_for(20.0, 40.0), 1);
        assert_eq!(launches_for(20.0, 0.001), LAUNCHES_PER_SPACER);
        assert_eq!(launches_for(20.0, 0.0), LAUNCHES_PER_SPACER);
    }

    #[test]
    fn turn_orders_balance_places_and_predecessors() {
        for count in 1..=7_usize {
            let cycle = if count.is_multiple_of(2) {
                count
            } else {
                2 * count
            };
            let mut places = vec![vec![0; count]; count];
            let mut follows = vec![vec![0; count]; count];
            for round in 0..cycle {
                let order = turn_order(count, round);
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..count).collect::<Vec<_>>(), "{count}: {order:?}");
                for (place, &contender) in order.iter().enumerate() {
                    places[contender][place] += 1;
                }
                for pair in order.windows(2) {
                    follows[pair[0]][pair[1]] += 1;
                }
                // The cycle repeats.
                assert_eq!(order, turn_order(count, round + cycle));
            }
            let per_place = cycle / count;
            assert!(
                places.iter().flatten().all(|&n| n == per_place),
                "{count}: {places:?}"
            );
            let per_pair = cycle / count;
            for (a, row) in follows.iter().enumerate() {
                for (b, &n) in row.iter().enumerate() {
                    assert_eq!(
                        n,
                        if a == b { 0 } else { per_pair },
                        "{count}: {a} before {b}"
                    );
                }
            }
        }
        assert!(turn_order(0, 3).is_empty());
        assert_eq!(turn_order(5, 0), [0, 1, 4, 2, 3]);
    }

    /// `needs_round` over contenders of distinct names.
    fn needs(method: &Method, times: &[&[f64]], baseline: Option<usize>) -> bool {
        let names: Vec<String> = (0..times.len()).map(|i| i.to_string()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        method.needs_round(&rounds_of(times), baseline, &names)
    }

    /// Per contender, a sample per round of the given times.
    fn rounds_of(times: &[&[f64]]) -> Vec<Vec<Sample>> {
        times
            .iter()
            .map(|times| {
                times
                    .iter()
                    .enumerate()
                    .map(|(round, &ms)| Sample {
                        round,
                        ms,
                        launches: 1,
                        gpu: None,
                        enqueue_ms: None,
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn rounds_go_on_while_a_ratio_is_uncertain() {
        let method = Method::default();
        let quiet = [1.0; 7];
        let steady = [2.0, 2.001, 1.999, 2.0, 2.002, 1.998, 2.0];
        let noisy = [2.0, 2.2, 1.8, 2.1, 1.9, 2.3, 1.7];
        // Under the minimum, every comparison goes on.
        assert!(needs(&method, &[&quiet[..3], &steady[..3]], Some(0)));
        // At the minimum, a ratio within ±1% stops it, a wider one does not.
        assert!(!needs(&method, &[&quiet, &steady], Some(0)));
        assert!(needs(&method, &[&quiet, &steady, &noisy], Some(0)));
        // The baseline's own noise counts: it is in every ratio.
        assert!(needs(&method, &[&noisy, &steady], Some(0)));
        // Without a baseline, or at the maximum, it stops.
        assert!(!needs(&method, &[&noisy, &steady], None));
        let capped = Method {
            max_rounds: 7,
            ..method
        };
        assert!(!needs(&capped, &[&quiet, &noisy], Some(0)));
        // Nor once the samples have taken `extra_rounds_ms` (here 7 x 3 ms).
        let brief = Method {
            extra_rounds_ms: 21.0,
            ..method
        };
        assert!(!needs(&brief, &[&quiet, &noisy], Some(0)));
        let longer = Method {
            extra_rounds_ms: 22.0,
            ..method
        };
        assert!(needs(&longer, &[&quiet, &noisy], Some(0)));
        assert!(!method.needs_round(&[], Some(0), &[]));
        // Of a family's finalists only the fastest so far counts: a slower,
        // noisy one does not hold the comparison; the fastest noisy one does.
        let slower = [3.0, 3.3, 2.7, 3.1, 2.9, 3.4, 2.6];
        let samples = rounds_of(&[&quiet, &steady, &slower]);
        assert!(!method.needs_round(&samples, Some(0), &["base", "ours", "ours"]));
        assert!(method.needs_round(&samples, Some(0), &["base", "ours", "other"]));
        let samples = rounds_of(&[&quiet, &slower, &noisy]);
        assert!(method.needs_round(&samples, Some(0), &["base", "ours", "ours"]));
    }

    /// A spacer of one block and one step (interpreted, a calibrated one
    /// takes a minute).
    fn interpreted_spacer(rt: &Runtime) -> Spacer {
        Spacer {
            x: rt.upload(&[0.5f32; 256]).unwrap(),
            grid: Grid::blocks([1, 1, 1]),
            iters: 1,
        }
    }

    /// A contender of `name` (no detail) whose launch is `launch`.
    fn contender<'a>(
        name: &str,
        launch: impl FnMut(&Runtime) -> Result<(), Error> + 'a,
    ) -> Contender<'a> {
        Contender {
            name: name.into(),
            detail: String::new(),
            launch: Box::new(launch),
        }
    }

    /// [`compare`] on the interpreter, whose clock times host work.
    fn compare_interpreted(
        method: &Method,
        baseline: Option<usize>,
        contenders: &mut [Contender<'_>],
    ) -> Vec<Vec<Sample>> {
        let rt = Runtime::interpreter();
        let mut spacer = interpreted_spacer(&rt);
        let monitor = Monitor::start(&rt);
        compare(&rt, &mut spacer, &monitor, method, baseline, contenders).unwrap()
    }

    #[test]
    fn a_finalist_slower_in_every_round_is_outpaced() {
        let fastest = [1.0; 7];
        let close = [1.01; 7];
        let slower = [1.05; 7];
        let once_level = [1.05, 1.05, 1.0, 1.05, 1.05, 1.05, 1.05];
        let samples = rounds_of(&[&fastest, &close, &slower, &once_level, &slower]);
        // Within OUTPACED_BY, or level in one of seven rounds, stays; a
        // contender of another name is never outpaced.
        assert_eq!(
            outpaced(&samples, &["ours", "ours", "ours", "ours", "other"]),
            [false, false, true, false, false]
        );
        // Under six rounds the median has no 95% interval: nothing is outpaced.
        let short = rounds_of(&[&fastest[..5], &slower[..5]]);
        assert_eq!(outpaced(&short, &["ours", "ours"]), [false, false]);
    }

    #[test]
    fn an_outpaced_finalist_is_not_timed_after_the_minimum_rounds() {
        // The interpreter times host work: a baseline and two finalists of
        // one name, the second 25 times as slow (so that a sleep overrun on
        // a loaded machine cannot bring it within 2% in any round: at five
        // times, three busy loops beside the tests on two cores did).
        let sleeper = |ms: u64| {
            move |_: &Runtime| {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(())
            }
        };
        let mut contenders = [
            contender("base", sleeper(1)),
            contender("ours", sleeper(1)),
            contender("ours", sleeper(25)),
        ];
        // Every ratio stays "uncertain" (no interval is within 0), so the
        // comparison runs to its maximum rounds.
        let method = Method {
            warmup_ms: 0.0,
            sample_ms: 1.0,
            rounds: 7,
            max_rounds: 10,
            ratio_ci: 0.0,
            extra_rounds_ms: f64::INFINITY,
            spacer_ms: 0.0,
            turn_ms: 0.5,
        };
        let samples = compare_interpreted(&method, Some(0), &mut contenders);
        let rounds: Vec<usize> = samples.iter().map(Vec::len).collect();
        assert_eq!(rounds, [10, 10, 7]);
    }

    /// The marks a window of `window_parts(method, round, launches)` logs,
    /// `marks[place]` per launch of the contender at `place`.
    fn window_log(method: &Method, round: usize, launches: &[u32], marks: &[char]) -> String {
        window_parts(method, round, launches)
            .into_iter()
            .filter_map(|part| match part {
                Part::Piece { place, launches } => {
                    Some(marks[place].to_string().repeat(launches as usize))
                }
                Part::Spacer => None,
            })
            .collect()
    }

    #[test]
    fn a_window_alternates_the_contenders_in_turns() {
        // Launches that take (almost) no time: up to 300 (the most) fill a
        // 20 ms sample, spread over 20 / 2 = 10 turns. How many is the
        // interpreter's clock's call: a loaded machine times fewer.
        let log = std::cell::RefCell::new(String::new());
        let logger = |mark: char| {
            let log = &log;
            move |_: &Runtime| {
                log.borrow_mut().push(mark);
                Ok(())
            }
        };
        let mut contenders = [contender("a", logger('a')), contender("b", logger('b'))];
        let method = Method {
            warmup_ms: 0.0,
            sample_ms: 20.0,
            turn_ms: 2.0,
            ..Method::default().brief(1, 20.0)
        };
        let samples = compare_interpreted(&method, Some(0), &mut contenders);
        let launches: Vec<u32> = samples.iter().map(|own| own[0].launches).collect();
        assert!(
            launches.iter().all(|&n| (10..=300).contains(&n)),
            "{launches:?}"
        );
        // Two launches each to calibrate, then the window: a and b
        // alternating in pieces, in the order of each turn's row.
        let log = log.borrow().clone();
        assert_eq!(&log[..4], "aabb");
        assert_eq!(log[4..], window_log(&method, 0, &launches, &['a', 'b']));
        // Adjacent pieces of one contender (where one turn ends and the next
        // begins with it) run together: at least 10 runs of each.
        let runs = merged_runs(log[4..].chars().map(|c| (c, 1)));
        assert!(runs.len() >= 10, "{runs:?}");
    }

    #[test]
    fn a_contender_slower_than_a_turn_takes_one_turn_of_the_window() {
        let log = std::cell::RefCell::new(String::new());
        // `a` takes (almost) no time: up to 300 launches in 10 turns; `c`
        // sleeps 25 ms, longer than a sample: one launch, in the last turn.
        let mut contenders = [
            contender("a", |_: &Runtime| {
                log.borrow_mut().push('a');
                Ok(())
            }),
            contender("c", |_: &Runtime| {
                log.borrow_mut().push('c');
                std::thread::sleep(std::time::Duration::from_millis(25));
                Ok(())
            }),
        ];
        // A warm-up window, then one round's: both in round 0's turn rows.
        let method = Method {
            warmup_ms: 0.001,
            ..Method::default().brief(1, 20.0)
        };
        let samples = compare_interpreted(&method, None, &mut contenders);
        let a = samples[0][0].launches;
        assert!((10..=300).contains(&a), "{a}");
        assert_eq!(samples[1][0].launches, 1);
        assert!(samples[1][0].ms >= 25.0, "{:?}", samples[1]);
        let window = window_log(&method, 0, &[a, 1], &['a', 'c']);
        // `c` once, after the nine turns of `a` alone.
        let before_c = window.find('c').unwrap();
        assert_eq!(window.matches('c').count(), 1);
        assert!(before_c as u32 >= a * 9 / 10, "{window}");
        assert_eq!(*log.borrow(), format!("aacc{window}{window}"));
    }

    /// Runs of one mark, with adjacent runs of the same mark joined.
    fn merged_runs(runs: impl IntoIterator<Item = (char, usize)>) -> Vec<(char, usize)> {
        let mut merged: Vec<(char, usize)> = Vec::new();
        for (mark, n) in runs {
            match merged.last_mut() {
                Some((last, m)) if *last == mark => *m += n,
                _ => merged.push((mark, n)),
            }
        }
        merged
    }

    #[test]
    fn windows_have_a_turn_per_turn_ms_up_to_the_most_launches() {
        let method = Method::default();
        // 20 ms samples in 2 ms turns: 10 turns, fewer where no contender
        // has as many launches (each launch is longer than a turn).
        assert_eq!(turns_per_window(&method, [300, 40].into_iter()), 10);
        assert_eq!(turns_per_window(&method, [300, 1].into_iter()), 10);
        assert_eq!(turns_per_window(&method, [4, 2].into_iter()), 4);
        assert_eq!(turns_per_window(&method, [1, 1].into_iter()), 1);
        assert_eq!(turns_per_window(&method, std::iter::empty()), 1);
        let blocks = Method {
            turn_ms: 0.0,
            ..method
        };
        assert_eq!(turns_per_window(&blocks, [300, 300].into_iter()), 1);
    }

    #[test]
    fn a_window_puts_a_spacer_before_every_300_launches() {
        let method = Method::default();
        // Ten contenders at 512^3: 300 launches each, in 10 turns of 30.
        let parts = window_parts(&method, 3, &[300; 10]);
        let mut since_spacer = 0;
        let mut launched = [0; 10];
        for part in &parts {
            match *part {
                Part::Spacer => since_spacer = 0,
                Part::Piece { place, launches } => {
                    since_spacer += launches;
                    launched[place] += launches;
                    assert!(since_spacer <= LAUNCHES_PER_SPACER, "{parts:?}");
                }
            }
        }
        assert_eq!(launched, [300; 10]);
        // One turn of 300 launches behind each spacer: nine inside the
        // window, the first turn behind the spacers queued before it.
        let spacers = parts.iter().filter(|&&part| part == Part::Spacer).count();
        assert_eq!((parts.len(), spacers), (109, 9));
        let turn = |turn: usize| {
            turn_order(10, 3 * 10 + turn)
                .into_iter()
                .map(|place| Part::Piece {
                    place,
                    launches: 30,
                })
        };
        let expected: Vec<Part> = (0..10)
            .flat_map(|t| (t > 0).then_some(Part::Spacer).into_iter().chain(turn(t)))
            .collect();
        assert_eq!(parts, expected);
        // Large shapes (a few launches per sample) have no spacer inside.
        let parts = window_parts(&method, 0, &[8, 3, 1]);
        assert!(!parts.contains(&Part::Spacer), "{parts:?}");
        assert_eq!(parts.len(), 8 + 3 + 1);
        // 450 launches in turns of 30 + 15: a turn is cut where its next
        // piece would pass the bound, after exactly 300.
        let parts = window_parts(&method, 0, &[300, 150]);
        let cut = parts.iter().position(|&part| part == Part::Spacer);
        let before: u32 = parts[..cut.unwrap()]
            .iter()
            .map(|part| match part {
                Part::Piece { launches, .. } => *launches,
                Part::Spacer => unreachable!("one spacer: {parts:?}"),
            })
            .sum();
        assert_eq!(before, 300);
        assert_eq!(
            parts.iter().filter(|&&part| part == Part::Spacer).count(),
            1
        );
    }

    #[test]
    fn a_sweep_takes_a_launch_that_fills_its_sample_as_the_sample() {
        // A contender whose launch takes 3 ms of host time (the
        // interpreter's clock), more than a 2 ms sample.
        let launches = std::cell::Cell::new(0);
        let slow = |_: &Runtime| {
            launches.set(launches.get() + 1);
            std::thread::sleep(std::time::Duration::from_millis(3));
            Ok(())
        };
        let method = Method::default();
        let run = |method: &Method| {
            launches.set(0);
            let mut contenders = [contender("slow", slow)];
            let samples = compare_interpreted(method, None, &mut contenders);
            (samples.into_iter().next().unwrap(), launches.get())
        };
        // The untimed launch and the timed one, which is the sample.
        let (samples, count) = run(&method.brief(1, 2.0));
        assert_eq!((samples.len(), samples[0].launches, count), (1, 1, 2));
        assert!(samples[0].ms >= 3.0, "{samples:?}");
        // A sample longer than a launch is timed apart; so is every sample
        // after a warm-up.
        // (20 ms of 3 ms launches: 6, fewer where the calibrating sleep
        // overran on a loaded machine.)
        let (samples, count) = run(&method.brief(1, 20.0));
        assert!((2..=6).contains(&samples[0].launches), "{samples:?}");
        assert_eq!(count, 2 + samples[0].launches);
        let warm = Method {
            warmup_ms: 1.0,
            ..method.brief(1, 2.0)
        };
        assert_eq!(run(&warm).1, 2 + 1 + 1);
    }

    #[test]
    fn preloading_loads_every_variant_once_from_threads() {
        let rt = Runtime::interpreter();
        let kernels = [
            warpforge_kernels::gemm_tc::gemm_f16::def(),
            warpforge_kernels::gemm::gemm_f32::def(),
        ];
        let total: usize = kernels.iter().map(|def| def.variants().len()).sum();
        let (loaded, variants, _, threads) = preload(&rt, &kernels, Shard::ALL);
        assert_eq!((loaded, variants), (total, total));
        assert!(threads >= 1);
        // A second pass (from the cache, on a backend that keeps one) loads them all too.
        assert_eq!(preload(&rt, &kernels, Shard::ALL).0, total);
        // Three shards are the whole list, once.
        let shards: Vec<usize> = (0..3)
            .map(|index| preload(&rt, &kernels, Shard { index, count: 3 }).1)
            .collect();
        assert_eq!(shards.iter().sum::<usize>(), total);
        assert!(shards.iter().all(|&n| n >= total / 3));
        assert_eq!(
            "2/16".parse(),
            Ok(Shard {
                index: 2,
                count: 16
            })
        );
        assert!("16/16"
            .parse::<Shard>()
            .unwrap_err()
            .contains("I/N with I below N"));
    }
}
