//! [`TuneKey`]: everything that decides which variant of a kernel is fastest
//! and which variants are legal, so that a stored winner is reused only where
//! it still applies.

use serde::{Deserialize, Serialize};

use crate::device::{DeviceBackend, DeviceInfo};
use crate::Error;

/// The GPU a tuning result was measured on. One database file holds the
/// results of one model.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GpuModel {
    /// The device name the driver reports, e.g. `NVIDIA H200`; on wgpu the
    /// API and the adapter's name, e.g. `wgpu Vulkan: llvmpipe (LLVM 15.0.6,
    /// 256 bits)`; `warpforge interpreter` on the interpreter.
    pub name: String,
    /// Compute capability as (major, minor), e.g. (9, 0); (0, 0) on wgpu.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors; MIG slices of one model differ
    /// here. 0 on wgpu, which does not report it.
    pub sm_count: u32,
}

impl GpuModel {
    /// The model of a runtime's device. On wgpu the name says the graphics
    /// API as well as the adapter, since one GPU driven through Vulkan and
    /// through DX12 runs different shader compilers: `wgpu <API>: <adapter>`.
    pub fn of(device: &DeviceInfo) -> GpuModel {
        let name = match &device.backend {
            DeviceBackend::Cuda => device.name.clone(),
            DeviceBackend::Wgpu(wgpu) => format!("wgpu {}: {}", wgpu.api, device.name),
            DeviceBackend::Interpreter => device.name.clone(),
        };
        GpuModel {
            name,
            compute_capability: device.compute_capability,
            sm_count: device.sm_count,
        }
    }

    /// The database file's name without extension: the name lowercased with
    /// every run of characters other than ASCII letters and digits turned
    /// into one `-`, then the compute capability and SM count, e.g.
    /// `nvidia-h200_sm90_132sms`, or on wgpu
    /// `wgpu-vulkan-llvmpipe-llvm-15-0-6-256-bits_sm00_0sms`. Safe as a file
    /// name on every platform. A wgpu model's file never is a CUDA model's:
    /// CUDA devices have a compute capability of at least 1.0, so their
    /// stems never hold `_sm00_`, which every wgpu stem does.
    pub fn file_stem(&self) -> String {
        let mut name = String::new();
        for c in self.name.chars() {
            if c.is_ascii_alphanumeric() {
                name.push(c.to_ascii_lowercase());
            } else if !name.is_empty() && !name.ends_with('-') {
                name.push('-');
            }
        }
        let name = name.trim_end_matches('-');
        let name = if name.is_empty() { "gpu" } else { name };
        let (major, minor) = self.compute_capability;
        format!("{name}_sm{major}{minor}_{}sms", self.sm_count)
    }
}

pub use warpforge_codegen::MAX_KEY_SIZES;

/// A call's problem size, coarsened so that nearby sizes share one tuning
/// result: each size is rounded up to the next power of two (0 counts as 1).
/// A GEMM's sizes are m, n and k ([`ShapeBucket::gemm`]), so 1000x1000x1000
/// and 1024x1024x600 share the bucket 1024x1024x1024, while 1025 moves to
/// 2048; a kernel's `tune_key(..)` names its own ([`ShapeBucket::of`]).
/// Stored as the list of rounded sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "Vec<u64>", try_from = "Vec<u64>")]
pub struct ShapeBucket {
    /// The rounded sizes; the first `len` count, the rest are 0.
    sizes: [u64; MAX_KEY_SIZES],
    len: u8,
}

impl ShapeBucket {
    /// The bucket of an m x n x k GEMM (C is m x n, the reduction runs over k).
    pub fn gemm(m: u64, n: u64, k: u64) -> ShapeBucket {
        ShapeBucket::rounded(&[m, n, k])
    }

    /// The bucket of `batches` strided m x n x k GEMMs: m, n, k and the
    /// batch count, each rounded (so one batch and several never share one).
    pub fn batched_gemm(m: u64, n: u64, k: u64, batches: u64) -> ShapeBucket {
        ShapeBucket::rounded(&[m, n, k, batches])
    }

    /// The bucket of a call whose tuning key is `sizes` (one to
    /// [`MAX_KEY_SIZES`] of them, in the order the key declares), or an
    /// [`Error::Tune`] for a count outside that range.
    pub fn of(sizes: &[u64]) -> Result<ShapeBucket, Error> {
        if sizes.is_empty() || sizes.len() > MAX_KEY_SIZES {
            return Err(Error::Tune(format!(
                "a tuning key holds one to {MAX_KEY_SIZES} sizes, and this one has {}: key the \
                 call on the sizes that decide which variant is fastest",
                sizes.len()
            )));
        }
        Ok(ShapeBucket::rounded(sizes))
    }

    /// `sizes` rounded; at most [`MAX_KEY_SIZES`] of them (checked by the callers).
    fn rounded(sizes: &[u64]) -> ShapeBucket {
        let mut bucket = ShapeBucket {
            sizes: [0; MAX_KEY_SIZES],
            len: sizes.len() as u8,
        };
        for (rounded, &size) in bucket.sizes.iter_mut().zip(sizes) {
            *rounded = round_up_pow2(size);
        }
        bucket
    }

