//! [`TuneDb`]: one JSON file per GPU model, shared safely by concurrent
//! tuning processes; [`ShippedDb`]: read-only records an application ships,
//! registered process-wide with [`ship`].

use std::collections::btree_map::{BTreeMap, Entry};
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::key::{GpuModel, TuneKey};
use crate::Error;

/// The version of the file layout. A file with another version is reported
/// and treated as empty; the next write replaces it. Version 2 stores a
/// shape bucket as a list of sizes (version 1 had fields m, n and k).
pub const SCHEMA_VERSION: u64 = 2;

/// The environment variable that overrides where the database files live.
pub const TUNE_DIR_ENV: &str = "WARPFORGE_TUNE_DIR";

/// What the tuner measured for one [`TuneKey`]. Times are in milliseconds,
/// as [`crate::Runtime::time_ms`] reports them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The winning variant's display name.
    pub variant: String,
    /// The winning variant's const values, in the kernel's const order.
    pub consts: Vec<i64>,
    /// The winner's median time.
    pub median_ms: f64,
    /// The second-best variant's median time, when more than one was measured.
    pub runner_up_ms: Option<f64>,
    /// The median time of the variant the heuristic would have picked, when measured.
    pub heuristic_ms: Option<f64>,
    /// When it was tuned, in seconds since the Unix epoch. Of two records for
    /// one key, the later one wins a merge.
    pub tuned_at_unix_s: u64,
}

impl Record {
    /// A record tuned now, with the runner-up and heuristic times unknown.
    pub fn new(variant: impl Into<String>, consts: Vec<i64>, median_ms: f64) -> Record {
        // A clock before 1970 only makes this record lose merges to others.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Record {
            variant: variant.into(),
            consts,
            median_ms,
            runner_up_ms: None,
            heuristic_ms: None,
            tuned_at_unix_s: now,
        }
    }

    /// Times must survive JSON (which has no NaN or infinity) and make sense.
    fn check_times(&self) -> Result<(), Error> {
        let times = [Some(self.median_ms), self.runner_up_ms, self.heuristic_ms];
        if times
            .into_iter()
            .flatten()
            .all(|t| t.is_finite() && t >= 0.0)
        {
            Ok(())
        } else {
            Err(Error::Tune(format!(
                "cannot record `{}`: its times (median {} ms, runner-up {:?} ms, heuristic {:?} ms) \
                 must be finite and non-negative; check the measurement",
                self.variant, self.median_ms, self.runner_up_ms, self.heuristic_ms
            )))
        }
    }
}

/// A database file that could not be used. [`TuneDb::open`] treats such a
/// file as empty, and the next [`TuneDb::record`] replaces it.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadWarning {
    /// The file exists but could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The file is not a valid database: truncated, not JSON, or missing fields.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser found wrong, and where.
        message: String,
    },
    /// The file was written with another schema version (`None`: it has none).
    SchemaMismatch {
        /// The file.
        path: PathBuf,
        /// Its `schema` number.
        found: Option<u64>,
    },
    /// The file holds the results of another GPU model.
    OtherGpu {
        /// The file.
        path: PathBuf,
        /// The GPU model it names.
        found: GpuModel,
    },
}

impl LoadWarning {
    fn path(&self) -> &Path {
        match self {
            LoadWarning::Unreadable { path, .. }
            | LoadWarning::Corrupt { path, .. }
            | LoadWarning::SchemaMismatch { path, .. }
            | LoadWarning::OtherGpu { path, .. } => path,
        }
    }

    /// What is wrong with the file, without saying what happens next.
    fn problem(&self) -> String {
        match self {
            LoadWarning::Unreadable { message, .. } => format!("cannot be read ({message})"),
            LoadWarning::Corrupt { message, .. } => {
                format!("is not a valid tuning database ({message})")
            }
            LoadWarning::SchemaMismatch {
                found: Some(found), ..
            } => {
                format!("has schema version {found}, this warpforge reads version {SCHEMA_VERSION}")
            }
            LoadWarning::SchemaMismatch { found: None, .. } => {
                format!("has no `schema` number, this warpforge reads version {SCHEMA_VERSION}")
            }
            LoadWarning::OtherGpu { found, .. } => {
                format!("holds results for another GPU ({})", found.file_stem())
            }
        }
    }
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tuning database {} {}; it is ignored and the next tuning result replaces it \
             (move it away first to keep it)",
            self.path().display(),
            self.problem()
        )
    }
}

