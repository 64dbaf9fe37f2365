//! PTX snapshots: every variant of every input in `tests/in`, for every arch
//! it targets, against `tests/out/ptx/<input>.<arch>.snap`.
//! Review changes with `cargo insta review`.

mod common;

use warpforge_codegen::{compile_ptx, Target};

#[test]
fn ptx_snapshots() {
    let _guard = common::snapshot_settings("ptx").bind_to_scope();
    for (input, def) in common::inputs() {
        for consts in def.variants() {
            for arch in common::archs(&def) {
                let name = common::snapshot_name(&input, &def, &consts, Target::Ptx(arch));
                let module = compile_ptx(&def, &consts, arch)
                    .unwrap_or_else(|e| panic!("{name}: {}", e.message));
                insta::assert_snapshot!(name, module.text);
            }
        }
    }
}
