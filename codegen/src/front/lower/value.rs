//! Values that may be `if` expressions: the value of a `let`, an
//! assignment or a function's result. An `if` value of two plain operands
//! is a select; any other is a temporary local assigned in each branch of a
//! [`Stmt::If`], the branch whose type does not come from context typing the
//! other.

use super::syntax::{is_untyped_literal, peel};
use super::{Lowered, Lowerer};
use crate::ir::{Block, Expr, ExprKind, Literal, Place, Scalar, Space, Stmt};

impl Lowerer<'_> {
    /// The value of a `let` or an assignment: an expression, or an `if`
    /// expression lowered into a temporary local and a [`Stmt::If`] in `out`.
    pub(super) fn value(
        &mut self,
        e: &syn::Expr,
        hint: Option<Scalar>,
        out: &mut Block,
    ) -> Lowered<Expr> {
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
        // Both branches assign the temporary before it is read; the 8-bit
        // floats have no literal to start it from, so they start without one.
        out.push(Stmt::Let {
            local: temp,
            init: (!ty.is_storage_only()).then(|| zero(ty)),
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

pub(super) fn zero(ty: Scalar) -> Expr {
    let lit = match ty {
        Scalar::Bool => Literal::Bool(false),
        t if t.is_float() => Literal::Float(0.0),
        _ => Literal::Int(0),
    };
    Expr::literal(ty, lit)
}
