//! Copies between the buffers of two runtimes: [`Runtime::copy_to_peer`],
//! for apps that drive several GPUs, one runtime each.

use crate::buffer::Memory;
use crate::runtime::Backend;
use crate::{BufferMut, BufferRef, DeviceScalar, Error, Runtime};

/// How [`Runtime::copy_to_peer`] moved the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRoute {
    /// Both runtimes drive one device (two runtimes of a GPU, a fork, or the
    /// interpreter, whose buffers are all host memory): a copy on the device.
    SameDevice,
    /// Directly between the GPUs, over NVLink or PCIe: the source device's
    /// access to the target's memory is enabled on the first copy.
    PeerAccess,
    /// The GPUs cannot access each other's memory: the driver staged the
    /// copy through host memory (`cuMemcpyPeerAsync` does, without
    /// blocking the host).
    ThroughHost,
}

impl Runtime {
    /// Copies `source`, a buffer or view ([`crate::DeviceBuffer::slice`]) of
    /// this runtime, into `target`, a buffer or view of `target_runtime`, of
    /// the same length: between two GPUs, or two runtimes of one GPU. On
    /// CUDA the copy is enqueued on this runtime's stream after the work
    /// enqueued on both runtimes so far, and `target_runtime`'s later work
    /// waits for it; the host does not wait. Returns the route it took
    /// ([`PeerRoute`]): directly between the GPUs where the driver allows
    /// peer access, else staged by the driver through host memory.
    ///
    /// Between runtimes of the interpreter it copies host bytes. A copy
    /// between two backends, or from or to a wgpu runtime (a wgpu device
    /// cannot reach another's buffers), is an [`Error::Buffer`] that says
    /// so: [`Runtime::download`] from one and [`Runtime::copy_from_host`]
    /// into the other instead.
    pub fn copy_to_peer<'s, 't, T: DeviceScalar>(
        &self,
        source: impl Into<BufferRef<'s, T>>,
        target_runtime: &Runtime,
        target: impl Into<BufferMut<'t, T>>,
    ) -> Result<PeerRoute, Error> {
        let (source, source_offset, len) = source.into().parts();
        let mut target = target.into();
        let (target, target_offset, target_len) = target.parts_mut();
        if len != target_len {
            return Err(Error::Buffer(format!(
                "cannot copy {len} {} values into {target_len}: the source and target of a peer \
                 copy must have the same length (take views of equal length with slice and \
                 slice_mut)",
                T::SCALAR.name()
            )));
        }
        match (
            &self.backend,
            &source.memory,
            &target_runtime.backend,
            &mut target.memory,
        ) {
            #[cfg(feature = "cuda")]
            (
                Backend::Cuda(from),
                Memory::Cuda(source),
                Backend::Cuda(to),
                Memory::Cuda(target),
            ) => from.copy_to_peer(source, source_offset, to, target, target_offset, len),
            (
                Backend::Interpreter(_),
                Memory::Interpreter(source, _),
                Backend::Interpreter(_),
                Memory::Interpreter(target, _),
            ) => {
                let bytes = len * std::mem::size_of::<T>();
                let (from, to) = (source_offset as usize, target_offset as usize);
                target.bytes[to..to + bytes].copy_from_slice(&source.bytes[from..from + bytes]);
                Ok(PeerRoute::SameDevice)
            }
            #[allow(unreachable_patterns)]
            _ => Err(self.no_peer_copy(target_runtime)),
        }
    }

    /// Why a peer copy from this runtime's buffers to `target`'s cannot be
    /// done: they are on different backends, on wgpu, or a buffer is of
    /// another runtime's backend.
    fn no_peer_copy(&self, target: &Runtime) -> Error {
        let (from, to) = (self.backend_name(), target.backend_name());
        let why = if self.device().backend.kind() != target.device().backend.kind() {
            format!("this runtime runs on {from} and the target runtime on {to}")
        } else if from.starts_with("wgpu") {
            "wgpu has no copies between devices".to_string()
        } else {
            format!("a buffer of the copy was created by a runtime on another backend than {from}")
        };
        Error::Buffer(format!(
            "cannot copy between the buffers of these runtimes: {why}. Download the source \
             (Runtime::download) and copy it into the target (Runtime::copy_from_host) instead"
        ))
    }
}
