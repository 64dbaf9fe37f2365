//! Calls to device functions: inlining gives the code the caller would have
//! written by hand (the same PTX), and each mistake is an error at its place.

use crate::front::{check_device, link_sources, parse_kernel_str, parse_kernel_with_str};
use crate::ir::Arch;

/// The PTX of every variant of a kernel, for each arch it targets.
fn ptx(def: &crate::KernelDef) -> Vec<String> {
    let mut out = Vec::new();
    for consts in def.variants() {
        for arch in def.targets.iter().filter_map(|t| t.arch()) {
            let module = crate::compile_ptx(def, &consts, arch)
                .unwrap_or_else(|e| panic!("{}: {e}", def.variant_name(&consts)));
            out.push(module.text);
        }
    }
    out
}

/// Asserts that `calling` (with `functions`) compiles to the PTX of `by_hand`.
fn same_ptx(attr: &str, calling: &str, functions: &[&str], by_hand: &str) {
    let called = parse_kernel_with_str(attr, calling, functions).unwrap_or_else(|e| panic!("{e}"));
    let inlined = parse_kernel_str(attr, by_hand).unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (ptx(&called), ptx(&inlined));
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(a, b, "calls and hand-inlined code differ");
    }
}

fn call_error(calling: &str, functions: &[&str]) -> String {
    match parse_kernel_with_str("arch(sm_80)", calling, functions) {
        Ok(_) => panic!("kernel accepted"),
        Err(e) => e,
    }
}

fn assert_call_error(calling: &str, functions: &[&str], expected: &[&str]) {
    let e = call_error(calling, functions);
    for part in expected {
        assert!(e.contains(part), "expected `{part}` in:\n{e}");
    }
}

const SWIZZLE: &str = "fn swizzle(row: u32, chunk: u32) -> u32 { row * 8 + (chunk ^ (row % 8)) }";

#[test]
fn a_scalar_function_reads_its_arguments_in_place() {
    same_ptx(
        "arch(sm_80)",
        "fn k(x: &[f32], y: &mut [f32]) { let i = thread_idx().x; y[swizzle(i, 3)] = x[swizzle(i + 1, i)]; }",
        &[SWIZZLE],
        "fn k(x: &[f32], y: &mut [f32]) { let i = thread_idx().x; y[i * 8 + (3 ^ (i % 8))] = x[(i + 1) * 8 + (i ^ ((i + 1) % 8))]; }",
    );
}

#[test]
fn statements_run_before_the_caller_and_tuples_bind_the_results() {
    let tile_order = "fn tile_order<const BM: u32, const BN: u32>() -> (u32, u32) {
        let id = block_idx().y * grid_dim().x + block_idx().x;
        let row0 = id / grid_dim().x * BM;
        let col0 = id % grid_dim().x * BN;
        (row0, col0)
    }";
    same_ptx(
        "arch(sm_80), tune(BM = [64, 128], BN = [32])",
        "fn k<const BM: u32, const BN: u32>(y: &mut [u32]) {
            let (row0, col0) = tile_order::<BM, { BN }>();
            y[row0 + col0] = 1;
        }",
        &[tile_order],
        "fn k<const BM: u32, const BN: u32>(y: &mut [u32]) {
            let id = block_idx().y * grid_dim().x + block_idx().x;
            let row0 = id / grid_dim().x * BM;
            let col0 = id % grid_dim().x * BN;
            y[row0 + col0] = 1;
        }",
    );
}

