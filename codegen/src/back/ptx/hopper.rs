//! Hopper's statements: mbarriers, the async-proxy fence, the warpgroup
//! MMA (`wgmma`) with its shared-memory matrix descriptors, TMA copies
//! through tensor maps and `setmaxnreg`.
//!
//! A descriptor is built in registers where its wgmma is: the operand's
//! shared-window address in units of 16 bytes (bits 0-13) or-ed with a
//! constant of the fields the tile's declaration fixes: the leading byte
//! offset (bits 16-29, in 16 bytes), the stride byte offset (bits 32-45)
//! and the swizzle mode (bits 62-63). Base offset (bits 49-51) stays 0:
//! swizzled tiles start on their pattern's boundary (`usage`). K-major
//! tiles only: `imm-trans-a` and `imm-trans-b` are 0.

use super::features::Feature;
use super::function::{Emitter, ParamRegs};
use super::regs::Reg;
use super::warp::brace;
use crate::ir::{
    Expr, MatrixDescriptor, MbarrierOp, ParamId, Place, Scalar, Swizzle, TmaOp, WarpgroupOp, Wgmma,
    WgmmaKind,
};
use crate::Error;

impl Emitter<'_> {
    pub fn mbarrier(&mut self, op: &MbarrierOp) -> Result<(), Error> {
        match op {
            MbarrierOp::Init { bar, count } => {
                self.require(Feature::MbarrierInit)?;
                let count = self.expr(count)?;
                let bar = self.address(bar)?;
                self.ins(format!("mbarrier.init.shared.b64 {bar}, {count}"));
            }
            MbarrierOp::Arrive { bar } => {
                self.require(Feature::MbarrierArrive)?;
                let bar = self.address(bar)?;
                let state = self.fresh(Scalar::U64);
                self.ins(format!("mbarrier.arrive.shared.b64 {state}, {bar}"));
            }
            MbarrierOp::ArriveExpectTx { bar, bytes } => {
                self.require(Feature::MbarrierExpectTx)?;
                let bytes = self.expr(bytes)?;
                let bar = self.address(bar)?;
                let state = self.fresh(Scalar::U64);
                self.ins(format!(
                    "mbarrier.arrive.expect_tx.shared.b64 {state}, {bar}, {bytes}"
                ));
            }
            MbarrierOp::Wait { bar, parity } => {
                self.require(Feature::MbarrierTryWait)?;
                let parity = self.expr(parity)?;
                let bar = self.address(bar)?;
                // `try_wait` returns false when its time limit passes first: retry.
                let retry = format!("$mbarrier{}_wait", self.label_id());
                let done = self.fresh(Scalar::Bool);
                self.place_label(&retry);
                self.ins(format!(
                    "mbarrier.try_wait.parity.shared.b64 {done}, {bar}, {parity}"
                ));
                self.ins(format!("@!{done} bra {retry}"));
            }
            MbarrierOp::ArriveCluster { bar, rank } => {
                self.require(Feature::MbarrierArriveCluster)?;
                let rank = self.expr(rank)?;
                let rank = self.in_reg(rank, Scalar::U32);
                let bar = self.address(bar)?;
                let local = self.fresh(Scalar::U32);
                self.ins(format!("add.u32 {local}, {}, {}", bar.base, bar.offset));
                let remote = self.fresh(Scalar::U32);
                self.ins(format!(
                    "mapa.shared::cluster.u32 {remote}, {local}, {rank}"
                ));
                // The default semantics (release at CTA scope), as CUTLASS's
                // cluster barrier arrives: `.release.cluster` makes ptxas put
                // a cluster-scope MEMBAR before the arrive, which held each
                // consumer warp of the clustered GEMM for its earlier stores
                // (ncu, H100: 2.4 of 23.8 cycles between issues stalled on it,
                // and its warpgroup's next wgmma waited for that warp).
                self.ins(format!("mbarrier.arrive.shared::cluster.b64 _, [{remote}]"));
            }
            MbarrierOp::InitFence => {
                self.require(Feature::MbarrierInitFence)?;
                self.ins("fence.mbarrier_init.release.cluster");
            }
        }
        Ok(())
    }

    pub fn tma(&mut self, op: &TmaOp) -> Result<(), Error> {
        let text = match op {
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast,
            } => {
                self.require(Feature::TmaLoad)?;
                // The mask is a `.b16` operand: the low half of the `u32`.
                let mask = match multicast {
                    Some(mask) => {
                        self.require(Feature::TmaMulticast)?;
                        let mask = self.expr(mask)?;
                        let mask = self.in_reg(mask, Scalar::U32);
                        let half = self.fresh(Scalar::F16);
                        self.ins(format!("cvt.u16.u32 {half}, {mask}"));
                        Some(half)
                    }
                    None => None,
                };
                let tensor = self.tensor_operand(*map, coords)?;
                let dst = self.address(smem)?;
                let bar = self.address(bar)?;
                let rank = coords.len();
                match mask {
                    Some(mask) => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster {dst}, {tensor}, {bar}, {mask}"
                    ),
                    None => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {dst}, {tensor}, {bar}"
                    ),
                }
            }
            TmaOp::Store { smem, map, coords } => {
                self.require(Feature::TmaStore)?;
                let tensor = self.tensor_operand(*map, coords)?;
                let src = self.address(smem)?;
                format!(
                    "cp.async.bulk.tensor.{}d.global.shared::cta.tile.bulk_group {tensor}, {src}",
                    coords.len()
                )
            }
            TmaOp::Commit => {
                self.require(Feature::TmaStore)?;
                "cp.async.bulk.commit_group".to_string()
            }
            TmaOp::WaitRead { pending } | TmaOp::Wait { pending } => {
                self.require(Feature::TmaStore)?;
                let Some(n) = pending.as_int() else {
                    return Err(self.error(
                        "the count of a TMA store wait is not a constant: validate the kernel first",
                    ));
                };
                match op {
                    TmaOp::WaitRead { .. } => format!("cp.async.bulk.wait_group.read {n}"),
                    _ => format!("cp.async.bulk.wait_group {n}"),
                }
            }
        };
        self.ins(text);
        Ok(())
    }

    /// `[map, {c0, c1, ..}]`: the tensor map's generic address and the
    /// coordinates in registers, innermost first as PTX takes them.
    fn tensor_operand(&mut self, map: ParamId, coords: &[Expr]) -> Result<String, Error> {
        let ParamRegs::Slice { map: Some(map), .. } = self.params[map as usize] else {
            return Err(self.error("a TMA copy names a slice whose tensor map was not loaded"));
        };
        let mut regs = Vec::with_capacity(coords.len());
        for c in coords.iter().rev() {
            let value = self.expr(c)?;
            regs.push(self.in_reg(value, c.ty).to_string());
        }
        Ok(format!("[{map}, {{{}}}]", regs.join(", ")))
    }

    pub fn set_max_registers(&mut self, grow: bool, count: &Expr) -> Result<(), Error> {
        self.require(Feature::SetMaxRegisters)?;
        let Some(n) = count.as_int() else {
            return Err(self
                .error("the count of `setmaxnreg` is not a constant: validate the kernel first"));
        };
        let direction = if grow { "inc" } else { "dec" };
        self.ins(format!("setmaxnreg.{direction}.sync.aligned.u32 {n}"));
        Ok(())
    }

    /// `cluster_sync()`: arrive (release) and wait (acquire) at cluster
    /// scope. Not `.aligned`: a kernel's last one follows code only some of
    /// a warp's threads ran (a producer thread's loop), and the plain forms
    /// need no converged warp.
    pub fn cluster_barrier(&mut self) -> Result<(), Error> {
        self.require(Feature::ClusterBarrier)?;
        self.ins("barrier.cluster.arrive");
        self.ins("barrier.cluster.wait");
        Ok(())
    }

    pub fn proxy_fence(&mut self) -> Result<(), Error> {
        self.require(Feature::ProxyFence)?;
        self.ins("fence.proxy.async.shared::cta");
        Ok(())
    }

    pub fn warpgroup(&mut self, op: &WarpgroupOp) -> Result<(), Error> {
        let text =
            match op {
                WarpgroupOp::Mma(mma) => return self.wgmma(mma),
                WarpgroupOp::Fence => "wgmma.fence.sync.aligned".to_string(),
                WarpgroupOp::Commit => "wgmma.commit_group.sync.aligned".to_string(),
                WarpgroupOp::Wait { pending } => match pending.as_int() {
                    Some(n) => format!("wgmma.wait_group.sync.aligned {n}"),
                    None => return Err(self.error(
                        "the count of `wgmma_wait` is not a constant: validate the kernel first",
                    )),
                },
            };
        self.require(Feature::WgmmaSync)?;
        self.ins(text);
        Ok(())
    }

    fn wgmma(&mut self, mma: &Wgmma) -> Result<(), Error> {
        self.require(Feature::Wgmma(mma.kind))?;
        let Some(n) = mma.n.as_int() else {
            return Err(self.error("the N of a wgmma is not a constant: validate the kernel first"));
        };
        let acc = brace(&self.fragment_regs(&mma.acc)?);
        let a = self.descriptor(&mma.a)?;
        let b = self.descriptor(&mma.b)?;
        let accumulate = self.expr(&mma.accumulate)?;
        let accumulate = self.in_reg(accumulate, Scalar::Bool);
        let ty = mma.kind.ptx_type();
        let d = match mma.kind.accumulator() {
            Scalar::I32 => "s32",
            _ => "f32",
        };
        // scale-d, then for the float forms imm-scale-a and -b (1: not
        // negated), then for the 16-bit forms imm-trans-a and -b (0: K-major;
        // the other forms are K-major only and take no transpose).
        let immediates = match mma.kind {
            WgmmaKind::F16 | WgmmaKind::Bf16 => ", 1, 1, 0, 0",
            WgmmaKind::Tf32 | WgmmaKind::E4m3 | WgmmaKind::E5m2 => ", 1, 1",
            WgmmaKind::S8 | WgmmaKind::U8 => "",
        };
        let k = mma.kind.k();
        self.ins(format!(
            "wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d}.{ty}.{ty} {acc}, {a}, {b}, {accumulate}{immediates}"
        ));
        Ok(())
    }

    /// The 64-bit matrix descriptor of a tile, in a register.
    fn descriptor(&mut self, d: &MatrixDescriptor) -> Result<Reg, Error> {
        let fields = self.descriptor_fields(d)?;
        let addr = self.address(&d.start)?;
        let start = match addr.offset {
            0 => addr.base,
            offset => {
                let r = self.fresh(Scalar::U32);
                self.ins(format!("add.u32 {r}, {}, {offset}", addr.base));
                r
            }
        };
        // The shared window is below 2^18 bytes: 14 bits of 16-byte units.
        let units = self.fresh(Scalar::U32);
        self.ins(format!("shr.u32 {units}, {start}, 4"));
        self.ins(format!("and.b32 {units}, {units}, 16383"));
        let desc = self.fresh(Scalar::U64);
        self.ins(format!("cvt.u64.u32 {desc}, {units}"));
        self.ins(format!("or.b64 {desc}, {desc}, 0x{fields:016X}"));
        Ok(desc)
    }

    /// The bits of a descriptor that the tile's declaration fixes.
    /// K-major: without a swizzle the tile is `[K / E][ROWS][E]` (E
    /// elements in 16 bytes), core matrices of 8 rows x 16 bytes, so the
    /// 8-row groups are 128 bytes apart (stride offset) and the 16-byte
    /// groups of k `ROWS x 16` bytes apart (leading offset). Swizzled, a row is the pattern's span
    /// of k and the 8-row groups are 8 spans apart; the leading offset is
    /// unused (1, as CUTLASS writes it).
    fn descriptor_fields(&self, d: &MatrixDescriptor) -> Result<u64, Error> {
        let Place::Local { local, .. } = &d.start else {
            return Err(
                self.error("a wgmma tile is not in shared memory: validate the kernel first")
            );
        };
        let dims = &self.kernel.locals[*local as usize].dims;
        let rows = dims
            .len()
            .checked_sub(2)
            .and_then(|axis| dims[axis].as_int())
            .ok_or_else(|| self.error("a wgmma tile has no rows: validate the kernel first"))?;
        let (leading, stride, mode) = match d.swizzle {
            Swizzle::None => ((rows as u64 * 16) >> 4, 128 >> 4, 0),
            Swizzle::B128 => (1, (8 * 128) >> 4, 1),
            Swizzle::B64 => (1, (8 * 64) >> 4, 2),
            Swizzle::B32 => (1, (8 * 32) >> 4, 3),
        };
        if leading >= 1 << 14 {
            return Err(self.error(format!(
                "a wgmma tile without a swizzle has {rows} rows, more than its descriptor can step over (16383): use fewer rows per tile"
            )));
        }
        Ok(leading << 16 | stride << 32 | mode << 62)
    }
}
