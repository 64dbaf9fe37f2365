//! Shared by the integration tests: the DSL inputs under `tests/in` and the
//! snapshots under `tests/out/ptx`, `tests/out/wgsl` and `tests/out/ir`.

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};

use warpforge_codegen::front::parse_kernel_str;
use warpforge_codegen::{Arch, KernelDef, Target};

pub mod ptxas;

pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// insta's settings for the snapshots under `tests/out/<dir>`: each file
/// named by the snapshot alone, without the test module or the expression.
pub fn snapshot_settings(dir: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(tests_dir().join("out").join(dir));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

/// Splits `#[kernel(ATTR)] fn ...` (after any leading comments) into the
/// attribute's content and the function.
pub fn split_kernel_source(source: &str) -> (String, String) {
    let start = source
        .find("#[kernel")
        .expect("an input holds one `#[kernel]` function");
    let rest = &source[start + "#[kernel".len()..];
    if let Some(after) = rest.strip_prefix(']') {
        return (String::new(), after.to_string());
    }
    let inner = rest
        .strip_prefix('(')
        .expect("`#[kernel]` or `#[kernel(..)]`");
    let mut depth = 1;
    for (i, ch) in inner.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            let item = inner[i + 1..]
                .trim_start()
                .strip_prefix(']')
                .expect("`)]` closes the attribute");
            return (inner[..i].to_string(), item.to_string());
        }
    }
    panic!("unbalanced parentheses in the `#[kernel(..)]` attribute");
}

pub fn parse_source(source: &str) -> Result<KernelDef, String> {
    let (attr, item) = split_kernel_source(source);
    parse_kernel_str(&attr, &item)
}

/// Every input, sorted by name: (name, kernel).
pub fn inputs() -> Vec<(String, KernelDef)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(tests_dir().join("in"))
        .expect("tests/in exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let source = std::fs::read_to_string(&path).unwrap();
            let def = parse_source(&source)
                .unwrap_or_else(|e| panic!("{}: the front rejects it:\n{e}", path.display()));
            (name, def)
        })
        .collect()
}

/// The snapshot name of one compiled variant: `<input>.<target>`, with the
/// const values in between when the input has several variants.
pub fn snapshot_name(input: &str, def: &KernelDef, consts: &[i64], target: Target) -> String {
    if def.variants().len() == 1 {
        return format!("{input}.{}", target.name());
    }
    let values: Vec<String> = def
        .ir
        .const_params
        .iter()
        .zip(consts)
        .map(|(p, v)| format!("{}{v}", p.name))
        .collect();
    format!("{input}.{}.{}", values.join("_"), target.name())
}

/// The PTX targets of a kernel.
pub fn archs(def: &KernelDef) -> Vec<Arch> {
    def.targets.iter().filter_map(|t| t.arch()).collect()
}

/// Parses and validates WGSL with naga, every capability allowed (the
/// module's features are the device's business); naga's message on failure.
pub fn naga_check(text: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(text).map_err(|e| e.emit_to_string(text))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(text))?;
    Ok(())
}
