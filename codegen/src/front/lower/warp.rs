//! Warp-collective matrix operations (`ldmatrix_*`, `mma_*`, `wmma_*`),
//! asynchronous copies (`cp_async*`, and pipelines: `let pipe =
//! pipeline(STAGES);` with `pipe.copy(..)`, `pipe.commit()`,
//! `pipe.wait(N)`): statements over fragments (rows of register arrays) and
//! places; and `fence_gpu()`, the member of the `fence_` family that every
//! PTX target has (the Hopper members of the families are `hopper.rs`'s).
//!
//! The front checks what the syntax and the types decide: argument shapes,
//! element types, that fragments are rows of register arrays and sources are
//! shared or global elements. Fragment lengths, copy sizes and wait counts
//! may depend on const params; the validator checks them per variant.
//!
//! A pipeline exists only in the front: its methods lower to the
//! `cp_async*` statements, and what it adds is its stage count, against
//! which the front checks every wait in every variant ([`check_variants`]), so
//! that waiting on more stages than exist is an error at the wait. A copy
//! whose destination offset is a constant over const params is checked for
//! alignment the same way (the validator checks the offsets that become
//! literals only after unrolling, without a span).

use proc_macro2::TokenStream;
use quote::ToTokens;

use super::check::ConstantRole;
use super::place::Access;
use super::scope::Binding;
use super::syntax::{call_name, index_chain, peel};
use super::{Lowered, Lowerer};
use crate::def::KernelDef;
use crate::eval;
use crate::front::errors::Errors;
use crate::front::vocabulary;
use crate::ir::{
    BinaryOp, Expr, ExprKind, Fragment, Literal, MatrixLayout, MatrixOp, MmaKind, ParamType, Place,
    Scalar, Space, SparseMmaKind, Stmt, WmmaOperand, GPU_FENCE_FUNCTION,
};

/// The methods of a pipeline, for messages.
const PIPELINE_METHODS: &str =
    "`copy(&mut tile[..], &src[i], BYTES, src_bytes)`, `commit()` and `wait(N)`";

/// A pipeline in scope: `let pipe = pipeline(STAGES);`.
pub struct Pipeline {
    name: String,
    /// The number of stages: a `u32` constant over const params.
    stages: Expr,
}

/// A condition on const values that every variant must meet where a
/// statement runs, checked once the variants are known.
pub struct VariantCheck {
    /// What the error points at: the stage count of a declaration, the
    /// count of a wait, the destination of a copy.
    at: TokenStream,
    /// Constant conditions that hold where the statement is (see
    /// `Lowerer::guards`): a variant that fails one never runs it.
    guards: Vec<Expr>,
    kind: VariantCheckKind,
}

enum VariantCheckKind {
    /// `let pipeline = pipeline(stages)`: at least 1 stage.
    Declaration { pipeline: String, stages: Expr },
    /// `pipeline.wait(pending)`: `pending` less than `stages`.
    Wait {
        pipeline: String,
        pending: Expr,
        stages: Expr,
    },
    /// An array argument of a device function (`what`) whose size `got`
    /// must equal the declared `want`.
    Shape { what: String, want: Expr, got: Expr },
    /// A copy of `bytes` bytes written by `function` to byte `offset` (a
    /// `u32`) of the shared array `array`: a multiple of `bytes`.
    Alignment {
        function: String,
        array: String,
        elem: Scalar,
        offset: Expr,
        bytes: u32,
    },
}

impl VariantCheck {
    /// That the array argument `what` has the size `got` its parameter
    /// declares as `want` (at `at`), where `guards` hold.
    pub(super) fn shape(
        at: impl ToTokens,
        guards: Vec<Expr>,
        what: String,
        want: Expr,
        got: Expr,
    ) -> Self {
        VariantCheck {
            at: at.to_token_stream(),
            guards,
            kind: VariantCheckKind::Shape { what, want, got },
        }
    }
}

