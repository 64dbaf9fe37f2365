//! The kernel's signature: run-time parameters and const generic parameters.

use proc_macro2::Ident;

use super::errors::Errors;
use super::types;
use crate::ir::{ParamType, Scalar};

pub struct ConstParamDecl {
    pub ident: Ident,
    pub ty: Scalar,
}

pub struct ParamDecl {
    pub ident: Ident,
    pub ty: ParamType,
}

pub struct Signature {
    pub const_params: Vec<ConstParamDecl>,
    pub params: Vec<ParamDecl>,
    /// Names of parameters whose declaration had an error: uses of them in
    /// the body are not reported again.
    pub broken: Vec<Ident>,
}

pub fn parse_signature(item: &syn::ItemFn, errors: &mut Errors) -> Signature {
    let sig = &item.sig;
    for attr in &item.attrs {
        if !attr.path().is_ident("doc") {
            errors.push(attr, "attributes other than doc comments are not supported on a kernel: put options in `#[kernel(..)]`");
        }
    }
    if let Some(t) = &sig.constness {
        errors.push(t, "a kernel cannot be `const`: remove `const`");
    }
    if let Some(t) = &sig.asyncness {
        errors.push(t, "a kernel cannot be `async`: remove `async`");
    }
    if let Some(t) = &sig.unsafety {
        errors.push(
            t,
            "a kernel cannot be `unsafe`: remove `unsafe` (launches are checked by the runtime)",
        );
    }
    if let Some(t) = &sig.abi {
        errors.push(t, "a kernel has no ABI to choose: remove the `extern`");
    }
    if let Some(t) = &sig.variadic {
        errors.push(t, "kernels cannot be variadic: declare each parameter");
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        errors.push(
            ty,
            "kernels return nothing: write results into a `&mut [T]` parameter and remove the return type",
        );
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.push(clause, "`where` clauses are not supported on kernels: the only generics are `const NAME: u32` parameters");
    }

    let mut out = Signature {
        const_params: Vec::new(),
        params: Vec::new(),
        broken: Vec::new(),
    };
    let mut seen: Vec<Ident> = Vec::new();
    let mut check_unique = |ident: &Ident, errors: &mut Errors| {
        if seen.contains(ident) {
            errors.push(
                ident,
                format!("`{ident}` is declared twice: give each parameter its own name"),
            );
        }
        seen.push(ident.clone());
    };

    for param in &sig.generics.params {
        match param {
            syn::GenericParam::Const(c) => {
                check_unique(&c.ident, errors);
                if let Some(default) = &c.default {
                    errors.push(
                        default,
                        "const parameters take their values from `tune(..)`: remove the default",
                    );
                }
                match types::scalar(&c.ty) {
                    Ok(ty @ (Scalar::U32 | Scalar::I32 | Scalar::Bool)) => {
                        out.const_params.push(ConstParamDecl {
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
                        out.broken.push(c.ident.clone());
                    }
                    Err(msg) => {
                        errors.push(&c.ty, msg);
                        out.broken.push(c.ident.clone());
                    }
                }
            }
            syn::GenericParam::Type(t) => {
                errors.push(
                    t,
                    "generic type parameters are not supported on kernels: use a const parameter with `tune(..)`, or write one kernel per element type",
                );
            }
            syn::GenericParam::Lifetime(l) => {
                errors.push(l, "kernels take no lifetime parameters: remove it (slices are borrowed for the launch)");
            }
        }
    }

    for input in &sig.inputs {
        let syn::FnArg::Typed(arg) = input else {
            errors.push(input, "a kernel is a free function: remove `self`");
            continue;
        };
        let ident = match &*arg.pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                if let Some(m) = &p.mutability {
                    errors.push(
                        m,
                        format!("parameters cannot be `mut`: copy it into a local instead: `let mut {0} = {0};`", p.ident),
                    );
                }
                p.ident.clone()
            }
            other => {
                errors.push(
                    other,
                    "write each parameter as `name: Type`; patterns are not supported",
                );
                continue;
            }
        };
        check_unique(&ident, errors);
        match param_type(&arg.ty) {
            Ok(ty) => out.params.push(ParamDecl { ident, ty }),
            Err(msg) => {
                errors.push(&arg.ty, msg);
                out.broken.push(ident);
            }
        }
    }
    out
}

fn param_type(ty: &syn::Type) -> Result<ParamType, String> {
    match ty {
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Slice(slice) => Ok(ParamType::Slice {
                elem: types::scalar(&slice.elem)?,
                mutable: r.mutability.is_some(),
            }),
            _ => Err("references are only for slices (`&[T]`, `&mut [T]`): pass scalars by value, e.g. `a: f32`".into()),
        },
        syn::Type::Array(_) => Err("array parameters are not supported: pass a slice `&[T]` in global memory".into()),
        syn::Type::Ptr(_) => Err("raw pointers are not supported in kernels: use a slice `&[T]` or `&mut [T]`".into()),
        _ => types::scalar(ty).map(ParamType::Scalar),
    }
}
