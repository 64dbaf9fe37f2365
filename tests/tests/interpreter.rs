//! The interpreter backend (`Runtime::interpreter()`,
//! `WARPFORGE_BACKEND=interpreter`): the same app code as on a GPU (buffers,
//! macro kernels' launches, the stock kernels' launchers and checks, tuned
//! launches) runs on the CPU, and the interpreter's checks come back as
//! `Error::Interpreter` with the check's kind, naming the kernel, block,
//! thread and statement.
//!
//! Sizes are small: the interpreter runs each thread's statements one by
//! one. The stock kernels go through the GPU tier's checks
//! (`warpforge_tests::checks`: float64 references, fresh random inputs,
//! NaN-poisoned outputs).

use warpforge::prelude::*;
use warpforge::tune::{GpuModel, MissPolicy, Source, TuneDb, TuneSettings};
use warpforge::{BackendKind, InterpreterErrorKind};
use warpforge_example_tuned::{checked_scale_add, random};
use warpforge_kernels::gemm::gemm_f32;
use warpforge_kernels::gemm_sparse::gemm_sparse_f16;
use warpforge_kernels::gemm_tc::gemm_f16;
use warpforge_kernels::softmax::softmax_rows;
use warpforge_tests::checks::{
    check_gemm, check_histogram, check_saxpy, check_softmax, check_sum, GemmCoverage,
};
use warpforge_tests::report::Report;
use warpforge_tests::sparse::check_gemm_sparse;
use warpforge_tests::{run_checks, Inputs};

/// `y = a * x + y`, one thread per element.
#[kernel(arch(sm_80, wgsl))]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// Reads one element past its thread's: the last thread reads past `x`.
#[kernel(arch(sm_80, wgsl))]
fn shifted_copy(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    y[i] = x[i + 1];
}

/// Only the first half of each block reaches the barrier.
#[kernel(arch(sm_80, wgsl))]
fn half_barrier(y: &mut [f32]) {
    let t = thread_idx().x;
    if t < block_dim().x / 2 {
        sync_threads();
    }
    y[t] = 1.0;
}

/// `y[i] = x[i] / d`, which the interpreter refuses for `d == 0`.
#[kernel(arch(sm_80, wgsl))]
fn divide(x: &[u32], y: &mut [u32], d: u32) {
    let i = thread_idx().x;
    y[i] = x[i] / d;
}

/// Runs checks on the interpreter and fails the test on any failed line.
fn check(run: impl FnOnce(&Runtime, &mut Inputs, &mut Report)) {
    run_checks(&Runtime::interpreter(), run);
}

#[test]
fn a_macro_kernel_gives_the_host_result() -> Result<(), Error> {
    let rt = Runtime::interpreter();
    let n = 1000;
    let (hx, hy) = (random(n, 1), random(n, 2));
    let x = rt.upload(&hx)?;
    let mut y = rt.upload(&hy)?;
    axpy::launch(&rt, Grid::linear(n, 128), 2.0, &x, &mut y)?;
    let want: Vec<f32> = hx.iter().zip(&hy).map(|(x, y)| 2.0 * x + y).collect();
    assert_eq!(rt.download(&y)?, want);
    // A view: the kernel sees elements 256.. only.
    let mut tail = y.slice_mut(256..)?;
    axpy::launch(&rt, Grid::linear(n - 256, 128), 1.0, &x, &mut tail)?;
    let got = rt.download(&y)?;
    assert_eq!(got[..256], want[..256]);
    assert_eq!(got[256], hx[0] + want[256]);
    Ok(())
}

#[test]
fn stock_kernels_match_their_float64_references() {
    let sizes = &[1, 31, 1000];
    check(|rt, inputs, report| check_saxpy(rt, inputs, report, sizes));
    check(|rt, inputs, report| check_histogram(rt, inputs, report, sizes));
    check(|rt, inputs, report| check_sum(rt, inputs, report, sizes));
    // Warp shuffles too: the interpreter's warps have 32 lanes.
    let variants = softmax_rows::variants();
    assert!(variants.iter().any(|c| c.WARP_SHUFFLE));
    check(|rt, inputs, report| check_softmax(rt, inputs, report, &variants, &[(3, 31), (2, 300)]));
}

#[test]
fn the_simt_gemm_equals_its_float64_reference() {
    let shapes = &[(1, 1, 1), (31, 17, 5)];
    check(|rt, inputs, report| {
        check_gemm::<gemm_f32::Consts>(rt, inputs, report, shapes, GemmCoverage::Sampled)
    });
}

#[test]
fn the_tensor_core_gemm_equals_its_float64_reference() {
    // mma.sync, ldmatrix and cp.async, as sm_80 runs them.
    let shapes = &[(17, 24, 40)];
    check(|rt, inputs, report| {
        check_gemm::<gemm_f16::Consts>(rt, inputs, report, shapes, GemmCoverage::Sampled)
    });
}

#[test]
fn the_sparse_gemm_equals_its_float64_reference() {
    // mma.sp, ldmatrix and cp.async, with A's compressed rows and B's k
    // ending inside a tile (the copies' edge form).
    let shapes = &[(17, 24, 40)];
    check(|rt, inputs, report| {
        check_gemm_sparse::<gemm_sparse_f16::Consts>(
            rt,
            inputs,
            report,
            shapes,
            GemmCoverage::Sampled,
        )
    });
}

