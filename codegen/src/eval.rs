//! Evaluation of expressions whose inputs are known: constant folding in
//! [`crate::specialize`], and the host-side `requires(..)` checks and
//! `block(..)` shapes at launch.
//!
//! Integer arithmetic is exact for the expression's type: a result that does
//! not fit, a division by zero or a shift by the bit width or more is an
//! [`Error`] naming the operation and its operands, never a wrap (Rust's debug
//! semantics; `as` casts wrap and saturate as in Rust, since that is their
//! defined meaning). Floats follow IEEE round-to-nearest-even for the
//! expression's type: each result is computed in `f64` and rounded once to the
//! type, which is exact for `+ - * /` because `f64` carries more than twice
//! the significand bits of `f32`, `f16` and `bf16` plus two. The rounding to
//! f16 and bf16 is this module's own, in one step from the `f64`
//! ([`f16_from_f64`], [`bf16_from_f64`], [`int_to_half`]), which the
//! interpreter shares: `half`'s conversions from `f64` round twice.

use crate::ir::{BinaryOp, Expr, ExprKind, Literal, Scalar, UnaryOp};
use crate::Error;

/// What the host knows about one run-time parameter at launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostValue {
    /// A scalar parameter's value.
    Scalar(Literal),
    /// A slice parameter, of which the host knows the length.
    Slice {
        /// The slice's length in elements.
        len: u64,
    },
}

/// Evaluates an expression over literals, const params (`consts`, in
/// `const_params` order) and, for launch-time checks, parameter values and
/// slice lengths (`params`, in `params` order).
pub fn eval(expr: &Expr, consts: &[i64], params: &[HostValue]) -> Result<Literal, Error> {
    Evaluator { consts, params }.eval(expr)
}

struct Evaluator<'a> {
    consts: &'a [i64],
    params: &'a [HostValue],
}

impl Evaluator<'_> {
    fn eval(&self, expr: &Expr) -> Result<Literal, Error> {
        match &expr.kind {
            ExprKind::Literal(lit) => Ok(*lit),
            ExprKind::Const(id) => {
                let value = *self.consts.get(*id as usize).ok_or_else(|| {
                    Error::new(format!(
                        "const param #{id} has no value: {} values were given",
                        self.consts.len()
                    ))
                })?;
                if expr.ty == Scalar::Bool {
                    Ok(Literal::Bool(value != 0))
                } else {
                    encode_int(expr.ty, value as i128)
                }
            }
            ExprKind::Param(id) => match self.params.get(*id as usize) {
                Some(HostValue::Scalar(lit)) => Ok(*lit),
                Some(HostValue::Slice { .. }) => Err(Error::new(format!(
                    "parameter #{id} is a slice, not a scalar: only `.len()` of a slice can be evaluated on the host"
                ))),
                None => Err(Error::new(format!(
                    "parameter #{id} is not known here: only literals and const params can be evaluated at compile time"
                ))),
            },
            ExprKind::Len(id) => match self.params.get(*id as usize) {
                Some(HostValue::Slice { len }) => u32::try_from(*len)
                    .map(|len| Literal::Int(len as i64))
                    .map_err(|_| {
                        Error::new(format!(
                            "slice parameter #{id} has {len} elements, more than `.len()` (a u32) can count: split the data"
                        ))
                    }),
                Some(HostValue::Scalar(_)) => Err(Error::new(format!(
                    "parameter #{id} is a scalar, so it has no `.len()`"
                ))),
                None => Err(Error::new(format!(
                    "the length of parameter #{id} is not known here: only literals and const params can be evaluated at compile time"
                ))),
            },
            ExprKind::Unary(op, a) => unary(*op, expr.ty, self.eval(a)?),
            ExprKind::Binary(BinaryOp::LogicalAnd, a, b) => match self.eval(a)? {
                Literal::Bool(false) => Ok(Literal::Bool(false)),
                _ => self.eval(b),
            },
            ExprKind::Binary(BinaryOp::LogicalOr, a, b) => match self.eval(a)? {
                Literal::Bool(true) => Ok(Literal::Bool(true)),
                _ => self.eval(b),
            },
            ExprKind::Binary(op, a, b) => binary(*op, a.ty, self.eval(a)?, self.eval(b)?),
            ExprKind::Cast(a) => cast(a.ty, expr.ty, self.eval(a)?),
            ExprKind::Select(cond, a, b) => match self.eval(cond)? {
                Literal::Bool(true) => self.eval(a),
                Literal::Bool(false) => self.eval(b),
                other => Err(Error::new(format!("a select condition evaluated to {other:?}, not a bool"))),
            },
            ExprKind::Load(_) => Err(not_evaluable("a read of a variable or memory")),
            ExprKind::Special(_) => Err(not_evaluable("a thread/block index")),
            ExprKind::Call(intrinsic, _) => Err(not_evaluable(&format!("the intrinsic {intrinsic:?}"))),
            ExprKind::Atomic { .. } => Err(not_evaluable("an atomic")),
        }
    }
}

