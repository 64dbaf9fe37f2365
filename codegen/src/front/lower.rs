//! Name resolution, type checking and lowering of the body, `block(..)` and
//! `requires(..)` into the IR.
//!
//! Literal inference: an unsuffixed literal takes the type its context needs,
//! passed down as a `hint` (the other operand, an annotation, the assigned
//! place, an intrinsic's parameter); without one it is `i32` or `f32`. A hint
//! is always a requirement of the context, so a literal of the wrong kind is
//! reported at the literal. Non-literal expressions ignore the hint and their
//! user checks the type.

use proc_macro2::Ident;
use quote::ToTokens;

use super::attr::KernelAttr;
use super::constness::{self, Names};
use super::errors::{Errors, Reported};
use super::infer;
use super::signature::Signature;
use super::types::{self, TypeArgs};
use crate::ir::{
    AtomicOp, Axis, BinaryOp, Block, ConstId, ConstParam, Expr, ExprKind, Intrinsic, Kernel,
    Literal, Local, LocalId, Param, ParamId, ParamType, Place, Requirement, Scalar, Space, Special,
    Stmt, UnaryOp,
};

mod call;
mod warp;

pub use call::{bare_path, callees, check_device, path_key, DeviceFn, Linked};
pub use warp::{check_variants, VariantCheck};

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
/// (its values as expression statements at the end).
pub struct InlinedCall {
    pub at: proc_macro2::TokenStream,
    pub function: String,
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
        .map(|dims| lower.block_shape(dims))
        .transpose();
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

    let requires = requires.into_iter().collect::<Lowered<Vec<_>>>()?;
    let constraints = constraints.into_iter().collect::<Lowered<Vec<_>>>()?;
    let block = block?;
    if !lower.errors.is_empty() {
        return Err(Reported);
    }
    let kernel = Kernel {
        name: instance.0.to_string(),
        const_params: lower.const_params,
        params: lower.params,
        locals: lower.locals,
        block,
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

/// What a name in scope refers to.
#[derive(Clone, Copy)]
enum Binding {
    Param(ParamId),
    Const(ConstId),
    Local(LocalId),
    /// A pipeline (`let pipe = pipeline(STAGES);`): an index into `Lowerer::pipelines`.
    Pipeline(usize),
    /// A `const` of the body (`const ROWS: u32 = BM / 8;`): an index into
    /// `Lowerer::named`, whose expression each use reads in its place.
    Named(usize),
    /// A scalar parameter of a device function read in place: its
    /// argument, an index into `Lowerer::named`.
    Argument(usize),
    /// A slice parameter of a device function: the kernel's slice, which
    /// the function may write if `mutable`.
    Slice {
        param: ParamId,
        mutable: bool,
    },
    /// An array parameter of a device function: an index into
    /// `Lowerer::views`.
    View(usize),
    /// A declaration that failed; uses are not reported again.
    Broken,
}

/// An array or a row of one, as a device function's parameter sees it:
/// `prefix` indexes the outer dimensions of `local`.
#[derive(Clone)]
struct View {
    local: LocalId,
    prefix: Vec<Expr>,
    mutable: bool,
}

/// What [`Lowerer::enter_function`] sets aside for the caller.
struct CallerState {
    scopes: Vec<Vec<(String, Binding)>>,
    type_args: Vec<(Ident, Scalar)>,
    loop_depth: u32,
    caller: Option<usize>,
}

/// Why an expression must be a compile-time constant.
#[derive(Clone, Copy)]
enum ConstantRole<'a> {
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

/// How a place is used.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    Read,
    Write,
    Atomic,
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
}

const FUNCTIONS: &str = "thread_idx(), block_idx(), block_dim(), grid_dim(), lane_id(), sync_threads(), shared(), pipeline(), \
     shfl_xor, shfl_down, pack_f16x2, pack_bf16x2, to_tf32, f32::from_bits, atomic_add, atomic_min, atomic_max, atomic_and, atomic_or, \
     atomic_xor, atomic_exchange, atomic_compare_exchange, and the warp matrix and async copy statements";

/// Math written as methods: name, intrinsic, number of arguments besides the receiver.
const MATH_METHODS: [(&str, Intrinsic, usize); 16] = [
    ("sqrt", Intrinsic::Sqrt, 0),
    ("rsqrt", Intrinsic::Rsqrt, 0),
    ("exp", Intrinsic::Exp, 0),
    ("exp2", Intrinsic::Exp2, 0),
    ("ln", Intrinsic::Ln, 0),
    ("log2", Intrinsic::Log2, 0),
    ("sin", Intrinsic::Sin, 0),
    ("cos", Intrinsic::Cos, 0),
    ("tanh", Intrinsic::Tanh, 0),
    ("floor", Intrinsic::Floor, 0),
    ("ceil", Intrinsic::Ceil, 0),
    ("round", Intrinsic::Round, 0),
    ("abs", Intrinsic::Abs, 0),
    ("min", Intrinsic::Min, 1),
    ("max", Intrinsic::Max, 1),
    ("mul_add", Intrinsic::MulAdd, 2),
];

const ATOMICS: [(&str, AtomicOp); 8] = [
    ("atomic_add", AtomicOp::Add),
    ("atomic_min", AtomicOp::Min),
    ("atomic_max", AtomicOp::Max),
    ("atomic_and", AtomicOp::And),
    ("atomic_or", AtomicOp::Or),
    ("atomic_xor", AtomicOp::Xor),
    ("atomic_exchange", AtomicOp::Exchange),
    ("atomic_compare_exchange", AtomicOp::CompareExchange),
];

const SPECIALS: [&str; 4] = ["thread_idx", "block_idx", "block_dim", "grid_dim"];

impl<'e> Lowerer<'e> {
    fn new(errors: &'e mut Errors, linked: &'e Linked) -> Self {
        Lowerer {
            errors,
            linked,
            caller: None,
            inlining: Vec::new(),
            views: Vec::new(),
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
        }
    }

    /// The scalar a type names: a type parameter in scope or a scalar type.
    fn scalar(&self, ty: &syn::Type) -> Result<Scalar, String> {
        types::scalar_in(ty, &self.type_args)
    }

    /// Declares and binds a run-time parameter.
    fn param(&mut self, ident: &Ident, ty: ParamType) -> ParamId {
        self.params.push(Param {
            name: ident.to_string(),
            ty,
        });
        let id = (self.params.len() - 1) as ParamId;
        self.bind(ident, Binding::Param(id));
        id
    }

    /// Declares and binds a const parameter.
    fn const_param(&mut self, ident: &Ident, ty: Scalar) -> ConstId {
        self.const_params.push(ConstParam {
            name: ident.to_string(),
            ty,
        });
        let id = (self.const_params.len() - 1) as ConstId;
        self.bind(ident, Binding::Const(id));
        id
    }
}

impl Lowerer<'_> {
    // ---- scopes -------------------------------------------------------

    fn bind(&mut self, ident: &Ident, binding: Binding) {
        self.scopes
            .last_mut()
            .expect("a scope is always open")
            .push((ident.to_string(), binding));
    }

    fn lookup(&self, ident: &Ident) -> Option<Binding> {
        let mut bindings = self.scopes.iter().rev().flat_map(|s| s.iter().rev());
        bindings.find(|(n, _)| ident == n).map(|(_, b)| *b)
    }

    fn resolve(&mut self, ident: &Ident) -> Lowered<Binding> {
        let name = ident.to_string();
        match self.lookup(ident) {
            Some(Binding::Broken) => Err(Reported),
            Some(binding) => Ok(binding),
            None if SPECIALS.contains(&name.as_str()) || name == "lane_id" => {
                Err(self.errors.push(ident, format!("`{name}` is a function: call it, e.g. `{name}()`")))
            }
            None => Err(self.errors.push(
                ident,
                format!("cannot find `{name}` in this kernel: declare it with `let` before using it, or add a parameter"),
            )),
        }
    }

    fn new_local(
        &mut self,
        name: String,
        ty: Scalar,
        space: Space,
        dims: Vec<Expr>,
        mutable: bool,
    ) -> LocalId {
        self.locals.push(Local {
            name,
            ty,
            space,
            dims,
            mutable,
        });
        (self.locals.len() - 1) as LocalId
    }

