//! The dispatcher and the tuned GEMM entry points on a real runtime without a
//! GPU (wgpu on Mesa's lavapipe): database hits and misses, every miss
//! policy, stale and corrupt databases, shipped databases and other
//! drivers' records, results of dispatched launches
//! against the float64 reference, and the GEMM workload's verification
//! catching wrong and unwritten outputs.

use std::collections::BTreeMap;

use warpforge::prelude::*;
use warpforge::tune::{
    no_workload, ship, tune, Call, Candidate, Dispatcher, Family, GpuModel, LoadedResources,
    MissPolicy, Record, ShapeBucket, ShippedDb, Source, Status, Testbed, TuneDb, TuneKey,
    TuneOptions, VariantResources, Workload,
};
use warpforge::{BufferRef, GemmPrecision, MatrixLayout};
use warpforge_kernels::gemm::DEFAULT_F32;
use warpforge_kernels::gemm_problem::{Activation, GemmBatch, GemmProblem};
use warpforge_kernels::tuned::{every_shape, GemmKind, GemmWorkload, TunedGemm, GEMM_F32};
use warpforge_tests::reference;
use warpforge_tests::tuning::InPlaceCall;

/// A naive GEMM with the stock launcher shape (the dense GEMMs' parameters),
/// one thread per output of an 8 x 8 tile, for one form of problem: one
/// batch, row-major A, B and C, no bias or activation. `MODE` 0 is correct,
/// 1 adds 1e-3 to every output, 2 leaves the last column unwritten, 3 claims
/// every batch count, bias and activation and ignores them (it computes the
/// first batch's product, as 0 does). The `MODE = 1` variants require an
/// even k.
#[kernel(
    arch(wgsl),
    block(64),
    tune(BM = [8], BN = [8], MODE = [0, 1, 2, 3]),
    requires(
        a.len() >= m * k,
        b.len() >= k * n,
        c.len() >= m * n,
        MODE == 3 || batches == 1 && bias_mode == 0 && activation == 0,
        !a_col_major,
        b_row_major,
        MODE != 1 || k % 2 == 0
    )
)]
pub fn gemm_naive<const BM: u32, const BN: u32, const MODE: u32>(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    bias: &[f32],
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    stride_a: u32,
    stride_b: u32,
    stride_c: u32,
    alpha: f32,
    beta: f32,
    bias_mode: u32,
    activation: u32,
    a_col_major: bool,
    b_row_major: bool,
) {
    let t = thread_idx().x;
    let row = block_idx().y * BM + t / BN;
    let col = block_idx().x * BN + t % BN;
    if row < m && col < n && (MODE != 2 || col + 1 < n) {
        let mut sum = 0.0f32;
        for p in 0..k {
            sum += a[row * k + p] * b[p * n + col];
        }
        if MODE == 1 {
            sum += 0.001;
        }
        let idx = row * n + col;
        if beta == 0.0 {
            c[idx] = alpha * sum;
        } else {
            c[idx] = alpha * sum + beta * c[idx];
        }
    }
}

static NAIVE: GemmKind<f32, f32> = GemmKind::new(
    "gemm_naive",
    GemmPrecision::F32,
    MatrixLayout::RowMajor,
    || vec![gemm_naive::def()],
    || vec![(gemm_naive::def(), vec![8, 8, 0], every_shape)],
);

/// The f32 problem of `TunedGemm::run` (row-major A, B and C), alpha 1, beta 0.
fn plain(dims: (u32, u32, u32)) -> GemmProblem<f32> {
    GEMM_F32.problem(dims, 1.0, 0.0)
}

fn naive(mode: i64) -> Candidate {
    Candidate::new(gemm_naive::def(), vec![8, 8, mode])
}

#[test]
fn verification_catches_wrong_and_unwritten_outputs() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let mut workload = GemmWorkload::new(&rt, &NAIVE, &plain((13, 10, 6)), false, 11).unwrap();
    assert_eq!(workload.input_sets(), 1, "lavapipe reports no L2");
    assert_eq!(workload.verify(&rt, &naive(0)).unwrap(), Ok(()));
    let wrong = workload.verify(&rt, &naive(1)).unwrap().unwrap_err();
    assert!(
        wrong.contains("float64 reference") && wrong.contains("error bound"),
        "{wrong}"
    );
    let unwritten = workload.verify(&rt, &naive(2)).unwrap().unwrap_err();
    assert!(
        unwritten.contains("13 of 130 outputs are the poison, NaN")
            && unwritten.contains("column 9"),
        "{unwritten}"
    );
    // The correct variant passes again after the broken ones: C is poisoned anew.
    assert_eq!(workload.verify(&rt, &naive(0)).unwrap(), Ok(()));
    let err = GemmWorkload::new(&rt, &NAIVE, &plain((0, 10, 6)), false, 11)
        .err()
        .unwrap();
    assert!(err.to_string().contains("at least 1"), "{err}");
}

/// Real verification on lavapipe, simulated resources and times.
struct LavapipeBed<'a> {
    rt: &'a Runtime,
    workload: GemmWorkload<f32, f32>,
    true_ms: BTreeMap<String, f64>,
}

