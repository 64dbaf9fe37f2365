//! Reporting, and the checks every construct shares: that a value has the
//! type its context needs, that an expression is a compile-time constant
//! where one is needed (and why), and the number of a call's arguments.

use proc_macro2::Ident;
use quote::ToTokens;

use super::{Lowered, Lowerer};
use crate::front::constness;
use crate::ir::{Expr, LocalId, Scalar};

/// Why an expression must be a compile-time constant.
#[derive(Clone, Copy)]
pub(super) enum ConstantRole<'a> {
    /// An index into this register array.
    RegisterIndex(&'a Ident),
    /// The `start`, `end` or `step` of an `#[unroll]` loop.
    UnrollBound(&'static str),
    /// An array or block size, described.
    Size(&'a str),
    /// An instruction's immediate operand, described: `#[unroll]` loop
    /// variables are constants there too.
    Immediate(&'a str),
}

impl Lowerer<'_> {
    pub(super) fn err<T>(
        &mut self,
        at: impl ToTokens,
        message: impl std::fmt::Display,
    ) -> Lowered<T> {
        Err(self.errors.push(at, message))
    }

    /// Reports when `ty` is a storage type (`e4m3`, `e5m2`), which `what`
    /// (an operator, a cast) would compute with.
    pub(super) fn refuse_storage_only(
        &mut self,
        at: impl ToTokens,
        ty: Scalar,
        what: &str,
    ) -> Lowered<()> {
        if !ty.is_storage_only() {
            return Ok(());
        }
        self.err(
            at,
            format!(
                "{what} does not apply to `{0}`: `{0}` is a storage type, which kernels load, store and copy and multiply with `wgmma_m64::<{0}, N>`, but compute nothing else with; convert `{0}` values on the host, or compute in `f16` or `f32`",
                ty.name()
            ),
        )
    }

    /// Reports unless `got` is `want`; `context` says what must have type `want`.
    pub(super) fn check_type(
        &mut self,
        at: impl ToTokens,
        got: Scalar,
        want: Scalar,
        context: &str,
    ) -> Lowered<()> {
        if got == want {
            return Ok(());
        }
        let fix = match (got, want) {
            (_, Scalar::Bool) => "compare instead, e.g. `x != 0`".to_string(),
            (Scalar::Bool, w) if w.is_float() => {
                format!("convert it with `(b as u32) as {}`", w.name())
            }
            (_, w) => format!("convert it with `as {}`", w.name()),
        };
        self.err(
            at,
            format!(
                "{context} must be `{}`, but this is `{}`: {fix}",
                want.name(),
                got.name()
            ),
        )
    }

    /// Reports unless `expr` is a compile-time constant as `role` needs.
    pub(super) fn check_constant(
        &mut self,
        at: impl ToTokens,
        expr: &Expr,
        role: ConstantRole,
    ) -> Lowered<()> {
        let unroll_vars: &[LocalId] = match role {
            ConstantRole::RegisterIndex(_)
            | ConstantRole::UnrollBound(_)
            | ConstantRole::Immediate(_) => &self.unroll_vars,
            ConstantRole::Size(_) => &[],
        };
        let Some(part) = constness::non_constant_part(expr, &self.names(), unroll_vars) else {
            return Ok(());
        };
        let message = match role {
            ConstantRole::RegisterIndex(array) => format!(
                "the register array `{array}` must be indexed by compile-time constants (literals, const parameters and variables of `#[unroll]` loops), but this index uses {part}: mark the loop that makes the index `#[unroll]`, or use a shared array for run-time indices"
            ),
            ConstantRole::UnrollBound(which) => format!(
                "the {which} of an `#[unroll]` loop must be a compile-time constant (literals, const parameters and variables of enclosing `#[unroll]` loops), but this uses {part}: use a const parameter (`const N: u32` with `tune(N = [..])`) or remove `#[unroll]`"
            ),
            ConstantRole::Immediate(what) => format!(
                "{what} must be a compile-time constant (literals, const parameters and variables of `#[unroll]` loops), but this uses {part}: mark the loop that makes it `#[unroll]`, or use a const parameter"
            ),
            ConstantRole::Size(what) => format!(
                "{what} must be a compile-time constant (literals and const parameters), but this uses {part}: use a const parameter (`const N: u32` with `tune(N = [..])`)"
            ),
        };
        self.err(at, message)
    }

    /// Whether `e` is a compile-time constant over literals and const params.
    pub(super) fn is_constant(&self, e: &Expr) -> bool {
        constness::non_constant_part(e, &self.names(), &[]).is_none()
    }

    /// An array size or block size: a `u32` constant over literals and const params.
    pub(super) fn constant_size(&mut self, e: &syn::Expr, what: &str) -> Lowered<Expr> {
        let size = self.expr(e, Some(Scalar::U32))?;
        self.check_type(e, size.ty, Scalar::U32, what)?;
        self.check_constant(e, &size, ConstantRole::Size(what))?;
        Ok(size)
    }

    pub(super) fn arity(
        &mut self,
        at: impl ToTokens,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        n: usize,
        name: &str,
    ) -> Lowered<()> {
        if args.len() == n {
            return Ok(());
        }
        self.err(
            at,
            format!(
                "`{name}` takes {n} argument(s), but {} were given",
                args.len()
            ),
        )
    }
}
