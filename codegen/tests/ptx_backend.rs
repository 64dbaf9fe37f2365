//! The PTX backend's contracts beyond the snapshots: what each architecture
//! refuses (with the message), the `.version` each construct raises, the
//! shared-memory layout, the parameter ABI, determinism. Kernels the DSL
//! cannot express yet (16-bit atomics) are built as IR and snapshotted, so
//! the ptxas test assembles them too.

mod common;

use warpforge_codegen::back::ptx::{emit, PtxModule};
use warpforge_codegen::ir::*;
use warpforge_codegen::{compile_ptx, specialize, valid, Error, KernelDef};

fn kernel(source: &str) -> KernelDef {
    common::parse_source(source).unwrap_or_else(|e| panic!("the front rejects the kernel:\n{e}"))
}

/// The first variant's PTX for `arch`, or the error: the front's when it
/// refuses the kernel, as it does whatever compiling one of its variants
/// for one of its archs would refuse.
fn compile(source: &str, arch: Arch) -> Result<PtxModule, Error> {
    let def = common::parse_source(source).map_err(Error::new)?;
    let consts = def.variants().remove(0);
    compile_ptx(&def, &consts, arch)
}

fn compile_error(source: &str, arch: Arch) -> String {
    match compile(source, arch) {
        Ok(m) => panic!("compiled for {}:\n{}", arch.name(), m.text),
        Err(e) => e.message,
    }
}

const BF16_ADD: &str =
    "#[kernel(arch(sm_70, sm_80, sm_90))] fn bf16_add(x: &mut [bf16]) { let i = thread_idx().x; x[i] = x[i] + x[i + 1]; }";
const BF16_COPY: &str = "#[kernel(arch(sm_70, sm_80, sm_90))] fn bf16_copy(x: &[bf16], y: &mut [bf16]) { let i = thread_idx().x; y[i] = -x[i].abs(); }";

#[test]
fn bf16_arithmetic_needs_sm_80() {
    assert_eq!(
        compile_error(BF16_ADD, Arch::Sm70),
        "kernel `bf16_add` (sm_70): bf16 conversions (`cvt.f32.bf16`): needs sm_80 or newer, \
         and this variant targets sm_70; drop sm_70 from `arch(..)` or avoid the construct on it"
    );
    // Widening bf16 needs PTX 7.1 on sm_80.
    assert_eq!(compile(BF16_ADD, Arch::Sm80).unwrap().version, (7, 1));
    assert_eq!(compile(BF16_ADD, Arch::Sm90).unwrap().version, (7, 8));
}

#[test]
fn bf16_loads_stores_and_sign_bits_work_everywhere() {
    let m = compile(BF16_COPY, Arch::Sm70).unwrap();
    assert_eq!(m.version, (6, 0));
    assert!(
        m.text.contains("and.b16") && m.text.contains("xor.b16"),
        "{}",
        m.text
    );
}

#[test]
fn bf16_conversions_need_sm_80() {
    let source = "#[kernel(arch(sm_70, sm_80, sm_90))] fn to_bf16(x: &[f32], y: &mut [bf16]) { let i = thread_idx().x; y[i] = x[i] as bf16; }";
    assert_eq!(
        compile_error(source, Arch::Sm70),
        "kernel `to_bf16` (sm_70): bf16 arithmetic and conversions (`cvt.rn.bf16.f32`): needs sm_80 or newer, \
         and this variant targets sm_70; drop sm_70 from `arch(..)` or avoid the construct on it"
    );
}

#[test]
fn transcendental_f64_intrinsics_are_refused_on_every_arch() {
    let source = "#[kernel(arch(sm_70, sm_80, sm_90))] fn exp64(x: &mut [f64]) { let i = thread_idx().x; x[i] = x[i].exp(); }";
    for arch in Arch::ALL {
        assert_eq!(
            compile_error(source, arch),
            format!(
                "kernel `exp64` ({}): `exp` on f64 is not available on PTX targets: cast to f32, e.g. `(x as f32).exp()`",
                arch.name()
            )
        );
    }
}

