//! The PTX backend: one specialized, validated kernel in, one PTX module with
//! one `.entry` out. Deterministic: the same kernel gives the same text.
//!
//! Layout of the module:
//! - a comment naming kernel and generator, `.version` (the lowest that
//!   covers every construct used, from [`features`]), `.target`,
//!   `.address_size 64`;
//! - `.extern .shared .align 128 .b8 smem[]` when the kernel has shared
//!   arrays: all of them live in this one dynamic block, each at a 128-byte
//!   aligned offset (the block and a swizzled wgmma tile at its pattern's
//!   boundary, up to 1024 bytes), so a kernel may use more than the 48 KB of static
//!   shared memory (the launcher passes [`PtxModule::shared_bytes`]);
//! - the entry: scalars as `.param .<type>` (bool as `.u32`, 0 or 1), each
//!   slice as a `.u64` pointer and a `.u32` length; `.reqntid` when the
//!   kernel declares its block shape;
//! - typed virtual registers declared at the top, then the body.
//!
//! The emitter is split by construct: `function` (the emitter's state and
//! helpers), `stmt` (control flow), `expr` (operators and casts), `memory`
//! (places and atomics), `math` (intrinsics), `regs` (register classes),
//! `usage` (a pre-pass over the body), `vectorize` (adjacent shared-memory
//! moves as one vector access), `warp` (Tensor Core operations, `ldmatrix`,
//! operand packing, async copies), `staging` (the sm_70 form of async
//! copies: register staging, planned over the kernel), `hopper` (mbarriers,
//! the async-proxy fence, wgmma and its matrix descriptors) and [`features`] (what
//! each construct needs of the target, in one table, which
//! `crate::valid::targets` also checks a kernel family against for the
//! front). A new statement is a new case in `stmt`, its operands come from
//! `memory`/`regs`, and what it needs of the target is a new row in
//! [`features`].

pub mod features;

mod expr;
mod function;
mod hopper;
mod math;
mod memory;
mod regs;
mod shared;
mod staging;
mod stmt;
mod usage;
mod vectorize;
mod warp;

use function::{
    param_names, param_type, scalar_param_name, tensor_map_param_name, Emitter, SHARED_SYMBOL,
};

pub(crate) use expr::float_refusal;
use features::Feature;

use crate::ir::{Arch, Kernel, ParamType};
use crate::Error;

/// One assembled-ready PTX module holding one entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct PtxModule {
    /// The module's PTX text, for `ptxas` or the driver's JIT.
    pub text: String,
    /// The `.entry` name.
    pub entry: String,
    /// Bytes of dynamic shared memory to launch with (all shared arrays).
    pub shared_bytes: u32,
    /// The block shape the kernel declares, evaluated.
    pub block: Option<[u32; 3]>,
    /// The cluster shape the kernel declares, evaluated: its launches'
    /// grids are whole clusters.
    pub cluster: Option<[u32; 3]>,
    /// The `.version` the module declares.
    pub version: (u32, u32),
}

/// PTX identifiers: ASCII letters, digits and `_` (DSL names are Rust
/// identifiers, which may also be Unicode).
fn check_identifier(kernel: &Kernel, what: &str, name: &str) -> Result<(), Error> {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
        Ok(())
    } else {
        Err(Error::new(format!(
            "kernel `{}`: {what} `{name}` is not an ASCII identifier, which PTX requires: rename it",
            kernel.name
        )))
    }
}

/// Checks what [`emit`] would refuse in a specialized, validated kernel,
/// without emitting it: names PTX cannot spell, a block shape that is not
/// fixed where it must be, shared arrays over what one block may use on
/// `arch`. The front runs it on every variant (`valid::targets`).
pub fn check(kernel: &Kernel, arch: Arch) -> Result<(), Error> {
    check_names_and_block(kernel)?;
    shared::check_shared_memory(kernel, arch)
}

/// The checks of [`check`] that need no layout; the declared block shape.
fn check_names_and_block(kernel: &Kernel) -> Result<Option<[u32; 3]>, Error> {
    check_identifier(kernel, "the kernel name", &kernel.name)?;
    for p in &kernel.params {
        check_identifier(kernel, "parameter", &p.name)?;
    }
    super::declared_block(kernel)
}

/// Emits PTX for a specialized, validated kernel.
pub fn emit(kernel: &Kernel, arch: Arch) -> Result<PtxModule, Error> {
    let block = check_names_and_block(kernel)?;
    let cluster = super::declared_cluster(kernel)?;
    let min_blocks_per_sm = super::declared_min_blocks_per_sm(kernel)?;
    let mut e = Emitter::new(kernel, arch)?;
    if cluster.is_some() {
        e.require(Feature::Cluster)?;
    }
    e.prologue();
    e.block(&kernel.body)?;
    e.ins("ret");
    let version = e.features.version();
    let sets_max_registers = e.usage.sets_max_registers;
    let shared_bytes = e.shared_bytes;
    let shared_align = e.shared_align;
    let (declarations, body) = e.finish();

    let mut params = Vec::new();
    for (index, param) in kernel.params.iter().enumerate() {
        match param.ty {
            ParamType::Scalar(ty) => params.push(format!(
                ".param .{} {}",
                param_type(ty),
                scalar_param_name(kernel, index)
            )),
            ParamType::Slice { .. } => {
                let (ptr, len) = param_names(kernel, index);
                params.push(format!(".param .u64 {ptr}"));
                params.push(format!(".param .u32 {len}"));
                if param.tensor_map.is_some() {
                    // The CUtensorMap, by value: 128 opaque bytes, 64-aligned.
                    let map = tensor_map_param_name(kernel, index);
                    params.push(format!(".param .align 64 .b8 {map}[128]"));
                }
            }
        }
    }

    let mut text = String::new();
    let mut line = |s: &str| {
        text.push_str(s);
        text.push('\n');
    };
    line(&format!(
        "// `{}`, generated by warpforge-codegen {}",
        kernel.name,
        env!("CARGO_PKG_VERSION")
    ));
    line(&format!(".version {}.{}", version.0, version.1));
    line(&format!(".target {}", arch.name()));
    line(".address_size 64");
    line("");
    if shared_bytes > 0 {
        line(&format!(
            ".extern .shared .align {shared_align} .b8 {SHARED_SYMBOL}[];"
        ));
        line("");
    }
    line(&format!(".visible .entry {}(", kernel.name));
    for (i, p) in params.iter().enumerate() {
        let sep = if i + 1 < params.len() { "," } else { "" };
        line(&format!("    {p}{sep}"));
    }
    line(")");
    if let Some([x, y, z]) = block {
        line(&format!(".reqntid {x}, {y}, {z}"));
    }
    if let Some([x, y, z]) = cluster {
        line(&format!(".reqnctapercluster {x}, {y}, {z}"));
    }
    // ptxas ignores `setmaxnreg` unless the register count at entry is
    // fixed, which a bound on blocks per SM does (with `.reqntid`, which the
    // validator requires of such a kernel): one block, when the kernel asks
    // for no more.
    if let Some(n) = min_blocks_per_sm.or(sets_max_registers.then_some(1)) {
        line(&format!(".minnctapersm {n}"));
    }
    line("{");
    for d in &declarations {
        line(&format!("    {d}"));
    }
    line("");
    for l in &body {
        line(l);
    }
    line("}");

    Ok(PtxModule {
        text,
        entry: kernel.name.clone(),
        shared_bytes,
        block,
        cluster,
        version,
    })
}
