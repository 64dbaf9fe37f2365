//! The kernel's signature: run-time parameters and const generic parameters.

use proc_macro2::Ident;

use super::errors::Errors;
use super::types::{self, Bound, TypeArgs};
use quote::ToTokens;

use crate::ir::{ParamType, Scalar, Space};

pub struct ConstParamDecl {
    pub ident: Ident,
    pub ty: Scalar,
}

pub struct ParamDecl {
    pub ident: Ident,
    pub ty: ParamType,
    pub tensor_map: Option<TensorMapAttr>,
}

/// `#[tensor_map(shape = [..], strides = [..], tile = [..], swizzle = S)]`
/// on a slice parameter, as written; the lowering checks the expressions.
pub struct TensorMapAttr {
    pub attr: syn::Attribute,
    pub shape: Vec<syn::Expr>,
    pub strides: Vec<syn::Expr>,
    pub tile: Vec<syn::Expr>,
    pub swizzle: Option<syn::Expr>,
}

const TENSOR_MAP_FORM: &str = "write `#[tensor_map(shape = [rows, cols], strides = [row_stride], tile = [TILE_ROWS, TILE_COLS], swizzle = 128)]`: lists outermost first, strides in elements for every dimension but the innermost, swizzle 0, 32, 64 or 128 (optional, 0 by default)";

fn tensor_map_attr(attr: &syn::Attribute) -> syn::Result<TensorMapAttr> {
    let mut out = TensorMapAttr {
        attr: attr.clone(),
        shape: Vec::new(),
        strides: Vec::new(),
        tile: Vec::new(),
        swizzle: None,
    };
    let (mut shape, mut tile) = (false, false);
    attr.parse_nested_meta(|meta| {
        let list = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<Vec<syn::Expr>> {
            let array: syn::ExprArray = meta.value()?.parse()?;
            Ok(array.elems.into_iter().collect())
        };
        if meta.path.is_ident("shape") {
            out.shape = list(&meta)?;
            shape = true;
        } else if meta.path.is_ident("strides") {
            out.strides = list(&meta)?;
        } else if meta.path.is_ident("tile") {
            out.tile = list(&meta)?;
            tile = true;
        } else if meta.path.is_ident("swizzle") {
            out.swizzle = Some(meta.value()?.parse()?);
        } else {
            return Err(meta.error(format!("unknown tensor map option: {TENSOR_MAP_FORM}")));
        }
        Ok(())
    })?;
    if !(shape && tile) {
        return Err(syn::Error::new_spanned(
            attr,
            format!("a tensor map needs its `shape` and its `tile`: {TENSOR_MAP_FORM}"),
        ));
    }
    Ok(out)
}

/// A type parameter `T: Bound`.
pub struct TypeParamDecl {
    pub ident: Ident,
    pub bound: Bound,
}

pub struct Signature {
    pub const_params: Vec<ConstParamDecl>,
    pub params: Vec<ParamDecl>,
    /// Names of parameters whose declaration had an error: uses of them in
    /// the body are not reported again.
    pub broken: Vec<Ident>,
}

/// The kernel's signature with its type parameters standing for `args`.
pub fn parse_signature(item: &syn::ItemFn, args: &TypeArgs, errors: &mut Errors) -> Signature {
    let sig = &item.sig;
    for attr in &item.attrs {
        if !attr.path().is_ident("doc") {
            errors.push(attr, "attributes other than doc comments are not supported on a kernel: put options in `#[kernel(..)]`");
        }
    }
    check_qualifiers(sig, "a kernel", errors);
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        errors.push(
            ty,
            "kernels return nothing: write results into a `&mut [T]` parameter and remove the return type",
        );
    }

    let mut out = Signature {
        const_params: Vec::new(),
        params: Vec::new(),
        broken: Vec::new(),
    };
    let mut names = UniqueNames::default();
    out.const_params = generics(sig, &mut names, &mut out.broken, errors).0;
    for input in &sig.inputs {
        let Some((ident, _, arg)) = typed_input(input, false, &mut names, errors) else {
            continue;
        };
        let mut tensor_map = None;
        for attr in &arg.attrs {
            if !attr.path().is_ident("tensor_map") {
                errors.push(attr, "the only attribute on a kernel parameter is `#[tensor_map(..)]`, on a slice the TMA copies tiles of");
                continue;
            }
            match tensor_map_attr(attr) {
                Ok(_) if tensor_map.is_some() => {
                    errors.push(attr, "a slice has one tensor map: remove this one");
                }
                Ok(map) => tensor_map = Some(map),
                Err(e) => {
                    errors.push_error(e);
                    out.broken.push(ident.clone());
                }
            }
        }
        match param_type(&arg.ty, args) {
            Ok(ty) => out.params.push(ParamDecl {
                ident,
                ty,
                tensor_map,
            }),
            Err(msg) => {
                errors.push(&arg.ty, msg);
                out.broken.push(ident);
            }
        }
    }
    out
}

