//! Name resolution, type checking and lowering of the body, `block(..)` and
//! `requires(..)` into the IR.
//!
//! Literal inference: an unsuffixed literal takes the type its context needs,
//! passed down as a `hint` (the other operand, an annotation, the assigned
//! place, an intrinsic's parameter); without one it is `i32` or `f32`. A hint
//! is always a requirement of the context, so a literal of the wrong kind is
//! reported at the literal. Non-literal expressions ignore the hint and their
//! user checks the type.
//!
//! This module is the entry ([`lower_kernel`]), the lowering's state
//! ([`Lowerer`]) and the attribute's expressions. The rest is split by job,
//! each child module adding methods to [`Lowerer`]:
//! - `scope`: bindings, scopes, resolution, declarations of parameters and
//!   locals, entering and leaving an inlined function's body;
//! - `check`: reporting, type and constness checks, argument counts;
//! - `stmt`: statements, control flow, loops, hoisting;
//! - `decl`: `let` and the body's `const` items;
//! - `value`: values that may be `if` expressions;
//! - `expr`: literals, reads, operators, casts;
//! - `place`: what can be assigned, indexed or updated atomically;
//! - `builtin`: the language's functions, atomics and methods;
//! - `peek`: types seen without lowering, for literal inference;
//! - `syntax`: helpers over `syn` trees;
//! - `call`: calls of `#[device]` functions, inlined;
//! - `tuple`: tuples of scalars, their parts and destructuring;
//! - `warp`: the warp matrix and async copy statements, pipelines;
//! - `hopper`: mbarriers, the async-proxy fence, wgmma and its descriptors.

use proc_macro2::Ident;
use quote::ToTokens;

use super::attr::KernelAttr;
use super::constness;
use super::errors::{Errors, Reported};
use super::signature::Signature;
use super::types::TypeArgs;
use crate::ir::{
    Block, ConstParam, Expr, Kernel, Local, LocalId, Param, ParamId, Requirement, Scalar,
};

mod builtin;
mod call;
mod check;
mod decl;
mod expr;
mod hopper;
mod peek;
mod place;
mod scope;
mod stmt;
mod syntax;
mod tuple;
mod value;
mod warp;

pub use call::{bare_path, callees, check_device, path_key, DeviceFn, Linked};
pub use warp::{check_variants, VariantCheck};

use check::ConstantRole;
use scope::{Binding, View};
use syntax::compact_text;

type Lowered<T> = Result<T, Reported>;

/// What lowering a kernel gives: its IR, its `constrain(..)` conditions,
/// the checks that need the variants ([`check_variants`]), and the calls
/// its body makes, for errors about what they brought in.
pub struct LoweredKernel {
    pub ir: Kernel,
    pub constraints: Vec<Requirement>,
    pub variant_checks: Vec<VariantCheck>,
    pub calls: Vec<InlinedCall>,
}

/// A call in the kernel's own body and the statements it was inlined to
/// (its values as expression statements at the end); or a statement of a
/// closure the kernel passes to a device function (`function` `None`),
/// which the function's body runs: its own code, not the function's.
pub struct InlinedCall {
    pub at: proc_macro2::TokenStream,
    pub function: Option<String>,
    pub body: Block,
}

/// Lowers a kernel.
/// `instance` is the kernel's name and the types its type parameters stand
/// for.
pub fn lower_kernel(
    item: &syn::ItemFn,
    instance: (&str, &TypeArgs),
    attr: &KernelAttr,
    sig: &Signature,
    linked: &Linked,
    errors: &mut Errors,
) -> Lowered<LoweredKernel> {
    let mut lower = Lowerer::new(errors, linked);
    lower.type_args = instance.1.to_vec();
    for c in &sig.const_params {
        lower.const_param(&c.ident, c.ty);
    }
    for p in &sig.params {
        lower.param(&p.ident, p.ty);
    }
    for ident in &sig.broken {
        lower.bind(ident, Binding::Broken);
    }

    let block = attr
        .block
        .as_ref()
        .map(|dims| lower.shape(dims, "a `block(..)` size"))
        .transpose();
    let cluster = attr
        .cluster
        .as_ref()
        .map(|dims| lower.shape(dims, "a `cluster(..)` size"))
        .transpose();
    let min_blocks_per_sm = attr
        .min_blocks_per_sm
        .as_ref()
        .map(|n| lower.constant_size(n, "`min_blocks_per_sm(..)`"))
        .transpose();
    let mut tensor_maps: Lowered<()> = Ok(());
    for (id, p) in sig.params.iter().enumerate() {
        let Some(map) = &p.tensor_map else { continue };
        if let Err(reported) = lower.tensor_map(id as ParamId, map) {
            // Its copies would only repeat that the map is missing.
            lower.bind(&p.ident, Binding::Broken);
            tensor_maps = Err(reported);
        }
    }
    let requires: Vec<Lowered<Requirement>> =
        attr.requires.iter().map(|r| lower.requirement(r)).collect();
    let constraints: Vec<Lowered<Requirement>> =
        attr.constrain.iter().map(|c| lower.constraint(c)).collect();
    let mut body = Block::new();
    let mut stmts = &item.block.stmts[..];
    if let (syn::ReturnType::Type(..), Some((syn::Stmt::Expr(_, None), init))) =
        (&item.sig.output, stmts.split_last())
    {
        // The signature's error covers the value this tail would return.
        stmts = init;
    }
    lower.block(stmts, &mut body);

    tensor_maps?;
    let requires = requires.into_iter().collect::<Lowered<Vec<_>>>()?;
    let constraints = constraints.into_iter().collect::<Lowered<Vec<_>>>()?;
    let block = block?;
    let cluster = cluster?;
    let min_blocks_per_sm = min_blocks_per_sm?;
    if !lower.errors.is_empty() {
        return Err(Reported);
    }
    let kernel = Kernel {
        name: instance.0.to_string(),
        const_params: lower.const_params,
        params: lower.params,
        locals: lower.locals,
        block,
        cluster,
        min_blocks_per_sm,
        requires,
        body,
    };
    Ok(LoweredKernel {
        ir: kernel,
        constraints,
        variant_checks: lower.variant_checks,
        calls: lower.calls,
    })
}

