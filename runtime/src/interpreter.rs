//! The interpreter backend: kernels run on the CPU by warpforge's reference
//! interpreter ([`warpforge_codegen::interp`]), buffers are host bytes. No
//! driver and no GPU: what it is for is running and debugging a kernel
//! anywhere, with the interpreter's checks (out-of-bounds indices, barrier
//! and warp divergence, reads of values nothing wrote, division by zero)
//! reported as [`Error::Interpreter`], naming the kernel, block, thread and
//! statement.
//!
//! Which code runs: the kernel's IR specialized for the launch's const
//! values, which is the variant every backend builds its PTX or WGSL from;
//! targets only decide whether it runs at all. The interpreter runs what
//! sm_80 and WGSL have (every SIMT construct, `mma.sync`, `ldmatrix`,
//! `cp.async`, the 2:4 sparse `mma.sp`, the Volta `wmma`), not Hopper's
//! mbarriers, TMA or `wgmma`: its device reports compute capability 8.0,
//! and a kernel runs here when it has a PTX target up to sm_80 or a `wgsl`
//! target. Every launch is done when it returns: streams, events and
//! synchronization have nothing to wait for.

use std::sync::Arc;
use std::time::Instant;

use warpforge_codegen::interp::{self, Arg, Launch};
use warpforge_codegen::{Kernel, KernelDef, Target};

use crate::buffer::{foreign_argument, ArgKind, KernelArg, MemoryRef};
use crate::device::{DeviceBackend, DeviceInfo};
use crate::scalar::{bytes_of, values_from_bytes, DeviceScalar};
use crate::tune::VariantResources;
use crate::validate::{check_consts, select_arch, VariantChecks, VariantFacts};
use crate::variants::VariantCache;
use crate::{Error, Grid};

/// The interpreter as a device: the limits [`interp::interpret`] checks.
pub(crate) struct InterpreterBackend {
    pub(crate) info: DeviceInfo,
    /// Shared with the runtimes forked from this one.
    variants: Arc<VariantCache<(), InterpretedVariant>>,
}

/// A buffer's elements as the device would hold them (little-endian bytes).
/// Every interpreter runtime works in host memory, so any of them takes any
/// interpreter buffer.
pub(crate) struct InterpreterBuffer {
    pub(crate) bytes: Vec<u8>,
    pub(crate) len: usize,
}

/// One variant, specialized once for all its launches.
struct InterpretedVariant {
    checks: VariantChecks,
    kernel: Kernel,
    facts: VariantFacts,
}

impl InterpreterBackend {
    pub(crate) fn new() -> InterpreterBackend {
        InterpreterBackend {
            info: device_info(),
            variants: Arc::default(),
        }
    }

    /// A backend sharing this one's variants: there is one device, the host.
    pub(crate) fn fork(&self) -> InterpreterBackend {
        InterpreterBackend {
            info: self.info.clone(),
            variants: self.variants.clone(),
        }
    }

    pub(crate) fn upload<T: DeviceScalar>(&self, data: &[T]) -> Result<InterpreterBuffer, Error> {
        check_element::<T>()?;
        Ok(InterpreterBuffer {
            bytes: bytes_of(data).to_vec(),
            len: data.len(),
        })
    }

    pub(crate) fn alloc_zeroed<T: DeviceScalar>(
        &self,
        len: usize,
    ) -> Result<InterpreterBuffer, Error> {
        check_element::<T>()?;
        Ok(InterpreterBuffer {
            // `check_new_buffer` has checked that the byte count fits.
            bytes: vec![0; len * std::mem::size_of::<T>()],
            len,
        })
    }

    pub(crate) fn download<T: DeviceScalar>(&self, source: &InterpreterBuffer) -> Vec<T> {
        values_from_bytes(&source.bytes)
    }

    pub(crate) fn copy_from_host<T: DeviceScalar>(
        &self,
        target: &mut InterpreterBuffer,
        data: &[T],
    ) -> Result<(), Error> {
        if target.len != data.len() {
            return Err(Error::Buffer(format!(
                "cannot copy {} host values into a buffer of {} {} values: the lengths must be \
                 equal (upload a new buffer to change the length)",
                data.len(),
                target.len,
                T::SCALAR.name()
            )));
        }
        target.bytes.copy_from_slice(bytes_of(data));
        Ok(())
    }

    /// Host-clock milliseconds of each of `parts` pieces of work
    /// (`part(index)`), each of which has run when it returns.
    pub(crate) fn time_parts_ms(
        &self,
        parts: usize,
        mut part: impl FnMut(usize) -> Result<(), Error>,
    ) -> Result<Vec<f32>, Error> {
        (0..parts)
            .map(|index| {
                let start = Instant::now();
                part(index)?;
                Ok(start.elapsed().as_secs_f32() * 1000.0)
            })
            .collect()
    }

