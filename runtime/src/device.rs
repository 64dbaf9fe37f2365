//! [`DeviceInfo`]: what the runtime knows about a device. Plain data, so
//! tests without a GPU can describe one by hand.

use warpforge_codegen::Arch;

/// The limits and identity of one device, read once when the runtime starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    /// The device's index among the devices the driver sees.
    pub ordinal: usize,
    /// (major, minor), e.g. (9, 0) for an H100/H200.
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    pub max_block_dims: [u32; 3],
    pub max_grid_dims: [u32; 3],
    /// Shared memory a block gets without opting in (48 KiB on every arch we target).
    pub shared_mem_per_block: u32,
    /// The most shared memory a block can opt into (e.g. 227 KiB on sm_90).
    pub shared_mem_per_block_optin: u32,
    pub shared_mem_per_sm: u32,
    pub registers_per_block: u32,
    pub warp_size: u32,
    pub l2_cache_bytes: u32,
    pub total_memory_bytes: u64,
    /// The CUDA version the driver supports, (major, minor), e.g. (12, 4).
    pub driver_version: (u32, u32),
}

impl DeviceInfo {
    /// Whether PTX built for `arch` runs here (the driver JIT-compiles PTX
    /// for any device of the same or a higher compute capability).
    pub fn supports(&self, arch: Arch) -> bool {
        arch.compute_capability() <= self.compute_capability
    }

    /// `sm_90`-style spelling of the device's compute capability.
    pub fn sm_name(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// Splits `cuDriverGetVersion`'s encoding (1000 * major + 10 * minor).
pub(crate) fn split_driver_version(encoded: i32) -> (u32, u32) {
    let encoded = encoded.max(0) as u32;
    (encoded / 1000, (encoded % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_encoding() {
        assert_eq!(split_driver_version(12090), (12, 9));
        assert_eq!(split_driver_version(12040), (12, 4));
        assert_eq!(split_driver_version(11020), (11, 2));
    }
}
