//! Warp-collective matrix operations (`ldmatrix_*`, `mma_*`, `wmma_*`) and
//! asynchronous copies (`cp_async*`): statements over fragments (rows of
//! register arrays) and places.
//!
//! The front checks what the syntax and the types decide: argument shapes,
//! element types, that fragments are rows of register arrays and sources are
//! shared or global elements. Fragment lengths, copy sizes and wait counts
//! may depend on const params; the validator checks them per variant.

use super::{call_name, index_chain, peel, Access, Binding, ConstantRole, Lowered, Lowerer};
use crate::ir::{
    Expr, Fragment, MatrixLayout, MatrixOp, MmaKind, ParamType, Place, Scalar, Space,
    SparseMmaKind, Stmt, WmmaOperand,
};

/// The statement functions of this module, for the list of callable functions.
pub const WARP_FUNCTIONS: &str = "ldmatrix_x1/x2/x4[_trans], mma_m16n8k16_f16, mma_m16n8k16_bf16, \
     mma_m16n8k8_tf32, mma_m16n8k32_s8, mma_m16n8k32_u8, mma_sp[_ordered]_m16n8k32_{f16,bf16}, \
     wmma_load_{a,b,c}_{row,col}, \
     wmma_mma_{row,col}_{row,col}, wmma_store_{row,col}, cp_async, cp_async_commit, cp_async_wait";

/// Whether `name` is one of this module's statement functions.
pub fn is_warp_statement(name: &str) -> bool {
    name.starts_with("ldmatrix_")
        || name.starts_with("mma_")
        || name.starts_with("wmma_")
        || name.starts_with("cp_async")
}

fn layout(name: &str) -> Option<MatrixLayout> {
    match name {
        "row" => Some(MatrixLayout::Row),
        "col" => Some(MatrixLayout::Col),
        _ => None,
    }
}

