//! Buffers and device selection on the wgpu backend, through the public API.
//! These need a Vulkan (or Metal, DX12) adapter; the CPU tier has Mesa's
//! lavapipe, so a missing adapter fails them with what to install.
#![cfg(feature = "wgpu")]

mod common;

use common::wgpu_runtime;
use warpforge_codegen::Arch;
use warpforge_runtime::{bf16, f16, BackendKind, DeviceBackend};

#[test]
fn the_adapter_describes_itself() {
    let rt = wgpu_runtime();
    let device = rt.device();
    assert!(
        rt.backend_name().starts_with("wgpu ("),
        "{}",
        rt.backend_name()
    );
    assert!(!device.name.is_empty());
    let DeviceBackend::Wgpu(wgpu) = &device.backend else {
        panic!("a wgpu runtime describes a wgpu device: {device:?}")
    };
    assert_eq!(device.backend.kind(), BackendKind::Wgpu);
    // WebGPU's guaranteed minimums.
    assert!(device.max_threads_per_block >= 256, "{device:?}");
    assert!(
        device.max_block_dims[0] >= 256 && device.max_block_dims[2] >= 64,
        "{device:?}"
    );
    assert!(
        device.max_grid_dims.iter().all(|&d| d >= 65535),
        "{device:?}"
    );
    assert!(device.shared_mem_per_block >= 16384, "{device:?}");
    assert!(wgpu.max_storage_buffers_per_shader_stage >= 8, "{wgpu:?}");
    assert!(
        wgpu.max_storage_buffer_binding_size >= 128 << 20,
        "{wgpu:?}"
    );
    // No PTX runs here.
    assert_eq!(device.compute_capability, (0, 0));
    assert!(!device.supports(Arch::Sm70));
}

#[test]
fn every_wgsl_buffer_type_round_trips() {
    let rt = wgpu_runtime();
    common::round_trip(&rt, vec![1.5f32, -2.0, 1e30, f32::MIN_POSITIVE]);
    common::round_trip(&rt, vec![i32::MIN, 7, -1]);
    common::round_trip(&rt, vec![u32::MAX, 7]);
    // Odd f16 counts end inside a padded word.
    common::round_trip(&rt, vec![f16::from_f32(1.5)]);
    common::round_trip(&rt, vec![f16::from_f32(1.5), f16::from_f32(-2.0), f16::MAX]);
    let long: Vec<f32> = (0..4097).map(|i| i as f32 * 0.25).collect();
    common::round_trip(&rt, long);
}

#[test]
fn types_wgsl_cannot_store_are_refused() {
    let rt = wgpu_runtime();
    let refused = |result: Result<(), warpforge_runtime::Error>, name: &str| {
        let err = result.unwrap_err().to_string();
        assert!(err.contains(&format!("buffers of {name}")), "{err}");
        assert!(err.contains("WARPFORGE_BACKEND=cuda"), "{err}");
    };
    refused(rt.upload(&[1.0f64]).map(drop), "f64");
    refused(rt.upload(&[1i64]).map(drop), "i64");
    refused(rt.upload(&[1u64]).map(drop), "u64");
    refused(rt.upload(&[1i8]).map(drop), "i8");
    refused(rt.alloc_zeroed::<u8>(4).map(drop), "u8");
    refused(rt.alloc_zeroed::<bf16>(4).map(drop), "bf16");
}

#[test]
fn zeroed_filled_and_overwritten_buffers() {
    let rt = wgpu_runtime();
    let mut buffer = rt.alloc_zeroed::<u32>(1001).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), vec![0; 1001]);
    rt.fill(&mut buffer, 7).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), vec![7; 1001]);
    let values: Vec<u32> = (0..1001).collect();
    rt.copy_from_host(&mut buffer, &values).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), values);
    let mut halves = rt.alloc_zeroed::<f16>(3).unwrap();
    rt.fill(&mut halves, f16::from_f32(0.5)).unwrap();
    assert_eq!(rt.download(&halves).unwrap(), vec![f16::from_f32(0.5); 3]);

    let err = rt
        .copy_from_host(&mut buffer, &values[..10])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("10 host values") && err.contains("1001"),
        "{err}"
    );
    let err = rt.upload::<f32>(&[]).unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
    rt.synchronize().unwrap();
}

#[test]
fn buffers_of_another_runtime_are_refused() {
    let (a, b) = (wgpu_runtime(), wgpu_runtime());
    let buffer = a.upload(&[1.0f32, 2.0]).unwrap();
    let err = b.download(&buffer).unwrap_err().to_string();
    assert!(err.contains("another runtime"), "{err}");
}

#[cfg(feature = "cublas")]
#[test]
fn cuda_only_operations_are_errors_on_wgpu() {
    let rt = wgpu_runtime();
    let a = rt.upload(&[1.0f32]).unwrap();
    let mut c = rt.alloc_zeroed::<f32>(1).unwrap();
    let err = rt
        .cublas_sgemm(1, 1, 1, &a, &a, &mut c)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cuBLAS needs CUDA") && err.contains("wgpu ("),
        "{err}"
    );
    assert!(rt.cuda_stream().is_none() && a.cuda_slice().is_none());
}

#[test]
fn device_to_device_copies() {
    common::check_device_to_device_copies(&wgpu_runtime());
}

#[test]
fn peer_copies_refuse_wgpu_and_other_backends_with_what_to_do() {
    let rt = wgpu_runtime();
    let interpreter = warpforge_runtime::Runtime::interpreter();
    let source = rt.upload(&[1.0f32; 64]).unwrap();
    let mut on_the_cpu = interpreter.alloc_zeroed::<f32>(64).unwrap();
    let err = rt
        .copy_to_peer(&source, &interpreter, &mut on_the_cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("wgpu") && err.contains("interpreter") && err.contains("Runtime::download"),
        "{err}"
    );
    let mut target = rt.alloc_zeroed::<f32>(64).unwrap();
    let err = rt
        .copy_to_peer(&source, &rt, &mut target)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("wgpu has no copies between devices") && err.contains("copy_from_host"),
        "{err}"
    );
}
