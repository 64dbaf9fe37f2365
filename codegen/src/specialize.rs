//! Specialization: turns the IR of a variant family into the IR of one
//! variant.
//!
//! 1. Every [`ExprKind::Const`] becomes a literal of the variant's value.
//! 2. Constant subexpressions are folded with [`crate::eval`] (exact integer
//!    semantics of their type: a fold that overflows is an error, since the
//!    same expression would panic in Rust).
//! 3. `if` with a constant condition is replaced by the branch taken, `while`
//!    with a constant false condition is dropped.
//! 4. Every `#[unroll]` loop is replaced by one copy of its body per
//!    iteration, with the loop variable replaced by that iteration's literal.
//!
//! Scoping choice for unrolled bodies: the copies are spliced one after the
//! other into the enclosing block and keep the `LocalId`s of the locals they
//! declare. Each copy re-runs its `Let`s before any use, and the copies never
//! overlap, so one id per local is enough (backends reuse one register).
//! Branches of constant `if`s are spliced the same way.
//!
//! 5. A bool local that holds one value wherever it is read (a flag set
//!    by its `let` to a literal and never set otherwise where the body can
//!    reach) decides the `if`s and `while`s it controls, which fold as in 3
//!    ([`Specializer::fold_constant_flags`]).
//!
//! `break` and `continue` that would leave or restart an unrolled loop are
//! rejected: after unrolling there is no loop left for them to target.

use crate::eval;
use crate::ir::{
    visit_stmts, BinaryOp, Expr, ExprKind, Fragment, Kernel, Literal, LocalId, MatrixDescriptor,
    MatrixOp, MbarrierOp, Place, Scalar, Space, Stmt, TensorMap, TmaOp, WarpgroupOp, Wgmma,
};
use crate::Error;

/// The most iterations one `#[unroll]` loop may have: beyond this the code
/// size (and register pressure of what unrolling is for) stops paying off.
pub const MAX_UNROLL: i128 = 1024;

/// The most iterations all of a kernel's `#[unroll]` loops may unroll
/// together (nested ones multiply): loops each under [`MAX_UNROLL`] can
/// still nest to billions of copies, which would hang the backends. The
/// stock kernels unroll a few thousand.
pub const MAX_UNROLLED: u64 = 1 << 20;

/// What [`Specializer::expr`] leaves free on the stack before it recurses.
/// Expressions nest once per operator, the front accepts chains of about
/// 460 (`front::nesting`), and one level of this fold takes 4.6 KiB of
/// stack on an unoptimized build, so a sum of that many terms would
/// overflow a spawned thread's 2 MiB; so does validation's check of a
/// chain the fold leaves (`valid`'s `expr` grows its stack the same way),
/// and the other passes fit at the same depth (measured as `front::tests`
/// runs the path from the macro's JSON to PTX and WGSL). The zone covers a
/// level of the fold many times over.
pub(crate) const STACK_RED_ZONE: usize = 256 << 10;

/// The stack segment [`Specializer::expr`] continues on past the red zone.
pub(crate) const STACK_SEGMENT: usize = 2 << 20;

/// The most elements of one register array: a thread has 255 registers, and
/// larger arrays would make the backends emit (and ptxas allocate) as many.
pub const MAX_REGISTER_ARRAY: i64 = 4096;

/// Substitutes const params, folds constants, unrolls `#[unroll]` loops.
pub fn specialize(kernel: &Kernel, consts: &[i64]) -> Result<Kernel, Error> {
    if consts.len() != kernel.const_params.len() {
        return Err(Error::new(format!(
            "kernel `{}` has {} const params but {} values were given: pass one value per const param, in declaration order",
            kernel.name,
            kernel.const_params.len(),
            consts.len()
        )));
    }
    for (param, &value) in kernel.const_params.iter().zip(consts) {
        let fits = match param.ty {
            Scalar::Bool => value == 0 || value == 1,
            ty if ty.is_int() => eval::encode_int(ty, value as i128).is_ok(),
            _ => false,
        };
        if !fits {
            return Err(Error::new(format!(
                "kernel `{}`: const param `{}` is a {} and cannot take the value {value}",
                kernel.name,
                param.name,
                param.ty.name()
            )));
        }
    }
    let variant = if consts.is_empty() {
        format!("kernel `{}`", kernel.name)
    } else {
        let values: Vec<String> = kernel
            .const_params
            .iter()
            .zip(consts)
            .map(|(p, v)| format!("{}={v}", p.name))
            .collect();
        format!("kernel `{}` with {}", kernel.name, values.join(", "))
    };
    let mut s = Specializer {
        kernel,
        consts,
        variant,
        unrolled: Vec::new(),
        loops: Vec::new(),
        unrolled_total: 0,
    };

    let mut out = kernel.clone();
    for (local, decl) in out.locals.iter_mut().zip(&kernel.locals) {
        for (axis, (dim, decl_dim)) in local.dims.iter_mut().zip(&decl.dims).enumerate() {
            *dim = s.expr(decl_dim)?;
            if dim.as_int().is_none() {
                return Err(s.error(format!(
                    "dimension {axis} of array `{}` is not a compile-time constant: use literals and const params",
                    decl.name
                )));
            }
        }
    }
    if let Some(block) = &kernel.block {
        out.block = Some(s.dims(block)?);
    }
    if let Some(cluster) = &kernel.cluster {
        out.cluster = Some(s.dims(cluster)?);
    }
    if let Some(n) = &kernel.min_blocks_per_sm {
        out.min_blocks_per_sm = Some(s.expr(n)?);
    }
    for (req, decl) in out.requires.iter_mut().zip(&kernel.requires) {
        req.cond = s.expr(&decl.cond)?;
    }
    for (param, decl) in out.params.iter_mut().zip(&kernel.params) {
        if let (Some(map), Some(decl)) = (&mut param.tensor_map, &decl.tensor_map) {
            s.tensor_map(map, decl)?;
        }
    }
    out.body = s.block(&kernel.body)?;
    out.body = s.fold_constant_flags(std::mem::take(&mut out.body));
    for (local, decl) in out.locals.iter().zip(&kernel.locals) {
        let elements = local
            .dims
            .iter()
            .try_fold(1i64, |n, d| n.checked_mul(d.as_int().unwrap_or(0)));
        if local.space == Space::Register && elements.is_none_or(|n| n > MAX_REGISTER_ARRAY) {
            let dims: Vec<String> = local
                .dims
                .iter()
                .map(|d| d.as_int().unwrap_or(0).to_string())
                .collect();
            return Err(s.error(format!(
                "register array `{}` ({}) has more elements than the limit of {MAX_REGISTER_ARRAY} \
                 (a thread has 255 registers): make it smaller, or keep it in a shared array \
                 (`let {}: [..] = shared();`)",
                decl.name,
                dims.join(" x "),
                decl.name
            )));
        }
    }
    Ok(out)
}

