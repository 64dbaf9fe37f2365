//! Scalar semantics at run time: what one thread computes for one operation,
//! as the PTX backend's instructions compute it (`back/ptx/expr.rs`,
//! `back/ptx/math.rs`), not as [`crate::eval`] folds constants.
//!
//! Values are [`Literal`]s of the expression's type: integers hold their
//! value sign- or zero-extended to 64 bits (a `u64` as its bits), floats the
//! exact value of the type in an `f64` (every f16, bf16 and f32 is one), bools
//! a bool. The rules:
//! - Integer `+ - *`, negation, `<<` and `abs` wrap to the type (PTX has no
//!   overflow trap; Rust's release builds wrap the same way). Shift amounts
//!   are taken modulo the bit width, as the backend masks them. `MIN / -1`
//!   wraps to `MIN` and `MIN % -1` is 0. Division by zero is a
//!   [`Fault`]: the GPU gives an unspecified value, so a kernel that divides
//!   by zero has no result to compare with.
//! - f32 and f64 arithmetic rounds to nearest even in the type; f16 and bf16
//!   widen to f32, compute, and round once to the type (the backend's `cvt.rn`
//!   after the f32 instruction). `mul_add` rounds once in every type.
//! - Conversions follow Rust's `as` (floats to integers truncate and saturate,
//!   NaN to 0), with every float result correctly rounded, as the backend's
//!   `cvt.rn` and round-to-odd sequences give it. Every rounding to f16 or
//!   bf16 is [`crate::eval::f16_from_f64`] and `bf16_from_f64`, in one step
//!   from the exact value (never `half`'s `from_f64`, which rounds twice).
//! - `sqrt`, `floor`, `ceil`, `round`, `abs`, `min` and `max` are exact as on
//!   the GPU; `rsqrt`, `exp`, `exp2`, `ln`, `log2`, `sin`, `cos` and `tanh` use
//!   the host's `f32`/`f64` functions, which are more accurate than the
//!   GPU's approximate instructions: compare those within a tolerance.
//!   f64 transcendentals are computed although the PTX backend refuses them.

use crate::ir::{BinaryOp, Intrinsic, Literal, Scalar, UnaryOp};

/// A failure of one operation, before the interpreter adds where it happened.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Fault {
    pub kind: super::ErrorKind,
    pub message: String,
    /// The lane (0..32) of the warp whose thread failed, when one did.
    pub lane: Option<u32>,
}

impl Fault {
    pub fn new(kind: super::ErrorKind, message: impl Into<String>) -> Fault {
        Fault {
            kind,
            message: message.into(),
            lane: None,
        }
    }

    /// The same fault, in the thread of `lane` (unless one is named already).
    pub fn at(mut self, lane: u32) -> Fault {
        self.lane.get_or_insert(lane);
        self
    }

    /// An IR that breaks an invariant the validator checks (types, ids):
    /// never expected after [`crate::valid::validate`].
    pub fn invalid(message: impl Into<String>) -> Fault {
        Fault::new(super::ErrorKind::InvalidKernel, message)
    }
}

/// The bits of an integer type.
pub(super) fn bit_width(ty: Scalar) -> u32 {
    ty.size_bytes() * 8
}

/// The exact value of an integer literal of type `ty`.
pub(super) fn int_value(ty: Scalar, lit: Literal) -> Result<i128, Fault> {
    match lit {
        Literal::Int(v) if ty == Scalar::U64 => Ok(v as u64 as i128),
        Literal::Int(v) => Ok(v as i128),
        Literal::Bool(b) if ty == Scalar::Bool => Ok(b as i128),
        other => Err(Fault::invalid(format!(
            "expected an integer of type {}, found {other:?}",
            ty.name()
        ))),
    }
}

pub(super) fn float_value(ty: Scalar, lit: Literal) -> Result<f64, Fault> {
    match lit {
        Literal::Float(v) => Ok(v),
        other => Err(Fault::invalid(format!(
            "expected a float of type {}, found {other:?}",
            ty.name()
        ))),
    }
}