impl Testbed for LavapipeBed<'_> {
    fn resources(&mut self, _: &Candidate) -> Result<VariantResources, Error> {
        Ok(VariantResources {
            threads_per_block: Some(64),
            shared_bytes: 0,
            loaded: Some(LoadedResources {
                registers_per_thread: 32,
                local_bytes_per_thread: 0,
                max_threads_per_block: 1024,
                blocks_per_sm: Some(8),
                resident_clusters: None,
            }),
        })
    }

    fn verify(&mut self, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        self.workload.verify(self.rt, candidate)
    }

    fn time_ms(&mut self, candidate: &Candidate, launches: u32) -> Result<f64, Error> {
        Ok(self.true_ms[candidate.name()] * f64::from(launches))
    }
}

#[test]
fn only_verified_variants_win() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let family = NAIVE.family().unwrap();
    // The broken variants are the fastest.
    let true_ms = BTreeMap::from([
        ("gemm_naive[BM=8,BN=8,MODE=0]".to_string(), 1.0),
        ("gemm_naive[BM=8,BN=8,MODE=1]".to_string(), 0.1),
        ("gemm_naive[BM=8,BN=8,MODE=2]".to_string(), 0.2),
        ("gemm_naive[BM=8,BN=8,MODE=3]".to_string(), 2.0),
    ]);
    for (dims, mode_1) in [((17, 9, 4), "rejected"), ((17, 9, 5), "pruned")] {
        let gemm_call = NAIVE.call(&plain(dims), false).unwrap();
        let call = gemm_call.call();
        let mut bed = LavapipeBed {
            rt: &rt,
            workload: GemmWorkload::new(&rt, &NAIVE, &plain(dims), false, 5).unwrap(),
            true_ms: true_ms.clone(),
        };
        let report = tune(
            &family,
            &call,
            rt.device(),
            &mut bed,
            &TuneOptions::default(),
        )
        .unwrap();
        assert_eq!(
            family.candidates()[report.winner].name(),
            "gemm_naive[BM=8,BN=8,MODE=0]"
        );
        let fate = match &report.statuses[1] {
            Status::Rejected { reason } => {
                assert!(reason.contains("wrong result"), "{reason}");
                "rejected"
            }
            Status::Pruned { reason, .. } => {
                assert!(reason.contains("k % 2 == 0"), "{reason}");
                "pruned"
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(fate, mode_1, "{dims:?}");
        assert!(
            matches!(&report.statuses[2], Status::Rejected { reason } if reason.contains("NaN")),
            "{:?}",
            report.statuses[2]
        );
    }
}

fn gemm_f32_name(consts: &[i64]) -> String {
    warpforge_kernels::gemm::gemm_f32::def().variant_name(consts)
}

/// Runs `tuned` on random inputs and compares with the float64 reference.
fn run_and_check(rt: &Runtime, tuned: &TunedGemm<f32, f32>, (m, n, k): (u32, u32, u32)) {
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let mut inputs = warpforge_tests::Inputs::new(3);
    let (a, b, c_in) = (
        inputs.f32s(mu * ku),
        inputs.f32s(ku * nu),
        inputs.f32s(mu * nu),
    );
    let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
    let mut dc = rt.upload(&c_in).unwrap();
    tuned
        .run(rt, &da, &db, &mut dc, (m, n, k), 1.5, -0.5)
        .unwrap();
    let expected = reference::gemm(&a, &b, &c_in, (mu, nu, ku), 1.5, -0.5);
    let out = rt.download(&dc).unwrap();
    let d = warpforge_tests::compare::deviation(&out, &expected);
    assert!(d.passes(1e-5), "{d}");
}

#[test]
fn dispatch_from_the_database_and_on_a_miss() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let dims = (33, 17, 9);
    let tuned =
        TunedGemm::with_policy(&rt, &GEMM_F32, MissPolicy::Heuristic, Some(dir.path())).unwrap();
    let selection = tuned.select(&rt, &plain(dims), false).unwrap();
    assert_eq!(selection.source, Source::Heuristic);
    assert_eq!(
        tuned.dispatcher().candidate(selection).name(),
        gemm_f32_name(&DEFAULT_F32.values())
    );
    run_and_check(&rt, &tuned, dims);
    let stats = tuned.dispatcher().stats();
    assert_eq!((stats.heuristic, stats.database, stats.tuned), (1, 0, 0));

    // Record another winner for the key, as a tuning process would.
    let winner = [64, 64, 8, 8, 4];
    let key = tuned
        .dispatcher()
        .key(&GEMM_F32.call(&plain(dims), false).unwrap().call());
    let mut db = TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device())).unwrap();
    db.record(
        key,
        Record::new(gemm_f32_name(&winner), winner.to_vec(), 1.0),
    )
    .unwrap();

    // This dispatcher resolved the key already and keeps its choice; a new
    // one (a later process) reads the database.
    assert_eq!(tuned.select(&rt, &plain(dims), false).unwrap(), selection);
    let later =
        TunedGemm::with_policy(&rt, &GEMM_F32, MissPolicy::Heuristic, Some(dir.path())).unwrap();
    let selection = later.select(&rt, &plain(dims), false).unwrap();
    assert_eq!(selection.source, Source::Database);
    assert_eq!(
        later.dispatcher().candidate(selection).name(),
        gemm_f32_name(&winner)
    );
    // Another shape in the same bucket and with the same alignments shares the result.
    assert_eq!(
        later.select(&rt, &plain((40, 19, 13)), false).unwrap(),
        selection
    );
    run_and_check(&rt, &later, (40, 19, 13));
    assert_eq!(later.dispatcher().stats().database, 1);
    assert_eq!(later.dispatcher().stats().tuned, 0);
    // Another bucket misses.
    assert_eq!(
        later
            .select(&rt, &plain((330, 17, 9)), false)
            .unwrap()
            .source,
        Source::Heuristic
    );
}

