//! Host memory for copies that overlap other work: [`HostBuffer`], made by
//! [`Runtime::alloc_host`], and the copies that return once enqueued,
//! [`Runtime::copy_from_host_async`] and [`Runtime::copy_to_host_async`].
//!
//! On CUDA a host buffer is page-locked (pinned) memory: the copy engine
//! reads and writes it directly, so a copy runs on the runtime's stream
//! while the host goes on, and beside kernels of other streams ([a
//! fork](Runtime::fork)). From pageable memory the driver stages every copy
//! through a pinned buffer of its own and the host waits. The buffer
//! remembers the last copy that uses it: reading or writing it
//! ([`HostBuffer::as_slice`], [`HostBuffer::as_mut_slice`]) and dropping it
//! wait for that copy first, so the host never sees a copy half done.
//!
//! wgpu has no pinned memory: a host buffer is ordinary memory there, a copy
//! to the device is enqueued on the queue as [`Runtime::copy_from_host`]
//! is, and a copy to the host has completed when it returns. The
//! interpreter's buffers are host memory: both copies have completed when
//! they return. Code written for CUDA's overlap runs unchanged, without it.

use crate::buffer::Memory;
#[cfg(feature = "cuda")]
use crate::cuda::driver_error;
use crate::runtime::{Backend, Runtime};
use crate::{DeviceBuffer, DeviceScalar, Error};

/// Host memory that the device copies to and from on a runtime's stream
/// (module docs). Made by [`Runtime::alloc_host`], zeroed.
pub struct HostBuffer<T: DeviceScalar> {
    memory: HostMemory<T>,
}

enum HostMemory<T> {
    #[cfg(feature = "cuda")]
    Pinned(cudarc::driver::PinnedHostSlice<T>),
    /// Ordinary memory, for a runtime without pinned memory (wgpu, the
    /// interpreter).
    Plain(Vec<T>),
}

impl<T: DeviceScalar> HostBuffer<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.memory {
            #[cfg(feature = "cuda")]
            HostMemory::Pinned(pinned) => pinned.len(),
            HostMemory::Plain(values) => values.len(),
        }
    }

    /// Whether the buffer has no elements (never: empty ones are refused).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements, once the last copy that uses the buffer has finished
    /// (an `Err` if waiting for it failed: a fault of the device).
    pub fn as_slice(&self) -> Result<&[T], Error> {
        match &self.memory {
            #[cfg(feature = "cuda")]
            HostMemory::Pinned(pinned) => pinned
                .as_slice()
                .map_err(|e| driver_error("waiting for a copy of a host buffer", e)),
            HostMemory::Plain(values) => Ok(values),
        }
    }

    /// The elements to write, once the last copy that uses the buffer has
    /// finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], Error> {
        match &mut self.memory {
            #[cfg(feature = "cuda")]
            HostMemory::Pinned(pinned) => pinned
                .as_mut_slice()
                .map_err(|e| driver_error("waiting for a copy of a host buffer", e)),
            HostMemory::Plain(values) => Ok(values),
        }
    }
}

impl Runtime {
    /// `len` zeroed elements of host memory for the copies that return once
    /// enqueued ([module docs](crate::host)): page-locked on CUDA, ordinary
    /// on wgpu and the interpreter. Page-locked memory is taken from the operating system's
    /// and cannot be swapped: allocate a few buffers and reuse them.
    pub fn alloc_host<T: DeviceScalar>(&self, len: usize) -> Result<HostBuffer<T>, Error> {
        crate::buffer::check_new_buffer::<T>(len)?;
        let memory = match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => HostMemory::Pinned(cuda.alloc_pinned(len)?),
            // SAFETY: every buffer element type is a number, valid as zero
            // bits (`bool`, which is not, is refused above).
            _ => HostMemory::Plain(vec![unsafe { std::mem::zeroed::<T>() }; len]),
        };
        Ok(HostBuffer { memory })
    }

    /// Enqueues a copy of `host` into `target` (of the same length) after the
    /// work enqueued before, and returns: on CUDA the host may go on while
    /// the copy runs, and `host` waits for it before it is read, written or
    /// dropped again. Kernels launched after it on this runtime see the data.
    pub fn copy_from_host_async<T: DeviceScalar>(
        &self,
        target: &mut DeviceBuffer<T>,
        host: &HostBuffer<T>,
    ) -> Result<(), Error> {
        check_lengths(
            host.len(),
            target.len(),
            "into a device buffer",
            T::SCALAR.name(),
        )?;
        match (&self.backend, &mut target.memory, &host.memory) {
            #[cfg(feature = "cuda")]
            (Backend::Cuda(cuda), Memory::Cuda(slice), HostMemory::Pinned(pinned)) => {
                cuda.copy_from_pinned(slice, pinned)
            }
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu(wgpu), Memory::Wgpu(memory, _), HostMemory::Plain(values)) => {
                wgpu.copy_from_host(memory, values)
            }
            (
                Backend::Interpreter(interpreter),
                Memory::Interpreter(memory, _),
                HostMemory::Plain(values),
            ) => interpreter.copy_from_host(memory, values),
            #[allow(unreachable_patterns)]
            _ => Err(self.foreign_memory()),
        }
    }

    /// Enqueues a copy of `source` into `host` (of the same length) after the
    /// work enqueued before, and returns: read `host` with
    /// [`HostBuffer::as_slice`], which waits for the copy. On wgpu the copy
    /// has completed when this returns.
    pub fn copy_to_host_async<T: DeviceScalar>(
        &self,
        source: &DeviceBuffer<T>,
        host: &mut HostBuffer<T>,
    ) -> Result<(), Error> {
        check_lengths(
            source.len(),
            host.len(),
            "into a host buffer",
            T::SCALAR.name(),
        )?;
        match (&self.backend, &source.memory, &mut host.memory) {
            #[cfg(feature = "cuda")]
            (Backend::Cuda(cuda), Memory::Cuda(slice), HostMemory::Pinned(pinned)) => {
                cuda.copy_to_pinned(slice, pinned)
            }
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu(wgpu), Memory::Wgpu(memory, _), HostMemory::Plain(values)) => {
                values.copy_from_slice(&wgpu.download::<T>(memory)?);
                Ok(())
            }
            (
                Backend::Interpreter(interpreter),
                Memory::Interpreter(memory, _),
                HostMemory::Plain(values),
            ) => {
                values.copy_from_slice(&interpreter.download::<T>(memory));
                Ok(())
            }
            #[allow(unreachable_patterns)]
            _ => Err(self.foreign_memory()),
        }
    }

    fn foreign_memory(&self) -> Error {
        Error::Buffer(format!(
            "a buffer of this copy was made by a runtime on another backend, and this runtime \
             runs on {}: make both the device buffer and the host buffer with this runtime",
            self.backend_name()
        ))
    }
}

fn check_lengths(from: usize, to: usize, what: &str, elem: &str) -> Result<(), Error> {
    if from != to {
        return Err(Error::Buffer(format!(
            "cannot copy {from} {elem} values {what} of {to}: the lengths must be equal (allocate \
             a buffer of the other's length)"
        )));
    }
    Ok(())
}