#[test]
fn tuples_name_their_parts_without_copies() {
    // A tuple of locals, of a constant and of an expression, passed to a
    // tuple parameter, read by part and destructured in the callee, and
    // returned whole: the PTX of the scalars written out.
    let functions = [
        "fn at(slot: (u32, u32, u32), l: u32) -> u32 { let (first, step, _) = slot; first + l * step + slot.2 }",
        "fn both(slot: (u32, u32, u32)) -> (u32, u32, u32) { slot }",
    ];
    same_ptx(
        "arch(sm_80), tune(STEP = [4, 8])",
        "fn k<const STEP: u32>(y: &mut [u32], n: u32) {
            let first = thread_idx().x * n;
            let slot = (first, STEP, n + 1);
            let copy = both(slot);
            let (f, _, last) = copy;
            y[at(slot, 2)] = at((f, 1, last), 3) + copy.1;
        }",
        &functions,
        "fn k<const STEP: u32>(y: &mut [u32], n: u32) {
            let first = thread_idx().x * n;
            let last = n + 1;
            y[first + 2 * STEP + last] = first + 3 * 1 + last + STEP;
        }",
    );
}

#[test]
fn constant_parts_stay_constants() {
    // A part made of const parameters and `#[unroll]` variables is read in
    // place: it indexes registers and bounds unrolled loops.
    same_ptx(
        "arch(sm_80), tune(N = [2, 4])",
        "fn k<const N: u32>(y: &mut [f32]) {
            let mut acc = [1.0f32; 8];
            #[unroll]
            for i in 0..2 {
                let at = (N / 2 + i, N);
                #[unroll]
                for j in 0..at.1 { acc[at.0 + j] += 1.0; }
            }
            y[0] = acc[3];
        }",
        &[],
        "fn k<const N: u32>(y: &mut [f32]) {
            let mut acc = [1.0f32; 8];
            #[unroll]
            for i in 0..2 {
                #[unroll]
                for j in 0..N { acc[N / 2 + i + j] += 1.0; }
            }
            y[0] = acc[3];
        }",
    );
}

#[test]
fn a_tuple_keeps_the_values_it_was_made_of() {
    // As in Rust: a tuple holds copies, so a variable changed after it was
    // made does not change it.
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [u32]) {
            let mut x = thread_idx().x;
            let pair = (x, 2u32);
            x += 1;
            y[x] = pair.0 * pair.1;
        }",
        &[],
        "fn k(y: &mut [u32]) {
            let mut x = thread_idx().x;
            let pair_0 = x;
            x += 1;
            y[x] = pair_0 * 2u32;
        }",
    );
}

