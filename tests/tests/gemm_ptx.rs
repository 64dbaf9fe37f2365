//! PTX snapshots of representative GEMM variants: a Tensor Core GEMM
//! reading column-major A and row-major B (`ldmatrix.trans` on swizzled
//! m- and n-contiguous tiles) with the float epilogue (beta, bias, ReLU,
//! GELU) and strided batches; the s8 GEMM's integer epilogue (no GELU); the
//! sm_70 `wmma` GEMM, whose layouts are run-time branches between the
//! `row` and `col` forms; the 2:4 sparse GEMM reading row-major B
//! (`ldmatrix.x4.trans` fragments for `mma.sp`) with the epilogue, strided
//! batches of the compressed A and C in either layout. `cargo xtask build-ptx` assembles every variant;
//! these show what a change does to the text. Review with
//! `cargo insta review`.

use warpforge_codegen::{compile_ptx, Arch, KernelDef};
use warpforge_kernels::gemm_sparse::gemm_sparse_f16;
use warpforge_kernels::gemm_tc::{gemm_f16, gemm_s8};
use warpforge_kernels::gemm_wmma::gemm_f16_wmma;

fn snapshot(name: &str, def: &KernelDef, consts: &[i64], arch: Arch) {
    let module = compile_ptx(def, consts, arch)
        .unwrap_or_else(|e| panic!("{}: {}", def.variant_name(consts), e.message));
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_description(def.variant_name(consts));
    settings.bind(|| insta::assert_snapshot!(name, module.text));
}

#[test]
fn f16_column_major_a_row_major_b_with_the_epilogue() {
    let consts = gemm_f16::Consts {
        BM: 64,
        BN: 64,
        BK: 32,
        WARP: 32,
        STAGES: 3,
        ALIGNED: true,
        A_COL_MAJOR: true,
        B_ROW_MAJOR: true,
    };
    let def = gemm_f16::def();
    snapshot("gemm_f16_nt_sm80", def, &consts.values(), Arch::Sm80);
}

#[test]
fn s8_integer_epilogue() {
    let consts = gemm_s8::Consts {
        BM: 64,
        BN: 64,
        BK: 64,
        WARP: 32,
        STAGES: 2,
        ALIGNED: true,
        A_COL_MAJOR: false,
        B_ROW_MAJOR: false,
    };
    snapshot("gemm_s8_sm80", gemm_s8::def(), &consts.values(), Arch::Sm80);
}

#[test]
fn wmma_run_time_layouts_and_epilogue() {
    let consts = gemm_f16_wmma::Consts {
        BM: 64,
        BN: 64,
        BK: 32,
        STAGES: 2,
    };
    let def = gemm_f16_wmma::def();
    snapshot("gemm_f16_wmma_sm70", def, &consts.values(), Arch::Sm70);
}

#[test]
fn sparse_f16_row_major_b_with_the_epilogue() {
    let consts = gemm_sparse_f16::Consts {
        BM: 64,
        BN: 64,
        BK: 64,
        WARP: 32,
        STAGES: 3,
        ALIGNED: true,
        B_ROW_MAJOR: true,
    };
    let def = gemm_sparse_f16::def();
    snapshot("gemm_sparse_f16_nn_sm80", def, &consts.values(), Arch::Sm80);
}
