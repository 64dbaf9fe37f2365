//! Random well-typed SIMT kernels, built at the IR level, for the
//! generated-program tests (`codegen/tests/generated_programs.rs`: ptxas and
//! naga; `tests/tests/generated_lavapipe.rs`: lavapipe against the
//! interpreter, which includes this file by path).
//!
//! A program is a function of a list of `u32` choices ([`Program::generate`]):
//! proptest draws the list and shrinks it (dropping choices, moving them
//! towards 0), and every decision reads one choice, 0 being the simplest
//! option (a literal, no statement, the end of a list), so a shrunk list is a
//! small program. A run's programs are the trees of one seeded
//! [`TestRunner`], so a seed and an index name a program.
//!
//! Every program is defined on every backend:
//! - memory: inputs are read at `index % len()`, each thread writes only its
//!   own output elements (`out[gid * SLOTS + k]`); atomics whose old value is
//!   used update the thread's own element, the others any element of a
//!   shared half, with one op per half (add, min, max, and, or or xor: alone
//!   each is order-independent);
//! - shared memory: written at the thread's own index between two barriers in
//!   the kernel's top-level (uniform) flow, and read after the first write;
//!   warp shuffles only in the top-level flow, with whole warps, and no
//!   `return` in a program that has barriers or shuffles;
//! - arithmetic: integer division by `(b & 0x7fff) | 1` or `b | 1` (never 0,
//!   never `MIN / -1`), shifts wrap their amount (the IR's rule); floats use
//!   only what is correctly rounded everywhere (`+ - *`, `min`, `max`, `abs`,
//!   `floor`, `ceil`, `round`, conversions), so results compare bit for bit
//!   (NaN against NaN, whatever the payload). Division, `sqrt`, `mul_add` and
//!   the transcendentals are left out: WGSL allows them an error (2.5 ULP for
//!   `/`, a double rounding for `fma`).
//! - loops are bounded: literal or `% 6` trip counts, `while` with a counter.

#![allow(dead_code)] // each test binary uses its own part

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde::{Deserialize, Serialize};
use warpforge_codegen::interp::{self, Arg, Buffer, Launch};
use warpforge_codegen::ir::{
    AtomicOp, Axis, BinaryOp, Block, Expr, ExprKind, Intrinsic, Kernel, Literal, Local, LocalId,
    Param, ParamId, ParamType, Place, Scalar, Space, Special, Stmt, UnaryOp,
};
use warpforge_codegen::{eval, Arch, KernelDef, Target};

/// The PTX targets every program is assembled for.
pub const ARCHS: [Arch; 3] = [Arch::Sm70, Arch::Sm80, Arch::Sm90];

/// Output elements per thread and slice type.
const SLOTS: u32 = 16;

/// The most choices a program reads: bounds its size.
const MAX_CHOICES: usize = 400;

/// Statements per program, at most (loop bodies count once).
const MAX_STATEMENTS: u32 = 40;

/// Nesting of `if`s and loops, at most.
const MAX_DEPTH: u32 = 3;

/// Expression depth, at most.
const MAX_EXPR_DEPTH: u32 = 4;

/// The thread-steps one interpretation may take: generated loops are short,
/// so more means a generator bug.
const MAX_STEPS: u64 = 1 << 24;

/// Block shapes; those before `WARP_BLOCKS` are whole warps (for shuffles).
const BLOCKS: [[u32; 3]; 7] = [
    [32, 1, 1],
    [64, 1, 1],
    [32, 2, 1],
    [1, 1, 1],
    [7, 1, 1],
    [8, 4, 1],
    [33, 1, 1],
];
const WARP_BLOCKS: usize = 3;

/// The types of slices (a bool is stored as a `u32`).
const SLICE_TYPES: [Scalar; 4] = [Scalar::I32, Scalar::U32, Scalar::F32, Scalar::F16];

/// One generated kernel and its launch: all a backend needs to run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// The kernel (no const params, targets sm_70, sm_80, sm_90 and WGSL).
    pub def: KernelDef,
    /// Blocks per grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Seeds the inputs ([`Program::args`]).
    pub input_seed: u64,
    /// Uses `lane_id()` or warp shuffles: WGSL then needs subgroups of 32,
    /// which lavapipe lacks.
    pub uses_subgroups: bool,
}

/// The proptest strategy of a program's choices.
pub fn choices() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(any::<u32>(), 0..MAX_CHOICES)
}

/// The runner whose trees are a run's programs, from the run's seed.
pub fn runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// The run's seed: `WARPFORGE_GEN_SEED`, else the clock (each run tests
/// other programs), printed so that a failure can be replayed.
pub fn run_seed() -> u64 {
    let seed = std::env::var("WARPFORGE_GEN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    println!("generated programs: seed {seed} (replay with WARPFORGE_GEN_SEED={seed})");
    seed
}

/// A program count from the environment variable `var`, else `default`.
pub fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Shrinks a failing tree: proptest's simplify/complicate walk, keeping
/// the simplest choices whose program still `fails` (a message when it does).
/// Returns the simplest failing program and its failure.
pub fn shrink(
    tree: &mut impl ValueTree<Value = Vec<u32>>,
    name: &str,
    first: String,
    mut fails: impl FnMut(&Program) -> Option<String>,
) -> (Program, String) {
    let mut best = (Program::generate(name, &tree.current()), first);
    let mut steps = 0;
    let mut more = tree.simplify();
    while more && steps < 2000 {
        steps += 1;
        let program = Program::generate(name, &tree.current());
        more = match fails(&program) {
            Some(failure) => {
                best = (program, failure);
                tree.simplify()
            }
            None => tree.complicate(),
        };
    }
    best
}

/// The report of a shrunk failure: the program as text, its launch, and
/// the JSON to check in under `codegen/tests/generated/` as a regression case.
pub fn report(seed: u64, index: usize, program: &Program, failure: &str) -> String {
    format!(
        "generated program {index} of seed {seed} (replay with WARPFORGE_GEN_SEED={seed}) fails, \
         shrunk to:\n{}\ngrid {:?}, block {:?}, input seed {}\n{failure}\n\
         regression case (a file under codegen/tests/generated/):\n{}",
        program.def.ir,
        program.grid,
        program.block,
        program.input_seed,
        serde_json::to_string(program).expect("a program serializes")
    )
}

/// The checked-in regression cases: shrunk programs that once failed.
pub fn regression_cases() -> Vec<(String, Program)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../codegen/tests/generated");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable case");
            let program =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                program,
            )
        })
        .collect()
}