    fn names(&self) -> Names<'_> {
        Names {
            params: &self.params,
            locals: &self.locals,
        }
    }

    fn err<T>(&mut self, at: impl ToTokens, message: impl std::fmt::Display) -> Lowered<T> {
        Err(self.errors.push(at, message))
    }

    /// Reports unless `got` is `want`; `context` says what must have type `want`.
    fn check_type(
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
    fn check_constant(
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

    // ---- attribute expressions ----------------------------------------

    fn block_shape(&mut self, dims: &[syn::Expr]) -> Lowered<[Expr; 3]> {
        let mut shape = [Expr::u32(1), Expr::u32(1), Expr::u32(1)];
        let mut failed = None;
        for (slot, dim) in shape.iter_mut().zip(dims) {
            match self.constant_size(dim, "a `block(..)` size") {
                Ok(e) => *slot = e,
                Err(r) => failed = Some(r),
            }
        }
        failed.map_or(Ok(shape), Err)
    }

    /// An array size or block size: a `u32` constant over literals and const params.
    fn constant_size(&mut self, e: &syn::Expr, what: &str) -> Lowered<Expr> {
        let size = self.expr(e, Some(Scalar::U32))?;
        self.check_type(e, size.ty, Scalar::U32, what)?;
        self.check_constant(e, &size, ConstantRole::Size(what))?;
        Ok(size)
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

    // ---- statements ---------------------------------------------------

    /// Lowers `stmts` in a new scope. Errors are reported and lowering goes on
    /// with the next statement.
    fn block(&mut self, stmts: &[syn::Stmt], out: &mut Block) {
        self.scopes.push(Vec::new());
        for (i, stmt) in stmts.iter().enumerate() {
            let _reported = self.hoisting(out, |this, out| this.stmt(stmt, &stmts[i + 1..], out));
        }
        self.scopes.pop();
    }

    /// Runs `lower` for one statement: what it writes goes to `out` after
    /// the statements of the device functions its expressions call.
    fn hoisting<T>(
        &mut self,
        out: &mut Block,
        lower: impl FnOnce(&mut Self, &mut Block) -> T,
    ) -> T {
        self.hoisted.push(Block::new());
        let barrier = self.hoist_barrier.take();
        let mut stmt = Block::new();
        let result = lower(self, &mut stmt);
        self.hoist_barrier = barrier;
        out.extend(self.hoisted.pop().expect("pushed above"));
        out.extend(stmt);
        result
    }

    /// Runs `lower` for an expression before which no statement can run;
    /// `place` says where it is, for errors.
    fn without_hoisting<T>(
        &mut self,
        place: &'static str,
        lower: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let barrier = self.hoist_barrier.replace(place);
        let result = lower(self);
        self.hoist_barrier = barrier;
        result
    }

    /// Sets the caller's scopes, loops and type parameters aside to lower
    /// the body of device function `f` with the types `type_args`.
    fn enter_function(&mut self, f: usize, type_args: Vec<(Ident, Scalar)>) -> CallerState {
        self.inlining.push(f);
        CallerState {
            scopes: std::mem::replace(&mut self.scopes, vec![Vec::new()]),
            type_args: std::mem::replace(&mut self.type_args, type_args),
            loop_depth: std::mem::replace(&mut self.loop_depth, 0),
            caller: self.caller.replace(f),
        }
    }

    fn leave_function(&mut self, saved: CallerState) {
        self.inlining.pop();
        self.scopes = saved.scopes;
        self.type_args = saved.type_args;
        self.loop_depth = saved.loop_depth;
        self.caller = saved.caller;
    }

    /// `rest` is what follows `stmt` in its block (where a `let` is in scope).
    fn stmt(&mut self, stmt: &syn::Stmt, rest: &[syn::Stmt], out: &mut Block) -> Lowered<()> {
        match stmt {
            syn::Stmt::Local(local) => self.let_stmt(local, rest, out),
            syn::Stmt::Item(syn::Item::Const(c)) => self.const_item(c),
            syn::Stmt::Item(item) => self.err(
                item,
                "items (`fn`, `struct`, `use`, ..) cannot be declared inside a kernel: use `let` for values, `const` for compile-time constants",
            ),
            syn::Stmt::Macro(m) => self.err(m, macro_message()),
            syn::Stmt::Expr(e, _) => self.expr_stmt(e, out),
        }
    }

    fn expr_stmt(&mut self, e: &syn::Expr, out: &mut Block) -> Lowered<()> {
        if let syn::Expr::MethodCall(m) = e {
            if let Some(id) = self.pipeline_of(&m.receiver) {
                out.push(self.pipeline_statement(m, id)?);
                return Ok(());
            }
        }
        if let syn::Expr::Binary(b) = e {
            if let Some(op) = compound_op(&b.op) {
                return self.compound_assign(b, op, out);
            }
        }
        match e {
            syn::Expr::Assign(a) => {
                let (place, ty) = self.place(&a.left, Access::Write)?;
                let value = self.value(&a.right, Some(ty), out)?;
                self.check_type(&a.right, value.ty, ty, "the assigned value")?;
                out.push(Stmt::Assign { place, value });
                Ok(())
            }
            syn::Expr::If(i) => self.if_stmt(i, out),
            syn::Expr::ForLoop(f) => self.for_loop(f, out),
            syn::Expr::While(w) => {
                self.no_label(&w.label)?;
                self.no_attrs(&w.attrs)?;
                let cond = self.without_hoisting("a `while` condition, which runs on every iteration", |this| {
                    this.condition(&w.cond, "`while`")
                })?;
                let body = self.loop_body(&w.body.stmts, None);
                out.push(Stmt::While { cond, body });
                Ok(())
            }
            syn::Expr::Loop(l) => {
                self.no_label(&l.label)?;
                self.no_attrs(&l.attrs)?;
                let body = self.loop_body(&l.body.stmts, None);
                out.push(Stmt::While {
                    cond: Expr::literal(Scalar::Bool, Literal::Bool(true)),
                    body,
                });
                Ok(())
            }
            syn::Expr::Break(b) => {
                if b.label.is_some() {
                    return self.err(
                        b,
                        "labeled `break` is not supported: restructure with a `bool` flag",
                    );
                }
                if let Some(v) = &b.expr {
                    return self.err(v, "`break` with a value is not supported: assign the value to a variable first");
                }
                self.in_loop(b, "break")?;
                out.push(Stmt::Break);
                Ok(())
            }
            syn::Expr::Continue(c) => {
                if c.label.is_some() {
                    return self.err(
                        c,
                        "labeled `continue` is not supported: restructure with a `bool` flag",
                    );
                }
                self.in_loop(c, "continue")?;
                out.push(Stmt::Continue);
                Ok(())
            }
            syn::Expr::Return(r) if self.caller.is_some() => self.err(
                r,
                "`return` is not supported in a device function: its result is the last expression of its body; choose it with `if`/`else`",
            ),
            syn::Expr::Return(r) => {
                if let Some(v) = &r.expr {
                    return self.err(v, "kernels return nothing: write results into a `&mut [T]` parameter and use a bare `return;`");
                }
                out.push(Stmt::Return);
                Ok(())
            }
            syn::Expr::Block(b) if b.label.is_none() => {
                self.block(&b.block.stmts, out);
                Ok(())
            }
            syn::Expr::Call(c) if call_name(c).as_deref() == Some("sync_threads") => {
                self.arity(c, &c.args, 0, "sync_threads")?;
                out.push(Stmt::Barrier);
                Ok(())
            }
            syn::Expr::Call(c) if call_name(c).is_some_and(|n| warp::is_warp_statement(&n)) => {
                out.push(self.warp_statement(c)?);
                Ok(())
            }
            syn::Expr::Call(c) if Self::is_device_call(c) => self.device_call(c).map(|_| ()),
            syn::Expr::Call(c) if call_name(c).is_some_and(|n| n.starts_with("atomic_")) => {
                let e = self.expr(e, None)?;
                out.push(Stmt::Expr(e));
                Ok(())
            }
            other => {
                self.expr(other, None)?;
                self.err(
                    other,
                    "this expression computes a value that is never used: assign it (`let v = ..;`, `y[i] = ..;`) or remove it",
                )
            }
        }
    }

    /// `place op= value` as `place = place op value`.
    fn compound_assign(
        &mut self,
        b: &syn::ExprBinary,
        op: BinaryOp,
        out: &mut Block,
    ) -> Lowered<()> {
        let (place, ty) = self.place(&b.left, Access::Write)?;
        let rhs_hint = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
            Scalar::U32
        } else {
            ty
        };
        let rhs = self.value(&b.right, Some(rhs_hint), out)?;
        let indices: &[Expr] = match &place {
            Place::Local { indices, .. } => indices,
            Place::Global { index, .. } => std::slice::from_ref(index),
        };
        if indices.iter().any(constness::has_atomic) {
            return self.err(
                &b.left,
                "an index with an atomic would run the atomic twice in a compound assignment: bind the index first (`let j = atomic_add(..);`)",
            );
        }
        let current = Expr {
            ty,
            kind: ExprKind::Load(Box::new(place.clone())),
        };
        let value = self.build_binary(op, current, rhs, b)?;
        out.push(Stmt::Assign { place, value });
        Ok(())
    }

    fn if_stmt(&mut self, i: &syn::ExprIf, out: &mut Block) -> Lowered<()> {
        let cond = self.condition(&i.cond, "`if`")?;
        let outer_guards = self.guards.len();
        self.push_constant_conjuncts(&cond);
        let mut then_body = Block::new();
        self.block(&i.then_branch.stmts, &mut then_body);
        self.guards.truncate(outer_guards);
        if self.is_constant(&cond) {
            self.guards.push(Expr {
                ty: Scalar::Bool,
                kind: ExprKind::Unary(UnaryOp::Not, Box::new(cond.clone())),
            });
        }
        let mut else_body = Block::new();
        let else_lowered = match i.else_branch.as_ref().map(|(_, e)| &**e) {
            None => Ok(()),
            Some(syn::Expr::If(elif)) => {
                self.hoisting(&mut else_body, |this, out| this.if_stmt(elif, out))
            }
            Some(syn::Expr::Block(b)) => {
                self.block(&b.block.stmts, &mut else_body);
                Ok(())
            }
            Some(other) => self.err(other, "write the `else` branch as a block `else { .. }`"),
        };
        self.guards.truncate(outer_guards);
        else_lowered?;
        out.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
        Ok(())
    }

    /// Adds to the guards the conjuncts of `cond` (split at `&&` and `&`)
    /// that are compile-time constants: they hold wherever `cond` does.
    fn push_constant_conjuncts(&mut self, cond: &Expr) {
        match &cond.kind {
            ExprKind::Binary(BinaryOp::LogicalAnd | BinaryOp::BitAnd, a, b) => {
                self.push_constant_conjuncts(a);
                self.push_constant_conjuncts(b);
            }
            _ if self.is_constant(cond) => self.guards.push(cond.clone()),
            _ => {}
        }
    }

    /// Whether `e` is a compile-time constant over literals and const params.
    fn is_constant(&self, e: &Expr) -> bool {
        constness::non_constant_part(e, &self.names(), &[]).is_none()
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop, out: &mut Block) -> Lowered<()> {
        self.no_label(&f.label)?;
        let mut unroll = false;
        for attr in &f.attrs {
            if attr.path().is_ident("unroll") && matches!(attr.meta, syn::Meta::Path(_)) {
                unroll = true;
            } else {
                self.err::<()>(attr, "the only attribute on a loop is `#[unroll]`")?;
            }
        }
        let name = match &*f.pat {
            syn::Pat::Ident(p) if p.mutability.is_none() && p.by_ref.is_none() && p.subpat.is_none() => {
                Some(p.ident.clone())
            }
            syn::Pat::Wild(_) => None,
            other => {
                return self.err(
                    other,
                    "the loop variable is a plain name (`for i in ..`) or `_`; it cannot be `mut` or a pattern",
                )
            }
        };

        const RANGES: &str =
            "`for` loops run over integer ranges: `for i in a..b` or `for i in (a..b).step_by(s)`";
        let (range, step) = match peel(&f.expr) {
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                match peel(&m.receiver) {
                    syn::Expr::Range(r) => (r, Some(&m.args[0])),
                    other => return self.err(other, RANGES),
                }
            }
            syn::Expr::Range(r) => (r, None),
            other => return self.err(other, RANGES),
        };
        if let syn::RangeLimits::Closed(dots) = range.limits {
            return self.err(
                dots,
                "inclusive ranges `a..=b` are not supported: write `a..b + 1`",
            );
        }
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return self.err(range, "a loop range needs both bounds: `a..b`");
        };
        // Untyped integer bounds take the type of the step, or else the type
        // the body uses the variable with.
        let inferred = if is_untyped_literal(start) && is_untyped_literal(end) {
            let from_step = step.and_then(|s| self.peek_type(s, None));
            let from_uses = || {
                name.as_ref()
                    .and_then(|n| self.type_from_uses(n, &f.body.stmts))
            };
            from_step.or_else(from_uses).filter(|t| t.is_int())
        } else {
            None
        };
        let (start_e, end_e) = self.pair(start, end, inferred)?;
        if start_e.ty != end_e.ty {
            return self.err(
                range,
                format!(
                    "the bounds of a range must have the same type, but they are `{}` and `{}`: convert one with `as`",
                    start_e.ty.name(),
                    end_e.ty.name()
                ),
            );
        }
        let ty = start_e.ty;
        if !ty.is_int() {
            return self.err(
                range,
                format!("loop ranges are over integers, not `{}`: loop over an integer and compute the value, e.g. `i as f32 * step`", ty.name()),
            );
        }
        let step_e = match step {
            Some(s) => {
                let step_e = self.expr(s, Some(ty))?;
                self.check_type(s, step_e.ty, ty, "the step")?;
                // Literals of unsigned types are never negative; their bits may look so.
                if step_e
                    .as_int()
                    .is_some_and(|v| v == 0 || (ty.is_signed() && v < 0))
                {
                    return self.err(
                        s,
                        "the step of a loop must be positive: to count down, use a `while` loop",
                    );
                }
                step_e
            }
            None => Expr::literal(ty, Literal::Int(1)),
        };
        if unroll {
            self.check_constant(start, &start_e, ConstantRole::UnrollBound("start"))?;
            self.check_constant(end, &end_e, ConstantRole::UnrollBound("end"))?;
            if let Some(s) = step {
                self.check_constant(s, &step_e, ConstantRole::UnrollBound("step"))?;
            }
        }
        let var_name = name
            .as_ref()
            .map_or_else(|| "_".to_string(), |n| n.to_string());
        let var = self.new_local(var_name, ty, Space::Register, Vec::new(), false);
        self.loop_vars.push(var);
        if unroll {
            self.unroll_vars.push(var);
        }
        let outer_guards = self.guards.len();
        if self.is_constant(&start_e) && self.is_constant(&end_e) {
            let runs = Expr::binary(BinaryOp::Lt, start_e.clone(), end_e.clone());
            self.guards.push(runs);
        }
        let body = self.loop_body(&f.body.stmts, name.map(|n| (n, var)));
        self.guards.truncate(outer_guards);
        out.push(Stmt::For {
            var,
            start: start_e,
            end: end_e,
            step: step_e,
            unroll,
            body,
        });
        Ok(())
    }

    fn loop_body(&mut self, stmts: &[syn::Stmt], var: Option<(Ident, LocalId)>) -> Block {
        self.scopes.push(Vec::new());
        if let Some((ident, id)) = var {
            self.bind(&ident, Binding::Local(id));
        }
        self.loop_depth += 1;
        let mut body = Block::new();
        self.block(stmts, &mut body);
        self.loop_depth -= 1;
        self.scopes.pop();
        body
    }

    fn in_loop(&mut self, at: impl ToTokens, keyword: &str) -> Lowered<()> {
        if self.loop_depth == 0 {
            return self.err(
                at,
                format!("`{keyword}` outside of a loop: use `return` to end the kernel's thread"),
            );
        }
        Ok(())
    }

    fn no_label(&mut self, label: &Option<syn::Label>) -> Lowered<()> {
        match label {
            Some(l) => self.err(
                l,
                "loop labels are not supported: restructure with a `bool` flag",
            ),
            None => Ok(()),
        }
    }

    fn no_attrs(&mut self, attrs: &[syn::Attribute]) -> Lowered<()> {
        match attrs.first() {
            Some(a) => self.err(
                a,
                "attributes are only supported on `for` loops (`#[unroll]`)",
            ),
            None => Ok(()),
        }
    }

    fn condition(&mut self, e: &syn::Expr, construct: &str) -> Lowered<Expr> {
        if let syn::Expr::Let(l) = e {
            return self.err(l, "`let` in a condition (`if let`, `while let`) is not supported: use a `bool` condition");
        }
        let cond = self.expr(e, Some(Scalar::Bool))?;
        self.check_type(e, cond.ty, Scalar::Bool, &format!("{construct} conditions"))?;
        Ok(cond)
    }

    /// `const NAME: TYPE = VALUE;`: a name for a compile-time constant
    /// expression (over literals, const parameters, other such names and
    /// `#[unroll]` loop variables), in scope until the end of its block. It
    /// emits nothing: each use reads the expression in its place, so a name
    /// serves wherever its expression would (array sizes, loop bounds,
    /// register indices).
    fn const_item(&mut self, c: &syn::ItemConst) -> Lowered<()> {
        let result = self.const_value(c);
        let binding = match result {
            Ok(value) => {
                self.named.push(value);
                Binding::Named(self.named.len() - 1)
            }
            Err(Reported) => Binding::Broken,
        };
        self.bind(&c.ident, binding);
        match binding {
            Binding::Broken => Err(Reported),
            _ => Ok(()),
        }
    }

    fn const_value(&mut self, c: &syn::ItemConst) -> Lowered<Expr> {
        if let Some(a) = c.attrs.first() {
            return self.err(a, "attributes on a kernel's `const` are not supported");
        }
        if !matches!(c.vis, syn::Visibility::Inherited) {
            return self.err(
                &c.vis,
                "a kernel's `const` is local to the kernel: remove the visibility",
            );
        }
        if !c.generics.params.is_empty() {
            return self.err(
                &c.generics,
                "a kernel's `const` takes no generic parameters",
            );
        }
        let ty = match self.scalar(&c.ty) {
            Ok(ty) => ty,
            Err(msg) => return self.err(&c.ty, msg),
        };
        let value = self.expr(&c.expr, Some(ty))?;
        self.check_type(&c.expr, value.ty, ty, "the value of the `const`")?;
        if let Some(part) = constness::non_constant_part(&value, &self.names(), &self.unroll_vars) {
            return self.err(
                &c.expr,
                format!(
                    "the value of `const {}` must be a compile-time constant (literals, const parameters, other `const`s and variables of `#[unroll]` loops), but this uses {part}: use `let` for a run-time value",
                    c.ident
                ),
            );
        }
        Ok(value)
    }

    fn let_stmt(&mut self, local: &syn::Local, rest: &[syn::Stmt], out: &mut Block) -> Lowered<()> {
        let (pat, annotation) = match &local.pat {
            syn::Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
            other => (other, None),
        };
        let (ident, mutable) = match pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                (Some(&p.ident), p.mutability.is_some())
            }
            syn::Pat::Wild(_) => (None, false),
            syn::Pat::Tuple(t) if annotation.is_none() => {
                let Some(init) = local.init.as_ref().filter(|i| i.diverge.is_none()) else {
                    return self.err(t, "a tuple is bound from the results of a device function: `let (a, b) = f(..);`");
                };
                return self.let_tuple(t, &init.expr, out);
            }
            other => {
                return self.err(
                    other,
                    "destructuring is not supported: declare one variable per `let`",
                )
            }
        };
        if let Some(syn::Expr::Call(c)) = local.init.as_ref().map(|init| peel(&init.expr)) {
            if call_name(c).as_deref() == Some("pipeline") {
                let result = self.pipeline_decl(local, ident, mutable, annotation, c);
                if let Some(ident) = ident {
                    self.bind(ident, result.map_or(Binding::Broken, Binding::Pipeline));
                }
                return result.map(|_| ());
            }
        }
        let result = self.let_local(local, ident, mutable, annotation, rest, out);
        if let Some(ident) = ident {
            let binding = match result {
                Ok(Some(id)) => Binding::Local(id),
                _ => Binding::Broken,
            };
            self.bind(ident, binding);
        }
        result.map(|_| ())
    }

    /// Lowers the declaration; the caller binds the name, so the initializer
    /// still sees what the name shadowed (`let x = x + 1;`).
    fn let_local(
        &mut self,
        local: &syn::Local,
        ident: Option<&Ident>,
        mutable: bool,
        annotation: Option<&syn::Type>,
        rest: &[syn::Stmt],
        out: &mut Block,
    ) -> Lowered<Option<LocalId>> {
        if let Some(a) = local.attrs.first() {
            return self.err(a, "attributes on `let` are not supported");
        }
        let init = match &local.init {
            Some(init) if init.diverge.is_some() => {
                return self.err(
                    &local.pat,
                    "`let .. else` is not supported: use `if` and `return`",
                )
            }
            Some(init) => Some(peel(&init.expr)),
            None => None,
        };
        let declared = annotation.map(|ty| self.declared_type(ty)).transpose()?;
        let name = ident.map_or_else(|| "_".to_string(), |i| i.to_string());
        // An untyped literal value takes the type the following code uses the variable with.
        let inferred = match (ident, &declared, init) {
            (Some(ident), None, Some(init)) if is_untyped_literal(repeat_parts(init).0) => {
                self.type_from_uses(ident, rest)
            }
            _ => None,
        };

        match init {
            Some(syn::Expr::Call(c)) if call_name(c).as_deref() == Some("shared") => {
                self.arity(c, &c.args, 0, "shared")?;
                let Some((elem, dims)) = declared.filter(|(_, dims)| !dims.is_empty()) else {
                    return self.err(
                        &local.pat,
                        format!(
                            "a shared array needs its element type and shape: `let mut {name}: [[f32; 32]; 32] = shared();`"
                        ),
                    );
                };
                let id = self.new_local(name, elem, Space::Shared, dims, mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: None,
                });
                Ok(Some(id))
            }
            Some(repeat @ syn::Expr::Repeat(_)) => {
                let (splat, lengths) = repeat_parts(repeat);
                let dims = lengths
                    .iter()
                    .map(|len| self.constant_size(len, "an array size"))
                    .collect::<Lowered<Vec<_>>>()?;
                let value =
                    self.expr(splat, declared.as_ref().map(|(elem, _)| *elem).or(inferred))?;
                if let Some((elem, declared_dims)) = &declared {
                    self.check_type(splat, value.ty, *elem, "the initial value of the elements")?;
                    if *declared_dims != dims {
                        return self.err(
                            annotation,
                            "the annotated array shape differs from the initializer's: write the same sizes in both (or drop the annotation)",
                        );
                    }
                }
                if constness::has_atomic(&value) {
                    return self.err(splat, "the initial value of an array cannot contain an atomic: bind it to a variable first");
                }
                let id = self.new_local(name, value.ty, Space::Register, dims, mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: Some(value),
                });
                Ok(Some(id))
            }
            None => match declared {
                Some((elem, dims)) if !dims.is_empty() => {
                    let id = self.new_local(name, elem, Space::Register, dims, mutable);
                    out.push(Stmt::Let {
                        local: id,
                        init: None,
                    });
                    Ok(Some(id))
                }
                Some((elem, _)) => self.err(
                    &local.pat,
                    format!(
                        "give `{name}` an initial value: `let {name}: {0} = ..;`",
                        elem.name()
                    ),
                ),
                None => self.err(
                    &local.pat,
                    format!("give `{name}` an initial value: `let {name} = ..;`"),
                ),
            },
            Some(init) => {
                if let Some((_, dims)) = &declared {
                    if !dims.is_empty() {
                        return self.err(
                            init,
                            "an array is created with `[v; N]` (registers) or `shared()` (shared memory), not from another value",
                        );
                    }
                }
                let hint = declared.as_ref().map(|(elem, _)| *elem);
                let value = self.value(init, hint.or(inferred), out)?;
                if let Some(want) = hint {
                    self.check_type(init, value.ty, want, &format!("the value of `{name}`"))?;
                }
                if ident.is_none() {
                    // `let _ = e;` keeps only the effect of `e` (an atomic).
                    if constness::has_atomic(&value) {
                        out.push(Stmt::Expr(value));
                    }
                    return Ok(None);
                }
                let id = self.new_local(name, value.ty, Space::Register, Vec::new(), mutable);
                out.push(Stmt::Let {
                    local: id,
                    init: Some(value),
                });
                Ok(Some(id))
            }
        }
    }

    /// A `let` annotation: a scalar, or nested arrays of one (`[[f32; N]; M]`, dims outermost first).
    fn declared_type(&mut self, ty: &syn::Type) -> Lowered<(Scalar, Vec<Expr>)> {
        match ty {
            syn::Type::Array(a) => {
                let outer = self.constant_size(&a.len, "an array size")?;
                let (elem, mut dims) = self.declared_type(&a.elem)?;
                dims.insert(0, outer);
                Ok((elem, dims))
            }
            syn::Type::Paren(p) => self.declared_type(&p.elem),
            other => match self.scalar(other) {
                Ok(s) => Ok((s, Vec::new())),
                Err(msg) => self.err(other, msg),
            },
        }
    }

    fn type_from_uses(&self, ident: &Ident, stmts: &[syn::Stmt]) -> Option<Scalar> {
        infer::type_from_uses(
            ident,
            stmts,
            &|e| self.peek_type(e, Some(ident)),
            &|c, k| self.argument_type(c, k),
        )
    }

    /// The type of `e` if it is evident without lowering (names in scope but
    /// `hiding`, typed literals, indices, casts, ..); `None` otherwise.
    fn peek_type(&self, e: &syn::Expr, hiding: Option<&Ident>) -> Option<Scalar> {
        let peek = |e: &syn::Expr| self.peek_type(e, hiding);
        match peel(e) {
            syn::Expr::Lit(l) => match &l.lit {
                syn::Lit::Int(i) => Scalar::from_name(i.suffix()),
                syn::Lit::Float(f) => Scalar::from_name(f.suffix()),
                syn::Lit::Bool(_) => Some(Scalar::Bool),
                _ => None,
            },
            syn::Expr::Path(_) | syn::Expr::Index(_) => {
                let syn::Expr::Path(root) = index_chain(e).0 else {
                    return None;
                };
                let ident = root.path.get_ident().filter(|i| Some(*i) != hiding)?;
                match self.lookup(ident)? {
                    Binding::Param(id) => match self.params[id as usize].ty {
                        ParamType::Scalar(s) | ParamType::Slice { elem: s, .. } => Some(s),
                    },
                    Binding::Const(id) => Some(self.const_params[id as usize].ty),
                    Binding::Named(id) => Some(self.named[id].ty),
                    Binding::Local(id) => Some(self.locals[id as usize].ty),
                    Binding::Argument(id) => Some(self.named[id].ty),
                    Binding::Slice { param, .. } => match self.params[param as usize].ty {
                        ParamType::Scalar(s) | ParamType::Slice { elem: s, .. } => Some(s),
                    },
                    Binding::View(v) => Some(self.locals[self.views[v].local as usize].ty),
                    Binding::Pipeline(_) | Binding::Broken => None,
                }
            }
            syn::Expr::Field(_) => Some(Scalar::U32),
            syn::Expr::Call(c) => match call_name(c)?.as_str() {
                "lane_id" => Some(Scalar::U32),
                "shfl_xor" | "shfl_down" => peek(c.args.first()?),
                n if n.starts_with("atomic_") => match c.args.first()? {
                    syn::Expr::Reference(r) => peek(&r.expr),
                    _ => None,
                },
                _ => None,
            },
            syn::Expr::MethodCall(m) if m.method == "len" => Some(Scalar::U32),
            syn::Expr::MethodCall(m) => peek(&m.receiver).or_else(|| m.args.iter().find_map(peek)),
            syn::Expr::Unary(u) => peek(&u.expr),
            syn::Expr::Binary(b) => match binary_op(&b.op) {
                op if op.is_comparison() => Some(Scalar::Bool),
                BinaryOp::LogicalAnd | BinaryOp::LogicalOr => Some(Scalar::Bool),
                BinaryOp::Shl | BinaryOp::Shr => peek(&b.left),
                _ => peek(&b.left).or_else(|| peek(&b.right)),
            },
            syn::Expr::Cast(c) => self.scalar(&c.ty).ok(),
            _ => None,
        }
    }

    // ---- values (expressions that may be `if`) --------------------------

    /// The value of a `let` or an assignment: an expression, or an `if`
    /// expression lowered into a temporary local and a [`Stmt::If`] in `out`.
    fn value(&mut self, e: &syn::Expr, hint: Option<Scalar>, out: &mut Block) -> Lowered<Expr> {
        match peel(e) {
            syn::Expr::If(i) => self.if_value(i, hint, out),
            other => self.expr(other, hint),
        }
    }

    fn if_value(
        &mut self,
        i: &syn::ExprIf,
        hint: Option<Scalar>,
        out: &mut Block,
    ) -> Lowered<Expr> {
        let cond = self.condition(&i.cond, "`if`")?;
        let Some((_, else_expr)) = &i.else_branch else {
            return self.err(
                i,
                "an `if` used as a value needs an `else` branch: `if c { a } else { b }`",
            );
        };
        let else_block = match &**else_expr {
            syn::Expr::Block(b) => BranchValue::Block(&b.block),
            syn::Expr::If(elif) => BranchValue::If(elif),
            other => return self.err(other, "write the `else` branch as a block `else { .. }`"),
        };
        let then_block = BranchValue::Block(&i.then_branch);
        let (mut then_body, mut else_body) = (Block::new(), Block::new());
        // The branch whose type does not come from context goes first and types the other.
        let (then_val, else_val) =
            if then_block.is_untyped_literal() && !else_block.is_untyped_literal() {
                let else_val = self.branch_value(&else_block, hint, &mut else_body)?;
                let then_val = self.branch_value(&then_block, Some(else_val.ty), &mut then_body)?;
                (then_val, else_val)
            } else {
                let then_val = self.branch_value(&then_block, hint, &mut then_body)?;
                let else_val = self.branch_value(&else_block, Some(then_val.ty), &mut else_body)?;
                (then_val, else_val)
            };
        if then_val.ty != else_val.ty {
            return self.err(
                i,
                format!(
                    "the branches of this `if` have different types, `{}` and `{}`: convert one with `as`",
                    then_val.ty.name(),
                    else_val.ty.name()
                ),
            );
        }
        let ty = then_val.ty;
        // Two plain values that cannot fault or act: a select, no branch.
        if then_body.is_empty()
            && else_body.is_empty()
            && then_val.is_speculatable(&self.locals)
            && else_val.is_speculatable(&self.locals)
            && cond.is_speculatable(&self.locals)
        {
            return Ok(Expr {
                ty,
                kind: ExprKind::Select(Box::new(cond), Box::new(then_val), Box::new(else_val)),
            });
        }
        let temp = self.new_local(
            "if_value".to_string(),
            ty,
            Space::Register,
            Vec::new(),
            true,
        );
        let place = Place::Local {
            local: temp,
            indices: Vec::new(),
        };
        then_body.push(Stmt::Assign {
            place: place.clone(),
            value: then_val,
        });
        else_body.push(Stmt::Assign {
            place: place.clone(),
            value: else_val,
        });
        out.push(Stmt::Let {
            local: temp,
            init: Some(zero(ty)),
        });
        out.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
        Ok(Expr {
            ty,
            kind: ExprKind::Load(Box::new(place)),
        })
    }

    fn branch_value(
        &mut self,
        branch: &BranchValue,
        hint: Option<Scalar>,
        out: &mut Block,
    ) -> Lowered<Expr> {
        let block = match branch {
            BranchValue::If(elif) => return self.if_value(elif, hint, out),
            BranchValue::Block(b) => b,
        };
        let Some((syn::Stmt::Expr(tail, None), init)) = block.stmts.split_last() else {
            return self.err(
                block,
                "this branch must end with its value, an expression without `;` (the `if` is used as a value)",
            );
        };
        self.scopes.push(Vec::new());
        for (i, stmt) in init.iter().enumerate() {
            let _reported =
                self.hoisting(out, |this, out| this.stmt(stmt, &block.stmts[i + 1..], out));
        }
        let value = self.hoisting(out, |this, out| this.value(tail, hint, out));
        self.scopes.pop();
        value
    }

    // ---- expressions --------------------------------------------------

    fn expr(&mut self, e: &syn::Expr, hint: Option<Scalar>) -> Lowered<Expr> {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit, false, hint),
            syn::Expr::Paren(p) => self.expr(&p.expr, hint),
            syn::Expr::Group(g) => self.expr(&g.expr, hint),
            syn::Expr::Path(_) | syn::Expr::Index(_) => self.read(e),
            syn::Expr::Unary(u) => self.unary(u, hint),
            syn::Expr::Binary(b) => self.binary(b, hint),
            syn::Expr::Cast(c) => self.cast(c),
            syn::Expr::Field(f) => self.special(f),
            syn::Expr::Call(c) => self.call(c, hint),
            syn::Expr::MethodCall(m) => self.method(m, hint),
            other => self.err(other, unsupported_expr_message(other)),
        }
    }

    fn literal(&mut self, lit: &syn::Lit, negative: bool, hint: Option<Scalar>) -> Lowered<Expr> {
        let suffix_type = |this: &mut Self, suffix: &str| -> Lowered<Option<Scalar>> {
            if suffix.is_empty() {
                return Ok(None);
            }
            match Scalar::from_name(suffix) {
                Some(s) => Ok(Some(s)),
                None => this.err(lit, format!("unknown literal suffix `{suffix}`: use a scalar type such as `1u32` or `1.0f32`")),
            }
        };
        match lit {
            syn::Lit::Bool(b) => {
                if negative {
                    return self.err(lit, "`-` does not apply to `bool`: use `!`");
                }
                Ok(Expr::literal(Scalar::Bool, Literal::Bool(b.value)))
            }
            syn::Lit::Int(int) => {
                let text = int.base10_digits();
                let ty = match suffix_type(self, int.suffix())? {
                    Some(f) if f.is_float() => return self.float_literal(lit, text, f, negative),
                    Some(t) => t,
                    None => match hint {
                        Some(h) if h.is_int() => h,
                        Some(h) if h.is_float() => {
                            return self.err(
                                lit,
                                format!(
                                    "an integer literal where `{}` is expected: write `{text}.0`",
                                    h.name()
                                ),
                            )
                        }
                        _ => Scalar::I32,
                    },
                };
                if ty == Scalar::Bool {
                    return self.err(
                        lit,
                        "integer literals cannot be `bool`: write `true` or `false`",
                    );
                }
                let magnitude: u64 = match int.base10_parse() {
                    Ok(v) => v,
                    Err(_) => return self.err(lit, "this literal does not fit in 64 bits, the widest integers (`i64`, `u64`)"),
                };
                let value = if negative {
                    -i128::from(magnitude)
                } else {
                    i128::from(magnitude)
                };
                if !types::int_fits(value, ty) {
                    return self.err(
                        lit,
                        format!("the literal {value} does not fit in `{}`: use a wider type, e.g. with a suffix (`{value}i64`)", ty.name()),
                    );
                }
                Ok(Expr::literal(ty, Literal::Int(value as i64)))
            }
            syn::Lit::Float(f) => {
                let ty = match suffix_type(self, f.suffix())? {
                    Some(t) => t,
                    None => match hint {
                        Some(h) if h.is_float() => h,
                        Some(h) if h.is_int() => {
                            return self.err(
                                lit,
                                format!("a float literal where `{}` is expected: use an integer or convert with `as {}`", h.name(), h.name()),
                            )
                        }
                        _ => Scalar::F32,
                    },
                };
                self.float_literal(lit, f.base10_digits(), ty, negative)
            }
            other => self.err(other, "only number and `bool` literals exist in kernels: characters and strings have no GPU type"),
        }
    }

    fn float_literal(
        &mut self,
        lit: &syn::Lit,
        digits: &str,
        ty: Scalar,
        negative: bool,
    ) -> Lowered<Expr> {
        if !ty.is_float() {
            return self.err(
                lit,
                format!(
                    "a float literal cannot be `{}`: write an integer literal",
                    ty.name()
                ),
            );
        }
        let Ok(value) = digits.parse::<f64>() else {
            return self.err(
                lit,
                "this float literal cannot be read: write it as digits with a `.`, e.g. `1.5`",
            );
        };
        Ok(Expr::literal(
            ty,
            Literal::Float(if negative { -value } else { value }),
        ))
    }

    /// A name or an element as a value.
    fn read(&mut self, e: &syn::Expr) -> Lowered<Expr> {
        if let syn::Expr::Path(p) = e {
            if let Some(constant) = self.assoc_const(p)? {
                return Ok(constant);
            }
            let ident = self.path_ident(p)?;
            match self.resolve(&ident)? {
                Binding::Param(id) => {
                    return match self.params[id as usize].ty {
                        ParamType::Scalar(ty) => Ok(Expr { ty, kind: ExprKind::Param(id) }),
                        ParamType::Slice { .. } => self.err(
                            e,
                            format!("the slice `{ident}` is not a value: read an element `{ident}[i]` or its length `{ident}.len()`"),
                        ),
                    };
                }
                Binding::Const(id) => {
                    return Ok(Expr {
                        ty: self.const_params[id as usize].ty,
                        kind: ExprKind::Const(id),
                    });
                }
                Binding::Named(id) | Binding::Argument(id) => return Ok(self.named[id].clone()),
                Binding::Slice { .. } => {
                    return self.err(
                        e,
                        format!("the slice `{ident}` is not a value: read an element `{ident}[i]` or its length `{ident}.len()`"),
                    )
                }
                Binding::Local(_) | Binding::View(_) | Binding::Pipeline(_) | Binding::Broken => {}
            }
        }
        let (place, ty) = self.place(e, Access::Read)?;
        Ok(Expr {
            ty,
            kind: ExprKind::Load(Box::new(place)),
        })
    }

    /// `f32::INFINITY`, `u32::MAX`: a scalar type's associated constant, as a literal.
    fn assoc_const(&mut self, p: &syn::ExprPath) -> Lowered<Option<Expr>> {
        let segments: Vec<_> = p.path.segments.iter().collect();
        if p.qself.is_some() || segments.len() != 2 {
            return Ok(None);
        }
        let first = &segments[0].ident;
        let param = self
            .type_args
            .iter()
            .find(|(t, _)| t == first)
            .map(|(_, s)| *s);
        let Some(ty) = param.or_else(|| Scalar::from_name(&first.to_string())) else {
            return Ok(None);
        };
        let name = segments[1].ident.to_string();
        if name == "BYTES" {
            return Ok(Some(Expr::u32(ty.size_bytes())));
        }
        match super::assoc::value(ty, &name) {
            Some(lit) => Ok(Some(Expr::literal(ty, lit))),
            None => self.err(
                p,
                format!(
                    "`{}::{name}` is not a constant kernels know: use one of {}",
                    ty.name(),
                    super::assoc::NAMES
                ),
            ),
        }
    }

    fn path_ident(&mut self, p: &syn::ExprPath) -> Lowered<Ident> {
        match p.path.get_ident() {
            Some(ident) if p.qself.is_none() => Ok(ident.clone()),
            _ => self.err(p, "paths are not supported in kernels: use a plain name"),
        }
    }

    /// A place: a scalar local, an array element, or a slice element.
    fn place(&mut self, e: &syn::Expr, access: Access) -> Lowered<(Place, Scalar)> {
        let (path, index_exprs) = match index_chain(e) {
            (syn::Expr::Path(path), index_exprs) => (path, index_exprs),
            (root, _) => {
                return self.err(root, "only variables, array elements `a[i][j]` and slice elements `y[i]` can be indexed or assigned")
            }
        };
        let ident = self.path_ident(path)?;
        let binding = self.resolve(&ident)?;
        let mut indices = Vec::new();
        for idx in &index_exprs {
            indices.push(self.index(idx)?);
        }
        match binding {
            Binding::Broken => Err(Reported),
            Binding::Pipeline(_) => self.err(
                e,
                format!("`{ident}` is a pipeline, not a value: use its statements `{ident}.copy(..)`, `{ident}.commit()` and `{ident}.wait(N)`"),
            ),
            Binding::Argument(_) => self.err(
                e,
                format!("`{ident}` is a parameter, a copy of its argument: declare it `mut {ident}: ..` in the function to assign it"),
            ),
            Binding::Slice { param, mutable } => {
                self.slice_place(e, &ident, param, mutable, indices, access)
            }
            Binding::View(v) => {
                let view = self.views[v].clone();
                let mut all = view.prefix;
                all.extend(indices);
                self.array_place(e, &ident, view.local, (view.mutable, true), all, &index_exprs, access)
            }
            Binding::Const(_) | Binding::Named(_) => self.err(
                e,
                format!(
                    "`{ident}` is {}: it can be read but not {}",
                    if matches!(binding, Binding::Const(_)) {
                        "a const parameter"
                    } else {
                        "a `const`"
                    },
                    if indices.is_empty() {
                        "assigned"
                    } else {
                        "indexed"
                    }
                ),
            ),
            Binding::Param(id) => {
                let ty = self.params[id as usize].ty;
                match ty {
                    ParamType::Scalar(_) if !indices.is_empty() => {
                        self.err(e, format!("`{ident}` is a scalar parameter and cannot be indexed: pass a slice `&[T]` to index it"))
                    }
                    ParamType::Scalar(_) => self.err(
                        e,
                        format!("parameters cannot be assigned: copy `{ident}` into a local first: `let mut {ident} = {ident};`"),
                    ),
                    ParamType::Slice { elem, mutable } => {
                        if indices.len() != 1 {
                            return self.err(e, format!("`{ident}` is a slice: index it with one index, `{ident}[i]`"));
                        }
                        if access != Access::Read && !mutable {
                            return self.err(
                                e,
                                format!(
                                    "`{ident}` is a read-only slice `&[{0}]`: declare the parameter as `&mut [{0}]` to write to it",
                                    elem.name()
                                ),
                            );
                        }
                        let index = indices.pop().expect("one index");
                        Ok((Place::Global { param: id, index }, elem))
                    }
                }
            }
            Binding::Local(id) => {
                let mutable = self.locals[id as usize].mutable;
                self.array_place(e, &ident, id, (mutable, false), indices, &index_exprs, access)
            }
        }
    }

    /// An element of the local `id` (a scalar or an array) that `ident`
    /// names, writable if `mutable`. `indices` are all of its indices, the
    /// last `index_exprs.len()` of them written here (the others index the
    /// row a device function's parameter is bound to). `parameter`: `ident`
    /// is a device function's parameter.
    #[allow(clippy::too_many_arguments)]
    fn array_place(
        &mut self,
        e: &syn::Expr,
        ident: &Ident,
        id: LocalId,
        (mutable, parameter): (bool, bool),
        indices: Vec<Expr>,
        index_exprs: &[&syn::Expr],
        access: Access,
    ) -> Lowered<(Place, Scalar)> {
        let local = &self.locals[id as usize];
        let written = indices.len() - index_exprs.len();
        let (ty, space, rank) = (local.ty, local.space, local.dims.len() - written);
        if index_exprs.len() != rank {
            let msg = match (rank, index_exprs.len()) {
                (0, _) => format!("`{ident}` is a scalar and cannot be indexed: declare an array to index it, e.g. `let mut {ident} = [0u32; 4];`"),
                (_, 0) if access == Access::Read => format!(
                    "the array `{ident}` is not a value: read one element, indexing all of its {rank} dimension(s)"
                ),
                _ => format!("`{ident}` has {rank} dimension(s): give one index per dimension, e.g. `{ident}{}`", "[i]".repeat(rank)),
            };
            return self.err(e, msg);
        }
        if access == Access::Atomic && space != Space::Shared {
            return self.err(
                e,
                format!("atomics update slice elements and shared array elements; `{ident}` belongs to one thread, so update it directly (`{ident} += v`)"),
            );
        }
        if access != Access::Read && !mutable {
            let msg = if self.loop_vars.contains(&id) {
                format!("`{ident}` is a loop variable and cannot be assigned: copy it into a local (`let mut j = {ident};`)")
            } else if parameter {
                format!("`{ident}` is a read-only parameter: declare it `&mut [..]` to write to it")
            } else {
                format!("cannot assign to `{ident}` because it is not `mut`: declare it as `let mut {ident}`")
            };
            return self.err(e, msg);
        }
        if space == Space::Register {
            for (idx, index) in index_exprs.iter().zip(&indices[written..]) {
                self.check_constant(idx, index, ConstantRole::RegisterIndex(ident))?;
            }
        }
        Ok((Place::Local { local: id, indices }, ty))
    }

    /// An index: an integer, `u32` for untyped literals.
    fn index(&mut self, idx: &syn::Expr) -> Lowered<Expr> {
        let index = self.expr(idx, Some(Scalar::U32))?;
        if !index.ty.is_int() {
            return self.err(
                idx,
                format!(
                    "indices are integers, but this is `{}`: convert it with `as u32`",
                    index.ty.name()
                ),
            );
        }
        Ok(index)
    }

    fn unary(&mut self, u: &syn::ExprUnary, hint: Option<Scalar>) -> Lowered<Expr> {
        match u.op {
            syn::UnOp::Neg(_) => {
                if let syn::Expr::Lit(l) = peel(&u.expr) {
                    return self.literal(&l.lit, true, hint);
                }
                let a = self.expr(&u.expr, hint)?;
                if !a.ty.is_signed() {
                    return self.err(
                        u,
                        format!("`-` needs a signed integer or a float, but this is `{}`: convert it first, e.g. `-(x as i32)`", a.ty.name()),
                    );
                }
                Ok(Expr { ty: a.ty, kind: ExprKind::Unary(UnaryOp::Neg, Box::new(a)) })
            }
            syn::UnOp::Not(_) => {
                let a = self.expr(&u.expr, hint)?;
                if a.ty.is_float() {
                    return self.err(u, format!("`!` applies to `bool` and integers, not `{}`", a.ty.name()));
                }
                Ok(Expr { ty: a.ty, kind: ExprKind::Unary(UnaryOp::Not, Box::new(a)) })
            }
            _ => self.err(u, "dereferencing `*` is not supported: kernels have no references besides slice parameters"),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary, hint: Option<Scalar>) -> Lowered<Expr> {
        if compound_op(&b.op).is_some() {
            return self.err(
                b,
                "compound assignment is a statement, not a value: put it on its own line",
            );
        }
        let op = binary_op(&b.op);
        let (lhs, rhs) = match op {
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => (
                self.expr(&b.left, Some(Scalar::Bool))?,
                self.without_hoisting(
                    "the right side of `&&` or `||`, which runs only sometimes",
                    |this| this.expr(&b.right, Some(Scalar::Bool)),
                )?,
            ),
            BinaryOp::Shl | BinaryOp::Shr => (
                self.expr(&b.left, hint)?,
                self.expr(&b.right, Some(Scalar::U32))?,
            ),
            op if op.is_comparison() => self.pair(&b.left, &b.right, None)?,
            _ => self.pair(&b.left, &b.right, hint)?,
        };
        self.build_binary(op, lhs, rhs, b)
    }

    /// Lowers two operands that must have the same type: an untyped literal
    /// takes the other operand's type.
    fn pair(
        &mut self,
        a: &syn::Expr,
        b: &syn::Expr,
        hint: Option<Scalar>,
    ) -> Lowered<(Expr, Expr)> {
        if is_untyped_literal(a) && !is_untyped_literal(b) {
            let b = self.expr(b, hint)?;
            let a = self.expr(a, Some(b.ty))?;
            Ok((a, b))
        } else {
            let a = self.expr(a, hint)?;
            let b = self.expr(b, Some(a.ty))?;
            Ok((a, b))
        }
    }

    /// Type-checks and builds a binary operation (also for compound assignment).
    fn build_binary(
        &mut self,
        op: BinaryOp,
        lhs: Expr,
        rhs: Expr,
        at: &syn::ExprBinary,
    ) -> Lowered<Expr> {
        let sym = at.op.to_token_stream().to_string();
        let (l, r) = (lhs.ty, rhs.ty);
        let result = match op {
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                if l != Scalar::Bool || r != Scalar::Bool {
                    return self.err(
                        at,
                        format!("`{sym}` needs `bool` operands, but these are `{}` and `{}`: compare explicitly, e.g. `x != 0`", l.name(), r.name()),
                    );
                }
                Scalar::Bool
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                if !l.is_int() {
                    return self.err(&at.left, format!("`{sym}` shifts integers, not `{}`", l.name()));
                }
                self.check_type(&at.right, r, Scalar::U32, "a shift amount")?;
                l
            }
            _ if l != r => {
                return self.err(
                    at,
                    format!(
                        "mismatched types: `{}` {sym} `{}`: both operands of `{sym}` must have the same type; convert one with `as`, e.g. `(..) as {}`",
                        l.name(),
                        r.name(),
                        l.name()
                    ),
                )
            }
            op if op.is_comparison() => Scalar::Bool,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                if l.is_float() {
                    return self.err(at, format!("`{sym}` applies to integers and `bool`, not `{}`", l.name()));
                }
                l
            }
            _ => {
                if l == Scalar::Bool {
                    return self.err(at, format!("`{sym}` does not apply to `bool`: use `&&`, `||`, `!` or convert with `as u32`"));
                }
                l
            }
        };
        Ok(Expr {
            ty: result,
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        })
    }

    fn cast(&mut self, c: &syn::ExprCast) -> Lowered<Expr> {
        let to = match self.scalar(&c.ty) {
            Ok(t) => t,
            Err(msg) => return self.err(&c.ty, msg),
        };
        let value = self.expr(&c.expr, None)?;
        if to == Scalar::Bool && value.ty != Scalar::Bool {
            return self.err(
                c,
                "casting to `bool` is not supported: compare instead, e.g. `x != 0`",
            );
        }
        if value.ty == Scalar::Bool && to.is_float() {
            return self.err(
                c,
                format!(
                    "`bool` casts to integers only: write `(b as u32) as {}`",
                    to.name()
                ),
            );
        }
        if value.ty == to {
            return Ok(value);
        }
        Ok(Expr {
            ty: to,
            kind: ExprKind::Cast(Box::new(value)),
        })
    }

    /// `thread_idx().x` and friends.
    fn special(&mut self, f: &syn::ExprField) -> Lowered<Expr> {
        const FIELDS: &str = "the only fields are `.x`, `.y` and `.z` of thread_idx(), block_idx(), block_dim() and grid_dim()";
        let syn::Expr::Call(call) = peel(&f.base) else {
            return self.err(f, format!("fields are not supported: {FIELDS}"));
        };
        let name = call_name(call).unwrap_or_default();
        if !SPECIALS.contains(&name.as_str()) {
            return self.err(f, format!("fields are not supported: {FIELDS}"));
        }
        self.arity(call, &call.args, 0, &name)?;
        let axis = match &f.member {
            syn::Member::Named(m) if m == "x" => Axis::X,
            syn::Member::Named(m) if m == "y" => Axis::Y,
            syn::Member::Named(m) if m == "z" => Axis::Z,
            other => {
                return self.err(
                    other,
                    format!("`{name}()` has the fields `.x`, `.y` and `.z`"),
                )
            }
        };
        let special = match name.as_str() {
            "thread_idx" => Special::ThreadIdx(axis),
            "block_idx" => Special::BlockIdx(axis),
            "block_dim" => Special::BlockDim(axis),
            _ => Special::GridDim(axis),
        };
        Ok(Expr {
            ty: Scalar::U32,
            kind: ExprKind::Special(special),
        })
    }

    fn arity(
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

    fn call(&mut self, c: &syn::ExprCall, hint: Option<Scalar>) -> Lowered<Expr> {
        if is_path(&c.func, &["f32", "from_bits"]) {
            self.arity(c, &c.args, 1, "f32::from_bits")?;
            let bits = self.expr(&c.args[0], Some(Scalar::U32))?;
            self.check_type(
                &c.args[0],
                bits.ty,
                Scalar::U32,
                "the bits of `f32::from_bits`",
            )?;
            return Ok(Expr {
                ty: Scalar::F32,
                kind: ExprKind::Call(Intrinsic::FromBits, vec![bits]),
            });
        }
        if Self::is_device_call(c) {
            return self.call_value(c);
        }
        let Some(name) = call_name(c) else {
            return self.err(
                &c.func,
                format!("only these functions can be called in kernels: {FUNCTIONS}"),
            );
        };
        match name.as_str() {
            n if SPECIALS.contains(&n) => {
                self.err(c, format!("`{n}()` has three components: use `{n}().x`, `{n}().y` or `{n}().z`"))
            }
            "lane_id" => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Special(Special::LaneId) })
            }
            "sync_threads" => self.err(c, "`sync_threads()` is a statement: write `sync_threads();` on its own line"),
            "shared" => self.err(
                c,
                "`shared()` allocates a shared array and is only allowed as the value of a typed `let`: `let mut tile: [[f32; 32]; 32] = shared();`",
            ),
            "pipeline" => self.err(
                c,
                "`pipeline(STAGES)` declares a pipeline and is only allowed as the value of a `let`: `let pipe = pipeline(STAGES);`",
            ),
            "shfl_xor" | "shfl_down" => {
                self.arity(c, &c.args, 2, &name)?;
                let value = self.expr(&c.args[0], hint)?;
                if !matches!(value.ty, Scalar::I32 | Scalar::U32 | Scalar::F32) {
                    return self.err(
                        &c.args[0],
                        format!("`{name}` moves 32-bit values (`i32`, `u32`, `f32`), not `{}`: convert the value with `as` first", value.ty.name()),
                    );
                }
                let lane = self.expr(&c.args[1], Some(Scalar::U32))?;
                let what = if name == "shfl_xor" { "the lane mask" } else { "the lane delta" };
                self.check_type(&c.args[1], lane.ty, Scalar::U32, what)?;
                let intrinsic = if name == "shfl_xor" { Intrinsic::ShflXor } else { Intrinsic::ShflDown };
                Ok(Expr { ty: value.ty, kind: ExprKind::Call(intrinsic, vec![value, lane]) })
            }
            n if n.starts_with("atomic_") => self.atomic(c, &name),
            "pack_f16x2" | "pack_bf16x2" => {
                self.arity(c, &c.args, 2, &name)?;
                let mut halves = Vec::new();
                for (arg, what) in c.args.iter().zip(["the low half", "the high half"]) {
                    let v = self.expr(arg, Some(Scalar::F32))?;
                    self.check_type(arg, v.ty, Scalar::F32, what)?;
                    halves.push(v);
                }
                let intrinsic = if name == "pack_f16x2" { Intrinsic::PackF16x2 } else { Intrinsic::PackBf16x2 };
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Call(intrinsic, halves) })
            }
            "to_tf32" => {
                self.arity(c, &c.args, 1, &name)?;
                let v = self.expr(&c.args[0], Some(Scalar::F32))?;
                self.check_type(&c.args[0], v.ty, Scalar::F32, "the value to round to tf32")?;
                Ok(Expr { ty: Scalar::U32, kind: ExprKind::Call(Intrinsic::ToTf32, vec![v]) })
            }
            n if warp::is_warp_statement(n) => self.err(
                c,
                format!("`{n}(..)` is a statement: write `{n}(..);` on its own line"),
            ),
            n if MATH_METHODS.iter().any(|(m, ..)| *m == n) => self.err(
                c,
                format!("math is written as methods, as in Rust: `x.{n}(..)` instead of `{n}(x, ..)`"),
            ),
            n => match call::near_builtin(n) {
                Some(builtin) => self.err(
                    &c.func,
                    format!("unknown function `{n}`: did you mean `{builtin}`? Kernels can call `#[device]` functions and {FUNCTIONS}"),
                ),
                None => self.call_value(c),
            },
        }
    }

    /// A call to a device function used as a value: it returns one scalar.
    fn call_value(&mut self, c: &syn::ExprCall) -> Lowered<Expr> {
        let mut values = self.device_call(c)?;
        match values.len() {
            1 => Ok(values.pop().expect("one value")),
            0 => self.err(
                c,
                "this function returns nothing: call it as a statement, `f(..);`",
            ),
            n => self.err(
                c,
                format!(
                    "this function returns {n} values: bind them with `let (a, b, ..) = f(..);`"
                ),
            ),
        }
    }

    fn atomic(&mut self, c: &syn::ExprCall, name: &str) -> Lowered<Expr> {
        let Some((_, op)) = ATOMICS.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = ATOMICS.iter().map(|(n, _)| *n).collect();
            return self.err(
                &c.func,
                format!(
                    "unknown atomic `{name}`: the atomics are {}",
                    known.join(", ")
                ),
            );
        };
        let op = *op;
        let arity = if op == AtomicOp::CompareExchange {
            3
        } else {
            2
        };
        self.arity(c, &c.args, arity, name)?;
        let target = match peel(&c.args[0]) {
            syn::Expr::Reference(r) if r.mutability.is_some() => &*r.expr,
            other => {
                return self.err(
                    other,
                    format!(
                    "the first argument of `{name}` is the element to update, written `&mut y[i]`"
                ),
                )
            }
        };
        let (place, ty) = self.place(target, Access::Atomic)?;
        let supported = match op {
            AtomicOp::Add => matches!(
                ty,
                Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32 | Scalar::F64
            ),
            AtomicOp::Exchange | AtomicOp::CompareExchange => {
                ty.size_bytes() >= 4 && ty != Scalar::Bool
            }
            _ => matches!(ty, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64),
        };
        if !supported {
            let types = match op {
                AtomicOp::Add => "`i32`, `u32`, `i64`, `u64`, `f32` and `f64`",
                AtomicOp::Exchange | AtomicOp::CompareExchange => "32- and 64-bit types",
                _ => "`i32`, `u32`, `i64` and `u64`",
            };
            return self.err(
                target,
                format!(
                    "`{name}` works on {types}, but this element is `{}`: store the values in one of those types",
                    ty.name()
                ),
            );
        }
        let operand = |this: &mut Self, e: &syn::Expr, what: &str| -> Lowered<Expr> {
            let v = this.expr(e, Some(ty))?;
            this.check_type(e, v.ty, ty, what)?;
            Ok(v)
        };
        let (value, compare) = if op == AtomicOp::CompareExchange {
            let compare = operand(self, &c.args[1], "the expected value")?;
            (
                operand(self, &c.args[2], "the new value")?,
                Some(Box::new(compare)),
            )
        } else {
            (operand(self, &c.args[1], "the operand")?, None)
        };
        Ok(Expr {
            ty,
            kind: ExprKind::Atomic {
                op,
                place: Box::new(place),
                value: Box::new(value),
                compare,
            },
        })
    }

    fn method(&mut self, m: &syn::ExprMethodCall, hint: Option<Scalar>) -> Lowered<Expr> {
        if let Some(t) = &m.turbofish {
            return self.err(t, "turbofish `::<..>` is not supported in kernels");
        }
        let name = m.method.to_string();
        if self.pipeline_of(&m.receiver).is_some() {
            return self.err(
                m,
                format!(
                    "`{}.{name}(..)` is a statement: write it on its own line, ending with `;`",
                    compact_text(m.receiver.to_token_stream())
                ),
            );
        }
        if name == "len" {
            self.arity(m, &m.args, 0, "len")?;
            if let syn::Expr::Path(p) = peel(&m.receiver) {
                let ident = self.path_ident(p)?;
                let slice = match self.resolve(&ident)? {
                    Binding::Param(id) | Binding::Slice { param: id, .. } => Some(id),
                    _ => None,
                };
                if let Some(id) = slice {
                    if matches!(self.params[id as usize].ty, ParamType::Slice { .. }) {
                        return Ok(Expr {
                            ty: Scalar::U32,
                            kind: ExprKind::Len(id),
                        });
                    }
                }
            }
            return self.err(m, "`.len()` is the length of a slice parameter; arrays have the size they are declared with");
        }
        if name == "to_bits" {
            self.arity(m, &m.args, 0, "to_bits")?;
            let value = self.expr(&m.receiver, Some(Scalar::F32))?;
            self.check_type(
                &m.receiver,
                value.ty,
                Scalar::F32,
                "the receiver of `.to_bits()`",
            )?;
            return Ok(Expr {
                ty: Scalar::U32,
                kind: ExprKind::Call(Intrinsic::ToBits, vec![value]),
            });
        }
        if name == "step_by" {
            return self.err(m, "`.step_by(s)` is only supported on the range of a `for` loop: `for i in (a..b).step_by(s)`");
        }
        let Some(&(_, intrinsic, arity)) = MATH_METHODS.iter().find(|(n, ..)| *n == name) else {
            let known: Vec<&str> = MATH_METHODS.iter().map(|(n, ..)| *n).collect();
            return self.err(
                &m.method,
                format!("unknown method `{name}`: the methods are `.len()` on slices, `.to_bits()` on f32 and the math methods {}", known.join(", ")),
            );
        };
        self.arity(m, &m.args, arity, &name)?;
        let (receiver, mut args) = match arity {
            1 => {
                let (a, b) = self.pair(&m.receiver, &m.args[0], hint)?;
                (a, vec![b])
            }
            _ => {
                let receiver = self.expr(&m.receiver, hint)?;
                let args = m
                    .args
                    .iter()
                    .map(|a| self.expr(a, Some(receiver.ty)))
                    .collect::<Lowered<Vec<_>>>()?;
                (receiver, args)
            }
        };
        let ty = receiver.ty;
        let kind_ok = match intrinsic {
            Intrinsic::Abs => ty.is_signed(),
            Intrinsic::Min | Intrinsic::Max => ty != Scalar::Bool,
            _ => ty.is_float(),
        };
        if !kind_ok {
            let needs = match intrinsic {
                Intrinsic::Abs => format!(
                    "a signed integer or a float (the absolute value of a `{}` is itself)",
                    ty.name()
                ),
                Intrinsic::Min | Intrinsic::Max => "a number".to_string(),
                _ => format!("a float: convert first, e.g. `(x as f32).{name}()`"),
            };
            return self.err(
                &m.receiver,
                format!("`.{name}()` needs {needs}, but this is `{}`", ty.name()),
            );
        }
        for (arg, syn_arg) in args.iter().zip(&m.args) {
            self.check_type(
                syn_arg,
                arg.ty,
                ty,
                &format!("the argument of `.{name}()` (like its receiver)"),
            )?;
        }
        args.insert(0, receiver);
        Ok(Expr {
            ty,
            kind: ExprKind::Call(intrinsic, args),
        })
    }
}

