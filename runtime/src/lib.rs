//! warpforge-runtime: devices, buffers, modules and checked launches.
//!
//! A [`Runtime`] drives one device through one of two backends: CUDA
//! (cudarc, with the driver loaded at run time, so a machine without a GPU
//! gets an [`Error`], never a panic), or wgpu (Vulkan, Metal, DX12; Mesa's
//! lavapipe runs it on a CPU). [`Runtime::new`] takes CUDA when it works and
//! wgpu otherwise; `WARPFORGE_BACKEND=cuda|wgpu` forces one. Kernels arrive
//! as [`KernelDef`]s from the `#[kernel]` macro; [`Runtime::launch`] picks the
//! target for the device (the best PTX arch on CUDA, WGSL on wgpu), builds
//! the variant once, checks the call ([`validate_launch`], which needs no
//! GPU) and launches it.
//!
//! Inside: `scalar` ([`DeviceScalar`]), `device` ([`DeviceInfo`]), `buffer`
//! ([`DeviceBuffer`], [`KernelArg`], [`Grid`]), `gemm` ([`MatrixLayout`],
//! [`GemmPrecision`]: a GEMM's operands, for cuBLAS, kernels and tests),
//! `validate` (the checks that need no GPU), `variants` (the
//! compiled-variant cache both backends use), `tune` (the autotuner, the
//! per-GPU tuning database [`tune::TuneDb`] and [`tune::Dispatcher`]),
//! `runtime` ([`Runtime`]), and the backends `cuda` (context, module cache,
//! launches, timing, cuBLAS) and `wgpu` (adapter, storage buffers, pipelines,
//! launches in the WGSL backend's ABI).

#![warn(missing_docs)]

mod buffer;
mod cuda;
mod device;
mod error;
mod gemm;
mod kernel_variant;
mod runtime;
mod scalar;
mod tensor_map;
pub mod tune;
mod validate;
mod variants;
mod wgpu;

pub use half::{bf16, f16};
pub use warpforge_codegen::eval::HostValue;
pub use warpforge_codegen::ir::Scalar;
pub use warpforge_codegen::KernelDef;

pub use buffer::{ArgInfo, DeviceBuffer, Grid, KernelArg};
pub use device::{BackendKind, DeviceBackend, DeviceInfo, WgpuDeviceInfo};
pub use error::Error;
pub use gemm::{GemmPrecision, MatrixLayout};
pub use kernel_variant::KernelVariant;
pub use runtime::Runtime;
pub use scalar::DeviceScalar;
pub use tensor_map::{plan_tensor_maps, TensorMapPlan};
pub use validate::{check_call, select_arch, validate_launch, LaunchDims, VariantFacts};
