//! The tuned launches of this crate on wgpu (Mesa's lavapipe in the CPU
//! tier), each result checked against the CPU: untuned calls, tuning on the
//! call's own (in-place) data, a second runtime served from the database, a
//! wrong variant that never wins, another driver's winner re-validated, an
//! imported and a shipped database, a corrupt file, and threads tuning at
//! once. A missing adapter fails the test with what to install: not run is
//! never passed.

use std::path::Path;

use warpforge::prelude::*;
use warpforge::tune::{
    ship, GpuModel, MissPolicy, ShippedDb, Source, Status, TuneDb, TuneSettings,
};
use warpforge::BackendKind;
use warpforge_example_tuned::{checked_scale_add, random, row_sums, row_sums_grid, scale_add};

fn lavapipe(policy: MissPolicy, dir: &Path) -> Runtime {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let rt = Runtime::with_backend(BackendKind::Wgpu).unwrap_or_else(|e| {
        panic!(
            "this test needs a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    rt.set_tune_settings(TuneSettings {
        policy: Some(policy),
        dir: Some(dir.to_path_buf()),
    });
    rt
}

/// The database file of `rt`'s device in `dir`.
fn db_file(rt: &Runtime, dir: &Path) -> std::path::PathBuf {
    TuneDb::open(Some(dir), &GpuModel::of(rt.device()))
        .unwrap()
        .path()
}

/// [`checked_scale_add`], which must pass.
fn scale_add_checked(rt: &Runtime, n: usize, seed: u64) -> (Source, Vec<i64>) {
    checked_scale_add(rt, n, seed).unwrap_or_else(|e| panic!("n = {n}: {e}"))
}

#[test]
fn untuned_calls_take_the_default_and_compute_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::Heuristic, dir.path());
    for n in [1usize, 255, 256 * 4 + 3, 100_000] {
        assert_eq!(
            scale_add_checked(&rt, n, 7),
            (Source::Heuristic, vec![4]),
            "tune_default(ITEMS = 4)"
        );
    }
    let (rows, cols) = (37u32, 1000u32);
    let hx = random((rows * cols) as usize, 9);
    let x = rt.upload(&hx).unwrap();
    let mut sums = rt.alloc_zeroed::<f32>(rows as usize).unwrap();
    row_sums::tuned(&rt)
        .unwrap()
        .launch(|c| row_sums_grid(rows, c.ROWS), &x, &mut sums, rows, cols)
        .unwrap();
    let got = rt.download(&sums).unwrap();
    for (r, sum) in got.iter().enumerate() {
        let want: f64 = hx[r * cols as usize..][..cols as usize]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        assert!(
            (f64::from(*sum) - want).abs() < 1e-3,
            "row {r}: {sum} against {want}"
        );
    }
    // No tuning ran and nothing was written.
    assert!(!db_file(&rt, dir.path()).exists());
}

#[test]
fn tuning_keeps_the_callers_data_and_a_second_runtime_uses_the_winner() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::TuneNow, dir.path());
    let (source, winner) = scale_add_checked(&rt, 50_000, 11);
    assert_eq!(source, Source::Tuned);
    let outcomes: Vec<_> = rt
        .tuned_dispatchers()
        .into_iter()
        .flat_map(|(_, d)| d.take_outcomes())
        .collect();
    assert_eq!(outcomes.len(), 1);
    let report = &outcomes[0].report;
    assert_eq!(report.statuses.len(), 4, "ITEMS = 1, 2, 4, 8");
    assert!(
        report
            .statuses
            .iter()
            .all(|s| matches!(s, Status::Timed { .. } | Status::Dropped { .. })),
        "every variant verifies: {:?}",
        report.statuses
    );
    assert_eq!(outcomes[0].key.shape.sizes(), [65536]);
    // Same bucket: resolved in memory, no second tuning.
    assert_eq!(
        scale_add_checked(&rt, 40_000, 12),
        (Source::Tuned, winner.clone())
    );
    assert_eq!(scale_add::tuned(&rt).unwrap().kernel().stats().tuned, 1);

    // Another runtime (as another process would) finds the winner.
    let second = lavapipe(MissPolicy::Heuristic, dir.path());
    assert_eq!(
        scale_add_checked(&second, 60_000, 13),
        (Source::Database, winner)
    );
}

/// `x * 3` into `y`, except that `MODE = 1` adds 1 to the last element: a
/// variant that runs fine and computes a wrong result.
#[kernel(
    arch(wgsl),
    block(64),
    tune(MODE = [0, 1]),
    tune_key(y),
    tune_default(MODE = 0)
)]
fn triple<const MODE: u32>(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * 64 + thread_idx().x;
    if i < y.len() {
        let mut v = 3.0 * x[i];
        if MODE == 1 && i == y.len() - 1 {
            v += 1.0;
        }
        y[i] = v;
    }
}

#[test]
fn a_variant_with_a_wrong_result_never_wins() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::TuneNow, dir.path());
    let n = 1000;
    let hx = random(n, 21);
    let x = rt.upload(&hx).unwrap();
    let mut y = rt.alloc_zeroed::<f32>(n).unwrap();
    let tuned = triple::tuned(&rt).unwrap();
    let selection = tuned
        .launch(
            |_| Grid::blocks([(n as u32).div_ceil(64), 1, 1]),
            &x,
            &mut y,
        )
        .unwrap();
    assert_eq!(tuned.kernel().dispatcher().candidate(selection).consts, [0]);
    let want: Vec<f32> = hx.iter().map(|v| 3.0 * v).collect();
    assert_eq!(rt.download(&y).unwrap(), want);
    let outcomes = tuned.kernel().dispatcher().take_outcomes();
    let Status::Rejected { reason } = &outcomes[0].report.statuses[1] else {
        panic!(
            "MODE = 1 must be rejected: {:?}",
            outcomes[0].report.statuses
        )
    };
    assert!(
        reason.contains("element 999") && reason.contains("default variant"),
        "{reason}"
    );
}