/// A branch of an `if` used as a value.
enum BranchValue<'a> {
    Block(&'a syn::Block),
    If(&'a syn::ExprIf),
}

impl BranchValue<'_> {
    fn is_untyped_literal(&self) -> bool {
        match self {
            BranchValue::Block(b) => {
                matches!(b.stmts.last(), Some(syn::Stmt::Expr(e, None)) if is_untyped_literal(e))
            }
            BranchValue::If(_) => false,
        }
    }
}

/// Skips parentheses and invisible groups.
fn peel(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => peel(&p.expr),
        syn::Expr::Group(g) => peel(&g.expr),
        other => other,
    }
}

/// Whether the type of `e` comes only from its context: unsuffixed literals
/// and arithmetic over them.
fn is_untyped_literal(e: &syn::Expr) -> bool {
    match peel(e) {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.suffix().is_empty(),
            syn::Lit::Float(f) => f.suffix().is_empty(),
            _ => false,
        },
        syn::Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && is_untyped_literal(&u.expr),
        syn::Expr::Binary(b) => {
            let op = binary_op(&b.op);
            !op.is_comparison()
                && !matches!(
                    op,
                    BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::Shl | BinaryOp::Shr
                )
                && compound_op(&b.op).is_none()
                && is_untyped_literal(&b.left)
                && is_untyped_literal(&b.right)
        }
        _ => false,
    }
}