/// Doubles `x`; `ALIGNED` variants require n % 4 == 0.
#[kernel(
    arch(wgsl),
    block(64),
    tune(T = [1, 2], ALIGNED = [true, false]),
    requires(x.len() >= n, !ALIGNED || n % 4 == 0)
)]
pub fn double<const T: u32, const ALIGNED: bool>(x: &mut [f32], n: u32) {
    let i = block_idx().x * 64 + thread_idx().x;
    if i < n {
        x[i] = x[i] * 2.0;
    }
}

fn double_family() -> Family {
    Family::new("double", &[double::def()])
        .unwrap()
        .prefer(double::def(), &[2, 0])
        .unwrap()
}

/// A `double` call on n elements: the alignment of the end of `x` (16
/// bytes when n % 4 == 0, else 4).
fn double_call(n: u32) -> InPlaceCall {
    InPlaceCall::new(n, if n.is_multiple_of(4) { 16 } else { 4 })
}

fn select_double(
    dispatcher: &Dispatcher,
    rt: &Runtime,
    n: u32,
) -> Result<warpforge::tune::Selection, Error> {
    let double = double_call(n);
    let call = double.call();
    dispatcher.select(rt, &call, no_workload)
}

/// Stores `consts` as the winner of `double` on n elements in `dir`.
fn record_double(rt: &Runtime, dir: &std::path::Path, n: u32, consts: [i64; 2]) {
    let dispatcher =
        Dispatcher::new(rt, double_family(), MissPolicy::Heuristic, Some(dir)).unwrap();
    let double = double_call(n);
    let call = double.call();
    let mut db = TuneDb::open(Some(dir), &GpuModel::of(rt.device())).unwrap();
    db.record(
        dispatcher.key(&call),
        Record::new(double::def().variant_name(&consts), consts.to_vec(), 1.0),
    )
    .unwrap();
}

#[test]
fn stale_winners_are_never_dispatched() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    // An ALIGNED winner stored under the key of a call it cannot take (as a
    // database from before the kernel's `requires` changed would hold), and a
    // winner the family no longer has.
    record_double(&rt, dir.path(), 1001, [1, 1]);
    record_double(&rt, dir.path(), 4001, [8, 0]);
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::Heuristic,
        Some(dir.path()),
    )
    .unwrap();
    for n in [1001, 4001] {
        let selection = select_double(&dispatcher, &rt, n).unwrap();
        assert_eq!(selection.source, Source::Heuristic);
        assert_eq!(
            dispatcher.candidate(selection).name(),
            "double[T=2,ALIGNED=0]"
        );
    }
    assert_eq!(dispatcher.stats().stale, 2);
    assert_eq!(dispatcher.stats().heuristic, 2);
}

#[test]
fn nearest_bucket_policy() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    record_double(&rt, dir.path(), 1024, [1, 1]);
    record_double(&rt, dir.path(), 4096, [2, 1]);
    record_double(&rt, dir.path(), 1023, [1, 0]);
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::NearestBucket,
        Some(dir.path()),
    )
    .unwrap();
    let pick = |n: u32| {
        let selection = select_double(&dispatcher, &rt, n).unwrap();
        (
            selection.source,
            dispatcher.candidate(selection).name().to_string(),
        )
    };
    // 2048 is one doubling from both 1024 and 4096: the smaller bucket wins.
    assert_eq!(
        pick(2048),
        (
            Source::Nearest(ShapeBucket::gemm(1024, 1, 1)),
            "double[T=1,ALIGNED=1]".to_string()
        )
    );
    assert_eq!(
        pick(16384),
        (
            Source::Nearest(ShapeBucket::gemm(4096, 1, 1)),
            "double[T=2,ALIGNED=1]".to_string()
        )
    );
    // Only records with the same alignments are near: n = 2047 finds 1023's.
    assert_eq!(
        pick(2047),
        (
            Source::Nearest(ShapeBucket::gemm(1024, 1, 1)),
            "double[T=1,ALIGNED=0]".to_string()
        )
    );
    assert_eq!(pick(4096).0, Source::Database);
    assert_eq!(dispatcher.stats().nearest, 3);
    // Nothing near with these alignments and nothing stored: the heuristic.
    let empty = tempfile::tempdir().unwrap();
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::NearestBucket,
        Some(empty.path()),
    )
    .unwrap();
    assert_eq!(
        select_double(&dispatcher, &rt, 100).unwrap().source,
        Source::Heuristic
    );
}