#[test]
fn float_remainder_is_refused_for_every_ptx_target_the_kernel_declares() {
    // The front refuses it (a fuzzed input reached the backend with it):
    // one line per declared PTX target, none for WGSL, which has it.
    let refusal = |arch: &str| {
        format!(
            "kernel `fmod` ({arch}): `%` on f32 (the floating-point remainder) is not available on PTX targets: \
             compute it with `a - b * (a / b).floor()` (adjust the sign as needed)"
        )
    };
    let source = "#[kernel(arch(sm_70, sm_80, sm_90))] fn fmod(x: &mut [f32]) { let i = thread_idx().x; x[i] = x[i] % 2.0; }";
    assert_eq!(
        compile_error(source, Arch::Sm80),
        ["sm_70", "sm_80", "sm_90"].map(refusal).join("\n")
    );
    let source = "#[kernel(arch(sm_80, wgsl))] fn fmod(x: &mut [f16]) { let i = thread_idx().x; x[i] = x[i] % x[i + 1]; }";
    assert_eq!(
        compile_error(source, Arch::Sm80),
        refusal("sm_80").replace("f32", "f16")
    );
}

#[test]
fn tanh_uses_the_instruction_where_it_exists() {
    let source = "#[kernel(arch(sm_70, sm_80, sm_90))] fn t(x: &mut [f32]) { let i = thread_idx().x; x[i] = x[i].tanh(); }";
    let sm70 = compile(source, Arch::Sm70).unwrap();
    assert!(!sm70.text.contains("tanh.approx") && sm70.text.contains("ex2.approx"));
    assert_eq!(sm70.version, (6, 0));
    let sm80 = compile(source, Arch::Sm80).unwrap();
    assert!(sm80.text.contains("tanh.approx.f32"));
    assert_eq!(sm80.version, (7, 0));
}

#[test]
fn shared_arrays_share_one_aligned_dynamic_block() {
    let source = "#[kernel(block(64), arch(sm_70, sm_80, sm_90))] fn layout(y: &mut [f64]) {
        let mut flags: [u8; 3] = shared();
        let mut values: [[f64; 3]; 2] = shared();
        let t = thread_idx().x;
        flags[2] = 1u8;
        values[1][t] = 2.0;
        sync_threads();
        y[t] = values[1][2] + flags[2] as f64;
    }";
    let m = compile(source, Arch::Sm80).unwrap();
    // u8[3] at 0, f64[2][3] at the next 128-byte boundary (48 bytes).
    assert_eq!(m.shared_bytes, 176);
    assert!(m.text.contains(".extern .shared .align 128 .b8 smem[];"));
    assert!(m.text.contains("st.shared.u8 [%r0+2]"), "{}", m.text);
    // values[1][2] is at 128 + (1 * 3 + 2) * 8 = 168.
    assert!(
        m.text.contains("ld.shared.f64 %fd1, [%r0+168]"),
        "{}",
        m.text
    );
    assert_eq!(m.block, Some([64, 1, 1]));
    assert!(m.text.contains(".reqntid 64, 1, 1"));
}

#[test]
fn shared_memory_is_bounded_per_arch() {
    // 128 KB: past sm_70's 96 KB, within sm_80's 163 KB.
    let source = |arch: &str| {
        format!(
            "#[kernel(arch({arch}))] fn big(y: &mut [f32]) {{
                let mut tile: [f32; 32768] = shared();
                let t = thread_idx().x;
                tile[t] = 1.0;
                sync_threads();
                y[t] = tile[32767 - t];
            }}"
        )
    };
    assert_eq!(
        compile_error(&source("sm_70, sm_80"), Arch::Sm70),
        "kernel `big` (sm_70): its shared arrays take 131072 bytes, more than the 98304 one block may use on sm_70: \
         use smaller tiles for this arch"
    );
    let fits = source("sm_80, sm_90");
    assert_eq!(compile(&fits, Arch::Sm80).unwrap().shared_bytes, 131072);
    // The backend's own check, on a variant the front did not see.
    let def = kernel(&fits);
    let big = specialize::specialize(&def.ir, &[]).unwrap();
    assert!(emit(&big, Arch::Sm70)
        .unwrap_err()
        .message
        .contains("more than the 98304 one block may use on sm_70"));
}

