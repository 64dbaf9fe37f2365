//! Statements: blocks and their scopes, assignment and compound assignment,
//! `if`, the loops (`for` over ranges, `while`, `loop`, `#[unroll]`),
//! `break`, `continue` and `return`, and statement calls. Each statement is
//! lowered with the statements of the device functions its expressions call
//! hoisted before it ([`Lowerer::hoisting`]).

use proc_macro2::Ident;
use quote::ToTokens;

use super::check::ConstantRole;
use super::expr::macro_message;
use super::place::Access;
use super::scope::Binding;
use super::syntax::{call_builtin, compound_op, is_untyped_literal, peel};
use super::{Lowered, Lowerer};
use crate::front::constness;
use crate::front::vocabulary::{Builtin, Construct};
use crate::ir::{
    BinaryOp, Block, Expr, ExprKind, Literal, LocalId, Place, Scalar, Space, Stmt, UnaryOp,
    CLUSTER_BARRIER_FUNCTION,
};

impl Lowerer<'_> {
    /// Lowers `stmts` in a new scope. Errors are reported and lowering goes on
    /// with the next statement.
    pub(super) fn block(&mut self, stmts: &[syn::Stmt], out: &mut Block) {
        self.scopes.push(Vec::new());
        for (i, stmt) in stmts.iter().enumerate() {
            let _reported = self.hoisting(out, |this, out| this.stmt(stmt, &stmts[i + 1..], out));
        }
        self.scopes.pop();
    }

    /// Runs `lower` for one statement: what it writes goes to `out` after
    /// the statements of the device functions its expressions call.
    pub(super) fn hoisting<T>(
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
    pub(super) fn without_hoisting<T>(
        &mut self,
        place: &'static str,
        lower: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let barrier = self.hoist_barrier.replace(place);
        let result = lower(self);
        self.hoist_barrier = barrier;
        result
    }

    /// `rest` is what follows `stmt` in its block (where a `let` is in scope).
    pub(super) fn stmt(
        &mut self,
        stmt: &syn::Stmt,
        rest: &[syn::Stmt],
        out: &mut Block,
    ) -> Lowered<()> {
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
            syn::Expr::Return(r) if self.in_closure => self.err(
                r,
                "`return` in a closure passed to a device function would end the kernel's thread, not the closure: guard the rest of the closure's body with `if` instead",
            ),
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
            syn::Expr::Call(c)
                if matches!(
                    call_builtin(c),
                    Some(Builtin::Function(Construct::SyncThreads | Construct::ClusterSync))
                ) =>
            {
                let (name, barrier) = match call_builtin(c) {
                    Some(Builtin::Function(Construct::ClusterSync)) => {
                        (CLUSTER_BARRIER_FUNCTION, Stmt::ClusterBarrier)
                    }
                    _ => ("sync_threads", Stmt::Barrier),
                };
                self.no_generic_arguments(c)?;
                self.arity(c, &c.args, 0, name)?;
                out.push(barrier);
                Ok(())
            }
            syn::Expr::Call(c) if matches!(call_builtin(c), Some(Builtin::WarpStatement)) => {
                out.push(self.warp_statement(c)?);
                Ok(())
            }
            syn::Expr::Call(c) if Self::is_device_call(c) => self.device_call(c).map(|_| ()),
            syn::Expr::Call(c) if matches!(call_builtin(c), Some(Builtin::Atomic(_))) => {
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
        // A condition of literals and the instance's type constants alone
        // (`T::BYTES == 2 && ..`, decided before any const parameter) picks
        // its branch here: the other is not lowered, so it may hold what the
        // instance's types cannot (a `.trans` load in a kernel generic over
        // 16- and 32-bit elements).
        if let Ok(Literal::Bool(taken)) = crate::eval::eval(&cond, &[], &[]) {
            let mut body = Block::new();
            if taken {
                self.block(&i.then_branch.stmts, &mut body);
            } else {
                self.else_branch(i, &mut body)?;
            }
            out.push(Stmt::If {
                cond: Expr::literal(Scalar::Bool, Literal::Bool(true)),
                then_body: body,
                else_body: Block::new(),
            });
            return Ok(());
        }
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
        let else_lowered = self.else_branch(i, &mut else_body);
        self.guards.truncate(outer_guards);
        else_lowered?;
        out.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
        Ok(())
    }

    /// The `else` branch of `i` (none, a block, or an `else if`) into `body`.
    fn else_branch(&mut self, i: &syn::ExprIf, body: &mut Block) -> Lowered<()> {
        match i.else_branch.as_ref().map(|(_, e)| &**e) {
            None => Ok(()),
            Some(syn::Expr::If(elif)) => self.hoisting(body, |this, out| this.if_stmt(elif, out)),
            Some(syn::Expr::Block(b)) => {
                self.block(&b.block.stmts, body);
                Ok(())
            }
            Some(other) => self.err(other, "write the `else` branch as a block `else { .. }`"),
        }
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

    pub(super) fn condition(&mut self, e: &syn::Expr, construct: &str) -> Lowered<Expr> {
        if let syn::Expr::Let(l) = e {
            return self.err(l, "`let` in a condition (`if let`, `while let`) is not supported: use a `bool` condition");
        }
        let cond = self.expr(e, Some(Scalar::Bool))?;
        self.check_type(e, cond.ty, Scalar::Bool, &format!("{construct} conditions"))?;
        Ok(cond)
    }
}
