//! `cargo xtask test`: the CPU tier, in order, stopping at the first failure.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::{build_ptx, cargo, find_ptxas};

#[derive(Clone, Copy, PartialEq)]
enum Step {
    FindPtxas,
    Fmt,
    CargoTest,
    BackendFeatures,
    LinkedCuda,
    CheckGenerated,
}

const STEPS: [Step; 6] = [
    Step::FindPtxas,
    Step::Fmt,
    Step::CargoTest,
    Step::BackendFeatures,
    Step::LinkedCuda,
    Step::CheckGenerated,
];

/// The runtime built with one backend: the workspace's tests build it with
/// both, so these catch code that names a backend a build may lack.
const ONE_BACKEND_BUILDS: [&str; 2] = ["cuda", "wgpu"];

/// The app that links libcuda itself (cudarc's `dynamic-linking`), a
/// workspace of its own so that its cudarc features stay out of ours.
const LINKED_CUDA_MANIFEST: &str = "examples/linked-cuda/Cargo.toml";

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::FindPtxas => "ptxas",
            Step::Fmt => "cargo fmt --all -- --check",
            Step::CargoTest => "cargo test --workspace --locked",
            Step::BackendFeatures => "cargo test -p warpforge-runtime (cuda; wgpu)",
            Step::LinkedCuda => "cargo check (examples/linked-cuda)",
            Step::CheckGenerated => "cargo xtask build-ptx --check",
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
        };
        let seconds = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => outcomes.push((step, format!("ok ({seconds:.1}s)"))),
            Err(error) => {
                eprintln!("error: {error:#}");
                outcomes.push((step, format!("FAILED ({seconds:.1}s)")));
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
