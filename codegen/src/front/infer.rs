//! The type of a variable whose initial value is an untyped literal
//! (`let mut sum = 0.0;`, `for k in 0..8`), taken from how the code after it
//! uses it: the first use next to an operand whose type is known decides, as
//! Rust's inference would. Without such a use the literal's default applies.

use proc_macro2::Ident;
use syn::visit::Visit;

use super::vocabulary::{self, Builtin};
use crate::ir::Scalar;

/// The type of `name` that its first informative use in `stmts` asks for.
/// `peek` types an expression without lowering it (`None` when unknown).
pub fn type_from_uses(
    name: &Ident,
    stmts: &[syn::Stmt],
    peek: &dyn Fn(&syn::Expr) -> Option<Scalar>,
    argument: &dyn Fn(&syn::ExprCall, Passed) -> Option<Scalar>,
) -> Option<Scalar> {
    let mut finder = UseFinder {
        name,
        peek,
        argument,
        found: None,
    };
    for stmt in stmts {
        if finder.found.is_some() {
            break;
        }
        finder.visit_stmt(stmt);
    }
    finder.found
}

/// Where a variable is passed to a call: as its `k`-th argument, or its
/// `k`-th generic argument (`f::<i>(..)`, counting lifetimes out).
#[derive(Clone, Copy)]
pub enum Passed {
    Value(usize),
    Generic(usize),
}

struct UseFinder<'a> {
    name: &'a Ident,
    peek: &'a dyn Fn(&syn::Expr) -> Option<Scalar>,
    /// The type of a call's scalar or const parameter (a device function's).
    argument: &'a dyn Fn(&syn::ExprCall, Passed) -> Option<Scalar>,
    found: Option<Scalar>,
}

impl UseFinder<'_> {
    /// Whether `e` is the variable or one of its elements.
    fn is_var(&self, e: &syn::Expr) -> bool {
        match e {
            syn::Expr::Paren(p) => self.is_var(&p.expr),
            syn::Expr::Group(g) => self.is_var(&g.expr),
            syn::Expr::Index(i) => self.is_var(&i.expr),
            syn::Expr::Path(p) => p.path.is_ident(self.name),
            _ => false,
        }
    }

    /// Two operands that must have the same type.
    fn same_type(&mut self, a: &syn::Expr, b: &syn::Expr) {
        if self.found.is_some() {
            return;
        }
        if self.is_var(a) {
            self.found = (self.peek)(b);
        } else if self.is_var(b) {
            self.found = (self.peek)(a);
        }
    }
}

impl<'ast> Visit<'ast> for UseFinder<'_> {
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        if self.found.is_none() {
            syn::visit::visit_expr(self, e);
        }
    }

    fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
        use syn::BinOp as B;
        match b.op {
            B::Shl(_) | B::Shr(_) | B::ShlAssign(_) | B::ShrAssign(_) => {
                if self.found.is_none() && self.is_var(&b.right) {
                    self.found = Some(Scalar::U32);
                }
            }
            B::And(_) | B::Or(_) => {}
            _ => self.same_type(&b.left, &b.right),
        }
        syn::visit::visit_expr_binary(self, b);
    }

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        self.same_type(&a.left, &a.right);
        syn::visit::visit_expr_assign(self, a);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        let method = vocabulary::math_method(&m.method.to_string());
        if method.is_some_and(|method| method.args > 0) {
            for arg in &m.args {
                self.same_type(&m.receiver, arg);
            }
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        let is_atomic = |i: &Ident| {
            matches!(
                vocabulary::builtin(&i.to_string()),
                Some(Builtin::Atomic(_))
            )
        };
        let atomic =
            matches!(&*c.func, syn::Expr::Path(p) if p.path.get_ident().is_some_and(is_atomic));
        if let (true, Some(syn::Expr::Reference(target))) = (atomic, c.args.first()) {
            for arg in c.args.iter().skip(1) {
                self.same_type(&target.expr, arg);
            }
        }
        if self.found.is_none() {
            let plain =
                |e: &syn::Expr| matches!(e, syn::Expr::Path(p) if p.path.is_ident(self.name));
            if let Some(k) = c.args.iter().position(plain) {
                self.found = (self.argument)(c, Passed::Value(k));
            }
        }
        if let (None, syn::Expr::Path(p)) = (self.found, &*c.func) {
            if let Some(syn::PathArguments::AngleBracketed(a)) =
                p.path.segments.last().map(|s| &s.arguments)
            {
                let named = |g: &syn::GenericArgument| match g {
                    syn::GenericArgument::Type(syn::Type::Path(t)) => t.path.is_ident(self.name),
                    syn::GenericArgument::Const(syn::Expr::Path(e)) => e.path.is_ident(self.name),
                    _ => false,
                };
                if let Some(k) = a.args.iter().position(named) {
                    self.found = (self.argument)(c, Passed::Generic(k));
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}
