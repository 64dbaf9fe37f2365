//! [`Runtime`]: one device, its buffers, checked launches and timing.

use std::marker::PhantomData;

use warpforge_codegen::KernelDef;

use crate::buffer::{check_new_buffer, DeviceBuffer, Grid, KernelArg, Memory};
#[cfg(feature = "cuda")]
use crate::cuda::CudaBackend;
use crate::device::{BackendKind, DeviceInfo, TimingMethod};
#[cfg(feature = "cublas")]
use crate::gemm::{GemmPrecision, MatrixLayout};
use crate::interpreter::InterpreterBackend;
use crate::scalar::DeviceScalar;
#[cfg(feature = "wgpu")]
use crate::wgpu_backend::WgpuBackend;
use crate::Error;

/// A device to run kernels on: a CUDA GPU, any adapter wgpu drives
/// (Vulkan, Metal, DX12), or warpforge's interpreter on the CPU
/// ([`Runtime::interpreter`]). Every operation goes to one stream (queue),
/// in order; launches are asynchronous on a GPU (the interpreter's are done
/// when they return), downloads wait for the work before them.
///
/// Which backend a runtime has: `rt.device().backend.kind()` is
/// [`BackendKind::Cuda`], [`BackendKind::Wgpu`] or
/// [`BackendKind::Interpreter`]. Match on it where code takes a CUDA-only
/// path (cuBLAS, CUDA graphs), which is an [`Error`] elsewhere;
/// [`Runtime::backend_name`] says the same in words, for messages.
///
/// ```no_run
/// use warpforge_runtime::{BackendKind, Runtime};
/// # fn main() -> Result<(), warpforge_runtime::Error> {
/// let rt = Runtime::new()?;
/// match rt.device().backend.kind() {
///     BackendKind::Cuda => println!("CUDA on {}", rt.device().name),
///     BackendKind::Wgpu => println!("{} on {}", rt.backend_name(), rt.device().name),
///     BackendKind::Interpreter => println!("on the CPU, checked statement by statement"),
/// }
/// # Ok(())
/// # }
/// ```
///
/// Buffers ([`DeviceBuffer`]) hold any [`DeviceScalar`] type on CUDA (every
/// scalar but `bool`), and `f32`, `i32`, `u32` or `f16` on wgpu, the types
/// WGSL storage holds: [`Runtime::upload`] and [`Runtime::alloc_zeroed`] of
/// another type there are an [`Error::Buffer`]. Kernels that compute in f16
/// on wgpu also need an adapter with `SHADER_F16`, and kernels with warp
/// shuffles one with 32-lane subgroups ([`crate::WgpuDeviceInfo`] says what
/// the adapter has). The interpreter holds every type but `bool`, `e4m3` and
/// `e5m2`.
pub struct Runtime {
    pub(crate) backend: Backend,
    /// The tuned entry points' settings and dispatchers.
    pub(crate) tuning: crate::tune::RuntimeTuning,
    /// The buffers [`Runtime::lend_scratch`] lends.
    pub(crate) scratch: crate::scratch::Scratch,
}

/// The API a runtime drives its device through: the backends this build has
/// (features `cuda` and `wgpu`; the interpreter is always built). Matches on
/// a backend and a buffer end in a `_` arm for a buffer of another backend,
/// unreachable in a build with the interpreter alone, hence their
/// `allow(unreachable_patterns)`.
pub(crate) enum Backend {
    #[cfg(feature = "cuda")]
    Cuda(CudaBackend),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuBackend),
    Interpreter(InterpreterBackend),
}

/// The variable that forces a backend: `cuda`, `wgpu` or `interpreter`.
const BACKEND_VARIABLE: &str = "WARPFORGE_BACKEND";

impl Runtime {
    /// The first CUDA device when a CUDA driver and GPU are present, else the
    /// adapter wgpu picks; `WARPFORGE_BACKEND=cuda|wgpu|interpreter` forces
    /// one. Fails with what to install or set when neither GPU backend works:
    /// the interpreter, many times slower, runs only when asked for.
    pub fn new() -> Result<Runtime, Error> {
        let value = std::env::var(BACKEND_VARIABLE).ok();
        match BackendKind::from_env_value(value.as_deref())? {
            Some(kind) => Runtime::with_backend(kind),
            None => Runtime::cuda(0).or_else(|cuda| {
                Runtime::wgpu().map_err(|wgpu| {
                    Error::NoDevice(format!(
                        "no device to run kernels on.\nCUDA: {cuda}\nwgpu: {wgpu}\nTo run \
                         kernels on the CPU with warpforge's interpreter (slow, and checked), \
                         set WARPFORGE_BACKEND=interpreter or use Runtime::interpreter()"
                    ))
                })
            }),
        }
    }

