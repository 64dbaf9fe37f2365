//! Kernel launches: parameters packed in the PTX backend's ABI and handed to
//! `cuLaunchKernel` on the runtime's stream.
//!
//! The ABI: one `.param` per scalar parameter, of the scalar's type (`bool`
//! as a `u32` 0 or 1); two per slice parameter, the `u64` device pointer and
//! the `u32` length in elements, and a third, the 128-byte `CUtensorMap`,
//! for a slice declared with `#[tensor_map(..)]`.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys, SyncOnDrop};
use warpforge_codegen::back::ptx::PtxModule;
use warpforge_codegen::ir::{Scalar, Swizzle};
use warpforge_codegen::{Arch, KernelDef, Target};

use super::driver_error::driver_error;
use super::module::{compiled_variants, CompiledVariant, Variant};
use super::CudaBackend;
use crate::buffer::{foreign_argument, ArgKind, KernelArg, MemoryRef};
use crate::tensor_map::{TensorMapPlan, ALIGN as TMA_ALIGN};
use crate::validate::{select_arch, LaunchDims, VariantChecks};
use crate::{Error, Grid};

// Parameter slots hold values in their low bytes, which the driver reads first
// only on a little-endian host.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the CUDA launch path assumes a little-endian host"
);

impl CudaBackend {
    /// Launches the variant of `def` for `consts`, building its PTX with
    /// `compile` on the first launch for the chosen arch.
    pub(crate) fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
        compile: impl FnOnce(Arch) -> Result<PtxModule, warpforge_codegen::Error>,
    ) -> Result<(), Error> {
        let variant = self.variant(def, consts, compile)?;
        let infos: Vec<_> = args.iter().map(KernelArg::info).collect();
        let compiled = &variant.compiled;
        let (dims, maps) =
            compiled
                .checks
                .validate_launch(def, &compiled.facts, &grid, &infos, &self.info)?;
        let function = variant.function(&self.ctx, self.info.shared_mem_per_block)?;
        self.enqueue(function, &dims, args, &maps, &compiled.variant_name)
    }

    /// The variant of `def` for `consts` on the device's best arch, built
    /// with `compile` the first time in the process (any runtime's launch
    /// builds it for all: [`compiled_variants`]), not loaded: see
    /// [`Variant::function`].
    pub(crate) fn variant(
        &self,
        def: &KernelDef,
        consts: &[i64],
        compile: impl FnOnce(Arch) -> Result<PtxModule, warpforge_codegen::Error>,
    ) -> Result<Arc<Variant>, Error> {
        let arch = select_arch(def, &self.info)?;
        self.modules.get_or_compile(def, consts, arch, || {
            let compiled = compiled_variants().get_or_compile(def, consts, arch, || {
                // Before codegen, which would also refuse wrong const values, in
                // its own words; ours say what to pass.
                let checks = VariantChecks::new(def, consts)?;
                let ptx = compile(arch).map_err(|source| Error::Codegen {
                    variant: def.variant_name(consts),
                    target: Target::Ptx(arch),
                    source,
                })?;
                Ok(CompiledVariant::new(def, consts, arch, ptx, checks))
            })?;
            Ok(Variant::new(compiled))
        })
    }

    fn enqueue(
        &self,
        function: cudarc::driver::sys::CUfunction,
        dims: &LaunchDims,
        args: &mut [KernelArg<'_>],
        maps: &[TensorMapPlan],
        kernel: &str,
    ) -> Result<(), Error> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))?;
        // Each parameter gets a 64-bit slot holding its value in the low
        // bytes; the driver copies as many bytes as the parameter is wide.
        // A tensor map is its own 128 bytes, after its slice's two slots.
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        let mut encoded: Vec<(usize, sys::CUtensorMap)> = Vec::with_capacity(maps.len());
        // Keep cudarc's read/write events in step; recorded when dropped after the launch.
        let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
        for (index, arg) in args.iter_mut().enumerate() {
            match &mut arg.kind {
                ArgKind::Scalar { bits, .. } => slots.push(*bits),
                ArgKind::Buffer {
                    len,
                    offset_bytes,
                    memory,
                    ..
                } => {
                    let what = || format!("argument {index} of `{kernel}`");
                    let (ptr, guard) = match memory {
                        MemoryRef::Cuda(m) => {
                            self.check_owner(m.context(), what)?;
                            m.read_ptr(&self.stream)
                        }
                        MemoryRef::CudaMut(m) => {
                            self.check_owner(m.context(), what)?;
                            m.write_ptr(&self.stream)
                        }
                        _ => return Err(foreign_argument(&what(), "CUDA")),
                    };
                    // A view starts inside the allocation (checked when it was made).
                    let ptr = ptr + *offset_bytes;
                    slots.push(ptr);
                    // Validation guarantees the length fits a u32.
                    slots.push(*len as u64);
                    guards.push(guard);
                    if let Some(plan) = maps.iter().find(|m| m.param == index) {
                        encoded.push((slots.len(), encode_tensor_map(plan, ptr, &what())?));
                    }
                }
            }
        }
        let mut params: Vec<*mut c_void> = Vec::with_capacity(slots.len() + encoded.len());
        let mut maps_after = encoded.iter_mut().peekable();
        for (at, slot) in slots.iter_mut().enumerate() {
            params.push(slot as *mut u64 as *mut c_void);
            if let Some((_, map)) = maps_after.next_if(|(after, _)| *after == at + 1) {
                params.push(map as *mut sys::CUtensorMap as *mut c_void);
            }
        }
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
        self.check_recorded(format_args!("launching `{kernel}`"))
    }
}

