//! The `#[kernel]` attribute of warpforge.
//!
//! The function's body is parsed by [`warpforge_codegen::front`] into a
//! [`KernelDef`] and is never emitted as Rust. The function becomes a module
//! of the same name and visibility holding the definition (as JSON, so the
//! expansion does not grow with the number of variants) and a typed launcher.

#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Ident, Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use warpforge_codegen::front::{self, Linked};
use warpforge_codegen::ir::{ParamType, Scalar};
use warpforge_codegen::KernelDef;

mod link;

/// Compiles a kernel written in the warpforge kernel language (see the
/// crate documentation of `warpforge` and its guide, `warpforge::guide::dsl`).
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match front::parse_item(item.into()) {
        Ok(item) => link::start(link::Item::Kernel(attr.into()), item).into(),
        Err(e) => e.into_compile_error().into(),
    }
}

/// Makes a function of the kernel language callable from kernels and other
/// device functions, in this crate and in crates that depend on it (see
/// `warpforge::guide::dsl`, "Device functions").
#[proc_macro_attribute]
pub fn device(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    if !attr.is_empty() {
        return syn::Error::new_spanned(
            attr,
            "`#[device]` takes no options: remove the parentheses",
        )
        .into_compile_error()
        .into();
    }
    match front::parse_item(item.into()) {
        Ok(item) => link::start(link::Item::Device, item).into(),
        Err(e) => e.into_compile_error().into(),
    }
}

/// One step of fetching the device functions an item calls (generated code
/// calls it; see `link`). Not a stable API.
#[doc(hidden)]
#[proc_macro]
pub fn __link(input: TokenStream) -> TokenStream {
    link::resume(input.into()).into()
}