#[test]
fn another_drivers_winner_is_revalidated_before_use() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::TuneNow, dir.path());
    let (_, winner) = scale_add_checked(&rt, 3000, 31);
    // The same record as if measured under an older driver.
    let file = db_file(&rt, dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let driver = warpforge::tune::driver_version(rt.device());
    let older = text.replace(&format!("\"{driver}\""), "\"vulkan/older-driver\"");
    assert_ne!(older, text);
    std::fs::write(&file, older).unwrap();

    let second = lavapipe(MissPolicy::Heuristic, dir.path());
    let (source, consts) = scale_add_checked(&second, 3000, 32);
    let Source::Revalidated { driver: from, kept } = source else {
        panic!("another driver's record must be re-validated, not {source:?}")
    };
    assert_eq!(from, "vulkan/older-driver");
    // Kept when it timed no slower than the default, else the default.
    assert_eq!(consts, if kept { winner } else { vec![4] });
    // Recorded under this driver: a third runtime hits it directly, once
    // the second is gone (while it lives, runtimes of its GPU model and
    // settings share its dispatcher and so its in-memory resolution).
    drop(second);
    let third = lavapipe(MissPolicy::Heuristic, dir.path());
    assert_eq!(
        scale_add_checked(&third, 3000, 33),
        (Source::Database, consts)
    );
}

#[test]
fn imported_and_shipped_databases_serve_calls() {
    let tuned_here = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::TuneNow, tuned_here.path());
    // Buckets no other test of this binary uses: shipped records are process-wide.
    let (_, small) = scale_add_checked(&rt, 200_000, 41);
    let (_, large) = scale_add_checked(&rt, 600_000, 42);
    let exported = tuned_here.path().join("export.json");
    TuneDb::open(Some(tuned_here.path()), &GpuModel::of(rt.device()))
        .unwrap()
        .export(&exported)
        .unwrap();

    let imported_here = tempfile::tempdir().unwrap();
    let mut db = TuneDb::open(Some(imported_here.path()), &GpuModel::of(rt.device())).unwrap();
    assert_eq!(db.import(&exported).unwrap(), 2);
    let imported = lavapipe(MissPolicy::Heuristic, imported_here.path());
    assert_eq!(
        scale_add_checked(&imported, 200_000, 43),
        (Source::Database, small)
    );

    // Shipped with the application, read before an empty local database.
    ship(ShippedDb::from_bytes(&std::fs::read(&exported).unwrap()).unwrap());
    let empty = tempfile::tempdir().unwrap();
    let shipped = lavapipe(MissPolicy::Heuristic, empty.path());
    assert_eq!(
        scale_add_checked(&shipped, 600_000, 44),
        (Source::Shipped, large)
    );
}

#[test]
fn a_corrupt_database_is_reported_and_calls_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::Heuristic, dir.path());
    std::fs::write(db_file(&rt, dir.path()), "{ not a database").unwrap();
    assert_eq!(
        scale_add_checked(&rt, 9000, 51),
        (Source::Heuristic, vec![4])
    );
    let warnings = scale_add::tuned(&rt)
        .unwrap()
        .kernel()
        .dispatcher()
        .warnings();
    assert!(
        warnings.iter().any(|w| w.contains("not a valid")),
        "{warnings:?}"
    );
    // Tuning replaces the corrupt file with a valid one.
    let tuning = lavapipe(MissPolicy::TuneNow, dir.path());
    assert_eq!(scale_add_checked(&tuning, 9000, 52).0, Source::Tuned);
    let db = TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device())).unwrap();
    assert!(db.warnings().is_empty() && db.len() == 1);
}

#[test]
fn threads_tune_once_per_bucket_and_runtimes_write_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::TuneNow, dir.path());
    let other = lavapipe(MissPolicy::TuneNow, dir.path());
    std::thread::scope(|scope| {
        for seed in 0..3 {
            let rt = &rt;
            scope.spawn(move || scale_add_checked(rt, 30_000, 60 + seed));
        }
        // Another runtime writing the same file at the same time.
        scope.spawn(|| {
            let (rows, cols) = (64u32, 512u32);
            let x = other.upload(&random((rows * cols) as usize, 70)).unwrap();
            let mut sums = other.alloc_zeroed::<f32>(rows as usize).unwrap();
            row_sums::tuned(&other)
                .unwrap()
                .launch(|c| row_sums_grid(rows, c.ROWS), &x, &mut sums, rows, cols)
                .unwrap();
        });
    });
    assert_eq!(scale_add::tuned(&rt).unwrap().kernel().stats().tuned, 1);
    let db = TuneDb::open(Some(dir.path()), &GpuModel::of(rt.device())).unwrap();
    let families: Vec<&str> = db.records().map(|(key, _)| key.kernel.as_str()).collect();
    assert_eq!(families.len(), 2, "{families:?}");
    assert!(
        families.iter().any(|f| f.ends_with("::row_sums")),
        "{families:?}"
    );
    assert!(
        families.iter().any(|f| f.ends_with("::scale_add")),
        "{families:?}"
    );
}
