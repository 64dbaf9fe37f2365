//! Calls to device functions (`#[device] fn`): the functions a kernel is
//! linked with, the callees a body names, and the lowering of a call, which
//! inlines the callee's body at the call.
//!
//! A proc-macro sees only the item it is on, so the macros fetch callees
//! before the front runs: each `#[device]` function ships its tokens (with
//! those of everything it calls) through a macro of the same name, and the
//! caller's macro collects them into a [`Linked`] table, keyed by the call
//! paths as written in each body. The front then resolves a call through the
//! table of the function that makes it.
//!
//! Inlining binds each parameter to its argument: a scalar to the argument's
//! expression when reading it in place is the same as copying it (it reads no
//! array element and has no effect), else to a new local; a slice to the
//! caller's slice parameter; an array to the caller's array, or a row of it
//! (a prefix of indices); a const parameter to a constant expression
//! (`f::<4>(..)`, `f::<{ BM / 2 }>(..)`, or inferred from an array
//! argument's size). The body's statements go before the statement that
//! makes the call (hoisted), and the call's value is the body's tail
//! expression.

use proc_macro2::Ident;
use quote::ToTokens;
use syn::visit::Visit;

use super::check::ConstantRole;
use super::place::Access;
use super::scope::{Binding, Closure, View};
use super::syntax::{call_ident, index_chain, peel};
use super::{Lowered, Lowerer, Reported};
use crate::front::errors::Errors;
use crate::front::infer::Passed;
use crate::front::signature::{self, DeviceParamKind, DeviceSignature};
use crate::front::vocabulary;
use crate::ir::{Block, Expr, ExprKind, LocalId, ParamId, ParamType, Place, Scalar, Space, Stmt};

/// One `#[device]` function the item being compiled may reach.
#[derive(Clone)]
pub struct DeviceFn {
    /// Unique among all functions: crate, name and place of definition.
    pub id: String,
    /// The function as written, from its crate's source.
    pub item: syn::ItemFn,
    /// Whether its definition failed to compile (reported there): calls to
    /// it are not reported again.
    pub broken: bool,
    /// The function each call path of its body names: (path, id).
    pub calls: Vec<(String, String)>,
}

/// The device functions an item (a kernel or a device function) is compiled
/// with: everything it reaches, and the function each of its own call paths
/// names.
#[derive(Default)]
pub struct Linked {
    /// Every device function the item reaches, each once.
    pub functions: Vec<DeviceFn>,
    /// The item's own calls: (path, id).
    pub calls: Vec<(String, String)>,
}

impl Linked {
    /// The function `path` names in the body of `caller` (`None`: the item).
    fn resolve(&self, caller: Option<usize>, path: &str) -> Option<usize> {
        let calls = match caller {
            Some(f) => &self.functions[f].calls,
            None => &self.calls,
        };
        let (_, id) = calls.iter().find(|(p, _)| p == path)?;
        self.functions.iter().position(|f| &f.id == id)
    }
}

/// The text a call path is keyed by: its segments without generic arguments
/// (`crate::tile::swizzle` for `crate::tile::swizzle::<4>`).
pub fn path_key(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let lead = if path.leading_colon.is_some() {
        "::"
    } else {
        ""
    };
    format!("{lead}{}", segments.join("::"))
}

/// The path of a call without generic arguments: what names the callee's
/// macro.
pub fn bare_path(path: &syn::Path) -> syn::Path {
    let mut bare = path.clone();
    for segment in &mut bare.segments {
        segment.arguments = syn::PathArguments::None;
    }
    bare
}