pub(super) fn bool_value(lit: Literal) -> Result<bool, Fault> {
    match lit {
        Literal::Bool(b) => Ok(b),
        other => Err(Fault::invalid(format!("expected a bool, found {other:?}"))),
    }
}

/// `v` wrapped to the integer type `ty` (truncated to its width, re-extended
/// by its signedness), as a literal.
pub(super) fn wrap(ty: Scalar, v: i128) -> Literal {
    let shift = 128 - bit_width(ty);
    let wrapped = if ty.is_signed() {
        (v << shift) >> shift
    } else {
        ((v as u128) << shift >> shift) as i128
    };
    Literal::Int(wrapped as i64)
}

/// `v` correctly rounded (to nearest even, in one step) to the float type `ty`.
pub(super) fn round_float(ty: Scalar, v: f64) -> f64 {
    match ty {
        Scalar::F32 => v as f32 as f64,
        Scalar::F16 => crate::eval::f16_from_f64(v).to_f64(),
        Scalar::Bf16 => crate::eval::bf16_from_f64(v).to_f64(),
        _ => v,
    }
}

/// An `f32` rounded to f16 or bf16 (to nearest even, in one step, as
/// `cvt.rn.f16.f32` does), as an `f64`: widening to f64 is exact.
pub(super) fn narrow_f32(ty: Scalar, v: f32) -> f64 {
    round_float(ty, v as f64)
}

/// The integer `v` correctly rounded to the float type `ty`.
fn int_to_float(ty: Scalar, v: i128) -> f64 {
    match ty {
        Scalar::F64 => v as f64,
        Scalar::F32 => v as f32 as f64,
        _ => crate::eval::int_to_half(ty, v),
    }
}

/// The bits of a value as memory holds it (the low `size_bytes` bytes).
pub(super) fn to_bits(ty: Scalar, lit: Literal) -> Result<u64, Fault> {
    Ok(match ty {
        Scalar::Bool => bool_value(lit)? as u64,
        Scalar::F16 => crate::eval::f16_from_f64(float_value(ty, lit)?).to_bits() as u64,
        Scalar::Bf16 => crate::eval::bf16_from_f64(float_value(ty, lit)?).to_bits() as u64,
        Scalar::F32 => (float_value(ty, lit)? as f32).to_bits() as u64,
        Scalar::F64 => float_value(ty, lit)?.to_bits(),
        _ => {
            let v = int_value(ty, lit)? as u128 as u64;
            if ty.size_bytes() == 8 {
                v
            } else {
                v & ((1u64 << bit_width(ty)) - 1)
            }
        }
    })
}

/// The value whose bits (the low `size_bytes` bytes of `bits`) memory holds.
pub(super) fn from_bits(ty: Scalar, bits: u64) -> Literal {
    match ty {
        Scalar::Bool => Literal::Bool(bits & 0xff != 0),
        Scalar::F16 => Literal::Float(half::f16::from_bits(bits as u16).to_f64()),
        Scalar::Bf16 => Literal::Float(half::bf16::from_bits(bits as u16).to_f64()),
        Scalar::F32 => Literal::Float(f32::from_bits(bits as u32) as f64),
        Scalar::F64 => Literal::Float(f64::from_bits(bits)),
        _ => wrap(ty, bits as i128),
    }
}

/// `op a` for an operand and result of type `ty`.
pub(super) fn unary(op: UnaryOp, ty: Scalar, a: Literal) -> Result<Literal, Fault> {
    match (op, ty) {
        (UnaryOp::Not, Scalar::Bool) => Ok(Literal::Bool(!bool_value(a)?)),
        (UnaryOp::Not, _) if ty.is_int() => Ok(wrap(ty, !int_value(ty, a)?)),
        (UnaryOp::Neg, _) if ty.is_float() => Ok(Literal::Float(-float_value(ty, a)?)),
        (UnaryOp::Neg, _) if ty.is_int() => Ok(wrap(ty, int_value(ty, a)?.wrapping_neg())),
        _ => Err(Fault::invalid(format!(
            "unary {op:?} is not defined on {}",
            ty.name()
        ))),
    }
}

