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
//!   packing functions and asynchronous copies (`cp_async*`).

use crate::back::wgsl::support::{atomic_type, storage_type, value_type};
use crate::ir::{
    Block, Expr, ExprKind, Intrinsic, Kernel, ParamType, Place, Scalar, Space, Stmt,
    PROXY_FENCE_FUNCTION,
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
    Checker { kernel }.block(&kernel.body)
}

struct Checker<'k> {
    kernel: &'k Kernel,
}

impl Checker<'_> {
    fn block(&self, block: &Block) -> Result<(), Error> {
        block.iter().try_for_each(|stmt| self.stmt(stmt))
    }

    fn stmt(&self, stmt: &Stmt) -> Result<(), Error> {
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
                self.block(then_body)?;
                self.block(else_body)
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
                self.block(body)
            }
            Stmt::While { cond, body } => {
                self.expr(cond)?;
                self.block(body)
            }
            Stmt::Expr(e) => self.expr(e),
            Stmt::Break | Stmt::Continue | Stmt::Return | Stmt::Barrier => Ok(()),
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
            ExprKind::Literal(_)
            | ExprKind::Param(_)
            | ExprKind::Const(_)
            | ExprKind::Len(_)
            | ExprKind::Special(_) => Ok(()),
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
