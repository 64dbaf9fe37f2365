//! [`Dispatcher`]: sends each call of a [`Family`] to the variant tuned for
//! it, with a documented [`MissPolicy`] when nothing was tuned.
//!
//! The first call of a (dtypes, shape bucket, alignments) triple resolves it, from
//! the first of these that gives a winner the family still has and that can
//! take the call (a stored winner that cannot, e.g. one tuned before the
//! kernel's `requires` changed, counts as stale and is not used):
//! 1. the local database's record for the call's key (measured on this
//!    machine, so it beats a shipped one);
//! 2. the shipped record for the key ([`super::ship`]);
//! 3. a record, local or shipped, for the same key except the driver (the
//!    most recent by `tuned_at_unix_s`): [`revalidate`]d against the
//!    family's heuristic default on this driver, the faster verified one
//!    used and recorded under the call's own key, so that the next process
//!    finds it directly. This needs the tuning inputs of
//!    [`Dispatcher::select`]'s `workload` and a backend that times variants
//!    (CUDA); without either, the record is not used;
//! 4. the miss policy's choice.
//!
//! Later calls of the triple find the resolution in an in-memory map: a hash
//! lookup under a read lock, with no allocation.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use hashbrown::{Equivalent, HashMap};

use super::db::{shipped_records, Record, TuneDb};
use super::family::{Call, Candidate, Family, KeyBase};
use super::key::{ShapeBucket, TuneKey};
use super::prune::check_candidate;
use super::testbed::{GpuTestbed, Workload};
use super::tuner::{measure, tune, verify, Status, Testbed, TuneOptions, TuneReport};
use crate::device::DeviceInfo;
use crate::{Error, Runtime};

/// The environment variable that chooses the [`MissPolicy`] of dispatchers
/// created with [`MissPolicy::from_env`]: `heuristic`, `tune` or `nearest`.
pub const MISS_POLICY_ENV: &str = "WARPFORGE_TUNE_MISS";

/// What a dispatcher does for a call the database has no usable winner for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissPolicy {
    /// The family's heuristic default ([`Family::heuristic`]): no delay, no
    /// surprise. The default.
    #[default]
    Heuristic,
    /// Tune now, on inputs of the call's shape (seconds for a large GEMM),
    /// record the winner in the database, and use it. On CUDA and wgpu
    /// alike ([`crate::Runtime::timing_method`] says how it is timed).
    TuneNow,
    /// The winner of the nearest tuned shape bucket with the same GPU,
    /// driver, code generator, family, dtypes and alignments, when it can
    /// take the call; else the heuristic default. Distance is the sum over
    /// m, n and k of |log2| of the ratio of bucket sizes; ties go to the
    /// smaller bucket.
    NearestBucket,
}

impl MissPolicy {
    /// The values [`MISS_POLICY_ENV`] accepts.
    pub const ENV_VALUES: [(&'static str, MissPolicy); 3] = [
        ("heuristic", MissPolicy::Heuristic),
        ("tune", MissPolicy::TuneNow),
        ("nearest", MissPolicy::NearestBucket),
    ];

    /// The policy [`MISS_POLICY_ENV`] names; [`MissPolicy::Heuristic`] when
    /// it is unset or empty. An API caller that passes a policy explicitly
    /// overrides the variable.
    pub fn from_env() -> Result<MissPolicy, Error> {
        MissPolicy::from_env_value(std::env::var(MISS_POLICY_ENV).ok().as_deref())
    }

    /// Reads a value of [`MISS_POLICY_ENV`] (case-insensitive):
    /// [`MissPolicy::Heuristic`] for `None` or an empty value, an
    /// [`Error::Tune`] naming the accepted values for anything else.
    pub fn from_env_value(value: Option<&str>) -> Result<MissPolicy, Error> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(MissPolicy::default());
        };
        Self::ENV_VALUES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(value))
            .map(|&(_, policy)| policy)
            .ok_or_else(|| {
                Error::Tune(format!(
                    "{MISS_POLICY_ENV} is `{value}`, which names no miss policy: set it to \
                     `heuristic`, `tune` or `nearest`, or unset it for `heuristic`"
                ))
            })
    }
}