/// The device functions `item`'s body calls, each path once, in order of
/// first use: every call that is not a built-in function of the language
/// nor of a name the function declares (a variable, which the front
/// reports).
pub fn callees(item: &syn::ItemFn) -> Vec<syn::Path> {
    #[derive(Default)]
    struct Finder {
        calls: Vec<syn::Path>,
        names: Vec<Ident>,
    }
    impl<'ast> Visit<'ast> for Finder {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Some(path) = device_path(c) {
                let key = path_key(path);
                if !self.calls.iter().any(|p| path_key(p) == key) {
                    self.calls.push(bare_path(path));
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.names.push(p.ident.clone());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut finder = Finder::default();
    finder.visit_item_fn(item);
    let Finder { calls, names } = finder;
    calls
        .into_iter()
        .filter(|p| p.get_ident().is_none_or(|i| !names.contains(i)))
        .collect()
}

/// The path of `c` if it calls a device function: a path that names no
/// built-in function and no near miss of one (`syncthreads`), which the
/// front reports.
fn device_path(c: &syn::ExprCall) -> Option<&syn::Path> {
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    if p.qself.is_some() {
        return None;
    }
    let first = p.path.segments.first()?.ident.to_string();
    if p.path.segments.len() > 1 && Scalar::from_name(&first).is_some() {
        return None; // `f32::from_bits`
    }
    match call_ident(c).map(|i| i.to_string()) {
        Some(name)
            if vocabulary::builtin(&name).is_some() || vocabulary::near_miss(&name).is_some() =>
        {
            None
        }
        _ => Some(&p.path),
    }
}

/// Lowers the body of device function `f` of `linked` with every scalar
/// parameter a constant of unknown value (a const parameter of a synthetic
/// kernel), slices and arrays of the declared types: the errors a function
/// has whatever calls it, reported once, at its definition.
pub fn check_device(linked: &Linked, f: usize, errors: &mut Errors) {
    let item = &linked.functions[f].item;
    let type_args = representatives(item, errors);
    let Some(sig) = signature::parse_device_signature(item, &type_args, errors) else {
        return;
    };
    let mut lower = Lowerer::new(errors, linked);
    lower.checking_definition = true;
    let mut site = CallSite {
        at: &item.sig.ident,
        name: item.sig.ident.to_string(),
        args: Vec::new(),
        consts: Vec::new(),
    };
    for decl in &sig.const_params {
        let id = lower.const_param(&decl.ident, decl.ty);
        site.consts.push(Some(Expr {
            ty: decl.ty,
            kind: ExprKind::Const(id),
        }));
    }
    for decl in &sig.params {
        let name = decl.ident.to_string();
        let arg = match &decl.kind {
            DeviceParamKind::Scalar { ty, mutable } => {
                let id = lower.const_param(&decl.ident, *ty);
                let value = Expr {
                    ty: *ty,
                    kind: ExprKind::Const(id),
                };
                match mutable {
                    true => Argument::Copy {
                        value,
                        mutable: true,
                    },
                    false => Argument::Value(value),
                }
            }
            DeviceParamKind::Tuple { parts } => {
                let parts = parts.iter().enumerate().map(|(i, ty)| {
                    let id = lower.unbound_const_param(format!("{}.{i}", decl.ident), *ty);
                    Argument::Value(Expr {
                        ty: *ty,
                        kind: ExprKind::Const(id),
                    })
                });
                Argument::Tuple(parts.collect())
            }
            DeviceParamKind::Slice { elem, mutable } => {
                let ty = ParamType::Slice {
                    elem: *elem,
                    mutable: *mutable,
                };
                Argument::Slice {
                    param: lower.param(&decl.ident, ty),
                    mutable: *mutable,
                }
            }
            DeviceParamKind::Array {
                elem,
                dims,
                space,
                mutable,
            } => {
                let Ok(sizes) = dims
                    .iter()
                    .map(|d| lower.constant_size(d, "an array size"))
                    .collect()
                else {
                    return;
                };
                let local = lower.new_local(name, *elem, *space, sizes, *mutable);
                Argument::Array(View {
                    local,
                    prefix: Vec::new(),
                    mutable: *mutable,
                })
            }
            DeviceParamKind::Closure { params } => {
                lower.closures.push(Closure {
                    syntax: None,
                    params: params.clone(),
                    scopes: Vec::new(),
                    type_args: Vec::new(),
                    caller: None,
                });
                Argument::Closure(lower.closures.len() - 1)
            }
        };
        site.args.push(arg);
    }
    let mut body = Block::new();
    let _reported = lower.hoisting(&mut body, |this, _| this.inline(f, &sig, site, type_args));
}

/// Each type parameter of `item` standing for a type of its bound: what a
/// body is checked with where the function is defined.
fn representatives(item: &syn::ItemFn, errors: &mut Errors) -> Vec<(Ident, Scalar)> {
    let params = signature::type_params(&item.sig, errors);
    params
        .into_iter()
        .map(|p| (p.ident, p.bound.representative()))
        .collect()
}

/// A call's type arguments and const arguments, each in declaration order,
/// `None` where left to inference.
type GenericArguments = (Vec<Option<Scalar>>, Vec<Option<Expr>>);

/// An argument bound to a parameter.
enum Argument {
    /// Read in place (a [`Binding::Named`]).
    Value(Expr),
    /// Copied into a new local by a `let` before the body.
    Copy {
        value: Expr,
        mutable: bool,
    },
    Slice {
        param: ParamId,
        mutable: bool,
    },
    Array(View),
    /// A tuple's parts, each bound as a scalar argument is.
    Tuple(Vec<Argument>),
    /// A closure: an index into `Lowerer::closures`.
    Closure(usize),
}

/// What the caller hands over: the arguments, the explicit const arguments
/// (`None` for those to infer), and where the call is for errors.
struct CallSite<'a> {
    at: &'a dyn ToTokens,
    name: String,
    args: Vec<Argument>,
    consts: Vec<Option<Expr>>,
}

impl Lowerer<'_> {
    /// The values of a call to a device function: none for a function
    /// without result, one per scalar of its result otherwise.
    pub(super) fn device_call(&mut self, c: &syn::ExprCall) -> Lowered<Vec<Expr>> {
        let syn::Expr::Path(p) = &*c.func else {
            return self.err(
                &c.func,
                "only named functions can be called: `f(..)` or `path::to::f(..)`",
            );
        };
        if let Some(ident) = call_ident(c) {
            match self.lookup(ident) {
                Some(Binding::Broken) => return Err(Reported),
                Some(Binding::Closure(closure)) => return self.closure_call(closure, c),
                Some(_) => {
                    return self.err(
                        &c.func,
                        format!("`{ident}` is a variable, not a function: kernels can call `#[device]` functions and {}", vocabulary::callable_list()),
                    )
                }
                None => {}
            }
        }
        let key = path_key(&p.path);
        let Some(f) = self.linked.resolve(self.caller, &key) else {
            return self.err(
                &c.func,
                format!(
                    "unknown function `{key}`: kernels can call `#[device]` functions and {}; math is written as methods (`x.sqrt()`)",
                    vocabulary::callable_list()
                ),
            );
        };
        let linked = self.linked;
        let def = &linked.functions[f];
        if def.broken {
            return Err(Reported);
        }
        let name = def.item.sig.ident.to_string();
        if let Some(at) = self.inlining.iter().position(|g| *g == f) {
            let chain: Vec<String> = self.inlining[at..]
                .iter()
                .map(|g| format!("`{}`", linked.functions[*g].item.sig.ident))
                .collect();
            let through = match chain.len() {
                1 => String::new(),
                _ => format!(" (through {})", chain.join(" -> ")),
            };
            return self.err(
                &c.func,
                format!(
                    "`{name}` calls itself{through}: device functions are inlined into the kernel, so they cannot recurse; write the repetition as a loop"
                ),
            );
        }
        let (types, consts) = self.generic_arguments(p, &def.item, &name)?;
        let type_args = self.type_arguments(c, &def.item, types, &name)?;
        let sig = signature::parse_device_signature(&def.item, &type_args, self.errors)
            .ok_or(Reported)?;
        if c.args.len() != sig.params.len() {
            let list: Vec<String> = sig
                .params
                .iter()
                .map(|p| format!("`{}`", p.ident))
                .collect();
            return self.err(
                c,
                format!(
                    "`{name}` takes {} argument(s) ({}), but {} were given",
                    sig.params.len(),
                    if list.is_empty() {
                        "none".to_string()
                    } else {
                        list.join(", ")
                    },
                    c.args.len()
                ),
            );
        }
        let mut args = Vec::new();
        let mut failed = None;
        for (arg, param) in c.args.iter().zip(&sig.params) {
            match self.argument(arg, param, &name) {
                Ok(a) => args.push(a),
                Err(r) => failed = Some(r),
            }
        }
        if let Some(r) = failed {
            return Err(r);
        }
        // A closure the call passes may write any variable or array of the
        // caller: then only what cannot change is read in place.
        let aliased: Vec<LocalId> = if args.iter().any(|a| matches!(a, Argument::Closure(_))) {
            self.mutable_locals()
        } else {
            args.iter()
                .filter_map(|a| match a {
                    Argument::Array(view) => Some(view.local),
                    _ => None,
                })
                .collect()
        };
        let scalars = args.iter_mut().flat_map(|arg| match arg {
            Argument::Tuple(parts) => parts.iter_mut().collect(),
            other => vec![other],
        });
        for arg in scalars {
            if let Argument::Copy {
                value,
                mutable: false,
            } = arg
            {
                if reads_in_place(value, &self.locals, &aliased) {
                    *arg = Argument::Value(value.clone());
                }
            }
        }
        let site = CallSite {
            at: c,
            name,
            args,
            consts,
        };
        self.inline(f, &sig, site, type_args)
    }

    /// `f::<A, B>`: the explicit type arguments and const arguments (the
    /// latter constants in the caller), each in declaration order; missing
    /// trailing ones are `None` (inferred from the arguments).
    fn generic_arguments(
        &mut self,
        p: &syn::ExprPath,
        item: &syn::ItemFn,
        name: &str,
    ) -> Lowered<GenericArguments> {
        let given: Vec<&syn::GenericArgument> = match p.path.segments.last().map(|s| &s.arguments) {
            Some(syn::PathArguments::AngleBracketed(a)) => a.args.iter().collect(),
            Some(syn::PathArguments::Parenthesized(a)) => {
                return self.err(a, "write generic arguments as `f::<A, B>(..)`")
            }
            _ => Vec::new(),
        };
        let generics: Vec<&syn::GenericParam> = item
            .sig
            .generics
            .params
            .iter()
            .filter(|g| !matches!(g, syn::GenericParam::Lifetime(_)))
            .collect();
        if given.len() > generics.len() {
            return self.err(
                p,
                format!(
                    "`{name}` takes {} generic argument(s), but {} were given",
                    generics.len(),
                    given.len()
                ),
            );
        }
        let (mut types, mut consts) = (Vec::new(), Vec::new());
        for (i, generic) in generics.into_iter().enumerate() {
            let arg = given.get(i);
            match generic {
                syn::GenericParam::Type(t) => match arg {
                    None => types.push(None),
                    Some(syn::GenericArgument::Type(ty)) => match self.scalar(ty) {
                        Ok(s) => types.push(Some(s)),
                        Err(msg) => return self.err(ty, msg),
                    },
                    Some(other) => {
                        return self.err(
                            other,
                            format!(
                                "`{}` of `{name}` is a type parameter: give a type, e.g. `f32`",
                                t.ident
                            ),
                        )
                    }
                },
                syn::GenericParam::Const(c) => {
                    let ty = crate::front::types::scalar(&c.ty).map_err(|_| Reported)?;
                    match arg {
                        None => consts.push(None),
                        Some(arg) => {
                            consts.push(Some(self.const_argument(arg, &c.ident, ty, name)?))
                        }
                    }
                }
                syn::GenericParam::Lifetime(_) => {}
            }
        }
        Ok((types, consts))
    }

    /// The value of the const argument `arg` for the const parameter `param`.
    pub(super) fn const_argument(
        &mut self,
        arg: &syn::GenericArgument,
        param: &Ident,
        ty: Scalar,
        name: &str,
    ) -> Lowered<Expr> {
        let what = format!("the const argument `{param}` of `{name}`");
        let expr: syn::Expr = match arg {
            syn::GenericArgument::Const(e) => e.clone(),
            // `f::<BM>` parses as a type: a const name.
            syn::GenericArgument::Type(syn::Type::Path(t)) if t.qself.is_none() => {
                syn::Expr::Path(syn::ExprPath {
                    attrs: Vec::new(),
                    qself: None,
                    path: t.path.clone(),
                })
            }
            other => {
                return self.err(
                    other,
                    format!("{what} is a value: a literal, a const name or `{{ expression }}`"),
                )
            }
        };
        let expr = match &expr {
            syn::Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                syn::Stmt::Expr(e, None) => e.clone(),
                _ => expr.clone(),
            },
            _ => expr,
        };
        let value = self.expr(&expr, Some(ty))?;
        self.check_type(&expr, value.ty, ty, &what)?;
        self.check_constant(&expr, &value, ConstantRole::Immediate(&what))?;
        Ok(value)
    }

    /// The type each type parameter of `item` stands for at the call `c`:
    /// given, or the element type of the first argument whose parameter is
    /// written with it (`x: T`, `&[T]`, `&mut [[T; N]; M]`); each must meet
    /// its bound.
    fn type_arguments(
        &mut self,
        c: &syn::ExprCall,
        item: &syn::ItemFn,
        given: Vec<Option<Scalar>>,
        name: &str,
    ) -> Lowered<Vec<(Ident, Scalar)>> {
        let params = signature::type_params(&item.sig, &mut Errors::default());
        let mut out = Vec::new();
        for (param, given) in params.iter().zip(given) {
            let inferred = given.or_else(|| {
                item.sig
                    .inputs
                    .iter()
                    .zip(&c.args)
                    .find_map(|(input, arg)| match input {
                        syn::FnArg::Typed(t)
                            if signature::element_name(&t.ty) == Some(&param.ident) =>
                        {
                            self.element_type(arg)
                        }
                        _ => None,
                    })
            });
            let Some(ty) = inferred else {
                return self.err(
                    c,
                    format!("the type `{}` of `{name}` cannot be inferred from the arguments: give it, `{name}::<f32, ..>(..)` (type and const arguments in declaration order)", param.ident),
                );
            };
            if !param.bound.admits(ty) {
                return self.err(
                    c,
                    format!(
                        "`{name}` needs `{}: {}`, but `{}` is `{}` here",
                        param.ident,
                        param.bound.name(),
                        param.ident,
                        ty.name()
                    ),
                );
            }
            out.push((param.ident.clone(), ty));
        }
        Ok(out)
    }

    /// The element type of an argument, as far as it shows without lowering
    /// it: a slice's, an array's (or a row's), a scalar's.
    fn element_type(&self, arg: &syn::Expr) -> Option<Scalar> {
        self.peek_type(borrowed(arg, false).unwrap_or(arg), None)
    }

    /// Lowers one argument, in the caller's scope, for `param`.
    fn argument(
        &mut self,
        arg: &syn::Expr,
        param: &signature::DeviceParamDecl,
        function: &str,
    ) -> Lowered<Argument> {
        let pname = &param.ident;
        match &param.kind {
            DeviceParamKind::Scalar { ty, mutable } => {
                let value = self.expr(arg, Some(*ty))?;
                self.check_type(
                    arg,
                    value.ty,
                    *ty,
                    &format!("the argument `{pname}` of `{function}`"),
                )?;
                // Whether it may be read in place depends on the arrays the
                // call passes: `device_call` decides once every argument is known.
                Ok(Argument::Copy {
                    value,
                    mutable: *mutable,
                })
            }
            DeviceParamKind::Tuple { parts } => {
                let what = format!("the argument `{pname}` of `{function}`");
                let values = self.tuple_values(arg, Some(parts), &what, None)?;
                let parts = values.into_iter().map(|value| Argument::Copy {
                    value,
                    mutable: false,
                });
                Ok(Argument::Tuple(parts.collect()))
            }
            DeviceParamKind::Slice { elem, mutable } => {
                let form = if *mutable { "&mut x" } else { "&x" };
                let ident = match borrowed_name(arg, *mutable) {
                    Some(ident) => ident,
                    None => {
                        return self.err(
                            arg,
                            format!("the argument `{pname}` of `{function}` is a slice parameter of the kernel, written `{form}`"),
                        )
                    }
                };
                let (param_id, writable) = match self.resolve(ident)? {
                    Binding::Param(id) => match self.params[id as usize].ty {
                        ParamType::Slice { mutable, .. } => (id, mutable),
                        ParamType::Scalar(_) => {
                            return self.not_a_slice(arg, ident, pname, function)
                        }
                    },
                    Binding::Slice { param, mutable } => (param, mutable),
                    _ => return self.not_a_slice(arg, ident, pname, function),
                };
                let ParamType::Slice { elem: got, .. } = self.params[param_id as usize].ty else {
                    unreachable!("resolved to a slice")
                };
                if got != *elem {
                    return self.err(
                        arg,
                        format!("the argument `{pname}` of `{function}` is a `[{}]`, but `{ident}` holds `{}`", elem.name(), got.name()),
                    );
                }
                if *mutable && !writable {
                    return self.err(
                        arg,
                        format!("`{function}` writes its argument `{pname}`, but `{ident}` is a read-only slice `&[{}]`: declare it `&mut [{}]`", got.name(), got.name()),
                    );
                }
                Ok(Argument::Slice {
                    param: param_id,
                    mutable: *mutable,
                })
            }
            DeviceParamKind::Array {
                elem,
                dims,
                space,
                mutable,
            } => {
                let form = if *mutable { "&mut a" } else { "&a" };
                // A parameter bound to an array is passed on as it is (`f(a)`).
                let inner = match borrowed(arg, *mutable) {
                    Some(inner) => inner,
                    None if self.is_view(arg) => arg,
                    None => {
                        return self.err(
                            arg,
                            format!("the argument `{pname}` of `{function}` is an array or a row of one, written `{form}` or `{form}[i]`"),
                        )
                    }
                };
                let view = self.array_view(inner, *mutable)?;
                let local = &self.locals[view.local as usize];
                let rank = local.dims.len() - view.prefix.len();
                let what = |space: Space| match space {
                    Space::Shared => "shared array",
                    _ => "register array",
                };
                if local.space != *space {
                    return self.err(
                        inner,
                        format!(
                            "the argument `{pname}` of `{function}` is a {}, but this is a {}{}",
                            what(*space),
                            what(local.space),
                            if *space == Space::Shared {
                                ""
                            } else {
                                ": mark the parameter `#[shared]` to take shared arrays"
                            }
                        ),
                    );
                }
                if local.ty != *elem || rank != dims.len() {
                    return self.err(
                        inner,
                        format!(
                            "the argument `{pname}` of `{function}` has {} dimension(s) of `{}`, but this has {rank} of `{}`",
                            dims.len(),
                            elem.name(),
                            local.ty.name()
                        ),
                    );
                }
                Ok(Argument::Array(view))
            }
            DeviceParamKind::Closure { params } => {
                self.closure_argument(arg, params, pname, function)
            }
        }
    }

    /// A closure written at a call for the closure parameter `pname` of
    /// `function`, or a closure parameter of the caller passed on.
    fn closure_argument(
        &mut self,
        arg: &syn::Expr,
        params: &[Scalar],
        pname: &Ident,
        function: &str,
    ) -> Lowered<Argument> {
        let what = format!("the argument `{pname}` of `{function}`");
        let closure = match peel(arg) {
            syn::Expr::Closure(closure) => Some(closure),
            syn::Expr::Path(p) => {
                if let Some(Binding::Closure(given)) =
                    p.path.get_ident().and_then(|i| self.lookup(i))
                {
                    let got = &self.closures[given].params;
                    if got != params {
                        return self.err(
                            arg,
                            format!(
                                "{what} takes {}, but this closure takes {}",
                                scalar_list(params),
                                scalar_list(got)
                            ),
                        );
                    }
                    return Ok(Argument::Closure(given));
                }
                None
            }
            _ => None,
        };
        let Some(closure) = closure else {
            return self.err(
                arg,
                format!(
                    "{what} is a closure: write it here, `|{}| {{ .. }}`",
                    closure_form(params)
                ),
            );
        };
        if let Some(m) = &closure.capture {
            return self.err(m, "a closure passed to a device function runs where it is called and uses the caller's variables themselves: remove `move`");
        }
        if closure.asyncness.is_some()
            || closure.constness.is_some()
            || closure.movability.is_some()
            || closure.lifetimes.is_some()
        {
            return self.err(
                closure,
                format!(
                    "write {what} as a plain closure, `|{}| {{ .. }}`",
                    closure_form(params)
                ),
            );
        }
        if !matches!(closure.output, syn::ReturnType::Default) {
            return self.err(
                &closure.output,
                "a closure passed to a device function returns nothing: remove the return type",
            );
        }
        if closure.inputs.len() != params.len() {
            return self.err(
                closure,
                format!(
                    "{what} takes {} ({}), but this closure takes {}",
                    params.len(),
                    scalar_list(params),
                    closure.inputs.len()
                ),
            );
        }
        for (input, ty) in closure.inputs.iter().zip(params) {
            let (pat, written) = match input {
                syn::Pat::Type(t) => (&*t.pat, Some(&t.ty)),
                other => (other, None),
            };
            if closure_param(pat).is_none() {
                return self.err(pat, "write each closure parameter as a name, `x` or `mut x`, or `_`, optionally with its type");
            }
            if let Some(written) = written {
                match self.scalar(written) {
                    Ok(got) if got == *ty => {}
                    _ => {
                        return self.err(
                            written,
                            format!(
                                "{what} takes `{}` here, as `{function}` declares",
                                ty.name()
                            ),
                        )
                    }
                }
            }
        }
        self.closures.push(Closure {
            syntax: Some(closure.clone()),
            params: params.to_vec(),
            scopes: self.scopes.clone(),
            type_args: self.type_args.clone(),
            caller: self.caller,
        });
        Ok(Argument::Closure(self.closures.len() - 1))
    }

    /// A call of closure `closure` (a closure parameter of the function
    /// being inlined): its body, lowered in the scope it was written in with
    /// its parameters bound to the arguments, runs before the statement.
    fn closure_call(&mut self, closure: usize, c: &syn::ExprCall) -> Lowered<Vec<Expr>> {
        self.no_generic_arguments(c)?;
        let name = call_ident(c).map(|i| i.to_string()).unwrap_or_default();
        let params = self.closures[closure].params.clone();
        if c.args.len() != params.len() {
            return self.err(
                c,
                format!(
                    "`{name}` takes {} argument(s) ({}), but {} were given",
                    params.len(),
                    scalar_list(&params),
                    c.args.len()
                ),
            );
        }
        let mut values = Vec::new();
        for (arg, ty) in c.args.iter().zip(&params) {
            let value = self.expr(arg, Some(*ty))?;
            self.check_type(arg, value.ty, *ty, &format!("the argument of `{name}`"))?;
            values.push(value);
        }
        let Some(syntax) = self.closures[closure].syntax.clone() else {
            return Ok(Vec::new()); // the stand-in of a definition's check
        };
        // The body may write any array of the scope it was written in, so
        // an argument reading an array element is copied first.
        let arrays: Vec<LocalId> = (0..self.locals.len() as LocalId)
            .filter(|l| !self.locals[*l as usize].dims.is_empty())
            .collect();
        let mut body = Block::new();
        let saved = self.enter_closure(closure);
        self.scopes.push(Vec::new());
        for (input, value) in syntax.inputs.iter().zip(values) {
            let pat = match input {
                syn::Pat::Type(t) => &*t.pat,
                other => other,
            };
            let (ident, mutable) =
                closure_param(pat).expect("checked where the closure was written");
            let arg = match !mutable && reads_in_place(&value, &self.locals, &arrays) {
                true => Argument::Value(value),
                false => Argument::Copy { value, mutable },
            };
            // `_` binds nothing, but an argument with an effect still runs.
            let name = ident.map_or("_".to_string(), |i| i.to_string());
            let binding = self.bind_argument(arg, name, &mut body);
            if let Some(ident) = ident {
                self.bind(ident, binding);
            }
        }
        let stmts = match &*syntax.body {
            syn::Expr::Block(b) if b.label.is_none() => b.block.stmts.clone(),
            other => vec![syn::Stmt::Expr(other.clone(), Some(Default::default()))],
        };
        // Statement by statement, so that a closure of the kernel's own body
        // is checked for its targets at each of its statements, as the
        // kernel's other statements are (not at the function's call).
        for (i, stmt) in stmts.iter().enumerate() {
            let mut lowered = Block::new();
            let _reported = self.hoisting(&mut lowered, |this, out| {
                this.stmt(stmt, &stmts[i + 1..], out)
            });
            if self.caller.is_none() {
                self.calls.push(super::InlinedCall {
                    at: stmt.to_token_stream(),
                    function: None,
                    body: lowered.clone(),
                });
            }
            body.extend(lowered);
        }
        self.leave_closure(saved);
        self.hoist(c, &name, body)?;
        Ok(Vec::new())
    }

    /// Every variable and array that may be assigned.
    fn mutable_locals(&self) -> Vec<LocalId> {
        (0..self.locals.len() as LocalId)
            .filter(|l| self.locals[*l as usize].mutable)
            .collect()
    }

    fn not_a_slice<T>(
        &mut self,
        arg: &syn::Expr,
        ident: &Ident,
        pname: &Ident,
        function: &str,
    ) -> Lowered<T> {
        self.err(
            arg,
            format!("the argument `{pname}` of `{function}` is a slice, but `{ident}` is not a slice parameter"),
        )
    }

    /// Whether `e` is a name bound to an array parameter.
    fn is_view(&self, e: &syn::Expr) -> bool {
        let syn::Expr::Path(p) = peel(e) else {
            return false;
        };
        let binding = p.path.get_ident().and_then(|i| self.lookup(i));
        matches!(binding, Some(Binding::View(_)))
    }

    /// `a`, `a[i]`, `a[i][j]`: an array or a row of it, for an argument
    /// that may write it when `mutable`.
    fn array_view(&mut self, e: &syn::Expr, mutable: bool) -> Lowered<View> {
        let (root, index_exprs) = index_chain(e);
        let ident = match peel(root) {
            syn::Expr::Path(p) => self.path_ident(p)?,
            other => return self.err(other, "pass an array by its name, or a row as `&a[i]`"),
        };
        let base = match self.resolve(&ident)? {
            Binding::Local(id) if !self.locals[id as usize].dims.is_empty() => View {
                local: id,
                prefix: Vec::new(),
                mutable: self.locals[id as usize].mutable,
            },
            Binding::View(v) => self.views[v].clone(),
            _ => {
                return self.err(
                    e,
                    format!("`{ident}` is not an array: pass a register array or a shared array"),
                )
            }
        };
        if mutable && !base.mutable {
            return self.err(e, format!("this call writes `{ident}`: declare it `let mut {ident}` (or take it as `&mut` in a device function)"));
        }
        let local = &self.locals[base.local as usize];
        let space = local.space;
        if index_exprs.len() >= local.dims.len() - base.prefix.len() {
            return self.err(e, format!("`{ident}[..]` is an element: pass the array, or a row with fewer indices than its dimensions"));
        }
        let mut view = base;
        for idx in index_exprs {
            let index = self.index(idx)?;
            if space == Space::Register {
                self.check_constant(idx, &index, ConstantRole::RegisterIndex(&ident))?;
            }
            view.prefix.push(index);
        }
        view.mutable = mutable;
        Ok(view)
    }

    /// Inlines the body of function `f` with `site`'s arguments; its values.
    fn inline(
        &mut self,
        f: usize,
        sig: &DeviceSignature,
        mut site: CallSite,
        type_args: Vec<(Ident, Scalar)>,
    ) -> Lowered<Vec<Expr>> {
        let linked = self.linked;
        let item = &linked.functions[f].item;
        let name = site.name.clone();
        // Const parameters given by the array sizes they declare (`[T; N]`).
        for (i, decl) in sig.const_params.iter().enumerate() {
            if site.consts[i].is_some() {
                continue;
            }
            let inferred =
                sig.params
                    .iter()
                    .zip(&site.args)
                    .find_map(|(p, a)| match (&p.kind, a) {
                        (DeviceParamKind::Array { dims, .. }, Argument::Array(view)) => {
                            let local = &self.locals[view.local as usize];
                            let actual = &local.dims[view.prefix.len()..];
                            dims.iter()
                                .zip(actual)
                                .find_map(|(d, a)| names_ident(d, &decl.ident).then(|| a.clone()))
                        }
                        _ => None,
                    });
            match inferred {
                Some(e) => site.consts[i] = Some(e),
                None => {
                    return self.err(
                        site.at,
                        format!(
                            "`{name}` needs the const argument `{}`: write it as `{name}::<..>(..)` (in declaration order)",
                            decl.ident
                        ),
                    )
                }
            }
        }

        let mut body = Block::new();
        let saved = self.enter_function(f, type_args);
        for (decl, value) in sig.const_params.iter().zip(site.consts) {
            let value = value.expect("every const argument is given or inferred");
            self.named.push(value);
            let named = Binding::Named(self.named.len() - 1);
            self.bind(&decl.ident, named);
        }
        let mut shape_checks = Vec::new();
        for (decl, arg) in sig.params.iter().zip(site.args) {
            let binding = match arg {
                Argument::Array(view) => {
                    if let DeviceParamKind::Array { dims, .. } = &decl.kind {
                        shape_checks.push((decl.ident.clone(), dims, view.clone()));
                    }
                    self.views.push(view);
                    Binding::View(self.views.len() - 1)
                }
                Argument::Tuple(parts) => {
                    let parts = parts.into_iter().enumerate().map(|(i, part)| {
                        self.bind_argument(part, format!("{}.{i}", decl.ident), &mut body)
                    });
                    let parts = parts.collect();
                    self.tuples.push(parts);
                    Binding::Tuple(self.tuples.len() - 1)
                }
                Argument::Closure(closure) => Binding::Closure(closure),
                other => self.bind_argument(other, decl.ident.to_string(), &mut body),
            };
            self.bind(&decl.ident, binding);
        }
        let shapes = self.check_shapes(&name, &shape_checks);
        let values = shapes.and_then(|()| self.function_body(item, sig, &mut body));
        self.leave_function(saved);
        let values = values?;
        if self.caller.is_none() {
            let mut inlined = body.clone();
            inlined.extend(values.iter().cloned().map(Stmt::Expr));
            self.calls.push(super::InlinedCall {
                at: site.at.to_token_stream(),
                function: Some(name.clone()),
                body: inlined,
            });
        }
        self.hoist(site.at, &name, body)?;
        Ok(values)
    }

    /// Puts the statements of a call to `name` before the statement that
    /// makes it.
    fn hoist(&mut self, at: &dyn ToTokens, name: &str, body: Block) -> Lowered<()> {
        if body.is_empty() {
            return Ok(());
        }
        match (self.hoisted.last_mut(), self.hoist_barrier) {
            (Some(hoisted), None) => {
                hoisted.extend(body);
                Ok(())
            }
            (_, barrier) => {
                let place = barrier.unwrap_or("an attribute expression");
                self.err(
                    at,
                    format!("`{name}` runs statements, so it cannot be called in {place}: call it before, `let v = {name}(..);`, and use `v`"),
                )
            }
        }
    }

    /// The binding of a scalar or slice argument (named `name`): read in
    /// place, or copied into a new local by a `let` in `body`.
    fn bind_argument(&mut self, arg: Argument, name: String, body: &mut Block) -> Binding {
        match arg {
            Argument::Value(value) => {
                self.named.push(value);
                Binding::Argument(self.named.len() - 1)
            }
            Argument::Copy { value, mutable } => {
                Binding::Local(self.copy_into_local(value, name, mutable, body))
            }
            Argument::Slice { param, mutable } => Binding::Slice { param, mutable },
            Argument::Array(_) | Argument::Tuple(_) | Argument::Closure(_) => {
                unreachable!("arrays, tuples and closures are bound by `inline`")
            }
        }
    }

    /// That each array argument has the sizes its parameter declares, in
    /// every variant: equal now, or checked once the variants are known.
    fn check_shapes(
        &mut self,
        function: &str,
        checks: &[(Ident, &Vec<syn::Expr>, View)],
    ) -> Lowered<()> {
        for (param, dims, view) in checks {
            let actual = self.locals[view.local as usize].dims[view.prefix.len()..].to_vec();
            for (dim, got) in dims.iter().zip(actual) {
                let want = self.constant_size(dim, "an array size")?;
                if want == got {
                    continue;
                }
                match (want.as_int(), got.as_int()) {
                    (Some(w), Some(g)) => {
                        return self.err(
                            dim,
                            format!("the argument `{param}` of `{function}` has size {g} here, but the parameter declares {w}"),
                        )
                    }
                    _ => self.variant_checks.push(super::warp::VariantCheck::shape(
                        dim,
                        self.guards.clone(),
                        format!("the argument `{param}` of `{function}`"),
                        want,
                        got,
                    )),
                }
            }
        }
        Ok(())
    }

    /// Lowers the body of a device function into `out`; its result values.
    fn function_body(
        &mut self,
        item: &syn::ItemFn,
        sig: &DeviceSignature,
        out: &mut Block,
    ) -> Lowered<Vec<Expr>> {
        let name = &item.sig.ident;
        let stmts = &item.block.stmts;
        if sig.output.is_empty() {
            self.block(stmts, out);
            return Ok(Vec::new());
        }
        let Some((syn::Stmt::Expr(tail, None), init)) = stmts.split_last() else {
            return self.err(
                &item.sig.output,
                format!("`{name}` returns a value: end its body with the value, an expression without `;`"),
            );
        };
        self.scopes.push(Vec::new());
        for (i, stmt) in init.iter().enumerate() {
            let _reported = self.hoisting(out, |this, out| this.stmt(stmt, &init[i + 1..], out));
        }
        let values = self.hoisting(out, |this, out| this.results(tail, &sig.output, name, out));
        self.scopes.pop();
        values
    }

    /// The tail of a function returning `types`: one value, or a tuple.
    fn results(
        &mut self,
        tail: &syn::Expr,
        types: &[Scalar],
        name: &Ident,
        out: &mut Block,
    ) -> Lowered<Vec<Expr>> {
        if types.len() != 1 && !matches!(peel(tail), syn::Expr::Tuple(_)) && self.makes_tuple(tail)
        {
            let what = format!("the result of `{name}`");
            return self.tuple_values(tail, Some(types), &what, Some(out));
        }
        let parts: Vec<&syn::Expr> = match (peel(tail), types.len()) {
            (syn::Expr::Tuple(t), n) if n != 1 => t.elems.iter().collect(),
            (_, 1) => vec![tail],
            (other, n) => {
                return self.err(
                    other,
                    format!("`{name}` returns a tuple of {n}: end its body with `(a, b, ..)`"),
                )
            }
        };
        if parts.len() != types.len() {
            return self.err(
                tail,
                format!(
                    "`{name}` returns {} values, but this tuple has {}",
                    types.len(),
                    parts.len()
                ),
            );
        }
        let mut values = Vec::new();
        for (part, ty) in parts.into_iter().zip(types) {
            let value = self.value(part, Some(*ty), out)?;
            self.check_type(part, value.ty, *ty, &format!("the result of `{name}`"))?;
            values.push(value);
        }
        Ok(values)
    }

    /// The type of scalar parameter `k` of the device function `c` calls,
    /// if it resolves.
    pub(super) fn argument_type(&self, c: &syn::ExprCall, at: Passed) -> Option<Scalar> {
        let path = device_path(c)?;
        let f = self.linked.resolve(self.caller, &path_key(path))?;
        let item = &self.linked.functions[f].item;
        let k = match at {
            Passed::Value(k) => k,
            Passed::Generic(k) => {
                let generics = item.sig.generics.params.iter();
                let generic = generics
                    .filter(|g| !matches!(g, syn::GenericParam::Lifetime(_)))
                    .nth(k)?;
                return match generic {
                    syn::GenericParam::Const(c) => crate::front::types::scalar(&c.ty).ok(),
                    _ => None,
                };
            }
        };
        let mut scratch = Errors::default();
        let type_args = representatives(item, &mut scratch);
        if let Some(syn::FnArg::Typed(t)) = item.sig.inputs.iter().nth(k) {
            // A type parameter is what the argument makes it.
            let written = signature::element_name(&t.ty);
            if type_args.iter().any(|(p, _)| Some(p) == written) {
                return None;
            }
        }
        let sig = signature::parse_device_signature(item, &type_args, &mut scratch)?;
        match sig.params.get(k)?.kind {
            DeviceParamKind::Scalar { ty, .. } => Some(ty),
            _ => None,
        }
    }

    /// Whether `c` calls a device function that returns several values.
    pub(super) fn returns_tuple(&self, c: &syn::ExprCall) -> bool {
        let Some(path) = device_path(c) else {
            return false;
        };
        let Some(f) = self.linked.resolve(self.caller, &path_key(path)) else {
            return false;
        };
        matches!(&self.linked.functions[f].item.sig.output,
            syn::ReturnType::Type(_, ty) if matches!(&**ty, syn::Type::Tuple(t) if t.elems.len() != 1))
    }

    /// Whether `c` calls a device function (rather than a built-in one).
    pub(super) fn is_device_call(c: &syn::ExprCall) -> bool {
        device_path(c).is_some()
    }

    /// Reads through a parameter of `Access` to a slice bound by a call.
    pub(super) fn slice_place(
        &mut self,
        e: &syn::Expr,
        ident: &Ident,
        param: ParamId,
        writable: bool,
        mut indices: Vec<Expr>,
        access: Access,
    ) -> Lowered<(Place, Scalar)> {
        let ParamType::Slice { elem, .. } = self.params[param as usize].ty else {
            unreachable!("a slice binding names a slice parameter")
        };
        if indices.len() != 1 {
            return self.err(
                e,
                format!("`{ident}` is a slice: index it with one index, `{ident}[i]`"),
            );
        }
        if access != Access::Read && !writable {
            return self.err(
                e,
                format!("`{ident}` is a read-only slice `&[{0}]`: declare the parameter as `&mut [{0}]` to write to it", elem.name()),
            );
        }
        let index = indices.pop().expect("one index");
        Ok((Place::Global { param, index }, elem))
    }
}

