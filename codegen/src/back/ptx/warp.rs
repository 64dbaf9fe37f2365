//! Tensor Core operations (dense and 2:4 sparse), `ldmatrix`, operand
//! packing and asynchronous copies (the PTX facts they rely on: docs/ptx.md).
//!
//! Fragments are rows of register arrays, so an operand is a brace list of
//! the row's registers: `u32` words live in `.b32` registers, which every
//! `mma`/`ldmatrix`/`wmma` operand accepts; accumulators are `.f32` or
//! `.b32` (s32). `.sync.aligned` instructions are never predicated per lane.
//!
//! `cp.async` needs sm_80. On sm_70 copies are staged through registers
//! (`staging`): a copy is a load where it is issued and a store at the next
//! wait or the end of its loop iteration; commit emits nothing. The same
//! source is correct on both, and the barrier the kernel needs after a wait
//! is there anyway.

use super::features::Feature;
use super::function::{Emitter, Operand};
use super::regs::Reg;
use crate::ir::{
    Expr, Fragment, Intrinsic, MatrixOp, MmaKind, Place, Scalar, SparseMmaKind, Stmt, WmmaOperand,
};
use crate::Error;

/// `{%r1, %r2, ..}`.
pub(super) fn brace(regs: &[Reg]) -> String {
    let names: Vec<String> = regs.iter().map(|r| r.to_string()).collect();
    format!("{{{}}}", names.join(", "))
}

