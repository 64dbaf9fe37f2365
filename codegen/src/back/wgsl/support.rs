//! The types WGSL has: what each scalar lives in as a value and as a
//! storage element, and which take atomics. The emitter writes with them,
//! and `valid/targets/wgsl.rs` checks a kernel against them (and refuses the
//! constructs WGSL lacks) before anything is emitted.

use crate::ir::Scalar;

/// The WGSL type a value of `ty` lives in: i8/u8 in i32/u32 (kept sign- or
/// zero-extended); `None` for the types WGSL lacks.
pub fn value_type(ty: Scalar) -> Option<&'static str> {
    match ty {
        Scalar::Bool => Some("bool"),
        Scalar::I8 | Scalar::I32 => Some("i32"),
        Scalar::U8 | Scalar::U32 => Some("u32"),
        Scalar::F16 => Some("f16"),
        Scalar::F32 => Some("f32"),
        Scalar::I64 | Scalar::U64 | Scalar::F64 | Scalar::Bf16 | Scalar::E4m3 | Scalar::E5m2 => {
            None
        }
    }
}

/// The element type of a storage buffer holding `ty`.
pub fn storage_type(ty: Scalar) -> Option<&'static str> {
    match ty {
        Scalar::I32 | Scalar::U32 | Scalar::F16 | Scalar::F32 => value_type(ty),
        _ => None,
    }
}

/// The element types WGSL atomics take.
pub fn atomic_type(ty: Scalar) -> bool {
    matches!(ty, Scalar::I32 | Scalar::U32)
}

/// The bytes an element of `ty` takes in a WGSL array: its value type's
/// size (bool is one byte in naga's layout, i8/u8 live in 32 bits).
pub fn value_size(ty: Scalar) -> Option<u64> {
    value_type(ty)?;
    Some(match ty {
        Scalar::Bool => 1,
        Scalar::F16 => 2,
        _ => 4,
    })
}

/// The largest type naga accepts, in bytes (`naga::valid::MAX_TYPE_SIZE`):
/// an array past it is refused.
pub const MAX_TYPE_SIZE: u64 = i32::MAX as u64;

/// The deepest nesting of brace-enclosed statements in a function, the body
/// of `main` included (WGSL's limit, section 2.4, which naga enforces).
/// The emitter opens one brace per `if`, `for` and `while` of the IR and
/// writes an `else if` chain flat.
pub const MAX_BRACE_NESTING: usize = 127;

/// The depth at which naga's WGSL parser stops (its recursion limit, 200):
/// each statement it is inside and each expression (an operand in
/// parentheses, a call's argument, an index) counts one.
pub const MAX_PARSE_DEPTH: usize = 199;

/// The most parse levels the emitter writes for one IR expression around
/// its operands: an f16 to i8 cast is `extractBits(to_i32(f32(x)), 0u,
/// 8u)`; operators parenthesize their operands.
pub const PARSE_DEPTH_PER_EXPR: usize = 3;