/// What a device function takes: its const generic parameters, parameters
/// and result, as declared.
pub struct DeviceSignature {
    pub const_params: Vec<ConstParamDecl>,
    pub params: Vec<DeviceParamDecl>,
    /// The result's scalars: none for `()`, one for a scalar, several for a tuple.
    pub output: Vec<Scalar>,
}

pub struct DeviceParamDecl {
    pub ident: Ident,
    pub kind: DeviceParamKind,
}

/// How a device function's parameter binds its argument.
pub enum DeviceParamKind {
    /// `x: f32` (a copy; `mut x: f32` may be assigned in the body).
    Scalar { ty: Scalar, mutable: bool },
    /// `x: (u32, f32, ..)`: a tuple of scalars, bound part by part as
    /// scalars are.
    Tuple { parts: Vec<Scalar> },
    /// `x: &[T]` or `x: &mut [T]`: a slice parameter of the kernel.
    Slice { elem: Scalar, mutable: bool },
    /// `a: &[[T; N]; M]` or `&mut ..`: a register array, or with `#[shared]`
    /// a shared array, or a row of either (an array of lower rank). `dims`
    /// are the declared sizes, outermost first, over the function's const
    /// parameters.
    Array {
        elem: Scalar,
        dims: Vec<syn::Expr>,
        space: Space,
        mutable: bool,
    },
    /// `step: impl FnMut(u32, u32)` (or `impl Fn`): a closure the caller
    /// writes at the call, taking scalars and returning nothing. Each call
    /// of it in the body runs the closure's body there, in the caller's
    /// scope (its variables, arrays and slices).
    Closure { params: Vec<Scalar> },
}

/// The signature of a `#[device]` function with its type parameters
/// standing for `args`; `None` when it has an error (reported).
pub fn parse_device_signature(
    item: &syn::ItemFn,
    args: &TypeArgs,
    errors: &mut Errors,
) -> Option<DeviceSignature> {
    let fail = |errors: &mut Errors, at: &dyn ToTokens, msg: &str| {
        errors.push(at, msg);
    };
    let before = errors.len();
    let sig = &item.sig;
    for attr in &item.attrs {
        if !attr.path().is_ident("doc") {
            fail(errors, attr, "attributes other than doc comments are not supported on a device function: `#[device]` takes no options");
        }
    }
    check_qualifiers(sig, "a device function", errors);
    let mut names = UniqueNames::default();
    let mut broken = Vec::new();
    let const_params = generics(sig, &mut names, &mut broken, errors).0;
    let mut params = Vec::new();
    for input in &sig.inputs {
        let Some((ident, mutable, arg)) = typed_input(input, true, &mut names, errors) else {
            continue;
        };
        let mut space = Space::Register;
        for attr in &arg.attrs {
            if attr.path().is_ident("shared") && matches!(attr.meta, syn::Meta::Path(_)) {
                space = Space::Shared;
            } else {
                fail(errors, attr, "the only attribute on a parameter is `#[shared]`, on an array that lives in shared memory");
            }
        }
        match device_param_type(&arg.ty, mutable, space, args) {
            Ok(kind) => params.push(DeviceParamDecl { ident, kind }),
            Err(msg) => fail(errors, &arg.ty, &msg),
        }
    }
    let output = match &sig.output {
        syn::ReturnType::Default => Vec::new(),
        syn::ReturnType::Type(_, ty) => match &**ty {
            syn::Type::Tuple(t) => {
                let mut scalars = Vec::new();
                for elem in &t.elems {
                    match types::scalar_in(elem, args) {
                        Ok(s) => scalars.push(s),
                        Err(msg) => fail(errors, elem, &msg),
                    }
                }
                scalars
            }
            other => match types::scalar_in(other, args) {
                Ok(s) => vec![s],
                Err(_) => {
                    fail(errors, other, "a device function returns a scalar, a tuple of scalars or nothing: write arrays through a `&mut` parameter");
                    Vec::new()
                }
            },
        },
    };
    (broken.is_empty() && errors.len() == before).then_some(DeviceSignature {
        const_params,
        params,
        output,
    })
}