#[test]
fn corrupt_databases_and_impossible_calls_are_reported() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let gpu = GpuModel::of(rt.device());
    std::fs::write(
        dir.path().join(format!("{}.json", gpu.file_stem())),
        "{\"schema\": 1, \"gp",
    )
    .unwrap();
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::Heuristic,
        Some(dir.path()),
    )
    .unwrap();
    let warnings = dispatcher.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("not a valid tuning database"),
        "{warnings:?}"
    );
    assert_eq!(
        select_double(&dispatcher, &rt, 64).unwrap().source,
        Source::Heuristic
    );
    // The next record replaces the corrupt file.
    record_double(&rt, dir.path(), 64, [1, 1]);
    let reopened = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::Heuristic,
        Some(dir.path()),
    )
    .unwrap();
    assert!(reopened.warnings().is_empty());
    assert_eq!(
        select_double(&reopened, &rt, 64).unwrap().source,
        Source::Database
    );

    // No variant can take a call: an error naming a reason, not a panic.
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::Heuristic,
        Some(dir.path()),
    )
    .unwrap();
    let args = [warpforge::KernelArg::scalar(1.0f32).info()];
    let call = Call {
        dtypes: "f32",
        shape: ShapeBucket::gemm(8, 1, 1),
        alignments: &[16],
        args: &args,
    };
    let err = dispatcher
        .select(&rt, &call, no_workload)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no variant of `double` can take this call"),
        "{err}"
    );
}

#[test]
fn dispatch_is_shared_across_threads() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    record_double(&rt, dir.path(), 512, [1, 1]);
    let dispatcher = Dispatcher::new(
        &rt,
        double_family(),
        MissPolicy::Heuristic,
        Some(dir.path()),
    )
    .unwrap();
    let selections: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| select_double(&dispatcher, &rt, 512).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(selections.iter().all(|s| *s == selections[0]));
    assert_eq!(selections[0].source, Source::Database);
    // Resolved once, whatever the threads' interleaving.
    assert_eq!(dispatcher.stats().database, 1);
}

/// `double` under another family name: the shipped records of these tests
/// (process-wide) never meet the other tests' keys. Each test uses its own
/// shape buckets.
fn travel_family() -> Family {
    Family::new("double_travel", &[double::def()])
        .unwrap()
        .prefer(double::def(), &[2, 0])
        .unwrap()
}

fn travel_dispatcher(rt: &Runtime, policy: MissPolicy, dir: &std::path::Path) -> Dispatcher {
    Dispatcher::new(rt, travel_family(), policy, Some(dir)).unwrap()
}

/// The key of `double_travel` on n elements on `rt`'s device.
fn travel_key(rt: &Runtime, n: u32) -> TuneKey {
    let empty = tempfile::tempdir().unwrap();
    let double = double_call(n);
    let call = double.call();
    travel_dispatcher(rt, MissPolicy::Heuristic, empty.path()).key(&call)
}

/// Records `consts` as the winner under `key` in the database of `rt`'s GPU in `dir`.
fn record_travel(rt: &Runtime, dir: &std::path::Path, key: TuneKey, consts: [i64; 2]) {
    let mut db = TuneDb::open(Some(dir), &GpuModel::of(rt.device())).unwrap();
    db.record(
        key,
        Record::new(double::def().variant_name(&consts), consts.to_vec(), 1.0),
    )
    .unwrap();
}

/// A file as `TuneDb::export` (`tune --export`) writes it, holding `records`.
fn exported(
    rt: &Runtime,
    records: &[(TuneKey, [i64; 2])],
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for (key, consts) in records {
        record_travel(rt, dir.path(), key.clone(), *consts);
    }
    let path = dir.path().join("shipped.json");
    TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device()))
        .unwrap()
        .export(&path)
        .unwrap();
    (dir, path)
}

fn select_travel(dispatcher: &Dispatcher, rt: &Runtime, n: u32) -> (Source, String) {
    let selection = select_double(dispatcher, rt, n).unwrap();
    (
        selection.source,
        dispatcher.candidate(selection).name().to_string(),
    )
}

