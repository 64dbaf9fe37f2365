//! `cargo xtask gpu-bundle`: the GPU tier's binaries, stripped, and the
//! script that runs them, in one small folder that travels to a GPU machine.

use std::ffi::OsString;
use std::io::BufReader;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use cargo_metadata::{Message, TargetKind};

use crate::cargo;
use crate::cuda_toolkit::CudaToolkit;

/// The crate that holds the GPU tier.
pub const PACKAGE: &str = "warpforge-tests";
/// Checks every variant against a CPU reference; `--quick` runs a subset for the sanitizers.
pub const GPU_CHECK: &str = "gpu-check";
/// Tunes the stock GEMMs and writes the tuning database (`cargo xtask tune`).
pub const TUNE: &str = "tune";
/// Times the stock kernels beside cuBLAS (`cargo xtask bench`).
pub const BENCH: &str = "bench";
/// Every binary run.sh needs.
const GPU_BINARIES: [&str; 3] = [GPU_CHECK, BENCH, TUNE];
/// The README's example, run on the GPU as a new user would run it.
const EXAMPLE: (&str, &str) = ("warpforge", "quickstart");
/// A user workspace's xtask (examples/tuned-user): its `tune` tunes the
/// example's kernels and the stock GEMMs as `cargo xtask tune` there does.
const USER_XTASK: (&str, &str) = ("warpforge-example-tuned-xtask", "user-xtask");
/// examples/multi-gpu: a data-parallel step and a tensor-parallel GEMM over
/// NCCL on every GPU of the machine (one rank on a one-GPU machine).
const MULTI_GPU_EXAMPLE: (&str, &str) = ("warpforge-example-multi-gpu", "multi-gpu");
/// warpforge's GEMM on candle's tensors and stream (its own workspace:
/// candle links the CUDA libraries at build time), by its bundle file name.
const CANDLE_EXAMPLE: (&str, &str) = ("examples/candle-interop", "candle-interop");
/// Where it builds, apart from the main workspace's builds.
const CANDLE_TARGET_DIR: &str = "target/candle-interop";
/// Crates whose own tests include `#[ignore]`d GPU tests.
const GPU_TESTED_CRATES: [&str; 1] = ["warpforge-runtime"];
/// Bundle file names of those test executables start with this; run.sh runs them all.
const GPU_TEST_PREFIX: &str = "test-";
const BUNDLE_DIR: &str = "gpu-bundle";
/// The scripts, by their names in the bundle: run.sh runs the whole tier,
/// sanitize.sh (which run.sh calls) gpu-check under compute-sanitizer.
const SCRIPTS: [(&str, &str); 2] = [
    ("run.sh", include_str!("gpu-bundle-run.sh")),
    ("sanitize.sh", include_str!("gpu-bundle-sanitize.sh")),
];
/// The binaries, packed (run.sh unpacks them into the bundle).
const ARCHIVE: &str = "binaries.tar.gz";
/// The device machine takes at most 64 MiB of working tree and carried
/// paths: leave room for the repository's own files (8.4 MiB on 2026-12-02)
/// and the Vulkan loader's packages (0.4 MiB).
const SIZE_LIMIT_BYTES: u64 = 54 << 20;

