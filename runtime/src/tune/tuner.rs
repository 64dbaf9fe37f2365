//! The tuner: prune a family's variants for one call, verify each survivor
//! once, time it, and drop the ones far behind the leader early.
//!
//! Everything that touches a device goes through a [`Testbed`], so the
//! search itself runs the same on simulated timings (the CPU tests) as on a
//! GPU ([`super::GpuTestbed`]).
//!
//! Per candidate, in order (the heuristic default first, so that a good
//! leader exists early; then the family's order):
//! 1. pruning ([`super::prune`]): rules on the kernel, the call and the
//!    compiled variant's resources;
//! 2. verification: one run on the tuning inputs, checked against a
//!    reference by the testbed; a wrong or refused variant never wins;
//! 3. timing: one launch to estimate, so that a sample of `n` back-to-back
//!    launches lasts at least [`TuneOptions::min_sample_ms`]; one sample of
//!    warm-up; [`TuneOptions::early_samples`] samples, after which a
//!    candidate whose best sample is slower than [`TuneOptions::drop_ratio`]
//!    times the leader's median is dropped; otherwise up to
//!    [`TuneOptions::samples`] samples, whose median is its time.

use std::time::{Duration, Instant};

use super::db::Record;
use super::family::{Call, Candidate, Family};
use super::prune::{check_candidate, check_resources, PruneRule, VariantResources};
use crate::device::DeviceInfo;
use crate::Error;

/// Where the tuner builds, checks and times candidates.
pub trait Testbed {
    /// What the device reports about the compiled variant.
    fn resources(&mut self, candidate: &Candidate) -> Result<VariantResources, Error>;
    /// Runs the candidate once on the tuning inputs and checks its output
    /// against a reference: `Ok(Err(why))` when it ran and was wrong.
    fn verify(&mut self, candidate: &Candidate) -> Result<Result<(), String>, Error>;
    /// The time in milliseconds of `launches` back-to-back launches.
    fn time_ms(&mut self, candidate: &Candidate, launches: u32) -> Result<f64, Error>;
}

/// How hard the tuner looks. The defaults tune one GEMM shape on an H200 in
/// seconds and keep measurement noise well under the 3% between close
/// variants that matter.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneOptions {
    /// A sample is as many back-to-back launches as last at least this long
    /// (at most [`MAX_LAUNCHES_PER_SAMPLE`]), so that short kernels are not
    /// measured at the timer's resolution.
    pub min_sample_ms: f64,
    /// Samples taken before a candidate may be dropped.
    pub early_samples: u32,
    /// Samples of a candidate that is not dropped; its time is their median.
    pub samples: u32,
    /// A candidate whose best early sample is slower than this multiple of
    /// the leader's median is dropped.
    pub drop_ratio: f64,
    /// The occupancy floor of pruning rule 5, in warps per SM.
    pub min_warps_per_sm: u32,
}

/// The most launches one sample takes.
pub const MAX_LAUNCHES_PER_SAMPLE: u32 = 1000;

impl Default for TuneOptions {
    fn default() -> TuneOptions {
        TuneOptions {
            min_sample_ms: 2.0,
            early_samples: 3,
            samples: 9,
            drop_ratio: 1.25,
            min_warps_per_sm: 4,
        }
    }
}

impl TuneOptions {
    fn check(&self) -> Result<(), Error> {
        let sane = self.min_sample_ms.is_finite()
            && self.min_sample_ms >= 0.0
            && self.early_samples >= 1
            && self.samples >= self.early_samples
            && self.drop_ratio.is_finite()
            && self.drop_ratio >= 1.0;
        if sane {
            Ok(())
        } else {
            Err(Error::Tune(format!(
                "tuning options {self:?} are inconsistent: min_sample_ms must be finite and \
                 non-negative, 1 <= early_samples <= samples, and drop_ratio finite and at least 1"
            )))
        }
    }
}

/// What became of one candidate.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// Ruled out before anything ran.
    Pruned {
        /// The rule that ruled it out.
        rule: PruneRule,
        /// Why, in words.
        reason: String,
    },
    /// Could not be built or launched, or computed a wrong result.
    Rejected {
        /// What went wrong.
        reason: String,
    },
    /// Stopped after the early samples: far behind the leader.
    Dropped {
        /// Its best sample, per launch, in milliseconds.
        best_ms: f64,
    },
    /// Fully timed.
    Timed {
        /// The median per launch, in milliseconds.
        median_ms: f64,
    },
}

