//! The machine: the memory of one launch, warps as lock-step state
//! machines, the block scheduler, statements and expressions.
//!
//! A warp's position is a stack of frames: a block of statements being run
//! under a lane mask, or a loop between iterations. `if` pushes its else
//! branch (pending, run second) and then its then branch; a loop pushes its
//! body once per iteration. `break`, `continue` and `return` clear their
//! lanes from the frames they leave. Nothing on the stack points into the
//! host's call stack, so a warp can stop at a barrier and resume later.

use super::value::{self, Fault};
use super::{Arg, Error, ErrorKind, Launch, Stats, MAX_SHARED_BYTES};
use crate::eval::HostValue;
use crate::ir::{
    BinaryOp, Expr, ExprKind, Intrinsic, Kernel, Literal, LocalId, ParamType, Place, Scalar, Space,
    Special, Stmt, CLUSTER_BARRIER_FUNCTION, PROXY_FENCE_FUNCTION,
};
use crate::print;
use crate::valid::intrinsic_name;

/// One value per lane of a warp (inactive lanes hold anything).
pub(super) type Lanes = [Literal; 32];

/// Every lane.
pub(super) const FULL: u32 = u32::MAX;

/// What inactive lanes hold.
pub(super) const NOTHING: Literal = Literal::Int(0);

/// The most register elements (over all register locals and threads) of one
/// block: a bound on the host memory a launch takes.
const MAX_BLOCK_REGISTERS: u64 = 1 << 24;

/// The deepest expression nesting evaluated (a guard for the host's stack).
const MAX_DEPTH: u32 = 512;

/// The lanes set in a mask, lowest first.
pub(super) fn lanes(mask: u32) -> impl Iterator<Item = u32> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let l = m.trailing_zeros();
        m &= m - 1;
        Some(l)
    })
}

/// Where each local lives.
pub(super) struct Layout {
    /// A register local's first slot, or a shared array's byte offset.
    pub offset: Vec<usize>,
    /// Dimensions, outermost first (empty for a scalar).
    pub dims: Vec<Vec<usize>>,
    /// Elements (1 for a scalar).
    pub elems: Vec<usize>,
    pub reg_slots: usize,
    pub shared_bytes: usize,
}

impl Layout {
    pub(super) fn new(kernel: &Kernel) -> Result<Layout, (ErrorKind, String)> {
        let mut layout = Layout {
            offset: Vec::with_capacity(kernel.locals.len()),
            dims: Vec::with_capacity(kernel.locals.len()),
            elems: Vec::with_capacity(kernel.locals.len()),
            reg_slots: 0,
            shared_bytes: 0,
        };
        for local in &kernel.locals {
            let mut dims = Vec::with_capacity(local.dims.len());
            let mut elems = 1usize;
            for d in &local.dims {
                let n = d.as_int().filter(|&n| n >= 0).ok_or_else(|| {
                    (
                        ErrorKind::InvalidKernel,
                        format!(
                            "the size of `{}` is not a literal: specialize the kernel first",
                            local.name
                        ),
                    )
                })? as usize;
                dims.push(n);
                elems = elems.saturating_mul(n);
            }
            match local.space {
                Space::Register => {
                    if elems > crate::specialize::MAX_REGISTER_ARRAY as usize {
                        return Err((
                            ErrorKind::InvalidKernel,
                            format!(
                                "register array `{}` has {elems} elements, more than {}",
                                local.name,
                                crate::specialize::MAX_REGISTER_ARRAY
                            ),
                        ));
                    }
                    layout.offset.push(layout.reg_slots);
                    layout.reg_slots += elems;
                }
                Space::Shared => {
                    // Shared arrays start 128-byte aligned, as the backends lay them out.
                    let start = layout.shared_bytes.div_ceil(128) * 128;
                    let bytes = elems.saturating_mul(local.ty.size_bytes() as usize);
                    let end = start.saturating_add(bytes);
                    if end > MAX_SHARED_BYTES {
                        return Err((
                            ErrorKind::InvalidLaunch,
                            format!(
                                "its shared arrays need more than {MAX_SHARED_BYTES} bytes (227 KiB, the most a block can have), \
                                 `{}` reaching byte {end}",
                                local.name
                            ),
                        ));
                    }
                    layout.offset.push(start);
                    layout.shared_bytes = end;
                }
            }
            layout.dims.push(dims);
            layout.elems.push(elems);
        }
        Ok(layout)
    }
}

/// A parameter's value during the run.
pub(super) enum ParamValue {
    Scalar(Literal),
    Slice {
        elem: Scalar,
        len: usize,
        bytes: Vec<u8>,
    },
}

/// A name for a block of statements in a path (the validator's words).
#[derive(Clone, Copy)]
enum BlockName {
    Kernel,
    Then,
    Else,
    For(LocalId),
    While,
}

enum Frame<'k> {
    Block {
        stmts: &'k [Stmt],
        /// The next statement; the one running is `next - 1` (so `next` is its
        /// number counted from 1). 0 while an else branch waits its turn.
        next: usize,
        mask: u32,
        name: BlockName,
    },
    While {
        cond: &'k Expr,
        body: &'k [Stmt],
        mask: u32,
    },
    For {
        var: LocalId,
        body: &'k [Stmt],
        end: Box<Lanes>,
        step: Box<Lanes>,
        mask: u32,
        started: bool,
    },
}

#[derive(Clone, Copy, PartialEq)]
enum State<'k> {
    Running,
    Barrier(&'k Stmt),
    Done,
}

/// What a statement asks of the warp's run loop.
enum Flow {
    Next,
    Barrier,
}

/// How lanes leave the frames of a loop.
#[derive(Clone, Copy, PartialEq)]
enum Leave {
    Break,
    Continue,
    Return,
}

pub(super) struct Warp<'k> {
    pub index: u32,
    /// The linear thread id of lane 0.
    pub first: u32,
    /// The lanes the block has (all but in a last, partial warp).
    pub existing: u32,
    /// The lanes that returned.
    pub exited: u32,
    /// Register slot `s` of lane `l` at `s * 32 + l`; `None` until written.
    pub regs: Vec<Option<Literal>>,
    stack: Vec<Frame<'k>>,
    state: State<'k>,
}

