//! Calls of the language's own functions and methods: the thread and block
//! indices (`thread_idx().x`), `lane_id()`, the warp shuffles, the operand
//! packing functions, `f32::from_bits`, the atomics, `.len()`, `.to_bits()`
//! and the math methods; and the errors for built-ins used as values where
//! they are statements. Calls of device functions go to `call`.

use quote::ToTokens;

use super::place::Access;
use super::scope::Binding;
use super::syntax::{call_name, compact_text, is_path, peel};
use super::{call, warp, Lowered, Lowerer};
use crate::ir::{AtomicOp, Axis, Expr, ExprKind, Intrinsic, ParamType, Scalar, Special};

pub(super) const FUNCTIONS: &str = "thread_idx(), block_idx(), block_dim(), grid_dim(), lane_id(), sync_threads(), shared(), pipeline(), \
     shfl_xor, shfl_down, pack_f16x2, pack_bf16x2, to_tf32, f32::from_bits, atomic_add, atomic_min, atomic_max, atomic_and, atomic_or, \
     atomic_xor, atomic_exchange, atomic_compare_exchange, and the warp matrix and async copy statements";

/// Math written as methods: name, intrinsic, number of arguments besides the receiver.
pub(super) const MATH_METHODS: [(&str, Intrinsic, usize); 16] = [
    ("sqrt", Intrinsic::Sqrt, 0),
    ("rsqrt", Intrinsic::Rsqrt, 0),
    ("exp", Intrinsic::Exp, 0),
    ("exp2", Intrinsic::Exp2, 0),
    ("ln", Intrinsic::Ln, 0),
    ("log2", Intrinsic::Log2, 0),
    ("sin", Intrinsic::Sin, 0),
    ("cos", Intrinsic::Cos, 0),
    ("tanh", Intrinsic::Tanh, 0),
    ("floor", Intrinsic::Floor, 0),
    ("ceil", Intrinsic::Ceil, 0),
    ("round", Intrinsic::Round, 0),
    ("abs", Intrinsic::Abs, 0),
    ("min", Intrinsic::Min, 1),
    ("max", Intrinsic::Max, 1),
    ("mul_add", Intrinsic::MulAdd, 2),
];

const ATOMICS: [(&str, AtomicOp); 8] = [
    ("atomic_add", AtomicOp::Add),
    ("atomic_min", AtomicOp::Min),
    ("atomic_max", AtomicOp::Max),
    ("atomic_and", AtomicOp::And),
    ("atomic_or", AtomicOp::Or),
    ("atomic_xor", AtomicOp::Xor),
    ("atomic_exchange", AtomicOp::Exchange),
    ("atomic_compare_exchange", AtomicOp::CompareExchange),
];

pub(super) const SPECIALS: [&str; 4] = ["thread_idx", "block_idx", "block_dim", "grid_dim"];

