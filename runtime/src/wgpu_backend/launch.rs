//! Launches of WGSL variants: the `Params` uniform and the storage buffers
//! bound as the WGSL backend's ABI says (`warpforge_codegen::back::wgsl`, as
//! recorded in each [`WgslModule`]), one compute pass, one submission.

use std::sync::{Arc, OnceLock};

use ::wgpu::{self as wg, util::DeviceExt};
use half::f16;
use warpforge_codegen::back::wgsl::{WgslModule, WgslParam};
use warpforge_codegen::ir::Scalar;
use warpforge_codegen::{KernelDef, Target};

use super::WgpuBackend;
use crate::buffer::{foreign_argument, ArgKind, KernelArg, MemoryRef};
use crate::device::DeviceBackend;
use crate::tune::VariantResources;
use crate::validate::{check_consts, missing_block, LaunchDims, VariantChecks, VariantFacts};
use crate::{Error, Grid};

/// One compiled WGSL variant; its pipeline is created on first use.
pub(crate) struct WgslVariant {
    variant_name: String,
    checks: VariantChecks,
    module: WgslModule,
    /// Whether the kernel fixes its block shape (`block(..)`), as opposed to
    /// taking the launch's.
    declared_block: bool,
    pipeline: OnceLock<(wg::ComputePipeline, wg::BindGroupLayout)>,
}