/// The file layout. Entries are kept sorted by key, so that equal databases
/// are equal files.
#[derive(Serialize, Deserialize)]
struct DbFile {
    schema: u64,
    gpu: GpuModel,
    entries: Vec<DbEntry>,
}

#[derive(Serialize, Deserialize)]
struct DbEntry {
    key: TuneKey,
    record: Record,
}

pub(super) type Records = BTreeMap<TuneKey, Record>;

/// The tuning results of one GPU model, loaded from and written to
/// `<dir>/<GpuModel::file_stem>.json`, with writes serialized through
/// `<dir>/<GpuModel::file_stem>.lock` (left in place: removing a lock file
/// while another process waits on it would let two writers in).
pub struct TuneDb {
    dir: PathBuf,
    gpu: GpuModel,
    records: Records,
    warnings: Vec<LoadWarning>,
}

impl TuneDb {
    /// Loads the database of `gpu` from `dir`, or from [`default_dir`] when
    /// `dir` is `None`. A missing file is an empty database; an unusable one
    /// is also empty, with the reason in [`TuneDb::warnings`]. Fails only when
    /// no directory can be determined.
    pub fn open(dir: Option<&Path>, gpu: &GpuModel) -> Result<TuneDb, Error> {
        let dir = match dir {
            Some(dir) => dir.to_path_buf(),
            None => default_dir(),
        };
        let mut db = TuneDb {
            dir,
            gpu: gpu.clone(),
            records: Records::new(),
            warnings: Vec::new(),
        };
        match load(&db.path(), gpu) {
            Ok(records) => db.records = records,
            Err(warning) => db.warnings.push(warning),
        }
        Ok(db)
    }

    /// The database file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.gpu.file_stem()))
    }

    /// The GPU model whose results this database holds.
    pub fn gpu(&self) -> &GpuModel {
        &self.gpu
    }

    /// Why the file on disk was ignored when opened, if it was.
    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The record stored for `key`, if any (keys match only when every
    /// field is equal).
    pub fn lookup(&self, key: &TuneKey) -> Option<&Record> {
        self.records.get(key)
    }

    /// Every record, in key order.
    pub fn records(&self) -> impl Iterator<Item = (&TuneKey, &Record)> {
        self.records.iter()
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Stores `record` for `key` on disk: under the lock, re-reads the file,
    /// merges (the later `tuned_at_unix_s` wins), and replaces the file
    /// atomically. Afterwards this database also holds what other processes
    /// recorded meanwhile.
    pub fn record(&mut self, key: TuneKey, record: Record) -> Result<(), Error> {
        if key.gpu != self.gpu {
            return Err(Error::Tune(format!(
                "cannot record a result measured on {} in the tuning database of {}: open the \
                 database of the GPU the key names",
                key.gpu.file_stem(),
                self.gpu.file_stem()
            )));
        }
        record.check_times()?;
        self.merge_into_file(Records::from([(key, record)]))
    }

    /// Writes this database's records to `path` (same format), e.g. to carry
    /// tuning results to another machine with the same GPU.
    pub fn export(&self, path: &Path) -> Result<(), Error> {
        write_atomically(path, &self.gpu, &self.records)
    }

    /// Merges the records of a file written by [`TuneDb::export`] into this
    /// database, on disk as [`TuneDb::record`] does, and returns how many it
    /// held. Refuses a file that is unreadable, corrupt, of another schema
    /// version or of another GPU model.
    pub fn import(&mut self, path: &Path) -> Result<usize, Error> {
        let bytes = fs::read(path).map_err(|e| {
            Error::Tune(format!(
                "cannot import tuning results from {}: {e}; check the path",
                path.display()
            ))
        })?;
        let incoming = parse(&bytes, path, &self.gpu).map_err(|warning| {
            Error::Tune(format!(
                "cannot import tuning results: {} {}; import only files exported by this \
                 warpforge version from the same GPU model ({})",
                path.display(),
                warning.problem(),
                self.gpu.file_stem()
            ))
        })?;
        let count = incoming.len();
        self.merge_into_file(incoming)?;
        Ok(count)
    }

    fn merge_into_file(&mut self, incoming: Records) -> Result<(), Error> {
        fs::create_dir_all(&self.dir).map_err(|e| io_error("create", &self.dir, e))?;
        let lock_path = self.dir.join(format!("{}.lock", self.gpu.file_stem()));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io_error("open the lock file", &lock_path, e))?;
        fs4::FileExt::lock(&lock).map_err(|e| io_error("lock", &lock_path, e))?;
        // An unusable file was reported at open (or appeared since); the
        // write below replaces it.
        let mut merged = load(&self.path(), &self.gpu).unwrap_or_default();
        for (key, record) in incoming {
            merge(&mut merged, key, record);
        }
        write_atomically(&self.path(), &self.gpu, &merged)?;
        self.records = merged;
        // Closing the lock file releases the lock.
        drop(lock);
        Ok(())
    }
}

