//! `cargo xtask test`: the CPU tier, in order, stopping at the first failure.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cargo_metadata::MetadataCommand;

use crate::{build_ptx, cargo, find_ptxas};

#[derive(Clone, Copy, PartialEq)]
enum Step {
    FindPtxas,
    Fmt,
    CargoTest,
    BackendFeatures,
    LinkedCuda,
    CheckGenerated,
    Package,
}

const STEPS: [Step; 7] = [
    Step::FindPtxas,
    Step::Fmt,
    Step::CargoTest,
    Step::BackendFeatures,
    Step::LinkedCuda,
    Step::CheckGenerated,
    Step::Package,
];

/// The runtime built with one backend, by its features: the workspace's
/// tests build it with all but `nccl`, so these catch code that names a
/// backend a build may lack. CUDA's build has `nccl` (NCCL's collectives,
/// libnccl loaded at run time), so that both it and the workspace's build
/// without it are tested, at no extra build. The interpreter is in every
/// build, and alone in the one without features.
const ONE_BACKEND_BUILDS: [&str; 3] = ["cuda,nccl", "wgpu", ""];

/// The app that links libcuda itself (cudarc's `dynamic-linking`), a
/// workspace of its own so that its cudarc features stay out of ours.
const LINKED_CUDA_MANIFEST: &str = "examples/linked-cuda/Cargo.toml";

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::FindPtxas => "ptxas",
            Step::Fmt => "cargo fmt --all -- --check",
            Step::CargoTest => "cargo test --workspace --locked",
            Step::BackendFeatures => {
                "cargo test -p warpforge-runtime (cuda,nccl; wgpu; no features)"
            }
            Step::LinkedCuda => "cargo check (examples/linked-cuda)",
            Step::CheckGenerated => "cargo xtask build-ptx --check",
            Step::Package => "cargo package (published crates)",
        }
    }
}

pub fn run(repo: &Path) -> Result<()> {
    let mut outcomes: Vec<(Step, String)> = Vec::new();
    let mut failed = None;
    let mut ptxas = None;
    for step in STEPS {
        println!("\n==> {}", step.name());
        let started = Instant::now();
        let result = match step {
            Step::FindPtxas => find_ptxas(repo).map(|found| ptxas = Some(found)),
            Step::Fmt => cargo_step(repo, &["fmt", "--all", "--", "--check"], None),
            // The tests that assemble PTX find ptxas through PTXAS instead of searching again.
            Step::CargoTest => cargo_step(
                repo,
                &["test", "--workspace", "--locked"],
                ptxas.as_ref().map(|p| p.path.as_path()),
            ),
            Step::BackendFeatures => ONE_BACKEND_BUILDS.iter().try_for_each(|backend| {
                cargo_step(
                    repo,
                    &[
                        "test",
                        "--locked",
                        "-p",
                        "warpforge-runtime",
                        "--no-default-features",
                        "--features",
                        backend,
                    ],
                    None,
                )
            }),
            // Checked, not built: linking needs libcuda, which a machine without a GPU lacks.
            // It shares our target directory, so the crates both builds have are checked once.
            Step::LinkedCuda => cargo_step(
                repo,
                &[
                    "check",
                    "--locked",
                    "--manifest-path",
                    LINKED_CUDA_MANIFEST,
                    "--target-dir",
                    "target",
                ],
                None,
            ),
            Step::CheckGenerated => {
                build_ptx::check(repo, ptxas.as_ref().expect("the ptxas step ran first"))
            }
            Step::Package => package(repo),
        };
        let seconds = started.elapsed().as_secs_f64();
        let disk = disk_use(repo);
        println!("==> {}: {disk}", step.name());
        match result {
            Ok(()) => outcomes.push((step, format!("ok ({seconds:.1}s, {disk})"))),
            Err(error) => {
                eprintln!("error: {error:#}");
                outcomes.push((step, format!("FAILED ({seconds:.1}s, {disk})")));
                failed = Some(step);
                break;
            }
        }
    }
    println!("\n==> summary");
    for step in STEPS {
        let status = outcomes
            .iter()
            .find(|(done, _)| *done == step)
            .map_or("skipped", |(_, status)| status.as_str());
        println!("{:<34} {status}", step.name());
    }
    if let Some(ptxas) = &ptxas {
        println!("ptxas used: {} ({})", ptxas.version, ptxas.path.display());
    }
    match failed {
        Some(step) => bail!(
            "the CPU tier failed at `{}` (its output is above)",
            step.name()
        ),
        None => {
            println!("CPU tier passed");
            Ok(())
        }
    }
}

