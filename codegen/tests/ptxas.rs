//! Assembles every PTX snapshot with ptxas for the arch in its name, so a
//! snapshot that ptxas refuses fails here. ptxas comes from `$PTXAS`, the
//! `PATH`, or the workspace's `target/ptxas-venv` (PyPI's
//! nvidia-cuda-nvcc-cu12 12.9, the last ptxas that still assembles sm_70).
//! Without one the test fails: CI always has it.

mod common;

use std::path::{Path, PathBuf};

use common::ptxas::find_ptxas;

/// The PTX text of an insta snapshot: what follows its `---` header.
fn snapshot_body(snap: &str) -> &str {
    let header_end = snap
        .match_indices("---\n")
        .nth(1)
        .map(|(i, _)| i + 4)
        .expect("an insta header");
    &snap[header_end..]
}

#[test]
fn every_snapshot_assembles() {
    let ptxas = find_ptxas();
    let dir = common::tests_dir().join("out/ptx");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    snaps.sort();
    assert!(!snaps.is_empty(), "no snapshots under {}", dir.display());
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptxas");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut failures = Vec::new();
    for snap in &snaps {
        let stem = snap.file_stem().unwrap().to_string_lossy().into_owned();
        let arch = stem.rsplit('.').next().unwrap();
        let ptx = snapshot_body(&std::fs::read_to_string(snap).unwrap()).to_string();
        match common::ptxas::assemble(&ptxas, arch, &ptx, &scratch, &stem) {
            Err(report) => failures.push(format!("{stem}:\n{report}")),
            Ok(report) => {
                // Registers and spills, for `--nocapture` readers.
                let usage: Vec<&str> = report
                    .lines()
                    .filter(|l| l.contains("Used") || l.contains("spill"))
                    .map(|l| l.trim().trim_start_matches("ptxas info    : "))
                    .collect();
                println!("{stem}: {}", usage.join("; "));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "ptxas rejected {} snapshot(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
