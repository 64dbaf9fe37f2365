//! [`TuneJob`]: what a crate declares so that a tuning CLI
//! (`warpforge-tuner`, run as `cargo xtask tune`) tunes its kernels.

use crate::{Error, Runtime};

/// One tuned entry point and the sizes to tune it for. `run` makes the
/// calls a program would make at one of `shapes` (fresh random inputs,
/// through the kernel's `tuned(rt)` or a `TunedGemm`); the CLI runs it with
/// the runtime's miss policy set to tune, so each call's first launch tunes
/// and records its winner, and later with the heuristic policy to check that
/// every call is then dispatched from the database.
///
/// A crate lists its jobs in a `pub static` slice (e.g. `TUNE_JOBS`), and the
/// workspace's xtask hands every crate's list to `warpforge_tuner::main`.
#[derive(Clone, Copy, Debug)]
pub struct TuneJob {
    /// The name the CLI's `--jobs` selects and its table shows.
    pub name: &'static str,
    /// The sizes to tune for, each in the order the job's `run` reads them
    /// (a kernel's `tune_key(..)` order, or m, n, k for a GEMM).
    pub shapes: &'static [&'static [u64]],
    /// Makes the job's calls at one shape on the runtime.
    pub run: fn(&Runtime, &[u64]) -> Result<(), Error>,
    /// Why the job cannot run at one shape on the runtime's device (its
    /// kernels target no arch the device runs, or none takes that shape),
    /// or `None`: the CLI then lists that call as skipped, neither passed
    /// nor failed. [`TuneJob::RUNS_ANYWHERE`] for a job that always runs.
    pub skip: fn(&Runtime, &[u64]) -> Result<Option<String>, Error>,
}

impl TuneJob {
    /// The `skip` of a job whose calls run on every device and shape.
    pub const RUNS_ANYWHERE: fn(&Runtime, &[u64]) -> Result<Option<String>, Error> =
        |_, _| Ok(None);
}