#[test]
fn parameters_follow_the_launch_abi() {
    let source = "#[kernel(arch(sm_70, sm_80, sm_90))] fn abi(flag: bool, n: u32, x: &[f32], y: &mut [f32]) {
        let i = thread_idx().x;
        if flag && i < n { y[i] = x[i]; }
    }";
    let m = compile(source, Arch::Sm80).unwrap();
    for param in [
        ".param .u32 p0_flag,",
        ".param .u32 p1_n,",
        ".param .u64 p2_x_ptr,",
        ".param .u32 p2_x_len,",
        ".param .u64 p3_y_ptr,",
        ".param .u32 p3_y_len",
    ] {
        assert!(m.text.contains(param), "missing `{param}` in:\n{}", m.text);
    }
    // A slice the kernel never writes is read through the read-only cache.
    assert!(m.text.contains("ld.global.nc.f32"));
    assert_eq!(m.entry, "abi");
    assert_eq!(m.block, None);
    assert!(!m.text.contains(".reqntid"));
}

#[test]
fn output_is_deterministic() {
    let source = std::fs::read_to_string(common::tests_dir().join("in/gemm_simt.rs")).unwrap();
    let first = compile(&source, Arch::Sm80).unwrap();
    let second = compile(&source, Arch::Sm80).unwrap();
    assert_eq!(first, second);
}

/// `atomic_add` / `atomic_compare_exchange` on `&mut [ty]`, built as IR (the
/// DSL does not offer 16-bit atomics yet).
fn atomic_16bit(ty: Scalar, op: AtomicOp) -> Kernel {
    let value = Expr::literal(ty, Literal::Float(1.0));
    let compare =
        (op == AtomicOp::CompareExchange).then(|| Box::new(Expr::literal(ty, Literal::Float(0.0))));
    let index = Expr {
        ty: Scalar::U32,
        kind: ExprKind::Special(Special::ThreadIdx(Axis::X)),
    };
    Kernel {
        name: format!(
            "atomic_{}_{}",
            if compare.is_some() { "cas" } else { "add" },
            ty.name()
        ),
        const_params: vec![],
        params: vec![Param {
            name: "x".into(),
            ty: ParamType::Slice {
                elem: ty,
                mutable: true,
            },
            tensor_map: None,
        }],
        locals: vec![],
        block: None,
        cluster: None,
        min_blocks_per_sm: None,
        requires: vec![],
        body: vec![Stmt::Expr(Expr {
            ty,
            kind: ExprKind::Atomic {
                op,
                place: Box::new(Place::Global { param: 0, index }),
                value: Box::new(value),
                compare,
            },
        })],
    }
}

fn emit_checked(k: &Kernel, arch: Arch) -> Result<PtxModule, Error> {
    let k = specialize::specialize(k, &[])?;
    valid::validate(&k)?;
    emit(&k, arch)
}

#[test]
fn sixteen_bit_atomics_follow_the_feature_table() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::tests_dir().join("out/ptx"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let _guard = settings.bind_to_scope();

    let f16_add = atomic_16bit(Scalar::F16, AtomicOp::Add);
    let f16_cas = atomic_16bit(Scalar::F16, AtomicOp::CompareExchange);
    let bf16_add = atomic_16bit(Scalar::Bf16, AtomicOp::Add);
    for (k, version) in [(&f16_add, (6, 3)), (&f16_cas, (6, 3))] {
        for arch in Arch::ALL {
            let m = emit_checked(k, arch).unwrap();
            let expected = version.max(warpforge_codegen::back::ptx::features::base_version(arch));
            assert_eq!(m.version, expected, "{} on {}", k.name, arch.name());
            insta::assert_snapshot!(format!("{}.{}", k.name, arch.name()), m.text);
        }
    }
    for arch in [Arch::Sm70, Arch::Sm80] {
        assert_eq!(
            emit_checked(&bf16_add, arch).unwrap_err().message,
            format!(
                "kernel `atomic_add_bf16` ({0}): `atomic_add` on bf16 (`atom.add.noftz.bf16`): needs sm_90 or newer, \
                 and this variant targets {0}; drop {0} from `arch(..)` or avoid the construct on it",
                arch.name()
            )
        );
    }
    let m = emit_checked(&bf16_add, Arch::Sm90).unwrap();
    assert_eq!(m.version, (7, 8));
    insta::assert_snapshot!("atomic_add_bf16.sm_90", m.text);
}

