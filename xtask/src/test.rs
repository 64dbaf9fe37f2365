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
    CheckGenerated,
}

const STEPS: [Step; 4] = [
    Step::FindPtxas,
    Step::Fmt,
    Step::CargoTest,
    Step::CheckGenerated,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::FindPtxas => "ptxas",
            Step::Fmt => "cargo fmt --all -- --check",
            Step::CargoTest => "cargo test --workspace --locked",
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
