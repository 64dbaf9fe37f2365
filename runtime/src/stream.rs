//! More streams of work on one device: [`Runtime::fork`], and [`Event`]s
//! that order them.
//!
//! A fork is a runtime on a new CUDA stream of the same context, sharing the
//! device's buffers and compiled variants: either runtime launches on the
//! other's buffers. The fork starts after the work enqueued on its parent
//! so far; from then on the two run concurrently, ordered only by events
//! (`a.wait_for(&b.record_event()?)`). A buffer is freed on the stream of
//! the runtime that made it when it is dropped: drop it only once that
//! stream is ordered after every use (an event, or a synchronize).
//!
//! On wgpu a device has one queue, which runs work in submission order: a
//! fork shares it, adds no concurrency, and waits for events are already met.
//! On the interpreter every operation has finished when it returns: a fork
//! shares its buffers and variants, and every event is met when recorded.

use crate::runtime::{Backend, Runtime};
use crate::Error;

/// The end of a runtime's work at the moment it was recorded
/// ([`Runtime::record_event`]): other runtimes of the device wait for it
/// ([`Runtime::wait_for`]), the host with [`Event::synchronize`].
pub struct Event {
    kind: EventKind,
}

enum EventKind {
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaEvent),
    #[cfg(feature = "wgpu")]
    Wgpu(crate::wgpu_backend::WgpuEvent),
    /// The interpreter's work is done when it returns.
    Done,
}

impl Runtime {
    /// A runtime on a new stream of this device (module docs): it sees the
    /// work enqueued here so far, then runs beside this one.
    pub fn fork(&self) -> Result<Runtime, Error> {
        Ok(match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => Runtime::from_cuda(cuda.fork()?),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => Runtime::from_wgpu(wgpu.fork()),
            Backend::Interpreter(interpreter) => {
                Runtime::from_backend(Backend::Interpreter(interpreter.fork()))
            }
        })
    }

    /// An event at the current end of this runtime's work.
    pub fn record_event(&self) -> Result<Event, Error> {
        let kind = match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => EventKind::Cuda(cuda.record_event()?),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => EventKind::Wgpu(wgpu.record_event()),
            Backend::Interpreter(_) => EventKind::Done,
        };
        Ok(Event { kind })
    }

    /// Makes the work enqueued on this runtime from now on wait for `event`
    /// (recorded by this runtime or another of the same device) without
    /// blocking the host.
    pub fn wait_for(&self, event: &Event) -> Result<(), Error> {
        match &event.kind {
            #[cfg(feature = "cuda")]
            EventKind::Cuda(event) => self
                .cuda_backend("waiting for a CUDA event")?
                .wait_for(event),
            // One queue runs everything in submission order.
            #[cfg(feature = "wgpu")]
            EventKind::Wgpu(_) => self.wgpu_backend("waiting for a wgpu event").map(|_| ()),
            EventKind::Done => Ok(()),
        }
    }
}

impl Event {
    /// Blocks the host until the work before the event is done, and reports
    /// a fault of it.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.kind {
            #[cfg(feature = "cuda")]
            EventKind::Cuda(event) => event
                .synchronize()
                .map_err(|e| crate::cuda::driver_error("waiting for an event", e)),
            #[cfg(feature = "wgpu")]
            EventKind::Wgpu(event) => event.synchronize(),
            EventKind::Done => Ok(()),
        }
    }
}

/// Launches recorded once by [`Runtime::capture`] and run again by
/// [`Graph::replay`] for the host cost of one launch (CUDA graphs).
#[cfg(feature = "cuda")]
pub struct Graph {
    graph: cudarc::driver::CudaGraph,
    /// The stream of the runtime that captured it, where replays run.
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
}

#[cfg(feature = "cuda")]
impl Runtime {
    /// Records the launches and device-to-device copies that `work` enqueues
    /// on the runtime it is given (a fork of this one) into a graph, without
    /// running them; [`Graph::replay`] runs them on this runtime's stream.
    /// Launch each kernel once before capturing it: a graph holds the
    /// loaded variant and the arguments as they were (buffer addresses and
    /// scalars). Host copies cannot be captured (a download waits for the
    /// GPU, which a capturing stream refuses; an upload would keep a pointer
    /// to host memory): the driver's refusal comes back as an `Err`. CUDA only.
    pub fn capture(
        &self,
        work: impl FnOnce(&Runtime) -> Result<(), Error>,
    ) -> Result<Graph, Error> {
        let cuda = self.cuda_backend("capturing a graph")?;
        // The legacy default stream cannot be captured; a fork's stream can.
        let fork = cuda.fork()?;
        let stream = fork.stream.clone();
        let capturing = Runtime::from_cuda(fork);
        stream
            .begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| crate::cuda::driver_error("starting a graph capture", e))?;
        let worked = work(&capturing);
        // Ended whatever `work` did, so that the stream leaves capture mode.
        let ended = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
        worked?;
        let graph = ended
            .map_err(|e| crate::cuda::driver_error("ending the graph capture", e))?
            .ok_or_else(|| {
                Error::Buffer(
                    "the capture recorded no work: launch kernels on the runtime the closure \
                     is given, not on the one that captures"
                        .into(),
                )
            })?;
        Ok(Graph {
            graph,
            stream: cuda.stream.clone(),
        })
    }
}

#[cfg(feature = "cuda")]
impl Graph {
    /// Enqueues the captured work again on the stream of the runtime that
    /// captured it, after the work before it there.
    ///
    /// # Safety
    /// Every buffer the captured work used must still be alive (the graph
    /// holds their addresses, not borrows), and no other work may access
    /// them in ways the captured launches would race with.
    pub unsafe fn replay(&self) -> Result<(), Error> {
        // SAFETY: the executable graph and the stream are live (owned here);
        // the buffers are the caller's promise.
        unsafe {
            cudarc::driver::result::graph::launch(
                self.graph.cu_graph_exec(),
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| crate::cuda::driver_error("replaying a graph", e))
    }
}
