//! The `#[kernel(..)]` attribute, as syntax. Its expressions are lowered later,
//! once the signature is known.

use proc_macro2::Ident;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::Token;

#[derive(Default)]
pub struct KernelAttr {
    /// `arch(sm_70, sm_80, wgsl)`; `None` when absent (every target).
    pub arch: Option<Vec<Ident>>,
    /// `block(x, y, z)`: one to three constant expressions.
    pub block: Option<Vec<syn::Expr>>,
    /// `cluster(x, y, z)`: one to three constant expressions.
    pub cluster: Option<Vec<syn::Expr>>,
    /// `min_blocks_per_sm(n)`: a constant expression.
    pub min_blocks_per_sm: Option<syn::Expr>,
    /// `tune(NAME = [v, ..], ..)`.
    pub tune: Vec<TuneEntry>,
    /// `requires(cond, ..)`.
    pub requires: Vec<syn::Expr>,
    /// `constrain(cond, ..)`: which combinations of tune values are variants.
    pub constrain: Vec<syn::Expr>,
    /// `instances(NAME = <T, ..>, ..)`: the kernels a generic kernel is
    /// built as.
    pub instances: Vec<Instance>,
    /// `tune_key(n, x, ..)`: the parameters whose values (scalars) or
    /// lengths (slices) key a tuned launch.
    pub tune_key: Option<Vec<Ident>>,
    /// The word `tune_key` of `tune_key(..)`, where errors about the list
    /// as a whole point.
    pub tune_key_word: Option<Ident>,
    /// `tune_default(NAME = v, ..)`: the tuned launch's heuristic default.
    pub tune_default: Vec<DefaultEntry>,
    /// `tune_tolerance(r)`: how far a candidate's outputs may be from the
    /// default's, relative to the output's largest magnitude.
    pub tune_tolerance: Option<syn::Expr>,
}

/// One `NAME = v` of `tune_default(..)`.
pub struct DefaultEntry {
    pub name: Ident,
    pub value: syn::Expr,
}

/// One `NAME = <T, ..>` of `instances(..)`: a kernel named `NAME` with the
/// type parameters standing for these types, in order, and optionally its
/// own targets (`NAME = <bf16> arch(sm_80, sm_90)`) in place of the kernel's.
pub struct Instance {
    pub name: Ident,
    pub types: Vec<syn::Type>,
    pub arch: Option<Vec<Ident>>,
}

/// One `NAME = [v, ..]` of `tune(..)`.
pub struct TuneEntry {
    pub name: Ident,
    pub values: Vec<syn::Expr>,
}

const OPTIONS: &str = "`arch(sm_70, sm_80)`, `block(256)`, `cluster(2)`, `min_blocks_per_sm(2)`, \
     `tune(NAME = [v, ..])`, \
     `constrain(cond, ..)`, `requires(cond, ..)`, `instances(NAME = <T, ..>, ..)`, \
     `tune_key(param, ..)`, `tune_default(NAME = v, ..)` and `tune_tolerance(r)`";

