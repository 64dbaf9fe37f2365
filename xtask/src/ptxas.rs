//! Finding ptxas (CUDA 12.x: the last series that still assembles sm_70),
//! running it on one PTX file, and reading its `-v` resource report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use warpforge_codegen::Arch;

use crate::pip_venv::{self, VENV_HINT};

/// The PyPI package that ships a CUDA 12.x ptxas without the rest of the toolkit.
const PIP_PACKAGE: &str = "nvidia-cuda-nvcc-cu12==12.9.*";

/// A ptxas binary that reported a CUDA 12.x version.
#[derive(Clone, Debug)]
pub struct Ptxas {
    pub path: PathBuf,
    /// The release as ptxas prints it, e.g. `12.9.86`.
    pub version: String,
}

/// What ptxas reports about one entry function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceUsage {
    pub registers: u32,
    /// Static shared memory only; the launch adds the dynamic part.
    pub static_shared_bytes: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

impl Ptxas {
    /// `$PTXAS` if set; else `ptxas` on PATH if it is CUDA 12.x; else the one in
    /// `<repo>/target/ptxas-venv`, installing it from PyPI if it is not there yet.
    pub fn find(repo: &Path) -> Result<Ptxas> {
        if let Some(path) = std::env::var_os("PTXAS") {
            let path = PathBuf::from(path);
            return Ptxas::probe(&path).with_context(|| {
                format!(
                    "PTXAS={} is not a usable ptxas; point PTXAS at a CUDA 12.x ptxas, \
                     or unset it to let xtask install one under target/ptxas-venv",
                    path.display()
                )
            });
        }
        if let Some(ptxas) = Ptxas::on_path() {
            return Ok(ptxas);
        }
        let venv = repo.join("target/ptxas-venv");
        if let Some(path) = venv_ptxas(&venv) {
            return Ptxas::probe(&path);
        }
        install(&venv)?;
        let path = venv_ptxas(&venv).with_context(|| {
            format!(
                "pip installed {PIP_PACKAGE} but no nvidia/cuda_nvcc/bin/ptxas appeared under {}; {}",
                venv.display(),
                manual_install_hint(&venv)
            )
        })?;
        Ptxas::probe(&path)
    }