    /// The rounded sizes, in the key's order (m, n, k for a GEMM).
    pub fn sizes(&self) -> &[u64] {
        &self.sizes[..usize::from(self.len)]
    }
}

impl std::fmt::Display for ShapeBucket {
    /// `1024x1024x512`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, size) in self.sizes().iter().enumerate() {
            if i > 0 {
                f.write_str("x")?;
            }
            write!(f, "{size}")?;
        }
        Ok(())
    }
}

impl From<ShapeBucket> for Vec<u64> {
    fn from(bucket: ShapeBucket) -> Vec<u64> {
        bucket.sizes().to_vec()
    }
}

impl TryFrom<Vec<u64>> for ShapeBucket {
    type Error = String;

    /// A stored bucket: one to [`MAX_KEY_SIZES`] powers of two.
    fn try_from(sizes: Vec<u64>) -> Result<ShapeBucket, String> {
        if let Some(bad) = sizes.iter().find(|size| !size.is_power_of_two()) {
            return Err(format!("a shape bucket holds powers of two, not {bad}"));
        }
        ShapeBucket::of(&sizes).map_err(|e| e.to_string())
    }
}

/// The next power of two at or above `x`; saturates at 2^63 instead of
/// overflowing for sizes beyond it.
fn round_up_pow2(x: u64) -> u64 {
    x.checked_next_power_of_two().unwrap_or(1 << 63)
}

/// The driver as a tuning key names it: the CUDA version it supports and,
/// where the system reports it, the kernel module's version (which is the
/// driver release, and so the JIT compiler's), e.g. `cuda-12.9/550.54.15`.
/// On wgpu, the adapter's driver string.
pub fn driver_version(device: &DeviceInfo) -> String {
    match &device.backend {
        DeviceBackend::Cuda => {
            let (major, minor) = device.driver_version;
            let cuda = format!("cuda-{major}.{minor}");
            match std::fs::read_to_string(NVIDIA_VERSION_FILE)
                .ok()
                .as_deref()
                .and_then(kernel_module_version)
            {
                Some(release) => format!("{cuda}/{release}"),
                None => cuda,
            }
        }
        DeviceBackend::Wgpu(wgpu) => format!("{}/{}", wgpu.api, wgpu.driver),
        // Its code is the code generator's, whose version the key holds.
        DeviceBackend::Interpreter => "interpreter".to_string(),
    }
}

/// Where Linux's NVIDIA kernel module reports its version.
const NVIDIA_VERSION_FILE: &str = "/proc/driver/nvidia/version";

