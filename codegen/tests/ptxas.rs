//! Assembles every PTX snapshot with ptxas for the arch in its name, so a
//! snapshot that ptxas refuses fails here. ptxas comes from `$PTXAS`, the
//! `PATH`, or the workspace's `target/ptxas-venv` (PyPI's
//! nvidia-cuda-nvcc-cu12 12.9, the last ptxas that still assembles sm_70).
//! Without one the test fails: CI always has it.

mod common;

use std::path::{Path, PathBuf};

use common::ptxas::find_ptxas;
use warpforge_codegen::Arch;

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

/// `min_blocks_per_sm(n)` bounds ptxas' registers per thread by what n
/// blocks on one SM leave: a kernel that keeps 128 sums live takes more
/// than 128 registers unbounded, and 64 at most when 4 blocks of 256
/// threads must share an SM's 65,536.
#[test]
fn min_blocks_per_sm_bounds_the_registers() {
    let def = common::parse_source(
        "#[kernel(arch(sm_80), block(256), tune(BLOCKS = [1, 4]), min_blocks_per_sm(BLOCKS))]
        fn sums<const BLOCKS: u32>(x: &[f32], y: &mut [f32]) {
            let t = block_idx().x * 256 + thread_idx().x;
            let mut acc = [0.0f32; 128];
            for k in 0..x.len() / 65536 {
                let v = x[k * 65536 + t];
                #[unroll]
                for j in 0..128u32 {
                    acc[j] = acc[j] * v + x[k * 65536 + j];
                }
            }
            #[unroll]
            for j in 0..128u32 {
                y[t * 128 + j] = acc[j];
            }
        }",
    )
    .unwrap();
    let ptxas = find_ptxas();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("min_blocks");
    std::fs::create_dir_all(&scratch).unwrap();
    let registers = |blocks: i64| {
        let module = warpforge_codegen::compile_ptx(&def, &[blocks], Arch::Sm80).unwrap();
        let report = common::ptxas::assemble(
            &ptxas,
            "sm_80",
            &module.text,
            &scratch,
            &format!("sums{blocks}"),
        )
        .unwrap();
        let used = report
            .split("Used ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u32>().ok());
        used.unwrap_or_else(|| panic!("no register count in:\n{report}"))
    };
    let (free, bounded) = (registers(1), registers(4));
    assert!(free > 128, "unbounded: {free} registers");
    assert!(bounded <= 64, "4 blocks per SM: {bounded} registers");
}

/// The validator's bound on `setmaxnreg_dec` is ptxas's, exactly: for
/// block shapes of whole and partial warps, bounds on blocks per SM, and
/// with or without a `setmaxnreg_inc`, ptxas assembles a decrease to the
/// largest count the validator accepts, and refuses one 8 registers more
/// (the validator's refusal, written into that PTX by hand).
#[test]
fn setmaxnreg_dec_bound_is_ptxas_bound() {
    let ptxas = find_ptxas();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("setmaxnreg");
    std::fs::create_dir_all(&scratch).unwrap();
    let compile = |threads: u32, blocks: u32, dec: u32, inc: Option<u32>| {
        let inc = inc.map_or(String::new(), |n| format!("setmaxnreg_inc({n});"));
        let def = common::parse_source(&format!(
            "#[kernel(arch(sm_90a), block({threads}), min_blocks_per_sm({blocks}))]
            fn k(y: &mut [u32]) {{
                setmaxnreg_dec({dec});
                {inc}
                y[thread_idx().x] = 1;
            }}"
        ))?;
        warpforge_codegen::compile_ptx(&def, &[], Arch::Sm90a).map_err(|e| e.to_string())
    };
    let mut checked = 0;
    for threads in [33, 96, 128, 160, 384, 1024] {
        for blocks in [1, 2, 3, 5, 12, 20]
            .into_iter()
            .filter(|b| b * threads <= 2048)
        {
            for inc in [None, Some(32), Some(136)] {
                let case = format!("block({threads}), min_blocks_per_sm({blocks}), inc {inc:?}");
                let accepted: Vec<u32> = (24..=256)
                    .step_by(8)
                    .filter(|&dec| compile(threads, blocks, dec, inc).is_ok())
                    .collect();
                let top = *accepted
                    .last()
                    .unwrap_or_else(|| panic!("{case}: no count accepted"));
                assert_eq!(
                    accepted,
                    (24..=top).step_by(8).collect::<Vec<_>>(),
                    "{case}"
                );
                let module = compile(threads, blocks, top, inc).unwrap();
                let stem = format!("k{threads}_{blocks}_{}", inc.unwrap_or(0));
                if let Err(report) =
                    common::ptxas::assemble(&ptxas, "sm_90a", &module.text, &scratch, &stem)
                {
                    panic!("{case}: ptxas refuses `setmaxnreg_dec({top})`, which the validator accepts:\n{report}");
                }
                if top == 256 {
                    continue;
                }
                let refusal = compile(threads, blocks, top + 8, inc).unwrap_err();
                assert!(
                    refusal.contains("ptxas refuses a decrease past it"),
                    "{case}: {refusal}"
                );
                let over = module.text.replace(
                    &format!("setmaxnreg.dec.sync.aligned.u32 {top};"),
                    &format!("setmaxnreg.dec.sync.aligned.u32 {};", top + 8),
                );
                assert_ne!(over, module.text, "{case}: no setmaxnreg.dec in the PTX");
                let report = common::ptxas::assemble(&ptxas, "sm_90a", &over, &scratch, &stem)
                    .expect_err(&format!("{case}: ptxas takes setmaxnreg.dec {}", top + 8));
                assert!(report.contains("setmaxnreg.dec"), "{case}: {report}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "{checked} bounds checked");
}
