//! Invariants of Hopper's statements: mbarriers are elements of `u64`
//! shared arrays, and a wgmma has a legal N for its type, an accumulator of
//! N / 2 `f32` (`i32` for the integer forms) per thread, and operand tiles whose shape its descriptors can describe
//! (see [`crate::ir::MatrixDescriptor`]), with literal starts that the
//! descriptor encoding and the swizzle pattern allow.

use super::Validator;
use crate::ir::{Expr, MatrixDescriptor, MbarrierOp, Place, Scalar, Swizzle, WarpgroupOp, Wgmma};
use crate::Error;

impl Validator<'_> {
    pub(super) fn mbarrier(&mut self, op: &MbarrierOp) -> Result<(), Error> {
        let function = op.function();
        let (bar, operand) = op.operands();
        if let Some(bar) = bar {
            let ty = self.place(bar, op.writes())?;
            self.require_shared(bar, function, "mbarrier")?;
            if ty != Scalar::U64 {
                return Err(self.error(format!(
                    "the mbarrier of `{function}` must be a `u64` element, not `{}`",
                    ty.name()
                )));
            }
        }
        if let Some(e) = operand {
            self.u32_operand(e, function)?;
        }
        Ok(())
    }

    pub(super) fn warpgroup(&mut self, op: &WarpgroupOp) -> Result<(), Error> {
        match op {
            WarpgroupOp::Fence | WarpgroupOp::Commit => Ok(()),
            WarpgroupOp::Wait { pending } => {
                self.u32_operand(pending, op.function())?;
                match pending.as_int() {
                    Some(_) => Ok(()),
                    None => Err(self
                        .error("the count of `wgmma_wait` must be a `u32` compile-time constant")),
                }
            }
            WarpgroupOp::Mma(mma) => self.wgmma(mma),
        }
    }

    fn u32_operand(&mut self, e: &Expr, function: &str) -> Result<(), Error> {
        self.expr(e)?;
        if e.ty != Scalar::U32 {
            return Err(self.error(format!(
                "the operand of `{function}` must be a `u32`, not `{}`",
                e.ty.name()
            )));
        }
        Ok(())
    }

    fn wgmma(&mut self, mma: &Wgmma) -> Result<(), Error> {
        let function = mma.kind.function();
        self.expr(&mma.n)?;
        let n = match mma.n.as_int() {
            Some(n) if mma.kind.legal_n(n) => n as u32,
            Some(n) => {
                return Err(self.error(format!(
                    "`{function}::<{n}>`: N is {} (m64nNk{})",
                    mma.kind.n_rule(),
                    mma.kind.k()
                )))
            }
            None => {
                return Err(self.error(format!(
                    "the N of `{function}` must be a compile-time constant"
                )))
            }
        };
        self.fragment(
            &mma.acc,
            mma.kind.accumulator(),
            n / 2,
            function,
            "accumulator",
            true,
        )?;
        self.descriptor(&mma.a, mma, 64, "A")?;
        self.descriptor(&mma.b, mma, n, "B")?;
        self.expr(&mma.accumulate)?;
        if mma.accumulate.ty != Scalar::Bool {
            return Err(self.error(format!(
                "whether `{function}` accumulates must be a `bool`, not `{}`",
                mma.accumulate.ty.name()
            )));
        }
        Ok(())
    }

    /// Operand `which` of `mma`, `rows` rows of the instruction's k (32 bytes).
    fn descriptor(
        &mut self,
        d: &MatrixDescriptor,
        mma: &Wgmma,
        rows: u32,
        which: &str,
    ) -> Result<(), Error> {
        let function = mma.kind.function();
        let ty = self.place(&d.start, false)?;
        self.require_shared(&d.start, function, &format!("{which} tile"))?;
        let elem = mma.kind.element();
        if ty != elem {
            return Err(self.error(format!(
                "the {which} tile of `{function}` must hold `{}`, not `{}`",
                elem.name(),
                ty.name()
            )));
        }
        let Place::Local { local, indices } = &d.start else {
            return Err(self.error(format!("the {which} tile of `{function}` is not shared")));
        };
        let decl = &self.kernel.locals[*local as usize];
        let name = decl.name.clone();
        let dims: Vec<i64> = decl.dims.iter().map(|e| e.as_int().unwrap_or(0)).collect();
        let size = i64::from(elem.size_bytes());
        let row_bytes = dims.last().copied().unwrap_or(0) * size;
        // The innermost dimension is one row of k; without a swizzle a row is
        // 16 bytes and the dimension outside the rows steps k by 16 bytes.
        let per_chunk = 16 / size;
        let (want_row, min_dims) = match d.swizzle {
            Swizzle::None => (16, 3),
            s => (i64::from(s.bytes()), 2),
        };
        let shape = || {
            let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
            format!("[{}]", dims.join("]["))
        };
        if row_bytes != want_row || dims.len() < min_dims {
            let fix = match d.swizzle {
                Swizzle::None => format!(
                    "`[[[{0}; {per_chunk}]; ROWS]; K / {per_chunk}]`: core matrices of 8 rows of 16 bytes, the outer dimension stepping k by {per_chunk}",
                    elem.name()
                ),
                s => format!(
                    "`[[{}; {}]; ROWS]`: rows of {} bytes of k, the swizzle's span",
                    elem.name(),
                    i64::from(s.bytes()) / size,
                    s.bytes()
                ),
            };
            return Err(self.error(format!(
                "the {which} tile `{name}` of `{function}` is {} with swizzle {}: declare it {fix}",
                shape(),
                d.swizzle.bytes()
            )));
        }
        // Literal starts are checked where they are known: the descriptor
        // holds the address in units of 16 bytes, the rows of this
        // instruction lie inside the tile, and a swizzled start sits on an
        // 8-row boundary with the instruction's 32 bytes of k inside the row.
        let rank = dims.len();
        let at = |axis: usize| indices[axis].as_int();
        if let Some(k0) = at(rank - 1) {
            let byte = k0 * size;
            let fits = match d.swizzle {
                Swizzle::None => k0 == 0,
                _ => byte % 16 == 0 && byte + 32 <= row_bytes,
            };
            if !fits {
                return Err(self.error(format!(
                    "the {which} tile of `{function}` starts at element {k0} of a row of `{name}`: \
                     start at a multiple of {per_chunk} elements that leaves the instruction's {} elements of k inside the row{}",
                    mma.kind.k(),
                    if d.swizzle == Swizzle::None { " (0 without a swizzle: the outer dimension steps k)" } else { "" }
                )));
            }
        }
        if let Some(r0) = at(rank - 2) {
            let rows_in_tile = dims[rank - 2];
            if r0 % 8 != 0 || r0 + i64::from(rows) > rows_in_tile {
                return Err(self.error(format!(
                    "the {which} tile of `{function}` starts at row {r0} of `{name}` ({rows_in_tile} rows) and takes {rows} rows: \
                     start at a multiple of 8 with {rows} rows left"
                )));
            }
        }
        if d.swizzle == Swizzle::None {
            if let Some(g) = at(rank - 3) {
                if g + 2 > dims[rank - 3] {
                    return Err(self.error(format!(
                        "the {which} tile of `{function}` starts at k group {g} of `{name}`, which has {}: \
                         an instruction reads two groups of {per_chunk} elements of k",
                        dims[rank - 3]
                    )));
                }
            }
        }
        Ok(())
    }
}