/// Float arithmetic in the type's computing precision: f64 for f64, f32 for
/// the others, rounded once to `ty`.
fn float_arith(
    ty: Scalar,
    x: f64,
    y: f64,
    f32_op: fn(f32, f32) -> f32,
    f64_op: fn(f64, f64) -> f64,
) -> f64 {
    match ty {
        Scalar::F64 => f64_op(x, y),
        _ => narrow_f32(ty, f32_op(x as f32, y as f32)),
    }
}

/// `a op b` for operands of type `ty` (a shift amount is a `u32`); `&&` and
/// `||` are the interpreter's, since they do not evaluate both operands.
pub(super) fn binary(op: BinaryOp, ty: Scalar, a: Literal, b: Literal) -> Result<Literal, Fault> {
    use std::ops::{Add, Div, Mul, Rem, Sub};
    if ty == Scalar::Bool {
        let (x, y) = (bool_value(a)?, bool_value(b)?);
        return Ok(Literal::Bool(match op {
            BinaryOp::BitAnd | BinaryOp::LogicalAnd => x & y,
            BinaryOp::BitOr | BinaryOp::LogicalOr => x | y,
            BinaryOp::BitXor | BinaryOp::Ne => x != y,
            BinaryOp::Eq => x == y,
            BinaryOp::Lt => !x & y,
            BinaryOp::Le => x <= y,
            BinaryOp::Gt => x & !y,
            BinaryOp::Ge => x >= y,
            _ => {
                return Err(Fault::invalid(format!(
                    "`{}` is not defined on bool",
                    crate::eval::binary_op_text(op)
                )))
            }
        }));
    }
    if ty.is_float() {
        let (x, y) = (float_value(ty, a)?, float_value(ty, b)?);
        let arith = |f32_op, f64_op| Ok(Literal::Float(float_arith(ty, x, y, f32_op, f64_op)));
        return match op {
            BinaryOp::Add => arith(f32::add, f64::add),
            BinaryOp::Sub => arith(f32::sub, f64::sub),
            BinaryOp::Mul => arith(f32::mul, f64::mul),
            BinaryOp::Div => arith(f32::div, f64::div),
            BinaryOp::Rem => arith(f32::rem, f64::rem),
            BinaryOp::Eq => Ok(Literal::Bool(x == y)),
            BinaryOp::Ne => Ok(Literal::Bool(x != y)),
            BinaryOp::Lt => Ok(Literal::Bool(x < y)),
            BinaryOp::Le => Ok(Literal::Bool(x <= y)),
            BinaryOp::Gt => Ok(Literal::Bool(x > y)),
            BinaryOp::Ge => Ok(Literal::Bool(x >= y)),
            _ => Err(Fault::invalid(format!(
                "`{}` is not defined on {}",
                crate::eval::binary_op_text(op),
                ty.name()
            ))),
        };
    }
    if !ty.is_int() {
        return Err(Fault::invalid(format!("no arithmetic on {}", ty.name())));
    }
    let x = int_value(ty, a)?;
    let amount_ty = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        Scalar::U32
    } else {
        ty
    };
    let y = int_value(amount_ty, b)?;
    let bits = bit_width(ty) as i128;
    Ok(match op {
        BinaryOp::Add => wrap(ty, x.wrapping_add(y)),
        BinaryOp::Sub => wrap(ty, x.wrapping_sub(y)),
        BinaryOp::Mul => wrap(ty, x.wrapping_mul(y)),
        BinaryOp::Div | BinaryOp::Rem if y == 0 => {
            return Err(Fault::new(
                super::ErrorKind::DivisionByZero,
                format!(
                    "`{x} {} 0` on {}: integer division by zero (the GPU's result is unspecified)",
                    crate::eval::binary_op_text(op),
                    ty.name()
                ),
            ))
        }
        // MIN / -1 is MIN + 1 past the range: it wraps to MIN, and MIN % -1 is 0.
        BinaryOp::Div => wrap(ty, x.div(y)),
        BinaryOp::Rem => wrap(ty, x.rem(y)),
        BinaryOp::BitAnd => wrap(ty, x & y),
        BinaryOp::BitOr => wrap(ty, x | y),
        BinaryOp::BitXor => wrap(ty, x ^ y),
        BinaryOp::Shl => wrap(ty, x << (y % bits)),
        BinaryOp::Shr => wrap(ty, x >> (y % bits)),
        BinaryOp::Eq => Literal::Bool(x == y),
        BinaryOp::Ne => Literal::Bool(x != y),
        BinaryOp::Lt => Literal::Bool(x < y),
        BinaryOp::Le => Literal::Bool(x <= y),
        BinaryOp::Gt => Literal::Bool(x > y),
        BinaryOp::Ge => Literal::Bool(x >= y),
        BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
            return Err(Fault::invalid(format!(
                "`{}` is not defined on {}",
                crate::eval::binary_op_text(op),
                ty.name()
            )))
        }
    })
}

