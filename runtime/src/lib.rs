//! warpforge-runtime: devices, buffers, modules and checked launches.
//!
//! A [`Runtime`] drives one device through one of three backends: CUDA
//! (cudarc, with the driver loaded at run time, so a machine without a GPU
//! gets an [`Error`], never a panic), wgpu (Vulkan, Metal, DX12; Mesa's
//! lavapipe runs it on a CPU), or warpforge's reference interpreter
//! ([`Runtime::interpreter`]: the kernel's IR run on the CPU, no GPU or
//! driver, each launch checked for out-of-bounds indices, barrier
//! divergence, reads of values nothing wrote and division by zero, which
//! are an [`Error::Interpreter`] naming the kernel, block, thread and
//! statement). [`Runtime::new`] takes CUDA when it works and wgpu
//! otherwise; `WARPFORGE_BACKEND=cuda|wgpu|interpreter` forces one. Kernels
//! arrive as [`KernelDef`]s from the `#[kernel]` macro; [`Runtime::launch`]
//! picks the target for the device (the best PTX arch on CUDA, WGSL on
//! wgpu, the IR on the interpreter), builds the variant once, checks the
//! call ([`validate_launch`], which needs no GPU) and launches it. The same
//! app code (buffers, launches, the stock kernels' launchers, tuned
//! launches) runs on each.
//!
//! Inside: `scalar` ([`DeviceScalar`]), `device` ([`DeviceInfo`]), `buffer`
//! ([`DeviceBuffer`], [`KernelArg`], [`Grid`]), `gemm` ([`MatrixLayout`],
//! [`GemmPrecision`]: a GEMM's operands, for cuBLAS, kernels and tests),
//! `validate` (the checks that need no GPU), `variants` (the
//! compiled-variant cache both backends use), `tune` (the autotuner, the
//! per-GPU tuning database [`tune::TuneDb`] and [`tune::Dispatcher`]),
//! `runtime` ([`Runtime`]), `stream` ([`Runtime::fork`], [`Event`]), `interop` (a runtime on the app's CUDA stream or
//! wgpu device, buffers from and into the app's `CudaSlice`s, device
//! pointers and `wgpu::Buffer`s), and the backends: `cuda` (feature `cuda`:
//! context, module cache, launches, timing, cuBLAS under `cublas`),
//! `wgpu_backend` (feature `wgpu`: adapter, storage buffers, pipelines,
//! launches in the WGSL backend's ABI) and `interpreter` (always built, as
//! it needs no driver: buffers as host bytes, launches through
//! [`warpforge_codegen::interp`]), so a build without features still runs
//! kernels.

#![warn(missing_docs)]

mod buffer;
#[cfg(feature = "cuda")]
mod cuda;
mod device;
mod error;
mod gemm;
pub mod host;
// Sharing with an app's CUDA or wgpu objects: nothing to share without them.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod interop;
mod interpreter;
mod kernel_variant;
#[cfg(feature = "nccl")]
pub mod nccl;
mod peer;
mod runtime;
mod scalar;
mod scratch;
mod stream;
mod tensor_map;
#[cfg(test)]
mod test_defs;
pub mod tune;
mod validate;
mod variants;
#[cfg(feature = "wgpu")]
mod wgpu_backend;

/// The cudarc this runtime is built on, so an app names the same version
/// when it shares contexts, streams and device memory with warpforge.
#[cfg(feature = "cuda")]
pub use cudarc;
/// The crate of the 8-bit float types, so an app names the same version.
pub use float8;
pub use half::{bf16, f16};
/// The language's `e4m3`: an 8-bit float with 4 exponent and 3 mantissa
/// bits and no infinities (`float8::F8E4M3`, the "e4m3fn" of PyTorch and
/// CUDA's `__nv_fp8_e4m3`). Kernels move it and multiply it with `wgmma`.
#[allow(non_camel_case_types)]
pub type e4m3 = float8::F8E4M3;
/// The language's `e5m2`: an 8-bit float with 5 exponent and 2 mantissa
/// bits (`float8::F8E5M2`, CUDA's `__nv_fp8_e5m2`).
#[allow(non_camel_case_types)]
pub type e5m2 = float8::F8E5M2;
pub use warpforge_codegen::eval::HostValue;
/// What the interpreter backend reports ([`Error::Interpreter`]): the check
/// that fired, the kernel, block, thread and statement.
pub use warpforge_codegen::interp::{Error as InterpreterError, ErrorKind as InterpreterErrorKind};
pub use warpforge_codegen::ir::Scalar;
pub use warpforge_codegen::KernelDef;
/// The wgpu this runtime is built on, so an app names the same version when
/// it shares devices and buffers with warpforge.
#[cfg(feature = "wgpu")]
pub use wgpu;

pub use buffer::{
    ArgInfo, BufferMut, BufferRef, BufferView, DeviceBuffer, Grid, KernelArg, VIEW_ALIGN_BYTES,
};
pub use device::{BackendKind, DeviceBackend, DeviceInfo, TimingMethod, WgpuDeviceInfo};
pub use error::Error;
pub use gemm::{GemmPrecision, MatrixLayout};
pub use host::HostBuffer;
#[cfg(feature = "cuda")]
pub use interop::{BorrowedBuffer, Exclusive, Shared};
pub use kernel_variant::KernelVariant;
pub use peer::PeerRoute;
pub use runtime::Runtime;
pub use scalar::DeviceScalar;
pub use stream::Event;
#[cfg(feature = "cuda")]
pub use stream::Graph;
pub use tensor_map::{plan_tensor_maps, TensorMapPlan};
pub use validate::{
    check_call, select_arch, validate_launch, LaunchDims, VariantChecks, VariantFacts,
};