impl Lowerer<'_> {
    /// Lowers a call statement to one of [`WARP_FUNCTIONS`].
    pub(super) fn warp_statement(&mut self, c: &syn::ExprCall) -> Lowered<Stmt> {
        let name = call_name(c).unwrap_or_default();
        if let Some(rest) = name.strip_prefix("ldmatrix_x") {
            let (count, transpose) = match rest {
                "1" => (1, false),
                "2" => (2, false),
                "4" => (4, false),
                "1_trans" => (1, true),
                "2_trans" => (2, true),
                "4_trans" => (4, true),
                _ => return self.unknown_warp_function(c, &name),
            };
            self.arity(c, &c.args, 2, &name)?;
            let dst = self.fragment(&c.args[0], Scalar::U32, &name, "destination", true)?;
            let src = self.shared_element(&c.args[1], &name)?;
            return Ok(Stmt::Matrix(MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            }));
        }
        if let Some(kind) = MmaKind::ALL.into_iter().find(|k| k.function() == name) {
            self.arity(c, &c.args, 3, &name)?;
            let acc = self.fragment(&c.args[0], kind.accumulator(), &name, "accumulator", true)?;
            let a = self.fragment(&c.args[1], Scalar::U32, &name, "A fragment", false)?;
            let b = self.fragment(&c.args[2], Scalar::U32, &name, "B fragment", false)?;
            return Ok(Stmt::Matrix(MatrixOp::Mma { kind, acc, a, b }));
        }
        if let Some((kind, ordered)) = SparseMmaKind::ALL
            .into_iter()
            .flat_map(|k| [(k, false), (k, true)])
            .find(|(k, ordered)| k.function(*ordered) == name)
        {
            return self.sparse_mma(c, kind, ordered, &name);
        }
        if let Some(rest) = name.strip_prefix("wmma_load_") {
            let operand = match rest.split_once('_') {
                Some(("a", _)) => WmmaOperand::A,
                Some(("b", _)) => WmmaOperand::B,
                Some(("c", _)) => WmmaOperand::C,
                _ => return self.unknown_warp_function(c, &name),
            };
            let Some(layout) = rest.split_once('_').and_then(|(_, l)| layout(l)) else {
                return self.unknown_warp_function(c, &name);
            };
            self.arity(c, &c.args, 3, &name)?;
            let elem = if operand == WmmaOperand::C {
                Scalar::F32
            } else {
                Scalar::U32
            };
            let dst = self.fragment(&c.args[0], elem, &name, "destination", true)?;
            let want = if operand == WmmaOperand::C {
                Scalar::F32
            } else {
                Scalar::F16
            };
            let src = self.matrix_element(&c.args[1], want, Access::Read, &name)?;
            let stride = self.stride(&c.args[2], &name)?;
            return Ok(Stmt::Matrix(MatrixOp::WmmaLoad {
                operand,
                layout,
                dst,
                src,
                stride,
            }));
        }
        if let Some(rest) = name.strip_prefix("wmma_mma_") {
            let Some((a_layout, b_layout)) = rest
                .split_once('_')
                .and_then(|(a, b)| Some((layout(a)?, layout(b)?)))
            else {
                return self.unknown_warp_function(c, &name);
            };
            self.arity(c, &c.args, 3, &name)?;
            let acc = self.fragment(&c.args[0], Scalar::F32, &name, "accumulator", true)?;
            let a = self.fragment(&c.args[1], Scalar::U32, &name, "A fragment", false)?;
            let b = self.fragment(&c.args[2], Scalar::U32, &name, "B fragment", false)?;
            return Ok(Stmt::Matrix(MatrixOp::Wmma {
                a_layout,
                b_layout,
                acc,
                a,
                b,
            }));
        }
        if let Some(rest) = name.strip_prefix("wmma_store_") {
            let Some(layout) = layout(rest) else {
                return self.unknown_warp_function(c, &name);
            };
            self.arity(c, &c.args, 3, &name)?;
            let dst = self.matrix_element(&c.args[0], Scalar::F32, Access::Write, &name)?;
            let src = self.fragment(&c.args[1], Scalar::F32, &name, "accumulator", false)?;
            let stride = self.stride(&c.args[2], &name)?;
            return Ok(Stmt::Matrix(MatrixOp::WmmaStore {
                layout,
                dst,
                src,
                stride,
            }));
        }
        match name.as_str() {
            "cp_async" => self.async_copy(c),
            "cp_async_commit" => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Stmt::AsyncCommit)
            }
            "cp_async_wait" => {
                self.arity(c, &c.args, 1, &name)?;
                let pending = self.expr(&c.args[0], Some(Scalar::U32))?;
                self.check_type(
                    &c.args[0],
                    pending.ty,
                    Scalar::U32,
                    "the number of groups left pending",
                )?;
                self.check_constant(
                    &c.args[0],
                    &pending,
                    ConstantRole::Size("the number of groups `cp_async_wait` leaves pending"),
                )?;
                Ok(Stmt::AsyncWait { pending })
            }
            _ => self.unknown_warp_function(c, &name),
        }
    }

    /// `mma_sp[_ordered]_m16n8k32_*(&mut acc, &a, &b, metadata, selector)`.
    fn sparse_mma(
        &mut self,
        c: &syn::ExprCall,
        kind: SparseMmaKind,
        ordered: bool,
        name: &str,
    ) -> Lowered<Stmt> {
        self.arity(c, &c.args, 5, name)?;
        let acc = self.fragment(&c.args[0], Scalar::F32, name, "accumulator", true)?;
        let a = self.fragment(&c.args[1], Scalar::U32, name, "A fragment", false)?;
        let b = self.fragment(&c.args[2], Scalar::U32, name, "B fragment", false)?;
        let metadata = self.expr(&c.args[3], Some(Scalar::U32))?;
        self.check_type(
            &c.args[3],
            metadata.ty,
            Scalar::U32,
            "the sparsity metadata word",
        )?;
        let selector = self.expr(&c.args[4], Some(Scalar::U32))?;
        self.check_type(
            &c.args[4],
            selector.ty,
            Scalar::U32,
            "the sparsity selector",
        )?;
        self.check_constant(
            &c.args[4],
            &selector,
            ConstantRole::Immediate("the sparsity selector (0 or 1)"),
        )?;
        Ok(Stmt::Matrix(MatrixOp::MmaSparse {
            kind,
            ordered,
            acc,
            a,
            b,
            metadata,
            selector,
        }))
    }

    fn unknown_warp_function<T>(&mut self, c: &syn::ExprCall, name: &str) -> Lowered<T> {
        self.err(
            &c.func,
            format!("unknown function `{name}`: the warp matrix and async copy functions are {WARP_FUNCTIONS}"),
        )
    }

    /// `cp_async(&mut tile[..], &src[i], BYTES, src_bytes)`.
    fn async_copy(&mut self, c: &syn::ExprCall) -> Lowered<Stmt> {
        self.arity(c, &c.args, 4, "cp_async")?;
        let Some(dst_expr) = mut_ref(&c.args[0]) else {
            return self.err(&c.args[0], "the first argument of `cp_async` is the shared destination, written `&mut tile[i][j]`");
        };
        let (dst, dst_ty) = self.place(dst_expr, Access::Write)?;
        if !self.is_shared(&dst) {
            return self.err(dst_expr, "`cp_async` copies into shared memory: the destination must be an element of a `shared()` array");
        }
        let Some(src_expr) = shared_ref(&c.args[1]) else {
            return self.err(&c.args[1], "the second argument of `cp_async` is the source element, written `&src[i]` for a slice parameter `src`");
        };
        let (src, src_ty) = self.place(src_expr, Access::Read)?;
        if !matches!(src, Place::Global { .. }) {
            return self.err(src_expr, "`cp_async` copies from global memory: the source must be an element of a slice parameter");
        }
        if src_ty != dst_ty {
            return self.err(
                &c.args[1],
                format!(
                    "`cp_async` copies bytes between arrays of one element type, but the destination holds `{}` and the source `{}`",
                    dst_ty.name(),
                    src_ty.name()
                ),
            );
        }
        let bytes = self.expr(&c.args[2], Some(Scalar::U32))?;
        self.check_type(&c.args[2], bytes.ty, Scalar::U32, "the copy size")?;
        self.check_constant(
            &c.args[2],
            &bytes,
            ConstantRole::Size("the size of a `cp_async` copy"),
        )?;
        let Some(bytes) = bytes.as_int() else {
            return self.err(
                &c.args[2],
                "the size of a `cp_async` copy is written as a literal: 4, 8 or 16",
            );
        };
        if !matches!(bytes, 4 | 8 | 16) {
            return self.err(
                &c.args[2],
                format!("`cp_async` copies 4, 8 or 16 bytes, not {bytes}: split larger copies, and copy smaller pieces with plain loads and stores"),
            );
        }
        let src_bytes = self.expr(&c.args[3], Some(Scalar::U32))?;
        self.check_type(
            &c.args[3],
            src_bytes.ty,
            Scalar::U32,
            "the number of source bytes to read",
        )?;
        Ok(Stmt::AsyncCopy {
            dst,
            src,
            bytes: bytes as u32,
            src_bytes,
        })
    }

    fn is_shared(&self, place: &Place) -> bool {
        matches!(place, Place::Local { local, .. } if self.locals[*local as usize].space == Space::Shared)
    }

    /// `&mut frag` or `&frag[i]`: a row of a register array of element type `elem`.
    fn fragment(
        &mut self,
        arg: &syn::Expr,
        elem: Scalar,
        function: &str,
        role: &str,
        writes: bool,
    ) -> Lowered<Fragment> {
        let inner = if writes {
            mut_ref(arg)
        } else {
            shared_ref(arg)
        };
        let Some(inner) = inner else {
            let form = if writes { "&mut frag[i]" } else { "&frag[i]" };
            return self.err(
                arg,
                format!("the {role} of `{function}` is a register array row, written `{form}`"),
            );
        };
        let (root, index_exprs) = index_chain(inner);
        let ident = match peel(root) {
            syn::Expr::Path(p) => self.path_ident(p)?,
            other => {
                return self.err(
                    other,
                    format!("the {role} of `{function}` must be a register array or a row of one"),
                )
            }
        };
        let id = match self.resolve(&ident)? {
            Binding::Local(id) => id,
            Binding::Broken => return Err(super::Reported),
            _ => {
                return self.err(inner, format!("`{ident}` is a parameter: the {role} of `{function}` must be a register array declared in the kernel, e.g. `let mut {ident} = [0{}; 4];`", elem.name()))
            }
        };
        let local = &self.locals[id as usize];
        let (ty, space, rank, mutable) = (local.ty, local.space, local.dims.len(), local.mutable);
        if space != Space::Register || rank == 0 {
            return self.err(inner, format!("the {role} of `{function}` must be a register array (`let mut {ident} = [0{}; N];`), not a {}", elem.name(), if rank == 0 { "scalar" } else { "shared array" }));
        }
        if index_exprs.len() + 1 != rank {
            return self.err(
                inner,
                format!("`{ident}` has {rank} dimension(s): a fragment is one row, indexed by all but the last dimension ({} index(es))", rank - 1),
            );
        }
        if ty != elem {
            let what = if elem == Scalar::U32 {
                "packed 32-bit words (`u32`): fill them with `ldmatrix_*`, `pack_f16x2`, `pack_bf16x2` or `to_tf32`".to_string()
            } else {
                format!("`{}` elements", elem.name())
            };
            return self.err(
                inner,
                format!(
                    "the {role} of `{function}` holds {what}, but `{ident}` holds `{}`",
                    ty.name()
                ),
            );
        }
        if writes && !mutable {
            return self.err(
                inner,
                format!("`{function}` writes `{ident}`: declare it `let mut {ident}`"),
            );
        }
        let mut indices = Vec::new();
        for idx in index_exprs {
            let index = self.expr(idx, Some(Scalar::U32))?;
            self.check_constant(idx, &index, ConstantRole::RegisterIndex(&ident))?;
            indices.push(index);
        }
        Ok(Fragment { local: id, indices })
    }

    /// `&tile[r][c]`: an element of a shared array of a 16- or 8-bit type.
    fn shared_element(&mut self, arg: &syn::Expr, function: &str) -> Lowered<Place> {
        let Some(inner) = shared_ref(arg) else {
            return self.err(arg, format!("the second argument of `{function}` is this lane's row in shared memory, written `&tile[r][c]`"));
        };
        let (place, ty) = self.place(inner, Access::Read)?;
        if !self.is_shared(&place) {
            return self.err(inner, format!("`{function}` reads shared memory: the row must be an element of a `shared()` array"));
        }
        if ty.size_bytes() > 2 {
            return self.err(inner, format!("`{function}` moves 16-bit elements (8-bit pairs for s8/u8): the shared array holds `{}`; use `mma_m16n8k8_tf32` operands built with `to_tf32` for 32-bit data", ty.name()));
        }
        Ok(place)
    }

    /// The first element of a `wmma` matrix: shared or global, of type `want`.
    fn matrix_element(
        &mut self,
        arg: &syn::Expr,
        want: Scalar,
        access: Access,
        function: &str,
    ) -> Lowered<Place> {
        let inner = if access == Access::Write {
            mut_ref(arg)
        } else {
            shared_ref(arg)
        };
        let Some(inner) = inner else {
            let form = if access == Access::Write {
                "&mut m[i]"
            } else {
                "&m[i]"
            };
            return self.err(
                arg,
                format!("`{function}` takes the matrix's first element, written `{form}`"),
            );
        };
        let (place, ty) = self.place(inner, access)?;
        let in_memory = match &place {
            Place::Global { param, .. } => {
                matches!(self.params[*param as usize].ty, ParamType::Slice { .. })
            }
            Place::Local { .. } => self.is_shared(&place),
        };
        if !in_memory {
            return self.err(
                inner,
                format!("`{function}` works on shared arrays and slices, not on registers"),
            );
        }
        self.check_type(inner, ty, want, &format!("the matrix of `{function}`"))?;
        Ok(place)
    }

    fn stride(&mut self, arg: &syn::Expr, function: &str) -> Lowered<Expr> {
        let stride = self.expr(arg, Some(Scalar::U32))?;
        self.check_type(
            arg,
            stride.ty,
            Scalar::U32,
            &format!("the stride of `{function}`"),
        )?;
        Ok(stride)
    }
}

/// The operand of `&mut x`.
fn mut_ref(e: &syn::Expr) -> Option<&syn::Expr> {
    match peel(e) {
        syn::Expr::Reference(r) if r.mutability.is_some() => Some(&r.expr),
        _ => None,
    }
}

/// The operand of `&x`.
fn shared_ref(e: &syn::Expr) -> Option<&syn::Expr> {
    match peel(e) {
        syn::Expr::Reference(r) if r.mutability.is_none() => Some(&r.expr),
        _ => None,
    }
}
