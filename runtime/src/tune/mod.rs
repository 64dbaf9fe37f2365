//! The per-GPU tuning database: which variant of a kernel won for a given
//! GPU, driver, codegen version, dtype mix, alignment and shape bucket.
//!
//! [`TuneKey`] names one tuned situation, [`Record`] holds what the tuner
//! measured, and [`TuneDb`] keeps them in one JSON file per [`GpuModel`].
//!
//! Where the files live ([`default_dir`]): `$WARPFORGE_TUNE_DIR` when set;
//! otherwise `$XDG_CACHE_HOME/warpforge/tune`; otherwise
//! `~/.cache/warpforge/tune`. Several tuning processes may share a directory:
//! every write happens under an exclusive lock on a separate lock file,
//! re-reads the file and merges into it, and replaces it atomically (temp
//! file in the same directory, fsync, rename), so no process loses another's
//! records and a reader never sees half a file.

mod db;
mod key;

pub use db::{default_dir, LoadWarning, Record, TuneDb, SCHEMA_VERSION, TUNE_DIR_ENV};
pub use key::{GpuModel, ShapeBucket, TuneKey};
