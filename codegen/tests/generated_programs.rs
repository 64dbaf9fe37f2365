//! Generated programs (issue 21): random well-typed SIMT kernels
//! (`genprog`) through every backend that runs without a device. For each:
//! the PTX assembles with ptxas for sm_70, sm_80 and sm_90, the WGSL
//! validates with naga, and the interpreter runs it without an error (no
//! out-of-bounds access, division by zero, divergent barrier or shuffle,
//! uninitialized read: the generator's promise that the program is defined,
//! which the lavapipe comparison in `tests/tests/generated_lavapipe.rs`
//! relies on).
//!
//! `PROGRAMS` per run (`WARPFORGE_GEN_COUNT` overrides), seeded by the clock
//! or `WARPFORGE_GEN_SEED`. ptxas starts once per `BATCH` programs and arch:
//! one module holds a batch's entries. A failure is shrunk (proptest) and
//! reported with the seed and the JSON of a regression case; the checked-in
//! cases under `tests/generated/` run every time.

mod common;
mod genprog;

use std::path::{Path, PathBuf};
use std::time::Instant;

use genprog::{Program, ARCHS};
use proptest::strategy::{Strategy, ValueTree};
use warpforge_codegen::{compile_ptx, compile_wgsl, Arch};

/// Run without the test harness (`harness = false` in Cargo.toml), which
/// hides a passing test's output: the seed and the counts belong in the CI
/// log. A failure panics, which fails the run.
fn main() {
    regression_cases_assemble_validate_and_interpret();
    generated_programs_assemble_validate_and_interpret();
}

/// Programs per run: the budget.
const PROGRAMS: usize = 10_000;

/// Programs per PTX module: ptxas's start-up is paid once per batch.
const BATCH: usize = 500;

/// Failures shrunk and reported per run (shrinking re-checks hundreds of
/// programs, with ptxas each time).
const REPORTED: usize = 3;