#[test]
fn tuple_mistakes_are_reported() {
    let at = "fn at(slot: (u32, u32), l: u32) -> u32 { slot.0 + l * slot.1 }";
    assert_call_error(
        "fn k(y: &mut [u32]) { let t = (1u32, 2u32); y[0] = t; }",
        &[],
        &["`t` is a tuple of 2 values, not one value: read a part, `t.0`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let t = (1u32, 2u32); y[0] = t.2; }",
        &[],
        &["`t` is a tuple of 2 values: its parts are `t.0` to `t.1`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let mut t = (1u32, 2u32); y[0] = t.0; }",
        &[],
        &["a tuple is immutable: remove the `mut`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let t = (1u32, 2u32); t = (3u32, 4u32); y[0] = t.0; }",
        &[],
        &["`t` is a tuple, which is immutable"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = at((1, 2, 3), 0); }",
        &[at],
        &["the argument `slot` of `at` is a tuple of 2 values, but this has 3"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = at((1, 2.0f32), 0); }",
        &[at],
        &["part 1 of the argument `slot` of `at` must be `u32`, but this is `f32`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = at(5, 0); }",
        &[at],
        &["the argument `slot` of `at` is a tuple: write `(a, b, ..)`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let t: (u32, f32) = (1u32, 2u32); y[0] = t.0; }",
        &[],
        &["part 1 of `t` must be `f32`, but this is `u32`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = bump((1, 2)); }",
        &["fn bump(mut slot: (u32, u32)) -> u32 { slot.0 }"],
        &["a tuple parameter is immutable"],
    );
}

#[test]
fn arrays_rows_and_slices_are_bound_to_the_callers() {
    let functions = [
        "fn scale_row<const N: u32>(row: &mut [f32; N], s: f32) { #[unroll] for j in 0..N { row[j] *= s; } }",
        "fn store(#[shared] tile: &[[f32; 4]; 8], y: &mut [f32], at: u32) { y[at] = tile[at % 8][at % 4]; }",
        "fn fill(#[shared] tile: &mut [[f32; 4]; 8], x: &[f32]) { tile[thread_idx().x % 8][0] = x[thread_idx().x]; }",
    ];
    same_ptx(
        "arch(sm_80)",
        "fn k(x: &[f32], y: &mut [f32]) {
            let mut tile: [[f32; 4]; 8] = shared();
            let mut acc = [[1.0f32; 4]; 2];
            #[unroll]
            for i in 0..2 { scale_row(&mut acc[i], 2.0); }
            fill(&mut tile, x);
            sync_threads();
            store(&tile, y, thread_idx().x);
            y[0] = acc[1][3];
        }",
        &functions,
        "fn k(x: &[f32], y: &mut [f32]) {
            let mut tile: [[f32; 4]; 8] = shared();
            let mut acc = [[1.0f32; 4]; 2];
            #[unroll]
            for i in 0..2 { #[unroll] for j in 0..4 { acc[i][j] *= 2.0; } }
            tile[thread_idx().x % 8][0] = x[thread_idx().x];
            sync_threads();
            y[thread_idx().x] = tile[thread_idx().x % 8][thread_idx().x % 4];
            y[0] = acc[1][3];
        }",
    );
}

#[test]
fn an_unroll_variable_passed_as_a_scalar_still_indexes_registers() {
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { let mut acc = [0.0f32; 4]; #[unroll] for i in 0..4 { set(&mut acc, i); } y[0] = acc[2]; }",
        &["fn set(acc: &mut [f32; 4], i: u32) { acc[i] = i as f32; }"],
        "fn k(y: &mut [f32]) { let mut acc = [0.0f32; 4]; #[unroll] for i in 0..4 { acc[i] = i as f32; } y[0] = acc[2]; }",
    );
}

#[test]
fn functions_call_functions_and_fragments_pass_through() {
    let functions = [
        "fn mma(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) { mma_m16n8k16_f16(&mut acc, &a, &b); }",
        "fn twice(acc: &mut [[f32; 4]; 2], a: &[u32; 4], b: &[u32; 2]) { #[unroll] for j in 0..2 { mma(&mut acc[j], a, b); } }",
    ];
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) {
            let a = [1u32; 4]; let b = [2u32; 2];
            let mut acc = [[0.0f32; 4]; 2];
            twice(&mut acc, &a, &b);
            y[lane_id()] = acc[1][0];
        }",
        &functions,
        "fn k(y: &mut [f32]) {
            let a = [1u32; 4]; let b = [2u32; 2];
            let mut acc = [[0.0f32; 4]; 2];
            #[unroll] for j in 0..2 { mma_m16n8k16_f16(&mut acc[j], &a, &b); }
            y[lane_id()] = acc[1][0];
        }",
    );
}

#[test]
fn an_argument_with_effects_is_copied_once() {
    same_ptx(
        "arch(sm_80)",
        "fn k(c: &mut [u32]) { let v = twice(atomic_add(&mut c[0], 1)); c[1] = v; }",
        &["fn twice(x: u32) -> u32 { x + x }"],
        "fn k(c: &mut [u32]) { let x = atomic_add(&mut c[0], 1); let v = x + x; c[1] = v; }",
    );
}

#[test]
fn call_mistakes_are_reported() {
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = swizzle(1); }",
        &[SWIZZLE],
        &["`swizzle` takes 2 argument(s) (`row`, `chunk`), but 1 were given"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = swizzle(1.5, 2); }",
        &[SWIZZLE],
        &["a float literal where `u32` is expected"],
    );
    assert_call_error(
        "fn k(y: &mut [u32], f: f32) { y[0] = swizzle(f, 2); }",
        &[SWIZZLE],
        &["the argument `row` of `swizzle` must be `u32`, but this is `f32`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = swizle(1, 2); }",
        &[SWIZZLE],
        &["unknown function `swizle`"],
    );
    assert_call_error(
        "fn k() { syncthreads(); }",
        &[],
        &["did you mean `sync_threads`?"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = down(3); }",
        &[
            "fn down(n: u32) -> u32 { let m = n - 1; up(m) }",
            "fn up(n: u32) -> u32 { down(n) }",
        ],
        &[
            "`down` calls itself (through `down` -> `up`)",
            "write the repetition as a loop",
        ],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = early(3); }",
        &["fn early(n: u32) -> u32 { if n > 2 { return 1; } n }"],
        &["`return` is not supported in a device function"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let mut i = 0; while next(i) < 4 { i += 1; } y[0] = i; }",
        &["fn next(i: u32) -> u32 { let j = i + 1; j }"],
        &["`next` runs statements, so it cannot be called in a `while` condition"],
    );
    assert_call_error(
        "fn k(y: &mut [u32], n: u32) { if n < 4 && y[sub(n)] > 0 { y[0] = 1; } }",
        &["fn sub(i: u32) -> u32 { let j = i - 1; j }"],
        &["cannot be called in the right side of `&&`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let (a, b, c) = pair(); y[a] = b + c; }",
        &["fn pair() -> (u32, u32) { (1, 2) }"],
        &["this tuple has 2 value(s), but the pattern has 3"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { y[0] = pair(); }",
        &["fn pair() -> (u32, u32) { (1, 2) }"],
        &["this function returns 2 values: bind them with `let (a, b, ..) = f(..);`"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { let mut acc = [0.0f32; 8]; clear(&mut acc); y[0] = acc[0]; }",
        &["fn clear(acc: &mut [f32; 4]) { acc[0] = 0.0; }"],
        &["the argument `acc` of `clear` has size 8 here, but the parameter declares 4"],
    );
    assert_call_error(
        "fn k(x: &[f32]) { put(x); }",
        &["fn put(y: &mut [f32]) { y[0] = 1.0; }"],
        &["`put` writes its argument `y`, but `x` is a read-only slice"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { let acc = [0.0f32; 4]; peek(&acc, y); }",
        &["fn peek(acc: &[f32; 4], y: &mut [f32]) { acc[0] = y[0]; }"],
        &["`acc` is a read-only parameter: declare it `&mut [..]`"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { let acc = [0.0f32; 4]; y[0] = first(&acc); }",
        &["fn first(#[shared] tile: &[f32; 4]) -> f32 { tile[0] }"],
        &["the argument `tile` of `first` is a shared array, but this is a register array"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { y[0] = total(3); }",
        &["fn total<const N: u32>(x: u32) -> f32 { (x * N) as f32 }"],
        &["`total` needs the const argument `N`: write it as `total::<..>(..)`"],
    );
}

#[test]
fn array_sizes_are_checked_in_every_variant() {
    let e = parse_kernel_with_str(
        "arch(sm_80), tune(N = [4, 8])",
        "fn k<const N: u32>(y: &mut [f32]) { let mut acc = [0.0f32; N]; clear(&mut acc); y[0] = acc[0]; }",
        &["fn clear(acc: &mut [f32; 4]) { acc[0] = 0.0; }"],
    )
    .unwrap_err();
    assert!(
        e.contains("the argument `acc` of `clear` has size 8 in the variant"),
        "{e}"
    );
}

#[test]
fn a_function_body_is_checked_at_its_definition() {
    let linked = link_sources(&["fn bad(x: u32) -> u32 { x + 1.0 }"]).unwrap();
    let e = check_device(&linked, &linked.functions[0].id)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a float literal where `u32` is expected"), "{e}");
    let linked =
        link_sources(&["fn fine<const N: u32>(acc: &mut [f32; N], i: u32) { acc[i] = 1.0; }"])
            .unwrap();
    check_device(&linked, &linked.functions[0].id).unwrap();
}

#[test]
fn functions_compile_for_every_arch() {
    let def = parse_kernel_with_str(
        "",
        "fn k(x: &[f32], y: &mut [f32]) { let i = thread_idx().x; y[swizzle(i, 1)] = x[i]; }",
        &[SWIZZLE],
    )
    .unwrap();
    for arch in Arch::ALL {
        crate::compile_ptx(&def, &[], arch).unwrap();
    }
    crate::compile_wgsl(&def, &[], Some([64, 1, 1])).unwrap();
}

#[test]
fn type_parameters_are_inferred_or_given_and_stand_for_their_type() {
    let functions = [
        "fn load<T: Half>(x: &[T], i: u32) -> f32 { x[i] as f32 }",
        "fn zero<T: Float>() -> T { T::ZERO }",
        "fn bytes<T>() -> u32 { T::BYTES * 2 }",
        "fn floats<T>() -> bool { T::IS_FLOAT }",
    ];
    same_ptx(
        "arch(sm_80)",
        "fn k(x: &[f16], y: &mut [f32], z: &mut [bf16]) {
            let i = thread_idx().x;
            y[i] = load(x, i) + zero::<f32>();
            z[i] = zero::<bf16>();
            y[bytes::<f16>()] = 1.0;
            if floats::<bf16>() && !floats::<i8>() {
                y[1] = 2.0;
            }
        }",
        &functions,
        "fn k(x: &[f16], y: &mut [f32], z: &mut [bf16]) {
            let i = thread_idx().x;
            y[i] = x[i] as f32 + 0.0f32;
            z[i] = 0.0bf16;
            y[2u32 * 2] = 1.0;
            if true && !false {
                y[1] = 2.0;
            }
        }",
    );
    assert_call_error(
        "fn k(x: &[f32], y: &mut [f32]) { y[0] = load(x, 0); }",
        &functions,
        &["`load` needs `T: Half`, but `T` is `f32` here"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { y[0] = zero(); }",
        &functions,
        &["the type `T` of `zero` cannot be inferred from the arguments"],
    );
}

#[test]
fn a_generic_kernel_is_one_kernel_per_instance() {
    let generic = "fn scale<T: Half, const N: u32>(x: &[T], y: &mut [T]) {
        let i = thread_idx().x * N;
        y[i] = (x[i] as f32 * 2.0) as T;
    }";
    let defs = crate::front::parse_kernel_instances(
        "arch(sm_80), tune(N = [1, 2]), instances(scale_f16 = <f16>, scale_bf16 = <bf16>)"
            .parse()
            .unwrap(),
        &syn::parse_str(generic).unwrap(),
        &Default::default(),
    )
    .unwrap();
    let names: Vec<String> = defs.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names, ["scale_f16", "scale_bf16"]);
    let by_hand = parse_kernel_str(
        "arch(sm_80), tune(N = [1, 2])",
        "fn scale_f16<const N: u32>(x: &[f16], y: &mut [f16]) {
            let i = thread_idx().x * N;
            y[i] = (x[i] as f32 * 2.0) as f16;
        }",
    )
    .unwrap();
    assert_eq!(ptx(&defs[0].1), ptx(&by_hand));
    assert_eq!(
        defs[1].1.ir.params[0].ty,
        crate::ir::ParamType::Slice {
            elem: crate::ir::Scalar::Bf16,
            mutable: false
        }
    );

    let instances_error = |attr: &str| {
        crate::front::parse_kernel_instances(
            attr.parse().unwrap(),
            &syn::parse_str(generic).unwrap(),
            &Default::default(),
        )
        .unwrap_err()
        .to_string()
    };
    assert!(instances_error("tune(N = [1])")
        .contains("a kernel with type parameters is built for the types `instances(..)` lists"));
    assert!(instances_error("tune(N = [1]), instances(s = <f32>)")
        .contains("`T` is `T: Half`, which `f32` is not"));
    assert!(instances_error("tune(N = [1]), instances(s = <f16, f16>)")
        .contains("`s` gives 2 type(s), and the kernel has 1"));
}

#[test]
fn the_generic_mma_takes_the_form_of_its_element_type() {
    let mma = "fn mma<T>(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) { mma_m16n8::<T>(&mut acc, &a, &b); }";
    for (ty, form) in [
        ("f16", "mma_m16n8k16_f16"),
        ("bf16", "mma_m16n8k16_bf16"),
        ("f32", "mma_m16n8k8_tf32"),
    ] {
        same_ptx(
            "arch(sm_80)",
            &format!(
                "fn k(y: &mut [f32]) {{ let a = [1u32; 4]; let b = [2u32; 2]; let mut acc = [0.0f32; 4]; \
                 mma::<{ty}>(&mut acc, &a, &b); y[lane_id()] = acc[0]; }}"
            ),
            &[mma],
            &format!(
                "fn k(y: &mut [f32]) {{ let a = [1u32; 4]; let b = [2u32; 2]; let mut acc = [0.0f32; 4]; \
                 {form}(&mut acc, &a, &b); y[lane_id()] = acc[0]; }}"
            ),
        );
    }
    assert_call_error(
        "fn k(y: &mut [f32]) { let a = [1u32; 4]; let b = [2u32; 2]; let mut acc = [0.0f32; 4]; mma::<f64>(&mut acc, &a, &b); y[0] = acc[0]; }",
        &[mma],
        &["`mma_m16n8` has no form for `f64`"],
    );
    assert_call_error(
        "fn k(y: &mut [f32]) { sync_threads::<4>(); }",
        &[],
        &["`sync_threads` takes no generic arguments"],
    );
}

#[test]
fn the_generic_sparse_mma_takes_the_form_of_its_element_type() {
    let mma = "fn mma<T: Half>(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 4], e: u32) { \
               mma_sp_m16n8k32::<T>(&mut acc, &a, &b, e, 0); mma_sp_ordered_m16n8k32::<T>(&mut acc, &a, &b, e, 1); }";
    for ty in ["f16", "bf16"] {
        same_ptx(
            "arch(sm_80)",
            &format!(
                "fn k(y: &mut [f32]) {{ let a = [1u32; 4]; let b = [2u32; 4]; let mut acc = [0.0f32; 4]; \
                 mma::<{ty}>(&mut acc, &a, &b, 7); y[lane_id()] = acc[0]; }}"
            ),
            &[mma],
            &format!(
                "fn k(y: &mut [f32]) {{ let a = [1u32; 4]; let b = [2u32; 4]; let mut acc = [0.0f32; 4]; \
                 mma_sp_m16n8k32_{ty}(&mut acc, &a, &b, 7, 0); mma_sp_ordered_m16n8k32_{ty}(&mut acc, &a, &b, 7, 1); \
                 y[lane_id()] = acc[0]; }}"
            ),
        );
    }
    assert_call_error(
        "fn k(y: &mut [f32]) { let a = [1u32; 4]; let b = [2u32; 4]; let mut acc = [0.0f32; 4]; \
         mma_sp_m16n8k32::<f32>(&mut acc, &a, &b, 0, 0); y[0] = acc[0]; }",
        &[],
        &["`mma_sp_m16n8k32` has no form for `f32`: its element types are f16 and bf16"],
    );
}

#[test]
fn a_condition_of_type_constants_compiles_only_its_branch() {
    // `.trans` loads move 16-bit elements: an f32 instance reaches only the
    // other branch, which is all it compiles.
    let kernel = |ty: &str| {
        format!(
            "fn k(y: &mut [u32]) {{ let tile: [[{ty}; 8]; 32] = shared(); let mut f = [0u32; 4]; \
             if {ty}::BYTES == 2 {{ ldmatrix_x4_trans(&mut f, &tile[lane_id()][0]); }} \
             else {{ ldmatrix_x4(&mut f, &tile[lane_id()][0]); }} y[lane_id()] = f[0]; }}"
        )
    };
    same_ptx(
        "arch(sm_80)",
        &kernel("f32"),
        &[],
        "fn k(y: &mut [u32]) { let tile: [[f32; 8]; 32] = shared(); let mut f = [0u32; 4]; \
         ldmatrix_x4(&mut f, &tile[lane_id()][0]); y[lane_id()] = f[0]; }",
    );
    same_ptx(
        "arch(sm_80)",
        &kernel("f16"),
        &[],
        "fn k(y: &mut [u32]) { let tile: [[f16; 8]; 32] = shared(); let mut f = [0u32; 4]; \
         ldmatrix_x4_trans(&mut f, &tile[lane_id()][0]); y[lane_id()] = f[0]; }",
    );
    // Any other condition is compiled whole.
    assert_call_error(
        "fn k(y: &mut [u32]) { let tile: [[f32; 8]; 32] = shared(); let mut f = [0u32; 4]; \
         if lane_id() == 0 { ldmatrix_x4_trans(&mut f, &tile[lane_id()][0]); } y[lane_id()] = f[0]; }",
        &[],
        &["`ldmatrix_x4_trans` transposes 16-bit elements"],
    );
}

#[test]
fn an_instance_may_name_its_own_targets() {
    let defs = crate::front::parse_kernel_instances(
        "arch(sm_70, sm_80), instances(copy_f16 = <f16>, copy_bf16 = <bf16> arch(sm_80))"
            .parse()
            .unwrap(),
        &syn::parse_str("fn copy<T: Half>(x: &[T], y: &mut [T]) { y[0] = x[0]; }").unwrap(),
        &Default::default(),
    )
    .unwrap();
    let names: Vec<&str> = defs[1].1.targets.iter().map(|t| t.name()).collect();
    assert_eq!(defs[0].1.targets.len(), 2);
    assert_eq!(names, ["sm_80"]);
}

#[test]
fn an_element_of_an_array_the_call_also_passes_is_copied() {
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [f32]) { let mut acc = [1.0f32; 2]; bump(acc[0], &mut acc); y[0] = acc[1]; }",
        &["fn bump(x: f32, acc: &mut [f32; 2]) { acc[0] = 5.0; acc[1] = x; }"],
        "fn k(y: &mut [f32]) { let mut acc = [1.0f32; 2]; let x = acc[0]; acc[0] = 5.0; acc[1] = x; y[0] = acc[1]; }",
    );
}