impl Emitter<'_> {
    /// The registers of a fragment: one row of a register array.
    pub(super) fn fragment_regs(&mut self, fragment: &Fragment) -> Result<Vec<Reg>, Error> {
        let decl = &self.kernel.locals[fragment.local as usize];
        let dims: Vec<usize> = decl
            .dims
            .iter()
            .map(|d| d.as_int().unwrap_or(0) as usize)
            .collect();
        // The elements below the indices, which are a row for every
        // fragment but a wgmma's accumulators.
        let row_len: usize = dims[fragment.indices.len().min(dims.len())..]
            .iter()
            .product();
        let mut row = 0usize;
        for (index, dim) in fragment.indices.iter().zip(&dims) {
            let Some(i) = index.as_int() else {
                return Err(self.error(format!(
                    "the fragment `{}` is indexed with a value known only at run time: validate the kernel first",
                    decl.name
                )));
            };
            row = row * dim + i as usize;
        }
        let regs = self.local_regs(fragment.local);
        Ok(regs[row * row_len..(row + 1) * row_len].to_vec())
    }

    pub fn matrix(&mut self, op: &MatrixOp) -> Result<(), Error> {
        match op {
            MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            } => {
                self.require(Feature::Ldmatrix)?;
                let regs = self.fragment_regs(dst)?;
                let addr = self.address(src)?;
                let trans = if *transpose { ".trans" } else { "" };
                self.ins(format!(
                    "ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {}, {addr}",
                    brace(&regs)
                ));
            }
            MatrixOp::Mma { kind, acc, a, b } => {
                self.require(Feature::Mma(*kind))?;
                let acc = brace(&self.fragment_regs(acc)?);
                let a = brace(&self.fragment_regs(a)?);
                let b = brace(&self.fragment_regs(b)?);
                let (m, n, k) = kind.shape();
                let types = match kind {
                    MmaKind::F16 => "f32.f16.f16.f32",
                    MmaKind::Bf16 => "f32.bf16.bf16.f32",
                    MmaKind::Tf32 => "f32.tf32.tf32.f32",
                    MmaKind::S8 => "s32.s8.s8.s32",
                    MmaKind::U8 => "s32.u8.u8.s32",
                };
                self.ins(format!(
                    "mma.sync.aligned.m{m}n{n}k{k}.row.col.{types} {acc}, {a}, {b}, {acc}"
                ));
            }
            MatrixOp::MmaSparse {
                kind,
                ordered,
                acc,
                a,
                b,
                metadata,
                selector,
            } => {
                self.require(Feature::MmaSparse(*kind, *ordered))?;
                let acc = brace(&self.fragment_regs(acc)?);
                let a = brace(&self.fragment_regs(a)?);
                let b = brace(&self.fragment_regs(b)?);
                let Some(selector) = selector.as_int() else {
                    return Err(self.error(
                        "the selector of a sparse mma is not a constant: validate the kernel first",
                    ));
                };
                let metadata = self.expr(metadata)?;
                let metadata = self.in_reg(metadata, Scalar::U32);
                let form = if *ordered {
                    "mma.sp::ordered_metadata"
                } else {
                    "mma.sp"
                };
                let types = match kind {
                    SparseMmaKind::F16 => "f32.f16.f16.f32",
                    SparseMmaKind::Bf16 => "f32.bf16.bf16.f32",
                };
                self.ins(format!(
                    "{form}.sync.aligned.m16n8k32.row.col.{types} {acc}, {a}, {b}, {acc}, {metadata}, {selector}"
                ));
            }
            MatrixOp::WmmaLoad {
                operand,
                layout,
                dst,
                src,
                stride,
            } => {
                self.require(Feature::Wmma)?;
                let regs = self.fragment_regs(dst)?;
                let addr = self.address(src)?;
                let stride = self.expr(stride)?;
                let ty = if *operand == WmmaOperand::C {
                    "f32"
                } else {
                    "f16"
                };
                self.ins(format!(
                    "wmma.load.{}.sync.aligned.{}.m16n16k16.{}.{ty} {}, {addr}, {stride}",
                    operand.name(),
                    layout.name(),
                    addr.space,
                    brace(&regs)
                ));
            }
            MatrixOp::Wmma {
                a_layout,
                b_layout,
                acc,
                a,
                b,
            } => {
                self.require(Feature::Wmma)?;
                let acc = brace(&self.fragment_regs(acc)?);
                let a = brace(&self.fragment_regs(a)?);
                let b = brace(&self.fragment_regs(b)?);
                self.ins(format!(
                    "wmma.mma.sync.aligned.{}.{}.m16n16k16.f32.f32 {acc}, {a}, {b}, {acc}",
                    a_layout.name(),
                    b_layout.name()
                ));
            }
            MatrixOp::WmmaStore {
                layout,
                dst,
                src,
                stride,
            } => {
                self.require(Feature::Wmma)?;
                let regs = self.fragment_regs(src)?;
                let addr = self.address(dst)?;
                let stride = self.expr(stride)?;
                self.ins(format!(
                    "wmma.store.d.sync.aligned.{}.m16n16k16.{}.f32 {addr}, {}, {stride}",
                    layout.name(),
                    addr.space,
                    brace(&regs)
                ));
            }
        }
        Ok(())
    }

    /// `pack_f16x2`, `pack_bf16x2` and `to_tf32`: a `u32` operand word.
    pub fn operand_word(&mut self, f: Intrinsic, args: &[Expr]) -> Result<Operand, Error> {
        let mut xs = Vec::with_capacity(args.len());
        for a in args {
            xs.push(self.expr(a)?);
        }
        let word = self.fresh(Scalar::U32);
        match f {
            Intrinsic::PackF16x2 if !self.features.available(Feature::CvtF16x2) => {
                // `mov.b32 d, {lo, hi}` puts its first operand in the low half.
                let lo = self.fresh(Scalar::F16);
                let hi = self.fresh(Scalar::F16);
                self.ins(format!("cvt.rn.f16.f32 {lo}, {}", xs[0]));
                self.ins(format!("cvt.rn.f16.f32 {hi}, {}", xs[1]));
                self.ins(format!("mov.b32 {word}, {{{lo}, {hi}}}"));
            }
            Intrinsic::PackF16x2 | Intrinsic::PackBf16x2 => {
                let (feature, ty) = if f == Intrinsic::PackF16x2 {
                    (Feature::CvtF16x2, "f16x2")
                } else {
                    (Feature::CvtBf16x2, "bf16x2")
                };
                self.require(feature)?;
                // The first source goes to the upper half.
                self.ins(format!("cvt.rn.{ty}.f32 {word}, {}, {}", xs[1], xs[0]));
            }
            Intrinsic::ToTf32 => {
                self.require(Feature::CvtTf32)?;
                self.ins(format!("cvt.rna.tf32.f32 {word}, {}", xs[0]));
            }
            _ => return Err(self.error("only operand packing reaches `operand_word`")),
        }
        Ok(Operand::Reg(word))
    }

    /// `site` is the copy's statement (staging plans by statement).
    pub fn async_copy(
        &mut self,
        site: &Stmt,
        dst: &Place,
        src: &Place,
        bytes: u32,
        src_bytes: &Expr,
    ) -> Result<(), Error> {
        if !self.features.available(Feature::CpAsync) {
            return self.stage_copy(site, dst, src, bytes, src_bytes);
        }
        self.require(Feature::CpAsync)?;
        let dst = self.address(dst)?;
        let src = self.address(src)?;
        // .cg (L2 only, bypassing L1) exists only for 16 bytes.
        let cache = if bytes == 16 { "cg" } else { "ca" };
        let full = src_bytes.as_int() == Some(bytes as i64);
        if full {
            self.ins(format!(
                "cp.async.{cache}.shared.global {dst}, {src}, {bytes}"
            ));
        } else {
            let n = self.expr(src_bytes)?;
            self.ins(format!(
                "cp.async.{cache}.shared.global {dst}, {src}, {bytes}, {n}"
            ));
        }
        Ok(())
    }

    pub fn async_commit(&mut self) -> Result<(), Error> {
        if self.features.available(Feature::CpAsync) {
            self.require(Feature::CpAsync)?;
            self.ins("cp.async.commit_group");
        }
        Ok(())
    }

    /// `site` is the wait's statement, where sm_70 stores staged copies.
    pub fn async_wait(&mut self, site: &Stmt, pending: &Expr) -> Result<(), Error> {
        if !self.features.available(Feature::CpAsync) {
            return self.store_staged(site);
        }
        let Some(n) = pending.as_int() else {
            return Err(self.error(
                "the count of `cp_async_wait` is not a constant: validate the kernel first",
            ));
        };
        self.require(Feature::CpAsync)?;
        self.ins(format!("cp.async.wait_group {n}"));
        Ok(())
    }
}