/// A place resolved for every active lane: its memory and where in it.
pub(super) struct Resolved {
    pub mem: Mem,
    pub ty: Scalar,
    /// A register slot, or a byte offset in the block's shared memory or the slice.
    pub at: [usize; 32],
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Mem {
    Reg,
    Shared,
    Global(usize),
}

pub(super) struct Machine<'k> {
    pub kernel: &'k Kernel,
    pub layout: Layout,
    pub params: Vec<ParamValue>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Threads per block.
    pub threads: u32,
    steps: u64,
    max_steps: u64,
    /// Whether a read of a register or shared byte never written is an error.
    pub check_uninitialized: bool,
    /// Whether float arithmetic on or giving an infinity or NaN is an error.
    check_non_finite: bool,
    depth: u32,
    pub block_idx: [u32; 3],
    pub shared: Vec<u8>,
    pub shared_init: Vec<bool>,
}

/// `result`, or with `check` on a [`ErrorKind::NonFinite`] fault when it or
/// one of the `operands` of the operation `what` names is an infinity or NaN.
fn finite(
    check: bool,
    operands: &[Literal],
    result: Literal,
    what: impl FnOnce() -> String,
) -> Result<Literal, Fault> {
    let non_finite = |v: &Literal| matches!(v, Literal::Float(x) if !x.is_finite());
    if !check || !operands.iter().chain([&result]).any(non_finite) {
        return Ok(result);
    }
    let shown: Vec<String> = operands.iter().map(|v| format!("{v:?}")).collect();
    Err(Fault::new(
        ErrorKind::NonFinite,
        format!(
            "{} of ({}) gives {result:?}: WGSL lets an implementation assume that no float \
             is infinite or NaN, so this result may differ there",
            what(),
            shown.join(", ")
        ),
    ))
}