impl WgpuBackend {
    /// Launches the variant of `def` for `consts`, building its WGSL with
    /// `compile` (given the launch's block shape when the kernel declares
    /// none) on its first launch with that shape.
    pub(crate) fn launch(
        &self,
        def: &KernelDef,
        consts: &[i64],
        grid: Grid,
        args: &mut [KernelArg<'_>],
        compile: impl FnOnce(Option<[u32; 3]>) -> Result<WgslModule, warpforge_codegen::Error>,
    ) -> Result<(), Error> {
        check_wgsl_target(def)?;
        check_consts(def, consts)?;
        // A WGSL entry point fixes its workgroup size: a kernel without
        // `block(..)` is compiled for the launch's.
        let block = match (def.ir.block.is_some(), grid.threads) {
            (true, _) => None,
            (false, Some(threads)) => Some(threads),
            (false, None) => return Err(missing_block(&def.variant_name(consts))),
        };
        let variant = self.variant(def, consts, block, compile)?;
        let facts = VariantFacts {
            block: variant.declared_block.then_some(variant.module.block),
            // WGSL has no clusters.
            cluster: None,
            // Workgroup memory is static in WGSL; wgpu checks it against the
            // adapter's limit when it creates the pipeline.
            shared_bytes: 0,
        };
        let infos: Vec<_> = args.iter().map(KernelArg::info).collect();
        // WGSL has no tensor maps.
        let (dims, _) = variant
            .checks
            .validate_launch(def, &facts, &grid, &infos, &self.info)?;
        self.check_features(&variant)?;
        let (pipeline, layout) = self.pipeline(&variant)?;
        self.dispatch(&variant, pipeline, layout, &dims, args)
    }

    /// The cached variant of `def` for `consts` and `block` (`None` for a
    /// kernel that declares its block), built with `compile` on first use.
    fn variant(
        &self,
        def: &KernelDef,
        consts: &[i64],
        block: Option<[u32; 3]>,
        compile: impl FnOnce(Option<[u32; 3]>) -> Result<WgslModule, warpforge_codegen::Error>,
    ) -> Result<Arc<WgslVariant>, Error> {
        self.pipelines.get_or_compile(def, consts, block, || {
            let checks = VariantChecks::new(def, consts)?;
            Ok(WgslVariant {
                variant_name: def.variant_name(consts),
                checks,
                module: compile(block).map_err(|source| codegen_error(def, consts, source))?,
                declared_block: def.ir.block.is_some(),
                pipeline: OnceLock::new(),
            })
        })
    }

    /// What is known on wgpu about the variant of `def` for `consts`: its
    /// declared block and its workgroup memory, counted from the WGSL. A
    /// kernel that declares its block is built into the pipeline cache
    /// [`WgpuBackend::launch`] uses, and its pipeline created unless its
    /// workgroup memory is over the adapter's limit (wgpu leaves that check
    /// to the driver, so the pruning rule must see it first); one that
    /// declares none is built for each launch's block, so here it is emitted
    /// for one invocation only to count its workgroup arrays, whose sizes do
    /// not depend on the block. wgpu reports no registers or occupancy:
    /// `loaded` is `None`.
    pub(crate) fn variant_resources(
        &self,
        def: &KernelDef,
        consts: &[i64],
        compile: impl FnOnce(Option<[u32; 3]>) -> Result<WgslModule, warpforge_codegen::Error>,
    ) -> Result<VariantResources, Error> {
        check_wgsl_target(def)?;
        check_consts(def, consts)?;
        if def.ir.block.is_none() {
            let module = compile(Some([1, 1, 1])).map_err(|e| codegen_error(def, consts, e))?;
            return Ok(VariantResources {
                threads_per_block: None,
                shared_bytes: workgroup_bytes(&module, &def.variant_name(consts))?,
                loaded: None,
            });
        }
        let variant = self.variant(def, consts, None, compile)?;
        let shared_bytes = workgroup_bytes(&variant.module, &variant.variant_name)?;
        if shared_bytes <= self.info.shared_mem_per_block_optin {
            self.check_features(&variant)?;
            self.pipeline(&variant)?;
        }
        let [x, y, z] = variant.module.block;
        Ok(VariantResources {
            threads_per_block: Some(x * y * z),
            shared_bytes,
            loaded: None,
        })
    }

    /// Refuses a module that needs a feature the adapter lacks.
    fn check_features(&self, variant: &WgslVariant) -> Result<(), Error> {
        let DeviceBackend::Wgpu(wgpu) = &self.info.backend else {
            return Ok(());
        };
        let refuse = |message: String| Error::InvalidLaunch {
            kernel: variant.variant_name.clone(),
            message,
        };
        if variant.module.needs_f16 && !wgpu.shader_f16 {
            return Err(refuse(format!(
                "it computes in f16, and {} ({}) has no shader f16 support (SHADER_F16): use an \
                 f32 variant, another adapter (WGPU_ADAPTER_NAME), or CUDA",
                self.info.name, wgpu.api
            )));
        }
        if variant.module.needs_subgroups && wgpu.subgroup_sizes != Some((32, 32)) {
            return Err(refuse(format!(
                "it uses warp operations, which need subgroups of exactly 32 invocations, and {} \
                 ({}) {}: use a variant without warp operations, another adapter \
                 (WGPU_ADAPTER_NAME), or CUDA",
                self.info.name,
                wgpu.api,
                match wgpu.subgroup_sizes {
                    Some((min, max)) if min == max => format!("has subgroups of {min}"),
                    Some((min, max)) => format!("has subgroups of {min} to {max}"),
                    None => "has no subgroup support".to_string(),
                }
            )));
        }
        Ok(())
    }

    /// The variant's pipeline, created on first use. Shader and pipeline
    /// errors are the variant's, with wgpu's message.
    fn pipeline<'v>(
        &self,
        variant: &'v WgslVariant,
    ) -> Result<(&'v wg::ComputePipeline, &'v wg::BindGroupLayout), Error> {
        if let Some((pipeline, layout)) = variant.pipeline.get() {
            return Ok((pipeline, layout));
        }
        let op = format!("building the WGSL of `{}`", variant.variant_name);
        let created = self
            .checked(&op, || {
                let shader = self
                    .device
                    .create_shader_module(wg::ShaderModuleDescriptor {
                        label: Some(&variant.variant_name),
                        source: wg::ShaderSource::Wgsl(variant.module.text.as_str().into()),
                    });
                let layout = self
                    .device
                    .create_bind_group_layout(&wg::BindGroupLayoutDescriptor {
                        label: Some(&variant.variant_name),
                        entries: &layout_entries(&variant.module),
                    });
                let pipeline_layout =
                    self.device
                        .create_pipeline_layout(&wg::PipelineLayoutDescriptor {
                            label: Some(&variant.variant_name),
                            bind_group_layouts: &[Some(&layout)],
                            immediate_size: 0,
                        });
                let pipeline =
                    self.device
                        .create_compute_pipeline(&wg::ComputePipelineDescriptor {
                            label: Some(&variant.variant_name),
                            layout: Some(&pipeline_layout),
                            module: &shader,
                            entry_point: Some(&variant.module.entry),
                            compilation_options: wg::PipelineCompilationOptions::default(),
                            cache: None,
                        });
                (pipeline, layout)
            })
            .map_err(|e| {
                Error::Wgpu(format!(
                    "{e}\nThe WGSL backend produced a module wgpu rejects: report the kernel with \
                     this message"
                ))
            })?;
        // Another thread may have created it meanwhile; its pipeline wins.
        let (pipeline, layout) = variant.pipeline.get_or_init(|| created);
        Ok((pipeline, layout))
    }

