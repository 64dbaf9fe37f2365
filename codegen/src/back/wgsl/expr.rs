//! Expressions, as WGSL text with just the parentheses WGSL needs (it has no
//! precedence between some operators, so every binary operand that is itself
//! an operation is parenthesized).

use super::function::Emitter;
use super::helpers::{AtomicVar, Helper};
use crate::eval::binary_op_text;
use crate::ir::{
    AtomicOp, Axis, BinaryOp, Expr, ExprKind, Intrinsic, Literal, ParamType, Place, Scalar,
    Special, UnaryOp,
};
use crate::Error;

/// How an expression's text binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Prec {
    /// A name, a call, an index, a parenthesized or non-negative literal.
    Atom,
    /// A unary operation or a negative literal.
    Unary,
    Binary,
}

pub struct Code {
    pub text: String,
    pub prec: Prec,
}

impl Code {
    pub fn atom(text: impl Into<String>) -> Code {
        Code {
            text: text.into(),
            prec: Prec::Atom,
        }
    }

    fn unary(text: String) -> Code {
        Code {
            text,
            prec: Prec::Unary,
        }
    }

    fn binary(text: String) -> Code {
        Code {
            text,
            prec: Prec::Binary,
        }
    }

    /// The text as an operand of a binary operator.
    fn operand(&self) -> String {
        self.wrapped(Prec::Binary)
    }

    /// The text parenthesized when it binds at least as loosely as `prec`.
    fn wrapped(&self, prec: Prec) -> String {
        if self.prec >= prec {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }
}

fn call(name: &str, args: &[String]) -> Code {
    Code::atom(format!("{name}({})", args.join(", ")))
}

fn axis(a: Axis) -> &'static str {
    match a {
        Axis::X => "x",
        Axis::Y => "y",
        Axis::Z => "z",
    }
}

/// Whether a value of `ty` is an 8-bit integer living in 32 bits.
fn is_byte(ty: Scalar) -> bool {
    matches!(ty, Scalar::I8 | Scalar::U8)
}