#[test]
fn a_shipped_database_resolves_calls_and_a_local_record_beats_it() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let (_files, path) = exported(
        &rt,
        &[
            (travel_key(&rt, 300), [1, 1]),
            (travel_key(&rt, 600), [1, 0]),
        ],
    );
    // As an application embeds it with include_bytes!.
    let bytes = std::fs::read(&path).unwrap();
    let shipped = ShippedDb::from_bytes(&bytes).unwrap();
    assert_eq!(shipped.len(), 2);
    ship(shipped);

    let local = tempfile::tempdir().unwrap();
    let dispatcher = travel_dispatcher(&rt, MissPolicy::Heuristic, local.path());
    assert_eq!(
        select_travel(&dispatcher, &rt, 300),
        (Source::Shipped, "double[T=1,ALIGNED=1]".to_string())
    );
    let double = double_call(300);
    let call = double.call();
    assert_eq!(
        dispatcher.stored(&call).unwrap().variant,
        "double[T=1,ALIGNED=1]"
    );
    assert_eq!(dispatcher.stats().shipped, 1);
    assert!(
        dispatcher.warnings().is_empty(),
        "{:?}",
        dispatcher.warnings()
    );
    // Nothing was written to the local database.
    assert_eq!(std::fs::read_dir(local.path()).unwrap().count(), 0);

    // Measured on this machine: the local record wins over the shipped one.
    record_travel(&rt, local.path(), travel_key(&rt, 600), [2, 1]);
    let dispatcher = travel_dispatcher(&rt, MissPolicy::Heuristic, local.path());
    assert_eq!(
        select_travel(&dispatcher, &rt, 600),
        (Source::Database, "double[T=2,ALIGNED=1]".to_string())
    );
    // A shipped file read from a path works the same.
    ship(ShippedDb::from_file(&path).unwrap());
    assert_eq!(select_travel(&dispatcher, &rt, 300).0, Source::Shipped);
}

#[test]
fn shipped_records_of_another_gpu_or_stale_ones_do_not_apply() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    // n = 5001 cannot take an ALIGNED variant: the shipped winner is stale.
    let (_files, path) = exported(
        &rt,
        &[
            (travel_key(&rt, 5000), [1, 1]),
            (travel_key(&rt, 5001), [1, 1]),
        ],
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let gpu = GpuModel::of(rt.device());
    let other_gpu = text.replace(&gpu.name, "Another GPU");
    assert_ne!(other_gpu, text);
    ship(ShippedDb::from_bytes(other_gpu.as_bytes()).unwrap());
    let local = tempfile::tempdir().unwrap();
    let dispatcher = travel_dispatcher(&rt, MissPolicy::Heuristic, local.path());
    assert_eq!(
        select_travel(&dispatcher, &rt, 5000),
        (Source::Heuristic, "double[T=2,ALIGNED=0]".to_string())
    );
    ship(ShippedDb::from_bytes(text.as_bytes()).unwrap());
    assert_eq!(
        select_travel(&dispatcher, &rt, 5001),
        (Source::Heuristic, "double[T=2,ALIGNED=0]".to_string())
    );
    assert_eq!(dispatcher.stats().stale, 1);
}

#[test]
fn a_corrupt_shipped_database_is_refused_with_what_was_wrong() {
    let err = ShippedDb::from_bytes(b"{\"schema\": 1, \"gp")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the embedded database (17 bytes) is not a valid tuning database (")
            && err.contains("tune --export"),
        "{err}"
    );
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let (files, path) = exported(&rt, &[(travel_key(&rt, 700), [1, 1])]);
    let text = std::fs::read_to_string(&path).unwrap();
    let truncated = files.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() - 10]).unwrap();
    let err = ShippedDb::from_file(&truncated).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "{} is not a valid tuning database",
            truncated.display()
        )),
        "{err}"
    );
}

/// Records under `n`'s key but for the driver: re-validation asks for tuning
/// inputs, and without any the record is not used, nothing is recorded
/// under the call's key, and the miss policy applies.
#[test]
fn another_drivers_record_is_not_trusted_unchecked() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let older = |n: u32, driver: &str| TuneKey {
        driver_version: driver.to_string(),
        ..travel_key(&rt, n)
    };
    let local = tempfile::tempdir().unwrap();
    record_travel(&rt, local.path(), older(1200, "vulkan/old"), [1, 1]);
    let (_files, path) = exported(&rt, &[(older(2400, "vulkan/older"), [1, 1])]);
    ship(ShippedDb::from_file(&path).unwrap());
    let dispatcher = travel_dispatcher(&rt, MissPolicy::Heuristic, local.path());
    for n in [1200, 2400] {
        let double = double_call(n);
        let call = double.call();
        let mut asked = false;
        let selection = dispatcher
            .select(&rt, &call, || {
                asked = true;
                no_workload()
            })
            .unwrap();
        assert_eq!(selection.source, Source::Heuristic, "{n}");
        assert!(asked, "re-validation asks for the tuning inputs");
        assert_eq!(dispatcher.stored(&call), None);
    }
    assert_eq!(dispatcher.stats().revalidated, 0);
    assert_eq!(dispatcher.stats().heuristic, 2);
}

/// Each layout of A, B and C, each activation, with and without a bias,
/// one batch or three with padded strides: the problems the key tells apart.
fn whole_problems(dims: (u32, u32, u32)) -> Vec<(GemmProblem<f32>, bool)> {
    let (m, n, k) = dims;
    let mut problems = Vec::new();
    for a_layout in MatrixLayout::ALL {
        for b_layout in MatrixLayout::ALL {
            for c_layout in MatrixLayout::ALL {
                for activation in Activation::ALL {
                    for (batches, with_bias) in [(1, false), (1, true), (3, true), (3, false)] {
                        let batch = match batches {
                            1 => GemmBatch::packed(1, dims),
                            _ => GemmBatch {
                                count: batches,
                                stride_a: m * k + 3,
                                stride_b: k * n + 1,
                                stride_c: m * n + 5,
                            },
                        };
                        let problem = GemmProblem {
                            a_layout,
                            b_layout,
                            c_layout,
                            batch,
                            activation,
                            ..GemmProblem::new(dims, 1.5, -0.5)
                        };
                        problems.push((problem, with_bias));
                    }
                }
            }
        }
    }
    problems
}

