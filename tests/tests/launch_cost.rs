//! The host work of a checked launch of gemm_f16 (the launch `bench
//! --sections launch` times on a GPU), part by part, without a GPU: run with
//! `cargo test --release -p warpforge-tests --test launch_cost -- --ignored --nocapture`.

use std::hint::black_box;
use std::time::Instant;

use warpforge::{
    check_call, select_arch, validate_launch, ArgInfo, Grid, HostValue, KernelVariant, Scalar,
    VariantChecks, VariantFacts,
};
use warpforge_codegen::ir::Literal;
use warpforge_kernels::gemm_tc::gemm_f16;
use warpforge_tests::h200_device_info;

const CALLS_PER_ROUND: u32 = 20_000;
const ROUNDS: usize = 21;

/// Median nanoseconds per call of `work`.
fn ns_per_call<T>(mut work: impl FnMut() -> T) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..CALLS_PER_ROUND {
                black_box(work());
            }
            started.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS_PER_ROUND)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

/// The arguments of the bench's launch: 128x128x64, one batch, A row-major,
/// B column-major, the bias stood in for by A.
fn gemm_args() -> Vec<ArgInfo> {
    let (m, n, k) = (128u32, 128u32, 64u32);
    let buffer = |len: u32, mutable: bool| ArgInfo::Buffer {
        elem: Scalar::F16,
        len: u64::from(len),
        mutable,
    };
    let scalar = |ty: Scalar, value: Literal| ArgInfo::Scalar {
        ty,
        value: HostValue::Scalar(value),
    };
    let u32_arg = |v: u32| scalar(Scalar::U32, Literal::Int(i64::from(v)));
    let f32_arg = |v: f32| scalar(Scalar::F32, Literal::Float(f64::from(v)));
    let bool_arg = |v: bool| scalar(Scalar::Bool, Literal::Bool(v));
    vec![
        buffer(m * k, false),
        buffer(n * k, false),
        buffer(m * n, true),
        buffer(m * k, false),
        u32_arg(m),
        u32_arg(n),
        u32_arg(k),
        u32_arg(1),
        u32_arg(m * k),
        u32_arg(n * k),
        u32_arg(m * n),
        f32_arg(1.0),
        f32_arg(0.0),
        u32_arg(0),
        u32_arg(0),
        bool_arg(false),
        bool_arg(false),
    ]
}

#[test]
#[ignore = "a measurement: run it in release with --ignored --nocapture"]
fn launch_host_work_of_gemm_f16() {
    let def = gemm_f16::def();
    let args = gemm_args();
    let consts = gemm_f16::variants()
        .into_iter()
        .filter(|c| check_call(def, &c.values(), &args).is_ok())
        .find(|c| c.BM == 128 && c.BN == 128)
        .expect("a 128x128 variant takes the bench's problem");
    let values = consts.values();
    let device = h200_device_info();
    let arch = select_arch(def, &device).unwrap();
    let ptx = warpforge_codegen::compile_ptx(def, &values, arch).unwrap();
    let facts = VariantFacts {
        block: ptx.block,
        cluster: ptx.cluster,
        shared_bytes: ptx.shared_bytes,
    };
    let grid = Grid::blocks([1, 1, 1]);
    let checks = VariantChecks::new(def, &values).unwrap();

    println!("{} on {}, {arch:?}", consts.name(), device.name);
    // The public parts of a CUDA launch's host work besides the driver
    // calls: select_arch and the variant's cached checks (the cache lookup
    // and the argument and parameter lists are the backend's own). For
    // scale: what a variant's first launch prepares, the checks made from
    // scratch, as the tuner makes them, and one variant name.
    let parts: [(&str, &mut dyn FnMut()); 6] = [
        ("select_arch", &mut || {
            black_box(select_arch(def, &device).unwrap());
        }),
        ("cached checks", &mut || {
            black_box(
                checks
                    .validate_launch(def, &facts, &grid, &args, &device)
                    .unwrap(),
            );
        }),
        ("VariantChecks::new", &mut || {
            black_box(VariantChecks::new(def, &values).unwrap());
        }),
        ("validate_launch", &mut || {
            black_box(validate_launch(def, &values, &facts, &grid, &args, &device).unwrap());
        }),
        ("check_call", &mut || {
            check_call(def, &values, &args).unwrap()
        }),
        ("variant_name", &mut || drop(def.variant_name(&values))),
    ];
    for (name, work) in parts {
        println!("{name:>20}: {:8.1} ns", ns_per_call(work));
    }
}