/// `a as to`, with Rust's `as` semantics and correctly rounded floats.
pub(super) fn cast(from: Scalar, to: Scalar, a: Literal) -> Result<Literal, Fault> {
    if to == Scalar::Bool {
        return match from {
            Scalar::Bool => Ok(a),
            _ => Err(Fault::invalid(format!(
                "{} cannot be cast to bool",
                from.name()
            ))),
        };
    }
    if from == Scalar::Bool {
        let v = bool_value(a)? as i128;
        return Ok(if to.is_float() {
            Literal::Float(v as f64)
        } else {
            wrap(to, v)
        });
    }
    if from.is_float() {
        let v = float_value(from, a)?;
        if to.is_float() {
            return Ok(Literal::Float(round_float(to, v)));
        }
        let (min, max) = int_range(to);
        let saturated = if v.is_nan() {
            0
        } else if v >= max as f64 {
            max
        } else if v <= min as f64 {
            min
        } else {
            v.trunc() as i128
        };
        return Ok(wrap(to, saturated));
    }
    let v = int_value(from, a)?;
    Ok(if to.is_float() {
        Literal::Float(int_to_float(to, v))
    } else {
        wrap(to, v)
    })
}

/// (min, max) of an integer type.
pub(super) fn int_range(ty: Scalar) -> (i128, i128) {
    match ty {
        Scalar::I8 => (i8::MIN as i128, i8::MAX as i128),
        Scalar::U8 => (0, u8::MAX as i128),
        Scalar::I32 => (i32::MIN as i128, i32::MAX as i128),
        Scalar::U32 => (0, u32::MAX as i128),
        Scalar::I64 => (i64::MIN as i128, i64::MAX as i128),
        Scalar::U64 => (0, u64::MAX as i128),
        _ => (0, 0),
    }
}

/// PTX `min`/`max` on floats: a NaN operand yields the other one, and -0 is
/// below +0.
fn float_min_max(max: bool, x: f64, y: f64) -> f64 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        // Equal values differ only in the sign of a zero.
        let negative = if max {
            x.is_sign_negative() && y.is_sign_negative()
        } else {
            x.is_sign_negative() || y.is_sign_negative()
        };
        return if negative { -x.abs() } else { x.abs() };
    }
    if (x < y) != max {
        x
    } else {
        y
    }
}