/// Encodes the tensor map `plan` describes over the slice at device address
/// `ptr`: zeros read outside the tensor, no interleave, no L2 promotion.
fn encode_tensor_map(
    plan: &TensorMapPlan,
    ptr: u64,
    what: &str,
) -> Result<sys::CUtensorMap, Error> {
    use sys::CUtensorMapDataType_enum as Type;
    use sys::CUtensorMapSwizzle_enum as Swizzled;
    if !ptr.is_multiple_of(TMA_ALIGN) {
        return Err(Error::Buffer(format!(
            "{what} starts at device address {ptr:#x}, and a tensor map needs a multiple of \
             {TMA_ALIGN} bytes: pass a buffer (or a view) that starts aligned"
        )));
    }
    let data_type = match plan.elem {
        Scalar::F16 => Type::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Scalar::Bf16 => Type::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        Scalar::F32 => Type::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        Scalar::F64 => Type::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        Scalar::I8 | Scalar::U8 | Scalar::Bool | Scalar::E4m3 | Scalar::E5m2 => {
            Type::CU_TENSOR_MAP_DATA_TYPE_UINT8
        }
        Scalar::I32 => Type::CU_TENSOR_MAP_DATA_TYPE_INT32,
        Scalar::U32 => Type::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        Scalar::I64 => Type::CU_TENSOR_MAP_DATA_TYPE_INT64,
        Scalar::U64 => Type::CU_TENSOR_MAP_DATA_TYPE_UINT64,
    };
    let swizzle = match plan.swizzle {
        Swizzle::None => Swizzled::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => Swizzled::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => Swizzled::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => Swizzled::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let element_strides = vec![1u32; plan.shape.len()];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every array holds `shape.len()` entries (strides one fewer),
    // as the rank says; `map` is a live, aligned CUtensorMap.
    let result = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            plan.shape.len() as u32,
            ptr as *mut c_void,
            plan.shape.as_ptr(),
            plan.strides.as_ptr(),
            plan.tile.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave_enum::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion_enum::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            sys::CUtensorMapFloatOOBfill_enum::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    result.result().map_err(|e| {
        driver_error(
            &format!(
                "encoding the tensor map of {what} (shape {:?}, strides {:?} bytes, tile {:?}, innermost first)",
                plan.shape, plan.strides, plan.tile
            ),
            e,
        )
    })?;
    Ok(map)
}

/// The launch path on hand-written PTX in the backend's ABI, so it is checked
/// on a GPU independently of codegen. Without a driver there is nothing to
/// launch; `tests/device.rs` checks that case.
#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use half::f16;
    use warpforge_codegen::ir::{ParamType, Scalar};

    use super::*;
    use crate::buffer::{DeviceBuffer, Memory};
    use crate::scalar::DeviceScalar;
    use crate::test_defs::kernel_def;

    fn backend() -> CudaBackend {
        CudaBackend::new(0)
            .unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"))
    }

    fn def(name: &str, params: Vec<(&str, ParamType)>) -> KernelDef {
        kernel_def(name, params, vec![Target::Ptx(Arch::Sm70)])
    }

    fn ptx(text: &str, entry: &str, shared_bytes: u32, block: Option<[u32; 3]>) -> PtxModule {
        PtxModule {
            text: text.into(),
            entry: entry.into(),
            shared_bytes,
            block,
            cluster: None,
            version: (7, 0),
        }
    }

    fn buffer<T: DeviceScalar>(backend: &CudaBackend, data: &[T]) -> DeviceBuffer<T> {
        DeviceBuffer {
            memory: Memory::Cuda(backend.upload(data).unwrap()),
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn saxpy_reads_every_parameter_slot_and_is_compiled_once() {
        let backend = backend();
        let saxpy = def(
            "saxpy",
            vec![
                ("a", ParamType::Scalar(Scalar::F32)),
                (
                    "x",
                    ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: false,
                    },
                ),
                (
                    "y",
                    ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: true,
                    },
                ),
                ("n", ParamType::Scalar(Scalar::U32)),
            ],
        );
        let xs: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let ys: Vec<f32> = (0..1000).map(|i| 0.5 * i as f32).collect();
        let x = buffer(&backend, &xs);
        let mut y = buffer(&backend, &ys);
        let compiles = Cell::new(0);
        let compile = |_: Arch| {
            compiles.set(compiles.get() + 1);
            Ok(ptx(
                include_str!("../../tests/ptx/saxpy.ptx"),
                "saxpy",
                0,
                None,
            ))
        };
        for _ in 0..2 {
            let mut args = [
                KernelArg::scalar(2.0f32),
                KernelArg::buffer(&x),
                KernelArg::buffer_mut(&mut y),
                KernelArg::scalar(700u32),
            ];
            backend
                .launch(&saxpy, &[], Grid::linear(1000, 128), &mut args, compile)
                .unwrap();
        }
        assert_eq!(
            compiles.get(),
            1,
            "the second launch reuses the cached module"
        );
        let out = backend.download(y.cuda_slice().unwrap()).unwrap();
        for (i, (&got, (&x0, &y0))) in out.iter().zip(xs.iter().zip(&ys)).enumerate() {
            // Two launches: y = 2x + (2x + y0) for i < n, untouched beyond.
            let want = if i < 700 { 4.0 * x0 + y0 } else { y0 };
            assert_eq!(got, want, "element {i}");
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn bool_and_f16_parameters_declared_block_and_opt_in_shared_memory() {
        let backend = backend();
        let mark = def(
            "mark",
            vec![
                ("flag", ParamType::Scalar(Scalar::Bool)),
                ("h", ParamType::Scalar(Scalar::F16)),
                (
                    "out",
                    ParamType::Slice {
                        elem: Scalar::F16,
                        mutable: true,
                    },
                ),
            ],
        );
        // 64 KiB of dynamic shared memory needs the opt-in attribute.
        let compile = |_: Arch| {
            Ok(ptx(
                include_str!("../../tests/ptx/mark.ptx"),
                "mark",
                64 * 1024,
                Some([64, 1, 1]),
            ))
        };
        let mut out = buffer(&backend, &[f16::from_f32(9.0); 64]);
        for (flag, want) in [(true, 1.5f32), (false, 0.0)] {
            let mut args = [
                KernelArg::scalar(flag),
                KernelArg::scalar(f16::from_f32(1.5)),
                KernelArg::buffer_mut(&mut out),
            ];
            backend
                .launch(&mark, &[], Grid::blocks([1, 1, 1]), &mut args, compile)
                .unwrap();
            let values = backend.download(out.cuda_slice().unwrap()).unwrap();
            assert!(
                values.iter().all(|v| v.to_f32() == want),
                "flag {flag}: {values:?}"
            );
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn a_refused_launch_never_loads_the_module() {
        let backend = backend();
        let mark = def(
            "mark_refused",
            vec![
                ("flag", ParamType::Scalar(Scalar::Bool)),
                ("h", ParamType::Scalar(Scalar::F16)),
                (
                    "out",
                    ParamType::Slice {
                        elem: Scalar::F16,
                        mutable: true,
                    },
                ),
            ],
        );
        // Text that would fail to load: the launch must be refused before that.
        let compile = |_: Arch| Ok(ptx("not ptx", "mark", 0, Some([64, 1, 1])));
        let out = buffer(&backend, &[f16::ZERO; 64]);
        let mut args = [
            KernelArg::scalar(true),
            KernelArg::scalar(f16::ONE),
            KernelArg::buffer(&out),
        ];
        let err = backend
            .launch(&mark, &[], Grid::blocks([1, 1, 1]), &mut args, compile)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
        // Valid arguments reach the driver, which rejects the text with its log.
        let mut out = out;
        let mut args = [
            KernelArg::scalar(true),
            KernelArg::scalar(f16::ONE),
            KernelArg::buffer_mut(&mut out),
        ];
        let err = backend
            .launch(&mark, &[], Grid::blocks([1, 1, 1]), &mut args, compile)
            .unwrap_err();
        assert!(matches!(err, Error::ModuleLoad { .. }), "{err}");
    }
}
