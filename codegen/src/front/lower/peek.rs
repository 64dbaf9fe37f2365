//! Types seen without lowering: what literal inference looks ahead with.
//! The type of a variable initialized by an untyped literal comes from the
//! code that uses it (`front/infer.rs`), which needs the types of the other
//! operands there before they are lowered.

use proc_macro2::Ident;

use super::scope::Binding;
use super::syntax::{binary_op, call_builtin, index_chain, peel};
use super::Lowerer;
use crate::front::infer;
use crate::front::vocabulary::{Builtin, Construct};
use crate::ir::{BinaryOp, Intrinsic, ParamType, Scalar};

impl Lowerer<'_> {
    pub(super) fn type_from_uses(&self, ident: &Ident, stmts: &[syn::Stmt]) -> Option<Scalar> {
        infer::type_from_uses(
            ident,
            stmts,
            &|e| self.peek_type(e, Some(ident)),
            &|c, k| self.argument_type(c, k),
        )
    }

    /// The type of `e` if it is evident without lowering (names in scope but
    /// `hiding`, typed literals, indices, casts, ..); `None` otherwise.
    pub(super) fn peek_type(&self, e: &syn::Expr, hiding: Option<&Ident>) -> Option<Scalar> {
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
                    Binding::Param(id) | Binding::Slice { param: id, .. } => {
                        match self.params[id as usize].ty {
                            ParamType::Scalar(s) | ParamType::Slice { elem: s, .. } => Some(s),
                        }
                    }
                    Binding::Const(id) => Some(self.const_params[id as usize].ty),
                    Binding::Named(id) => Some(self.named[id].ty),
                    Binding::Local(id) => Some(self.locals[id as usize].ty),
                    Binding::Argument(id) => Some(self.named[id].ty),
                    Binding::View(v) => Some(self.locals[self.views[v].local as usize].ty),
                    Binding::Pipeline(_)
                    | Binding::Tuple(_)
                    | Binding::Closure(_)
                    | Binding::Broken => None,
                }
            }
            syn::Expr::Field(f) => self.tuple_part_type(f).or(Some(Scalar::U32)),
            syn::Expr::Call(c) => match call_builtin(c)? {
                Builtin::Function(Construct::LaneId | Construct::ClusterRank) => Some(Scalar::U32),
                Builtin::Intrinsic(Intrinsic::ShflXor | Intrinsic::ShflDown) => {
                    peek(c.args.first()?)
                }
                Builtin::Atomic(_) => match c.args.first()? {
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
}