/// Reports each [`VariantCheck`] that some variant of `def` fails, at its
/// statement, naming the first such variant. Expressions a variant cannot
/// evaluate (an overflow) are left to specialization, which reports them
/// for the variants that reach them. The variants are already enumerated
/// for the macro (`constrain(..)` must leave one); each check evaluates a
/// few constant expressions per variant.
pub fn check_variants(def: &KernelDef, checks: &[VariantCheck], errors: &mut Errors) {
    if checks.is_empty() {
        return;
    }
    let variants = def.variants();
    let int = |e: &Expr, consts: &[i64]| match eval::eval(e, consts, &[]) {
        Ok(Literal::Int(v)) => Some(v),
        _ => None,
    };
    for check in checks {
        for consts in &variants {
            let reached = check
                .guards
                .iter()
                .all(|g| eval::eval(g, consts, &[]) == Ok(Literal::Bool(true)));
            if !reached {
                continue;
            }
            let variant = def.variant_name(consts);
            let message = match &check.kind {
                VariantCheckKind::Declaration { pipeline: name, stages } => match int(stages, consts) {
                    Some(0) => format!(
                        "`{name}` has 0 stages in the variant {variant}: a pipeline has at least one stage, the number of shared buffers its copies rotate through"
                    ),
                    _ => continue,
                },
                VariantCheckKind::Shape { what, want, got } => match (int(want, consts), int(got, consts)) {
                    (Some(w), Some(g)) if w != g => format!(
                        "{what} has size {g} in the variant {variant}, but the parameter declares {w}: pass an array of the declared size, or declare the size with a const parameter"
                    ),
                    _ => continue,
                },
                VariantCheckKind::Alignment {
                    function,
                    array,
                    elem,
                    offset,
                    bytes,
                } => match int(offset, consts) {
                    Some(at) if at % *bytes as i64 != 0 => format!(
                        "`{function}` of {bytes} bytes writes byte {at} of `{array}` in the variant {variant}, which is not a multiple of {bytes}: \
                         align the destination index to {} elements",
                        bytes / elem.size_bytes()
                    ),
                    _ => continue,
                },
                VariantCheckKind::Wait {
                    pipeline: name,
                    pending,
                    stages,
                } => {
                    match (int(pending, consts), int(stages, consts)) {
                        (Some(n), Some(s)) if n >= s => format!(
                            "`{name}.wait({n})` waits on more stages than `{name}` has: it leaves up to {n} groups of copies in flight, \
                             and `{name}` has {s} stage(s) in the variant {variant}, so no stage is sure to be complete. \
                             Leave at most {} in flight (the stage count minus 1); when the next copies are issued after the wait, \
                             as in the usual loop, the stage count minus 2",
                            s - 1
                        ),
                        _ => continue,
                    }
                }
            };
            errors.push(&check.at, message);
            break;
        }
    }
}

fn layout(name: &str) -> Option<MatrixLayout> {
    match name {
        "row" => Some(MatrixLayout::Row),
        "col" => Some(MatrixLayout::Col),
        _ => None,
    }
}

