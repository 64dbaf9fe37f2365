//! The CUDA backend: a context and stream on one device (cudarc, with the
//! driver loaded at run time), buffers, the module cache, launches, timing
//! and cuBLAS (cuBLASLt for the 8-bit float GEMMs).

#[cfg(feature = "cublas")]
mod cublas;
#[cfg(feature = "cublas")]
mod cublaslt;
mod driver_error;
mod launch;
pub(crate) mod library;
mod module;
mod peer;
mod saved;

use std::mem::ManuallyDrop;
use std::sync::Arc;
#[cfg(feature = "cublas")]
use std::sync::OnceLock;

#[cfg(feature = "cublas")]
use cudarc::cublas::CudaBlas;
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUresult};
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice, SyncOnDrop,
};

use crate::device::{DeviceBackend, DeviceInfo};
use crate::scalar::DeviceScalar;
use crate::tune::VariantResources;
use crate::Error;
pub(crate) use driver_error::driver_error;
use driver_error::{code_name, driver_hint};

use module::ModuleCache;

/// The oldest driver the runtime runs on: the bindings are those of CUDA 12,
/// and sm_90 PTX needs a CUDA 12 driver.
const MIN_DRIVER_VERSION: (u32, u32) = (12, 0);

pub(crate) struct CudaBackend {
    pub(crate) ctx: Arc<CudaContext>,
    /// Every operation of the runtime goes to this stream, in order.
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) info: DeviceInfo,
    /// Shared with the runtimes forked from this one (same context).
    pub(crate) modules: Arc<ModuleCache>,
    /// Which other devices' memory this context may access (peer copies).
    peers: peer::PeerAccess,
    /// Created on first use: a cuBLAS handle costs time and memory.
    #[cfg(feature = "cublas")]
    blas: OnceLock<CudaBlas>,
    /// Created on first use, like `blas`: a cuBLASLt handle and its
    /// workspace (32 MiB on Hopper).
    #[cfg(feature = "cublas")]
    blas_lt: OnceLock<cublaslt::BlasLt>,
}

