//! The warp matrix operations and asynchronous copies, by the lane layouts
//! of docs/ptx.md, "mma.sync fragments", "ldmatrix" and "Sparse mma.sp".
//! Notation: lane `L`, `g = L / 4`, `t = L % 4`; a 32-bit word holds two
//! 16-bit elements (the lower index in the low half) or four bytes (the
//! lowest index in the lowest byte).
//!
//! Products (exact in `f64` for 16-bit, tf32 and 8-bit operands) are summed
//! in `f64` with the accumulator and rounded once to `f32`: the hardware's
//! order and internal precision are unspecified, so compare float results
//! within a tolerance. Integer accumulators wrap (no
//! `.satfinite`). tf32 operands are read by truncation (the low 13 bits of the
//! word ignored), as the Tensor Cores read them.
//!
//! `wmma` fragments, whose layout the hardware leaves unspecified, use the
//! interpreter's own: lane `L` holds row `L % 16` of A (its 16 elements in 8
//! words), column `L % 16` of B (k in 8 words), and of the 16 x 16
//! accumulator row `L / 2`, columns `8 (L % 2)..+8`. `wmma_mma`'s layouts must
//! match the loads' on the GPU; here the fragments hold logical elements,
//! so a mismatch is not detected.

use super::machine::{self, lanes, Lanes, Machine, Mem, Resolved, Warp, FULL, NOTHING};
use super::value::{self, Fault};
use super::ErrorKind;
use crate::ir::{
    Expr, Fragment, Literal, MatrixLayout, MatrixOp, MmaKind, Place, Scalar, Space, SparseMmaKind,
    WmmaOperand,
};
use crate::print;

impl<'k> Machine<'k> {
    /// The first register slot of a fragment of `len` registers.
    fn fragment_slot(&self, frag: &Fragment, len: usize) -> Result<usize, Fault> {
        let id = frag.local as usize;
        let decl = self.kernel.local(frag.local);
        let dims = &self.layout.dims[id];
        let Some((&row_len, outer)) = dims.split_last() else {
            return Err(Fault::invalid(format!("`{}` is not an array", decl.name)));
        };
        if decl.space != Space::Register || row_len != len || frag.indices.len() != outer.len() {
            return Err(Fault::invalid(format!(
                "`{}` is not a register fragment of {len} elements",
                decl.name
            )));
        }
        let mut row = 0usize;
        for (index, &n) in frag.indices.iter().zip(outer) {
            let i = index
                .as_int()
                .filter(|&i| i >= 0 && (i as usize) < n)
                .ok_or_else(|| {
                    Fault::invalid(format!(
                        "a fragment index of `{}` is not a literal within bounds",
                        decl.name
                    ))
                })?;
            row = row * n + i as usize;
        }
        Ok(self.layout.offset[id] + row * row_len)
    }

    /// Every lane's value of each register of a fragment (all written before).
    fn fragment_in(
        &self,
        w: &Warp<'k>,
        frag: &Fragment,
        len: usize,
        what: &str,
        function: &str,
    ) -> Result<Vec<Lanes>, Fault> {
        let first = self.fragment_slot(frag, len)?;
        let mut out = vec![[NOTHING; 32]; len];
        let ty = self.kernel.local(frag.local).ty;
        for (j, regs) in out.iter_mut().enumerate() {
            for l in 0..32u32 {
                let slot = w.regs[(first + j) * 32 + l as usize];
                if !self.check_uninitialized {
                    regs[l as usize] = slot.unwrap_or(value::from_bits(ty, 0));
                    continue;
                }
                regs[l as usize] = slot.ok_or_else(|| {
                    Fault::new(
                        ErrorKind::Uninitialized,
                        format!(
                            "`{function}` reads its {what} `{}`, whose register {j} holds no value in this lane: \
                             nothing wrote it, or it was loaded from shared memory no thread of the block wrote",
                            self.kernel.local(frag.local).name
                        ),
                    )
                    .at(l)
                })?;
            }
        }
        Ok(out)
    }

    fn fragment_out(
        &self,
        w: &mut Warp<'k>,
        frag: &Fragment,
        values: &[Lanes],
    ) -> Result<(), Fault> {
        let values: Vec<[Option<Literal>; 32]> = values.iter().map(|regs| regs.map(Some)).collect();
        self.fragment_out_opt(w, frag, &values)
    }

