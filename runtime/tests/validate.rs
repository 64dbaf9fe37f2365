//! Launch checks on hand-built kernels and a described device: no GPU needed.

use warpforge_codegen::ir::{
    BinaryOp, Block, ConstParam, Expr, ExprKind, Kernel, Literal, Param, ParamType, Requirement,
    Scalar, Swizzle, TensorMap, UnaryOp,
};
use warpforge_codegen::{Arch, KernelDef, Target, TuneAxis};
use warpforge_runtime::{
    check_call, plan_tensor_maps, select_arch, validate_launch, ArgInfo, DeviceBackend, DeviceInfo,
    Error, Grid, HostValue, LaunchDims, TensorMapPlan, VariantChecks, VariantFacts, WgpuDeviceInfo,
};

fn h200() -> DeviceInfo {
    DeviceInfo {
        backend: DeviceBackend::Cuda,
        name: "NVIDIA H200".into(),
        ordinal: 0,
        compute_capability: (9, 0),
        sm_count: 132,
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [2_147_483_647, 65_535, 65_535],
        shared_mem_per_block: 48 * 1024,
        shared_mem_per_block_optin: 227 * 1024,
        shared_mem_per_sm: 228 * 1024,
        registers_per_block: 65_536,
        warp_size: 32,
        l2_cache_bytes: 60 * 1024 * 1024,
        total_memory_bytes: 141 * 1024 * 1024 * 1024,
        driver_version: (12, 8),
    }
}

fn v100() -> DeviceInfo {
    DeviceInfo {
        name: "Tesla V100".into(),
        compute_capability: (7, 0),
        ..h200()
    }
}

/// lavapipe's limits, as wgpu reports them (WebGPU's defaults where they are lower).
fn lavapipe() -> DeviceInfo {
    DeviceInfo {
        backend: DeviceBackend::Wgpu(WgpuDeviceInfo {
            api: "Vulkan".into(),
            driver: "llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))".into(),
            shader_f16: true,
            subgroup_sizes: Some((8, 8)),
            max_storage_buffers_per_shader_stage: 8,
            max_storage_buffer_binding_size: 128 << 20,
            max_uniform_buffer_binding_size: 64 << 10,
            max_buffer_size: 256 << 20,
        }),
        name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
        compute_capability: (0, 0),
        sm_count: 0,
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 1024],
        max_grid_dims: [65_535; 3],
        shared_mem_per_block: 32 * 1024,
        shared_mem_per_block_optin: 32 * 1024,
        shared_mem_per_sm: 0,
        registers_per_block: 0,
        warp_size: 8,
        l2_cache_bytes: 0,
        total_memory_bytes: 0,
        driver_version: (0, 0),
        ..h200()
    }
}

fn expr(ty: Scalar, kind: ExprKind) -> Expr {
    Expr { ty, kind }
}

fn param(name: &str, ty: ParamType) -> Param {
    Param {
        name: name.into(),
        ty,
        tensor_map: None,
    }
}

/// `saxpy(a: f32, x: &[f32], y: &mut [f32], n: u32)` with
/// `requires(x.len() >= n)`, for sm_70 and sm_80.
fn saxpy() -> KernelDef {
    let requirement = Requirement {
        cond: expr(
            Scalar::Bool,
            ExprKind::Binary(
                BinaryOp::Ge,
                Box::new(expr(Scalar::U32, ExprKind::Len(1))),
                Box::new(expr(Scalar::U32, ExprKind::Param(3))),
            ),
        ),
        text: "x.len() >= n".into(),
    };
    KernelDef::new(
        Kernel {
            name: "saxpy".into(),
            const_params: vec![],
            params: vec![
                param("a", ParamType::Scalar(Scalar::F32)),
                param(
                    "x",
                    ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: false,
                    },
                ),
                param(
                    "y",
                    ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: true,
                    },
                ),
                param("n", ParamType::Scalar(Scalar::U32)),
            ],
            locals: vec![],
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![requirement],
            body: Block::new(),
        },
        vec![Target::Ptx(Arch::Sm70), Target::Ptx(Arch::Sm80)],
        vec![],
        vec![],
    )
}

/// [`saxpy`] built for `targets`.
fn saxpy_for(targets: Vec<Target>) -> KernelDef {
    let mut def = saxpy();
    def.targets = targets;
    def
}