    /// A runtime on the given backend: CUDA device 0, wgpu's adapter, or
    /// the interpreter.
    pub fn with_backend(kind: BackendKind) -> Result<Runtime, Error> {
        match kind {
            BackendKind::Cuda => Runtime::cuda(0),
            BackendKind::Wgpu => Runtime::wgpu(),
            BackendKind::Interpreter => Ok(Runtime::interpreter()),
        }
    }

    /// warpforge's reference interpreter ([`warpforge_codegen::interp`]) as
    /// a device: kernels run on the CPU, buffers live in host memory, and
    /// nothing needs a GPU or a driver, in any build. For running and
    /// debugging a kernel anywhere, not for speed (it is many thousands of
    /// times slower than a GPU).
    ///
    /// It runs the kernel's IR specialized for the launch's const values,
    /// the variant every backend builds its code from, in lock-step warps of
    /// 32 lanes: what sm_80 and WGSL have (SIMT code, shared memory,
    /// barriers, atomics, warp shuffles, `mma.sync`, `ldmatrix`, `cp.async`,
    /// `mma.sp`, `wmma`), not Hopper's mbarriers, TMA or `wgmma`. Its device
    /// reports compute capability 8.0, so launchers that pick a variant by
    /// arch pick sm_80's, and a kernel runs when it has a PTX target up to
    /// sm_80 or a `wgsl` target. Launches are checked as on a GPU first; a
    /// fault in the run is an [`Error::Interpreter`] whose `kind`
    /// ([`crate::InterpreterErrorKind`]) says which check fired
    /// (`OutOfBounds`, `BarrierDivergence`, `WarpDivergence`,
    /// `Uninitialized`, `DivisionByZero`, `StepBudget` past 2^30 thread
    /// steps, `Unsupported`) and whose message names the kernel, block,
    /// thread and statement; the launch's `&mut` buffers then keep what
    /// they held. Buffers hold every element type but `e4m3` and `e5m2`.
    /// Launches are done when they return (streams and events have nothing
    /// to wait for); [`Runtime::time_ms`] uses the host clock, and tuning
    /// records its winners under the interpreter's own model.
    pub fn interpreter() -> Runtime {
        Runtime::from_backend(Backend::Interpreter(InterpreterBackend::new()))
    }

    /// CUDA device `ordinal`, counted among the devices CUDA_VISIBLE_DEVICES leaves visible.
    pub fn cuda(ordinal: usize) -> Result<Runtime, Error> {
        #[cfg(feature = "cuda")]
        return Ok(Runtime::from_cuda(CudaBackend::new(ordinal)?));
        #[cfg(not(feature = "cuda"))]
        return Err(Error::NoDriver(format!(
            "CUDA device {ordinal} was asked for, and this build of warpforge has no CUDA \
             backend: enable warpforge's `cuda` feature (on by default)"
        )));
    }

    /// The adapter wgpu picks (high performance first; `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME` narrow the choice), with f16, subgroups and
    /// timestamp queries when it has them and its own limits.
    pub fn wgpu() -> Result<Runtime, Error> {
        #[cfg(feature = "wgpu")]
        return Ok(Runtime::from_wgpu(WgpuBackend::new()?));
        #[cfg(not(feature = "wgpu"))]
        return Err(Error::Wgpu(
            "wgpu was asked for, and this build of warpforge has no wgpu backend: enable \
             warpforge's `wgpu` feature (on by default)"
                .into(),
        ));
    }

