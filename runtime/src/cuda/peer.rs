//! Copies between the buffers of two CUDA runtimes ([`crate::Runtime::copy_to_peer`]).
//!
//! On one context (two runtimes of one device, or a fork) the copy is an
//! ordinary device-to-device copy. Across devices it is `cuMemcpyPeerAsync`,
//! after enabling the source context's access to the target's memory when
//! `cuDeviceCanAccessPeer` allows it: then the copy goes directly over
//! NVLink or PCIe. Where the GPUs cannot reach each other, the same call
//! has the driver stage the copy through host memory, asynchronously and in
//! pipelined chunks, which a copy staged by hand through a pinned buffer
//! could only match by blocking the host between its two halves.

use std::collections::HashMap;
use std::mem::size_of;

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{result, CudaSlice};

use super::driver_error::driver_error;
use super::{CudaBackend, CudaMemory};
use crate::peer::PeerRoute;
use crate::scalar::DeviceScalar;
use crate::Error;

/// Whether a context may access each other device's memory, by ordinal:
/// asked and enabled once per pair.
pub(crate) type PeerAccess = std::sync::Mutex<HashMap<usize, bool>>;

impl CudaBackend {
    /// Enqueues a copy of `len` elements from `source`, `source_offset`
    /// bytes in, to `target` of `peer`'s device, `target_offset` bytes in
    /// (the caller checks the ranges). It runs on this runtime's stream
    /// after the work enqueued on both runtimes so far, and the peer's later
    /// work waits for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_to_peer<T: DeviceScalar>(
        &self,
        source: &CudaSlice<T>,
        source_offset: u64,
        peer: &CudaBackend,
        target: &mut CudaSlice<T>,
        target_offset: u64,
        len: usize,
    ) -> Result<PeerRoute, Error> {
        self.check_owner(source.context(), || "the buffer to copy from".into())?;
        peer.check_owner(target.context(), || "the buffer to copy into".into())?;
        let route = if self.ctx == peer.ctx {
            PeerRoute::SameDevice
        } else if self.enable_peer_access(peer)? {
            PeerRoute::PeerAccess
        } else {
            PeerRoute::ThroughHost
        };
        let bytes = len * size_of::<T>();
        let op = || {
            format!(
                "copying {len} {} values from CUDA device {} to device {}",
                T::SCALAR.name(),
                self.info.ordinal,
                peer.info.ordinal
            )
        };
        let one_stream = self.stream.cu_stream() == peer.stream.cu_stream();
        if !one_stream {
            // Streams of other contexts may wait for each other's events.
            let peer_done = peer.record_event()?;
            self.stream
                .wait(&peer_done)
                .map_err(|e| driver_error(&op(), e))?;
        }
        // Each pointer on its own context's stream: cudarc's read and write
        // events (when the app's tracking is on) are recorded there.
        let (source_ptr, _source_use) = source.read_ptr(&self.stream);
        let (target_ptr, _target_use) = target.write_ptr(&peer.stream);
        let (source_ptr, target_ptr) = (source_ptr + source_offset, target_ptr + target_offset);
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))?;
        // SAFETY: both ranges lie within live allocations of their contexts
        // (the caller checked them against the buffers, which the borrows keep
        // alive until the copy is enqueued; a buffer is freed on its stream,
        // after the copy); the stream is this context's.
        unsafe {
            match route {
                PeerRoute::SameDevice => result::memcpy_dtod_async(
                    target_ptr,
                    source_ptr,
                    bytes,
                    self.stream.cu_stream(),
                ),
                PeerRoute::PeerAccess | PeerRoute::ThroughHost => result::memcpy_peer_async(
                    peer.ctx.cu_ctx(),
                    target_ptr,
                    self.ctx.cu_ctx(),
                    source_ptr,
                    bytes,
                    self.stream.cu_stream(),
                ),
            }
        }
        .map_err(|e| driver_error(&op(), e))?;
        if !one_stream {
            let copied = self.record_event()?;
            peer.stream
                .wait(&copied)
                .map_err(|e| driver_error(&op(), e))?;
        }
        self.check_recorded(op())?;
        Ok(route)
    }

    /// Whether this context can access `peer`'s memory, enabling the access
    /// on the first ask. `false` where the GPUs cannot reach each other, or
    /// the context already has the most peers the platform allows.
    fn enable_peer_access(&self, peer: &CudaBackend) -> Result<bool, Error> {
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&enabled) = peers.get(&peer.info.ordinal) {
            return Ok(enabled);
        }
        let op = format!(
            "asking whether CUDA device {} can access device {}'s memory",
            self.info.ordinal, peer.info.ordinal
        );
        let mut can_access = 0;
        // SAFETY: the driver writes one int; both devices are valid handles of live contexts.
        unsafe {
            sys::cuDeviceCanAccessPeer(&mut can_access, self.ctx.cu_device(), peer.ctx.cu_device())
        }
        .result()
        .map_err(|e| driver_error(&op, e))?;
        let enabled = can_access != 0 && {
            self.ctx
                .bind_to_thread()
                .map_err(|e| driver_error("making the CUDA context current", e))?;
            // SAFETY: this context is current; the peer context is live.
            match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) } {
                CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => true,
                CUresult::CUDA_ERROR_TOO_MANY_PEERS
                | CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED => {
                    log::info!(
                        "CUDA device {} cannot enable access to device {}: copies between them \
                         go through host memory",
                        self.info.ordinal,
                        peer.info.ordinal
                    );
                    false
                }
                code => {
                    return Err(driver_error(
                        &format!(
                            "enabling CUDA device {}'s access to device {}'s memory",
                            self.info.ordinal, peer.info.ordinal
                        ),
                        result::DriverError(code),
                    ))
                }
            }
        };
        peers.insert(peer.info.ordinal, enabled);
        Ok(enabled)
    }
}