/// `cargo package` of every crate that is published (no `publish = false`),
/// together, so that cargo packages them in dependency order and verifies
/// each against the others' packages through a local registry: each must
/// build from its `.crate` alone (its README, licences and included guides
/// inside it), which no other step checks.
///
/// Verified rather than `--no-verify`: on 2 cores the verification builds
/// took 160 s after `cargo test` (the packaged crates resolve as their own
/// workspaces, so their dependencies build once more) and 14 s with those
/// builds in place, against 8 s without verification; that fits the tier's
/// budget, and `cargo check` would not catch a file missing from a package.
/// `--allow-dirty` because the tier checks the working tree, committed or not.
fn package(repo: &Path) -> Result<()> {
    let metadata = MetadataCommand::new()
        .cargo_path(cargo())
        .current_dir(repo)
        .no_deps()
        .exec()
        .context("could not read the workspace's crates (cargo metadata)")?;
    let published: Vec<(String, String)> = metadata
        .workspace_packages()
        .into_iter()
        .filter(|package| package.publish.as_ref().is_none_or(|to| !to.is_empty()))
        .map(|package| (package.name.to_string(), package.version.to_string()))
        .collect();
    remove_stale_package_sources(&published)?;
    let mut args = vec!["package", "--locked", "--allow-dirty"];
    for (name, _) in &published {
        args.extend(["-p", name.as_str()]);
    }
    cargo_step(repo, &args, None)
}

/// Removes what an earlier `cargo package` of these crates left extracted in
/// cargo's home. Verification reads each package's dependencies from a local
/// registry that cargo extracts under `registry/src/-<hash of its path>/`,
/// and cargo never extracts a crate again whose directory is there: a run
/// from the same checkout path would verify against the previous run's
/// sources (on 2026-12-06 the runtime failed against a codegen without that
/// day's new fields). Only local registries (`-` names) and only these
/// crates at these versions are touched.
fn remove_stale_package_sources(published: &[(String, String)]) -> Result<()> {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    match home {
        Some(home) => remove_stale_sources_in(&home, published),
        None => Ok(()),
    }
}

/// [`remove_stale_package_sources`] in the cargo home `home`.
fn remove_stale_sources_in(home: &Path, published: &[(String, String)]) -> Result<()> {
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for (name, version) in published {
            let stale = registry.path().join(format!("{name}-{version}"));
            if stale.is_dir() {
                std::fs::remove_dir_all(&stale)
                    .with_context(|| format!("could not remove {}", stale.display()))?;
            }
        }
    }
    Ok(())
}

/// What target/ holds and what the disk has left, after each step: CI's disk
/// is bounded, and a run that fills it fails in whichever rustc is writing.
fn disk_use(repo: &Path) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    let target = repo.join("target");
    let free = fs4::available_space(repo).map_or_else(
        |e| format!("unknown ({e})"),
        |b| format!("{:.1} GiB", b as f64 / GIB),
    );
    format!(
        "target/ {:.1} GiB, disk free {free}",
        tree_size(&target) as f64 / GIB
    )
}

/// Bytes of the regular files under `dir` (0 where it cannot be read).
fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_size(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

fn cargo_step(repo: &Path, args: &[&str], ptxas: Option<&Path>) -> Result<()> {
    let mut command = Command::new(cargo());
    command.current_dir(repo).args(args);
    if let Some(path) = ptxas {
        command.env("PTXAS", path);
    }
    let status = command
        .status()
        .with_context(|| format!("could not run cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod package_tests {
    use super::*;

    #[test]
    fn only_local_registries_copies_of_the_published_crates_are_removed() {
        let home = std::env::temp_dir().join(format!("xtask-cargo-home-{}", std::process::id()));
        let local = home.join("registry/src/-0123abcd");
        let crates_io = home.join("registry/src/index.crates.io-1949cf8c6b5b557f");
        for dir in [
            local.join("warpforge-codegen-0.1.0/src"),
            local.join("warpforge-codegen-0.0.9"),
            local.join("other-0.1.0"),
            crates_io.join("warpforge-codegen-0.1.0"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let published = [("warpforge-codegen".to_string(), "0.1.0".to_string())];
        remove_stale_sources_in(&home, &published).unwrap();
        assert!(!local.join("warpforge-codegen-0.1.0").exists());
        assert!(local.join("warpforge-codegen-0.0.9").exists());
        assert!(local.join("other-0.1.0").exists());
        assert!(crates_io.join("warpforge-codegen-0.1.0").exists());
        // A home without a registry is nothing to do.
        remove_stale_sources_in(&home.join("none"), &published).unwrap();
        std::fs::remove_dir_all(&home).unwrap();
    }
}