    /// Checks the launch as every backend does, then interprets it; the
    /// `&mut` slices get the run's results, and keep their bytes on an error.
    pub(crate) fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        let variant = self.variant(def, consts)?;
        let infos: Vec<_> = args.iter().map(KernelArg::info).collect();
        // The interpreter has no TMA: a tensor map's statements are refused
        // when they run, so its plan is not needed.
        let (dims, _) =
            variant
                .checks
                .validate_launch(def, &variant.facts, &grid, &infos, &self.info)?;
        let mut interp_args = args
            .iter()
            .enumerate()
            .map(|(index, arg)| interpreter_arg(index, arg))
            .collect::<Result<Vec<_>, _>>()?;
        interp::interpret(
            &variant.kernel,
            &Launch::new(dims.blocks, dims.threads),
            &mut interp_args,
        )
        .map_err(|e| Error::Interpreter(Box::new(e)))?;
        for (arg, result) in args.iter_mut().zip(interp_args) {
            if let (
                ArgKind::Buffer {
                    offset_bytes,
                    memory: MemoryRef::InterpreterMut(buffer),
                    ..
                },
                Arg::Slice(values),
            ) = (&mut arg.kind, result)
            {
                let bytes = values.to_bytes();
                let start = *offset_bytes as usize;
                buffer.bytes[start..start + bytes.len()].copy_from_slice(&bytes);
            }
        }
        Ok(())
    }

    /// The variant's declared block and its shared memory as the
    /// interpreter lays it out; it reports no registers or occupancy.
    pub(crate) fn variant_resources(
        &self,
        def: &KernelDef,
        consts: &[i64],
    ) -> Result<VariantResources, Error> {
        let facts = self.variant(def, consts)?.facts;
        Ok(VariantResources {
            threads_per_block: facts.block.map(|[x, y, z]| x * y * z),
            shared_bytes: facts.shared_bytes,
            loaded: None,
        })
    }

    /// The cached variant of `def` for `consts`, specialized on first use.
    fn variant(&self, def: &KernelDef, consts: &[i64]) -> Result<Arc<InterpretedVariant>, Error> {
        check_target(def, &self.info)?;
        check_consts(def, consts)?;
        self.variants.get_or_compile(def, consts, (), || {
            let checks = VariantChecks::new(def, consts)?;
            let refused = |e: interp::Error| Error::Interpreter(Box::new(e));
            let kernel = interp::specialize_variant(def, consts).map_err(refused)?;
            // Within `interp::MAX_SHARED_BYTES`, which fits a u32.
            let shared_bytes = interp::shared_bytes(&kernel).map_err(refused)? as u32;
            let block = kernel.block.as_ref().map(|dims| {
                // `block(..)` is written in constants, which specialization
                // folds to literals; the interpreter validates the kernel
                // (block sizes included) before any thread runs.
                dims.each_ref()
                    .map(|d| d.as_int().unwrap_or_default() as u32)
            });
            Ok(InterpretedVariant {
                checks,
                kernel,
                facts: VariantFacts {
                    block,
                    // The interpreter refuses kernels with clusters.
                    cluster: None,
                    shared_bytes,
                },
            })
        })
    }
}

/// Whether the interpreter runs one of the kernel's targets: a PTX arch up
/// to sm_80 (its device's compute capability) or WGSL.
pub(crate) fn check_target(def: &KernelDef, device: &DeviceInfo) -> Result<(), Error> {
    if def.targets.contains(&Target::Wgsl) {
        return Ok(());
    }
    select_arch(def, device).map(|_| ()).map_err(|_| {
        let built: Vec<&str> = def.targets.iter().map(|t| t.name()).collect();
        Error::InvalidLaunch {
            kernel: def.ir.name.clone(),
            message: format!(
                "it is built for {}, and the interpreter runs kernels with a PTX target up to \
                 sm_80 or a wgsl target (it has no Hopper mbarriers, TMA or wgmma): run it on a \
                 CUDA GPU, or add sm_80 or wgsl to its `arch(..)` if it uses none of those",
                built.join(", ")
            ),
        }
    })
}

/// A launch argument as the interpreter takes it: a scalar's value, or a
/// copy of a view's bytes as typed elements.
fn interpreter_arg(index: usize, arg: &KernelArg<'_>) -> Result<Arg, Error> {
    match &arg.kind {
        ArgKind::Scalar { value, .. } => match value {
            warpforge_codegen::eval::HostValue::Scalar(literal) => Ok(Arg::Scalar(*literal)),
            warpforge_codegen::eval::HostValue::Slice { .. } => Err(Error::Buffer(
                "a scalar argument holds a slice's length: this is a bug in warpforge's \
                 KernelArg; report it"
                    .into(),
            )),
        },
        ArgKind::Buffer {
            elem,
            len,
            offset_bytes,
            memory,
        } => {
            let buffer = match memory {
                MemoryRef::Interpreter(buffer) => *buffer,
                MemoryRef::InterpreterMut(buffer) => &**buffer,
                // Only a GPU backend's buffer, absent from a build without them.
                #[allow(unreachable_patterns)]
                _ => {
                    return Err(foreign_argument(
                        &format!("argument {index}"),
                        "the interpreter",
                    ))
                }
            };
            let start = *offset_bytes as usize;
            let end = start + len * elem.size_bytes() as usize;
            interp::Buffer::from_bytes(*elem, &buffer.bytes[start..end])
                .map(Arg::Slice)
                .map_err(|e| Error::Buffer(e.message))
        }
    }
}

/// Refuses element types the interpreter does not compute with.
fn check_element<T: DeviceScalar>() -> Result<(), Error> {
    interp::Buffer::check_elem(T::SCALAR).map_err(|e| {
        Error::Buffer(format!(
            "buffers of {} are not supported on the interpreter backend: {e}",
            T::SCALAR.name()
        ))
    })
}

/// The interpreter's limits (`interp::interpret` checks the same) and
/// identity. It reports no SMs, registers, L2 or memory size, as wgpu does
/// not: those fields are 0, except one SM, since it runs one block at a
/// time.
fn device_info() -> DeviceInfo {
    let shared = interp::MAX_SHARED_BYTES as u32;
    DeviceInfo {
        backend: DeviceBackend::Interpreter,
        name: "warpforge interpreter".into(),
        ordinal: 0,
        compute_capability: (8, 0),
        sm_count: 1,
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65_535, 65_535],
        shared_mem_per_block: 48 * 1024,
        shared_mem_per_block_optin: shared,
        shared_mem_per_sm: shared,
        registers_per_block: 0,
        warp_size: 32,
        l2_cache_bytes: 0,
        total_memory_bytes: 0,
        driver_version: (0, 0),
    }
}
