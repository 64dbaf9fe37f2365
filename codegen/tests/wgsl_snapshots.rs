//! WGSL snapshots: every variant of every input in `tests/in` that WGSL can
//! express, against `tests/out/wgsl/<input>.wgsl.snap`, each validated by
//! naga (the WGSL front end and validator of wgpu). The inputs WGSL cannot
//! express are listed with the error they give.
//! Review changes with `cargo insta review`.

mod common;

use warpforge_codegen::{compile_wgsl, Target};

/// The inputs WGSL cannot express (they list PTX targets only), and the first
/// construct each trips on; the `portable_*` inputs cover what WGSL can
/// express of them.
const NOT_IN_WGSL: &[(&str, &str)] = &[
    (
        "async_pipeline",
        "`cp_async` (asynchronous copies to shared memory)",
    ),
    ("atomics", "parameter `xl: &mut [i64]`"),
    ("mbarrier", "shared array `bars` of type u64"),
    ("cluster", "`cluster(..)` (thread block clusters)"),
    ("bf16_arith", "parameter `x_bf16: &mut [bf16]`"),
    (
        "block_reduce",
        "`atomic_add` on f32 (WGSL atomics are on i32 and u32 only)",
    ),
    ("casts", "parameter `v_i64` of type i64"),
    ("casts_bf16", "parameter `v_i64` of type i64"),
    ("casts_from_bf16", "parameter `v` of type bf16"),
    ("fence_gpu", "`fence_gpu` (a fence at GPU scope)"),
    ("float_arith", "parameter `x_f64: &mut [f64]`"),
    (
        "int_arith",
        "parameter `x_i8: &mut [i8]` (WGSL storage has no 8-bit elements)",
    ),
    ("intrinsics_bf16", "parameter `x: &mut [bf16]`"),
    ("intrinsics_f64", "parameter `x: &mut [f64]`"),
    (
        "intrinsics_int",
        "parameter `a: &mut [i8]` (WGSL storage has no 8-bit elements)",
    ),
    (
        "pipelined_sum",
        "`cp_async` (asynchronous copies to shared memory)",
    ),
    ("shared_vector", "parameter `d: &mut [f64]`"),
    (
        "sparse_mma",
        "`cp_async` (asynchronous copies to shared memory)",
    ),
    (
        "tensor_core",
        "parameter `q: &[i8]` (WGSL storage has no 8-bit elements)",
    ),
    ("tma", "the tensor map of parameter `a` (TMA)"),
    ("wgmma", "shared array `a_plain` of type bf16"),
    (
        "wgmma_types",
        "parameter `q: &[i8]` (WGSL storage has no 8-bit elements)",
    ),
    (
        "wmma",
        "`wmma_load_c_row` (Tensor Core and warp matrix operations)",
    ),
];

/// The block a kernel without `block(..)` is compiled for.
const LAUNCH_BLOCK: [u32; 3] = [256, 1, 1];

#[test]
fn wgsl_snapshots() {
    let _guard = common::snapshot_settings("wgsl").bind_to_scope();
    let mut failures = Vec::new();
    for (input, def) in common::inputs() {
        let block = def.ir.block.is_none().then_some(LAUNCH_BLOCK);
        let expected_error = NOT_IN_WGSL.iter().find(|(name, _)| *name == input);
        assert_eq!(
            def.targets.contains(&Target::Wgsl),
            expected_error.is_none(),
            "{input}: an input lists `wgsl` in its targets exactly when WGSL can express it"
        );
        for consts in def.variants() {
            let name = common::snapshot_name(&input, &def, &consts, Target::Wgsl);
            match (compile_wgsl(&def, &consts, block), expected_error) {
                (Ok(module), None) => {
                    if let Err(e) = common::naga_check(&module.text) {
                        failures.push(format!("{name}: naga rejects it:\n{e}\n{}", module.text));
                    }
                    insta::assert_snapshot!(name, module.text);
                }
                (Err(e), Some((_, construct))) => assert_eq!(
                    e.message,
                    format!(
                        "kernel `{input}`: WGSL cannot express {construct}: build the kernel for \
                         PTX only, `#[kernel(arch(sm_70, sm_80, sm_90))]`"
                    ),
                    "{name}"
                ),
                (Err(e), None) => failures.push(format!("{name}: {}", e.message)),
                (Ok(_), Some(_)) => {
                    failures.push(format!("{name}: compiles to WGSL: take it off NOT_IN_WGSL"))
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