/// The outcome of tuning one call.
#[derive(Clone, Debug)]
pub struct TuneReport {
    /// One per candidate of the family, in the family's order.
    pub statuses: Vec<Status>,
    /// The fastest timed candidate.
    pub winner: usize,
    /// The second-fastest timed candidate.
    pub runner_up: Option<usize>,
    /// The heuristic default for the call.
    pub heuristic: Option<usize>,
    /// Wall-clock time of the whole search.
    pub elapsed: Duration,
}

impl TuneReport {
    /// The median of a fully timed candidate.
    pub fn median_ms(&self, candidate: usize) -> Option<f64> {
        match self.statuses.get(candidate) {
            Some(Status::Timed { median_ms }) => Some(*median_ms),
            _ => None,
        }
    }

    /// What the database stores for this result.
    pub fn record(&self, family: &Family) -> Record {
        let winner = &family.candidates()[self.winner];
        let median_ms = self
            .median_ms(self.winner)
            .expect("the winner is a timed candidate");
        Record {
            runner_up_ms: self.runner_up.and_then(|i| self.median_ms(i)),
            heuristic_ms: self.heuristic.and_then(|i| self.median_ms(i)),
            ..Record::new(winner.name(), winner.consts.clone(), median_ms)
        }
    }
}

/// Tunes `family` for `call` on `device`: prunes, verifies, times, and
/// returns every candidate's fate and the winner. Fails when a driver call
/// fails (the device may be unusable after a fault) or when no candidate
/// could be timed.
pub fn tune(
    family: &Family,
    call: &Call<'_>,
    device: &DeviceInfo,
    testbed: &mut impl Testbed,
    options: &TuneOptions,
) -> Result<TuneReport, Error> {
    options.check()?;
    let start = Instant::now();
    let candidates = family.candidates();
    let mut statuses: Vec<Option<Status>> = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let pruned = match check_candidate(candidate, call, device) {
            Err((rule, reason)) => Some(Status::Pruned { rule, reason }),
            Ok(()) => match testbed.resources(candidate) {
                Ok(resources) => check_resources(&resources, device, options.min_warps_per_sm)
                    .err()
                    .map(|(rule, reason)| Status::Pruned { rule, reason }),
                Err(e) => Some(rejected(e)?),
            },
        };
        statuses.push(pruned);
    }

    let heuristic = family.heuristic(call, device);
    let order: Vec<usize> = heuristic
        .into_iter()
        .chain((0..candidates.len()).filter(|&i| Some(i) != heuristic))
        .filter(|&i| statuses[i].is_none())
        .collect();
    let mut leader: Option<f64> = None;
    for index in order {
        let candidate = &candidates[index];
        let status = match verify(candidate, testbed)? {
            None => measure(candidate, testbed, options, leader)?,
            Some(rejected) => rejected,
        };
        if let Status::Timed { median_ms } = status {
            leader = Some(leader.map_or(median_ms, |l| l.min(median_ms)));
        }
        statuses[index] = Some(status);
    }
    let statuses: Vec<Status> = statuses
        .into_iter()
        .map(|s| s.expect("every candidate is pruned or measured"))
        .collect();

    let mut timed: Vec<(usize, f64)> = statuses
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Status::Timed { median_ms } => Some((i, *median_ms)),
            _ => None,
        })
        .collect();
    // Ties go to the earlier candidate: deterministic.
    timed.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let Some(&(winner, _)) = timed.first() else {
        return Err(no_winner(family, &statuses));
    };
    Ok(TuneReport {
        winner,
        runner_up: timed.get(1).map(|&(i, _)| i),
        heuristic,
        statuses,
        elapsed: start.elapsed(),
    })
}

/// Times every candidate in `indices` fully (no early drop), e.g. to check
/// a tuned winner against an exhaustive sweep. Candidates should have passed
/// [`tune`]'s verification; a non-fatal error rejects one.
pub fn sweep(
    family: &Family,
    indices: &[usize],
    testbed: &mut impl Testbed,
    options: &TuneOptions,
) -> Result<Vec<(usize, Status)>, Error> {
    options.check()?;
    indices
        .iter()
        .map(|&i| Ok((i, measure(&family.candidates()[i], testbed, options, None)?)))
        .collect()
}