impl Program {
    /// The program that `choices` describe, named `name` (a PTX entry name).
    pub fn generate(name: &str, choices: &[u32]) -> Program {
        let mut c = Choices {
            data: choices,
            next: 0,
        };
        let f16 = c.chance(30);
        let collectives = c.chance(40);
        let block = if collectives {
            BLOCKS[c.below(WARP_BLOCKS as u32) as usize]
        } else {
            c.pick(&BLOCKS)
        };
        let grid = [1 + c.below(3), 1, 1];
        let input_seed = u64::from(c.below(u32::MAX));
        let mut g = Gen::new(&mut c, f16, collectives, block);
        let body = g.kernel_body();
        let uses_subgroups = g.uses_subgroups;
        let ir = Kernel {
            name: name.to_string(),
            const_params: Vec::new(),
            params: g.params.list,
            locals: g.locals,
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: Vec::new(),
            body,
        };
        let targets = ARCHS
            .iter()
            .map(|&a| Target::Ptx(a))
            .chain([Target::Wgsl])
            .collect();
        Program {
            def: KernelDef::new(ir, targets, Vec::new(), Vec::new()),
            grid,
            block,
            input_seed,
            uses_subgroups,
        }
    }

    /// Threads in the whole grid.
    pub fn threads(&self) -> u32 {
        self.grid.iter().chain(&self.block).product()
    }

    /// The launch's arguments, random but for `n`: scalars, inputs, outputs
    /// and atomic targets, from the input seed.
    pub fn args(&self) -> Vec<Arg> {
        let mut rng = SplitMix(self.input_seed);
        let n = self.threads() as usize;
        self.def
            .ir
            .params
            .iter()
            .map(|p| match (p.ty, p.name.as_str()) {
                (ParamType::Scalar(_), "n") => Arg::from(n as u32),
                (ParamType::Scalar(ty), _) => Arg::Scalar(rng.value(ty)),
                (ParamType::Slice { elem, mutable }, name) => {
                    let len = if !mutable {
                        1 + rng.below(2 * n as u32) as usize
                    } else if name.starts_with("acc") {
                        2 * n
                    } else {
                        n * SLOTS as usize
                    };
                    Arg::Slice(rng.buffer(elem, len))
                }
            })
            .collect()
    }

    /// The interpreter's run: the arguments after the launch. Under WGSL's
    /// `floats`, an infinity or NaN in float arithmetic is an
    /// [`interp::ErrorKind::NonFinite`] error.
    pub fn interpret(&self, floats: Floats) -> Result<Vec<Arg>, interp::Error> {
        let mut args = self.args();
        interp::interpret_variant(
            &self.def,
            &[],
            &Launch::new(self.grid, self.block)
                .max_steps(MAX_STEPS)
                .check_non_finite(floats == Floats::Wgsl),
            &mut args,
        )?;
        Ok(args)
    }
}

/// The float semantics of a backend.
#[derive(Clone, Copy, PartialEq)]
pub enum Floats {
    /// IEEE 754's infinities, NaNs and signed zeros, as PTX computes them.
    Ieee,
    /// WGSL's: an implementation may assume that no value is infinite or NaN
    /// (lavapipe computes `inf * 0.0` as `0.0`) and ignore the sign of zero
    /// (`-6.0 * 0.0` as `+0.0`). A program whose run reaches an infinity or
    /// NaN is not compared; a zero matches a zero of either sign (the
    /// generator reads no float's bits, and has no division, so the sign
    /// reaches no other result). It may also reorder float arithmetic:
    /// lavapipe folds `15.75 * (19.375 * (-38.75 * s))` into one constant
    /// times `s` (1 ulp apart) and `(s + 1e-40) - s` into `1e-40` (LLVM's
    /// fast math), so floats match within [`WGSL_REORDERING`] of the larger
    /// magnitude, or both within its absolute floor of zero.
    Wgsl,
}

/// Compares the slices a backend returned with the interpreter's: integers
/// equal, floats equal bit for bit (zeros as `floats` says) or both NaN.
/// The first difference per slice, by parameter name.
pub fn compare(
    program: &Program,
    expected: &[Arg],
    got: &[Arg],
    floats: Floats,
) -> Result<(), String> {
    let mut diffs = Vec::new();
    for ((param, want), have) in program.def.ir.params.iter().zip(expected).zip(got) {
        let (Arg::Slice(want), Arg::Slice(have)) = (want, have) else {
            continue;
        };
        let (want, have) = (elements(want), elements(have));
        let slack = match (floats, param.ty) {
            (Floats::Wgsl, ParamType::Slice { elem, .. }) => WGSL_REORDERING
                .iter()
                .find(|(ty, ..)| *ty == elem)
                .map(|&(_, relative, absolute)| (relative, absolute)),
            _ => None,
        };
        if let Some(i) = (0..want.len()).find(|&i| !same(want[i], have[i], floats, slack)) {
            diffs.push(format!(
                "{}[{i}]: interpreter {:?}, backend {:?} (thread {}, slot {})",
                param.name,
                want[i],
                have[i],
                i / SLOTS as usize,
                i % SLOTS as usize
            ));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("\n"))
    }
}

/// A slice's elements as literals.
fn elements(buffer: &Buffer) -> Vec<Literal> {
    match buffer {
        Buffer::I32(v) => v.iter().map(|&x| Literal::Int(x.into())).collect(),
        Buffer::U32(v) => v.iter().map(|&x| Literal::Int(x.into())).collect(),
        Buffer::F32(v) => v.iter().map(|&x| Literal::Float(x.into())).collect(),
        Buffer::F16(v) => v.iter().map(|&x| Literal::Float(x.to_f64())).collect(),
        other => panic!("generated programs have no {:?} slices", other.elem()),
    }
}

/// How far apart [`Floats::Wgsl`] lets two floats of a type be, for the
/// reordering of arithmetic it allows: relative to the larger magnitude
/// (a few units in the last place), or both within an absolute floor of
/// zero (a sum that absorbed a subnormal operand in one order keeps it in
/// the other, times moderate factors).
const WGSL_REORDERING: [(Scalar, f64, f64); 2] = [
    (Scalar::F32, 1.0 / (1u64 << 20) as f64, 1e-30),
    (Scalar::F16, 1.0 / (1u64 << 8) as f64, 1e-4),
];