/// The lines of `text` that contain `needle`, by position.
fn lines_with(text: &str, needle: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i)
        .collect()
}

/// The usual pipeline order (wait, barrier, copies of the tile `STAGES - 1`
/// ahead, math on the oldest tile).
const PIPELINE: &str = "#[kernel(arch(sm_70, sm_80), block(64), tune(STAGES = [3]))]
fn stream<const STAGES: u32>(x: &[f32], y: &mut [f32], tiles: u32) {
    let mut ring: [[f32; 256]; STAGES] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    for t in 0..tiles + STAGES - 1 {
        if t >= STAGES - 1 {
            pipe.wait(STAGES - 2);
            sync_threads();
        }
        if t < tiles {
            pipe.copy(&mut ring[t % STAGES][tid * 4], &x[t * 256 + tid * 4], 16, 16);
        }
        pipe.commit();
        if t >= STAGES - 1 {
            let u = t - (STAGES - 1);
            y[u * 256 + tid] = ring[u % STAGES][tid] * 2.0;
        }
    }
}";

#[test]
fn sm_70_stages_copies_through_registers_around_the_math() {
    let sm70 = compile(PIPELINE, Arch::Sm70).unwrap().text;
    assert!(!sm70.contains("cp.async"), "{sm70}");
    let load = lines_with(&sm70, "ld.global.nc.v4.b32");
    let math = lines_with(&sm70, "ld.shared.f32");
    let store = lines_with(&sm70, "st.shared.v4.b32");
    let bar = lines_with(&sm70, "bar.sync");
    assert_eq!((load.len(), math.len(), store.len()), (1, 1, 1), "{sm70}");
    assert!(
        bar[0] < load[0] && load[0] < math[0] && math[0] < store[0],
        "barrier, load, math, store:\n{sm70}"
    );
    // The copy sits in an `if`: its store is predicated on its flag.
    let text: Vec<&str> = sm70.lines().collect();
    assert!(text[store[0]].trim_start().starts_with("@%p"), "{sm70}");
    assert!(sm70.contains("mov.pred"), "{sm70}");

    let sm80 = compile(PIPELINE, Arch::Sm80).unwrap().text;
    for instruction in [
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group 1",
    ] {
        assert!(sm80.contains(instruction), "{instruction}:\n{sm80}");
    }
    assert!(!sm80.contains("st.shared.v4"), "{sm80}");
}

#[test]
fn sm_70_stores_at_the_wait_without_a_flag_when_the_copy_surely_ran() {
    let source = "#[kernel(arch(sm_70))] fn k(x: &[u32], y: &mut [u32]) {
        let mut t: [u32; 64] = shared();
        let i = thread_idx().x;
        cp_async(&mut t[i * 2], &x[i * 2], 8, 8);
        cp_async_commit();
        y[i] = 1;
        cp_async_wait(0);
        sync_threads();
        y[i] = t[i];
    }";
    let text = compile(source, Arch::Sm70).unwrap().text;
    let load = lines_with(&text, "ld.global.nc.v2.b32");
    let store = lines_with(&text, "st.shared.v2.b32");
    let first_store_to_y = lines_with(&text, "st.global.u32")[0];
    assert_eq!((load.len(), store.len()), (1, 1), "{text}");
    assert!(
        load[0] < first_store_to_y && first_store_to_y < store[0],
        "{text}"
    );
    assert!(!text.contains("mov.pred"), "no flag:\n{text}");
}

