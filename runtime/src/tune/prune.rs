//! Pruning: the variants that cannot run on the device, cannot take the
//! call, or cannot win, ruled out before anything is timed.
//!
//! The rules, in the order the tuner applies them:
//! 1. **arch**: the kernel has no target the device runs (a PTX arch above
//!    the device's; on wgpu, no `wgsl` target; on the interpreter, neither
//!    a PTX arch up to sm_80 nor `wgsl`);
//! 2. **call**: the variant cannot take the call ([`check_call`]: argument
//!    types and `requires`, e.g. `!ALIGNED || k % 8 == 0`);
//! 3. **shared memory**: a block needs more than the device's opt-in limit
//!    (on wgpu, the adapter's workgroup storage limit);
//! 4. **registers**: with its register use the loaded function cannot run
//!    as many threads per block as the kernel declares;
//! 5. **occupancy**: the driver's occupancy calculator fits fewer than
//!    [`TuneOptions::min_warps_per_sm`](super::TuneOptions) warps on an SM
//!    (no block at all, with too many registers or too much shared memory,
//!    or too few to hide latency).
//!
//! Rules 4 and 5 need the loaded function's facts
//! ([`VariantResources::loaded`]), which only CUDA reports: they do not
//! apply on wgpu or the interpreter, nor to kernels without a declared block shape, whose
//! block is only known at launch.

use std::fmt;

use warpforge_codegen::{KernelDef, Target};

use super::family::{Call, Candidate};
use crate::device::{DeviceBackend, DeviceInfo};
use crate::validate::{check_call, select_arch};
use crate::Error;

/// What the device reports about one compiled variant
/// ([`crate::Runtime::variant_resources`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VariantResources {
    /// Threads per block, when the kernel declares its block shape.
    pub threads_per_block: Option<u32>,
    /// Shared memory per block (the variant's dynamic and static; on wgpu
    /// its `var<workgroup>` arrays), in bytes.
    pub shared_bytes: u32,
    /// What the loaded CUDA function reports. `None` on wgpu, which reports
    /// no registers or occupancy, and on CUDA when the variant was not
    /// loaded because it needs more shared memory than a block may have.
    pub loaded: Option<LoadedResources>,
}

/// The attributes of a loaded CUDA function and its occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadedResources {
    /// Registers per thread, as ptxas (or the JIT) allocated them.
    pub registers_per_thread: u32,
    /// Local memory per thread (register spills and stack), in bytes.
    pub local_bytes_per_thread: u32,
    /// The most threads per block the function can be launched with, given
    /// its registers.
    pub max_threads_per_block: u32,
    /// Blocks resident per SM by the driver's occupancy calculator (0: none
    /// fits); `None` without a declared block shape.
    pub blocks_per_sm: Option<u32>,
    /// For a kernel with a `cluster(..)` of several blocks: the clusters the
    /// whole GPU holds at once (`cuOccupancyMaxActiveClusters`: blocks of a
    /// cluster share a GPC, so this is not the blocks per SM over the
    /// cluster's size); `None` otherwise.
    pub resident_clusters: Option<u32>,
}

/// Which rule ruled a variant out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PruneRule {
    /// The kernel has no target the device runs.
    Arch,
    /// The variant's `requires` (or its argument types) reject the call.
    Call,
    /// The variant needs more shared memory per block than the device's
    /// opt-in limit.
    SharedMemory,
    /// Its declared block is larger than the loaded function can launch with
    /// its registers.
    Registers,
    /// Fewer resident warps per SM than
    /// [`TuneOptions::min_warps_per_sm`](super::TuneOptions) asks for.
    Occupancy,
}

impl fmt::Display for PruneRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PruneRule::Arch => "arch",
            PruneRule::Call => "call",
            PruneRule::SharedMemory => "shared memory",
            PruneRule::Registers => "registers",
            PruneRule::Occupancy => "occupancy",
        })
    }
}

/// Rules 1 and 2: whether `candidate` can run on `device` at all and take
/// `call`. Needs no GPU; the dispatcher applies it to stored winners too.
pub fn check_candidate(
    candidate: &Candidate,
    call: &Call<'_>,
    device: &DeviceInfo,
) -> Result<(), (PruneRule, String)> {
    let def = candidate.def;
    check_target(def, device).map_err(|e| (PruneRule::Arch, e.to_string()))?;
    // A kernel with fewer parameters than the call has arguments takes the
    // leading ones ([`Call::args`]).
    let args = &call.args[..call.args.len().min(def.ir.params.len())];
    check_call(def, &candidate.consts, args).map_err(|e| (PruneRule::Call, e.to_string()))
}

/// Whether the device's backend runs one of the kernel's targets.
fn check_target(def: &KernelDef, device: &DeviceInfo) -> Result<(), Error> {
    match device.backend {
        DeviceBackend::Cuda => select_arch(def, device).map(|_| ()),
        DeviceBackend::Wgpu(_) if def.targets.contains(&Target::Wgsl) => Ok(()),
        DeviceBackend::Interpreter => crate::interpreter::check_target(def, device),
        DeviceBackend::Wgpu(_) => Err(Error::InvalidLaunch {
            kernel: def.ir.name.clone(),
            message: format!(
                "it has no `wgsl` target, and {} runs only WGSL: add `wgsl` to the kernel's \
                 `arch(..)` or run on a CUDA GPU",
                device.name
            ),
        }),
    }
}

