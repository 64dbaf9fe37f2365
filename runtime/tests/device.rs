//! Starting a runtime: without a driver it must be an error that says what to
//! install; with one, the device must describe itself sensibly.

mod common;

#[cfg(feature = "cuda")]
use warpforge_runtime::Error;
use warpforge_runtime::{BackendKind, DeviceBackend, Runtime};

#[cfg(feature = "cuda")]
#[test]
fn runtime_cuda_reports_a_missing_driver_or_describes_the_device() {
    match Runtime::cuda(0) {
        Err(Error::NoDriver(message)) => {
            assert!(message.contains("driver"), "{message}");
            assert!(
                message.contains("NVIDIA") || message.contains("nvidia-smi"),
                "says what to do: {message}"
            );
        }
        Err(Error::NoDevice(message)) => {
            assert!(
                message.contains("CUDA_VISIBLE_DEVICES") || message.contains("nvidia-smi"),
                "{message}"
            );
        }
        Err(other) => {
            panic!("starting without a usable GPU must be NoDriver or NoDevice, got: {other}")
        }
        Ok(rt) => {
            let device = rt.device();
            assert_eq!(device.backend, DeviceBackend::Cuda);
            assert_eq!(rt.backend_name(), "CUDA");
            assert!(!device.name.is_empty());
            assert!(device.compute_capability >= (7, 0), "{device:?}");
            assert!(device.sm_count > 0 && device.warp_size == 32, "{device:?}");
            assert!(device.max_threads_per_block >= 1024, "{device:?}");
            assert!(
                device.shared_mem_per_block_optin >= device.shared_mem_per_block,
                "{device:?}"
            );
            assert!(
                device.total_memory_bytes > 0 && device.driver_version >= (12, 0),
                "{device:?}"
            );
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn an_ordinal_past_the_devices_is_an_error() {
    match Runtime::cuda(usize::MAX) {
        Err(Error::NoDriver(message)) => assert!(message.contains("driver"), "{message}"),
        Err(Error::NoDevice(message)) => {
            assert!(message.contains("CUDA_VISIBLE_DEVICES"), "{message}")
        }
        Err(other) => panic!("expected NoDriver or NoDevice, got: {other}"),
        Ok(rt) => panic!("device {} cannot exist", rt.device().ordinal),
    }
}

/// Without WARPFORGE_BACKEND, CUDA when it works, else wgpu; when neither
/// works, the error names both failures.
#[test]
fn runtime_new_prefers_cuda_then_wgpu() {
    common::quiet_mesa();
    let forced = std::env::var("WARPFORGE_BACKEND").ok();
    if let Some(kind) = BackendKind::from_env_value(forced.as_deref()).unwrap() {
        if let Ok(rt) = Runtime::new() {
            assert_eq!(
                rt.device().backend.kind(),
                kind,
                "WARPFORGE_BACKEND={forced:?}"
            );
        }
        return;
    }
    match (Runtime::new(), Runtime::cuda(0).is_ok()) {
        (Ok(rt), true) => assert_eq!(rt.device().backend, DeviceBackend::Cuda),
        (Ok(rt), false) => assert!(
            rt.backend_name().starts_with("wgpu"),
            "{}",
            rt.backend_name()
        ),
        (Err(e), _) => {
            let message = e.to_string();
            assert!(
                message.contains("CUDA:")
                    && message.contains("wgpu:")
                    && message.contains("WARPFORGE_BACKEND=interpreter"),
                "{message}"
            );
        }
    }
}

/// A build without a backend refuses it with the feature that would give it.
#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
#[test]
fn a_backend_left_out_of_the_build_names_its_feature() {
    let refusals = [
        (
            cfg!(feature = "cuda"),
            Runtime::cuda(0).err(),
            "`cuda` feature",
        ),
        (
            cfg!(feature = "wgpu"),
            Runtime::wgpu().err(),
            "`wgpu` feature",
        ),
    ];
    for (built, error, feature) in refusals {
        if !built {
            let message = error
                .expect("a backend this build lacks cannot start")
                .to_string();
            assert!(message.contains(feature), "{message}");
        }
    }
}
