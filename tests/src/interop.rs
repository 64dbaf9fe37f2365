//! Memory and queues shared with the app, checked end to end: the app makes
//! the device (or stream) and the buffers with its own API, a stock kernel
//! runs on them through warpforge, and the app reads the result through its
//! own handles. That the app's handle sees the kernel's writes is the proof
//! that nothing was copied: warpforge wrote the app's memory itself.
//!
//! The wgpu checks run on lavapipe in the CPU tier (`tests/tests/interop.rs`),
//! the CUDA ones in the GPU tier (`gpu-check --only interop`).

use warpforge::{DeviceBuffer, Grid, Runtime};
use warpforge_kernels::gemm;
use warpforge_kernels::simple::saxpy;

use crate::report::Report;
use crate::Inputs;

/// Elements per buffer: not a multiple of the block, so the last block is partial.
const N: usize = 1000;

/// `a * x + y`, as saxpy computes it in f32.
fn saxpy_reference(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}

/// The first element where `got` differs from `want` (bit for bit: one
/// rounding, as the kernel does), or the count checked.
fn compare(got: &[f32], want: &[f32]) -> Result<String, String> {
    if got.len() != want.len() {
        return Err(format!("{} elements, expected {}", got.len(), want.len()));
    }
    match (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        None => Ok(format!("all {} elements", got.len())),
        Some(i) => Err(format!("element {i} is {}, expected {}", got[i], want[i])),
    }
}

/// A check's outcome: its line (`Ok` passed, `Err` failed, each with the
/// detail), or the error that kept it from running.
pub(crate) type Outcome = Result<Result<String, String>, Box<dyn std::error::Error>>;

pub(crate) fn record(report: &mut Report, what: &str, outcome: Outcome) {
    match outcome {
        Ok(Ok(detail)) => report.check(what, true, detail),
        Ok(Err(detail)) => report.check(what, false, detail),
        Err(error) => report.error(what, error),
    }
}

/// saxpy on views of larger buffers, on any runtime: the kernel sees the
/// views' elements as its slices (and their lengths), writes only its view
/// of `y`, and views that break a rule are refused with it.
pub fn check_views(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what = format!(
        "views: saxpy on x[64..1000] and y[128..1064] ({})",
        rt.backend_name()
    );
    let (x, y) = (inputs.f32s(N + 64), inputs.f32s(N + 128));
    let outcome = (|| -> Outcome {
        let dx = rt.upload(&x)?;
        let mut dy = rt.upload(&y)?;
        let x_view = dx.slice(64..1000)?;
        let y_view = dy.slice_mut(128..1064)?;
        saxpy::launch(rt, Grid::linear(N, 128), 0.75, x_view, y_view)?;
        let got = rt.download(&dy)?;
        let mut want = y.clone();
        for (i, w) in want[128..1064].iter_mut().enumerate() {
            *w += 0.75 * x[64 + i];
        }
        Ok(compare(&got, &want)
            .map(|detail| format!("{detail} of y, the 128 before and 64 after the view untouched")))
    })();
    record(report, &what, outcome);

    let what = format!(
        "views: ranges that break a rule are refused ({})",
        rt.backend_name()
    );
    let outcome = (|| -> Outcome {
        let dx = rt.upload(&x)?;
        let refusals = [
            (dx.slice(1..).err(), "multiple of 64 elements"),
            (dx.slice(64..2000).err(), "end at or before 1064"),
            (dx.slice(64..64).err(), "non-empty"),
        ];
        for (error, rule) in refusals {
            let message = error
                .ok_or_else(|| format!("a view breaking `{rule}` was made"))?
                .to_string();
            if !message.contains(rule) {
                return Ok(Err(format!("the refusal does not say `{rule}`: {message}")));
            }
        }
        Ok(Ok(
            "a misaligned start, a range past the end, an empty range".to_string(),
        ))
    })();
    record(report, &what, outcome);

    // A GEMM on views: the same launch on buffers holding just the views'
    // elements computes the same C bit for bit, and C's buffer is untouched
    // outside its view.
    let (m, n, k) = (70u32, 50u32, 33u32);
    let what = format!(
        "views: gemm_f32 {m}x{n}x{k} on A, B and C at offsets 64, 128 and 192 ({})",
        rt.backend_name()
    );
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let (a, b, c) = (
        inputs.f32s(mk + 64),
        inputs.f32s(kn + 128 + 64),
        inputs.f32s(mn + 192 + 64),
    );
    let outcome = (|| -> Outcome {
        let (da, db) = (rt.upload(&a)?, rt.upload(&b)?);
        let mut dc = rt.upload(&c)?;
        let views = (
            da.slice(64..)?,
            db.slice(128..128 + kn)?,
            dc.slice_mut(192..192 + mn)?,
        );
        let dims = (m, n, k);
        gemm::gemm_f32_with(
            rt,
            gemm::DEFAULT_F32,
            views.0,
            views.1,
            views.2,
            dims,
            1.0,
            0.0,
        )?;
        let (whole_a, whole_b) = (rt.upload(&a[64..])?, rt.upload(&b[128..128 + kn])?);
        let mut whole_c = rt.upload(&c[192..192 + mn])?;
        gemm::gemm_f32_with(
            rt,
            gemm::DEFAULT_F32,
            &whole_a,
            &whole_b,
            &mut whole_c,
            dims,
            1.0,
            0.0,
        )?;
        let mut want = c.clone();
        want[192..192 + mn].copy_from_slice(&rt.download(&whole_c)?);
        Ok(compare(&rt.download(&dc)?, &want).map(|detail| {
            format!(
                "{detail} of C's buffer: the view's equal to whole buffers', the rest untouched"
            )
        }))
    })();
    record(report, &what, outcome);
}

