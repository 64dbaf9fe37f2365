//! The WGSL backend: one specialized, validated kernel in, one WGSL module
//! with one compute entry point out, for WebGPU (wgpu). Deterministic: the
//! same kernel and block give the same text.
//!
//! # ABI (what the host binds; [`WgslModule`] records it)
//!
//! - Binding 0 of group 0 is a uniform buffer,
//!   `@group(0) @binding(0) var<uniform> params: Params;`. `Params` has one
//!   4-byte field per kernel parameter, in parameter order, so parameter `i`
//!   is at byte offset `4 * i`:
//!   - a scalar parameter holds its value: `f32`, `i32` and `u32` as
//!     themselves; `bool` as a `u32` 0 or 1; `f16` as an `f32` (the shader
//!     converts it); `i8` as an `i32` and `u8` as a `u32` (the value
//!     extended);
//!   - a slice parameter holds its length in elements as a `u32`, in a field
//!     `<name>_len`.
//!
//!   A kernel without parameters still has binding 0: `Params` is then one
//!   `_pad: u32` field. The host writes [`WgslModule::params_bytes`] bytes
//!   (the fields, rounded up to 16).
//! - The `k`-th slice parameter (counting slices only, from 0) is the storage
//!   buffer at binding `1 + k` of group 0: `var<storage, read>` for `&[T]`,
//!   `var<storage, read_write>` for `&mut [T]`, of `array<T>` with `T` one of
//!   `f32`, `i32`, `u32` and `f16`. A slice the kernel updates atomically is an
//!   `array<atomic<i32>>` or `array<atomic<u32>>` (same bytes). The host binds
//!   at least 4 bytes, rounded up to a multiple of 4 (an odd number of `f16`).
//! - The entry point is `main`: `@compute @workgroup_size(x, y, z)` with the
//!   block shape (a WGSL entry point fixes it; `block_dim()` reads a `let`
//!   of it, which naga does not evaluate at shader creation), taking
//!   `local_invocation_id`, `workgroup_id` and `num_workgroups` (and
//!   `subgroup_invocation_id` when it uses subgroups).
//!   The grid is the dispatch's workgroup count.
//! - Shared arrays are `var<workgroup>` arrays (nested like the DSL's), zeroed
//!   by WGSL at the start of each workgroup.
//! - Features: [`WgslModule::needs_f16`] (the module starts with
//!   `enable f16;` and the device needs `SHADER_F16`) and
//!   [`WgslModule::needs_subgroups`] (the device needs `SUBGROUP`, with
//!   subgroups of exactly 32 invocations: `subgroup_min_size ==
//!   subgroup_max_size == 32`, since the DSL's warp is 32 lanes), in a
//!   one-dimensional block (WGSL orders the lanes of no other workgroup).
//!
//! # Semantics
//!
//! - i8/u8 values live in i32/u32 and are re-extended from their low byte
//!   after operations that can leave the 8-bit range, as in the PTX backend.
//! - Integer arithmetic wraps; division by zero gives WGSL's value (the
//!   dividend for `/`, 0 for `%`), where Rust would panic. A division by a
//!   literal zero is an error: WGSL rejects it.
//! - Shift amounts are taken modulo the bit width (WGSL's rule for run-time
//!   amounts, applied by the generator to literal ones and to 8-bit types).
//! - `as` from float to integer truncates and saturates at the integer
//!   type's limits, and gives 0 for NaN: a helper tests the bits (WGSL may
//!   assume no NaNs in comparisons) and the upper limit (WGSL's conversion
//!   clamps to the largest value f32 holds, `u32::MAX - 255` for u32).
//! - Zeros may lose their sign: WGSL lets an implementation ignore it
//!   (lavapipe computes `-6.0 * 0.0` as `+0.0`), so a kernel's `-0.0`
//!   results may be `+0.0` there. They compare equal either way.
//! - `round` rounds halfway cases away from zero (a helper: WGSL's `round`
//!   goes to even). The other intrinsics are WGSL built-ins (`rsqrt` is
//!   `inverseSqrt`, `ln` is `log`, `mul_add` is `fma`), with WGSL's accuracy,
//!   which is not always correctly rounded (e.g. `/` on f32 is within 2.5 ULP
//!   and `fma` may round twice). f16 arithmetic is native WGSL f16.
//! - Float literals that are not finite are written as `bitcast`s of their
//!   bits (WGSL has no infinity or NaN literals).
//! - `lane_id()` is `subgroup_invocation_id`; `shfl_xor` is
//!   `subgroupShuffleXor`; `shfl_down` is `subgroupShuffleDown` with lanes
//!   whose source is past lane 31 keeping their own value (CUDA's clamp).
//!   naga 30 (wgpu 30) takes the subgroup built-ins without an `enable`
//!   directive (it rejects `enable subgroups;`), so the module has none.
//! - `atomic_compare_exchange` is strong: a helper retries WGSL's
//!   `atomicCompareExchangeWeak` while it fails spuriously.
//! - `sync_threads()` is `storageBarrier(); workgroupBarrier();`: CUDA's
//!   barrier orders global memory too.
//! - Identifiers: DSL names are kept where WGSL allows them, else suffixed
//!   (see `names`); the host never needs them.
//!
//! The emitter is split like the PTX one: `support` (the types WGSL has;
//! `crate::valid::targets` checks a kernel against them before emission),
//! `names`, `function` (the emitter's state), `stmt`, `expr` and `helpers`
//! (the WGSL functions the generated code calls).

