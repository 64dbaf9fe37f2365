//! The Rust-syntax front end: a `#[kernel]` function (a [`syn::ItemFn`] plus
//! the attribute's tokens) to a [`KernelDef`].
//!
//! The passes, in order (one private module each):
//! - `attr`: the attribute (`arch`, `block`, `tune`, `requires`) as syntax;
//! - `signature`: parameters and const generic parameters, their types;
//! - `lower`: name resolution (scopes, shadowing), type checking with
//!   literal inference (`infer` for variables initialized by untyped
//!   literals), const-ness analysis (`constness`) and lowering of the body,
//!   `block(..)` and `requires(..)` into the IR of [`crate::ir`];
//! - the checks that need each variant's const values (pipeline stage
//!   counts, constant copy offsets), once the tune space is known
//!   (`lower::check_variants`).
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
mod signature;
mod types;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;

use crate::def::{KernelDef, Target, TuneAxis};
use errors::Errors;

/// Parses one kernel: `attr` is the content of `#[kernel(..)]`, `item` the function under it.
pub fn parse_kernel(attr: TokenStream, item: &syn::ItemFn) -> syn::Result<KernelDef> {
    let attr: attr::KernelAttr = syn::parse2(attr)?;
    let mut errors = Errors::default();
    let sig = signature::parse_signature(item, &mut errors);
    let tune = tune_axes(&attr, &sig, &mut errors);
    let targets = targets(&attr, &mut errors);
    let lowered = lower::lower_kernel(item, &attr, &sig, &mut errors);
    if let Ok((ir, ..)) = &lowered {
        // Types and constructs do not depend on const values: the family's
        // IR tells whether every variant can be WGSL.
        if targets.contains(&Target::Wgsl) {
            if let Err(e) = crate::back::wgsl::check(ir) {
                errors.push(&item.sig.ident, e.message);
            }
        }
        for arch in targets.iter().filter_map(|t| t.arch()) {
            if let Err(e) = crate::back::ptx::check_arch(ir, arch) {
                errors.push(&item.sig.ident, e.message);
            }
        }
    }
    match (lowered, tune) {
        (Ok((ir, constraints, variant_checks)), Ok(tune)) if errors.is_empty() => {
            let def = KernelDef::new(ir, targets, tune, constraints);
            if def.variants().is_empty() {
                errors.push(
                    &item.sig.ident,
                    "`constrain(..)` leaves no variant of the `tune(..)` values: relax a condition or add values",
                );
                return Err(errors.into_error(&item.sig.ident));
            }
            lower::check_variants(&def, &variant_checks, &mut errors);
            if !errors.is_empty() {
                return Err(errors.into_error(&item.sig.ident));
            }
            Ok(def)
        }
        _ => Err(errors.into_error(&item.sig.ident)),
    }
}

/// [`parse_kernel`] over source text, for tests: `attr` is what goes between
/// the parentheses of `#[kernel(..)]` (may be empty), `item` the function.
/// Errors come back as their messages, one per line.
pub fn parse_kernel_str(attr: &str, item: &str) -> Result<KernelDef, String> {
    let render = |e: syn::Error| {
        e.into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let attr: TokenStream = attr
        .parse()
        .map_err(|e: proc_macro2::LexError| e.to_string())?;
    let item: syn::ItemFn = syn::parse_str(item).map_err(render)?;
    parse_kernel(attr, &item).map_err(render)
}

/// The targets in declared order; all of them when the attribute names none.
fn targets(attr: &attr::KernelAttr, errors: &mut Errors) -> Vec<Target> {
    let Some(names) = &attr.arch else {
        return Target::ALL.to_vec();
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