const FOR_EACH_ROW: &str =
    "fn for_each_row<const N: u32>(start: u32, mut body: impl FnMut(u32, u32)) {
    #[unroll]
    for i in 0..N {
        body(i, start + i);
    }
}";

#[test]
fn a_closure_runs_in_the_callers_scope_at_each_call() {
    // The closure writes the caller's register array, indexed by the
    // callee's unroll variable (still a constant), and reads a slice.
    same_ptx(
        "arch(sm_80)",
        "fn k(x: &[f32], y: &mut [f32]) {
            let t = thread_idx().x;
            let mut acc = [0.0f32; 4];
            for_each_row::<4>(t, |i, row| { acc[i] = x[row] * 2.0; });
            y[t] = acc[0] + acc[3];
        }",
        &[FOR_EACH_ROW],
        "fn k(x: &[f32], y: &mut [f32]) {
            let t = thread_idx().x;
            let mut acc = [0.0f32; 4];
            #[unroll]
            for i in 0..4 { acc[i] = x[t + i] * 2.0; }
            y[t] = acc[0] + acc[3];
        }",
    );
}

#[test]
fn a_closure_passes_through_functions_and_sees_its_own_scope() {
    // `inner` gets the closure from `outer`; the closure's `start` is the
    // kernel's, not `outer`'s parameter of the same name.
    let outer = "fn outer(start: u32, mut f: impl FnMut(u32)) { inner(start * 2, f); }";
    let inner = "fn inner(x: u32, mut g: impl FnMut(u32)) { g(x); g(x + 1); }";
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [u32]) {
            let start = thread_idx().x;
            outer(7, |v: u32| { y[start + v] = v; });
        }",
        &[outer, inner],
        "fn k(y: &mut [u32]) {
            let start = thread_idx().x;
            y[start + 7 * 2] = 7 * 2;
            y[start + (7 * 2 + 1)] = 7 * 2 + 1;
        }",
    );
}

