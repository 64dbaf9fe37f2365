//! Expressions: literals (typed by their suffix or their context), names
//! and elements read as values, the scalar types' associated constants,
//! unary and binary operators with their type rules, and casts; calls and
//! methods go to `builtin` and `call`.

use quote::ToTokens;

use super::place::Access;
use super::scope::Binding;
use super::syntax::{binary_op, compound_op, is_untyped_literal, peel};
use super::{Lowered, Lowerer};
use crate::front::{assoc, types};
use crate::ir::{BinaryOp, Expr, ExprKind, Literal, ParamType, Scalar, UnaryOp};

impl Lowerer<'_> {
    pub(super) fn expr(&mut self, e: &syn::Expr, hint: Option<Scalar>) -> Lowered<Expr> {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit, false, hint),
            syn::Expr::Paren(p) => self.expr(&p.expr, hint),
            syn::Expr::Group(g) => self.expr(&g.expr, hint),
            syn::Expr::Path(_) | syn::Expr::Index(_) => self.read(e),
            syn::Expr::Unary(u) => self.unary(u, hint),
            syn::Expr::Binary(b) => self.binary(b, hint),
            syn::Expr::Cast(c) => self.cast(c),
            syn::Expr::Field(f) => match self.tuple_part(f)? {
                Some(part) => Ok(part),
                None => self.special(f),
            },
            syn::Expr::Call(c) => self.call(c, hint),
            syn::Expr::MethodCall(m) => self.method(m, hint),
            other => self.err(other, unsupported_expr_message(other)),
        }
    }

    pub(super) fn literal(
        &mut self,
        lit: &syn::Lit,
        negative: bool,
        hint: Option<Scalar>,
    ) -> Lowered<Expr> {
        let suffix_type = |this: &mut Self, suffix: &str| -> Lowered<Option<Scalar>> {
            if suffix.is_empty() {
                return Ok(None);
            }
            match Scalar::from_name(suffix) {
                Some(s) if s.is_storage_only() => {
                    this.refuse_storage_only(lit, s, "a literal")?;
                    Ok(Some(s))
                }
                Some(s) => Ok(Some(s)),
                None => this.err(lit, format!("unknown literal suffix `{suffix}`: use a scalar type such as `1u32` or `1.0f32`")),
            }
        };
        match lit {
            syn::Lit::Bool(b) => {
                if negative {
                    return self.err(lit, "`-` does not apply to `bool`: use `!`");
                }
                Ok(Expr::literal(Scalar::Bool, Literal::Bool(b.value)))
            }
            syn::Lit::Int(int) => {
                let text = int.base10_digits();
                let ty = match suffix_type(self, int.suffix())? {
                    Some(f) if f.is_float() => return self.float_literal(lit, text, f, negative),
                    Some(t) => t,
                    None => match hint {
                        Some(h) if h.is_int() => h,
                        Some(h) if h.is_float() => {
                            return self.err(
                                lit,
                                format!(
                                    "an integer literal where `{}` is expected: write `{text}.0`",
                                    h.name()
                                ),
                            )
                        }
                        _ => Scalar::I32,
                    },
                };
                if ty == Scalar::Bool {
                    return self.err(
                        lit,
                        "integer literals cannot be `bool`: write `true` or `false`",
                    );
                }
                let magnitude: u64 = match int.base10_parse() {
                    Ok(v) => v,
                    Err(_) => return self.err(lit, "this literal does not fit in 64 bits, the widest integers (`i64`, `u64`)"),
                };
                let value = if negative {
                    -i128::from(magnitude)
                } else {
                    i128::from(magnitude)
                };
                if !types::int_fits(value, ty) {
                    return self.err(
                        lit,
                        format!("the literal {value} does not fit in `{}`: use a wider type, e.g. with a suffix (`{value}i64`)", ty.name()),
                    );
                }
                Ok(Expr::literal(ty, Literal::Int(value as i64)))
            }
            syn::Lit::Float(f) => {
                let ty = match suffix_type(self, f.suffix())? {
                    Some(t) => t,
                    None => match hint {
                        Some(h) if h.is_float() => h,
                        Some(h) if h.is_int() => {
                            return self.err(
                                lit,
                                format!("a float literal where `{}` is expected: use an integer or convert with `as {}`", h.name(), h.name()),
                            )
                        }
                        _ => Scalar::F32,
                    },
                };
                self.float_literal(lit, f.base10_digits(), ty, negative)
            }
            other => self.err(other, "only number and `bool` literals exist in kernels: characters and strings have no GPU type"),
        }
    }

    fn float_literal(
        &mut self,
        lit: &syn::Lit,
        digits: &str,
        ty: Scalar,
        negative: bool,
    ) -> Lowered<Expr> {
        if !ty.is_float() {
            return self.err(
                lit,
                format!(
                    "a float literal cannot be `{}`: write an integer literal",
                    ty.name()
                ),
            );
        }
        let Ok(value) = digits.parse::<f64>() else {
            return self.err(
                lit,
                "this float literal cannot be read: write it as digits with a `.`, e.g. `1.5`",
            );
        };
        Ok(Expr::literal(
            ty,
            Literal::Float(if negative { -value } else { value }),
        ))
    }

    /// A name or an element as a value.
    fn read(&mut self, e: &syn::Expr) -> Lowered<Expr> {
        if let syn::Expr::Path(p) = e {
            if let Some(constant) = self.assoc_const(p)? {
                return Ok(constant);
            }
            let ident = self.path_ident(p)?;
            match self.resolve(&ident)? {
                Binding::Param(id) => {
                    return match self.params[id as usize].ty {
                        ParamType::Scalar(ty) => Ok(Expr { ty, kind: ExprKind::Param(id) }),
                        ParamType::Slice { .. } => self.err(
                            e,
                            format!("the slice `{ident}` is not a value: read an element `{ident}[i]` or its length `{ident}.len()`"),
                        ),
                    };
                }
                Binding::Const(id) => {
                    return Ok(Expr {
                        ty: self.const_params[id as usize].ty,
                        kind: ExprKind::Const(id),
                    });
                }
                Binding::Named(id) | Binding::Argument(id) => return Ok(self.named[id].clone()),
                Binding::Slice { .. } => {
                    return self.err(
                        e,
                        format!("the slice `{ident}` is not a value: read an element `{ident}[i]` or its length `{ident}.len()`"),
                    )
                }
                Binding::Tuple(t) => {
                    let count = self.tuples[t].len();
                    return self.err(
                        e,
                        format!("`{ident}` is a tuple of {count} values, not one value: read a part, `{ident}.0`, or destructure it, `let (a, b, ..) = {ident};`"),
                    );
                }
                Binding::Closure(_) => {
                    return self.err(
                        e,
                        format!("`{ident}` is a closure, not a value: call it, `{ident}(..)`, or pass it on to a device function"),
                    )
                }
                Binding::Local(_) | Binding::View(_) | Binding::Pipeline(_) | Binding::Broken => {}
            }
        }
        let (place, ty) = self.place(e, Access::Read)?;
        Ok(Expr {
            ty,
            kind: ExprKind::Load(Box::new(place)),
        })
    }

    /// `f32::INFINITY`, `u32::MAX`: a scalar type's associated constant, as a literal.
    fn assoc_const(&mut self, p: &syn::ExprPath) -> Lowered<Option<Expr>> {
        let segments: Vec<_> = p.path.segments.iter().collect();
        if p.qself.is_some() || segments.len() != 2 {
            return Ok(None);
        }
        let first = &segments[0].ident;
        let param = self
            .type_args
            .iter()
            .find(|(t, _)| t == first)
            .map(|(_, s)| *s);
        let Some(ty) = param.or_else(|| Scalar::from_name(&first.to_string())) else {
            return Ok(None);
        };
        let name = segments[1].ident.to_string();
        if name == "BYTES" {
            return Ok(Some(Expr::u32(ty.size_bytes())));
        }
        if name == "IS_FLOAT" {
            return Ok(Some(Expr::literal(
                Scalar::Bool,
                Literal::Bool(ty.is_float()),
            )));
        }
        self.refuse_storage_only(p, ty, &format!("`{name}`"))?;
        match assoc::value(ty, &name) {
            Some(lit) => Ok(Some(Expr::literal(ty, lit))),
            None => self.err(
                p,
                format!(
                    "`{}::{name}` is not a constant kernels know: use one of {}",
                    ty.name(),
                    assoc::NAMES
                ),
            ),
        }
    }

    fn unary(&mut self, u: &syn::ExprUnary, hint: Option<Scalar>) -> Lowered<Expr> {
        match u.op {
            syn::UnOp::Neg(_) => {
                if let syn::Expr::Lit(l) = peel(&u.expr) {
                    return self.literal(&l.lit, true, hint);
                }
                let a = self.expr(&u.expr, hint)?;
                self.refuse_storage_only(u, a.ty, "`-`")?;
                if !a.ty.is_signed() {
                    return self.err(
                        u,
                        format!("`-` needs a signed integer or a float, but this is `{}`: convert it first, e.g. `-(x as i32)`", a.ty.name()),
                    );
                }
                Ok(Expr { ty: a.ty, kind: ExprKind::Unary(UnaryOp::Neg, Box::new(a)) })
            }
            syn::UnOp::Not(_) => {
                let a = self.expr(&u.expr, hint)?;
                self.refuse_storage_only(u, a.ty, "`!`")?;
                if a.ty.is_float() {
                    return self.err(u, format!("`!` applies to `bool` and integers, not `{}`", a.ty.name()));
                }
                Ok(Expr { ty: a.ty, kind: ExprKind::Unary(UnaryOp::Not, Box::new(a)) })
            }
            _ => self.err(u, "dereferencing `*` is not supported: kernels have no references besides slice parameters"),
        }
    }

    pub(super) fn binary(&mut self, b: &syn::ExprBinary, hint: Option<Scalar>) -> Lowered<Expr> {
        if compound_op(&b.op).is_some() {
            return self.err(
                b,
                "compound assignment is a statement, not a value: put it on its own line",
            );
        }
        let op = binary_op(&b.op);
        let (lhs, rhs) = match op {
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => (
                self.expr(&b.left, Some(Scalar::Bool))?,
                self.without_hoisting(
                    "the right side of `&&` or `||`, which runs only sometimes",
                    |this| this.expr(&b.right, Some(Scalar::Bool)),
                )?,
            ),
            BinaryOp::Shl | BinaryOp::Shr => (
                self.expr(&b.left, hint)?,
                self.expr(&b.right, Some(Scalar::U32))?,
            ),
            op if op.is_comparison() => self.pair(&b.left, &b.right, None)?,
            _ => self.pair(&b.left, &b.right, hint)?,
        };
        self.build_binary(op, lhs, rhs, b)
    }

    /// Lowers two operands that must have the same type: an untyped literal
    /// takes the other operand's type.
    pub(super) fn pair(
        &mut self,
        a: &syn::Expr,
        b: &syn::Expr,
        hint: Option<Scalar>,
    ) -> Lowered<(Expr, Expr)> {
        if is_untyped_literal(a) && !is_untyped_literal(b) {
            let b = self.expr(b, hint)?;
            let a = self.expr(a, Some(b.ty))?;
            Ok((a, b))
        } else {
            let a = self.expr(a, hint)?;
            let b = self.expr(b, Some(a.ty))?;
            Ok((a, b))
        }
    }

    /// Type-checks and builds a binary operation (also for compound assignment).
    pub(super) fn build_binary(
        &mut self,
        op: BinaryOp,
        lhs: Expr,
        rhs: Expr,
        at: &syn::ExprBinary,
    ) -> Lowered<Expr> {
        let sym = at.op.to_token_stream().to_string();
        let (l, r) = (lhs.ty, rhs.ty);
        for ty in [l, r] {
            self.refuse_storage_only(at, ty, &format!("`{sym}`"))?;
        }
        let result = match op {
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                if l != Scalar::Bool || r != Scalar::Bool {
                    return self.err(
                        at,
                        format!("`{sym}` needs `bool` operands, but these are `{}` and `{}`: compare explicitly, e.g. `x != 0`", l.name(), r.name()),
                    );
                }
                Scalar::Bool
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                if !l.is_int() {
                    return self.err(&at.left, format!("`{sym}` shifts integers, not `{}`", l.name()));
                }
                self.check_type(&at.right, r, Scalar::U32, "a shift amount")?;
                l
            }
            _ if l != r => {
                return self.err(
                    at,
                    format!(
                        "mismatched types: `{}` {sym} `{}`: both operands of `{sym}` must have the same type; convert one with `as`, e.g. `(..) as {}`",
                        l.name(),
                        r.name(),
                        l.name()
                    ),
                )
            }
            op if op.is_comparison() => Scalar::Bool,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                if l.is_float() {
                    return self.err(at, format!("`{sym}` applies to integers and `bool`, not `{}`", l.name()));
                }
                l
            }
            _ => {
                if l == Scalar::Bool {
                    return self.err(at, format!("`{sym}` does not apply to `bool`: use `&&`, `||`, `!` or convert with `as u32`"));
                }
                l
            }
        };
        Ok(Expr {
            ty: result,
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        })
    }

    fn cast(&mut self, c: &syn::ExprCast) -> Lowered<Expr> {
        let to = match self.scalar(&c.ty) {
            Ok(t) => t,
            Err(msg) => return self.err(&c.ty, msg),
        };
        let value = self.expr(&c.expr, None)?;
        if value.ty != to {
            self.refuse_storage_only(c, value.ty, "`as`")?;
            self.refuse_storage_only(c, to, "`as`")?;
        }
        if to == Scalar::Bool && value.ty != Scalar::Bool {
            return self.err(
                c,
                "casting to `bool` is not supported: compare instead, e.g. `x != 0`",
            );
        }
        if value.ty == Scalar::Bool && to.is_float() {
            return self.err(
                c,
                format!(
                    "`bool` casts to integers only: write `(b as u32) as {}`",
                    to.name()
                ),
            );
        }
        if value.ty == to {
            return Ok(value);
        }
        Ok(Expr {
            ty: to,
            kind: ExprKind::Cast(Box::new(value)),
        })
    }
}

