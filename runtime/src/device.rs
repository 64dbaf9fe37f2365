//! [`DeviceInfo`]: what the runtime knows about a device. Plain data, so
//! tests without a GPU can describe one by hand.

use std::fmt;

use warpforge_codegen::Arch;

use crate::Error;

/// The limits and identity of one device, read once when the runtime starts.
/// Limits a backend does not report are 0 (see each field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Which API drives the device, with the limits only that API has.
    pub backend: DeviceBackend,
    /// The device's name, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// The device's index among the devices the driver sees (0 on wgpu: the adapter it picked).
    pub ordinal: usize,
    /// (major, minor), e.g. (9, 0) for an H100/H200; (0, 0) on wgpu, which runs no PTX.
    pub compute_capability: (u32, u32),
    /// 0 on wgpu, which does not report it.
    pub sm_count: u32,
    /// The most threads one block may have.
    pub max_threads_per_block: u32,
    /// The most threads per block along x, y and z.
    pub max_block_dims: [u32; 3],
    /// The most blocks per grid along x, y and z.
    pub max_grid_dims: [u32; 3],
    /// Shared memory a block gets without opting in (48 KiB on every arch we target).
    pub shared_mem_per_block: u32,
    /// The most shared memory a block can opt into (e.g. 227 KiB on sm_90).
    pub shared_mem_per_block_optin: u32,
    /// 0 on wgpu, which does not report it.
    pub shared_mem_per_sm: u32,
    /// 0 on wgpu, which does not report it.
    pub registers_per_block: u32,
    /// On wgpu, the smallest subgroup size the adapter may use.
    pub warp_size: u32,
    /// 0 on wgpu, which does not report it.
    pub l2_cache_bytes: u32,
    /// 0 on wgpu, which does not report it.
    pub total_memory_bytes: u64,
    /// The CUDA version the driver supports, (major, minor), e.g. (12, 4); (0, 0) on wgpu.
    pub driver_version: (u32, u32),
}

/// The API a runtime drives its device through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// NVIDIA GPUs through the CUDA driver: PTX variants.
    Cuda,
    /// Any adapter wgpu drives (Vulkan, Metal, DX12): WGSL variants.
    Wgpu,
    /// warpforge's reference interpreter on the CPU: no GPU or driver, every
    /// launch checked statement by statement ([`crate::Runtime::interpreter`]).
    Interpreter,
}

impl BackendKind {
    /// The values `WARPFORGE_BACKEND` accepts.
    pub const ENV_VALUES: [(&'static str, BackendKind); 3] = [
        ("cuda", BackendKind::Cuda),
        ("wgpu", BackendKind::Wgpu),
        ("interpreter", BackendKind::Interpreter),
    ];

    /// Reads a value of `WARPFORGE_BACKEND`: `None` (unset or empty) lets
    /// [`crate::Runtime::new`] choose.
    pub fn from_env_value(value: Option<&str>) -> Result<Option<BackendKind>, Error> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        Self::ENV_VALUES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(value))
            .map(|&(_, kind)| Some(kind))
            .ok_or_else(|| {
                Error::NoDevice(format!(
                    "WARPFORGE_BACKEND is `{value}`, which names no backend: set it to `cuda`, \
                     `wgpu` or `interpreter` (the CPU, no GPU needed), or unset it to use CUDA when \
                     a GPU driver is present and wgpu otherwise"
                ))
            })
    }
}

/// How [`crate::Runtime::time_ms`] measures work
/// ([`crate::Runtime::timing_method`]), so that a report can say how its
/// times were taken. Each backend has one rule: CUDA always uses events; wgpu
/// uses timestamp queries when the device has `Features::TIMESTAMP_QUERY`
/// (a runtime's own device asks for it whenever the adapter offers it) and
/// the host clock otherwise; the interpreter uses the host clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimingMethod {
    /// CUDA events recorded on the runtime's stream before and after the work.
    CudaEvents,
    /// wgpu timestamp queries: the start of an empty compute pass submitted
    /// before the work and the end of one submitted after it, scaled by the
    /// queue's timestamp period.
    GpuTimestamps,
    /// The host's monotonic clock from an idle device to the end of the
    /// work, waited for: GPU time plus the host's encoding and submission of
    /// each launch, so short kernels read longer than they run.
    HostClock,
}

impl fmt::Display for TimingMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimingMethod::CudaEvents => "CUDA events",
            TimingMethod::GpuTimestamps => "GPU timestamp queries",
            TimingMethod::HostClock => "host clock",
        })
    }
}

/// The backend of a device, with what only that backend has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceBackend {
    /// The CUDA driver.
    Cuda,
    /// wgpu, with what its adapter reports.
    Wgpu(WgpuDeviceInfo),
    /// warpforge's reference interpreter, on the CPU.
    Interpreter,
}