#[test]
fn a_closure_that_may_write_a_variable_makes_the_call_copy_it() {
    // `x` is `n` as it was at the call, although the closure assigns `n`
    // before the function reads `x`.
    same_ptx(
        "arch(sm_80)",
        "fn k(y: &mut [u32]) {
            let mut n = thread_idx().x;
            let v = after(n, || { n = 5; });
            y[0] = v;
            y[1] = n;
        }",
        &["fn after(x: u32, mut f: impl FnMut()) -> u32 { f(); x }"],
        "fn k(y: &mut [u32]) {
            let mut n = thread_idx().x;
            let x = n;
            n = 5;
            let v = x;
            y[0] = v;
            y[1] = n;
        }",
    );
}

#[test]
fn closure_mistakes_are_reported() {
    let f = FOR_EACH_ROW;
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, |i| { y[i] = 0; }); }",
        &[f],
        &["the argument `body` of `for_each_row` takes 2 (`u32`, `u32`), but this closure takes 1"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, 3); }",
        &[f],
        &["the argument `body` of `for_each_row` is a closure: write it here, `|a: u32, b: u32| { .. }`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, move |i, r| { y[i] = r; }); }",
        &[f],
        &["remove `move`"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, |i, r: f32| { y[i] = 0; }); }",
        &[f],
        &["the argument `body` of `for_each_row` takes `u32` here, as `for_each_row` declares"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, |i, r| -> u32 { r }); }",
        &[f],
        &["returns nothing: remove the return type"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { let f = |i: u32| i; y[0] = 1; }",
        &[],
        &["a closure is only an argument of a device function whose parameter takes one"],
    );
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, |i, r| { if r > 0 { return; } y[i] = 1; }); }",
        &[f],
        &["`return` in a closure passed to a device function would end the kernel's thread"],
    );
    // In the closure's body, the errors of any code, at its place.
    assert_call_error(
        "fn k(y: &mut [u32]) { for_each_row::<2>(0, |i, r| { y[i] = 1.5; }); }",
        &[f],
        &["a float literal where `u32` is expected"],
    );
}

#[test]
fn a_closure_parameter_is_checked_at_the_definition() {
    for (source, expected) in [
        (
            "fn bad(mut f: impl FnMut(u32)) { f(1, 2); }",
            "`f` takes 1 argument(s) (`u32`), but 2 were given",
        ),
        (
            "fn bad(mut f: impl FnMut(u32) -> u32) { f(1); }",
            "a closure passed to a device function returns nothing",
        ),
        (
            "fn bad(mut f: impl FnMut(&[f32])) { }",
            "a closure parameter takes scalars",
        ),
        (
            "fn bad(mut f: impl Iterator) { }",
            "a closure parameter is written `f: impl FnMut(u32, ..)`",
        ),
    ] {
        let linked = link_sources(&[source]).unwrap();
        let e = check_device(&linked, &linked.functions[0].id)
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{source}: {e}");
    }
    let linked = link_sources(&[FOR_EACH_ROW]).unwrap();
    check_device(&linked, &linked.functions[0].id).unwrap();
}
