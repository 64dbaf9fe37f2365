//! [`TuneKey`]: everything that decides which variant of a kernel is fastest
//! and which variants are legal, so that a stored winner is reused only where
//! it still applies.

use serde::{Deserialize, Serialize};

/// The GPU a tuning result was measured on. One database file holds the
/// results of one model.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GpuModel {
    /// The device name the driver reports, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability as (major, minor), e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors; MIG slices of one model differ here.
    pub sm_count: u32,
}

impl GpuModel {
    /// The database file's name without extension: the name lowercased with
    /// every run of characters other than ASCII letters and digits turned
    /// into one `-`, then the compute capability and SM count, e.g.
    /// `nvidia-h200_sm90_132sms`. Safe as a file name on every platform.
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

/// A GEMM-like problem size, coarsened so that nearby shapes share one
/// tuning result: each of m, n and k is rounded up to the next power of two
/// (0 counts as 1). So 1000x1000x1000 and 1024x1024x600 share the bucket
/// 1024x1024x1024, while 1025 moves to 2048.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShapeBucket {
    pub m: u64,
    pub n: u64,
    pub k: u64,
}

impl ShapeBucket {
    /// The bucket of an m x n x k GEMM (C is m x n, the reduction runs over k).
    pub fn gemm(m: u64, n: u64, k: u64) -> ShapeBucket {
        ShapeBucket {
            m: round_up_pow2(m),
            n: round_up_pow2(n),
            k: round_up_pow2(k),
        }
    }
}

/// The next power of two at or above `x`; saturates at 2^63 instead of
/// overflowing for sizes beyond it.
fn round_up_pow2(x: u64) -> u64 {
    x.checked_next_power_of_two().unwrap_or(1 << 63)
}

/// One tuned situation. Two keys are equal only when every field is: a new
/// driver or a new codegen version makes old results miss, never mislead.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TuneKey {
    pub gpu: GpuModel,
    /// The driver version as the caller reports it, e.g. `12090` or `550.54.15`.
    pub driver_version: String,
    /// A hash of the code generator that built the variants, given by the caller.
    pub codegen_version: String,
    /// The kernel's name, as in its `KernelDef`.
    pub kernel: String,
    /// The dtype and layout mix, e.g. `f16.row*f16.col->f32.row`.
    pub dtypes: String,
    /// The alignment facts that decide which variants are legal, in an order
    /// the kernel's tuner defines, e.g. the largest power-of-two byte
    /// alignment of each operand's base address and leading dimension.
    pub alignments: Vec<u32>,
    pub shape: ShapeBucket,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_gemm_shapes_share_a_bucket() {
        let bucket = ShapeBucket::gemm(1000, 1000, 1000);
        assert_eq!(
            bucket,
            ShapeBucket {
                m: 1024,
                n: 1024,
                k: 1024
            }
        );
        assert_eq!(ShapeBucket::gemm(1024, 513, 600), bucket);
        assert_ne!(ShapeBucket::gemm(1025, 1024, 1024), bucket);
        assert_eq!(ShapeBucket::gemm(1025, 1, 0).m, 2048);
        assert_eq!(ShapeBucket::gemm(1025, 1, 0).n, 1);
        assert_eq!(ShapeBucket::gemm(1025, 1, 0).k, 1);
        assert_eq!(ShapeBucket::gemm(u64::MAX, 3, 4).m, 1 << 63);
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
}
