//! The GPU tier: every variant of every stock kernel against a float64 CPU
//! reference, on fresh random inputs (ragged sizes included), with outputs
//! poisoned (NaN) before each run so that an unwritten element fails.
//!
//! `gpu-check` runs everything through CUDA; `--quick` runs small shapes only
//! and samples the GEMM cases, every variant at least once (for
//! compute-sanitizer, where runs are dear: `gpu-bundle/sanitize.sh`); `--list`
//! prints the names `--only` takes; `--wgpu` runs the WGSL variants through wgpu
//! instead (Vulkan/Metal/DX12: on a GPU machine, the portable path beside the
//! PTX one); `--only NAME` runs only the checks of stock kernel NAME (the
//! dense GEMMs `gemm_f32`, `gemm_f16`, `gemm_bf16`, `gemm_tf32`, `gemm_s8`,
//! `gemm_f16_wmma`: every variant in every layout it takes, with and
//! without bias, ReLU and GELU, on one batch and three; `ldmatrix_trans`,
//! the transposed operand loads of the Tensor Core GEMMs; for 2:4
//! sparsity: `mma_sp`, the sparse Tensor Core layout; `sparse`, the device
//! prune/compress/decompress kernels; `gemm_sparse_f16`,
//! `gemm_sparse_bf16`; on compute capability 9.0: `wgmma`, the wgmma
//! descriptors, swizzles and accumulator layouts of every element type, and `mbarrier`, the
//! mbarrier phases, and `tma`, TMA loads and stores through tensor maps,
//! from `warpforge_tests::hopper`; and the sm_90a GEMMs `gemm_wgmma_f16`,
//! `gemm_wgmma_bf16`, `gemm_wgmma_tf32`, `gemm_wgmma_s8`, `gemm_wgmma_e4m3`
//! and `gemm_wgmma_e5m2`; `generated`, random SIMT kernels
//! (`warpforge_tests::generated`) against the reference interpreter; and `interop`,
//! stock kernels on the app's own CUDA stream, slices and device pointers,
//! on views of buffers, on forked streams ordered by events, and a CUDA
//! graph's replays, from
//! `warpforge_tests::interop`; and `threads`, the tuned GEMM dispatched from
//! threads on one runtime and on a runtime each, `warpforge_tests::threads`). Without a
//! GPU it says so, lists the variants it would have
//! checked and how many lines each dense GEMM check prints, and exits with
//! status 2: not run is never passed.

use std::process::ExitCode;

use warpforge::{BackendKind, Runtime};
use warpforge_kernels::softmax::softmax_rows;
use warpforge_kernels::{gemm, gemm_sparse, gemm_tc, gemm_wgmma, gemm_wmma};
use warpforge_tests::checks::{
    check_gemm, check_histogram, check_saxpy, check_softmax, check_stream, check_sum,
    dense_gemm_lines, GemmCoverage,
};
use warpforge_tests::generated::{self, check_generated};
use warpforge_tests::hopper::{
    check_cluster_multicast, check_mbarrier_phases, check_tma_load, check_tma_roundtrip,
    check_wgmma_layouts,
};
use warpforge_tests::interop;
use warpforge_tests::ldmatrix::check_ldmatrix_trans;
use warpforge_tests::report::Report;
use warpforge_tests::sparse::{
    check_gemm_sparse, check_mma_sp, check_sparse_device, sparse_gemm_lines,
};
use warpforge_tests::threads;
use warpforge_tests::{run_seed, Inputs};

/// Exit status when no GPU could be used: distinct from pass (0) and fail (1).
const NOT_RUN: u8 = 2;

