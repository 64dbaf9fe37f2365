//! The IR as text: a compact, deterministic, line-oriented form that reads
//! like the DSL, for snapshots (`tests/out/ir/`), data-driven front tests
//! (DSL in, expected IR text out) and debugging (print a variant before and
//! after [`crate::specialize`] from `cargo xtask`-style tools).
//!
//! [`print_kernel`] (or `Display` for [`Kernel`]) prints one kernel; `Display`
//! for [`KernelDef`] ([`print_def`]) adds the family's targets, tune axes and
//! constraints. The form:
//!
//! ```text
//! kernel saxpy(a: f32, x: &[f32], y: &mut [f32])
//!   arch(sm_70, sm_80, sm_90, wgsl)
//!   local i: u32
//! {
//!   let i = block_idx().x * block_dim().x + thread_idx().x
//!   if i < x.len() {
//!     y[i] = a * x[i] + y[i]
//!   }
//! }
//! ```
//!
//! - The signature line has the const params (`<const BM: u32>`) and params.
//!   The header lines that follow, indented, are the attribute's parts:
//!   `arch(..)`, `tune(..)` and `constrain(..)` (definitions only), then
//!   `block(..)` and `requires(..)`, each condition followed by its source
//!   text as a comment where the two differ; then one `local` line per
//!   [`Local`] in id order, `local [shared] [mut] NAME: TYPE`, arrays as Rust
//!   array types (`[[f32; 4]; 2]`: dims outermost first, as in the DSL).
//! - Names: params and const params by name; a local by its name, or
//!   `name#id` when another local, param or const param has the same name.
//!   An id that does not exist prints as `local#id`, `param#id`, `const#id`.
//! - The body, between `{` and `}`, one statement per line, two spaces per
//!   level, without semicolons. `let x = init` (a register array's splat
//!   init as `[[v; 4]; 2]`, an uninitialized local as `let x`); `for` with
//!   `#[unroll]` in front and `.step_by(s)` unless the step is the literal
//!   1; an `else` block holding only an `if` as `else if`. The warp matrix
//!   operations, async copies, barriers and atomics are the DSL calls
//!   (`ldmatrix_x4(&mut fa, &tile[r][c])`, `cp_async_wait(0)`,
//!   `sync_threads()`, `atomic_add(&mut y[i], v)`).
//! - Expressions are infix with Rust's precedence and associativity,
//!   parenthesized only where needed, and around the operand of a unary
//!   operator when it is itself unary or a negative literal (`-(-x)`).
//!   `x.len()`, `thread_idx().x`, `lane_id()`; intrinsics as calls
//!   (`sqrt(x)`, `min(a, b)`); `select(c, a, b)` is [`ExprKind::Select`];
//!   `e as T` a cast.
//! - Literals: integers of type `u32` (the index type) print bare, every
//!   other literal with its type as a suffix (`-1i32`, `0.5f32`, `2u64`);
//!   floats in the shortest form that reads back to the value (as `f32`
//!   when it is one), `f32::NAN`, `f32::INFINITY`, `f32::NEG_INFINITY`.
//!
//! Every match over the IR's enums is exhaustive and every IR struct is
//! destructured whole (but for [`KernelDef`]'s private digest memo), so a new
//! construct or field fails to compile here until the printer shows it.

use std::borrow::Cow;
use std::fmt::{self, Write};

use crate::def::KernelDef;
use crate::ir::{
    Axis, BinaryOp, ConstParam, Expr, ExprKind, Fragment, Kernel, Literal, Local, MatrixDescriptor,
    MatrixOp, Param, ParamId, ParamType, Place, Requirement, Scalar, Space, Special, Stmt,
    TensorMap, TmaOp, UnaryOp, WarpgroupOp, CLUSTER_BARRIER_FUNCTION, GPU_FENCE_FUNCTION,
    MATRIX_DESC_FUNCTION, PROXY_FENCE_FUNCTION,
};
use crate::valid::{atomic_name, intrinsic_name};

/// The text of one kernel (a family or one specialized variant).
pub fn print_kernel(kernel: &Kernel) -> String {
    kernel.to_string()
}

/// The text of a definition: the kernel with its targets, tune axes and constraints.
pub fn print_def(def: &KernelDef) -> String {
    def.to_string()
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Printer::new(self).kernel(f, None)
    }
}

impl fmt::Display for KernelDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Printer::new(&self.ir).kernel(f, Some(self))
    }
}

const INDENT: &str = "  ";

/// Binding strength, loosest first: what an expression is as an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Any,
    Or,
    And,
    Compare,
    BitOr,
    BitXor,
    BitAnd,
    Shift,
    Add,
    Mul,
    Cast,
    Unary,
    Atom,
}

impl Prec {
    /// The next tighter level (for right operands and non-associative operators).
    fn tighter(self) -> Prec {
        match self {
            Prec::Any => Prec::Or,
            Prec::Or => Prec::And,
            Prec::And => Prec::Compare,
            Prec::Compare => Prec::BitOr,
            Prec::BitOr => Prec::BitXor,
            Prec::BitXor => Prec::BitAnd,
            Prec::BitAnd => Prec::Shift,
            Prec::Shift => Prec::Add,
            Prec::Add => Prec::Mul,
            Prec::Mul => Prec::Cast,
            Prec::Cast => Prec::Unary,
            Prec::Unary | Prec::Atom => Prec::Atom,
        }
    }
}

/// The operator's spelling and binding strength.
fn binary_op(op: BinaryOp) -> (&'static str, Prec) {
    match op {
        BinaryOp::Add => ("+", Prec::Add),
        BinaryOp::Sub => ("-", Prec::Add),
        BinaryOp::Mul => ("*", Prec::Mul),
        BinaryOp::Div => ("/", Prec::Mul),
        BinaryOp::Rem => ("%", Prec::Mul),
        BinaryOp::BitAnd => ("&", Prec::BitAnd),
        BinaryOp::BitOr => ("|", Prec::BitOr),
        BinaryOp::BitXor => ("^", Prec::BitXor),
        BinaryOp::Shl => ("<<", Prec::Shift),
        BinaryOp::Shr => (">>", Prec::Shift),
        BinaryOp::Eq => ("==", Prec::Compare),
        BinaryOp::Ne => ("!=", Prec::Compare),
        BinaryOp::Lt => ("<", Prec::Compare),
        BinaryOp::Le => ("<=", Prec::Compare),
        BinaryOp::Gt => (">", Prec::Compare),
        BinaryOp::Ge => (">=", Prec::Compare),
        BinaryOp::LogicalAnd => ("&&", Prec::And),
        BinaryOp::LogicalOr => ("||", Prec::Or),
    }
}