/// Tuning results an application ships with itself: the records of a file
/// written by [`TuneDb::export`] (`tune --export FILE`), embedded at build
/// time or read from a path, to be registered with [`ship`]. Records of
/// another GPU model are kept and never match: an application may ship one
/// file per model it supports, each registered once.
#[derive(Clone, Debug)]
pub struct ShippedDb {
    records: Records,
}

impl ShippedDb {
    /// The records of an exported file embedded in the binary, e.g.
    /// `ShippedDb::from_bytes(include_bytes!("../tune/nvidia-h200_sm90_132sms.json"))`.
    /// Refuses bytes that are not such a file (not JSON, truncated, missing
    /// fields, another schema version), saying what was wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<ShippedDb, Error> {
        ShippedDb::parse(
            bytes,
            &format!("the embedded database ({} bytes)", bytes.len()),
        )
    }

    /// The records of an exported file at `path`, read now. Refuses a file
    /// that cannot be read or is not such a file, saying what was wrong.
    pub fn from_file(path: impl AsRef<Path>) -> Result<ShippedDb, Error> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(|e| {
            Error::Tune(format!(
                "cannot ship tuning results from {}: {e}; check the path",
                path.display()
            ))
        })?;
        ShippedDb::parse(&bytes, &path.display().to_string())
    }

    /// `origin` names the bytes in the error.
    fn parse(bytes: &[u8], origin: &str) -> Result<ShippedDb, Error> {
        let file = read_file(bytes, Path::new(origin)).map_err(|warning| {
            Error::Tune(format!(
                "cannot ship tuning results: {origin} {}; ship a file written by \
                 `TuneDb::export` (`tune --export FILE`) with this warpforge version",
                warning.problem()
            ))
        })?;
        Ok(ShippedDb {
            records: into_records(file.entries),
        })
    }

    /// The number of records, of every GPU model in the file.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the file held no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// Every record [`ship`] registered, merged: read by the dispatchers of the
/// whole process.
static SHIPPED: RwLock<Records> = RwLock::new(Records::new());

/// Registers shipped tuning results for every [`Dispatcher`](super::Dispatcher)
/// of this process, read-only: dispatch looks a call's key up in the local
/// database first (its records were measured on this machine), then in the
/// shipped records. Registering several files merges them; of two records
/// for one key the later `tuned_at_unix_s` wins. Calls already resolved keep
/// their resolution; register before the first dispatch.
pub fn ship(db: ShippedDb) {
    // A poisoned map is still whole: each merge is one insertion.
    let mut shipped = SHIPPED.write().unwrap_or_else(PoisonError::into_inner);
    for (key, record) in db.records {
        merge(&mut shipped, key, record);
    }
}

/// The records [`ship`] registered.
pub(super) fn shipped_records() -> RwLockReadGuard<'static, Records> {
    SHIPPED.read().unwrap_or_else(PoisonError::into_inner)
}