fn call_ident(c: &syn::ExprCall) -> Option<&Ident> {
    match &*c.func {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

/// Whether `e` is the path `segments` (`f32::from_bits`).
fn is_path(e: &syn::Expr, segments: &[&str]) -> bool {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => {
            p.path.segments.len() == segments.len()
                && p.path
                    .segments
                    .iter()
                    .zip(segments)
                    .all(|(s, want)| s.arguments.is_none() && s.ident == want)
        }
        _ => false,
    }
}

fn call_name(c: &syn::ExprCall) -> Option<String> {
    call_ident(c).map(|i| i.to_string())
}

/// `a[i][j]`: the indexed expression and the indices, outermost first.
fn index_chain(e: &syn::Expr) -> (&syn::Expr, Vec<&syn::Expr>) {
    match peel(e) {
        syn::Expr::Index(i) => {
            let (root, mut indices) = index_chain(&i.expr);
            indices.push(&i.index);
            (root, indices)
        }
        other => (other, Vec::new()),
    }
}

/// `[[v; N]; M]`: the element value and the lengths, outermost first.
fn repeat_parts(e: &syn::Expr) -> (&syn::Expr, Vec<&syn::Expr>) {
    match peel(e) {
        syn::Expr::Repeat(r) => {
            let (value, mut lens) = repeat_parts(&r.expr);
            lens.insert(0, &*r.len);
            (value, lens)
        }
        other => (other, Vec::new()),
    }
}

fn zero(ty: Scalar) -> Expr {
    let lit = match ty {
        Scalar::Bool => Literal::Bool(false),
        t if t.is_float() => Literal::Float(0.0),
        _ => Literal::Int(0),
    };
    Expr::literal(ty, lit)
}

/// Source text from tokens, spaced as rustfmt would for simple expressions
/// (`a.len() >= m * k`). Built from tokens rather than the source file so
/// that the text is the same in the proc-macro and in tests.
fn compact_text(tokens: proc_macro2::TokenStream) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Prev {
        Start,
        Word,
        Dot,
        Op,
        Comma,
        Unary,
        Joint,
    }
    fn write(tokens: proc_macro2::TokenStream, out: &mut String) {
        use proc_macro2::{Delimiter, Spacing, TokenTree};
        let mut prev = Prev::Start;
        for token in tokens {
            let spaced = matches!(prev, Prev::Word | Prev::Op | Prev::Comma);
            match token {
                TokenTree::Ident(_) | TokenTree::Literal(_) => {
                    if spaced {
                        out.push(' ');
                    }
                    out.push_str(&token.to_string());
                    prev = Prev::Word;
                }
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::Brace => ("{ ", " }"),
                        Delimiter::None => ("", ""),
                    };
                    if matches!(prev, Prev::Op | Prev::Comma) {
                        out.push(' ');
                    }
                    out.push_str(open);
                    write(g.stream(), out);
                    out.push_str(close);
                    prev = Prev::Word;
                }
                TokenTree::Punct(p) => {
                    let ch = p.as_char();
                    prev = match ch {
                        '.' => Prev::Dot,
                        ',' => Prev::Comma,
                        '-' | '!' if prev != Prev::Word => {
                            if spaced {
                                out.push(' ');
                            }
                            Prev::Unary
                        }
                        _ => {
                            if prev == Prev::Word {
                                out.push(' ');
                            }
                            if p.spacing() == Spacing::Joint {
                                Prev::Joint
                            } else {
                                Prev::Op
                            }
                        }
                    };
                    out.push(ch);
                }
            }
        }
    }
    let mut out = String::new();
    write(tokens, &mut out);
    out
}

