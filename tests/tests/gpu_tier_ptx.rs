//! The GPU tier's own kernels (`gpu-check`'s proofs and the bench's rate and
//! spacer kernels, defined in this crate) assembled by ptxas for every
//! variant and every arch they declare, with no spills: a kernel that ptxas
//! rejects would otherwise be found only on the GPU machine, at the cost of
//! a device run. (`cargo xtask build-ptx` does the same for the stock
//! kernels.) The rate kernels' ceilings hold only if their loops are what
//! they claim, so their `wgmma`s must not be serialized either.

use warpforge_codegen::{compile_ptx, KernelDef};
use warpforge_tests::bench::method::spacer_fma;
use warpforge_tests::compare::{deviation_bf16, deviation_f16, deviation_f32, deviation_i32};
use warpforge_tests::hopper::{
    cluster_multicast, mbarrier_phases, tma_load_sw128, tma_roundtrip, wgmma_plain_bf16,
    wgmma_plain_e4m3, wgmma_plain_e5m2, wgmma_plain_f16, wgmma_plain_s8, wgmma_plain_tf32,
    wgmma_plain_u8, wgmma_sw128_bf16, wgmma_sw128_e4m3, wgmma_sw128_e5m2, wgmma_sw128_f16,
    wgmma_sw128_s8, wgmma_sw128_tf32, wgmma_sw128_u8,
};
use warpforge_tests::ldmatrix::ldmatrix_trans_tile;
use warpforge_tests::rates::{
    mma_rate_bf16, mma_rate_f16, mma_rate_s8, mma_rate_tf32, mma_sp_rate, wgmma_rate_bf16,
    wgmma_rate_e4m3, wgmma_rate_f16, wgmma_rate_s8, wgmma_rate_tf32,
};
use warpforge_tests::sparse::{mma_sp_tile_bf16, mma_sp_tile_f16};

#[path = "../../codegen/tests/common/ptxas.rs"]
mod ptxas;

fn gpu_tier_kernels() -> Vec<&'static KernelDef> {
    vec![
        spacer_fma::def(),
        deviation_f16::def(),
        deviation_bf16::def(),
        deviation_f32::def(),
        deviation_i32::def(),
        cluster_multicast::def(),
        mbarrier_phases::def(),
        tma_load_sw128::def(),
        tma_roundtrip::def(),
        wgmma_plain_bf16::def(),
        wgmma_plain_e4m3::def(),
        wgmma_plain_e5m2::def(),
        wgmma_plain_f16::def(),
        wgmma_plain_s8::def(),
        wgmma_plain_tf32::def(),
        wgmma_plain_u8::def(),
        wgmma_sw128_bf16::def(),
        wgmma_sw128_e4m3::def(),
        wgmma_sw128_e5m2::def(),
        wgmma_sw128_f16::def(),
        wgmma_sw128_s8::def(),
        wgmma_sw128_tf32::def(),
        wgmma_sw128_u8::def(),
        ldmatrix_trans_tile::def(),
        mma_rate_bf16::def(),
        mma_rate_f16::def(),
        mma_rate_s8::def(),
        mma_rate_tf32::def(),
        mma_sp_rate::def(),
        wgmma_rate_bf16::def(),
        wgmma_rate_e4m3::def(),
        wgmma_rate_f16::def(),
        wgmma_rate_s8::def(),
        wgmma_rate_tf32::def(),
        mma_sp_tile_bf16::def(),
        mma_sp_tile_f16::def(),
    ]
}

#[test]
fn every_gpu_tier_kernel_assembles_for_every_arch_without_spills() {
    let ptxas = ptxas::find_ptxas();
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut assembled = 0;
    for def in gpu_tier_kernels() {
        for consts in def.variants() {
            for arch in def.targets.iter().filter_map(|t| t.arch()) {
                let variant = format!("{} for {}", def.variant_name(&consts), arch.name());
                let module = match compile_ptx(def, &consts, arch) {
                    Ok(module) => module,
                    Err(e) => {
                        failures.push(format!("{variant}: {}", e.message));
                        continue;
                    }
                };
                let stem = format!("k{assembled}");
                match ptxas::assemble(&ptxas, arch.name(), &module.text, scratch.path(), &stem) {
                    Ok(report) if !report.contains(" 0 bytes spill stores") => {
                        failures.push(format!("{variant} spills:\n{report}"))
                    }
                    Ok(report) if report.contains("Performance Loss") => {
                        failures.push(format!("{variant}: ptxas warns:\n{report}"))
                    }
                    Ok(_) => {}
                    Err(report) => failures.push(format!("{variant}: ptxas failed:\n{report}")),
                }
                assembled += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("{assembled} variants of the GPU tier's kernels assembled");
}