/// Where a dispatched variant came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The local database's winner for the call's key.
    Database,
    /// The shipped winner for the call's key ([`super::ship`]).
    Shipped,
    /// Another driver's winner for the call's key otherwise equal, re-verified
    /// and re-timed against the heuristic default just now ([`revalidate`]);
    /// the faster one was recorded under the call's key.
    Revalidated {
        /// The driver the record was tuned on ([`TuneKey::driver_version`]).
        driver: &'static str,
        /// Whether its winner was kept (it verified and was not slower than
        /// the heuristic default); otherwise the heuristic default was used.
        kept: bool,
    },
    /// Tuned for this call just now ([`MissPolicy::TuneNow`]), and recorded.
    Tuned,
    /// The database's winner for a nearby shape bucket ([`MissPolicy::NearestBucket`]).
    Nearest(ShapeBucket),
    /// The family's heuristic default.
    Heuristic,
}

/// The variant a call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Index into the family's candidates.
    pub candidate: usize,
    /// How it was chosen.
    pub source: Source,
}

/// How a dispatcher's resolutions went, one count per (dtypes, shape bucket,
/// alignments) triple resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Resolved to the local database's winner.
    pub database: u64,
    /// Resolved to a shipped winner ([`Source::Shipped`]).
    pub shipped: u64,
    /// Resolved by re-validating another driver's winner ([`Source::Revalidated`]).
    pub revalidated: u64,
    /// Tuned on the spot ([`MissPolicy::TuneNow`]).
    pub tuned: u64,
    /// Resolved to a nearby bucket's winner ([`MissPolicy::NearestBucket`]).
    pub nearest: u64,
    /// Resolved to the heuristic default.
    pub heuristic: u64,
    /// Stored winners not used: the family no longer has them, or they
    /// cannot take the call.
    pub stale: u64,
}

impl DispatchStats {
    /// Counts one resolution from `source`.
    fn count(&mut self, source: Source) {
        let counter = match source {
            Source::Database => &mut self.database,
            Source::Shipped => &mut self.shipped,
            Source::Revalidated { .. } => &mut self.revalidated,
            Source::Tuned => &mut self.tuned,
            Source::Nearest(_) => &mut self.nearest,
            Source::Heuristic => &mut self.heuristic,
        };
        *counter += 1;
    }
}

/// Sends the calls of one [`Family`] on one GPU model to their variants.
/// Shareable across threads, and across the runtimes of devices of the
/// model ([`crate::DeviceInfo::same_model`]): [`Dispatcher::select`] tunes
/// or re-validates on the runtime it is given.
pub struct Dispatcher {
    family: Family,
    base: KeyBase,
    device: DeviceInfo,
    policy: MissPolicy,
    resolved: RwLock<HashMap<ResolvedKey, Selection>>,
    /// The database and what happened to it; also serializes resolutions,
    /// so that two threads never tune the same call at once.
    state: Mutex<State>,
}

struct State {
    db: TuneDb,
    stats: DispatchStats,
    warnings: Vec<String>,
    outcomes: Vec<TuneOutcome>,
}

/// One tuning a dispatcher did ([`MissPolicy::TuneNow`]): what it was for
/// and what it found. [`Dispatcher::take_outcomes`] hands them out, e.g. to
/// a tuning CLI's table.
#[derive(Clone, Debug)]
pub struct TuneOutcome {
    /// The call's key, under which the winner was recorded.
    pub key: TuneKey,
    /// Every candidate's fate, the winner, the runner-up and the default.
    pub report: TuneReport,
}

#[derive(Hash, PartialEq, Eq)]
struct ResolvedKey {
    dtypes: String,
    shape: ShapeBucket,
    alignments: Vec<u32>,
}

