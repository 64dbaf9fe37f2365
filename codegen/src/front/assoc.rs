//! Associated constants of the scalar types (`f32::INFINITY`, `u32::MAX`),
//! with the values Rust gives them (`half`'s for `f16` and `bf16`).

use crate::ir::{Literal, Scalar};

/// The value of `<ty>::<name>`, or `None` when Rust has no such constant.
pub fn value(ty: Scalar, name: &str) -> Option<Literal> {
    match (name, ty) {
        ("ZERO" | "ONE", Scalar::Bool) => return None,
        ("ZERO", t) if t.is_float() => return Some(Literal::Float(0.0)),
        ("ONE", t) if t.is_float() => return Some(Literal::Float(1.0)),
        ("ZERO", _) => return Some(Literal::Int(0)),
        ("ONE", _) => return Some(Literal::Int(1)),
        _ => {}
    }
    if ty.is_float() {
        let (max, min_positive, epsilon) = match ty {
            Scalar::F16 => (65504.0, 6.103_515_625e-5, 9.765_625e-4),
            Scalar::Bf16 => (
                3.389_531_389_251_535_5e38,
                1.175_494_350_822_287_5e-38,
                7.812_5e-3,
            ),
            Scalar::F32 => (
                f32::MAX as f64,
                f32::MIN_POSITIVE as f64,
                f32::EPSILON as f64,
            ),
            _ => (f64::MAX, f64::MIN_POSITIVE, f64::EPSILON),
        };
        let v = match name {
            "INFINITY" => f64::INFINITY,
            "NEG_INFINITY" => f64::NEG_INFINITY,
            "NAN" => f64::NAN,
            "MAX" => max,
            "MIN" => -max,
            "MIN_POSITIVE" => min_positive,
            "EPSILON" => epsilon,
            _ => return None,
        };
        return Some(Literal::Float(v));
    }
    if ty.is_int() {
        let bits = ty.size_bytes() * 8;
        let (min, max) = if ty.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        // Integer literals hold the value's bits sign- or zero-extended to 64 bits
        // (ir::Literal): u64::MAX is stored as -1.
        let v = match name {
            "MAX" => max,
            "MIN" => min,
            "BITS" => bits as i128,
            _ => return None,
        };
        return Some(Literal::Int(v as i64));
    }
    None
}

/// The constants `value` knows, for error messages.
pub const NAMES: &str = "`ZERO`, `ONE`, `BYTES` (a `u32`) and `IS_FLOAT` (a `bool`) on numbers; `INFINITY`, `NEG_INFINITY`, `NAN`, `MAX`, `MIN`, `MIN_POSITIVE`, `EPSILON` on floats; `MAX`, `MIN`, `BITS` on integers";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_rust() {
        assert_eq!(
            value(Scalar::F32, "NEG_INFINITY"),
            Some(Literal::Float(f64::NEG_INFINITY))
        );
        assert_eq!(
            value(Scalar::F32, "MAX"),
            Some(Literal::Float(f32::MAX as f64))
        );
        assert_eq!(
            value(Scalar::U32, "MAX"),
            Some(Literal::Int(u32::MAX as i64))
        );
        assert_eq!(
            value(Scalar::I32, "MIN"),
            Some(Literal::Int(i32::MIN as i64))
        );
        assert_eq!(value(Scalar::U64, "MAX"), Some(Literal::Int(-1)));
        assert_eq!(value(Scalar::I8, "BITS"), Some(Literal::Int(8)));
        assert_eq!(value(Scalar::U32, "INFINITY"), None);
        assert_eq!(value(Scalar::Bool, "MAX"), None);
    }
}