/// Two streams of one device, on any runtime: a fork launches on its
/// parent's buffers, and the parent's next launch, made to wait for the
/// fork's event, reads what the fork wrote.
pub fn check_streams(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what = format!(
        "streams: saxpy on a fork, then on its parent after an event ({})",
        rt.backend_name()
    );
    let (x, y) = (inputs.f32s(N), inputs.f32s(N));
    let outcome = (|| -> Outcome {
        let dx = rt.upload(&x)?;
        let mut dy = rt.upload(&y)?;
        let fork = rt.fork()?;
        saxpy::launch(&fork, Grid::linear(N, 128), 2.0, &dx, &mut dy)?;
        let written = fork.record_event()?;
        rt.wait_for(&written)?;
        saxpy::launch(rt, Grid::linear(N, 128), -1.0, &dx, &mut dy)?;
        rt.record_event().and_then(|done| done.synchronize())?;
        let got = rt.download(&dy)?;
        let once = saxpy_reference(2.0, &x, &y);
        Ok(compare(&got, &saxpy_reference(-1.0, &x, &once))
            .map(|detail| format!("{detail}: the second launch saw the first")))
    })();
    record(report, &what, outcome);
}

/// Copies through host buffers, on any runtime: x goes to the device by
/// [`Runtime::copy_from_host_async`], saxpy runs on it, the result comes
/// back by [`Runtime::copy_to_host_async`]. Writing the host buffer right
/// after its copy is enqueued waits for the copy (the device computes with
/// the values it held), and copies of another length are refused.
pub fn check_host_copies(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let what = format!(
        "host buffers: x in, saxpy, y out, with copies that return once enqueued ({})",
        rt.backend_name()
    );
    let (x, y) = (inputs.f32s(N), inputs.f32s(N));
    let outcome = (|| -> Outcome {
        let mut host = rt.alloc_host::<f32>(N)?;
        if host.as_slice()?.iter().any(|v| v.to_bits() != 0) {
            return Ok(Err("a new host buffer is not zeroed".into()));
        }
        host.as_mut_slice()?.copy_from_slice(&x);
        let mut dx = rt.alloc_zeroed::<f32>(N)?;
        let mut dy = rt.upload(&y)?;
        rt.copy_from_host_async(&mut dx, &host)?;
        // Waits for the copy above before the host overwrites its source.
        host.as_mut_slice()?.fill(f32::NAN);
        saxpy::launch(rt, Grid::linear(N, 128), 2.0, &dx, &mut dy)?;
        rt.copy_to_host_async(&dy, &mut host)?;
        let refused = matches!(
            rt.copy_to_host_async(&dy, &mut rt.alloc_host::<f32>(N - 1)?),
            Err(e) if e.to_string().contains("the lengths must be equal")
        );
        if !refused {
            return Ok(Err(
                "a copy into a shorter host buffer was not refused".into()
            ));
        }
        Ok(compare(host.as_slice()?, &saxpy_reference(2.0, &x, &y))
            .map(|detail| format!("{detail}; a copy of another length refused")))
    })();
    record(report, &what, outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_names_the_first_difference() {
        assert_eq!(
            compare(&[1.0, 2.0], &[1.0, 2.0]),
            Ok("all 2 elements".into())
        );
        assert_eq!(
            compare(&[1.0, 3.0], &[1.0, 2.0]),
            Err("element 1 is 3, expected 2".into())
        );
        assert!(compare(&[0.0], &[-0.0]).is_err(), "bit for bit");
    }
}

pub mod wgpu_app {
    //! The app is a wgpu program with its own device, queue and buffers.

    use warpforge::wgpu;

    use super::*;

    /// The app's device: the adapter wgpu picks (lavapipe in CI).
    pub fn app_device() -> Result<(wgpu::Device, wgpu::Queue), String> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
            .map_err(|e| format!("the app found no wgpu adapter: {e}"))?;
        pollster::block_on(adapter.request_device(&Default::default()))
            .map_err(|e| format!("the app could not open {}: {e}", adapter.get_info().name))
    }

    /// A buffer the app makes and fills with its own queue.
    fn app_buffer(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        values: &[f32],
        usage: wgpu::BufferUsages,
    ) -> wgpu::Buffer {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("the app's buffer"),
            size: std::mem::size_of_val(values) as u64,
            usage,
            mapped_at_creation: false,
        });
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        queue.write_buffer(&buffer, 0, &bytes);
        buffer
    }

    /// Reads `len` f32s of the app's buffer with the app's own copy and map.
    fn app_read(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        len: usize,
    ) -> Result<Vec<f32>, String> {
        let size = (len * 4) as u64;
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("the app's readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = sender.send(result);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| format!("waiting for the app's device: {e}"))?;
        receiver
            .recv()
            .map_err(|e| format!("the map callback never ran: {e}"))?
            .map_err(|e| format!("mapping the app's readback: {e}"))?;
        let values = staging
            .get_mapped_range(..)
            .map_err(|e| format!("reading the app's readback: {e}"))?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        staging.unmap();
        Ok(values)
    }

    /// saxpy on the app's device, into the app's buffer: warpforge takes the
    /// buffer, writes it, hands it back, and the app's own handle (a clone it
    /// kept) reads the result.
    pub fn check_saxpy_in_place(inputs: &mut Inputs, report: &mut Report) {
        let what = "wgpu interop: saxpy on the app's device, into the app's buffer";
        let (x, y) = (inputs.f32s(N), inputs.f32s(N));
        let outcome = (|| -> Outcome {
            let (device, queue) = app_device()?;
            let rt = Runtime::wgpu_on_device(&device, &queue);
            let usage = wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST;
            let app_y = app_buffer(&device, &queue, &y, usage);
            let dx = rt.upload(&x)?;
            let mut dy = DeviceBuffer::<f32>::from_wgpu_buffer(&rt, app_y.clone(), N)?;
            saxpy::launch(&rt, Grid::linear(N, 128), 1.5, &dx, &mut dy)?;
            let through_warpforge = rt.download(&dy)?;
            let handed_back = dy
                .into_wgpu_buffer()
                .map_err(|_| "into_wgpu_buffer refused a wgpu buffer".to_string())?;
            if handed_back != app_y {
                return Err("into_wgpu_buffer gave back another buffer".into());
            }
            let through_app = app_read(&device, &queue, &app_y, N)?;
            let want = saxpy_reference(1.5, &x, &y);
            Ok(compare(&through_app, &want).and_then(|detail| {
                compare(&through_warpforge, &want)
                    .map(|_| format!("{detail}, read through the app's own handle"))
            }))
        })();
        record(report, what, outcome);
    }

    /// What cannot be taken is refused with the rule, before wgpu sees it.
    pub fn check_refusals(report: &mut Report) {
        let what = "wgpu interop: buffers that cannot be taken are refused";
        let outcome = (|| -> Outcome {
            let (device, queue) = app_device()?;
            let rt = Runtime::wgpu_on_device(&device, &queue);
            let storage_only = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("the app's storage-only buffer"),
                size: 32,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            let all = wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST;
            let small = app_buffer(&device, &queue, &[0.0; 8], all);
            let refusals = [
                (
                    DeviceBuffer::<f32>::from_wgpu_buffer(&rt, storage_only, 8).err(),
                    "COPY_SRC",
                ),
                (
                    DeviceBuffer::<f32>::from_wgpu_buffer(&rt, small.clone(), 9).err(),
                    "32 bytes",
                ),
                (
                    DeviceBuffer::<i8>::from_wgpu_buffer(&rt, small, 8).err(),
                    "WGSL stores only",
                ),
            ];
            for (error, rule) in refusals {
                let message = error
                    .ok_or_else(|| format!("a buffer breaking `{rule}` was taken"))?
                    .to_string();
                if !message.contains(rule) {
                    return Ok(Err(format!("the refusal does not say `{rule}`: {message}")));
                }
            }
            Ok(Ok(
                "missing usages, too few bytes, an element type WGSL lacks".to_string(),
            ))
        })();
        record(report, what, outcome);
    }
}