impl Lowerer<'_> {
    /// Lowers a call statement of a warp statement family
    /// ([`vocabulary::WARP_STATEMENTS`]).
    pub(super) fn warp_statement(&mut self, c: &syn::ExprCall) -> Lowered<Stmt> {
        let name = call_name(c).unwrap_or_default();
        if let Some(stmt) = self.hopper_statement(c, &name) {
            return stmt;
        }
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
            let src = self.shared_element(&c.args[1], &name, if transpose { 2 } else { 4 })?;
            return Ok(Stmt::Matrix(MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            }));
        }
        if let Some(&(_, ordered)) = GENERIC_SPARSE_MMA.iter().find(|(f, _)| *f == name) {
            let kind = self.generic_sparse_mma_kind(c, &name)?;
            return self.sparse_mma(c, kind, ordered, &name);
        }
        let dense = if name == GENERIC_MMA {
            Some(self.generic_mma_kind(c)?)
        } else {
            self.no_generic_arguments(c)?;
            MmaKind::ALL.into_iter().find(|k| k.function() == name)
        };
        if let Some(kind) = dense {
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
            "cp_async" => {
                self.arity(c, &c.args, 4, "cp_async")?;
                self.async_copy(&c.args, "cp_async")
            }
            "cp_async_commit" => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Stmt::AsyncCommit)
            }
            "cp_async_wait" => {
                self.arity(c, &c.args, 1, &name)?;
                let pending = self.wait_count(&c.args[0], "cp_async_wait")?;
                Ok(Stmt::AsyncWait { pending })
            }
            GPU_FENCE_FUNCTION => {
                self.arity(c, &c.args, 0, &name)?;
                Ok(Stmt::GpuFence)
            }
            _ => self.unknown_warp_function(c, &name),
        }
    }

    /// The form `mma_m16n8::<T>` takes for its element type `T`: the
    /// m16n8 MMA over 32 bytes of k (16 f16 or bf16, 8 tf32 words, 32 s8 or
    /// u8).
    fn generic_mma_kind(&mut self, c: &syn::ExprCall) -> Lowered<MmaKind> {
        let ty = self.mma_element(c, GENERIC_MMA, "f16, bf16, f32 (as tf32), i8 or u8")?;
        match MmaKind::for_element(ty) {
            Some(kind) => Ok(kind),
            None => self.err(
                &c.func,
                format!("`mma_m16n8` has no form for `{}`: its element types are f16, bf16, f32 (as tf32), i8 and u8", ty.name()),
            ),
        }
    }

    /// The form `mma_sp[_ordered]_m16n8k32::<T>` takes for its element type
    /// `T`: the 2:4 sparse m16n8k32 MMA of f16 or bf16.
    fn generic_sparse_mma_kind(&mut self, c: &syn::ExprCall, name: &str) -> Lowered<SparseMmaKind> {
        let ty = self.mma_element(c, name, "f16 or bf16")?;
        match ty {
            Scalar::F16 => Ok(SparseMmaKind::F16),
            Scalar::Bf16 => Ok(SparseMmaKind::Bf16),
            other => self.err(
                &c.func,
                format!(
                    "`{name}` has no form for `{}`: its element types are f16 and bf16",
                    other.name()
                ),
            ),
        }
    }

    /// The element type a generic MMA `function::<T>` names; `types` lists
    /// those it has a form for, for messages.
    fn mma_element(&mut self, c: &syn::ExprCall, function: &str, types: &str) -> Lowered<Scalar> {
        match super::syntax::generic_arguments(c).map(|a| a.args.iter().collect::<Vec<_>>()) {
            Some(args) if args.len() == 1 => match args[0] {
                syn::GenericArgument::Type(t) => match self.scalar(t) {
                    Ok(s) => Ok(s),
                    Err(msg) => self.err(t, msg),
                },
                other => self.err(other, format!("`{function}::<T>` takes an element type: {types}")),
            },
            _ => self.err(
                &c.func,
                format!("`{function}::<T>` names its element type: `{function}::<f16>(..)`, or a type parameter `{function}::<T>(..)`"),
            ),
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
            format!(
                "unknown function `{name}`: the warp matrix, async copy, mbarrier and wgmma functions are {}",
                vocabulary::warp_statement_list()
            ),
        )
    }

    /// `cp_async(&mut tile[..], &src[i], BYTES, src_bytes)` or
    /// `pipe.copy(..)` with the same four arguments; `function` names it.
    fn async_copy(&mut self, args: &Args, function: &str) -> Lowered<Stmt> {
        let Some(dst_expr) = mut_ref(&args[0]) else {
            return self.err(&args[0], format!("the first argument of `{function}` is the shared destination, written `&mut tile[i][j]`"));
        };
        let (dst, dst_ty) = self.place(dst_expr, Access::Write)?;
        if !self.is_shared(&dst) {
            return self.err(dst_expr, format!("`{function}` copies into shared memory: the destination must be an element of a `shared()` array"));
        }
        let Some(src_expr) = shared_ref(&args[1]) else {
            return self.err(&args[1], format!("the second argument of `{function}` is the source element, written `&src[i]` for a slice parameter `src`"));
        };
        let (src, src_ty) = self.place(src_expr, Access::Read)?;
        if !matches!(src, Place::Global { .. }) {
            return self.err(src_expr, format!("`{function}` copies from global memory: the source must be an element of a slice parameter"));
        }
        if src_ty != dst_ty {
            return self.err(
                &args[1],
                format!(
                    "`{function}` copies bytes between arrays of one element type, but the destination holds `{}` and the source `{}`",
                    dst_ty.name(),
                    src_ty.name()
                ),
            );
        }
        let bytes = self.expr(&args[2], Some(Scalar::U32))?;
        self.check_type(&args[2], bytes.ty, Scalar::U32, "the copy size")?;
        self.check_constant(
            &args[2],
            &bytes,
            ConstantRole::Size(&format!("the size of a `{function}` copy")),
        )?;
        let Some(bytes) = bytes.as_int() else {
            return self.err(
                &args[2],
                format!("the size of a `{function}` copy is written as a literal: 4, 8 or 16"),
            );
        };
        if !matches!(bytes, 4 | 8 | 16) {
            return self.err(
                &args[2],
                format!("`{function}` copies 4, 8 or 16 bytes, not {bytes}: split larger copies, and copy smaller pieces with plain loads and stores"),
            );
        }
        let src_bytes = self.expr(&args[3], Some(Scalar::U32))?;
        self.check_type(
            &args[3],
            src_bytes.ty,
            Scalar::U32,
            "the number of source bytes to read",
        )?;
        if let Some((array, offset)) = self.constant_byte_offset(&dst) {
            self.variant_checks.push(VariantCheck {
                at: args[0].to_token_stream(),
                guards: self.guards.clone(),
                kind: VariantCheckKind::Alignment {
                    function: function.to_string(),
                    array,
                    elem: dst_ty,
                    offset,
                    bytes: bytes as u32,
                },
            });
        }
        Ok(Stmt::AsyncCopy {
            dst,
            src,
            bytes: bytes as u32,
            src_bytes,
        })
    }

    /// The array of an element and the element's byte offset in it as a
    /// `u32` expression, when every index is a constant over const params
    /// and literals.
    fn constant_byte_offset(&self, place: &Place) -> Option<(String, Expr)> {
        let Place::Local { local, indices } = place else {
            return None;
        };
        if !indices.iter().all(|i| self.is_constant(i)) {
            return None;
        }
        let decl = &self.locals[*local as usize];
        let as_u32 = |e: &Expr| match e.ty {
            Scalar::U32 => e.clone(),
            _ => Expr {
                ty: Scalar::U32,
                kind: ExprKind::Cast(Box::new(e.clone())),
            },
        };
        let mut flat = Expr::u32(0);
        for (index, dim) in indices.iter().zip(&decl.dims) {
            let scaled = Expr::binary(BinaryOp::Mul, flat, as_u32(dim));
            flat = Expr::binary(BinaryOp::Add, scaled, as_u32(index));
        }
        let offset = Expr::binary(BinaryOp::Mul, flat, Expr::u32(decl.ty.size_bytes()));
        Some((decl.name.clone(), offset))
    }

    /// The count of a wait: a `u32` constant over const params.
    pub(super) fn wait_count(&mut self, arg: &syn::Expr, function: &str) -> Lowered<Expr> {
        let pending = self.expr(arg, Some(Scalar::U32))?;
        self.check_type(
            arg,
            pending.ty,
            Scalar::U32,
            "the number of groups left pending",
        )?;
        self.check_constant(
            arg,
            &pending,
            ConstantRole::Size(&format!("the number of groups `{function}` leaves pending")),
        )?;
        Ok(pending)
    }

    /// `let pipe = pipeline(STAGES);`: the pipeline `pipe` binds.
    pub(super) fn pipeline_decl(
        &mut self,
        local: &syn::Local,
        ident: Option<&proc_macro2::Ident>,
        mutable: bool,
        annotation: Option<&syn::Type>,
        c: &syn::ExprCall,
    ) -> Lowered<usize> {
        let Some(ident) = ident else {
            return self.err(
                &local.pat,
                "a pipeline needs a name to call its methods on: `let pipe = pipeline(STAGES);`",
            );
        };
        if mutable || annotation.is_some() {
            return self.err(&local.pat, format!("a pipeline is declared without `mut` or a type: `let {ident} = pipeline(STAGES);`"));
        }
        self.arity(c, &c.args, 1, "pipeline")?;
        let stages = self.expr(&c.args[0], Some(Scalar::U32))?;
        self.check_type(
            &c.args[0],
            stages.ty,
            Scalar::U32,
            "the stage count of a pipeline",
        )?;
        self.check_constant(
            &c.args[0],
            &stages,
            ConstantRole::Size("the stage count of a pipeline"),
        )?;
        let name = ident.to_string();
        self.variant_checks.push(VariantCheck {
            at: c.args[0].to_token_stream(),
            guards: self.guards.clone(),
            kind: VariantCheckKind::Declaration {
                pipeline: name.clone(),
                stages: stages.clone(),
            },
        });
        self.pipelines.push(Pipeline { name, stages });
        Ok(self.pipelines.len() - 1)
    }

    /// The pipeline `receiver` names, if it is a name bound to one.
    pub(super) fn pipeline_of(&self, receiver: &syn::Expr) -> Option<usize> {
        let syn::Expr::Path(p) = peel(receiver) else {
            return None;
        };
        match self.lookup(p.path.get_ident()?)? {
            Binding::Pipeline(id) => Some(id),
            _ => None,
        }
    }

    /// `pipe.copy(..)`, `pipe.commit()` or `pipe.wait(N)` on the pipeline `id`.
    pub(super) fn pipeline_statement(
        &mut self,
        m: &syn::ExprMethodCall,
        id: usize,
    ) -> Lowered<Stmt> {
        let pipe = self.pipelines[id].name.clone();
        let method = m.method.to_string();
        let function = format!("{pipe}.{method}");
        if let Some(t) = &m.turbofish {
            return self.err(t, "turbofish `::<..>` is not supported in kernels");
        }
        match method.as_str() {
            "copy" => {
                self.arity(m, &m.args, 4, &function)?;
                self.async_copy(&m.args, &function)
            }
            "commit" => {
                self.arity(m, &m.args, 0, &function)?;
                Ok(Stmt::AsyncCommit)
            }
            "wait" => {
                self.arity(m, &m.args, 1, &function)?;
                let pending = self.wait_count(&m.args[0], &function)?;
                self.variant_checks.push(VariantCheck {
                    at: m.args[0].to_token_stream(),
                    guards: self.guards.clone(),
                    kind: VariantCheckKind::Wait {
                        pipeline: pipe,
                        pending: pending.clone(),
                        stages: self.pipelines[id].stages.clone(),
                    },
                });
                Ok(Stmt::AsyncWait { pending })
            }
            _ => self.err(
                &m.method,
                format!("unknown method `{method}` of the pipeline `{pipe}`: a pipeline has {PIPELINE_METHODS}"),
            ),
        }
    }

    pub(super) fn is_shared(&self, place: &Place) -> bool {
        matches!(place, Place::Local { local, .. } if self.locals[*local as usize].space == Space::Shared)
    }

    /// `&mut frag` or `&frag[i]`: a row of a register array of element type `elem`.
    pub(super) fn fragment(
        &mut self,
        arg: &syn::Expr,
        elem: Scalar,
        function: &str,
        role: &str,
        writes: bool,
    ) -> Lowered<Fragment> {
        self.fragment_block(arg, elem, function, role, writes, false)
    }

    /// A fragment, or with `block` any part of a register array indexed by
    /// some of its outer dimensions (`&mut acc[i]` of `[[[f32; 4]; 32]; 2]`):
    /// the elements below, row-major, as a wgmma's accumulators.
    pub(super) fn fragment_block(
        &mut self,
        arg: &syn::Expr,
        elem: Scalar,
        function: &str,
        role: &str,
        writes: bool,
        block: bool,
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
        let (id, mut indices, mutable) = match self.resolve(&ident)? {
            Binding::Local(id) => (id, Vec::new(), self.locals[id as usize].mutable),
            Binding::View(v) => {
                let view = self.views[v].clone();
                (view.local, view.prefix, view.mutable)
            }
            Binding::Broken => return Err(super::Reported),
            _ => {
                return self.err(inner, format!("`{ident}` is a parameter: the {role} of `{function}` must be a register array declared in the kernel, e.g. `let mut {ident} = [0{}; 4];`", elem.name()))
            }
        };
        let local = &self.locals[id as usize];
        let (ty, space, rank) = (local.ty, local.space, local.dims.len() - indices.len());
        if space != Space::Register || rank == 0 {
            return self.err(inner, format!("the {role} of `{function}` must be a register array (`let mut {ident} = [0{}; N];`), not a {}", elem.name(), if rank == 0 { "scalar" } else { "shared array" }));
        }
        if !block && index_exprs.len() + 1 != rank || index_exprs.len() >= rank {
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
        for idx in index_exprs {
            let index = self.expr(idx, Some(Scalar::U32))?;
            self.check_constant(idx, &index, ConstantRole::RegisterIndex(&ident))?;
            indices.push(index);
        }
        Ok(Fragment { local: id, indices })
    }

    /// `&tile[r][c]`: an element of a shared array of a type of at most
    /// `widest` bytes.
    fn shared_element(&mut self, arg: &syn::Expr, function: &str, widest: u32) -> Lowered<Place> {
        let Some(inner) = shared_ref(arg) else {
            return self.err(arg, format!("the second argument of `{function}` is this lane's row in shared memory, written `&tile[r][c]`"));
        };
        let (place, ty) = self.place(inner, Access::Read)?;
        if !self.is_shared(&place) {
            return self.err(inner, format!("`{function}` reads shared memory: the row must be an element of a `shared()` array"));
        }
        if ty.size_bytes() > widest {
            let what = if widest == 2 {
                "transposes 16-bit elements (8-bit pairs for s8/u8): load 32-bit data without `_trans`"
            } else {
                "moves 8-, 16- or 32-bit elements"
            };
            return self.err(
                inner,
                format!(
                    "`{function}` {what}; the shared array holds `{}`",
                    ty.name()
                ),
            );
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

/// The MMA whose form follows from its element type (`MmaKind::for_element`).
const GENERIC_MMA: &str = "mma_m16n8";
/// The sparse MMAs whose form follows from their element type, and whether
/// each is the ordered-metadata form.
const GENERIC_SPARSE_MMA: [(&str, bool); 2] = [
    ("mma_sp_m16n8k32", false),
    ("mma_sp_ordered_m16n8k32", true),
];

/// The arguments of a call or method call.
type Args = syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>;

/// The operand of `&mut x`.
pub(super) fn mut_ref(e: &syn::Expr) -> Option<&syn::Expr> {
    match peel(e) {
        syn::Expr::Reference(r) if r.mutability.is_some() => Some(&r.expr),
        _ => None,
    }
}

/// The operand of `&x`.
pub(super) fn shared_ref(e: &syn::Expr) -> Option<&syn::Expr> {
    match peel(e) {
        syn::Expr::Reference(r) if r.mutability.is_none() => Some(&r.expr),
        _ => None,
    }
}