impl Lowerer<'_> {
    /// `thread_idx().x` and friends.
    pub(super) fn special(&mut self, f: &syn::ExprField) -> Lowered<Expr> {
        const FIELDS: &str = "the only fields are `.x`, `.y` and `.z` of thread_idx(), block_idx(), block_dim() and grid_dim()";
        let syn::Expr::Call(call) = peel(&f.base) else {
            return self.err(f, format!("fields are not supported: {FIELDS}"));
        };
        let name = call_name(call).unwrap_or_default();
        if !SPECIALS.contains(&name.as_str()) {
            return self.err(f, format!("fields are not supported: {FIELDS}"));
        }
        self.arity(call, &call.args, 0, &name)?;
        let axis = match &f.member {
            syn::Member::Named(m) if m == "x" => Axis::X,
            syn::Member::Named(m) if m == "y" => Axis::Y,
            syn::Member::Named(m) if m == "z" => Axis::Z,
            other => {
                return self.err(
                    other,
                    format!("`{name}()` has the fields `.x`, `.y` and `.z`"),
                )
            }
        };
        let special = match name.as_str() {
            "thread_idx" => Special::ThreadIdx(axis),
            "block_idx" => Special::BlockIdx(axis),
            "block_dim" => Special::BlockDim(axis),
            _ => Special::GridDim(axis),
        };
        Ok(Expr {
            ty: Scalar::U32,
            kind: ExprKind::Special(special),
        })
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall, hint: Option<Scalar>) -> Lowered<Expr> {
        if is_path(&c.func, &["f32", "from_bits"]) {
            self.arity(c, &c.args, 1, "f32::from_bits")?;
            let bits = self.expr(&c.args[0], Some(Scalar::U32))?;
            self.check_type(
                &c.args[0],
                bits.ty,
                Scalar::U32,
                "the bits of `f32::from_bits`",
            )?;
            return Ok(Expr {
                ty: Scalar::F32,
                kind: ExprKind::Call(Intrinsic::FromBits, vec![bits]),
            });
        }
        if Self::is_device_call(c) {
            return self.call_value(c);
        }
        let Some(name) = call_name(c) else {
            return self.err(
                &c.func,
                format!("only these functions can be called in kernels: {FUNCTIONS}"),
            );
        };
        match name.as_str() {
            n if SPECIALS.contains(&n) => {
                self.err(c, format!("`{n}()` has three components: use `{n}().x`, `{n}().y` or `{n}().z`"))
            }
            "lane_id" => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Special(Special::LaneId) })
            }
            "sync_threads" => self.err(c, "`sync_threads()` is a statement: write `sync_threads();` on its own line"),
            "shared" => self.err(
                c,
                "`shared()` allocates a shared array and is only allowed as the value of a typed `let`: `let mut tile: [[f32; 32]; 32] = shared();`",
            ),
            "pipeline" => self.err(
                c,
                "`pipeline(STAGES)` declares a pipeline and is only allowed as the value of a `let`: `let pipe = pipeline(STAGES);`",
            ),
            "shfl_xor" | "shfl_down" => {
                self.arity(c, &c.args, 2, &name)?;
                let value = self.expr(&c.args[0], hint)?;
                if !matches!(value.ty, Scalar::I32 | Scalar::U32 | Scalar::F32) {
                    return self.err(
                        &c.args[0],
                        format!("`{name}` moves 32-bit values (`i32`, `u32`, `f32`), not `{}`: convert the value with `as` first", value.ty.name()),
                    );
                }
                let lane = self.expr(&c.args[1], Some(Scalar::U32))?;
                let what = if name == "shfl_xor" { "the lane mask" } else { "the lane delta" };
                self.check_type(&c.args[1], lane.ty, Scalar::U32, what)?;
                let intrinsic = if name == "shfl_xor" { Intrinsic::ShflXor } else { Intrinsic::ShflDown };
                Ok(Expr { ty: value.ty, kind: ExprKind::Call(intrinsic, vec![value, lane]) })
            }
            n if n.starts_with("atomic_") => self.atomic(c, &name),
            "pack_f16x2" | "pack_bf16x2" => {
                self.arity(c, &c.args, 2, &name)?;
                let mut halves = Vec::new();
                for (arg, what) in c.args.iter().zip(["the low half", "the high half"]) {
                    let v = self.expr(arg, Some(Scalar::F32))?;
                    self.check_type(arg, v.ty, Scalar::F32, what)?;
                    halves.push(v);
                }
                let intrinsic = if name == "pack_f16x2" { Intrinsic::PackF16x2 } else { Intrinsic::PackBf16x2 };
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Call(intrinsic, halves) })
            }
            "to_tf32" => {
                self.arity(c, &c.args, 1, &name)?;
                let v = self.expr(&c.args[0], Some(Scalar::F32))?;
                self.check_type(&c.args[0], v.ty, Scalar::F32, "the value to round to tf32")?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Call(Intrinsic::ToTf32, vec![v]) })
            }
            n if warp::is_warp_statement(n) => self.err(
                c,
                format!("`{n}(..)` is a statement: write `{n}(..);` on its own line"),
            ),
            n if MATH_METHODS.iter().any(|(m, ..)| *m == n) => self.err(
                c,
                format!("math is written as methods, as in Rust: `x.{n}(..)` instead of `{n}(x, ..)`"),
            ),
            n => match call::near_builtin(n) {
                Some(builtin) => self.err(
                    &c.func,
                    format!("unknown function `{n}`: did you mean `{builtin}`? Kernels can call `#[device]` functions and {FUNCTIONS}"),
                ),
                None => self.call_value(c),
            },
        }
    }

    /// A call to a device function used as a value: it returns one scalar.
    fn call_value(&mut self, c: &syn::ExprCall) -> Lowered<Expr> {
        let mut values = self.device_call(c)?;
        match values.len() {
            1 => Ok(values.pop().expect("one value")),
            0 => self.err(
                c,
                "this function returns nothing: call it as a statement, `f(..);`",
            ),
            n => self.err(
                c,
                format!(
                    "this function returns {n} values: bind them with `let (a, b, ..) = f(..);`"
                ),
            ),
        }
    }

    fn atomic(&mut self, c: &syn::ExprCall, name: &str) -> Lowered<Expr> {
        let Some((_, op)) = ATOMICS.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = ATOMICS.iter().map(|(n, _)| *n).collect();
            return self.err(
                &c.func,
                format!(
                    "unknown atomic `{name}`: the atomics are {}",
                    known.join(", ")
                ),
            );
        };
        let op = *op;
        let arity = if op == AtomicOp::CompareExchange {
            3
        } else {
            2
        };
        self.arity(c, &c.args, arity, name)?;
        let target = match peel(&c.args[0]) {
            syn::Expr::Reference(r) if r.mutability.is_some() => &*r.expr,
            other => {
                return self.err(
                    other,
                    format!(
                    "the first argument of `{name}` is the element to update, written `&mut y[i]`"
                ),
                )
            }
        };
        let (place, ty) = self.place(target, Access::Atomic)?;
        let supported = match op {
            AtomicOp::Add => matches!(
                ty,
                Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32 | Scalar::F64
            ),
            AtomicOp::Exchange | AtomicOp::CompareExchange => {
                ty.size_bytes() >= 4 && ty != Scalar::Bool
            }
            _ => matches!(ty, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64),
        };
        if !supported {
            let types = match op {
                AtomicOp::Add => "`i32`, `u32`, `i64`, `u64`, `f32` and `f64`",
                AtomicOp::Exchange | AtomicOp::CompareExchange => "32- and 64-bit types",
                _ => "`i32`, `u32`, `i64` and `u64`",
            };
            return self.err(
                target,
                format!(
                    "`{name}` works on {types}, but this element is `{}`: store the values in one of those types",
                    ty.name()
                ),
            );
        }
        let operand = |this: &mut Self, e: &syn::Expr, what: &str| -> Lowered<Expr> {
            let v = this.expr(e, Some(ty))?;
            this.check_type(e, v.ty, ty, what)?;
            Ok(v)
        };
        let (value, compare) = if op == AtomicOp::CompareExchange {
            let compare = operand(self, &c.args[1], "the expected value")?;
            (
                operand(self, &c.args[2], "the new value")?,
                Some(Box::new(compare)),
            )
        } else {
            (operand(self, &c.args[1], "the operand")?, None)
        };
        Ok(Expr {
            ty,
            kind: ExprKind::Atomic {
                op,
                place: Box::new(place),
                value: Box::new(value),
                compare,
            },
        })
    }

    pub(super) fn method(
        &mut self,
        m: &syn::ExprMethodCall,
        hint: Option<Scalar>,
    ) -> Lowered<Expr> {
        if let Some(t) = &m.turbofish {
            return self.err(t, "turbofish `::<..>` is not supported in kernels");
        }
        let name = m.method.to_string();
        if self.pipeline_of(&m.receiver).is_some() {
            return self.err(
                m,
                format!(
                    "`{}.{name}(..)` is a statement: write it on its own line, ending with `;`",
                    compact_text(m.receiver.to_token_stream())
                ),
            );
        }
        if name == "len" {
            self.arity(m, &m.args, 0, "len")?;
            if let syn::Expr::Path(p) = peel(&m.receiver) {
                let ident = self.path_ident(p)?;
                let slice = match self.resolve(&ident)? {
                    Binding::Param(id) | Binding::Slice { param: id, .. } => Some(id),
                    _ => None,
                };
                if let Some(id) = slice {
                    if matches!(self.params[id as usize].ty, ParamType::Slice { .. }) {
                        return Ok(Expr {
                            ty: Scalar::U32,
                            kind: ExprKind::Len(id),
                        });
                    }
                }
            }
            return self.err(m, "`.len()` is the length of a slice parameter; arrays have the size they are declared with");
        }
        if name == "to_bits" {
            self.arity(m, &m.args, 0, "to_bits")?;
            let value = self.expr(&m.receiver, Some(Scalar::F32))?;
            self.check_type(
                &m.receiver,
                value.ty,
                Scalar::F32,
                "the receiver of `.to_bits()`",
            )?;
            return Ok(Expr {
                ty: Scalar::U32,
                kind: ExprKind::Call(Intrinsic::ToBits, vec![value]),
            });
        }
        if name == "step_by" {
            return self.err(m, "`.step_by(s)` is only supported on the range of a `for` loop: `for i in (a..b).step_by(s)`");
        }
        let Some(&(_, intrinsic, arity)) = MATH_METHODS.iter().find(|(n, ..)| *n == name) else {
            let known: Vec<&str> = MATH_METHODS.iter().map(|(n, ..)| *n).collect();
            return self.err(
                &m.method,
                format!("unknown method `{name}`: the methods are `.len()` on slices, `.to_bits()` on f32 and the math methods {}", known.join(", ")),
            );
        };
        self.arity(m, &m.args, arity, &name)?;
        let (receiver, mut args) = match arity {
            1 => {
                let (a, b) = self.pair(&m.receiver, &m.args[0], hint)?;
                (a, vec![b])
            }
            _ => {
                let receiver = self.expr(&m.receiver, hint)?;
                let args = m
                    .args
                    .iter()
                    .map(|a| self.expr(a, Some(receiver.ty)))
                    .collect::<Lowered<Vec<_>>>()?;
                (receiver, args)
            }
        };
        let ty = receiver.ty;
        let kind_ok = match intrinsic {
            Intrinsic::Abs => ty.is_signed(),
            Intrinsic::Min | Intrinsic::Max => ty != Scalar::Bool,
            _ => ty.is_float(),
        };
        if !kind_ok {
            let needs = match intrinsic {
                Intrinsic::Abs => format!(
                    "a signed integer or a float (the absolute value of a `{}` is itself)",
                    ty.name()
                ),
                Intrinsic::Min | Intrinsic::Max => "a number".to_string(),
                _ => format!("a float: convert first, e.g. `(x as f32).{name}()`"),
            };
            return self.err(
                &m.receiver,
                format!("`.{name}()` needs {needs}, but this is `{}`", ty.name()),
            );
        }
        for (arg, syn_arg) in args.iter().zip(&m.args) {
            self.check_type(
                syn_arg,
                arg.ty,
                ty,
                &format!("the argument of `.{name}()` (like its receiver)"),
            )?;
        }
        args.insert(0, receiver);
        Ok(Expr {
            ty,
            kind: ExprKind::Call(intrinsic, args),
        })
    }
}
