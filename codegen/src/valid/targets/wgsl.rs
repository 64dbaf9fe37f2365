//! What WGSL can express, checked on the IR before anything is emitted,
//! with the type rules of the WGSL backend (`back/wgsl/support.rs`). The
//! check depends only on types and constructs, never on const values, so the
//! front runs it on the unspecialized IR of a kernel that targets `wgsl`,
//! and the backend again on each variant it emits.
//!
//! Not in WGSL (each an error naming the construct):
//! - the types f64, i64, u64 and bf16, anywhere;
//! - slices of bool, i8 and u8 (WGSL storage has no 8-bit elements; bool,
//!   i8 and u8 values are fine and live in 32 bits);
//! - atomics on anything but i32 and u32;
//! - Tensor Core fragments and their operations, `ldmatrix`, the operand
//!   packing functions and asynchronous copies (`cp_async*`);
//! - `fence_gpu`: WGSL's barriers order memory within a workgroup only,
//!   and it has no fence at device scope.
//!
//! Past naga's limits (each an error that says the limit):
//! - an array over `MAX_TYPE_SIZE` bytes: checked where its size is known,
//!   on a specialized kernel or for the const values of a variant
//!   ([`check_array_sizes`], which the front runs for every variant);
//! - bodies nested past `MAX_BRACE_NESTING` (device functions' bodies nest
//!   where they are called), and expressions nested past naga's parser
//!   depth. Specialization only removes levels (constant `if`s, unrolled
//!   loops), so the family's nesting bounds every variant's.

use crate::back::wgsl::support::{
    atomic_type, storage_type, value_size, value_type, MAX_BRACE_NESTING, MAX_PARSE_DEPTH,
    MAX_TYPE_SIZE, PARSE_DEPTH_PER_EXPR,
};
use crate::eval;
use crate::ir::{
    Block, Expr, ExprKind, Intrinsic, Kernel, Literal, ParamType, Place, Scalar, Space, Special,
    Stmt, GPU_FENCE_FUNCTION, PROXY_FENCE_FUNCTION,
};
use crate::valid::{atomic_name, intrinsic_name};
use crate::Error;

/// The error for a construct WGSL cannot express, with what to do.
fn unsupported(kernel: &Kernel, construct: impl std::fmt::Display) -> Error {
    Error::new(format!(
        "kernel `{}`: WGSL cannot express {construct}: build the kernel for PTX only, \
         `#[kernel(arch(sm_70, sm_80, sm_90))]`",
        kernel.name
    ))
}

/// Checks that WGSL can express every type and construct of `kernel`
/// (specialized or not): its parameters, variables and body.
pub(super) fn check(kernel: &Kernel) -> Result<(), Error> {
    if kernel.cluster.is_some() {
        return Err(unsupported(kernel, "`cluster(..)` (thread block clusters)"));
    }
    for param in &kernel.params {
        if param.tensor_map.is_some() {
            return Err(unsupported(
                kernel,
                format!("the tensor map of parameter `{}` (TMA)", param.name),
            ));
        }
        match param.ty {
            ParamType::Scalar(ty) if value_type(ty).is_none() => {
                return Err(unsupported(
                    kernel,
                    format!("parameter `{}` of type {}", param.name, ty.name()),
                ))
            }
            ParamType::Slice { elem, mutable } if storage_type(elem).is_none() => {
                let slice = format!(
                    "parameter `{}: &{}[{}]`",
                    param.name,
                    if mutable { "mut " } else { "" },
                    elem.name()
                );
                let construct = if value_type(elem).is_some() {
                    format!("{slice} (WGSL storage has no 8-bit elements)")
                } else {
                    slice
                };
                return Err(unsupported(kernel, construct));
            }
            _ => {}
        }
    }
    for local in &kernel.locals {
        if value_type(local.ty).is_none() {
            let what = match local.space {
                Space::Register => "variable",
                Space::Shared => "shared array",
            };
            return Err(unsupported(
                kernel,
                format!("{what} `{}` of type {}", local.name, local.ty.name()),
            ));
        }
    }
    check_array_sizes(kernel, &[])?;
    Checker { kernel, bodies: 1 }.block(&kernel.body)
}

