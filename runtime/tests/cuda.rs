//! Buffers, timing and cuBLAS through the public API. These need a CUDA GPU:
//! they are `#[ignore]`d in the CPU tier (reported as ignored, never as
//! passed) and run with `--ignored` by the GPU tier (`cargo xtask gpu-bundle`),
//! where a missing GPU fails them. `device.rs` checks that `Runtime::new`
//! fails with a useful message on a machine without a driver.
#![cfg(feature = "cuda")]

mod common;

use warpforge_runtime::{bf16, f16, Runtime};

fn gpu() -> Runtime {
    Runtime::cuda(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn every_buffer_type_round_trips() {
    let rt = gpu();
    common::round_trip(&rt, vec![f16::from_f32(1.5), f16::from_f32(-2.0)]);
    common::round_trip(&rt, vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)]);
    common::round_trip(&rt, vec![1.5f32, -2.0, 1e30]);
    common::round_trip(&rt, vec![1.5f64, -2.0]);
    common::round_trip(&rt, vec![-1i8, 127]);
    common::round_trip(&rt, vec![0u8, 255]);
    common::round_trip(&rt, vec![i32::MIN, 7]);
    common::round_trip(&rt, vec![u32::MAX, 7]);
    common::round_trip(&rt, vec![i64::MIN, 7]);
    common::round_trip(&rt, vec![u64::MAX, 7]);
}

#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn zeroed_filled_and_overwritten_buffers() {
    let rt = gpu();
    let mut buffer = rt.alloc_zeroed::<u32>(1000).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), vec![0; 1000]);
    rt.fill(&mut buffer, 7).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), vec![7; 1000]);
    let values: Vec<u32> = (0..1000).collect();
    rt.copy_from_host(&mut buffer, &values).unwrap();
    assert_eq!(rt.download(&buffer).unwrap(), values);

    let err = rt
        .copy_from_host(&mut buffer, &values[..10])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("10 host values") && err.contains("1000"),
        "{err}"
    );
    let err = rt.upload::<f32>(&[]).unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
    let err = rt.alloc_zeroed::<bool>(4).unwrap_err().to_string();
    assert!(err.contains("u8"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn timing_and_synchronize() {
    let rt = gpu();
    let mut buffer = rt.alloc_zeroed::<f32>(1 << 20).unwrap();
    let ms = rt.time_ms(|rt| rt.fill(&mut buffer, 1.0)).unwrap();
    assert!(ms.is_finite() && ms >= 0.0, "{ms}");
    // Pieces of 1, 100 and 1 fills, timed apart.
    let fills = [1, 100, 1];
    let parts = rt
        .time_parts_ms(fills.len(), |rt, piece| {
            (0..fills[piece]).try_for_each(|_| rt.fill(&mut buffer, 2.0))
        })
        .unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts[1] > 10.0 * parts[0].max(parts[2]), "{parts:?}");
    rt.synchronize().unwrap();
}

#[cfg(feature = "cublas")]
#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn cublas_sgemm_is_row_major() {
    let rt = gpu();
    let (m, n, k) = (37, 29, 13);
    // Small integers: every product and sum is exact in f32.
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let mut want = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
    let mut dc = rt.alloc_zeroed::<f32>(m * n).unwrap();
    // The GPU tier needs cuBLAS (the benchmarks compare with it): missing is a failure.
    rt.cublas_sgemm(m, n, k, &da, &db, &mut dc)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rt.download(&dc).unwrap(), want);
    let err = rt
        .cublas_sgemm(m + 1, n, k, &da, &db, &mut dc)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`a` is a 38 x 13 matrix"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn device_to_device_copies() {
    common::check_device_to_device_copies(&gpu());
}

/// Two runtimes of device 0, as two threads of an app would have: a peer
/// copy between them is a copy on the device, of buffers and views, ordered
/// after the source's writes and before the target's later reads.
#[test]
#[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
fn peer_copies_between_runtimes_of_one_device() {
    let (first, second) = (gpu(), gpu());
    let values: Vec<u32> = (0..1 << 20).collect();
    let source = first.upload(&values).unwrap();
    let mut target = second.alloc_zeroed::<u32>(values.len()).unwrap();
    let route = first.copy_to_peer(&source, &second, &mut target).unwrap();
    assert_eq!(route, warpforge_runtime::PeerRoute::SameDevice);
    assert_eq!(second.download(&target).unwrap(), values);

    let mut halves = second.alloc_zeroed::<u32>(values.len()).unwrap();
    let half = values.len() / 2;
    first
        .copy_to_peer(
            source.slice(half..).unwrap(),
            &second,
            halves.slice_mut(..half).unwrap(),
        )
        .unwrap();
    let copied = second.download(&halves).unwrap();
    assert_eq!(copied[..half], values[half..]);
    assert!(copied[half..].iter().all(|&v| v == 0));

    // From threads: each copies its own buffer into the shared runtime's.
    let mut targets: Vec<_> = (0..4)
        .map(|_| second.alloc_zeroed::<u32>(4096).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for (worker, target) in targets.iter_mut().enumerate() {
            let second = &second;
            scope.spawn(move || {
                let rt = gpu();
                let source = rt.upload(&vec![worker as u32; 4096]).unwrap();
                rt.copy_to_peer(&source, second, target).unwrap();
            });
        }
    });
    for (worker, target) in targets.iter().enumerate() {
        assert_eq!(second.download(target).unwrap(), vec![worker as u32; 4096]);
    }

    let interpreter = Runtime::interpreter();
    let mut on_the_cpu = interpreter.alloc_zeroed::<u32>(values.len()).unwrap();
    let err = first
        .copy_to_peer(&source, &interpreter, &mut on_the_cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CUDA") && err.contains("interpreter") && err.contains("Runtime::download"),
        "{err}"
    );
}
