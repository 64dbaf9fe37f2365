//! Sharing devices, streams and memory with the app, without copies: a
//! [`Runtime`] on the app's CUDA stream or wgpu device, and
//! [`DeviceBuffer`]s made from and turned back into the app's `CudaSlice`s,
//! raw device pointers and `wgpu::Buffer`s.
//!
//! Memory from the app is checked as far as the API allows (its context, its
//! usages, its size) and then is a buffer like any other: launches, copies
//! and downloads take it.

#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use cudarc::driver::{CudaSlice, CudaStream};

use crate::buffer::{check_new_buffer, DeviceBuffer, Memory};
use crate::runtime::Runtime;
use crate::scalar::DeviceScalar;
use crate::Error;

#[cfg(feature = "cuda")]
impl Runtime {
    /// A runtime whose work all goes to the app's `stream`, on the stream's
    /// context: launches and copies are ordered with the app's own work on
    /// that stream, with no synchronisation between the two. cudarc's event
    /// tracking stays as the app set it; with it on (cudarc's default), a
    /// launch also waits for the last use of each buffer it takes on any
    /// other stream.
    pub fn cuda_on_stream(stream: Arc<CudaStream>) -> Result<Runtime, Error> {
        Ok(Runtime::from_cuda(crate::cuda::CudaBackend::on_stream(
            stream,
        )?))
    }

    /// The CUDA stream all of this runtime's work goes to, for calling CUDA
    /// libraries or the app's own kernels in order with it; `None` on wgpu and
    /// the interpreter.
    pub fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        self.as_cuda().map(|cuda| &cuda.stream)
    }
}

#[cfg(feature = "wgpu")]
impl Runtime {
    /// A runtime on the app's wgpu device and queue (clones of the handles:
    /// the app keeps using its own). Its limits and features are the device's,
    /// and f16 and subgroup kernels need the device to have been created with
    /// `SHADER_F16` and `SUBGROUP`. The runtime sets no error handler on it:
    /// its own operations run inside error scopes, and what escapes them
    /// goes to the app's uncaptured-error handler.
    pub fn wgpu_on_device(device: &wgpu::Device, queue: &wgpu::Queue) -> Runtime {
        Runtime::from_wgpu(crate::wgpu_backend::WgpuBackend::on_device(
            device.clone(),
            queue.clone(),
        ))
    }

    /// The wgpu device and queue this runtime drives, for the app's own
    /// pipelines and copies; `None` on CUDA and the interpreter.
    pub fn wgpu_device(&self) -> Option<(&wgpu::Device, &wgpu::Queue)> {
        self.as_wgpu().map(|wgpu| (&wgpu.device, &wgpu.queue))
    }
}

#[cfg(feature = "cuda")]
impl<T: DeviceScalar> DeviceBuffer<T> {
    /// A buffer that takes over the app's `slice` (and frees it when
    /// dropped). The slice must belong to the runtime's CUDA context.
    pub fn from_cuda_slice(rt: &Runtime, slice: CudaSlice<T>) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(slice.len())?;
        let cuda = rt.cuda_backend("taking a CudaSlice")?;
        Ok(DeviceBuffer {
            memory: Memory::Cuda(cuda.adopt(slice)?),
        })
    }

    /// A buffer over `len` elements of `T` at the device address `ptr`, which
    /// the app keeps: dropping the buffer does not free the memory. For
    /// memory that another library owns (a framework's tensor), borrowed for
    /// as long as the buffer lives.
    ///
    /// # Safety
    /// `ptr` must be an allocation of at least `len * size_of::<T>()` bytes in
    /// the runtime's CUDA context (or one it can access), aligned to
    /// `align_of::<T>()`, that stays allocated while the buffer lives, and no
    /// other code may write it while a launch that reads it, or access it
    /// while a launch that writes it, may run. Kernels with 16-byte copies
    /// (`cp.async`, vector accesses) or TMA also need the address to be a
    /// multiple of [`crate::VIEW_ALIGN_BYTES`], as an allocation's start is;
    /// nothing checks that for a raw pointer.
    pub unsafe fn from_raw_cuda(
        rt: &Runtime,
        ptr: cudarc::driver::sys::CUdeviceptr,
        len: usize,
    ) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(len)?;
        let align = std::mem::align_of::<T>() as u64;
        if ptr == 0 || !ptr.is_multiple_of(align) {
            return Err(Error::Buffer(format!(
                "the device address {ptr:#x} cannot hold {} values: it must be non-null and a \
                 multiple of {align}",
                T::SCALAR.name()
            )));
        }
        let cuda = rt.cuda_backend("wrapping a device pointer")?;
        // SAFETY: the caller's promises are this function's.
        let memory = unsafe { cuda.borrow_raw(ptr, len) };
        Ok(DeviceBuffer {
            memory: Memory::Cuda(memory),
        })
    }

    /// The buffer's CUDA slice, for CUDA libraries and the app's own kernels
    /// (on [`Runtime::cuda_stream`], to stay in order); `None` on wgpu and
    /// the interpreter.
    pub fn cuda_slice(&self) -> Option<&CudaSlice<T>> {
        match &self.memory {
            Memory::Cuda(buffer) => Some(buffer),
            _ => None,
        }
    }

    /// The buffer's CUDA slice, to write; `None` on wgpu and the interpreter.
    pub fn cuda_slice_mut(&mut self) -> Option<&mut CudaSlice<T>> {
        match &mut self.memory {
            Memory::Cuda(buffer) => Some(buffer),
            _ => None,
        }
    }

    /// The buffer's CUDA slice, handed to the app (which then frees it).
    /// `Err` gives the buffer back when it holds no slice to hand over: a
    /// wgpu or interpreter buffer, or one over memory the app keeps
    /// ([`DeviceBuffer::from_raw_cuda`]).
    pub fn into_cuda_slice(self) -> Result<CudaSlice<T>, DeviceBuffer<T>> {
        match self.memory {
            Memory::Cuda(buffer) => buffer.into_slice().map_err(|buffer| DeviceBuffer {
                memory: Memory::Cuda(buffer),
            }),
            memory => Err(DeviceBuffer { memory }),
        }
    }
}

