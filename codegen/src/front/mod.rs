//! The Rust-syntax front end: a `#[kernel]` function (a [`syn::ItemFn`] plus
//! the attribute's tokens) to a [`KernelDef`].
//!
//! The passes, in order (one private module each):
//! - `nesting`: how deeply the tokens nest, measured without recursion
//!   before syn parses them ([`parse_item`]), so that code nested past
//!   [`MAX_NESTING`] is an error at its span, not a stack overflow;
//! - `attr`: the attribute (`arch`, `block`, `tune`, `requires`) as syntax;
//! - `signature`: parameters and const generic parameters, their types;
//! - `lower`: name resolution (scopes, shadowing), type checking with
//!   literal inference (`infer` for variables initialized by untyped
//!   literals), const-ness analysis (`constness`) and lowering of the body,
//!   `block(..)` and `requires(..)` into the IR of [`crate::ir`], split by
//!   job under `lower/` (scopes, statements, declarations, expressions,
//!   places, built-in calls); calls to `#[device]` functions are inlined
//!   (`lower/call.rs`, with the functions the macro fetched: [`Linked`]);
//! - the checks that need each variant's const values (pipeline stage
//!   counts, constant copy offsets), once the tune space is known
//!   (`lower::check_variants`).
//!
//! Beside the passes, `vocabulary` holds the language's built-in functions,
//! methods, atomics and warp statements, one table each, from which the
//! lookups and the lists in messages are derived.
//!
//! Every error is a [`syn::Error`] at the offending span that says what is
//! wrong and what the language supports instead; the passes keep going after
//! an error where that is cheap, so one build reports several mistakes.

mod assoc;
mod attr;
mod constness;
mod errors;
mod infer;
mod lower;
mod nesting;
mod signature;
mod types;
mod vocabulary;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;

use crate::def::{KernelDef, Target, TuneAxis, TunedLaunch, MAX_KEY_SIZES};
use crate::valid;
use errors::Errors;

pub use lower::{bare_path, callees, path_key, DeviceFn, Linked};
pub use nesting::{check_nesting, MAX_NESTING};

/// Parses the tokens of a kernel or device function, once [`check_nesting`]
/// has found them shallow enough for syn's recursive parser.
pub fn parse_item(tokens: TokenStream) -> syn::Result<syn::ItemFn> {
    check_nesting(tokens.clone())?;
    syn::parse2(tokens)
}

/// Parses the content of `#[kernel(..)]`, once [`check_nesting`] has found
/// it shallow enough.
fn parse_attr(attr: TokenStream) -> syn::Result<attr::KernelAttr> {
    check_nesting(attr.clone())?;
    syn::parse2(attr)
}

/// Parses one kernel that calls no device function: `attr` is the content
/// of `#[kernel(..)]`, `item` the function under it.
pub fn parse_kernel(attr: TokenStream, item: &syn::ItemFn) -> syn::Result<KernelDef> {
    parse_kernel_linked(attr, item, &Linked::default())
}

/// Parses one kernel whose calls resolve through `linked`; a kernel with
/// type parameters is an error here (it is several kernels:
/// [`parse_kernel_instances`]).
pub fn parse_kernel_linked(
    attr: TokenStream,
    item: &syn::ItemFn,
    linked: &Linked,
) -> syn::Result<KernelDef> {
    let mut instances = parse_kernel_instances(attr, item, linked)?;
    match instances.len() {
        1 => Ok(instances.remove(0).1),
        _ => Err(syn::Error::new_spanned(
            &item.sig.generics,
            "this kernel has instances: compile it with `parse_kernel_instances`",
        )),
    }
}

/// Parses a kernel into the kernels it is built as, each with its module
/// name: itself, or one per entry of `instances(..)` when it has type
/// parameters. Calls resolve through `linked`.
pub fn parse_kernel_instances(
    attr: TokenStream,
    item: &syn::ItemFn,
    linked: &Linked,
) -> syn::Result<Vec<(proc_macro2::Ident, KernelDef)>> {
    let attr = parse_attr(attr)?;
    let mut errors = Errors::default();
    let instances = instance_types(&attr, item, &mut errors);
    if !errors.is_empty() {
        return Err(errors.into_error(&item.sig.ident));
    }
    let mut defs = Vec::new();
    for (name, args, arch) in &instances {
        let instance = Instance {
            name,
            args,
            arch: *arch,
        };
        if let Some(def) = compile_instance(&attr, item, instance, linked, &mut errors) {
            defs.push((name.clone(), def));
        }
    }
    if errors.is_empty() {
        Ok(defs)
    } else {
        Err(errors.into_error(&item.sig.ident))
    }
}

