//! The IR validator: the invariants a specialized kernel must hold before a
//! backend sees it. Backends rely on them and do not re-check.
//!
//! Every message starts with the kernel and where the problem is: a statement
//! path such as "statement 2 of the body of `for k`, in statement 4 of the
//! kernel body" (statements counted from 1), or the local, parameter,
//! `block(..)` dimension or requirement concerned.
//!
//! Indices are integers of any type; indices into register arrays are
//! literals within bounds.
//!
//! [`targets`] checks what each target can express (PTX archs, WGSL), on a
//! kernel family before specialization or on one variant.

use crate::eval;
use crate::ir::{
    visit_stmts, AtomicOp, BinaryOp, Expr, ExprKind, Intrinsic, Kernel, Literal, LocalId,
    ParamType, Place, Scalar, Space, Stmt, UnaryOp,
};
use crate::specialize::{STACK_RED_ZONE, STACK_SEGMENT};
use crate::Error;

/// The most blocks a cluster may have without the non-portable size
/// attribute (which warpforge does not set).
pub const MAX_CLUSTER_BLOCKS: u64 = 8;

/// The most blocks, and threads, an SM holds at once (compute capability
/// 7.0 to 9.0).
const MAX_SM_BLOCKS: u64 = 32;
const MAX_SM_THREADS: u64 = 2048;
/// The 32-bit registers of an SM, which its resident blocks share
/// (compute capability 7.0 to 9.0).
const SM_REGISTERS: u64 = 64 * 1024;

/// Checks every invariant of a specialized kernel.
pub fn validate(kernel: &Kernel) -> Result<(), Error> {
    let mut v = Validator {
        kernel,
        path: Vec::new(),
        site: String::new(),
        in_scope: vec![false; kernel.locals.len()],
        loop_depth: 0,
        threads: None,
    };
    v.declarations()?;
    v.path.push(Frame {
        block: "the kernel body".into(),
        index: 0,
    });
    v.block(&kernel.body)
}

/// One level of the statement path: statement `index` of `block`.
struct Frame {
    block: String,
    index: usize,
}

struct Validator<'a> {
    kernel: &'a Kernel,
    /// Where the statement being checked is, outermost first.
    path: Vec<Frame>,
    /// Where a check outside the body is (a local, a block dim, a requirement).
    site: String,
    in_scope: Vec<bool>,
    loop_depth: u32,
    /// The threads of a block, when the kernel declares `block(..)`.
    threads: Option<u64>,
}

/// The bound ptxas puts on `setmaxnreg_dec`, and where it comes from.
struct RegisterCeiling {
    registers: u64,
    /// Why the bound is what it is, for the error message.
    reason: String,
}

fn float_or_signed(ty: Scalar) -> bool {
    ty.is_float() || (ty.is_int() && ty.is_signed())
}

fn numeric(ty: Scalar) -> bool {
    ty.is_float() || ty.is_int()
}

/// The DSL name of an intrinsic.
pub fn intrinsic_name(f: Intrinsic) -> &'static str {
    match f {
        Intrinsic::Sqrt => "sqrt",
        Intrinsic::Rsqrt => "rsqrt",
        Intrinsic::Exp => "exp",
        Intrinsic::Exp2 => "exp2",
        Intrinsic::Ln => "ln",
        Intrinsic::Log2 => "log2",
        Intrinsic::Sin => "sin",
        Intrinsic::Cos => "cos",
        Intrinsic::Tanh => "tanh",
        Intrinsic::Floor => "floor",
        Intrinsic::Ceil => "ceil",
        Intrinsic::Round => "round",
        Intrinsic::Abs => "abs",
        Intrinsic::Min => "min",
        Intrinsic::Max => "max",
        Intrinsic::MulAdd => "mul_add",
        Intrinsic::ShflXor => "shfl_xor",
        Intrinsic::ShflDown => "shfl_down",
        Intrinsic::PackF16x2 => "pack_f16x2",
        Intrinsic::PackBf16x2 => "pack_bf16x2",
        Intrinsic::ToTf32 => "to_tf32",
        Intrinsic::FromBits => "f32::from_bits",
        Intrinsic::ToBits => "to_bits",
    }
}

