//! What each target can express, checked on a kernel's IR (the family's,
//! before specialization, or one variant's): the front runs [`check`] for
//! every target a kernel declares, so a construct a target lacks is a
//! compile error at the kernel. As in naga, the validator holds these
//! checks and the backends hold the facts they read: `ptx` checks a kernel
//! against the rows of the PTX backend's one table of minimum versions and
//! architectures (`back/ptx/features.rs`), `wgsl` against the WGSL
//! backend's type rules (`back/wgsl/support.rs`).

mod ptx;
mod wgsl;

use crate::def::Target;
use crate::ir::Kernel;
use crate::Error;

/// Checks that `target` can express `kernel`: for a PTX target, that its
/// arch has every instruction the kernel uses and cannot emulate; for WGSL,
/// every type and construct.
pub fn check(kernel: &Kernel, target: Target) -> Result<(), Error> {
    match target {
        Target::Ptx(arch) => ptx::check(kernel, arch),
        Target::Wgsl => wgsl::check(kernel),
    }
}

/// Checks what `target` would refuse of one specialized, validated variant
/// when emitting it: for PTX, names it cannot spell and shared arrays over
/// what one block may use on the arch (the backend's own check, run before
/// emitting); for WGSL, whatever its emitter refuses (it is run, its text
/// dropped), such as an integer division by a constant 0 after unrolling.
pub fn check_specialized(kernel: &Kernel, target: Target) -> Result<(), Error> {
    match target {
        Target::Ptx(arch) => crate::back::ptx::check(kernel, arch),
        Target::Wgsl => crate::back::wgsl::check(kernel),
    }
}

/// Checks what `target` can express of the variant `consts` of `kernel`
/// beyond [`check`], where it depends on const values: for WGSL, the size
/// of each array.
pub fn check_variant(kernel: &Kernel, target: Target, consts: &[i64]) -> Result<(), Error> {
    match target {
        Target::Ptx(_) => Ok(()),
        Target::Wgsl => wgsl::check_array_sizes(kernel, consts),
    }
}