fn binary_op(op: &syn::BinOp) -> BinaryOp {
    use syn::BinOp as B;
    match op {
        B::Add(_) | B::AddAssign(_) => BinaryOp::Add,
        B::Sub(_) | B::SubAssign(_) => BinaryOp::Sub,
        B::Mul(_) | B::MulAssign(_) => BinaryOp::Mul,
        B::Div(_) | B::DivAssign(_) => BinaryOp::Div,
        B::Rem(_) | B::RemAssign(_) => BinaryOp::Rem,
        B::BitAnd(_) | B::BitAndAssign(_) => BinaryOp::BitAnd,
        B::BitOr(_) | B::BitOrAssign(_) => BinaryOp::BitOr,
        B::BitXor(_) | B::BitXorAssign(_) => BinaryOp::BitXor,
        B::Shl(_) | B::ShlAssign(_) => BinaryOp::Shl,
        B::Shr(_) | B::ShrAssign(_) => BinaryOp::Shr,
        B::Eq(_) => BinaryOp::Eq,
        B::Ne(_) => BinaryOp::Ne,
        B::Lt(_) => BinaryOp::Lt,
        B::Le(_) => BinaryOp::Le,
        B::Gt(_) => BinaryOp::Gt,
        B::Ge(_) => BinaryOp::Ge,
        B::And(_) => BinaryOp::LogicalAnd,
        B::Or(_) => BinaryOp::LogicalOr,
        _ => BinaryOp::Add,
    }
}