/// Runs `problem` through `tuned` on random inputs (C's elements between
/// batches included, which must keep their values) and checks all of C
/// against the float64 reference.
fn run_whole_problem(
    rt: &Runtime,
    tuned: &TunedGemm<f32, f32>,
    problem: &GemmProblem<f32>,
    with_bias: bool,
) {
    let mut inputs = warpforge_tests::Inputs::new(7);
    let (a, b, c_in, bias) = (
        inputs.f32s(problem.a_len() as usize),
        inputs.f32s(problem.b_len() as usize),
        inputs.f32s(problem.c_len() as usize),
        inputs.f32s(problem.n as usize),
    );
    let (da, db, dbias) = (
        rt.upload(&a).unwrap(),
        rt.upload(&b).unwrap(),
        rt.upload(&bias).unwrap(),
    );
    let mut dc = rt.upload(&c_in).unwrap();
    let bias_view = with_bias.then(|| BufferRef::from(&dbias));
    tuned
        .gemm(rt, problem, &da, &db, &mut dc, bias_view)
        .unwrap();
    let wide = |x: &[f32]| x.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
    let spec = reference::GemmSpec {
        a_layout: problem.a_layout,
        b_layout: problem.b_layout,
        c_layout: problem.c_layout,
        batch: problem.batch,
        alpha: f64::from(problem.alpha),
        beta: f64::from(problem.beta),
        activation: problem.activation,
        ..reference::GemmSpec::new(problem.m as usize, problem.n as usize, problem.k as usize)
    };
    let bias = wide(&bias);
    let expected = reference::gemm_general(
        &spec,
        &wide(&a),
        &wide(&b),
        Some(&wide(&c_in)),
        with_bias.then_some(&bias[..]),
    );
    let out = wide(&rt.download(&dc).unwrap());
    let tolerance = warpforge_tests::compare::GemmTolerance {
        precision: GemmPrecision::F32,
        output: warpforge::Scalar::F32,
        k: problem.k as usize,
        activation: problem.activation,
    };
    let check = warpforge_tests::compare::check_gemm(&out, &expected, &tolerance);
    let dtypes = GEMM_F32
        .call(problem, with_bias)
        .unwrap()
        .call()
        .dtypes
        .to_string();
    assert!(
        check.passes(),
        "{dtypes}, {} batches: {check}",
        problem.batch.count
    );
}

#[test]
fn every_layout_epilogue_and_batch_is_dispatched_and_correct() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let tuned =
        TunedGemm::with_policy(&rt, &GEMM_F32, MissPolicy::Heuristic, Some(dir.path())).unwrap();
    let problems = whole_problems((19, 13, 7));
    for (problem, with_bias) in &problems {
        run_whole_problem(&rt, &tuned, problem, *with_bias);
    }
    // One resolution per key: every problem above has its own.
    let stats = tuned.dispatcher().stats();
    assert_eq!(stats.heuristic as usize, problems.len());
    // The plain case is `run`'s problem: the same key, resolved already.
    let mut c = rt.alloc_zeroed::<f32>(19 * 13).unwrap();
    let a = rt.upload(&vec![1.0f32; 19 * 7]).unwrap();
    let b = rt.upload(&vec![1.0f32; 7 * 13]).unwrap();
    tuned
        .run(&rt, &a, &b, &mut c, (19, 13, 7), 1.0, 0.0)
        .unwrap();
    assert_eq!(tuned.dispatcher().stats(), stats);
    assert!(rt.download(&c).unwrap().iter().all(|&v| v == 7.0));
    // A bias shorter than a row of C, and a C too short for its batches, are
    // refused before anything is selected.
    let (batched, _) = problems.iter().find(|(p, _)| p.batch.count == 3).unwrap();
    let err = tuned
        .gemm(&rt, batched, &a, &b, &mut c, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("pass a larger buffer"), "{err}");
    let short_bias = rt.alloc_zeroed::<f32>(3).unwrap();
    let plain_problem = plain((19, 13, 7));
    let err = tuned
        .gemm(
            &rt,
            &plain_problem,
            &a,
            &b,
            &mut c,
            Some(BufferRef::from(&short_bias)),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the bias holds 3 values and C has 13 columns"),
        "{err}"
    );
    assert_eq!(tuned.dispatcher().stats(), stats);
}