/// Where database files live when the caller names no directory:
/// `$WARPFORGE_TUNE_DIR`, else `$XDG_CACHE_HOME/warpforge/tune`, else
/// `$HOME/.cache/warpforge/tune`, else (none of them set, as in some
/// containers and services) `warpforge/tune` under the system's temporary
/// directory, with a warning through `log`: tuning still works, and its
/// results may not outlive the machine's next cleanup.
pub fn default_dir() -> PathBuf {
    dir_from(
        std::env::var_os(TUNE_DIR_ENV),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
    .unwrap_or_else(|| {
        let dir = std::env::temp_dir().join("warpforge").join("tune");
        log::warn!(
            "none of {TUNE_DIR_ENV}, XDG_CACHE_HOME or HOME is set: the tuning database goes to \
             {}, which the system may clean; set {TUNE_DIR_ENV} to a directory that lasts",
            dir.display()
        );
        dir
    })
}

/// The directory the environment names, if it names one.
fn dir_from(
    tune_dir: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(dir) = tune_dir.filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    // The XDG spec says to ignore a relative XDG_CACHE_HOME.
    if let Some(cache) = xdg_cache_home
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
    {
        return Some(cache.join("warpforge").join("tune"));
    }
    home.filter(|h| !h.is_empty()).map(|home| {
        PathBuf::from(home)
            .join(".cache")
            .join("warpforge")
            .join("tune")
    })
}

/// Of two records for one key, keeps the later; a tie goes to the incoming one.
fn merge(records: &mut Records, key: TuneKey, record: Record) {
    match records.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(record);
        }
        Entry::Occupied(mut slot) => {
            if record.tuned_at_unix_s >= slot.get().tuned_at_unix_s {
                slot.insert(record);
            }
        }
    }
}

