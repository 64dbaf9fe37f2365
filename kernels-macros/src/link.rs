//! Fetching the device functions an item calls.
//!
//! A proc-macro sees only the item it is on, so each `#[device] fn name`
//! also defines a macro `name` (in the macro namespace, beside the
//! function's name, imported by the same `use`) that hands its tokens to a
//! callback: `name! { [callback] state.. }` expands to `callback! { state..
//! { entries } }`, where the entries are the function and everything it
//! calls (its closure, gathered when it was defined, where its own callees
//! are in scope). An item that calls functions expands to a fetch of the
//! first one with `::warpforge::__link` as the callback; each step records
//! what came back and fetches the next, until the kernel can be compiled or
//! the device function's macro defined with its closure.
//!
//! The state a step passes on: `kernel { attr } { item } [ fetched ] "path"`
//! or `device { } { item } [ fetched ] "path"`, where `fetched` holds a
//! `"path" { entries }` pair per callee fetched so far and `"path"` is the
//! one being fetched; an entry is `("id" ok|broken ["path" "id" ..] { fn })`.
//! Tokens keep their spans through every step, so errors point at the
//! user's code (a callee's own, in its crate's source).
//!
//! A path that names no device function is rustc's error at the call
//! (`cannot find macro`). Recursion through several functions cannot be
//! fetched (each would need the other's macro first); a function calling
//! itself is not fetched, and the front reports it.

use proc_macro2::{Delimiter, Group, Literal, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, ToTokens};
use warpforge_codegen::front::{self, DeviceFn, Linked};

/// What is being compiled.
pub enum Item {
    /// A `#[kernel]`, with its attribute.
    Kernel(TokenStream2),
    Device,
}

/// One fetched callee: the path as written, and its closure (its own entry first).
struct Fetched {
    path: String,
    entries: Vec<DeviceFn>,
}

/// The first step for `item`.
pub fn start(kind: Item, item: syn::ItemFn) -> TokenStream2 {
    step(kind, item, Vec::new())
}

/// A later step: the state a callee's macro handed back.
pub fn resume(input: TokenStream2) -> TokenStream2 {
    match parse_state(input) {
        Ok((kind, item, fetched)) => step(kind, item, fetched),
        Err(e) => e.into_compile_error(),
    }
}

/// Fetches the next callee of `item`, or compiles it when all are fetched.
fn step(kind: Item, item: syn::ItemFn, fetched: Vec<Fetched>) -> TokenStream2 {
    let own_name = item.sig.ident.to_string();
    let next = front::callees(&item).into_iter().find(|path| {
        let key = front::path_key(path);
        let itself = matches!(kind, Item::Device) && key == own_name;
        !itself && !fetched.iter().any(|f| f.path == key)
    });
    match next {
        Some(path) => fetch(&kind, &item, &fetched, &path),
        None => match kind {
            Item::Kernel(attr) => {
                let linked = link(&fetched, Vec::new());
                crate::compile_kernel(attr, &item, &linked)
            }
            Item::Device => define_device(item, &fetched),
        },
    }
}