#[test]
fn tuning_a_whole_problem_verifies_it_and_keys_it_apart() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let dims = (21, 10, 6);
    let nn_bias_relu = GemmProblem {
        b_layout: MatrixLayout::RowMajor,
        activation: Activation::Relu,
        ..GemmProblem::new(dims, 1.0, 0.0)
    };
    let tuned =
        TunedGemm::with_policy(&rt, &GEMM_F32, MissPolicy::TuneNow, Some(dir.path())).unwrap();
    // Tuned on the whole problem: the workload's reference applies the bias and ReLU.
    run_whole_problem(&rt, &tuned, &nn_bias_relu, true);
    let outcomes = tuned.dispatcher().take_outcomes();
    assert_eq!(outcomes.len(), 1);
    let report = &outcomes[0].report;
    assert!(
        !report
            .statuses
            .iter()
            .any(|s| matches!(s, Status::Rejected { .. })),
        "{:?}",
        report.statuses
    );
    assert_eq!(outcomes[0].key.dtypes, "f32.row*f32.row->f32.row+bias+relu");
    let bias_relu_winner = report.winner;

    // Record another winner under the plain key of the same shape: the
    // bias + ReLU key keeps its own, and the plain one gets the recorded one.
    let plain_key = tuned
        .dispatcher()
        .key(&GEMM_F32.call(&plain(dims), false).unwrap().call());
    assert_eq!(plain_key.shape, outcomes[0].key.shape);
    let candidates = tuned.dispatcher().family().candidates();
    let other = (bias_relu_winner + 1) % candidates.len();
    let mut db = TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device())).unwrap();
    let record = Record::new(
        candidates[other].name(),
        candidates[other].consts.clone(),
        1.0,
    );
    db.record(plain_key, record).unwrap();
    let later =
        TunedGemm::with_policy(&rt, &GEMM_F32, MissPolicy::Heuristic, Some(dir.path())).unwrap();
    let for_plain = later.select(&rt, &plain(dims), false).unwrap();
    let for_bias_relu = later.select(&rt, &nn_bias_relu, true).unwrap();
    assert_eq!(
        (for_plain.source, for_plain.candidate),
        (Source::Database, other)
    );
    assert_eq!(
        (for_bias_relu.source, for_bias_relu.candidate),
        (Source::Database, bias_relu_winner)
    );
    // Without the bias, or with GELU, or column-major C: other keys, untuned.
    let relu_only = later.select(&rt, &nn_bias_relu, false).unwrap();
    let gelu = GemmProblem {
        activation: Activation::GeluTanh,
        ..nn_bias_relu
    };
    let col_c = GemmProblem {
        c_layout: MatrixLayout::ColMajor,
        ..nn_bias_relu
    };
    for selection in [
        relu_only,
        later.select(&rt, &gelu, true).unwrap(),
        later.select(&rt, &col_c, true).unwrap(),
    ] {
        assert_eq!(selection.source, Source::Heuristic);
    }
}

/// The naive GEMM beside the SIMT f32 GEMM, the naive one preferred: it can
/// take only the plain row-major problem.
static NAIVE_AND_F32: GemmKind<f32, f32> = GemmKind::new(
    "gemm_naive_and_f32",
    GemmPrecision::F32,
    MatrixLayout::RowMajor,
    || vec![gemm_naive::def(), warpforge_kernels::gemm::gemm_f32::def()],
    || vec![(gemm_naive::def(), vec![8, 8, 0], every_shape)],
);

#[test]
fn a_variant_that_cannot_take_a_problem_is_never_selected() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let dims = (17, 9, 4);
    let naive_correct = 0;
    let naive_no_epilogue = 3;
    let tuned =
        TunedGemm::with_policy(&rt, &NAIVE_AND_F32, MissPolicy::Heuristic, Some(dir.path()))
            .unwrap();
    let candidates = tuned.dispatcher().family().candidates();
    let is_naive = |candidate: usize| candidates[candidate].def.ir.name == "gemm_naive";
    // The plain problem: the preferred naive variant.
    let selection = tuned.select(&rt, &plain(dims), false).unwrap();
    assert_eq!(selection.candidate, naive_correct);
    // The naive kernel reads row-major operands into a row-major C: it can
    // take A, B and C all row-major, or all column-major (C^T = B^T A^T, two
    // row-major operands again); the variant that claims a bias, activations
    // and batches any of those, the others only a plain problem. Every
    // other problem goes to a gemm_f32 variant.
    let problems = whole_problems(dims);
    for (problem, with_bias) in &problems[1..] {
        let layouts = [problem.a_layout, problem.b_layout, problem.c_layout];
        let naive_layouts = layouts.iter().all(|&l| l == layouts[0]);
        let plain_epilogue =
            !with_bias && problem.activation == Activation::Identity && problem.batch.count == 1;
        let selection = tuned.select(&rt, problem, *with_bias).unwrap();
        let candidate = selection.candidate;
        let allowed = !is_naive(candidate)
            || naive_layouts && (plain_epilogue || candidate == naive_no_epilogue);
        assert!(
            allowed,
            "{} for {problem:?}, bias {with_bias}",
            candidates[candidate].name()
        );
    }
    // A record naming the naive variant under a column-major A's key is
    // stale: never dispatched.
    let col_a = GemmProblem {
        a_layout: MatrixLayout::ColMajor,
        ..plain(dims)
    };
    let key = tuned
        .dispatcher()
        .key(&NAIVE_AND_F32.call(&col_a, false).unwrap().call());
    let naive = &tuned.dispatcher().family().candidates()[naive_correct];
    let mut db = TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device())).unwrap();
    db.record(key, Record::new(naive.name(), naive.consts.clone(), 0.01))
        .unwrap();
    let later =
        TunedGemm::with_policy(&rt, &NAIVE_AND_F32, MissPolicy::TuneNow, Some(dir.path())).unwrap();
    let selection = later.select(&rt, &col_a, false).unwrap();
    assert!(!is_naive(selection.candidate), "{selection:?}");
    assert_eq!(later.dispatcher().stats().stale, 1);
    // Tuning a batched problem with a bias and ReLU: the naive variant that
    // claims it and skips the epilogue and the later batches is rejected by
    // verification; the variants that cannot take it are pruned.
    let (batched, _) = problems
        .iter()
        .find(|(p, bias)| {
            p.batch.count == 3
                && *bias
                && p.activation == Activation::Relu
                && p.a_layout == MatrixLayout::RowMajor
                && p.b_layout == MatrixLayout::RowMajor
                && p.c_layout == MatrixLayout::RowMajor
        })
        .unwrap();
    later.select(&rt, batched, true).unwrap();
    let outcome = later.dispatcher().take_outcomes().pop().unwrap();
    let statuses = &outcome.report.statuses;
    assert!(
        matches!(&statuses[naive_no_epilogue], Status::Rejected { reason } if reason.contains("poison")),
        "{:?}",
        statuses[naive_no_epilogue]
    );
    for mode in [0, 1, 2] {
        assert!(
            matches!(&statuses[mode], Status::Pruned { .. }),
            "{:?}",
            statuses[mode]
        );
    }
    assert!(!is_naive(outcome.report.winner));
}

