//! `cargo xtask <command>`: warpforge's chores (see `cargo xtask --help`).

mod build_ptx;
mod cuda_toolkit;
mod gpu_bundle;
mod manifest_diff;
mod pip_venv;
mod ptxas;
mod test;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::ptxas::Ptxas;

#[derive(Parser)]
#[command(
    bin_name = "cargo xtask",
    about = "warpforge's developer commands",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The main job: build and run gpu-check in release
    ///
    /// Builds the `gpu-check` binary of warpforge-tests in release and runs
    /// it; its exit code is this command's. Without a GPU it says so and
    /// lists the generated variants.
    Run {
        /// Arguments for gpu-check (after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Tune the stock GEMMs on this GPU: build and run `tune` in release
    ///
    /// Tunes every stock GEMM family over a representative shape set (or
    /// `--shapes`), writes the tuning database (WARPFORGE_TUNE_DIR or
    /// `--db-dir`) and a JSON report (`--report`), and prints the winners
    /// against the runner-up and the heuristic default. `--verify-exhaustive`
    /// checks each winner against a sweep of every variant; `--dispatch`
    /// dispatches from the database without tuning. See `cargo xtask tune --
    /// --help`. Without a GPU it says so and exits with status 2.
    Tune {
        /// Arguments for tune (after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Benchmark the stock kernels beside cuBLAS: build and run `bench` in release
    ///
    /// Per GEMM dtype and shape, every architecture path's fastest variant,
    /// the tuned dispatch and cuBLAS in interleaved rounds on a GPU kept busy
    /// (the method is in tests/src/bench/method.rs), and the other sections
    /// (sparse, stream, instruction rates, wgpu, launch cost); writes
    /// report.json, table.md and SVG/PNG charts into `--out` (bench-out/).
    /// `cargo xtask bench -- report FILE` renders a recorded report again,
    /// with no GPU. See `cargo xtask bench -- --help`. Without a GPU it says so
    /// and exits with status 2.
    Bench {
        /// Arguments for bench (after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The CPU test tier (what CI runs)
    ///
    /// In order, stopping at the first failure: find ptxas, `cargo fmt --all
    /// -- --check`, `cargo test --workspace --locked` (the tidy checks among
    /// them), `cargo xtask build-ptx --check`. Ends with one summary line per step.
    Test,
    /// Check the repository's own text (the tidy tests, alone)
    ///
    /// Every file git lists: no citation of a file outside the repository, no
    /// path of one machine, every cited docs/ section exists, every crate
    /// source file starts with a `//!` doc (xtask/src/tidy.rs lists the few
    /// exemptions and why). `cargo test` runs the same checks.
    Tidy,
    /// Build and assemble every stock kernel variant; write generated/
    ///
    /// Compiles every variant of every stock kernel to PTX for each arch it
    /// targets, assembles each with `ptxas -v -O3`, and writes
    /// generated/manifest.json (resource use of every variant) and
    /// generated/ptx/ (the PTX of each kernel's first variant per arch).
    BuildPtx {
        /// Regenerate in memory and fail if generated/ differs, instead of writing it
        #[arg(long)]
        check: bool,
    },
    /// Compare generated/manifest.json with the one committed at REV
    ///
    /// Variant by variant: added, removed, resources changed (registers,
    /// shared memory, stack, spills) and how many changed only their PTX
    /// text; a variant renamed by a kernel's new const parameter is matched
    /// by the parameters both sides have. Fails when a variant spills or
    /// takes more than 2% more registers than at REV. Run it after `cargo
    /// xtask build-ptx`.
    ManifestDiff {
        /// The revision to compare with
        #[arg(default_value = "HEAD")]
        rev: String,
    },
    /// Build the GPU tier into gpu-bundle/ for a GPU machine
    ///
    /// Builds the GPU-tier binaries of warpforge-tests in release, stripped,
    /// and copies them into gpu-bundle/ with run.sh, which a GPU machine runs
    /// from the repository root.
    GpuBundle,
    /// Print the PTX of one variant of a stock kernel
    ///
    /// `cargo xtask ptx gemm_f16 BM=128,BN=128,BK=64,WARP=64,STAGES=3,ALIGNED=true
    /// --arch sm_90`: every const param by name (bools as true/false).
    Ptx {
        /// The kernel's name
        kernel: String,
        /// `NAME=value` for every const param, comma-separated (empty for none)
        #[arg(default_value = "")]
        consts: String,
        /// The target architecture
        #[arg(long, default_value = "sm_90")]
        arch: String,
    },
    /// Find (or install) ptxas and print its path and version
    ///
    /// Uses $PTXAS if set, else a CUDA 12.x `ptxas` on PATH, else the one
    /// under target/ptxas-venv, installing it there from PyPI
    /// (nvidia-cuda-nvcc-cu12) when missing.
    Ptxas,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let repo = repo_root();
    let done = |result: Result<()>| result.map(|()| ExitCode::SUCCESS);
    let result = match cli.command {
        Task::Run { args } => run_release_binary(&repo, gpu_bundle::GPU_CHECK, &args),
        Task::Tune { args } => run_release_binary(&repo, gpu_bundle::TUNE, &args),
        Task::Bench { args } => run_release_binary(&repo, gpu_bundle::BENCH, &args),
        Task::Test => done(test::run(&repo)),
        Task::Tidy => done(tidy::run(&repo)),
        Task::BuildPtx { check } => done(find_ptxas(&repo).and_then(|ptxas| {
            if check {
                build_ptx::check(&repo, &ptxas)
            } else {
                build_ptx::build(&repo, &ptxas)
            }
        })),
        Task::GpuBundle => done(gpu_bundle::build(&repo)),
        Task::ManifestDiff { rev } => done(manifest_diff::run(&repo, &rev)),
        Task::Ptxas => done(find_ptxas(&repo).map(|_| ())),
        Task::Ptx {
            kernel,
            consts,
            arch,
        } => done(build_ptx::print_variant(&kernel, &consts, &arch)),
    };
    match result {
        Ok(code) => code,
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

/// Runs a GPU-tier binary of the tests crate in release; its exit code (1
/// if a signal ended it) is ours.
fn run_release_binary(repo: &Path, binary: &str, args: &[String]) -> Result<ExitCode> {
    let status = Command::new(cargo())
        .current_dir(repo)
        // The same build as gpu-bundle's: bench records the commit.
        .env("WARPFORGE_COMMIT", gpu_bundle::commit(repo))
        .args([
            "run",
            "--release",
            "--locked",
            "-p",
            gpu_bundle::PACKAGE,
            "--bin",
            binary,
            "--",
        ])
        .args(args)
        .status()
        .context("could not run cargo")?;
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|code| u8::try_from(code).ok())
            .unwrap_or(1),
    ))
}

/// The cargo that runs this xtask, so that child builds use the same toolchain.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}