#[test]
fn sm_70_stores_a_loop_iterations_copies_at_break_continue_and_its_end() {
    let source = "#[kernel(arch(sm_70))] fn k(x: &[f32], y: &mut [f32], n: u32) {
        let mut t: [f32; 256] = shared();
        let i = thread_idx().x;
        for j in 0..n {
            cp_async(&mut t[i * 4], &x[j * 256 + i * 4], 16, 16);
            if x[j] > 1.0 {
                break;
            }
            if x[j] < 0.0 {
                continue;
            }
            y[j] = 1.0;
        }
        y[i] = 2.0;
    }";
    let text = compile(source, Arch::Sm70).unwrap().text;
    let stores = lines_with(&text, "st.shared.v4.b32");
    assert_eq!(stores.len(), 3, "break, continue, end of body:\n{text}");
    let lines: Vec<&str> = text.lines().collect();
    for &s in &stores {
        // Every path to each store ran the copy: no flag.
        assert!(!lines[s].contains('@'), "{text}");
    }
    assert!(lines[stores[0] + 1].contains("bra $for"), "{text}");
    assert!(lines[stores[1] + 1].contains("bra $for"), "{text}");
    assert!(lines[stores[2] + 1].contains("_cont:"), "{text}");
}

#[test]
fn sm_70_flags_a_copy_issued_before_the_loop_whose_wait_stores_it() {
    let source = "#[kernel(arch(sm_70))] fn k(x: &[f32], y: &mut [f32], n: u32) {
        let mut t: [f32; 256] = shared();
        let i = thread_idx().x;
        cp_async(&mut t[i * 4], &x[i * 4], 16, 16);
        cp_async_commit();
        for j in 0..n {
            cp_async_wait(0);
            sync_threads();
            y[j * 64 + i] = t[i];
        }
    }";
    let text = compile(source, Arch::Sm70).unwrap().text;
    let lines: Vec<&str> = text.lines().collect();
    let load = lines_with(&text, "ld.global.nc.v4.b32")[0];
    let store = lines_with(&text, "st.shared.v4.b32");
    let body = lines_with(&text, "$for1_body:")[0];
    assert_eq!(store.len(), 1, "{text}");
    assert!(load < body && body < store[0], "{text}");
    // Pending on the first iteration only.
    assert!(lines[store[0]].trim_start().starts_with("@%p"), "{text}");
    assert!(
        lines[load + 1].contains("mov.pred") && lines[load + 1].ends_with(", 1;"),
        "{text}"
    );
    assert!(
        lines[store[0] + 1].contains("mov.pred") && lines[store[0] + 1].ends_with(", 0;"),
        "{text}"
    );
}

#[test]
fn sm_70_zero_fills_past_src_bytes_in_registers() {
    let source = "#[kernel(arch(sm_70))] fn k(x: &[f16], y: &mut [f16], n: u32) {
        let mut t: [f16; 64] = shared();
        let i = thread_idx().x;
        cp_async(&mut t[i * 4], &x[i * 4], 8, n);
        cp_async(&mut t[i * 4 + 32], &x[i * 4], 4, 4);
        cp_async_commit();
        cp_async_wait(0);
        sync_threads();
        y[i] = t[i];
    }";
    let text = compile(source, Arch::Sm70).unwrap().text;
    // An empty copy reads nothing; word w keeps its low 8 n - 32 w bits.
    assert!(text.contains("setp.ne.u32"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let partial = lines_with(&text, "ld.global.nc.v2.b32")[0];
    assert!(lines[partial].trim_start().starts_with("@%p"), "{text}");
    assert_eq!(lines_with(&text, "bfe.u32").len(), 2, "{text}");
    assert!(text.contains("max.u32") && text.contains(", 32;"), "{text}");
    // A full 4-byte copy is one plain load.
    let full = lines_with(&text, "ld.global.nc.b32");
    assert_eq!(full.len(), 1, "{text}");
    assert!(!lines[full[0]].contains('@'), "{text}");
    assert_eq!(lines_with(&text, "st.shared.b32").len(), 1, "{text}");
}

/// One f16 wgmma of N = `n` into `acc` from the tiles `a` and `b` (each a
/// shared array declaration) through descriptors at `a_at` and `b_at` with
/// swizzle `swizzle`.
fn wgmma_source(n: u32, acc: &str, tiles: (&str, &str), at: (&str, &str), swizzle: u32) -> String {
    wgmma_call_source("wgmma_m64k16_f16", n, acc, tiles, at, swizzle)
}

/// [`wgmma_source`] for the wgmma function `call`.
fn wgmma_call_source(
    call: &str,
    n: u32,
    acc: &str,
    tiles: (&str, &str),
    at: (&str, &str),
    swizzle: u32,
) -> String {
    format!(
        "#[kernel(arch(sm_90a), block(128))] fn k(c: &mut [f32]) {{
            let mut a: {} = shared();
            let mut b: {} = shared();
            let mut acc = {acc};
            wgmma_fence();
            {call}::<{n}>(&mut acc, matrix_desc(&a{}, {swizzle}), matrix_desc(&b{}, {swizzle}), false);
            wgmma_commit();
            wgmma_wait(0);
            c[thread_idx().x] = acc[0] as f32;
        }}",
        tiles.0, tiles.1, at.0, at.1
    )
}

