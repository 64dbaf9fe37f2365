//! Declarations: `let` (scalars, register and shared arrays, pipelines,
//! tuples, in `tuple`) with the type an untyped
//! literal takes from the code after it, the annotations of `let`, and the
//! body's `const` items.

use proc_macro2::Ident;

use super::scope::Binding;
use super::syntax::{call_builtin, is_untyped_literal, peel, repeat_parts};
use super::{Lowered, Lowerer};
use crate::front::constness;
use crate::front::errors::Reported;
use crate::front::vocabulary::{Builtin, Construct};
use crate::ir::{Block, Expr, LocalId, Scalar, Space, Stmt};

impl Lowerer<'_> {
    /// `const NAME: TYPE = VALUE;`: a name for a compile-time constant
    /// expression (over literals, const parameters, other such names and
    /// `#[unroll]` loop variables), in scope until the end of its block. It
    /// emits nothing: each use reads the expression in its place, so a name
    /// serves wherever its expression would (array sizes, loop bounds,
    /// register indices).
    pub(super) fn const_item(&mut self, c: &syn::ItemConst) -> Lowered<()> {
        let result = self.const_value(c);
        let binding = match result {
            Ok(value) => {
                self.named.push(value);
                Binding::Named(self.named.len() - 1)
            }
            Err(Reported) => Binding::Broken,
        };
        self.bind(&c.ident, binding);
        match binding {
            Binding::Broken => Err(Reported),
            _ => Ok(()),
        }
    }

    fn const_value(&mut self, c: &syn::ItemConst) -> Lowered<Expr> {
        if let Some(a) = c.attrs.first() {
            return self.err(a, "attributes on a kernel's `const` are not supported");
        }
        if !matches!(c.vis, syn::Visibility::Inherited) {
            return self.err(
                &c.vis,
                "a kernel's `const` is local to the kernel: remove the visibility",
            );
        }
        if !c.generics.params.is_empty() {
            return self.err(
                &c.generics,
                "a kernel's `const` takes no generic parameters",
            );
        }
        let ty = match self.scalar(&c.ty) {
            Ok(ty) => ty,
            Err(msg) => return self.err(&c.ty, msg),
        };
        let value = self.expr(&c.expr, Some(ty))?;
        self.check_type(&c.expr, value.ty, ty, "the value of the `const`")?;
        if let Some(part) = constness::non_constant_part(&value, &self.names(), &self.unroll_vars) {
            return self.err(
                &c.expr,
                format!(
                    "the value of `const {}` must be a compile-time constant (literals, const parameters, other `const`s and variables of `#[unroll]` loops), but this uses {part}: use `let` for a run-time value",
                    c.ident
                ),
            );
        }
        Ok(value)
    }

    pub(super) fn let_stmt(
        &mut self,
        local: &syn::Local,
        rest: &[syn::Stmt],
        out: &mut Block,
    ) -> Lowered<()> {
        let (pat, annotation) = match &local.pat {
            syn::Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
            other => (other, None),
        };
        let (ident, mutable) = match pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                (Some(&p.ident), p.mutability.is_some())
            }
            syn::Pat::Wild(_) => (None, false),
            syn::Pat::Tuple(t) if annotation.is_none() => {
                let Some(init) = local.init.as_ref().filter(|i| i.diverge.is_none()) else {
                    return self.err(
                        t,
                        "a tuple pattern needs a tuple: `let (a, b) = f(..);` or `let (a, b) = t;`",
                    );
                };
                return self.let_tuple(t, &init.expr, out);
            }
            other => {
                return self.err(
                    other,
                    "destructuring is not supported: declare one variable per `let`",
                )
            }
        };
        if let (Some(ident), Some(init)) = (ident, &local.init) {
            if init.diverge.is_none() && self.makes_tuple(&init.expr) {
                let result = self.let_tuple_name(ident, mutable, annotation, &init.expr, out);
                if result.is_err() {
                    self.bind(ident, Binding::Broken);
                }
                return result;
            }
        }
        if let Some(syn::Expr::Call(c)) = local.init.as_ref().map(|init| peel(&init.expr)) {
            if matches!(
                call_builtin(c),
                Some(Builtin::Function(Construct::Pipeline))
            ) {
                let result = self.pipeline_decl(local, ident, mutable, annotation, c);
                if let Some(ident) = ident {
                    self.bind(ident, result.map_or(Binding::Broken, Binding::Pipeline));
                }
                return result.map(|_| ());
            }
        }
        let result = self.let_local(local, ident, mutable, annotation, rest, out);
        if let Some(ident) = ident {
            let binding = match result {
                Ok(Some(id)) => Binding::Local(id),
                _ => Binding::Broken,
            };
            self.bind(ident, binding);
        }
        result.map(|_| ())
    }

    /// Lowers the declaration; the caller binds the name, so the initializer
    /// still sees what the name shadowed (`let x = x + 1;`).
    fn let_local(
        &mut self,
        local: &syn::Local,
        ident: Option<&Ident>,
        mutable: bool,
        annotation: Option<&syn::Type>,
        rest: &[syn::Stmt],
        out: &mut Block,
    ) -> Lowered<Option<LocalId>> {
        if let Some(a) = local.attrs.first() {
            return self.err(a, "attributes on `let` are not supported");
        }
        let init = match &local.init {
            Some(init) if init.diverge.is_some() => {
                return self.err(
                    &local.pat,
                    "`let .. else` is not supported: use `if` and `return`",
                )
            }
            Some(init) => Some(peel(&init.expr)),
            None => None,
        };
        let declared = annotation.map(|ty| self.declared_type(ty)).transpose()?;
        let name = ident.map_or_else(|| "_".to_string(), |i| i.to_string());
        // An untyped literal value takes the type the following code uses the variable with.
        let inferred = match (ident, &declared, init) {
            (Some(ident), None, Some(init)) if is_untyped_literal(repeat_parts(init).0) => {
                self.type_from_uses(ident, rest)
            }
            _ => None,
        };

        match init {
            Some(syn::Expr::Call(c))
                if matches!(call_builtin(c), Some(Builtin::Function(Construct::Shared))) =>
            {
                self.arity(c, &c.args, 0, "shared")?;
                let Some((elem, dims)) = declared.filter(|(_, dims)| !dims.is_empty()) else {
                    return self.err(
                        &local.pat,
                        format!(
                            "a shared array needs its element type and shape: `let mut {name}: [[f32; 32]; 32] = shared();`"
                        ),
                    );
                };
                let id = self.new_local(name, elem, Space::Shared, dims, mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: None,
                });
                Ok(Some(id))
            }
            Some(repeat @ syn::Expr::Repeat(_)) => {
                let (splat, lengths) = repeat_parts(repeat);
                let dims = lengths
                    .iter()
                    .map(|len| self.constant_size(len, "an array size"))
                    .collect::<Lowered<Vec<_>>>()?;
                let value =
                    self.expr(splat, declared.as_ref().map(|(elem, _)| *elem).or(inferred))?;
                if let Some((elem, declared_dims)) = &declared {
                    self.check_type(splat, value.ty, *elem, "the initial value of the elements")?;
                    if *declared_dims != dims {
                        return self.err(
                            annotation,
                            "the annotated array shape differs from the initializer's: write the same sizes in both (or drop the annotation)",
                        );
                    }
                }
                if constness::has_atomic(&value) {
                    return self.err(splat, "the initial value of an array cannot contain an atomic: bind it to a variable first");
                }
                let id = self.new_local(name, value.ty, Space::Register, dims, mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: Some(value),
                });
                Ok(Some(id))
            }
            None => match declared {
                Some((elem, dims)) if !dims.is_empty() => {
                    let id = self.new_local(name, elem, Space::Register, dims, mutable);
                    out.push(Stmt::Let {
                        local: id,
                        init: None,
                    });
                    Ok(Some(id))
                }
                Some((elem, _)) => self.err(
                    &local.pat,
                    format!(
                        "give `{name}` an initial value: `let {name}: {0} = ..;`",
                        elem.name()
                    ),
                ),
                None => self.err(
                    &local.pat,
                    format!("give `{name}` an initial value: `let {name} = ..;`"),
                ),
            },
            Some(init) => {
                if let Some((_, dims)) = &declared {
                    if !dims.is_empty() {
                        return self.err(
                            init,
                            "an array is created with `[v; N]` (registers) or `shared()` (shared memory), not from another value",
                        );
                    }
                }
                let hint = declared.as_ref().map(|(elem, _)| *elem);
                let value = self.value(init, hint.or(inferred), out)?;
                if let Some(want) = hint {
                    self.check_type(init, value.ty, want, &format!("the value of `{name}`"))?;
                }
                if ident.is_none() {
                    // `let _ = e;` keeps only the effect of `e` (an atomic).
                    if constness::has_atomic(&value) {
                        out.push(Stmt::Expr(value));
                    }
                    return Ok(None);
                }
                let id = self.new_local(name, value.ty, Space::Register, Vec::new(), mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: Some(value),
                });
                Ok(Some(id))
            }
        }
    }

    /// A `let` annotation: a scalar, or nested arrays of one (`[[f32; N]; M]`, dims outermost first).
    fn declared_type(&mut self, ty: &syn::Type) -> Lowered<(Scalar, Vec<Expr>)> {
        match ty {
            syn::Type::Array(a) => {
                let outer = self.constant_size(&a.len, "an array size")?;
                let (elem, mut dims) = self.declared_type(&a.elem)?;
                dims.insert(0, outer);
                Ok((elem, dims))
            }
            syn::Type::Paren(p) => self.declared_type(&p.elem),
            other => match self.scalar(other) {
                Ok(s) => Ok((s, Vec::new())),
                Err(msg) => self.err(other, msg),
            },
        }
    }
}