/// What stands in for a kernel that failed to compile, so that its callers
/// see its launcher and report nothing more: the kernels `item` is built as
/// with their signatures and an empty body. Each instance whose signature
/// cannot be read is left out.
pub fn stub_instances(
    attr: TokenStream,
    item: &syn::ItemFn,
) -> Vec<(proc_macro2::Ident, KernelDef)> {
    let attr = parse_attr(attr).unwrap_or_default();
    let mut scratch = Errors::default();
    let mut stubs = Vec::new();
    for (name, args, _) in instance_types(&attr, item, &mut scratch) {
        let mut errors = Errors::default();
        let sig = signature::parse_signature(item, &args, &mut errors);
        if !sig.broken.is_empty() || sig.params.len() != item.sig.inputs.len() {
            continue;
        }
        let tune = tune_axes(&attr, &sig, &mut errors).unwrap_or_else(|_| {
            let one = |c: &signature::ConstParamDecl| TuneAxis {
                name: c.ident.to_string(),
                values: vec![1],
            };
            sig.const_params.iter().map(one).collect()
        });
        let ir = crate::ir::Kernel {
            name: name.to_string(),
            const_params: sig
                .const_params
                .iter()
                .map(|c| crate::ir::ConstParam {
                    name: c.ident.to_string(),
                    ty: c.ty,
                })
                .collect(),
            params: sig
                .params
                .iter()
                .map(|p| crate::ir::Param {
                    name: p.ident.to_string(),
                    ty: p.ty,
                    tensor_map: None,
                })
                .collect(),
            locals: Vec::new(),
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: Vec::new(),
            body: Vec::new(),
        };
        stubs.push((
            name,
            KernelDef::new(ir, Target::DEFAULT.to_vec(), tune, Vec::new()),
        ));
    }
    stubs
}