#[test]
fn wgmma_shapes_are_checked_per_variant() {
    let tiles = ("[[f16; 64]; 64]", "[[f16; 64]; 64]");
    let ok = wgmma_source(64, "[0.0f32; 32]", tiles, ("[0][0]", "[0][48]"), 128);
    let m = compile(&ok, Arch::Sm90a).unwrap();
    assert_eq!(m.version, (8, 0));
    assert!(
        m.text.contains(".extern .shared .align 1024 .b8 smem[];"),
        "{}",
        m.text
    );
    let error = |source: String| compile_error(&source, Arch::Sm90a);
    assert!(error(wgmma_source(
        64,
        "[0.0f32; 16]",
        tiles,
        ("[0][0]", "[0][0]"),
        128
    ))
    .contains(
        "the accumulator of `wgmma_m64k16_f16` is 32 `f32` per lane, but a row of `acc` is 16"
    ),);
    assert!(error(wgmma_source(
        12,
        "[0.0f32; 6]",
        tiles,
        ("[0][0]", "[0][0]"),
        128
    ))
    .contains("`wgmma_m64k16_f16::<12>`: N is 8 to 256 in steps of 8"));
    assert!(error(wgmma_source(
        64,
        "[0.0f32; 32]",
        ("[[f16; 32]; 64]", tiles.1),
        ("[0][0]", "[0][0]"),
        128
    ))
    .contains("the A tile `a` of `wgmma_m64k16_f16` is [64][32] with swizzle 128: declare it `[[f16; 64]; ROWS]`"));
    assert!(error(wgmma_source(
        64,
        "[0.0f32; 32]",
        tiles,
        ("[0][56]", "[0][0]"),
        128
    ))
    .contains("starts at element 56 of a row of `a`"));
    assert!(error(wgmma_source(
        128,
        "[0.0f32; 64]",
        tiles,
        ("[0][0]", "[0][0]"),
        128
    ))
    .contains(
        "the B tile of `wgmma_m64k16_f16` starts at row 0 of `b` (64 rows from there) and takes 128 rows"
    ));
    // A swizzled tile kept in parts (a cluster's halves of B) is read as
    // one run of rows from a constant start, up to the end of the parts.
    let parts = ("[[f16; 64]; 64]", "[[[f16; 64]; 64]; 2]");
    compile(
        &wgmma_source(128, "[0.0f32; 64]", parts, ("[0][0]", "[0][0][0]"), 128),
        Arch::Sm90a,
    )
    .unwrap();
    assert!(error(wgmma_source(
        128,
        "[0.0f32; 64]",
        parts,
        ("[0][0]", "[1][0][0]"),
        128
    ))
    .contains(
        "the B tile of `wgmma_m64k16_f16` starts at row 0 of `b` (64 rows from there) and takes 128 rows"
    ));
    assert!(error(wgmma_source(
        128,
        "[0.0f32; 64]",
        parts,
        ("[0][0]", "[0][8][0]"),
        128
    ))
    .contains("starts at row 8 of `b` (120 rows from there) and takes 128 rows"));
    let plain = ("[[[f16; 8]; 64]; 2]", "[[[f16; 8]; 64]; 2]");
    compile(
        &wgmma_source(64, "[0.0f32; 32]", plain, ("[0][0][0]", "[0][0][0]"), 0),
        Arch::Sm90a,
    )
    .unwrap();
    assert!(error(wgmma_source(
        64,
        "[0.0f32; 32]",
        plain,
        ("[1][0][0]", "[0][0][0]"),
        0
    ))
    .contains("starts at k group 1 of `a`, which has 2"));
}