fn same(a: Literal, b: Literal, floats: Floats, slack: Option<(f64, f64)>) -> bool {
    match (a, b) {
        (Literal::Float(x), Literal::Float(y)) => {
            x.to_bits() == y.to_bits()
                || (x.is_nan() && y.is_nan())
                || (floats == Floats::Wgsl && x == 0.0 && y == 0.0)
                || slack.is_some_and(|(relative, absolute)| {
                    let apart = (x - y).abs();
                    apart <= relative * x.abs().max(y.abs())
                        || x.abs() <= absolute && y.abs() <= absolute
                })
        }
        _ => a == b,
    }
}

/// The choices a program reads; past the end, every choice is 0.
struct Choices<'a> {
    data: &'a [u32],
    next: usize,
}

impl Choices<'_> {
    /// A choice in `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        let v = self.data.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        v % n
    }

    /// True with `percent` % probability; false on a 0 choice.
    fn chance(&mut self, percent: u32) -> bool {
        self.below(100) >= 100 - percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u32) as usize]
    }
}

/// Input values from the input seed (SplitMix64: reproducible from one
/// `u64`, which the program records).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n)) as u32
    }

    /// A value of `ty`: often a special one (limits, zeros, infinities, NaN).
    fn value(&mut self, ty: Scalar) -> Literal {
        let bits = self.next();
        let special = self.below(4) == 0;
        match ty {
            Scalar::Bool => Literal::Bool(bits & 1 == 1),
            Scalar::I32 if special => Literal::Int(pick(bits, &INT_SPECIALS)),
            Scalar::U32 if special => Literal::Int(pick(bits, &INT_SPECIALS) as u32 as i64),
            Scalar::I32 => Literal::Int(i64::from(small_or_full(bits) as i32)),
            Scalar::U32 => Literal::Int(i64::from(small_or_full(bits))),
            Scalar::F32 | Scalar::F16 => {
                let v = if special {
                    FLOAT_SPECIALS[(bits % FLOAT_SPECIALS.len() as u64) as usize]
                } else if bits & 7 == 0 {
                    f64::from(f32::from_bits((bits >> 32) as u32))
                } else {
                    // Few significant bits: sums and products stay in range.
                    ((bits >> 32) as i32 % 4096) as f64 / 16.0
                };
                Literal::Float(round_to(ty, v))
            }
            other => unreachable!("generated programs have no {} values", other.name()),
        }
    }

    fn buffer(&mut self, elem: Scalar, len: usize) -> Buffer {
        let values = (0..len).map(|_| self.value(elem));
        let int = |l: Literal| match l {
            Literal::Int(v) => v,
            _ => unreachable!(),
        };
        let float = |l: Literal| match l {
            Literal::Float(v) => v,
            _ => unreachable!(),
        };
        match elem {
            Scalar::I32 => Buffer::I32(values.map(|l| int(l) as i32).collect()),
            Scalar::U32 => Buffer::U32(values.map(|l| int(l) as u32).collect()),
            Scalar::F32 => Buffer::F32(values.map(|l| float(l) as f32).collect()),
            Scalar::F16 => Buffer::F16(values.map(|l| eval::f16_from_f64(float(l))).collect()),
            other => unreachable!("generated programs have no {} slices", other.name()),
        }
    }
}

const INT_SPECIALS: [i64; 8] = [0, 1, -1, 2, i32::MIN as i64, i32::MAX as i64, 31, 32];

const FLOAT_SPECIALS: [f64; 12] = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    0.5,
    65504.0,
    3.0e38,
    1.0e-40,
    6.0e-8,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

fn pick(bits: u64, items: &[i64]) -> i64 {
    items[(bits % items.len() as u64) as usize]
}

/// Small values half the time (they meet in comparisons), else any.
fn small_or_full(bits: u64) -> u32 {
    if bits & 1 == 0 {
        ((bits >> 32) as u32 % 64).wrapping_sub(32)
    } else {
        (bits >> 32) as u32
    }
}

/// `v` rounded to the float type `ty`, exactly as the interpreter holds it.
fn round_to(ty: Scalar, v: f64) -> f64 {
    match ty {
        Scalar::F16 => warpforge_codegen::eval::f16_from_f64(v).to_f64(),
        _ => f64::from(v as f32),
    }
}

/// The kernel's parameters, by role.
struct Params {
    list: Vec<Param>,
    /// `n`: the threads of the grid.
    n: ParamId,
    /// Per slice type (`SLICE_TYPES` order, f16 only when used): its scalar,
    /// input slice and output slice.
    scalar: Vec<(Scalar, ParamId)>,
    input: Vec<(Scalar, ParamId)>,
    output: Vec<(Scalar, ParamId)>,
    /// Atomic targets: `acc_i32`, `acc_u32`, of 2n elements each; element
    /// `gid` is the thread's own, the upper half everyone's.
    acc: Vec<(Scalar, ParamId)>,
}

impl Params {
    fn new(f16: bool) -> Params {
        let mut list = Vec::new();
        let mut add = |name: String, ty: ParamType| {
            list.push(Param {
                name,
                ty,
                tensor_map: None,
            });
            (list.len() - 1) as ParamId
        };
        let n = add("n".into(), ParamType::Scalar(Scalar::U32));
        let types: Vec<Scalar> = SLICE_TYPES
            .into_iter()
            .filter(|&t| f16 || t != Scalar::F16)
            .collect();
        let slice = |elem, mutable| ParamType::Slice { elem, mutable };
        let mut params = Params {
            list: Vec::new(),
            n,
            scalar: Vec::new(),
            input: Vec::new(),
            output: Vec::new(),
            acc: Vec::new(),
        };
        for &t in &types {
            params
                .scalar
                .push((t, add(format!("s_{}", t.name()), ParamType::Scalar(t))));
            params
                .input
                .push((t, add(format!("in_{}", t.name()), slice(t, false))));
            params
                .output
                .push((t, add(format!("out_{}", t.name()), slice(t, true))));
        }
        for t in [Scalar::I32, Scalar::U32] {
            params
                .acc
                .push((t, add(format!("acc_{}", t.name()), slice(t, true))));
        }
        params.list = list;
        params
    }

    fn of(list: &[(Scalar, ParamId)], ty: Scalar) -> Option<ParamId> {
        list.iter().find(|(t, _)| *t == ty).map(|(_, p)| *p)
    }
}