/// The name of each kernel `item` is built as, with the types its type
/// parameters stand for and its own targets, if it has them.
#[allow(clippy::type_complexity)]
fn instance_types<'a>(
    attr: &'a attr::KernelAttr,
    item: &syn::ItemFn,
    errors: &mut Errors,
) -> Vec<(
    proc_macro2::Ident,
    Vec<(proc_macro2::Ident, crate::ir::Scalar)>,
    Option<&'a Vec<proc_macro2::Ident>>,
)> {
    let params = signature::type_params(&item.sig, errors);
    if params.is_empty() {
        if let Some(first) = attr.instances.first() {
            errors.push(&first.name, "`instances(..)` lists the types of a kernel's type parameters, and this kernel has none: remove it, or add `<T: Float>` to the kernel");
        }
        return vec![(item.sig.ident.clone(), Vec::new(), None)];
    }
    if attr.instances.is_empty() {
        let names: Vec<String> = params.iter().map(|p| p.ident.to_string()).collect();
        errors.push(
            &item.sig.generics,
            format!(
                "a kernel with type parameters is built for the types `instances(..)` lists: add e.g. `instances({}_f32 = <{}>)` to `#[kernel(..)]`",
                item.sig.ident,
                vec!["f32"; names.len()].join(", ")
            ),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for instance in &attr.instances {
        if instance.types.len() != params.len() {
            errors.push(
                &instance.name,
                format!(
                    "`{}` gives {} type(s), and the kernel has {} type parameter(s)",
                    instance.name,
                    instance.types.len(),
                    params.len()
                ),
            );
            continue;
        }
        let mut args = Vec::new();
        for (ty, param) in instance.types.iter().zip(&params) {
            match types::scalar(ty) {
                Ok(s) if param.bound.admits(s) => args.push((param.ident.clone(), s)),
                Ok(s) => {
                    errors.push(
                        ty,
                        format!(
                            "`{}` is `{}: {}`, which `{}` is not",
                            param.ident,
                            param.ident,
                            param.bound.name(),
                            s.name()
                        ),
                    );
                }
                Err(msg) => {
                    errors.push(ty, msg);
                }
            }
        }
        out.push((instance.name.clone(), args, instance.arch.as_ref()));
    }
    out
}

/// One kernel a kernel item is built as.
struct Instance<'a> {
    name: &'a proc_macro2::Ident,
    /// What its type parameters stand for.
    args: &'a types::TypeArgs,
    /// Its own targets, in place of the item's `arch(..)`.
    arch: Option<&'a Vec<proc_macro2::Ident>>,
}

/// One kernel: `item` as `instance`.
fn compile_instance(
    attr: &attr::KernelAttr,
    item: &syn::ItemFn,
    instance: Instance,
    linked: &Linked,
    errors: &mut Errors,
) -> Option<KernelDef> {
    let before = errors.len();
    let sig = signature::parse_signature(item, instance.args, errors);
    let tune = tune_axes(attr, &sig, errors);
    let targets = targets(instance.arch.or(attr.arch.as_ref()), errors);
    let name = instance.name.to_string();
    let lowered = lower::lower_kernel(item, (&name, instance.args), attr, &sig, linked, errors);
    if let Ok(lowered) = &lowered {
        // Types and constructs do not depend on const values: the family's
        // IR tells whether every variant can be WGSL. WGSL first, then the
        // archs in declared order: the errors come in that order.
        if targets.contains(&Target::Wgsl) {
            target_check(item, lowered, errors, Target::Wgsl);
        }
        for arch in targets.iter().filter_map(|t| t.arch()) {
            target_check(item, lowered, errors, Target::Ptx(arch));
        }
    }
    let (Ok(lowered), Ok(tune)) = (lowered, tune) else {
        return None;
    };
    if errors.len() != before {
        return None;
    }
    let mut def = KernelDef::new(lowered.ir, targets, tune, lowered.constraints);
    if def.variants().is_empty() {
        errors.push(
            &item.sig.ident,
            "`constrain(..)` leaves no variant of the `tune(..)` values: relax a condition or add values",
        );
        return None;
    }
    def.tuned_launch = tuned_launch(attr, &sig, &def, errors).ok()?;
    lower::check_variants(&def, &lowered.variant_checks, errors);
    variant_target_check(item, &def, errors);
    if errors.len() == before {
        variant_validation(item, &def, errors);
    }
    (errors.len() == before).then_some(def)
}

/// Specializes and validates every variant and runs each target's check of
/// what it would refuse to emit, so that what codegen would refuse in one
/// of them at build or launch time (a `block(..)` dimension a tune value
/// makes 0, a tile that a const offset misaligns, shared arrays over an
/// arch's limit, ...) fails the build instead, at the kernel's name, naming
/// the variant and the statement. The checks above report the common cases at their spans; this
/// one leaves none to the backends. About 15 ms a variant in a debug build
/// (the 441 stock variants: 6.5 s).
fn variant_validation(item: &syn::ItemFn, def: &KernelDef, errors: &mut Errors) {
    let check = |consts: &[i64]| {
        let kernel = crate::specialize::specialize(&def.ir, consts)?;
        valid::validate(&kernel)?;
        def.targets
            .iter()
            .try_for_each(|&target| valid::targets::check_specialized(&kernel, target))
    };
    let refused = def
        .variants()
        .into_iter()
        .find_map(|consts| check(&consts).err().map(|e| (consts, e)));
    if let Some((consts, e)) = refused {
        let message = if consts.is_empty() {
            e.message
        } else {
            format!(
                "in the variant {}: {}",
                def.variant_name(&consts),
                e.message
            )
        };
        errors.push(&item.sig.ident, message);
    }
}

/// Runs the checks of what a target can express that depend on const
/// values ([`valid::targets::check_variant`]) over every variant, and
/// reports the first variant each target refuses, at the kernel's name.
fn variant_target_check(item: &syn::ItemFn, def: &KernelDef, errors: &mut Errors) {
    let variants = def.variants();
    for &target in &def.targets {
        let refused = variants.iter().find_map(|consts| {
            valid::targets::check_variant(&def.ir, target, consts)
                .err()
                .map(|e| (consts, e))
        });
        if let Some((consts, e)) = refused {
            errors.push(
                &item.sig.ident,
                format!("in the variant {}: {}", def.variant_name(consts), e.message),
            );
        }
    }
}

/// Runs the check of what `target` can express ([`valid::targets::check`]) over a
/// lowered kernel. A failure in what a call brought in is reported at the
/// call (the first whose statements fail the check while the kernel's
/// declarations pass it), any other at the kernel's name.
fn target_check(
    item: &syn::ItemFn,
    lowered: &lower::LoweredKernel,
    errors: &mut Errors,
    target: Target,
) {
    let check = |kernel: &crate::ir::Kernel| valid::targets::check(kernel, target);
    let Err(e) = check(&lowered.ir) else {
        return;
    };
    let with_body = |body: &crate::ir::Block| crate::ir::Kernel {
        body: body.clone(),
        ..lowered.ir.clone()
    };
    if check(&with_body(&Vec::new())).is_ok() {
        for call in &lowered.calls {
            if let Err(inner) = check(&with_body(&call.body)) {
                let message = match &call.function {
                    Some(function) => format!(
                        "this call to `{function}` brings in what the target cannot run: {}",
                        inner.message
                    ),
                    None => inner.message,
                };
                errors.push(&call.at, message);
                return;
            }
        }
    }
    errors.push(&item.sig.ident, e.message);
}

/// Checks the `#[device]` function `id` of `linked` (whose calls are
/// `linked.calls`) as far as it can be without a caller: its signature, and
/// its body with every scalar parameter taken as a constant of unknown value.
pub fn check_device(linked: &Linked, id: &str) -> syn::Result<()> {
    let mut errors = Errors::default();
    let Some(f) = linked.functions.iter().position(|f| f.id == id) else {
        panic!("check_device: `{id}` is not among the linked functions");
    };
    let item = &linked.functions[f].item;
    lower::check_device(linked, f, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.into_error(&item.sig.ident))
    }
}