/// Checks that every array of `kernel` whose size `consts` (a variant's
/// const values, or none) decide fits naga's largest type.
pub(super) fn check_array_sizes(kernel: &Kernel, consts: &[i64]) -> Result<(), Error> {
    for local in kernel.locals.iter().filter(|l| !l.dims.is_empty()) {
        let Some(size) = value_size(local.ty) else {
            continue;
        };
        let dims: Option<Vec<u128>> = local
            .dims
            .iter()
            .map(|d| match eval::eval(d, consts, &[]) {
                Ok(Literal::Int(v)) => u128::try_from(v).ok(),
                _ => None,
            })
            .collect();
        let Some(dims) = dims else {
            continue;
        };
        let bytes = dims
            .iter()
            .try_fold(u128::from(size), |bytes, &d| bytes.checked_mul(d));
        if bytes.is_none_or(|b| b > u128::from(MAX_TYPE_SIZE)) {
            let what = match local.space {
                Space::Register => "register array",
                Space::Shared => "shared array",
            };
            let ty = dims
                .iter()
                .rev()
                .fold(local.ty.name().to_string(), |t, d| format!("[{t}; {d}]"));
            let bytes = bytes.map_or("more than 2^128".to_string(), |b| b.to_string());
            return Err(Error::new(format!(
                "kernel `{}`: the {what} `{}` ({ty}) takes {bytes} bytes, and WGSL (naga) \
                 takes arrays of at most {MAX_TYPE_SIZE} bytes: make it smaller, or build the \
                 kernel for PTX only, `#[kernel(arch(sm_70, sm_80, sm_90))]`",
                kernel.name, local.name,
            )));
        }
    }
    Ok(())
}

/// The walk over the body, with the braces its place is inside (`main`'s
/// included).
struct Checker<'k> {
    kernel: &'k Kernel,
    bodies: usize,
}