/// A borrowed [`ResolvedKey`], for lookups without allocating. Hashes as
/// the owned form: the same fields in the same order, and a `Vec` hashes as
/// its slice.
#[derive(Hash)]
struct ResolvedKeyRef<'a> {
    dtypes: &'a str,
    shape: ShapeBucket,
    alignments: &'a [u32],
}

impl Equivalent<ResolvedKey> for ResolvedKeyRef<'_> {
    fn equivalent(&self, key: &ResolvedKey) -> bool {
        self.dtypes == key.dtypes
            && self.shape == key.shape
            && self.alignments == key.alignments.as_slice()
    }
}

impl Dispatcher {
    /// A dispatcher for `family` on `rt`'s device, with the database of its
    /// GPU model in `dir` (or [`super::default_dir`]). A database file that
    /// cannot be used is reported (as a `log` warning and in
    /// [`Dispatcher::warnings`]) and treated as empty; the next tuning result
    /// replaces it.
    pub fn new(
        rt: &Runtime,
        family: Family,
        policy: MissPolicy,
        dir: Option<&Path>,
    ) -> Result<Dispatcher, Error> {
        let device = rt.device().clone();
        let base = KeyBase::of(&device);
        let db = TuneDb::open(dir, &base.gpu)?;
        let warnings: Vec<String> = db.warnings().iter().map(ToString::to_string).collect();
        for warning in &warnings {
            log::warn!("{warning}");
        }
        Ok(Dispatcher {
            family,
            base,
            device,
            policy,
            resolved: RwLock::default(),
            state: Mutex::new(State {
                db,
                stats: DispatchStats::default(),
                warnings,
                outcomes: Vec::new(),
            }),
        })
    }

    /// The family whose calls this dispatcher serves.
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// What it does for a call nothing usable was tuned for.
    pub fn policy(&self) -> MissPolicy {
        self.policy
    }

    /// The variant a selection names.
    pub fn candidate(&self, selection: Selection) -> &Candidate {
        &self.family.candidates()[selection.candidate]
    }

    /// The tuning key of `call` on this dispatcher's device: what the
    /// database stores the call's winner under.
    pub fn key(&self, call: &Call<'_>) -> TuneKey {
        self.family.key(&self.base, call)
    }

    /// The record for `call`'s key: the local database's, else the shipped
    /// one ([`super::ship`]), if any.
    pub fn stored(&self, call: &Call<'_>) -> Option<Record> {
        let key = self.key(call);
        let local = self.state().db.lookup(&key).cloned();
        local.or_else(|| shipped_records().get(&key).cloned())
    }

    /// How the calls resolved so far were resolved.
    pub fn stats(&self) -> DispatchStats {
        self.state().stats
    }

    /// Problems met so far: an unusable database file, a result that could
    /// not be written.
    pub fn warnings(&self) -> Vec<String> {
        self.state().warnings.clone()
    }

    /// The tunings done since the last call, oldest first.
    pub fn take_outcomes(&self) -> Vec<TuneOutcome> {
        std::mem::take(&mut self.state().outcomes)
    }