/// A variable the generator may read (and assign when `assignable`).
#[derive(Clone, Copy)]
struct Var {
    id: LocalId,
    ty: Scalar,
    assignable: bool,
    /// Elements, for a register array.
    len: Option<u32>,
}

/// A loop around the statements being generated.
#[derive(Clone, Copy)]
enum Loop {
    /// `#[unroll]`: its body may not `break` or `continue` it.
    Unrolled,
    For,
    /// A `while` and its counter, which the conditions of its `break`s and
    /// `continue`s do not read: Mesa 22.3's lavapipe (CI's Vulkan driver)
    /// miscounts a loop that tests, after the increment, whether its counter
    /// is at a value already passed (`w == 0`, `w < 1`), and leaves it after
    /// one iteration or with garbage (codegen/tests/generated/README.md).
    While(LocalId),
}

/// What an expression may contain.
#[derive(Clone, Copy)]
struct Ctx {
    /// Speculatable only (a select's operands): no memory reads, atomics or
    /// divisions by non-literals.
    pure: bool,
    /// May read the shared array (not while computing what a thread writes
    /// to it: another thread's read in the same phase would race).
    shared_reads: bool,
}

struct Gen<'c, 'd> {
    c: &'c mut Choices<'d>,
    f16: bool,
    /// Barriers and shuffles (then no `return`, and whole warps).
    collectives: bool,
    /// Warp shuffles and `lane_id()`: collectives in a one-dimensional
    /// block (WGSL defines subgroup lanes only there).
    subgroups: bool,
    block_threads: u32,
    params: Params,
    locals: Vec<Local>,
    scopes: Vec<Vec<Var>>,
    /// `#[unroll]` loop variables in scope and their exclusive bounds.
    unrolled: Vec<(LocalId, u32)>,
    /// The enclosing loops, innermost last.
    loops: Vec<Loop>,
    /// A variable expressions may not read (see [`Loop::While`]).
    hidden: Option<LocalId>,
    depth: u32,
    statements: u32,
    /// The shared array and its type, once declared.
    shared: Option<(LocalId, Scalar)>,
    shared_written: bool,
    /// The one op of each atomic target type's shared half, once used.
    shared_atomic_ops: Vec<(Scalar, AtomicOp)>,
    uses_subgroups: bool,
    tid: LocalId,
    gid: LocalId,
    /// The next output slot per slice type.
    slots: [u32; 4],
}

fn lit_u32(v: u32) -> Expr {
    Expr::u32(v)
}

fn lit_i32(v: i32) -> Expr {
    Expr::literal(Scalar::I32, Literal::Int(v.into()))
}

fn load(ty: Scalar, place: Place) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Load(Box::new(place)),
    }
}

fn local(id: LocalId) -> Place {
    Place::Local {
        local: id,
        indices: Vec::new(),
    }
}

fn special(s: Special) -> Expr {
    Expr {
        ty: Scalar::U32,
        kind: ExprKind::Special(s),
    }
}

fn call(ty: Scalar, f: Intrinsic, args: Vec<Expr>) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Call(f, args),
    }
}

fn cast(to: Scalar, e: Expr) -> Expr {
    Expr {
        ty: to,
        kind: ExprKind::Cast(Box::new(e)),
    }
}

impl<'c, 'd> Gen<'c, 'd> {
    fn new(c: &'c mut Choices<'d>, f16: bool, collectives: bool, block: [u32; 3]) -> Self {
        Gen {
            c,
            f16,
            collectives,
            subgroups: collectives && block[1] == 1,
            block_threads: block[0] * block[1],
            params: Params::new(f16),
            locals: Vec::new(),
            scopes: Vec::new(),
            unrolled: Vec::new(),
            loops: Vec::new(),
            hidden: None,
            depth: 0,
            statements: 0,
            shared: None,
            shared_written: false,
            shared_atomic_ops: Vec::new(),
            uses_subgroups: false,
            tid: 0,
            gid: 0,
            slots: [0; 4],
        }
    }

    fn new_local(&mut self, prefix: &str, ty: Scalar, space: Space, dims: Vec<Expr>) -> LocalId {
        let id = self.locals.len() as LocalId;
        self.locals.push(Local {
            name: format!("{prefix}{id}"),
            ty,
            space,
            dims,
            mutable: true,
        });
        id
    }

    /// Declares a scalar with `init` in the innermost scope.
    fn declare(&mut self, prefix: &str, init: Expr, assignable: bool, out: &mut Block) -> LocalId {
        let ty = init.ty;
        let id = self.new_local(prefix, ty, Space::Register, Vec::new());
        out.push(Stmt::Let {
            local: id,
            init: Some(init),
        });
        self.scopes.last_mut().unwrap().push(Var {
            id,
            ty,
            assignable,
            len: None,
        });
        id
    }

    fn value_types(&self) -> Vec<Scalar> {
        let mut types = vec![Scalar::U32, Scalar::I32, Scalar::F32, Scalar::Bool];
        if self.f16 {
            types.push(Scalar::F16);
        }
        types
    }

    fn value_type(&mut self) -> Scalar {
        let types = self.value_types();
        self.c.pick(&types)
    }

    fn vars(&self, pred: impl Fn(&Var) -> bool) -> Vec<Var> {
        self.scopes.iter().flatten().copied().filter(pred).collect()
    }

    /// `tid` (linear in the block), `gid` (linear in the grid), the shared
    /// array when the program has collectives, the body, then every
    /// top-level variable stored to the outputs.
    fn kernel_body(&mut self) -> Block {
        let mut body = Vec::new();
        self.scopes.push(Vec::new());
        let tid = Expr::binary(
            BinaryOp::Add,
            Expr::binary(
                BinaryOp::Mul,
                special(Special::ThreadIdx(Axis::Y)),
                special(Special::BlockDim(Axis::X)),
            ),
            special(Special::ThreadIdx(Axis::X)),
        );
        self.tid = self.declare("tid", tid, false, &mut body);
        let gid = Expr::binary(
            BinaryOp::Add,
            Expr::binary(
                BinaryOp::Mul,
                special(Special::BlockIdx(Axis::X)),
                lit_u32(self.block_threads),
            ),
            load(Scalar::U32, local(self.tid)),
        );
        self.gid = self.declare("gid", gid, false, &mut body);
        if self.collectives {
            let types: Vec<Scalar> = self
                .value_types()
                .into_iter()
                .filter(|&t| t != Scalar::Bool)
                .collect();
            let ty = self.c.pick(&types);
            let id = self.new_local("sh", ty, Space::Shared, vec![lit_u32(self.block_threads)]);
            body.push(Stmt::Let {
                local: id,
                init: None,
            });
            self.shared = Some((id, ty));
        }
        self.statements_into(&mut body, true);
        let top: Vec<Var> = self.scopes.pop().unwrap();
        for var in top {
            match var.len {
                None => self.store_out(load(var.ty, local(var.id)), &mut body),
                Some(len) => {
                    for k in 0..len {
                        let element = Place::Local {
                            local: var.id,
                            indices: vec![lit_u32(k)],
                        };
                        self.store_out(load(var.ty, element), &mut body);
                    }
                }
            }
        }
        body
    }