fn axis_name(axis: Axis) -> &'static str {
    match axis {
        Axis::X => "x",
        Axis::Y => "y",
        Axis::Z => "z",
    }
}

/// An integer value of type `ty` (bits sign- or zero-extended to 64), without suffix.
fn int_text(value: i64, ty: Scalar) -> String {
    match ty {
        Scalar::Bool => match value {
            0 => "false".to_string(),
            1 => "true".to_string(),
            other => other.to_string(),
        },
        Scalar::U8 | Scalar::U32 | Scalar::U64 | Scalar::E4m3 | Scalar::E5m2 => {
            (value as u64).to_string()
        }
        Scalar::I8
        | Scalar::I32
        | Scalar::I64
        | Scalar::F16
        | Scalar::Bf16
        | Scalar::F32
        | Scalar::F64 => value.to_string(),
    }
}

fn literal_text(lit: Literal, ty: Scalar) -> String {
    match lit {
        Literal::Bool(b) => b.to_string(),
        Literal::Int(v) if ty == Scalar::U32 => int_text(v, ty),
        Literal::Int(v) => format!("{}{}", int_text(v, ty), ty.name()),
        Literal::Float(v) if v.is_nan() => format!("{}::NAN", ty.name()),
        Literal::Float(v) if v == f64::INFINITY => format!("{}::INFINITY", ty.name()),
        Literal::Float(v) if v == f64::NEG_INFINITY => format!("{}::NEG_INFINITY", ty.name()),
        Literal::Float(v) if ty != Scalar::F64 && (v as f32) as f64 == v => {
            format!("{:?}{}", v as f32, ty.name())
        }
        Literal::Float(v) => format!("{v:?}{}", ty.name()),
    }
}

/// Each local's printed name: its own, or `name#id` where the name is not unique.
fn local_names(kernel: &Kernel) -> Vec<String> {
    let others = |name: &str| {
        kernel.params.iter().any(|p| p.name == name)
            || kernel.const_params.iter().any(|c| c.name == name)
            || kernel.locals.iter().filter(|l| l.name == name).count() > 1
    };
    kernel
        .locals
        .iter()
        .enumerate()
        .map(|(id, local)| {
            if others(&local.name) {
                format!("{}#{id}", local.name)
            } else {
                local.name.clone()
            }
        })
        .collect()
}

/// `names[id]`, or `what#id` for an id out of range.
fn name_or<'a>(names: &'a [String], id: u32, what: &str) -> Cow<'a, str> {
    match names.get(id as usize) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("{what}#{id}")),
    }
}

/// Writes `items` separated by `, `.
fn comma_list<T>(
    w: &mut dyn Write,
    items: impl IntoIterator<Item = T>,
    mut item: impl FnMut(&mut dyn Write, T) -> fmt::Result,
) -> fmt::Result {
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        item(w, x)?;
    }
    Ok(())
}