/// `a * b + c` rounded once to f16 or bf16: the product of two 16-bit
/// values is exact in `f64`, the sum is rounded to odd there (its exact
/// error from a two-sum), and that rounds correctly to 16 bits.
fn half_mul_add(ty: Scalar, a: f64, b: f64, c: f64) -> f64 {
    let p = a * b;
    let s = p + c;
    if !s.is_finite() {
        return round_float(ty, s);
    }
    // Knuth's two-sum: s + e == p + c exactly.
    let bp = s - c;
    let e = (p - bp) + (c - (s - bp));
    let odd = if e == 0.0 {
        s
    } else {
        let bits = s.to_bits();
        let away = (e > 0.0) != (s > 0.0);
        let truncated = if s == 0.0 {
            // |p + c| is below the smallest f64 step: far below 16 bits.
            return round_float(ty, e);
        } else if away {
            // s is farther from zero than p + c: step toward zero.
            bits - 1
        } else {
            bits
        };
        f64::from_bits(truncated | 1)
    };
    round_float(ty, odd)
}

/// A math intrinsic (not a shuffle) on `args` of types `arg_tys`, with the
/// result type `ty`.
pub(super) fn intrinsic(
    f: Intrinsic,
    ty: Scalar,
    arg_tys: &[Scalar],
    args: &[Literal],
) -> Result<Literal, Fault> {
    let arg = |i: usize| {
        args.get(i)
            .copied()
            .ok_or_else(|| Fault::invalid(format!("`{f:?}` takes more arguments")))
    };
    let arg_ty = |i: usize| arg_tys.get(i).copied().unwrap_or(ty);
    match f {
        Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 => {
            let half_ty = if f == Intrinsic::PackF16x2 {
                Scalar::F16
            } else {
                Scalar::Bf16
            };
            let lo = round_float(half_ty, float_value(arg_ty(0), arg(0)?)?);
            let hi = round_float(half_ty, float_value(arg_ty(1), arg(1)?)?);
            let lo = to_bits(half_ty, Literal::Float(lo))?;
            let hi = to_bits(half_ty, Literal::Float(hi))?;
            return Ok(Literal::Int((lo | hi << 16) as i64));
        }
        Intrinsic::ToTf32 => {
            let x = float_value(Scalar::F32, arg(0)?)? as f32;
            return Ok(Literal::Int(round_to_tf32(x).to_bits() as i64));
        }
        Intrinsic::FromBits => {
            let bits = int_value(Scalar::U32, arg(0)?)? as u32;
            return Ok(Literal::Float(f32::from_bits(bits) as f64));
        }
        Intrinsic::ToBits => {
            let x = float_value(Scalar::F32, arg(0)?)? as f32;
            return Ok(Literal::Int(x.to_bits() as i64));
        }
        Intrinsic::ShflXor | Intrinsic::ShflDown => {
            return Err(Fault::invalid("a shuffle reached the scalar intrinsics"))
        }
        _ => {}
    }
    if ty.is_int() {
        let x = int_value(ty, arg(0)?)?;
        return match f {
            Intrinsic::Abs => Ok(wrap(ty, x.abs())),
            Intrinsic::Min => Ok(wrap(ty, x.min(int_value(ty, arg(1)?)?))),
            Intrinsic::Max => Ok(wrap(ty, x.max(int_value(ty, arg(1)?)?))),
            _ => Err(Fault::invalid(format!(
                "`{f:?}` is not defined on {}",
                ty.name()
            ))),
        };
    }
    if !ty.is_float() {
        return Err(Fault::invalid(format!(
            "`{f:?}` is not defined on {}",
            ty.name()
        )));
    }
    let x = float_value(ty, arg(0)?)?;
    match f {
        Intrinsic::Abs => return Ok(Literal::Float(x.abs())),
        Intrinsic::Min | Intrinsic::Max => {
            let y = float_value(ty, arg(1)?)?;
            return Ok(Literal::Float(float_min_max(f == Intrinsic::Max, x, y)));
        }
        Intrinsic::MulAdd => {
            let (b, c) = (float_value(ty, arg(1)?)?, float_value(ty, arg(2)?)?);
            return Ok(Literal::Float(match ty {
                Scalar::F64 => x.mul_add(b, c),
                Scalar::F32 => (x as f32).mul_add(b as f32, c as f32) as f64,
                _ => half_mul_add(ty, x, b, c),
            }));
        }
        _ => {}
    }
    if ty == Scalar::F64 {
        let r = match f {
            Intrinsic::Sqrt => x.sqrt(),
            Intrinsic::Rsqrt => 1.0 / x.sqrt(),
            Intrinsic::Exp => x.exp(),
            Intrinsic::Exp2 => x.exp2(),
            Intrinsic::Ln => x.ln(),
            Intrinsic::Log2 => x.log2(),
            Intrinsic::Sin => x.sin(),
            Intrinsic::Cos => x.cos(),
            Intrinsic::Tanh => x.tanh(),
            Intrinsic::Floor => x.floor(),
            Intrinsic::Ceil => x.ceil(),
            Intrinsic::Round => x.round(),
            _ => return Err(Fault::invalid(format!("`{f:?}` on f64"))),
        };
        return Ok(Literal::Float(r));
    }
    // f32, and f16/bf16 through f32.
    let x = x as f32;
    let r = match f {
        Intrinsic::Sqrt => x.sqrt(),
        Intrinsic::Rsqrt => 1.0 / x.sqrt(),
        Intrinsic::Exp => x.exp(),
        Intrinsic::Exp2 => x.exp2(),
        Intrinsic::Ln => x.ln(),
        Intrinsic::Log2 => x.log2(),
        Intrinsic::Sin => x.sin(),
        Intrinsic::Cos => x.cos(),
        Intrinsic::Tanh => x.tanh(),
        Intrinsic::Floor => x.floor(),
        Intrinsic::Ceil => x.ceil(),
        Intrinsic::Round => x.round(),
        _ => return Err(Fault::invalid(format!("`{f:?}` on {}", ty.name()))),
    };
    Ok(Literal::Float(narrow_f32(ty, r)))
}

