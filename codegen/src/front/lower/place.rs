//! Places: what can be assigned, indexed or updated atomically (a scalar
//! local, an element of a register or shared array, an element of a slice
//! parameter), each checked for its use (read, write or atomic), its number
//! of indices, mutability and constant register indices.

use proc_macro2::Ident;

use super::check::ConstantRole;
use super::scope::Binding;
use super::syntax::index_chain;
use super::{Lowered, Lowerer};
use crate::front::errors::Reported;
use crate::ir::{Expr, LocalId, ParamType, Place, Scalar, Space};

/// How a place is used.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Access {
    Read,
    Write,
    Atomic,
}

impl Lowerer<'_> {
    pub(super) fn path_ident(&mut self, p: &syn::ExprPath) -> Lowered<Ident> {
        match p.path.get_ident() {
            Some(ident) if p.qself.is_none() => Ok(ident.clone()),
            _ => self.err(p, "paths are not supported in kernels: use a plain name"),
        }
    }

    /// A place: a scalar local, an array element, or a slice element.
    pub(super) fn place(&mut self, e: &syn::Expr, access: Access) -> Lowered<(Place, Scalar)> {
        let (path, index_exprs) = match index_chain(e) {
            (syn::Expr::Path(path), index_exprs) => (path, index_exprs),
            (root, _) => {
                return self.err(root, "only variables, array elements `a[i][j]` and slice elements `y[i]` can be indexed or assigned")
            }
        };
        let ident = self.path_ident(path)?;
        let binding = self.resolve(&ident)?;
        let mut indices = Vec::new();
        for idx in &index_exprs {
            indices.push(self.index(idx)?);
        }
        match binding {
            Binding::Broken => Err(Reported),
            Binding::Pipeline(_) => self.err(
                e,
                format!("`{ident}` is a pipeline, not a value: use its statements `{ident}.copy(..)`, `{ident}.commit()` and `{ident}.wait(N)`"),
            ),
            Binding::Tuple(_) => self.err(
                e,
                format!("`{ident}` is a tuple, which is immutable: make a new one, `let {ident} = (..);`, or copy a part into a `let mut`"),
            ),
            Binding::Closure(_) => self.err(
                e,
                format!("`{ident}` is a closure: it can be called, `{ident}(..)`, but not assigned or indexed"),
            ),
            Binding::Argument(_) => self.err(
                e,
                format!("`{ident}` is a parameter, a copy of its argument: declare it `mut {ident}: ..` in the function to assign it"),
            ),
            Binding::Slice { param, mutable } => {
                self.slice_place(e, &ident, param, mutable, indices, access)
            }
            Binding::View(v) => {
                let view = self.views[v].clone();
                let mut all = view.prefix;
                all.extend(indices);
                self.array_place(e, &ident, view.local, (view.mutable, true), all, &index_exprs, access)
            }
            Binding::Const(_) | Binding::Named(_) => self.err(
                e,
                format!(
                    "`{ident}` is {}: it can be read but not {}",
                    if matches!(binding, Binding::Const(_)) {
                        "a const parameter"
                    } else {
                        "a `const`"
                    },
                    if indices.is_empty() {
                        "assigned"
                    } else {
                        "indexed"
                    }
                ),
            ),
            Binding::Param(id) => {
                let ty = self.params[id as usize].ty;
                match ty {
                    ParamType::Scalar(_) if !indices.is_empty() => {
                        self.err(e, format!("`{ident}` is a scalar parameter and cannot be indexed: pass a slice `&[T]` to index it"))
                    }
                    ParamType::Scalar(_) => self.err(
                        e,
                        format!("parameters cannot be assigned: copy `{ident}` into a local first: `let mut {ident} = {ident};`"),
                    ),
                    ParamType::Slice { elem, mutable } => {
                        if indices.len() != 1 {
                            return self.err(e, format!("`{ident}` is a slice: index it with one index, `{ident}[i]`"));
                        }
                        if access != Access::Read && !mutable {
                            return self.err(
                                e,
                                format!(
                                    "`{ident}` is a read-only slice `&[{0}]`: declare the parameter as `&mut [{0}]` to write to it",
                                    elem.name()
                                ),
                            );
                        }
                        let index = indices.pop().expect("one index");
                        Ok((Place::Global { param: id, index }, elem))
                    }
                }
            }
            Binding::Local(id) => {
                let mutable = self.locals[id as usize].mutable;
                self.array_place(e, &ident, id, (mutable, false), indices, &index_exprs, access)
            }
        }
    }

    /// An element of the local `id` (a scalar or an array) that `ident`
    /// names, writable if `mutable`. `indices` are all of its indices, the
    /// last `index_exprs.len()` of them written here (the others index the
    /// row a device function's parameter is bound to). `parameter`: `ident`
    /// is a device function's parameter.
    #[allow(clippy::too_many_arguments)]
    fn array_place(
        &mut self,
        e: &syn::Expr,
        ident: &Ident,
        id: LocalId,
        (mutable, parameter): (bool, bool),
        indices: Vec<Expr>,
        index_exprs: &[&syn::Expr],
        access: Access,
    ) -> Lowered<(Place, Scalar)> {
        let local = &self.locals[id as usize];
        let written = indices.len() - index_exprs.len();
        let (ty, space, rank) = (local.ty, local.space, local.dims.len() - written);
        if index_exprs.len() != rank {
            let msg = match (rank, index_exprs.len()) {
                (0, _) => format!("`{ident}` is a scalar and cannot be indexed: declare an array to index it, e.g. `let mut {ident} = [0u32; 4];`"),
                (_, 0) if access == Access::Read => format!(
                    "the array `{ident}` is not a value: read one element, indexing all of its {rank} dimension(s)"
                ),
                _ => format!("`{ident}` has {rank} dimension(s): give one index per dimension, e.g. `{ident}{}`", "[i]".repeat(rank)),
            };
            return self.err(e, msg);
        }
        if access == Access::Atomic && space != Space::Shared {
            return self.err(
                e,
                format!("atomics update slice elements and shared array elements; `{ident}` belongs to one thread, so update it directly (`{ident} += v`)"),
            );
        }
        if access != Access::Read && !mutable {
            let msg = if self.loop_vars.contains(&id) {
                format!("`{ident}` is a loop variable and cannot be assigned: copy it into a local (`let mut j = {ident};`)")
            } else if parameter {
                format!("`{ident}` is a read-only parameter: declare it `&mut [..]` to write to it")
            } else {
                format!("cannot assign to `{ident}` because it is not `mut`: declare it as `let mut {ident}`")
            };
            return self.err(e, msg);
        }
        if space == Space::Register {
            for (idx, index) in index_exprs.iter().zip(&indices[written..]) {
                self.check_constant(idx, index, ConstantRole::RegisterIndex(ident))?;
            }
        }
        Ok((Place::Local { local: id, indices }, ty))
    }

    /// An index: an integer, `u32` for untyped literals.
    pub(super) fn index(&mut self, idx: &syn::Expr) -> Lowered<Expr> {
        let index = self.expr(idx, Some(Scalar::U32))?;
        if !index.ty.is_int() {
            return self.err(
                idx,
                format!(
                    "indices are integers, but this is `{}`: convert it with `as u32`",
                    index.ty.name()
                ),
            );
        }
        Ok(index)
    }
}