/// Whether reading `e` at each use is the same as copying it once: no array
/// or slice element (a callee may write it), no effect.
/// A scalar is never written by the callee, nor a register array element
/// unless the call passes its array, unless either is `aliased` (the
/// arrays the call passes, or with a closure every mutable local); shared
/// and slice elements may change under the callee (its barriers, its
/// stores).
fn reads_in_place(e: &Expr, locals: &[crate::ir::Local], aliased: &[LocalId]) -> bool {
    let in_place = |e: &Expr| reads_in_place(e, locals, aliased);
    match &e.kind {
        ExprKind::Literal(_)
        | ExprKind::Param(_)
        | ExprKind::Const(_)
        | ExprKind::Len(_)
        | ExprKind::Special(_) => true,
        ExprKind::Load(place) => match &**place {
            Place::Local { local, indices } if indices.is_empty() => !aliased.contains(local),
            Place::Local { local, indices } => {
                locals[*local as usize].space == Space::Register
                    && !aliased.contains(local)
                    && indices.iter().all(in_place)
            }
            Place::Global { .. } => false,
        },
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => in_place(a),
        ExprKind::Binary(_, a, b) => in_place(a) && in_place(b),
        ExprKind::Select(c, a, b) => in_place(c) && in_place(a) && in_place(b),
        ExprKind::Call(_, args) => args.iter().all(in_place),
        ExprKind::Atomic { .. } => false,
    }
}

