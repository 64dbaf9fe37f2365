//! Tuples of scalars: one name for several values (`let slot = (row, col,
//! first);`), a device function's parameter (`slot: (u32, u32, u32)`) or
//! result, read by part (`slot.0`) or destructured (`let (row, col, first)
//! = slot;`).
//!
//! A tuple has no storage of its own: each part is bound as a name is, to
//! a constant read in place (literals, const parameters, `#[unroll]`
//! variables and expressions of them), to the immutable local it was made
//! from, or else to a new immutable local holding the value. So handing a tuple on
//! costs nothing, and it is immutable: its parts are the values they had
//! when it was made, as in Rust when a variable it was made from changes
//! later.

use proc_macro2::Ident;

use super::scope::Binding;
use super::syntax::peel;
use super::{Lowered, Lowerer};
use crate::front::constness;
use crate::ir::{Block, Expr, ExprKind, Place, Scalar, Space, Stmt};

impl Lowerer<'_> {
    /// Whether `e` makes a tuple: `(a, b, ..)`, a name bound to one, or a
    /// call of a device function that returns several values.
    pub(super) fn makes_tuple(&self, e: &syn::Expr) -> bool {
        match peel(e) {
            syn::Expr::Tuple(t) => t.elems.len() != 1,
            syn::Expr::Path(p) => {
                let binding = p.path.get_ident().and_then(|i| self.lookup(i));
                matches!(binding, Some(Binding::Tuple(_)))
            }
            syn::Expr::Call(c) => self.returns_tuple(c),
            _ => false,
        }
    }

    /// The values of the tuple `e` makes (see [`Self::makes_tuple`]), each
    /// of the type in `types` when given; `what` names the tuple in errors.
    /// With `out` (a statement's), a part may be an `if` value (as a `let`'s
    /// may); without (an argument), it is an expression.
    pub(super) fn tuple_values(
        &mut self,
        e: &syn::Expr,
        types: Option<&[Scalar]>,
        what: &str,
        mut out: Option<&mut Block>,
    ) -> Lowered<Vec<Expr>> {
        let values = match peel(e) {
            syn::Expr::Tuple(t) => {
                if let Some(types) = types.filter(|types| types.len() != t.elems.len()) {
                    return self.arity_mismatch(t, what, types.len(), t.elems.len());
                }
                let mut values = Vec::new();
                for (i, part) in t.elems.iter().enumerate() {
                    let hint = types.map(|types| types[i]);
                    values.push(match out.as_deref_mut() {
                        Some(out) => self.value(part, hint, out)?,
                        None => self.expr(part, hint)?,
                    });
                }
                values
            }
            syn::Expr::Path(p) => {
                let ident = self.path_ident(p)?;
                let Binding::Tuple(t) = self.resolve(&ident)? else {
                    return self.err(
                        e,
                        format!("{what} is a tuple: write `(a, b, ..)` or pass a tuple's name"),
                    );
                };
                let parts = self.tuples[t].clone();
                parts.into_iter().map(|b| self.part_value(b)).collect()
            }
            syn::Expr::Call(c) if self.returns_tuple(c) => self.device_call(c)?,
            other => {
                return self.err(
                    other,
                    format!("{what} is a tuple: write `(a, b, ..)` or pass a tuple's name"),
                )
            }
        };
        if let Some(types) = types {
            if types.len() != values.len() {
                return self.arity_mismatch(e, what, types.len(), values.len());
            }
            let parts = match peel(e) {
                syn::Expr::Tuple(t) => t.elems.iter().collect(),
                _ => vec![e; values.len()],
            };
            for (i, (value, want)) in values.iter().zip(types).enumerate() {
                self.check_type(parts[i], value.ty, *want, &format!("part {i} of {what}"))?;
            }
        }
        Ok(values)
    }

    fn arity_mismatch<T>(
        &mut self,
        at: impl quote::ToTokens,
        what: &str,
        want: usize,
        got: usize,
    ) -> Lowered<T> {
        self.err(
            at,
            format!("{what} is a tuple of {want} values, but this has {got}"),
        )
    }

    /// `let slot = (a, b, ..);` (or a tuple's name, or a call returning
    /// several values): binds `ident` to the tuple.
    pub(super) fn let_tuple_name(
        &mut self,
        ident: &Ident,
        mutable: bool,
        annotation: Option<&syn::Type>,
        init: &syn::Expr,
        out: &mut Block,
    ) -> Lowered<()> {
        if mutable {
            return self.err(
                ident,
                format!("a tuple is immutable: remove the `mut` and make a new one where the values change (`let {ident} = (..);`)"),
            );
        }
        let types = match annotation {
            None => None,
            Some(syn::Type::Tuple(t)) if t.elems.len() != 1 => {
                let mut types = Vec::new();
                for elem in &t.elems {
                    match self.scalar(elem) {
                        Ok(s) => types.push(s),
                        Err(msg) => return self.err(elem, msg),
                    }
                }
                Some(types)
            }
            Some(other) => {
                return self.err(
                    other,
                    "this is a tuple: annotate it with a tuple of scalars, `(u32, f32)`, or drop the annotation",
                )
            }
        };
        let what = format!("`{ident}`");
        let values = self.tuple_values(init, types.as_deref(), &what, Some(out))?;
        let parts = values
            .into_iter()
            .enumerate()
            .map(|(i, value)| self.part_binding(value, format!("{ident}.{i}"), out))
            .collect();
        self.tuples.push(parts);
        let binding = Binding::Tuple(self.tuples.len() - 1);
        self.bind(ident, binding);
        Ok(())
    }

    /// `let (a, mut b, _) = t;` for a tuple `t` (see [`Self::makes_tuple`]):
    /// binds each name to its part, a `mut` one to a copy.
    pub(super) fn let_tuple(
        &mut self,
        tuple: &syn::PatTuple,
        init: &syn::Expr,
        out: &mut Block,
    ) -> Lowered<()> {
        if !self.makes_tuple(init) {
            return self.err(tuple, "only a tuple is destructured: `let (a, b) = f(..);`, `let (a, b) = t;` or `let (a, b) = (x, y);`");
        }
        let values = self.tuple_values(init, None, "the value", Some(out))?;
        if values.len() != tuple.elems.len() {
            return self.err(
                tuple,
                format!(
                    "this tuple has {} value(s), but the pattern has {}",
                    values.len(),
                    tuple.elems.len()
                ),
            );
        }
        let mut names = Vec::new();
        for (pat, value) in tuple.elems.iter().zip(values) {
            match pat {
                syn::Pat::Wild(_) => {}
                syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                    let name = p.ident.to_string();
                    let binding = match p.mutability {
                        Some(_) => Binding::Local(self.copy_into_local(value, name, true, out)),
                        None => self.part_binding(value, name, out),
                    };
                    names.push((p.ident.clone(), binding));
                }
                other => return self.err(other, "each part of the pattern is a name or `_`"),
            }
        }
        for (ident, binding) in names {
            self.bind(&ident, binding);
        }
        Ok(())
    }

    /// `t.0`: part 0 of the tuple `t`; `None` when `f` is no tuple's field.
    pub(super) fn tuple_part(&mut self, f: &syn::ExprField) -> Lowered<Option<Expr>> {
        let syn::Expr::Path(p) = peel(&f.base) else {
            return Ok(None);
        };
        let Some(ident) = p.path.get_ident() else {
            return Ok(None);
        };
        let Some(Binding::Tuple(t)) = self.lookup(ident) else {
            return Ok(None);
        };
        let count = self.tuples[t].len();
        let index = match &f.member {
            syn::Member::Unnamed(i) if (i.index as usize) < count => i.index as usize,
            other => {
                return self.err(
                    other,
                    format!("`{ident}` is a tuple of {count} values: its parts are `{ident}.0` to `{ident}.{}`", count - 1),
                )
            }
        };
        Ok(Some(self.part_value(self.tuples[t][index])))
    }

    /// The type of part `f` of a tuple, if `f` is one.
    pub(super) fn tuple_part_type(&self, f: &syn::ExprField) -> Option<Scalar> {
        let syn::Expr::Path(p) = peel(&f.base) else {
            return None;
        };
        let Some(Binding::Tuple(t)) = self.lookup(p.path.get_ident()?) else {
            return None;
        };
        let syn::Member::Unnamed(i) = &f.member else {
            return None;
        };
        let part = *self.tuples[t].get(i.index as usize)?;
        Some(self.part_value(part).ty)
    }

    /// The value a part's binding reads.
    pub(super) fn part_value(&self, part: Binding) -> Expr {
        match part {
            Binding::Local(id) => Expr {
                ty: self.locals[id as usize].ty,
                kind: ExprKind::Load(Box::new(Place::Local {
                    local: id,
                    indices: Vec::new(),
                })),
            },
            Binding::Named(id) | Binding::Argument(id) => self.named[id].clone(),
            Binding::Const(id) => Expr {
                ty: self.const_params[id as usize].ty,
                kind: ExprKind::Const(id),
            },
            _ => unreachable!("a tuple's part is a local, a constant or an argument"),
        }
    }

    /// How a part made of `value` is bound: to the immutable local it
    /// reads, to a constant read in place, or to a new immutable local.
    fn part_binding(&mut self, value: Expr, name: String, out: &mut Block) -> Binding {
        // A constant (`BK / 2`, an `#[unroll]` variable) stays one where it
        // is read: a loop bound, a register index, a test ptxas folds.
        let constant = constness::non_constant_part(&value, &self.names(), &self.unroll_vars);
        if constant.is_none() {
            self.named.push(value);
            return Binding::Named(self.named.len() - 1);
        }
        match &value.kind {
            ExprKind::Load(place) => match &**place {
                Place::Local { local, indices }
                    if indices.is_empty() && !self.locals[*local as usize].mutable =>
                {
                    Binding::Local(*local)
                }
                _ => Binding::Local(self.copy_into_local(value, name, false, out)),
            },
            _ => Binding::Local(self.copy_into_local(value, name, false, out)),
        }
    }

    /// A new scalar local holding `value`.
    pub(super) fn copy_into_local(
        &mut self,
        value: Expr,
        name: String,
        mutable: bool,
        out: &mut Block,
    ) -> crate::ir::LocalId {
        let id = self.new_local(name, value.ty, Space::Register, Vec::new(), mutable);
        out.push(Stmt::Let {
            local: id,
            init: Some(value),
        });
        id
    }
}