/// Qualifiers neither kernels nor device functions take; `what` names the function.
fn check_qualifiers(sig: &syn::Signature, what: &str, errors: &mut Errors) {
    if let Some(t) = &sig.constness {
        errors.push(t, format!("{what} cannot be `const`: remove `const`"));
    }
    if let Some(t) = &sig.asyncness {
        errors.push(t, format!("{what} cannot be `async`: remove `async`"));
    }
    if let Some(t) = &sig.unsafety {
        errors.push(
            t,
            format!(
                "{what} cannot be `unsafe`: remove `unsafe` (launches are checked by the runtime)"
            ),
        );
    }
    if let Some(t) = &sig.abi {
        errors.push(
            t,
            format!("{what} has no ABI to choose: remove the `extern`"),
        );
    }
    if let Some(t) = &sig.variadic {
        errors.push(
            t,
            format!("{what} cannot be variadic: declare each parameter"),
        );
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.push(clause, format!("`where` clauses are not supported on {what}: the only generics are `const NAME: u32` parameters"));
    }
}

/// Reports a name declared twice among a function's parameters.
#[derive(Default)]
struct UniqueNames(Vec<Ident>);

impl UniqueNames {
    fn check(&mut self, ident: &Ident, errors: &mut Errors) {
        if self.0.contains(ident) {
            errors.push(
                ident,
                format!("`{ident}` is declared twice: give each parameter its own name"),
            );
        }
        self.0.push(ident.clone());
    }
}

/// The type parameters of a signature, in order; a bound that is not one of
/// the language's is reported.
pub fn type_params(sig: &syn::Signature, errors: &mut Errors) -> Vec<TypeParamDecl> {
    generics(sig, &mut UniqueNames::default(), &mut Vec::new(), errors).1
}