/// The names `--only` takes and `--list` prints: each selects the checks of
/// one stock kernel (or of one group of proofs).
const CHECKS: &[&str] = &[
    "saxpy",
    "histogram",
    "block_sum",
    "softmax_rows",
    "gemm_f32",
    "interop",
    "threads",
    "gemm_f16",
    "gemm_bf16",
    "gemm_tf32",
    "gemm_s8",
    "gemm_f16_wmma",
    "stream_scale",
    "sparse",
    "gemm_sparse_f16",
    "ldmatrix_trans",
    "mma_sp",
    "gemm_sparse_bf16",
    "wgmma",
    "tma",
    "mbarrier",
    "cluster",
    "gemm_wgmma_f16",
    "gemm_wgmma_bf16",
    "gemm_wgmma_tf32",
    "gemm_wgmma_s8",
    "gemm_wgmma_e4m3",
    "gemm_wgmma_e5m2",
    "gemm_wgmma_f16_f32",
    "gemm_wgmma_bf16_f32",
    "gemm_wgmma_e4m3_f16",
    "gemm_wgmma_e4m3_f32",
    "gemm_wgmma_e5m2_f16",
    "gemm_wgmma_e5m2_f32",
    "generated",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        for name in CHECKS {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    let quick = args.iter().any(|a| a == "--quick");
    // `--only NAME`: only the checks of the stock kernel NAME (for a quick
    // device run after changing one kernel); everything by default. A name
    // that selects nothing would pass having checked nothing: refused.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    if let Some(name) = only.as_deref().filter(|name| !CHECKS.contains(name)) {
        println!(
            "gpu-check: `--only {name}` names no check; the checks are: {}",
            CHECKS.join(", ")
        );
        return ExitCode::FAILURE;
    }
    let wanted = |kernel: &str| {
        debug_assert!(
            CHECKS.contains(&kernel),
            "`{kernel}` is missing from CHECKS"
        );
        only.as_deref().is_none_or(|o| o == kernel)
    };
    // Explicit backends: Runtime::new would fall back from CUDA to wgpu, and a
    // CUDA tier that silently ran on wgpu would not be the CUDA tier.
    let started = if std::env::args().any(|a| a == "--wgpu") {
        Runtime::wgpu()
    } else {
        Runtime::cuda(0)
    };
    let rt = match started {
        Ok(rt) => rt,
        Err(e) => {
            println!("GPU TIER NOT RUN: no usable GPU: {e}");
            list_variants();
            list_dense_gemm_lines(quick);
            println!("\n0 passed, 0 failed (not run: no GPU)");
            return ExitCode::from(NOT_RUN);
        }
    };
    let device = rt.device();
    println!(
        "device: {} through {} (compute capability {}.{}, {} SMs)",
        device.name,
        rt.backend_name(),
        device.compute_capability.0,
        device.compute_capability.1,
        device.sm_count
    );
    let seed = run_seed();
    println!("seed: {seed} (replay with WARPFORGE_SEED={seed})\n");
    let mut inputs = Inputs::new(seed);
    let mut report = Report::default();
    let sizes: &[usize] = if quick {
        &[1, 31, 4097]
    } else {
        &[1, 31, 1000, 4097, 1 << 20]
    };

    if wanted("saxpy") {
        check_saxpy(&rt, &mut inputs, &mut report, sizes);
    }
    if wanted("histogram") {
        check_histogram(&rt, &mut inputs, &mut report, sizes);
    }
    if wanted("block_sum") {
        check_sum(&rt, &mut inputs, &mut report, sizes);
    }
    let softmax_shapes: &[(usize, usize)] = if quick {
        &[(1, 1), (3, 31), (2, 1000)]
    } else {
        &[(1, 1), (3, 31), (7, 1000), (2, 4097), (64, 1024)]
    };
    if wanted("softmax_rows") {
        check_softmax(
            &rt,
            &mut inputs,
            &mut report,
            &softmax_rows::variants(),
            softmax_shapes,
        );
    }
    let gemm_shapes = gemm_shapes(quick);
    let coverage = gemm_coverage(quick);
    if wanted("gemm_f32") {
        check_gemm::<gemm::gemm_f32::Consts>(&rt, &mut inputs, &mut report, &gemm_shapes, coverage);
    }
    if wanted("generated") {
        let count = generated::count("WARPFORGE_GEN_COUNT", generated_programs(quick));
        check_generated(&rt, generated::run_seed(), count, &mut report);
    }
    // The Tensor Core GEMMs and the cp_async stream are CUDA-only (no WGSL variant).
    if rt.device().backend.kind() == BackendKind::Cuda {
        if wanted("interop") {
            interop::cuda_app::check_saxpy_on_app_slices(&mut inputs, &mut report);
            interop::cuda_app::check_borrowed_slices(&mut inputs, &mut report);
            interop::cuda_app::check_raw_pointer(&mut inputs, &mut report);
            interop::check_views(&rt, &mut inputs, &mut report);
            interop::check_streams(&rt, &mut inputs, &mut report);
            interop::check_host_copies(&rt, &mut inputs, &mut report);
            interop::cuda_app::check_pinned_copies_overlap(&rt, &mut inputs, &mut report);
            interop::cuda_app::check_graph_replay(&rt, &mut inputs, &mut report);
        }
        if wanted("threads") {
            threads::check_concurrent_dispatch(&rt, &mut inputs, &mut report);
        }
        let tc_shapes = tensor_core_shapes(quick);
        if wanted("gemm_f16") {
            check_gemm::<gemm_tc::gemm_f16::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &tc_shapes,
                coverage,
            );
        }
        if wanted("gemm_bf16") {
            check_gemm::<gemm_tc::gemm_bf16::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &tc_shapes,
                coverage,
            );
        }
        if wanted("gemm_tf32") {
            check_gemm::<gemm_tc::gemm_tf32::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &tc_shapes,
                coverage,
            );
        }
        if wanted("gemm_s8") {
            check_gemm::<gemm_tc::gemm_s8::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &byte_shapes(quick),
                coverage,
            );
        }
        if wanted("gemm_f16_wmma") {
            check_gemm::<gemm_wmma::gemm_f16_wmma::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &tc_shapes,
                coverage,
            );
        }
        if wanted("stream_scale") {
            check_stream(&rt, &mut inputs, &mut report, sizes);
        }
        if wanted("sparse") {
            let shapes: &[(usize, usize)] = if quick {
                &[(1, 1), (17, 70), (40, 130)]
            } else {
                &[
                    (1, 1),
                    (3, 5),
                    (17, 70),
                    (40, 130),
                    (257, 1000),
                    (1000, 4096),
                ]
            };
            check_sparse_device(&rt, &mut inputs, &mut report, shapes);
        }
        if wanted("gemm_sparse_f16") {
            check_gemm_sparse::<gemm_sparse::gemm_sparse_f16::Consts>(
                &rt,
                &mut inputs,
                &mut report,
                &tc_shapes,
                coverage,
            );
        }
        // ldmatrix, the sparse Tensor Cores (mma.sp) and bf16 exist from sm_80 on.
        if rt.device().compute_capability >= (8, 0) {
            if wanted("ldmatrix_trans") {
                check_ldmatrix_trans(&rt, &mut inputs, &mut report, if quick { 2 } else { 8 });
            }
            if wanted("mma_sp") {
                check_mma_sp(&rt, &mut inputs, &mut report, if quick { 2 } else { 8 });
            }
            if wanted("gemm_sparse_bf16") {
                check_gemm_sparse::<gemm_sparse::gemm_sparse_bf16::Consts>(
                    &rt,
                    &mut inputs,
                    &mut report,
                    &tc_shapes,
                    coverage,
                );
            }
        }
        // wgmma runs on compute capability 9.0 only (sm_90a), mbarrier waits from 9.0 on.
        if rt.device().compute_capability == (9, 0) {
            if wanted("wgmma") {
                check_wgmma_layouts(&rt, &mut inputs, &mut report);
            }
            if wanted("tma") {
                check_tma_load(&rt, &mut inputs, &mut report);
                check_tma_roundtrip(&rt, &mut inputs, &mut report);
            }
            let tc_shapes = tensor_core_shapes(quick);
            macro_rules! check_wgmma_gemms {
                ($($kernel:ident: $shapes:expr;)*) => {$(
                    if wanted(stringify!($kernel)) {
                        check_gemm::<gemm_wgmma::$kernel::Consts>(
                            &rt,
                            &mut inputs,
                            &mut report,
                            $shapes,
                            coverage,
                        );
                    }
                )*};
            }
            check_wgmma_gemms! {
                gemm_wgmma_f16: &tc_shapes;
                gemm_wgmma_bf16: &tc_shapes;
                gemm_wgmma_tf32: &tc_shapes;
                gemm_wgmma_s8: &byte_shapes(quick);
                gemm_wgmma_e4m3: &byte_shapes(quick);
                gemm_wgmma_e5m2: &byte_shapes(quick);
                gemm_wgmma_f16_f32: &tc_shapes;
                gemm_wgmma_bf16_f32: &tc_shapes;
                gemm_wgmma_e4m3_f16: &byte_shapes(quick);
                gemm_wgmma_e4m3_f32: &byte_shapes(quick);
                gemm_wgmma_e5m2_f16: &byte_shapes(quick);
                gemm_wgmma_e5m2_f32: &byte_shapes(quick);
            }
            if wanted("mbarrier") {
                check_mbarrier_phases(&rt, &mut report);
            }
            if wanted("cluster") {
                check_cluster_multicast(&rt, &mut inputs, &mut report);
            }
        }
    }

    report.finish();
    if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--quick` serves compute-sanitizer, whose runs are dear: the GEMMs' cases
/// sampled there.
fn gemm_coverage(quick: bool) -> GemmCoverage {
    if quick {
        GemmCoverage::Sampled
    } else {
        GemmCoverage::Full
    }
}

/// Generated programs per run (`WARPFORGE_GEN_COUNT` overrides): each is a
/// module the driver compiles.
fn generated_programs(quick: bool) -> usize {
    if quick {
        200
    } else {
        2000
    }
}

/// The shapes of the SIMT f32 GEMM (CUDA and wgpu).
fn gemm_shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    if quick {
        vec![(1, 1, 1), (31, 17, 5), (127, 255, 63)]
    } else {
        vec![
            (1, 1, 1),
            (31, 17, 5),
            (127, 255, 63),
            (257, 1000, 33),
            (1000, 1000, 1000),
            (4096, 4096, 4096),
        ]
    }
}

/// The shapes of the Tensor Core GEMMs: ragged ones (m = 130 is no multiple
/// of 8, so column-major A with 16-byte copies must be refused), and large.
fn tensor_core_shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    if quick {
        // k = 1000 splits a few tiles' k-tiles over the blocks of the
        // sm_90a stream-K variants, so that a quick run (the sanitizers')
        // runs their partial sums and flags too.
        vec![(1, 1, 1), (127, 255, 63), (130, 72, 40), (130, 72, 1000)]
    } else {
        vec![
            (1, 1, 1),
            (127, 255, 63),
            (130, 72, 40),
            (256, 256, 256),
            (1000, 1000, 1000),
            (4096, 4096, 4096),
        ]
    }
}

/// The Tensor Core shapes and, since none of the quick ones and not k =
/// 1000 is a multiple of 16, a shape that the 8-bit types' 16-byte-copy
/// variants take (the sm_90a ones take no other): without it, a quick run
/// (the sanitizers') would run none of them. The quick one's k is long
/// enough for stream-K pieces (16 k-tiles of 128 bytes).
fn byte_shapes(quick: bool) -> Vec<(usize, usize, usize)> {
    let mut shapes = tensor_core_shapes(quick);
    shapes.push(if quick {
        (130, 72, 2048)
    } else {
        (1000, 1000, 1008)
    });
    shapes
}

/// How many lines each dense GEMM check prints on a GPU (each is one run,
/// and must pass), and each sparse one on a GPU with sparse Tensor Cores.
fn list_dense_gemm_lines(quick: bool) {
    println!(
        "
the dense GEMM checks would print (lines each, `--only NAME`):"
    );
    let coverage = gemm_coverage(quick);
    let lines = [
        (
            "gemm_f32",
            dense_gemm_lines::<gemm::gemm_f32::Consts>(&gemm_shapes(quick), coverage),
        ),
        (
            "gemm_f16",
            dense_gemm_lines::<gemm_tc::gemm_f16::Consts>(&tensor_core_shapes(quick), coverage),
        ),
        (
            "gemm_bf16",
            dense_gemm_lines::<gemm_tc::gemm_bf16::Consts>(&tensor_core_shapes(quick), coverage),
        ),
        (
            "gemm_tf32",
            dense_gemm_lines::<gemm_tc::gemm_tf32::Consts>(&tensor_core_shapes(quick), coverage),
        ),
        (
            "gemm_s8",
            dense_gemm_lines::<gemm_tc::gemm_s8::Consts>(&byte_shapes(quick), coverage),
        ),
        (
            "gemm_wgmma_f16",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_f16::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_bf16",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_bf16::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_tf32",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_tf32::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_s8",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_s8::Consts>(&byte_shapes(quick), coverage),
        ),
        (
            "gemm_wgmma_e4m3",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e4m3::Consts>(&byte_shapes(quick), coverage),
        ),
        (
            "gemm_wgmma_e5m2",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e5m2::Consts>(&byte_shapes(quick), coverage),
        ),
        (
            "gemm_wgmma_f16_f32",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_f16_f32::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_bf16_f32",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_bf16_f32::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_e4m3_f16",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e4m3_f16::Consts>(
                &byte_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_e4m3_f32",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e4m3_f32::Consts>(
                &byte_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_e5m2_f16",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e5m2_f16::Consts>(
                &byte_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_wgmma_e5m2_f32",
            dense_gemm_lines::<gemm_wgmma::gemm_wgmma_e5m2_f32::Consts>(
                &byte_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_f16_wmma",
            dense_gemm_lines::<gemm_wmma::gemm_f16_wmma::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_sparse_f16",
            sparse_gemm_lines::<gemm_sparse::gemm_sparse_f16::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
        (
            "gemm_sparse_bf16",
            sparse_gemm_lines::<gemm_sparse::gemm_sparse_bf16::Consts>(
                &tensor_core_shapes(quick),
                coverage,
            ),
        ),
    ];
    for (name, count) in lines {
        println!("  {name:<14} {count}");
    }
}

/// What would have been checked, with each variant's PTX facts per target.
fn list_variants() {
    println!("\nthe stock kernels and their variants (PTX generated here, not run):");
    for def in warpforge_kernels::all() {
        for consts in def.variants() {
            let facts: Vec<String> = def
                .targets
                .iter()
                .filter_map(|target| target.arch())
                .map(
                    |arch| match warpforge_codegen::compile_ptx(def, &consts, arch) {
                        Ok(m) => format!(
                            "{} (PTX {}.{}, {} B shared)",
                            arch.name(),
                            m.version.0,
                            m.version.1,
                            m.shared_bytes
                        ),
                        Err(e) => format!("{}: {e}", arch.name()),
                    },
                )
                .collect();
            println!("  {:<48} {}", def.variant_name(&consts), facts.join(", "));
        }
    }
}
