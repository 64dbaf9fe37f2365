//! The interpreter backend without a kernel: its device, buffers, copies,
//! streams and timing, in every build (it needs no feature). Launches are
//! tested with real kernels in the workspace's `tests/tests/interpreter.rs`.

use warpforge_runtime::{
    e4m3, BackendKind, DeviceBackend, Error, HostBuffer, PeerRoute, Runtime, TimingMethod,
};

#[test]
fn the_interpreter_describes_itself_as_an_sm_80_on_the_host() {
    let rt = Runtime::interpreter();
    let device = rt.device();
    assert_eq!(device.backend, DeviceBackend::Interpreter);
    assert_eq!(device.backend.kind(), BackendKind::Interpreter);
    assert_eq!(rt.backend_name(), "interpreter");
    assert_eq!(device.compute_capability, (8, 0));
    assert_eq!((device.warp_size, device.max_threads_per_block), (32, 1024));
    assert_eq!(rt.timing_method(), TimingMethod::HostClock);
    let rt = Runtime::with_backend(BackendKind::Interpreter).unwrap();
    assert_eq!(rt.backend_name(), "interpreter");
}

#[test]
fn interpreter_buffers_hold_host_bytes() -> Result<(), Error> {
    let rt = Runtime::interpreter();
    let mut x = rt.upload(&[1.5f32, -2.0, 3.25])?;
    assert_eq!(rt.download(&x)?, [1.5, -2.0, 3.25]);
    rt.copy_from_host(&mut x, &[4.0, 5.0, 6.0])?;
    let mut y = rt.alloc_zeroed::<f32>(3)?;
    assert_eq!(rt.download(&y)?, [0.0; 3]);
    rt.copy(&x, &mut y)?;
    assert_eq!(rt.download(&y)?, [4.0, 5.0, 6.0]);
    rt.fill(&mut y, 7.0)?;
    assert_eq!(rt.download(&y)?, [7.0; 3]);
    let halves = [warpforge_runtime::f16::from_f32(0.5); 5];
    assert_eq!(rt.download(&rt.upload(&halves)?)?, halves);
    assert_eq!(rt.download(&rt.upload(&[u64::MAX, 1])?)?, [u64::MAX, 1]);
    let err = rt.copy_from_host(&mut y, &[1.0]).unwrap_err().to_string();
    assert!(err.contains("lengths must be equal"), "{err}");
    Ok(())
}

#[test]
fn element_types_the_interpreter_cannot_hold_are_refused() {
    let rt = Runtime::interpreter();
    let err = rt.upload(&[e4m3::from_f32(1.0)]).unwrap_err();
    assert!(matches!(err, Error::Buffer(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("e4m3") && message.contains("interpreter") && message.contains("f16"),
        "{message}"
    );
    let message = rt.alloc_zeroed::<bool>(4).unwrap_err().to_string();
    assert!(message.contains("u8"), "{message}");
}

#[test]
fn streams_events_and_host_copies_are_synchronous() -> Result<(), Error> {
    let rt = Runtime::interpreter();
    let fork = rt.fork()?;
    let mut x = fork.upload(&[1u32, 2, 3, 4])?;
    let event = fork.record_event()?;
    rt.wait_for(&event)?;
    event.synchronize()?;
    rt.synchronize()?;
    let mut host: HostBuffer<u32> = rt.alloc_host(4)?;
    host.as_mut_slice()?.copy_from_slice(&[9, 8, 7, 6]);
    rt.copy_from_host_async(&mut x, &host)?;
    assert_eq!(rt.download(&x)?, [9, 8, 7, 6]);
    let mut back: HostBuffer<u32> = fork.alloc_host(4)?;
    fork.copy_to_host_async(&x, &mut back)?;
    assert_eq!(back.as_slice()?, [9, 8, 7, 6]);
    let ms = rt.time_ms(|rt| rt.fill(&mut x, 0).map(|_| ()))?;
    assert!(ms >= 0.0, "{ms}");
    Ok(())
}

#[test]
fn peer_copies_between_interpreter_runtimes_take_buffers_and_views() -> Result<(), Error> {
    let (first, second) = (Runtime::interpreter(), Runtime::interpreter());
    let values: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let source = first.upload(&values)?;
    let mut target = second.alloc_zeroed::<f32>(256)?;
    assert_eq!(
        first.copy_to_peer(&source, &second, &mut target)?,
        PeerRoute::SameDevice
    );
    assert_eq!(second.download(&target)?, values);

    // Views: the second half of the source into the first half of a target.
    let mut halves = second.alloc_zeroed::<f32>(256)?;
    first.copy_to_peer(source.slice(128..)?, &second, halves.slice_mut(..128)?)?;
    let copied = second.download(&halves)?;
    assert_eq!(copied[..128], values[128..]);
    assert!(copied[128..].iter().all(|&v| v == 0.0));

    let err = first
        .copy_to_peer(source.slice(..64)?, &second, &mut target)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("64") && err.contains("256") && err.contains("same length"),
        "{err}"
    );
    Ok(())
}

/// One interpreter runtime per thread, each copying into a shared one's
/// buffers, as an app with a thread per GPU would.
#[test]
fn runtimes_work_from_their_own_threads() -> Result<(), Error> {
    let hub = Runtime::interpreter();
    let mut targets: Vec<_> = (0..4)
        .map(|_| hub.alloc_zeroed::<i32>(64))
        .collect::<Result<_, _>>()?;
    std::thread::scope(|scope| {
        let workers: Vec<_> = targets
            .iter_mut()
            .enumerate()
            .map(|(worker, target)| {
                let hub = &hub;
                scope.spawn(move || -> Result<PeerRoute, Error> {
                    let rt = Runtime::interpreter();
                    let source = rt.upload(&vec![worker as i32; 64])?;
                    rt.copy_to_peer(&source, hub, target)
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a worker panicked").map(drop))
    })?;
    for (worker, target) in targets.iter().enumerate() {
        assert_eq!(hub.download(target)?, vec![worker as i32; 64]);
    }
    Ok(())
}
