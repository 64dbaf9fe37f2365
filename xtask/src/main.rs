//! `cargo xtask <command>`: warpforge's chores (see `cargo xtask --help`).

mod build_ptx;
mod gpu_bundle;
mod ptxas;
mod test;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::ptxas::Ptxas;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "warpforge's developer commands",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The main job: builds `gpu-check` (warpforge-tests) in release and runs
    /// it. Without a GPU it says so and lists the generated variants.
    /// Arguments after `--` go to gpu-check; its exit code is passed through.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The CPU test tier, failing fast: cargo fmt --check, cargo test
    /// --workspace --locked, then build-ptx --check.
    Test,
    /// Compiles every variant of every stock kernel to PTX for each arch it
    /// targets, assembles it with ptxas, and writes generated/manifest.json
    /// (resource use per variant) and generated/ptx/ (reference PTX of each
    /// kernel's first variant per arch).
    BuildPtx {
        /// Regenerate in memory and fail if generated/ differs, instead of writing it.
        #[arg(long)]
        check: bool,
    },
    /// Builds the GPU-tier binaries (stripped, release) into gpu-bundle/ with
    /// a run.sh that a GPU machine runs from the repository root.
    GpuBundle,
    /// Finds ptxas (CUDA 12.x), installing it under target/ptxas-venv if
    /// needed, and prints its path and version. Set PTXAS to use another one.
    Ptxas,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let repo = repo_root();
    let result = match cli.command {
        Task::Run { args } => run_gpu_check(&repo, &args),
        Task::Test => test::run(&repo),
        Task::BuildPtx { check } => find_ptxas(&repo).and_then(|ptxas| {
            if check {
                build_ptx::check(&repo, &ptxas)
            } else {
                build_ptx::build(&repo, &ptxas)
            }
        }),
        Task::GpuBundle => gpu_bundle::build(&repo),
        Task::Ptxas => find_ptxas(&repo).map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: xtask lives one folder below it.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// [`Ptxas::find`], announcing which ptxas is used.
pub fn find_ptxas(repo: &Path) -> Result<Ptxas> {
    let ptxas = Ptxas::find(repo)?;
    println!("ptxas {} ({})", ptxas.version, ptxas.path.display());
    Ok(ptxas)
}

/// Runs `gpu-check` in release and exits with its exit code.
fn run_gpu_check(repo: &Path, args: &[String]) -> Result<()> {
    let status = Command::new(cargo())
        .current_dir(repo)
        .args([
            "run",
            "--release",
            "--locked",
            "-p",
            gpu_bundle::PACKAGE,
            "--bin",
            gpu_bundle::GPU_CHECK,
            "--",
        ])
        .args(args)
        .status()
        .context("could not run cargo")?;
    std::process::exit(status.code().unwrap_or(1));
}

/// The cargo that runs this xtask, so that child builds use the same toolchain.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}
