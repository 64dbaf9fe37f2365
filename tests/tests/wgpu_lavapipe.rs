//! The wgpu tier: every stock kernel with a `wgsl` target, every variant the
//! adapter runs, against the float64 references on a wgpu adapter, with the
//! GPU tier's checks (`warpforge_tests::checks`: fresh random inputs,
//! NaN-poisoned outputs); a variant it cannot run (warp shuffles without
//! 32-lane subgroups) must be refused with an `Err` saying why. CI runs it on
//! Mesa's lavapipe, a CPU Vulkan driver, so a missing adapter fails with what
//! to install.
//!
//! Sizes: ragged ones (1, 31, 1000, 4097; GEMM up to 257 x 200 x 33), no
//! large ones; the GEMM's cases sampled (`GemmCoverage::Sampled`: every
//! variant the plain one, the first variant every layout, epilogue and
//! batch count), since each launch costs a submission. lavapipe runs shaders
//! on the CPU and compiles each pipeline with LLVM, so the 24 GEMM variants'
//! compiles dominate; these sizes keep the whole file near a minute on 2
//! cores (about 2 minutes is the budget).
//! The large shapes are the CUDA GPU tier's (`gpu-check`).

use warpforge::Runtime;
use warpforge_codegen::Target;
use warpforge_kernels::gemm::{self, gemm_f32};
use warpforge_kernels::softmax;
use warpforge_tests::checks::{
    check_gemm, check_histogram, check_saxpy, check_softmax, check_sum, GemmCoverage,
};
use warpforge_tests::report::Report;
use warpforge_tests::{run_checks, Inputs};

const SIZES: &[usize] = &[1, 31, 1000, 4097];

/// The kernels this file checks, by name: every stock kernel with a `wgsl`
/// target must be one of them.
const CHECKED: &[&str] = &[
    "saxpy",
    "histogram",
    "block_sum",
    "softmax_rows",
    "gemm_f32",
];

/// Runs one kernel's checks and fails the test on any failed line.
fn check(run: impl FnOnce(&Runtime, &mut Inputs, &mut Report)) {
    run_checks(&warpforge_tests::lavapipe("the wgpu tier"), run);
}

#[test]
fn every_stock_kernel_with_a_wgsl_target_is_checked() {
    for def in warpforge_kernels::all() {
        if def.targets.contains(&Target::Wgsl) {
            assert!(
                CHECKED.contains(&def.ir.name.as_str()),
                "stock kernel `{}` has a wgsl target and no check here: add one",
                def.ir.name
            );
        }
    }
}

#[test]
fn saxpy() {
    check(|rt, inputs, report| check_saxpy(rt, inputs, report, SIZES));
}

#[test]
fn histogram() {
    check(|rt, inputs, report| check_histogram(rt, inputs, report, SIZES));
}

#[test]
fn block_sum() {
    check(|rt, inputs, report| check_sum(rt, inputs, report, SIZES));
}

#[test]
fn softmax_rows() {
    let shapes = &[(1, 1), (3, 31), (7, 1000), (2, 4097)];
    let rt = warpforge_tests::lavapipe("the wgpu tier");
    let (runnable, refused): (Vec<_>, Vec<_>) = softmax::softmax_rows::variants()
        .into_iter()
        .partition(|consts| !consts.WARP_SHUFFLE || softmax::runs_warp_shuffles(rt.device()));
    assert!(
        runnable.iter().any(|consts| !consts.WARP_SHUFFLE),
        "the shared-memory variants run on every adapter"
    );
    check(|rt, inputs, report| check_softmax(rt, inputs, report, &runnable, shapes));
    // Warp shuffles need subgroups of exactly 32 lanes (lavapipe's follow
    // the host's vector width, 8 lanes for 256 bits): the launch must say so.
    for consts in refused {
        let run = || -> Result<(), warpforge::Error> {
            let x = rt.upload(&[0.5f32; 32])?;
            let mut y = rt.upload(&[f32::NAN; 32])?;
            softmax::softmax_with(&rt, consts, &x, &mut y, 1, 32)
        };
        let err = run()
            .expect_err("warp shuffles cannot run without subgroups of 32")
            .to_string();
        assert!(err.contains("subgroups of exactly 32"), "{err}");
    }
}

#[test]
fn gemm_f32() {
    let shapes = &[(1, 1, 1), (31, 17, 5), (127, 255, 63), (257, 200, 33)];
    check(|rt, inputs, report| {
        check_gemm::<gemm_f32::Consts>(rt, inputs, report, shapes, GemmCoverage::Sampled)
    });
}

#[test]
fn a_nan_beta_reads_c_as_rust_and_blas_do() {
    // beta = NaN is not 0, so C is read and every output is NaN, as on the
    // PTX path (the WGSL `!=` of a NaN was false on lavapipe: beta skipped).
    let rt = warpforge_tests::lavapipe("the wgpu tier");
    let ones = rt.upload(&[1.0f32; 16]).unwrap();
    let mut c = rt.upload(&[0.0f32; 16]).unwrap();
    gemm::gemm_f32_with(
        &rt,
        gemm::DEFAULT_F32,
        &ones,
        &ones,
        &mut c,
        (4, 4, 4),
        1.0,
        f32::NAN,
    )
    .unwrap();
    let out = rt.download(&c).unwrap();
    assert!(out.iter().all(|v| v.is_nan()), "{out:?}");
}
