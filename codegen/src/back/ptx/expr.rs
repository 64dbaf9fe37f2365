//! Expressions. Each yields an [`Operand`]: a fresh register, a local's
//! register, or an immediate.
//!
//! Value conventions:
//! - i8/u8 live in 32-bit registers, kept sign-/zero-extended: results that
//!   can leave the 8-bit range are re-extended from their low byte, which
//!   is the wrapping of Rust's release builds.
//! - f16/bf16 arithmetic and comparisons widen to f32, compute, and round
//!   back once with `cvt.rn`. For `+ - * /` (and `sqrt`) this equals the
//!   correctly rounded 16-bit result: f32 has 24 significand bits, at least
//!   2p+2 for p = 11 (f16) and p = 8 (bf16), so the double rounding is
//!   innocuous (Figueroa, "When is double rounding innocuous?", 1995).
//! - Integer overflow wraps and division by zero gives PTX's unspecified
//!   value: there is no panic on the device.
//! - Shift amounts are masked to the bit width (`wrapping_shl`/`wrapping_shr`,
//!   what Rust's release builds do), instead of PTX's clamping.

use super::features::Feature;
use super::function::{arith, is_half, Emitter, Operand, ParamRegs};
use super::regs::{Reg, RegClass};
use crate::eval::binary_op_text;
use crate::ir::{Axis, BinaryOp, Expr, ExprKind, Scalar, Special, UnaryOp};
use crate::Error;

