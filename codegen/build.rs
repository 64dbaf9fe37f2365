//! Hashes the code generator's sources into `WARPFORGE_CODEGEN_HASH`
//! (`warpforge_codegen::VERSION_HASH`), so that tuning results recorded
//! with one code generator are never reused with another: any change under
//! `src/` gives a new hash, also between releases with the same version.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    // Sorted, with `/` separators: the same sources hash alike on every platform.
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|path| {
            let name: Vec<String> = path
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            (name.join("/"), path)
        })
        .collect();
    named.sort();
    let mut hasher = Sha256::new();
    for (name, path) in named {
        let text = fs::read(&path)
            .unwrap_or_else(|e| panic!("cannot read {} to hash it: {e}", path.display()));
        // Lengths first, so that no two file lists hash alike by shifting bytes between them.
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(&text);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    println!("cargo:rustc-env=WARPFORGE_CODEGEN_HASH={hex}");
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
