//! IR snapshots: the text form of `warpforge_codegen::print` for every input
//! in `tests/in`, against `tests/out/ir/<input>.snap`: the definition (the
//! variant family with its targets, tune axes and constraints), then its
//! first variant after `specialize` (consts substituted, constants folded,
//! `#[unroll]` loops unrolled).
//! Review changes with `cargo insta review`.

mod common;

use warpforge_codegen::specialize::specialize;

#[test]
fn ir_snapshots() {
    let _guard = common::snapshot_settings("ir").bind_to_scope();
    for (input, def) in common::inputs() {
        let consts = def.variants().into_iter().next().expect("a variant");
        let variant =
            specialize(&def.ir, &consts).unwrap_or_else(|e| panic!("{input}: {}", e.message));
        let name = def.variant_name(&consts);
        insta::assert_snapshot!(input, format!("{def}\n// {name}, specialized\n{variant}"));
    }
}