/// A buffer over an app's `CudaSlice`, borrowed for `'a`
/// ([`DeviceBuffer::borrow_cuda_slice`], [`DeviceBuffer::borrow_cuda_slice_mut`]):
/// it derefs to a [`DeviceBuffer`], so launches take it as any buffer, and
/// the slice stays the app's (never freed or handed out through it). With
/// `Access` = [`Shared`] it can only be read; with [`Exclusive`], written.
#[cfg(feature = "cuda")]
pub struct BorrowedBuffer<'a, T: DeviceScalar, Access> {
    buffer: DeviceBuffer<T>,
    borrow: std::marker::PhantomData<(&'a CudaSlice<T>, Access)>,
}

/// The access of a [`BorrowedBuffer`] made from `&CudaSlice`: read only.
#[cfg(feature = "cuda")]
pub struct Shared;

/// The access of a [`BorrowedBuffer`] made from `&mut CudaSlice`: read and write.
#[cfg(feature = "cuda")]
pub struct Exclusive;

#[cfg(feature = "cuda")]
impl<T: DeviceScalar, Access> std::ops::Deref for BorrowedBuffer<'_, T, Access> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        &self.buffer
    }
}

#[cfg(feature = "cuda")]
impl<T: DeviceScalar> std::ops::DerefMut for BorrowedBuffer<'_, T, Exclusive> {
    fn deref_mut(&mut self) -> &mut DeviceBuffer<T> {
        &mut self.buffer
    }
}

#[cfg(feature = "cuda")]
impl<T: DeviceScalar> DeviceBuffer<T> {
    /// The app's `slice` as a buffer to read, for as long as the borrow
    /// lasts, with no copy (a framework's input tensor, say). The slice must
    /// belong to the runtime's context; put the runtime on the stream the
    /// app uses ([`Runtime::cuda_on_stream`]) so that the launches are ordered
    /// with the app's work on the slice.
    pub fn borrow_cuda_slice<'a>(
        rt: &Runtime,
        slice: &'a CudaSlice<T>,
    ) -> Result<BorrowedBuffer<'a, T, Shared>, Error> {
        Ok(BorrowedBuffer {
            buffer: DeviceBuffer::over_cuda_slice(rt, slice)?,
            borrow: std::marker::PhantomData,
        })
    }

    /// The app's `slice` as a buffer to write, for as long as the borrow
    /// lasts: as [`DeviceBuffer::borrow_cuda_slice`], exclusive.
    pub fn borrow_cuda_slice_mut<'a>(
        rt: &Runtime,
        slice: &'a mut CudaSlice<T>,
    ) -> Result<BorrowedBuffer<'a, T, Exclusive>, Error> {
        Ok(BorrowedBuffer {
            buffer: DeviceBuffer::over_cuda_slice(rt, slice)?,
            borrow: std::marker::PhantomData,
        })
    }

    fn over_cuda_slice(rt: &Runtime, slice: &CudaSlice<T>) -> Result<DeviceBuffer<T>, Error> {
        let cuda = rt.cuda_backend("borrowing a CudaSlice")?;
        cuda.check_slice_owner(slice)?;
        let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(slice, &cuda.stream);
        // SAFETY: the slice is a live allocation of its length in this
        // context, and the borrow the caller holds keeps it so (and keeps
        // others from writing it, or from touching it when borrowed
        // exclusively) while the buffer lives.
        unsafe { DeviceBuffer::from_raw_cuda(rt, ptr, slice.len()) }
    }
}

#[cfg(feature = "wgpu")]
impl<T: DeviceScalar> DeviceBuffer<T> {
    /// A buffer that takes over the app's `buffer` as `len` elements of `T`.
    /// It must have been created on the runtime's device with
    /// `BufferUsages::STORAGE | COPY_SRC | COPY_DST` (kernels bind it; copies
    /// and downloads copy from and to it) and hold at least `len` elements,
    /// rounded up to 4 bytes; `T` must be a type WGSL stores (f32, i32, u32,
    /// f16). A buffer of another device is refused by wgpu's validation at
    /// its first use.
    pub fn from_wgpu_buffer(
        rt: &Runtime,
        buffer: wgpu::Buffer,
        len: usize,
    ) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(len)?;
        let wgpu = rt.wgpu_backend("taking a wgpu::Buffer")?;
        Ok(DeviceBuffer {
            memory: Memory::Wgpu(wgpu.adopt::<T>(buffer, len)?, std::marker::PhantomData),
        })
    }

    /// The buffer's `wgpu::Buffer`, for the app's own pipelines and copies;
    /// `None` on CUDA and the interpreter. It may be longer than the elements
    /// (rounded up to 4 bytes, or as the app made it).
    pub fn wgpu_buffer(&self) -> Option<&wgpu::Buffer> {
        match &self.memory {
            Memory::Wgpu(buffer, _) => Some(&buffer.buffer),
            _ => None,
        }
    }

    /// The buffer's `wgpu::Buffer`, handed to the app; `Err` gives a CUDA
    /// or interpreter buffer back.
    pub fn into_wgpu_buffer(self) -> Result<wgpu::Buffer, DeviceBuffer<T>> {
        match self.memory {
            Memory::Wgpu(buffer, _) => Ok(buffer.buffer),
            memory => Err(DeviceBuffer { memory }),
        }
    }
}
