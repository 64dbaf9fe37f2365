//! Analyses over lowered expressions: which parts are compile-time constants
//! (register-array indices, `#[unroll]` bounds, array sizes, `block(..)`) and
//! which can be evaluated on the host (`requires(..)`).

use crate::ir::{Expr, ExprKind, Local, LocalId, Param, Place};

/// What a walk decides about one node.
enum Verdict {
    /// The node is fine as a whole; its operands need no look.
    Accept,
    /// The node is fine if its operands are.
    Descend,
    /// The node is not allowed; the text names it for the error message.
    Reject(String),
}

/// Names of parameters and locals, for messages.
pub struct Names<'a> {
    pub params: &'a [Param],
    pub locals: &'a [Local],
}

impl Names<'_> {
    fn param(&self, id: u32) -> &str {
        &self.params[id as usize].name
    }
    fn local(&self, id: LocalId) -> &str {
        &self.locals[id as usize].name
    }
    fn place(&self, place: &Place) -> String {
        match place {
            Place::Local { local, .. } => format!("`{}`", self.local(*local)),
            Place::Global { param, .. } => format!("`{}[..]`", self.param(*param)),
        }
    }
}

/// The first part of `expr` that is not a compile-time constant, described
/// for an error message. Constants are literals, const params and the
/// variables of the `#[unroll]` loops in `unroll_vars`.
pub fn non_constant_part(expr: &Expr, names: &Names, unroll_vars: &[LocalId]) -> Option<String> {
    first_rejected(expr, &|e| match &e.kind {
        ExprKind::Literal(_) | ExprKind::Const(_) => Verdict::Accept,
        ExprKind::Load(place) => match &**place {
            Place::Local { local, indices }
                if indices.is_empty() && unroll_vars.contains(local) =>
            {
                Verdict::Accept
            }
            Place::Local { local, indices } if indices.is_empty() => {
                Verdict::Reject(format!("the run-time variable `{}`", names.local(*local)))
            }
            other => Verdict::Reject(format!("a read of {}", names.place(other))),
        },
        ExprKind::Param(id) => {
            Verdict::Reject(format!("the run-time parameter `{}`", names.param(*id)))
        }
        ExprKind::Len(id) => {
            Verdict::Reject(format!("the run-time length of `{}`", names.param(*id)))
        }
        ExprKind::Special(_) => Verdict::Reject("a thread or block index".into()),
        ExprKind::Call(..) => Verdict::Reject("a function call".into()),
        ExprKind::Atomic { .. } => Verdict::Reject("an atomic".into()),
        ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Cast(_) | ExprKind::Select(..) => {
            Verdict::Descend
        }
    })
}

/// The first part of `expr` that the host cannot evaluate before a launch
/// (anything but scalar params, slice lengths, const params and literals).
pub fn non_host_part(expr: &Expr, names: &Names) -> Option<String> {
    first_rejected(expr, &|e| match &e.kind {
        ExprKind::Literal(_) | ExprKind::Const(_) | ExprKind::Param(_) | ExprKind::Len(_) => {
            Verdict::Accept
        }
        ExprKind::Load(place) => {
            Verdict::Reject(format!("a read of device memory ({})", names.place(place)))
        }
        ExprKind::Special(_) => Verdict::Reject(
            "a thread or block index (there are no threads before the launch)".into(),
        ),
        ExprKind::Call(..) => Verdict::Reject("a math function".into()),
        ExprKind::Atomic { .. } => Verdict::Reject("an atomic".into()),
        ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Cast(_) | ExprKind::Select(..) => {
            Verdict::Descend
        }
    })
}

/// Whether evaluating `expr` writes memory (an atomic somewhere inside).
pub fn has_atomic(expr: &Expr) -> bool {
    first_rejected(expr, &|e| match e.kind {
        ExprKind::Atomic { .. } => Verdict::Reject(String::new()),
        _ => Verdict::Descend,
    })
    .is_some()
}

fn first_rejected(expr: &Expr, judge: &dyn Fn(&Expr) -> Verdict) -> Option<String> {
    match judge(expr) {
        Verdict::Accept => None,
        Verdict::Reject(what) => Some(what),
        Verdict::Descend => expr
            .operands()
            .into_iter()
            .find_map(|e| first_rejected(e, judge)),
    }
}