/// The kernel's module (one per instance of a generic kernel), once every
/// device function it calls is fetched.
/// A kernel with errors still gets modules with its launchers (of an
/// empty kernel, never run: the errors fail the build), so that its callers
/// report nothing more.
fn compile_kernel(attr: TokenStream2, item: &syn::ItemFn, linked: &Linked) -> TokenStream2 {
    let modules = front::parse_kernel_instances(attr.clone(), item, linked).and_then(|instances| {
        instances
            .iter()
            .map(|(name, def)| expand(item, name, def))
            .collect::<syn::Result<Vec<_>>>()
    });
    match modules {
        Ok(modules) => quote!(#(#modules)*),
        Err(e) => {
            let error = e.into_compile_error();
            let stubs = front::stub_instances(attr, item);
            let stubs = stubs
                .iter()
                .filter_map(|(name, def)| expand(item, name, def).ok());
            quote!(#error #(#stubs)*)
        }
    }
}

/// Names the launcher takes besides the kernel's parameters.
const LAUNCHER_ARGS: [&str; 3] = ["rt", "grid", "consts"];

/// The module `name` of one kernel `def` written as `item`.
fn expand(item: &syn::ItemFn, name: &Ident, def: &KernelDef) -> syn::Result<TokenStream2> {
    let vis = &item.vis;
    let docs: Vec<&syn::Attribute> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let json = proc_macro2::Literal::string(&def.to_json());

    let user_params = param_idents(item);
    let mut params = Vec::new();
    let mut args = Vec::new();
    for (ident, param) in user_params.iter().zip(&def.ir.params) {
        if LAUNCHER_ARGS.contains(&ident.to_string().as_str()) {
            return Err(syn::Error::new(
                ident.span(),
                format!("`{ident}` is a parameter of the generated launcher (`launch(rt, [consts,] grid, ..)`): rename this parameter"),
            ));
        }
        let (ty, arg) = match param.ty {
            ParamType::Scalar(s) => {
                let ty = rust_type(s);
                (ty, quote!(::warpforge::KernelArg::scalar(#ident)))
            }
            ParamType::Slice {
                elem,
                mutable: false,
            } => {
                let elem = rust_type(elem);
                (
                    quote!(impl ::core::convert::Into<::warpforge::BufferRef<'a, #elem>>),
                    quote!(::warpforge::KernelArg::buffer(#ident)),
                )
            }
            ParamType::Slice {
                elem,
                mutable: true,
            } => {
                let elem = rust_type(elem);
                (
                    quote!(impl ::core::convert::Into<::warpforge::BufferMut<'a, #elem>>),
                    quote!(::warpforge::KernelArg::buffer_mut(#ident)),
                )
            }
        };
        params.push(quote!(#ident: #ty));
        args.push(arg);
    }

    let (consts_items, consts_param, consts_values) = if def.ir.const_params.is_empty() {
        (TokenStream2::new(), TokenStream2::new(), quote!(&[]))
    } else {
        (
            consts_items(def),
            quote!(consts: self::Consts,),
            quote!(&consts.value_array()),
        )
    };
    // `launch` repeats the kernel's docs; without any it still gets its own,
    // so that a crate with `missing_docs` hears once, at the module, that
    // the kernel is undocumented.
    let launch_docs = if docs.is_empty() {
        let variant = if def.ir.const_params.is_empty() {
            ""
        } else {
            " (the variant `consts`)"
        };
        let text = format!(
            " Launches `{name}`{variant} on `rt` with `grid`: the arguments, `requires(..)`, \
             the grid and block shape and the shared memory are checked first, and an `Err` \
             says what was wrong."
        );
        quote!(#[doc = #text])
    } else {
        quote!(#(#docs)*)
    };

    let tuned_items = if def.tuned_launch.is_some() {
        tuned_items(name, &params, &args)
    } else {
        TokenStream2::new()
    };

    Ok(quote! {
        #(#docs)*
        #vis mod #name {
            /// The kernel's definition (IR, targets, tune space), read once from
            /// the JSON the macro embedded: what `Runtime::launch` and the tuner
            /// take.
            pub fn def() -> &'static ::warpforge::__private::KernelDef {
                static DEF: ::std::sync::OnceLock<::warpforge::__private::KernelDef> = ::std::sync::OnceLock::new();
                DEF.get_or_init(|| {
                    ::warpforge::__private::KernelDef::from_json(#json)
                        .expect("the #[kernel] macro serialized this definition")
                })
            }

            #consts_items

            #launch_docs
            #[allow(clippy::too_many_arguments)]
            pub fn launch<'a>(
                rt: &::warpforge::Runtime,
                #consts_param
                grid: ::warpforge::Grid,
                #(#params),*
            ) -> ::core::result::Result<(), ::warpforge::Error> {
                rt.launch(self::def(), #consts_values, grid, &mut [#(#args),*])
            }

            #tuned_items
        }
    })
}

/// `tuned(rt)` and its `Tuned` launcher, for a kernel with `tune_key(..)`.
fn tuned_items(name: &Ident, params: &[TokenStream2], args: &[TokenStream2]) -> TokenStream2 {
    let tuned_docs = format!(
        " The tuned launch of `{name}` on `rt`: each call goes to the variant tuned for its \
         `tune_key(..)` sizes on this GPU (see `warpforge::tune::TunedKernel`), shared by every \
         `tuned(rt)` of the runtime."
    );
    quote! {
        #[doc = #tuned_docs]
        pub fn tuned(
            rt: &::warpforge::Runtime,
        ) -> ::core::result::Result<self::Tuned<'_>, ::warpforge::Error> {
            ::warpforge::tune::TunedKernel::new(rt, ::core::module_path!(), self::def())
                .map(self::Tuned)
        }

        /// The kernel's tuned launch on one runtime (from `tuned(rt)`).
        pub struct Tuned<'rt>(::warpforge::tune::TunedKernel<'rt>);

        impl<'rt> Tuned<'rt> {
            /// Launches the variant tuned for this call's `tune_key(..)` sizes, with
            /// the grid `grid` gives for its const values; tunes first when the
            /// runtime's miss policy says so and nothing was tuned for the sizes (on
            /// this call's own arguments, which it leaves as they were). Returns the
            /// variant launched and where it came from.
            #[allow(clippy::too_many_arguments)]
            pub fn launch<'a>(
                &self,
                grid: impl Fn(self::Consts) -> ::warpforge::Grid,
                #(#params),*
            ) -> ::core::result::Result<::warpforge::tune::Selection, ::warpforge::Error> {
                self.0.launch(
                    &|values: &[i64]| grid(self::Consts::from_values(values)),
                    &mut [#(#args),*],
                )
            }

            /// The tuned launch itself: its dispatcher, stats and records.
            pub fn kernel(&self) -> &::warpforge::tune::TunedKernel<'rt> {
                &self.0
            }
        }
    }
}

/// `Consts`, its `values()`, and `variants()`.
fn consts_items(def: &KernelDef) -> TokenStream2 {
    let names: Vec<Ident> = def
        .ir
        .const_params
        .iter()
        .map(|c| Ident::new(&c.name, Span::call_site()))
        .collect();
    let types: Vec<TokenStream2> = def
        .ir
        .const_params
        .iter()
        .map(|c| rust_type(c.ty))
        .collect();
    let field_docs: Vec<String> = names
        .iter()
        .map(|n| format!("The value of the const parameter `{n}`."))
        .collect();
    let from_values = def.ir.const_params.iter().enumerate().map(|(i, c)| {
        let name = &names[i];
        match c.ty {
            Scalar::Bool => quote!(#name: values[#i] != 0),
            _ => {
                let ty = rust_type(c.ty);
                quote!(#name: values[#i] as #ty)
            }
        }
    });
    let ctor = format_ident!("Consts");
    let count = names.len();
    quote! {
        /// One variant's values of the const parameters.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[allow(non_snake_case)]
        pub struct #ctor {
            #( #[doc = #field_docs] pub #names: #types, )*
        }

        impl #ctor {
            /// The variant whose values, in declaration order, are `values`
            /// (as [`Self::values`] gives them).
            fn from_values(values: &[i64]) -> #ctor {
                #ctor { #(#from_values),* }
            }

            /// The values in declaration order, as the runtime takes them.
            pub fn values(&self) -> ::std::vec::Vec<i64> {
                self.value_array().to_vec()
            }

            /// [`Self::values`] on the stack, for `launch`.
            fn value_array(&self) -> [i64; #count] {
                [#(self.#names as i64),*]
            }
        }

        /// Every variant the kernel is built in: the cartesian product of its `tune(..)` values.
        pub fn variants() -> ::std::vec::Vec<#ctor> {
            self::def().variants().into_iter().map(|values| #ctor::from_values(&values)).collect()
        }

        impl ::warpforge::KernelVariant for #ctor {
            fn def() -> &'static ::warpforge::__private::KernelDef {
                self::def()
            }
            fn variants() -> ::std::vec::Vec<Self> {
                self::variants()
            }
            fn values(&self) -> ::std::vec::Vec<i64> {
                #ctor::values(self)
            }
        }
    }
}

/// The parameter names as the user spelled them (spans kept for errors).
fn param_idents(item: &syn::ItemFn) -> Vec<Ident> {
    item.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            syn::FnArg::Typed(t) => match &*t.pat {
                syn::Pat::Ident(p) => Some(p.ident.clone()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}

fn rust_type(s: Scalar) -> TokenStream2 {
    match s {
        Scalar::F16 => quote!(::warpforge::f16),
        Scalar::Bf16 => quote!(::warpforge::bf16),
        Scalar::E4m3 => quote!(::warpforge::e4m3),
        Scalar::E5m2 => quote!(::warpforge::e5m2),
        other => {
            let ident = Ident::new(other.name(), Span::call_site());
            quote!(#ident)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expansion with the definition's JSON taken out.
    fn expansion_without_json(attr: &str) -> String {
        expansion_of(
            "/// Docs.\npub fn k<const BM: u32, const BN: u32>(a: f32, x: &[f16], y: &mut [f32]) {}",
            attr,
        )
    }

    fn expansion_of(source: &str, attr: &str) -> String {
        let item: syn::ItemFn = syn::parse_str(source).unwrap();
        let def = front::parse_kernel(attr.parse().unwrap(), &item).unwrap();
        let json = proc_macro2::Literal::string(&def.to_json()).to_string();
        let expanded = expand(&item, &item.sig.ident, &def).unwrap().to_string();
        assert!(expanded.contains(&json));
        expanded.replace(&json, "JSON")
    }

    #[test]
    fn expansion_does_not_grow_with_the_variants() {
        let four = expansion_without_json("tune(BM = [1, 2], BN = [1, 2])");
        let sixty_four = expansion_without_json(
            "tune(BM = [1, 2, 3, 4, 5, 6, 7, 8], BN = [1, 2, 3, 4, 5, 6, 7, 8])",
        );
        assert_eq!(four, sixty_four);
    }

    #[test]
    fn launcher_signature() {
        let expanded = expansion_without_json("tune(BM = [1], BN = [2])");
        let launch = "pub fn launch < 'a > (rt : & :: warpforge :: Runtime , consts : self :: Consts , grid : :: warpforge :: Grid , \
             a : f32 , x : impl :: core :: convert :: Into < :: warpforge :: BufferRef < 'a , :: warpforge :: f16 >> , \
             y : impl :: core :: convert :: Into < :: warpforge :: BufferMut < 'a , f32 >>)";
        assert!(expanded.contains(launch), "{expanded}");
        assert!(expanded.contains(
            "pub struct Consts { # [doc = \"The value of the const parameter `BM`.\"] pub BM : u32"
        ));
        assert_eq!(
            expanded.matches("# [doc = \" Docs.\"]").count(),
            2,
            "docs on the module and on launch"
        );
    }

    #[test]
    fn tune_key_gives_a_tuned_launcher() {
        let expanded = expansion_without_json("tune(BM = [1], BN = [2]), tune_key(x)");
        assert!(
            expanded.contains(
                "pub fn tuned (rt : & :: warpforge :: Runtime ,) -> :: core :: result :: Result < \
                 self :: Tuned < '_ > , :: warpforge :: Error >"
            ),
            "{expanded}"
        );
        assert!(
            expanded.contains(
                "pub struct Tuned < 'rt > (:: warpforge :: tune :: TunedKernel < 'rt >) ;"
            ),
            "{expanded}"
        );
        let launch = "pub fn launch < 'a > (& self , grid : impl Fn (self :: Consts) -> :: warpforge :: Grid , \
             a : f32 , x : impl :: core :: convert :: Into < :: warpforge :: BufferRef < 'a , :: warpforge :: f16 >> , \
             y : impl :: core :: convert :: Into < :: warpforge :: BufferMut < 'a , f32 >>) \
             -> :: core :: result :: Result < :: warpforge :: tune :: Selection , :: warpforge :: Error >";
        assert!(expanded.contains(launch), "{expanded}");
        assert!(
            expanded.contains(
                "pub fn kernel (& self) -> & :: warpforge :: tune :: TunedKernel < 'rt >"
            ),
            "{expanded}"
        );
    }

    #[test]
    fn no_tuned_launcher_without_tune_key() {
        let expanded = expansion_without_json("tune(BM = [1], BN = [2])");
        assert!(!expanded.contains("pub fn tuned"), "{expanded}");
        assert!(!expanded.contains("struct Tuned"), "{expanded}");
    }

    #[test]
    fn launch_of_an_undocumented_kernel_has_docs_of_its_own() {
        let expanded = expansion_of("pub fn k(x: &mut [f32]) {}", "");
        let launch = expanded.find("pub fn launch").unwrap();
        assert!(
            expanded[..launch].ends_with(
                "# [doc = \" Launches `k` on `rt` with `grid`: the arguments, `requires(..)`, \
                 the grid and block shape and the shared memory are checked first, and an `Err` \
                 says what was wrong.\"] # [allow (clippy :: too_many_arguments)] "
            ),
            "{expanded}"
        );
    }

    #[test]
    fn launcher_names_cannot_be_parameters() {
        let item: syn::ItemFn = syn::parse_str("fn k(grid: u32) {}").unwrap();
        let def = front::parse_kernel(TokenStream2::new(), &item).unwrap();
        let err = expand(&item, &item.sig.ident, &def)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`grid` is a parameter of the generated launcher"),
            "{err}"
        );
    }
}