#[test]
fn an_index_out_of_bounds_names_the_kernel_block_thread_and_statement() {
    let rt = Runtime::interpreter();
    let x = rt.upload(&[1.0f32; 64]).unwrap();
    let mut y = rt.upload(&[-1.0f32; 64]).unwrap();
    let err = shifted_copy::launch(&rt, Grid::linear(64, 32), &x, &mut y).unwrap_err();
    let Error::Interpreter(fault) = &err else {
        panic!("expected Error::Interpreter, got {err:?}")
    };
    assert_eq!(fault.kind, InterpreterErrorKind::OutOfBounds);
    assert_eq!(fault.kernel, "shifted_copy");
    assert_eq!(fault.block, Some([1, 0, 0]));
    assert_eq!(fault.thread, Some([31, 0, 0]));
    let message = err.to_string();
    assert!(
        message.contains("shifted_copy") && message.contains("x[i + 1]"),
        "{message}"
    );
    // A faulting launch leaves its outputs as they were.
    assert_eq!(rt.download(&y).unwrap(), [-1.0; 64]);
}

#[test]
fn barrier_divergence_and_division_by_zero_are_errors_of_their_kind() {
    let rt = Runtime::interpreter();
    let mut y = rt.alloc_zeroed::<f32>(64).unwrap();
    match half_barrier::launch(&rt, Grid::linear(64, 64), &mut y) {
        Err(Error::Interpreter(fault)) => {
            assert_eq!(fault.kind, InterpreterErrorKind::BarrierDivergence);
            assert!(fault.message.contains("half_barrier"), "{fault}");
        }
        other => panic!("expected barrier divergence, got {other:?}"),
    }
    let x = rt.upload(&[6u32; 32]).unwrap();
    let mut q = rt.alloc_zeroed::<u32>(32).unwrap();
    divide::launch(&rt, Grid::linear(32, 32), &x, &mut q, 3).unwrap();
    assert_eq!(rt.download(&q).unwrap(), [2; 32]);
    match divide::launch(&rt, Grid::linear(32, 32), &x, &mut q, 0) {
        Err(Error::Interpreter(fault)) => {
            assert_eq!(fault.kind, InterpreterErrorKind::DivisionByZero);
            assert_eq!(fault.thread, Some([0, 0, 0]));
        }
        other => panic!("expected division by zero, got {other:?}"),
    }
}

#[test]
fn a_launch_is_checked_as_on_a_gpu_before_it_runs() {
    let rt = Runtime::interpreter();
    let x = rt.upload(&[1.0f32; 4]).unwrap();
    let mut y = rt.upload(&[1.0f32; 4]).unwrap();
    let err = axpy::launch(&rt, Grid::new([1, 1, 1], [2048, 1, 1]), 1.0, &x, &mut y).unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err:?}");
    // Hopper's kernels (mbarriers, TMA, wgmma) are refused before they run.
    let hopper = warpforge_kernels::all()
        .into_iter()
        .find(|def| {
            def.targets
                == [warpforge_codegen::Target::Ptx(
                    warpforge_codegen::Arch::Sm90a,
                )]
        })
        .expect("the stock kernels have an sm_90a-only GEMM");
    let consts = &hopper.variants()[0];
    let err = rt.variant_resources(hopper, consts).unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err:?}");
    assert!(err.to_string().contains("up to sm_80"), "{err}");
}

#[test]
fn warpforge_backend_interpreter_selects_it() {
    // The only test of this binary that reads the variable.
    std::env::set_var("WARPFORGE_BACKEND", "interpreter");
    let rt = Runtime::new();
    std::env::remove_var("WARPFORGE_BACKEND");
    let rt = rt.unwrap();
    assert_eq!(rt.device().backend.kind(), BackendKind::Interpreter);
    assert_eq!(rt.backend_name(), "interpreter");
}

#[test]
fn tuning_on_the_interpreter_records_and_dispatches() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = |policy| {
        let rt = Runtime::interpreter();
        rt.set_tune_settings(TuneSettings {
            policy: Some(policy),
            dir: Some(dir.path().to_path_buf()),
        });
        rt
    };
    let scale_add_on = |rt: &Runtime, seed| checked_scale_add(rt, 3000, seed).unwrap();
    let rt = runtime(MissPolicy::TuneNow);
    let (source, winner) = scale_add_on(&rt, 5);
    assert_eq!(source, Source::Tuned);
    let model = GpuModel::of(rt.device());
    assert_eq!(model.name, "warpforge interpreter");
    assert!(TuneDb::open(Some(dir.path()), &model)
        .unwrap()
        .path()
        .exists());
    // Another runtime finds the winner in the database.
    let second = runtime(MissPolicy::Heuristic);
    assert_eq!(scale_add_on(&second, 7), (Source::Database, winner));
}

#[test]
fn element_types_the_interpreter_cannot_hold_are_refused_with_what_to_do() {
    let rt = Runtime::interpreter();
    let err = rt.upload(&[warpforge::e5m2::from_f32(0.5); 8]).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Buffer(_)), "{err:?}");
    assert!(
        message.contains("e5m2") && message.contains("interpreter") && message.contains("CUDA"),
        "{message}"
    );
}
