//! Names and what they refer to: the bindings of parameters, locals,
//! pipelines, body `const`s and a device function's parameters, the scopes
//! that hold them (innermost last, later bindings shadowing earlier ones),
//! their resolution, the declaration of parameters and locals, and the
//! switch of scopes into and out of an inlined device function's body.

use proc_macro2::Ident;

use super::{Lowered, Lowerer};
use crate::front::constness::Names;
use crate::front::errors::Reported;
use crate::front::types;
use crate::front::vocabulary::{self, Builtin, Construct};
use crate::ir::{
    ConstId, ConstParam, Expr, Local, LocalId, Param, ParamId, ParamType, Scalar, Space,
};

/// What a name in scope refers to.
#[derive(Clone, Copy)]
pub(super) enum Binding {
    Param(ParamId),
    Const(ConstId),
    Local(LocalId),
    /// A pipeline (`let pipe = pipeline(STAGES);`): an index into `Lowerer::pipelines`.
    Pipeline(usize),
    /// A `const` of the body (`const ROWS: u32 = BM / 8;`): an index into
    /// `Lowerer::named`, whose expression each use reads in its place.
    Named(usize),
    /// A scalar parameter of a device function read in place: its
    /// argument, an index into `Lowerer::named`.
    Argument(usize),
    /// A slice parameter of a device function: the kernel's slice, which
    /// the function may write if `mutable`.
    Slice {
        param: ParamId,
        mutable: bool,
    },
    /// An array parameter of a device function: an index into
    /// `Lowerer::views`.
    View(usize),
    /// A tuple of scalars: an index into `Lowerer::tuples`, which holds the
    /// binding of each part.
    Tuple(usize),
    /// A closure parameter of a device function: an index into
    /// `Lowerer::closures`.
    Closure(usize),
    /// A declaration that failed; uses are not reported again.
    Broken,
}

/// A closure passed to a device function: its syntax and the scope it was
/// written in, where each call of it lowers its body.
pub(super) struct Closure {
    /// `None` for the stand-in a body is checked with at its definition,
    /// which runs nothing.
    pub(super) syntax: Option<syn::ExprClosure>,
    /// Its parameters' types, as the device function declares them.
    pub(super) params: Vec<Scalar>,
    pub(super) scopes: Vec<Vec<(String, Binding)>>,
    pub(super) type_args: Vec<(Ident, Scalar)>,
    pub(super) caller: Option<usize>,
}

/// An array or a row of one, as a device function's parameter sees it:
/// `prefix` indexes the outer dimensions of `local`.
#[derive(Clone)]
pub(super) struct View {
    pub(super) local: LocalId,
    pub(super) prefix: Vec<Expr>,
    pub(super) mutable: bool,
}

/// What [`Lowerer::enter_function`] sets aside for the caller.
pub(super) struct CallerState {
    scopes: Vec<Vec<(String, Binding)>>,
    type_args: Vec<(Ident, Scalar)>,
    loop_depth: u32,
    caller: Option<usize>,
    in_closure: bool,
}