    /// Writes a fragment whose registers may hold no value (loaded from
    /// shared memory that nothing wrote): an error only where an operation
    /// reads them.
    fn fragment_out_opt(
        &self,
        w: &mut Warp<'k>,
        frag: &Fragment,
        values: &[[Option<Literal>; 32]],
    ) -> Result<(), Fault> {
        let first = self.fragment_slot(frag, values.len())?;
        for (j, regs) in values.iter().enumerate() {
            for (l, v) in regs.iter().enumerate() {
                w.regs[(first + j) * 32 + l] = *v;
            }
        }
        Ok(())
    }

    pub(super) fn matrix(
        &mut self,
        w: &mut Warp<'k>,
        op: &'k MatrixOp,
        mask: u32,
    ) -> Result<(), Fault> {
        let function = op.function();
        if w.existing != FULL {
            return Err(Fault::new(
                ErrorKind::WarpDivergence,
                format!(
                    "`{function}` needs the 32 lanes of a full warp, but this warp has {} (the block has {} threads)",
                    w.existing.count_ones(),
                    self.threads
                ),
            ));
        }
        self.collective(w, mask, &function)?;
        match op {
            MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            } => self.load_matrix(w, *count, *transpose, dst, src, &function),
            MatrixOp::Mma { kind, acc, a, b } => self.mma(w, *kind, acc, a, b, &function),
            MatrixOp::MmaSparse {
                kind,
                ordered: _,
                acc,
                a,
                b,
                metadata,
                selector,
            } => self.mma_sparse(w, *kind, acc, a, b, metadata, selector, &function),
            MatrixOp::WmmaLoad {
                operand,
                layout,
                dst,
                src,
                stride,
            } => self.wmma_load(w, *operand, *layout, dst, src, stride, &function),
            MatrixOp::Wmma { acc, a, b, .. } => self.wmma(w, acc, a, b, &function),
            MatrixOp::WmmaStore {
                layout,
                dst,
                src,
                stride,
            } => self.wmma_store(w, *layout, dst, src, stride, &function),
        }
    }

    /// The bytes `[at, at + len)` of a shared array, checked to lie inside it
    /// and (for a read) to have been written.
    fn shared_span(
        &self,
        place: &Place,
        at: usize,
        len: usize,
        read: bool,
        function: &str,
    ) -> Result<(), Fault> {
        let Place::Local { local, .. } = place else {
            return Err(Fault::invalid(format!("`{function}` needs a shared array")));
        };
        let id = *local as usize;
        let decl = self.kernel.local(*local);
        let start = self.layout.offset[id];
        let end = start + self.layout.elems[id] * decl.ty.size_bytes() as usize;
        if at + len > end {
            return Err(Fault::new(
                ErrorKind::OutOfBounds,
                format!(
                    "`{function}` at `{}` spans bytes {}..{} of the shared array `{}: {}`, which has {} bytes",
                    print::place_text(self.kernel, place),
                    at - start,
                    at - start + len,
                    decl.name,
                    machine::array_type(decl.ty, &self.layout.dims[id]),
                    end - start
                ),
            ));
        }
        if read && self.check_uninitialized && self.shared_init[at..at + len].iter().any(|b| !b) {
            return Err(Fault::new(
                ErrorKind::Uninitialized,
                format!(
                    "`{function}` at `{}` reads bytes of `{}` that no thread of the block wrote",
                    print::place_text(self.kernel, place),
                    decl.name
                ),
            ));
        }
        Ok(())
    }

    fn load_matrix(
        &mut self,
        w: &mut Warp<'k>,
        count: u32,
        transpose: bool,
        dst: &Fragment,
        src: &Place,
        function: &str,
    ) -> Result<(), Fault> {
        if !matches!(count, 1 | 2 | 4) {
            return Err(Fault::invalid(format!(
                "`{function}` loads 1, 2 or 4 matrices"
            )));
        }
        // Lanes 0..8 count give the rows' addresses; the others are not read.
        let used = if count == 4 {
            FULL
        } else {
            (1u32 << (8 * count)) - 1
        };
        let r = self.resolve(w, src, used, "row address")?;
        if r.mem != Mem::Shared {
            return Err(Fault::invalid(format!("`{function}` reads shared memory")));
        }
        for l in lanes(used) {
            let at = r.at[l as usize];
            if at % 16 != 0 {
                return Err(Fault::new(
                    ErrorKind::Misaligned,
                    format!(
                        "`{function}`'s row address `{}` is byte {at} of shared memory, not a multiple of 16",
                        print::place_text(self.kernel, src)
                    ),
                )
                .at(l));
            }
            self.shared_span(src, at, 16, false, function)
                .map_err(|f| f.at(l))?;
        }
        let byte =
            |row_lane: u32, offset: u32| self.shared[r.at[row_lane as usize] + offset as usize];
        let written = |row_lane: u32, offset: u32| {
            !self.check_uninitialized || self.shared_init[r.at[row_lane as usize] + offset as usize]
        };
        let mut out = vec![[None; 32]; count as usize];
        for (j, regs) in out.iter_mut().enumerate() {
            let j = j as u32;
            for l in 0..32u32 {
                // (row lane, byte) of each byte of the word, lowest first.
                let bytes: [(u32, u32); 4] = if transpose {
                    // M[2 (L % 4)][L / 4] low, M[2 (L % 4) + 1][L / 4] high.
                    let (lo_row, hi_row) = (8 * j + 2 * (l % 4), 8 * j + 2 * (l % 4) + 1);
                    let col = 2 * (l / 4);
                    [
                        (lo_row, col),
                        (lo_row, col + 1),
                        (hi_row, col),
                        (hi_row, col + 1),
                    ]
                } else {
                    // Row L / 4, bytes 4 (L % 4)..+4.
                    let (row, col) = (8 * j + l / 4, 4 * (l % 4));
                    [(row, col), (row, col + 1), (row, col + 2), (row, col + 3)]
                };
                if bytes.iter().all(|&(row, b)| written(row, b)) {
                    let word = u32::from_le_bytes(bytes.map(|(row, b)| byte(row, b)));
                    regs[l as usize] = Some(Literal::Int(word as i64));
                }
            }
        }
        self.fragment_out_opt(w, dst, &out)
    }

    fn mma(
        &mut self,
        w: &mut Warp<'k>,
        kind: MmaKind,
        acc: &Fragment,
        a: &Fragment,
        b: &Fragment,
        function: &str,
    ) -> Result<(), Fault> {
        let (_, _, k) = kind.shape();
        let k = k as usize;
        let av = self.fragment_in(w, a, 4, "A fragment", function)?;
        let bv = self.fragment_in(w, b, 2, "B fragment", function)?;
        let cv = self.fragment_in(w, acc, 4, "accumulator", function)?;
        let word = |v: &[Lanes], i: usize, l: usize| {
            value::int_value(Scalar::U32, v[i][l]).map(|x| x as u32)
        };
        // A (16 x k) and B (k x 8) as f64 (integers exactly).
        let mut am = vec![[0f64; 32]; 16];
        let mut bm = vec![[0f64; 8]; 32];
        for l in 0..32usize {
            let (g, t) = (l / 4, l % 4);
            for i in 0..4 {
                let wa = word(&av, i, l).map_err(|f| f.at(l as u32))?;
                let row = g + 8 * (i & 1);
                match kind {
                    MmaKind::F16 | MmaKind::Bf16 => {
                        for h in 0..2 {
                            am[row][2 * t + 8 * (i >> 1) + h] =
                                half_of(kind == MmaKind::Bf16, wa, h);
                        }
                    }
                    MmaKind::Tf32 => am[row][t + 4 * (i >> 1)] = tf32(wa),
                    MmaKind::S8 | MmaKind::U8 => {
                        for byte in 0..4 {
                            am[row][4 * t + 16 * (i >> 1) + byte] =
                                byte_of(kind == MmaKind::S8, wa, byte);
                        }
                    }
                }
            }
            for i in 0..2 {
                let wb = word(&bv, i, l).map_err(|f| f.at(l as u32))?;
                match kind {
                    MmaKind::F16 | MmaKind::Bf16 => {
                        for h in 0..2 {
                            bm[2 * t + 8 * i + h][g] = half_of(kind == MmaKind::Bf16, wb, h);
                        }
                    }
                    MmaKind::Tf32 => bm[t + 4 * i][g] = tf32(wb),
                    MmaKind::S8 | MmaKind::U8 => {
                        for byte in 0..4 {
                            bm[4 * t + 16 * i + byte][g] = byte_of(kind == MmaKind::S8, wb, byte);
                        }
                    }
                }
            }
        }
        let out = accumulate(kind.accumulator(), &cv, |row, col| {
            (0..k).map(|kk| am[row][kk] * bm[kk][col]).collect()
        })?;
        self.fragment_out(w, acc, &out)
    }

    #[allow(clippy::too_many_arguments)]
    fn mma_sparse(
        &mut self,
        w: &mut Warp<'k>,
        kind: SparseMmaKind,
        acc: &Fragment,
        a: &Fragment,
        b: &Fragment,
        metadata: &Expr,
        selector: &Expr,
        function: &str,
    ) -> Result<(), Fault> {
        let bf16 = kind == SparseMmaKind::Bf16;
        let selector = selector
            .as_int()
            .filter(|s| matches!(s, 0 | 1))
            .ok_or_else(|| Fault::invalid(format!("the selector of `{function}` is not 0 or 1")))?
            as usize;
        let meta = self.eval(w, metadata, FULL)?;
        let av = self.fragment_in(w, a, 4, "A fragment", function)?;
        let bv = self.fragment_in(w, b, 4, "B fragment", function)?;
        let cv = self.fragment_in(w, acc, 4, "accumulator", function)?;
        let word = |v: &[Lanes], i: usize, l: usize| {
            value::int_value(Scalar::U32, v[i][l]).map(|x| x as u32)
        };
        // The compressed 16 x 16 tile of A, in the dense m16n8k16 A layout.
        let mut compressed = [[0f64; 16]; 16];
        let mut bm = [[0f64; 8]; 32];
        for l in 0..32usize {
            let (g, t) = (l / 4, l % 4);
            for i in 0..4 {
                let wa = word(&av, i, l).map_err(|f| f.at(l as u32))?;
                for h in 0..2 {
                    compressed[g + 8 * (i & 1)][2 * t + 8 * (i >> 1) + h] = half_of(bf16, wa, h);
                }
                let wb = word(&bv, i, l).map_err(|f| f.at(l as u32))?;
                for h in 0..2 {
                    bm[2 * t + 8 * i + h][g] = half_of(bf16, wb, h);
                }
            }
        }
        // Decompress by the metadata: row r, group G (4 columns of k) from
        // lane 4 (r % 8) + 2 selector + G / 4, half r / 8, nibble G % 4.
        let mut am = [[0f64; 32]; 16];
        for (r, row) in am.iter_mut().enumerate() {
            for group in 0..8 {
                let lane = 4 * (r % 8) + 2 * selector + group / 4;
                let e = value::int_value(Scalar::U32, meta[lane]).map_err(|f| f.at(lane as u32))?
                    as u32;
                let half = if r >= 8 { e >> 16 } else { e & 0xffff };
                let nibble = (half >> (4 * (group % 4))) & 0xf;
                let (i0, i1) = ((nibble & 3) as usize, (nibble >> 2) as usize);
                if i0 >= i1 {
                    return Err(Fault::new(
                        ErrorKind::Unsupported,
                        format!(
                            "`{function}`: the metadata nibble {nibble:#x} (row {r}, columns {}..{} of k) \
                             does not name two increasing positions (0x4, 0x8, 0x9, 0xc, 0xd or 0xe), \
                             which the PTX ISA leaves undefined",
                            4 * group,
                            4 * group + 4
                        ),
                    )
                    .at(lane as u32));
                }
                row[4 * group + i0] = compressed[r][2 * group];
                row[4 * group + i1] = compressed[r][2 * group + 1];
            }
        }
        let out = accumulate(Scalar::F32, &cv, |row, col| {
            (0..32).map(|kk| am[row][kk] * bm[kk][col]).collect()
        })?;
        self.fragment_out(w, acc, &out)
    }

    /// The element index where a `wmma` operand starts, the same in every
    /// lane, and the number of elements of its array or slice.
    fn wmma_base(
        &mut self,
        w: &mut Warp<'k>,
        place: &Place,
        stride: &Expr,
        what: &str,
        function: &str,
    ) -> Result<(Resolved, usize, usize, usize), Fault> {
        let r = self.resolve(w, place, FULL, what)?;
        let s = self.eval(w, stride, FULL)?;
        for l in 1..32 {
            if r.at[l] != r.at[0] || s[l] != s[0] {
                return Err(Fault::new(
                    ErrorKind::WarpDivergence,
                    format!(
                        "`{function}` takes one matrix address and stride for the warp, but lane {l}'s differ from lane 0's"
                    ),
                )
                .at(l as u32));
            }
        }
        let stride = value::int_value(stride.ty, s[0])?;
        let size = r.ty.size_bytes() as usize;
        let (base, elems, base_bytes) = match (r.mem, place) {
            (Mem::Shared, Place::Local { local, .. }) => {
                let start = self.layout.offset[*local as usize];
                (
                    (r.at[0] - start) / size,
                    self.layout.elems[*local as usize],
                    r.at[0],
                )
            }
            (Mem::Global(p), _) => match &self.params[p] {
                machine::ParamValue::Slice { len, .. } => (r.at[0] / size, *len, r.at[0]),
                _ => return Err(Fault::invalid("a scalar parameter as a matrix")),
            },
            _ => {
                return Err(Fault::invalid(format!(
                    "`{function}` reads shared or global memory"
                )))
            }
        };
        if base_bytes % 32 != 0 || (stride * size as i128) % 32 != 0 || stride < 0 {
            return Err(Fault::new(
                ErrorKind::Misaligned,
                format!(
                    "`{function}` at `{}` with stride {stride}: the matrix must start on a 32-byte boundary (it is at byte {base_bytes}) \
                     and each of its rows or columns too (the stride times {size} bytes a multiple of 32)",
                    print::place_text(self.kernel, place)
                ),
            ));
        }
        Ok((r, base, elems, stride as usize))
    }

    /// The element offset of `(row, col)` in a `wmma` operand.
    fn wmma_offset(layout: MatrixLayout, stride: usize, row: usize, col: usize) -> usize {
        match layout {
            MatrixLayout::Row => row * stride + col,
            MatrixLayout::Col => col * stride + row,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn wmma_load(
        &mut self,
        w: &mut Warp<'k>,
        operand: WmmaOperand,
        layout: MatrixLayout,
        dst: &Fragment,
        src: &Place,
        stride: &Expr,
        function: &str,
    ) -> Result<(), Fault> {
        let (r, base, elems, stride) = self.wmma_base(w, src, stride, "read", function)?;
        // The 16 x 16 matrix, as memory holds it (`None`: shared memory that
        // nothing wrote).
        let mut m = [[None; 16]; 16];
        let size = r.ty.size_bytes() as usize;
        for (row, line) in m.iter_mut().enumerate() {
            for (col, x) in line.iter_mut().enumerate() {
                let e = base + Self::wmma_offset(layout, stride, row, col);
                if e >= elems {
                    return Err(self.wmma_out_of_bounds(src, e, elems, function));
                }
                let at = r.at[0] + (e - base) * size;
                *x = match r.mem {
                    Mem::Shared => {
                        self.shared_span(src, at, size, false, function)?;
                        let written = !self.check_uninitialized
                            || self.shared_init[at..at + size].iter().all(|&b| b);
                        written
                            .then(|| value::from_bits(r.ty, machine::load(&self.shared, at, size)))
                    }
                    Mem::Global(p) => match &self.params[p] {
                        machine::ParamValue::Slice { bytes, .. } => {
                            Some(value::from_bits(r.ty, machine::load(bytes, at, size)))
                        }
                        _ => return Err(Fault::invalid("a scalar parameter as a matrix")),
                    },
                    Mem::Reg => return Err(Fault::invalid("a register array as a matrix")),
                };
            }
        }
        let mut out = vec![[None; 32]; 8];
        for l in 0..32usize {
            for (j, regs) in out.iter_mut().enumerate() {
                regs[l] = match operand {
                    WmmaOperand::C => m[l / 2][8 * (l % 2) + j],
                    WmmaOperand::A | WmmaOperand::B => {
                        let (lo, hi) = if operand == WmmaOperand::A {
                            (m[l % 16][2 * j], m[l % 16][2 * j + 1])
                        } else {
                            (m[2 * j][l % 16], m[2 * j + 1][l % 16])
                        };
                        match (lo, hi) {
                            (Some(lo), Some(hi)) => {
                                let lo = value::to_bits(Scalar::F16, lo)?;
                                let hi = value::to_bits(Scalar::F16, hi)?;
                                Some(Literal::Int((lo | hi << 16) as i64))
                            }
                            _ => None,
                        }
                    }
                };
            }
        }
        self.fragment_out_opt(w, dst, &out)
    }

    fn wmma_out_of_bounds(&self, place: &Place, e: usize, elems: usize, function: &str) -> Fault {
        Fault::new(
            ErrorKind::OutOfBounds,
            format!(
                "`{function}` at `{}` reaches element {e} of an array or slice of {elems} elements",
                print::place_text(self.kernel, place)
            ),
        )
    }

    fn wmma(
        &mut self,
        w: &mut Warp<'k>,
        acc: &Fragment,
        a: &Fragment,
        b: &Fragment,
        function: &str,
    ) -> Result<(), Fault> {
        let av = self.fragment_in(w, a, 8, "A fragment", function)?;
        let bv = self.fragment_in(w, b, 8, "B fragment", function)?;
        let cv = self.fragment_in(w, acc, 8, "accumulator", function)?;
        let mut am = [[0f64; 16]; 16];
        let mut bm = [[0f64; 16]; 16];
        for l in 0..16usize {
            for j in 0..8 {
                let wa =
                    value::int_value(Scalar::U32, av[j][l]).map_err(|f| f.at(l as u32))? as u32;
                let wb =
                    value::int_value(Scalar::U32, bv[j][l]).map_err(|f| f.at(l as u32))? as u32;
                for h in 0..2 {
                    am[l][2 * j + h] = half_of(false, wa, h);
                    bm[2 * j + h][l] = half_of(false, wb, h);
                }
            }
        }
        let mut out = vec![[NOTHING; 32]; 8];
        for l in 0..32usize {
            for (j, regs) in out.iter_mut().enumerate() {
                let (row, col) = (l / 2, 8 * (l % 2) + j);
                let c = value::float_value(Scalar::F32, cv[j][l]).map_err(|f| f.at(l as u32))?;
                let sum: f64 = c + (0..16).map(|k| am[row][k] * bm[k][col]).sum::<f64>();
                regs[l] = Literal::Float(sum as f32 as f64);
            }
        }
        self.fragment_out(w, acc, &out)
    }

    fn wmma_store(
        &mut self,
        w: &mut Warp<'k>,
        layout: MatrixLayout,
        dst: &Place,
        src: &Fragment,
        stride: &Expr,
        function: &str,
    ) -> Result<(), Fault> {
        let cv = self.fragment_in(w, src, 8, "accumulator", function)?;
        let (r, base, elems, stride) = self.wmma_base(w, dst, stride, "write", function)?;
        let size = r.ty.size_bytes() as usize;
        for l in 0..32usize {
            for (j, regs) in cv.iter().enumerate() {
                let (row, col) = (l / 2, 8 * (l % 2) + j);
                let e = base + Self::wmma_offset(layout, stride, row, col);
                if e >= elems {
                    return Err(self.wmma_out_of_bounds(dst, e, elems, function));
                }
                let at = r.at[0] + (e - base) * size;
                let bits = value::to_bits(r.ty, regs[l])?;
                match r.mem {
                    Mem::Shared => {
                        self.shared_span(dst, at, size, false, function)?;
                        machine::store(&mut self.shared, at, size, bits);
                        self.shared_init[at..at + size].fill(true);
                    }
                    Mem::Global(p) => {
                        if let machine::ParamValue::Slice { bytes, .. } = &mut self.params[p] {
                            machine::store(bytes, at, size, bits);
                        }
                    }
                    Mem::Reg => return Err(Fault::invalid("a register array as a matrix")),
                }
            }
        }
        Ok(())
    }

    /// `cp.async`, landing at once: `src_bytes` bytes from the slice, zeros
    /// to `bytes`.
    pub(super) fn async_copy(
        &mut self,
        w: &mut Warp<'k>,
        dst: &Place,
        src: &Place,
        bytes: u32,
        src_bytes: &Expr,
        mask: u32,
    ) -> Result<(), Fault> {
        let function = "cp_async";
        let d = self.resolve(w, dst, mask, "copy destination")?;
        let s = self.resolve(w, src, mask, "copy source")?;
        let n = self.eval(w, src_bytes, mask)?;
        let bytes = bytes as usize;
        for l in lanes(mask) {
            let count = value::int_value(Scalar::U32, n[l as usize]).map_err(|f| f.at(l))?;
            if count > bytes as i128 {
                return Err(Fault::new(
                    ErrorKind::OutOfBounds,
                    format!("`{function}` of {bytes} bytes reads {count} source bytes, more than it copies (undefined on the GPU)"),
                )
                .at(l));
            }
            let (to, from) = (d.at[l as usize], s.at[l as usize]);
            let Mem::Global(p) = s.mem else {
                return Err(Fault::invalid("a copy from anything but a slice"));
            };
            if d.mem != Mem::Shared {
                return Err(Fault::invalid("a copy to anything but a shared array"));
            }
            for (at, place, name) in [(to, dst, "destination"), (from, src, "source")] {
                if at % bytes != 0 {
                    return Err(Fault::new(
                        ErrorKind::Misaligned,
                        format!(
                            "`{function}` of {bytes} bytes: its {name} `{}` is at byte {at}, not a multiple of {bytes}",
                            print::place_text(self.kernel, place)
                        ),
                    )
                    .at(l));
                }
            }
            self.shared_span(dst, to, bytes, false, function)
                .map_err(|f| f.at(l))?;
            let machine::ParamValue::Slice {
                bytes: slice,
                len,
                elem,
            } = &self.params[p]
            else {
                return Err(Fault::invalid("a scalar parameter as a copy source"));
            };
            let total = len * elem.size_bytes() as usize;
            if from + bytes > total {
                return Err(Fault::new(
                    ErrorKind::OutOfBounds,
                    format!(
                        "`{function}` of {bytes} bytes from `{}` spans bytes {from}..{} of a slice of {total} bytes: \
                         the copy names all its bytes even when it reads fewer (point empty copies at element 0)",
                        print::place_text(self.kernel, src),
                        from + bytes
                    ),
                )
                .at(l));
            }
            let count = count as usize;
            let mut chunk = [0u8; 16];
            chunk[..count].copy_from_slice(&slice[from..from + count]);
            self.shared[to..to + bytes].copy_from_slice(&chunk[..bytes]);
            self.shared_init[to..to + bytes].fill(true);
        }
        Ok(())
    }
}

/// The 16-bit element `h` (0 low, 1 high) of a word, as f16 or bf16.
fn half_of(bf16: bool, word: u32, h: usize) -> f64 {
    let bits = (word >> (16 * h)) as u16;
    if bf16 {
        half::bf16::from_bits(bits).to_f64()
    } else {
        half::f16::from_bits(bits).to_f64()
    }
}

/// A tf32 operand word: an f32 whose low 13 bits the Tensor Cores ignore.
fn tf32(word: u32) -> f64 {
    f32::from_bits(word & !0x1fff) as f64
}

fn byte_of(signed: bool, word: u32, byte: usize) -> f64 {
    let b = (word >> (8 * byte)) as u8;
    if signed {
        b as i8 as f64
    } else {
        b as f64
    }
}

/// `D = C + products` in the accumulator layout (register `i` of lane `L`:
/// row `g + 8 (i / 2)`, column `2 t + i % 2`), with `products(row, col)` the
/// terms of the dot product. f32 sums round once; i32 sums wrap.
fn accumulate(
    ty: Scalar,
    c: &[Lanes],
    products: impl Fn(usize, usize) -> Vec<f64>,
) -> Result<Vec<Lanes>, Fault> {
    let mut out = vec![[NOTHING; 32]; 4];
    for l in 0..32usize {
        let (g, t) = (l / 4, l % 4);
        for (i, regs) in out.iter_mut().enumerate() {
            let (row, col) = (g + 8 * (i / 2), 2 * t + i % 2);
            let terms = products(row, col);
            regs[l] = if ty == Scalar::I32 {
                let acc = value::int_value(ty, c[i][l]).map_err(|f| f.at(l as u32))?;
                let sum: i128 = terms.iter().map(|&x| x as i128).sum();
                value::wrap(ty, acc + sum)
            } else {
                let acc = value::float_value(ty, c[i][l]).map_err(|f| f.at(l as u32))?;
                let sum: f64 = acc + terms.iter().sum::<f64>();
                Literal::Float(sum as f32 as f64)
            };
        }
    }
    Ok(out)
}