    /// `ptxas` from PATH when it is CUDA 12.x; says why it is skipped otherwise.
    fn on_path() -> Option<Ptxas> {
        let output = Command::new("ptxas").arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&output.stdout);
        match parse_version(&text) {
            Some(version) if version.starts_with("12.") => Some(Ptxas {
                path: PathBuf::from("ptxas"),
                version,
            }),
            Some(version) => {
                eprintln!(
                    "note: skipping ptxas {version} on PATH: only CUDA 12.x ptxas assembles \
                     every target (13.x has dropped sm_70)"
                );
                None
            }
            None => None,
        }
    }

    /// Runs `path --version` and accepts it only when it is CUDA 12.x.
    fn probe(path: &Path) -> Result<Ptxas> {
        let output = Command::new(path)
            .arg("--version")
            .output()
            .with_context(|| format!("could not run `{} --version`", path.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let Some(version) = parse_version(&text) else {
            bail!(
                "`{} --version` printed no CUDA release line:\n{text}{}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        if !version.starts_with("12.") {
            bail!(
                "{} is ptxas {version}; warpforge needs CUDA 12.x ptxas \
                 (13.x has dropped sm_70, older ones lack sm_90 or PTX 8.x)",
                path.display()
            );
        }
        Ok(Ptxas {
            path: path.to_path_buf(),
            version,
        })
    }

    /// Assembles `ptx_file` for `arch` into `cubin_file` with `-v -O3` and
    /// returns what ptxas reports about the entry `entry`. The error carries
    /// ptxas's own message.
    pub fn assemble(
        &self,
        ptx_file: &Path,
        cubin_file: &Path,
        arch: Arch,
        entry: &str,
    ) -> Result<ResourceUsage> {
        let output = Command::new(&self.path)
            .arg(format!("-arch={}", arch.name()))
            .args(["-v", "-O3", "-o"])
            .arg(cubin_file)
            .arg(ptx_file)
            .output()
            .with_context(|| format!("could not run {}", self.path.display()))?;
        // ptxas writes its report and its errors to stderr; keep both streams.
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            bail!("ptxas failed ({}):\n{}", output.status, report.trim_end());
        }
        parse_resource_usage(&report, entry)
    }
}

/// The ptxas inside a venv made by [`install`], if it is there.
fn venv_ptxas(venv: &Path) -> Option<PathBuf> {
    pip_venv::site_packages_path(venv, "nvidia/cuda_nvcc/bin/ptxas")
}

fn install(venv: &Path) -> Result<()> {
    eprintln!("ptxas: none found ($PTXAS unset, no CUDA 12.x ptxas on PATH)");
    pip_venv::install(venv, &[PIP_PACKAGE], "ptxas", &manual_install_hint(venv))
}

fn manual_install_hint(venv: &Path) -> String {
    format!(
        "install ptxas by hand: `python3 -m venv {0} && {0}/bin/pip install '{PIP_PACKAGE}'` \
         ({VENV_HINT}), or set PTXAS to a CUDA 12.x ptxas",
        venv.display()
    )
}

/// The release from ptxas's `--version` text: `Cuda compilation tools, release
/// 12.9, V12.9.86` gives `12.9.86`.
fn parse_version(text: &str) -> Option<String> {
    let line = text
        .lines()
        .find(|line| line.starts_with("Cuda compilation tools"))?;
    let version = line.rsplit_once(", V")?.1.trim();
    Some(version.to_string())
}

/// Reads the `-v` report lines that belong to the function `entry`:
///
/// ```text
/// ptxas info    : Compiling entry function 'saxpy' for 'sm_80'
/// ptxas info    : Function properties for saxpy
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 10 registers, used 0 barriers, 1024 bytes smem, 380 bytes cmem[0]
/// ```
fn parse_resource_usage(report: &str, entry: &str) -> Result<ResourceUsage> {
    // Quantities by their label ("registers", "bytes smem", ...), for `entry` only.
    let mut quantities: BTreeMap<&str, u32> = BTreeMap::new();
    let mut in_entry = false;
    for line in report.lines() {
        let body = line.split_once(':').map_or(line, |(prefix, rest)| {
            if prefix.starts_with("ptxas") {
                rest
            } else {
                line
            }
        });
        let body = body.trim();
        if let Some(rest) = body.strip_prefix("Compiling entry function '") {
            in_entry = rest.split('\'').next() == Some(entry);
            continue;
        }
        if let Some(name) = body.strip_prefix("Function properties for ") {
            in_entry = name.trim() == entry;
            continue;
        }
        if !in_entry {
            continue;
        }
        let body = body.strip_prefix("Used ").unwrap_or(body);
        for part in body.split(", ") {
            let part = part.strip_prefix("used ").unwrap_or(part);
            if let Some((number, label)) = part.split_once(' ') {
                if let Ok(number) = number.parse::<u32>() {
                    quantities.insert(label, number);
                }
            }
        }
    }
    let required = |label: &str| {
        quantities.get(label).copied().with_context(|| {
            format!(
                "ptxas -v printed no \"{label}\" for entry '{entry}'; its report was:\n{}",
                report.trim_end()
            )
        })
    };
    Ok(ResourceUsage {
        registers: required("registers")?,
        static_shared_bytes: quantities.get("bytes smem").copied().unwrap_or(0),
        stack_frame_bytes: required("bytes stack frame")?,
        spill_store_bytes: required("bytes spill stores")?,
        spill_load_bytes: required("bytes spill loads")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from ptxas 12.9.86 (`nvidia-cuda-nvcc-cu12`), `-v -O3`.
    const SAXPY_SM80: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'saxpy' for 'sm_80'
ptxas info    : Function properties for saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 1024 bytes smem, 380 bytes cmem[0]
ptxas info    : Compile time = 3.157 ms
";

    // sm_90 prints no cmem; this kernel has a local array and no shared memory.
    const LOCAL_ARRAY_SM90: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_90'
ptxas info    : Function properties for spilly
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 56 registers, used 0 barriers, 64 bytes cumulative stack size
ptxas info    : Compile time = 13.992 ms
";

    // The same kernel with --maxrregcount 24: spills.
    const SPILLS_SM80: &str = "\
ptxas info    : Overriding maximum register limit 256 for 'spilly' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
    424 bytes stack frame, 380 bytes spill stores, 380 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 424 bytes cumulative stack size, 364 bytes cmem[0]
ptxas info    : Compile time = 16.096 ms
";

    const VERSION: &str = "\
ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Tue_May_27_02:18:05_PDT_2025
Cuda compilation tools, release 12.9, V12.9.86
Build cuda_12.9.r12.9/compiler.36037853_0
";

    #[test]
    fn reads_registers_and_static_shared_memory() {
        assert_eq!(
            parse_resource_usage(SAXPY_SM80, "saxpy").unwrap(),
            ResourceUsage {
                registers: 10,
                static_shared_bytes: 1024,
                stack_frame_bytes: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
            }
        );
    }

    #[test]
    fn reads_stack_frame_without_shared_memory_or_cmem() {
        assert_eq!(
            parse_resource_usage(LOCAL_ARRAY_SM90, "spilly").unwrap(),
            ResourceUsage {
                registers: 56,
                static_shared_bytes: 0,
                stack_frame_bytes: 64,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
            }
        );
    }

    #[test]
    fn reads_spills() {
        let usage = parse_resource_usage(SPILLS_SM80, "spilly").unwrap();
        assert_eq!(usage.registers, 24);
        assert_eq!(usage.stack_frame_bytes, 424);
        assert_eq!(usage.spill_store_bytes, 380);
        assert_eq!(usage.spill_load_bytes, 380);
    }

    #[test]
    fn ignores_other_functions() {
        let two = format!("{SPILLS_SM80}{SAXPY_SM80}");
        assert_eq!(parse_resource_usage(&two, "saxpy").unwrap().registers, 10);
        assert_eq!(parse_resource_usage(&two, "spilly").unwrap().registers, 24);
    }

    #[test]
    fn missing_entry_is_an_error_that_shows_the_report() {
        let error = parse_resource_usage(SAXPY_SM80, "gemm")
            .unwrap_err()
            .to_string();
        assert!(error.contains("'gemm'"), "{error}");
        assert!(
            error.contains("Compiling entry function 'saxpy'"),
            "{error}"
        );
    }

    #[test]
    fn reads_the_release_from_version_text() {
        assert_eq!(parse_version(VERSION).as_deref(), Some("12.9.86"));
        assert_eq!(parse_version("ptxas: something else"), None);
    }
}