/// `tile<const BM: u32>(c: &mut [f32])` with `block(BM)`, for sm_80 and sm_90.
fn tile() -> KernelDef {
    KernelDef::new(
        Kernel {
            name: "tile".into(),
            const_params: vec![ConstParam {
                name: "BM".into(),
                ty: Scalar::U32,
            }],
            params: vec![param(
                "c",
                ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: true,
                },
            )],
            locals: vec![],
            block: Some([
                expr(Scalar::U32, ExprKind::Const(0)),
                Expr::u32(1),
                Expr::u32(1),
            ]),
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![],
            body: Block::new(),
        },
        vec![Target::Ptx(Arch::Sm80), Target::Ptx(Arch::Sm90)],
        vec![TuneAxis {
            name: "BM".into(),
            values: vec![64, 128],
        }],
        vec![],
    )
}

fn f32_arg(v: f32) -> ArgInfo {
    ArgInfo::Scalar {
        ty: Scalar::F32,
        value: HostValue::Scalar(Literal::Float(f64::from(v))),
    }
}

fn u32_arg(v: u32) -> ArgInfo {
    ArgInfo::Scalar {
        ty: Scalar::U32,
        value: HostValue::Scalar(Literal::Int(i64::from(v))),
    }
}

fn buffer(elem: Scalar, len: u64, mutable: bool) -> ArgInfo {
    ArgInfo::Buffer { elem, len, mutable }
}

fn saxpy_args(x_len: u64, n: u32) -> Vec<ArgInfo> {
    vec![
        f32_arg(2.0),
        buffer(Scalar::F32, x_len, false),
        buffer(Scalar::F32, x_len, true),
        u32_arg(n),
    ]
}

const NO_BLOCK: VariantFacts = VariantFacts {
    block: None,
    cluster: None,
    shared_bytes: 0,
};

/// The message of a refused launch, which must name the kernel.
fn refused(result: Result<LaunchDims, Error>, kernel: &str) -> String {
    match result {
        Err(err @ Error::InvalidLaunch { .. }) => {
            let message = err.to_string();
            assert!(
                message.contains(&format!("`{kernel}`")),
                "names the kernel: {message}"
            );
            message
        }
        other => panic!("expected an invalid launch, got {other:?}"),
    }
}

/// The tile kernel's args with no requirements, so these checks never evaluate expressions.
fn tile_args() -> Vec<ArgInfo> {
    vec![buffer(Scalar::F32, 4096, true)]
}

fn launch_tile(facts: VariantFacts, grid: Grid, device: &DeviceInfo) -> Result<LaunchDims, Error> {
    validate_launch(&tile(), &[128], &facts, &grid, &tile_args(), device)
}

#[test]
fn a_valid_launch_gives_its_dimensions() {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 64 * 1024,
    };
    let dims = launch_tile(facts, Grid::blocks([32, 2, 1]), &h200()).unwrap();
    assert_eq!(
        dims,
        LaunchDims {
            blocks: [32, 2, 1],
            threads: [128, 1, 1],
            shared_bytes: 64 * 1024
        }
    );
    // Giving the declared shape again is fine.
    let dims = launch_tile(facts, Grid::new([1, 1, 1], [128, 1, 1]), &h200()).unwrap();
    assert_eq!(dims.threads, [128, 1, 1]);
}