struct Specializer<'a> {
    kernel: &'a Kernel,
    consts: &'a [i64],
    /// "kernel `k` with BM=64", for messages.
    variant: String,
    /// The values of the loop variables of the unrolled loops being copied.
    unrolled: Vec<(LocalId, Literal)>,
    /// The enclosing loops, innermost last: `Some(var)` for an unrolled loop.
    loops: Vec<Option<LocalId>>,
    /// Iterations unrolled so far, over every loop ([`MAX_UNROLLED`]).
    unrolled_total: u64,
}

impl Specializer<'_> {
    fn error(&self, message: String) -> Error {
        Error::new(format!("{}: {message}", self.variant))
    }

    fn local_name(&self, id: LocalId) -> &str {
        self.kernel
            .locals
            .get(id as usize)
            .map_or("?", |l| l.name.as_str())
    }

    fn block(&mut self, block: &[Stmt]) -> Result<Vec<Stmt>, Error> {
        let mut out = Vec::with_capacity(block.len());
        for stmt in block {
            self.stmt(stmt, &mut out)?;
        }
        Ok(out)
    }

    fn stmt(&mut self, stmt: &Stmt, out: &mut Vec<Stmt>) -> Result<(), Error> {
        match stmt {
            Stmt::Let { local, init } => {
                let init = init.as_ref().map(|e| self.expr(e)).transpose()?;
                out.push(Stmt::Let {
                    local: *local,
                    init,
                });
            }
            Stmt::Assign { place, value } => {
                out.push(Stmt::Assign {
                    place: self.place(place)?,
                    value: self.expr(value)?,
                });
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.expr(cond)?;
                match cond.kind {
                    ExprKind::Literal(Literal::Bool(true)) => out.extend(self.block(then_body)?),
                    ExprKind::Literal(Literal::Bool(false)) => out.extend(self.block(else_body)?),
                    _ => out.push(Stmt::If {
                        cond,
                        then_body: self.block(then_body)?,
                        else_body: self.block(else_body)?,
                    }),
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                unroll: false,
                body,
            } => {
                let (start, end, step) = (self.expr(start)?, self.expr(end)?, self.expr(step)?);
                self.loops.push(None);
                let body = self.block(body)?;
                self.loops.pop();
                out.push(Stmt::For {
                    var: *var,
                    start,
                    end,
                    step,
                    unroll: false,
                    body,
                });
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                unroll: true,
                body,
            } => self.unroll(*var, start, end, step, body, out)?,
            Stmt::While { cond, body } => {
                let cond = self.expr(cond)?;
                if cond.kind != ExprKind::Literal(Literal::Bool(false)) {
                    self.loops.push(None);
                    let body = self.block(body)?;
                    self.loops.pop();
                    out.push(Stmt::While { cond, body });
                }
            }
            Stmt::Break | Stmt::Continue => {
                if let Some(Some(var)) = self.loops.last() {
                    let what = if *stmt == Stmt::Break {
                        "break"
                    } else {
                        "continue"
                    };
                    return Err(self.error(format!(
                        "`{what}` in the body of `#[unroll] for {}`: an unrolled loop has no loop left to {what}; \
                         guard the rest of the body with an `if`, or drop `#[unroll]`",
                        self.local_name(*var)
                    )));
                }
                out.push(stmt.clone());
            }
            Stmt::Return | Stmt::Barrier | Stmt::GpuFence | Stmt::AsyncCommit => {
                out.push(stmt.clone())
            }
            Stmt::Expr(e) => out.push(Stmt::Expr(self.expr(e)?)),
            Stmt::Matrix(op) => out.push(Stmt::Matrix(self.matrix(op)?)),
            Stmt::AsyncCopy {
                dst,
                src,
                bytes,
                src_bytes,
            } => out.push(Stmt::AsyncCopy {
                dst: self.place(dst)?,
                src: self.place(src)?,
                bytes: *bytes,
                src_bytes: self.expr(src_bytes)?,
            }),
            Stmt::AsyncWait { pending } => out.push(Stmt::AsyncWait {
                pending: self.expr(pending)?,
            }),
            Stmt::Mbarrier(op) => out.push(Stmt::Mbarrier(self.mbarrier(op)?)),
            Stmt::ProxyFence => out.push(Stmt::ProxyFence),
            Stmt::ClusterBarrier => out.push(Stmt::ClusterBarrier),
            Stmt::Warpgroup(op) => out.push(Stmt::Warpgroup(self.warpgroup(op)?)),
            Stmt::Tma(op) => out.push(Stmt::Tma(self.tma(op)?)),
            Stmt::SetMaxRegisters { grow, count } => out.push(Stmt::SetMaxRegisters {
                grow: *grow,
                count: self.expr(count)?,
            }),
        }
        Ok(())
    }

    /// `body` with the tests of its constant flags folded: the bool register
    /// locals that hold one value wherever they are read. Each `let` of one
    /// sets it to that literal, and every assignment left once the `if`s and
    /// `while`s the flags decide are folded sets it to that literal again.
    /// Found optimistically: every flag set by a literal is assumed constant,
    /// and one with an assignment of anything else left in the folded body
    /// is dropped, until none is.
    ///
    /// Why fold them: a flag that ptxas can prove false, guarding an atomic
    /// in an unrolled loop with an early `return`, makes ptxas 12.9 crash
    /// (SIGSEGV) at -O3 for sm_70 (codegen/tests/generated/ptxas_crash_on_a_constant_flag.json),
    /// and the code it guards is dead anyway.
    fn fold_constant_flags(&mut self, body: Vec<Stmt>) -> Vec<Stmt> {
        let mut flags: Vec<(LocalId, Literal)> = Vec::new();
        let mut excluded: Vec<LocalId> = Vec::new();
        visit_stmts(&body, &mut |stmt| {
            let Stmt::Let { local, init } = stmt else {
                return;
            };
            let decl = &self.kernel.locals[*local as usize];
            if decl.ty != Scalar::Bool || decl.space != Space::Register || !decl.dims.is_empty() {
                return;
            }
            let value = match init.as_ref().map(|e| &e.kind) {
                Some(ExprKind::Literal(lit)) => *lit,
                _ => {
                    excluded.push(*local);
                    return;
                }
            };
            match flags.iter().find(|(l, _)| l == local) {
                Some((_, seen)) if *seen != value => excluded.push(*local),
                Some(_) => {}
                None => flags.push((*local, value)),
            }
        });
        flags.retain(|(local, _)| !excluded.contains(local));
        while !flags.is_empty() {
            let folded = self.fold_flag_tests(body.clone(), &flags);
            let mut assigned = Vec::new();
            visit_stmts(&folded, &mut |stmt| {
                if let Stmt::Assign {
                    place: Place::Local { local, indices },
                    value,
                } = stmt
                {
                    if indices.is_empty() {
                        assigned.push((*local, value));
                    }
                }
            });
            let changing: Vec<LocalId> = assigned
                .into_iter()
                .filter(|&(local, value)| {
                    flags
                        .iter()
                        .find(|(l, _)| *l == local)
                        .is_some_and(|&(_, flag)| self.decided(value, &flags) != Some(flag))
                })
                .map(|(local, _)| local)
                .collect();
            if changing.is_empty() {
                return folded;
            }
            flags.retain(|(local, _)| !changing.contains(local));
        }
        body
    }

    /// The value of `expr` with the flags' values, when that decides it. A
    /// fold that would fail (an overflow the flags' values expose) decides
    /// nothing: only the control flow is folded here, and the expression
    /// itself stays as it was.
    fn decided(&mut self, expr: &Expr, flags: &[(LocalId, Literal)]) -> Option<Literal> {
        let outer = std::mem::replace(&mut self.unrolled, flags.to_vec());
        let folded = self.expr(expr);
        self.unrolled = outer;
        match folded.ok()?.kind {
            ExprKind::Literal(lit) => Some(lit),
            _ => None,
        }
    }

    fn decided_bool(&mut self, cond: &Expr, flags: &[(LocalId, Literal)]) -> Option<bool> {
        match self.decided(cond, flags)? {
            Literal::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// `body` with each `if` that `flags` decide replaced by the branch
    /// taken, and each `while` they rule out dropped.
    fn fold_flag_tests(&mut self, body: Vec<Stmt>, flags: &[(LocalId, Literal)]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        for stmt in body {
            match stmt {
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => match self.decided_bool(&cond, flags) {
                    Some(true) => out.extend(self.fold_flag_tests(then_body, flags)),
                    Some(false) => out.extend(self.fold_flag_tests(else_body, flags)),
                    None => out.push(Stmt::If {
                        cond,
                        then_body: self.fold_flag_tests(then_body, flags),
                        else_body: self.fold_flag_tests(else_body, flags),
                    }),
                },
                Stmt::While { cond, body } => {
                    if self.decided_bool(&cond, flags) != Some(false) {
                        let body = self.fold_flag_tests(body, flags);
                        out.push(Stmt::While { cond, body });
                    }
                }
                mut other => {
                    if let Stmt::For { body, .. } = &mut other {
                        *body = self.fold_flag_tests(std::mem::take(body), flags);
                    }
                    out.push(other);
                }
            }
        }
        out
    }

    fn unroll(
        &mut self,
        var: LocalId,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &[Stmt],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Error> {
        let name = self.local_name(var).to_string();
        let ty = self
            .kernel
            .locals
            .get(var as usize)
            .map_or(Scalar::I32, |l| l.ty);
        let mut bound = |what: &str, e: &Expr| -> Result<i128, Error> {
            let folded = self.expr(e)?;
            match folded.kind {
                ExprKind::Literal(Literal::Int(v)) if ty == Scalar::U64 => Ok(v as u64 as i128),
                ExprKind::Literal(Literal::Int(v)) => Ok(v as i128),
                _ => Err(self.error(format!(
                    "the {what} of `#[unroll] for {name}` is not a compile-time constant: \
                     use literals, const params and enclosing #[unroll] loop variables, or drop `#[unroll]`"
                ))),
            }
        };
        let (start, end, step) = (
            bound("start", start)?,
            bound("end", end)?,
            bound("step", step)?,
        );
        if step <= 0 {
            return Err(self.error(format!(
                "`#[unroll] for {name}` has step {step}: the step must be positive"
            )));
        }
        let trips = if start < end {
            (end - start + step - 1) / step
        } else {
            0
        };
        if trips > MAX_UNROLL {
            return Err(self.error(format!(
                "`#[unroll] for {name}` would unroll {trips} iterations, more than the limit of {MAX_UNROLL}: \
                 unroll an inner loop only, or drop `#[unroll]`"
            )));
        }
        self.loops.push(Some(var));
        let mut value = start;
        while value < end {
            self.unrolled_total += 1;
            if self.unrolled_total > MAX_UNROLLED {
                return Err(self.error(format!(
                    "the `#[unroll]` loops would unroll more than {MAX_UNROLLED} iterations in all \
                     (nested loops multiply; `#[unroll] for {name}` passed it): drop `#[unroll]` \
                     from an outer loop, or unroll fewer iterations"
                )));
            }
            let lit = eval::encode_int(ty, value).map_err(|e| self.error(e.message))?;
            self.unrolled.push((var, lit));
            // An error abandons the whole specialization, so the stacks need
            // no unwinding on the `?` paths.
            out.extend(self.block(body)?);
            self.unrolled.pop();
            value += step;
        }
        self.loops.pop();
        Ok(())
    }

    fn place(&mut self, place: &Place) -> Result<Place, Error> {
        Ok(match place {
            Place::Local { local, indices } => Place::Local {
                local: *local,
                indices: indices
                    .iter()
                    .map(|i| self.expr(i))
                    .collect::<Result<_, _>>()?,
            },
            Place::Global { param, index } => Place::Global {
                param: *param,
                index: self.expr(index)?,
            },
        })
    }

    fn fragment(&mut self, fragment: &Fragment) -> Result<Fragment, Error> {
        Ok(Fragment {
            local: fragment.local,
            indices: fragment
                .indices
                .iter()
                .map(|i| self.expr(i))
                .collect::<Result<_, _>>()?,
        })
    }

    /// A `block(..)` or `cluster(..)` shape with its const params substituted.
    fn dims(&mut self, dims: &[Expr; 3]) -> Result<[Expr; 3], Error> {
        let mut out = dims.clone();
        for (dim, decl) in out.iter_mut().zip(dims) {
            *dim = self.expr(decl)?;
        }
        Ok(out)
    }

    fn mbarrier(&mut self, op: &MbarrierOp) -> Result<MbarrierOp, Error> {
        Ok(match op {
            MbarrierOp::Init { bar, count } => MbarrierOp::Init {
                bar: self.place(bar)?,
                count: self.expr(count)?,
            },
            MbarrierOp::Arrive { bar } => MbarrierOp::Arrive {
                bar: self.place(bar)?,
            },
            MbarrierOp::ArriveExpectTx { bar, bytes } => MbarrierOp::ArriveExpectTx {
                bar: self.place(bar)?,
                bytes: self.expr(bytes)?,
            },
            MbarrierOp::Wait { bar, parity } => MbarrierOp::Wait {
                bar: self.place(bar)?,
                parity: self.expr(parity)?,
            },
            MbarrierOp::ArriveCluster { bar, rank } => MbarrierOp::ArriveCluster {
                bar: self.place(bar)?,
                rank: self.expr(rank)?,
            },
            MbarrierOp::InitFence => MbarrierOp::InitFence,
        })
    }

    fn warpgroup(&mut self, op: &WarpgroupOp) -> Result<WarpgroupOp, Error> {
        Ok(match op {
            WarpgroupOp::Fence => WarpgroupOp::Fence,
            WarpgroupOp::Commit => WarpgroupOp::Commit,
            WarpgroupOp::Wait { pending } => WarpgroupOp::Wait {
                pending: self.expr(pending)?,
            },
            WarpgroupOp::Mma(mma) => WarpgroupOp::Mma(Wgmma {
                kind: mma.kind,
                n: self.expr(&mma.n)?,
                acc: self.fragment(&mma.acc)?,
                a: self.descriptor(&mma.a)?,
                b: self.descriptor(&mma.b)?,
                accumulate: self.expr(&mma.accumulate)?,
            }),
        })
    }

    fn tma(&mut self, op: &TmaOp) -> Result<TmaOp, Error> {
        Ok(match op {
            TmaOp::Load {
                smem,
                map,
                coords,
                bar,
                multicast,
            } => TmaOp::Load {
                smem: self.place(smem)?,
                map: *map,
                coords: self.exprs(coords)?,
                bar: self.place(bar)?,
                multicast: multicast.as_ref().map(|m| self.expr(m)).transpose()?,
            },
            TmaOp::Store { smem, map, coords } => TmaOp::Store {
                smem: self.place(smem)?,
                map: *map,
                coords: self.exprs(coords)?,
            },
            TmaOp::Commit => TmaOp::Commit,
            TmaOp::WaitRead { pending } => TmaOp::WaitRead {
                pending: self.expr(pending)?,
            },
            TmaOp::Wait { pending } => TmaOp::Wait {
                pending: self.expr(pending)?,
            },
        })
    }

    /// Folds a tensor map's expressions: the tile becomes literals (the
    /// validator checks its sizes), the shape and strides keep the scalar
    /// parameters the launcher reads.
    fn tensor_map(&mut self, out: &mut TensorMap, decl: &TensorMap) -> Result<(), Error> {
        out.shape = self.exprs(&decl.shape)?;
        out.strides = self.exprs(&decl.strides)?;
        out.tile = self.exprs(&decl.tile)?;
        Ok(())
    }

    fn exprs(&mut self, exprs: &[Expr]) -> Result<Vec<Expr>, Error> {
        exprs.iter().map(|e| self.expr(e)).collect()
    }

    fn descriptor(&mut self, d: &MatrixDescriptor) -> Result<MatrixDescriptor, Error> {
        Ok(MatrixDescriptor {
            start: self.place(&d.start)?,
            swizzle: d.swizzle,
        })
    }

    fn matrix(&mut self, op: &MatrixOp) -> Result<MatrixOp, Error> {
        Ok(match op {
            MatrixOp::LoadMatrix {
                count,
                transpose,
                dst,
                src,
            } => MatrixOp::LoadMatrix {
                count: *count,
                transpose: *transpose,
                dst: self.fragment(dst)?,
                src: self.place(src)?,
            },
            MatrixOp::Mma { kind, acc, a, b } => MatrixOp::Mma {
                kind: *kind,
                acc: self.fragment(acc)?,
                a: self.fragment(a)?,
                b: self.fragment(b)?,
            },
            MatrixOp::MmaSparse {
                kind,
                ordered,
                acc,
                a,
                b,
                metadata,
                selector,
            } => MatrixOp::MmaSparse {
                kind: *kind,
                ordered: *ordered,
                acc: self.fragment(acc)?,
                a: self.fragment(a)?,
                b: self.fragment(b)?,
                metadata: self.expr(metadata)?,
                selector: self.expr(selector)?,
            },
            MatrixOp::WmmaLoad {
                operand,
                layout,
                dst,
                src,
                stride,
            } => MatrixOp::WmmaLoad {
                operand: *operand,
                layout: *layout,
                dst: self.fragment(dst)?,
                src: self.place(src)?,
                stride: self.expr(stride)?,
            },
            MatrixOp::Wmma {
                a_layout,
                b_layout,
                acc,
                a,
                b,
            } => MatrixOp::Wmma {
                a_layout: *a_layout,
                b_layout: *b_layout,
                acc: self.fragment(acc)?,
                a: self.fragment(a)?,
                b: self.fragment(b)?,
            },
            MatrixOp::WmmaStore {
                layout,
                dst,
                src,
                stride,
            } => MatrixOp::WmmaStore {
                layout: *layout,
                dst: self.place(dst)?,
                src: self.fragment(src)?,
                stride: self.expr(stride)?,
            },
        })
    }

    /// Substitutes and folds one expression, on a new stack segment when
    /// the thread's is nearly spent (see [`STACK_RED_ZONE`]).
    fn expr(&mut self, expr: &Expr) -> Result<Expr, Error> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            let ty = expr.ty;
            let kind = match &expr.kind {
                ExprKind::Const(_) => {
                    let lit =
                        eval::eval(expr, self.consts, &[]).map_err(|e| self.error(e.message))?;
                    return Ok(Expr::literal(ty, lit));
                }
                ExprKind::Load(place) => {
                    if let Place::Local { local, indices } = place.as_ref() {
                        if indices.is_empty() {
                            if let Some((_, lit)) =
                                self.unrolled.iter().rev().find(|(var, _)| var == local)
                            {
                                return Ok(Expr::literal(ty, *lit));
                            }
                        }
                    }
                    ExprKind::Load(Box::new(self.place(place)?))
                }
                ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(self.expr(a)?)),
                ExprKind::Binary(op, a, b) => {
                    let a = self.expr(a)?;
                    // Short-circuit operators with a constant left operand: the
                    // right one is only kept (and folded) when it decides.
                    match (op, &a.kind) {
                        (BinaryOp::LogicalAnd, ExprKind::Literal(Literal::Bool(false)))
                        | (BinaryOp::LogicalOr, ExprKind::Literal(Literal::Bool(true))) => {
                            return Ok(a)
                        }
                        (BinaryOp::LogicalAnd, ExprKind::Literal(Literal::Bool(true)))
                        | (BinaryOp::LogicalOr, ExprKind::Literal(Literal::Bool(false))) => {
                            return self.expr(b)
                        }
                        _ => {
                            let b = self.expr(b)?;
                            // `x && true` and `x || false` are `x` (x is evaluated
                            // either way): a device function's condition with a
                            // flag its caller passes as a literal.
                            match (op, &b.kind) {
                                (BinaryOp::LogicalAnd, ExprKind::Literal(Literal::Bool(true)))
                                | (BinaryOp::LogicalOr, ExprKind::Literal(Literal::Bool(false))) => {
                                    return Ok(a)
                                }
                                // `x && false` and `x || true` are the literal when
                                // evaluating `x` can neither fault nor act. Besides
                                // dropping dead code, this keeps a loop whose
                                // condition is constant false out of ptxas: 12.9 and
                                // 13.0 crash (SIGSEGV) on some such loops
                                // (codegen/tests/generated/ptxas_crash_on_a_dead_loop.json).
                                (BinaryOp::LogicalAnd, ExprKind::Literal(Literal::Bool(false)))
                                | (BinaryOp::LogicalOr, ExprKind::Literal(Literal::Bool(true)))
                                    if a.is_speculatable(&self.kernel.locals) =>
                                {
                                    return Ok(b)
                                }
                                _ => ExprKind::Binary(*op, Box::new(a), Box::new(b)),
                            }
                        }
                    }
                }
                ExprKind::Cast(a) => ExprKind::Cast(Box::new(self.expr(a)?)),
                ExprKind::Select(cond, a, b) => {
                    let cond = self.expr(cond)?;
                    match cond.kind {
                        ExprKind::Literal(Literal::Bool(true)) => return self.expr(a),
                        ExprKind::Literal(Literal::Bool(false)) => return self.expr(b),
                        _ => ExprKind::Select(
                            Box::new(cond),
                            Box::new(self.expr(a)?),
                            Box::new(self.expr(b)?),
                        ),
                    }
                }
                ExprKind::Call(intrinsic, args) => ExprKind::Call(
                    *intrinsic,
                    args.iter()
                        .map(|a| self.expr(a))
                        .collect::<Result<_, _>>()?,
                ),
                ExprKind::Atomic {
                    op,
                    place,
                    value,
                    compare,
                } => ExprKind::Atomic {
                    op: *op,
                    place: Box::new(self.place(place)?),
                    value: Box::new(self.expr(value)?),
                    compare: compare
                        .as_ref()
                        .map(|c| self.expr(c).map(Box::new))
                        .transpose()?,
                },
                ExprKind::Literal(_)
                | ExprKind::Param(_)
                | ExprKind::Len(_)
                | ExprKind::Special(_) => return Ok(expr.clone()),
            };
            let folded = Expr { ty, kind };
            if let Some(operand) = integer_identity(&folded) {
                return Ok(operand);
            }
            let foldable = match &folded.kind {
                ExprKind::Unary(_, a) | ExprKind::Cast(a) => is_literal(a),
                ExprKind::Binary(_, a, b) => is_literal(a) && is_literal(b),
                _ => false,
            };
            if foldable {
                let lit = eval::eval(&folded, &[], &[])
                    .map_err(|e| self.error(format!("constant expression: {}", e.message)))?;
                return Ok(Expr::literal(ty, lit));
            }
            Ok(folded)
        })
    }
}