impl Emitter<'_> {
    pub fn expr(&mut self, e: &Expr) -> Result<Operand, Error> {
        match &e.kind {
            ExprKind::Literal(lit) => Ok(self.literal(e.ty, *lit)),
            ExprKind::Param(id) => match self.params[*id as usize] {
                ParamRegs::Scalar(r) => Ok(Operand::Reg(r)),
                _ => Err(self.error(format!("parameter #{id} is not a loaded scalar"))),
            },
            ExprKind::Len(id) => match self.params[*id as usize] {
                ParamRegs::Slice { len: Some(r), .. } => Ok(Operand::Reg(r)),
                _ => Err(self.error(format!("the length of parameter #{id} was not loaded"))),
            },
            ExprKind::Const(_) => {
                Err(self.error("a const param is left: specialize the kernel before emitting it"))
            }
            ExprKind::Load(place) => self.load(place),
            ExprKind::Unary(op, a) => {
                let x = self.expr(a)?;
                self.unary(*op, e.ty, x)
            }
            ExprKind::Binary(op @ (BinaryOp::LogicalAnd | BinaryOp::LogicalOr), a, b) => {
                self.short_circuit(*op, a, b)
            }
            ExprKind::Binary(op, a, b) => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                if op.is_comparison() {
                    self.compare(*op, a.ty, x, y)
                } else {
                    self.arithmetic(*op, a.ty, x, y)
                }
            }
            ExprKind::Cast(a) => {
                let x = self.expr(a)?;
                self.cast(a.ty, e.ty, x)
            }
            ExprKind::Select(c, a, b) => {
                let p = self.expr(c)?;
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                Ok(Operand::Reg(self.select(e.ty, p, x, y)))
            }
            ExprKind::Special(s) => {
                if *s == Special::ClusterRank {
                    self.require(Feature::Cluster)?;
                }
                let r = self.fresh(Scalar::U32);
                self.ins(format!("mov.u32 {r}, {}", special_register(*s)));
                Ok(Operand::Reg(r))
            }
            ExprKind::Call(f, args) => self.call(*f, args, e.ty),
            ExprKind::Atomic {
                op,
                place,
                value,
                compare,
            } => self.atomic(*op, place, value, compare.as_deref()),
        }
    }

    /// Re-extends an i8/u8 result from its low byte (no-op for other types).
    fn normalize(&mut self, ty: Scalar, r: Reg) -> Reg {
        match ty {
            Scalar::I8 => {
                let n = self.fresh(ty);
                self.ins(format!("cvt.s32.s8 {n}, {r}"));
                n
            }
            Scalar::U8 => {
                let n = self.fresh(ty);
                self.ins(format!("cvt.u32.u8 {n}, {r}"));
                n
            }
            _ => r,
        }
    }

    /// An f16/bf16 value widened to f32 (exact); other values unchanged.
    pub fn widen(&mut self, ty: Scalar, x: Operand) -> Result<Operand, Error> {
        let from = match ty {
            Scalar::F16 => "f16",
            Scalar::Bf16 => {
                self.require(Feature::Bf16ToF32)?;
                "bf16"
            }
            _ => return Ok(x),
        };
        let r = self.fresh(Scalar::F32);
        self.ins(format!("cvt.f32.{from} {r}, {x}"));
        Ok(Operand::Reg(r))
    }

    /// An f32 rounded to nearest-even f16/bf16 (`ty`); other types unchanged.
    pub fn narrow(&mut self, ty: Scalar, x: Operand) -> Result<Operand, Error> {
        let to = match ty {
            Scalar::F16 => "f16",
            Scalar::Bf16 => {
                self.require(Feature::F32ToBf16)?;
                "bf16"
            }
            _ => return Ok(x),
        };
        let r = self.fresh(ty);
        self.ins(format!("cvt.rn.{to}.f32 {r}, {x}"));
        Ok(Operand::Reg(r))
    }

    fn unary(&mut self, op: UnaryOp, ty: Scalar, x: Operand) -> Result<Operand, Error> {
        let r = self.fresh(ty);
        match (op, ty) {
            (UnaryOp::Not, Scalar::Bool) => self.ins(format!("not.pred {r}, {x}")),
            (UnaryOp::Not, _) => {
                self.ins(format!(
                    "not.b{} {r}, {x}",
                    if ty.size_bytes() == 8 { 64 } else { 32 }
                ));
                return Ok(Operand::Reg(self.normalize(ty, r)));
            }
            // Flipping the sign bit negates exactly, even on targets without
            // bf16 arithmetic.
            (UnaryOp::Neg, _) if is_half(ty) => self.ins(format!("xor.b16 {r}, {x}, 0x8000")),
            (UnaryOp::Neg, _) => {
                self.ins(format!("neg.{} {r}, {x}", arith(ty)));
                return Ok(Operand::Reg(self.normalize(ty, r)));
            }
        }
        Ok(Operand::Reg(r))
    }

    fn arithmetic(
        &mut self,
        op: BinaryOp,
        ty: Scalar,
        x: Operand,
        y: Operand,
    ) -> Result<Operand, Error> {
        if ty == Scalar::Bool {
            let name = match op {
                BinaryOp::BitAnd => "and",
                BinaryOp::BitOr => "or",
                _ => "xor",
            };
            let r = self.fresh(ty);
            self.ins(format!("{name}.pred {r}, {x}, {y}"));
            return Ok(Operand::Reg(r));
        }
        if ty.is_float() {
            return self.float_arithmetic(op, ty, x, y);
        }
        if let (BinaryOp::Div | BinaryOp::Rem, Operand::Imm(text)) = (op, &y) {
            if let Some(r) = self.unsigned_division_by_constant(op, ty, &x, text) {
                return Ok(Operand::Reg(r));
            }
        }
        let t = arith(ty);
        let bits = if ty.size_bytes() == 8 { 64 } else { 32 };
        let name = match op {
            BinaryOp::Add => format!("add.{t}"),
            BinaryOp::Sub => format!("sub.{t}"),
            BinaryOp::Mul => format!("mul.lo.{t}"),
            BinaryOp::Div => format!("div.{t}"),
            BinaryOp::Rem => format!("rem.{t}"),
            BinaryOp::BitAnd => format!("and.b{bits}"),
            BinaryOp::BitOr => format!("or.b{bits}"),
            BinaryOp::BitXor => format!("xor.b{bits}"),
            BinaryOp::Shl => format!("shl.b{bits}"),
            BinaryOp::Shr => format!("shr.{t}"),
            _ => {
                return Err(self.error(format!(
                    "`{}` is not an arithmetic operator",
                    binary_op_text(op)
                )))
            }
        };
        let y = match op {
            BinaryOp::Shl | BinaryOp::Shr => self.shift_amount(ty, y),
            _ => y,
        };
        let r = self.fresh(ty);
        self.ins(format!("{name} {r}, {x}, {y}"));
        // and/or/xor/shr/rem of extended bytes stay extended.
        let may_leave_range = matches!(
            op,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Shl
        );
        Ok(Operand::Reg(if may_leave_range {
            self.normalize(ty, r)
        } else {
            r
        }))
    }

    /// `x / d` or `x % d` for an unsigned `x` and a constant `d > 0` without
    /// a division: ptxas emits the general division sequence (a float
    /// reciprocal and corrections, about 20 instructions) even for constant
    /// divisors. A power of two is a shift or a mask; other 32-bit divisors
    /// use the multiply-high method (Granlund and Montgomery, "Division by
    /// invariant integers using multiplication", 1994): with
    /// `l = ceil(log2 d)` and `m = floor(2^32 (2^l - d) / d) + 1`,
    /// `t = mulhi(m, x)` and `x / d = (t + ((x - t) >> 1)) >> (l - 1)`,
    /// exact for every 32-bit `x`. `None` leaves the division to `div`/`rem`.
    fn unsigned_division_by_constant(
        &mut self,
        op: BinaryOp,
        ty: Scalar,
        x: &Operand,
        divisor: &str,
    ) -> Option<Reg> {
        if !matches!(ty, Scalar::U8 | Scalar::U32 | Scalar::U64) {
            return None;
        }
        let d: u64 = divisor.parse().ok().filter(|&d| d > 0)?;
        let bits = if ty.size_bytes() == 8 { 64 } else { 32 };
        if d.is_power_of_two() {
            let r = self.fresh(ty);
            if op == BinaryOp::Div {
                self.ins(format!("shr.u{bits} {r}, {x}, {}", d.trailing_zeros()));
            } else {
                self.ins(format!("and.b{bits} {r}, {x}, {}", d - 1));
            }
            return Some(r);
        }
        if bits == 64 || d > u32::MAX as u64 {
            return None;
        }
        let (m, shift) = division_magic(d as u32);
        let x = self.in_reg(x.clone(), ty);
        let t = self.fresh(ty);
        self.ins(format!("mul.hi.u32 {t}, {x}, {m}"));
        let diff = self.fresh(ty);
        self.ins(format!("sub.u32 {diff}, {x}, {t}"));
        let half = self.fresh(ty);
        self.ins(format!("shr.u32 {half}, {diff}, 1"));
        let sum = self.fresh(ty);
        self.ins(format!("add.u32 {sum}, {t}, {half}"));
        let q = self.fresh(ty);
        self.ins(format!("shr.u32 {q}, {sum}, {shift}"));
        if op == BinaryOp::Div {
            return Some(q);
        }
        let multiple = self.fresh(ty);
        self.ins(format!("mul.lo.u32 {multiple}, {q}, {d}"));
        let r = self.fresh(ty);
        self.ins(format!("sub.u32 {r}, {x}, {multiple}"));
        Some(r)
    }

    /// The shift amount modulo the bit width of `ty`.
    fn shift_amount(&mut self, ty: Scalar, amount: Operand) -> Operand {
        let mask = ty.size_bytes() * 8 - 1;
        match amount {
            Operand::Imm(v) => {
                Operand::Imm(format!("{}", v.parse::<u64>().unwrap_or(0) & mask as u64))
            }
            Operand::Reg(r) => {
                let m = self.fresh(Scalar::U32);
                self.ins(format!("and.b32 {m}, {r}, {mask}"));
                Operand::Reg(m)
            }
        }
    }

    fn float_arithmetic(
        &mut self,
        op: BinaryOp,
        ty: Scalar,
        x: Operand,
        y: Operand,
    ) -> Result<Operand, Error> {
        if let Some(why) = float_refusal(op, ty) {
            return Err(self.error(why));
        }
        // `.rn` also keeps ptxas from contracting `a * b + c` into an fma,
        // which Rust does not do either.
        let name = match op {
            BinaryOp::Add => "add.rn",
            BinaryOp::Sub => "sub.rn",
            BinaryOp::Mul => "mul.rn",
            BinaryOp::Div => "div.rn",
            _ => {
                return Err(self.error(format!(
                    "`{}` is not defined on {}",
                    binary_op_text(op),
                    ty.name()
                )))
            }
        };
        let x = self.widen(ty, x)?;
        let y = self.widen(ty, y)?;
        let t = arith(ty);
        let r = self.fresh(if ty == Scalar::F64 {
            Scalar::F64
        } else {
            Scalar::F32
        });
        self.ins(format!("{name}.{t} {r}, {x}, {y}"));
        self.narrow(ty, Operand::Reg(r))
    }

    fn compare(
        &mut self,
        op: BinaryOp,
        ty: Scalar,
        x: Operand,
        y: Operand,
    ) -> Result<Operand, Error> {
        let (ty, x, y) = if ty == Scalar::Bool {
            // false < true, as 0 < 1.
            let a = self.select(
                Scalar::U32,
                x,
                Operand::Imm("1".into()),
                Operand::Imm("0".into()),
            );
            let b = self.select(
                Scalar::U32,
                y,
                Operand::Imm("1".into()),
                Operand::Imm("0".into()),
            );
            (Scalar::U32, Operand::Reg(a), Operand::Reg(b))
        } else {
            let x = self.widen(ty, x)?;
            let y = self.widen(ty, y)?;
            (ty, x, y)
        };
        let cmp = match op {
            BinaryOp::Eq => "eq",
            // Rust's `!=` is true when either float is NaN: the unordered form.
            BinaryOp::Ne if ty.is_float() => "neu",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            _ => "ge",
        };
        let x = self.in_reg(x, ty);
        let p = self.fresh(Scalar::Bool);
        self.ins(format!("setp.{cmp}.{} {p}, {x}, {y}", arith(ty)));
        Ok(Operand::Reg(p))
    }

    /// `&&` and `||`: the right operand runs only when the left does not
    /// decide. A right operand that cannot fault or act (no memory reads,
    /// atomics, shuffles or divisions) is computed anyway and combined with
    /// `and.pred`/`or.pred`: no branch, the same result.
    fn short_circuit(&mut self, op: BinaryOp, a: &Expr, b: &Expr) -> Result<Operand, Error> {
        if b.is_speculatable(&self.kernel.locals) {
            let x = self.expr(a)?;
            let y = self.expr(b)?;
            let result = self.fresh(Scalar::Bool);
            let kind = if op == BinaryOp::LogicalAnd {
                "and"
            } else {
                "or"
            };
            self.ins(format!("{kind}.pred {result}, {x}, {y}"));
            return Ok(Operand::Reg(result));
        }
        let n = self.label_id();
        let (kind, skip_if) = if op == BinaryOp::LogicalAnd {
            ("and", "!")
        } else {
            ("or", "")
        };
        let end = format!("${kind}{n}_end");
        let result = self.fresh(Scalar::Bool);
        let x = self.expr(a)?;
        self.mov(result, &x);
        self.ins(format!("@{skip_if}{result} bra {end}"));
        let y = self.expr(b)?;
        self.mov(result, &y);
        self.place_label(&end);
        Ok(Operand::Reg(result))
    }

    /// `cond ? x : y` in a fresh register.
    pub fn select(&mut self, ty: Scalar, cond: Operand, x: Operand, y: Operand) -> Reg {
        let r = self.fresh(ty);
        if ty == Scalar::Bool {
            // selp has no predicate form.
            self.ins(format!("@{cond} mov.pred {r}, {x}"));
            self.ins(format!("@!{cond} mov.pred {r}, {y}"));
        } else {
            let t = match r.class {
                RegClass::F32 => "f32",
                RegClass::F64 => "f64",
                class => class.ptx_type(),
            };
            self.ins(format!("selp.{t} {r}, {x}, {y}, {cond}"));
        }
        r
    }

    /// `x as to`, with Rust's semantics.
    pub fn cast(&mut self, from: Scalar, to: Scalar, x: Operand) -> Result<Operand, Error> {
        if from == to {
            return Ok(x);
        }
        if to == Scalar::Bool {
            return Err(self.error(format!("a {} cannot be cast to bool", from.name())));
        }
        if from == Scalar::Bool {
            if to.is_float() {
                let f = self.select(
                    Scalar::F32,
                    x,
                    Operand::Imm("0f3F800000".into()),
                    Operand::Imm("0f00000000".into()),
                );
                return self.float_cast(Scalar::F32, to, Operand::Reg(f));
            }
            return Ok(Operand::Reg(self.select(
                to,
                x,
                Operand::Imm("1".into()),
                Operand::Imm("0".into()),
            )));
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => Ok(self.int_cast(from, to, x)),
            (false, true) => self.int_to_float(from, to, x),
            (true, false) => self.float_to_int(from, to, x),
            (true, true) => self.float_cast(from, to, x),
        }
    }

    /// Integer to integer: truncate or extend by the source's signedness,
    /// then re-extend 8-bit results.
    fn int_cast(&mut self, from: Scalar, to: Scalar, x: Operand) -> Operand {
        let wide = |t: Scalar| t.size_bytes() == 8;
        let value = match (wide(from), wide(to)) {
            (false, true) => {
                let r = self.fresh(to);
                let ext = if from.is_signed() {
                    "s64.s32"
                } else {
                    "u64.u32"
                };
                self.ins(format!("cvt.{ext} {r}, {x}"));
                Operand::Reg(r)
            }
            (true, false) => {
                let r = self.fresh(to);
                self.ins(format!("cvt.u32.u64 {r}, {x}"));
                Operand::Reg(r)
            }
            _ => x,
        };
        match to {
            Scalar::I8 | Scalar::U8 => {
                let r = self.in_reg(value, to);
                Operand::Reg(self.normalize(to, r))
            }
            _ => value,
        }
    }

    fn int_to_float(&mut self, from: Scalar, to: Scalar, x: Operand) -> Result<Operand, Error> {
        let src = arith(from);
        let direct = match to {
            Scalar::F32 | Scalar::F64 | Scalar::F16 => to.name(),
            // No `cvt.rn.bf16.<int>` before sm_90: 8-bit values are exact in
            // f32; wider ones round to odd in f32 first.
            _ if from.size_bytes() == 1 => {
                let f = self.fresh(Scalar::F32);
                self.ins(format!("cvt.rn.f32.{src} {f}, {x}"));
                return self.narrow(to, Operand::Reg(f));
            }
            _ => {
                let f = self.round_to_odd_f32(from, x);
                return self.narrow(to, Operand::Reg(f));
            }
        };
        let r = self.fresh(to);
        self.ins(format!("cvt.rn.{direct}.{src} {r}, {x}"));
        Ok(Operand::Reg(r))
    }

    /// `x` (an integer of 32 or 64 bits, or an f64) in f32 rounded to odd:
    /// truncated, with the lowest bit set when inexact. Rounding that to a
    /// format with at most 22 significand bits (bf16 has 8) gives the
    /// correctly rounded result, which a detour through a round-to-nearest
    /// f32 would not.
    fn round_to_odd_f32(&mut self, from: Scalar, x: Operand) -> Reg {
        let src = arith(from);
        let truncated = self.fresh(Scalar::F32);
        self.ins(format!("cvt.rz.f32.{src} {truncated}, {x}"));
        let back = self.fresh(from);
        if from.is_float() {
            self.ins(format!("cvt.{src}.f32 {back}, {truncated}"));
        } else {
            self.ins(format!("cvt.rzi.{src}.f32 {back}, {truncated}"));
        }
        let inexact = self.fresh(Scalar::Bool);
        let ne = if from.is_float() { "neu" } else { "ne" };
        self.ins(format!("setp.{ne}.{src} {inexact}, {back}, {x}"));
        let bits = self.fresh(Scalar::U32);
        self.ins(format!("mov.b32 {bits}, {truncated}"));
        let odd = self.fresh(Scalar::U32);
        self.ins(format!("or.b32 {odd}, {bits}, 1"));
        let chosen = self.select(
            Scalar::U32,
            Operand::Reg(inexact),
            Operand::Reg(odd),
            Operand::Reg(bits),
        );
        let r = self.fresh(Scalar::F32);
        self.ins(format!("mov.b32 {r}, {chosen}"));
        r
    }

    /// Float to integer: truncate toward zero, saturate, NaN to 0. PTX's
    /// float-to-integer `cvt` saturates by itself (8-bit targets clamp the
    /// 32-bit result) and gives 0 for NaN, except from f64 or into 64 bits,
    /// where NaN gives `1 << (bits - 1)`: those select 0 explicitly.
    fn float_to_int(&mut self, from: Scalar, to: Scalar, x: Operand) -> Result<Operand, Error> {
        let x = self.widen(from, x)?;
        let src = if from == Scalar::F64 { "f64" } else { "f32" };
        let r = self.fresh(to);
        self.ins(format!("cvt.rzi.{}.{src} {r}, {x}", arith(to)));
        let clamped = match to {
            Scalar::I8 => {
                let lo = self.fresh(to);
                self.ins(format!("max.s32 {lo}, {r}, -128"));
                let hi = self.fresh(to);
                self.ins(format!("min.s32 {hi}, {lo}, 127"));
                hi
            }
            Scalar::U8 => {
                let hi = self.fresh(to);
                self.ins(format!("min.u32 {hi}, {r}, 255"));
                hi
            }
            _ => r,
        };
        if from != Scalar::F64 && to.size_bytes() < 8 {
            return Ok(Operand::Reg(clamped));
        }
        let nan = self.fresh(Scalar::Bool);
        self.ins(format!("setp.nan.{src} {nan}, {x}, {x}"));
        let zero = Operand::Imm("0".into());
        Ok(Operand::Reg(self.select(
            to,
            Operand::Reg(nan),
            zero,
            Operand::Reg(clamped),
        )))
    }

    fn float_cast(&mut self, from: Scalar, to: Scalar, x: Operand) -> Result<Operand, Error> {
        match (from, to) {
            (Scalar::F64, Scalar::Bf16) => {
                let f = self.round_to_odd_f32(from, x);
                self.narrow(to, Operand::Reg(f))
            }
            (Scalar::F64, Scalar::F32 | Scalar::F16) | (Scalar::F32 | Scalar::F16, Scalar::F64) => {
                let r = self.fresh(to);
                let rounding = if to == Scalar::F64 { "" } else { ".rn" };
                self.ins(format!(
                    "cvt{rounding}.{}.{} {r}, {x}",
                    to.name(),
                    from.name()
                ));
                Ok(Operand::Reg(r))
            }
            // Through f32, exactly: widening is exact, so only the last step rounds.
            _ => {
                let f = self.widen(from, x)?;
                if to == Scalar::F64 {
                    return self.float_cast(Scalar::F32, Scalar::F64, f);
                }
                self.narrow(to, f)
            }
        }
    }
}