    /// The variant for `call`. `workload` creates tuning inputs for the
    /// call; it is called at most once, and only when nothing usable is
    /// stored for the call's key and either another driver's record for it
    /// is to be re-validated or the policy is [`MissPolicy::TuneNow`]; its
    /// [`Workload::finish`] runs when the measuring is over. When it fails,
    /// another driver's record is not used and the miss policy applies (for
    /// `TuneNow`, its error is returned). A caller that cannot tune passes
    /// [`no_workload`].
    pub fn select<'w>(
        &self,
        rt: &Runtime,
        call: &Call<'_>,
        workload: impl FnOnce() -> Result<Box<dyn Workload + 'w>, Error>,
    ) -> Result<Selection, Error> {
        if let Some(selection) = self.resolved_for(call) {
            return Ok(selection);
        }
        let mut state = self.state();
        // Another thread may have resolved the call while this one waited.
        if let Some(selection) = self.resolved_for(call) {
            return Ok(selection);
        }
        let selection = self.resolve(&mut state, rt, call, workload)?;
        self.resolved
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                ResolvedKey {
                    dtypes: call.dtypes.to_string(),
                    shape: call.shape,
                    alignments: call.alignments.to_vec(),
                },
                selection,
            );
        Ok(selection)
    }

    fn resolved_for(&self, call: &Call<'_>) -> Option<Selection> {
        let probe = ResolvedKeyRef {
            dtypes: call.dtypes,
            shape: call.shape,
            alignments: call.alignments,
        };
        // A poisoned map is still whole: entries are inserted whole.
        let map = self.resolved.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&probe).copied()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent if a holder panicked: each update is one assignment.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn resolve<'w>(
        &self,
        state: &mut State,
        rt: &Runtime,
        call: &Call<'_>,
        workload: impl FnOnce() -> Result<Box<dyn Workload + 'w>, Error>,
    ) -> Result<Selection, Error> {
        let key = self.key(call);
        let foreign = {
            let shipped = shipped_records();
            let exact = [
                (state.db.lookup(&key), Source::Database),
                (shipped.get(&key), Source::Shipped),
            ];
            for (record, source) in exact {
                let Some(record) = record else { continue };
                match self.usable(record, call) {
                    Some(candidate) => {
                        state.stats.count(source);
                        return Ok(Selection { candidate, source });
                    }
                    None => state.stats.stale += 1,
                }
            }
            self.foreign(state.db.records().chain(shipped.iter()), &key, call)
        };
        let needs_inputs = foreign.is_some() || self.policy == MissPolicy::TuneNow;
        if needs_inputs && !rt.device().same_model(&self.device) {
            return Err(Error::Tune(format!(
                "this dispatcher serves {} ({}, driver {}.{}), and was called with a runtime on {} \
                 ({}, driver {}.{}): create one dispatcher per GPU model",
                self.device.name,
                self.device.sm_name(),
                self.device.driver_version.0,
                self.device.driver_version.1,
                rt.device().name,
                rt.device().sm_name(),
                rt.device().driver_version.0,
                rt.device().driver_version.1,
            )));
        }
        let mut inputs = needs_inputs.then(workload);
        if let Some(foreign) = foreign {
            match &mut inputs {
                Some(Ok(workload)) => {
                    let mut testbed = GpuTestbed::new(rt, &mut **workload);
                    let revalidated =
                        self.revalidated(state, &mut testbed, call, key.clone(), foreign);
                    // The inputs are put back whatever re-validation found.
                    workload.finish(rt)?;
                    if let Some(selection) = revalidated? {
                        return Ok(selection);
                    }
                }
                Some(Err(e)) => log::info!(
                    "the record of `{}` tuned on driver {} is not re-validated for this driver \
                     without tuning inputs ({e}); the miss policy applies",
                    self.family.name(),
                    foreign.driver
                ),
                None => {}
            }
        }
        let selection = match self.policy {
            MissPolicy::Heuristic => self.heuristic(call)?,
            MissPolicy::NearestBucket => match self.nearest(&state.db, &key, call) {
                Some(selection) => selection,
                None => self.heuristic(call)?,
            },
            MissPolicy::TuneNow => {
                let mut workload =
                    inputs.unwrap_or_else(|| no_workload().map(|w| w as Box<dyn Workload + 'w>))?;
                let mut testbed = GpuTestbed::new(rt, &mut *workload);
                let report = tune(
                    &self.family,
                    call,
                    &self.device,
                    &mut testbed,
                    &TuneOptions::default(),
                );
                // The inputs are put back whether or not a winner was found.
                workload.finish(rt)?;
                let report = report?;
                state.outcomes.push(TuneOutcome {
                    key: key.clone(),
                    report: report.clone(),
                });
                store(state, key, report.record(&self.family));
                Selection {
                    candidate: report.winner,
                    source: Source::Tuned,
                }
            }
        };
        state.stats.count(selection.source);
        Ok(selection)
    }

    /// The most recent record (by `tuned_at_unix_s`) among `records` whose
    /// key is `key` but for the driver, and whose winner is usable.
    fn foreign<'r>(
        &self,
        records: impl Iterator<Item = (&'r TuneKey, &'r Record)>,
        key: &TuneKey,
        call: &Call<'_>,
    ) -> Option<Foreign> {
        records
            .filter(|(stored, _)| other_driver_only(stored, key))
            .filter_map(|(stored, record)| {
                let candidate = self.usable(record, call)?;
                Some((record.tuned_at_unix_s, &stored.driver_version, candidate))
            })
            .max_by_key(|&(tuned_at, _, _)| tuned_at)
            .map(|(_, driver, candidate)| Foreign {
                driver: interned(driver),
                candidate,
            })
    }

    /// Re-validates another driver's winner on `testbed` and records the
    /// result under `key`; `None` (with a warning) when neither it nor the
    /// heuristic default verified and timed.
    fn revalidated(
        &self,
        state: &mut State,
        testbed: &mut impl Testbed,
        call: &Call<'_>,
        key: TuneKey,
        foreign: Foreign,
    ) -> Result<Option<Selection>, Error> {
        let Some(outcome) =
            revalidate(&self.family, call, &self.device, foreign.candidate, testbed)?
        else {
            let warning = format!(
                "the winner `{}` of `{}` tuned on driver {} and the heuristic default both failed \
                 verification or timing on this driver; the miss policy applies",
                self.family.candidates()[foreign.candidate].name(),
                self.family.name(),
                foreign.driver
            );
            log::warn!("{warning}");
            state.warnings.push(warning);
            return Ok(None);
        };
        store(state, key, outcome.record);
        let source = Source::Revalidated {
            driver: foreign.driver,
            kept: outcome.kept,
        };
        state.stats.count(source);
        Ok(Some(Selection {
            candidate: outcome.winner,
            source,
        }))
    }

    /// The candidate a stored record names, if the family has it and it can
    /// take the call on this device.
    fn usable(&self, record: &Record, call: &Call<'_>) -> Option<usize> {
        let index = self.family.position(record)?;
        check_candidate(&self.family.candidates()[index], call, &self.device)
            .ok()
            .map(|()| index)
    }

    fn heuristic(&self, call: &Call<'_>) -> Result<Selection, Error> {
        let candidate = self.family.heuristic(call, &self.device).ok_or_else(|| {
            let why = self.family.first_refusal(call, &self.device);
            Error::Tune(format!(
                "no variant of `{}` can take this call on {}{why}: check the arguments against \
                 the kernels' `requires`",
                self.family.name(),
                self.device.name
            ))
        })?;
        Ok(Selection {
            candidate,
            source: Source::Heuristic,
        })
    }

    /// The winner of the nearest bucket, local records before shipped ones
    /// of the same bucket.
    fn nearest(&self, db: &TuneDb, key: &TuneKey, call: &Call<'_>) -> Option<Selection> {
        let shipped = shipped_records();
        let mut near: Vec<(u32, ShapeBucket, &Record)> = db
            .records()
            .chain(shipped.iter())
            .filter(|(stored, _)| {
                TuneKey {
                    shape: key.shape,
                    ..(*stored).clone()
                } == *key
            })
            .filter_map(|(stored, record)| {
                let distance = bucket_distance(stored.shape, key.shape)?;
                Some((distance, stored.shape, record))
            })
            .collect();
        // Stable: of equally near records, the local one first.
        near.sort_by_key(|&(distance, shape, _)| (distance, shape));
        near.into_iter().find_map(|(_, shape, record)| {
            self.usable(record, call).map(|candidate| Selection {
                candidate,
                source: Source::Nearest(shape),
            })
        })
    }
}