/// The operation of a compound assignment (`+=` is `Add`), or `None`.
fn compound_op(op: &syn::BinOp) -> Option<BinaryOp> {
    use syn::BinOp as B;
    matches!(
        op,
        B::AddAssign(_)
            | B::SubAssign(_)
            | B::MulAssign(_)
            | B::DivAssign(_)
            | B::RemAssign(_)
            | B::BitAndAssign(_)
            | B::BitOrAssign(_)
            | B::BitXorAssign(_)
            | B::ShlAssign(_)
            | B::ShrAssign(_)
    )
    .then(|| binary_op(op))
}

fn macro_message() -> &'static str {
    "macros are not supported in kernels (there is no `println!` or `assert!` on the GPU): write the code out, or check inputs with `requires(..)` in `#[kernel(..)]`"
}

fn unsupported_expr_message(e: &syn::Expr) -> String {
    let what = match e {
        syn::Expr::Closure(_) => "closures are not supported in kernels: write the code inline",
        syn::Expr::Macro(_) => macro_message(),
        syn::Expr::Array(_) => "array literals are not supported: declare `let mut a = [0.0f32; N];` and assign the elements",
        syn::Expr::Repeat(_) => "`[v; N]` creates a register array and is only allowed as the value of a `let`: `let mut acc = [0.0f32; 8];`",
        syn::Expr::If(_) => "an `if` used as a value must be the whole value of a `let` or an assignment: `let v = if c { a } else { b };`",
        syn::Expr::Reference(_) => "`&` and `&mut` are only written in the first argument of an atomic: `atomic_add(&mut y[i], v)`",
        syn::Expr::Assign(_) => "an assignment is a statement, not a value: put it on its own line",
        syn::Expr::Block(_) | syn::Expr::Unsafe(_) => "blocks are not values in kernels: compute the value with `let`",
        syn::Expr::Match(_) => "`match` is not supported: use `if` / `else if` / `else`",
        syn::Expr::Range(_) => "ranges are only supported in `for` loops: `for i in a..b`",
        syn::Expr::Tuple(_) => "tuples are not supported in kernels: use one variable per value",
        syn::Expr::Struct(_) => "structs are not supported in kernels: use one variable per field",
        syn::Expr::Let(_) => "`let` in a condition (`if let`, `while let`) is not supported: use a `bool` condition",
        syn::Expr::Return(_) | syn::Expr::Break(_) | syn::Expr::Continue(_) => {
            "`return`, `break` and `continue` are statements, not values: put them on their own line"
        }
        syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) => {
            "loops do not produce values in kernels: assign to a variable inside the loop"
        }
        syn::Expr::Try(_) => "`?` is not supported in kernels: there are no `Result`s on the GPU",
        syn::Expr::Async(_) | syn::Expr::Await(_) => "`async` and `.await` are not supported in kernels",
        _ => "this expression is not supported in kernels: see docs/dsl.md for the language",
    };
    what.to_string()
}
