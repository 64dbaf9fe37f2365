//! The TMA tensor maps of a launch, planned on the host: what
//! `cuTensorMapEncodeTiled` is given for each `#[tensor_map(..)]` slice,
//! from the kernel's declaration, the variant's consts and the call's
//! arguments. Pure, so that the tuner and the dispatcher rule out a variant
//! whose tensor map a call cannot have (a stride that is not a multiple of
//! 16 bytes) without a GPU, and tests check every rule.

use warpforge_codegen::eval::{self, HostValue};
use warpforge_codegen::ir::{Expr, Literal, Param, ParamType, Scalar, Swizzle};
use warpforge_codegen::KernelDef;

use crate::buffer::ArgInfo;
use crate::Error;

/// One tensor map to encode, in the driver's order: innermost dimension
/// first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapPlan {
    /// The slice parameter it maps (an index into the kernel's params).
    pub param: usize,
    /// The slice's element type.
    pub elem: Scalar,
    /// Elements per dimension.
    pub shape: Vec<u64>,
    /// Bytes between consecutive indices of dimensions 1.. (dimension 0 is dense).
    pub strides: Vec<u64>,
    /// The tile one copy moves, in elements per dimension.
    pub tile: Vec<u32>,
    /// How a copy lays each tile row out in shared memory.
    pub swizzle: Swizzle,
}

/// The TMA's limits (CUDA driver API, `cuTensorMapEncodeTiled`).
const MAX_DIM: u64 = 1 << 32;
const MAX_STRIDE: u64 = 1 << 40;
/// Global addresses and strides are multiples of this many bytes.
pub const ALIGN: u64 = 16;

/// The tensor maps of the variant `consts` of `def` for a call with `args`
/// (in `def.ir.params` order), or why the call cannot have one: a shape or
/// stride out of the TMA's range, a stride that is not a multiple of 16
/// bytes, or a tensor larger than its slice (for a `&mut` slice, to the
/// end of the last row's 16-byte chunk).
pub fn plan_tensor_maps(
    def: &KernelDef,
    consts: &[i64],
    args: &[ArgInfo],
) -> Result<Vec<TensorMapPlan>, Error> {
    let host_values: Vec<HostValue> = args.iter().map(ArgInfo::host_value).collect();
    plan_maps(def, consts, def.ir.params.iter().enumerate(), &host_values)
}

/// [`plan_tensor_maps`] over `params`, each with its index into
/// `def.ir.params` (which its messages name): the kernel's, or a variant's
/// tensor-mapped ones with their expressions specialized
/// ([`crate::VariantChecks`]).
pub(crate) fn plan_maps<'p>(
    def: &KernelDef,
    consts: &[i64],
    params: impl IntoIterator<Item = (usize, &'p Param)>,
    host_values: &[HostValue],
) -> Result<Vec<TensorMapPlan>, Error> {
    let mut plans = Vec::new();
    for (index, param) in params {
        let Some(map) = &param.tensor_map else {
            continue;
        };
        let ParamType::Slice { elem, .. } = param.ty else {
            continue;
        };
        let fail = |message: String| Error::InvalidLaunch {
            kernel: def.variant_name(consts),
            message: format!(
                "the tensor map of `{}` cannot be made: {message}; pass a tensor the TMA can \
                 take, or a variant without one",
                param.name
            ),
        };
        let value = |what: &str, e: &Expr| -> Result<u64, Error> {
            match eval::eval(e, consts, host_values) {
                Ok(Literal::Int(v)) if v >= 0 => Ok(v as u64),
                Ok(other) => Err(fail(format!("its {what} evaluated to {other:?}"))),
                Err(e) => Err(fail(format!("its {what} could not be computed ({e})"))),
            }
        };
        let size = u64::from(elem.size_bytes());
        let mut shape = Vec::with_capacity(map.shape.len());
        for e in map.shape.iter().rev() {
            let dim = value("shape", e)?;
            if !(1..=MAX_DIM).contains(&dim) {
                return Err(fail(format!(
                    "a dimension of its shape is {dim}, and the TMA takes 1 to 2^32"
                )));
            }
            shape.push(dim);
        }
        let mut strides = Vec::with_capacity(map.strides.len());
        for e in map.strides.iter().rev() {
            let bytes = value("stride", e)?
                .checked_mul(size)
                .filter(|&b| b < MAX_STRIDE)
                .ok_or_else(|| fail("a stride is 2^40 bytes or more".to_string()))?;
            if bytes % ALIGN != 0 {
                return Err(fail(format!(
                    "a stride is {bytes} bytes, and the TMA needs multiples of {ALIGN} bytes \
                     ({} elements of {})",
                    ALIGN / size,
                    elem.name()
                )));
            }
            strides.push(bytes);
        }
        let mut tile = Vec::with_capacity(map.tile.len());
        for e in map.tile.iter().rev() {
            let t = value("tile", e)?;
            if !(1..=256).contains(&t) {
                return Err(fail(format!(
                    "a tile dimension is {t}, and the TMA takes 1 to 256"
                )));
            }
            tile.push(t as u32);
        }
        // The last element the map reaches must lie in the slice: the
        // tensor may not read or write past the buffer. A TMA store writes
        // whole 16-byte chunks of a row, past the tensor's edge within its
        // last chunk (measured on the H200, `tests/src/hopper.rs`), so a
        // slice the kernel may write needs room to the end of that chunk.
        let writable = matches!(param.ty, ParamType::Slice { mutable: true, .. });
        let last = shape[1..]
            .iter()
            .zip(&strides)
            .try_fold((shape[0] - 1) * size, |at, (dim, stride)| {
                (dim - 1).checked_mul(*stride)?.checked_add(at)
            });
        let bytes = match host_values.get(index) {
            Some(HostValue::Slice { len }) => len.saturating_mul(size),
            _ => 0,
        };
        let end = last.map(|last| match writable {
            true => (last + size).next_multiple_of(ALIGN),
            false => last + size,
        });
        if end.is_none_or(|end| end > bytes) {
            let chunk = match writable {
                true => " and the rest of its last 16-byte chunk, which a TMA store writes",
                false => "",
            };
            return Err(fail(format!(
                "its shape and strides reach past the end of the slice ({} elements): the last \
                 row's elements{chunk} must lie in it",
                bytes / size
            )));
        }
        plans.push(TensorMapPlan {
            param: index,
            elem,
            shape,
            strides,
            tile,
            swizzle: map.swizzle,
        });
    }
    Ok(plans)
}