    /// `out_T[gid * SLOTS + slot] = value` (a bool as a `u32`), in the next slot.
    fn store_out(&mut self, value: Expr, out: &mut Block) {
        let value = if value.ty == Scalar::Bool {
            cast(Scalar::U32, value)
        } else {
            value
        };
        let t = SLICE_TYPES.iter().position(|&t| t == value.ty).unwrap();
        let slot = self.slots[t];
        self.slots[t] = (slot + 1) % SLOTS;
        self.store_slot(value, slot, out);
    }

    fn store_slot(&mut self, value: Expr, slot: u32, out: &mut Block) {
        let param = Params::of(&self.params.output, value.ty).unwrap();
        let index = Expr::binary(
            BinaryOp::Add,
            Expr::binary(
                BinaryOp::Mul,
                load(Scalar::U32, local(self.gid)),
                lit_u32(SLOTS),
            ),
            lit_u32(slot),
        );
        out.push(Stmt::Assign {
            place: Place::Global { param, index },
            value,
        });
    }

    /// A list of statements, in a new scope; `top` is the kernel's
    /// top-level (uniform) flow.
    fn statements_into(&mut self, out: &mut Block, top: bool) {
        while self.statements < MAX_STATEMENTS && self.c.chance(75) {
            self.statements += 1;
            self.statement(out, top);
        }
    }

    fn block(&mut self) -> Block {
        let mut out = Vec::new();
        self.scopes.push(Vec::new());
        self.depth += 1;
        self.statements_into(&mut out, false);
        self.depth -= 1;
        self.scopes.pop();
        out
    }

    fn statement(&mut self, out: &mut Block, top: bool) {
        let ctx = Ctx {
            pure: false,
            shared_reads: true,
        };
        let nest = self.depth < MAX_DEPTH;
        match self.c.below(16) {
            0 | 1 => {
                let ty = self.value_type();
                let init = self.expr(ty, MAX_EXPR_DEPTH, ctx);
                self.declare("v", init, true, out);
            }
            2 => {
                let targets = self.vars(|v| v.assignable && v.len.is_none());
                if !targets.is_empty() {
                    let var = self.c.pick(&targets);
                    let value = self.expr(var.ty, MAX_EXPR_DEPTH, ctx);
                    out.push(Stmt::Assign {
                        place: local(var.id),
                        value,
                    });
                }
            }
            3 => {
                let ty = self.value_type();
                let value = self.expr(ty, MAX_EXPR_DEPTH, ctx);
                self.store_out(value, out);
            }
            4 if nest => {
                let cond = self.expr(Scalar::Bool, MAX_EXPR_DEPTH, ctx);
                let then_body = self.block();
                let else_body = if self.c.chance(50) {
                    self.block()
                } else {
                    Vec::new()
                };
                out.push(Stmt::If {
                    cond,
                    then_body,
                    else_body,
                });
            }
            5 if nest => self.for_loop(out, false),
            6 if nest => self.for_loop(out, true),
            7 if nest => self.while_loop(out),
            8 => {
                let ty = self.value_type();
                let len = 1 + self.c.below(4);
                let id = self.new_local("r", ty, Space::Register, vec![lit_u32(len)]);
                let init = self.expr(ty, 2, ctx);
                out.push(Stmt::Let {
                    local: id,
                    init: Some(init),
                });
                self.scopes.last_mut().unwrap().push(Var {
                    id,
                    ty,
                    assignable: true,
                    len: Some(len),
                });
            }
            9 => {
                let arrays = self.vars(|v| v.len.is_some());
                if !arrays.is_empty() {
                    let array = self.c.pick(&arrays);
                    let index = self.register_index(array.len.unwrap());
                    let value = self.expr(array.ty, MAX_EXPR_DEPTH, ctx);
                    out.push(Stmt::Assign {
                        place: Place::Local {
                            local: array.id,
                            indices: vec![index],
                        },
                        value,
                    });
                }
            }
            10 if matches!(self.loops.last(), Some(Loop::For | Loop::While(_))) => {
                if let Some(&Loop::While(counter)) = self.loops.last() {
                    self.hidden = Some(counter);
                }
                let cond = self.expr(Scalar::Bool, 2, ctx);
                self.hidden = None;
                let leave = if self.c.chance(50) {
                    Stmt::Continue
                } else {
                    Stmt::Break
                };
                out.push(Stmt::If {
                    cond,
                    then_body: vec![leave],
                    else_body: Vec::new(),
                });
            }
            11 => {
                let ty = self.c.pick(&[Scalar::U32, Scalar::I32]);
                let drawn = self.c.pick(&[
                    AtomicOp::Add,
                    AtomicOp::Min,
                    AtomicOp::Max,
                    AtomicOp::And,
                    AtomicOp::Or,
                    AtomicOp::Xor,
                ]);
                // Each op alone is order-independent, two kinds on one element
                // are not (max then and differs from and then max): a type's
                // shared half keeps the op of its first shared atomic.
                let op = match self.shared_atomic_ops.iter().find(|(t, _)| *t == ty) {
                    Some(&(_, op)) => op,
                    None => {
                        self.shared_atomic_ops.push((ty, drawn));
                        drawn
                    }
                };
                let param = Params::of(&self.params.acc, ty).unwrap();
                let n_param = self.params.n;
                let n = || load_param(Scalar::U32, n_param);
                let any = self.expr(Scalar::U32, 2, ctx);
                let index = Expr::binary(BinaryOp::Add, n(), Expr::binary(BinaryOp::Rem, any, n()));
                let value = self.expr(ty, 2, ctx);
                out.push(Stmt::Expr(Expr {
                    ty,
                    kind: ExprKind::Atomic {
                        op,
                        place: Box::new(Place::Global { param, index }),
                        value: Box::new(value),
                        compare: None,
                    },
                }));
            }
            12 if !self.collectives => {
                let cond = self.expr(Scalar::Bool, 2, ctx);
                out.push(Stmt::If {
                    cond,
                    then_body: vec![Stmt::Return],
                    else_body: Vec::new(),
                });
            }
            13 if top && self.collectives => self.shared_phase(out),
            14 if top && self.subgroups => self.shuffle(out),
            _ => {
                let ty = self.value_type();
                let value = self.expr(ty, 2, ctx);
                self.store_out(value, out);
            }
        }
    }