/// The `const NAME: u32` generics and the type parameters; names with a
/// broken type go to `broken`.
fn generics(
    sig: &syn::Signature,
    names: &mut UniqueNames,
    broken: &mut Vec<Ident>,
    errors: &mut Errors,
) -> (Vec<ConstParamDecl>, Vec<TypeParamDecl>) {
    let mut out = Vec::new();
    let mut types = Vec::new();
    for param in &sig.generics.params {
        match param {
            syn::GenericParam::Const(c) => {
                names.check(&c.ident, errors);
                if let Some(default) = &c.default {
                    errors.push(
                        default,
                        "const parameters take their values from `tune(..)` or the call: remove the default",
                    );
                }
                match types::scalar(&c.ty) {
                    Ok(ty @ (Scalar::U32 | Scalar::I32 | Scalar::Bool)) => {
                        out.push(ConstParamDecl {
                            ident: c.ident.clone(),
                            ty,
                        })
                    }
                    Ok(other) => {
                        errors.push(
                            &c.ty,
                            format!(
                                "const parameters are `u32`, `i32` or `bool`, not `{}`: declare it `const NAME: u32`",
                                other.name()
                            ),
                        );
                        broken.push(c.ident.clone());
                    }
                    Err(msg) => {
                        errors.push(&c.ty, msg);
                        broken.push(c.ident.clone());
                    }
                }
            }
            syn::GenericParam::Type(t) => {
                names.check(&t.ident, errors);
                if let Some(default) = &t.default {
                    errors.push(default, "type parameters take their types from `instances(..)` or the call: remove the default");
                }
                let mut bound = Bound::Any;
                for b in &t.bounds {
                    let known = match b {
                        syn::TypeParamBound::Trait(tr) if tr.path.get_ident().is_some() => {
                            Bound::from_name(&tr.path.get_ident().expect("checked").to_string())
                        }
                        _ => None,
                    };
                    match known {
                        Some(k) if bound == Bound::Any => bound = k,
                        Some(_) => {
                            errors
                                .push(b, "a type parameter takes one bound: choose the narrowest");
                        }
                        None => {
                            errors.push(
                                b,
                                format!("unknown bound: the bounds are {}", types::BOUNDS),
                            );
                        }
                    }
                }
                types.push(TypeParamDecl {
                    ident: t.ident.clone(),
                    bound,
                });
            }
            syn::GenericParam::Lifetime(l) => {
                errors.push(l, "kernels and device functions take no lifetime parameters: remove it (slices are borrowed for the launch)");
            }
        }
    }
    (out, types)
}

/// A parameter `name: Type`: its name, whether it is `mut` (allowed when
/// `allow_mut`), and its syntax.
fn typed_input<'a>(
    input: &'a syn::FnArg,
    allow_mut: bool,
    names: &mut UniqueNames,
    errors: &mut Errors,
) -> Option<(Ident, bool, &'a syn::PatType)> {
    let syn::FnArg::Typed(arg) = input else {
        errors.push(
            input,
            "kernels and device functions are free functions: remove `self`",
        );
        return None;
    };
    let (ident, mutable) = match &*arg.pat {
        syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
            if let (Some(m), false) = (&p.mutability, allow_mut) {
                errors.push(
                    m,
                    format!("parameters cannot be `mut`: copy it into a local instead: `let mut {0} = {0};`", p.ident),
                );
            }
            (p.ident.clone(), p.mutability.is_some())
        }
        other => {
            errors.push(
                other,
                "write each parameter as `name: Type`; patterns are not supported",
            );
            return None;
        }
    };
    names.check(&ident, errors);
    Some((ident, mutable, arg))
}

fn device_param_type(
    ty: &syn::Type,
    mutable: bool,
    space: Space,
    args: &TypeArgs,
) -> Result<DeviceParamKind, String> {
    let shared_misplaced =
        || "`#[shared]` marks an array parameter (`&[[T; N]; M]`): remove it here".to_string();
    match ty {
        syn::Type::ImplTrait(t) if space == Space::Register => closure_type(t, args),
        syn::Type::Reference(r) => {
            if mutable {
                return Err("a reference parameter cannot be `mut`: remove the `mut` before its name".into());
            }
            let by_mut = r.mutability.is_some();
            match &*r.elem {
                syn::Type::Slice(slice) if space == Space::Register => Ok(DeviceParamKind::Slice {
                    elem: types::scalar_in(&slice.elem, args)?,
                    mutable: by_mut,
                }),
                syn::Type::Slice(_) => Err(shared_misplaced()),
                array @ syn::Type::Array(_) => {
                    let (elem, dims) = array_type(array, args)?;
                    Ok(DeviceParamKind::Array { elem, dims, space, mutable: by_mut })
                }
                _ => Err("references are for slices (`&[T]`) and arrays (`&mut [[T; N]; M]`): pass scalars by value, e.g. `a: f32`".into()),
            }
        }
        _ if space == Space::Shared => Err(shared_misplaced()),
        syn::Type::Array(_) => Err("arrays are passed by reference: write `&[T; N]` or `&mut [T; N]`".into()),
        syn::Type::Ptr(_) => Err("raw pointers are not supported: use a slice `&[T]` or an array reference `&mut [T; N]`".into()),
        syn::Type::Tuple(t) if t.elems.len() > 1 => {
            if mutable {
                return Err("a tuple parameter is immutable: remove the `mut`, and destructure it into what changes, `let (mut a, b) = x;`".into());
            }
            let parts = t.elems.iter().map(|e| types::scalar_in(e, args));
            Ok(DeviceParamKind::Tuple { parts: parts.collect::<Result<_, _>>()? })
        }
        _ => types::scalar_in(ty, args).map(|ty| DeviceParamKind::Scalar { ty, mutable }),
    }
}