/// [`wgmma_call_source`] with both operands from element 0.
fn wgmma_form_source(call: &str, n: u32, acc: &str, tiles: (&str, &str), swizzle: u32) -> String {
    let at = if swizzle == 0 { "[0][0][0]" } else { "[0][0]" };
    wgmma_call_source(call, n, acc, tiles, (at, at), swizzle)
}

#[test]
fn wgmma_forms_of_every_type_are_checked_per_variant() {
    let error = |source: String| compile_error(&source, Arch::Sm90a);
    let text = |source: String| compile(&source, Arch::Sm90a).unwrap().text;
    let bytes8 = ("[[i8; 128]; 64]", "[[i8; 128]; 256]");
    for n in [8, 16, 24, 32, 48, 64, 240, 256] {
        let acc = format!("[0i32; {}]", n / 2);
        let m = text(wgmma_form_source("wgmma_m64k32_s8", n, &acc, bytes8, 128));
        assert!(m.contains(&format!("m64n{n}k32.s32.s8.s8")), "{m}");
    }
    assert!(error(wgmma_form_source(
        "wgmma_m64k32_s8",
        40,
        "[0i32; 20]",
        bytes8,
        128
    ))
    .contains("`wgmma_m64k32_s8::<40>`: N is 8, 16, 24, then 32 to 256 in steps of 16 (m64nNk32)"));
    // The fp8 forms take every N in steps of 8, as tf32 does.
    let fp8 = ("[[e5m2; 128]; 64]", "[[e5m2; 128]; 64]");
    let m = text(wgmma_form_source(
        "wgmma_m64k32_e5m2",
        40,
        "[0.0f32; 20]",
        fp8,
        128,
    ));
    assert!(m.contains("m64n40k32.f32.e5m2.e5m2"), "{m}");
    assert!(error(wgmma_form_source(
        "wgmma_m64k32_u8",
        64,
        "[0i32; 16]",
        ("[[u8; 128]; 64]", "[[u8; 128]; 64]"),
        128
    ))
    .contains(
        "the accumulator of `wgmma_m64k32_u8` is 32 `i32` per lane, but a row of `acc` is 16"
    ));
    let tf32 = ("[[f32; 32]; 64]", "[[f32; 32]; 64]");
    text(wgmma_form_source(
        "wgmma_m64k8_tf32",
        64,
        "[0.0f32; 32]",
        tf32,
        128,
    ));
    assert!(error(wgmma_form_source("wgmma_m64k8_tf32", 64, "[0.0f32; 32]", ("[[f32; 64]; 64]", tf32.1), 128))
        .contains("the A tile `a` of `wgmma_m64k8_tf32` is [64][64] with swizzle 128: declare it `[[f32; 32]; ROWS]`"));
    let plain = ("[[[f32; 4]; 64]; 2]", "[[[f32; 4]; 64]; 2]");
    text(wgmma_form_source(
        "wgmma_m64k8_tf32",
        64,
        "[0.0f32; 32]",
        plain,
        0,
    ));
    assert!(error(wgmma_form_source("wgmma_m64k8_tf32", 64, "[0.0f32; 32]", ("[[[f32; 8]; 64]; 2]", plain.1), 0))
        .contains("declare it `[[[f32; 4]; ROWS]; K / 4]`: core matrices of 8 rows of 16 bytes, the outer dimension stepping k by 4"));
    let plain8 = ("[[[e4m3; 16]; 64]; 2]", "[[[e4m3; 16]; 64]; 2]");
    text(wgmma_form_source(
        "wgmma_m64k32_e4m3",
        64,
        "[0.0f32; 32]",
        plain8,
        0,
    ));
}

#[test]
fn bit_casts_of_literals_are_immediates_of_the_result_type() {
    // A generated program's `f32::from_bits(0)` became `mov.f32 %f0, 0`,
    // which ptxas refuses (an integer immediate for an f32).
    let m = compile(
        "#[kernel] fn k(y: &mut [f32], z: &mut [u32]) { y[0] = f32::from_bits(1065353216u32); z[0] = (1.5f32).to_bits(); }",
        Arch::Sm80,
    )
    .unwrap();
    assert!(m.text.contains("0f3F800000"), "{}", m.text);
    assert!(m.text.contains("1069547520"), "{}", m.text);
}
