//! What the runtime's test binaries share: the wgpu runtime the wgpu tests
//! run on, and buffer checks both backends pass. Each binary uses part of it.
#![allow(dead_code)]

mod mesa;

pub use mesa::quiet_mesa;
use warpforge_runtime::{f16, DeviceScalar, Runtime};

/// A runtime on wgpu's adapter; a missing adapter fails the test with what
/// to install (the CPU tier has lavapipe, so a skip would hide a broken setup).
pub fn wgpu_runtime() -> Runtime {
    quiet_mesa();
    let rt = Runtime::wgpu().unwrap_or_else(|e| {
        panic!(
            "the wgpu tests need a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    mesa::announce_adapter(&rt.backend_name(), &rt.device().name);
    rt
}

/// Uploading and downloading `values` gives them back.
pub fn round_trip<T: DeviceScalar + PartialEq + std::fmt::Debug>(rt: &Runtime, values: Vec<T>) {
    let buffer = rt.upload(&values).unwrap();
    assert_eq!(buffer.len(), values.len());
    assert_eq!(rt.download(&buffer).unwrap(), values);
}

/// `Runtime::copy` copies equal-length buffers (f32, and an odd number of
/// f16) and refuses different lengths naming both.
pub fn check_device_to_device_copies(rt: &Runtime) {
    let values: Vec<f32> = (0..1001).map(|i| i as f32 * 0.5).collect();
    let source = rt.upload(&values).unwrap();
    let mut target = rt.alloc_zeroed::<f32>(1001).unwrap();
    rt.copy(&source, &mut target).unwrap();
    assert_eq!(rt.download(&target).unwrap(), values);
    let halves: Vec<f16> = (0..3).map(|i| f16::from_f32(i as f32)).collect();
    let mut odd = rt.alloc_zeroed::<f16>(3).unwrap();
    rt.copy(&rt.upload(&halves).unwrap(), &mut odd).unwrap();
    assert_eq!(rt.download(&odd).unwrap(), halves);
    let mut short = rt.alloc_zeroed::<f32>(10).unwrap();
    let err = rt.copy(&source, &mut short).unwrap_err().to_string();
    assert!(err.contains("1001") && err.contains("10"), "{err}");
}
