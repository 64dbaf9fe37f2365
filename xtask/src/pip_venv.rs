//! Python virtual environments under `target/` that hold tools from PyPI
//! (ptxas; the CUDA toolkit the candle example builds with): a registry
//! package installs where a toolkit download could not.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};

/// Makes the venv `venv` and pip-installs `packages` (requirement strings)
/// into it. `tool` names what for in the progress lines; `hint`, how to do
/// it by hand, ends the error of a step that fails.
pub fn install(venv: &Path, packages: &[&str], tool: &str, hint: &str) -> Result<()> {
    eprintln!(
        "{tool}: installing {} into {}",
        packages.join(" "),
        venv.display()
    );
    let create_venv = [OsStr::new("-m"), OsStr::new("venv"), venv.as_os_str()];
    run_step(Path::new("python3"), &create_venv, tool, hint)?;
    let mut pip_install = ["install", "--quiet", "--disable-pip-version-check"]
        .map(OsStr::new)
        .to_vec();
    pip_install.extend(packages.iter().map(OsStr::new));
    run_step(&venv.join("bin/pip"), &pip_install, tool, hint)
}

/// `relative` under the venv's `lib/python3.*/site-packages`, if it is there
/// (a file or a folder).
pub fn site_packages_path(venv: &Path, relative: &str) -> Option<PathBuf> {
    let mut python_dirs: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    python_dirs.sort();
    python_dirs
        .into_iter()
        .map(|dir| dir.join("site-packages").join(relative))
        .find(|path| path.exists())
}

fn run_step(program: &Path, args: &[&OsStr], tool: &str, hint: &str) -> Result<()> {
    let command_line = format!(
        "{} {}",
        program.display(),
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    eprintln!("{tool}: running {command_line}");
    match Command::new(program).args(args).status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => bail!("`{command_line}` failed ({status}); {hint}"),
        Err(error) => bail!("could not run `{command_line}`: {error}; {hint}"),
    }
}

/// The part of a manual-install hint that says how to get `python3 -m venv`.
pub const VENV_HINT: &str = "on Debian/Ubuntu first `apt-get install python3-venv`";