    /// `for i in (start..end).step_by(step)`, u32 or i32, a few iterations;
    /// `#[unroll]` ones from 0 to a literal, which may index register arrays.
    fn for_loop(&mut self, out: &mut Block, unroll: bool) {
        let ty = if unroll {
            Scalar::U32
        } else {
            self.c.pick(&[Scalar::U32, Scalar::I32])
        };
        let var = self.new_local("i", ty, Space::Register, Vec::new());
        let lit = |v: u32| {
            if ty == Scalar::U32 {
                lit_u32(v)
            } else {
                lit_i32(v as i32)
            }
        };
        let (start, end, step) = if unroll {
            (0, lit_u32(1 + self.c.below(4)), 1)
        } else {
            let start = self.c.below(3);
            let end = if ty == Scalar::U32 && self.c.chance(50) {
                // A run-time bound: divergent trip counts.
                let e = self.expr(
                    Scalar::U32,
                    2,
                    Ctx {
                        pure: false,
                        shared_reads: true,
                    },
                );
                Expr::binary(
                    BinaryOp::Add,
                    lit_u32(start),
                    Expr::binary(BinaryOp::Rem, e, lit_u32(6)),
                )
            } else {
                lit(start + self.c.below(6))
            };
            (start, end, 1 + self.c.below(2))
        };
        if unroll {
            self.unrolled
                .push((var, end.as_int().expect("a literal bound") as u32));
        }
        // An `#[unroll]` variable only indexes register arrays: unrolled, it
        // is a literal, and specialization refuses the constant overflows
        // (by design, as Rust's constant evaluation) that `fold` cannot see.
        let readable = Var {
            id: var,
            ty,
            assignable: false,
            len: None,
        };
        self.scopes
            .push(if unroll { Vec::new() } else { vec![readable] });
        self.loops
            .push(if unroll { Loop::Unrolled } else { Loop::For });
        let body = self.block();
        self.loops.pop();
        self.scopes.pop();
        if unroll {
            self.unrolled.pop();
        }
        out.push(Stmt::For {
            var,
            start: lit(start),
            end,
            step: lit(step),
            unroll,
            body,
        });
    }

    /// `let mut w = 0; while w < K && cond { w += 1; .. }`.
    fn while_loop(&mut self, out: &mut Block) {
        let counter = self.declare("w", lit_u32(0), false, out);
        let limit = 1 + self.c.below(4);
        let cond = self.expr(
            Scalar::Bool,
            2,
            Ctx {
                pure: false,
                shared_reads: true,
            },
        );
        let cond = Expr::binary(
            BinaryOp::LogicalAnd,
            Expr::binary(
                BinaryOp::Lt,
                load(Scalar::U32, local(counter)),
                lit_u32(limit),
            ),
            cond,
        );
        self.loops.push(Loop::While(counter));
        let mut body = vec![Stmt::Assign {
            place: local(counter),
            value: Expr::binary(BinaryOp::Add, load(Scalar::U32, local(counter)), lit_u32(1)),
        }];
        body.extend(self.block());
        self.loops.pop();
        out.push(Stmt::While { cond, body });
    }

    /// `sync_threads(); sh[tid] = e; sync_threads();`, after which any
    /// thread may read any element.
    fn shared_phase(&mut self, out: &mut Block) {
        let (id, ty) = self.shared.expect("collectives declare the shared array");
        let value = self.expr(
            ty,
            MAX_EXPR_DEPTH,
            Ctx {
                pure: false,
                shared_reads: false,
            },
        );
        out.push(Stmt::Barrier);
        out.push(Stmt::Assign {
            place: Place::Local {
                local: id,
                indices: vec![load(Scalar::U32, local(self.tid))],
            },
            value,
        });
        out.push(Stmt::Barrier);
        self.shared_written = true;
    }

    /// `let v = shfl_xor(e, mask)` or `shfl_down(e, delta)`, in uniform flow.
    fn shuffle(&mut self, out: &mut Block) {
        let ty = self.c.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
        let value = self.expr(
            ty,
            MAX_EXPR_DEPTH,
            Ctx {
                pure: false,
                shared_reads: true,
            },
        );
        let f = self.c.pick(&[Intrinsic::ShflXor, Intrinsic::ShflDown]);
        let lanes = lit_u32(1 + self.c.below(31));
        self.uses_subgroups = true;
        self.declare("v", call(ty, f, vec![value, lanes]), true, out);
    }

    /// A literal index below `len`, or an `#[unroll]` variable bounded by it.
    fn register_index(&mut self, len: u32) -> Expr {
        let vars: Vec<LocalId> = self
            .unrolled
            .iter()
            .filter(|(_, end)| *end <= len)
            .map(|(v, _)| *v)
            .collect();
        if !vars.is_empty() && self.c.chance(60) {
            load(Scalar::U32, local(self.c.pick(&vars)))
        } else {
            lit_u32(self.c.below(len))
        }
    }

    fn expr(&mut self, ty: Scalar, depth: u32, ctx: Ctx) -> Expr {
        if depth == 0 || !self.c.chance(55) {
            return self.leaf(ty, ctx);
        }
        let d = depth - 1;
        let e = match ty {
            Scalar::Bool => self.bool_expr(d, ctx),
            Scalar::I32 | Scalar::U32 => self.int_expr(ty, d, ctx),
            _ => self.float_expr(ty, d, ctx),
        };
        // Specialization folds constant operations as Rust's constant
        // evaluation does: an overflow or a shift past the width is a
        // compile error there (by design, as `0u32 - 1` is in Rust), not
        // the wrapping a run-time value gets. A literal stands in.
        if fold(&e).is_err() {
            return self.literal(ty);
        }
        e
    }