fn not_evaluable(what: &str) -> Error {
    Error::new(format!(
        "{what} cannot be evaluated ahead of the kernel: only literals, const params, scalar params and slice lengths can"
    ))
}

/// The exact value of an integer literal of type `ty`.
fn decode_int(ty: Scalar, lit: Literal) -> Result<i128, Error> {
    match lit {
        Literal::Int(v) if ty == Scalar::U64 => Ok(v as u64 as i128),
        Literal::Int(v) => Ok(v as i128),
        other => Err(Error::new(format!(
            "expected an integer of type {}, found {other:?}",
            ty.name()
        ))),
    }
}

fn decode_float(ty: Scalar, lit: Literal) -> Result<f64, Error> {
    match lit {
        Literal::Float(v) => Ok(v),
        other => Err(Error::new(format!(
            "expected a float of type {}, found {other:?}",
            ty.name()
        ))),
    }
}

fn decode_bool(lit: Literal) -> Result<bool, Error> {
    match lit {
        Literal::Bool(b) => Ok(b),
        other => Err(Error::new(format!("expected a bool, found {other:?}"))),
    }
}

/// (min, max) of an integer type.
fn int_range(ty: Scalar) -> (i128, i128) {
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

fn bits(ty: Scalar) -> u32 {
    ty.size_bytes() * 8
}

/// The literal holding `v` as a value of `ty`, or an error when it does not fit.
pub fn encode_int(ty: Scalar, v: i128) -> Result<Literal, Error> {
    let (min, max) = int_range(ty);
    if v < min || v > max {
        return Err(Error::new(format!(
            "{v} does not fit in {} ({min}..={max})",
            ty.name()
        )));
    }
    Ok(Literal::Int(if ty == Scalar::U64 {
        v as u64 as i64
    } else {
        v as i64
    }))
}

/// `v` truncated to the width of `ty` and re-extended by its signedness (`as`).
fn wrap_int(ty: Scalar, v: i128) -> i128 {
    let shift = 128 - bits(ty);
    if ty.is_signed() {
        (v << shift) >> shift
    } else {
        ((v as u128) << shift >> shift) as i128
    }
}

/// `v` rounded to the nearest value of the float type `ty`.
fn round_float(ty: Scalar, v: f64) -> f64 {
    match ty {
        Scalar::F16 => f16_from_f64(v).to_f64(),
        Scalar::Bf16 => bf16_from_f64(v).to_f64(),
        Scalar::F32 => v as f32 as f64,
        _ => v,
    }
}

/// `v` rounded to f16 in one step, to nearest even, as `cvt.rn.f16.f64`
/// does: subnormal below 2^-14, infinite from 65520 up, NaN quiet (its top
/// payload bits kept). `half::f16::from_f64` is not this: it rounds
/// through f32 (f16c) or drops the low 32 bits of the f64 (its fallback),
/// so a value just above a tie can round down. An f32 widens to f64
/// exactly, so this also rounds an f32 correctly.
pub fn f16_from_f64(v: f64) -> half::f16 {
    half::f16::from_bits(narrow_f64(v, HalfFormat::F16))
}

/// `v` rounded to bf16 in one step, to nearest even (see [`f16_from_f64`]).
pub fn bf16_from_f64(v: f64) -> half::bf16 {
    half::bf16::from_bits(narrow_f64(v, HalfFormat::BF16))
}

/// The integer `v` rounded to f16 or bf16 (`ty`) in one step, as an `f64`
/// (`v as f64` first would round a 64-bit integer twice).
pub fn int_to_half(ty: Scalar, v: i128) -> f64 {
    let format = HalfFormat::of(ty);
    let bits = format.round(v < 0, v.unsigned_abs(), 0);
    match ty {
        Scalar::Bf16 => half::bf16::from_bits(bits).to_f64(),
        _ => half::f16::from_bits(bits).to_f64(),
    }
}

/// A 16-bit binary float format: its exponent and fraction widths.
#[derive(Clone, Copy)]
struct HalfFormat {
    exponent: u32,
    fraction: u32,
}

impl HalfFormat {
    const F16: HalfFormat = HalfFormat {
        exponent: 5,
        fraction: 10,
    };
    const BF16: HalfFormat = HalfFormat {
        exponent: 8,
        fraction: 7,
    };

    fn of(ty: Scalar) -> HalfFormat {
        if ty == Scalar::Bf16 {
            HalfFormat::BF16
        } else {
            HalfFormat::F16
        }
    }

    fn sign(self, negative: bool) -> u16 {
        (negative as u16) << (self.exponent + self.fraction)
    }

    fn infinity(self) -> u16 {
        ((1u16 << self.exponent) - 1) << self.fraction
    }

    /// The bits of `±m * 2^e` (exact) rounded to nearest even.
    fn round(self, negative: bool, m: u128, e: i32) -> u16 {
        let sign = self.sign(negative);
        if m == 0 {
            return sign;
        }
        let bias = (1i32 << (self.exponent - 1)) - 1;
        let fraction = self.fraction as i32;
        let top = 127 - m.leading_zeros() as i32;
        // The exponent of the result's last place: the value's own, or
        // the subnormals' below the normal range.
        let q = (e + top).max(1 - bias) - fraction;
        // The value in units of 2^q, rounded.
        let n = if q <= e {
            // Exact: then m has at most `fraction + 1` bits.
            m << (e - q)
        } else {
            let shift = (q - e) as u32;
            if shift > 128 {
                // Below half the smallest subnormal, as m < 2^128.
                return sign;
            }
            let n = m.checked_shr(shift).unwrap_or(0);
            let rest = m - n.checked_shl(shift).unwrap_or(0);
            let half = 1u128 << (shift - 1);
            if rest > half || (rest == half && n & 1 == 1) {
                n + 1
            } else {
                n
            }
        };
        // n < 2^fraction is a subnormal (q is the subnormals'); a carry of n
        // to 2^(fraction + 1) steps the exponent field, up to infinity.
        let field = (q + fraction + bias - 1) as u128;
        let magnitude = (field << self.fraction) + n;
        sign | magnitude.min(self.infinity() as u128) as u16
    }
}

/// The bits of `v` rounded to `format` (see [`f16_from_f64`]).
fn narrow_f64(v: f64, format: HalfFormat) -> u16 {
    let bits = v.to_bits();
    let negative = bits >> 63 == 1;
    let fraction = bits & ((1u64 << 52) - 1);
    let biased = (bits >> 52 & 0x7ff) as i32;
    if biased == 0x7ff {
        let sign = format.sign(negative) | format.infinity();
        if fraction == 0 {
            return sign;
        }
        let payload = (fraction >> (52 - format.fraction)) as u16;
        return sign | 1 << (format.fraction - 1) | payload;
    }
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | 1 << 52, biased - 1075)
    };
    format.round(negative, m as u128, e)
}

