//! A CUDA toolkit from PyPI, for building the candle example
//! (`examples/candle-interop`) on a machine without one: nvcc and the
//! headers (candle-kernels compiles its `.cu` files at build time), and the
//! libraries candle's cudarc links at build time (`dynamic-linking`). The
//! driver, libcuda, is not on PyPI: a link-time stub stands in for it, as
//! the toolkit's own `lib64/stubs/libcuda.so` does, and the GPU machine's
//! real `libcuda.so.1` is loaded at run time.

use std::ffi::OsString;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::pip_venv::{self, VENV_HINT};

/// Where the toolkit is installed, under the repository.
const VENV: &str = "target/candle-cuda-venv";
/// CUDA 13.0, the release of the GPU machine's toolkit and driver (580):
/// the binary loads that machine's libraries, so it links against the same
/// sonames. nvvm is pinned too: pip would take the newest, and nvcc needs
/// its own release's cicc.
const PIP_PACKAGES: [&str; 8] = [
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-cuda-cccl==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
    "nvidia-cublas==13.0.*",
    "nvidia-cuda-nvrtc==13.0.*",
    "nvidia-curand==10.4.0.*",
];
/// The folder of the CUDA 13 wheels under site-packages, laid out as a
/// toolkit (bin, include, lib).
const WHEEL_ROOT: &str = "nvidia/cu13";
/// The libraries linked by name (`-lcublas`), with the soname the wheels ship:
/// a toolkit's unversioned `libX.so` links are not in the wheels.
const LINKED_LIBRARIES: [(&str, &str); 5] = [
    ("libcublas.so", "libcublas.so.13"),
    ("libcublasLt.so", "libcublasLt.so.13"),
    ("libcudart.so", "libcudart.so.13"),
    ("libnvrtc.so", "libnvrtc.so.13"),
    ("libcurand.so", "libcurand.so.10"),
];
/// The driver stub, where cudarc's build script looks under `CUDA_ROOT`.
const DRIVER_STUB: &str = "lib/stubs/libcuda.so";
/// The GPU the kernels are built for when there is none to ask: the
/// device machine's H100 and H200 (candle's kernels run on later GPUs too,
/// through the driver's JIT of their PTX).
const DEFAULT_COMPUTE_CAP: &str = "90";

/// A CUDA toolkit laid out as `root/{bin,include,lib}`.
pub struct CudaToolkit {
    pub root: PathBuf,
}

impl CudaToolkit {
    /// The toolkit under [`VENV`], installed from PyPI if it is not there
    /// yet, with the unversioned library links and a driver stub that
    /// defines every function `driver_bindings` (cudarc's driver bindings,
    /// `src/driver/sys/mod.rs`) can reference.
    pub fn find_or_install(repo: &Path, driver_bindings: &Path) -> Result<CudaToolkit> {
        let venv = repo.join(VENV);
        let root = match wheel_root(&venv) {
            Some(root) => root,
            None => {
                pip_venv::install(
                    &venv,
                    &PIP_PACKAGES,
                    "cuda-toolkit",
                    &manual_install_hint(&venv),
                )?;
                wheel_root(&venv).with_context(|| {
                    format!(
                        "pip installed the CUDA 13.0 wheels but no lib/python3.*/site-packages/{WHEEL_ROOT}/bin/nvcc \
                         appeared under {}; {}",
                        venv.display(),
                        manual_install_hint(&venv)
                    )
                })?
            }
        };
        let toolkit = CudaToolkit { root };
        toolkit.link_libraries()?;
        toolkit.write_driver_stub(driver_bindings)?;
        Ok(toolkit)
    }

