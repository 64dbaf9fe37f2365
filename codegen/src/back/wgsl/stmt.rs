//! Statements. The IR's structured control flow maps onto WGSL's: `if`,
//! `for`, `while`, `loop`, `break`, `continue`, `return`.
//!
//! Declarations: a local declared once in the body is declared where its
//! `let` is (`let` when immutable, else `var`); one declared several times
//! (the copies of an `#[unroll]`ed body share it) is declared once at the top
//! of `main` and assigned at each `let`. Shared arrays are module variables,
//! so their `let` emits nothing.

use super::expr::Code;
use super::function::{array_type, Emitter};
use crate::ir::{Expr, ExprKind, Literal, LocalId, Space, Stmt};
use crate::Error;

/// Whether `e` keeps its value while a loop runs (so it need not be copied
/// before the loop): literals, parameters, lengths and built-in indices.
fn invariant(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::Len(_) | ExprKind::Special(_)
    )
}

fn is_zero(e: &Expr) -> bool {
    match e.kind {
        ExprKind::Literal(Literal::Int(v)) => v == 0,
        ExprKind::Literal(Literal::Float(v)) => v.to_bits() == 0,
        ExprKind::Literal(Literal::Bool(b)) => !b,
        _ => false,
    }
}

impl Emitter<'_> {
    pub fn block(&mut self, block: &[Stmt]) -> Result<(), Error> {
        block.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<(), Error> {
        match stmt {
            Stmt::Let { local, init } => self.let_local(*local, init.as_ref()),
            Stmt::Assign { place, value } => {
                let p = self.place(place)?;
                let v = self.expr(value)?.text;
                if self.is_atomic(place) {
                    self.line(format!("atomicStore(&{p}, {v});"));
                } else {
                    self.line(format!("{p} = {v};"));
                }
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body, "if"),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => self.for_loop(*var, start, end, step, body),
            Stmt::While { cond, body } => {
                let head = if cond.kind == ExprKind::Literal(Literal::Bool(true)) {
                    "loop".to_string()
                } else {
                    format!("while {}", self.expr(cond)?.text)
                };
                self.nested(head, |e| e.block(body))
            }
            Stmt::Break => {
                self.line("break;");
                Ok(())
            }
            Stmt::Continue => {
                self.line("continue;");
                Ok(())
            }
            Stmt::Return => {
                self.line("return;");
                Ok(())
            }
            Stmt::Barrier => {
                self.line("storageBarrier();");
                self.line("workgroupBarrier();");
                Ok(())
            }
            Stmt::Expr(e) => {
                let code = self.expr(e)?;
                // Atomics are calls, which may stand as statements.
                if matches!(e.kind, ExprKind::Atomic { .. }) {
                    self.line(format!("{};", code.text));
                } else {
                    self.line(format!("_ = {};", code.text));
                }
                Ok(())
            }
            Stmt::Matrix(_)
            | Stmt::AsyncCopy { .. }
            | Stmt::AsyncCommit
            | Stmt::AsyncWait { .. }
            | Stmt::Mbarrier(_)
            | Stmt::GpuFence
            | Stmt::ProxyFence
            | Stmt::ClusterBarrier
            | Stmt::Warpgroup(_)
            | Stmt::Tma(_)
            | Stmt::SetMaxRegisters { .. } => {
                // `valid::targets::check` rejects these before emission starts.
                Err(self.error(
                    "Tensor Core operations, async copies, mbarriers, fences, clusters, wgmma, TMA and setmaxnreg have no WGSL form",
                ))
            }
        }
    }

    fn let_local(&mut self, local: LocalId, init: Option<&Expr>) -> Result<(), Error> {
        let decl = self.kernel.local(local);
        if decl.space == Space::Shared {
            return Ok(());
        }
        let name = self.locals[local as usize].clone();
        let hoisted = self.hoisted[local as usize];
        let ty = self.local_type(local)?;
        if decl.dims.is_empty() {
            let value = init.map(|e| self.expr(e)).transpose()?;
            match (value, hoisted) {
                (Some(v), true) => self.line(format!("{name} = {};", v.text)),
                (None, true) => {}
                (Some(v), false) if !decl.mutable => self.line(format!("let {name} = {};", v.text)),
                (Some(v), false) => self.line(format!("var {name}: {ty} = {};", v.text)),
                (None, false) => self.line(format!("var {name}: {ty};")),
            }
            return Ok(());
        }
        // A register array: WGSL zeroes a new `var`; other values are splatted.
        let value = match init {
            None => None,
            Some(e) if is_zero(e) => Some(format!("{ty}()")),
            Some(e) => {
                let v = self.expr(e)?;
                let element = if invariant(e) {
                    v.text
                } else {
                    let fresh = self.names.fresh(&format!("{name}_init"));
                    self.line(format!("let {fresh} = {};", v.text));
                    fresh
                };
                Some(self.splat(local, element)?)
            }
        };
        match (value, hoisted) {
            (Some(v), true) => self.line(format!("{name} = {v};")),
            (Some(v), false) if !v.ends_with("()") => self.line(format!("var {name} = {v};")),
            (None, true) => {}
            (_, false) => self.line(format!("var {name}: {ty};")),
        }
        Ok(())
    }

    /// An array value with every element `element`.
    fn splat(&mut self, local: LocalId, element: String) -> Result<String, Error> {
        let elem = self.ty(self.kernel.local(local).ty)?;
        let dims = self.dims(local)?;
        let mut value = element;
        for (level, &d) in dims.iter().enumerate().rev() {
            let ty = array_type(elem, &dims[level..]);
            value = format!("{ty}({})", vec![value; d as usize].join(", "));
        }
        Ok(value)
    }

    fn if_else(
        &mut self,
        cond: &Expr,
        then_body: &[Stmt],
        else_body: &[Stmt],
        keyword: &str,
    ) -> Result<(), Error> {
        let c = self.expr(cond)?.text;
        self.line(format!("{keyword} {c} {{"));
        self.indented(then_body)?;
        match else_body {
            [] => self.line("}"),
            // `else if` chains stay flat.
            [Stmt::If {
                cond,
                then_body,
                else_body,
            }] => return self.if_else(cond, then_body, else_body, "} else if"),
            _ => {
                self.line("} else {");
                self.indented(else_body)?;
                self.line("}");
            }
        }
        Ok(())
    }

    fn indented(&mut self, body: &[Stmt]) -> Result<(), Error> {
        self.nested_lines(|e| e.block(body))
    }

    /// `for var in (start..end).step_by(step)`. `end` and `step` are
    /// evaluated once, before the loop. The update never computes `var +
    /// step` past `end`, so no wrap can restart the loop: with step 1,
    /// `var + 1 <= end`; otherwise `var` jumps to `end` when the distance
    /// left (unsigned, exact for signed types too since `var < end`) is at
    /// most `step`.
    fn for_loop(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &[Stmt],
    ) -> Result<(), Error> {
        let name = self.locals[var as usize].clone();
        let ty = self.ty(self.kernel.local(var).ty)?;
        let start = self.expr(start)?.text;
        let end_text = self.once(&name, "end", end)?;
        let init = if self.hoisted[var as usize] {
            format!("{name} = {start}")
        } else {
            format!("var {name}: {ty} = {start}")
        };
        let update = if step.as_int() == Some(1) {
            format!("{name} += {}", self.literal(step.ty, Literal::Int(1))?.text)
        } else {
            let step_text = self.once(&name, "step", step)?;
            let (left, step_u) = if ty == "i32" {
                (
                    format!("u32({end_text} - {name})"),
                    format!("u32({step_text})"),
                )
            } else {
                (format!("{end_text} - {name}"), step_text.clone())
            };
            format!("{name} = select({end_text}, {name} + {step_text}, {left} > {step_u})")
        };
        self.nested(
            format!("for ({init}; {name} < {end_text}; {update})"),
            |e| e.block(body),
        )
    }

    /// The text of a loop bound: the expression itself when the loop cannot
    /// change it, else a `let` before the loop.
    fn once(&mut self, var: &str, what: &str, e: &Expr) -> Result<String, Error> {
        let code: Code = self.expr(e)?;
        if invariant(e) {
            return Ok(code.text);
        }
        let fresh = self.names.fresh(&format!("{var}_{what}"));
        self.line(format!("let {fresh} = {};", code.text));
        Ok(fresh)
    }
}