impl Parse for KernelAttr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attr = KernelAttr::default();
        let mut seen: Vec<String> = Vec::new();
        let parser = syn::meta::parser(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            if seen.contains(&key) {
                return Err(meta.error(format!(
                    "`{key}(..)` is given twice: merge the two into one"
                )));
            }
            match key.as_str() {
                "arch" => {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let list = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                    attr.arch = Some(list.into_iter().collect());
                }
                "block" | "cluster" => {
                    let list = parenthesized_exprs(meta.input)?;
                    if list.is_empty() || list.len() > 3 {
                        return Err(meta.error(match key.as_str() {
                            "block" => "`block(..)` takes one to three sizes: `block(256)`, `block(16, 16)` or `block(8, 8, 4)`",
                            _ => "`cluster(..)` takes one to three sizes in blocks: `cluster(2)`, `cluster(2, 1)` or `cluster(2, 2, 1)`",
                        }));
                    }
                    match key.as_str() {
                        "block" => attr.block = Some(list),
                        _ => attr.cluster = Some(list),
                    }
                }
                "tune" => {
                    meta.parse_nested_meta(|entry| {
                        let Some(name) = entry.path.get_ident().cloned() else {
                            return Err(entry.error("write each tune entry as `NAME = [v, ..]`"));
                        };
                        if attr.tune.iter().any(|t| t.name == name) {
                            return Err(entry.error(format!(
                                "`{name}` is tuned twice: give all its values in one list `{name} = [..]`"
                            )));
                        }
                        let values = match entry.value()?.parse::<syn::Expr>()? {
                            syn::Expr::Array(list) if !list.elems.is_empty() => list.elems.into_iter().collect(),
                            other => {
                                return Err(syn::Error::new_spanned(
                                    other,
                                    format!("the values of `{name}` must be a non-empty list: `{name} = [64, 128]`"),
                                ))
                            }
                        };
                        attr.tune.push(TuneEntry { name, values });
                        Ok(())
                    })?;
                }
                "instances" => {
                    meta.parse_nested_meta(|entry| {
                        let Some(name) = entry.path.get_ident().cloned() else {
                            return Err(entry.error("write each instance as `NAME = <T, ..>`"));
                        };
                        if attr.instances.iter().any(|i| i.name == name) {
                            return Err(
                                entry.error(format!("`{name}` is listed twice in `instances(..)`"))
                            );
                        }
                        let input = entry.value()?;
                        input.parse::<Token![<]>()?;
                        let mut types = Vec::new();
                        while !input.peek(Token![>]) {
                            types.push(input.parse::<syn::Type>()?);
                            if !input.peek(Token![>]) {
                                input.parse::<Token![,]>()?;
                            }
                        }
                        input.parse::<Token![>]>()?;
                        let arch = if input.peek(syn::Ident) {
                            let word: Ident = input.parse()?;
                            if word != "arch" {
                                return Err(syn::Error::new_spanned(
                                    word,
                                    "after an instance's types comes only its own `arch(..)`",
                                ));
                            }
                            let content;
                            syn::parenthesized!(content in input);
                            Some(
                                Punctuated::<Ident, Token![,]>::parse_terminated(&content)?
                                    .into_iter()
                                    .collect(),
                            )
                        } else {
                            None
                        };
                        attr.instances.push(Instance { name, types, arch });
                        Ok(())
                    })?;
                }
                "tune_key" => {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    let list = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                    attr.tune_key = Some(list.into_iter().collect());
                    attr.tune_key_word = meta.path.get_ident().cloned();
                }
                "tune_default" => {
                    meta.parse_nested_meta(|entry| {
                        let Some(name) = entry.path.get_ident().cloned() else {
                            return Err(entry.error("write each default as `NAME = value`"));
                        };
                        if attr.tune_default.iter().any(|d| d.name == name) {
                            return Err(entry
                                .error(format!("`{name}` is given twice in `tune_default(..)`")));
                        }
                        let value = entry.value()?.parse::<syn::Expr>()?;
                        attr.tune_default.push(DefaultEntry { name, value });
                        Ok(())
                    })?;
                }
                "min_blocks_per_sm" => {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    attr.min_blocks_per_sm = Some(content.parse()?);
                }
                "tune_tolerance" => {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    attr.tune_tolerance = Some(content.parse()?);
                }
                "requires" => attr.requires = parenthesized_exprs(meta.input)?,
                "constrain" => attr.constrain = parenthesized_exprs(meta.input)?,
                _ => {
                    return Err(meta.error(format!(
                        "unknown `#[kernel]` option: the options are {OPTIONS}"
                    )))
                }
            }
            seen.push(key);
            Ok(())
        });
        syn::parse::Parser::parse2(parser, input.parse()?)?;
        Ok(attr)
    }
}

fn parenthesized_exprs(input: ParseStream) -> syn::Result<Vec<syn::Expr>> {
    let content;
    syn::parenthesized!(content in input);
    Ok(
        Punctuated::<syn::Expr, Token![,]>::parse_terminated(&content)?
            .into_iter()
            .collect(),
    )
}