fn special_register(s: Special) -> String {
    let axis = |a: Axis| match a {
        Axis::X => "x",
        Axis::Y => "y",
        Axis::Z => "z",
    };
    match s {
        Special::ThreadIdx(a) => format!("%tid.{}", axis(a)),
        Special::BlockIdx(a) => format!("%ctaid.{}", axis(a)),
        Special::BlockDim(a) => format!("%ntid.{}", axis(a)),
        Special::GridDim(a) => format!("%nctaid.{}", axis(a)),
        Special::LaneId => "%laneid".into(),
        Special::ClusterRank => "%cluster_ctarank".into(),
    }
}

/// The multiplier `m` and final shift `l - 1` of unsigned 32-bit division by
/// a constant `d` that is not a power of two (see
/// `unsigned_division_by_constant`).
fn division_magic(d: u32) -> (u32, u32) {
    let l = 32 - (d - 1).leading_zeros();
    let m = ((1u64 << 32) * ((1u64 << l) - d as u64) / d as u64 + 1) as u32;
    (m, l - 1)
}

/// Why PTX has no instruction for the float operator `op` on `ty`, when it
/// has none: the remainder, which WGSL has. The validator refuses it in a
/// kernel built for PTX, at the kernel (`valid/targets/ptx.rs`).
pub(crate) fn float_refusal(op: BinaryOp, ty: Scalar) -> Option<String> {
    (op == BinaryOp::Rem && ty.is_float()).then(|| {
        format!(
            "`%` on {} (the floating-point remainder) is not available on PTX targets: \
             compute it with `a - b * (a / b).floor()` (adjust the sign as needed)",
            ty.name()
        )
    })
}

#[cfg(test)]
mod division_tests {
    use super::division_magic;

    /// The emitted sequence, in Rust.
    fn divide(x: u32, d: u32) -> u32 {
        let (m, shift) = division_magic(d);
        let t = ((x as u64 * m as u64) >> 32) as u32;
        (t + ((x - t) >> 1)) >> shift
    }

    #[test]
    fn multiply_high_division_is_exact() {
        let divisors = (3..2000u32)
            .chain([
                641,
                6700417,
                0x7fff_ffff,
                0x8000_0001,
                u32::MAX - 1,
                u32::MAX,
            ])
            .filter(|d| !d.is_power_of_two());
        for d in divisors {
            let mut xs: Vec<u32> = vec![
                0,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                u32::MAX,
                u32::MAX - 1,
                u32::MAX / 2,
            ];
            xs.extend((0..64u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ d.rotate_left(i)));
            xs.extend((1..32u32).map(|q| q.saturating_mul(d).wrapping_sub(1)));
            for x in xs {
                assert_eq!(divide(x, d), x / d, "{x} / {d}");
            }
        }
    }
}
