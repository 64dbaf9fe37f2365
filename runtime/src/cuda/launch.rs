//! Kernel launches: parameters packed in the PTX backend's ABI and handed to
//! `cuLaunchKernel` on the runtime's stream.
//!
//! The ABI: one `.param` per scalar parameter, of the scalar's type (`bool`
//! as a `u32` 0 or 1); two per slice parameter, the `u64` device pointer and
//! the `u32` length in elements.

use std::ffi::c_void;

use cudarc::driver::{result, SyncOnDrop};
use warpforge_codegen::KernelDef;

use super::CudaBackend;
use crate::buffer::{ArgKind, KernelArg, MemoryRef};
use crate::error::driver_error;
use crate::validate::{check_consts, select_arch, validate_launch, LaunchDims};
use crate::{Error, Grid};

impl CudaBackend {
    pub(crate) fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        let arch = select_arch(def, &self.info)?;
        let variant = self.modules.get_or_compile(def, consts, arch, || {
            // Codegen would also refuse a wrong count, in its own words; ours say what to pass.
            check_consts(def, consts)?;
            warpforge_codegen::compile_ptx(def, consts, arch).map_err(|source| Error::Codegen {
                variant: def.variant_name(consts),
                arch,
                source,
            })
        })?;
        let infos: Vec<_> = args.iter().map(KernelArg::info).collect();
        let dims = validate_launch(def, consts, &variant.facts, &grid, &infos, &self.info)?;
        let function = variant.function(&self.ctx, self.info.shared_mem_per_block)?;
        self.enqueue(function, &dims, args, &def.variant_name(consts))
    }

    fn enqueue(
        &self,
        function: cudarc::driver::sys::CUfunction,
        dims: &LaunchDims,
        args: &mut [KernelArg<'_>],
        kernel: &str,
    ) -> Result<(), Error> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))?;
        // Each parameter gets a 64-bit slot holding its value in the low
        // bytes; the driver copies as many bytes as the parameter is wide
        // (little-endian hosts: x86-64 and aarch64).
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        // Keep cudarc's read/write events in step; recorded when dropped after the launch.
        let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
        for (index, arg) in args.iter_mut().enumerate() {
            match &mut arg.kind {
                ArgKind::Scalar { bits, .. } => slots.push(*bits),
                ArgKind::Buffer { len, memory, .. } => {
                    let owner = match memory {
                        MemoryRef::Cuda(m) => m.context(),
                        MemoryRef::CudaMut(m) => m.context(),
                    };
                    self.check_owner(owner, &format!("argument {index} of `{kernel}`"))?;
                    let (ptr, guard) = match memory {
                        MemoryRef::Cuda(m) => m.read_ptr(&self.stream),
                        MemoryRef::CudaMut(m) => m.write_ptr(&self.stream),
                    };
                    slots.push(ptr);
                    // Validation guarantees the length fits a u32.
                    slots.push(*len as u64);
                    guards.push(guard);
                }
            }
        }
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|slot| slot as *mut u64 as *mut c_void)
            .collect();
        let [bx, by, bz] = dims.blocks;
        let [tx, ty, tz] = dims.threads;
        // SAFETY: `function` is loaded in this context; `params` points at one
        // live slot per kernel parameter, in order and of the ABI's types
        // (checked against the IR's signature); the buffers stay borrowed
        // until the guards record the launch.
        let launched = unsafe {
            result::launch_kernel(
                function,
                (bx, by, bz),
                (tx, ty, tz),
                dims.shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        };
        drop(guards);
        launched.map_err(|e| driver_error(&format!("launching `{kernel}`"), e))?;
        self.check_recorded(&format!("launching `{kernel}`"))
    }
}