/// A [`Linked`] table over device function sources, for tests: every call
/// path resolves to the function of its last segment's name.
pub fn link_sources(functions: &[&str]) -> Result<Linked, String> {
    let mut linked = Linked::default();
    for (i, source) in functions.iter().enumerate() {
        let item = parse_item_str(source)?;
        linked.functions.push(DeviceFn {
            id: format!("{}#{i}", item.sig.ident),
            item,
            broken: false,
            calls: Vec::new(),
        });
    }
    for i in 0..linked.functions.len() {
        linked.functions[i].calls = calls_by_name(&linked.functions[i].item, &linked);
    }
    Ok(linked)
}

/// The calls of `item` to functions of `linked`, by the callee's name: the
/// `calls` of a [`Linked`] that [`link_sources`] made, for tests (the
/// front-end fuzzer links each of its inputs to the corpus' functions).
pub fn calls_by_name(item: &syn::ItemFn, linked: &Linked) -> Vec<(String, String)> {
    let by_name = |path: &syn::Path| {
        let name = path.segments.last().map(|s| s.ident.to_string());
        let f = linked
            .functions
            .iter()
            .find(|f| Some(f.item.sig.ident.to_string()) == name)?;
        Some((path_key(path), f.id.clone()))
    };
    callees(item).iter().filter_map(by_name).collect()
}

/// [`parse_kernel_str`] for a kernel that calls the device functions
/// `functions` (sources), linked by [`link_sources`].
pub fn parse_kernel_with_str(
    attr: &str,
    item: &str,
    functions: &[&str],
) -> Result<KernelDef, String> {
    let mut linked = link_sources(functions)?;
    let parsed = parse_item_str(item)?;
    linked.calls = calls_by_name(&parsed, &linked);
    let attr: TokenStream = attr
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    parse_kernel_linked(attr, &parsed, &linked).map_err(render_errors)
}

/// [`parse_kernel_instances`] over source text, for tests: the kernels
/// `item` is built as (itself, or one per entry of `instances(..)`) with
/// their module names, its calls linked to `functions` as
/// [`parse_kernel_with_str`] links them.
pub fn parse_instances_with_str(
    attr: &str,
    item: &str,
    functions: &[&str],
) -> Result<Vec<(String, KernelDef)>, String> {
    let mut linked = link_sources(functions)?;
    let parsed = parse_item_str(item)?;
    linked.calls = calls_by_name(&parsed, &linked);
    let attr: TokenStream = attr
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    let defs = parse_kernel_instances(attr, &parsed, &linked).map_err(render_errors)?;
    Ok(defs
        .into_iter()
        .map(|(name, def)| (name.to_string(), def))
        .collect())
}

/// [`parse_item`] over source text, for tests.
fn parse_item_str(source: &str) -> Result<syn::ItemFn, String> {
    let tokens: TokenStream = source
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    parse_item(tokens).map_err(render_errors)
}