/// Builds the PTX for every arch and the WGSL, validates the WGSL with naga
/// and interprets the program: every check but ptxas. The PTX per arch.
fn build(program: &Program) -> Result<Vec<String>, String> {
    let ptx = ARCHS
        .iter()
        .map(|&arch| {
            compile_ptx(&program.def, &[], arch)
                .map(|module| module.text)
                .map_err(|e| format!("the PTX backend ({}): {e}", arch.name()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let wgsl = compile_wgsl(&program.def, &[], Some(program.block))
        .map_err(|e| format!("the WGSL backend: {e}"))?;
    common::naga_check(&wgsl.text)
        .map_err(|e| format!("naga rejects the WGSL:\n{e}\n{}", wgsl.text))?;
    program
        .interpret(genprog::Floats::Ieee)
        .map_err(|e| format!("the interpreter: {e}"))?;
    Ok(ptx)
}

/// Every check of one program, ptxas on its own module included: what a
/// shrunk program and a regression case must pass.
fn check(program: &Program, ptxas: &Path, scratch: &Path) -> Option<String> {
    let ptx = match build(program) {
        Ok(ptx) => ptx,
        Err(failure) => return Some(failure),
    };
    ARCHS.iter().zip(ptx).find_map(|(arch, text)| {
        common::ptxas::assemble(
            ptxas,
            arch.name(),
            &text,
            scratch,
            &format!("check_{}", arch.name()),
        )
        .err()
        .map(|report| format!("ptxas -arch={} rejects:\n{report}\n{text}", arch.name()))
    })
}

/// The entries of `modules` (PTX of one arch, one entry each) in one module:
/// the highest `.version`, and one declaration of the dynamic shared block
/// at the largest alignment any of them asks.
fn merge(arch: Arch, modules: &[&str]) -> String {
    let mut version = (0, 0);
    let mut shared: Option<(u32, String)> = None;
    let mut entries = String::new();
    for module in modules {
        let at = module
            .find(".visible .entry")
            .expect("a module has an entry");
        for line in module[..at].lines() {
            if let Some(v) = line.strip_prefix(".version ") {
                let (major, minor) = v.split_once('.').expect("`.version M.m`");
                version = version.max((major.parse().unwrap(), minor.parse().unwrap()));
            } else if let Some(rest) = line.strip_prefix(".extern .shared .align ") {
                let (align, symbol) = rest.split_once(' ').expect("`.align N .b8 NAME[];`");
                let align: u32 = align.parse().unwrap();
                if shared.as_ref().is_none_or(|(a, _)| align > *a) {
                    shared = Some((align, symbol.to_string()));
                }
            }
        }
        entries.push_str(&module[at..]);
        entries.push('\n');
    }
    let mut text = format!(
        ".version {}.{}\n.target {}\n.address_size 64\n\n",
        version.0,
        version.1,
        arch.name()
    );
    if let Some((align, symbol)) = shared {
        text.push_str(&format!(".extern .shared .align {align} {symbol}\n\n"));
    }
    text + &entries
}

/// Assembles `ptx[i]` (one per program, for `arch`) in batches; the indices
/// ptxas rejects, each found by assembling a failing batch's programs alone.
fn assemble_batches(ptxas: &Path, scratch: &Path, arch: Arch, ptx: &[&str]) -> Vec<usize> {
    let mut rejected = Vec::new();
    for (b, batch) in ptx.chunks(BATCH).enumerate() {
        // One file per arch, overwritten: 10,000 programs' PTX is hundreds of MB.
        let stem = format!("batch_{}", arch.name());
        if common::ptxas::assemble(ptxas, arch.name(), &merge(arch, batch), scratch, &stem).is_ok()
        {
            continue;
        }
        for (k, alone) in batch.iter().enumerate() {
            let index = b * BATCH + k;
            let stem = format!("alone_{}", arch.name());
            if common::ptxas::assemble(ptxas, arch.name(), alone, scratch, &stem).is_err() {
                rejected.push(index);
            }
        }
    }
    rejected
}

fn scratch_dir() -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("generated_programs");
    std::fs::create_dir_all(&scratch).unwrap();
    scratch
}

fn generated_programs_assemble_validate_and_interpret() {
    let ptxas = common::ptxas::find_ptxas();
    let scratch = scratch_dir();
    let seed = genprog::run_seed();
    let count = genprog::count("WARPFORGE_GEN_COUNT", PROGRAMS);
    let started = Instant::now();
    let mut runner = genprog::runner(seed);
    let strategy = genprog::choices();
    let mut trees = Vec::with_capacity(count);
    let mut programs = Vec::with_capacity(count);
    for i in 0..count {
        let tree = strategy
            .new_tree(&mut runner)
            .expect("choices always generate");
        programs.push(Program::generate(&format!("gen{i}"), &tree.current()));
        trees.push(tree);
    }
    let generated = started.elapsed();

    let mut failures: Vec<(usize, String)> = Vec::new();
    let mut ptx_per_arch: Vec<Vec<String>> = vec![Vec::new(); ARCHS.len()];
    let mut built = Vec::new();
    for (i, program) in programs.iter().enumerate() {
        match build(program) {
            Ok(ptx) => {
                for (all, text) in ptx_per_arch.iter_mut().zip(ptx) {
                    all.push(text);
                }
                built.push(i);
            }
            Err(failure) => failures.push((i, failure)),
        }
    }
    let checked = started.elapsed();

    let rejected: Vec<(Arch, Vec<usize>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ARCHS
            .iter()
            .zip(&ptx_per_arch)
            .map(|(&arch, ptx)| {
                let (ptxas, scratch) = (&ptxas, &scratch);
                s.spawn(move || {
                    let texts: Vec<&str> = ptx.iter().map(String::as_str).collect();
                    (arch, assemble_batches(ptxas, scratch, arch, &texts))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (arch, indices) in rejected {
        for k in indices {
            failures.push((built[k], format!("ptxas -arch={} rejects it", arch.name())));
        }
    }
    failures.sort_by_key(|(i, _)| *i);
    failures.dedup_by_key(|(i, _)| *i);
    let subgroups = programs.iter().filter(|p| p.uses_subgroups).count();
    println!(
        "generated programs: {count} ({subgroups} with warp shuffles or lane_id): {} built, \
         WGSL validated and interpreted, {} x {} architectures assembled, {} failed; \
         {:.1}s generating, {:.1}s building, naga and interpreter, {:.1}s ptxas",
        built.len(),
        built.len(),
        ARCHS.len(),
        failures.len(),
        generated.as_secs_f64(),
        (checked - generated).as_secs_f64(),
        (started.elapsed() - checked).as_secs_f64(),
    );
    let reports: Vec<String> = failures
        .iter()
        .take(REPORTED)
        .map(|(i, first)| {
            let name = format!("gen{i}");
            let (program, failure) = genprog::shrink(&mut trees[*i], &name, first.clone(), |p| {
                check(p, &ptxas, &scratch)
            });
            genprog::report(seed, *i, &program, &failure)
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {count} generated programs failed (seed {seed}); the first {} shrunk:\n\n{}",
        failures.len(),
        reports.len(),
        reports.join("\n\n")
    );
}

fn regression_cases_assemble_validate_and_interpret() {
    let ptxas = common::ptxas::find_ptxas();
    let scratch = scratch_dir();
    for (name, program) in genprog::regression_cases() {
        if let Some(failure) = check(&program, &ptxas, &scratch) {
            panic!("regression case {name}:\n{}\n{failure}", program.def.ir);
        }
    }
}