/// A closure parameter's name (`None` for `_`) and whether it is `mut`,
/// if written as a name or `_`.
fn closure_param(pat: &syn::Pat) -> Option<(Option<&Ident>, bool)> {
    match pat {
        syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
            Some((Some(&p.ident), p.mutability.is_some()))
        }
        syn::Pat::Wild(_) => Some((None, false)),
        _ => None,
    }
}

/// `u32, f32` for messages; "nothing" for no parameters.
fn scalar_list(types: &[Scalar]) -> String {
    match types.len() {
        0 => "no arguments".to_string(),
        _ => types
            .iter()
            .map(|t| format!("`{}`", t.name()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `a: u32, b: f32`: the parameters of a closure of `types`, for messages.
fn closure_form(types: &[Scalar]) -> String {
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let parts = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{}: {}", names.get(i).unwrap_or(&"x"), t.name()));
    parts.collect::<Vec<_>>().join(", ")
}

/// Whether the size expression `e` is the bare name `ident`.
fn names_ident(e: &syn::Expr, ident: &Ident) -> bool {
    matches!(peel(e), syn::Expr::Path(p) if p.path.is_ident(ident))
}

/// `x`, `&x` or `&mut x` (the last only when `mutable`): the name.
fn borrowed_name(e: &syn::Expr, mutable: bool) -> Option<&Ident> {
    match peel(borrowed(e, mutable).unwrap_or(e)) {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

/// The operand of `&mut x`, or when not `mutable` also of `&x`.
fn borrowed(e: &syn::Expr, mutable: bool) -> Option<&syn::Expr> {
    match peel(e) {
        syn::Expr::Reference(r) if r.mutability.is_some() || !mutable => Some(&r.expr),
        _ => None,
    }
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
