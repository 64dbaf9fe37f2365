//! Autotuning: which variant of a kernel family is fastest for a call on the
//! GPU at hand, remembered per GPU model, and dispatch to it.
//!
//! - [`Family`] ([`family`](self)): the candidates (every variant of one or
//!   more kernels that compute the same thing), the heuristic default, and
//!   how a [`Call`] becomes a [`TuneKey`];
//! - pruning ([`check_candidate`], [`check_resources`]): what cannot run on
//!   the device, cannot take the call, or cannot win (shared memory,
//!   registers, occupancy; the last two on CUDA only), ruled out before timing;
//! - [`tune`]: verification against a reference, then medians of
//!   [`Runtime::time_ms`](crate::Runtime::time_ms) samples after warm-up
//!   (CUDA events; on wgpu timestamp queries, or the host clock on devices
//!   without them: [`Runtime::timing_method`](crate::Runtime::timing_method))
//!   with early drop of candidates far behind the leader, all through a
//!   [`Testbed`] ([`GpuTestbed`] on a device, simulated in tests);
//! - [`TuneDb`]: the results, one JSON file per [`GpuModel`]; [`ship`] adds
//!   read-only results an application ships ([`ShippedDb`], embedded or
//!   read from a file);
//! - [`Dispatcher`]: sends each call to its stored winner (the local
//!   database's, else the shipped one; another driver's winner is
//!   [`revalidate`]d on this driver first), with a [`MissPolicy`] for calls
//!   nothing was tuned for;
//! - [`TunedKernel`]: a kernel's tuned launch (`tune_key(..)`, the macro's
//!   `tuned(rt)`), tuned on the call's own arguments, through the
//!   dispatchers a runtime keeps with its [`TuneSettings`];
//! - [`TuneJob`]: the calls a tuning CLI makes to tune a crate's kernels.
//!
//! Where the files live ([`default_dir`]): `$WARPFORGE_TUNE_DIR` when set;
//! otherwise `$XDG_CACHE_HOME/warpforge/tune`; otherwise
//! `~/.cache/warpforge/tune`; with no HOME either, under the temporary
//! directory, with a warning. Several tuning processes may share a directory:
//! every write happens under an exclusive lock on a separate lock file,
//! re-reads the file and merges into it, and replaces it atomically (temp
//! file in the same directory, fsync, rename), so no process loses another's
//! records and a reader never sees half a file. The guide
//! `warpforge::guide::tuning` (warpforge/docs/tuning.md in the repository)
//! has the whole picture.

mod db;
mod dispatch;
mod family;
mod job;
mod key;
mod own_inputs;
mod prune;
mod testbed;
mod tuned_kernel;
mod tuner;

pub use db::{
    default_dir, ship, LoadWarning, Record, ShippedDb, TuneDb, SCHEMA_VERSION, TUNE_DIR_ENV,
};
pub use dispatch::{
    no_workload, revalidate, DispatchStats, Dispatcher, MissPolicy, Revalidation, Selection,
    Source, TuneOutcome, MISS_POLICY_ENV, REVALIDATION_ROUNDS,
};
pub use family::{Call, Candidate, Family, KeyBase};
pub use job::TuneJob;
pub use key::{driver_version, GpuModel, ShapeBucket, TuneKey, MAX_KEY_SIZES};
pub use prune::{check_candidate, check_resources, LoadedResources, PruneRule, VariantResources};
pub use testbed::{GpuTestbed, Workload};
pub(crate) use tuned_kernel::RuntimeTuning;
pub use tuned_kernel::{TuneSettings, TunedKernel};
pub use tuner::{
    measure, sweep, tune, Status, Testbed, TuneOptions, TuneReport, MAX_LAUNCHES_PER_SAMPLE,
};