fn triple(v: [u32; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

impl<'k> Machine<'k> {
    pub fn new(kernel: &'k Kernel, launch: &Launch, args: &[Arg]) -> Result<Machine<'k>, Error> {
        let fail = |kind: ErrorKind, message: String| {
            Error::before_run(
                &kernel.name,
                kind,
                format!("kernel `{}`: {message}", kernel.name),
            )
        };
        crate::valid::validate(kernel)
            .map_err(|e| Error::before_run(&kernel.name, ErrorKind::InvalidKernel, e.message))?;
        if kernel.cluster.is_some() {
            // Its blocks would have to run together, and this runs one at a time.
            return Err(fail(
                ErrorKind::Unsupported,
                "`cluster(..)` (thread block clusters) is not interpreted: run the kernel on CUDA"
                    .into(),
            ));
        }
        let [bx, by, bz] = launch.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        if launch.block.contains(&0) || threads > 1024 {
            return Err(fail(
                ErrorKind::InvalidLaunch,
                format!(
                    "a block of {} threads cannot run: each dimension at least 1, at most 1024 threads in all",
                    triple(launch.block)
                ),
            ));
        }
        let [gx, gy, gz] = launch.grid;
        if launch.grid.contains(&0) || gx > i32::MAX as u32 || gy > 65535 || gz > 65535 {
            return Err(fail(
                ErrorKind::InvalidLaunch,
                format!(
                    "a grid of {} blocks cannot run: each dimension at least 1, x below 2^31, y and z at most 65535",
                    triple(launch.grid)
                ),
            ));
        }
        if let Some(shape) = &kernel.block {
            let declared: Vec<Option<i64>> = shape.iter().map(Expr::as_int).collect();
            let matches = declared
                .iter()
                .zip(launch.block)
                .all(|(d, b)| *d == Some(b as i64));
            if !matches {
                let text: Vec<String> = declared
                    .iter()
                    .map(|d| d.map_or("?".into(), |v| v.to_string()))
                    .collect();
                return Err(fail(
                    ErrorKind::InvalidLaunch,
                    format!(
                        "it is written for blocks of ({}) threads (`block(..)`), not {}",
                        text.join(", "),
                        triple(launch.block)
                    ),
                ));
            }
        }
        if args.len() != kernel.params.len() {
            return Err(fail(
                ErrorKind::InvalidArgument,
                format!(
                    "it takes {} arguments ({}), not {}",
                    kernel.params.len(),
                    kernel
                        .params
                        .iter()
                        .map(|p| format!("{}: {}", p.name, super::param_type_text(&p.ty)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    args.len()
                ),
            ));
        }
        let mut params = Vec::with_capacity(args.len());
        let mut host = Vec::with_capacity(args.len());
        for (p, arg) in kernel.params.iter().zip(args) {
            let wrong = |what: String| {
                fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "parameter `{}` is a `{}`, but its argument is {what}",
                        p.name,
                        super::param_type_text(&p.ty)
                    ),
                )
            };
            match (&p.ty, arg) {
                (ParamType::Scalar(ty), Arg::Scalar(lit)) => {
                    let value = match (*ty, *lit) {
                        (Scalar::Bool, Literal::Bool(b)) => Literal::Bool(b),
                        (ty, Literal::Float(v)) if ty.is_float() => {
                            Literal::Float(value::round_float(ty, v))
                        }
                        (ty, Literal::Int(v)) if ty.is_int() => crate::eval::encode_int(
                            ty,
                            if ty == Scalar::U64 {
                                v as u64 as i128
                            } else {
                                v as i128
                            },
                        )
                        .map_err(|e| wrong(format!("{v}, which {}", e.message)))?,
                        (_, other) => return Err(wrong(format!("{other:?}"))),
                    };
                    params.push(ParamValue::Scalar(value));
                    host.push(HostValue::Scalar(value));
                }
                (ParamType::Slice { elem, .. }, Arg::Slice(buffer)) => {
                    if buffer.elem() != *elem {
                        return Err(wrong(format!("a slice of `{}`", buffer.elem().name())));
                    }
                    if buffer.len() > u32::MAX as usize {
                        return Err(wrong(format!(
                            "a slice of {} elements, more than `.len()` (a u32) counts",
                            buffer.len()
                        )));
                    }
                    params.push(ParamValue::Slice {
                        elem: *elem,
                        len: buffer.len(),
                        bytes: buffer.to_bytes(),
                    });
                    host.push(HostValue::Slice {
                        len: buffer.len() as u64,
                    });
                }
                (_, Arg::Scalar(lit)) => return Err(wrong(format!("the scalar {lit:?}"))),
                (_, Arg::Slice(b)) => {
                    return Err(wrong(format!("a slice of `{}`", b.elem().name())))
                }
            }
        }
        for r in &kernel.requires {
            match crate::eval::eval(&r.cond, &[], &host) {
                Ok(Literal::Bool(true)) => {}
                Ok(_) => {
                    return Err(fail(
                        ErrorKind::InvalidLaunch,
                        format!("the call fails `requires({})`", r.text),
                    ))
                }
                Err(e) => {
                    return Err(fail(
                        ErrorKind::InvalidLaunch,
                        format!("`requires({})` cannot be checked: {}", r.text, e.message),
                    ))
                }
            }
        }
        let layout = Layout::new(kernel).map_err(|(kind, message)| fail(kind, message))?;
        // Every thread of a block holds every register local at once.
        if layout.reg_slots as u64 * threads > MAX_BLOCK_REGISTERS {
            return Err(fail(
                ErrorKind::InvalidLaunch,
                format!(
                    "its {} register elements per thread, in {threads} threads, are more than the \
                     interpreter holds for one block ({MAX_BLOCK_REGISTERS})",
                    layout.reg_slots
                ),
            ));
        }
        let shared = vec![0; layout.shared_bytes];
        let shared_init = vec![false; layout.shared_bytes];
        Ok(Machine {
            kernel,
            layout,
            params,
            grid: launch.grid,
            block: launch.block,
            threads: threads as u32,
            steps: 0,
            max_steps: launch.max_steps,
            check_uninitialized: launch.check_uninitialized,
            check_non_finite: launch.check_non_finite,
            depth: 0,
            block_idx: [0; 3],
            shared,
            shared_init,
        })
    }

    pub fn run(&mut self) -> Result<Stats, Error> {
        for z in 0..self.grid[2] {
            for y in 0..self.grid[1] {
                for x in 0..self.grid[0] {
                    self.block_idx = [x, y, z];
                    self.run_block()?;
                }
            }
        }
        Ok(Stats { steps: self.steps })
    }

    /// The bytes of each slice parameter after the run.
    pub fn into_slices(self) -> Vec<Option<Vec<u8>>> {
        self.params
            .into_iter()
            .map(|p| match p {
                ParamValue::Slice { bytes, .. } => Some(bytes),
                ParamValue::Scalar(_) => None,
            })
            .collect()
    }

    /// `thread_idx()` of a linear thread id.
    pub fn thread_idx(&self, linear: u32) -> [u32; 3] {
        let [bx, by, _] = self.block;
        [linear % bx, linear / bx % by, linear / (bx * by)]
    }

    pub fn lane_thread(&self, w: &Warp<'k>, lane: u32) -> String {
        triple(self.thread_idx(w.first + lane))
    }

    fn run_block(&mut self) -> Result<(), Error> {
        self.shared.fill(0);
        self.shared_init.fill(false);
        let n = self.threads;
        let body: &'k [Stmt] = &self.kernel.body;
        let mut warps: Vec<Warp<'k>> = (0..n.div_ceil(32))
            .map(|i| {
                let count = (n - i * 32).min(32);
                let existing = if count == 32 {
                    FULL
                } else {
                    (1u32 << count) - 1
                };
                Warp {
                    index: i,
                    first: i * 32,
                    existing,
                    exited: 0,
                    regs: vec![None; self.layout.reg_slots * 32],
                    stack: vec![Frame::Block {
                        stmts: body,
                        next: 0,
                        mask: existing,
                        name: BlockName::Kernel,
                    }],
                    state: State::Running,
                }
            })
            .collect();
        // Each thread costs a step, so that an empty kernel on a huge grid ends too.
        if let Some(w) = warps.first() {
            self.charge(w, n)?;
        }
        loop {
            for w in warps.iter_mut() {
                if w.state == State::Running {
                    self.run_warp(w)?;
                }
            }
            let waiting = warps.iter().find_map(|w| match w.state {
                State::Barrier(b) => Some((w, b)),
                _ => None,
            });
            let Some((first, barrier)) = waiting else {
                return Ok(());
            };
            for w in &warps {
                match w.state {
                    State::Done => {
                        let gone = lanes(w.existing).next().unwrap_or(0);
                        let fault = Fault::new(
                            ErrorKind::BarrierDivergence,
                            format!(
                                "`sync_threads()` waits here for every thread of the block, but thread {} \
                                 (warp {}) ended without reaching it: a `return` before it, or the barrier \
                                 is in code that thread skipped",
                                self.lane_thread(w, gone),
                                w.index
                            ),
                        )
                        .at(0);
                        return Err(self.locate(first, fault));
                    }
                    State::Barrier(b) if !std::ptr::eq(b, barrier) => {
                        let other = self.site(w).unwrap_or_default();
                        let fault = Fault::new(
                            ErrorKind::BarrierDivergence,
                            format!(
                                "thread {} waits at this `sync_threads()` while thread {} waits at another, \
                                 {other}: every thread of the block must reach the same barrier",
                                self.lane_thread(first, 0),
                                self.lane_thread(w, 0)
                            ),
                        )
                        .at(0);
                        return Err(self.locate(first, fault));
                    }
                    _ => {}
                }
            }
            for w in warps.iter_mut() {
                w.state = State::Running;
            }
        }
    }

    fn charge(&mut self, w: &Warp<'k>, n: u32) -> Result<(), Error> {
        self.steps += n as u64;
        if self.steps > self.max_steps {
            let fault = Fault::new(
                ErrorKind::StepBudget,
                format!(
                    "the launch took more than {} thread-steps (statements and loop tests, per thread) \
                     without ending: a loop that does not end? (`Launch::max_steps` raises the budget)",
                    self.max_steps
                ),
            );
            return Err(self.locate(w, fault));
        }
        Ok(())
    }

    /// Runs a warp until it waits at a barrier or ends.
    fn run_warp(&mut self, w: &mut Warp<'k>) -> Result<(), Error> {
        loop {
            let Some(top) = w.stack.len().checked_sub(1) else {
                w.state = State::Done;
                return Ok(());
            };
            let exited = w.exited;
            match &mut w.stack[top] {
                Frame::Block {
                    stmts, next, mask, ..
                } => {
                    let stmts: &'k [Stmt] = stmts;
                    let mask = *mask & !exited;
                    if mask == 0 || *next >= stmts.len() {
                        w.stack.pop();
                        continue;
                    }
                    let stmt = &stmts[*next];
                    *next += 1;
                    self.charge(w, mask.count_ones())?;
                    match self.stmt(w, stmt, mask) {
                        Ok(Flow::Next) => {}
                        Ok(Flow::Barrier) => {
                            w.state = State::Barrier(stmt);
                            return Ok(());
                        }
                        Err(f) => return Err(self.locate(w, f)),
                    }
                }
                Frame::While { cond, body, mask } => {
                    let (cond, body, mask): (&'k Expr, &'k [Stmt], u32) =
                        (*cond, *body, *mask & !exited);
                    if mask == 0 {
                        w.stack.pop();
                        continue;
                    }
                    self.charge(w, mask.count_ones())?;
                    let c = match self.eval(w, cond, mask) {
                        Ok(c) => c,
                        Err(f) => return Err(self.locate(w, f)),
                    };
                    let mut stay = 0;
                    for l in lanes(mask) {
                        if c[l as usize] == Literal::Bool(true) {
                            stay |= 1 << l;
                        }
                    }
                    if let Some(Frame::While { mask, .. }) = w.stack.last_mut() {
                        *mask = stay;
                    }
                    if stay == 0 {
                        w.stack.pop();
                    } else {
                        w.stack.push(Frame::Block {
                            stmts: body,
                            next: 0,
                            mask: stay,
                            name: BlockName::While,
                        });
                    }
                }
                Frame::For { mask, .. } => {
                    let mask = *mask & !exited;
                    if mask == 0 {
                        w.stack.pop();
                        continue;
                    }
                    self.charge(w, mask.count_ones())?;
                    if let Err(f) = self.for_step(w, mask) {
                        return Err(self.locate(w, f));
                    }
                }
            }
        }
    }

    /// The test and increment of the `for` loop on top of the stack, as the
    /// PTX backend emits them: `var < end` before the first iteration, then
    /// another iteration while `end - var > step` (unsigned), so `var`
    /// never wraps.
    fn for_step(&mut self, w: &mut Warp<'k>, mask: u32) -> Result<(), Fault> {
        let Some(Frame::For {
            var,
            body,
            end,
            step,
            mask: frame_mask,
            started,
        }) = w.stack.last_mut()
        else {
            return Err(Fault::invalid("a `for` step without its loop"));
        };
        let ty = self.kernel.local(*var).ty;
        let slot = self.layout.offset[*var as usize];
        let bits = value::bit_width(ty);
        let modulus = 1i128 << bits;
        let mut stay = 0u32;
        for l in lanes(mask) {
            let reg = &mut w.regs[slot * 32 + l as usize];
            let v = value::int_value(ty, reg.unwrap_or(NOTHING))?;
            let e = value::int_value(ty, end[l as usize])?;
            let s = value::int_value(ty, step[l as usize])?;
            let more = if !*started {
                v < e
            } else {
                let left = (e - v).rem_euclid(modulus);
                if left <= s.rem_euclid(modulus) {
                    false
                } else {
                    *reg = Some(value::wrap(ty, v + s));
                    true
                }
            };
            if more {
                stay |= 1 << l;
            }
        }
        *started = true;
        *frame_mask = stay;
        let (body, var) = (*body, *var);
        if stay == 0 {
            w.stack.pop();
        } else {
            w.stack.push(Frame::Block {
                stmts: body,
                next: 0,
                mask: stay,
                name: BlockName::For(var),
            });
        }
        Ok(())
    }

    /// Clears `lanes_leaving` from the frames a `break`, `continue` or
    /// `return` leaves.
    fn leave(w: &mut Warp<'k>, leaving: u32, how: Leave) {
        for frame in w.stack.iter_mut().rev() {
            match frame {
                Frame::Block { mask, .. } => *mask &= !leaving,
                Frame::While { mask, .. } | Frame::For { mask, .. } => match how {
                    Leave::Break => {
                        *mask &= !leaving;
                        return;
                    }
                    Leave::Continue => return,
                    Leave::Return => *mask &= !leaving,
                },
            }
        }
        if how == Leave::Return {
            w.exited |= leaving;
        }
    }

    fn block_name(&self, name: BlockName) -> String {
        match name {
            BlockName::Kernel => "the kernel body".into(),
            BlockName::Then => "the then-branch of `if`".into(),
            BlockName::Else => "the else-branch of `if`".into(),
            BlockName::For(var) => format!("the body of `for {}`", self.kernel.local(var).name),
            BlockName::While => "the body of `while`".into(),
        }
    }

    /// Where the warp is: the statement path (innermost first, as the
    /// validator writes it) and the statement's text.
    fn site(&self, w: &Warp<'k>) -> Option<String> {
        let mut parts = Vec::new();
        let mut current = None;
        for frame in &w.stack {
            if let Frame::Block {
                stmts, next, name, ..
            } = frame
            {
                // A pending else branch is not where the warp is.
                if *next == 0 {
                    continue;
                }
                parts.push(format!("statement {next} of {}", self.block_name(*name)));
                current = stmts.get(next - 1);
            }
        }
        if parts.is_empty() {
            return None;
        }
        parts.reverse();
        let path = parts.join(", in ");
        Some(match current {
            Some(stmt) => format!("{path} (`{}`)", print::statement_head(self.kernel, stmt)),
            None => path,
        })
    }

    /// The error of a fault in warp `w`, with the kernel, block, thread and place.
    fn locate(&self, w: &Warp<'k>, fault: Fault) -> Error {
        let place = self.site(w);
        let thread = fault.lane.map(|l| self.thread_idx(w.first + l));
        let mut message = format!(
            "kernel `{}`, block {}",
            self.kernel.name,
            triple(self.block_idx)
        );
        match thread {
            Some(t) => message.push_str(&format!(", thread {}", triple(t))),
            None => message.push_str(&format!(
                ", warp {} (threads {} to {})",
                w.index,
                self.lane_thread(w, 0),
                self.lane_thread(w, 31 - w.existing.leading_zeros())
            )),
        }
        if let Some(place) = &place {
            message.push_str(&format!(", at {place}"));
        }
        message.push_str(": ");
        message.push_str(&fault.message);
        Error {
            kind: fault.kind,
            kernel: self.kernel.name.clone(),
            block: Some(self.block_idx),
            thread,
            place,
            message,
        }
    }

    /// Checks that every lane of the warp reaches a warp-collective
    /// operation together.
    pub fn collective(&self, w: &Warp<'k>, mask: u32, what: &str) -> Result<(), Fault> {
        let missing = w.existing & !mask;
        let Some(lane) = lanes(missing).next() else {
            return Ok(());
        };
        let why = if w.exited >> lane & 1 == 1 {
            "has returned"
        } else {
            "is in another branch or loop iteration"
        };
        Err(Fault::new(
            ErrorKind::WarpDivergence,
            format!(
                "`{what}` is warp-collective: every lane of the warp must reach it together, \
                 but thread {} (lane {lane}) {why}",
                self.lane_thread(w, lane)
            ),
        )
        .at(lanes(mask).next().unwrap_or(0)))
    }

    fn stmt(&mut self, w: &mut Warp<'k>, stmt: &'k Stmt, mask: u32) -> Result<Flow, Fault> {
        match stmt {
            Stmt::Let { local, init } => {
                let id = *local as usize;
                if self.kernel.local(*local).space == Space::Shared {
                    return Ok(Flow::Next);
                }
                let v = match init {
                    Some(e) => Some(self.copy_or_eval(w, e, mask)?),
                    None => None,
                };
                let (start, n) = (self.layout.offset[id], self.layout.elems[id]);
                for slot in start..start + n {
                    for l in lanes(mask) {
                        w.regs[slot * 32 + l as usize] = v.and_then(|v| v[l as usize]);
                    }
                }
            }
            Stmt::Assign { place, value } => {
                let v = self.copy_or_eval(w, value, mask)?;
                let r = self.resolve(w, place, mask, "write")?;
                for l in lanes(mask) {
                    self.write_lane_opt(w, &r, place, l, v[l as usize])?;
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.eval(w, cond, mask)?;
                let mut then_mask = 0;
                for l in lanes(mask) {
                    if c[l as usize] == Literal::Bool(true) {
                        then_mask |= 1 << l;
                    }
                }
                let else_mask = mask & !then_mask;
                if else_mask != 0 && !else_body.is_empty() {
                    w.stack.push(Frame::Block {
                        stmts: else_body,
                        next: 0,
                        mask: else_mask,
                        name: BlockName::Else,
                    });
                }
                if then_mask != 0 && !then_body.is_empty() {
                    w.stack.push(Frame::Block {
                        stmts: then_body,
                        next: 0,
                        mask: then_mask,
                        name: BlockName::Then,
                    });
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => {
                let s = self.eval(w, start, mask)?;
                let e = self.eval(w, end, mask)?;
                let st = self.eval(w, step, mask)?;
                let slot = self.layout.offset[*var as usize];
                for l in lanes(mask) {
                    w.regs[slot * 32 + l as usize] = Some(s[l as usize]);
                }
                w.stack.push(Frame::For {
                    var: *var,
                    body,
                    end: Box::new(e),
                    step: Box::new(st),
                    mask,
                    started: false,
                });
            }
            Stmt::While { cond, body } => w.stack.push(Frame::While { cond, body, mask }),
            Stmt::Break => Self::leave(w, mask, Leave::Break),
            Stmt::Continue => Self::leave(w, mask, Leave::Continue),
            Stmt::Return => Self::leave(w, mask, Leave::Return),
            Stmt::Barrier => {
                let missing = w.existing & !mask;
                if let Some(lane) = lanes(missing).next() {
                    let why = if w.exited >> lane & 1 == 1 {
                        "has returned"
                    } else {
                        "is in another branch or loop iteration"
                    };
                    return Err(Fault::new(
                        ErrorKind::BarrierDivergence,
                        format!(
                            "`sync_threads()` must be reached by every thread of the block, but thread {} \
                             of this warp {why}",
                            self.lane_thread(w, lane)
                        ),
                    )
                    .at(lanes(mask).next().unwrap_or(0)));
                }
                return Ok(Flow::Barrier);
            }
            // Blocks run one after another and every access lands when it
            // runs, so whatever a fence would order is already visible.
            Stmt::GpuFence => {}
            Stmt::Expr(e) => {
                self.eval(w, e, mask)?;
            }
            Stmt::Matrix(op) => self.matrix(w, op, mask)?,
            Stmt::AsyncCopy {
                dst,
                src,
                bytes,
                src_bytes,
            } => self.async_copy(w, dst, src, *bytes, src_bytes, mask)?,
            // Copies land when they are issued, so every group is complete.
            Stmt::AsyncCommit | Stmt::AsyncWait { .. } => {}
            Stmt::Mbarrier(op) => {
                return Err(unsupported(&format!(
                    "`{}` (an sm_90 mbarrier operation)",
                    op.function()
                )))
            }
            Stmt::ProxyFence => {
                return Err(unsupported(&format!(
                    "`{PROXY_FENCE_FUNCTION}` (an sm_90 async-proxy fence)"
                )))
            }
            Stmt::Warpgroup(op) => {
                return Err(unsupported(&format!(
                    "`{}` (an sm_90a warpgroup operation)",
                    op.function()
                )))
            }
            Stmt::Tma(_) => return Err(unsupported("`tma_*` (an sm_90 TMA bulk tensor copy)")),
            Stmt::ClusterBarrier => {
                return Err(unsupported(&format!(
                    "`{CLUSTER_BARRIER_FUNCTION}` (an sm_90 cluster barrier)"
                )))
            }
            // How many registers a warpgroup holds changes no value.
            Stmt::SetMaxRegisters { .. } => {}
        }
        Ok(Flow::Next)
    }

    pub fn eval(&mut self, w: &mut Warp<'k>, e: &Expr, mask: u32) -> Result<Lanes, Fault> {
        if self.depth >= MAX_DEPTH {
            return Err(Fault::new(
                ErrorKind::Unsupported,
                format!("an expression nested more than {MAX_DEPTH} deep"),
            ));
        }
        self.depth += 1;
        let r = self.eval_inner(w, e, mask);
        self.depth -= 1;
        r
    }

    fn eval_inner(&mut self, w: &mut Warp<'k>, e: &Expr, mask: u32) -> Result<Lanes, Fault> {
        let mut out = [NOTHING; 32];
        if mask == 0 {
            return Ok(out);
        }
        let per_lane = |out: &mut Lanes,
                        f: &mut dyn FnMut(usize) -> Result<Literal, Fault>|
         -> Result<(), Fault> {
            for l in lanes(mask) {
                out[l as usize] = f(l as usize).map_err(|x| x.at(l))?;
            }
            Ok(())
        };
        match &e.kind {
            ExprKind::Literal(lit) => out = [*lit; 32],
            ExprKind::Param(id) => match self.params.get(*id as usize) {
                Some(ParamValue::Scalar(v)) => out = [*v; 32],
                _ => return Err(Fault::invalid(format!("parameter #{id} is not a scalar"))),
            },
            ExprKind::Len(id) => match self.params.get(*id as usize) {
                Some(ParamValue::Slice { len, .. }) => out = [Literal::Int(*len as i64); 32],
                _ => return Err(Fault::invalid(format!("parameter #{id} is not a slice"))),
            },
            ExprKind::Const(_) => {
                return Err(Fault::invalid(
                    "a const param is left: specialize the kernel before interpreting it",
                ))
            }
            ExprKind::Load(place) => {
                let r = self.resolve(w, place, mask, "read")?;
                for l in lanes(mask) {
                    out[l as usize] = self.read_lane(w, &r, place, l)?;
                }
            }
            ExprKind::Unary(op, a) => {
                let x = self.eval(w, a, mask)?;
                let check = self.check_non_finite;
                per_lane(&mut out, &mut |l| {
                    let r = value::unary(*op, e.ty, x[l])?;
                    finite(check, &[x[l]], r, || format!("`{op:?}`"))
                })?;
            }
            ExprKind::Binary(op @ (BinaryOp::LogicalAnd | BinaryOp::LogicalOr), a, b) => {
                let x = self.eval(w, a, mask)?;
                let decided = if *op == BinaryOp::LogicalAnd {
                    Literal::Bool(false)
                } else {
                    Literal::Bool(true)
                };
                let mut rest = 0;
                for l in lanes(mask) {
                    if x[l as usize] == decided {
                        out[l as usize] = decided;
                    } else {
                        rest |= 1 << l;
                    }
                }
                if rest != 0 {
                    let y = self.eval(w, b, rest)?;
                    for l in lanes(rest) {
                        out[l as usize] = y[l as usize];
                    }
                }
            }
            ExprKind::Binary(op, a, b) => {
                let x = self.eval(w, a, mask)?;
                let y = self.eval(w, b, mask)?;
                let check = self.check_non_finite;
                per_lane(&mut out, &mut |l| {
                    let r = value::binary(*op, a.ty, x[l], y[l])?;
                    finite(check, &[x[l], y[l]], r, || format!("`{op:?}`"))
                })?;
            }
            ExprKind::Cast(a) => {
                let x = self.eval(w, a, mask)?;
                let check = self.check_non_finite;
                per_lane(&mut out, &mut |l| {
                    let r = value::cast(a.ty, e.ty, x[l])?;
                    finite(check, &[x[l]], r, || {
                        format!("`as {}` from {}", e.ty.name(), a.ty.name())
                    })
                })?;
            }
            // Both operands are computed on the GPU, but they have no effects
            // (the front builds a select only from such): each lane computes
            // the one it takes, so that an operand a lane does not take
            // cannot fault (an uninitialized register it would discard).
            ExprKind::Select(c, a, b) => {
                let c = self.eval(w, c, mask)?;
                let mut taken = 0u32;
                for l in lanes(mask) {
                    if c[l as usize] == Literal::Bool(true) {
                        taken |= 1 << l;
                    }
                }
                let x = self.eval(w, a, taken)?;
                let y = self.eval(w, b, mask & !taken)?;
                for l in lanes(mask) {
                    let l = l as usize;
                    out[l] = if taken >> l & 1 == 1 { x[l] } else { y[l] };
                }
            }
            ExprKind::Special(s) => {
                for l in lanes(mask) {
                    let t = self.thread_idx(w.first + l);
                    let axis = |a: crate::ir::Axis| a as usize;
                    let v = match s {
                        Special::ThreadIdx(a) => t[axis(*a)],
                        Special::BlockIdx(a) => self.block_idx[axis(*a)],
                        Special::BlockDim(a) => self.block[axis(*a)],
                        Special::GridDim(a) => self.grid[axis(*a)],
                        Special::LaneId => l,
                        // Kernels with a `cluster(..)` are refused: each
                        // block is a cluster of one.
                        Special::ClusterRank => 0,
                    };
                    out[l as usize] = Literal::Int(v as i64);
                }
            }
            ExprKind::Call(f @ (Intrinsic::ShflXor | Intrinsic::ShflDown), args) => {
                self.collective(w, mask, intrinsic_name(*f))?;
                let [v, b] = &args[..] else {
                    return Err(Fault::invalid("a shuffle takes two arguments"));
                };
                let v = self.eval(w, v, mask)?;
                let b = self.eval(w, b, mask)?;
                for l in lanes(mask) {
                    let delta = value::int_value(Scalar::U32, b[l as usize]).map_err(|x| x.at(l))?
                        as u32
                        & 31;
                    let src = if *f == Intrinsic::ShflXor {
                        l ^ delta
                    } else {
                        l + delta
                    };
                    out[l as usize] = if src > 31 {
                        v[l as usize]
                    } else if w.existing >> src & 1 == 0 {
                        return Err(Fault::new(
                            ErrorKind::WarpDivergence,
                            format!(
                                "`{}` reads lane {src}, which this warp does not have: \
                                 the block's {} threads end its last warp early",
                                intrinsic_name(*f),
                                self.threads
                            ),
                        )
                        .at(l));
                    } else {
                        v[src as usize]
                    };
                }
            }
            ExprKind::Call(f, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(w, a, mask)?);
                }
                let tys: Vec<Scalar> = args.iter().map(|a| a.ty).collect();
                let mut xs = Vec::with_capacity(args.len());
                for l in lanes(mask) {
                    xs.clear();
                    xs.extend(values.iter().map(|v| v[l as usize]));
                    out[l as usize] = value::intrinsic(*f, e.ty, &tys, &xs)
                        .and_then(|r| {
                            // `from_bits` moves bits: what it makes is checked where it is used.
                            let check = self.check_non_finite && *f != Intrinsic::FromBits;
                            finite(check, &xs, r, || format!("`{}`", intrinsic_name(*f)))
                        })
                        .map_err(|x| x.at(l))?;
                }
            }
            ExprKind::Atomic {
                op,
                place,
                value: v,
                compare,
            } => {
                let r = self.resolve(w, place, mask, "atomic update")?;
                let expected = match compare {
                    Some(c) => Some(self.eval(w, c, mask)?),
                    None => None,
                };
                let v = self.eval(w, v, mask)?;
                for l in lanes(mask) {
                    let old = self.read_lane(w, &r, place, l)?;
                    let new = value::atomic(
                        *op,
                        r.ty,
                        old,
                        v[l as usize],
                        expected.map(|c| c[l as usize]),
                    )
                    .map_err(|x| x.at(l))?;
                    self.write_lane(w, &r, l, new);
                    out[l as usize] = old;
                }
            }
        }
        Ok(out)
    }

    /// The element type of a place.
    pub fn place_type(&self, place: &Place) -> Scalar {
        match place {
            Place::Local { local, .. } => self.kernel.local(*local).ty,
            Place::Global { param, .. } => match self.kernel.param(*param).ty {
                ParamType::Slice { elem, .. } | ParamType::Scalar(elem) => elem,
            },
        }
    }

    /// The memory and offset of a place in each active lane, with every
    /// index checked against its bound.
    pub fn resolve(
        &mut self,
        w: &mut Warp<'k>,
        place: &Place,
        mask: u32,
        what: &str,
    ) -> Result<Resolved, Fault> {
        let ty = self.place_type(place);
        let mut at = [0usize; 32];
        match place {
            Place::Local { local, indices } => {
                let id = *local as usize;
                let decl = self.kernel.local(*local);
                let dims = &self.layout.dims[id];
                if indices.len() != dims.len() {
                    return Err(Fault::invalid(format!(
                        "`{}` takes {} indices, not {}",
                        decl.name,
                        dims.len(),
                        indices.len()
                    )));
                }
                for (d, index) in indices.iter().enumerate() {
                    let v = self.eval(w, index, mask)?;
                    let n = self.layout.dims[id][d];
                    for l in lanes(mask) {
                        let i = value::int_value(index.ty, v[l as usize]).map_err(|x| x.at(l))?;
                        if i < 0 || i >= n as i128 {
                            let kind = if decl.space == Space::Shared {
                                "shared"
                            } else {
                                "register"
                            };
                            return Err(Fault::new(
                                ErrorKind::OutOfBounds,
                                format!(
                                    "out-of-bounds {what} of `{}`: index {i} of dimension {} of the {kind} array `{}: {}`, which has {n} elements",
                                    print::place_text(self.kernel, place),
                                    d + 1,
                                    decl.name,
                                    array_type(decl.ty, &self.layout.dims[id])
                                ),
                            )
                            .at(l));
                        }
                        at[l as usize] = at[l as usize] * n + i as usize;
                    }
                }
                let size = ty.size_bytes() as usize;
                let offset = self.layout.offset[id];
                for l in lanes(mask) {
                    let flat = at[l as usize];
                    at[l as usize] = match decl.space {
                        Space::Register => offset + flat,
                        Space::Shared => offset + flat * size,
                    };
                }
                let mem = match decl.space {
                    Space::Register => Mem::Reg,
                    Space::Shared => Mem::Shared,
                };
                Ok(Resolved { mem, ty, at })
            }
            Place::Global { param, index } => {
                let v = self.eval(w, index, mask)?;
                let len = match self.params.get(*param as usize) {
                    Some(ParamValue::Slice { len, .. }) => *len,
                    _ => return Err(Fault::invalid(format!("parameter #{param} is not a slice"))),
                };
                for l in lanes(mask) {
                    let i = value::int_value(index.ty, v[l as usize]).map_err(|x| x.at(l))?;
                    if i < 0 || i >= len as i128 {
                        return Err(Fault::new(
                            ErrorKind::OutOfBounds,
                            format!(
                                "out-of-bounds {what} of `{}`: index {i}, but `{}` has {len} elements",
                                print::place_text(self.kernel, place),
                                self.kernel.param(*param).name
                            ),
                        )
                        .at(l));
                    }
                    at[l as usize] = i as usize * ty.size_bytes() as usize;
                }
                Ok(Resolved {
                    mem: Mem::Global(*param as usize),
                    ty,
                    at,
                })
            }
        }
    }

    /// The value of `e` in each lane, where a plain read of a place
    /// carries "no value" (`None`) through from an element or shared byte
    /// that nothing wrote: copying such a value (a prefetch that the kernel
    /// then discards) is legal, and only its use is an error.
    fn copy_or_eval(
        &mut self,
        w: &mut Warp<'k>,
        e: &Expr,
        mask: u32,
    ) -> Result<[Option<Literal>; 32], Fault> {
        let mut out = [None; 32];
        match &e.kind {
            ExprKind::Load(place) if self.check_uninitialized => {
                let r = self.resolve(w, place, mask, "read")?;
                for l in lanes(mask) {
                    out[l as usize] = self.read_lane_opt(w, &r, l)?;
                }
            }
            _ => {
                let v = self.eval(w, e, mask)?;
                for l in lanes(mask) {
                    out[l as usize] = Some(v[l as usize]);
                }
            }
        }
        Ok(out)
    }

    /// A lane's value of a place, or `None` where nothing wrote it.
    pub fn read_lane_opt(
        &self,
        w: &Warp<'k>,
        r: &Resolved,
        l: u32,
    ) -> Result<Option<Literal>, Fault> {
        let at = r.at[l as usize];
        let size = r.ty.size_bytes() as usize;
        Ok(match r.mem {
            Mem::Reg => w.regs[at * 32 + l as usize],
            Mem::Shared if self.shared_init[at..at + size].iter().any(|b| !b) => None,
            Mem::Shared => Some(value::from_bits(r.ty, load(&self.shared, at, size))),
            Mem::Global(p) => match &self.params[p] {
                ParamValue::Slice { bytes, .. } => {
                    Some(value::from_bits(r.ty, load(bytes, at, size)))
                }
                ParamValue::Scalar(_) => {
                    return Err(Fault::invalid("a scalar parameter read as a slice"))
                }
            },
        })
    }

    /// Writes a lane's value or "no value": a register or shared memory
    /// then holds none, but global memory, which the host reads, may not
    /// receive it.
    pub fn write_lane_opt(
        &mut self,
        w: &mut Warp<'k>,
        r: &Resolved,
        place: &Place,
        l: u32,
        v: Option<Literal>,
    ) -> Result<(), Fault> {
        let at = r.at[l as usize];
        match (v, r.mem) {
            (Some(v), _) => self.write_lane(w, r, l, v),
            (None, Mem::Reg) => w.regs[at * 32 + l as usize] = None,
            (None, Mem::Shared) => {
                let size = r.ty.size_bytes() as usize;
                self.shared_init[at..at + size].fill(false);
            }
            (None, Mem::Global(_)) => {
                return Err(Fault::new(
                    ErrorKind::Uninitialized,
                    format!(
                        "stores to `{}` a value nothing wrote (read from shared memory no thread of the block wrote, \
                         or from a register array element never written)",
                        print::place_text(self.kernel, place)
                    ),
                )
                .at(l))
            }
        }
        Ok(())
    }

    pub fn read_lane(
        &self,
        w: &Warp<'k>,
        r: &Resolved,
        place: &Place,
        l: u32,
    ) -> Result<Literal, Fault> {
        let at = r.at[l as usize];
        match r.mem {
            Mem::Reg if !self.check_uninitialized => {
                Ok(w.regs[at * 32 + l as usize].unwrap_or(value::from_bits(r.ty, 0)))
            }
            Mem::Reg => w.regs[at * 32 + l as usize].ok_or_else(|| {
                Fault::new(
                    ErrorKind::Uninitialized,
                    format!(
                        "reads `{}`, which holds no value: nothing wrote it, or what was copied into it \
                         came from shared memory no thread of the block wrote",
                        print::place_text(self.kernel, place)
                    ),
                )
                .at(l)
            }),
            Mem::Shared => {
                let size = r.ty.size_bytes() as usize;
                if self.check_uninitialized && self.shared_init[at..at + size].iter().any(|b| !b) {
                    return Err(Fault::new(
                        ErrorKind::Uninitialized,
                        format!(
                            "reads shared `{}` (bytes {at}..{} of the block's shared memory) before any thread of the block wrote it",
                            print::place_text(self.kernel, place),
                            at + size
                        ),
                    )
                    .at(l));
                }
                Ok(value::from_bits(r.ty, load(&self.shared, at, size)))
            }
            Mem::Global(p) => match &self.params[p] {
                ParamValue::Slice { bytes, .. } => Ok(value::from_bits(
                    r.ty,
                    load(bytes, at, r.ty.size_bytes() as usize),
                )),
                ParamValue::Scalar(_) => Err(Fault::invalid("a scalar parameter read as a slice")),
            },
        }
    }

    pub fn write_lane(&mut self, w: &mut Warp<'k>, r: &Resolved, l: u32, v: Literal) {
        let at = r.at[l as usize];
        match r.mem {
            Mem::Reg => w.regs[at * 32 + l as usize] = Some(v),
            Mem::Shared => {
                let size = r.ty.size_bytes() as usize;
                store(
                    &mut self.shared,
                    at,
                    size,
                    value::to_bits(r.ty, v).unwrap_or(0),
                );
                self.shared_init[at..at + size].fill(true);
            }
            Mem::Global(p) => {
                if let ParamValue::Slice { bytes, .. } = &mut self.params[p] {
                    let size = r.ty.size_bytes() as usize;
                    store(bytes, at, size, value::to_bits(r.ty, v).unwrap_or(0));
                }
            }
        }
    }
}

/// `size` little-endian bytes at `at`.
pub(super) fn load(bytes: &[u8], at: usize, size: usize) -> u64 {
    let mut word = [0u8; 8];
    word[..size].copy_from_slice(&bytes[at..at + size]);
    u64::from_le_bytes(word)
}

pub(super) fn store(bytes: &mut [u8], at: usize, size: usize, bits: u64) {
    bytes[at..at + size].copy_from_slice(&bits.to_le_bytes()[..size]);
}

/// `[[f32; 8]; 4]` for an array of type `f32` and dims `[4, 8]`.
pub(super) fn array_type(ty: Scalar, dims: &[usize]) -> String {
    dims.iter()
        .rev()
        .fold(ty.name().to_string(), |inner, n| format!("[{inner}; {n}]"))
}

pub(super) fn unsupported(what: &str) -> Fault {
    Fault::new(
        ErrorKind::Unsupported,
        format!(
            "{what} is not interpreted: the interpreter runs SIMT code, barriers, atomics, warp shuffles, \
             mma.sync, ldmatrix, mma.sp, wmma and cp.async, not the sm_90 asynchronous constructs"
        ),
    )
}
