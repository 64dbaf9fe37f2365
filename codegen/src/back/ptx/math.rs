//! Intrinsics: math on f32/f64 (f16/bf16 through f32), integer abs/min/max,
//! and warp shuffles.
//!
//! Accuracy: `sqrt` and `mul_add` are correctly rounded; `rsqrt`, `exp`,
//! `exp2`, `ln`, `log2`, `sin`, `cos` and `tanh` use the hardware's
//! approximate instructions (`ex2` flushes subnormals to zero; `sin`/`cos`
//! lose accuracy far from zero), like CUDA's fast-math intrinsics. f64 has
//! no approximate transcendental instructions: those are an error.

use super::features::Feature;
use super::function::{arith, is_half, Emitter, Operand};
use super::regs::Reg;
use crate::ir::{Expr, Intrinsic, Scalar};
use crate::valid::intrinsic_name;
use crate::Error;

/// log2(e), ln(2) and 2*log2(e) as f32 immediates.
const LOG2_E: &str = "0f3FB8AA3B";
const LN_2: &str = "0f3F317218";
const TWO_LOG2_E: &str = "0f4038AA3B";

impl Emitter<'_> {
    pub fn call(&mut self, f: Intrinsic, args: &[Expr], ty: Scalar) -> Result<Operand, Error> {
        if matches!(f, Intrinsic::ShflXor | Intrinsic::ShflDown) {
            return self.shuffle(f, args, ty);
        }
        if matches!(
            f,
            Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 | Intrinsic::ToTf32
        ) {
            return self.operand_word(f, args);
        }
        if matches!(f, Intrinsic::FromBits | Intrinsic::ToBits) {
            // f32 and u32 values live in the same `.b32` registers: the bits are
            // the value already. An immediate is written in the result's form:
            // ptxas refuses `mov.f32 %f, 0` (an integer for an f32) and the reverse.
            return Ok(match self.expr(&args[0])? {
                Operand::Imm(imm) => Operand::Imm(reinterpret_immediate(f, &imm)?),
                reg => reg,
            });
        }
        let mut xs = Vec::with_capacity(args.len());
        for a in args {
            xs.push(self.expr(a)?);
        }
        if ty.is_int() {
            return self.int_intrinsic(f, ty, &xs);
        }
        if is_half(ty) {
            return self.half_intrinsic(f, ty, xs);
        }
        Ok(Operand::Reg(self.float_intrinsic(f, ty, &xs)?))
    }

    fn int_intrinsic(
        &mut self,
        f: Intrinsic,
        ty: Scalar,
        xs: &[Operand],
    ) -> Result<Operand, Error> {
        let t = arith(ty);
        let r = self.fresh(ty);
        match f {
            Intrinsic::Abs => {
                self.ins(format!("abs.{t} {r}, {}", xs[0]));
                // |i8::MIN| wraps back to i8::MIN, as in Rust's release builds.
                if ty == Scalar::I8 {
                    let n = self.fresh(ty);
                    self.ins(format!("cvt.s32.s8 {n}, {r}"));
                    return Ok(Operand::Reg(n));
                }
            }
            Intrinsic::Min | Intrinsic::Max => {
                let name = if f == Intrinsic::Min { "min" } else { "max" };
                self.ins(format!("{name}.{t} {r}, {}, {}", xs[0], xs[1]));
            }
            _ => return Err(self.error(format!("`{f:?}` is not defined on {}", ty.name()))),
        }
        Ok(Operand::Reg(r))
    }

    fn half_intrinsic(
        &mut self,
        f: Intrinsic,
        ty: Scalar,
        xs: Vec<Operand>,
    ) -> Result<Operand, Error> {
        match f {
            // Clearing the sign bit is exact on any target.
            Intrinsic::Abs => {
                let r = self.fresh(ty);
                self.ins(format!("and.b16 {r}, {}, 0x7FFF", xs[0]));
                Ok(Operand::Reg(r))
            }
            // A single rounding needs the native 16-bit fma (an f32 fma
            // rounded again to 16 bits could round twice).
            Intrinsic::MulAdd => {
                let t = if ty == Scalar::Bf16 {
                    self.require(Feature::FmaBf16)?;
                    "bf16"
                } else {
                    "f16"
                };
                let ops: Vec<_> = xs.into_iter().map(|x| self.in_reg(x, ty)).collect();
                let r = self.fresh(ty);
                self.ins(format!(
                    "fma.rn.{t} {r}, {}, {}, {}",
                    ops[0], ops[1], ops[2]
                ));
                Ok(Operand::Reg(r))
            }
            _ => {
                let mut wide = Vec::with_capacity(xs.len());
                for x in xs {
                    wide.push(self.widen(ty, x)?);
                }
                let r = self.float_intrinsic(f, Scalar::F32, &wide)?;
                self.narrow(ty, Operand::Reg(r))
            }
        }
    }

    /// `f` on f32 or f64 operands.
    fn float_intrinsic(&mut self, f: Intrinsic, ty: Scalar, xs: &[Operand]) -> Result<Reg, Error> {
        let t = arith(ty);
        let r = self.fresh(ty);
        let x = &xs[0];
        match f {
            Intrinsic::Sqrt => self.ins(format!("sqrt.rn.{t} {r}, {x}")),
            Intrinsic::Rsqrt => self.ins(format!("rsqrt.approx.{t} {r}, {x}")),
            Intrinsic::Abs => self.ins(format!("abs.{t} {r}, {x}")),
            Intrinsic::Min => self.ins(format!("min.{t} {r}, {x}, {}", xs[1])),
            Intrinsic::Max => self.ins(format!("max.{t} {r}, {x}, {}", xs[1])),
            Intrinsic::MulAdd => self.ins(format!("fma.rn.{t} {r}, {x}, {}, {}", xs[1], xs[2])),
            Intrinsic::Floor => self.ins(format!("cvt.rmi.{t}.{t} {r}, {x}")),
            Intrinsic::Ceil => self.ins(format!("cvt.rpi.{t}.{t} {r}, {x}")),
            Intrinsic::Round => return Ok(self.round_half_away(ty, x)),
            _ if ty == Scalar::F64 => {
                return Err(self.error(format!(
                "`{}` on f64 is not available on PTX targets: cast to f32, e.g. `(x as f32).{}()`",
                intrinsic_name(f),
                intrinsic_name(f)
            )))
            }
            Intrinsic::Exp => {
                let scaled = self.fresh(ty);
                self.ins(format!("mul.f32 {scaled}, {x}, {LOG2_E}"));
                self.ins(format!("ex2.approx.ftz.f32 {r}, {scaled}"));
            }
            Intrinsic::Exp2 => self.ins(format!("ex2.approx.ftz.f32 {r}, {x}")),
            Intrinsic::Ln => {
                let log2 = self.fresh(ty);
                self.ins(format!("lg2.approx.f32 {log2}, {x}"));
                self.ins(format!("mul.f32 {r}, {log2}, {LN_2}"));
            }
            Intrinsic::Log2 => self.ins(format!("lg2.approx.f32 {r}, {x}")),
            Intrinsic::Sin => self.ins(format!("sin.approx.f32 {r}, {x}")),
            Intrinsic::Cos => self.ins(format!("cos.approx.f32 {r}, {x}")),
            Intrinsic::Tanh if self.features.available(Feature::TanhApprox) => {
                self.require(Feature::TanhApprox)?;
                self.ins(format!("tanh.approx.f32 {r}, {x}"));
            }
            Intrinsic::Tanh => return Ok(self.tanh_from_ex2(x)),
            Intrinsic::ShflXor
            | Intrinsic::ShflDown
            | Intrinsic::PackF16x2
            | Intrinsic::PackBf16x2
            | Intrinsic::ToTf32
            | Intrinsic::FromBits
            | Intrinsic::ToBits => {
                return Err(self.error(format!(
                    "`{}` reached the float intrinsics",
                    intrinsic_name(f)
                )));
            }
        }
        Ok(r)
    }

    /// tanh for targets without `tanh.approx`: sign(x) * (1 - 2 / (e^(2|x|) + 1)),
    /// and x itself for |x| < 2^-5, where that form loses digits to
    /// cancellation while tanh(x) = x within x^2/3 < 2^-11 relative (the
    /// accuracy of `tanh.approx`). Large |x| gives e = inf and exactly ±1.
    fn tanh_from_ex2(&mut self, x: &Operand) -> Reg {
        let a = self.fresh(Scalar::F32);
        self.ins(format!("abs.f32 {a}, {x}"));
        let scaled = self.fresh(Scalar::F32);
        self.ins(format!("mul.f32 {scaled}, {a}, {TWO_LOG2_E}"));
        let e = self.fresh(Scalar::F32);
        self.ins(format!("ex2.approx.ftz.f32 {e}, {scaled}"));
        let e1 = self.fresh(Scalar::F32);
        self.ins(format!("add.f32 {e1}, {e}, 0f3F800000"));
        let inv = self.fresh(Scalar::F32);
        self.ins(format!("rcp.approx.ftz.f32 {inv}, {e1}"));
        let magnitude = self.fresh(Scalar::F32);
        self.ins(format!(
            "fma.rn.f32 {magnitude}, {inv}, 0fC0000000, 0f3F800000"
        ));
        let signed = self.fresh(Scalar::F32);
        self.ins(format!("copysign.f32 {signed}, {x}, {magnitude}"));
        let small = self.fresh(Scalar::Bool);
        self.ins(format!("setp.lt.f32 {small}, {a}, 0f3D000000"));
        self.select(
            Scalar::F32,
            Operand::Reg(small),
            x.clone(),
            Operand::Reg(signed),
        )
    }

    /// Rust's `round`: halfway cases away from zero (`cvt.rni` would round
    /// them to even). trunc(x), plus ±1 when the dropped fraction is at
    /// least one half; `x - trunc(x)` is exact.
    fn round_half_away(&mut self, ty: Scalar, x: &Operand) -> Reg {
        let t = arith(ty);
        let (half, one) = if ty == Scalar::F64 {
            ("0d3FE0000000000000", "0d3FF0000000000000")
        } else {
            ("0f3F000000", "0f3F800000")
        };
        let truncated = self.fresh(ty);
        self.ins(format!("cvt.rzi.{t}.{t} {truncated}, {x}"));
        let fraction = self.fresh(ty);
        self.ins(format!("sub.rn.{t} {fraction}, {x}, {truncated}"));
        let magnitude = self.fresh(ty);
        self.ins(format!("abs.{t} {magnitude}, {fraction}"));
        let up = self.fresh(Scalar::Bool);
        self.ins(format!("setp.ge.{t} {up}, {magnitude}, {half}"));
        let step = self.fresh(ty);
        self.ins(format!("copysign.{t} {step}, {x}, {one}"));
        let away = self.fresh(ty);
        self.ins(format!("add.rn.{t} {away}, {truncated}, {step}"));
        self.select(
            ty,
            Operand::Reg(up),
            Operand::Reg(away),
            Operand::Reg(truncated),
        )
    }

    /// `shfl.sync` over the full warp (mask 0xffffffff; clamp 31 keeps
    /// `shfl_down` lanes past 31 on their own value).
    fn shuffle(&mut self, f: Intrinsic, args: &[Expr], ty: Scalar) -> Result<Operand, Error> {
        let value = self.expr(&args[0])?;
        let value = self.in_reg(value, ty);
        let lane = self.expr(&args[1])?;
        let mode = if f == Intrinsic::ShflXor {
            "bfly"
        } else {
            "down"
        };
        let r = self.fresh(ty);
        self.ins(format!("shfl.sync.{mode}.b32 {r}, {value}, {lane}, 31, -1"));
        Ok(Operand::Reg(r))
    }
}

/// The immediate of `f`'s result (`FromBits`: a `u32` as `0fXXXXXXXX`;
/// `ToBits`: an `f32` as its bits in decimal) from its operand's, which
/// [`Emitter::literal`] wrote.
fn reinterpret_immediate(f: Intrinsic, imm: &str) -> Result<String, Error> {
    let bits = match imm.strip_prefix("0f") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => imm.parse::<i64>().ok().map(|v| v as u32),
    }
    .ok_or_else(|| Error::new(format!("`{imm}` is not a 32-bit immediate")))?;
    Ok(if f == Intrinsic::FromBits {
        format!("0f{bits:08X}")
    } else {
        bits.to_string()
    })
}