#[test]
fn verification_rejects_a_skipped_epilogue_and_unwritten_batches() {
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dims = (13, 10, 6);
    // One batch with a bias and ReLU: MODE 3 skips both.
    let epilogue = GemmProblem {
        activation: Activation::Relu,
        ..plain(dims)
    };
    let mut workload = GemmWorkload::new(&rt, &NAIVE, &epilogue, true, 3).unwrap();
    let wrong = workload.verify(&rt, &naive(3)).unwrap().unwrap_err();
    assert!(wrong.contains("float64 reference"), "{wrong}");
    // Plain, MODE 3 is correct.
    let mut workload = GemmWorkload::new(&rt, &NAIVE, &plain(dims), false, 3).unwrap();
    assert_eq!(workload.verify(&rt, &naive(3)).unwrap(), Ok(()));
    // Three batches: MODE 3 writes the first only.
    let batched = GemmProblem {
        batch: GemmBatch::packed(3, dims),
        ..plain(dims)
    };
    let mut workload = GemmWorkload::new(&rt, &NAIVE, &batched, false, 3).unwrap();
    let unwritten = workload.verify(&rt, &naive(3)).unwrap().unwrap_err();
    assert!(
        unwritten.contains("260 of 390 outputs are the poison")
            && unwritten.contains("batch 1 of 3"),
        "{unwritten}"
    );
    // beta != 0: a second run, from a random C, checks beta too (MODE 3
    // applies it).
    let with_beta = GemmProblem {
        beta: -0.5,
        ..plain(dims)
    };
    let mut workload = GemmWorkload::new(&rt, &NAIVE, &with_beta, false, 3).unwrap();
    assert_eq!(workload.verify(&rt, &naive(3)).unwrap(), Ok(()));
    // C batches that overlap cannot be tuned.
    let overlapping = GemmProblem {
        batch: GemmBatch {
            stride_c: 10,
            ..GemmBatch::packed(3, dims)
        },
        ..plain(dims)
    };
    let err = GemmWorkload::new(&rt, &NAIVE, &overlapping, false, 3)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("C's batches overlap"), "{err}");
}

#[test]
fn a_repeated_call_selects_what_the_dispatcher_would() {
    // `select` keeps its last call's selection for a call that repeats it:
    // over a sequence where problems repeat, alternate, and differ only in
    // alpha, the bias or a layout, one handle selects what a fresh handle
    // (a fresh dispatcher) selects for each call alone.
    let rt = warpforge_tests::lavapipe("the dispatch tests");
    let dir = tempfile::tempdir().unwrap();
    let dims = (19, 11, 5);
    let problems = whole_problems(dims);
    let scaled = (
        GemmProblem {
            alpha: 2.0,
            ..problems[0].0
        },
        problems[0].1,
    );
    let mut sequence = vec![problems[0], problems[0], scaled, problems[0]];
    for pair in problems.windows(2) {
        sequence.extend([pair[0], pair[1], pair[1], pair[0], (pair[0].0, !pair[0].1)]);
    }
    let tuned =
        TunedGemm::with_policy(&rt, &NAIVE_AND_F32, MissPolicy::Heuristic, Some(dir.path()))
            .unwrap();
    for (problem, with_bias) in &sequence {
        let fresh =
            TunedGemm::with_policy(&rt, &NAIVE_AND_F32, MissPolicy::Heuristic, Some(dir.path()))
                .unwrap();
        assert_eq!(
            tuned.select(&rt, problem, *with_bias).unwrap(),
            fresh.select(&rt, problem, *with_bias).unwrap(),
            "{problem:?}, bias {with_bias}"
        );
    }
}
