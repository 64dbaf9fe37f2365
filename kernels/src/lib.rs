//! STUB

use warpforge_codegen::KernelDef;

/// Every stock kernel, in a stable order: what `cargo xtask build-ptx` builds.
pub fn all() -> Vec<&'static KernelDef> {
    Vec::new()
}