/// The DSL spelling of a binary operator, for messages.
pub fn binary_op_text(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Rem => "%",
        BinaryOp::BitAnd => "&",
        BinaryOp::BitOr => "|",
        BinaryOp::BitXor => "^",
        BinaryOp::Shl => "<<",
        BinaryOp::Shr => ">>",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::LogicalAnd => "&&",
        BinaryOp::LogicalOr => "||",
    }
}

/// `op a` for an operand and result of type `ty`.
pub fn unary(op: UnaryOp, ty: Scalar, a: Literal) -> Result<Literal, Error> {
    match (op, ty) {
        (UnaryOp::Not, Scalar::Bool) => Ok(Literal::Bool(!decode_bool(a)?)),
        (UnaryOp::Not, _) if ty.is_int() => Ok(encode_int(ty, wrap_int(ty, !decode_int(ty, a)?))?),
        (UnaryOp::Neg, _) if ty.is_float() => Ok(Literal::Float(-decode_float(ty, a)?)),
        (UnaryOp::Neg, _) if ty.is_int() && ty.is_signed() => {
            let v = decode_int(ty, a)?;
            encode_int(ty, -v).map_err(|_| Error::new(format!("`-({v})` overflows {}", ty.name())))
        }
        _ => Err(Error::new(format!(
            "unary {op:?} is not defined on {}",
            ty.name()
        ))),
    }
}