/// An argument of a DSL call: an expression, a place or fragment behind `&`
/// or `&mut`, or a number of the operation itself.
enum Arg<'e> {
    Expr(&'e Expr),
    Ref(&'e Place),
    RefMut(&'e Place),
    Frag(&'e Fragment),
    FragMut(&'e Fragment),
    Number(u32),
    /// `matrix_desc(&tile[..], SWIZZLE)`.
    Descriptor(&'e MatrixDescriptor),
    /// A parameter's name.
    Param(ParamId),
    /// `(a, b, ..)`.
    Tuple(&'e [Expr]),
}

struct Printer<'k> {
    kernel: &'k Kernel,
    locals: Vec<String>,
    params: Vec<String>,
    consts: Vec<String>,
}

impl<'k> Printer<'k> {
    fn new(kernel: &'k Kernel) -> Printer<'k> {
        Printer {
            kernel,
            locals: local_names(kernel),
            params: kernel.params.iter().map(|p| p.name.clone()).collect(),
            consts: kernel.const_params.iter().map(|c| c.name.clone()).collect(),
        }
    }

    fn local(&self, id: u32) -> Cow<'_, str> {
        name_or(&self.locals, id, "local")
    }

    fn param(&self, id: u32) -> Cow<'_, str> {
        name_or(&self.params, id, "param")
    }

    fn konst(&self, id: u32) -> Cow<'_, str> {
        name_or(&self.consts, id, "const")
    }

    fn kernel(&self, w: &mut dyn Write, def: Option<&KernelDef>) -> fmt::Result {
        let Kernel {
            name,
            const_params,
            params,
            locals,
            block,
            cluster,
            min_blocks_per_sm,
            requires,
            body,
        } = self.kernel;
        write!(w, "kernel {name}")?;
        if !const_params.is_empty() {
            w.write_str("<")?;
            comma_list(w, const_params, |w, c| {
                let ConstParam { name, ty } = c;
                write!(w, "const {name}: {}", ty.name())
            })?;
            w.write_str(">")?;
        }
        w.write_str("(")?;
        comma_list(w, params, |w, p| {
            let Param {
                name,
                ty,
                tensor_map,
            } = p;
            if let Some(map) = tensor_map {
                self.tensor_map(w, map)?;
            }
            match ty {
                ParamType::Scalar(t) => write!(w, "{name}: {}", t.name()),
                ParamType::Slice { elem, mutable } => {
                    let m = if *mutable { "mut " } else { "" };
                    write!(w, "{name}: &{m}[{}]", elem.name())
                }
            }
        })?;
        w.write_str(")\n")?;
        if let Some(def) = def {
            self.def_header(w, def)?;
        }
        if let Some(block) = block {
            write!(w, "{INDENT}block(")?;
            comma_list(w, block, |w, e| self.expr(w, e, Prec::Any))?;
            w.write_str(")\n")?;
        }
        if let Some(cluster) = cluster {
            write!(w, "{INDENT}cluster(")?;
            comma_list(w, cluster, |w, e| self.expr(w, e, Prec::Any))?;
            w.write_str(")\n")?;
        }
        if let Some(n) = min_blocks_per_sm {
            write!(w, "{INDENT}min_blocks_per_sm(")?;
            self.expr(w, n, Prec::Any)?;
            w.write_str(")\n")?;
        }
        for r in requires {
            self.condition(w, "requires", r)?;
        }
        for (id, local) in locals.iter().enumerate() {
            self.local_decl(w, id as u32, local)?;
        }
        w.write_str("{\n")?;
        self.block(w, body, 1)?;
        w.write_str("}\n")
    }

    /// `arch(..)`, `tune(..)` and `constrain(..)` lines.
    fn def_header(&self, w: &mut dyn Write, def: &KernelDef) -> fmt::Result {
        // `ir` is the kernel being printed; `ir_digest` is a memo, not content.
        let KernelDef {
            ir: _,
            targets,
            tune,
            constraints,
            ..
        } = def;
        write!(w, "{INDENT}arch(")?;
        comma_list(w, targets, |w, t| w.write_str(t.name()))?;
        w.write_str(")\n")?;
        if !tune.is_empty() {
            write!(w, "{INDENT}tune(")?;
            comma_list(w, tune.iter().enumerate(), |w, (i, axis)| {
                let ty = self
                    .kernel
                    .const_params
                    .get(i)
                    .map_or(Scalar::I64, |c| c.ty);
                write!(w, "{} = [", axis.name)?;
                comma_list(w, &axis.values, |w, &v| w.write_str(&int_text(v, ty)))?;
                w.write_str("]")
            })?;
            w.write_str(")\n")?;
        }
        for c in constraints {
            self.condition(w, "constrain", c)?;
        }
        Ok(())
    }

    /// `KEYWORD(cond)`, then `  // text` when the source text differs.
    fn condition(&self, w: &mut dyn Write, keyword: &str, r: &Requirement) -> fmt::Result {
        let Requirement { cond, text } = r;
        let mut printed = String::new();
        self.expr(&mut printed, cond, Prec::Any)?;
        write!(w, "{INDENT}{keyword}({printed})")?;
        let text: Vec<&str> = text.lines().map(str::trim).collect();
        let text = text.join(" ");
        if text != printed {
            write!(w, "  // {text}")?;
        }
        w.write_str("\n")
    }

    fn local_decl(&self, w: &mut dyn Write, id: u32, local: &Local) -> fmt::Result {
        let Local {
            name: _,
            ty,
            space,
            dims,
            mutable,
        } = local;
        write!(w, "{INDENT}local ")?;
        match space {
            Space::Register => {}
            Space::Shared => w.write_str("shared ")?,
        }
        if *mutable {
            w.write_str("mut ")?;
        }
        write!(w, "{}: ", self.local(id))?;
        self.array(w, dims, |w| w.write_str(ty.name()))?;
        w.write_str("\n")
    }

    /// `[[ELEM; d1]; d0]` for dims `[d0, d1]`; `ELEM` alone without dims.
    fn array(
        &self,
        w: &mut dyn Write,
        dims: &[Expr],
        elem: impl FnOnce(&mut dyn Write) -> fmt::Result,
    ) -> fmt::Result {
        for _ in dims {
            w.write_str("[")?;
        }
        elem(w)?;
        for d in dims.iter().rev() {
            w.write_str("; ")?;
            self.expr(w, d, Prec::Any)?;
            w.write_str("]")?;
        }
        Ok(())
    }

    fn block(&self, w: &mut dyn Write, block: &[Stmt], depth: usize) -> fmt::Result {
        for stmt in block {
            self.stmt(w, stmt, depth)?;
        }
        Ok(())
    }

    fn stmt(&self, w: &mut dyn Write, stmt: &Stmt, depth: usize) -> fmt::Result {
        let indent = INDENT.repeat(depth);
        w.write_str(&indent)?;
        match stmt {
            Stmt::Let { local, init } => {
                write!(w, "let {}", self.local(*local))?;
                if let Some(init) = init {
                    w.write_str(" = ")?;
                    let dims = self.kernel.locals.get(*local as usize).map(|l| &l.dims[..]);
                    self.array(w, dims.unwrap_or_default(), |w| {
                        self.expr(w, init, Prec::Any)
                    })?;
                }
            }
            Stmt::Assign { place, value } => {
                self.place(w, place)?;
                w.write_str(" = ")?;
                self.expr(w, value, Prec::Any)?;
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let (mut cond, mut then_body, mut else_body) = (cond, then_body, else_body);
                loop {
                    w.write_str("if ")?;
                    self.expr(w, cond, Prec::Any)?;
                    w.write_str(" {\n")?;
                    self.block(w, then_body, depth + 1)?;
                    w.write_str(&indent)?;
                    match &else_body[..] {
                        [] => break,
                        [Stmt::If {
                            cond: c,
                            then_body: t,
                            else_body: e,
                        }] => {
                            w.write_str("} else ")?;
                            (cond, then_body, else_body) = (c, t, e);
                        }
                        [..] => {
                            w.write_str("} else {\n")?;
                            self.block(w, else_body, depth + 1)?;
                            w.write_str(&indent)?;
                            break;
                        }
                    }
                }
                w.write_str("}")?;
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                unroll,
                body,
            } => {
                if *unroll {
                    w.write_str("#[unroll] ")?;
                }
                write!(w, "for {} in ", self.local(*var))?;
                let unit = matches!(step.kind, ExprKind::Literal(Literal::Int(1)));
                if !unit {
                    w.write_str("(")?;
                }
                self.expr(w, start, Prec::Any)?;
                w.write_str("..")?;
                self.expr(w, end, Prec::Any)?;
                if !unit {
                    w.write_str(").step_by(")?;
                    self.expr(w, step, Prec::Any)?;
                    w.write_str(")")?;
                }
                w.write_str(" {\n")?;
                self.block(w, body, depth + 1)?;
                write!(w, "{indent}}}")?;
            }
            Stmt::While { cond, body } => {
                w.write_str("while ")?;
                self.expr(w, cond, Prec::Any)?;
                w.write_str(" {\n")?;
                self.block(w, body, depth + 1)?;
                write!(w, "{indent}}}")?;
            }
            Stmt::Break => w.write_str("break")?,
            Stmt::Continue => w.write_str("continue")?,
            Stmt::Return => w.write_str("return")?,
            Stmt::Barrier => w.write_str("sync_threads()")?,
            Stmt::GpuFence => self.call(w, GPU_FENCE_FUNCTION, &[])?,
            Stmt::Expr(e) => self.expr(w, e, Prec::Any)?,
            Stmt::Matrix(op) => self.matrix(w, op)?,
            Stmt::AsyncCopy {
                dst,
                src,
                bytes,
                src_bytes,
            } => self.call(
                w,
                "cp_async",
                &[
                    Arg::RefMut(dst),
                    Arg::Ref(src),
                    Arg::Number(*bytes),
                    Arg::Expr(src_bytes),
                ],
            )?,
            Stmt::AsyncCommit => self.call(w, "cp_async_commit", &[])?,
            Stmt::AsyncWait { pending } => self.call(w, "cp_async_wait", &[Arg::Expr(pending)])?,
            Stmt::Mbarrier(op) => {
                let (bar, operand) = op.operands();
                let mut args = Vec::new();
                match bar {
                    Some(bar) if op.writes() => args.push(Arg::RefMut(bar)),
                    Some(bar) => args.push(Arg::Ref(bar)),
                    None => {}
                }
                args.extend(operand.map(Arg::Expr));
                self.call(w, op.function(), &args)?
            }
            Stmt::ProxyFence => self.call(w, PROXY_FENCE_FUNCTION, &[])?,
            Stmt::ClusterBarrier => self.call(w, CLUSTER_BARRIER_FUNCTION, &[])?,
            Stmt::Warpgroup(op) => self.warpgroup(w, op)?,
            Stmt::Tma(op) => self.tma(w, op)?,
            Stmt::SetMaxRegisters { grow, count } => {
                let name = if *grow {
                    "setmaxnreg_inc"
                } else {
                    "setmaxnreg_dec"
                };
                self.call(w, name, &[Arg::Expr(count)])?
            }
        }
        w.write_str("\n")
    }

    fn tensor_map(&self, w: &mut dyn Write, map: &TensorMap) -> fmt::Result {
        let list = |w: &mut dyn Write, key: &str, exprs: &[Expr]| -> fmt::Result {
            write!(w, "{key} = [")?;
            comma_list(w, exprs, |w, e| self.expr(w, e, Prec::Any))?;
            w.write_str("], ")
        };
        w.write_str("#[tensor_map(")?;
        list(w, "shape", &map.shape)?;
        list(w, "strides", &map.strides)?;
        list(w, "tile", &map.tile)?;
        write!(w, "swizzle = {})] ", map.swizzle.bytes())
    }

    fn tma(&self, w: &mut dyn Write, op: &TmaOp) -> fmt::Result {
        match op {
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast,
            } => {
                let mut args = vec![
                    Arg::RefMut(smem),
                    Arg::Param(*map),
                    Arg::Tuple(coords),
                    Arg::RefMut(bar),
                ];
                args.extend(multicast.as_ref().map(Arg::Expr));
                let name = match multicast {
                    Some(_) => "tma_load_multicast",
                    None => "tma_load",
                };
                self.call(w, name, &args)
            }
            TmaOp::Store { smem, map, coords } => self.call(
                w,
                "tma_store",
                &[Arg::Ref(smem), Arg::Param(*map), Arg::Tuple(coords)],
            ),
            TmaOp::Commit => self.call(w, "tma_store_commit", &[]),
            TmaOp::WaitRead { pending } => {
                self.call(w, "tma_store_wait_read", &[Arg::Expr(pending)])
            }
            TmaOp::Wait { pending } => self.call(w, "tma_store_wait", &[Arg::Expr(pending)]),
        }
    }

    /// A warpgroup operation as its DSL call: a wgmma with its `::<N>` and
    /// its operands as `matrix_desc(..)`.
    fn warpgroup(&self, w: &mut dyn Write, op: &WarpgroupOp) -> fmt::Result {
        match op {
            WarpgroupOp::Fence | WarpgroupOp::Commit => self.call(w, op.function(), &[]),
            WarpgroupOp::Wait { pending } => self.call(w, op.function(), &[Arg::Expr(pending)]),
            WarpgroupOp::Mma(mma) => {
                let mut name = format!("{}::<", op.function());
                self.expr(&mut name, &mma.n, Prec::Any)?;
                name.push('>');
                let args = [
                    Arg::FragMut(&mma.acc),
                    Arg::Descriptor(&mma.a),
                    Arg::Descriptor(&mma.b),
                    Arg::Expr(&mma.accumulate),
                ];
                self.call(w, &name, &args)
            }
        }
    }

    /// A matrix operation as its DSL call; [`MatrixOp::function`] spells the
    /// fields that are part of the function's name.
    fn matrix(&self, w: &mut dyn Write, op: &MatrixOp) -> fmt::Result {
        let args = match op {
            MatrixOp::LoadMatrix {
                count: _,
                transpose: _,
                dst,
                src,
            } => vec![Arg::FragMut(dst), Arg::Ref(src)],
            MatrixOp::Mma { kind: _, acc, a, b }
            | MatrixOp::Wmma {
                a_layout: _,
                b_layout: _,
                acc,
                a,
                b,
            } => vec![Arg::FragMut(acc), Arg::Frag(a), Arg::Frag(b)],
            MatrixOp::MmaSparse {
                kind: _,
                ordered: _,
                acc,
                a,
                b,
                metadata,
                selector,
            } => vec![
                Arg::FragMut(acc),
                Arg::Frag(a),
                Arg::Frag(b),
                Arg::Expr(metadata),
                Arg::Expr(selector),
            ],
            MatrixOp::WmmaLoad {
                operand: _,
                layout: _,
                dst,
                src,
                stride,
            } => vec![Arg::FragMut(dst), Arg::Ref(src), Arg::Expr(stride)],
            MatrixOp::WmmaStore {
                layout: _,
                dst,
                src,
                stride,
            } => vec![Arg::RefMut(dst), Arg::Frag(src), Arg::Expr(stride)],
        };
        self.call(w, &op.function(), &args)
    }

    /// `name(args)`.
    fn call(&self, w: &mut dyn Write, name: &str, args: &[Arg<'_>]) -> fmt::Result {
        write!(w, "{name}(")?;
        comma_list(w, args, |w, arg| {
            let (prefix, (name, indices)) = match arg {
                Arg::Expr(e) => return self.expr(w, e, Prec::Any),
                Arg::Number(n) => return write!(w, "{n}"),
                Arg::Param(id) => return w.write_str(&self.params[*id as usize]),
                Arg::Tuple(parts) => {
                    w.write_str("(")?;
                    comma_list(w, *parts, |w, e| self.expr(w, e, Prec::Any))?;
                    return w.write_str(")");
                }
                Arg::Descriptor(d) => {
                    return self.call(
                        w,
                        MATRIX_DESC_FUNCTION,
                        &[Arg::Ref(&d.start), Arg::Number(d.swizzle.bytes())],
                    )
                }
                Arg::Ref(p) => ("&", self.place_parts(p)),
                Arg::RefMut(p) => ("&mut ", self.place_parts(p)),
                Arg::Frag(f) => ("&", self.fragment_parts(f)),
                Arg::FragMut(f) => ("&mut ", self.fragment_parts(f)),
            };
            w.write_str(prefix)?;
            self.indexed(w, &name, indices)
        })?;
        w.write_str(")")
    }

    /// `name[i][j]..`.
    fn indexed(&self, w: &mut dyn Write, name: &str, indices: &[Expr]) -> fmt::Result {
        w.write_str(name)?;
        for i in indices {
            w.write_str("[")?;
            self.expr(w, i, Prec::Any)?;
            w.write_str("]")?;
        }
        Ok(())
    }

    fn place(&self, w: &mut dyn Write, place: &Place) -> fmt::Result {
        let (name, indices) = self.place_parts(place);
        self.indexed(w, &name, indices)
    }

    /// A place as the name of its local or slice and its indices.
    fn place_parts<'a>(&'a self, place: &'a Place) -> (Cow<'a, str>, &'a [Expr]) {
        match place {
            Place::Local { local, indices } => (self.local(*local), indices),
            Place::Global { param, index } => (self.param(*param), std::slice::from_ref(index)),
        }
    }

    fn fragment_parts<'a>(&'a self, frag: &'a Fragment) -> (Cow<'a, str>, &'a [Expr]) {
        let Fragment { local, indices } = frag;
        (self.local(*local), indices)
    }

    /// How tightly `e` binds as an operand.
    fn prec(e: &Expr) -> Prec {
        match &e.kind {
            ExprKind::Literal(lit) if literal_text(*lit, e.ty).starts_with('-') => Prec::Unary,
            ExprKind::Literal(_)
            | ExprKind::Param(_)
            | ExprKind::Const(_)
            | ExprKind::Len(_)
            | ExprKind::Load(_)
            | ExprKind::Select(..)
            | ExprKind::Special(_)
            | ExprKind::Call(..)
            | ExprKind::Atomic { .. } => Prec::Atom,
            ExprKind::Unary(..) => Prec::Unary,
            ExprKind::Binary(op, ..) => binary_op(*op).1,
            ExprKind::Cast(_) => Prec::Cast,
        }
    }

    /// Writes `e`, in parentheses when it binds more loosely than `min`.
    fn expr(&self, w: &mut dyn Write, e: &Expr, min: Prec) -> fmt::Result {
        let paren = Printer::prec(e) < min;
        if paren {
            w.write_str("(")?;
        }
        self.expr_bare(w, e)?;
        if paren {
            w.write_str(")")?;
        }
        Ok(())
    }

    fn expr_bare(&self, w: &mut dyn Write, e: &Expr) -> fmt::Result {
        let Expr { ty, kind } = e;
        match kind {
            ExprKind::Literal(lit) => w.write_str(&literal_text(*lit, *ty)),
            ExprKind::Param(p) => w.write_str(&self.param(*p)),
            ExprKind::Const(c) => w.write_str(&self.konst(*c)),
            ExprKind::Len(p) => write!(w, "{}.len()", self.param(*p)),
            ExprKind::Load(place) => self.place(w, place),
            ExprKind::Unary(op, a) => {
                w.write_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                })?;
                self.expr(w, a, Prec::Atom)
            }
            ExprKind::Binary(op, a, b) => {
                let (spelling, prec) = binary_op(*op);
                // Left-associative, but comparisons do not chain.
                let left = if prec == Prec::Compare {
                    prec.tighter()
                } else {
                    prec
                };
                self.expr(w, a, left)?;
                write!(w, " {spelling} ")?;
                self.expr(w, b, prec.tighter())
            }
            ExprKind::Cast(a) => {
                self.expr(w, a, Prec::Cast)?;
                write!(w, " as {}", ty.name())
            }
            ExprKind::Select(c, a, b) => {
                self.call(w, "select", &[Arg::Expr(c), Arg::Expr(a), Arg::Expr(b)])
            }
            ExprKind::Special(s) => match s {
                Special::ThreadIdx(a) => write!(w, "thread_idx().{}", axis_name(*a)),
                Special::BlockIdx(a) => write!(w, "block_idx().{}", axis_name(*a)),
                Special::BlockDim(a) => write!(w, "block_dim().{}", axis_name(*a)),
                Special::GridDim(a) => write!(w, "grid_dim().{}", axis_name(*a)),
                Special::LaneId => w.write_str("lane_id()"),
                Special::ClusterRank => w.write_str("cluster_rank()"),
            },
            ExprKind::Call(f, args) => {
                let args: Vec<Arg<'_>> = args.iter().map(Arg::Expr).collect();
                self.call(w, intrinsic_name(*f), &args)
            }
            ExprKind::Atomic {
                op,
                place,
                value,
                compare,
            } => {
                let mut args = vec![Arg::RefMut(place)];
                args.extend(compare.as_deref().map(Arg::Expr));
                args.push(Arg::Expr(value));
                self.call(w, atomic_name(*op), &args)
            }
        }
    }
}