    /// nvcc's `release X.Y, VX.Y.Z` line, for the build log.
    pub fn nvcc_version(&self) -> Result<String> {
        let nvcc = self.root.join("bin/nvcc");
        let output = Command::new(&nvcc)
            .arg("--version")
            .output()
            .with_context(|| format!("could not run {} --version", nvcc.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .find(|line| line.contains("release"))
            .map(|line| line.trim().to_string())
            .with_context(|| {
                format!(
                    "{} --version printed no release line:\n{text}",
                    nvcc.display()
                )
            })
    }

    /// The variables the build scripts read: cudarc's (`CUDA_ROOT` and its
    /// aliases, for the link search), candle-kernels' (nvcc on `PATH`, the
    /// compute capability), and the linker's (`LIBRARY_PATH` for
    /// candle-kernels' `-lcudart`; `LD_LIBRARY_PATH` for the libraries'
    /// own dependencies, which the linker resolves too).
    pub fn build_env(&self) -> Vec<(&'static str, OsString)> {
        let root = self.root.as_os_str().to_os_string();
        let lib = self.root.join("lib");
        let stubs = self
            .root
            .join(DRIVER_STUB)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let prepend = |var: &str, dirs: &[&Path]| {
            let existing = std::env::var_os(var).unwrap_or_default();
            let paths = dirs
                .iter()
                .map(|d| d.to_path_buf())
                .chain(std::env::split_paths(&existing));
            std::env::join_paths(paths).unwrap_or(existing)
        };
        let compute_cap =
            std::env::var_os("CUDA_COMPUTE_CAP").unwrap_or_else(|| DEFAULT_COMPUTE_CAP.into());
        vec![
            ("CUDA_ROOT", root.clone()),
            ("CUDA_HOME", root.clone()),
            ("CUDA_PATH", root),
            ("PATH", prepend("PATH", &[&self.root.join("bin")])),
            ("LIBRARY_PATH", prepend("LIBRARY_PATH", &[&lib, &stubs])),
            ("LD_LIBRARY_PATH", prepend("LD_LIBRARY_PATH", &[&lib])),
            ("CUDA_COMPUTE_CAP", compute_cap),
        ]
    }

    fn link_libraries(&self) -> Result<()> {
        let lib = self.root.join("lib");
        for (link, soname) in LINKED_LIBRARIES {
            let target = lib.join(soname);
            if !target.is_file() {
                bail!(
                    "{} is missing from the CUDA wheels; delete {} to reinstall them",
                    target.display(),
                    VENV
                );
            }
            let link = lib.join(link);
            if link.symlink_metadata().is_err() {
                symlink(soname, &link)
                    .with_context(|| format!("could not link {}", link.display()))?;
            }
        }
        Ok(())
    }

    /// Compiles `libcuda.so` (soname `libcuda.so.1`, as the driver's) with one
    /// function per `cu*` name in `driver_bindings`: a superset of what the
    /// build can reference. Rewritten when the bindings are newer.
    fn write_driver_stub(&self, driver_bindings: &Path) -> Result<()> {
        let stub = self.root.join(DRIVER_STUB);
        let modified = |path: &Path| path.metadata().and_then(|m| m.modified()).ok();
        if modified(&stub).is_some() && modified(&stub) >= modified(driver_bindings) {
            return Ok(());
        }
        let bindings = std::fs::read_to_string(driver_bindings).with_context(|| {
            format!(
                "could not read cudarc's driver bindings {}",
                driver_bindings.display()
            )
        })?;
        let mut names: Vec<&str> = bindings
            .lines()
            .filter_map(|line| line.strip_prefix("pub unsafe fn "))
            .filter_map(|rest| rest.split('(').next())
            .filter(|name| name.starts_with("cu"))
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            bail!(
                "{} declares no `pub unsafe fn cu...`: cudarc's bindings changed form; update \
                 xtask/src/cuda_toolkit.rs to read them",
                driver_bindings.display()
            );
        }
        // Never called: the real driver is loaded at run time. 999 is
        // CUDA_ERROR_UNKNOWN, should the stub be loaded by mistake.
        let source: String = std::iter::once(format!(
            "/* Link-time stub of libcuda.so.1, written by cargo xtask from {} */\n",
            driver_bindings.display()
        ))
        .chain(
            names
                .iter()
                .map(|name| format!("int {name}(void) {{ return 999; }}\n")),
        )
        .collect();
        let dir = stub.parent().context("the driver stub has a folder")?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        let source_file = dir.join("libcuda-stub.c");
        std::fs::write(&source_file, source)
            .with_context(|| format!("could not write {}", source_file.display()))?;
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&stub)
            .arg(&source_file)
            .status()
            .context("could not run cc to build the libcuda link stub; install a C compiler")?;
        if !status.success() {
            bail!(
                "cc failed ({status}) building {} from {}",
                stub.display(),
                source_file.display()
            );
        }
        eprintln!(
            "cuda-toolkit: wrote the libcuda link stub ({} functions) {}",
            names.len(),
            stub.display()
        );
        Ok(())
    }
}

/// The wheels' toolkit folder in `venv`, when its nvcc is there.
fn wheel_root(venv: &Path) -> Option<PathBuf> {
    let nvcc = pip_venv::site_packages_path(venv, &format!("{WHEEL_ROOT}/bin/nvcc"))?;
    Some(nvcc.parent()?.parent()?.to_path_buf())
}

fn manual_install_hint(venv: &Path) -> String {
    format!(
        "install the wheels by hand: `python3 -m venv {0} && {0}/bin/pip install {1}` ({VENV_HINT})",
        venv.display(),
        PIP_PACKAGES.map(|p| format!("'{p}'")).join(" ")
    )
}
