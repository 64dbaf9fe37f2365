//! Hopper's statements (`sm_90`, `sm_90a`): mbarriers (`mbarrier_*`), the
//! fences that hand shared memory to the async proxy (`fence_*`) and the
//! warpgroup MMA (`wgmma_*`) with its shared-memory matrix descriptors
//! (`matrix_desc(&tile[r][c], SWIZZLE)`, written only as an operand of a
//! `wgmma_m64k*`).
//!
//! The front checks what the syntax and the types decide: an mbarrier is
//! an element of a `u64` shared array, a descriptor's tile an element of a
//! shared array of the wgmma's element type, the swizzle one of 0, 32, 64
//! and 128. Tile shapes, the accumulator's length and N depend on const
//! params; the validator checks them per variant.

use super::check::ConstantRole;
use super::place::Access;
use super::syntax::{call_name, generic_arguments};
use super::warp::{mut_ref, shared_ref};
use super::{Lowered, Lowerer};
use crate::ir::{
    Expr, MatrixDescriptor, MbarrierOp, Place, Scalar, Stmt, Swizzle, WarpgroupOp, Wgmma,
    WgmmaKind, MATRIX_DESC_FUNCTION,
};

impl Lowerer<'_> {
    /// Lowers a call statement of the `mbarrier_`, `fence_` or `wgmma_`
    /// families named `name`; `None` when `name` is none of their members.
    pub(super) fn hopper_statement(
        &mut self,
        c: &syn::ExprCall,
        name: &str,
    ) -> Option<Lowered<Stmt>> {
        if let Some(kind) = WgmmaKind::ALL.into_iter().find(|k| k.function() == name) {
            return Some(self.wgmma(c, kind, 0));
        }
        if let Some(generic) = WgmmaKind::ALL
            .into_iter()
            .filter_map(WgmmaKind::generic_function)
            .find(|g| *g == name)
        {
            return Some(
                self.generic_wgmma_kind(c, generic)
                    .and_then(|kind| self.wgmma(c, kind, 1)),
            );
        }
        let stmt = match name {
            "mbarrier_init" => self
                .mbarrier(c, name, Access::Write, Some("the expected arrival count"))
                .map(|(bar, count)| MbarrierOp::Init { bar, count }),
            "mbarrier_arrive" => self
                .mbarrier(c, name, Access::Write, None)
                .map(|(bar, _)| MbarrierOp::Arrive { bar }),
            "mbarrier_arrive_expect_tx" => self
                .mbarrier(
                    c,
                    name,
                    Access::Write,
                    Some("the expected transaction bytes"),
                )
                .map(|(bar, bytes)| MbarrierOp::ArriveExpectTx { bar, bytes }),
            "mbarrier_wait" => self
                .mbarrier(c, name, Access::Read, Some("the phase parity"))
                .map(|(bar, parity)| MbarrierOp::Wait { bar, parity }),
            "fence_mbarrier_init" => self.no_arguments(c, name).map(|()| MbarrierOp::InitFence),
            "fence_proxy_async" => {
                return Some(self.no_arguments(c, name).map(|()| Stmt::ProxyFence))
            }
            _ => return self.warpgroup_statement(c, name),
        };
        Some(stmt.map(Stmt::Mbarrier))
    }

    /// `wgmma_fence()`, `wgmma_commit()`, `wgmma_wait(N)`; `None` for another name.
    fn warpgroup_statement(&mut self, c: &syn::ExprCall, name: &str) -> Option<Lowered<Stmt>> {
        let op = match name {
            "wgmma_fence" => self.no_arguments(c, name).map(|()| WarpgroupOp::Fence),
            "wgmma_commit" => self.no_arguments(c, name).map(|()| WarpgroupOp::Commit),
            "wgmma_wait" => self.no_generic_arguments(c).and_then(|()| {
                self.arity(c, &c.args, 1, name)?;
                let pending = self.wait_count(&c.args[0], name)?;
                Ok(WarpgroupOp::Wait { pending })
            }),
            _ => return None,
        };
        Some(op.map(Stmt::Warpgroup))
    }

    fn no_arguments(&mut self, c: &syn::ExprCall, name: &str) -> Lowered<()> {
        self.no_generic_arguments(c)?;
        self.arity(c, &c.args, 0, name)
    }

    /// The mbarrier of `mbarrier_*(&mut bar[i], value)` (`&bar[i]` when
    /// `access` only reads it) and its `u32` operand, which `value`
    /// describes (`None`: the call has none, and gives `0`).
    fn mbarrier(
        &mut self,
        c: &syn::ExprCall,
        name: &str,
        access: Access,
        value: Option<&str>,
    ) -> Lowered<(Place, Expr)> {
        self.no_generic_arguments(c)?;
        self.arity(c, &c.args, 1 + usize::from(value.is_some()), name)?;
        let bar = self.mbarrier_place(&c.args[0], name, access)?;
        let Some(what) = value else {
            return Ok((bar, Expr::u32(0)));
        };
        let operand = self.expr(&c.args[1], Some(Scalar::U32))?;
        self.check_type(
            &c.args[1],
            operand.ty,
            Scalar::U32,
            &format!("{what} of `{name}`"),
        )?;
        Ok((bar, operand))
    }

    /// `&mut bar[i]` (or `&bar[i]` for a wait): an element of a `u64` shared array.
    fn mbarrier_place(&mut self, arg: &syn::Expr, name: &str, access: Access) -> Lowered<Place> {
        let (inner, form) = if access == Access::Write {
            (mut_ref(arg), "&mut bar[i]")
        } else {
            (shared_ref(arg), "&bar[i]")
        };
        let Some(inner) = inner else {
            return self.err(
                arg,
                format!("the first argument of `{name}` is the mbarrier, written `{form}` for a `u64` shared array `bar`"),
            );
        };
        let (place, ty) = self.place(inner, access)?;
        if !self.is_shared(&place) || ty != Scalar::U64 {
            return self.err(
                inner,
                format!("`{name}` works on an mbarrier: an element of a `u64` shared array, declared `let mut bar: [u64; N] = shared();`"),
            );
        }
        Ok(place)
    }

    /// The form the generic `generic::<T, N>` (`wgmma_m64k16`, `wgmma_m64k8`,
    /// `wgmma_m64k32`) takes for its element type `T`.
    fn generic_wgmma_kind(&mut self, c: &syn::ExprCall, generic: &str) -> Lowered<WgmmaKind> {
        let forms: Vec<WgmmaKind> = WgmmaKind::ALL
            .into_iter()
            .filter(|k| k.generic_function() == Some(generic))
            .collect();
        let types = forms
            .iter()
            .map(|k| k.element().name())
            .collect::<Vec<_>>()
            .join(" or ");
        let ty = match generic_arguments(c).and_then(|a| a.args.first()) {
            Some(syn::GenericArgument::Type(t)) => match self.scalar(t) {
                Ok(ty) => ty,
                Err(msg) => return self.err(t, msg),
            },
            _ => {
                return self.err(
                    &c.func,
                    format!("`{generic}::<T, N>` names its element type ({types}, or a type parameter) and its N: `{generic}::<T, 128>(..)`"),
                )
            }
        };
        match forms.into_iter().find(|k| k.element() == ty) {
            Some(kind) => Ok(kind),
            None => self.err(
                &c.func,
                format!(
                    "`{generic}` has no form for `{}`: its element types are {types}",
                    ty.name()
                ),
            ),
        }
    }

    /// `wgmma_m64k16_f16::<N>(&mut acc, matrix_desc(..), matrix_desc(..), accumulate)`
    /// (any form's name), or the generic form with the element type before N
    /// (`n_at` = 1).
    fn wgmma(&mut self, c: &syn::ExprCall, kind: WgmmaKind, n_at: usize) -> Lowered<Stmt> {
        let name = match kind.generic_function() {
            Some(generic) if n_at == 1 => generic,
            _ => kind.function(),
        };
        let n = match generic_arguments(c).map(|a| a.args.iter().collect::<Vec<_>>()) {
            Some(args) if args.len() == n_at + 1 => {
                let param = proc_macro2::Ident::new("N", proc_macro2::Span::call_site());
                self.const_argument(args[n_at], &param, Scalar::U32, name)?
            }
            _ => {
                let form = if n_at == 0 { "" } else { "T, " };
                return self.err(
                    &c.func,
                    format!("`{name}::<{form}N>` names its N, the columns of B and of the accumulator ({}): `{name}::<{form}128>(..)` or `{name}::<{form}BN>(..)`", kind.n_rule()),
                );
            }
        };
        self.arity(c, &c.args, 4, name)?;
        let acc = self.fragment(&c.args[0], kind.accumulator(), name, "accumulator", true)?;
        let a = self.matrix_descriptor(&c.args[1], kind, name, "A")?;
        let b = self.matrix_descriptor(&c.args[2], kind, name, "B")?;
        let accumulate = self.expr(&c.args[3], Some(Scalar::Bool))?;
        self.check_type(
            &c.args[3],
            accumulate.ty,
            Scalar::Bool,
            &format!("the last argument of `{name}` (whether to add to the accumulators)"),
        )?;
        Ok(Stmt::Warpgroup(WarpgroupOp::Mma(Wgmma {
            kind,
            n,
            acc,
            a,
            b,
            accumulate,
        })))
    }

    /// `matrix_desc(&tile[r][c], SWIZZLE)`: operand `which` of `function`.
    fn matrix_descriptor(
        &mut self,
        arg: &syn::Expr,
        kind: WgmmaKind,
        function: &str,
        which: &str,
    ) -> Lowered<MatrixDescriptor> {
        let form = format!("`{MATRIX_DESC_FUNCTION}(&tile[r][c], SWIZZLE)`");
        let call = match super::syntax::peel(arg) {
            syn::Expr::Call(call) if call_name(call).as_deref() == Some(MATRIX_DESC_FUNCTION) => call,
            _ => {
                return self.err(
                    arg,
                    format!("{which} of `{function}` is a shared tile given as {form}: its first element and its swizzle in bytes (0, 32, 64 or 128)"),
                )
            }
        };
        self.no_generic_arguments(call)?;
        self.arity(call, &call.args, 2, MATRIX_DESC_FUNCTION)?;
        let Some(tile) = shared_ref(&call.args[0]) else {
            return self.err(
                &call.args[0],
                format!("the first argument of {form} is the tile's first element, written `&tile[r][c]`"),
            );
        };
        let (start, ty) = self.place(tile, Access::Read)?;
        if !self.is_shared(&start) {
            return self.err(
                tile,
                format!("`{MATRIX_DESC_FUNCTION}` describes a tile in shared memory: the element must be of a `shared()` array"),
            );
        }
        if ty != kind.element() {
            return self.err(
                tile,
                format!(
                    "{which} of `{function}` holds `{}`, but this tile holds `{}`",
                    kind.element().name(),
                    ty.name()
                ),
            );
        }
        let swizzle = self.expr(&call.args[1], Some(Scalar::U32))?;
        self.check_type(
            &call.args[1],
            swizzle.ty,
            Scalar::U32,
            "the swizzle of a matrix descriptor",
        )?;
        self.check_constant(
            &call.args[1],
            &swizzle,
            ConstantRole::Immediate("the swizzle of a matrix descriptor"),
        )?;
        let Some(swizzle) = swizzle.as_int().and_then(Swizzle::from_bytes) else {
            return self.err(
                &call.args[1],
                "the swizzle of a matrix descriptor is written as a literal: 0 (none), 32, 64 or 128 (bytes)",
            );
        };
        Ok(MatrixDescriptor { start, swizzle })
    }
}