pub fn build(repo: &Path) -> Result<()> {
    let executables = build_binaries(repo)?;
    let gpu_tests = build_gpu_tests(repo)?;
    let example = build_example(repo)?;
    let user_xtask = build_workspace_binary(repo, USER_XTASK)?;
    let multi_gpu = build_workspace_binary(repo, MULTI_GPU_EXAMPLE)?;
    // Optional: it needs a CUDA toolkit, which is installed from PyPI when
    // missing, and that can fail (no network, no python3-venv). The rest of
    // the bundle does not depend on it; run.sh reports its step as skipped.
    let candle_example = match build_candle_example(repo) {
        Ok(example) => Some(example),
        Err(error) => {
            eprintln!(
                "warning: {} is NOT in the bundle (run.sh will skip it): {error:#}",
                CANDLE_EXAMPLE.0
            );
            None
        }
    };
    let bundle = repo.join(BUNDLE_DIR);
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle)
            .with_context(|| format!("could not clear {}", bundle.display()))?;
    }
    std::fs::create_dir_all(&bundle)
        .with_context(|| format!("could not create {}", bundle.display()))?;
    for (name, executable) in GPU_BINARIES.iter().zip(&executables) {
        std::fs::copy(executable, bundle.join(name)).with_context(|| {
            format!(
                "could not copy {} into {}",
                executable.display(),
                bundle.display()
            )
        })?;
    }
    for (name, executable) in gpu_tests
        .iter()
        .chain([&example, &user_xtask, &multi_gpu])
        .chain(&candle_example)
    {
        std::fs::copy(executable, bundle.join(name)).with_context(|| {
            format!(
                "could not copy {} into {}",
                executable.display(),
                bundle.display()
            )
        })?;
    }
    for (name, text) in SCRIPTS {
        let script = bundle.join(name);
        std::fs::write(&script, text)
            .with_context(|| format!("could not write {}", script.display()))?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("could not make {} executable", script.display()))?;
    }

    let mut binaries: Vec<(String, u64)> = Vec::new();
    for entry in std::fs::read_dir(&bundle)
        .with_context(|| format!("could not list {}", bundle.display()))?
    {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if SCRIPTS.iter().all(|(script, _)| *script != name) {
            binaries.push((name, entry.metadata()?.len()));
        }
    }
    binaries.sort();
    for (name, size) in &binaries {
        println!("{:>10.1} KiB  {name}", *size as f64 / 1024.0);
    }
    let total: u64 = binaries.iter().map(|(_, size)| size).sum();
    println!("{:>10.1} MiB  binaries", total as f64 / (1024.0 * 1024.0));
    // The device transfer is capped, and the binaries shrink about 3x
    // compressed: run.sh unpacks them where they were.
    let status = Command::new("tar")
        .arg("-czf")
        .arg(ARCHIVE)
        .args(binaries.iter().map(|(name, _)| name))
        .current_dir(&bundle)
        .status()
        .context("could not run tar to pack the binaries")?;
    if !status.success() {
        bail!("tar failed ({status}) packing {BUNDLE_DIR}/{ARCHIVE}");
    }
    for (name, _) in &binaries {
        std::fs::remove_file(bundle.join(name))
            .with_context(|| format!("could not remove {BUNDLE_DIR}/{name} after packing it"))?;
    }
    let packed = std::fs::metadata(bundle.join(ARCHIVE))?.len();
    println!(
        "{:>10.1} MiB  {BUNDLE_DIR}/{ARCHIVE}",
        packed as f64 / (1024.0 * 1024.0)
    );
    if packed > SIZE_LIMIT_BYTES {
        bail!(
            "{BUNDLE_DIR}/{ARCHIVE} is {:.1} MiB, over the {} MiB that leaves room in a 64 MiB \
             transfer; find what grew in the list above",
            packed as f64 / (1024.0 * 1024.0),
            SIZE_LIMIT_BYTES >> 20
        );
    }
    println!("run it on a GPU machine from the repository root: {BUNDLE_DIR}/run.sh");
    Ok(())
}

/// Builds [`GPU_BINARIES`] in release, stripped, and returns their paths in that order.
fn build_binaries(repo: &Path) -> Result<Vec<PathBuf>> {
    let artifacts = cargo_executables(repo, &["build", "-p", PACKAGE, "--bins"], |a| {
        a.target.kind.contains(&TargetKind::Bin)
    })?;
    GPU_BINARIES
        .iter()
        .map(|name| {
            artifacts
                .iter()
                .find(|(target, _)| target == name)
                .map(|(_, path)| path.clone())
                .with_context(|| {
                    format!(
                        "cargo built no binary `{name}` in {PACKAGE}; add tests/src/bin/{name}.rs"
                    )
                })
        })
        .collect()
}

/// Builds [`EXAMPLE`] in release; returns (bundle file name, path).
fn build_example(repo: &Path) -> Result<(String, PathBuf)> {
    let (krate, name) = EXAMPLE;
    let artifacts = cargo_executables(repo, &["build", "-p", krate, "--example", name], |a| {
        a.target.kind.contains(&TargetKind::Example)
    })?;
    let (_, path) = artifacts
        .into_iter()
        .find(|(target, _)| target == name)
        .with_context(|| format!("cargo built no example `{name}` in {krate}"))?;
    Ok((format!("example-{name}"), path))
}

/// Builds the binary of the workspace crate `krate` in release; returns
/// (bundle file name `name`, path).
fn build_workspace_binary(repo: &Path, (krate, name): (&str, &str)) -> Result<(String, PathBuf)> {
    let path = built_binary(repo, &["build", "-p", krate, "--bins"], &[], krate)?;
    Ok((name.to_string(), path))
}

/// Runs `cargo` with `args` and the variables `env` (see
/// [`cargo_executables_in_env`]); the path of the binary it built for `what`.
fn built_binary(
    repo: &Path,
    args: &[&str],
    env: &[(&str, OsString)],
    what: &str,
) -> Result<PathBuf> {
    let artifacts = cargo_executables_in_env(repo, args, env, |a| {
        a.target.kind.contains(&TargetKind::Bin)
    })?;
    let (_, path) = artifacts
        .into_iter()
        .next()
        .with_context(|| format!("cargo built no binary in {what}"))?;
    Ok(path)
}