/// The records in `path`; a missing file is empty.
fn load(path: &Path, gpu: &GpuModel) -> Result<Records, LoadWarning> {
    match fs::read(path) {
        Ok(bytes) => parse(&bytes, path, gpu),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Records::new()),
        Err(e) => Err(LoadWarning::Unreadable {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

fn parse(bytes: &[u8], path: &Path, gpu: &GpuModel) -> Result<Records, LoadWarning> {
    let file = read_file(bytes, path)?;
    if let Some(other) = std::iter::once(&file.gpu)
        .chain(file.entries.iter().map(|entry| &entry.key.gpu))
        .find(|model| *model != gpu)
    {
        return Err(LoadWarning::OtherGpu {
            path: path.to_path_buf(),
            found: other.clone(),
        });
    }
    Ok(into_records(file.entries))
}

/// The file in `bytes`, of any GPU model; `path` names it in the warning.
fn read_file(bytes: &[u8], path: &Path) -> Result<DbFile, LoadWarning> {
    let corrupt = |e: serde_json::Error| LoadWarning::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    // The schema is checked before the layout, so that a file of another
    // version is reported as such rather than as corrupt.
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(corrupt)?;
    let found = value.get("schema").and_then(serde_json::Value::as_u64);
    if found != Some(SCHEMA_VERSION) {
        return Err(LoadWarning::SchemaMismatch {
            path: path.to_path_buf(),
            found,
        });
    }
    serde_json::from_value(value).map_err(corrupt)
}

/// The entries as records; of two for one key, the later wins.
fn into_records(entries: Vec<DbEntry>) -> Records {
    let mut records = Records::new();
    for entry in entries {
        merge(&mut records, entry.key, entry.record);
    }
    records
}

/// Replaces `path` so that readers see the old file or the new one, never a
/// mix: a temp file in the same directory, fsynced, renamed over the target.
fn write_atomically(path: &Path, gpu: &GpuModel, records: &Records) -> Result<(), Error> {
    let file = DbFile {
        schema: SCHEMA_VERSION,
        gpu: gpu.clone(),
        entries: records
            .iter()
            .map(|(key, record)| DbEntry {
                key: key.clone(),
                record: record.clone(),
            })
            .collect(),
    };
    let mut text = serde_json::to_vec_pretty(&file)
        .map_err(|e| Error::Tune(format!("cannot encode the tuning database: {e}")))?;
    text.push(b'\n');
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(".tune-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| io_error("create a temporary file in", dir, e))?;
    temp.write_all(&text)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| io_error("write", temp.path(), e))?;
    temp.persist(path)
        .map_err(|e| io_error("replace", path, e.error))?;
    // The rename is durable only once the directory is synced.
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("sync", dir, e))?;
    Ok(())
}

fn io_error(action: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Tune(format!(
        "cannot {action} {}: {e}; check that the directory is writable, or set {TUNE_DIR_ENV} \
         to one that is",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::*;
    use crate::tune::ShapeBucket;

    fn h200() -> GpuModel {
        GpuModel {
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
        }
    }

    fn a100() -> GpuModel {
        GpuModel {
            name: "NVIDIA A100-SXM4-80GB".into(),
            compute_capability: (8, 0),
            sm_count: 108,
        }
    }

    fn key(gpu: &GpuModel, kernel: &str, m: u64) -> TuneKey {
        TuneKey {
            gpu: gpu.clone(),
            driver_version: "12090".into(),
            codegen_version: "c0ffee".into(),
            kernel: kernel.into(),
            dtypes: "f16.row*f16.col->f32.row".into(),
            alignments: vec![16, 16, 16],
            shape: ShapeBucket::gemm(m, 1024, 1024),
        }
    }

    fn record(variant: &str, median_ms: f64) -> Record {
        Record {
            runner_up_ms: Some(median_ms * 1.5),
            heuristic_ms: Some(median_ms * 2.0),
            ..Record::new(variant, vec![128, 128, 32], median_ms)
        }
    }

    #[test]
    fn records_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        assert!(db.is_empty());
        assert!(db.warnings().is_empty());
        let small = record("gemm<128,128,32>", 0.25);
        let large = record("gemm<64,64,32>", 3.5);
        db.record(key(&h200(), "gemm", 1000), small.clone())
            .unwrap();
        db.record(key(&h200(), "gemm", 4000), large.clone())
            .unwrap();
        assert_eq!(db.path(), dir.path().join("nvidia-h200_sm90_132sms.json"));

        let reopened = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        assert!(reopened.warnings().is_empty());
        assert_eq!(reopened.len(), 2);
        // A nearby shape in the same bucket finds the record.
        assert_eq!(reopened.lookup(&key(&h200(), "gemm", 1024)), Some(&small));
        assert_eq!(reopened.lookup(&key(&h200(), "gemm", 4000)), Some(&large));
    }

    #[test]
    fn lookup_misses_on_any_key_difference() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        let stored = key(&h200(), "gemm", 1000);
        db.record(stored.clone(), record("gemm<128,128,32>", 0.25))
            .unwrap();
        assert!(db.lookup(&stored).is_some());
        assert!(db.lookup(&key(&h200(), "gemm", 2000)).is_none());
        assert!(db.lookup(&key(&h200(), "other", 1000)).is_none());
        let newer_driver = TuneKey {
            driver_version: "12100".into(),
            ..stored.clone()
        };
        assert!(db.lookup(&newer_driver).is_none());
        let unaligned = TuneKey {
            alignments: vec![16, 4, 16],
            ..stored
        };
        assert!(db.lookup(&unaligned).is_none());
    }

    #[test]
    fn a_later_record_replaces_an_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        let k = key(&h200(), "gemm", 1000);
        db.record(k.clone(), record("old", 1.0)).unwrap();
        db.record(k.clone(), record("new", 0.5)).unwrap();
        assert_eq!(db.lookup(&k).unwrap().variant, "new");
        let stale = Record {
            tuned_at_unix_s: 0,
            ..record("stale", 0.1)
        };
        db.record(k.clone(), stale).unwrap();
        assert_eq!(db.lookup(&k).unwrap().variant, "new");
        assert_eq!(db.len(), 1);
    }

    #[test]
    fn bad_records_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        let err = db
            .record(key(&a100(), "gemm", 1000), record("gemm", 1.0))
            .unwrap_err();
        assert!(
            err.to_string().contains("open the database of the GPU"),
            "{err}"
        );
        let err = db
            .record(key(&h200(), "gemm", 1000), record("gemm", f64::NAN))
            .unwrap_err();
        assert!(err.to_string().contains("finite"), "{err}");
        assert!(db.is_empty());
        assert!(!db.path().exists());
    }

    /// Writes `text` as the database file, opens it, checks it was reported
    /// and ignored, and that a write replaces it.
    fn assert_replaced(text: &str, expect: impl Fn(&LoadWarning) -> bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.json", h200().file_stem()));
        fs::write(&path, text).unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        assert!(db.is_empty());
        assert_eq!(db.warnings().len(), 1, "{text}");
        let warning = &db.warnings()[0];
        assert!(expect(warning), "{warning:?}");
        assert!(warning.to_string().contains("ignored"), "{warning}");
        db.record(key(&h200(), "gemm", 1000), record("gemm", 1.0))
            .unwrap();
        let reopened = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        assert!(reopened.warnings().is_empty(), "{:?}", reopened.warnings());
        assert_eq!(reopened.len(), 1);
    }

    fn valid_file_text() -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        db.record(key(&h200(), "gemm", 1000), record("gemm", 1.0))
            .unwrap();
        db.record(key(&h200(), "gemm", 8000), record("gemm", 9.0))
            .unwrap();
        fs::read_to_string(db.path()).unwrap()
    }

    #[test]
    fn schema_mismatch_is_reported_and_ignored() {
        let text = valid_file_text();
        let next = SCHEMA_VERSION + 1;
        let future = text.replacen(
            &format!("\"schema\": {SCHEMA_VERSION}"),
            &format!("\"schema\": {next}"),
            1,
        );
        assert_ne!(future, text);
        assert_replaced(
            &future,
            |w| matches!(w, LoadWarning::SchemaMismatch { found: Some(found), .. } if *found == next),
        );
        assert_replaced(r#"{"entries": []}"#, |w| {
            matches!(w, LoadWarning::SchemaMismatch { found: None, .. })
        });
    }

    #[test]
    fn corrupt_and_truncated_files_are_reported_and_replaced() {
        let text = valid_file_text();
        assert_replaced(&text[..text.len() / 2], |w| {
            matches!(w, LoadWarning::Corrupt { .. })
        });
        assert_replaced("", |w| matches!(w, LoadWarning::Corrupt { .. }));
        assert_replaced("\u{0}\u{1}garbage", |w| {
            matches!(w, LoadWarning::Corrupt { .. })
        });
        assert_replaced(r#"{"schema": 2, "gpu": 3}"#, |w| {
            matches!(w, LoadWarning::Corrupt { .. })
        });
        let other_gpu = text.replace("NVIDIA H200", "NVIDIA H100");
        assert_replaced(&other_gpu, |w| matches!(w, LoadWarning::OtherGpu { .. }));
    }

    #[test]
    fn export_then_import_merges() {
        let source_dir = tempfile::tempdir().unwrap();
        let mut source = TuneDb::open(Some(source_dir.path()), &h200()).unwrap();
        source
            .record(key(&h200(), "gemm", 1000), record("a", 1.0))
            .unwrap();
        source
            .record(key(&h200(), "gemm", 2000), record("b", 2.0))
            .unwrap();
        let exported = source_dir.path().join("exported.json");
        source.export(&exported).unwrap();

        let target_dir = tempfile::tempdir().unwrap();
        let mut target = TuneDb::open(Some(target_dir.path()), &h200()).unwrap();
        target
            .record(key(&h200(), "gemm", 4000), record("c", 4.0))
            .unwrap();
        assert_eq!(target.import(&exported).unwrap(), 2);
        assert_eq!(target.len(), 3);
        let reopened = TuneDb::open(Some(target_dir.path()), &h200()).unwrap();
        assert_eq!(reopened.len(), 3);
        assert_eq!(
            reopened
                .lookup(&key(&h200(), "gemm", 2000))
                .unwrap()
                .variant,
            "b"
        );
        assert_eq!(
            reopened
                .lookup(&key(&h200(), "gemm", 4000))
                .unwrap()
                .variant,
            "c"
        );
    }

    #[test]
    fn import_refuses_other_gpus_schemas_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut a100_db = TuneDb::open(Some(dir.path()), &a100()).unwrap();
        a100_db
            .record(key(&a100(), "gemm", 1000), record("a", 1.0))
            .unwrap();
        let mut db = TuneDb::open(Some(dir.path()), &h200()).unwrap();

        let err = db.import(&a100_db.path()).unwrap_err().to_string();
        assert!(
            err.contains("another GPU") && err.contains("same GPU model"),
            "{err}"
        );

        let future = dir.path().join("future.json");
        let text = fs::read_to_string(a100_db.path()).unwrap();
        fs::write(
            &future,
            text.replacen(&format!("\"schema\": {SCHEMA_VERSION}"), "\"schema\": 7", 1),
        )
        .unwrap();
        let err = db.import(&future).unwrap_err().to_string();
        assert!(err.contains("schema version 7"), "{err}");

        let garbage = dir.path().join("garbage.json");
        fs::write(&garbage, "{").unwrap();
        let err = db.import(&garbage).unwrap_err().to_string();
        assert!(err.contains("not a valid tuning database"), "{err}");

        let err = db
            .import(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("check the path"), "{err}");

        assert!(db.is_empty());
        assert!(!db.path().exists());
    }

    #[test]
    fn shipped_databases_read_exported_files_of_any_gpu() {
        let text = valid_file_text();
        let shipped = ShippedDb::from_bytes(text.as_bytes()).unwrap();
        assert_eq!(shipped.len(), 2);
        // Another model's file is accepted: its records just never match.
        let other_gpu = text.replace("NVIDIA H200", "NVIDIA H100");
        assert_eq!(
            ShippedDb::from_bytes(other_gpu.as_bytes()).unwrap().len(),
            2
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shipped.json");
        fs::write(&path, &text).unwrap();
        let from_file = ShippedDb::from_file(&path).unwrap();
        assert_eq!(from_file.records, shipped.records);
    }

    #[test]
    fn corrupt_shipped_databases_are_refused_with_the_reason() {
        let text = valid_file_text();
        let err = ShippedDb::from_bytes(&text.as_bytes()[..text.len() / 2])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the embedded database (")
                && err.contains("is not a valid tuning database (")
                && err.contains("line ")
                && err.contains("tune --export"),
            "{err}"
        );
        let future = text.replacen(&format!("\"schema\": {SCHEMA_VERSION}"), "\"schema\": 7", 1);
        let err = ShippedDb::from_bytes(future.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("has schema version 7"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shipped.json");
        fs::write(&path, r#"{"schema": 2, "gpu": 3}"#).unwrap();
        let err = ShippedDb::from_file(&path).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("not a valid"),
            "{err}"
        );
        let err = ShippedDb::from_file(dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing.json") && err.contains("check the path"),
            "{err}"
        );
    }

    #[test]
    fn default_dir_follows_the_environment_in_order() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            dir_from(some("/tune"), some("/xdg"), some("/home/u")),
            Some(PathBuf::from("/tune"))
        );
        assert_eq!(
            dir_from(some(""), some("/xdg"), some("/home/u")),
            Some(PathBuf::from("/xdg/warpforge/tune"))
        );
        assert_eq!(
            dir_from(None, some("relative"), some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/warpforge/tune"))
        );
        assert_eq!(
            dir_from(None, None, None),
            None,
            "the temporary directory then"
        );
    }

    /// Set in the children of the concurrency test: `<dir>,<index>`.
    const CHILD_ENV: &str = "WARPFORGE_TUNE_TEST_CHILD";
    const PROCESSES: u64 = 4;
    const RECORDS_PER_PROCESS: u64 = 12;

    /// Runs copies of this test binary that record distinct keys into one
    /// directory at once; no process may lose another's records.
    #[test]
    fn records_from_many_processes_all_survive() {
        if let Ok(child) = std::env::var(CHILD_ENV) {
            let (dir, index) = child.rsplit_once(',').unwrap();
            let index: u64 = index.parse().unwrap();
            let mut db = TuneDb::open(Some(Path::new(dir)), &h200()).unwrap();
            for i in 0..RECORDS_PER_PROCESS {
                let m = 1 << (index * RECORDS_PER_PROCESS + i);
                db.record(
                    key(&h200(), "gemm", m),
                    record(&format!("p{index}r{i}"), 1.0),
                )
                .unwrap();
            }
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let test_name = module_path!().split_once("::").unwrap().1.to_owned()
            + "::records_from_many_processes_all_survive";
        let children: Vec<_> = (0..PROCESSES)
            .map(|index| {
                Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", &test_name, "--test-threads=1"])
                    .env(CHILD_ENV, format!("{},{index}", dir.path().display()))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "a child failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let db = TuneDb::open(Some(dir.path()), &h200()).unwrap();
        assert!(db.warnings().is_empty(), "{:?}", db.warnings());
        assert_eq!(db.len() as u64, PROCESSES * RECORDS_PER_PROCESS);
        for index in 0..PROCESSES {
            for i in 0..RECORDS_PER_PROCESS {
                let m = 1 << (index * RECORDS_PER_PROCESS + i);
                assert_eq!(
                    db.lookup(&key(&h200(), "gemm", m)).unwrap().variant,
                    format!("p{index}r{i}")
                );
            }
        }
        // Only the database and its lock file remain: no temp files left over.
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "nvidia-h200_sm90_132sms.json",
                "nvidia-h200_sm90_132sms.lock"
            ]
        );
    }
}