/// What wgpu reports about its adapter beyond the common limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgpuDeviceInfo {
    /// The graphics API wgpu drives the adapter through: "Vulkan", "Metal", "Dx12".
    pub api: String,
    /// The driver and its version, e.g. "llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))".
    pub driver: String,
    /// Whether shaders may use `f16` (`Features::SHADER_F16`).
    pub shader_f16: bool,
    /// The (smallest, largest) subgroup size, when shaders may use subgroup
    /// operations (`Features::SUBGROUP`); warp operations need (32, 32).
    pub subgroup_sizes: Option<(u32, u32)>,
    /// The most storage buffers one kernel may bind: one per slice parameter.
    pub max_storage_buffers_per_shader_stage: u32,
    /// The most bytes one storage buffer binding may hold.
    pub max_storage_buffer_binding_size: u64,
    /// The most bytes the uniform `Params` binding may hold.
    pub max_uniform_buffer_binding_size: u64,
    /// The most bytes one buffer may hold.
    pub max_buffer_size: u64,
}

impl DeviceBackend {
    /// Which backend this is, without its details: what code that takes a
    /// CUDA-only path (cuBLAS, CUDA graphs) matches on.
    pub fn kind(&self) -> BackendKind {
        match self {
            DeviceBackend::Cuda => BackendKind::Cuda,
            DeviceBackend::Wgpu(_) => BackendKind::Wgpu,
            DeviceBackend::Interpreter => BackendKind::Interpreter,
        }
    }
}

impl DeviceInfo {
    /// "CUDA", "wgpu (Vulkan)" or "interpreter": the API and, on wgpu, the
    /// graphics API under it.
    pub fn backend_name(&self) -> String {
        match &self.backend {
            DeviceBackend::Cuda => "CUDA".to_string(),
            DeviceBackend::Wgpu(wgpu) => format!("wgpu ({})", wgpu.api),
            DeviceBackend::Interpreter => "interpreter".to_string(),
        }
    }

    /// Whether PTX built for `arch` runs here: the driver JIT-compiles PTX
    /// for any device of the same or a higher compute capability, and an
    /// arch-specific target (`sm_90a`) for its own compute capability only.
    pub fn supports(&self, arch: Arch) -> bool {
        arch.runs_on(self.compute_capability)
    }

    /// Whether `other` is a device of the same model on the same driver:
    /// every field but the ordinal is equal (name, compute capability, SM
    /// count, limits, memory, driver version). Runtimes of such devices share
    /// their tuned entry points' dispatchers, and so one tuning
    /// ([`crate::Runtime::tuned_dispatcher`]); MIG slices of one GPU that
    /// differ in SMs or memory are different models.
    pub fn same_model(&self, other: &DeviceInfo) -> bool {
        // Destructured, so that a new field cannot be left out of the comparison.
        let DeviceInfo {
            backend,
            name,
            ordinal: _,
            compute_capability,
            sm_count,
            max_threads_per_block,
            max_block_dims,
            max_grid_dims,
            shared_mem_per_block,
            shared_mem_per_block_optin,
            shared_mem_per_sm,
            registers_per_block,
            warp_size,
            l2_cache_bytes,
            total_memory_bytes,
            driver_version,
        } = self;
        *backend == other.backend
            && *name == other.name
            && *compute_capability == other.compute_capability
            && *sm_count == other.sm_count
            && *max_threads_per_block == other.max_threads_per_block
            && *max_block_dims == other.max_block_dims
            && *max_grid_dims == other.max_grid_dims
            && *shared_mem_per_block == other.shared_mem_per_block
            && *shared_mem_per_block_optin == other.shared_mem_per_block_optin
            && *shared_mem_per_sm == other.shared_mem_per_sm
            && *registers_per_block == other.registers_per_block
            && *warp_size == other.warp_size
            && *l2_cache_bytes == other.l2_cache_bytes
            && *total_memory_bytes == other.total_memory_bytes
            && *driver_version == other.driver_version
    }

    /// `sm_90`-style spelling of the device's compute capability.
    pub fn sm_name(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_environment_values() {
        assert_eq!(BackendKind::from_env_value(None).unwrap(), None);
        assert_eq!(BackendKind::from_env_value(Some("")).unwrap(), None);
        assert_eq!(
            BackendKind::from_env_value(Some("cuda")).unwrap(),
            Some(BackendKind::Cuda)
        );
        assert_eq!(
            BackendKind::from_env_value(Some(" WGPU ")).unwrap(),
            Some(BackendKind::Wgpu)
        );
        assert_eq!(
            BackendKind::from_env_value(Some("Interpreter")).unwrap(),
            Some(BackendKind::Interpreter)
        );
        let err = BackendKind::from_env_value(Some("vulkan"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`vulkan`")
                && err.contains("`cuda`")
                && err.contains("`wgpu`")
                && err.contains("`interpreter`"),
            "{err}"
        );
    }

    #[test]
    fn a_model_is_every_field_but_the_ordinal() {
        let first = crate::Runtime::interpreter().device().clone();
        let second = DeviceInfo {
            ordinal: 1,
            ..first.clone()
        };
        assert!(first.same_model(&second) && second.same_model(&first));
        let slice = DeviceInfo {
            sm_count: first.sm_count / 2,
            ..first.clone()
        };
        assert!(!first.same_model(&slice));
        let newer_driver = DeviceInfo {
            driver_version: (first.driver_version.0 + 1, 0),
            ..first.clone()
        };
        assert!(!first.same_model(&newer_driver));
    }
}