pub(super) fn macro_message() -> &'static str {
    "macros are not supported in kernels (there is no `println!` or `assert!` on the GPU): write the code out, or check inputs with `requires(..)` in `#[kernel(..)]`"
}

fn unsupported_expr_message(e: &syn::Expr) -> String {
    let what = match e {
        syn::Expr::Closure(_) => "a closure is only an argument of a device function whose parameter takes one (`f: impl FnMut(u32)`): write the code inline, or pass the closure to such a function",
        syn::Expr::Macro(_) => macro_message(),
        syn::Expr::Array(_) => "array literals are not supported: declare `let mut a = [0.0f32; N];` and assign the elements",
        syn::Expr::Repeat(_) => "`[v; N]` creates a register array and is only allowed as the value of a `let`: `let mut acc = [0.0f32; 8];`",
        syn::Expr::If(_) => "an `if` used as a value must be the whole value of a `let` or an assignment: `let v = if c { a } else { b };`",
        syn::Expr::Reference(_) => "`&` and `&mut` are only written in the first argument of an atomic: `atomic_add(&mut y[i], v)`",
        syn::Expr::Assign(_) => "an assignment is a statement, not a value: put it on its own line",
        syn::Expr::Block(_) | syn::Expr::Unsafe(_) => "blocks are not values in kernels: compute the value with `let`",
        syn::Expr::Match(_) => "`match` is not supported: use `if` / `else if` / `else`",
        syn::Expr::Range(_) => "ranges are only supported in `for` loops: `for i in a..b`",
        syn::Expr::Tuple(_) => "a tuple is not one value: name it, `let t = (a, b);`, and read its parts, `t.0`, or pass it to a device function's tuple parameter",
        syn::Expr::Struct(_) => "structs are not supported in kernels: use one variable per field",
        syn::Expr::Let(_) => "`let` in a condition (`if let`, `while let`) is not supported: use a `bool` condition",
        syn::Expr::Return(_) | syn::Expr::Break(_) | syn::Expr::Continue(_) => {
            "`return`, `break` and `continue` are statements, not values: put them on their own line"
        }
        syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) => {
            "loops do not produce values in kernels: assign to a variable inside the loop"
        }
        syn::Expr::Try(_) => "`?` is not supported in kernels: there are no `Result`s on the GPU",
        syn::Expr::Async(_) | syn::Expr::Await(_) => "`async` and `.await` are not supported in kernels",
        _ => "this expression is not supported in kernels: the kernel language (`warpforge::guide::dsl` on docs.rs) lists what a kernel may contain",
    };
    what.to_string()
}