/// The DSL name of an atomic operation.
pub fn atomic_name(op: AtomicOp) -> &'static str {
    match op {
        AtomicOp::Add => "atomic_add",
        AtomicOp::Min => "atomic_min",
        AtomicOp::Max => "atomic_max",
        AtomicOp::And => "atomic_and",
        AtomicOp::Or => "atomic_or",
        AtomicOp::Xor => "atomic_xor",
        AtomicOp::Exchange => "atomic_exchange",
        AtomicOp::CompareExchange => "atomic_compare_exchange",
    }
}

/// The element types an atomic operation accepts on any target (a backend
/// may still refuse one on an older architecture).
fn atomic_types(op: AtomicOp) -> &'static [Scalar] {
    use Scalar::*;
    match op {
        AtomicOp::Add => &[I32, U32, I64, U64, F16, Bf16, F32, F64],
        AtomicOp::Min | AtomicOp::Max | AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
            &[I32, U32, I64, U64]
        }
        AtomicOp::Exchange => &[I32, U32, I64, U64, F32, F64],
        AtomicOp::CompareExchange => &[I32, U32, I64, U64, F16, Bf16, F32, F64],
    }
}

fn type_list(types: &[Scalar]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Validator<'_> {
    fn error(&self, message: impl std::fmt::Display) -> Error {
        let mut at = String::new();
        if self.path.is_empty() {
            at.push_str(&self.site);
        } else {
            for (i, frame) in self.path.iter().rev().enumerate() {
                if i > 0 {
                    at.push_str(", in ");
                }
                at.push_str(&format!("statement {} of {}", frame.index + 1, frame.block));
            }
        }
        Error::new(format!("kernel `{}`, {at}: {message}", self.kernel.name))
    }

    fn local_name(&self, id: LocalId) -> &str {
        &self.kernel.locals[id as usize].name
    }

    fn check_local_id(&self, id: LocalId) -> Result<(), Error> {
        if (id as usize) < self.kernel.locals.len() {
            Ok(())
        } else {
            Err(self.error(format!(
                "local #{id} does not exist (the kernel has {} locals)",
                self.kernel.locals.len()
            )))
        }
    }

    fn check_param_id(&self, id: u32) -> Result<(), Error> {
        if (id as usize) < self.kernel.params.len() {
            Ok(())
        } else {
            Err(self.error(format!(
                "parameter #{id} does not exist (the kernel has {} parameters)",
                self.kernel.params.len()
            )))
        }
    }

    /// Locals, `block(..)` and `requires(..)`.
    fn declarations(&mut self) -> Result<(), Error> {
        for local in &self.kernel.locals {
            self.site = format!("local `{}`", local.name);
            if local.space == Space::Shared && local.dims.is_empty() {
                return Err(self.error("a shared local must be an array"));
            }
            let mut elements: u64 = 1;
            for (axis, dim) in local.dims.iter().enumerate() {
                self.expr(dim)?;
                match dim.as_int() {
                    Some(n) if n > 0 && dim.ty.is_int() => elements = elements.saturating_mul(n as u64),
                    Some(n) => return Err(self.error(format!("dimension {axis} is {n}: array dimensions must be positive"))),
                    None => {
                        return Err(self.error(format!(
                            "dimension {axis} is not a literal: specialize the kernel before validating it"
                        )))
                    }
                }
            }
            if elements > u32::MAX as u64 {
                return Err(self.error(format!(
                    "the array has {elements} elements, more than a u32 can index"
                )));
            }
        }
        let threads = match &self.kernel.block {
            Some(block) => Some(self.shape(block, "block")?),
            None => None,
        };
        if let Some(threads) = threads.filter(|&t| t > 1024) {
            self.site = "`block(..)`".into();
            return Err(self.error(format!(
                "{threads} threads per block is more than the 1024 CUDA allows"
            )));
        }
        if let Some(cluster) = &self.kernel.cluster {
            let blocks = self.shape(cluster, "cluster")?;
            if blocks > MAX_CLUSTER_BLOCKS {
                self.site = "`cluster(..)`".into();
                return Err(self.error(format!(
                    "{blocks} blocks per cluster is more than the {MAX_CLUSTER_BLOCKS} of a portable cluster"
                )));
            }
        }
        if let Some(n) = &self.kernel.min_blocks_per_sm {
            self.min_blocks_per_sm(n, threads)?;
        }
        self.threads = threads;
        for req in &self.kernel.requires {
            self.site = format!("requirement `{}`", req.text);
            self.host_expr(&req.cond)?;
            self.expr(&req.cond)?;
            if req.cond.ty != Scalar::Bool {
                return Err(self.error(format!(
                    "the condition is a {}, not a bool",
                    req.cond.ty.name()
                )));
            }
        }
        Ok(())
    }

    /// The product of a `block(..)` or `cluster(..)` shape, each dimension a
    /// positive `u32` literal.
    fn shape(&mut self, dims: &[Expr; 3], option: &str) -> Result<u64, Error> {
        let mut product: u64 = 1;
        for (axis, dim) in dims.iter().enumerate() {
            self.site = format!("`{option}(..)` dimension {axis}");
            self.expr(dim)?;
            match dim.as_int() {
                Some(n) if n > 0 && dim.ty == Scalar::U32 => product *= n as u64,
                Some(n) if dim.ty == Scalar::U32 => {
                    return Err(self.error(format!("is {n}: it must be positive")))
                }
                _ => return Err(self.error("must be a u32 literal after specialization")),
            }
        }
        Ok(product)
    }

    /// `min_blocks_per_sm(n)`: n blocks of the declared shape (`threads`
    /// each, `None` without `block(..)`) fit on an SM.
    fn min_blocks_per_sm(&mut self, n: &Expr, threads: Option<u64>) -> Result<(), Error> {
        self.site = "`min_blocks_per_sm(..)`".into();
        self.expr(n)?;
        let blocks = match n.as_int() {
            Some(v) if n.ty == Scalar::U32 => v as u64,
            _ => return Err(self.error("must be a u32 literal after specialization")),
        };
        if !(1..=MAX_SM_BLOCKS).contains(&blocks) {
            return Err(self.error(format!(
                "is {blocks}: an SM holds 1 to {MAX_SM_BLOCKS} blocks at once"
            )));
        }
        let Some(threads) = threads else {
            return Err(self.error(
                "ptxas bounds the registers only of a kernel whose block shape it knows: declare `block(..)` too",
            ));
        };
        if blocks * threads > MAX_SM_THREADS {
            return Err(self.error(format!(
                "{blocks} blocks of {threads} threads are more than the {MAX_SM_THREADS} threads an SM holds: ask for at most {}",
                MAX_SM_THREADS / threads
            )));
        }
        Ok(())
    }

    /// The most registers a thread of the kernel can hold, which ptxas
    /// requires of every `setmaxnreg.dec` count (as ptxas 12.9 counts it:
    /// codegen/tests/ptxas.rs checks it): the largest `setmaxnreg_inc`
    /// count, or without one, the registers a thread starts with: the SM's
    /// 65,536 are four quarters, each holding a quarter of the warps of
    /// `min_blocks_per_sm` blocks (rounded up), in steps of 8 registers per
    /// thread, at most 256.
    fn register_ceiling(&self, threads: u64) -> RegisterCeiling {
        let mut grown = None;
        visit_stmts(&self.kernel.body, &mut |stmt| {
            if let Stmt::SetMaxRegisters { grow: true, count } = stmt {
                grown = grown.max(count.as_int());
            }
        });
        if let Some(registers) = grown {
            return RegisterCeiling {
                registers: registers as u64,
                reason: "the largest `setmaxnreg_inc` of the kernel".into(),
            };
        }
        let blocks = self
            .kernel
            .min_blocks_per_sm
            .as_ref()
            .and_then(Expr::as_int)
            .unwrap_or(1) as u64;
        let quarter_warps = (blocks * threads.div_ceil(32)).div_ceil(4);
        RegisterCeiling {
            registers: (SM_REGISTERS / 4 / (quarter_warps * 32) / 8 * 8).min(256),
            reason: format!(
                "the registers a thread starts with, when {blocks} block(s) of {threads} threads share an SM's {SM_REGISTERS}"
            ),
        }
    }

    /// The blocks of the kernel's declared cluster, when it declares one
    /// with constant dimensions.
    fn cluster_blocks(&self) -> Option<u64> {
        self.kernel.cluster.as_ref().and_then(|dims| {
            dims.iter()
                .try_fold(1u64, |n, d| Some(n * u64::try_from(d.as_int()?).ok()?))
        })
    }

    /// A host-side expression reads only literals, scalar params and lengths.
    fn host_expr(&self, e: &Expr) -> Result<(), Error> {
        let what = match &e.kind {
            ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::Len(_) | ExprKind::Const(_) => {
                return Ok(())
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => return self.host_expr(a),
            ExprKind::Binary(_, a, b) => return self.host_expr(a).and_then(|_| self.host_expr(b)),
            ExprKind::Select(c, a, b) => {
                return self
                    .host_expr(c)
                    .and_then(|_| self.host_expr(a))
                    .and_then(|_| self.host_expr(b))
            }
            ExprKind::Load(_) => "a read of a variable or memory",
            ExprKind::Special(_) => "a thread/block index",
            ExprKind::Call(..) => "an intrinsic call",
            ExprKind::Atomic { .. } => "an atomic",
        };
        Err(self.error(format!(
            "{what} cannot be checked on the host: use scalar params, `.len()` of slices and const params"
        )))
    }

    fn block(&mut self, block: &[Stmt]) -> Result<(), Error> {
        let scope = self.in_scope.clone();
        for (index, stmt) in block.iter().enumerate() {
            self.path
                .last_mut()
                .expect("a frame is pushed before every block")
                .index = index;
            self.stmt(stmt)?;
        }
        self.in_scope = scope;
        Ok(())
    }

    fn nested(&mut self, name: String, block: &[Stmt]) -> Result<(), Error> {
        self.path.push(Frame {
            block: name,
            index: 0,
        });
        self.block(block)?;
        self.path.pop();
        Ok(())
    }

    fn condition(&mut self, cond: &Expr, what: &str) -> Result<(), Error> {
        self.expr(cond)?;
        if cond.ty != Scalar::Bool {
            return Err(self.error(format!(
                "the condition of `{what}` is a {}, not a bool",
                cond.ty.name()
            )));
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<(), Error> {
        match stmt {
            Stmt::Let { local, init } => {
                self.check_local_id(*local)?;
                let decl = &self.kernel.locals[*local as usize];
                if let Some(init) = init {
                    if decl.space == Space::Shared {
                        return Err(self.error(format!(
                            "shared array `{}` has an initializer: shared memory starts uninitialized, write it with assignments",
                            decl.name
                        )));
                    }
                    self.expr(init)?;
                    if init.ty != decl.ty {
                        return Err(self.error(format!(
                            "`let {}` of type {} is initialized with a {}",
                            decl.name,
                            decl.ty.name(),
                            init.ty.name()
                        )));
                    }
                }
                self.in_scope[*local as usize] = true;
            }
            Stmt::Assign { place, value } => {
                let elem = self.place(place, true)?;
                self.expr(value)?;
                if value.ty != elem {
                    return Err(self.error(format!(
                        "assigns a {} to {}, which holds {}",
                        value.ty.name(),
                        self.place_text(place),
                        elem.name()
                    )));
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.condition(cond, "if")?;
                self.nested("the then-branch of `if`".into(), then_body)?;
                self.nested("the else-branch of `if`".into(), else_body)?;
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                unroll,
                body,
            } => {
                self.check_local_id(*var)?;
                let decl = &self.kernel.locals[*var as usize];
                let name = decl.name.clone();
                if *unroll {
                    return Err(self.error(format!(
                        "`#[unroll] for {name}` is still a loop: specialize the kernel before validating it"
                    )));
                }
                if !decl.ty.is_int() || !decl.dims.is_empty() || decl.space != Space::Register {
                    return Err(self.error(format!(
                        "the variable of `for {name}` must be a scalar integer"
                    )));
                }
                for (what, e) in [("start", start), ("end", end), ("step", step)] {
                    self.expr(e)?;
                    if e.ty != decl.ty {
                        return Err(self.error(format!(
                            "the {what} of `for {name}` is a {}, but `{name}` is a {}",
                            e.ty.name(),
                            decl.ty.name()
                        )));
                    }
                }
                if let Some(s) = step.as_int() {
                    if s <= 0 && decl.ty != Scalar::U64 {
                        return Err(self.error(format!(
                            "`for {name}` has step {s}: the step must be positive"
                        )));
                    }
                }
                let scope = self.in_scope[*var as usize];
                self.in_scope[*var as usize] = true;
                self.loop_depth += 1;
                self.nested(format!("the body of `for {name}`"), body)?;
                self.loop_depth -= 1;
                self.in_scope[*var as usize] = scope;
            }
            Stmt::While { cond, body } => {
                self.condition(cond, "while")?;
                self.loop_depth += 1;
                self.nested("the body of `while`".into(), body)?;
                self.loop_depth -= 1;
            }
            Stmt::Break | Stmt::Continue => {
                if self.loop_depth == 0 {
                    let what = if *stmt == Stmt::Break {
                        "break"
                    } else {
                        "continue"
                    };
                    return Err(self.error(format!("`{what}` outside of a loop")));
                }
            }
            Stmt::Return | Stmt::Barrier | Stmt::GpuFence | Stmt::AsyncCommit => {}
            Stmt::Expr(e) => self.expr(e)?,
            Stmt::Matrix(op) => self.matrix(op)?,
            Stmt::AsyncCopy {
                dst,
                src,
                bytes,
                src_bytes,
            } => self.async_copy(dst, src, *bytes, src_bytes)?,
            Stmt::AsyncWait { pending } => {
                self.expr(pending)?;
                if pending.ty != Scalar::U32 || pending.as_int().is_none() {
                    return Err(self.error(
                        "the count of `cp_async_wait` must be a `u32` compile-time constant",
                    ));
                }
            }
            Stmt::Mbarrier(op) => self.mbarrier(op)?,
            Stmt::ProxyFence | Stmt::ClusterBarrier => {}
            Stmt::Warpgroup(op) => self.warpgroup(op)?,
            Stmt::Tma(op) => self.tma(op)?,
            Stmt::SetMaxRegisters { grow, count } => self.set_max_registers(*grow, count)?,
        }
        Ok(())
    }

    fn place_text(&self, place: &Place) -> String {
        match place {
            Place::Local { local, indices } if indices.is_empty() => {
                format!("`{}`", self.local_name(*local))
            }
            Place::Local { local, .. } => format!("an element of `{}`", self.local_name(*local)),
            Place::Global { param, .. } => format!(
                "an element of `{}`",
                self.kernel.params[*param as usize].name
            ),
        }
    }

    /// Checks a place and returns its element type.
    fn place(&mut self, place: &Place, write: bool) -> Result<Scalar, Error> {
        match place {
            Place::Local { local, indices } => {
                self.check_local_id(*local)?;
                let decl = &self.kernel.locals[*local as usize];
                if !self.in_scope[*local as usize] {
                    return Err(self.error(format!(
                        "`{}` is used before its `let` (or outside its scope)",
                        decl.name
                    )));
                }
                if write && !decl.mutable {
                    return Err(self.error(format!(
                        "`{}` is not mutable: declare it with `let mut`",
                        decl.name
                    )));
                }
                if indices.len() != decl.dims.len() {
                    return Err(self.error(format!(
                        "`{}` has {} dimensions but is indexed with {}",
                        decl.name,
                        decl.dims.len(),
                        indices.len()
                    )));
                }
                for (axis, (index, dim)) in indices.iter().zip(&decl.dims).enumerate() {
                    self.expr(index)?;
                    let len = dim.as_int().unwrap_or(0);
                    match (decl.space, index.as_int()) {
                        (_, Some(_)) if !index.ty.is_int() => {
                            return Err(self.error(format!("index {axis} of `{}` is not an integer", decl.name)))
                        }
                        (_, Some(i)) if i < 0 || i >= len => {
                            return Err(self.error(format!(
                                "index {axis} of `{}` is {i}, out of bounds for dimension {axis} of length {len}",
                                decl.name
                            )))
                        }
                        (Space::Register, None) => {
                            return Err(self.error(format!(
                                "index {axis} of register array `{}` is not a compile-time constant: index register \
                                 arrays only with literals, const params and `#[unroll]` loop variables",
                                decl.name
                            )))
                        }
                        (Space::Shared, None) if !index.ty.is_int() => {
                            return Err(self.error(format!(
                                "index {axis} of shared array `{}` is a {}: indices are integers",
                                decl.name,
                                index.ty.name()
                            )))
                        }
                        _ => {}
                    }
                }
                Ok(decl.ty)
            }
            Place::Global { param, index } => {
                self.check_param_id(*param)?;
                let p = &self.kernel.params[*param as usize];
                let ParamType::Slice { elem, mutable } = p.ty else {
                    return Err(self.error(format!(
                        "`{}` is a scalar parameter and cannot be indexed",
                        p.name
                    )));
                };
                if write && !mutable {
                    return Err(self.error(format!(
                        "`{}` is a `&[{}]` and cannot be written: declare it `&mut [{}]`",
                        p.name,
                        elem.name(),
                        elem.name()
                    )));
                }
                self.expr(index)?;
                if !index.ty.is_int() {
                    return Err(self.error(format!(
                        "the index into `{}` is a {}: indices are integers",
                        p.name,
                        index.ty.name()
                    )));
                }
                // A slice's length is a u32, so its last element is below
                // `u32::MAX` (and naga refuses that constant index in WGSL).
                if let Some(i) = index.as_int() {
                    if !(0..i64::from(u32::MAX)).contains(&i) {
                        return Err(self.error(format!(
                            "the index into `{}` is {i}, out of bounds of every slice: a slice has \
                             fewer than u32::MAX elements",
                            p.name
                        )));
                    }
                }
                Ok(elem)
            }
        }
    }

    /// Checks one expression, on a new stack segment when the thread's is
    /// nearly spent: a chain the fold cannot shorten (`!!..!c` over a
    /// run-time `c`, at the front's nesting limit) takes 4.7 KiB a level
    /// here on an unoptimized build, past a spawned thread's 2 MiB.
    fn expr(&mut self, e: &Expr) -> Result<(), Error> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || self.expr_here(e))
    }

    fn expr_here(&mut self, e: &Expr) -> Result<(), Error> {
        let ty = e.ty;
        match &e.kind {
            ExprKind::Literal(lit) => {
                let ok = match lit {
                    Literal::Bool(_) => ty == Scalar::Bool,
                    Literal::Int(v) => {
                        ty.is_int()
                            && (ty == Scalar::U64 || eval::encode_int(ty, *v as i128).is_ok())
                    }
                    Literal::Float(_) => ty.is_float(),
                };
                if !ok {
                    return Err(
                        self.error(format!("the literal {lit:?} is not a valid {}", ty.name()))
                    );
                }
            }
            ExprKind::Param(id) => {
                self.check_param_id(*id)?;
                let p = &self.kernel.params[*id as usize];
                match p.ty {
                    ParamType::Scalar(t) if t == ty => {}
                    ParamType::Scalar(t) => {
                        return Err(self.error(format!(
                            "`{}` is a {} but is read as a {}",
                            p.name,
                            t.name(),
                            ty.name()
                        )))
                    }
                    ParamType::Slice { .. } => {
                        return Err(self.error(format!(
                            "slice `{}` is read as a value: index it or take its `.len()`",
                            p.name
                        )))
                    }
                }
            }
            ExprKind::Const(id) => {
                let name = self
                    .kernel
                    .const_params
                    .get(*id as usize)
                    .map_or("?", |c| c.name.as_str());
                return Err(self.error(format!(
                    "const param `{name}` is still symbolic: specialize the kernel before validating it"
                )));
            }
            ExprKind::Len(id) => {
                self.check_param_id(*id)?;
                let p = &self.kernel.params[*id as usize];
                if !matches!(p.ty, ParamType::Slice { .. }) {
                    return Err(
                        self.error(format!("`{}.len()`: `{}` is not a slice", p.name, p.name))
                    );
                }
                if ty != Scalar::U32 {
                    return Err(self.error(format!(
                        "`{}.len()` is a u32, not a {}",
                        p.name,
                        ty.name()
                    )));
                }
            }
            ExprKind::Load(place) => {
                let elem = self.place(place, false)?;
                if elem != ty {
                    return Err(self.error(format!(
                        "a read of {} is typed {} but the element type is {}",
                        self.place_text(place),
                        ty.name(),
                        elem.name()
                    )));
                }
            }
            ExprKind::Unary(op, a) => {
                self.expr(a)?;
                let ok = match op {
                    UnaryOp::Neg => float_or_signed(a.ty),
                    UnaryOp::Not => a.ty == Scalar::Bool || a.ty.is_int(),
                };
                let sym = if *op == UnaryOp::Neg { "-" } else { "!" };
                if !ok {
                    return Err(
                        self.error(format!("unary `{sym}` is not defined on {}", a.ty.name()))
                    );
                }
                if a.ty != ty {
                    return Err(self.error(format!(
                        "unary `{sym}` of a {} is typed {}",
                        a.ty.name(),
                        ty.name()
                    )));
                }
            }
            ExprKind::Binary(op, a, b) => {
                self.expr(a)?;
                self.expr(b)?;
                self.binary(*op, a.ty, b.ty, ty)?;
            }
            ExprKind::Cast(a) => {
                self.expr(a)?;
                if ty == Scalar::Bool && a.ty != Scalar::Bool {
                    return Err(self.error(format!(
                        "a {} cannot be cast to bool: compare it with zero instead",
                        a.ty.name()
                    )));
                }
            }
            ExprKind::Select(c, a, b) => {
                self.expr(c)?;
                self.expr(a)?;
                self.expr(b)?;
                if c.ty != Scalar::Bool {
                    return Err(self.error(format!(
                        "the condition of a select is a {}, not a bool",
                        c.ty.name()
                    )));
                }
                if a.ty != ty || b.ty != ty {
                    return Err(self.error(format!(
                        "the branches of a select are {} and {} but the select is typed {}",
                        a.ty.name(),
                        b.ty.name(),
                        ty.name()
                    )));
                }
            }
            ExprKind::Special(_) => {
                if ty != Scalar::U32 {
                    return Err(self.error(format!(
                        "thread and block indices are u32, not {}",
                        ty.name()
                    )));
                }
            }
            ExprKind::Call(f, args) => {
                for a in args {
                    self.expr(a)?;
                }
                self.call(*f, args, ty)?;
            }
            ExprKind::Atomic {
                op,
                place,
                value,
                compare,
            } => {
                let name = atomic_name(*op);
                if let Place::Local { local, .. } = place.as_ref() {
                    self.check_local_id(*local)?;
                    let decl = &self.kernel.locals[*local as usize];
                    if decl.space != Space::Shared {
                        return Err(self.error(format!(
                            "`{name}` on `{}`, a register variable: atomics work on slices and shared arrays only",
                            decl.name
                        )));
                    }
                }
                let elem = self.place(place, true)?;
                self.expr(value)?;
                if !atomic_types(*op).contains(&elem) {
                    return Err(self.error(format!(
                        "`{name}` on {} is not supported: it takes {}",
                        elem.name(),
                        type_list(atomic_types(*op))
                    )));
                }
                if value.ty != elem || ty != elem {
                    return Err(self.error(format!(
                        "`{name}` on {} elements takes and returns {} (found value {}, result {})",
                        elem.name(),
                        elem.name(),
                        value.ty.name(),
                        ty.name()
                    )));
                }
                match (op, compare) {
                    (AtomicOp::CompareExchange, Some(c)) => {
                        self.expr(c)?;
                        if c.ty != elem {
                            return Err(self.error(format!(
                                "`{name}` compares with a {} on {} elements",
                                c.ty.name(),
                                elem.name()
                            )));
                        }
                    }
                    (AtomicOp::CompareExchange, None) => {
                        return Err(self.error(format!("`{name}` needs the value to compare with")))
                    }
                    (_, Some(_)) => {
                        return Err(self.error(format!("`{name}` takes no compare value")))
                    }
                    (_, None) => {}
                }
            }
        }
        Ok(())
    }

    fn binary(&self, op: BinaryOp, a: Scalar, b: Scalar, ty: Scalar) -> Result<(), Error> {
        let sym = eval::binary_op_text(op);
        let (operands_ok, result) = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                (numeric(a) && a == b, a)
            }
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                ((a.is_int() || a == Scalar::Bool) && a == b, a)
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                if a.is_int() && b != Scalar::U32 {
                    return Err(self.error(format!(
                        "the amount of `{sym}` is a {}: shift amounts are u32",
                        b.name()
                    )));
                }
                (a.is_int(), a)
            }
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => (a == b, Scalar::Bool),
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr => {
                (a == Scalar::Bool && b == Scalar::Bool, Scalar::Bool)
            }
        };
        if !operands_ok {
            return Err(self.error(format!(
                "`{sym}` is not defined on operands of types {} and {}{}",
                a.name(),
                b.name(),
                if a != b { ": cast one with `as`" } else { "" }
            )));
        }
        if ty != result {
            return Err(self.error(format!(
                "`{sym}` on {} yields {}, but is typed {}",
                a.name(),
                result.name(),
                ty.name()
            )));
        }
        Ok(())
    }

    fn call(&self, f: Intrinsic, args: &[Expr], ty: Scalar) -> Result<(), Error> {
        let name = intrinsic_name(f);
        let types: Vec<Scalar> = args.iter().map(|a| a.ty).collect();
        let (arity, ok) = match f {
            Intrinsic::Sqrt
            | Intrinsic::Rsqrt
            | Intrinsic::Exp
            | Intrinsic::Exp2
            | Intrinsic::Ln
            | Intrinsic::Log2
            | Intrinsic::Sin
            | Intrinsic::Cos
            | Intrinsic::Tanh
            | Intrinsic::Floor
            | Intrinsic::Ceil
            | Intrinsic::Round => (1, types.iter().all(|t| t.is_float() && *t == ty)),
            Intrinsic::Abs => (1, types.iter().all(|t| float_or_signed(*t) && *t == ty)),
            Intrinsic::Min | Intrinsic::Max => (2, types.iter().all(|t| numeric(*t) && *t == ty)),
            Intrinsic::MulAdd => (3, types.iter().all(|t| t.is_float() && *t == ty)),
            Intrinsic::ShflXor | Intrinsic::ShflDown => (
                2,
                types.len() == 2
                    && matches!(types[0], Scalar::I32 | Scalar::U32 | Scalar::F32)
                    && types[0] == ty
                    && types[1] == Scalar::U32,
            ),
            Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 => (
                2,
                types.iter().all(|t| *t == Scalar::F32) && ty == Scalar::U32,
            ),
            Intrinsic::ToTf32 | Intrinsic::ToBits => {
                (1, types == [Scalar::F32] && ty == Scalar::U32)
            }
            Intrinsic::FromBits => (1, types == [Scalar::U32] && ty == Scalar::F32),
        };
        if args.len() != arity {
            return Err(self.error(format!(
                "`{name}` takes {arity} arguments, found {}",
                args.len()
            )));
        }
        if !ok {
            let expected = match f {
                Intrinsic::Abs => "a float or signed integer, returning the same type",
                Intrinsic::Min | Intrinsic::Max => "two numbers of one type, returning that type",
                Intrinsic::ShflXor | Intrinsic::ShflDown => {
                    "a 32-bit value (i32, u32, f32) and a u32 lane operand"
                }
                Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 => "two f32 halves, returning a u32",
                Intrinsic::ToTf32 | Intrinsic::ToBits => "an f32, returning a u32",
                Intrinsic::FromBits => "a u32, returning an f32",
                _ => "floats of one type, returning that type",
            };
            return Err(self.error(format!(
                "`{name}` takes {expected}; found ({}) -> {}",
                type_list(&types),
                ty.name()
            )));
        }
        Ok(())
    }
}

mod hopper;
pub mod targets;
mod warp;

#[cfg(test)]
mod tests;