#[test]
fn a_grid_of_clusters_is_whole_clusters() {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: Some([2, 1, 1]),
        shared_bytes: 0,
    };
    let dims = launch_tile(facts, Grid::blocks([132, 3, 1]), &h200()).unwrap();
    assert_eq!(dims.blocks, [132, 3, 1]);
    let message = refused(
        launch_tile(facts, Grid::blocks([133, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains(
            "the kernel runs in clusters of 2, 1, 1 blocks (`cluster(..)`) and the grid of 133, 1, 1 \
             blocks is not a whole number of them: round each grid dimension up to a multiple of \
             the cluster's"
        ),
        "{message}"
    );
}

#[test]
fn wrong_argument_count() {
    let def = saxpy();
    let mut args = saxpy_args(100, 100);
    args.pop();
    let message = refused(
        validate_launch(&def, &[], &NO_BLOCK, &Grid::linear(100, 64), &args, &h200()),
        "saxpy",
    );
    assert!(
        message.contains("takes 4 argument(s)") && message.contains("got 3"),
        "{message}"
    );
    assert!(
        message.contains("y: &mut [f32]"),
        "shows the signature: {message}"
    );
}

#[test]
fn wrong_scalar_type() {
    let mut args = saxpy_args(100, 100);
    args[0] = ArgInfo::Scalar {
        ty: Scalar::F64,
        value: HostValue::Scalar(Literal::Float(2.0)),
    };
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &args,
            &h200(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("`a` is f32") && message.contains("got f64"),
        "{message}"
    );
}

#[test]
fn buffer_for_a_scalar_and_scalar_for_a_buffer() {
    let mut args = saxpy_args(100, 100);
    args[3] = buffer(Scalar::U32, 1, false);
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &args,
            &h200(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("`n` is u32") && message.contains("KernelArg::scalar"),
        "{message}"
    );

    let mut args = saxpy_args(100, 100);
    args[1] = f32_arg(1.0);
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &args,
            &h200(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("`x` is &[f32]") && message.contains("DeviceBuffer"),
        "{message}"
    );
}

#[test]
fn wrong_element_type() {
    let mut args = saxpy_args(100, 100);
    args[1] = buffer(Scalar::F16, 100, false);
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &args,
            &h200(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("`x` is &[f32]") && message.contains("buffer of f16"),
        "{message}"
    );
}

#[test]
fn shared_buffer_for_a_mut_parameter() {
    let mut args = saxpy_args(100, 100);
    args[2] = buffer(Scalar::F32, 100, false);
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &args,
            &h200(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("`y` is &mut [f32]") && message.contains("buffer_mut"),
        "{message}"
    );
}

#[test]
fn buffer_longer_than_a_u32_length() {
    let message = refused(launch_tile_with_len(1 << 32), "tile[BM=128]");
    assert!(message.contains("4294967296 elements"), "{message}");
    assert!(launch_tile_with_len(u64::from(u32::MAX)).is_ok());
}

fn launch_tile_with_len(len: u64) -> Result<LaunchDims, Error> {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 0,
    };
    validate_launch(
        &tile(),
        &[128],
        &facts,
        &Grid::blocks([1, 1, 1]),
        &[buffer(Scalar::F32, len, true)],
        &h200(),
    )
}

#[test]
fn failed_requirement_quotes_it_with_the_values() {
    let message = refused(
        validate_launch(
            &saxpy(),
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &saxpy_args(10, 100),
            &h200(),
        ),
        "saxpy",
    );
    assert!(message.contains("`x.len() >= n`"), "{message}");
    assert!(
        message.contains("x.len() = 10") && message.contains("n = 100"),
        "{message}"
    );
    assert!(validate_launch(
        &saxpy(),
        &[],
        &NO_BLOCK,
        &Grid::linear(100, 64),
        &saxpy_args(100, 100),
        &h200()
    )
    .is_ok());
}

#[test]
fn const_values_count_and_range() {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 0,
    };
    let grid = Grid::blocks([1, 1, 1]);
    let message = refused(
        validate_launch(&tile(), &[], &facts, &grid, &tile_args(), &h200()),
        "tile",
    );
    assert!(
        message.contains("1 const parameter(s) [BM: u32]") && message.contains("got 0"),
        "{message}"
    );
    let message = refused(
        validate_launch(&tile(), &[-1], &facts, &grid, &tile_args(), &h200()),
        "tile[BM=-1]",
    );
    assert!(
        message.contains("BM is a u32") && message.contains("-1"),
        "{message}"
    );
    // A value outside the tune list is allowed: the list is only the search space.
    assert!(validate_launch(&tile(), &[96], &facts, &grid, &tile_args(), &h200()).is_ok());
}