/// Builds [`CANDLE_EXAMPLE`] in release with the CUDA toolkit of
/// [`CudaToolkit::find_or_install`]; returns (bundle file name, path).
fn build_candle_example(repo: &Path) -> Result<(String, PathBuf)> {
    let (dir, name) = CANDLE_EXAMPLE;
    let manifest = repo.join(dir).join("Cargo.toml");
    // The stub of libcuda must define what this cudarc's bindings declare.
    let metadata = cargo_metadata::MetadataCommand::new()
        .manifest_path(&manifest)
        .other_options(vec!["--locked".to_string()])
        .exec()
        .with_context(|| format!("could not read the dependencies of {}", manifest.display()))?;
    let cudarc = metadata
        .packages
        .iter()
        .find(|package| package.name.as_str() == "cudarc")
        .with_context(|| format!("{} does not depend on cudarc", manifest.display()))?;
    let driver_bindings = cudarc
        .manifest_path
        .parent()
        .context("cudarc's manifest has a folder")?
        .join("src/driver/sys/mod.rs");
    let toolkit = CudaToolkit::find_or_install(repo, driver_bindings.as_std_path())?;
    println!(
        "building {dir} with the CUDA toolkit in {} ({})",
        toolkit.root.display(),
        toolkit.nvcc_version()?
    );
    let manifest = manifest.to_string_lossy();
    let target_dir = repo.join(CANDLE_TARGET_DIR);
    let target_dir = target_dir.to_string_lossy();
    let args = [
        "build",
        "--manifest-path",
        &manifest,
        "--target-dir",
        &target_dir,
        "--bins",
    ];
    let path = built_binary(repo, &args, &toolkit.build_env(), dir)?;
    Ok((name.to_string(), path))
}

/// Builds the test executables of [`GPU_TESTED_CRATES`] in release: their
/// GPU tests are `#[ignore]`d in the CPU tier and run with `--include-ignored` here.
/// Returns (bundle file name, path) pairs.
fn build_gpu_tests(repo: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for krate in GPU_TESTED_CRATES {
        let artifacts =
            // Every feature, so that the tests of cuBLAS are in the bundle.
            cargo_executables(repo, &["test", "-p", krate, "--all-features", "--no-run"], |a| {
                a.profile.test
            })?;
        if artifacts.is_empty() {
            bail!("cargo built no test executable for {krate}");
        }
        out.extend(
            artifacts
                .into_iter()
                .map(|(target, path)| (format!("{GPU_TEST_PREFIX}{krate}-{target}"), path)),
        );
    }
    Ok(out)
}

/// Runs `cargo <args> --release --locked` (stripped) and returns the
/// (target name, executable) of each artifact that `keep` accepts.
/// `git describe --always --dirty` of `repo` (what bench records it was
/// built from), or "unknown" without git.
pub fn commit(repo: &Path) -> String {
    Command::new("git")
        .current_dir(repo)
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map_or("unknown".to_string(), |out| {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
}

fn cargo_executables(
    repo: &Path,
    args: &[&str],
    keep: impl Fn(&cargo_metadata::Artifact) -> bool,
) -> Result<Vec<(String, PathBuf)>> {
    cargo_executables_in_env(repo, args, &[], keep)
}

/// [`cargo_executables`] with the variables `env` set for cargo and the
/// build scripts.
fn cargo_executables_in_env(
    repo: &Path,
    args: &[&str],
    env: &[(&str, OsString)],
    keep: impl Fn(&cargo_metadata::Artifact) -> bool,
) -> Result<Vec<(String, PathBuf)>> {
    let mut child = Command::new(cargo())
        .current_dir(repo)
        .envs(env.iter().map(|(name, value)| (name, value)))
        // bench records what it was built from in its report.
        .env("WARPFORGE_COMMIT", commit(repo))
        .args(args)
        .args(["--release", "--locked"])
        // Symbols would make the bundle several times larger.
        .args(["--config", "profile.release.strip=true"])
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .spawn()
        .context("could not run cargo")?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut found = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        let Message::CompilerArtifact(artifact) =
            message.context("could not read cargo's JSON messages")?
        else {
            continue;
        };
        if !keep(&artifact) {
            continue;
        }
        if let Some(executable) = &artifact.executable {
            found.push((artifact.target.name.clone(), PathBuf::from(executable)));
        }
    }
    let status = child.wait().context("cargo did not finish")?;
    if !status.success() {
        bail!(
            "cargo {} failed ({status}); its errors are above",
            args.join(" ")
        );
    }
    found.sort();
    Ok(found)
}
