//! Invariants of warp matrix operations and asynchronous copies: fragment
//! shapes and element types, the memory each operand lives in, sparse
//! selectors, copy sizes and the alignment of compile-time offsets.

use super::Validator;
use crate::ir::{Expr, Fragment, MatrixOp, ParamType, Place, Scalar, Space, WmmaOperand};
use crate::Error;

impl Validator<'_> {
    pub(super) fn matrix(&mut self, op: &MatrixOp) -> Result<(), Error> {
        let function = op.function();
        match op {
            MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            } => {
                if !matches!(count, 1 | 2 | 4) {
                    return Err(self.error(format!(
                        "`{function}` loads 1, 2 or 4 matrices, not {count}"
                    )));
                }
                self.fragment(dst, Scalar::U32, *count, &function, "destination", true)?;
                let ty = self.place(src, false)?;
                self.require_shared(src, &function, "row address")?;
                // Rows are 16 bytes, moved as 16-bit pairs: any element of up to 32
                // bits arrives whole, but only 16-bit elements (or 8-bit pairs) can
                // be transposed.
                let widest = if *transpose { 2 } else { 4 };
                if ty.size_bytes() > widest {
                    return Err(self.error(format!(
                        "`{function}` reads elements of at most {} bits, but its row address points into a `{}` array",
                        widest * 8,
                        ty.name()
                    )));
                }
            }
            MatrixOp::Mma { kind, acc, a, b } => {
                let (a_regs, b_regs, acc_regs) = kind.registers();
                self.fragment(
                    acc,
                    kind.accumulator(),
                    acc_regs,
                    &function,
                    "accumulator",
                    true,
                )?;
                self.fragment(a, Scalar::U32, a_regs, &function, "A fragment", false)?;
                self.fragment(b, Scalar::U32, b_regs, &function, "B fragment", false)?;
            }
            MatrixOp::MmaSparse {
                kind,
                ordered: _,
                acc,
                a,
                b,
                metadata,
                selector,
            } => {
                let (a_regs, b_regs, acc_regs) = kind.registers();
                self.fragment(acc, Scalar::F32, acc_regs, &function, "accumulator", true)?;
                self.fragment(a, Scalar::U32, a_regs, &function, "A fragment", false)?;
                self.fragment(b, Scalar::U32, b_regs, &function, "B fragment", false)?;
                self.expr(metadata)?;
                if metadata.ty != Scalar::U32 {
                    return Err(self.error(format!(
                        "the metadata of `{function}` must be a `u32`, not `{}`",
                        metadata.ty.name()
                    )));
                }
                self.expr(selector)?;
                if selector.ty != Scalar::U32 {
                    return Err(self.error(format!(
                        "the selector of `{function}` must be a `u32`, not `{}`",
                        selector.ty.name()
                    )));
                }
                match selector.as_int() {
                    Some(0 | 1) => {}
                    Some(v) => {
                        return Err(self.error(format!(
                            "the selector of `{function}` is {v}: m16n8k32 takes 0 (metadata from lanes t = 0, 1 of each quad) or 1 (t = 2, 3)"
                        )))
                    }
                    None => {
                        return Err(self.error(format!(
                            "the selector of `{function}` is not a compile-time constant: write 0 or 1, a const parameter or an `#[unroll]` loop variable"
                        )))
                    }
                }
            }
            MatrixOp::WmmaLoad {
                operand,
                layout: _,
                dst,
                src,
                stride,
            } => {
                let (elem, memory) = match operand {
                    WmmaOperand::C => (Scalar::F32, Scalar::F32),
                    _ => (Scalar::U32, Scalar::F16),
                };
                self.fragment(dst, elem, 8, &function, "destination", true)?;
                self.matrix_memory(src, memory, false, &function)?;
                self.stride(stride, &function)?;
            }
            MatrixOp::Wmma { acc, a, b, .. } => {
                self.fragment(acc, Scalar::F32, 8, &function, "accumulator", true)?;
                self.fragment(a, Scalar::U32, 8, &function, "A fragment", false)?;
                self.fragment(b, Scalar::U32, 8, &function, "B fragment", false)?;
            }
            MatrixOp::WmmaStore {
                layout: _,
                dst,
                src,
                stride,
            } => {
                self.matrix_memory(dst, Scalar::F32, true, &function)?;
                self.fragment(src, Scalar::F32, 8, &function, "accumulator", false)?;
                self.stride(stride, &function)?;
            }
        }
        Ok(())
    }

    pub(super) fn async_copy(
        &mut self,
        dst: &Place,
        src: &Place,
        bytes: u32,
        src_bytes: &Expr,
    ) -> Result<(), Error> {
        if !matches!(bytes, 4 | 8 | 16) {
            return Err(self.error(format!("`cp_async` copies 4, 8 or 16 bytes, not {bytes}")));
        }
        let dst_ty = self.place(dst, true)?;
        self.require_shared(dst, "cp_async", "destination")?;
        let src_ty = self.place(src, false)?;
        if !matches!(src, Place::Global { .. }) {
            return Err(self.error("the source of `cp_async` must be an element of a slice"));
        }
        if dst_ty != src_ty {
            return Err(self.error(format!(
                "`cp_async` copies between arrays of one element type, not `{}` to `{}`",
                src_ty.name(),
                dst_ty.name()
            )));
        }
        if !bytes.is_multiple_of(dst_ty.size_bytes()) {
            return Err(self.error(format!(
                "`cp_async` of {bytes} bytes does not hold a whole number of `{}` elements",
                dst_ty.name()
            )));
        }
        self.expr(src_bytes)?;
        if src_bytes.ty != Scalar::U32 {
            return Err(self.error("the source byte count of `cp_async` must be a `u32`"));
        }
        if let Some(n) = src_bytes.as_int() {
            if n > bytes as i64 {
                return Err(self.error(format!(
                    "`cp_async` of {bytes} bytes reads {n} source bytes: at most {bytes} (fewer zero-fill the rest)"
                )));
            }
        }
        // Both addresses must be multiples of the copy size: the array starts
        // are (arrays are laid out 128-byte aligned), so a constant offset
        // within the array must be too.
        if let Some(offset) = self.constant_shared_offset(dst) {
            if offset % bytes as i64 != 0 {
                return Err(self.error(format!(
                    "`cp_async` of {bytes} bytes writes byte {offset} of its shared array, which is not a multiple of {bytes}: \
                     align the destination index to {} elements",
                    bytes / dst_ty.size_bytes()
                )));
            }
        }
        Ok(())
    }

    /// The byte offset of a shared element within its array, when every index is a literal.
    fn constant_shared_offset(&self, place: &Place) -> Option<i64> {
        let Place::Local { local, indices } = place else {
            return None;
        };
        let decl = &self.kernel.locals[*local as usize];
        let mut flat = 0i64;
        for (index, dim) in indices.iter().zip(&decl.dims) {
            flat = flat * dim.as_int()? + index.as_int()?;
        }
        Some(flat * decl.ty.size_bytes() as i64)
    }

    pub(super) fn require_shared(
        &self,
        place: &Place,
        function: &str,
        role: &str,
    ) -> Result<(), Error> {
        match place {
            Place::Local { local, .. }
                if self.kernel.locals[*local as usize].space == Space::Shared =>
            {
                Ok(())
            }
            _ => Err(self.error(format!(
                "the {role} of `{function}` must be an element of a shared array"
            ))),
        }
    }

    /// A `wmma` load source or store destination: shared or global, of `ty`.
    fn matrix_memory(
        &mut self,
        place: &Place,
        ty: Scalar,
        write: bool,
        function: &str,
    ) -> Result<(), Error> {
        let got = self.place(place, write)?;
        let in_memory = match place {
            Place::Global { param, .. } => matches!(
                self.kernel.params[*param as usize].ty,
                ParamType::Slice { .. }
            ),
            Place::Local { local, .. } => {
                self.kernel.locals[*local as usize].space == Space::Shared
            }
        };
        if !in_memory {
            return Err(self.error(format!(
                "`{function}` works on shared arrays and slices, not on registers"
            )));
        }
        if got != ty {
            return Err(self.error(format!(
                "the matrix of `{function}` must hold `{}`, not `{}`",
                ty.name(),
                got.name()
            )));
        }
        Ok(())
    }

    fn stride(&mut self, stride: &Expr, function: &str) -> Result<(), Error> {
        self.expr(stride)?;
        if stride.ty != Scalar::U32 {
            return Err(self.error(format!("the stride of `{function}` must be a `u32`")));
        }
        Ok(())
    }

    /// A fragment: a row of `len` elements of type `elem` of a register array in scope.
    pub(super) fn fragment(
        &mut self,
        fragment: &Fragment,
        elem: Scalar,
        len: u32,
        function: &str,
        role: &str,
        write: bool,
    ) -> Result<(), Error> {
        self.fragment_block(fragment, elem, len, function, role, write, false)
    }

    /// A fragment, or with `block` any sub-array of a register array (the
    /// elements below its indices, row-major): a wgmma's accumulators,
    /// which a kernel may keep as `[[[f32; 4]; N / 8]; ..]` for the `mma`
    /// epilogue.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fragment_block(
        &mut self,
        fragment: &Fragment,
        elem: Scalar,
        len: u32,
        function: &str,
        role: &str,
        write: bool,
        block: bool,
    ) -> Result<(), Error> {
        self.check_local_id(fragment.local)?;
        let decl = &self.kernel.locals[fragment.local as usize];
        let name = &decl.name;
        if !self.in_scope[fragment.local as usize] {
            return Err(self.error(format!(
                "`{name}` is used before its `let` (or outside its scope)"
            )));
        }
        if decl.space != Space::Register || decl.dims.is_empty() {
            return Err(self.error(format!(
                "the {role} of `{function}` must be a register array, and `{name}` is not"
            )));
        }
        if write && !decl.mutable {
            return Err(self.error(format!(
                "`{function}` writes `{name}`, which is not mutable: declare it with `let mut`"
            )));
        }
        if block && fragment.indices.len() + 1 < decl.dims.len() {
            let below: i64 = decl.dims[fragment.indices.len()..]
                .iter()
                .map(|d| d.as_int().unwrap_or(0))
                .product();
            if decl.ty != elem || below != i64::from(len) {
                return Err(self.error(format!(
                    "the {role} of `{function}` is {len} `{}` per thread, but the part of `{name}` given holds {below} `{}`",
                    elem.name(),
                    decl.ty.name()
                )));
            }
        } else if fragment.indices.len() + 1 != decl.dims.len() {
            return Err(self.error(format!(
                "a fragment is one row of a register array: `{name}` has {} dimension(s), so it takes {} index(es), not {}",
                decl.dims.len(),
                decl.dims.len() - 1,
                fragment.indices.len()
            )));
        }
        for (axis, (index, dim)) in fragment.indices.iter().zip(&decl.dims).enumerate() {
            self.expr(index)?;
            let len = dim.as_int().unwrap_or(0);
            match index.as_int() {
                Some(i) if index.ty.is_int() && (0..len).contains(&i) => {}
                Some(i) => {
                    return Err(self.error(format!(
                        "index {axis} of `{name}` is {i}, out of bounds for dimension {axis} of length {len}"
                    )))
                }
                None => {
                    return Err(self.error(format!(
                        "index {axis} of the fragment `{name}` is not a compile-time constant: \
                         index register arrays only with literals, const params and `#[unroll]` loop variables"
                    )))
                }
            }
        }
        let row = decl.dims.last().and_then(Expr::as_int).unwrap_or(0);
        let is_row = fragment.indices.len() + 1 == decl.dims.len();
        if is_row && (decl.ty != elem || row != len as i64) {
            return Err(self.error(format!(
                "the {role} of `{function}` is {len} `{}` per lane, but a row of `{name}` is {row} `{}`: declare `{name}` with rows of `[{}; {len}]`",
                elem.name(),
                decl.ty.name(),
                elem.name()
            )));
        }
        Ok(())
    }
}