/// `a op b` for operands of type `ty` (the shift amount is a `u32`).
pub fn binary(op: BinaryOp, ty: Scalar, a: Literal, b: Literal) -> Result<Literal, Error> {
    if ty == Scalar::Bool {
        let (x, y) = (decode_bool(a)?, decode_bool(b)?);
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
                return Err(Error::new(format!(
                    "`{}` is not defined on bool",
                    binary_op_text(op)
                )))
            }
        }));
    }
    if ty.is_float() {
        let (x, y) = (decode_float(ty, a)?, decode_float(ty, b)?);
        let arith = |v: f64| Ok(Literal::Float(round_float(ty, v)));
        return match op {
            BinaryOp::Add => arith(x + y),
            BinaryOp::Sub => arith(x - y),
            BinaryOp::Mul => arith(x * y),
            BinaryOp::Div => arith(x / y),
            BinaryOp::Rem => arith(x % y),
            BinaryOp::Eq => Ok(Literal::Bool(x == y)),
            BinaryOp::Ne => Ok(Literal::Bool(x != y)),
            BinaryOp::Lt => Ok(Literal::Bool(x < y)),
            BinaryOp::Le => Ok(Literal::Bool(x <= y)),
            BinaryOp::Gt => Ok(Literal::Bool(x > y)),
            BinaryOp::Ge => Ok(Literal::Bool(x >= y)),
            _ => Err(Error::new(format!(
                "`{}` is not defined on {}",
                binary_op_text(op),
                ty.name()
            ))),
        };
    }
    let x = decode_int(ty, a)?;
    let amount_ty = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        Scalar::U32
    } else {
        ty
    };
    let y = decode_int(amount_ty, b)?;
    let overflow = || {
        Error::new(format!(
            "`{x} {} {y}` overflows {}",
            binary_op_text(op),
            ty.name()
        ))
    };
    let checked = |v: i128| encode_int(ty, v).map_err(|_| overflow());
    match op {
        BinaryOp::Add => checked(x + y),
        BinaryOp::Sub => checked(x - y),
        BinaryOp::Mul => checked(x * y),
        BinaryOp::Div | BinaryOp::Rem if y == 0 => Err(Error::new(format!(
            "`{x} {} {y}`: division by zero",
            binary_op_text(op)
        ))),
        BinaryOp::Div => checked(x / y),
        // `MIN % -1` is 0 mathematically, but Rust reports it as an overflow.
        BinaryOp::Rem if ty.is_signed() && x == int_range(ty).0 && y == -1 => Err(overflow()),
        BinaryOp::Rem => checked(x % y),
        BinaryOp::BitAnd => checked(x & y),
        BinaryOp::BitOr => checked(x | y),
        BinaryOp::BitXor => checked(x ^ y),
        BinaryOp::Shl | BinaryOp::Shr if y >= bits(ty) as i128 => Err(Error::new(format!(
            "`{x} {} {y}`: shift amount out of range for {} (must be below {})",
            binary_op_text(op),
            ty.name(),
            bits(ty)
        ))),
        BinaryOp::Shl => checked(wrap_int(ty, ((x as u128) << y) as i128)),
        BinaryOp::Shr => checked(x >> y),
        BinaryOp::Eq => Ok(Literal::Bool(x == y)),
        BinaryOp::Ne => Ok(Literal::Bool(x != y)),
        BinaryOp::Lt => Ok(Literal::Bool(x < y)),
        BinaryOp::Le => Ok(Literal::Bool(x <= y)),
        BinaryOp::Gt => Ok(Literal::Bool(x > y)),
        BinaryOp::Ge => Ok(Literal::Bool(x >= y)),
        BinaryOp::LogicalAnd | BinaryOp::LogicalOr => Err(Error::new(format!(
            "`{}` is not defined on {}",
            binary_op_text(op),
            ty.name()
        ))),
    }
}

