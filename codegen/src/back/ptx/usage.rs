//! A pre-pass over the body: which parameters the kernel reads, which
//! slices it writes (a slice never written is read through the read-only
//! cache, `ld.global.nc`), and which shared arrays need more than the
//! default alignment (the swizzled tiles of wgmma descriptors and the
//! tiles of TMA copies), which tensor maps the kernel copies through and
//! whether it reallocates registers.

use crate::ir::{
    Block, Expr, ExprKind, Kernel, MatrixDescriptor, MatrixOp, Place, Stmt, Swizzle, TmaOp,
    WarpgroupOp,
};

pub struct Usage {
    /// Per parameter: read as a scalar, or its pointer used.
    pub used: Vec<bool>,
    /// Per parameter: its `.len()` read.
    pub len_read: Vec<bool>,
    /// Per parameter: a slice element stored to or updated atomically.
    pub written: Vec<bool>,
    /// Per local: the alignment in bytes its start needs (1 when nothing
    /// asks for one): a swizzled tile read through a wgmma descriptor
    /// starts on its pattern's boundary, as the hardware swizzles absolute
    /// shared addresses.
    pub shared_align: Vec<u32>,
    /// Per parameter: its tensor map named by a TMA copy.
    pub tensor_map_read: Vec<bool>,
    /// Whether the body has a `setmaxnreg`, which ptxas honours only when
    /// the entry fixes the register count (`.minnctapersm`).
    pub sets_max_registers: bool,
    /// Per parameter: the swizzle of its tensor map (none without one).
    tensor_map_swizzle: Vec<Swizzle>,
}

impl Usage {
    pub fn of(kernel: &Kernel) -> Usage {
        let n = kernel.params.len();
        let mut usage = Usage {
            used: vec![false; n],
            len_read: vec![false; n],
            written: vec![false; n],
            shared_align: vec![1; kernel.locals.len()],
            tensor_map_read: vec![false; n],
            sets_max_registers: false,
            tensor_map_swizzle: kernel
                .params
                .iter()
                .map(|p| p.tensor_map.as_ref().map_or(Swizzle::None, |m| m.swizzle))
                .collect(),
        };
        usage.block(&kernel.body);
        usage
    }

    fn block(&mut self, block: &Block) {
        for stmt in block {
            match stmt {
                Stmt::Let { init, .. } => init.iter().for_each(|e| self.expr(e)),
                Stmt::Assign { place, value } => {
                    self.place(place, true);
                    self.expr(value);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    self.expr(cond);
                    self.block(then_body);
                    self.block(else_body);
                }
                Stmt::For {
                    start,
                    end,
                    step,
                    body,
                    ..
                } => {
                    [start, end, step].into_iter().for_each(|e| self.expr(e));
                    self.block(body);
                }
                Stmt::While { cond, body } => {
                    self.expr(cond);
                    self.block(body);
                }
                Stmt::Expr(e) => self.expr(e),
                Stmt::Break
                | Stmt::Continue
                | Stmt::Return
                | Stmt::Barrier
                | Stmt::GpuFence
                | Stmt::AsyncCommit => {}
                Stmt::Matrix(op) => self.matrix(op),
                Stmt::AsyncCopy {
                    dst,
                    src,
                    src_bytes,
                    ..
                } => {
                    self.place(dst, true);
                    self.place(src, false);
                    self.expr(src_bytes);
                }
                Stmt::AsyncWait { pending } => self.expr(pending),
                Stmt::Mbarrier(op) => {
                    let (bar, operand) = op.operands();
                    bar.iter().for_each(|p| self.place(p, op.writes()));
                    operand.iter().for_each(|e| self.expr(e));
                }
                Stmt::ProxyFence | Stmt::ClusterBarrier => {}
                Stmt::Warpgroup(op) => match op {
                    WarpgroupOp::Mma(mma) => {
                        self.descriptor(&mma.a);
                        self.descriptor(&mma.b);
                        self.expr(&mma.accumulate);
                    }
                    WarpgroupOp::Fence | WarpgroupOp::Commit | WarpgroupOp::Wait { .. } => {}
                },
                Stmt::Tma(op) => self.tma(op),
                Stmt::SetMaxRegisters { .. } => self.sets_max_registers = true,
            }
        }
    }

    fn matrix(&mut self, op: &MatrixOp) {
        match op {
            MatrixOp::LoadMatrix { src, .. } => self.place(src, false),
            MatrixOp::WmmaLoad { src, stride, .. } => {
                self.place(src, false);
                self.expr(stride);
            }
            MatrixOp::WmmaStore { dst, stride, .. } => {
                self.place(dst, true);
                self.expr(stride);
            }
            MatrixOp::MmaSparse {
                metadata, selector, ..
            } => {
                self.expr(metadata);
                self.expr(selector);
            }
            // Fragment indices are literals: they use nothing.
            MatrixOp::Mma { .. } | MatrixOp::Wmma { .. } => {}
        }
    }

    fn tma(&mut self, op: &TmaOp) {
        let (smem, map, coords, bar) = match op {
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast,
            } => {
                multicast.iter().for_each(|e| self.expr(e));
                (smem, *map, coords, Some(bar))
            }
            TmaOp::Store { smem, map, coords } => (smem, *map, coords, None),
            TmaOp::Commit | TmaOp::WaitRead { .. } | TmaOp::Wait { .. } => return,
        };
        self.tensor_map_read[map as usize] = true;
        self.written[map as usize] |= bar.is_none();
        coords.iter().for_each(|e| self.expr(e));
        self.place(smem, bar.is_some());
        if let Some(bar) = bar {
            self.place(bar, true);
        }
        // The TMA writes and reads whole tiles from 128-byte boundaries, and
        // swizzles absolute addresses as wgmma does.
        if let Place::Local { local, .. } = smem {
            let swizzle = self.tensor_map_swizzle[map as usize];
            let align = &mut self.shared_align[*local as usize];
            *align = (*align).max(swizzle.alignment()).max(128);
        }
    }

    fn descriptor(&mut self, d: &MatrixDescriptor) {
        self.place(&d.start, false);
        if let Place::Local { local, .. } = d.start {
            let align = &mut self.shared_align[local as usize];
            *align = (*align).max(d.swizzle.alignment());
        }
    }

    fn place(&mut self, place: &Place, write: bool) {
        match place {
            Place::Local { indices, .. } => indices.iter().for_each(|e| self.expr(e)),
            Place::Global { param, index } => {
                self.used[*param as usize] = true;
                self.written[*param as usize] |= write;
                self.expr(index);
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Param(id) => self.used[*id as usize] = true,
            ExprKind::Len(id) => self.len_read[*id as usize] = true,
            ExprKind::Load(place) => self.place(place, false),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.expr(a),
            ExprKind::Binary(_, a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Select(c, a, b) => [c, a, b].into_iter().for_each(|e| self.expr(e)),
            ExprKind::Call(_, args) => args.iter().for_each(|a| self.expr(a)),
            ExprKind::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                self.place(place, true);
                self.expr(value);
                compare.iter().for_each(|c| self.expr(c));
            }
            ExprKind::Literal(_) | ExprKind::Const(_) | ExprKind::Special(_) => {}
        }
    }
}
