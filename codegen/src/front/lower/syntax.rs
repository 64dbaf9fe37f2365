//! Helpers over `syn` trees: parentheses peeled, untyped literals, the names
//! of calls, index chains and repeat expressions taken apart, operators
//! mapped to the IR's, and source text from tokens for messages.

use proc_macro2::Ident;

use crate::front::vocabulary::{self, Builtin};
use crate::ir::BinaryOp;

/// Skips parentheses and invisible groups.
pub(super) fn peel(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => peel(&p.expr),
        syn::Expr::Group(g) => peel(&g.expr),
        other => other,
    }
}

/// Whether the type of `e` comes only from its context: unsuffixed literals
/// and arithmetic over them.
pub(super) fn is_untyped_literal(e: &syn::Expr) -> bool {
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

/// The name a call of a single-segment path calls, its generic arguments
/// (`mma_m16n8::<f16>`, `f::<4>`) aside.
pub(super) fn call_ident(c: &syn::ExprCall) -> Option<&Ident> {
    match &*c.func {
        syn::Expr::Path(p)
            if p.qself.is_none()
                && p.path.leading_colon.is_none()
                && p.path.segments.len() == 1 =>
        {
            Some(&p.path.segments[0].ident)
        }
        _ => None,
    }
}

/// The generic arguments of a call's path (`::<f16>`), if it has any.
pub(super) fn generic_arguments(c: &syn::ExprCall) -> Option<&syn::AngleBracketedGenericArguments> {
    match &*c.func {
        syn::Expr::Path(p) => match &p.path.segments.last()?.arguments {
            syn::PathArguments::AngleBracketed(a) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` is the path `segments` (`f32::from_bits`).
pub(super) fn is_path(e: &syn::Expr, segments: &[&str]) -> bool {
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

pub(super) fn call_name(c: &syn::ExprCall) -> Option<String> {
    call_ident(c).map(|i| i.to_string())
}

/// The built-in that `c` calls by its plain name.
pub(super) fn call_builtin(c: &syn::ExprCall) -> Option<Builtin> {
    call_name(c).and_then(|n| vocabulary::builtin(&n))
}

/// `a[i][j]`: the indexed expression and the indices, outermost first.
pub(super) fn index_chain(e: &syn::Expr) -> (&syn::Expr, Vec<&syn::Expr>) {
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
pub(super) fn repeat_parts(e: &syn::Expr) -> (&syn::Expr, Vec<&syn::Expr>) {
    match peel(e) {
        syn::Expr::Repeat(r) => {
            let (value, mut lens) = repeat_parts(&r.expr);
            lens.insert(0, &*r.len);
            (value, lens)
        }
        other => (other, Vec::new()),
    }
}

/// Source text from tokens, spaced as rustfmt would for simple expressions
/// (`a.len() >= m * k`). Built from tokens rather than the source file so
/// that the text is the same in the proc-macro and in tests.
pub(super) fn compact_text(tokens: proc_macro2::TokenStream) -> String {
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

pub(super) fn binary_op(op: &syn::BinOp) -> BinaryOp {
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
pub(super) fn compound_op(op: &syn::BinOp) -> Option<BinaryOp> {
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