    /// The device's identity and limits, read when the runtime started;
    /// `device().backend.kind()` tells CUDA from wgpu.
    pub fn device(&self) -> &DeviceInfo {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => &cuda.info,
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => &wgpu.info,
            Backend::Interpreter(interpreter) => &interpreter.info,
        }
    }

    /// "CUDA", "wgpu (Vulkan)" or "interpreter"; [`Runtime::device`]'s
    /// `name` names the device.
    pub fn backend_name(&self) -> String {
        self.device().backend_name()
    }

    /// A new buffer holding a copy of `data`. On wgpu, elements are f32,
    /// i32, u32 or f16 (what WGSL stores); on the interpreter, any type but
    /// e4m3 and e5m2; other types are an [`Error::Buffer`].
    pub fn upload<T: DeviceScalar>(&self, data: &[T]) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(data.len())?;
        let memory = match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => Memory::Cuda(cuda.upload(data)?),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => Memory::Wgpu(wgpu.upload(data)?, PhantomData),
            Backend::Interpreter(interpreter) => {
                Memory::Interpreter(interpreter.upload(data)?, PhantomData)
            }
        };
        Ok(DeviceBuffer { memory })
    }

    /// A new buffer of `len` zeros, of the element types [`Runtime::upload`]
    /// takes.
    pub fn alloc_zeroed<T: DeviceScalar>(&self, len: usize) -> Result<DeviceBuffer<T>, Error> {
        check_new_buffer::<T>(len)?;
        let memory = match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => Memory::Cuda(cuda.alloc_zeroed(len)?),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => Memory::Wgpu(wgpu.alloc_zeroed::<T>(len)?, PhantomData),
            Backend::Interpreter(interpreter) => {
                Memory::Interpreter(interpreter.alloc_zeroed::<T>(len)?, PhantomData)
            }
        };
        Ok(DeviceBuffer { memory })
    }

    /// The buffer's elements, after all work enqueued before has finished.
    pub fn download<T: DeviceScalar>(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>, Error> {
        match (&self.backend, &buffer.memory) {
            #[cfg(feature = "cuda")]
            (Backend::Cuda(cuda), Memory::Cuda(slice)) => cuda.download(slice),
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu(wgpu), Memory::Wgpu(memory, _)) => wgpu.download(memory),
            (Backend::Interpreter(interpreter), Memory::Interpreter(memory, _)) => {
                Ok(interpreter.download(memory))
            }
            #[allow(unreachable_patterns)]
            _ => Err(self.foreign_buffer("the buffer to download")),
        }
    }

    /// Overwrites the buffer with `data`, which must have the buffer's length.
    pub fn copy_from_host<T: DeviceScalar>(
        &self,
        buffer: &mut DeviceBuffer<T>,
        data: &[T],
    ) -> Result<(), Error> {
        match (&self.backend, &mut buffer.memory) {
            #[cfg(feature = "cuda")]
            (Backend::Cuda(cuda), Memory::Cuda(slice)) => cuda.copy_from_host(slice, data),
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu(wgpu), Memory::Wgpu(memory, _)) => wgpu.copy_from_host(memory, data),
            (Backend::Interpreter(interpreter), Memory::Interpreter(memory, _)) => {
                interpreter.copy_from_host(memory, data)
            }
            #[allow(unreachable_patterns)]
            _ => Err(self.foreign_buffer("the buffer to copy into")),
        }
    }

    /// Copies `source` into `target` on the device (`cuMemcpyDtoD` on CUDA, a
    /// buffer-to-buffer copy on wgpu, a copy of host bytes on the
    /// interpreter), enqueued after earlier work. The two must have the same
    /// length.
    pub fn copy<T: DeviceScalar>(
        &self,
        source: &DeviceBuffer<T>,
        target: &mut DeviceBuffer<T>,
    ) -> Result<(), Error> {
        if source.len() != target.len() {
            return Err(Error::Buffer(format!(
                "cannot copy a buffer of {} {} values into one of {}: the lengths must be equal",
                source.len(),
                T::SCALAR.name(),
                target.len()
            )));
        }
        match (&self.backend, &source.memory, &mut target.memory) {
            #[cfg(feature = "cuda")]
            (Backend::Cuda(cuda), Memory::Cuda(from), Memory::Cuda(to)) => cuda.copy(from, to),
            #[cfg(feature = "wgpu")]
            (Backend::Wgpu(wgpu), Memory::Wgpu(from, _), Memory::Wgpu(to, _)) => {
                wgpu.copy::<T>(from, to)
            }
            (Backend::Interpreter(_), Memory::Interpreter(from, _), Memory::Interpreter(to, _)) => {
                to.bytes.copy_from_slice(&from.bytes);
                Ok(())
            }
            #[allow(unreachable_patterns)]
            _ => Err(self.foreign_buffer("a buffer of the copy")),
        }
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
    /// the device sees the launch (see [`crate::validate_launch`]); the variant
    /// is built and loaded on its first launch and cached. CUDA runs the
    /// kernel's best PTX target for the device; wgpu runs its `wgsl` target,
    /// built for the launch's block shape when the kernel declares none; the
    /// interpreter runs the variant's IR ([`Runtime::interpreter`]).
    pub fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.launch(def, consts, grid, args, |arch| {
                warpforge_codegen::compile_ptx(def, consts, arch)
            }),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => wgpu.launch(def, consts, grid, args, |block| {
                warpforge_codegen::compile_wgsl(def, consts, block)
            }),
            Backend::Interpreter(interpreter) => interpreter.launch(def, consts, grid, args),
        }
    }

    /// What the device reports about one variant of a kernel (the tuner
    /// prunes with this before timing). Builds the variant into the same
    /// cache that [`Runtime::launch`] uses.
    ///
    /// On CUDA: threads per block, shared memory, and, once loaded,
    /// registers, local memory and the blocks per SM the driver's occupancy
    /// calculator allows. On wgpu: threads per block and the workgroup
    /// memory of its WGSL; wgpu reports no registers or occupancy, so
    /// [`VariantResources::loaded`](crate::tune::VariantResources::loaded)
    /// is `None`. A kernel that declares its block has its pipeline created
    /// (unless its workgroup memory is over the adapter's limit); one that
    /// declares none is compiled per launch block, so nothing is cached. On
    /// the interpreter: threads per block and the shared memory of its IR;
    /// `loaded` is `None`.
    pub fn variant_resources(
        &self,
        def: &KernelDef,
        consts: &[i64],
    ) -> Result<crate::tune::VariantResources, Error> {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.variant_resources(def, consts),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => wgpu.variant_resources(def, consts, |block| {
                warpforge_codegen::compile_wgsl(def, consts, block)
            }),
            Backend::Interpreter(interpreter) => interpreter.variant_resources(def, consts),
        }
    }

    /// Waits until all enqueued work has finished; reports a fault of any of it.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.synchronize(),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => wgpu.synchronize(),
            // Every launch has finished when it returns.
            Backend::Interpreter(_) => Ok(()),
        }
    }

    /// GPU time in milliseconds of the work `work` enqueues, by
    /// [`Runtime::timing_method`]. The measurement brackets everything the
    /// closure enqueues, host time between launches included when the GPU
    /// idles; time many launches per call to measure short kernels. The
    /// one-part case of [`Runtime::time_parts_ms`], which says how each
    /// backend measures.
    pub fn time_ms(&self, work: impl FnOnce(&Runtime) -> Result<(), Error>) -> Result<f32, Error> {
        let mut work = Some(work);
        let parts = self.time_parts_ms(1, |rt, _| match work.take() {
            Some(work) => work(rt),
            None => Ok(()),
        })?;
        Ok(parts.iter().sum())
    }

    /// GPU time in milliseconds of each of `parts` pieces of work, enqueued
    /// one after another by `part(rt, index)`: a mark is taken before the
    /// first piece and after each, so that on CUDA the pieces run back to
    /// back and each is timed under the clocks its neighbours saw. The
    /// bench interleaves the launches of the kernels it compares this way,
    /// so that a swing of the SM clock reaches all of them alike.
    ///
    /// On CUDA, events on the runtime's stream. On wgpu, after waiting for
    /// earlier work: timestamp queries at the boundaries of empty compute
    /// passes submitted before the first piece and after each, when the
    /// device has `TIMESTAMP_QUERY` (at most 4095 pieces: wgpu's query set
    /// limit); otherwise the host clock until each piece is done, which
    /// also counts the host's encoding of each launch and leaves the GPU
    /// idle between pieces. On the interpreter, the host clock around each
    /// piece, which has run when `part` returns.
    pub fn time_parts_ms(
        &self,
        parts: usize,
        mut part: impl FnMut(&Runtime, usize) -> Result<(), Error>,
    ) -> Result<Vec<f32>, Error> {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.time_parts_ms(parts, |index| part(self, index)),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => wgpu.time_parts_ms(parts, |index| part(self, index)),
            Backend::Interpreter(interpreter) => {
                interpreter.time_parts_ms(parts, |index| part(self, index))
            }
        }
    }

    /// How [`Runtime::time_ms`] measures on this runtime: CUDA events on
    /// CUDA; on wgpu, GPU timestamp queries when the device has
    /// `Features::TIMESTAMP_QUERY` ([`Runtime::wgpu`] asks for it whenever
    /// the adapter offers it; an app's device given to
    /// `Runtime::wgpu_on_device` has it if the app asked), the host clock
    /// otherwise; the host clock on the interpreter.
    pub fn timing_method(&self) -> TimingMethod {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => TimingMethod::CudaEvents,
            #[cfg(feature = "wgpu")]
            Backend::Wgpu(wgpu) => wgpu.timing_method(),
            Backend::Interpreter(_) => TimingMethod::HostClock,
        }
    }

    /// Row-major `c (m x n) = a (m x k) * b (k x n)` with cuBLAS, on the
    /// runtime's stream: the reference for the GEMM kernels' tests and
    /// benchmarks. CUDA only.
    ///
    /// `dims` is `(m, n, k)`; `layouts` gives how `a` and `b` lie in their
    /// buffers (C is always row-major); alpha is 1 and beta 0. `precision`
    /// fixes the element types, which the buffers must have, and the
    /// arithmetic (through `cublasGemmEx`, f32 sums throughout: the handle
    /// disallows reduced-precision split-k reductions; 8-bit floats through
    /// cuBLASLt, which GemmEx lacks):
    ///
    /// | precision | A, B | C | cuBLAS compute type |
    /// | --- | --- | --- | --- |
    /// | `F16` | f16 | f16 | `CUBLAS_COMPUTE_32F` |
    /// | `Bf16` | bf16 | bf16 | `CUBLAS_COMPUTE_32F` |
    /// | `Tf32` | f32 | f32 | `CUBLAS_COMPUTE_32F_FAST_TF32` (inputs rounded to tf32) |
    /// | `I8` | i8 | i32 | `CUBLAS_COMPUTE_32I` |
    /// | `F32` | f32 | f32 | `CUBLAS_COMPUTE_32F` (default math: no TF32) |
    /// | `E4m3` | e4m3 | bf16 | cuBLASLt, `CUBLAS_COMPUTE_32F` with fast accumulation |
    ///
    /// `E4m3` is [`Runtime::cublaslt_fp8_gemm`] with fast accumulation on:
    /// the Tensor Cores keep the whole sum, as the `wgmma` fp8 GEMM does, so
    /// the comparison is like for like (`torch._scaled_mm`'s default is
    /// off). `E5m2` is refused: cuBLAS has no e5m2 x e5m2 GEMM.
    ///
    /// `I8` takes only cuBLAS's integer Tensor Core form: A row-major, B
    /// column-major, n and k multiples of 4; `E4m3` likewise A row-major, B
    /// column-major, n and k multiples of 16; other calls are refused with
    /// what to change. Buffer lengths shorter than the matrices, element
    /// types other than the precision's, dimensions past `i32::MAX` and
    /// buffers of another runtime are refused before cuBLAS sees them.
    #[cfg(feature = "cublas")]
    pub fn cublas_gemm<I: DeviceScalar, O: DeviceScalar>(
        &self,
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        layouts: (MatrixLayout, MatrixLayout),
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
    ) -> Result<(), Error> {
        let cuda = self.cuda_backend("cuBLAS")?;
        match (&a.memory, &b.memory, &mut c.memory) {
            (Memory::Cuda(a), Memory::Cuda(b), Memory::Cuda(c)) => {
                cuda.gemm(precision, dims, layouts, a, b, c)
            }
            _ => Err(self.foreign_buffer("a cuBLAS operand")),
        }
    }

    /// Row-major `c (m x n) = a (m x k) * b (k x n)` in an 8-bit float
    /// `precision` with cuBLASLt's `cublasLtMatmul`, on the runtime's stream,
    /// with fast accumulation on or off: the fp8 reference of the benchmarks,
    /// which time both. CUDA only, compute capability 8.9 or newer.
    ///
    /// `a` is row-major and `b` column-major (both contiguous along k, the
    /// only form cuBLASLt's fp8 kernels take on Ada and Hopper); `c` is
    /// row-major bf16; products are summed in f32 (`CUBLAS_COMPUTE_32F`),
    /// alpha is 1, beta 0, and no scale factors are applied. `E4m3` only:
    /// cuBLAS has no e5m2 x e5m2 GEMM.
    ///
    /// `fast_accumulation` is cuBLASLt's `CUBLASLT_MATMUL_DESC_FAST_ACCUM`.
    /// On, the fp8 Tensor Cores keep the whole sum, in fewer bits than f32,
    /// like warpforge's `wgmma` fp8 GEMM ([`Runtime::cublas_gemm`] uses this).
    /// Off (cuBLASLt's and `torch._scaled_mm`'s default), cuBLASLt
    /// periodically adds the Tensor Cores' partial sums into f32: more
    /// accurate, slower.
    ///
    /// n and k must be multiples of 16 and the buffers 16-byte aligned (any
    /// buffer the runtime allocated is); other precisions, shapes, short
    /// buffers, element types other than the precision's (e4m3 A and B,
    /// bf16 C) and buffers of another runtime are refused with what to change.
    #[cfg(feature = "cublas")]
    pub fn cublaslt_fp8_gemm<I: DeviceScalar, O: DeviceScalar>(
        &self,
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        fast_accumulation: bool,
    ) -> Result<(), Error> {
        let cuda = self.cuda_backend("cuBLASLt")?;
        match (&a.memory, &b.memory, &mut c.memory) {
            (Memory::Cuda(a), Memory::Cuda(b), Memory::Cuda(c)) => {
                cuda.fp8_gemm(precision, dims, a, b, c, fast_accumulation)
            }
            _ => Err(self.foreign_buffer("a cuBLASLt operand")),
        }
    }

    /// Row-major `c[m x n] = a[m x k] * b[k x n]` in plain f32 with cuBLAS:
    /// [`Runtime::cublas_gemm`] in [`GemmPrecision::F32`] with row-major
    /// operands. CUDA only.
    #[cfg(feature = "cublas")]
    pub fn cublas_sgemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        c: &mut DeviceBuffer<f32>,
    ) -> Result<(), Error> {
        let row_major = (MatrixLayout::RowMajor, MatrixLayout::RowMajor);
        self.cublas_gemm(GemmPrecision::F32, (m, n, k), row_major, a, b, c)
    }

    pub(crate) fn from_backend(backend: Backend) -> Runtime {
        Runtime {
            backend,
            tuning: Default::default(),
            scratch: Default::default(),
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn from_cuda(backend: CudaBackend) -> Runtime {
        Runtime::from_backend(Backend::Cuda(backend))
    }

    #[cfg(feature = "wgpu")]
    pub(crate) fn from_wgpu(backend: WgpuBackend) -> Runtime {
        Runtime::from_backend(Backend::Wgpu(backend))
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn as_cuda(&self) -> Option<&CudaBackend> {
        match &self.backend {
            Backend::Cuda(cuda) => Some(cuda),
            _ => None,
        }
    }

    #[cfg(feature = "wgpu")]
    pub(crate) fn as_wgpu(&self) -> Option<&WgpuBackend> {
        match &self.backend {
            Backend::Wgpu(wgpu) => Some(wgpu),
            _ => None,
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_backend(&self, what: &str) -> Result<&CudaBackend, Error> {
        self.as_cuda().ok_or_else(|| self.needs_cuda(what))
    }

    #[cfg(feature = "wgpu")]
    pub(crate) fn wgpu_backend(&self, what: &str) -> Result<&WgpuBackend, Error> {
        self.as_wgpu().ok_or_else(|| {
            Error::Buffer(format!(
                "{what} needs wgpu, and this runtime runs on {}: use a runtime on wgpu \
                 (Runtime::wgpu or Runtime::wgpu_on_device)",
                self.backend_name()
            ))
        })
    }

    #[cfg(feature = "cuda")]
    fn needs_cuda(&self, what: &str) -> Error {
        Error::Wgpu(format!(
            "{what} needs CUDA, and this runtime runs on {}: run on a CUDA GPU \
             (WARPFORGE_BACKEND=cuda)",
            self.backend_name()
        ))
    }

    fn foreign_buffer(&self, what: &str) -> Error {
        Error::Buffer(format!(
            "{what} was created by a runtime on another backend, and this runtime runs on {}: \
             create the buffer with this runtime (download and upload it to move it)",
            self.backend_name()
        ))
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