/// One statement for a message: its first line (`if i < n {`, `y[i] = v`),
/// with ` .. }` after a compound statement's head.
pub fn statement_head(kernel: &Kernel, stmt: &Stmt) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = Printer::new(kernel).stmt(&mut text, stmt, 0);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_string();
    if lines.next().is_some() {
        format!("{first} .. }}")
    } else {
        first
    }
}

/// A place as the DSL writes it (`tile[r][c]`, `y[i]`).
pub fn place_text(kernel: &Kernel, place: &Place) -> String {
    let mut text = String::new();
    let _ = Printer::new(kernel).place(&mut text, place);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{
        AtomicOp, Block, Intrinsic, MatrixLayout, MmaKind, SparseMmaKind, UnaryOp, WmmaOperand,
    };

    fn lit(ty: Scalar, lit: Literal) -> Expr {
        Expr::literal(ty, lit)
    }

    fn int(ty: Scalar, v: i64) -> Expr {
        lit(ty, Literal::Int(v))
    }

    fn param(ty: Scalar, id: u32) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Param(id),
        }
    }

    fn unary(op: UnaryOp, a: Expr) -> Expr {
        Expr {
            ty: a.ty,
            kind: ExprKind::Unary(op, Box::new(a)),
        }
    }

    fn cast(ty: Scalar, a: Expr) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Cast(Box::new(a)),
        }
    }

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }

    fn local_place(local: u32, indices: Vec<Expr>) -> Place {
        Place::Local { local, indices }
    }

    fn load(ty: Scalar, place: Place) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Load(Box::new(place)),
        }
    }

    fn frag(local: u32, indices: Vec<Expr>) -> Fragment {
        Fragment { local, indices }
    }

    fn decl(name: &str, ty: Scalar, space: Space, dims: &[u32], mutable: bool) -> Local {
        Local {
            name: name.into(),
            ty,
            space,
            dims: dims.iter().map(|&d| Expr::u32(d)).collect(),
            mutable,
        }
    }

    /// `k<const K: u32>(a: i32, b: i32, c: i32, p: bool, q: bool, n: u32, y: &mut [f32])`
    /// with a local `n` (shadowing the param) and two locals `i`.
    fn kernel(body: Block) -> Kernel {
        let scalar = |name: &str, ty| Param {
            name: name.into(),
            ty: ParamType::Scalar(ty),
            tensor_map: None,
        };
        Kernel {
            name: "k".into(),
            const_params: vec![ConstParam {
                name: "K".into(),
                ty: Scalar::U32,
            }],
            params: vec![
                scalar("a", Scalar::I32),
                scalar("b", Scalar::I32),
                scalar("c", Scalar::I32),
                scalar("p", Scalar::Bool),
                scalar("q", Scalar::Bool),
                scalar("n", Scalar::U32),
                Param {
                    name: "y".into(),
                    ty: ParamType::Slice {
                        elem: Scalar::F32,
                        mutable: true,
                    },
                    tensor_map: None,
                },
            ],
            locals: Vec::new(),
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: Vec::new(),
            body,
        }
    }

    fn expr_text(e: &Expr) -> String {
        let k = kernel(Vec::new());
        let mut out = String::new();
        Printer::new(&k).expr(&mut out, e, Prec::Any).unwrap();
        out
    }

    #[test]
    fn expressions_take_parentheses_only_where_rust_needs_them() {
        use BinaryOp::*;
        let (a, b, c) = (
            || param(Scalar::I32, 0),
            || param(Scalar::I32, 1),
            || param(Scalar::I32, 2),
        );
        let (p, q) = (|| param(Scalar::Bool, 3), || param(Scalar::Bool, 4));
        let cases = [
            (bin(Mul, bin(Add, a(), b()), c()), "(a + b) * c"),
            (bin(Add, a(), bin(Mul, b(), c())), "a + b * c"),
            (bin(Sub, bin(Sub, a(), b()), c()), "a - b - c"),
            (bin(Sub, a(), bin(Sub, b(), c())), "a - (b - c)"),
            (bin(Shl, a(), bin(Add, b(), c())), "a << b + c"),
            (bin(Add, bin(Shl, a(), b()), c()), "(a << b) + c"),
            // Rust's precedence: `&` binds tighter than `==`, `^` than `|`.
            (bin(Eq, bin(BitAnd, a(), b()), c()), "a & b == c"),
            (bin(BitOr, bin(BitXor, a(), b()), c()), "a ^ b | c"),
            (bin(BitXor, a(), bin(BitOr, b(), c())), "a ^ (b | c)"),
            // Comparisons do not chain.
            (
                bin(Eq, bin(Lt, a(), b()), bin(Lt, b(), a())),
                "(a < b) == (b < a)",
            ),
            (
                bin(LogicalOr, p(), bin(LogicalAnd, q(), p())),
                "p || q && p",
            ),
            (
                bin(LogicalAnd, bin(LogicalOr, p(), q()), p()),
                "(p || q) && p",
            ),
            (unary(UnaryOp::Not, bin(Lt, a(), b())), "!(a < b)"),
            (unary(UnaryOp::Neg, unary(UnaryOp::Neg, a())), "-(-a)"),
            (unary(UnaryOp::Neg, int(Scalar::I32, -1)), "-(-1i32)"),
            (bin(Sub, a(), int(Scalar::I32, -1)), "a - -1i32"),
            (cast(Scalar::F32, unary(UnaryOp::Neg, a())), "-a as f32"),
            (unary(UnaryOp::Neg, cast(Scalar::F32, a())), "-(a as f32)"),
            (
                cast(Scalar::F64, cast(Scalar::F32, bin(Add, a(), b()))),
                "(a + b) as f32 as f64",
            ),
            (
                bin(Mul, cast(Scalar::I32, param(Scalar::U32, 5)), c()),
                "n as i32 * c",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(expr_text(&e), text);
        }
    }

    #[test]
    fn literals_carry_their_type_but_u32_and_bool() {
        let float = |ty, v| lit(ty, Literal::Float(v));
        let cases = [
            (int(Scalar::U32, 7), "7"),
            (int(Scalar::I8, -128), "-128i8"),
            (int(Scalar::U64, -1), "18446744073709551615u64"),
            (int(Scalar::I64, i64::MIN), "-9223372036854775808i64"),
            (lit(Scalar::Bool, Literal::Bool(true)), "true"),
            (float(Scalar::F32, 0.1f32 as f64), "0.1f32"),
            (float(Scalar::F64, 0.1), "0.1f64"),
            (float(Scalar::F32, 1.0), "1.0f32"),
            (float(Scalar::F16, -0.0), "-0.0f16"),
            (float(Scalar::Bf16, 3e38), "3e38bf16"),
            (float(Scalar::F32, f64::NAN), "f32::NAN"),
            (float(Scalar::F64, f64::INFINITY), "f64::INFINITY"),
            (float(Scalar::F16, f64::NEG_INFINITY), "f16::NEG_INFINITY"),
        ];
        for (e, text) in cases {
            assert_eq!(expr_text(&e), text);
        }
    }

    #[test]
    fn ids_that_do_not_exist_print_by_kind_and_id() {
        let e = bin(
            BinaryOp::Add,
            param(Scalar::U32, 9),
            Expr {
                ty: Scalar::U32,
                kind: ExprKind::Const(3),
            },
        );
        let e = bin(BinaryOp::Add, e, load(Scalar::U32, local_place(7, vec![])));
        assert_eq!(expr_text(&e), "param#9 + const#3 + local#7");
    }

    /// Every statement and matrix operation, in a hand-built kernel (not a
    /// valid one: the printer does not care).
    #[test]
    fn every_statement_prints_as_its_dsl_form() {
        use Scalar::{F32, U32};
        let i0 = || load(U32, local_place(1, vec![]));
        let special = |s| Expr {
            ty: U32,
            kind: ExprKind::Special(s),
        };
        let body = vec![
            Stmt::Let {
                local: 0,
                init: Some(param(U32, 5)),
            },
            Stmt::Let {
                local: 1,
                init: Some(bin(
                    BinaryOp::Add,
                    special(Special::GridDim(Axis::Z)),
                    special(Special::LaneId),
                )),
            },
            Stmt::Let {
                local: 3,
                init: Some(lit(F32, Literal::Float(0.0))),
            },
            Stmt::Let {
                local: 4,
                init: None,
            },
            Stmt::Let {
                local: 5,
                init: None,
            },
            Stmt::If {
                cond: bin(BinaryOp::Eq, i0(), Expr::u32(0)),
                then_body: vec![Stmt::Return],
                else_body: vec![Stmt::If {
                    cond: param(Scalar::Bool, 3),
                    then_body: vec![Stmt::Barrier],
                    else_body: vec![Stmt::Expr(Expr {
                        ty: U32,
                        kind: ExprKind::Atomic {
                            op: AtomicOp::CompareExchange,
                            place: Box::new(local_place(5, vec![i0()])),
                            value: Box::new(Expr::u32(2)),
                            compare: Some(Box::new(Expr::u32(1))),
                        },
                    })],
                }],
            },
            Stmt::For {
                var: 2,
                start: Expr::u32(0),
                end: Expr {
                    ty: U32,
                    kind: ExprKind::Len(6),
                },
                step: Expr {
                    ty: U32,
                    kind: ExprKind::Const(0),
                },
                unroll: false,
                body: vec![
                    Stmt::AsyncCopy {
                        dst: local_place(5, vec![load(U32, local_place(2, vec![]))]),
                        src: Place::Global {
                            param: 6,
                            index: load(U32, local_place(2, vec![])),
                        },
                        bytes: 16,
                        src_bytes: Expr::u32(16),
                    },
                    Stmt::AsyncCommit,
                    Stmt::Continue,
                ],
            },
            Stmt::AsyncWait {
                pending: Expr::u32(0),
            },
            Stmt::While {
                cond: lit(Scalar::Bool, Literal::Bool(true)),
                body: vec![
                    Stmt::Assign {
                        place: local_place(1, vec![]),
                        value: Expr {
                            ty: U32,
                            kind: ExprKind::Select(
                                Box::new(param(Scalar::Bool, 4)),
                                Box::new(i0()),
                                Box::new(Expr {
                                    ty: U32,
                                    kind: ExprKind::Call(Intrinsic::Min, vec![i0(), Expr::u32(3)]),
                                }),
                            ),
                        },
                    },
                    Stmt::Break,
                ],
            },
            Stmt::For {
                var: 2,
                start: Expr::u32(0),
                end: Expr::u32(2),
                step: Expr::u32(1),
                unroll: true,
                body: vec![
                    Stmt::Matrix(MatrixOp::LoadMatrix {
                        count: 4,
                        transpose: true,
                        dst: frag(4, vec![]),
                        src: local_place(5, vec![Expr::u32(0)]),
                    }),
                    Stmt::Matrix(MatrixOp::Mma {
                        kind: MmaKind::Tf32,
                        acc: frag(3, vec![load(U32, local_place(2, vec![]))]),
                        a: frag(4, vec![]),
                        b: frag(4, vec![]),
                    }),
                    Stmt::Matrix(MatrixOp::MmaSparse {
                        kind: SparseMmaKind::Bf16,
                        ordered: true,
                        acc: frag(3, vec![Expr::u32(1)]),
                        a: frag(4, vec![]),
                        b: frag(4, vec![]),
                        metadata: i0(),
                        selector: load(U32, local_place(2, vec![])),
                    }),
                ],
            },
            Stmt::Matrix(MatrixOp::WmmaLoad {
                operand: WmmaOperand::B,
                layout: MatrixLayout::Col,
                dst: frag(4, vec![]),
                src: Place::Global {
                    param: 6,
                    index: Expr::u32(0),
                },
                stride: param(U32, 5),
            }),
            Stmt::Matrix(MatrixOp::Wmma {
                a_layout: MatrixLayout::Row,
                b_layout: MatrixLayout::Col,
                acc: frag(3, vec![Expr::u32(0)]),
                a: frag(4, vec![]),
                b: frag(4, vec![]),
            }),
            Stmt::Matrix(MatrixOp::WmmaStore {
                layout: MatrixLayout::Row,
                dst: Place::Global {
                    param: 6,
                    index: Expr::u32(8),
                },
                src: frag(3, vec![Expr::u32(0)]),
                stride: Expr::u32(16),
            }),
        ];
        let mut k = kernel(body);
        k.block = Some([Expr::u32(32), Expr::u32(1), Expr::u32(1)]);
        k.requires = vec![Requirement {
            cond: bin(BinaryOp::Ge, param(U32, 5), Expr::u32(1)),
            text: "n >= 1u32".into(),
        }];
        k.locals = vec![
            decl("n", U32, Space::Register, &[], false),
            decl("i", U32, Space::Register, &[], true),
            decl("i", U32, Space::Register, &[], false),
            decl("acc", F32, Space::Register, &[2, 8], true),
            decl("frag", U32, Space::Register, &[4], true),
            decl("tile", U32, Space::Shared, &[64], true),
        ];
        let expected = "\
kernel k<const K: u32>(a: i32, b: i32, c: i32, p: bool, q: bool, n: u32, y: &mut [f32])
  block(32, 1, 1)
  requires(n >= 1)  // n >= 1u32
  local n#0: u32
  local mut i#1: u32
  local i#2: u32
  local mut acc: [[f32; 8]; 2]
  local mut frag: [u32; 4]
  local shared mut tile: [u32; 64]
{
  let n#0 = n
  let i#1 = grid_dim().z + lane_id()
  let acc = [[0.0f32; 8]; 2]
  let frag
  let tile
  if i#1 == 0 {
    return
  } else if p {
    sync_threads()
  } else {
    atomic_compare_exchange(&mut tile[i#1], 1, 2)
  }
  for i#2 in (0..y.len()).step_by(K) {
    cp_async(&mut tile[i#2], &y[i#2], 16, 16)
    cp_async_commit()
    continue
  }
  cp_async_wait(0)
  while true {
    i#1 = select(q, i#1, min(i#1, 3))
    break
  }
  #[unroll] for i#2 in 0..2 {
    ldmatrix_x4_trans(&mut frag, &tile[0])
    mma_m16n8k8_tf32(&mut acc[i#2], &frag, &frag)
    mma_sp_ordered_m16n8k32_bf16(&mut acc[1], &frag, &frag, i#1, i#2)
  }
  wmma_load_b_col(&mut frag, &y[0], n)
  wmma_mma_row_col(&mut acc[0], &frag, &frag)
  wmma_store_row(&mut y[8], &acc[0], 16)
}
";
        assert_eq!(print_kernel(&k), expected);
    }
}

#[cfg(all(test, feature = "front"))]
mod front_tests {
    use super::{print_def, print_kernel};
    use crate::front::parse_kernel_str;
    use crate::specialize::specialize;

    #[test]
    fn saxpy_prints_as_the_module_doc_shows() {
        let def = parse_kernel_str(
            "",
            "fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
                let i = block_idx().x * block_dim().x + thread_idx().x;
                if i < x.len() { y[i] = a * x[i] + y[i]; }
            }",
        )
        .unwrap();
        let expected = "\
kernel saxpy(a: f32, x: &[f32], y: &mut [f32])
  arch(sm_70, sm_80, sm_90, wgsl)
  local i: u32
{
  let i = block_idx().x * block_dim().x + thread_idx().x
  if i < x.len() {
    y[i] = a * x[i] + y[i]
  }
}
";
        assert_eq!(print_def(&def), expected);
        assert_eq!(def.to_string(), expected);
        // Without the definition's lines, the kernel alone.
        assert_eq!(
            print_kernel(&def.ir),
            expected.replace("  arch(sm_70, sm_80, sm_90, wgsl)\n", "")
        );
    }

    #[test]
    fn a_family_prints_its_tune_space_and_a_variant_its_folded_body() {
        let def = parse_kernel_str(
            "arch(sm_80), block(B), tune(B = [64, 128], F = [true, false]), constrain(B <= 64), \
             requires(x.len() >= 4u32 * n)",
            "fn k<const B: u32, const F: bool>(x: &mut [f32], n: u32) {
                let mut tile: [f32; B] = shared();
                let i = thread_idx().x;
                if i >= n {
                    return;
                } else if F {
                    x[i] = -1.5;
                } else {
                    let i = i + B;
                    x[i] += tile[i % B];
                }
            }",
        )
        .unwrap();
        let expected = "\
kernel k<const B: u32, const F: bool>(x: &mut [f32], n: u32)
  arch(sm_80)
  tune(B = [64, 128], F = [true, false])
  constrain(B <= 64)
  block(B, 1, 1)
  requires(x.len() >= 4 * n)  // x.len() >= 4u32 * n
  local shared mut tile: [f32; B]
  local i#1: u32
  local i#2: u32
{
  let tile
  let i#1 = thread_idx().x
  if i#1 >= n {
    return
  } else if F {
    x[i#1] = -1.5f32
  } else {
    let i#2 = i#1 + B
    x[i#2] = x[i#2] + tile[i#2 % B]
  }
}
";
        assert_eq!(print_def(&def), expected);
        let consts = &def.variants()[0];
        let variant = specialize(&def.ir, consts).unwrap();
        // B = 64, F = true: the dims and block are literals, `else if F` is gone.
        let expected = "\
kernel k<const B: u32, const F: bool>(x: &mut [f32], n: u32)
  block(64, 1, 1)
  requires(x.len() >= 4 * n)  // x.len() >= 4u32 * n
  local shared mut tile: [f32; 64]
  local i#1: u32
  local i#2: u32
{
  let tile
  let i#1 = thread_idx().x
  if i#1 >= n {
    return
  } else {
    x[i#1] = -1.5f32
  }
}
";
        assert_eq!(print_kernel(&variant), expected);
        assert_eq!(variant.to_string(), expected);
    }
}
