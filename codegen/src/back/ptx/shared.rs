//! Where each shared array of a kernel lives in the one dynamic shared
//! block, and whether the block fits what one block may use on an arch:
//! the emitter lays the arrays out from this, and the validator's target
//! check (`valid::targets`) refuses a variant that does not fit before any
//! variant is emitted.

use super::features::max_shared_bytes;
use super::usage::Usage;
use crate::ir::{Arch, Kernel, Space};
use crate::Error;

/// The alignment of the shared block and of each array in it, in bytes:
/// one row of the 32 four-byte banks (more for swizzled wgmma tiles).
pub const SHARED_ALIGN: u32 = 128;

/// The shared arrays of a specialized kernel, laid out in declaration order.
pub struct SharedLayout {
    /// Per local: its byte offset in the block, for a shared array.
    pub offsets: Vec<Option<u64>>,
    /// The block's size in bytes.
    pub bytes: u64,
    /// The block's alignment: [`SHARED_ALIGN`], or more for swizzled tiles.
    pub align: u32,
}

impl SharedLayout {
    pub fn of(kernel: &Kernel, usage: &Usage) -> SharedLayout {
        let mut offsets = vec![None; kernel.locals.len()];
        let mut bytes = 0u64;
        let mut block_align = SHARED_ALIGN;
        for (id, local) in kernel.locals.iter().enumerate() {
            if local.space != Space::Shared {
                continue;
            }
            // Dimensions are positive constants in a validated variant; the
            // product saturates rather than wrap for one too large to fit.
            let elements = local
                .dims
                .iter()
                .map(|d| d.as_int().unwrap_or(0).max(0) as u64)
                .fold(1u64, u64::saturating_mul);
            // 128-byte aligned starts: a swizzle computed on offsets within
            // an array then spreads accesses over the banks as planned.
            // Tiles of swizzled wgmma descriptors start on their pattern's
            // boundary (up to 1024 bytes), and so does the block.
            let align = SHARED_ALIGN.max(usage.shared_align[id]);
            block_align = block_align.max(align);
            bytes = bytes.next_multiple_of(u64::from(align));
            offsets[id] = Some(bytes);
            bytes = bytes.saturating_add(elements.saturating_mul(local.ty.size_bytes() as u64));
        }
        SharedLayout {
            offsets,
            bytes,
            align: block_align,
        }
    }

    /// Whether one block of `kernel` may use this much shared memory on `arch`.
    pub fn check_fits(&self, kernel: &Kernel, arch: Arch) -> Result<(), Error> {
        let limit = max_shared_bytes(arch);
        if self.bytes <= u64::from(limit) {
            return Ok(());
        }
        Err(Error::new(format!(
            "kernel `{}` ({}): its shared arrays take {} bytes, more than the {limit} one block may use on {}: \
             use smaller tiles for this arch",
            kernel.name,
            arch.name(),
            self.bytes,
            arch.name()
        )))
    }
}

/// Checks that the shared arrays of a specialized `kernel` fit one block on `arch`.
pub fn check_shared_memory(kernel: &Kernel, arch: Arch) -> Result<(), Error> {
    SharedLayout::of(kernel, &Usage::of(kernel)).check_fits(kernel, arch)
}
