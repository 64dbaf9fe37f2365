//! The PTX backend. STUB: interface only, being written.

use crate::ir::{Arch, Kernel};
use crate::Error;

/// One assembled-ready PTX module holding one entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct PtxModule {
    pub text: String,
    /// The `.entry` name.
    pub entry: String,
    /// Bytes of dynamic shared memory to launch with (all shared arrays).
    pub shared_bytes: u32,
    /// The block shape the kernel declares, evaluated.
    pub block: Option<[u32; 3]>,
    /// The `.version` the module declares.
    pub version: (u32, u32),
}

/// Emits PTX for a specialized, validated kernel.
pub fn emit(kernel: &Kernel, arch: Arch) -> Result<PtxModule, Error> {
    let _ = (kernel, arch);
    todo!("PTX backend")
}
