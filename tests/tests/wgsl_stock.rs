//! Every variant of every stock kernel that targets WGSL compiles to WGSL
//! that naga (wgpu's WGSL front end and validator) accepts.

use naga::valid::{Capabilities, ValidationFlags, Validator};
use warpforge_codegen::{compile_wgsl, Target};

/// The block a kernel without `block(..)` is compiled for.
const LAUNCH_BLOCK: [u32; 3] = [256, 1, 1];

#[test]
fn every_stock_wgsl_variant_validates_with_naga() {
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for def in warpforge_kernels::all() {
        if !def.targets.contains(&Target::Wgsl) {
            continue;
        }
        let block = def.ir.block.is_none().then_some(LAUNCH_BLOCK);
        for consts in def.variants() {
            let name = def.variant_name(&consts);
            let module = match compile_wgsl(def, &consts, block) {
                Ok(module) => module,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            let parsed = naga::front::wgsl::parse_str(&module.text)
                .map_err(|e| e.emit_to_string(&module.text));
            let validated = parsed.and_then(|m| {
                Validator::new(ValidationFlags::all(), Capabilities::all())
                    .validate(&m)
                    .map(|_| ())
                    .map_err(|e| e.emit_to_string(&module.text))
            });
            if let Err(e) = validated {
                failures.push(format!("{name}: naga rejects it:\n{e}\n{}", module.text));
            }
            checked.push(def.ir.name.clone());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    checked.dedup();
    assert_eq!(
        checked,
        [
            "saxpy",
            "histogram",
            "block_sum",
            "softmax_rows",
            "gemm_f32"
        ],
        "every stock kernel has WGSL variants"
    );
}
