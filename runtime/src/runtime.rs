//! [`Runtime`]: one device, its buffers, checked launches and timing.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use warpforge_codegen::KernelDef;

use crate::buffer::{check_new_buffer, DeviceBuffer, Grid, KernelArg, Memory};
use crate::cuda::CudaBackend;
use crate::device::DeviceInfo;
use crate::scalar::DeviceScalar;
use crate::Error;

/// A device to run kernels on. Every operation goes to one stream, in order;
/// launches are asynchronous, downloads wait for the work before them.
pub struct Runtime {
    backend: Backend,
}

/// The API a runtime drives its device through.
enum Backend {
    Cuda(CudaBackend),
}

impl Runtime {
    /// The first CUDA device. Fails with a message saying what to install or
    /// set when there is no driver or no device.
    pub fn new() -> Result<Runtime, Error> {
        Runtime::cuda(0)
    }

    /// CUDA device `ordinal`, counted among the devices CUDA_VISIBLE_DEVICES leaves visible.
    pub fn cuda(ordinal: usize) -> Result<Runtime, Error> {
        Ok(Runtime {
            backend: Backend::Cuda(CudaBackend::new(ordinal)?),
        })
    }

    fn cuda_backend(&self) -> &CudaBackend {
        let Backend::Cuda(cuda) = &self.backend;
        cuda
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.cuda_backend().info
    }

    /// A new buffer holding a copy of `data`.
    pub fn upload<T: DeviceScalar>(&self, data: &[T]) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(data.len())?;
        let slice = self.cuda_backend().upload(data)?;
        Ok(DeviceBuffer {
            memory: Memory::Cuda(slice),
        })
    }

    /// A new buffer of `len` zeros.
    pub fn alloc_zeroed<T: DeviceScalar>(&self, len: usize) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(len)?;
        let slice = self.cuda_backend().alloc_zeroed(len)?;
        Ok(DeviceBuffer {
            memory: Memory::Cuda(slice),
        })
    }

    /// The buffer's elements, after all work enqueued before has finished.
    pub fn download<T: DeviceScalar>(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>, Error> {
        let Memory::Cuda(slice) = &buffer.memory;
        self.cuda_backend().download(slice)
    }

    /// Overwrites the buffer with `data`, which must have the buffer's length.
    pub fn copy_from_host<T: DeviceScalar>(
        &self,
        buffer: &mut DeviceBuffer<T>,
        data: &[T],
    ) -> Result<(), Error> {
        let Memory::Cuda(slice) = &mut buffer.memory;
        self.cuda_backend().copy_from_host(slice, data)
    }

    /// Sets every element of the buffer to `value`.
    pub fn fill<T: DeviceScalar>(
        &self,
        buffer: &mut DeviceBuffer<T>,
        value: T,
    ) -> Result<(), Error> {
        let values = vec![value; buffer.len()];
        self.copy_from_host(buffer, &values)
    }

    /// Launches one variant of a kernel: `consts` in `def.ir.const_params`
    /// order, `args` in `def.ir.params` order. Everything is checked before
    /// the driver sees the launch (see [`crate::validate_launch`]); the variant
    /// is built and loaded on its first launch and cached.
    pub fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        self.cuda_backend().launch(def, consts, grid, args, |arch| {
            warpforge_codegen::compile_ptx(def, consts, arch)
        })
    }

    /// Waits until all enqueued work has finished; reports a fault of any of it.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.cuda_backend().synchronize()
    }

    /// GPU time in milliseconds of the work `work` enqueues, measured with
    /// events on the runtime's stream. The events bracket everything the
    /// closure enqueues, host time between launches included when the GPU
    /// idles; time many launches per call to measure short kernels.
    pub fn time_ms(&self, work: impl FnOnce(&Runtime) -> Result<(), Error>) -> Result<f32, Error> {
        self.cuda_backend().time_ms(|| work(self))
    }

    /// Row-major `c[m x n] = a[m x k] * b[k x n]` in f32 with cuBLAS, on the
    /// runtime's stream (the reference for benchmarks). Default math mode:
    /// full f32, no TF32.
    pub fn cublas_sgemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        c: &mut DeviceBuffer<f32>,
    ) -> Result<(), Error> {
        let (Memory::Cuda(a), Memory::Cuda(b), Memory::Cuda(c)) =
            (&a.memory, &b.memory, &mut c.memory);
        self.cuda_backend().sgemm((m, n, k), a, b, c)
    }

    /// The CUDA stream all work goes to, for calling CUDA libraries in order
    /// with the runtime's own work.
    #[doc(hidden)]
    pub fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.cuda_backend().stream
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_and_buffers_can_be_shared_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::Runtime>();
        shareable::<super::DeviceBuffer<f32>>();
    }
}
