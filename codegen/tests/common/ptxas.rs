//! Finding ptxas and assembling PTX with it: shared by the test crates that
//! assemble PTX (codegen's, and the GPU tier's kernels in `tests/`, which
//! include this file by path).

use std::path::{Path, PathBuf};
use std::process::Command;

/// ptxas, from `$PTXAS`, the `PATH`, or the workspace's `target/ptxas-venv`
/// (PyPI's nvidia-cuda-nvcc-cu12 12.9, the last ptxas that still assembles
/// sm_70). Without one the test fails: CI always has it.
pub fn find_ptxas() -> PathBuf {
    search_ptxas().unwrap_or_else(|| {
        panic!(
            "ptxas not found: set $PTXAS, put ptxas on PATH, or install it into target/ptxas-venv with \
             `python3 -m venv target/ptxas-venv && target/ptxas-venv/bin/pip install nvidia-cuda-nvcc-cu12==12.9.*` \
             (or the ptxas install step of `cargo xtask`)"
        )
    })
}

fn search_ptxas() -> Option<PathBuf> {
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

/// Assembles `ptx` for `arch` (`sm_80`) with ptxas `-v`, through the files
/// `<scratch>/<stem>.ptx` and `.cubin`: its report (stderr), which is the
/// error when ptxas fails.
pub fn assemble(
    ptxas: &Path,
    arch: &str,
    ptx: &str,
    scratch: &Path,
    stem: &str,
) -> Result<String, String> {
    let source = scratch.join(format!("{stem}.ptx"));
    std::fs::write(&source, ptx).unwrap();
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(&source)
        .arg("-o")
        .arg(scratch.join(format!("{stem}.cubin")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(report)
    } else {
        Err(report)
    }
}