/// `impl FnMut(A, B)` or `impl Fn(A, B)`: a closure parameter taking
/// scalars and returning nothing (`mut` on the parameter, as Rust wants for
/// calling an `FnMut`, is allowed and changes nothing).
fn closure_type(t: &syn::TypeImplTrait, args: &TypeArgs) -> Result<DeviceParamKind, String> {
    const FORM: &str = "a closure parameter is written `f: impl FnMut(u32, ..)`: the closure takes scalars and returns nothing";
    let mut bounds = t.bounds.iter();
    let (Some(syn::TypeParamBound::Trait(bound)), None) = (bounds.next(), bounds.next()) else {
        return Err(FORM.into());
    };
    let Some(last) = bound.path.segments.last() else {
        return Err(FORM.into());
    };
    let syn::PathArguments::Parenthesized(inputs) = &last.arguments else {
        return Err(FORM.into());
    };
    if bound.path.segments.len() != 1 || !(last.ident == "FnMut" || last.ident == "Fn") {
        return Err(FORM.into());
    }
    if !matches!(inputs.output, syn::ReturnType::Default) {
        return Err("a closure passed to a device function returns nothing: write its results into a `&mut` array or a `mut` variable of the caller, which the closure may assign".into());
    }
    let params = inputs.inputs.iter().map(|ty| {
        types::scalar_in(ty, args)
            .map_err(|_| format!("a closure parameter takes scalars, but this is `{}`: pass arrays and slices by naming them in the closure's body", ty.to_token_stream()))
    });
    Ok(DeviceParamKind::Closure {
        params: params.collect::<Result<_, _>>()?,
    })
}

/// `[[T; N]; M]`: the element type and the sizes, outermost first.
fn array_type(ty: &syn::Type, args: &TypeArgs) -> Result<(Scalar, Vec<syn::Expr>), String> {
    match ty {
        syn::Type::Array(a) => {
            let (elem, mut dims) = array_type(&a.elem, args)?;
            dims.insert(0, a.len.clone());
            Ok((elem, dims))
        }
        syn::Type::Paren(p) => array_type(&p.elem, args),
        other => Ok((types::scalar_in(other, args)?, Vec::new())),
    }
}

/// The element type a parameter's type is written with, if it is a bare
/// name (`T`, `&[T]`, `&mut [[T; N]; M]`): what a type parameter is
/// inferred from.
pub fn element_name(ty: &syn::Type) -> Option<&Ident> {
    match ty {
        syn::Type::Reference(r) => element_name(&r.elem),
        syn::Type::Slice(s) => element_name(&s.elem),
        syn::Type::Array(a) => element_name(&a.elem),
        syn::Type::Paren(p) => element_name(&p.elem),
        syn::Type::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

fn param_type(ty: &syn::Type, args: &TypeArgs) -> Result<ParamType, String> {
    match ty {
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Slice(slice) => Ok(ParamType::Slice {
                elem: types::scalar_in(&slice.elem, args)?,
                mutable: r.mutability.is_some(),
            }),
            _ => Err("references are only for slices (`&[T]`, `&mut [T]`): pass scalars by value, e.g. `a: f32`".into()),
        },
        syn::Type::Array(_) => Err("array parameters are not supported: pass a slice `&[T]` in global memory".into()),
        syn::Type::Ptr(_) => Err("raw pointers are not supported in kernels: use a slice `&[T]` or `&mut [T]`".into()),
        _ => types::scalar_in(ty, args).map(ParamType::Scalar),
    }
}
