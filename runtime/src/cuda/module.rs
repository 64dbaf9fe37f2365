//! The module caches. A variant's PTX is built once per process: the
//! [`CompiledVariant`]s of [`compiled_variants`], by (kernel, const values,
//! arch), serve every CUDA runtime, since the PTX for an arch is the same on
//! every GPU that runs it. A `CUmodule` belongs to one context, so each
//! runtime loads (the driver JIT-compiles) its own, on the first launch that
//! passes its checks, into its [`ModuleCache`], which its forks share.

use std::ffi::{c_void, CString};
use std::sync::{Arc, LazyLock, OnceLock};

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUfunction_attribute, CUjit_option};
use cudarc::driver::CudaContext;
use warpforge_codegen::back::ptx::PtxModule;
use warpforge_codegen::{Arch, KernelDef};

use super::driver_error::{code_name, driver_error, driver_hint};
use crate::device::DeviceInfo;
use crate::tune::{LoadedResources, VariantResources};
use crate::validate::{VariantChecks, VariantFacts};
use crate::variants::VariantCache;
use crate::Error;

/// The PTX variants a runtime has loaded into its context, by arch.
pub(crate) type ModuleCache = VariantCache<Arch, Variant>;

/// The PTX variants of the process, by arch: built once for every runtime
/// (and so every GPU) that launches them. Kept for the process's life, as a
/// runtime's cache keeps its variants for the runtime's: a variant's PTX
/// text is tens of kilobytes.
pub(crate) fn compiled_variants() -> &'static VariantCache<Arch, CompiledVariant> {
    static COMPILED: LazyLock<VariantCache<Arch, CompiledVariant>> =
        LazyLock::new(VariantCache::default);
    &COMPILED
}

/// One variant's PTX and what its launches are checked against: the same
/// for every context.
pub(crate) struct CompiledVariant {
    arch: Arch,
    pub(crate) variant_name: String,
    ptx: PtxModule,
    pub(crate) facts: VariantFacts,
    pub(crate) checks: VariantChecks,
}

impl CompiledVariant {
    pub(crate) fn new(
        def: &KernelDef,
        consts: &[i64],
        arch: Arch,
        ptx: PtxModule,
        checks: VariantChecks,
    ) -> CompiledVariant {
        CompiledVariant {
            arch,
            variant_name: def.variant_name(consts),
            facts: VariantFacts {
                block: ptx.block,
                cluster: ptx.cluster,
                shared_bytes: ptx.shared_bytes,
            },
            checks,
            ptx,
        }
    }
}

/// One compiled variant in one context, loaded on first use.
pub(crate) struct Variant {
    pub(crate) compiled: Arc<CompiledVariant>,
    loaded: OnceLock<LoadedModule>,
    /// What the driver reported the first time it was asked: a loaded
    /// module's attributes and occupancy do not change, and the wgmma GEMMs
    /// size their persistent grid from them at every launch.
    resources: OnceLock<VariantResources>,
}

impl Variant {
    pub(crate) fn new(compiled: Arc<CompiledVariant>) -> Variant {
        Variant {
            compiled,
            loaded: OnceLock::new(),
            resources: OnceLock::new(),
        }
    }
}

impl Variant {
    /// The entry point, loading the module into `ctx` on first use.
    /// `default_shared` is the shared memory a block gets without opting in.
    pub(crate) fn function(
        &self,
        ctx: &Arc<CudaContext>,
        default_shared: u32,
    ) -> Result<sys::CUfunction, Error> {
        if let Some(loaded) = self.loaded.get() {
            return Ok(loaded.function);
        }
        let loaded = LoadedModule::load(ctx, &self.compiled, default_shared)?;
        // Another thread may have loaded it meanwhile; its module wins and ours is unloaded.
        Ok(self.loaded.get_or_init(|| loaded).function)
    }
}

impl Variant {
    /// What the device reports about this variant, loading it unless it
    /// needs more shared memory than a block may have; asked of the driver
    /// once.
    pub(crate) fn resources(
        &self,
        ctx: &Arc<CudaContext>,
        device: &DeviceInfo,
    ) -> Result<VariantResources, Error> {
        if let Some(resources) = self.resources.get() {
            return Ok(*resources);
        }
        let resources = self.query_resources(ctx, device)?;
        Ok(*self.resources.get_or_init(|| resources))
    }