    /// One of `ops` over two operands of type `ty` (drawn in that order).
    fn binary_of(&mut self, ops: &[BinaryOp], ty: Scalar, d: u32, ctx: Ctx) -> Expr {
        let op = self.c.pick(ops);
        let a = self.expr(ty, d, ctx);
        let b = self.expr(ty, d, ctx);
        Expr::binary(op, a, b)
    }

    fn bool_expr(&mut self, d: u32, ctx: Ctx) -> Expr {
        match self.c.below(5) {
            0 | 1 => {
                let mut types = self.value_types();
                types.retain(|&t| t != Scalar::Bool);
                let t = self.c.pick(&types);
                self.binary_of(
                    &[
                        BinaryOp::Lt,
                        BinaryOp::Eq,
                        BinaryOp::Ne,
                        BinaryOp::Le,
                        BinaryOp::Gt,
                        BinaryOp::Ge,
                    ],
                    t,
                    d,
                    ctx,
                )
            }
            2 => {
                let a = self.expr(Scalar::Bool, d, ctx);
                Expr {
                    ty: Scalar::Bool,
                    kind: ExprKind::Unary(UnaryOp::Not, Box::new(a)),
                }
            }
            3 => self.binary_of(
                &[
                    BinaryOp::LogicalAnd,
                    BinaryOp::LogicalOr,
                    BinaryOp::BitAnd,
                    BinaryOp::BitOr,
                    BinaryOp::BitXor,
                    BinaryOp::Eq,
                    BinaryOp::Ne,
                ],
                Scalar::Bool,
                d,
                ctx,
            ),
            _ => self.select(Scalar::Bool, d, ctx),
        }
    }