/// The release in the first line of [`NVIDIA_VERSION_FILE`]: the first
/// dotted number after `Kernel Module`, so `NVRM version: NVIDIA UNIX x86_64
/// Kernel Module  550.54.15  Tue Mar  5 ..` gives `550.54.15`, as does the
/// open module's `.. Open Kernel Module for x86_64  550.54.15 ..`.
fn kernel_module_version(text: &str) -> Option<&str> {
    let line = text.lines().next()?;
    let (_, after) = line.split_once("Kernel Module")?;
    after
        .split_whitespace()
        .find(|word| word.contains('.') && word.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// One tuned situation. Two keys are equal only when every field is: a new
/// driver or a new codegen version makes old results miss, never mislead.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TuneKey {
    /// The GPU model: name, compute capability and SM count.
    pub gpu: GpuModel,
    /// The driver as [`driver_version`] spells it, e.g. `cuda-12.9/550.54.15`.
    pub driver_version: String,
    /// A hash of the code generator and the family's kernels
    /// ([`Family::codegen_version`](super::Family::codegen_version)).
    pub codegen_version: String,
    /// The family's name ([`Family::name`](super::Family::name)).
    pub kernel: String,
    /// The dtype and layout mix, e.g. `f16.row*f16.col->f32.row`.
    pub dtypes: String,
    /// The alignment facts that decide which variants are legal, in an order
    /// the kernel's tuner defines, e.g. the largest power-of-two byte
    /// alignment of each operand's base address and leading dimension.
    pub alignments: Vec<u32>,
    /// The problem size, coarsened.
    pub shape: ShapeBucket,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_gemm_shapes_share_a_bucket() {
        let bucket = ShapeBucket::gemm(1000, 1000, 1000);
        assert_eq!(bucket.sizes(), [1024, 1024, 1024]);
        assert_eq!(ShapeBucket::gemm(1024, 513, 600), bucket);
        assert_ne!(ShapeBucket::gemm(1025, 1024, 1024), bucket);
        assert_eq!(ShapeBucket::gemm(1025, 1, 0).sizes(), [2048, 1, 1]);
        assert_eq!(ShapeBucket::gemm(u64::MAX, 3, 4).sizes()[0], 1 << 63);
        assert_eq!(bucket.to_string(), "1024x1024x1024");
        let batched = ShapeBucket::batched_gemm(1000, 1000, 1000, 3);
        assert_eq!(batched.sizes(), [1024, 1024, 1024, 4]);
        assert_ne!(ShapeBucket::batched_gemm(1000, 1000, 1000, 1), batched);
    }

    #[test]
    fn key_sizes_are_counted_and_stored_as_a_list() {
        let bucket = ShapeBucket::of(&[3000]).unwrap();
        assert_eq!(bucket.sizes(), [4096]);
        assert_ne!(bucket, ShapeBucket::of(&[3000, 1]).unwrap());
        assert_eq!(serde_json::to_string(&bucket).unwrap(), "[4096]");
        let four = ShapeBucket::of(&[1, 2, 3, 4]).unwrap();
        let json = serde_json::to_string(&four).unwrap();
        assert_eq!(json, "[1,2,4,4]");
        assert_eq!(serde_json::from_str::<ShapeBucket>(&json).unwrap(), four);
        for bad in ["[]", "[1,2,4,8,16]", "[3]"] {
            assert!(serde_json::from_str::<ShapeBucket>(bad).is_err(), "{bad}");
        }
        let err = ShapeBucket::of(&[1; 5]).unwrap_err().to_string();
        assert!(
            err.contains("one to 4 sizes") && err.contains("has 5"),
            "{err}"
        );
    }

    #[test]
    fn kernel_module_version_is_read_from_the_first_line() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 \
                           22:23:36 UTC 2024\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(kernel_module_version(proprietary), Some("550.54.15"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release \
                    Build  (dvs-builder@U16-I3-B03-4-3)\n";
        assert_eq!(kernel_module_version(open), Some("570.86.15"));
        assert_eq!(kernel_module_version(""), None);
        assert_eq!(kernel_module_version("NVRM version: unknown"), None);
        assert_eq!(
            kernel_module_version("NVRM version: NVIDIA Kernel Module for x86_64"),
            None
        );
    }

    #[test]
    fn file_stem_is_a_safe_name() {
        let gpu = GpuModel {
            name: "NVIDIA H200 / MIG 1g.18gb".into(),
            compute_capability: (9, 0),
            sm_count: 16,
        };
        assert_eq!(gpu.file_stem(), "nvidia-h200-mig-1g-18gb_sm90_16sms");
        let odd = GpuModel {
            name: "../..".into(),
            compute_capability: (8, 6),
            sm_count: 84,
        };
        assert_eq!(odd.file_stem(), "gpu_sm86_84sms");
    }

    fn wgpu_device(api: &str, name: &str) -> DeviceInfo {
        DeviceInfo {
            backend: DeviceBackend::Wgpu(crate::device::WgpuDeviceInfo {
                api: api.into(),
                driver: "driver".into(),
                shader_f16: false,
                subgroup_sizes: None,
                max_storage_buffers_per_shader_stage: 8,
                max_storage_buffer_binding_size: 1 << 27,
                max_uniform_buffer_binding_size: 1 << 16,
                max_buffer_size: 1 << 28,
            }),
            name: name.into(),
            ordinal: 0,
            compute_capability: (0, 0),
            sm_count: 0,
            max_threads_per_block: 256,
            max_block_dims: [256, 256, 64],
            max_grid_dims: [65_535; 3],
            shared_mem_per_block: 16 * 1024,
            shared_mem_per_block_optin: 16 * 1024,
            shared_mem_per_sm: 0,
            registers_per_block: 0,
            warp_size: 32,
            l2_cache_bytes: 0,
            total_memory_bytes: 0,
            driver_version: (0, 0),
        }
    }

    #[test]
    fn wgpu_models_name_the_api_and_never_share_a_file_with_cuda() {
        let lavapipe = GpuModel::of(&wgpu_device("Vulkan", "llvmpipe (LLVM 15.0.6, 256 bits)"));
        assert_eq!(
            lavapipe.name,
            "wgpu Vulkan: llvmpipe (LLVM 15.0.6, 256 bits)"
        );
        assert_eq!(
            lavapipe.file_stem(),
            "wgpu-vulkan-llvmpipe-llvm-15-0-6-256-bits_sm00_0sms"
        );
        // One GPU through two APIs: two models, two files.
        let vulkan = GpuModel::of(&wgpu_device("Vulkan", "NVIDIA H200"));
        let dx12 = GpuModel::of(&wgpu_device("DX12", "NVIDIA H200"));
        assert_ne!(vulkan, dx12);
        assert_ne!(vulkan.file_stem(), dx12.file_stem());
        // The same GPU on CUDA, even with a name that mimics the wgpu one.
        let cuda = GpuModel {
            name: "wgpu Vulkan: NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
        };
        assert_ne!(cuda.file_stem(), vulkan.file_stem());
        assert_eq!(vulkan.file_stem(), "wgpu-vulkan-nvidia-h200_sm00_0sms");
    }
}
