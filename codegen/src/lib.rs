//! warpforge-codegen: the kernel IR ([`ir`]), its validator ([`valid`]),
//! specialization of a variant family into one variant ([`specialize`]), and
//! the backends ([`back`]). Pure: IR in, text out; no GPU, no proc-macro.
//!
//! The flow of one variant: [`front`] (DSL -> IR, in the proc-macro) ->
//! [`KernelDef`] (serialized into the user's binary) -> [`specialize`] (const
//! params substituted, constants folded, `#[unroll]` loops unrolled) ->
//! [`valid`] -> [`back::ptx`] or [`back::wgsl`]. [`print`](mod@print) writes the IR as
//! text (snapshots, tests, debugging). [`interp`] runs a variant on the CPU
//! (a reference interpreter: a test oracle and a debugger without a GPU).

#![warn(missing_docs)]

pub mod back;
pub mod def;
pub mod eval;
#[cfg(feature = "front")]
pub mod front;
pub mod interp;
pub mod ir;
pub mod print;
pub mod specialize;
pub mod valid;

pub use def::{Digest, KernelDef, Target, TuneAxis, TunedLaunch, MAX_KEY_SIZES};
pub use ir::{Arch, Kernel, Scalar};

/// A hash of this code generator's sources (16 hex digits), computed at build
/// time: two builds emit the same code for the same kernel when their hashes
/// are equal. Tuning results record it, so that a new code generator re-tunes.
pub const VERSION_HASH: &str = env!("WARPFORGE_CODEGEN_HASH");

/// A codegen failure: a variant that cannot be built for a target, an IR that
/// breaks an invariant, or a host expression that cannot be evaluated. The
/// message names the kernel, the construct and what to do instead.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The whole message, as `Display` shows it.
    pub message: String,
}

impl Error {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
        }
    }
}

/// Builds the PTX of one variant (`consts` in `def.ir.const_params` order) for one arch:
/// specialize, validate, emit.
pub fn compile_ptx(
    def: &KernelDef,
    consts: &[i64],
    arch: Arch,
) -> Result<back::ptx::PtxModule, Error> {
    def.check_constraints(consts)?;
    let kernel = specialize::specialize(&def.ir, consts)?;
    valid::validate(&kernel)?;
    back::ptx::emit(&kernel, arch)
}

/// Builds the WGSL of one variant (`consts` in `def.ir.const_params` order):
/// specialize, validate, emit. `block` is the launch's block shape, which
/// becomes the entry point's workgroup size: required when the kernel
/// declares no `block(..)`, and equal to it when it does.
pub fn compile_wgsl(
    def: &KernelDef,
    consts: &[i64],
    block: Option<[u32; 3]>,
) -> Result<back::wgsl::WgslModule, Error> {
    def.check_constraints(consts)?;
    let kernel = specialize::specialize(&def.ir, consts)?;
    valid::validate(&kernel)?;
    back::wgsl::emit(&kernel, block)
}