/// Rules 3 to 5, on what the device reports about the compiled variant;
/// rules 4 and 5 only where it reports the loaded function's facts.
pub fn check_resources(
    resources: &VariantResources,
    device: &DeviceInfo,
    min_warps_per_sm: u32,
) -> Result<(), (PruneRule, String)> {
    let shared_limit = device.shared_mem_per_block_optin;
    if resources.shared_bytes > shared_limit {
        return Err((
            PruneRule::SharedMemory,
            format!(
                "needs {} bytes of shared memory per block, and {} allows {shared_limit}",
                resources.shared_bytes, device.name
            ),
        ));
    }
    let (Some(threads), Some(loaded)) = (resources.threads_per_block, resources.loaded) else {
        return Ok(());
    };
    if threads > loaded.max_threads_per_block {
        return Err((
            PruneRule::Registers,
            format!(
                "uses {} registers per thread, so a block holds at most {} threads, and the kernel \
                 declares {threads}",
                loaded.registers_per_thread, loaded.max_threads_per_block
            ),
        ));
    }
    if let Some(blocks) = loaded.blocks_per_sm {
        let warps = blocks * threads.div_ceil(device.warp_size.max(1));
        if warps < min_warps_per_sm {
            return Err((
                PruneRule::Occupancy,
                format!(
                    "{blocks} block(s) of {threads} threads fit on an SM ({} registers per thread, \
                     {} bytes of shared memory per block): {warps} warps, below the floor of \
                     {min_warps_per_sm}",
                    loaded.registers_per_thread, resources.shared_bytes
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceBackend;

    fn h200() -> DeviceInfo {
        DeviceInfo {
            backend: DeviceBackend::Cuda,
            name: "NVIDIA H200".into(),
            ordinal: 0,
            compute_capability: (9, 0),
            sm_count: 132,
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 64],
            max_grid_dims: [2_147_483_647, 65_535, 65_535],
            shared_mem_per_block: 48 * 1024,
            shared_mem_per_block_optin: 227 * 1024,
            shared_mem_per_sm: 228 * 1024,
            registers_per_block: 65_536,
            warp_size: 32,
            l2_cache_bytes: 60 * 1024 * 1024,
            total_memory_bytes: 141 << 30,
            driver_version: (12, 8),
        }
    }

    fn resources(threads: u32, shared: u32, registers: u32, blocks: u32) -> VariantResources {
        VariantResources {
            threads_per_block: Some(threads),
            shared_bytes: shared,
            loaded: Some(LoadedResources {
                registers_per_thread: registers,
                local_bytes_per_thread: 0,
                max_threads_per_block: 65_536 / registers.max(1),
                blocks_per_sm: Some(blocks),
                resident_clusters: None,
            }),
        }
    }

    #[test]
    fn resource_rules() {
        let device = h200();
        let fits = resources(256, 64 * 1024, 128, 2);
        assert_eq!(check_resources(&fits, &device, 4), Ok(()));

        let too_much_shared = VariantResources {
            loaded: None,
            ..resources(256, 228 * 1024, 128, 0)
        };
        let (rule, reason) = check_resources(&too_much_shared, &device, 4).unwrap_err();
        assert_eq!(rule, PruneRule::SharedMemory);
        assert!(
            reason.contains("233472 bytes") && reason.contains("232448"),
            "{reason}"
        );

        // 255 registers: a block holds 256 threads at most, the kernel declares 512.
        let (rule, reason) = check_resources(&resources(512, 0, 255, 0), &device, 4).unwrap_err();
        assert_eq!(rule, PruneRule::Registers);
        assert!(reason.contains("255 registers"), "{reason}");

        // One block of 64 threads: 2 warps, under a floor of 4; 4 fit at a floor of 2.
        let sparse = resources(64, 200 * 1024, 32, 1);
        let (rule, reason) = check_resources(&sparse, &device, 4).unwrap_err();
        assert_eq!(rule, PruneRule::Occupancy);
        assert!(reason.contains("2 warps"), "{reason}");
        assert_eq!(check_resources(&sparse, &device, 2), Ok(()));
        let (rule, _) = check_resources(&resources(128, 0, 32, 0), &device, 1).unwrap_err();
        assert_eq!(rule, PruneRule::Occupancy);

        // Without a declared block shape only the shared memory rule applies.
        let undeclared = VariantResources {
            threads_per_block: None,
            ..resources(1024, 0, 255, 0)
        };
        assert_eq!(check_resources(&undeclared, &device, 4), Ok(()));
    }

    #[test]
    fn on_wgpu_only_the_shared_memory_rule_applies() {
        let device = DeviceInfo {
            backend: DeviceBackend::Wgpu(crate::device::WgpuDeviceInfo {
                api: "Vulkan".into(),
                driver: "llvmpipe".into(),
                shader_f16: true,
                subgroup_sizes: None,
                max_storage_buffers_per_shader_stage: 8,
                max_storage_buffer_binding_size: 1 << 27,
                max_uniform_buffer_binding_size: 1 << 16,
                max_buffer_size: 1 << 28,
            }),
            name: "llvmpipe".into(),
            compute_capability: (0, 0),
            sm_count: 0,
            shared_mem_per_block: 32 * 1024,
            shared_mem_per_block_optin: 32 * 1024,
            shared_mem_per_sm: 0,
            registers_per_block: 0,
            l2_cache_bytes: 0,
            total_memory_bytes: 0,
            driver_version: (0, 0),
            ..h200()
        };
        // What the wgpu backend reports: no loaded function's facts.
        let wgpu = |shared| VariantResources {
            threads_per_block: Some(1024),
            shared_bytes: shared,
            loaded: None,
        };
        assert_eq!(check_resources(&wgpu(32 * 1024), &device, 4), Ok(()));
        let (rule, reason) = check_resources(&wgpu(32 * 1024 + 4), &device, 4).unwrap_err();
        assert_eq!(rule, PruneRule::SharedMemory);
        assert!(
            reason.contains("32772 bytes") && reason.contains("llvmpipe allows 32768"),
            "{reason}"
        );
    }
}
