//! Calls of the language's own functions and methods: the thread and block
//! indices (`thread_idx().x`), `lane_id()`, the warp shuffles, the operand
//! packing functions, `f32::from_bits`, the atomics, `.len()`, `.to_bits()`
//! and the math methods; and the errors for built-ins used as values where
//! they are statements. Calls of device functions go to `call`. Which name
//! is which built-in, and the lists the messages give, come from the tables
//! of `front/vocabulary.rs`.

use quote::ToTokens;

use super::place::Access;
use super::scope::Binding;
use super::syntax::{call_name, compact_text, is_path, peel};
use super::{Lowered, Lowerer};
use crate::front::vocabulary::{self, Builtin, Construct, MathMethod};
use crate::ir::{AtomicOp, Axis, Expr, ExprKind, Intrinsic, ParamType, Scalar, Special};

impl Lowerer<'_> {
    /// `thread_idx().x` and friends.
    pub(super) fn special(&mut self, f: &syn::ExprField) -> Lowered<Expr> {
        let fields = || {
            format!(
                "the only fields are `.x`, `.y` and `.z` of {}",
                vocabulary::special_list()
            )
        };
        let syn::Expr::Call(call) = peel(&f.base) else {
            return self.err(f, format!("fields are not supported: {}", fields()));
        };
        let name = call_name(call).unwrap_or_default();
        let Some(Builtin::Special(register)) = vocabulary::builtin(&name) else {
            return self.err(f, format!("fields are not supported: {}", fields()));
        };
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
        Ok(Expr {
            ty: Scalar::U32,
            kind: ExprKind::Special(register(axis)),
        })
    }

    /// Reports generic arguments on a built-in that takes none (all but
    /// `mma_m16n8::<T>`).
    pub(super) fn no_generic_arguments(&mut self, c: &syn::ExprCall) -> Lowered<()> {
        match super::syntax::generic_arguments(c) {
            Some(args) => self.err(
                args,
                format!(
                    "`{}` takes no generic arguments: remove the `::<..>`",
                    call_name(c).unwrap_or_default()
                ),
            ),
            None => Ok(()),
        }
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall, hint: Option<Scalar>) -> Lowered<Expr> {
        if let Some(f) = vocabulary::path_intrinsic(|path| is_path(&c.func, path)) {
            return self.intrinsic_call(c, f.intrinsic, &f.path.join("::"), hint);
        }
        if Self::is_device_call(c) {
            return self.call_value(c);
        }
        self.no_generic_arguments(c)?;
        let Some(name) = call_name(c) else {
            return self.err(
                &c.func,
                format!(
                    "only these functions can be called in kernels: {}",
                    vocabulary::callable_list()
                ),
            );
        };
        let n = name.as_str();
        match vocabulary::builtin(n) {
            Some(Builtin::Special(_)) => {
                self.err(c, format!("`{n}()` has three components: use `{n}().x`, `{n}().y` or `{n}().z`"))
            }
            Some(Builtin::Function(Construct::LaneId)) => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Special(Special::LaneId) })
            }
            Some(Builtin::Function(Construct::ClusterRank)) => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Special(Special::ClusterRank) })
            }
            Some(Builtin::Function(Construct::SyncThreads)) => self.err(c, "`sync_threads()` is a statement: write `sync_threads();` on its own line"),
            Some(Builtin::Function(Construct::ClusterSync)) => self.err(c, "`cluster_sync()` is a statement: write `cluster_sync();` on its own line"),
            Some(Builtin::Function(Construct::Shared)) => self.err(
                c,
                "`shared()` allocates a shared array and is only allowed as the value of a typed `let`: `let mut tile: [[f32; 32]; 32] = shared();`",
            ),
            Some(Builtin::Function(Construct::Pipeline)) => self.err(
                c,
                "`pipeline(STAGES)` declares a pipeline and is only allowed as the value of a `let`: `let pipe = pipeline(STAGES);`",
            ),
            Some(Builtin::Function(Construct::MatrixDesc)) => self.err(
                c,
                "`matrix_desc(&tile[r][c], SWIZZLE)` describes a wgmma operand in shared memory and is written only as the A or B argument of a `wgmma_m64k*` call",
            ),
            Some(Builtin::Intrinsic(intrinsic)) => self.intrinsic_call(c, intrinsic, n, hint),
            Some(Builtin::Atomic(op)) => self.atomic(c, n, op),
            Some(Builtin::WarpStatement) => self.err(
                c,
                format!("`{n}(..)` is a statement: write `{n}(..);` on its own line"),
            ),
            Some(Builtin::MathMethod) => self.err(
                c,
                format!("math is written as methods, as in Rust: `x.{n}(..)` instead of `{n}(x, ..)`"),
            ),
            None => match vocabulary::near_miss(n) {
                Some(builtin) => self.err(
                    &c.func,
                    format!("unknown function `{n}`: did you mean `{builtin}`? Kernels can call `#[device]` functions and {}", vocabulary::callable_list()),
                ),
                None => self.call_value(c),
            },
        }
    }

    /// A call of `intrinsic`, one of [`vocabulary::INTRINSICS`], written
    /// `name`.
    fn intrinsic_call(
        &mut self,
        c: &syn::ExprCall,
        intrinsic: Intrinsic,
        name: &str,
        hint: Option<Scalar>,
    ) -> Lowered<Expr> {
        match intrinsic {
            Intrinsic::ShflXor | Intrinsic::ShflDown => {
                self.arity(c, &c.args, 2, name)?;
                let value = self.expr(&c.args[0], hint)?;
                if !matches!(value.ty, Scalar::I32 | Scalar::U32 | Scalar::F32) {
                    return self.err(
                        &c.args[0],
                        format!("`{name}` moves 32-bit values (`i32`, `u32`, `f32`), not `{}`: convert the value with `as` first", value.ty.name()),
                    );
                }
                let lane = self.expr(&c.args[1], Some(Scalar::U32))?;
                let what = if intrinsic == Intrinsic::ShflXor {
                    "the lane mask"
                } else {
                    "the lane delta"
                };
                self.check_type(&c.args[1], lane.ty, Scalar::U32, what)?;
                Ok(Expr {
                    ty: value.ty,
                    kind: ExprKind::Call(intrinsic, vec![value, lane]),
                })
            }
            Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 => {
                self.arity(c, &c.args, 2, name)?;
                let mut halves = Vec::new();
                for (arg, what) in c.args.iter().zip(["the low half", "the high half"]) {
                    let v = self.expr(arg, Some(Scalar::F32))?;
                    self.check_type(arg, v.ty, Scalar::F32, what)?;
                    halves.push(v);
                }
                Ok(Expr {
                    ty: Scalar::U32,
                    kind: ExprKind::Call(intrinsic, halves),
                })
            }
            Intrinsic::ToTf32 => {
                self.arity(c, &c.args, 1, name)?;
                let v = self.expr(&c.args[0], Some(Scalar::F32))?;
                self.check_type(&c.args[0], v.ty, Scalar::F32, "the value to round to tf32")?;
                Ok(Expr {
                    ty: Scalar::U32,
                    kind: ExprKind::Call(Intrinsic::ToTf32, vec![v]),
                })
            }
            Intrinsic::FromBits => {
                self.arity(c, &c.args, 1, name)?;
                let bits = self.expr(&c.args[0], Some(Scalar::U32))?;
                self.check_type(
                    &c.args[0],
                    bits.ty,
                    Scalar::U32,
                    "the bits of `f32::from_bits`",
                )?;
                Ok(Expr {
                    ty: Scalar::F32,
                    kind: ExprKind::Call(Intrinsic::FromBits, vec![bits]),
                })
            }
            other => unreachable!("{other:?} is not among the intrinsics called as functions"),
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

    /// A call of the atomic `op`, written `name`: `None` when `name` is of
    /// the atomics' family but no atomic.
    fn atomic(&mut self, c: &syn::ExprCall, name: &str, op: Option<AtomicOp>) -> Lowered<Expr> {
        let Some(op) = op else {
            return self.err(
                &c.func,
                format!(
                    "unknown atomic `{name}`: the atomics are {}",
                    vocabulary::atomic_list()
                ),
            );
        };
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
        let Some(&MathMethod {
            intrinsic,
            args: arity,
            ..
        }) = vocabulary::math_method(&name)
        else {
            return self.err(
                &m.method,
                format!("unknown method `{name}`: the methods are `.len()` on slices, `.to_bits()` on f32 and the math methods {}", vocabulary::math_method_list()),
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
        self.refuse_storage_only(&m.receiver, ty, &format!("`.{name}()`"))?;
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