/// Runs the testbed's verification of one candidate: `None` when it
/// computed the right result, a [`Status::Rejected`] saying why when it was
/// wrong or refused; a device error ends the caller's work.
pub(super) fn verify(
    candidate: &Candidate,
    testbed: &mut impl Testbed,
) -> Result<Option<Status>, Error> {
    match testbed.verify(candidate) {
        Ok(Ok(())) => Ok(None),
        Ok(Err(why)) => Ok(Some(Status::Rejected {
            reason: format!("wrong result: {why}"),
        })),
        Err(e) => rejected(e).map(Some),
    }
}

/// Times one candidate (see the module documentation); with a `leader`, it
/// may be dropped after the early samples.
pub fn measure(
    candidate: &Candidate,
    testbed: &mut impl Testbed,
    options: &TuneOptions,
    leader: Option<f64>,
) -> Result<Status, Error> {
    match samples(candidate, testbed, options, leader) {
        Ok(status) => Ok(status),
        Err(e) => rejected(e),
    }
}

fn samples(
    candidate: &Candidate,
    testbed: &mut impl Testbed,
    options: &TuneOptions,
    leader: Option<f64>,
) -> Result<Status, Error> {
    let mut time = |launches: u32| -> Result<f64, Error> {
        let ms = testbed.time_ms(candidate, launches)?;
        if ms.is_finite() && ms > 0.0 {
            Ok(ms / f64::from(launches))
        } else {
            Err(Error::Tune(format!(
                "the timer reported {ms} ms for {launches} launch(es) of `{}`: a time must be \
                 finite and positive",
                candidate.name()
            )))
        }
    };
    let estimate = time(1)?;
    let launches = (options.min_sample_ms / estimate)
        .ceil()
        .clamp(1.0, f64::from(MAX_LAUNCHES_PER_SAMPLE)) as u32;
    time(launches)?;
    let mut samples = Vec::with_capacity(options.samples as usize);
    for _ in 0..options.early_samples {
        samples.push(time(launches)?);
    }
    let best = samples.iter().copied().fold(f64::INFINITY, f64::min);
    if leader.is_some_and(|leader| best > options.drop_ratio * leader) {
        return Ok(Status::Dropped { best_ms: best });
    }
    while samples.len() < options.samples as usize {
        samples.push(time(launches)?);
    }
    samples.sort_by(f64::total_cmp);
    Ok(Status::Timed {
        median_ms: samples[samples.len() / 2],
    })
}

/// A candidate that failed: rejected, unless the failure is the device's
/// (a driver error, which may leave the context unusable), which ends the
/// tuning.
fn rejected(e: Error) -> Result<Status, Error> {
    match e {
        Error::Driver { .. } | Error::NoDriver(_) | Error::NoDevice(_) | Error::Wgpu(_) => Err(e),
        other => Ok(Status::Rejected {
            reason: other.to_string(),
        }),
    }
}

/// Why nothing could be timed: a count per fate and the first reasons.
fn no_winner(family: &Family, statuses: &[Status]) -> Error {
    const SHOWN: usize = 3;
    let reasons: Vec<String> = family
        .candidates()
        .iter()
        .zip(statuses)
        .filter_map(|(c, s)| match s {
            Status::Pruned { rule, reason } => Some(format!("{} ({rule}): {reason}", c.name())),
            Status::Rejected { reason } => Some(format!("{}: {reason}", c.name())),
            Status::Dropped { .. } | Status::Timed { .. } => None,
        })
        .collect();
    let more = reasons.len().saturating_sub(SHOWN);
    let mut text = reasons
        .iter()
        .take(SHOWN)
        .map(|r| format!("\n  {r}"))
        .collect::<String>();
    if more > 0 {
        text.push_str(&format!("\n  and {more} more"));
    }
    Error::Tune(format!(
        "no variant of `{}` could be timed for this call ({} candidates):{text}\ncheck the call's \
         arguments against the kernels' `requires`, and that the GPU runs the kernels' targets",
        family.name(),
        statuses.len()
    ))
}
