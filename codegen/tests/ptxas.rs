//! Assembles every PTX snapshot with ptxas for the arch in its name, so a
//! snapshot that ptxas refuses fails here. ptxas comes from `$PTXAS`, the
//! `PATH`, or the workspace's `target/ptxas-venv` (PyPI's
//! nvidia-cuda-nvcc-cu12 12.9, the last ptxas that still assembles sm_70).
//! Without one the test fails: CI always has it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn find_ptxas() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(path));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        if let Some(found) = std::env::split_paths(&paths)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
        {
            return Some(found);
        }
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas-venv/lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .find_map(|python| {
            let ptxas = python
                .path()
                .join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            ptxas.is_file().then_some(ptxas)
        })
}

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
    let ptxas = find_ptxas().unwrap_or_else(|| {
        panic!(
            "ptxas not found: set $PTXAS, put ptxas on PATH, or install it into target/ptxas-venv with \
             `python3 -m venv target/ptxas-venv && target/ptxas-venv/bin/pip install nvidia-cuda-nvcc-cu12==12.9.*` \
             (or the ptxas install step of `cargo xtask`)"
        )
    });
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
        let ptx = scratch.join(format!("{stem}.ptx"));
        std::fs::write(&ptx, snapshot_body(&std::fs::read_to_string(snap).unwrap())).unwrap();
        let out = Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg(&ptx)
            .arg("-o")
            .arg(scratch.join(format!("{stem}.cubin")))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
        let report = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            failures.push(format!("{stem}:\n{report}"));
        } else {
            // Registers and spills, for `--nocapture` readers.
            let usage: Vec<&str> = report
                .lines()
                .filter(|l| l.contains("Used") || l.contains("spill"))
                .map(|l| l.trim().trim_start_matches("ptxas info    : "))
                .collect();
            println!("{stem}: {}", usage.join("; "));
        }
    }
    assert!(
        failures.is_empty(),
        "ptxas rejected {} snapshot(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