impl Emitter<'_> {
    pub fn expr(&mut self, e: &Expr) -> Result<Code, Error> {
        self.needs_f16 |= e.ty == Scalar::F16;
        match &e.kind {
            ExprKind::Literal(lit) => self.literal(e.ty, *lit),
            ExprKind::Param(id) => {
                let field = format!("params.{}", self.fields[*id as usize]);
                Ok(match self.kernel.param(*id).ty {
                    ParamType::Scalar(Scalar::Bool) => Code::binary(format!("{field} != 0u")),
                    ParamType::Scalar(Scalar::F16) => call("f16", &[field]),
                    ParamType::Scalar(_) => Code::atom(field),
                    ParamType::Slice { .. } => {
                        return Err(self.error(format!("parameter #{id} is a slice, not a value")))
                    }
                })
            }
            ExprKind::Len(id) => Ok(Code::atom(format!("params.{}", self.fields[*id as usize]))),
            ExprKind::Const(_) => {
                Err(self.error("a const param is left: specialize the kernel before emitting it"))
            }
            ExprKind::Load(place) => {
                let p = self.place(place)?;
                if self.is_atomic(place) {
                    Ok(call("atomicLoad", &[format!("&{p}")]))
                } else {
                    Ok(Code::atom(p))
                }
            }
            ExprKind::Unary(op, a) => {
                let x = self.expr(a)?;
                let x = x.wrapped(Prec::Unary);
                let code = match (op, e.ty) {
                    (UnaryOp::Not, Scalar::Bool) => Code::unary(format!("!{x}")),
                    (UnaryOp::Not, _) => Code::unary(format!("~{x}")),
                    (UnaryOp::Neg, _) => Code::unary(format!("-{x}")),
                };
                Ok(self.normalize(e.ty, code))
            }
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b),
            ExprKind::Cast(a) => {
                let x = self.expr(a)?;
                self.cast(a.ty, e.ty, x)
            }
            ExprKind::Select(c, a, b) => {
                let c = self.expr(c)?.text;
                let a = self.expr(a)?.text;
                let b = self.expr(b)?.text;
                Ok(call("select", &[b, a, c]))
            }
            ExprKind::Special(s) => Ok(self.special(*s)),
            ExprKind::Call(f, args) => self.intrinsic(*f, args, e.ty),
            ExprKind::Atomic {
                op,
                place,
                value,
                compare,
            } => self.atomic(*op, place, value, compare.as_deref()),
        }
    }

    /// Re-extends an i8/u8 result from its low byte (other types unchanged).
    fn normalize(&mut self, ty: Scalar, code: Code) -> Code {
        match ty {
            Scalar::I8 => call("extractBits", &[code.text, "0u".into(), "8u".into()]),
            Scalar::U8 => Code::binary(format!("{} & 0xffu", code.operand())),
            _ => code,
        }
    }

    pub fn literal(&mut self, ty: Scalar, lit: Literal) -> Result<Code, Error> {
        let signed = |text: String, negative: bool| {
            if negative {
                Code::unary(text)
            } else {
                Code::atom(text)
            }
        };
        Ok(match (ty, lit) {
            (_, Literal::Bool(b)) => Code::atom(b.to_string()),
            (Scalar::I8 | Scalar::I32, Literal::Int(v)) => match v as i32 {
                // `2147483648i` is out of range, so WGSL cannot negate it.
                i32::MIN => Code::atom("(-2147483647i - 1i)"),
                v => signed(format!("{v}i"), v < 0),
            },
            (Scalar::U8 | Scalar::U32, Literal::Int(v)) => Code::atom(format!("{}u", v as u32)),
            (Scalar::F32, Literal::Float(v)) => float_literal(ty, v, "f"),
            (Scalar::F16, Literal::Float(v)) => float_literal(ty, v, "h"),
            _ => {
                return Err(self.error(format!(
                    "a literal {lit:?} of type {} has no WGSL form",
                    ty.name()
                )))
            }
        })
    }

    /// A literal as its bits (`bitcast<T>(0x..u)`), which naga does not
    /// evaluate when it creates the shader.
    fn literal_bits(&mut self, ty: Scalar, lit: Literal) -> Result<Code, Error> {
        Ok(match (ty, lit) {
            (Scalar::F32 | Scalar::F16, Literal::Float(v)) => {
                self.needs_f16 |= ty == Scalar::F16;
                float_bits(ty, v)
            }
            (Scalar::I8 | Scalar::I32, Literal::Int(v)) => {
                Code::atom(format!("bitcast<i32>({:#010x}u)", v as i32 as u32))
            }
            (Scalar::U8 | Scalar::U32, Literal::Int(v)) => {
                Code::atom(format!("bitcast<u32>({:#010x}u)", v as u32))
            }
            _ => self.literal(ty, lit)?,
        })
    }

    fn special(&mut self, s: Special) -> Code {
        let b = &self.builtins;
        match s {
            Special::ThreadIdx(a) => Code::atom(format!("{}.{}", b.thread_id, axis(a))),
            Special::BlockIdx(a) => Code::atom(format!("{}.{}", b.block_id, axis(a))),
            Special::GridDim(a) => Code::atom(format!("{}.{}", b.grid_dim, axis(a))),
            Special::BlockDim(a) => {
                let code = Code::atom(format!("{}.{}", b.block_dim, axis(a)));
                self.needs_block_dim = true;
                code
            }
            Special::LaneId => {
                self.needs_subgroups = true;
                Code::atom(self.builtins.lane.clone())
            }
            // `valid::targets::check` rejects it before emission starts; a
            // block alone is its own cluster.
            Special::ClusterRank => Code::atom("0u".to_string()),
        }
    }

    fn binary(&mut self, op: BinaryOp, a: &Expr, b: &Expr) -> Result<Code, Error> {
        let ty = a.ty;
        if matches!(op, BinaryOp::Div | BinaryOp::Rem) && ty.is_int() && b.as_int() == Some(0) {
            return Err(self.error(format!(
                "`{}` by the constant 0, which WGSL rejects: guard the division",
                binary_op_text(op)
            )));
        }
        let x = self.expr(a)?;
        let y = match op {
            BinaryOp::Shl | BinaryOp::Shr => self.shift_amount(ty, b)?,
            _ => self.expr(b)?,
        };
        let sym = match (op, ty) {
            // WGSL has `^` on integers only; on bools it is `!=`.
            (BinaryOp::BitXor, Scalar::Bool) => "!=",
            _ => binary_op_text(op),
        };
        let (x, y) = if ty == Scalar::Bool
            && op.is_comparison()
            && !matches!(op, BinaryOp::Eq | BinaryOp::Ne)
        {
            // WGSL orders no bools: false < true, as 0 < 1.
            (call("u32", &[x.text]), call("u32", &[y.text]))
        } else {
            (x, y)
        };
        if op == BinaryOp::Ne && ty.is_float() {
            // Rust's `!=` holds for NaN. WGSL leaves NaN comparisons to the
            // implementation, and lavapipe's `!=` is false for NaN (a GEMM with
            // beta = NaN then skipped C); its `==` is false for NaN, so `!(==)`
            // keeps Rust's meaning.
            return Ok(Code::atom(format!("!({} == {})", x.operand(), y.operand())));
        }
        if op == BinaryOp::Lt {
            // WGSL reads `a < b, c > d` in an argument list as a template
            // list (`select(c < 4u, f > 0f, ..)` failed to parse): a
            // parenthesized `<` cannot start one.
            return Ok(Code::atom(format!("({} < {})", x.operand(), y.operand())));
        }
        let code = Code::binary(format!("{} {sym} {}", x.operand(), y.operand()));
        let may_leave_range = matches!(
            op,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Shl
        );
        Ok(if may_leave_range {
            self.normalize(ty, code)
        } else {
            code
        })
    }

    /// The shift amount (a u32) modulo the bit width of `ty`: literal amounts
    /// are reduced here (WGSL rejects a literal amount past the width),
    /// run-time ones by WGSL itself, except for 8-bit types.
    fn shift_amount(&mut self, ty: Scalar, amount: &Expr) -> Result<Code, Error> {
        let bits = if is_byte(ty) { 8 } else { 32 };
        if let Some(v) = amount.as_int() {
            return Ok(Code::atom(format!("{}u", v as u32 % bits)));
        }
        let y = self.expr(amount)?;
        Ok(if is_byte(ty) {
            Code::binary(format!("{} & 7u", y.operand()))
        } else {
            y
        })
    }

    /// `x as to`, with Rust's semantics.
    fn cast(&mut self, from: Scalar, to: Scalar, x: Code) -> Result<Code, Error> {
        if from == to {
            return Ok(x);
        }
        let from_type = self.ty(from)?;
        let to_type = self.ty(to)?;
        if from.is_float() && to.is_int() {
            let wide = if from == Scalar::F16 {
                call("f32", &[x.text]).text
            } else {
                x.text
            };
            let helper = self.helper(Helper::FloatToInt(to));
            return Ok(call(&helper, &[wide]));
        }
        // Same representation (i8 -> i32, u8 -> u32): the value is already extended.
        let converted = if from_type == to_type {
            x
        } else {
            call(to_type, &[x.text])
        };
        Ok(if is_byte(to) && from != Scalar::Bool {
            self.normalize(to, converted)
        } else {
            converted
        })
    }

    fn intrinsic(&mut self, f: Intrinsic, args: &[Expr], ty: Scalar) -> Result<Code, Error> {
        // naga evaluates a call of literals when it creates the shader and
        // refuses a result out of range or undefined (`sqrt(-1.0f)`,
        // `exp(100.0f)`, `max(3e38f, 1.0f) * 10.0f` or `10u / min(0u, 5u)`
        // after it), which Rust and PTX compute at run time. Such a call's
        // first argument is written as its bits, which naga leaves to run
        // time.
        let constant = args.iter().all(|a| matches!(a.kind, ExprKind::Literal(_)));
        let mut xs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let code = match a.kind {
                ExprKind::Literal(lit) if constant && i == 0 => self.literal_bits(a.ty, lit)?,
                _ => self.expr(a)?,
            };
            xs.push(code.text);
        }
        let name = match f {
            Intrinsic::Sqrt => "sqrt",
            Intrinsic::Rsqrt => "inverseSqrt",
            Intrinsic::Exp => "exp",
            Intrinsic::Exp2 => "exp2",
            Intrinsic::Ln => "log",
            Intrinsic::Log2 => "log2",
            Intrinsic::Sin => "sin",
            Intrinsic::Cos => "cos",
            Intrinsic::Tanh => "tanh",
            Intrinsic::Floor => "floor",
            Intrinsic::Ceil => "ceil",
            Intrinsic::Abs => "abs",
            Intrinsic::Min => "min",
            Intrinsic::Max => "max",
            Intrinsic::MulAdd => "fma",
            Intrinsic::Round => return Ok(call(&self.helper(Helper::Round(ty)), &xs)),
            Intrinsic::ShflXor => {
                self.needs_subgroups = true;
                "subgroupShuffleXor"
            }
            Intrinsic::ShflDown => {
                self.needs_subgroups = true;
                xs.push(self.builtins.lane.clone());
                return Ok(call(&self.helper(Helper::ShuffleDown(ty)), &xs));
            }
            Intrinsic::FromBits => "bitcast<f32>",
            Intrinsic::ToBits => "bitcast<u32>",
            Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 | Intrinsic::ToTf32 => {
                // `valid::targets::check` rejects these before emission starts.
                return Err(self.error("Tensor Core operand words have no WGSL form"));
            }
        };
        let code = call(name, &xs);
        // |i8::MIN| wraps back to i8::MIN, as in Rust's release builds.
        Ok(if f == Intrinsic::Abs {
            self.normalize(ty, code)
        } else {
            code
        })
    }

    /// Whether a place is an element of a variable declared atomic.
    pub fn is_atomic(&self, place: &Place) -> bool {
        match place {
            Place::Local { local, .. } => self.atomic_locals[*local as usize],
            Place::Global { param, .. } => self.atomic_params[*param as usize],
        }
    }

    /// The WGSL reference of a place: `name`, `name[i][j]`, `buffer[i]`.
    pub fn place(&mut self, place: &Place) -> Result<String, Error> {
        match place {
            Place::Local { local, indices } => {
                let mut text = self.locals[*local as usize].clone();
                for index in indices {
                    text.push_str(&format!("[{}]", self.expr(index)?.text));
                }
                Ok(text)
            }
            Place::Global { param, index } => {
                let Some(buffer) = self.buffers[*param as usize].clone() else {
                    return Err(self.error(format!("parameter #{param} is not a slice")));
                };
                Ok(format!("{buffer}[{}]", self.expr(index)?.text))
            }
        }
    }

    fn atomic(
        &mut self,
        op: AtomicOp,
        place: &Place,
        value: &Expr,
        compare: Option<&Expr>,
    ) -> Result<Code, Error> {
        let name = match op {
            AtomicOp::Add => "atomicAdd",
            AtomicOp::Min => "atomicMin",
            AtomicOp::Max => "atomicMax",
            AtomicOp::And => "atomicAnd",
            AtomicOp::Or => "atomicOr",
            AtomicOp::Xor => "atomicXor",
            AtomicOp::Exchange => "atomicExchange",
            AtomicOp::CompareExchange => {
                // Operands in source order: the place, the expected value, the new one.
                let (var, indices) = match place {
                    Place::Local { local, indices } => (AtomicVar::Shared(*local), indices.clone()),
                    Place::Global { param, index } => {
                        (AtomicVar::Buffer(*param), vec![index.clone()])
                    }
                };
                let mut args = Vec::new();
                for index in &indices {
                    let i = self.expr(index)?;
                    args.push(if index.ty == Scalar::U32 {
                        i.text
                    } else {
                        call("u32", &[i.text]).text
                    });
                }
                let Some(compare) = compare else {
                    return Err(self.error("`atomic_compare_exchange` without a compare value"));
                };
                args.push(self.expr(compare)?.text);
                args.push(self.expr(value)?.text);
                return Ok(call(&self.helper(Helper::CompareExchange(var)), &args));
            }
        };
        let p = self.place(place)?;
        let v = self.expr(value)?.text;
        Ok(call(name, &[format!("&{p}"), v]))
    }
}

/// A float literal of WGSL (`suffix` `f` or `h`); infinities and NaNs, which
/// WGSL cannot write, as their bits ([`float_bits`]).
fn float_literal(ty: Scalar, v: f64, suffix: &str) -> Code {
    let narrowed = narrow(ty, v);
    if !narrowed.is_finite() {
        return float_bits(ty, v);
    }
    let text = format!("{narrowed:?}{suffix}");
    if narrowed.is_sign_negative() {
        Code::unary(text)
    } else {
        Code::atom(text)
    }
}

/// A float of type `ty` as the `f32` of its bits: a value WGSL cannot write
/// as a literal, or one naga must not evaluate at shader creation.
fn float_bits(ty: Scalar, v: f64) -> Code {
    let bits = format!("bitcast<f32>({:#010x}u)", narrow(ty, v).to_bits());
    Code::atom(if ty == Scalar::F16 {
        format!("f16({bits})")
    } else {
        bits
    })
}

/// `v` rounded to `ty` (f32 or f16), as an `f32`.
fn narrow(ty: Scalar, v: f64) -> f32 {
    if ty == Scalar::F16 {
        crate::eval::f16_from_f64(v).to_f32()
    } else {
        v as f32
    }
}
