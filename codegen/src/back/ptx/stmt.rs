//! Statements: structured control flow onto labels and branches.
//!
//! Labels are `$<construct><n>_<role>` with `n` counted per module in
//! emission order, so the text is deterministic.

use super::features::Feature;
use super::function::{arith, Emitter, LoopLabels, Operand};
use super::vectorize::memory_vector;
use crate::ir::{Expr, ExprKind, Literal, LocalId, Place, Scalar, Stmt};
use crate::Error;

impl Emitter<'_> {
    /// A block's statements in order; adjacent moves of consecutive shared
    /// or global elements go as one vector access (see `vectorize`).
    pub fn block(&mut self, block: &[Stmt]) -> Result<(), Error> {
        let mut rest = block;
        while let Some(stmt) = rest.first() {
            let done = match memory_vector(self.kernel, &self.shared_offsets, rest) {
                Some(vector) => {
                    self.memory_vector(&vector)?;
                    vector.len()
                }
                None => {
                    self.stmt(stmt)?;
                    1
                }
            };
            rest = &rest[done..];
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<(), Error> {
        match stmt {
            Stmt::Let { local, init } => self.let_local(*local, init.as_ref()),
            Stmt::Assign { place, value } => {
                let value = self.expr(value)?;
                self.store(place, value)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => self.for_loop(stmt, *var, start, end, step, body),
            Stmt::While { cond, body } => self.while_loop(stmt, cond, body),
            Stmt::Break | Stmt::Continue => {
                // Staged copies of this loop iteration land before it ends.
                self.store_staged(stmt)?;
                let target = self
                    .loops
                    .last()
                    .ok_or_else(|| self.error("`break`/`continue` outside of a loop"))?;
                let label = if *stmt == Stmt::Break {
                    &target.break_to
                } else {
                    &target.continue_to
                };
                let text = format!("bra {label}");
                self.ins(text);
                Ok(())
            }
            // `ret` may sit in divergent code: each thread leaves on its own.
            Stmt::Return => {
                self.ins("ret");
                Ok(())
            }
            Stmt::Barrier => {
                self.ins("bar.sync 0");
                Ok(())
            }
            // `.acq_rel`: one fence serves both sides, a release before the
            // atomic that signals and an acquire after the one that sees it
            // (the atomics are `atom`'s default, relaxed at GPU scope).
            Stmt::GpuFence => {
                self.require(Feature::GpuFence)?;
                self.ins("fence.acq_rel.gpu");
                Ok(())
            }
            Stmt::Expr(e) => self.expr(e).map(drop),
            Stmt::Matrix(op) => self.matrix(op),
            Stmt::AsyncCopy {
                dst,
                src,
                bytes,
                src_bytes,
            } => self.async_copy(stmt, dst, src, *bytes, src_bytes),
            Stmt::AsyncCommit => self.async_commit(),
            Stmt::AsyncWait { pending } => self.async_wait(stmt, pending),
            Stmt::Mbarrier(op) => self.mbarrier(op),
            Stmt::ProxyFence => self.proxy_fence(),
            Stmt::ClusterBarrier => self.cluster_barrier(),
            Stmt::Warpgroup(op) => self.warpgroup(op),
            Stmt::Tma(op) => self.tma(op),
            Stmt::SetMaxRegisters { grow, count } => self.set_max_registers(*grow, count),
        }
    }

    fn let_local(&mut self, local: LocalId, init: Option<&Expr>) -> Result<(), Error> {
        if self.shared_offsets[local as usize].is_some() {
            return Ok(());
        }
        let regs = self.local_regs(local);
        if let Some(init) = init {
            // A scalar takes the value; a register array takes it as a splat.
            let value = self.expr(init)?;
            for reg in regs {
                self.mov(reg, &value);
            }
        }
        Ok(())
    }

    /// A predicate register holding a bool condition.
    fn condition(&mut self, cond: &Expr) -> Result<Operand, Error> {
        let value = self.expr(cond)?;
        Ok(Operand::Reg(self.in_reg(value, cond.ty)))
    }

    fn if_else(
        &mut self,
        cond: &Expr,
        then_body: &[Stmt],
        else_body: &[Stmt],
    ) -> Result<(), Error> {
        let n = self.label_id();
        let (else_label, end_label) = (format!("$if{n}_else"), format!("$if{n}_end"));
        let p = self.condition(cond)?;
        let skip_to = if else_body.is_empty() {
            &end_label
        } else {
            &else_label
        };
        self.ins(format!("@!{p} bra {skip_to}"));
        self.block(then_body)?;
        if !else_body.is_empty() {
            self.ins(format!("bra {end_label}"));
            self.place_label(&else_label);
            self.block(else_body)?;
        }
        self.place_label(&end_label);
        Ok(())
    }

    /// `for var in (start..end).step_by(step)`, rotated (test at the bottom).
    /// The bottom test never computes `var + step` past `end`, so no wrap
    /// can turn the loop endless: with step 1, `var + 1 <= end` always;
    /// otherwise the loop goes on while `end - var > step` (unsigned, exact
    /// for signed types too since `var < end`). `site` is the loop's
    /// statement, where staged copies of an iteration are stored.
    fn for_loop(
        &mut self,
        site: &Stmt,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &[Stmt],
    ) -> Result<(), Error> {
        let ty = self.kernel.locals[var as usize].ty;
        let n = self.label_id();
        let (body_label, cont_label, end_label) = (
            format!("$for{n}_body"),
            format!("$for{n}_cont"),
            format!("$for{n}_end"),
        );
        let var_reg = self.local_regs(var)[0];
        let start = self.expr(start)?;
        self.mov(var_reg, &start);
        // `end` and `step` are evaluated once, before the loop.
        let end = self.once(end)?;
        let step = self.once(step)?;
        let t = arith(ty);
        let done = self.fresh(Scalar::Bool);
        self.ins(format!("setp.ge.{t} {done}, {var_reg}, {end}"));
        self.ins(format!("@{done} bra {end_label}"));
        self.place_label(&body_label);
        self.loops.push(LoopLabels {
            continue_to: cont_label.clone(),
            break_to: end_label.clone(),
        });
        self.block(body)?;
        self.loops.pop();
        self.store_staged(site)?;
        self.place_label(&cont_label);
        if step == Operand::Imm("1".into()) {
            // `var < end` in the body, so `var + 1` cannot wrap.
            self.ins(format!("add.{t} {var_reg}, {var_reg}, 1"));
            let more = self.fresh(Scalar::Bool);
            self.ins(format!("setp.lt.{t} {more}, {var_reg}, {end}"));
            self.ins(format!("@{more} bra {body_label}"));
        } else {
            let unsigned = if ty.size_bytes() == 8 { "u64" } else { "u32" };
            let left = self.fresh(ty);
            self.ins(format!("sub.{unsigned} {left}, {end}, {var_reg}"));
            let last = self.fresh(Scalar::Bool);
            self.ins(format!("setp.le.{unsigned} {last}, {left}, {step}"));
            self.ins(format!("@{last} bra {end_label}"));
            self.ins(format!("add.{t} {var_reg}, {var_reg}, {step}"));
            self.ins(format!("bra {body_label}"));
        }
        self.place_label(&end_label);
        Ok(())
    }

    /// An expression's value fixed before a loop: immediates stay, anything
    /// else is copied so the loop body cannot change it.
    fn once(&mut self, e: &Expr) -> Result<Operand, Error> {
        match self.expr(e)? {
            imm @ Operand::Imm(_) => Ok(imm),
            Operand::Reg(r) => {
                let copy = self.fresh(e.ty);
                self.mov(copy, &Operand::Reg(r));
                Ok(Operand::Reg(copy))
            }
        }
    }

    /// `site` is the loop's statement, where staged copies of an iteration are stored.
    fn while_loop(&mut self, site: &Stmt, cond: &Expr, body: &[Stmt]) -> Result<(), Error> {
        let n = self.label_id();
        let (head_label, end_label) = (format!("$while{n}_head"), format!("$while{n}_end"));
        self.place_label(&head_label);
        // `loop { }` has no test.
        if cond.kind != ExprKind::Literal(Literal::Bool(true)) {
            let p = self.condition(cond)?;
            self.ins(format!("@!{p} bra {end_label}"));
        }
        self.loops.push(LoopLabels {
            continue_to: head_label.clone(),
            break_to: end_label.clone(),
        });
        self.block(body)?;
        self.loops.pop();
        self.store_staged(site)?;
        self.ins(format!("bra {head_label}"));
        self.place_label(&end_label);
        Ok(())
    }

    /// Stores a value into a place: a register move, or a memory store.
    pub fn store(&mut self, place: &Place, value: Operand) -> Result<(), Error> {
        if let Some(reg) = self.register_element(place)? {
            self.mov(reg, &value);
            return Ok(());
        }
        self.store_memory(place, value)
    }
}