/// `path! { [::warpforge::__link] state }`.
fn fetch(kind: &Item, item: &syn::ItemFn, fetched: &[Fetched], path: &syn::Path) -> TokenStream2 {
    let (tag, attr) = match kind {
        Item::Kernel(attr) => (quote!(kernel), attr.clone()),
        Item::Device => (quote!(device), TokenStream2::new()),
    };
    let pairs = fetched.iter().map(|f| {
        let path = Literal::string(&f.path);
        let entries = f.entries.iter().map(entry_tokens);
        quote!(#path { #(#entries)* })
    });
    let key = Literal::string(&front::path_key(path));
    quote! {
        #path! { [::warpforge::__link] #tag { #attr } { #item } [ #(#pairs)* ] #key }
    }
}

/// The table the front compiles with: every fetched function once, and the
/// item's calls (with `own`, the item's own entry, first when it is a
/// device function).
fn link(fetched: &[Fetched], own: Vec<DeviceFn>) -> Linked {
    let mut linked = Linked {
        functions: own,
        calls: fetched
            .iter()
            .map(|f| (f.path.clone(), f.entries[0].id.clone()))
            .collect(),
    };
    for f in fetched {
        for entry in &f.entries {
            if !linked.functions.iter().any(|g| g.id == entry.id) {
                linked.functions.push(entry.clone());
            }
        }
    }
    linked
}

/// The macro that hands out `item` and its closure, and the import that
/// names it as the function; with the function's errors, if it has any
/// (callers then skip calls to it rather than report them again).
fn define_device(item: syn::ItemFn, fetched: &[Fetched]) -> TokenStream2 {
    let name = &item.sig.ident;
    let id = device_id(&item);
    let own = DeviceFn {
        id: id.clone(),
        item: item.clone(),
        broken: false,
        calls: Vec::new(),
    };
    let mut linked = link(fetched, vec![own]);
    // The function's own calls: its callees', and itself (recursion, which
    // the front reports).
    linked.calls.push((name.to_string(), id.clone()));
    linked.functions[0].calls = linked.calls.clone();
    let errors = front::check_device(&linked, &id).err();
    linked.functions[0].broken = errors.is_some();
    let entries = linked.functions.iter().map(entry_tokens);
    let hidden = format_ident!("__warpforge_device_{}_{:016x}", name, fnv(&id));
    let vis = &item.vis;
    let docs = item.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let errors = errors.map(syn::Error::into_compile_error);
    quote! {
        #errors
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #hidden {
            ([$($callback:tt)*] $($state:tt)*) => { $($callback)*! { $($state)* { #(#entries)* } } };
        }
        #(#docs)*
        #[allow(unused_imports)]
        #vis use #hidden as #name;
    }
}

/// Unique among the functions of every crate: the crate, the name, and the
/// place of the definition.
fn device_id(item: &syn::ItemFn) -> String {
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let span = item.sig.ident.span();
    let start = span.start();
    format!(
        "{krate}::{}@{}:{}:{}",
        item.sig.ident,
        span.file(),
        start.line,
        start.column
    )
}

/// FNV-1a: a short, stable name for a macro from an id.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn entry_tokens(f: &DeviceFn) -> TokenStream2 {
    let id = Literal::string(&f.id);
    let state = if f.broken { quote!(broken) } else { quote!(ok) };
    let calls = f.calls.iter().map(|(path, id)| {
        let (path, id) = (Literal::string(path), Literal::string(id));
        quote!(#path #id)
    });
    let item = &f.item;
    quote!((#id #state [ #(#calls)* ] { #item }))
}

// ---- parsing the state ----------------------------------------------------

fn parse_state(input: TokenStream2) -> syn::Result<(Item, syn::ItemFn, Vec<Fetched>)> {
    let mut tokens = input.into_iter();
    let tag = next_ident(&mut tokens)?;
    let attr = next_group(&mut tokens, Delimiter::Brace)?.stream();
    let item = front::parse_item(next_group(&mut tokens, Delimiter::Brace)?.stream())?;
    let mut fetched = Vec::new();
    let mut pairs = next_group(&mut tokens, Delimiter::Bracket)?
        .stream()
        .into_iter();
    while let Some(path) = pairs.next() {
        let path = string(&path)?;
        let entries = entries(next_group(&mut pairs, Delimiter::Brace)?.stream())?;
        fetched.push(Fetched { path, entries });
    }
    let path = string(
        &tokens
            .next()
            .ok_or_else(|| malformed("the path being fetched"))?,
    )?;
    let entries = entries(next_group(&mut tokens, Delimiter::Brace)?.stream())?;
    fetched.push(Fetched { path, entries });
    let kind = match tag.to_string().as_str() {
        "kernel" => Item::Kernel(attr),
        "device" => Item::Device,
        _ => return Err(malformed("`kernel` or `device`")),
    };
    Ok((kind, item, fetched))
}

fn entries(stream: TokenStream2) -> syn::Result<Vec<DeviceFn>> {
    let mut out = Vec::new();
    for entry in stream {
        let TokenTree::Group(g) = entry else {
            return Err(malformed("an entry"));
        };
        let mut parts = g.stream().into_iter();
        let id = string(&parts.next().ok_or_else(|| malformed("an id"))?)?;
        let broken = next_ident(&mut parts)? == "broken";
        let mut calls = Vec::new();
        let mut list = next_group(&mut parts, Delimiter::Bracket)?
            .stream()
            .into_iter();
        while let Some(path) = list.next() {
            let callee = string(&list.next().ok_or_else(|| malformed("a callee id"))?)?;
            calls.push((string(&path)?, callee));
        }
        let item = front::parse_item(next_group(&mut parts, Delimiter::Brace)?.stream())?;
        out.push(DeviceFn {
            id,
            item,
            broken,
            calls,
        });
    }
    if out.is_empty() {
        return Err(malformed("a device function"));
    }
    Ok(out)
}

fn next_ident(tokens: &mut impl Iterator<Item = TokenTree>) -> syn::Result<proc_macro2::Ident> {
    match tokens.next() {
        Some(TokenTree::Ident(i)) => Ok(i),
        _ => Err(malformed("a word")),
    }
}

fn next_group(
    tokens: &mut impl Iterator<Item = TokenTree>,
    delimiter: Delimiter,
) -> syn::Result<Group> {
    match tokens.next() {
        Some(TokenTree::Group(g)) if g.delimiter() == delimiter => Ok(g),
        _ => Err(malformed("a group")),
    }
}

fn string(token: &TokenTree) -> syn::Result<String> {
    let lit: syn::LitStr =
        syn::parse2(token.to_token_stream()).map_err(|_| malformed("a string"))?;
    Ok(lit.value())
}

/// The state was not written by this crate: `__link!` called by hand, or a
/// macro of another version.
fn malformed(what: &str) -> syn::Error {
    syn::Error::new(
        proc_macro2::Span::call_site(),
        format!("`__link!` is generated by `#[kernel]` and `#[device]`; this one is malformed (expected {what}): do not call it by hand, and build every crate with the same warpforge version"),
    )
}