impl CudaBackend {
    pub(crate) fn new(ordinal: usize) -> Result<CudaBackend, Error> {
        // Any cudarc driver call panics when libcuda cannot be loaded, so this comes first.
        if !library::driver_loads() {
            return Err(Error::NoDriver(
                "no CUDA driver found: the library libcuda.so (libcuda.so.1) could not be loaded. \
                 Install the NVIDIA driver (a CUDA toolkit alone does not provide it) and make sure \
                 its directory is on the library search path (LD_LIBRARY_PATH)."
                    .into(),
            ));
        }
        result::init().map_err(init_error)?;
        // Checked before the ordinal, so that an old driver is named as the cause.
        let driver_version = driver_version()?;
        check_driver_version(driver_version)?;
        let count = result::device::get_count().map_err(init_error)?.max(0) as usize;
        if ordinal >= count {
            let visible = match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(v) => format!("CUDA_VISIBLE_DEVICES is `{v}`"),
                Err(_) => "CUDA_VISIBLE_DEVICES is not set".to_string(),
            };
            return Err(Error::NoDevice(format!(
                "CUDA device {ordinal} was asked for, and the driver sees {count} device(s) \
                 ({visible}): use an ordinal below {count}, check that nvidia-smi lists the GPU, \
                 and that CUDA_VISIBLE_DEVICES names it"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            driver_error(&format!("creating a context on CUDA device {ordinal}"), e)
        })?;
        // cudarc records an event per buffer per use (and makes streams wait on
        // them) to order work across streams; everything here runs on the one
        // stream below, which orders it already, and the events cost a driver
        // call per buffer argument of every launch.
        // SAFETY: called before this context allocates anything; every buffer
        // of this runtime is created, used and freed on `stream` alone.
        unsafe { ctx.disable_event_tracking() };
        CudaBackend::with_stream(ctx.default_stream(), driver_version)
    }

    /// A backend on an app's stream (and so its context). The app's event
    /// tracking stays as the app set it: with it on (cudarc's default), each
    /// launch orders itself after the last use of every buffer it takes, on
    /// whatever stream that was.
    pub(crate) fn on_stream(stream: Arc<CudaStream>) -> Result<CudaBackend, Error> {
        // The stream exists, so cudarc has loaded and initialised the driver.
        let driver_version = driver_version()?;
        check_driver_version(driver_version)?;
        CudaBackend::with_stream(stream, driver_version)
    }

    fn with_stream(
        stream: Arc<CudaStream>,
        driver_version: (u32, u32),
    ) -> Result<CudaBackend, Error> {
        let ctx = stream.context().clone();
        let info = query_device(&ctx, driver_version)?;
        Ok(CudaBackend {
            ctx,
            stream,
            info,
            modules: Arc::default(),
            peers: Default::default(),
            #[cfg(feature = "cublas")]
            blas: OnceLock::new(),
            #[cfg(feature = "cublas")]
            blas_lt: OnceLock::new(),
        })
    }

    /// A backend on a new stream of this context that starts after the work
    /// enqueued here so far, sharing the loaded modules.
    pub(crate) fn fork(&self) -> Result<CudaBackend, Error> {
        let stream = self
            .stream
            .fork()
            .map_err(|e| driver_error("creating a stream", e))?;
        Ok(CudaBackend {
            ctx: self.ctx.clone(),
            stream,
            info: self.info.clone(),
            modules: self.modules.clone(),
            // Asked again on the fork's first peer copy: the driver reports the
            // access this context enabled as already enabled.
            peers: Default::default(),
            // A cuBLAS handle is bound to its stream.
            #[cfg(feature = "cublas")]
            blas: OnceLock::new(),
            // A cuBLASLt workspace must serve one stream at a time.
            #[cfg(feature = "cublas")]
            blas_lt: OnceLock::new(),
        })
    }

    /// An event at the current end of this stream's work.
    pub(crate) fn record_event(&self) -> Result<cudarc::driver::CudaEvent, Error> {
        let event = self
            .ctx
            .new_event(None)
            .map_err(|e| driver_error("creating an event", e))?;
        event
            .record(&self.stream)
            .map_err(|e| driver_error("recording an event", e))?;
        Ok(event)
    }

    /// Makes this stream's later work wait for `event`.
    pub(crate) fn wait_for(&self, event: &cudarc::driver::CudaEvent) -> Result<(), Error> {
        self.check_owner(event.context(), || "the event".into())?;
        self.stream
            .wait(event)
            .map_err(|e| driver_error("making a stream wait for an event", e))
    }

    /// Takes an app's slice as a buffer of this runtime.
    pub(crate) fn adopt<T: DeviceScalar>(
        &self,
        slice: CudaSlice<T>,
    ) -> Result<CudaBuffer<T>, Error> {
        self.check_slice_owner(&slice)?;
        Ok(CudaBuffer::owning(slice))
    }

    /// Refuses an app's slice of another device's context.
    pub(crate) fn check_slice_owner<T: DeviceScalar>(
        &self,
        slice: &CudaSlice<T>,
    ) -> Result<(), Error> {
        self.check_owner(slice.context(), || {
            format!(
                "the CudaSlice of {} {} values",
                slice.len(),
                T::SCALAR.name()
            )
        })
    }

    /// A buffer over `len` elements at `ptr`, which the buffer does not free.
    ///
    /// # Safety
    /// As [`crate::DeviceBuffer::from_raw_cuda`].
    pub(crate) unsafe fn borrow_raw<T: DeviceScalar>(
        &self,
        ptr: sys::CUdeviceptr,
        len: usize,
    ) -> CudaBuffer<T> {
        // SAFETY: the caller promises a live allocation of `len` elements in
        // this context; the buffer never frees it.
        CudaBuffer {
            slice: ManuallyDrop::new(unsafe { self.stream.upgrade_device_ptr(ptr, len) }),
            frees: false,
        }
    }

    /// Surfaces errors that cudarc recorded where it could not return them
    /// (drops, stream syncs at the end of copies). `op` is formatted only
    /// for an error: this runs after every launch.
    fn check_recorded(&self, op: impl std::fmt::Display) -> Result<(), Error> {
        self.ctx
            .check_err()
            .map_err(|e| driver_error(&op.to_string(), e))
    }

    /// Refuses memory of another device's context.
    fn check_owner(
        &self,
        owner: &Arc<CudaContext>,
        what: impl FnOnce() -> String,
    ) -> Result<(), Error> {
        if **owner != *self.ctx {
            return Err(Error::Buffer(format!(
                "{} belongs to CUDA device {} and this runtime drives device {}: create the \
                 buffer with this runtime (download and upload it to move it)",
                what(),
                owner.ordinal(),
                self.info.ordinal
            )));
        }
        Ok(())
    }

    pub(crate) fn upload<T: DeviceScalar>(&self, data: &[T]) -> Result<CudaBuffer<T>, Error> {
        let slice = self.stream.clone_htod(data).map_err(|e| {
            driver_error(
                &format!("uploading {} {} values", data.len(), T::SCALAR.name()),
                e,
            )
        })?;
        self.check_recorded("uploading a buffer")?;
        Ok(CudaBuffer::owning(slice))
    }

    pub(crate) fn alloc_zeroed<T: DeviceScalar>(&self, len: usize) -> Result<CudaBuffer<T>, Error> {
        let slice = self.stream.alloc_zeros(len).map_err(|e| {
            driver_error(&format!("allocating {len} {} values", T::SCALAR.name()), e)
        })?;
        self.check_recorded("allocating a buffer")?;
        Ok(CudaBuffer::owning(slice))
    }

    /// `len` zeroed elements of page-locked host memory, cached (not
    /// write-combined: the host reads what the device copies into it).
    pub(crate) fn alloc_pinned<T: DeviceScalar>(
        &self,
        len: usize,
    ) -> Result<PinnedHostSlice<T>, Error> {
        let op = || {
            format!(
                "allocating {len} {} values of page-locked host memory",
                T::SCALAR.name()
            )
        };
        // SAFETY: the memory is zeroed before anything reads it.
        let mut pinned = unsafe { self.ctx.alloc_pinned_with_flags::<T>(len, 0) }
            .map_err(|e| driver_error(&op(), e))?;
        let values = pinned.as_mut_slice().map_err(|e| driver_error(&op(), e))?;
        // SAFETY: every buffer element type is a number, valid as zero bits.
        values.fill(unsafe { std::mem::zeroed() });
        Ok(pinned)
    }

    /// Enqueues `pinned` -> `slice` on the stream (the caller checks the lengths).
    pub(crate) fn copy_from_pinned<T: DeviceScalar>(
        &self,
        slice: &mut CudaSlice<T>,
        pinned: &PinnedHostSlice<T>,
    ) -> Result<(), Error> {
        self.check_owner(slice.context(), || "the buffer to copy into".into())?;
        self.check_owner(pinned.context(), || "the host buffer to copy from".into())?;
        self.stream.memcpy_htod(pinned, slice).map_err(|e| {
            driver_error(
                &format!(
                    "copying {} {} values to the device",
                    slice.len(),
                    T::SCALAR.name()
                ),
                e,
            )
        })?;
        self.check_recorded("copying to the device")
    }

    /// Enqueues `slice` -> `pinned` on the stream (the caller checks the lengths).
    pub(crate) fn copy_to_pinned<T: DeviceScalar>(
        &self,
        slice: &CudaSlice<T>,
        pinned: &mut PinnedHostSlice<T>,
    ) -> Result<(), Error> {
        self.check_owner(slice.context(), || "the buffer to copy from".into())?;
        self.check_owner(pinned.context(), || "the host buffer to copy into".into())?;
        self.stream.memcpy_dtoh(slice, pinned).map_err(|e| {
            driver_error(
                &format!(
                    "copying {} {} values to the host",
                    slice.len(),
                    T::SCALAR.name()
                ),
                e,
            )
        })?;
        self.check_recorded("copying to the host")
    }

    pub(crate) fn download<T: DeviceScalar>(&self, slice: &CudaSlice<T>) -> Result<Vec<T>, Error> {
        self.check_owner(slice.context(), || "the buffer to download".into())?;
        // A copy to pageable host memory returns when it has completed, so an
        // earlier kernel's fault surfaces here.
        let values = self.stream.clone_dtoh(slice).map_err(|e| {
            driver_error(
                &format!("downloading {} {} values", slice.len(), T::SCALAR.name()),
                e,
            )
        })?;
        self.check_recorded("downloading a buffer")?;
        Ok(values)
    }

    /// Device-to-device copy of equal-length slices (the caller checks the lengths).
    pub(crate) fn copy<T: DeviceScalar>(
        &self,
        source: &CudaSlice<T>,
        target: &mut CudaSlice<T>,
    ) -> Result<(), Error> {
        self.check_owner(source.context(), || "the buffer to copy from".into())?;
        self.check_owner(target.context(), || "the buffer to copy into".into())?;
        self.stream.memcpy_dtod(source, target).map_err(|e| {
            driver_error(
                &format!(
                    "copying {} {} values on the device",
                    source.len(),
                    T::SCALAR.name()
                ),
                e,
            )
        })?;
        self.check_recorded("copying on the device")
    }

    pub(crate) fn copy_from_host<T: DeviceScalar>(
        &self,
        slice: &mut CudaSlice<T>,
        data: &[T],
    ) -> Result<(), Error> {
        self.check_owner(slice.context(), || "the buffer to copy into".into())?;
        if slice.len() != data.len() {
            return Err(Error::Buffer(format!(
                "cannot copy {} host values into a device buffer of {} {} values: the lengths must \
                 be equal (upload a new buffer to change the length)",
                data.len(),
                slice.len(),
                T::SCALAR.name()
            )));
        }
        self.stream.memcpy_htod(data, slice).map_err(|e| {
            driver_error(
                &format!(
                    "copying {} {} values to the device",
                    data.len(),
                    T::SCALAR.name()
                ),
                e,
            )
        })?;
        self.check_recorded("copying to the device")
    }

    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| driver_error("waiting for the GPU", e))?;
        self.check_recorded("waiting for the GPU")
    }

    /// What the device reports about the variant of `def` for `consts`
    /// (built and loaded into the module cache, as a launch would).
    pub(crate) fn variant_resources(
        &self,
        def: &warpforge_codegen::KernelDef,
        consts: &[i64],
    ) -> Result<VariantResources, Error> {
        let variant = self.variant(def, consts, |arch| {
            warpforge_codegen::compile_ptx(def, consts, arch)
        })?;
        variant.resources(&self.ctx, &self.info)
    }

    /// Milliseconds of each of `parts` pieces of work (`part(index)`),
    /// between events recorded on the stream before the first piece and
    /// after each.
    pub(crate) fn time_parts_ms(
        &self,
        parts: usize,
        mut part: impl FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<f32>, Error> {
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let marks = (0..=parts)
            .map(|_| {
                self.ctx
                    .new_event(timing)
                    .map_err(|e| driver_error("creating a timing event", e))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let record = |index: usize| {
            marks[index]
                .record(&self.stream)
                .map_err(|e| driver_error("recording a timing event", e))
        };
        record(0)?;
        for index in 0..parts {
            part(index)?;
            record(index + 1)?;
        }
        let ms = marks
            .windows(2)
            .map(|pair| {
                pair[0]
                    .elapsed_ms(&pair[1])
                    .map_err(|e| driver_error("waiting for the timed work", e))
            })
            .collect::<Result<Vec<f32>, Error>>()?;
        self.check_recorded("timing GPU work")?;
        Ok(ms)
    }
}

fn check_driver_version(driver_version: (u32, u32)) -> Result<(), Error> {
    if driver_version < MIN_DRIVER_VERSION {
        return Err(Error::NoDriver(format!(
            "the NVIDIA driver supports CUDA {}.{}, and warpforge needs CUDA {}.{} or newer: \
             update the NVIDIA driver",
            driver_version.0, driver_version.1, MIN_DRIVER_VERSION.0, MIN_DRIVER_VERSION.1
        )));
    }
    Ok(())
}

fn init_error(err: DriverError) -> Error {
    let code = code_name(err.0);
    let what = match err.0 {
        CUresult::CUDA_ERROR_NO_DEVICE => "the CUDA driver found no GPU".to_string(),
        _ => format!("the CUDA driver failed to initialize ({code})"),
    };
    let hint = match driver_hint(err.0) {
        "" => "Check that nvidia-smi works; reinstall the NVIDIA driver if it does not.",
        hint => hint,
    };
    match err.0 {
        CUresult::CUDA_ERROR_NO_DEVICE => Error::NoDevice(format!("{what}. {hint}")),
        _ => Error::NoDriver(format!("{what}. {hint}")),
    }
}

/// Splits `cuDriverGetVersion`'s encoding (1000 * major + 10 * minor).
fn split_driver_version(encoded: i32) -> (u32, u32) {
    let encoded = encoded.max(0) as u32;
    (encoded / 1000, (encoded % 1000) / 10)
}

fn driver_version() -> Result<(u32, u32), Error> {
    let mut encoded = 0;
    // SAFETY: the driver writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut encoded) }
        .result()
        .map_err(|e| driver_error("asking the driver for its version", e))?;
    Ok(split_driver_version(encoded))
}

fn query_device(ctx: &Arc<CudaContext>, driver_version: (u32, u32)) -> Result<DeviceInfo, Error> {
    let op = "reading the device's properties";
    let attr = |a: Attr| -> Result<u32, Error> {
        let value = ctx.attribute(a).map_err(|e| driver_error(op, e))?;
        Ok(value.max(0) as u32)
    };
    Ok(DeviceInfo {
        backend: DeviceBackend::Cuda,
        name: ctx.name().map_err(|e| driver_error(op, e))?,
        ordinal: ctx.ordinal(),
        compute_capability: (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dims: [
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dims: [
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        shared_mem_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_mem_per_block_optin: attr(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        shared_mem_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        registers_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        warp_size: attr(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        l2_cache_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        total_memory_bytes: ctx.total_mem().map_err(|e| driver_error(op, e))? as u64,
        driver_version,
    })
}

/// A buffer's CUDA memory: a slice the buffer frees when dropped (its own
/// allocations and adopted slices), or one over memory the app keeps
/// ([`crate::DeviceBuffer::from_raw_cuda`]), which it never frees.
pub(crate) struct CudaBuffer<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    frees: bool,
}

impl<T> CudaBuffer<T> {
    pub(crate) fn owning(slice: CudaSlice<T>) -> CudaBuffer<T> {
        CudaBuffer {
            slice: ManuallyDrop::new(slice),
            frees: true,
        }
    }

    /// The slice, if this buffer owns it.
    pub(crate) fn into_slice(self) -> Result<CudaSlice<T>, CudaBuffer<T>> {
        if !self.frees {
            return Err(self);
        }
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the slice is taken exactly once.
        Ok(unsafe { ManuallyDrop::take(&mut this.slice) })
    }
}

impl<T> std::ops::Deref for CudaBuffer<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> std::ops::DerefMut for CudaBuffer<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> Drop for CudaBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: the slice is taken only here, once.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        if self.frees {
            drop(slice);
        } else {
            // Releases cudarc's stream handle and events, not the memory.
            slice.leak();
        }
    }
}

/// A CUDA allocation of any element type, as a launch borrows it: the device
/// pointer, with cudarc's stream-ordering events kept in step.
pub(crate) trait CudaMemory: Send + Sync {
    fn context(&self) -> &Arc<CudaContext>;
    /// The pointer for a read on `stream`; drop the guard after the launch is enqueued.
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>);
    /// The pointer for a write on `stream`; drop the guard after the launch is enqueued.
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>);
}

impl<T> CudaMemory for CudaSlice<T> {
    fn context(&self) -> &Arc<CudaContext> {
        CudaSlice::context(self)
    }
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>) {
        self.device_ptr(stream)
    }
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_encoding() {
        assert_eq!(split_driver_version(12090), (12, 9));
        assert_eq!(split_driver_version(12040), (12, 4));
        assert_eq!(split_driver_version(11020), (11, 2));
    }
}
