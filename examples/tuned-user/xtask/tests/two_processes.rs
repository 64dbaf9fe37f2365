//! This workspace's `cargo xtask tune` on wgpu (Mesa's lavapipe in the CPU
//! tier), as two processes: the first tunes the crate's kernels and a stock
//! GEMM into a fresh database, the second (`--dispatch`) runs the same calls
//! and passes only if every one is dispatched from the database; a shape
//! nothing was tuned for then fails the check. A missing adapter fails the
//! test: not run is never passed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs the xtask binary with `args` on wgpu; its exit code and JSON report.
fn xtask(dir: &Path, report: &str, args: &[&str]) -> (Option<i32>, Value) {
    let report_path = dir.join(report);
    let runtime_dir = dir.join("xdg");
    std::fs::create_dir_all(&runtime_dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_warpforge-example-tuned-xtask"))
        .arg("tune")
        .args(args)
        .arg("--db-dir")
        .arg(dir.join("db"))
        .arg("--report")
        .arg(&report_path)
        .env("WARPFORGE_BACKEND", "wgpu")
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_ne!(
        output.status.code(),
        Some(warpforge_tuner::NOT_RUN as i32),
        "no wgpu adapter: install Mesa's lavapipe (apt-get install mesa-vulkan-drivers \
         libvulkan1)\n{stdout}"
    );
    let text = std::fs::read_to_string(&report_path).unwrap_or_else(|e| {
        panic!(
            "no report ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), serde_json::from_str(&text).unwrap())
}

const JOBS: &str = "scale_add,row_sums,gemm_f32";
const SHAPES: &str = "65536,512x512,64x64x64";

#[test]
fn a_second_process_dispatches_every_call_from_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (code, tuned) = xtask(
        dir.path(),
        "tune.json",
        &["--jobs", JOBS, "--shapes", SHAPES],
    );
    assert_eq!(code, Some(0), "{tuned:#}");
    let calls = tuned["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    for call in calls {
        let tunings = call["tunings"].as_array().unwrap();
        assert_eq!(tunings.len(), 1, "one tuning per call: {call:#}");
        assert!(tunings[0]["winner"][1].as_f64().unwrap() > 0.0, "{call:#}");
    }

    let (code, dispatched) = xtask(
        dir.path(),
        "dispatch.json",
        &["--dispatch", "--jobs", JOBS, "--shapes", SHAPES],
    );
    assert_eq!(code, Some(0), "{dispatched:#}");
    for call in dispatched["calls"].as_array().unwrap() {
        assert!(call["tunings"].as_array().unwrap().is_empty(), "{call:#}");
        for resolved in call["resolutions"].as_object().unwrap().values() {
            assert_eq!(resolved["database"], 1, "{call:#}");
            assert_eq!(resolved["heuristic"], 0, "{call:#}");
        }
    }

    // A size nothing was tuned for is not "from the database".
    let (code, missed) = xtask(
        dir.path(),
        "missed.json",
        &["--dispatch", "--jobs", "scale_add", "--shapes", "1048576"],
    );
    assert_eq!(code, Some(1), "{missed:#}");
    assert_eq!(missed["passed"], false);
}