    /// [`Variant::resources`], from the driver.
    fn query_resources(
        &self,
        ctx: &Arc<CudaContext>,
        device: &DeviceInfo,
    ) -> Result<VariantResources, Error> {
        let threads_per_block = self.compiled.facts.block.map(|[x, y, z]| x * y * z);
        let dynamic = self.compiled.facts.shared_bytes;
        if dynamic > device.shared_mem_per_block_optin {
            return Ok(VariantResources {
                threads_per_block,
                shared_bytes: dynamic,
                loaded: None,
            });
        }
        let function = self.function(ctx, device.shared_mem_per_block)?;
        ctx.bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))?;
        let op = format!("reading the attributes of `{}`", self.compiled.variant_name);
        let attribute = |attribute: CUfunction_attribute| -> Result<u32, Error> {
            // SAFETY: `function` belongs to this variant's loaded module, which
            // stays loaded while the variant lives; the context is current.
            let value = unsafe { result::function::get_function_attribute(function, attribute) }
                .map_err(|e| driver_error(&op, e))?;
            Ok(value.max(0) as u32)
        };
        let static_shared = attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        let blocks_per_sm = match threads_per_block {
            Some(threads) => {
                // SAFETY: as above; the block size and dynamic shared memory are the launch's.
                let blocks = unsafe {
                    result::occupancy::max_active_block_per_multiprocessor(
                        function,
                        threads as i32,
                        dynamic as usize,
                    )
                }
                .map_err(|e| driver_error(&op, e))?;
                Some(blocks.max(0) as u32)
            }
            None => None,
        };
        let resident_clusters = match (self.compiled.facts.cluster, self.compiled.facts.block) {
            (Some([cx, cy, cz]), Some([bx, by, bz])) => {
                let config = sys::CUlaunchConfig {
                    gridDimX: cx,
                    gridDimY: cy,
                    gridDimZ: cz,
                    blockDimX: bx,
                    blockDimY: by,
                    blockDimZ: bz,
                    sharedMemBytes: dynamic,
                    hStream: std::ptr::null_mut(),
                    // The cluster shape is the kernel's (`.reqnctapercluster`).
                    attrs: std::ptr::null_mut(),
                    numAttrs: 0,
                };
                let mut clusters = 0;
                // SAFETY: as above; the config describes one cluster of this
                // launch's blocks and names no attributes or stream.
                unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, function, &config) }
                    .result()
                    .map_err(|e| driver_error(&op, e))?;
                Some(clusters.max(0) as u32)
            }
            _ => None,
        };
        Ok(VariantResources {
            threads_per_block,
            shared_bytes: dynamic + static_shared,
            loaded: Some(LoadedResources {
                registers_per_thread: attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
                local_bytes_per_thread: attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                )?,
                max_threads_per_block: attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                )?,
                blocks_per_sm,
                resident_clusters,
            }),
        })
    }
}

/// A loaded `CUmodule` and its one entry point; unloaded on drop.
struct LoadedModule {
    module: sys::CUmodule,
    function: sys::CUfunction,
    ctx: Arc<CudaContext>,
}

// SAFETY: module and function handles may be used from any thread of the
// process; every use binds `ctx` first.
unsafe impl Send for LoadedModule {}
unsafe impl Sync for LoadedModule {}

/// Bytes kept for the JIT compiler's error log.
const JIT_LOG_BYTES: usize = 16 * 1024;

impl LoadedModule {
    fn load(
        ctx: &Arc<CudaContext>,
        variant: &CompiledVariant,
        default_shared: u32,
    ) -> Result<LoadedModule, Error> {
        let ptx = &variant.ptx;
        let malformed = |what: &str| {
            Error::ModuleLoad {
            variant: variant.variant_name.clone(),
            arch: variant.arch,
            code: "invalid text".into(),
            hint: format!("The {what} contains a NUL byte; this is a bug in the PTX backend: report the kernel."),
            log: String::new(),
        }
        };
        let text = CString::new(ptx.text.as_str()).map_err(|_| malformed("PTX text"))?;
        let entry = CString::new(ptx.entry.as_str()).map_err(|_| malformed("entry name"))?;
        ctx.bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))?;

        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The size option's value is the integer itself, in the pointer slot.
        let mut values = [
            log.as_mut_ptr() as *mut c_void,
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `text` is NUL-terminated PTX; the option arrays have the
        // stated length and the log buffer outlives the call.
        let loaded = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                text.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        }
        .result();
        if let Err(err) = loaded {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(Error::ModuleLoad {
                variant: variant.variant_name.clone(),
                arch: variant.arch,
                code: code_name(err.0),
                hint: driver_hint(err.0).to_string(),
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            });
        }
        // From here on, dropping `this` unloads the module.
        let mut this = LoadedModule {
            module,
            function: std::ptr::null_mut(),
            ctx: ctx.clone(),
        };
        // SAFETY: `module` was just loaded and is not unloaded before `this` drops.
        this.function = unsafe { result::module::get_function(module, entry) }.map_err(|e| {
            driver_error(
                &format!(
                    "finding entry point `{}` of `{}`",
                    ptx.entry, variant.variant_name
                ),
                e,
            )
        })?;
        if ptx.shared_bytes > default_shared {
            // Dynamic shared memory above the default needs an opt-in per function.
            // SAFETY: `function` belongs to the loaded module; the context is current.
            unsafe {
                result::function::set_function_attribute(
                    this.function,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    ptx.shared_bytes as i32,
                )
            }
            .map_err(|e| {
                driver_error(
                    &format!(
                        "allowing {} bytes of shared memory for `{}`",
                        ptx.shared_bytes, variant.variant_name
                    ),
                    e,
                )
            })?;
        }
        Ok(this)
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; cudarc keeps them for the next call.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: the module is loaded and nothing uses it after this.
        self.ctx
            .record_err(unsafe { result::module::unload(self.module) });
    }
}