/// `a as to`, with Rust's `as` semantics.
pub fn cast(from: Scalar, to: Scalar, a: Literal) -> Result<Literal, Error> {
    if to == Scalar::Bool {
        return match from {
            Scalar::Bool => Ok(a),
            _ => Err(Error::new(format!(
                "{} cannot be cast to bool: compare with zero instead",
                from.name()
            ))),
        };
    }
    if from == Scalar::Bool {
        let v = decode_bool(a)? as i128;
        return if to.is_float() {
            Ok(Literal::Float(v as f64))
        } else {
            encode_int(to, v)
        };
    }
    if from.is_float() {
        let v = decode_float(from, a)?;
        if to.is_float() {
            return Ok(Literal::Float(round_float(to, v)));
        }
        let (min, max) = int_range(to);
        let saturated = if v.is_nan() {
            0
        } else {
            (v.trunc().clamp(min as f64, max as f64)) as i128
        };
        return encode_int(to, saturated.clamp(min, max));
    }
    let v = decode_int(from, a)?;
    match to {
        Scalar::F32 => Ok(Literal::Float(v as f32 as f64)),
        Scalar::F64 => Ok(Literal::Float(v as f64)),
        Scalar::F16 | Scalar::Bf16 => Ok(Literal::Float(int_to_half(to, v))),
        _ => encode_int(to, wrap_int(to, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Expr, ExprKind};

    fn int(ty: Scalar, v: i64) -> Expr {
        Expr::literal(ty, Literal::Int(v))
    }

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }

    fn run(e: &Expr) -> Result<Literal, Error> {
        eval(e, &[], &[])
    }

    #[test]
    fn integer_arithmetic_is_exact_for_the_type() {
        assert_eq!(
            run(&bin(
                BinaryOp::Add,
                int(Scalar::U32, 7),
                int(Scalar::U32, 5)
            )),
            Ok(Literal::Int(12))
        );
        assert_eq!(
            run(&bin(
                BinaryOp::Div,
                int(Scalar::I32, -7),
                int(Scalar::I32, 2)
            )),
            Ok(Literal::Int(-3))
        );
        assert_eq!(
            run(&bin(
                BinaryOp::Rem,
                int(Scalar::I32, -7),
                int(Scalar::I32, 2)
            )),
            Ok(Literal::Int(-1))
        );
        assert_eq!(
            run(&bin(
                BinaryOp::Add,
                int(Scalar::U64, -2),
                int(Scalar::U64, 1)
            )),
            Ok(Literal::Int(-1)),
            "u64::MAX is stored as the bits -1"
        );
    }

    #[test]
    fn overflow_is_an_error_naming_the_operation() {
        let e = run(&bin(
            BinaryOp::Mul,
            int(Scalar::U32, 65536),
            int(Scalar::U32, 65536),
        ))
        .unwrap_err();
        assert_eq!(e.message, "`65536 * 65536` overflows u32");
        let e = run(&bin(
            BinaryOp::Sub,
            int(Scalar::U32, 1),
            int(Scalar::U32, 2),
        ))
        .unwrap_err();
        assert_eq!(e.message, "`1 - 2` overflows u32");
        let e = run(&bin(
            BinaryOp::Div,
            int(Scalar::I32, i32::MIN as i64),
            int(Scalar::I32, -1),
        ))
        .unwrap_err();
        assert_eq!(e.message, "`-2147483648 / -1` overflows i32");
        let e = run(&bin(
            BinaryOp::Rem,
            int(Scalar::I8, -128),
            int(Scalar::I8, -1),
        ))
        .unwrap_err();
        assert_eq!(e.message, "`-128 % -1` overflows i8");
        let neg = Expr {
            ty: Scalar::I8,
            kind: ExprKind::Unary(UnaryOp::Neg, Box::new(int(Scalar::I8, -128))),
        };
        assert_eq!(run(&neg).unwrap_err().message, "`-(-128)` overflows i8");
    }

    #[test]
    fn division_by_zero_and_wide_shifts_are_errors() {
        let e = run(&bin(
            BinaryOp::Rem,
            int(Scalar::U32, 1),
            int(Scalar::U32, 0),
        ))
        .unwrap_err();
        assert_eq!(e.message, "`1 % 0`: division by zero");
        let e = run(&bin(BinaryOp::Shl, int(Scalar::U8, 1), int(Scalar::U32, 8))).unwrap_err();
        assert_eq!(
            e.message,
            "`1 << 8`: shift amount out of range for u8 (must be below 8)"
        );
        assert_eq!(
            run(&bin(
                BinaryOp::Shl,
                int(Scalar::U8, 0x81),
                int(Scalar::U32, 1)
            )),
            Ok(Literal::Int(2))
        );
        assert_eq!(
            run(&bin(
                BinaryOp::Shr,
                int(Scalar::I32, -8),
                int(Scalar::U32, 1)
            )),
            Ok(Literal::Int(-4))
        );
    }

    #[test]
    fn casts_follow_rust_as() {
        assert_eq!(
            cast(Scalar::I32, Scalar::U8, Literal::Int(-1)),
            Ok(Literal::Int(255))
        );
        assert_eq!(
            cast(Scalar::U32, Scalar::I32, Literal::Int(0xFFFF_FFFF)),
            Ok(Literal::Int(-1))
        );
        assert_eq!(
            cast(Scalar::I32, Scalar::U64, Literal::Int(-1)),
            Ok(Literal::Int(-1))
        );
        assert_eq!(
            cast(Scalar::F32, Scalar::U8, Literal::Float(300.5)),
            Ok(Literal::Int(255))
        );
        assert_eq!(
            cast(Scalar::F32, Scalar::I32, Literal::Float(f64::NAN)),
            Ok(Literal::Int(0))
        );
        assert_eq!(
            cast(Scalar::F64, Scalar::I32, Literal::Float(-2.9)),
            Ok(Literal::Int(-2))
        );
        assert_eq!(
            cast(Scalar::F64, Scalar::U64, Literal::Float(1e30)),
            Ok(Literal::Int(-1))
        );
        assert_eq!(
            cast(Scalar::F64, Scalar::F32, Literal::Float(0.1)),
            Ok(Literal::Float(0.1f32 as f64))
        );
        assert_eq!(
            cast(Scalar::F32, Scalar::F16, Literal::Float(65520.0)),
            Ok(Literal::Float(f64::INFINITY))
        );
        assert_eq!(
            cast(Scalar::Bool, Scalar::F32, Literal::Bool(true)),
            Ok(Literal::Float(1.0))
        );
        assert!(cast(Scalar::I32, Scalar::Bool, Literal::Int(1))
            .unwrap_err()
            .message
            .contains("compare with zero"));
    }

    #[test]
    fn floats_round_to_their_type() {
        let third = bin(
            BinaryOp::Div,
            Expr::literal(Scalar::F32, Literal::Float(1.0)),
            Expr::literal(Scalar::F32, Literal::Float(3.0)),
        );
        assert_eq!(run(&third), Ok(Literal::Float((1.0f32 / 3.0) as f64)));
        let sum = bin(
            BinaryOp::Add,
            Expr::literal(Scalar::Bf16, Literal::Float(256.0)),
            Expr::literal(Scalar::Bf16, Literal::Float(1.0)),
        );
        assert_eq!(
            run(&sum),
            Ok(Literal::Float(256.0)),
            "bf16 has 8 significand bits"
        );
    }

    /// `(1 + 2^-11 + 2^-40) as f16` is above the tie between 1 and
    /// 1 + 2^-10, so it rounds up (as `cvt.rn.f16.f64` does); rounding to
    /// f32 first makes it the tie, which goes to the even 1.0. The same
    /// for bf16 one step below (1 + 2^-8 + 2^-40), where cutting the low
    /// half of the f64 loses the 2^-40.
    #[test]
    fn f64_rounds_to_16_bits_in_one_step() {
        let above_tie = |bits: i32| 1.0 + 2f64.powi(-bits) + 2f64.powi(-40);
        assert_eq!(
            cast(Scalar::F64, Scalar::F16, Literal::Float(above_tie(11))),
            Ok(Literal::Float(1.0 + 2f64.powi(-10)))
        );
        assert_eq!(
            cast(Scalar::F64, Scalar::Bf16, Literal::Float(above_tie(8))),
            Ok(Literal::Float(1.0 + 2f64.powi(-7)))
        );
        // Folded: the f64 sum is exact, the cast rounds once.
        let folded = |ty: Scalar, bits: i32| {
            let sum = bin(
                BinaryOp::Add,
                bin(
                    BinaryOp::Add,
                    Expr::literal(Scalar::F64, Literal::Float(1.0)),
                    Expr::literal(Scalar::F64, Literal::Float(2f64.powi(-bits))),
                ),
                Expr::literal(Scalar::F64, Literal::Float(2f64.powi(-40))),
            );
            run(&Expr {
                ty,
                kind: ExprKind::Cast(Box::new(sum)),
            })
        };
        assert_eq!(
            folded(Scalar::F16, 11),
            Ok(Literal::Float(1.0 + 2f64.powi(-10)))
        );
        assert_eq!(
            folded(Scalar::Bf16, 8),
            Ok(Literal::Float(1.0 + 2f64.powi(-7)))
        );
    }

    /// Round-to-nearest-even to f16 and bf16 at the edges of each format:
    /// ties, the largest finite values and the overflow past them, the
    /// subnormals and the underflow below them, zeros, infinities, NaN.
    #[test]
    fn rounding_to_16_bits_at_the_edges() {
        let p = |e: i32| 2f64.powi(e);
        let f16_cases: &[(f64, u16)] = &[
            (1.0, 0x3c00),
            (-2.5, 0xc100),
            // Ties go to the even neighbour, down or up.
            (1.0 + p(-11), 0x3c00),
            (1.0 + 3.0 * p(-11), 0x3c02),
            (-(1.0 + p(-11)), 0xbc00),
            // Off a tie by the last bit of an f64.
            (1.0 + p(-11) + p(-52), 0x3c01),
            (1.0 + p(-11) - p(-52), 0x3c00),
            // The largest finite f16, and past it: 65520 is the tie with
            // 2^16, whose even side is infinity.
            (65504.0, 0x7bff),
            (65519.99, 0x7bff),
            (65520.0, 0x7c00),
            (-65520.0, 0xfc00),
            (1e300, 0x7c00),
            (f64::MAX, 0x7c00),
            (f64::INFINITY, 0x7c00),
            (f64::NEG_INFINITY, 0xfc00),
            // The smallest normal, the subnormals, and ties among them.
            (p(-14), 0x0400),
            (p(-14) - p(-25), 0x0400),
            (p(-14) - p(-24), 0x03ff),
            (p(-24), 0x0001),
            (3.0 * p(-25), 0x0002),
            (p(-25), 0x0000),
            (p(-25) + p(-77), 0x0001),
            (-p(-25), 0x8000),
            (p(-26), 0x0000),
            (f64::from_bits(1), 0x0000),
            (-f64::from_bits(1), 0x8000),
            (0.0, 0x0000),
            (-0.0, 0x8000),
        ];
        for &(v, bits) in f16_cases {
            let got = f16_from_f64(v).to_bits();
            assert_eq!(got, bits, "{v:e} as f16: {got:#06x}, want {bits:#06x}");
        }
        let bf16_cases: &[(f64, u16)] = &[
            (1.0, 0x3f80),
            (1.0 + p(-8), 0x3f80),
            (1.0 + 3.0 * p(-8), 0x3f82),
            (1.0 + p(-8) + p(-40), 0x3f81),
            (1.0 + p(-8) - p(-52), 0x3f80),
            (-(1.0 + p(-8) + p(-52)), 0xbf81),
            // The largest finite bf16; f32::MAX is past its tie with 2^128.
            ((2.0 - p(-7)) * p(127), 0x7f7f),
            ((2.0 - p(-8)) * p(127), 0x7f80),
            ((2.0 - p(-8) - p(-40)) * p(127), 0x7f7f),
            (f32::MAX as f64, 0x7f80),
            (-1e300, 0xff80),
            (f64::INFINITY, 0x7f80),
            (p(-126), 0x0080),
            (p(-133), 0x0001),
            (p(-134), 0x0000),
            (3.0 * p(-134), 0x0002),
            (p(-134) + p(-186), 0x0001),
            (-p(-135), 0x8000),
            (f64::from_bits(1), 0x0000),
            (-0.0, 0x8000),
        ];
        for &(v, bits) in bf16_cases {
            let got = bf16_from_f64(v).to_bits();
            assert_eq!(got, bits, "{v:e} as bf16: {got:#06x}, want {bits:#06x}");
        }
        // NaN stays NaN, quiet, with its sign and the top of its payload.
        assert_eq!(f16_from_f64(f64::NAN).to_bits(), 0x7e00);
        assert_eq!(f16_from_f64(-f64::NAN).to_bits(), 0xfe00);
        assert_eq!(bf16_from_f64(f64::NAN).to_bits(), 0x7fc0);
        let signalling = f64::from_bits(0x7ff0_0000_0000_0001);
        assert_eq!(f16_from_f64(signalling).to_bits(), 0x7e00);
        let payload = f64::from_bits(0x7ff4_0000_0000_0000);
        assert_eq!(f16_from_f64(payload).to_bits(), 0x7f00);
        assert_eq!(bf16_from_f64(payload).to_bits(), 0x7fe0);
        // Through constant folding and `as`, from f64 and from integers:
        // 2^60 + 2^52 + 1 is above the bf16 tie 2^60 + 2^52, which an f64
        // (53 bits) would round onto.
        assert_eq!(
            cast(Scalar::F64, Scalar::F16, Literal::Float(65520.0)),
            Ok(Literal::Float(f64::INFINITY))
        );
        assert_eq!(
            cast(
                Scalar::I64,
                Scalar::Bf16,
                Literal::Int((1 << 60) + (1 << 52) + 1)
            ),
            Ok(Literal::Float(p(60) + p(53)))
        );
        assert_eq!(
            cast(
                Scalar::I64,
                Scalar::Bf16,
                Literal::Int(-(1 << 60) - (1 << 52))
            ),
            Ok(Literal::Float(-p(60)))
        );
        assert_eq!(
            cast(Scalar::U64, Scalar::F16, Literal::Int(-1)),
            Ok(Literal::Float(f64::INFINITY))
        );
        assert_eq!(
            cast(Scalar::I32, Scalar::F16, Literal::Int(2049)),
            Ok(Literal::Float(2048.0))
        );
        assert_eq!(
            cast(Scalar::I32, Scalar::F16, Literal::Int(2051)),
            Ok(Literal::Float(2052.0))
        );
    }

    /// An f64 rounded to odd in f32 (truncated, the last bit set when
    /// inexact) rounds correctly to f16 and bf16 through `half`'s f32
    /// conversion, which is correct: an independent reference.
    fn round_to_odd_f32(v: f64) -> f32 {
        let mut f = v as f32;
        if (f as f64).abs() > v.abs() {
            f = f32::from_bits(f.to_bits() - 1);
        }
        if f as f64 != v {
            f = f32::from_bits(f.to_bits() | 1);
        }
        f
    }

    #[test]
    fn rounding_to_16_bits_agrees_with_rounding_to_odd_through_f32() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let check = |v: f64| {
            if v.is_nan() {
                return;
            }
            let odd = round_to_odd_f32(v);
            assert_eq!(
                f16_from_f64(v).to_bits(),
                half::f16::from_f32(odd).to_bits(),
                "{v:e} ({:#018x}) as f16",
                v.to_bits()
            );
            assert_eq!(
                bf16_from_f64(v).to_bits(),
                half::bf16::from_f32(odd).to_bits(),
                "{v:e} ({:#018x}) as bf16",
                v.to_bits()
            );
        };
        for _ in 0..200_000 {
            // Exponents from below the bf16 subnormals to past f32's range.
            let r = next();
            let exponent = 1023 - 160 + (r >> 52) % 300;
            let bits = (r & (1 << 63)) | exponent << 52 | (next() & ((1 << 52) - 1));
            check(f64::from_bits(bits));
        }
        for _ in 0..100_000 {
            // Ties of both formats, and their f64 neighbours.
            let r = next();
            let exponent = 1023 - 140 + (r >> 52) % 270;
            let tie_f16 = (r & 0x3ff) << 42 | 1 << 41;
            let tie_bf16 = (r & 0x7f) << 45 | 1 << 44;
            for fraction in [tie_f16, tie_bf16] {
                let bits = (r & (1 << 63)) | exponent << 52 | fraction;
                for delta in [-1i64, 0, 1] {
                    check(f64::from_bits((bits as i64 + delta) as u64));
                }
            }
        }
        // Every f32 near the f16 range, and a sample of all the others.
        for bits in (0x3000_0000u32..0x4800_0000).step_by(61) {
            check(f32::from_bits(bits) as f64);
            check(-f32::from_bits(bits) as f64);
        }
        for bits in (0..=u32::MAX).step_by(40_009) {
            check(f32::from_bits(bits) as f64);
        }
        // Integers, which round from the integer itself.
        for _ in 0..100_000 {
            let v = next() as i64 >> (next() % 64);
            for ty in [Scalar::F16, Scalar::Bf16] {
                let nearest = v as f32;
                let odd = if nearest as i128 == v as i128 {
                    nearest
                } else {
                    let toward_zero = if (nearest as i128).abs() > (v as i128).abs() {
                        f32::from_bits(nearest.to_bits() - 1)
                    } else {
                        nearest
                    };
                    f32::from_bits(toward_zero.to_bits() | 1)
                };
                let want = if ty == Scalar::F16 {
                    half::f16::from_f32(odd).to_f64()
                } else {
                    half::bf16::from_f32(odd).to_f64()
                };
                assert_eq!(int_to_half(ty, v as i128), want, "{v} as {}", ty.name());
            }
        }
    }

    #[test]
    fn host_values_and_short_circuit() {
        let len = Expr {
            ty: Scalar::U32,
            kind: ExprKind::Len(1),
        };
        let param = Expr {
            ty: Scalar::U32,
            kind: ExprKind::Param(0),
        };
        let params = [
            HostValue::Scalar(Literal::Int(4)),
            HostValue::Slice { len: 16 },
        ];
        let cond = bin(
            BinaryOp::Ge,
            len.clone(),
            bin(BinaryOp::Mul, param, int(Scalar::U32, 4)),
        );
        assert_eq!(eval(&cond, &[], &params), Ok(Literal::Bool(true)));
        let huge = [params[0], HostValue::Slice { len: 1 << 33 }];
        let e = eval(&len, &[], &huge).unwrap_err();
        assert!(
            e.message.contains("more than `.len()` (a u32) can count"),
            "{}",
            e.message
        );
        // The right operand would divide by zero: it must not be evaluated.
        let guarded = Expr {
            ty: Scalar::Bool,
            kind: ExprKind::Binary(
                BinaryOp::LogicalAnd,
                Box::new(Expr::literal(Scalar::Bool, Literal::Bool(false))),
                Box::new(bin(
                    BinaryOp::Eq,
                    bin(BinaryOp::Div, int(Scalar::U32, 1), int(Scalar::U32, 0)),
                    int(Scalar::U32, 0),
                )),
            ),
        };
        assert_eq!(run(&guarded), Ok(Literal::Bool(false)));
        let konst = Expr {
            ty: Scalar::U32,
            kind: ExprKind::Const(0),
        };
        assert_eq!(eval(&konst, &[64], &[]), Ok(Literal::Int(64)));
        assert!(run(&konst).unwrap_err().message.contains("has no value"));
    }

    /// `cast` against Rust's own `as` for every pair of the types Rust has
    /// natively, over edge values of each source type.
    #[test]
    fn casts_agree_with_rust_as() {
        macro_rules! check_from {
            ($from:ty, $scalar:expr, $values:expr, $lit:expr) => {
                for v in $values {
                    let lit = $lit(v);
                    let expect = [
                        (Scalar::I8, Literal::Int(v as i8 as i64)),
                        (Scalar::U8, Literal::Int(v as u8 as i64)),
                        (Scalar::I32, Literal::Int(v as i32 as i64)),
                        (Scalar::U32, Literal::Int(v as u32 as i64)),
                        (Scalar::I64, Literal::Int(v as i64)),
                        (Scalar::U64, Literal::Int(v as u64 as i64)),
                        (Scalar::F32, Literal::Float(v as f32 as f64)),
                        (Scalar::F64, Literal::Float(v as f64)),
                    ];
                    for (to, want) in expect {
                        let got = cast($scalar, to, lit).unwrap();
                        let same = match (got, want) {
                            (Literal::Float(a), Literal::Float(b)) => {
                                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                            }
                            _ => got == want,
                        };
                        assert!(
                            same,
                            "{} {v:?} as {}: got {got:?}, Rust gives {want:?}",
                            stringify!($from),
                            to.name()
                        );
                    }
                }
            };
        }
        let int = |v: i64| Literal::Int(v);
        check_from!(i8, Scalar::I8, [i8::MIN, -1, 0, 1, i8::MAX], |v: i8| int(
            v as i64
        ));
        check_from!(
            u8,
            Scalar::U8,
            [0u8, 1, 200, u8::MAX],
            |v: u8| int(v as i64)
        );
        check_from!(
            i32,
            Scalar::I32,
            [i32::MIN, -1, 0, 16_777_217, 33_554_435, i32::MAX],
            |v: i32| int(v as i64)
        );
        check_from!(
            u32,
            Scalar::U32,
            [0u32, 16_777_217, 3_000_000_000, u32::MAX],
            |v: u32| int(v as i64)
        );
        check_from!(
            i64,
            Scalar::I64,
            [i64::MIN, -1, (1 << 53) + 1, 0x7fff_ffc0_0000_0001, i64::MAX],
            int
        );
        check_from!(
            u64,
            Scalar::U64,
            [0u64, (1 << 53) + 1, 1 << 63, u64::MAX],
            |v: u64| int(v as i64)
        );
        let float = |v: f32| Literal::Float(v as f64);
        check_from!(
            f32,
            Scalar::F32,
            [
                0.5f32,
                -2.5,
                255.9,
                -128.9,
                3e38,
                1e10,
                -1e10,
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                4294967296.0
            ],
            float
        );
        let double = |v: f64| Literal::Float(v);
        check_from!(
            f64,
            Scalar::F64,
            [
                0.5f64,
                -2.5,
                1e300,
                -1e300,
                5e-324,
                f64::NAN,
                9.3e18,
                -9.3e18,
                1.0 + 2f64.powi(-24) + 2f64.powi(-50)
            ],
            double
        );
    }
}
