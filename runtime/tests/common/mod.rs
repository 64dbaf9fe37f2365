//! The wgpu runtime the wgpu tests run on. Each test binary uses part of it.
#![allow(dead_code)]

mod mesa;

pub use mesa::quiet_mesa;
use warpforge_runtime::Runtime;

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
