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
//! - **The GPU never idles inside a comparison.** Each sample is queued behind
//!   a [`Spacer`] (a kernel that keeps every SM's FMA pipes busy for a few
//!   milliseconds) while the host enqueues the sample's launches, and the
//!   start event is recorded after the spacer: the sample times back-to-back
//!   GPU work, not the host's launch rate, and the load never steps down.
//! - **Warm-up until the clock settles**: the contenders run in turn for at
//!   least [`Method::warmup_ms`] of GPU time before the first sample.
//! - **Interleaved rounds**: every round times each contender once, the order
//!   rotating between rounds, so that a drift hits every contender alike; the
//!   ratio of a round compares samples taken a few milliseconds apart.
//! - **Spread beside each median**: the report gives the median over rounds
//!   and the spread between them, and the SM clock and power NVML read during
//!   each sample ([`super::monitor`]).

use std::time::Instant;

use warpforge::prelude::*;

use super::monitor::Monitor;
use super::report::Sample;

/// The timing parameters of one comparison.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Method {
    /// GPU time every contender runs together before the first sample.
    pub warmup_ms: f64,
    /// GPU time one sample aims at (at least one launch).
    pub sample_ms: f64,
    /// Samples per contender, one per round.
    pub rounds: usize,
    /// GPU time of the spacer queued before each sample.
    pub spacer_ms: f64,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            warmup_ms: 300.0,
            sample_ms: 20.0,
            rounds: 7,
            spacer_ms: 4.0,
        }
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
/// [`Sample`] per round, each the GPU time per launch of a batch of
/// back-to-back launches, with the SM clock and power the monitor read while
/// it ran.
pub fn compare(
    rt: &Runtime,
    spacer: &mut Spacer,
    monitor: &Monitor,
    method: &Method,
    contenders: &mut [Contender<'_>],
) -> Result<Vec<Vec<Sample>>, Error> {
    // One timed launch each (after one untimed: the first loads the module)
    // gives the batch that fills `sample_ms`.
    let mut batch = Vec::with_capacity(contenders.len());
    for contender in contenders.iter_mut() {
        (contender.launch)(rt)?;
        let ms = timed(rt, spacer, 1, &mut contender.launch)?.0;
        batch.push(launches_for(method.sample_ms, ms));
    }
    let mut warm_ms = 0.0;
    while warm_ms < method.warmup_ms {
        for (contender, &n) in contenders.iter_mut().zip(&batch) {
            warm_ms += timed(rt, spacer, n, &mut contender.launch)?.0 * n as f64;
        }
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); contenders.len()];
    for round in 0..method.rounds {
        for turn in 0..contenders.len() {
            let index = (turn + round) % contenders.len();
            let n = batch[index];
            let (ms, window) = timed(rt, spacer, n, &mut contenders[index].launch)?;
            samples[index].push(Sample {
                round,
                ms,
                launches: n,
                gpu: monitor.during(window),
            });
        }
    }
    Ok(samples)
}

/// Launches per sample: as many as fill `sample_ms`, at least one, and few
/// enough that the host enqueues them while the spacer runs.
fn launches_for(sample_ms: f64, launch_ms: f64) -> u32 {
    (sample_ms / launch_ms.max(1e-4)).clamp(1.0, MAX_LAUNCHES_PER_SAMPLE) as u32
}

/// At about 10 us of host time per launch, 300 launches enqueue within a 4 ms spacer.
const MAX_LAUNCHES_PER_SAMPLE: f64 = 300.0;

/// GPU milliseconds per launch of `n` back-to-back launches queued behind the
/// spacer, and the host's window around them.
fn timed(
    rt: &Runtime,
    spacer: &mut Spacer,
    n: u32,
    launch: &mut (dyn FnMut(&Runtime) -> Result<(), Error> + '_),
) -> Result<(f64, (Instant, Instant)), Error> {
    spacer.run(rt)?;
    let started = Instant::now();
    let ms = rt.time_ms(|rt| (0..n).try_for_each(|_| launch(rt)))?;
    Ok((f64::from(ms) / f64::from(n), (started, Instant::now())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_fills_its_time_within_the_spacer_limit() {
        assert_eq!(launches_for(20.0, 2.0), 10);
        assert_eq!(launches_for(20.0, 40.0), 1);
        assert_eq!(launches_for(20.0, 0.001), MAX_LAUNCHES_PER_SAMPLE as u32);
        assert_eq!(launches_for(20.0, 0.0), MAX_LAUNCHES_PER_SAMPLE as u32);
    }
}