impl Lowerer<'_> {
    /// The scalar a type names: a type parameter in scope or a scalar type.
    pub(super) fn scalar(&self, ty: &syn::Type) -> Result<Scalar, String> {
        types::scalar_in(ty, &self.type_args)
    }

    /// Declares and binds a run-time parameter.
    pub(super) fn param(&mut self, ident: &Ident, ty: ParamType) -> ParamId {
        self.params.push(Param {
            name: ident.to_string(),
            ty,
            tensor_map: None,
        });
        let id = (self.params.len() - 1) as ParamId;
        self.bind(ident, Binding::Param(id));
        id
    }

    /// Declares and binds a const parameter.
    pub(super) fn const_param(&mut self, ident: &Ident, ty: Scalar) -> ConstId {
        let id = self.unbound_const_param(ident.to_string(), ty);
        self.bind(ident, Binding::Const(id));
        id
    }

    /// Declares a const parameter that no name binds (a part of a tuple
    /// parameter, bound through its tuple).
    pub(super) fn unbound_const_param(&mut self, name: String, ty: Scalar) -> ConstId {
        self.const_params.push(ConstParam { name, ty });
        (self.const_params.len() - 1) as ConstId
    }

    pub(super) fn bind(&mut self, ident: &Ident, binding: Binding) {
        self.scopes
            .last_mut()
            .expect("a scope is always open")
            .push((ident.to_string(), binding));
    }

    pub(super) fn lookup(&self, ident: &Ident) -> Option<Binding> {
        let mut bindings = self.scopes.iter().rev().flat_map(|s| s.iter().rev());
        bindings.find(|(n, _)| ident == n).map(|(_, b)| *b)
    }

    pub(super) fn resolve(&mut self, ident: &Ident) -> Lowered<Binding> {
        let name = ident.to_string();
        match self.lookup(ident) {
            Some(Binding::Broken) => Err(Reported),
            Some(binding) => Ok(binding),
            None if matches!(
                vocabulary::builtin(&name),
                Some(
                    Builtin::Special(_)
                        | Builtin::Function(Construct::LaneId | Construct::ClusterRank)
                )
            ) =>
            {
                Err(self.errors.push(ident, format!("`{name}` is a function: call it, e.g. `{name}()`")))
            }
            None => Err(self.errors.push(
                ident,
                format!("cannot find `{name}` in this kernel: declare it with `let` before using it, or add a parameter"),
            )),
        }
    }

    pub(super) fn new_local(
        &mut self,
        name: String,
        ty: Scalar,
        space: Space,
        dims: Vec<Expr>,
        mutable: bool,
    ) -> LocalId {
        self.locals.push(Local {
            name,
            ty,
            space,
            dims,
            mutable,
        });
        (self.locals.len() - 1) as LocalId
    }

    pub(super) fn names(&self) -> Names<'_> {
        Names {
            params: &self.params,
            locals: &self.locals,
        }
    }

    /// Sets the caller's scopes, loops and type parameters aside to lower
    /// the body of device function `f` with the types `type_args`.
    pub(super) fn enter_function(
        &mut self,
        f: usize,
        type_args: Vec<(Ident, Scalar)>,
    ) -> CallerState {
        self.inlining.push(f);
        CallerState {
            scopes: std::mem::replace(&mut self.scopes, vec![Vec::new()]),
            type_args: std::mem::replace(&mut self.type_args, type_args),
            loop_depth: std::mem::replace(&mut self.loop_depth, 0),
            caller: self.caller.replace(f),
            in_closure: std::mem::replace(&mut self.in_closure, false),
        }
    }

    /// Sets the scopes of the device function calling `closure` aside to
    /// lower its body in the scope it was written in.
    pub(super) fn enter_closure(&mut self, closure: usize) -> CallerState {
        let c = &self.closures[closure];
        let (scopes, type_args, caller) = (c.scopes.clone(), c.type_args.clone(), c.caller);
        CallerState {
            scopes: std::mem::replace(&mut self.scopes, scopes),
            type_args: std::mem::replace(&mut self.type_args, type_args),
            loop_depth: std::mem::replace(&mut self.loop_depth, 0),
            caller: std::mem::replace(&mut self.caller, caller),
            in_closure: std::mem::replace(&mut self.in_closure, true),
        }
    }

    pub(super) fn leave_closure(&mut self, saved: CallerState) {
        self.scopes = saved.scopes;
        self.type_args = saved.type_args;
        self.loop_depth = saved.loop_depth;
        self.caller = saved.caller;
        self.in_closure = saved.in_closure;
    }

    pub(super) fn leave_function(&mut self, saved: CallerState) {
        self.inlining.pop();
        self.scopes = saved.scopes;
        self.type_args = saved.type_args;
        self.loop_depth = saved.loop_depth;
        self.caller = saved.caller;
        self.in_closure = saved.in_closure;
    }
}