    fn dispatch(
        &self,
        variant: &WgslVariant,
        pipeline: &wg::ComputePipeline,
        layout: &wg::BindGroupLayout,
        dims: &LaunchDims,
        args: &mut [KernelArg<'_>],
    ) -> Result<(), Error> {
        let kernel = &variant.variant_name;
        let module = &variant.module;
        let mut params = vec![0u8; module.params_bytes as usize];
        let mut bindings: Vec<u32> = Vec::new();
        let mut buffers: Vec<wg::BufferBinding<'_>> = Vec::new();
        for (index, (arg, place)) in args.iter().zip(&module.params).enumerate() {
            match (&arg.kind, *place) {
                (ArgKind::Scalar { ty, bits, .. }, WgslParam::Scalar { offset }) => {
                    let word = uniform_word(*ty, *bits).ok_or_else(|| Error::InvalidLaunch {
                        kernel: kernel.clone(),
                        message: format!(
                            "argument {index} is a {}, which WGSL kernels cannot take: this is a \
                             bug in the WGSL backend, which should have refused the kernel",
                            ty.name()
                        ),
                    })?;
                    write_word(&mut params, offset, word, kernel)?;
                }
                (
                    ArgKind::Buffer {
                        elem,
                        len,
                        offset_bytes,
                        memory,
                    },
                    WgslParam::Slice {
                        binding,
                        len_offset,
                        ..
                    },
                ) => {
                    let buffer = match memory {
                        MemoryRef::Wgpu(b) => *b,
                        MemoryRef::WgpuMut(b) => &**b,
                        _ => {
                            let what = format!("argument {index} of `{kernel}`");
                            return Err(foreign_argument(&what, "wgpu"));
                        }
                    };
                    self.check_owner(buffer, &format!("argument {index} of `{kernel}`"))?;
                    // Validation guarantees the length fits a u32.
                    write_word(&mut params, len_offset, *len as u32, kernel)?;
                    // The view's bytes, in whole words as bindings need; they
                    // stay inside the buffer, whose size is rounded up alike.
                    let size = (*len as u64 * u64::from(elem.size_bytes())).next_multiple_of(4);
                    buffers.push(wg::BufferBinding {
                        buffer: &buffer.buffer,
                        offset: *offset_bytes,
                        size: std::num::NonZeroU64::new(size),
                    });
                    bindings.push(binding);
                }
                _ => {
                    return Err(Error::InvalidLaunch {
                        kernel: kernel.clone(),
                        message: format!(
                            "argument {index} does not match the WGSL module's parameter layout: \
                             this is a bug in the WGSL backend; report the kernel"
                        ),
                    })
                }
            }
        }
        let op = format!("launching `{kernel}`");
        self.checked(&op, || {
            let uniform = self
                .device
                .create_buffer_init(&wg::util::BufferInitDescriptor {
                    label: Some("warpforge params"),
                    contents: &params,
                    usage: wg::BufferUsages::UNIFORM,
                });
            let mut entries = vec![wg::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            }];
            entries.extend(bindings.iter().zip(&buffers).map(|(&binding, buffer)| {
                wg::BindGroupEntry {
                    binding,
                    resource: wg::BindingResource::Buffer(buffer.clone()),
                }
            }));
            let bind_group = self.device.create_bind_group(&wg::BindGroupDescriptor {
                label: Some(kernel),
                layout,
                entries: &entries,
            });
            let mut encoder = self
                .device
                .create_command_encoder(&wg::CommandEncoderDescriptor::default());
            {
                let mut pass = encoder.begin_compute_pass(&wg::ComputePassDescriptor {
                    label: Some(kernel),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                let [x, y, z] = dims.blocks;
                pass.dispatch_workgroups(x, y, z);
            }
            self.queue.submit([encoder.finish()]);
        })
    }
}

/// Refuses a kernel without a `wgsl` target, naming the targets it has.
fn check_wgsl_target(def: &KernelDef) -> Result<(), Error> {
    if def.targets.contains(&Target::Wgsl) {
        return Ok(());
    }
    let built: Vec<&str> = def.targets.iter().map(|t| t.name()).collect();
    Err(Error::InvalidLaunch {
        kernel: def.ir.name.clone(),
        message: format!(
            "kernel {} has no WGSL variant (it targets {}): run it on CUDA \
             (WARPFORGE_BACKEND=cuda) or add wgsl to its arch(..)",
            def.ir.name,
            if built.is_empty() {
                "nothing".to_string()
            } else {
                built.join(", ")
            }
        ),
    })
}

fn codegen_error(def: &KernelDef, consts: &[i64], source: warpforge_codegen::Error) -> Error {
    Error::Codegen {
        variant: def.variant_name(consts),
        target: Target::Wgsl,
        source,
    }
}

/// The bytes of the module's `var<workgroup>` arrays as naga lays them out
/// (each at its type's alignment), which is what the driver allocates.
fn workgroup_bytes(module: &WgslModule, variant: &str) -> Result<u32, Error> {
    use wg::naga;
    let parsed = naga::front::wgsl::parse_str(&module.text).map_err(|e| {
        Error::Wgpu(format!(
            "naga could not parse the WGSL of `{variant}` to count its workgroup memory: {}\nThe \
             WGSL backend produced a module naga rejects: report the kernel with this message",
            e.emit_to_string(&module.text)
        ))
    })?;
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(parsed.to_ctx()).map_err(|e| {
        Error::Wgpu(format!(
            "naga could not lay out the types of `{variant}`: {e}; report the kernel with this \
             message"
        ))
    })?;
    let mut bytes = 0u32;
    for (_, var) in parsed.global_variables.iter() {
        if var.space == naga::AddressSpace::WorkGroup {
            let layout = layouter[var.ty];
            bytes = layout.alignment.round_up(bytes) + layout.size;
        }
    }
    Ok(bytes)
}

/// Binding 0 the `Params` uniform, then one storage buffer per slice.
fn layout_entries(module: &WgslModule) -> Vec<wg::BindGroupLayoutEntry> {
    let entry = |binding, ty| wg::BindGroupLayoutEntry {
        binding,
        visibility: wg::ShaderStages::COMPUTE,
        ty: wg::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let mut entries = vec![entry(0, wg::BufferBindingType::Uniform)];
    for param in &module.params {
        if let WgslParam::Slice {
            binding, read_only, ..
        } = *param
        {
            entries.push(entry(binding, wg::BufferBindingType::Storage { read_only }));
        }
    }
    entries
}

/// The 4 bytes of a scalar parameter in `Params`: f32, i32 and u32 as
/// themselves, bool as u32 0/1, f16 as f32, i8/u8 extended to 32 bits; `None`
/// for the types WGSL has no value for.
fn uniform_word(ty: Scalar, bits: u64) -> Option<u32> {
    match ty {
        Scalar::F32 | Scalar::I32 | Scalar::U32 | Scalar::Bool | Scalar::U8 => Some(bits as u32),
        Scalar::I8 => Some(bits as u8 as i8 as i32 as u32),
        Scalar::F16 => Some(f16::from_bits(bits as u16).to_f32().to_bits()),
        Scalar::Bf16 | Scalar::F64 | Scalar::I64 | Scalar::U64 | Scalar::E4m3 | Scalar::E5m2 => {
            None
        }
    }
}

fn write_word(params: &mut [u8], offset: u32, word: u32, kernel: &str) -> Result<(), Error> {
    let offset = offset as usize;
    let size = params.len();
    let slot = params
        .get_mut(offset..offset + 4)
        .ok_or_else(|| Error::InvalidLaunch {
            kernel: kernel.to_string(),
            message: format!(
                "the WGSL module places a parameter at byte {offset}, past its {size}-byte Params: \
                 this is a bug in the WGSL backend; report the kernel"
            ),
        })?;
    slot.copy_from_slice(&word.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_parameters_in_params_words() {
        assert_eq!(
            uniform_word(Scalar::F32, u64::from(1.5f32.to_bits())),
            Some(1.5f32.to_bits())
        );
        assert_eq!(uniform_word(Scalar::Bool, 1), Some(1));
        assert_eq!(
            uniform_word(Scalar::I32, u64::from((-3i32) as u32)),
            Some((-3i32) as u32)
        );
        assert_eq!(uniform_word(Scalar::I8, 0xff), Some(u32::MAX));
        assert_eq!(uniform_word(Scalar::U8, 0xff), Some(255));
        assert_eq!(
            uniform_word(Scalar::F16, u64::from(f16::from_f32(-2.5).to_bits())),
            Some((-2.5f32).to_bits())
        );
        assert_eq!(uniform_word(Scalar::F64, 0), None);
        assert_eq!(uniform_word(Scalar::Bf16, 0), None);
    }
}

/// The launch path on hand-written WGSL in the backend's ABI, so it is
/// checked independently of codegen. Needs a wgpu adapter: the CPU tier has
/// lavapipe, and a missing adapter fails these tests with what to install.
#[cfg(test)]
mod wgsl_tests {
    use std::cell::Cell;

    use warpforge_codegen::ir::ParamType;

    use super::*;
    use crate::buffer::{DeviceBuffer, Memory};
    use crate::scalar::DeviceScalar;
    use crate::test_defs::kernel_def as def;
    use crate::wgpu_backend::mesa;

    fn backend() -> WgpuBackend {
        mesa::quiet_mesa();
        let backend = WgpuBackend::new().unwrap_or_else(|e| {
            panic!(
                "this test needs a wgpu adapter; without a GPU install Mesa's lavapipe: \
                 apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
            )
        });
        mesa::announce_adapter(&backend.info.backend_name(), &backend.info.name);
        backend
    }

    fn slice(elem: Scalar, mutable: bool) -> ParamType {
        ParamType::Slice { elem, mutable }
    }

    fn buffer<T: DeviceScalar>(backend: &WgpuBackend, data: &[T]) -> DeviceBuffer<T> {
        DeviceBuffer {
            memory: Memory::Wgpu(backend.upload(data).unwrap(), std::marker::PhantomData),
        }
    }

    fn download<T: DeviceScalar>(backend: &WgpuBackend, buffer: &DeviceBuffer<T>) -> Vec<T> {
        #[allow(irrefutable_let_patterns)]
        let Memory::Wgpu(memory, _) = &buffer.memory
        else {
            panic!("a wgpu buffer")
        };
        backend.download(memory).unwrap()
    }

    fn saxpy_def() -> KernelDef {
        def(
            "saxpy",
            vec![
                ("a", ParamType::Scalar(Scalar::F32)),
                ("x", slice(Scalar::F32, false)),
                ("y", slice(Scalar::F32, true)),
                ("n", ParamType::Scalar(Scalar::U32)),
            ],
            vec![Target::Ptx(warpforge_codegen::Arch::Sm70), Target::Wgsl],
        )
    }

    /// `saxpy` by hand, laid out as the WGSL backend lays it out.
    fn saxpy_wgsl(block: [u32; 3]) -> WgslModule {
        let text = format!(
            "struct Params {{ a: f32, x_len: u32, y_len: u32, n: u32 }}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({}, {}, {})
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    let i = id.x;
    if i < params.n && i < params.x_len && i < params.y_len {{
        y[i] = params.a * x[i] + y[i];
    }}
}}
",
            block[0], block[1], block[2]
        );
        WgslModule {
            text,
            entry: "main".into(),
            block,
            needs_f16: false,
            needs_subgroups: false,
            params_bytes: 16,
            params: vec![
                WgslParam::Scalar { offset: 0 },
                WgslParam::Slice {
                    binding: 1,
                    read_only: true,
                    len_offset: 4,
                },
                WgslParam::Slice {
                    binding: 2,
                    read_only: false,
                    len_offset: 8,
                },
                WgslParam::Scalar { offset: 12 },
            ],
        }
    }

    #[test]
    fn saxpy_reads_every_parameter_and_is_compiled_once_per_block() {
        let backend = backend();
        let saxpy = saxpy_def();
        let xs: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let ys: Vec<f32> = (0..1000).map(|i| 0.5 * i as f32).collect();
        let x = buffer(&backend, &xs);
        let mut y = buffer(&backend, &ys);
        let compiles = Cell::new(0);
        let compile = |block: Option<[u32; 3]>| {
            compiles.set(compiles.get() + 1);
            Ok(saxpy_wgsl(
                block.expect("saxpy declares no block: the launch's is passed"),
            ))
        };
        for threads in [128, 128, 64] {
            let mut args = [
                KernelArg::scalar(2.0f32),
                KernelArg::buffer(&x),
                KernelArg::buffer_mut(&mut y),
                KernelArg::scalar(700u32),
            ];
            backend
                .launch(&saxpy, &[], Grid::linear(1000, threads), &mut args, compile)
                .unwrap();
        }
        assert_eq!(compiles.get(), 2, "one compile per block shape");
        let out = download(&backend, &y);
        for (i, (&got, (&x0, &y0))) in out.iter().zip(xs.iter().zip(&ys)).enumerate() {
            // Three launches: y = 3 * 2x + y0 for i < n, untouched beyond.
            let want = if i < 700 { 6.0 * x0 + y0 } else { y0 };
            assert_eq!(got, want, "element {i}");
        }
    }

    /// A declared block, bool and f16 parameters, an f16 buffer of odd length.
    #[test]
    fn bool_and_f16_parameters_and_a_declared_block() {
        let backend = backend();
        let mut mark = def(
            "mark",
            vec![
                ("flag", ParamType::Scalar(Scalar::Bool)),
                ("h", ParamType::Scalar(Scalar::F16)),
                ("out", slice(Scalar::F16, true)),
            ],
            vec![Target::Wgsl],
        );
        let one = warpforge_codegen::ir::Expr {
            ty: Scalar::U32,
            kind: warpforge_codegen::ir::ExprKind::Literal(warpforge_codegen::ir::Literal::Int(1)),
        };
        mark.ir.block = Some([one.clone(), one.clone(), one]);
        let compile = |block: Option<[u32; 3]>| {
            assert_eq!(block, None, "a declared block is the kernel's own");
            Ok(WgslModule {
                text: "enable f16;
struct Params { flag: u32, h: f32, out_len: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f16>;
@compute @workgroup_size(63, 1, 1)
fn main(@builtin(local_invocation_id) id: vec3<u32>) {
    if id.x < params.out_len {
        out[id.x] = select(f16(0.0), f16(params.h), params.flag == 1u);
    }
}
"
                .into(),
                entry: "main".into(),
                block: [63, 1, 1],
                needs_f16: true,
                needs_subgroups: false,
                params_bytes: 16,
                params: vec![
                    WgslParam::Scalar { offset: 0 },
                    WgslParam::Scalar { offset: 4 },
                    WgslParam::Slice {
                        binding: 1,
                        read_only: false,
                        len_offset: 8,
                    },
                ],
            })
        };
        let DeviceBackend::Wgpu(wgpu) = &backend.info.backend else {
            panic!("a wgpu device")
        };
        let mut out = buffer(&backend, &[f16::from_f32(9.0); 63]);
        for (flag, want) in [(true, 1.5f32), (false, 0.0)] {
            let mut args = [
                KernelArg::scalar(flag),
                KernelArg::scalar(f16::from_f32(1.5)),
                KernelArg::buffer_mut(&mut out),
            ];
            let launched = backend.launch(&mark, &[], Grid::blocks([1, 1, 1]), &mut args, compile);
            if !wgpu.shader_f16 {
                let err = launched.unwrap_err().to_string();
                assert!(err.contains("SHADER_F16"), "{err}");
                return;
            }
            launched.unwrap();
            let values = download(&backend, &out);
            assert!(
                values.iter().all(|v| v.to_f32() == want),
                "flag {flag}: {values:?}"
            );
        }
        // The declared block is checked like on CUDA.
        let mut args = [
            KernelArg::scalar(true),
            KernelArg::scalar(f16::ONE),
            KernelArg::buffer_mut(&mut out),
        ];
        let err = backend
            .launch(
                &mark,
                &[],
                Grid::new([1, 1, 1], [64, 1, 1]),
                &mut args,
                compile,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("declares block(63, 1, 1)"), "{err}");
    }

    #[test]
    fn a_refused_launch_never_builds_the_pipeline_and_shader_errors_are_errors() {
        let backend = backend();
        let saxpy = saxpy_def();
        let compile = |block: Option<[u32; 3]>| {
            Ok(WgslModule {
                text: "this is not WGSL".into(),
                ..saxpy_wgsl(block.unwrap())
            })
        };
        let x = buffer(&backend, &[1.0f32; 8]);
        let y = buffer(&backend, &[1.0f32; 8]);
        // A shared borrow for `&mut [f32]`: refused before the shader is built.
        let mut args = [
            KernelArg::scalar(2.0f32),
            KernelArg::buffer(&x),
            KernelArg::buffer(&y),
            KernelArg::scalar(8u32),
        ];
        let err = backend
            .launch(&saxpy, &[], Grid::linear(8, 8), &mut args, compile)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
        // Valid arguments reach wgpu, which rejects the text: an error, not a panic.
        let mut y = y;
        let mut args = [
            KernelArg::scalar(2.0f32),
            KernelArg::buffer(&x),
            KernelArg::buffer_mut(&mut y),
            KernelArg::scalar(8u32),
        ];
        let err = backend
            .launch(&saxpy, &[], Grid::linear(8, 8), &mut args, compile)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("building the WGSL of `saxpy`") && err.contains("report the kernel"),
            "{err}"
        );
        // The device is still usable.
        assert_eq!(download(&backend, &y), vec![1.0; 8]);
    }

    #[test]
    fn kernels_without_a_wgsl_target_and_launches_without_a_block() {
        let backend = backend();
        let ptx_only = def(
            "ptx_only",
            vec![("y", slice(Scalar::F32, true))],
            vec![
                Target::Ptx(warpforge_codegen::Arch::Sm70),
                Target::Ptx(warpforge_codegen::Arch::Sm80),
            ],
        );
        let mut y = buffer(&backend, &[0.0f32; 4]);
        let never = |_: Option<[u32; 3]>| -> Result<WgslModule, warpforge_codegen::Error> {
            panic!("a refused launch compiles nothing")
        };
        let mut args = [KernelArg::buffer_mut(&mut y)];
        let err = backend
            .launch(&ptx_only, &[], Grid::linear(4, 4), &mut args, never)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kernel ptx_only has no WGSL variant (it targets sm_70, sm_80)")
                && err.contains("add wgsl to its arch(..)"),
            "{err}"
        );
        let err = backend
            .launch(&saxpy_def(), &[], Grid::blocks([1, 1, 1]), &mut args, never)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no block shape"), "{err}");
    }
}