pub mod cuda_app {
    //! The app is a cudarc program with its own context, stream and slices.

    use std::sync::Arc;

    use warpforge::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

    use super::*;

    /// The app's stream (on device 0's primary context) and a runtime on it.
    fn app_stream_and_runtime() -> Result<(Arc<CudaStream>, Runtime), String> {
        let ctx = CudaContext::new(0).map_err(|e| format!("the app's context: {e:?}"))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| format!("the app's stream: {e:?}"))?;
        let rt = Runtime::cuda_on_stream(stream.clone()).map_err(|e| e.to_string())?;
        Ok((stream, rt))
    }

    fn upload(stream: &Arc<CudaStream>, values: &[f32]) -> Result<CudaSlice<f32>, String> {
        stream
            .clone_htod(values)
            .map_err(|e| format!("the app's upload: {e:?}"))
    }

    fn download(stream: &Arc<CudaStream>, slice: &CudaSlice<f32>) -> Result<Vec<f32>, String> {
        stream
            .clone_dtoh(slice)
            .map_err(|e| format!("the app's download: {e:?}"))
    }

    /// A 256 MiB copy from a pinned host buffer returns once enqueued (its
    /// call takes under half of the copy's time), lands whole, and comes
    /// back the same way; its rate beside the same copy from pageable memory
    /// ([`Runtime::copy_from_host`]), each timed to the end of the copy.
    pub fn check_pinned_copies_overlap(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
        let what = "host buffers: a 256 MiB copy from pinned memory returns before it completes";
        let len = 64 << 20;
        let outcome = (|| -> Outcome {
            let seed = inputs.f32s(1024);
            let values: Vec<f32> = (0..len)
                .map(|i| seed[i % 1024] + (i / 1024) as f32)
                .collect();
            let mut host = rt.alloc_host::<f32>(len)?;
            host.as_mut_slice()?.copy_from_slice(&values);
            let mut device = rt.alloc_zeroed::<f32>(len)?;
            let finish = |rt: &Runtime| rt.record_event().and_then(|e| e.synchronize());
            // Warm: the first copy maps the pages for the device.
            rt.copy_from_host_async(&mut device, &host)?;
            finish(rt)?;
            let started = std::time::Instant::now();
            rt.copy_from_host_async(&mut device, &host)?;
            let enqueued = started.elapsed();
            finish(rt)?;
            let pinned = started.elapsed();
            let started = std::time::Instant::now();
            rt.copy_from_host(&mut device, &values)?;
            finish(rt)?;
            let pageable = started.elapsed();
            let mut back = rt.alloc_host::<f32>(len)?;
            rt.copy_to_host_async(&device, &mut back)?;
            let same = compare(back.as_slice()?, &values);
            let gbs = |t: std::time::Duration| (len * 4) as f64 / t.as_secs_f64() / 1e9;
            let timing = format!(
                "the call took {:.1} us of the copy's {:.1} us ({:.1} GB/s; from pageable memory {:.1} GB/s)",
                enqueued.as_secs_f64() * 1e6,
                pinned.as_secs_f64() * 1e6,
                gbs(pinned),
                gbs(pageable)
            );
            Ok(match same {
                Err(e) => Err(format!("the copy back differs: {e}")),
                Ok(_) if enqueued * 2 >= pinned => Err(format!("not asynchronous: {timing}")),
                Ok(detail) => Ok(format!("{detail} back; {timing}")),
            })
        })();
        record(report, what, outcome);
    }

    fn address<T>(slice: &CudaSlice<T>, stream: &CudaStream) -> u64 {
        slice.device_ptr(stream).0
    }

    /// saxpy on the app's stream, on slices the app allocated: warpforge
    /// takes them, writes `y` at its address, and hands the same allocation
    /// back, which the app reads on its stream.
    pub fn check_saxpy_on_app_slices(inputs: &mut Inputs, report: &mut Report) {
        let what = "cuda interop: saxpy on the app's stream and slices";
        let (x, y) = (inputs.f32s(N), inputs.f32s(N));
        let outcome = (|| -> Outcome {
            let (stream, rt) = app_stream_and_runtime()?;
            let (app_x, app_y) = (upload(&stream, &x)?, upload(&stream, &y)?);
            let y_address = address(&app_y, &stream);
            let dx = DeviceBuffer::from_cuda_slice(&rt, app_x)?;
            let mut dy = DeviceBuffer::from_cuda_slice(&rt, app_y)?;
            saxpy::launch(&rt, Grid::linear(N, 128), 1.5, &dx, &mut dy)?;
            let app_y = dy
                .into_cuda_slice()
                .map_err(|_| "into_cuda_slice refused a slice it had taken".to_string())?;
            if address(&app_y, &stream) != y_address {
                return Err("the slice handed back is another allocation".into());
            }
            let got = download(&stream, &app_y)?;
            Ok(compare(&got, &saxpy_reference(1.5, &x, &y))
                .map(|detail| format!("{detail}, in place at {y_address:#x}")))
        })();
        record(report, what, outcome);
    }

    /// saxpy on slices the app only lends (as a framework lends its tensors):
    /// borrowed buffers read `x` and write `y` where they lie, and the app,
    /// which never gave them up, reads `y` when the borrows end.
    pub fn check_borrowed_slices(inputs: &mut Inputs, report: &mut Report) {
        let what = "cuda interop: saxpy on slices the app lends";
        let (x, y) = (inputs.f32s(N), inputs.f32s(N));
        let outcome = (|| -> Outcome {
            let (stream, rt) = app_stream_and_runtime()?;
            let (app_x, mut app_y) = (upload(&stream, &x)?, upload(&stream, &y)?);
            {
                let dx = DeviceBuffer::borrow_cuda_slice(&rt, &app_x)?;
                let mut dy = DeviceBuffer::borrow_cuda_slice_mut(&rt, &mut app_y)?;
                saxpy::launch(&rt, Grid::linear(N, 128), 3.0, &*dx, &mut *dy)?;
            }
            let got = download(&stream, &app_y)?;
            Ok(compare(&got, &saxpy_reference(3.0, &x, &y))
                .map(|detail| format!("{detail}, read by the app after the borrows ended")))
        })();
        record(report, what, outcome);
    }

    /// A CUDA graph of one launch: capturing runs nothing, each replay runs
    /// the launch once more, on the capturing runtime's stream.
    pub fn check_graph_replay(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
        let what = "cuda graphs: saxpy captured once, replayed three times";
        let (x, y) = (inputs.f32s(N), inputs.f32s(N));
        let outcome = (|| -> Outcome {
            let grid = Grid::linear(N, 128);
            let dx = rt.upload(&x)?;
            let mut dy = rt.upload(&y)?;
            // Once outside the capture, so that the variant is loaded.
            saxpy::launch(rt, grid, 0.5, &dx, &mut dy)?;
            let graph =
                rt.capture(|capturing| saxpy::launch(capturing, grid, 0.5, &dx, &mut dy))?;
            let once = saxpy_reference(0.5, &x, &y);
            let captured = rt.download(&dy)?;
            if let Err(detail) = compare(&captured, &once) {
                return Ok(Err(format!("the capture ran the launch: {detail}")));
            }
            for _ in 0..3 {
                // SAFETY: dx and dy outlive the replays, and nothing else uses them.
                unsafe { graph.replay() }?;
            }
            let got = rt.download(&dy)?;
            let want = (0..3).fold(once, |acc, _| saxpy_reference(0.5, &x, &acc));
            Ok(compare(&got, &want).map(|detail| format!("{detail} after 1 launch and 3 replays")))
        })();
        record(report, what, outcome);
    }

    /// A buffer over the app's raw pointer writes the app's memory, is not
    /// handed out as a slice, and leaves the memory allocated when dropped.
    pub fn check_raw_pointer(inputs: &mut Inputs, report: &mut Report) {
        let what = "cuda interop: a buffer over the app's device pointer";
        let (x, y) = (inputs.f32s(N), inputs.f32s(N));
        let outcome = (|| -> Outcome {
            let (stream, rt) = app_stream_and_runtime()?;
            let app_y = upload(&stream, &y)?;
            let dx = rt.upload(&x)?;
            // SAFETY: `app_y` is a live allocation of N f32s on this context,
            // outlives the buffer, and nothing else touches it meanwhile.
            let mut dy =
                unsafe { DeviceBuffer::<f32>::from_raw_cuda(&rt, address(&app_y, &stream), N) }?;
            saxpy::launch(&rt, Grid::linear(N, 128), -2.0, &dx, &mut dy)?;
            let dy = match dy.into_cuda_slice() {
                Ok(_) => return Err("a borrowed pointer was handed out as a slice".into()),
                Err(buffer) => buffer,
            };
            drop(dy);
            rt.synchronize()?;
            // Still allocated: the app reads it after the buffer is gone.
            let got = download(&stream, &app_y)?;
            Ok(compare(&got, &saxpy_reference(-2.0, &x, &y))
                .map(|detail| format!("{detail}, read by the app after the buffer was dropped")))
        })();
        record(report, what, outcome);
    }
}