impl Checker<'_> {
    fn block(&self, block: &Block) -> Result<(), Error> {
        block.iter().try_for_each(|stmt| self.stmt(stmt))
    }

    /// The walk of a body one brace deeper, which WGSL must allow.
    fn nested(&self, body: &Block) -> Result<(), Error> {
        if self.bodies == MAX_BRACE_NESTING {
            return Err(Error::new(format!(
                "kernel `{}`: its `if`, `for` and `while` bodies nest more than {} deep (WGSL \
                 allows {MAX_BRACE_NESTING} nested bodies in a function, `main`'s included; a \
                 device function's bodies nest inside its caller's): flatten the control flow \
                 (combine conditions with `&&`, leave loops early with `continue`), or build the \
                 kernel for PTX only, `#[kernel(arch(sm_70, sm_80, sm_90))]`",
                self.kernel.name,
                MAX_BRACE_NESTING - 1
            )));
        }
        Checker {
            kernel: self.kernel,
            bodies: self.bodies + 1,
        }
        .block(body)
    }

    /// Checks that `e`, in a statement of this body, nests no deeper than
    /// naga parses: the statements around it, the statement's own level (a
    /// `for` header's or an assignment's place), its expression, and
    /// [`PARSE_DEPTH_PER_EXPR`] per level of `e`.
    fn parse_depth(&self, e: &Expr) -> Result<(), Error> {
        let levels = expr_levels(e);
        let depth = self.bodies + 2 + PARSE_DEPTH_PER_EXPR * levels;
        if depth > MAX_PARSE_DEPTH {
            return Err(Error::new(format!(
                "kernel `{}`: an expression {levels} operations deep, inside {} nested bodies, \
                 nests deeper than naga parses WGSL ({MAX_PARSE_DEPTH} levels, where each \
                 operation can take {PARSE_DEPTH_PER_EXPR} and each body 1): bind parts of the \
                 expression to `let`s, or build the kernel for PTX only, \
                 `#[kernel(arch(sm_70, sm_80, sm_90))]`",
                self.kernel.name,
                self.bodies - 1
            )));
        }
        Ok(())
    }

    fn stmt(&self, stmt: &Stmt) -> Result<(), Error> {
        stmt_exprs(stmt).try_for_each(|e| self.parse_depth(e))?;
        match stmt {
            Stmt::Let { init, .. } => init.iter().try_for_each(|e| self.expr(e)),
            Stmt::Assign { place, value } => {
                self.place(place)?;
                self.expr(value)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expr(cond)?;
                self.nested(then_body)?;
                match else_body.as_slice() {
                    // The emitter writes an `else if` chain flat.
                    [Stmt::If { .. }] => self.block(else_body),
                    _ => self.nested(else_body),
                }
            }
            Stmt::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                [start, end, step]
                    .into_iter()
                    .try_for_each(|e| self.expr(e))?;
                self.nested(body)
            }
            Stmt::While { cond, body } => {
                self.expr(cond)?;
                self.nested(body)
            }
            Stmt::Expr(e) => self.expr(e),
            Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier => Ok(()),
            Stmt::GpuFence => Err(unsupported(
                self.kernel,
                format!("`{GPU_FENCE_FUNCTION}` (a fence at GPU scope)"),
            )),
            Stmt::Matrix(op) => Err(unsupported(
                self.kernel,
                format!(
                    "`{}` (Tensor Core and warp matrix operations)",
                    op.function()
                ),
            )),
            Stmt::AsyncCopy { .. } | Stmt::AsyncCommit | Stmt::AsyncWait { .. } => {
                Err(unsupported(
                    self.kernel,
                    "`cp_async` (asynchronous copies to shared memory)",
                ))
            }
            Stmt::Mbarrier(op) => Err(unsupported(
                self.kernel,
                format!("`{}` (mbarriers)", op.function()),
            )),
            Stmt::ProxyFence => Err(unsupported(
                self.kernel,
                format!("`{PROXY_FENCE_FUNCTION}` (the async proxy)"),
            )),
            Stmt::Warpgroup(op) => Err(unsupported(
                self.kernel,
                format!("`{}` (warpgroup matrix operations)", op.function()),
            )),
            Stmt::Tma(_) => Err(unsupported(self.kernel, "`tma_*` (TMA bulk tensor copies)")),
            Stmt::ClusterBarrier => Err(unsupported(
                self.kernel,
                "`cluster_sync` (thread block clusters)",
            )),
            Stmt::SetMaxRegisters { .. } => Err(unsupported(
                self.kernel,
                "`setmaxnreg_*` (warpgroup register reallocation)",
            )),
        }
    }

    fn place(&self, place: &Place) -> Result<(), Error> {
        match place {
            Place::Local { indices, .. } => indices.iter().try_for_each(|e| self.expr(e)),
            Place::Global { index, .. } => self.expr(index),
        }
    }

    fn place_type(&self, place: &Place) -> Scalar {
        match place {
            Place::Local { local, .. } => self.kernel.local(*local).ty,
            Place::Global { param, .. } => match self.kernel.param(*param).ty {
                ParamType::Slice { elem, .. } | ParamType::Scalar(elem) => elem,
            },
        }
    }

    /// Operands first, so the construct named is where an unsupported type
    /// starts (the cast to f64, not the sum it feeds).
    fn expr(&self, e: &Expr) -> Result<(), Error> {
        match &e.kind {
            ExprKind::Load(place) => self.place(place),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.expr(a),
            ExprKind::Binary(_, a, b) => {
                self.expr(a)?;
                self.expr(b)
            }
            ExprKind::Select(c, a, b) => [c, a, b].into_iter().try_for_each(|e| self.expr(e)),
            ExprKind::Call(
                f @ (Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 | Intrinsic::ToTf32),
                _,
            ) => Err(unsupported(
                self.kernel,
                format!("`{}` (a Tensor Core operand word)", intrinsic_name(*f)),
            )),
            ExprKind::Call(_, args) => args.iter().try_for_each(|a| self.expr(a)),
            ExprKind::Atomic {
                op,
                place,
                value,
                compare,
            } => {
                let ty = self.place_type(place);
                if !atomic_type(ty) {
                    return Err(unsupported(
                        self.kernel,
                        format!(
                            "`{}` on {} (WGSL atomics are on i32 and u32 only)",
                            atomic_name(*op),
                            ty.name()
                        ),
                    ));
                }
                self.place(place)?;
                self.expr(value)?;
                compare.iter().try_for_each(|c| self.expr(c))
            }
            ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::Const(_) | ExprKind::Len(_) => {
                Ok(())
            }
            ExprKind::Special(Special::ClusterRank) => Err(unsupported(
                self.kernel,
                "`cluster_rank` (thread block clusters)",
            )),
            ExprKind::Special(_) => Ok(()),
        }?;
        if value_type(e.ty).is_none() {
            let construct = match e.kind {
                ExprKind::Cast(_) => format!("a cast to {}", e.ty.name()),
                _ => format!("a value of type {}", e.ty.name()),
            };
            return Err(unsupported(self.kernel, construct));
        }
        Ok(())
    }
}

/// The expressions a statement writes itself (not those of its bodies).
fn stmt_exprs(stmt: &Stmt) -> impl Iterator<Item = &Expr> {
    let exprs: Vec<&Expr> = match stmt {
        Stmt::Let { init, .. } => init.iter().collect(),
        Stmt::Assign { place, value } => {
            let mut exprs = place.indices();
            exprs.push(value);
            exprs
        }
        Stmt::If { cond, .. } | Stmt::While { cond, .. } => vec![cond],
        Stmt::For {
            start, end, step, ..
        } => vec![start, end, step],
        Stmt::Expr(e) => vec![e],
        _ => Vec::new(),
    };
    exprs.into_iter()
}

/// The levels of `e`: 1 for a leaf, and 1 more than its deepest operand
/// (a place's indices are operands of its load).
fn expr_levels(e: &Expr) -> usize {
    1 + e.operands().into_iter().map(expr_levels).max().unwrap_or(0)
}