    fn int_expr(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> Expr {
        match self.c.below(9) {
            0 | 1 => self.binary_of(
                &[
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::BitAnd,
                    BinaryOp::BitOr,
                    BinaryOp::BitXor,
                ],
                ty,
                d,
                ctx,
            ),
            2 => {
                let op = self.c.pick(&[BinaryOp::Shl, BinaryOp::Shr]);
                let a = self.expr(ty, d, ctx);
                let b = self.expr(Scalar::U32, d, ctx);
                Expr::binary(op, a, b)
            }
            3 if !ctx.pure => {
                let op = self.c.pick(&[BinaryOp::Div, BinaryOp::Rem]);
                let a = self.expr(ty, d, ctx);
                let b = self.expr(ty, d, ctx);
                Expr::binary(op, a, nonzero_divisor(b))
            }
            4 => {
                let from = self.value_type();
                let a = self.expr(from, d, ctx);
                cast(ty, a)
            }
            5 => {
                let a = self.expr(ty, d, ctx);
                let op = if ty == Scalar::I32 && self.c.chance(50) {
                    UnaryOp::Neg
                } else {
                    UnaryOp::Not
                };
                Expr {
                    ty,
                    kind: ExprKind::Unary(op, Box::new(a)),
                }
            }
            6 => self.numeric_call(ty, d, ctx),
            _ => self.select(ty, d, ctx),
        }
    }

    fn float_expr(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> Expr {
        match self.c.below(7) {
            0 | 1 => self.binary_of(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul], ty, d, ctx),
            2 => {
                let mut types = self.value_types();
                types.retain(|&t| t != Scalar::Bool);
                let from = self.c.pick(&types);
                let a = self.expr(from, d, ctx);
                cast(ty, a)
            }
            3 => {
                let a = self.expr(ty, d, ctx);
                Expr {
                    ty,
                    kind: ExprKind::Unary(UnaryOp::Neg, Box::new(a)),
                }
            }
            4 => self.numeric_call(ty, d, ctx),
            5 if ty == Scalar::F32 => {
                let bits = self.expr(Scalar::U32, d, ctx);
                call(ty, Intrinsic::FromBits, vec![bits])
            }
            _ => self.select(ty, d, ctx),
        }
    }

    /// `abs`, `min`, `max`, and on floats `floor`, `ceil`, `round`.
    fn numeric_call(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> Expr {
        let mut fs = vec![Intrinsic::Min, Intrinsic::Max];
        if ty != Scalar::U32 {
            fs.push(Intrinsic::Abs);
        }
        if ty.is_float() {
            fs.extend([Intrinsic::Floor, Intrinsic::Ceil, Intrinsic::Round]);
        }
        let f = self.c.pick(&fs);
        let a = self.expr(ty, d, ctx);
        let args = if matches!(f, Intrinsic::Min | Intrinsic::Max) {
            vec![a, self.expr(ty, d, ctx)]
        } else {
            vec![a]
        };
        call(ty, f, args)
    }

    fn select(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> Expr {
        let pure = Ctx { pure: true, ..ctx };
        let cond = self.expr(Scalar::Bool, d, pure);
        let a = self.expr(ty, d, pure);
        let b = self.expr(ty, d, pure);
        Expr {
            ty,
            kind: ExprKind::Select(Box::new(cond), Box::new(a), Box::new(b)),
        }
    }

    fn leaf(&mut self, ty: Scalar, ctx: Ctx) -> Expr {
        // Each entry is a leaf form available here; the first, a literal, is
        // the simplest.
        #[derive(Clone, Copy)]
        enum Leaf {
            Literal,
            Var,
            Scalar,
            Special,
            Input,
            Register,
            Shared,
            OwnAtomic,
        }
        let mut forms = vec![Leaf::Literal];
        let readable = |v: &Var| v.ty == ty && v.len.is_none() && Some(v.id) != self.hidden;
        if !self.vars(readable).is_empty() {
            forms.extend([Leaf::Var, Leaf::Var]);
        }
        if ty != Scalar::Bool {
            forms.push(Leaf::Scalar);
        }
        if ty == Scalar::U32 {
            forms.push(Leaf::Special);
        }
        if !ctx.pure && ty != Scalar::Bool {
            forms.extend([Leaf::Input, Leaf::Input]);
        }
        if !self.vars(|v| v.ty == ty && v.len.is_some()).is_empty() {
            forms.push(Leaf::Register);
        }
        if !ctx.pure
            && ctx.shared_reads
            && self.shared_written
            && self.shared.is_some_and(|(_, t)| t == ty)
        {
            forms.push(Leaf::Shared);
        }
        if !ctx.pure && matches!(ty, Scalar::I32 | Scalar::U32) {
            forms.push(Leaf::OwnAtomic);
        }
        let sub = Ctx {
            pure: ctx.pure,
            shared_reads: ctx.shared_reads,
        };
        match self.c.pick(&forms) {
            Leaf::Literal => self.literal(ty),
            Leaf::Var => {
                let vars = self.vars(readable);
                load(ty, local(self.c.pick(&vars).id))
            }
            Leaf::Scalar => load_param(ty, Params::of(&self.params.scalar, ty).unwrap()),
            Leaf::Special => {
                // `block_dim()` too: the launch's block, which WGSL reads
                // from a `let` so that naga does not evaluate (and refuse the
                // overflows and wide shifts of) what the IR computes at run
                // time.
                let mut specials = vec![
                    Special::ThreadIdx(Axis::X),
                    Special::ThreadIdx(Axis::Y),
                    Special::BlockIdx(Axis::X),
                    Special::GridDim(Axis::X),
                    Special::BlockDim(Axis::X),
                    Special::BlockDim(Axis::Y),
                ];
                if self.subgroups {
                    specials.push(Special::LaneId);
                }
                let s = self.c.pick(&specials);
                self.uses_subgroups |= s == Special::LaneId;
                special(s)
            }
            Leaf::Input => {
                let param = Params::of(&self.params.input, ty).unwrap();
                let i = self.expr(Scalar::U32, 2, sub);
                let len = Expr {
                    ty: Scalar::U32,
                    kind: ExprKind::Len(param),
                };
                load(
                    ty,
                    Place::Global {
                        param,
                        index: Expr::binary(BinaryOp::Rem, i, len),
                    },
                )
            }
            Leaf::Register => {
                let arrays = self.vars(|v| v.ty == ty && v.len.is_some());
                let array = self.c.pick(&arrays);
                let index = self.register_index(array.len.unwrap());
                load(
                    ty,
                    Place::Local {
                        local: array.id,
                        indices: vec![index],
                    },
                )
            }
            Leaf::Shared => {
                let (id, _) = self.shared.unwrap();
                let i = self.expr(Scalar::U32, 2, sub);
                load(
                    ty,
                    Place::Local {
                        local: id,
                        indices: vec![Expr::binary(BinaryOp::Rem, i, lit_u32(self.block_threads))],
                    },
                )
            }
            Leaf::OwnAtomic => {
                let op = self.c.pick(&[
                    AtomicOp::Add,
                    AtomicOp::Min,
                    AtomicOp::Max,
                    AtomicOp::And,
                    AtomicOp::Or,
                    AtomicOp::Xor,
                    AtomicOp::Exchange,
                    AtomicOp::CompareExchange,
                ]);
                let param = Params::of(&self.params.acc, ty).unwrap();
                let value = self.expr(ty, 1, sub);
                let compare =
                    (op == AtomicOp::CompareExchange).then(|| Box::new(self.expr(ty, 1, sub)));
                Expr {
                    ty,
                    kind: ExprKind::Atomic {
                        op,
                        place: Box::new(Place::Global {
                            param,
                            index: load(Scalar::U32, local(self.gid)),
                        }),
                        value: Box::new(value),
                        compare,
                    },
                }
            }
        }
    }

    fn literal(&mut self, ty: Scalar) -> Expr {
        let v = self.c.below(u32::MAX);
        let special = self.c.chance(30);
        let lit = match ty {
            Scalar::Bool => Literal::Bool(v & 1 == 1),
            Scalar::I32 if special => Literal::Int(pick(u64::from(v), &INT_SPECIALS)),
            Scalar::U32 if special => Literal::Int(pick(u64::from(v), &INT_SPECIALS) as u32 as i64),
            Scalar::I32 => Literal::Int(i64::from(v as i32 % 100)),
            Scalar::U32 => Literal::Int(i64::from(v % 100)),
            _ if special => Literal::Float(round_to(
                ty,
                FLOAT_SPECIALS[v as usize % FLOAT_SPECIALS.len()],
            )),
            _ => Literal::Float(round_to(ty, f64::from(v as i32 % 400) / 8.0)),
        };
        Expr::literal(ty, lit)
    }
}

/// What specialization folds `e` to: a literal (`Some`), nothing (`None`),
/// or an error (a constant overflow). Mirrors `specialize`'s fold: operators
/// over literals, selects and short-circuits with a constant condition.
fn fold(e: &Expr) -> Result<Option<Literal>, ()> {
    let literal = |l: Literal, ty: Scalar| Expr::literal(ty, l);
    let evaluate = |folded: Expr| eval::eval(&folded, &[], &[]).map(Some).map_err(drop);
    match &e.kind {
        ExprKind::Literal(l) => Ok(Some(*l)),
        ExprKind::Unary(op, a) => match fold(a)? {
            Some(x) => evaluate(Expr {
                ty: e.ty,
                kind: ExprKind::Unary(*op, Box::new(literal(x, a.ty))),
            }),
            None => Ok(None),
        },
        ExprKind::Cast(a) => match fold(a)? {
            Some(x) => evaluate(cast(e.ty, literal(x, a.ty))),
            None => Ok(None),
        },
        ExprKind::Binary(op @ (BinaryOp::LogicalAnd | BinaryOp::LogicalOr), a, b) => {
            let decides = Literal::Bool(*op == BinaryOp::LogicalOr);
            match fold(a)? {
                Some(x) if x == decides => Ok(Some(x)),
                Some(_) => fold(b),
                None => fold(b).map(|_| None),
            }
        }
        ExprKind::Binary(op, a, b) => match (fold(a)?, fold(b)?) {
            (Some(x), Some(y)) => evaluate(Expr::binary(*op, literal(x, a.ty), literal(y, b.ty))),
            _ => Ok(None),
        },
        ExprKind::Select(c, a, b) => match fold(c)? {
            Some(Literal::Bool(true)) => fold(a),
            Some(_) => fold(b),
            None => fold(a).and(fold(b)).map(|_| None),
        },
        _ => Ok(None),
    }
}

fn load_param(ty: Scalar, param: ParamId) -> Expr {
    Expr {
        ty,
        kind: ExprKind::Param(param),
    }
}

/// `(b & 0x7fff) | 1` for i32 (positive: no `MIN / -1`), `b | 1` for u32.
fn nonzero_divisor(b: Expr) -> Expr {
    let ty = b.ty;
    let masked = if ty == Scalar::I32 {
        Expr::binary(BinaryOp::BitAnd, b, lit_i32(0x7fff))
    } else {
        b
    };
    let one = Expr::literal(ty, Literal::Int(1));
    Expr::binary(BinaryOp::BitOr, masked, one)
}