/// `x` rounded to tf32 as `cvt.rna.tf32.f32` does: to the nearest value with
/// 10 mantissa bits, ties away from zero, the low 13 bits zero; NaN stays NaN.
pub(super) fn round_to_tf32(x: f32) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    f32::from_bits((x.to_bits() + (1 << 12)) & !((1u32 << 13) - 1))
}

/// The old value and the value an atomic stores, for `op` on a place of type
/// `ty` that holds `old`. `compare` is the expected value of a
/// compare-exchange (compared by bits, as `atom.cas` does).
pub(super) fn atomic(
    op: crate::ir::AtomicOp,
    ty: Scalar,
    old: Literal,
    value: Literal,
    compare: Option<Literal>,
) -> Result<Literal, Fault> {
    use crate::ir::AtomicOp;
    Ok(match op {
        AtomicOp::Add if ty == Scalar::F32 => {
            // `atom.add.f32` flushes subnormal inputs and results to zero.
            let ftz = |v: f32| {
                if v.is_subnormal() {
                    0.0f32.copysign(v)
                } else {
                    v
                }
            };
            let x = ftz(float_value(ty, old)? as f32);
            let y = ftz(float_value(ty, value)? as f32);
            Literal::Float(ftz(x + y) as f64)
        }
        AtomicOp::Add => binary(BinaryOp::Add, ty, old, value)?,
        AtomicOp::Min => intrinsic(Intrinsic::Min, ty, &[ty, ty], &[old, value])?,
        AtomicOp::Max => intrinsic(Intrinsic::Max, ty, &[ty, ty], &[old, value])?,
        AtomicOp::And => binary(BinaryOp::BitAnd, ty, old, value)?,
        AtomicOp::Or => binary(BinaryOp::BitOr, ty, old, value)?,
        AtomicOp::Xor => binary(BinaryOp::BitXor, ty, old, value)?,
        AtomicOp::Exchange => value,
        AtomicOp::CompareExchange => {
            let expected = compare
                .ok_or_else(|| Fault::invalid("a compare-exchange without an expected value"))?;
            if to_bits(ty, old)? == to_bits(ty, expected)? {
                value
            } else {
                old
            }
        }
    })
}