/// The operand of an integer operation with a neutral literal (`x + 0`,
/// `0 + x`, `x * 1`, `x / 1`, `x << 0`, ...), which unrolling produces often
/// (`base + j` for `j = 0`). Integers only: `x + 0.0` is not `x` for `x = -0.0`.
fn integer_identity(e: &Expr) -> Option<Expr> {
    let ExprKind::Binary(op, a, b) = &e.kind else {
        return None;
    };
    if !e.ty.is_int() {
        return None;
    }
    let (zero, one) = (Some(0), Some(1));
    let keep = match op {
        BinaryOp::Add | BinaryOp::BitOr | BinaryOp::BitXor if a.as_int() == zero => b,
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::Shl
        | BinaryOp::Shr
            if b.as_int() == zero =>
        {
            a
        }
        BinaryOp::Mul if a.as_int() == one => b,
        BinaryOp::Mul | BinaryOp::Div if b.as_int() == one => a,
        _ => return None,
    };
    Some((**keep).clone())
}

fn is_literal(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Literal(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ConstParam, Local, Param, ParamType, Space};

    fn u32_lit(v: u32) -> Expr {
        Expr::u32(v)
    }

    fn konst(id: u32) -> Expr {
        Expr {
            ty: Scalar::U32,
            kind: ExprKind::Const(id),
        }
    }

    fn load(local: LocalId, ty: Scalar) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Load(Box::new(Place::Local {
                local,
                indices: vec![],
            })),
        }
    }

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }

    fn local(name: &str, ty: Scalar, dims: Vec<Expr>, mutable: bool) -> Local {
        Local {
            name: name.into(),
            ty,
            space: Space::Register,
            dims,
            mutable,
        }
    }

    /// `acc[k] = acc[k] + x[k]` over `#[unroll] for k in 0..N`, plus a
    /// `if N > 2 { .. } else { .. }`.
    fn kernel(body: Vec<Stmt>) -> Kernel {
        Kernel {
            name: "k".into(),
            const_params: vec![ConstParam {
                name: "N".into(),
                ty: Scalar::U32,
            }],
            params: vec![Param {
                name: "x".into(),
                ty: ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: false,
                },
                tensor_map: None,
            }],
            locals: vec![
                local("acc", Scalar::F32, vec![konst(0)], true),
                local("k", Scalar::U32, vec![], false),
            ],
            block: Some([
                bin(BinaryOp::Mul, konst(0), u32_lit(32)),
                u32_lit(1),
                u32_lit(1),
            ]),
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![],
            body,
        }
    }

    fn unrolled_loop(body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: 1,
            start: u32_lit(0),
            end: konst(0),
            step: u32_lit(1),
            unroll: true,
            body,
        }
    }

    fn acc_at(index: Expr) -> Place {
        Place::Local {
            local: 0,
            indices: vec![index],
        }
    }

    #[test]
    fn substitutes_folds_and_unrolls() {
        let body = vec![
            Stmt::Let {
                local: 0,
                init: Some(Expr::literal(Scalar::F32, Literal::Float(0.0))),
            },
            unrolled_loop(vec![Stmt::Assign {
                place: acc_at(load(1, Scalar::U32)),
                value: Expr {
                    ty: Scalar::F32,
                    kind: ExprKind::Load(Box::new(Place::Global {
                        param: 0,
                        index: load(1, Scalar::U32),
                    })),
                },
            }]),
        ];
        let k = specialize(&kernel(body), &[3]).unwrap();
        assert_eq!(k.locals[0].dims, vec![u32_lit(3)]);
        assert_eq!(k.block.as_ref().unwrap()[0], u32_lit(96));
        assert_eq!(k.body.len(), 4, "Let + 3 copies");
        for (i, stmt) in k.body[1..].iter().enumerate() {
            let Stmt::Assign {
                place: Place::Local { indices, .. },
                value,
            } = stmt
            else {
                panic!("{stmt:?}")
            };
            assert_eq!(indices[0], u32_lit(i as u32));
            let ExprKind::Load(place) = &value.kind else {
                panic!()
            };
            assert_eq!(
                **place,
                Place::Global {
                    param: 0,
                    index: u32_lit(i as u32)
                }
            );
        }
    }

    #[test]
    fn constant_ifs_keep_only_the_branch_taken() {
        let body = vec![Stmt::If {
            cond: bin(BinaryOp::Gt, konst(0), u32_lit(2)),
            then_body: vec![Stmt::Barrier],
            else_body: vec![Stmt::Return],
        }];
        assert_eq!(
            specialize(&kernel(body.clone()), &[3]).unwrap().body,
            vec![Stmt::Barrier]
        );
        assert_eq!(
            specialize(&kernel(body), &[2]).unwrap().body,
            vec![Stmt::Return]
        );
    }

    #[test]
    fn a_flag_that_never_changes_decides_its_tests() {
        let bool_lit = |b| Expr::literal(Scalar::Bool, Literal::Bool(b));
        let (flag, other) = (2, 3);
        let mut k = kernel(vec![]);
        k.locals.push(local("flag", Scalar::Bool, vec![], true));
        k.locals.push(local("other", Scalar::Bool, vec![], true));
        let not_other = Expr {
            ty: Scalar::Bool,
            kind: ExprKind::Unary(crate::ir::UnaryOp::Not, Box::new(load(other, Scalar::Bool))),
        };
        let set = |local, value| Stmt::Assign {
            place: Place::Local {
                local,
                indices: vec![],
            },
            value,
        };
        let resets_other = Stmt::If {
            cond: load(other, Scalar::Bool),
            then_body: vec![set(other, bool_lit(false))],
            else_body: vec![],
        };
        let returns = Stmt::If {
            cond: not_other,
            then_body: vec![Stmt::Return],
            else_body: vec![],
        };
        k.body = vec![
            Stmt::Let {
                local: flag,
                init: Some(bool_lit(false)),
            },
            Stmt::Let {
                local: other,
                init: Some(bool_lit(true)),
            },
            // Only a branch the flag rules out sets it otherwise.
            Stmt::If {
                cond: load(flag, Scalar::Bool),
                then_body: vec![
                    Stmt::Barrier,
                    set(flag, bin(BinaryOp::Lt, load(1, Scalar::U32), u32_lit(4))),
                ],
                else_body: vec![],
            },
            // `other` is set to another value where the body can reach.
            resets_other.clone(),
            returns.clone(),
            Stmt::While {
                cond: load(flag, Scalar::Bool),
                body: vec![Stmt::Barrier],
            },
            Stmt::If {
                cond: load(flag, Scalar::Bool),
                then_body: vec![Stmt::Barrier],
                else_body: vec![Stmt::AsyncCommit],
            },
        ];
        let body = specialize(&k, &[3]).unwrap().body;
        assert_eq!(
            body,
            vec![
                k.body[0].clone(),
                k.body[1].clone(),
                resets_other,
                returns,
                Stmt::AsyncCommit
            ]
        );
    }

    #[test]
    fn a_literal_right_operand_of_and_or_folds_away() {
        let bool_lit = |b| Expr::literal(Scalar::Bool, Literal::Bool(b));
        let x = bin(BinaryOp::Lt, load(1, Scalar::U32), u32_lit(4));
        let kept = |e: Expr| {
            let k = specialize(&kernel(vec![Stmt::Expr(e)]), &[3]).unwrap();
            k.body
        };
        assert_eq!(
            kept(bin(BinaryOp::LogicalAnd, x.clone(), bool_lit(true))),
            vec![Stmt::Expr(x.clone())]
        );
        assert_eq!(
            kept(bin(BinaryOp::LogicalOr, x.clone(), bool_lit(false))),
            vec![Stmt::Expr(x.clone())]
        );
        // `x && false` and `x || true` are the literal when `x` cannot fault
        // or act, ...
        assert_eq!(
            kept(bin(BinaryOp::LogicalAnd, x.clone(), bool_lit(false))),
            vec![Stmt::Expr(bool_lit(false))]
        );
        assert_eq!(
            kept(bin(BinaryOp::LogicalOr, x, bool_lit(true))),
            vec![Stmt::Expr(bool_lit(true))]
        );
        // ... and otherwise only once `x` has been evaluated: kept.
        let read = Expr {
            ty: Scalar::F32,
            kind: ExprKind::Load(Box::new(Place::Global {
                param: 0,
                index: u32_lit(0),
            })),
        };
        let positive = bin(
            BinaryOp::Gt,
            read,
            Expr::literal(Scalar::F32, Literal::Float(0.0)),
        );
        let both = bin(BinaryOp::LogicalAnd, positive, bool_lit(false));
        assert_eq!(kept(both.clone()), vec![Stmt::Expr(both)]);
    }

    #[test]
    fn dead_branches_are_not_folded() {
        // `if N > 0 { x = 10 / N }` with N = 0 must not report a division by zero.
        let body = vec![Stmt::If {
            cond: bin(BinaryOp::Gt, konst(0), u32_lit(0)),
            then_body: vec![Stmt::Expr(bin(BinaryOp::Div, u32_lit(10), konst(0)))],
            else_body: vec![],
        }];
        assert_eq!(specialize(&kernel(body), &[0]).unwrap().body, vec![]);
    }

    #[test]
    fn overflowing_folds_name_kernel_and_variant() {
        let body = vec![Stmt::Expr(bin(BinaryOp::Mul, konst(0), u32_lit(1 << 20)))];
        let e = specialize(&kernel(body), &[1 << 13]).unwrap_err();
        assert_eq!(
            e.message,
            "kernel `k` with N=8192: constant expression: `8192 * 1048576` overflows u32"
        );
    }

    #[test]
    fn const_values_are_checked() {
        assert_eq!(
            specialize(&kernel(vec![]), &[]).unwrap_err().message,
            "kernel `k` has 1 const params but 0 values were given: pass one value per const param, in declaration order"
        );
        assert_eq!(
            specialize(&kernel(vec![]), &[-1]).unwrap_err().message,
            "kernel `k`: const param `N` is a u32 and cannot take the value -1"
        );
    }

    #[test]
    fn unroll_bounds_must_be_constant_and_small() {
        let mut k = kernel(vec![unrolled_loop(vec![])]);
        k.params.push(Param {
            name: "n".into(),
            ty: ParamType::Scalar(Scalar::U32),
            tensor_map: None,
        });
        k.body = vec![Stmt::For {
            var: 1,
            start: u32_lit(0),
            end: Expr {
                ty: Scalar::U32,
                kind: ExprKind::Param(1),
            },
            step: u32_lit(1),
            unroll: true,
            body: vec![],
        }];
        let e = specialize(&k, &[4]).unwrap_err();
        assert_eq!(
            e.message,
            "kernel `k` with N=4: the end of `#[unroll] for k` is not a compile-time constant: \
             use literals, const params and enclosing #[unroll] loop variables, or drop `#[unroll]`"
        );
        let e = specialize(&kernel(vec![unrolled_loop(vec![])]), &[5000]).unwrap_err();
        assert!(
            e.message
                .contains("would unroll 5000 iterations, more than the limit of 1024"),
            "{}",
            e.message
        );
    }

    #[test]
    fn break_in_an_unrolled_loop_is_rejected() {
        let e = specialize(&kernel(vec![unrolled_loop(vec![Stmt::Break])]), &[2]).unwrap_err();
        assert!(
            e.message
                .starts_with("kernel `k` with N=2: `break` in the body of `#[unroll] for k`"),
            "{}",
            e.message
        );
        // A break of a loop nested inside the unrolled one is fine.
        let inner = Stmt::While {
            cond: Expr::literal(Scalar::Bool, Literal::Bool(true)),
            body: vec![Stmt::Break],
        };
        let k = specialize(&kernel(vec![unrolled_loop(vec![inner.clone()])]), &[2]).unwrap();
        assert_eq!(k.body, vec![inner.clone(), inner]);
    }

    #[test]
    fn neutral_integer_literals_fold_away() {
        // `base + k * 1` with k unrolled from 0: the copy for k = 0 is `base`.
        let base = Expr {
            ty: Scalar::U32,
            kind: ExprKind::Special(crate::ir::Special::LaneId),
        };
        let index = bin(
            BinaryOp::Add,
            base.clone(),
            bin(BinaryOp::Mul, load(1, Scalar::U32), u32_lit(1)),
        );
        let body = vec![unrolled_loop(vec![Stmt::Expr(index)])];
        let k = specialize(&kernel(body), &[2]).unwrap();
        assert_eq!(k.body[0], Stmt::Expr(base.clone()));
        assert_eq!(k.body[1], Stmt::Expr(bin(BinaryOp::Add, base, u32_lit(1))));
        // Not for floats: -0.0 + 0.0 is +0.0.
        let x = Expr {
            ty: Scalar::F32,
            kind: ExprKind::Param(0),
        };
        let sum = bin(
            BinaryOp::Add,
            x,
            Expr::literal(Scalar::F32, Literal::Float(0.0)),
        );
        let k = specialize(&kernel(vec![Stmt::Expr(sum.clone())]), &[2]).unwrap();
        assert_eq!(k.body[0], Stmt::Expr(sum));
    }

    #[test]
    fn dims_must_become_constant() {
        let mut k = kernel(vec![]);
        k.params.push(Param {
            name: "n".into(),
            ty: ParamType::Scalar(Scalar::U32),
            tensor_map: None,
        });
        k.locals[0].dims = vec![Expr {
            ty: Scalar::U32,
            kind: ExprKind::Param(1),
        }];
        assert_eq!(
            specialize(&k, &[1]).unwrap_err().message,
            "kernel `k` with N=1: dimension 0 of array `acc` is not a compile-time constant: use literals and const params"
        );
    }
}