/// Another driver's usable record for a call's key.
#[derive(Clone, Copy)]
struct Foreign {
    driver: &'static str,
    candidate: usize,
}

/// Whether `stored` is `key` but for the driver.
fn other_driver_only(stored: &TuneKey, key: &TuneKey) -> bool {
    stored.driver_version != key.driver_version
        && stored.gpu == key.gpu
        && stored.codegen_version == key.codegen_version
        && stored.kernel == key.kernel
        && stored.dtypes == key.dtypes
        && stored.alignments == key.alignments
        && stored.shape == key.shape
}

/// Stores a result the dispatcher measured; one that cannot be written is
/// still used, with a warning.
fn store(state: &mut State, key: TuneKey, record: Record) {
    if let Err(e) = state.db.record(key, record) {
        let warning = format!("the tuning result was used but not stored: {e}");
        log::warn!("{warning}");
        state.warnings.push(warning);
    }
}

/// The driver a [`Source::Revalidated`] names. Selections are `Copy` and a
/// resolved lookup allocates nothing, so the name is a `&'static str`: each
/// distinct driver string is leaked once per process (databases name a
/// handful).
fn interned(driver: &str) -> &'static str {
    static DRIVERS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut drivers = DRIVERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&known) = drivers.get(driver) {
        return known;
    }
    let leaked: &'static str = Box::leak(driver.into());
    drivers.insert(leaked);
    leaked
}