fn render_errors(e: syn::Error) -> String {
    e.into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`parse_kernel`] over source text, for tests: `attr` is what goes between
/// the parentheses of `#[kernel(..)]` (may be empty), `item` the function.
/// Errors come back as their messages, one per line.
pub fn parse_kernel_str(attr: &str, item: &str) -> Result<KernelDef, String> {
    let attr: TokenStream = attr
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    let item = parse_item_str(item)?;
    parse_kernel(attr, &item).map_err(render_errors)
}

/// The targets in declared order; [`Target::DEFAULT`] when no `arch(..)` names them.
fn targets(arch: Option<&Vec<proc_macro2::Ident>>, errors: &mut Errors) -> Vec<Target> {
    let Some(names) = arch else {
        return Target::DEFAULT.to_vec();
    };
    let mut targets = Vec::new();
    for ident in names {
        let name = ident.to_string();
        match Target::from_name(&name) {
            Some(target) if targets.contains(&target) => {
                errors.push(
                    ident,
                    format!("`{name}` is listed twice in `arch(..)`: list each target once"),
                );
            }
            Some(target) => targets.push(target),
            None => {
                let known: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
                errors.push(
                    ident,
                    format!(
                        "unknown architecture `{name}`: the supported ones are {}",
                        known.join(", ")
                    ),
                );
            }
        }
    }
    targets
}

/// The tuned launch `tune_key(..)`, `tune_default(..)` and
/// `tune_tolerance(..)` declare, checked against the signature and the
/// variants.
fn tuned_launch(
    attr: &attr::KernelAttr,
    sig: &signature::Signature,
    def: &KernelDef,
    errors: &mut Errors,
) -> Result<Option<TunedLaunch>, errors::Reported> {
    let before = errors.len();
    let Some(names) = &attr.tune_key else {
        if let Some(entry) = attr.tune_default.first() {
            errors.push(
                &entry.name,
                "`tune_default(..)` chooses the default of a tuned launch: add `tune_key(..)` \
                 naming the parameters that key a call",
            );
        }
        if let Some(tolerance) = &attr.tune_tolerance {
            errors.push(
                tolerance,
                "`tune_tolerance(..)` checks the candidates of a tuned launch: add \
                 `tune_key(..)` naming the parameters that key a call",
            );
        }
        return if errors.len() == before {
            Ok(None)
        } else {
            Err(errors::Reported)
        };
    };
    if sig.const_params.is_empty() {
        errors.push(
            tune_key_tokens(names, attr),
            "`tune_key(..)` keys the choice among a kernel's variants, and this kernel has only \
             one (it has no const parameters): give it const parameters with their values in \
             `tune(NAME = [..])`, or remove `tune_key(..)`",
        );
        return Err(errors::Reported);
    }
    if names.is_empty() || names.len() > MAX_KEY_SIZES {
        errors.push(
            tune_key_tokens(names, attr),
            format!(
                "`tune_key(..)` names one to {MAX_KEY_SIZES} parameters, and this one names {}: \
                 key on the sizes that decide which variant is fastest",
                names.len()
            ),
        );
        return Err(errors::Reported);
    }
    let mut key = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            errors.push(
                name,
                format!("`{name}` is named twice in `tune_key(..)`: name each parameter once"),
            );
            continue;
        }
        let Some(index) = sig.params.iter().position(|p| p.ident == *name) else {
            let params: Vec<String> = sig.params.iter().map(|p| p.ident.to_string()).collect();
            errors.push(
                name,
                format!(
                    "`tune_key({name})` names no parameter: the parameters are {}",
                    params.join(", ")
                ),
            );
            continue;
        };
        match sig.params[index].ty {
            crate::ir::ParamType::Scalar(s) if !s.is_int() => {
                errors.push(
                    name,
                    format!(
                        "`{name}` is `{}`, and a tuning key holds sizes: name an integer \
                         parameter or a slice (whose length counts)",
                        s.name()
                    ),
                );
            }
            _ => key.push(index),
        }
    }
    let default = if attr.tune_default.is_empty() {
        None
    } else {
        let mut consts: Vec<i64> = def.tune.iter().map(|axis| axis.values[0]).collect();
        for entry in &attr.tune_default {
            let Some(index) = sig.const_params.iter().position(|c| c.ident == entry.name) else {
                let names: Vec<String> = sig
                    .const_params
                    .iter()
                    .map(|c| c.ident.to_string())
                    .collect();
                errors.push(
                    &entry.name,
                    format!(
                        "`tune_default({} = ..)` names no const parameter: the const parameters \
                         are {}",
                        entry.name,
                        names.join(", ")
                    ),
                );
                continue;
            };
            match types::const_value(&entry.value, sig.const_params[index].ty) {
                Ok(v) if def.tune[index].values.contains(&v) => consts[index] = v,
                Ok(v) => {
                    errors.push(
                        &entry.value,
                        format!(
                            "{v} is not among the `tune({} = ..)` values {:?}: the default is a \
                             variant, so give `{}` one of those values",
                            entry.name, def.tune[index].values, entry.name
                        ),
                    );
                }
                Err(msg) => {
                    errors.push(&entry.value, msg);
                }
            }
        }
        if errors.len() == before {
            if let Err(e) = def.check_constraints(&consts) {
                let entries = attr.tune_default.iter().map(|d| {
                    let (name, value) = (&d.name, &d.value);
                    quote::quote!(#name = #value)
                });
                errors.push(
                    quote::quote!(#(#entries),*),
                    format!(
                        "the tuned default {e}: choose `tune_default(..)` values that meet it \
                         (const parameters not named take their first `tune(..)` value)"
                    ),
                );
            }
        }
        Some(consts)
    };
    let tolerance = attr.tune_tolerance.as_ref().and_then(|expr| {
        let value = match expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Float(f),
                ..
            }) => f.base10_parse::<f64>().ok(),
            _ => None,
        };
        match value {
            Some(v) if v > 0.0 && v < 1.0 => Some(v),
            _ => {
                errors.push(
                    expr,
                    "`tune_tolerance(..)` takes a float literal between 0 and 1, e.g. \
                     `tune_tolerance(1e-3)`: the largest difference from the default's outputs, \
                     relative to each output's largest magnitude",
                );
                None
            }
        }
    });
    if errors.len() != before {
        return Err(errors::Reported);
    }
    Ok(Some(TunedLaunch {
        key,
        default,
        tolerance,
    }))
}