struct Lowerer<'e> {
    errors: &'e mut Errors,
    /// The device functions the kernel may call.
    linked: &'e Linked,
    /// The device function being lowered (an index into `linked`), `None`
    /// in the kernel's own body.
    caller: Option<usize>,
    /// The device functions being inlined, outermost first.
    inlining: Vec<usize>,
    /// The arrays bound to device function parameters.
    views: Vec<View>,
    /// The parts of each tuple ([`Binding::Tuple`]).
    tuples: Vec<Vec<Binding>>,
    /// The closures passed to device functions ([`Binding::Closure`]).
    closures: Vec<scope::Closure>,
    /// Whether the statements being lowered are a closure's body.
    in_closure: bool,
    /// Per statement being lowered, innermost last: the statements of the
    /// device functions its expressions call, which run before it.
    hoisted: Vec<Block>,
    /// Why the expression being lowered cannot have statements run before
    /// it (a `while` condition runs on every iteration), if so.
    hoist_barrier: Option<&'static str>,
    /// The calls of the kernel's own body, inlined.
    calls: Vec<InlinedCall>,
    /// The scalar each type parameter in scope stands for (the kernel
    /// instance's, or the device function's being inlined).
    type_args: Vec<(Ident, Scalar)>,
    const_params: Vec<ConstParam>,
    params: Vec<Param>,
    locals: Vec<Local>,
    /// Innermost last; later bindings of a scope shadow earlier ones.
    scopes: Vec<Vec<(String, Binding)>>,
    /// Variables of all loops (immutable locals declared without `let`).
    loop_vars: Vec<LocalId>,
    /// Variables of the `#[unroll]` loops (constants after unrolling).
    unroll_vars: Vec<LocalId>,
    loop_depth: u32,
    pipelines: Vec<warp::Pipeline>,
    /// The values of the body's `const` items, constant expressions.
    named: Vec<Expr>,
    /// Compile-time constant conditions that hold at the statement being
    /// lowered: the constant conjuncts of enclosing `if` conditions (their
    /// negation in an `else`) and `start < end` of enclosing loops with
    /// constant bounds. A variant that fails one never runs the statement.
    guards: Vec<Expr>,
    variant_checks: Vec<VariantCheck>,
    /// Whether this lowers a device function's body at its definition
    /// (`call::check_device`), where its slices have no tensor maps yet:
    /// a TMA copy's map is checked at each call instead.
    checking_definition: bool,
}

impl<'e> Lowerer<'e> {
    fn new(errors: &'e mut Errors, linked: &'e Linked) -> Self {
        Lowerer {
            errors,
            linked,
            caller: None,
            inlining: Vec::new(),
            views: Vec::new(),
            tuples: Vec::new(),
            closures: Vec::new(),
            in_closure: false,
            hoisted: Vec::new(),
            hoist_barrier: None,
            calls: Vec::new(),
            type_args: Vec::new(),
            const_params: Vec::new(),
            params: Vec::new(),
            locals: Vec::new(),
            scopes: vec![Vec::new()],
            loop_vars: Vec::new(),
            unroll_vars: Vec::new(),
            loop_depth: 0,
            pipelines: Vec::new(),
            named: Vec::new(),
            guards: Vec::new(),
            variant_checks: Vec::new(),
            checking_definition: false,
        }
    }
}

impl Lowerer<'_> {
    /// A `block(..)` or `cluster(..)` shape: one to three constant sizes,
    /// the missing ones 1.
    fn shape(&mut self, dims: &[syn::Expr], what: &str) -> Lowered<[Expr; 3]> {
        let mut shape = [Expr::u32(1), Expr::u32(1), Expr::u32(1)];
        let mut failed = None;
        for (slot, dim) in shape.iter_mut().zip(dims) {
            match self.constant_size(dim, what) {
                Ok(e) => *slot = e,
                Err(r) => failed = Some(r),
            }
        }
        failed.map_or(Ok(shape), Err)
    }

    fn requirement(&mut self, e: &syn::Expr) -> Lowered<Requirement> {
        let cond = self.expr(e, Some(Scalar::Bool))?;
        self.check_type(e, cond.ty, Scalar::Bool, "a `requires(..)` condition")?;
        if let Some(part) = constness::non_host_part(&cond, &self.names()) {
            return self.err(
                e,
                format!(
                    "`requires(..)` is checked on the host before the launch, so it can only use scalar parameters, slice lengths (`x.len()`), const parameters and literals, but this uses {part}: check that inside the kernel instead"
                ),
            );
        }
        let text = compact_text(e.to_token_stream());
        Ok(Requirement { cond, text })
    }

    /// A `constrain(..)` condition: a `bool` over const params and literals.
    fn constraint(&mut self, e: &syn::Expr) -> Lowered<Requirement> {
        let cond = self.expr(e, Some(Scalar::Bool))?;
        self.check_type(e, cond.ty, Scalar::Bool, "a `constrain(..)` condition")?;
        self.check_constant(e, &cond, ConstantRole::Size("a `constrain(..)` condition"))?;
        let text = compact_text(e.to_token_stream());
        Ok(Requirement { cond, text })
    }
}
