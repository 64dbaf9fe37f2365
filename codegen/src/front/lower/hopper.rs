//! Hopper's statements (`sm_90`, `sm_90a`): mbarriers (`mbarrier_*`), the
//! fences of their initialization and of the async proxy
//! (`fence_mbarrier_init`, `fence_proxy_async`) and the warpgroup MMA
//! (`wgmma_*`) with its shared-memory matrix descriptors
//! (`matrix_desc(&tile[r][c], SWIZZLE)`, written only as an operand of a
//! `wgmma_m64k*`).
//!
//! The front checks what the syntax and the types decide: an mbarrier is
//! an element of a `u64` shared array, a descriptor's tile an element of a
//! shared array of the wgmma's element type, the swizzle one of 0, 32, 64
//! and 128. Tile shapes, the accumulator's length and N depend on const
//! params; the validator checks them per variant.

use super::check::ConstantRole;
use super::constness;
use super::place::Access;
use super::scope::Binding;
use super::syntax::{call_name, generic_arguments};
use super::warp::{mut_ref, shared_ref};
use super::{Lowered, Lowerer};
use crate::front::signature::TensorMapAttr;
use crate::ir::{
    Expr, MatrixDescriptor, MbarrierOp, ParamId, ParamType, Place, Scalar, Stmt, Swizzle,
    TensorMap, TmaOp, WarpgroupOp, Wgmma, WgmmaKind, MATRIX_DESC_FUNCTION,
};

/// The TMA copies' forms, which differ in their arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TmaCopy {
    Load,
    LoadMulticast,
    Store,
}