mod expr;
mod function;
mod helpers;
mod names;
mod stmt;
pub(crate) mod support;

use function::Emitter;

use crate::def::Target;
use crate::ir::{Kernel, ParamType};
use crate::valid::targets;
use crate::Error;

/// The entry point's name in every module.
pub const ENTRY: &str = "main";

/// One WGSL module holding one compute entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct WgslModule {
    /// The module's WGSL source, for naga or the WebGPU implementation.
    pub text: String,
    /// The entry point's name ([`ENTRY`]).
    pub entry: String,
    /// The workgroup size the entry point declares.
    pub block: [u32; 3],
    /// Uses f16: the device needs the `SHADER_F16` feature.
    pub needs_f16: bool,
    /// Uses subgroup operations: the device needs the `SUBGROUP` feature and
    /// subgroups of exactly 32 invocations.
    pub needs_subgroups: bool,
    /// Size of the `Params` uniform buffer to bind at binding 0: the fields,
    /// rounded up to 16 bytes.
    pub params_bytes: u32,
    /// Where each kernel parameter goes, in parameter order.
    pub params: Vec<WgslParam>,
}

/// Where the host puts one kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgslParam {
    /// A scalar: its value, 4 bytes at `offset` in `Params` (see the module
    /// documentation for how each type is encoded).
    Scalar {
        /// The byte offset of its field in `Params`.
        offset: u32,
    },
    /// A slice: the storage buffer at `binding` (group 0), read-only for
    /// `&[T]`, and its length in elements as a `u32` at `len_offset` in
    /// `Params`.
    Slice {
        /// The binding number in group 0.
        binding: u32,
        /// `&[T]`: bound as `read` storage, not `read_write`.
        read_only: bool,
        /// The byte offset of its length in `Params`.
        len_offset: u32,
    },
}

/// The parameter layout: one `Params` field per parameter, one binding per slice.
fn layout(kernel: &Kernel) -> Vec<WgslParam> {
    let mut next_binding = 1;
    kernel
        .params
        .iter()
        .enumerate()
        .map(|(index, param)| {
            let offset = 4 * index as u32;
            match param.ty {
                ParamType::Scalar(_) => WgslParam::Scalar { offset },
                ParamType::Slice { mutable, .. } => {
                    next_binding += 1;
                    WgslParam::Slice {
                        binding: next_binding - 1,
                        read_only: !mutable,
                        len_offset: offset,
                    }
                }
            }
        })
        .collect()
}

/// Emits WGSL for a specialized, validated kernel. `block` is the launch's
/// block shape; it must match the kernel's `block(..)` when it declares one,
/// and is required when it does not.
pub fn emit(kernel: &Kernel, block: Option<[u32; 3]>) -> Result<WgslModule, Error> {
    targets::check(kernel, Target::Wgsl)?;
    let block = workgroup_size(kernel, block)?;
    let params = layout(kernel);
    let mut e = Emitter::new(kernel, block, &params)?;
    e.body()?;
    if e.needs_subgroups && block[1..] != [1, 1] {
        // WGSL leaves the subgroup lanes of a multi-dimensional workgroup
        // unordered, and naga rejects `subgroup_invocation_id` there.
        return Err(Error::new(format!(
            "kernel `{}` (wgsl): warp operations (`lane_id`, shuffles) need a one-dimensional \
             block in WGSL, and the launch asks for {block:?}: launch it with block ({}, 1, 1)",
            kernel.name,
            block.iter().product::<u32>()
        )));
    }
    let text = e.module_text()?;
    Ok(WgslModule {
        text,
        entry: ENTRY.to_string(),
        block,
        needs_f16: e.needs_f16,
        needs_subgroups: e.needs_subgroups,
        params_bytes: (4 * kernel.params.len().max(1) as u32).next_multiple_of(16),
        params,
    })
}

/// Runs [`emit`]'s emitter over a specialized, validated kernel and keeps
/// nothing: what emitting would refuse whatever the launch's block (a
/// division by a constant 0 that unrolling made, say), for the front's check
/// of every variant. The block only spells `block_dim()` here: the declared
/// one, else one thread; the launch's is checked when it comes.
pub fn check(kernel: &Kernel) -> Result<(), Error> {
    targets::check(kernel, Target::Wgsl)?;
    let block = super::declared_block(kernel)?.unwrap_or([1, 1, 1]);
    let params = layout(kernel);
    let mut e = Emitter::new(kernel, block, &params)?;
    e.body()?;
    e.module_text().map(drop)
}

/// The workgroup size: the declared block, or the launch's.
fn workgroup_size(kernel: &Kernel, launch: Option<[u32; 3]>) -> Result<[u32; 3], Error> {
    let block = match (super::declared_block(kernel)?, launch) {
        (Some(declared), Some(launch)) if declared != launch => {
            return Err(Error::new(format!(
                "kernel `{}` (wgsl): it declares `block({})` and the launch asks for {launch:?}: \
                 launch it with its declared block",
                kernel.name,
                declared.map(|d| d.to_string()).join(", ")
            )))
        }
        (Some(block), _) | (None, Some(block)) => block,
        (None, None) => {
            return Err(Error::new(format!(
                "kernel `{}` (wgsl): it declares no `block(..)`, and a WGSL entry point fixes its \
                 workgroup size: pass the launch's block shape",
                kernel.name
            )))
        }
    };
    if block.contains(&0) {
        return Err(Error::new(format!(
            "kernel `{}` (wgsl): the block {block:?} is empty: every dimension must be at least 1",
            kernel.name
        )));
    }
    Ok(block)
}
