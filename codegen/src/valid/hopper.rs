//! Invariants of Hopper's statements: mbarriers are elements of `u64`
//! shared arrays, and a wgmma has a legal N for its type, an accumulator of
//! N / 2 `f32` (`i32` for the integer forms) per thread, and operand tiles whose shape its descriptors can describe
//! (see [`crate::ir::MatrixDescriptor`]), with literal starts that the
//! descriptor encoding and the swizzle pattern allow.

use super::Validator;
use crate::ir::{
    Expr, MatrixDescriptor, MbarrierOp, ParamId, ParamType, Place, Scalar, Swizzle, TensorMap,
    TmaOp, WarpgroupOp, Wgmma,
};
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
        if let MbarrierOp::ArriveCluster { rank, .. } = op {
            if let (Some(r), Some(blocks)) = (rank.as_int(), self.cluster_blocks()) {
                if r >= blocks as i64 {
                    return Err(self.error(format!(
                        "`{function}` arrives at rank {r}, but a cluster has {blocks} block(s): \
                         ranks are 0 to {}",
                        blocks - 1
                    )));
                }
            }
        }
        // ptxas takes only 0 or 1 as an immediate parity.
        if let MbarrierOp::Wait { parity, .. } = op {
            if let Some(p @ 2..) = parity.as_int() {
                return Err(self.error(format!(
                    "the phase parity of `{function}` is {p}: it is 0 or 1, the parity of the phase \
                     to wait for (pass `phase % 2`)"
                )));
            }
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

    pub(super) fn tma(&mut self, op: &TmaOp) -> Result<(), Error> {
        let (function, smem, map, coords, bar) = match op {
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast: None,
            } => ("tma_load", smem, *map, coords, Some(bar)),
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast: Some(mask),
            } => {
                let function = "tma_load_multicast";
                self.multicast_mask(mask, function)?;
                (function, smem, *map, coords, Some(bar))
            }
            TmaOp::Store { smem, map, coords } => ("tma_store", smem, *map, coords, None),
            TmaOp::Commit => return Ok(()),
            TmaOp::WaitRead { pending } | TmaOp::Wait { pending } => {
                let function = match op {
                    TmaOp::WaitRead { .. } => "tma_store_wait_read",
                    _ => "tma_store_wait",
                };
                self.u32_operand(pending, function)?;
                return match pending.as_int() {
                    Some(_) => Ok(()),
                    None => Err(self.error(format!(
                        "the count of `{function}` must be a `u32` compile-time constant"
                    ))),
                };
            }
        };
        let (elem, tensor_map) = self.tensor_map(map, function, bar.is_none())?;
        if coords.len() != tensor_map.shape.len() {
            return Err(self.error(format!(
                "`{function}` gives {} coordinates to a tensor map of {} dimension(s)",
                coords.len(),
                tensor_map.shape.len()
            )));
        }
        for c in coords {
            self.expr(c)?;
            if !matches!(c.ty, Scalar::U32 | Scalar::I32) {
                return Err(self.error(format!(
                    "the coordinates of `{function}` are `u32` or `i32`, not `{}`",
                    c.ty.name()
                )));
            }
        }
        let ty = self.place(smem, bar.is_some())?;
        self.require_shared(smem, function, "tile")?;
        if ty != elem {
            return Err(self.error(format!(
                "`{function}` copies `{}` elements, but its shared tile holds `{}`",
                elem.name(),
                ty.name()
            )));
        }
        self.tma_tile(smem, &tensor_map, function)?;
        if let Some(bar) = bar {
            let ty = self.place(bar, true)?;
            self.require_shared(bar, function, "mbarrier")?;
            if ty != Scalar::U64 {
                return Err(self.error(format!(
                    "the mbarrier of `{function}` must be a `u64` element, not `{}`",
                    ty.name()
                )));
            }
        }
        Ok(())
    }

    /// A multicast mask is a `u32` of at most 16 bits; a constant one names
    /// only blocks the declared cluster has.
    fn multicast_mask(&mut self, mask: &Expr, function: &str) -> Result<(), Error> {
        self.u32_operand(mask, function)?;
        let Some(bits) = mask.as_int() else {
            return Ok(());
        };
        let blocks = self.cluster_blocks().unwrap_or(1);
        if bits == 0 || bits >> blocks != 0 {
            return Err(self.error(format!(
                "the multicast mask of `{function}` is {bits:#b}: set bit i for the block of cluster \
                 rank i, ranks 0 to {} in this kernel's cluster, at least one",
                blocks - 1
            )));
        }
        Ok(())
    }

    /// The element type and tensor map of slice `map`, which a store writes.
    fn tensor_map(
        &self,
        map: ParamId,
        function: &str,
        writes: bool,
    ) -> Result<(Scalar, TensorMap), Error> {
        let param = self.kernel.params.get(map as usize).ok_or_else(|| {
            self.error(format!(
                "`{function}` names parameter #{map}, which does not exist"
            ))
        })?;
        let (ParamType::Slice { elem, mutable }, Some(tensor_map)) = (param.ty, &param.tensor_map)
        else {
            return Err(self.error(format!(
                "`{function}` copies through a tensor map, and `{}` is not a slice declared with `#[tensor_map(..)]`",
                param.name
            )));
        };
        if writes && !mutable {
            return Err(self.error(format!(
                "`{function}` writes `{}`, which is not `&mut`",
                param.name
            )));
        }
        let rank = tensor_map.shape.len();
        if !(1..=5).contains(&rank)
            || tensor_map.strides.len() + 1 != rank
            || tensor_map.tile.len() != rank
        {
            return Err(self.error(format!(
                "the tensor map of `{}` must have 1 to 5 dimensions, a stride for each but the innermost and a tile size for each",
                param.name
            )));
        }
        let size = i64::from(elem.size_bytes());
        let mut tile = Vec::with_capacity(rank);
        for t in &tensor_map.tile {
            match t.as_int() {
                Some(t) if (1..=256).contains(&t) => tile.push(t),
                Some(t) => {
                    return Err(self.error(format!(
                        "the tile of the tensor map of `{}` is {t} elements along one dimension: TMA tiles are 1 to 256 elements along each",
                        param.name
                    )))
                }
                None => {
                    return Err(self.error(format!(
                        "the tile of the tensor map of `{}` must be compile-time constants",
                        param.name
                    )))
                }
            }
        }
        let row_bytes = tile[rank - 1] * size;
        let span = i64::from(tensor_map.swizzle.bytes());
        if row_bytes % 16 != 0 || (span > 0 && row_bytes > span) {
            let swizzled = match span {
                0 => String::new(),
                _ => format!(" and at most the swizzle's {span}"),
            };
            return Err(self.error(format!(
                "the innermost tile dimension of the tensor map of `{}` is {row_bytes} bytes: TMA needs a multiple of 16{swizzled}",
                param.name
            )));
        }
        Ok((elem, tensor_map.clone()))
    }

    /// A TMA copy's shared tile starts at an element whose trailing indices
    /// are zero and whose trailing dimensions hold exactly the tile, rows
    /// as long as the tile's innermost dimension, aligned for the swizzle.
    fn tma_tile(&self, smem: &Place, map: &TensorMap, function: &str) -> Result<(), Error> {
        let Place::Local { local, indices } = smem else {
            return Err(self.error(format!("the tile of `{function}` is not shared")));
        };
        let decl = &self.kernel.locals[*local as usize];
        let dims: Vec<i64> = decl.dims.iter().map(|e| e.as_int().unwrap_or(0)).collect();
        let tile: Vec<i64> = map.tile.iter().map(|e| e.as_int().unwrap_or(0)).collect();
        let zeros = indices
            .iter()
            .rev()
            .take_while(|i| i.as_int() == Some(0))
            .count();
        let tile_elements: i64 = tile.iter().product();
        let holds =
            (1..=zeros).find(|&z| dims[dims.len() - z..].iter().product::<i64>() == tile_elements);
        let form = |dims: &[i64]| {
            let d: Vec<String> = dims.iter().map(i64::to_string).collect();
            format!("[{}]", d.join("]["))
        };
        let Some(z) = holds.filter(|_| dims.last() == tile.last()) else {
            return Err(self.error(format!(
                "the tile of `{function}` is {} elements of `{}` {}: give its first element, `&{}[..][0][0]`, whose trailing dimensions (indexed by zeros) hold exactly the tile with rows of {} elements",
                form(&tile),
                decl.name,
                form(&dims),
                decl.name,
                tile.last().copied().unwrap_or(0)
            )));
        };
        let size = i64::from(decl.ty.size_bytes());
        let tile_bytes = tile_elements * size;
        let align = i64::from(map.swizzle.alignment().max(128));
        let outer = &indices[..indices.len() - z];
        let offset = outer
            .iter()
            .zip(&dims)
            .try_fold(0i64, |at, (i, d)| Some(at * d + i.as_int()?));
        let aligned = match offset {
            Some(offset) => offset * tile_bytes % align == 0,
            None => tile_bytes % align == 0,
        };
        if !aligned {
            return Err(self.error(format!(
                "the tile of `{function}` in `{}` does not start on a {align}-byte boundary (TMA with swizzle {} needs it): make the tiles of `{}` a multiple of {align} bytes",
                decl.name,
                map.swizzle.bytes(),
                decl.name
            )));
        }
        Ok(())
    }

    pub(super) fn set_max_registers(&mut self, grow: bool, count: &Expr) -> Result<(), Error> {
        self.u32_operand(count, "setmaxnreg")?;
        let n = match count.as_int() {
            Some(n) if (24..=256).contains(&n) && n % 8 == 0 => n as u64,
            Some(n) => {
                return Err(self.error(format!(
                    "`setmaxnreg` to {n} registers: the count is 24 to 256, a multiple of 8"
                )))
            }
            None => {
                return Err(
                    self.error("the count of `setmaxnreg` must be a `u32` compile-time constant")
                )
            }
        };
        // ptxas ignores `setmaxnreg` unless the register count at entry is
        // fixed, which the block shape does (with a bound on blocks per SM).
        let Some(threads) = self.threads else {
            return Err(self.error(
                "`setmaxnreg` needs the block shape fixed: declare `block(..)` in `#[kernel(..)]`",
            ));
        };
        if grow {
            return Ok(());
        }
        let ceiling = self.register_ceiling(threads);
        if n > ceiling.registers {
            return Err(self.error(format!(
                "`setmaxnreg_dec` to {n} registers is more than {} ({}), and ptxas refuses a decrease past it: decrease to at most {}",
                ceiling.reason, ceiling.registers, ceiling.registers
            )));
        }
        Ok(())
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
        self.fragment_block(
            &mma.acc,
            mma.kind.accumulator(),
            n / 2,
            function,
            "accumulator",
            true,
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
            // Swizzled rows run on through the dimensions outside them while
            // those are indexed by constants (a tile kept in parts, as
            // `[[[T; K]; ROWS / 2]; 2]`, is read as one): the rows left are
            // those up to the end of that run.
            let mut left = dims[rank - 2] - r0;
            if d.swizzle != Swizzle::None && dims[rank - 2] % 8 == 0 {
                let mut span = dims[rank - 2];
                for axis in (0..rank - 2).rev() {
                    let Some(i) = at(axis) else { break };
                    left += (dims[axis] - 1 - i) * span;
                    span *= dims[axis];
                }
            }
            if r0 % 8 != 0 || i64::from(rows) > left {
                return Err(self.error(format!(
                    "the {which} tile of `{function}` starts at row {r0} of `{name}` ({left} rows from there) and takes {rows} rows: \
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
