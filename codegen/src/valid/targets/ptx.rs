//! What a kernel family asks of an architecture, checked on its
//! unspecialized IR against the rows of the PTX backend's table
//! (`back/ptx/features.rs`): the front runs this for every PTX target a
//! kernel declares, so using an instruction an arch lacks (an sm_80 `mma`
//! in a kernel built for sm_70) fails the build naming both, instead of
//! failing later when a variant is compiled.
//!
//! Covered: warp matrix operations, the operand conversions without an
//! emulation, and the float remainder (no arch has it). Type-dependent
//! needs (bf16 arithmetic, 16-bit atomics) are reported when a variant is
//! emitted.

use crate::back::ptx::features::{Feature, FeatureUse};
use crate::back::ptx::float_refusal;
use crate::ir::{
    Arch, Block, Expr, ExprKind, Intrinsic, Kernel, MatrixOp, MbarrierOp, Special, Stmt, TmaOp,
    WarpgroupOp,
};
use crate::Error;

/// Checks that `arch` has every instruction `kernel` uses that it cannot emulate.
pub(super) fn check(kernel: &Kernel, arch: Arch) -> Result<(), Error> {
    let mut features = FeatureUse::new(arch);
    let mut need = |feature| {
        features
            .require(feature)
            .map_err(|reason| Error::new(reason.to_string()))
    };
    let mut walk = || {
        if kernel.cluster.is_some() {
            need(Feature::Cluster)?;
        }
        if kernel.params.iter().any(|p| p.tensor_map.is_some()) {
            need(Feature::TensorMap)?;
        }
        block(&kernel.body, &mut need)
    };
    walk().map_err(|e| {
        Error::new(format!(
            "kernel `{}` ({}): {}",
            kernel.name,
            arch.name(),
            e.message
        ))
    })
}

type Need<'a> = dyn FnMut(Feature) -> Result<(), Error> + 'a;

fn block(body: &Block, need: &mut Need) -> Result<(), Error> {
    for stmt in body {
        match stmt {
            Stmt::Let { init, .. } => init.iter().try_for_each(|e| expr(e, need))?,
            Stmt::Assign { value, .. } => expr(value, need)?,
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                expr(cond, need)?;
                block(then_body, need)?;
                block(else_body, need)?;
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => block(body, need)?,
            Stmt::Expr(e) => expr(e, need)?,
            Stmt::Matrix(op) => need(match op {
                MatrixOp::LoadMatrix { .. } => Feature::Ldmatrix,
                MatrixOp::Mma { kind, .. } => Feature::Mma(*kind),
                MatrixOp::MmaSparse { kind, ordered, .. } => Feature::MmaSparse(*kind, *ordered),
                MatrixOp::WmmaLoad { .. } | MatrixOp::Wmma { .. } | MatrixOp::WmmaStore { .. } => {
                    Feature::Wmma
                }
            })?,
            Stmt::Mbarrier(op) => {
                let (feature, operand) = match op {
                    MbarrierOp::Init { count, .. } => (Feature::MbarrierInit, Some(count)),
                    MbarrierOp::Arrive { .. } => (Feature::MbarrierArrive, None),
                    MbarrierOp::ArriveCluster { rank, .. } => {
                        (Feature::MbarrierArriveCluster, Some(rank))
                    }
                    MbarrierOp::ArriveExpectTx { bytes, .. } => {
                        (Feature::MbarrierExpectTx, Some(bytes))
                    }
                    MbarrierOp::Wait { parity, .. } => (Feature::MbarrierTryWait, Some(parity)),
                    MbarrierOp::InitFence => (Feature::MbarrierInitFence, None),
                };
                need(feature)?;
                operand.iter().try_for_each(|e| expr(e, need))?;
            }
            Stmt::GpuFence => need(Feature::GpuFence)?,
            Stmt::ProxyFence => need(Feature::ProxyFence)?,
            Stmt::ClusterBarrier => need(Feature::ClusterBarrier)?,
            Stmt::Warpgroup(op) => need(match op {
                WarpgroupOp::Mma(mma) => Feature::Wgmma(mma.kind),
                WarpgroupOp::Fence | WarpgroupOp::Commit | WarpgroupOp::Wait { .. } => {
                    Feature::WgmmaSync
                }
            })?,
            Stmt::Tma(op) => need(match op {
                TmaOp::Load {
                    multicast: Some(_), ..
                } => Feature::TmaMulticast,
                TmaOp::Load { .. } => Feature::TmaLoad,
                TmaOp::Store { .. }
                | TmaOp::Commit
                | TmaOp::WaitRead { .. }
                | TmaOp::Wait { .. } => Feature::TmaStore,
            })?,
            Stmt::SetMaxRegisters { .. } => need(Feature::SetMaxRegisters)?,
            Stmt::Break
            | Stmt::Continue
            | Stmt::Return
            | Stmt::Barrier
            | Stmt::AsyncCopy { .. }
            | Stmt::AsyncCommit
            | Stmt::AsyncWait { .. } => {}
        }
    }
    Ok(())
}

fn expr(e: &Expr, need: &mut Need) -> Result<(), Error> {
    match &e.kind {
        ExprKind::Call(f, args) => {
            match f {
                Intrinsic::PackBf16x2 => need(Feature::CvtBf16x2)?,
                Intrinsic::ToTf32 => need(Feature::CvtTf32)?,
                _ => {}
            }
            args.iter().try_for_each(|a| expr(a, need))
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => expr(a, need),
        ExprKind::Binary(op, a, b) => {
            if let Some(why) = float_refusal(*op, a.ty) {
                return Err(Error::new(why));
            }
            expr(a, need)?;
            expr(b, need)
        }
        ExprKind::Select(c, a, b) => [c, a, b].into_iter().try_for_each(|x| expr(x, need)),
        ExprKind::Atomic { value, .. } => expr(value, need),
        ExprKind::Literal(_)
        | ExprKind::Param(_)
        | ExprKind::Const(_)
        | ExprKind::Len(_)
        | ExprKind::Load(_) => Ok(()),
        ExprKind::Special(Special::ClusterRank) => need(Feature::Cluster),
        ExprKind::Special(_) => Ok(()),
    }
}