/// Alternating rounds in which [`revalidate`] times its two variants.
pub const REVALIDATION_ROUNDS: usize = 3;

/// What [`revalidate`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct Revalidation {
    /// The candidate to use: the other driver's winner when it verified and
    /// was not slower than the heuristic default, else the heuristic default.
    pub winner: usize,
    /// Whether the winner is the other driver's.
    pub kept: bool,
    /// What to store under the call's key: the winner and its time, the
    /// other variant's as the runner-up, the heuristic default's.
    pub record: Record,
}

/// Checks another driver's winner `foreign` (a candidate of `family` that
/// can take `call` on `device`) on this driver: verifies it and the
/// family's heuristic default, then times the verified ones against each
/// other, a quick measurement (per round, each in turn: [`measure`] with
/// one sample after its warm-up; [`REVALIDATION_ROUNDS`] rounds; the median
/// of its rounds is a variant's time), and picks the faster, the other
/// driver's on a tie. `Ok(None)` when neither verified and timed; `Err` on
/// a device error.
pub fn revalidate(
    family: &Family,
    call: &Call<'_>,
    device: &DeviceInfo,
    foreign: usize,
    testbed: &mut impl Testbed,
) -> Result<Option<Revalidation>, Error> {
    let candidates = family.candidates();
    let heuristic = family.heuristic(call, device);
    let mut contenders = Vec::with_capacity(2);
    for index in std::iter::once(foreign).chain(heuristic.filter(|&h| h != foreign)) {
        if verify(&candidates[index], testbed)?.is_none() {
            contenders.push((index, Some(Vec::with_capacity(REVALIDATION_ROUNDS))));
        }
    }
    let quick = TuneOptions {
        early_samples: 1,
        samples: 1,
        ..TuneOptions::default()
    };
    // Alternating, so that drift (clocks, temperature) affects both alike.
    for _ in 0..REVALIDATION_ROUNDS {
        for (index, times) in &mut contenders {
            let Some(samples) = times else { continue };
            match measure(&candidates[*index], testbed, &quick, None)? {
                Status::Timed { median_ms } => samples.push(median_ms),
                // A variant that fails to run once is out.
                _ => *times = None,
            }
        }
    }
    let mut timed: Vec<(usize, f64)> = contenders
        .into_iter()
        .filter_map(|(index, times)| {
            let mut times = times?;
            times.sort_by(f64::total_cmp);
            Some((index, times[times.len() / 2]))
        })
        .collect();
    // Stable: on a tie the other driver's winner, listed first, stays first.
    timed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some(&(winner, median_ms)) = timed.first() else {
        return Ok(None);
    };
    let time_of = |index: Option<usize>| {
        timed
            .iter()
            .find(|&&(i, _)| Some(i) == index)
            .map(|&(_, ms)| ms)
    };
    let chosen = &candidates[winner];
    Ok(Some(Revalidation {
        winner,
        kept: winner == foreign,
        record: Record {
            runner_up_ms: timed.get(1).map(|&(_, ms)| ms),
            heuristic_ms: time_of(heuristic),
            ..Record::new(chosen.name(), chosen.consts.clone(), median_ms)
        },
    }))
}

