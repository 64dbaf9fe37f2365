//! warpforge-runtime: devices, buffers, modules and checked launches.
//!
//! A [`Runtime`] drives one device (CUDA today, through cudarc with the driver
//! loaded at run time, so a machine without a GPU gets an [`Error`], never a
//! panic). Kernels arrive as [`KernelDef`]s from the `#[kernel]` macro;
//! [`Runtime::launch`] picks the PTX target for the device, builds and loads
//! the variant once, checks the call ([`validate_launch`], which needs no GPU)
//! and launches it.
//!
//! Inside: `scalar` ([`DeviceScalar`]), `device` ([`DeviceInfo`]), `buffer`
//! ([`DeviceBuffer`], [`KernelArg`], [`Grid`]), `validate` (the checks that
//! need no GPU), `runtime` ([`Runtime`]) and `cuda` (the backend: context,
//! module cache, launches, timing, cuBLAS). A wgpu backend will sit beside
//! `cuda` as another variant of the runtime's backend.

mod buffer;
mod cuda;
mod device;
mod error;
mod runtime;
mod scalar;
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
pub use runtime::Runtime;
pub use scalar::DeviceScalar;
pub use validate::{select_arch, validate_launch, LaunchDims, VariantFacts};