/// Where an error about `tune_key(..)` as a whole points: from the word
/// `tune_key` to its last name.
fn tune_key_tokens(
    names: &[proc_macro2::Ident],
    attr: &attr::KernelAttr,
) -> proc_macro2::TokenStream {
    let word = &attr.tune_key_word;
    quote::quote!(#word #(#names)*)
}

/// One tune axis per const param, in declaration order.
fn tune_axes(
    attr: &attr::KernelAttr,
    sig: &signature::Signature,
    errors: &mut Errors,
) -> Result<Vec<TuneAxis>, errors::Reported> {
    let mut failed = false;
    for entry in &attr.tune {
        if !sig.const_params.iter().any(|c| c.ident == entry.name) {
            let msg = if sig.const_params.is_empty() {
                format!(
                    "`tune({} = ..)` names no const parameter: declare it on the function, e.g. `fn k<const {}: u32>(..)`",
                    entry.name, entry.name
                )
            } else {
                let names: Vec<String> = sig
                    .const_params
                    .iter()
                    .map(|c| c.ident.to_string())
                    .collect();
                format!(
                    "`tune({} = ..)` names no const parameter: the const parameters are {}",
                    entry.name,
                    names.join(", ")
                )
            };
            errors.push(&entry.name, msg);
            failed = true;
        }
    }
    let mut axes = Vec::new();
    for param in &sig.const_params {
        let name = param.ident.to_string();
        let Some(entry) = attr.tune.iter().find(|t| t.name == param.ident) else {
            errors.push(
                &param.ident,
                format!(
                    "const parameter `{name}` has no values: add `tune({name} = [..])` to `#[kernel(..)]` with the values to build, e.g. `tune({name} = [64, 128])`"
                ),
            );
            failed = true;
            continue;
        };
        let mut values = Vec::new();
        for value in &entry.values {
            match types::const_value(value, param.ty) {
                Ok(v) => values.push(v),
                Err(msg) => {
                    errors.push(value, msg);
                    failed = true;
                }
            }
        }
        axes.push(TuneAxis { name, values });
    }
    if failed {
        Err(errors::Reported)
    } else {
        Ok(axes)
    }
}