#[test]
fn block_too_large() {
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([1, 1, 1], [64, 32, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("2048 threads") && message.contains("1024 per block"),
        "{message}"
    );
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([1, 1, 1], [1, 1, 128]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("128 along z") && message.contains("(64)"),
        "{message}"
    );
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([1, 1, 1], [0, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(message.contains("empty"), "{message}");
    // Extents whose product passes u64: refused, not an overflow.
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([1, 1, 1], [u32::MAX; 3]), &h200()),
        "tile[BM=128]",
    );
    assert!(message.contains("1024 per block"), "{message}");
}

#[test]
fn zero_sized_grid() {
    let message = refused(
        launch_tile(NO_BLOCK, Grid::linear(0, 256), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("grid of 0, 1, 1 blocks is empty"),
        "{message}"
    );
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([4, 0, 1], [32, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(message.contains("at least 1"), "{message}");
}

#[test]
fn grid_too_large() {
    let message = refused(
        launch_tile(NO_BLOCK, Grid::new([1, 70_000, 1], [32, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("70000 along y") && message.contains("65535"),
        "{message}"
    );
}

#[test]
fn shared_memory_over_the_device_limit() {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 228 * 1024,
    };
    let message = refused(
        launch_tile(facts, Grid::blocks([1, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("233472 bytes") && message.contains("232448 bytes"),
        "{message}"
    );
}

#[test]
fn declared_block_and_given_threads_differ() {
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 0,
    };
    let message = refused(
        launch_tile(facts, Grid::new([1, 1, 1], [256, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("block(128, 1, 1)") && message.contains("256, 1, 1"),
        "{message}"
    );
    assert!(message.contains("Grid::blocks"), "{message}");
}

#[test]
fn no_block_shape_at_all() {
    let message = refused(
        launch_tile(NO_BLOCK, Grid::blocks([1, 1, 1]), &h200()),
        "tile[BM=128]",
    );
    assert!(
        message.contains("no block shape") && message.contains("Grid::new"),
        "{message}"
    );
}

#[test]
fn target_selection_takes_the_highest_supported_arch() {
    let all = saxpy_for(Arch::ALL.map(Target::Ptx).to_vec());
    assert_eq!(select_arch(&all, &h200()).unwrap(), Arch::Sm90a);
    let without_sm90a = saxpy_for(
        [Arch::Sm70, Arch::Sm80, Arch::Sm90]
            .map(Target::Ptx)
            .to_vec(),
    );
    assert_eq!(select_arch(&without_sm90a, &h200()).unwrap(), Arch::Sm90);
    // sm_90a PTX runs on compute capability 9.0 only: a later GPU takes sm_90.
    let blackwell = DeviceInfo {
        compute_capability: (10, 0),
        ..h200()
    };
    assert_eq!(select_arch(&all, &blackwell).unwrap(), Arch::Sm90);
    let ampere = DeviceInfo {
        compute_capability: (8, 6),
        ..h200()
    };
    assert_eq!(select_arch(&all, &ampere).unwrap(), Arch::Sm80);
    assert_eq!(select_arch(&all, &v100()).unwrap(), Arch::Sm70);
    // Declaration order does not matter.
    let reversed = saxpy_for(vec![Target::Ptx(Arch::Sm90), Target::Ptx(Arch::Sm70)]);
    assert_eq!(select_arch(&reversed, &ampere).unwrap(), Arch::Sm70);
}

#[test]
fn an_sm_90a_kernel_runs_on_compute_capability_9_0_only() {
    let hopper_only = saxpy_for(vec![Target::Ptx(Arch::Sm90a)]);
    assert_eq!(select_arch(&hopper_only, &h200()).unwrap(), Arch::Sm90a);
    let blackwell = DeviceInfo {
        compute_capability: (10, 0),
        ..h200()
    };
    let message = match select_arch(&hopper_only, &blackwell) {
        Err(err @ Error::InvalidLaunch { .. }) => err.to_string(),
        other => panic!("expected an invalid launch, got {other:?}"),
    };
    assert!(
        message.contains("sm_90a runs only on compute capability 9.0"),
        "{message}"
    );
}

#[test]
fn no_target_the_device_supports() {
    let message = match select_arch(&tile(), &v100()) {
        Err(err @ Error::InvalidLaunch { .. }) => err.to_string(),
        other => panic!("expected an invalid launch, got {other:?}"),
    };
    assert!(message.contains("`tile`"), "{message}");
    assert!(
        message.contains("sm_80, sm_90") && message.contains("Tesla V100"),
        "{message}"
    );
    assert!(
        message.contains("compute capability 7.0") && message.contains("sm_70"),
        "{message}"
    );
}

#[test]
fn wgpu_limits_storage_buffers_and_their_sizes() {
    let def = saxpy();
    let dims = validate_launch(
        &def,
        &[],
        &NO_BLOCK,
        &Grid::linear(100, 64),
        &saxpy_args(100, 100),
        &lavapipe(),
    )
    .unwrap();
    assert_eq!(dims.blocks, [2, 1, 1]);
    // 128 MiB of f32 is the binding limit; one element more is refused.
    let len = (128u64 << 20) / 4 + 1;
    let message = refused(
        validate_launch(
            &def,
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &saxpy_args(len, 100),
            &lavapipe(),
        ),
        "saxpy",
    );
    assert!(
        message.contains("argument 1 `x`")
            && message.contains("134217728 bytes per storage buffer"),
        "{message}"
    );
    // CUDA has no such limit.
    validate_launch(
        &def,
        &[],
        &NO_BLOCK,
        &Grid::linear(100, 64),
        &saxpy_args(len, 100),
        &h200(),
    )
    .unwrap();
    let few = DeviceInfo {
        backend: DeviceBackend::Wgpu(WgpuDeviceInfo {
            max_storage_buffers_per_shader_stage: 1,
            ..match lavapipe().backend {
                DeviceBackend::Wgpu(w) => w,
                _ => unreachable!("lavapipe is a wgpu device"),
            }
        }),
        ..lavapipe()
    };
    let message = refused(
        validate_launch(
            &def,
            &[],
            &NO_BLOCK,
            &Grid::linear(100, 64),
            &saxpy_args(100, 100),
            &few,
        ),
        "saxpy",
    );
    assert!(
        message.contains("2 slices") && message.contains("at most 1 storage buffers"),
        "{message}"
    );
    // The workgroup count limit is the grid limit.
    let message = refused(
        validate_launch(
            &def,
            &[],
            &NO_BLOCK,
            &Grid::new([70_000, 1, 1], [64, 1, 1]),
            &saxpy_args(100, 100),
            &lavapipe(),
        ),
        "saxpy",
    );
    assert!(message.contains("65535"), "{message}");
}

#[test]
fn a_wgsl_only_kernel_has_no_ptx_target() {
    let wgsl_only = saxpy_for(vec![Target::Wgsl]);
    let message = match select_arch(&wgsl_only, &h200()) {
        Err(err) => err.to_string(),
        Ok(arch) => panic!("a wgsl-only kernel got {arch:?}"),
    };
    assert!(message.contains("built for wgsl"), "{message}");
    let mixed = saxpy_for(vec![Target::Wgsl, Target::Ptx(Arch::Sm80)]);
    assert_eq!(select_arch(&mixed, &h200()).unwrap(), Arch::Sm80);
}

/// `copy(#[tensor_map(shape = [m, k], strides = [ld], tile = [64, BK],
/// swizzle = 128)] a: &[f16], m: u32, k: u32, ld: u32)` for sm_90.
fn tensor_mapped() -> KernelDef {
    let u32_param = |id| expr(Scalar::U32, ExprKind::Param(id));
    let mut a = param(
        "a",
        ParamType::Slice {
            elem: Scalar::F16,
            mutable: false,
        },
    );
    a.tensor_map = Some(TensorMap {
        shape: vec![u32_param(1), u32_param(2)],
        strides: vec![u32_param(3)],
        tile: vec![
            expr(Scalar::U32, ExprKind::Literal(Literal::Int(64))),
            expr(Scalar::U32, ExprKind::Const(0)),
        ],
        swizzle: Swizzle::B128,
    });
    KernelDef::new(
        Kernel {
            name: "copy".into(),
            const_params: vec![ConstParam {
                name: "BK".into(),
                ty: Scalar::U32,
            }],
            params: vec![
                a,
                param("m", ParamType::Scalar(Scalar::U32)),
                param("k", ParamType::Scalar(Scalar::U32)),
                param("ld", ParamType::Scalar(Scalar::U32)),
            ],
            locals: vec![],
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![],
            body: Block::new(),
        },
        vec![Target::Ptx(Arch::Sm90)],
        vec![TuneAxis {
            name: "BK".into(),
            values: vec![64],
        }],
        vec![],
    )
}

fn tensor_args(len: u64, m: u32, k: u32, ld: u32) -> Vec<ArgInfo> {
    vec![
        buffer(Scalar::F16, len, false),
        u32_arg(m),
        u32_arg(k),
        u32_arg(ld),
    ]
}

#[test]
fn tensor_maps_are_planned_innermost_first_in_bytes() {
    let def = tensor_mapped();
    let plans = plan_tensor_maps(&def, &[64], &tensor_args(100 * 208, 100, 200, 208)).unwrap();
    assert_eq!(
        plans,
        vec![TensorMapPlan {
            param: 0,
            elem: Scalar::F16,
            shape: vec![200, 100],
            strides: vec![416],
            tile: vec![64, 64],
            swizzle: Swizzle::B128,
        }]
    );
    // The last row needs only its k elements, not a whole stride.
    assert!(plan_tensor_maps(&def, &[64], &tensor_args(99 * 208 + 200, 100, 200, 208)).is_ok());
}

#[test]
fn tensor_maps_the_tma_cannot_take_are_refused_before_the_launch() {
    let def = tensor_mapped();
    let refused = |args: Vec<ArgInfo>, consts: &[i64], expected: &str| {
        let e = plan_tensor_maps(&def, consts, &args)
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "expected `{expected}` in: {e}");
        assert!(e.contains("the tensor map of `a` cannot be made"), "{e}");
        // The tuner and the dispatcher see the same refusal.
        assert!(check_call(&def, consts, &args).is_err());
    };
    refused(
        tensor_args(100 * 201, 100, 200, 201),
        &[64],
        "a stride is 402 bytes, and the TMA needs multiples of 16 bytes (8 elements of f16)",
    );
    refused(
        tensor_args(99 * 208 + 199, 100, 200, 208),
        &[64],
        "its shape and strides reach past the end of the slice (20791 elements)",
    );
    refused(
        tensor_args(0, 0, 200, 208),
        &[64],
        "a dimension of its shape is 0, and the TMA takes 1 to 2^32",
    );
    refused(
        tensor_args(100 * 208, 100, 200, 208),
        &[512],
        "a tile dimension is 512, and the TMA takes 1 to 256",
    );
}

#[test]
fn a_written_tensor_needs_room_for_the_last_rows_whole_chunk() {
    let read = tensor_mapped();
    let mut written = tensor_mapped();
    written.ir.params[0].ty = ParamType::Slice {
        elem: Scalar::F16,
        mutable: true,
    };
    // The last row holds 201 elements (402 bytes), which a TMA store
    // writes up to 416 bytes (208 elements).
    let args = |len| {
        vec![
            buffer(Scalar::F16, len, true),
            u32_arg(100),
            u32_arg(201),
            u32_arg(208),
        ]
    };
    let read_args = |len| {
        vec![
            buffer(Scalar::F16, len, false),
            u32_arg(100),
            u32_arg(201),
            u32_arg(208),
        ]
    };
    assert!(plan_tensor_maps(&read, &[64], &read_args(99 * 208 + 201)).is_ok());
    let e = plan_tensor_maps(&written, &[64], &args(99 * 208 + 201))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("and the rest of its last 16-byte chunk, which a TMA store writes"),
        "{e}"
    );
    assert!(plan_tensor_maps(&written, &[64], &args(99 * 208 + 208)).is_ok());
}

/// `scaled<const ALIGNED: bool, const BM: u32>(x: &[f32], n: u32)` with
/// clauses that a variant folds to a condition on `n`, leaves whole,
/// decides either way, or cannot fold (an overflow it would reach for
/// BM = 128, which a launch with n = 0 never evaluates).
fn scaled() -> KernelDef {
    let bin = |ty, op, a, b| expr(ty, ExprKind::Binary(op, Box::new(a), Box::new(b)));
    let bool_op = |op, a, b| bin(Scalar::Bool, op, a, b);
    let u32_op = |op, a, b| bin(Scalar::U32, op, a, b);
    let aligned = || expr(Scalar::Bool, ExprKind::Const(0));
    let bm = || expr(Scalar::U32, ExprKind::Const(1));
    let n = || expr(Scalar::U32, ExprKind::Param(1));
    let clause = |cond, text: &str| Requirement {
        cond,
        text: text.into(),
    };
    let not_aligned = expr(
        Scalar::Bool,
        ExprKind::Unary(UnaryOp::Not, Box::new(aligned())),
    );
    let n_mod_4 = u32_op(BinaryOp::Rem, n(), Expr::u32(4));
    KernelDef::new(
        Kernel {
            name: "scaled".into(),
            const_params: vec![
                ConstParam {
                    name: "ALIGNED".into(),
                    ty: Scalar::Bool,
                },
                ConstParam {
                    name: "BM".into(),
                    ty: Scalar::U32,
                },
            ],
            params: vec![
                param(
                    "x",
                    ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: false,
                    },
                ),
                param("n", ParamType::Scalar(Scalar::U32)),
            ],
            locals: vec![],
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![
                clause(
                    bool_op(
                        BinaryOp::LogicalOr,
                        not_aligned,
                        bool_op(BinaryOp::Eq, n_mod_4, Expr::u32(0)),
                    ),
                    "!ALIGNED || n % 4 == 0",
                ),
                clause(
                    bool_op(
                        BinaryOp::Ge,
                        expr(Scalar::U32, ExprKind::Len(0)),
                        u32_op(BinaryOp::Mul, n(), bm()),
                    ),
                    "x.len() >= n * BM",
                ),
                clause(bool_op(BinaryOp::Ne, bm(), Expr::u32(32)), "BM != 32"),
                clause(
                    bool_op(
                        BinaryOp::LogicalOr,
                        bool_op(BinaryOp::Eq, n(), Expr::u32(0)),
                        bool_op(
                            BinaryOp::Gt,
                            u32_op(BinaryOp::Mul, bm(), Expr::u32(40_000_000)),
                            n(),
                        ),
                    ),
                    "n == 0 || BM * 40000000 > n",
                ),
            ],
            body: Block::new(),
        },
        vec![Target::Ptx(Arch::Sm80)],
        vec![],
        vec![],
    )
}

#[test]
fn a_variants_checks_refuse_as_the_kernels_do() {
    let def = scaled();
    let grid = Grid::linear(64, 64);
    for consts in [[0, 32], [0, 64], [1, 64], [1, 128], [2, 64]] {
        let checks = VariantChecks::new(&def, &consts);
        for n in [0, 3, 4, 1000] {
            for len in [0, 3000, 1 << 20] {
                let args = [buffer(Scalar::F32, len, false), u32_arg(n)];
                let case = format!("consts {consts:?}, n = {n}, x.len() = {len}");
                let written = validate_launch(&def, &consts, &NO_BLOCK, &grid, &args, &h200())
                    .map_err(|e| e.to_string());
                let cached = checks
                    .as_ref()
                    .map_err(|e| e.to_string())
                    .and_then(|checks| {
                        checks
                            .validate_launch(&def, &NO_BLOCK, &grid, &args, &h200())
                            .map(|(dims, maps)| {
                                assert!(maps.is_empty(), "{case}");
                                dims
                            })
                            .map_err(|e| e.to_string())
                    });
                assert_eq!(cached, written, "{case}");
                let written = check_call(&def, &consts, &args).map_err(|e| e.to_string());
                let cached = checks
                    .as_ref()
                    .map_err(|e| e.to_string())
                    .and_then(|checks| checks.check_call(&def, &args).map_err(|e| e.to_string()));
                assert_eq!(cached, written, "{case}");
            }
        }
    }
    // The messages quote the clause as written, with the const values it reads.
    let message = refused(
        validate_launch(
            &def,
            &[0, 32],
            &NO_BLOCK,
            &grid,
            &[buffer(Scalar::F32, 64, false), u32_arg(1)],
            &h200(),
        ),
        "scaled[ALIGNED=0,BM=32]",
    );
    assert!(
        message.contains("`BM != 32` does not hold (with BM = 32)"),
        "{message}"
    );
}

#[test]
fn a_variants_checks_plan_the_tensor_maps_the_kernels_do() {
    let def = tensor_mapped();
    let grid = Grid::blocks([1, 1, 1]);
    let facts = VariantFacts {
        block: Some([128, 1, 1]),
        cluster: None,
        shared_bytes: 0,
    };
    for (consts, args) in [
        ([64], tensor_args(100 * 208, 100, 200, 208)),
        ([64], tensor_args(100 * 201, 100, 200, 201)),
        ([64], tensor_args(99 * 208 + 199, 100, 200, 208)),
        ([512], tensor_args(100 * 208, 100, 200, 208)),
    ] {
        let planned = plan_tensor_maps(&def, &consts, &args).map_err(|e| e.to_string());
        let cached = VariantChecks::new(&def, &consts)
            .unwrap()
            .validate_launch(&def, &facts, &grid, &args, &h200())
            .map(|(_, maps)| maps)
            .map_err(|e| e.to_string());
        assert_eq!(cached, planned, "consts {consts:?}, args {args:?}");
    }
}