impl Lowerer<'_> {
    /// Lowers a call statement of the `mbarrier_`, `fence_` or `wgmma_`
    /// families named `name`; `None` when `name` is none of their Hopper
    /// members (`fence_gpu`, which every PTX target has, is `warp.rs`'s).
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
            .map(WgmmaKind::generic_function)
            .chain([WgmmaKind::ANY_TYPE_FUNCTION])
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
            "mbarrier_arrive_cluster" => self
                .mbarrier(
                    c,
                    name,
                    Access::Write,
                    Some("the cluster rank of the block whose mbarrier it is"),
                )
                .map(|(bar, rank)| MbarrierOp::ArriveCluster { bar, rank }),
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
            "tma_load" => return Some(self.tma_copy(c, name, TmaCopy::Load)),
            "tma_load_multicast" => return Some(self.tma_copy(c, name, TmaCopy::LoadMulticast)),
            "tma_store" => return Some(self.tma_copy(c, name, TmaCopy::Store)),
            "tma_store_commit" => {
                return Some(
                    self.no_arguments(c, name)
                        .map(|()| Stmt::Tma(TmaOp::Commit)),
                )
            }
            "tma_store_wait_read" | "tma_store_wait" => {
                let read = name == "tma_store_wait_read";
                return Some(self.no_generic_arguments(c).and_then(|()| {
                    self.arity(c, &c.args, 1, name)?;
                    let pending = self.wait_count(&c.args[0], name)?;
                    Ok(Stmt::Tma(match read {
                        true => TmaOp::WaitRead { pending },
                        false => TmaOp::Wait { pending },
                    }))
                }));
            }
            "setmaxnreg_inc" | "setmaxnreg_dec" => {
                return Some(self.set_max_registers(c, name, name == "setmaxnreg_inc"))
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

    /// `tma_load(&mut tile[s][0][0], map, (row, col), &mut bar[s])`,
    /// `tma_load_multicast(.., &mut bar[s], mask)` and `tma_store(&tile[0][0],
    /// map, (row, col))`: the tile's first element, a slice with a tensor
    /// map, the coordinates of the tile's origin in the tensor (a tuple,
    /// outermost first), for a load the mbarrier its bytes complete on, and
    /// for a multicast the `u32` mask of the cluster's blocks it goes to.
    fn tma_copy(&mut self, c: &syn::ExprCall, name: &str, copy: TmaCopy) -> Lowered<Stmt> {
        self.no_generic_arguments(c)?;
        let load = copy != TmaCopy::Store;
        let arguments = match copy {
            TmaCopy::Load => 4,
            TmaCopy::LoadMulticast => 5,
            TmaCopy::Store => 3,
        };
        self.arity(c, &c.args, arguments, name)?;
        let (tile_ref, form) = match load {
            true => (mut_ref(&c.args[0]), "&mut tile[s][0][0]"),
            false => (shared_ref(&c.args[0]), "&tile[s][0][0]"),
        };
        let Some(tile) = tile_ref else {
            return self.err(
                &c.args[0],
                format!("the first argument of `{name}` is the shared tile's first element, written `{form}`"),
            );
        };
        let access = if load { Access::Write } else { Access::Read };
        let (smem, elem) = self.place(tile, access)?;
        if !self.is_shared(&smem) {
            return self.err(
                tile,
                format!("`{name}` copies a tile of shared memory: the element must be of a `shared()` array"),
            );
        }
        let map = self.tensor_mapped_slice(&c.args[1], name, elem, !load)?;
        let rank = self.params[map as usize]
            .tensor_map
            .as_ref()
            .map(|m| m.shape.len());
        let coords = self.tuple_values(
            &c.args[2],
            None,
            &format!("the coordinates of `{name}`"),
            None,
        )?;
        if let Some(rank) = rank.filter(|&r| r != coords.len()) {
            return self.err(
                &c.args[2],
                format!(
                    "the tensor map of this slice has {rank} dimension(s), so `{name}` takes {rank} coordinates (outermost first), but {} were given",
                    coords.len()
                ),
            );
        }
        for value in &coords {
            if !matches!(value.ty, Scalar::U32 | Scalar::I32) {
                return self.err(
                    &c.args[2],
                    format!(
                        "the coordinates of `{name}` are `u32` or `i32` element indices, but one is `{}`",
                        value.ty.name()
                    ),
                );
            }
        }
        if !load {
            return Ok(Stmt::Tma(TmaOp::Store { smem, map, coords }));
        }
        let bar = self.mbarrier_place(&c.args[3], name, Access::Write)?;
        let multicast = match copy {
            TmaCopy::LoadMulticast => Some(self.u32_argument(
                &c.args[4],
                &format!("the mask of `{name}` (bit i: the block of cluster rank i)"),
            )?),
            TmaCopy::Load | TmaCopy::Store => None,
        };
        Ok(Stmt::Tma(TmaOp::Load {
            smem,
            map,
            coords,
            bar,
            multicast,
        }))
    }

    /// The slice parameter `arg` names, which has a tensor map (unknown
    /// while a device function's definition is checked) over elements of
    /// `elem`, and which a store must be able to write.
    fn tensor_mapped_slice(
        &mut self,
        arg: &syn::Expr,
        name: &str,
        elem: Scalar,
        writes: bool,
    ) -> Lowered<ParamId> {
        let binding = match super::syntax::peel(arg) {
            syn::Expr::Path(p) => {
                let ident = self.path_ident(p)?;
                Some(self.resolve(&ident)?)
            }
            _ => None,
        };
        let slice = match binding {
            Some(Binding::Param(id)) => Some((id, true)),
            Some(Binding::Slice { param, mutable }) => Some((param, mutable)),
            _ => None,
        };
        let Some((id, mutable)) =
            slice.filter(|(id, _)| matches!(self.params[*id as usize].ty, ParamType::Slice { .. }))
        else {
            return self.err(
                arg,
                format!("the second argument of `{name}` is a slice parameter declared with `#[tensor_map(..)]`"),
            );
        };
        let param = &self.params[id as usize];
        let ParamType::Slice {
            elem: slice_elem,
            mutable: slice_mutable,
        } = param.ty
        else {
            unreachable!("filtered to slices above");
        };
        if param.tensor_map.is_none() && !self.checking_definition {
            return self.err(
                arg,
                format!(
                    "`{}` has no tensor map: declare the parameter `#[tensor_map(shape = [..], strides = [..], tile = [..], swizzle = 128)] {}: ..` on the kernel",
                    param.name, param.name
                ),
            );
        }
        if slice_elem != elem {
            return self.err(
                arg,
                format!(
                    "`{name}` copies between elements of one type, but the tile holds `{}` and `{}` holds `{}`",
                    elem.name(),
                    param.name,
                    slice_elem.name()
                ),
            );
        }
        if writes && !(mutable && slice_mutable) {
            return self.err(
                arg,
                format!(
                    "`{name}` writes `{}`: make it `&mut [{}]`",
                    param.name,
                    elem.name()
                ),
            );
        }
        Ok(id)
    }

    /// `setmaxnreg_inc(N)` / `setmaxnreg_dec(N)`: N a constant.
    fn set_max_registers(&mut self, c: &syn::ExprCall, name: &str, grow: bool) -> Lowered<Stmt> {
        self.no_generic_arguments(c)?;
        self.arity(c, &c.args, 1, name)?;
        let count = self.expr(&c.args[0], Some(Scalar::U32))?;
        self.check_type(&c.args[0], count.ty, Scalar::U32, "the register count")?;
        self.check_constant(
            &c.args[0],
            &count,
            ConstantRole::Immediate(
                "the register count of `setmaxnreg` (24 to 256, a multiple of 8)",
            ),
        )?;
        Ok(Stmt::SetMaxRegisters { grow, count })
    }

    /// Lowers `#[tensor_map(..)]` of slice parameter `id` into its
    /// [`TensorMap`]: the shape and strides over what the host knows at
    /// launch, the tile over constants, each list as long as the shape.
    pub(super) fn tensor_map(&mut self, id: ParamId, attr: &TensorMapAttr) -> Lowered<()> {
        if !matches!(self.params[id as usize].ty, ParamType::Slice { .. }) {
            return self.err(
                &attr.attr,
                "`#[tensor_map(..)]` views a slice as a tensor: put it on a `&[T]` or `&mut [T]` parameter",
            );
        }
        let rank = attr.shape.len();
        if !(1..=5).contains(&rank) {
            return self.err(
                &attr.attr,
                format!("a tensor map has 1 to 5 dimensions, and this shape has {rank}"),
            );
        }
        if attr.strides.len() != rank - 1 || attr.tile.len() != rank {
            return self.err(
                &attr.attr,
                format!(
                    "a tensor map of {rank} dimension(s) has {} stride(s) (every dimension but the innermost, which is dense) and {rank} tile size(s), but this one has {} and {}",
                    rank - 1,
                    attr.strides.len(),
                    attr.tile.len()
                ),
            );
        }
        let host = |this: &mut Self, e: &syn::Expr, what: &str| -> Lowered<Expr> {
            let value = this.expr(e, Some(Scalar::U32))?;
            this.check_type(e, value.ty, Scalar::U32, what)?;
            if let Some(part) = constness::non_host_part(&value, &this.names()) {
                return this.err(
                    e,
                    format!("{what} is computed on the host at each launch, so it can only use scalar parameters, slice lengths (`x.len()`), const parameters and literals, but this uses {part}"),
                );
            }
            Ok(value)
        };
        let shape = attr
            .shape
            .iter()
            .map(|e| host(self, e, "a tensor map's shape"))
            .collect::<Vec<_>>();
        let strides = attr
            .strides
            .iter()
            .map(|e| host(self, e, "a tensor map's stride"))
            .collect::<Vec<_>>();
        let tile = attr
            .tile
            .iter()
            .map(|e| self.constant_size(e, "a tensor map's tile size"))
            .collect::<Vec<_>>();
        let swizzle = match &attr.swizzle {
            None => Ok(Swizzle::None),
            Some(e) => self.swizzle(e, "the swizzle of a tensor map"),
        };
        let map = TensorMap {
            shape: shape.into_iter().collect::<Lowered<_>>()?,
            strides: strides.into_iter().collect::<Lowered<_>>()?,
            tile: tile.into_iter().collect::<Lowered<_>>()?,
            swizzle: swizzle?,
        };
        self.params[id as usize].tensor_map = Some(map);
        Ok(())
    }

    /// A swizzle written as a literal number of bytes: 0, 32, 64 or 128.
    fn swizzle(&mut self, e: &syn::Expr, what: &str) -> Lowered<Swizzle> {
        let swizzle = self.expr(e, Some(Scalar::U32))?;
        self.check_type(e, swizzle.ty, Scalar::U32, what)?;
        self.check_constant(e, &swizzle, ConstantRole::Immediate(what))?;
        match swizzle.as_int().and_then(Swizzle::from_bytes) {
            Some(swizzle) => Ok(swizzle),
            None => self.err(
                e,
                format!("{what} is written as a literal: 0 (none), 32, 64 or 128 (bytes)"),
            ),
        }
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
        let operand = self.u32_argument(&c.args[1], &format!("{what} of `{name}`"))?;
        Ok((bar, operand))
    }

    /// An argument that must be a `u32`, `what` in the message if it is not.
    fn u32_argument(&mut self, arg: &syn::Expr, what: &str) -> Lowered<Expr> {
        let value = self.expr(arg, Some(Scalar::U32))?;
        self.check_type(arg, value.ty, Scalar::U32, what)?;
        Ok(value)
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
    /// `wgmma_m64k32`, or `wgmma_m64` of any of their types) takes for its
    /// element type `T`.
    fn generic_wgmma_kind(&mut self, c: &syn::ExprCall, generic: &str) -> Lowered<WgmmaKind> {
        let any_type = generic == WgmmaKind::ANY_TYPE_FUNCTION;
        let forms: Vec<WgmmaKind> = WgmmaKind::ALL
            .into_iter()
            .filter(|k| any_type || k.generic_function() == generic)
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
        let name = if n_at == 1 {
            kind.generic_function()
        } else {
            kind.function()
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
        let acc = self.fragment_block(
            &c.args[0],
            kind.accumulator(),
            name,
            "accumulator",
            true,
            true,
        )?;
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
        let swizzle = self.swizzle(&call.args[1], "the swizzle of a matrix descriptor")?;
        Ok(MatrixDescriptor { start, swizzle })
    }
}