/// The `workload` argument of [`Dispatcher::select`] for callers that have
/// no tuning inputs: a [`MissPolicy::TuneNow`] miss then fails with this
/// error instead of tuning.
pub fn no_workload() -> Result<Box<dyn Workload>, Error> {
    Err(Error::Tune(
        "the miss policy is `tune`, and this caller has no tuning inputs for the call: use the \
         `heuristic` or `nearest` policy, or pass a workload to Dispatcher::select"
            .into(),
    ))
}

/// The sum over the sizes of |log2| of the ratio of two buckets' sizes
/// (bucket sizes are powers of two); buckets of different key lengths are
/// never near.
fn bucket_distance(a: ShapeBucket, b: ShapeBucket) -> Option<u32> {
    if a.sizes().len() != b.sizes().len() {
        return None;
    }
    let log = |x: u64| x.max(1).trailing_zeros();
    Some(
        a.sizes()
            .iter()
            .zip(b.sizes())
            .map(|(&x, &y)| log(x).abs_diff(log(y)))
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn miss_policy_environment_values() {
        assert_eq!(
            MissPolicy::from_env_value(None).unwrap(),
            MissPolicy::Heuristic
        );
        assert_eq!(
            MissPolicy::from_env_value(Some(" ")).unwrap(),
            MissPolicy::Heuristic
        );
        assert_eq!(
            MissPolicy::from_env_value(Some("tune")).unwrap(),
            MissPolicy::TuneNow
        );
        assert_eq!(
            MissPolicy::from_env_value(Some("NEAREST")).unwrap(),
            MissPolicy::NearestBucket
        );
        let err = MissPolicy::from_env_value(Some("fastest"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(MISS_POLICY_ENV) && err.contains("`fastest`") && err.contains("`nearest`"),
            "{err}"
        );
    }

    #[test]
    fn bucket_distance_counts_doublings() {
        let b = |m, n, k| ShapeBucket::gemm(m, n, k);
        assert_eq!(
            bucket_distance(b(1024, 1024, 1024), b(1024, 1024, 1024)),
            Some(0)
        );
        assert_eq!(
            bucket_distance(b(1024, 1024, 1024), b(2048, 512, 1024)),
            Some(2)
        );
        assert_eq!(bucket_distance(b(1, 1, 1), b(8, 1, 1)), Some(3));
        let one = ShapeBucket::of(&[8]).unwrap();
        assert_eq!(bucket_distance(one, b(8, 1, 1)), None);
    }

    #[test]
    fn borrowed_keys_hash_as_owned_ones() {
        let shape = ShapeBucket::gemm(100, 200, 300);
        let owned = ResolvedKey {
            dtypes: "f32".into(),
            shape,
            alignments: vec![16, 8, 2],
        };
        let borrowed = ResolvedKeyRef {
            dtypes: "f32",
            shape,
            alignments: &[16, 8, 2],
        };
        let hasher = hashbrown::DefaultHashBuilder::default();
        assert_eq!(hasher.hash_one(&owned), hasher.hash_one(&borrowed));
        assert!(borrowed.equivalent(&owned));
        let mut map = HashMap::new();
        map.insert(owned, 7);
        assert_eq!(map.get(&borrowed), Some(&7));
        let other = ResolvedKeyRef {
            dtypes: "f32",
            shape,
            alignments: &[16, 8],
        };
        assert_eq!(map.get(&other), None);
        let relu = ResolvedKeyRef {
            dtypes: "f32+relu",
            ..borrowed
        };
        assert_eq!(map.get(&relu), None);
    }
}
