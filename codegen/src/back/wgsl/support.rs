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
