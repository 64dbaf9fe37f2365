//! A reference interpreter of the IR on the CPU: runs a specialized
//! [`Kernel`] over a grid of blocks on host buffers, as a test oracle for the
//! backends and to run and debug a kernel without a GPU.
//!
//! ```ignore
//! let kernel = specialize(&def.ir, &consts)?;
//! let mut args = vec![Arg::from(2.0f32), Arg::from(xs), Arg::from(ys)];
//! interpret(&kernel, &Launch::new([blocks, 1, 1], [256, 1, 1]), &mut args)?;
//! let ys = args[2].as_f32().unwrap();
//! ```
//!
//! # Execution model
//! Blocks run one after another, each with fresh shared memory. A block's
//! threads are grouped in warps of 32 consecutive linear thread ids (x
//! fastest), and each warp runs in lock-step as the SIMT hardware does:
//! every statement for the warp's active lanes, `if` branches and loop
//! iterations under lane masks, lanes leaving by `break`, `continue` and
//! `return`. Expressions are evaluated lane by lane within each operation
//! (atomics apply in lane order), so warp shuffles and the warp matrix
//! operations see every lane's operands. Within a block, warps run one at a
//! time until each reaches a `sync_threads()` or ends; then every thread of
//! the block must be at that same barrier, or it is an error. A thread that
//! returned counts as absent: `bar.sync` is `.aligned`, which asks every
//! thread of the block to execute it (the hardware, which waits only for
//! threads that have not exited, may let such a kernel through). This is
//! one legal interleaving: a kernel whose result depends on the
//! interleaving (a missing barrier) may compute something else on a GPU.
//!
//! What is interpreted: every SIMT statement and expression, shared memory,
//! barriers, atomics, `fence_gpu` (a no-op: blocks run one after another
//! and every access lands when it runs, so every earlier write is already
//! visible), `shfl_xor`/`shfl_down`, `lane_id`, the operand packing
//! intrinsics, `mma.sync` (f16, bf16, tf32, s8, u8), `ldmatrix` (plain and
//! transposed), the 2:4 sparse `mma.sp` (both forms), the Volta `wmma`
//! load/mma/store and `cp.async` with commit and wait (a copy lands when it
//! is issued: a legal timing, since the data may land any time before the
//! wait). The fragment layouts are those of docs/ptx.md; `wmma`'s, which the
//! hardware leaves unspecified, is the interpreter's own (see `warp.rs`), as
//! only `wmma` operations and element-wise arithmetic may read it. Not
//! interpreted, each an [`ErrorKind::Unsupported`] error naming the construct:
//! the sm_90 mbarriers, `fence_proxy_async`, `cluster_sync` and kernels
//! with a `cluster(..)` (whose blocks must run at once), the sm_90a
//! warpgroup operations (wgmma), and any statement this module does not
//! know.
//!
//! Arithmetic is the GPU's, not Rust's debug builds': see `value.rs`
//! (integers wrap, division by zero is an error, f16 and bf16 compute in f32
//! and round once, transcendentals are the host's and need a tolerance).
//!
//! # Checks
//! Each is an [`Error`] that names the kernel, the block, the thread (or
//! warp) and the statement, by the validator's statement path and the
//! statement's text:
//! - out-of-bounds reads and writes of slices (index against `len()`), of
//!   shared and register arrays (each index against its dimension, as Rust
//!   checks them), and of the byte spans of `ldmatrix`, `wmma` and `cp.async`;
//!   misaligned `ldmatrix` rows, `cp.async` and `wmma` addresses;
//! - uses of a value nothing wrote: a register array element declared
//!   without a value, or shared memory before any store (the GPU's is
//!   garbage). A plain copy (`x = tile[i]`, `let x = r[j]`) and a fragment
//!   load (`ldmatrix`, `wmma_load`) carry "no value" along, since pipelines
//!   prefetch what they may discard; computing with it, an `mma` on it or
//!   storing it to a slice is the error. [`Launch::check_uninitialized`]
//!   turns the check off (such values then read as zero);
//! - barrier divergence: a `sync_threads()` that some threads of the block do
//!   not reach (another branch, a loop left early, a thread that returned),
//!   or threads at different barriers; a warp shuffle or matrix operation
//!   that some lanes of the warp do not reach together;
//! - integer division by zero;
//! - with [`Launch::check_non_finite`], float operations on or giving an
//!   infinity or NaN, which WGSL leaves to the implementation;
//! - a step budget ([`Launch::max_steps`], counted per thread per statement
//!   and loop test): a kernel that does not end is an error naming it.
//!
//! No input makes it panic: an IR that breaks the validator's invariants is
//! refused by [`crate::valid::validate`] before it runs.

mod machine;
mod value;
mod warp;

#[cfg(all(test, feature = "front"))]
mod tests;

use std::fmt;

use crate::ir::{Kernel, Literal, ParamType, Scalar};
use crate::KernelDef;

/// The default [`Launch::max_steps`]: about a minute of interpretation.
pub const DEFAULT_MAX_STEPS: u64 = 1 << 30;

/// The most shared memory one block may use, in bytes (227 KiB, the most an
/// sm_90 block can opt into).
pub const MAX_SHARED_BYTES: usize = 227 * 1024;

/// The shape of one launch and the interpreter's budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks per grid, x y z.
    pub grid: [u32; 3],
    /// Threads per block, x y z (at most 1024 in all).
    pub block: [u32; 3],
    /// The most thread-steps (one thread executing one statement or one loop
    /// test) the whole launch may take before it is an
    /// [`ErrorKind::StepBudget`] error.
    pub max_steps: u64,
    /// Whether reading a register array element or a shared memory byte
    /// that nothing wrote is an [`ErrorKind::Uninitialized`] error (the
    /// default). Off, such reads give zero, which the GPU does not promise:
    /// for kernels that read values they then discard.
    pub check_uninitialized: bool,
    /// Whether a float operation (arithmetic, comparison, conversion,
    /// intrinsic) with an infinite or NaN operand or result is an
    /// [`ErrorKind::NonFinite`] error (off by default). WGSL lets an
    /// implementation assume no such values (lavapipe computes `inf * 0.0`
    /// as `0.0`): a kernel that runs clean with this on computes the same
    /// on every WGSL implementation as far as infinities and NaNs go.
    pub check_non_finite: bool,
}

impl Launch {
    /// A launch of `grid` blocks of `block` threads, with the default step
    /// budget and the uninitialized-read check on.
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Launch {
        Launch {
            grid,
            block,
            max_steps: DEFAULT_MAX_STEPS,
            check_uninitialized: true,
            check_non_finite: false,
        }
    }

    /// The same launch with another step budget.
    pub fn max_steps(mut self, steps: u64) -> Launch {
        self.max_steps = steps;
        self
    }

    /// The same launch with the uninitialized-read check on or off.
    pub fn check_uninitialized(mut self, check: bool) -> Launch {
        self.check_uninitialized = check;
        self
    }

    /// The same launch with the infinity-and-NaN check on or off.
    pub fn check_non_finite(mut self, check: bool) -> Launch {
        self.check_non_finite = check;
        self
    }
}

/// A slice argument's elements, which the run updates in place.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    /// `bool` elements.
    Bool(Vec<bool>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `f16` elements.
    F16(Vec<half::f16>),
    /// `bf16` elements.
    Bf16(Vec<half::bf16>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
}

/// One argument per [`crate::ir::Param`]: a scalar's value (an integer or a
/// float literal of the parameter's type, a float rounded to it) or a slice.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A scalar parameter's value.
    Scalar(Literal),
    /// A slice parameter's elements.
    Slice(Buffer),
}

macro_rules! buffer_types {
    ($($variant:ident $t:ty, $scalar:ident, $as:ident, $as_mut:ident;)*) => {
        impl Buffer {
            /// The element type.
            pub fn elem(&self) -> Scalar {
                match self {
                    $(Buffer::$variant(_) => Scalar::$scalar,)*
                }
            }

            /// The number of elements.
            pub fn len(&self) -> usize {
                match self {
                    $(Buffer::$variant(v) => v.len(),)*
                }
            }

            /// Whether the buffer has no elements.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// `len` zeros of `elem`, when a buffer holds that type.
            fn zeroed(elem: Scalar, len: usize) -> Option<Buffer> {
                match elem {
                    $(Scalar::$scalar => Some(Buffer::$variant(vec![Default::default(); len])),)*
                    _ => None,
                }
            }

            /// The elements as memory holds them (little-endian).
            pub fn to_bytes(&self) -> Vec<u8> {
                match self {
                    $(Buffer::$variant(v) => v
                        .iter()
                        .flat_map(|&x| {
                            let bits = value::to_bits(Scalar::$scalar, x.to_lit())
                                .unwrap_or(0);
                            bits.to_le_bytes()
                                .into_iter()
                                .take(Scalar::$scalar.size_bytes() as usize)
                        })
                        .collect(),)*
                }
            }

            /// Overwrites the elements with `bytes` (as many as it holds).
            fn set_bytes(&mut self, bytes: &[u8]) {
                match self {
                    $(Buffer::$variant(v) => {
                        let size = Scalar::$scalar.size_bytes() as usize;
                        for (x, chunk) in v.iter_mut().zip(bytes.chunks_exact(size)) {
                            let mut word = [0u8; 8];
                            word[..size].copy_from_slice(chunk);
                            let lit = value::from_bits(Scalar::$scalar, u64::from_le_bytes(word));
                            *x = <$t as Elem>::from_lit(lit);
                        }
                    })*
                }
            }
        }

        impl Arg {
            $(
                /// The elements, when this is a slice of that type.
                pub fn $as(&self) -> Option<&[$t]> {
                    match self {
                        Arg::Slice(Buffer::$variant(v)) => Some(v),
                        _ => None,
                    }
                }

                /// The elements, mutably, when this is a slice of that type.
                pub fn $as_mut(&mut self) -> Option<&mut Vec<$t>> {
                    match self {
                        Arg::Slice(Buffer::$variant(v)) => Some(v),
                        _ => None,
                    }
                }
            )*
        }

        $(
            impl From<Vec<$t>> for Buffer {
                fn from(v: Vec<$t>) -> Buffer {
                    Buffer::$variant(v)
                }
            }

            impl From<Vec<$t>> for Arg {
                fn from(v: Vec<$t>) -> Arg {
                    Arg::Slice(Buffer::$variant(v))
                }
            }

            impl From<$t> for Arg {
                fn from(x: $t) -> Arg {
                    Arg::Scalar(x.to_lit())
                }
            }
        )*
    };
}

/// A Rust type of a DSL scalar, as a literal.
trait Elem: Copy {
    fn to_lit(self) -> Literal;
    fn from_lit(lit: Literal) -> Self;
}

impl Elem for bool {
    fn to_lit(self) -> Literal {
        Literal::Bool(self)
    }
    fn from_lit(lit: Literal) -> bool {
        matches!(lit, Literal::Bool(true))
    }
}

macro_rules! int_elem {
    ($($t:ty)*) => {$(
        impl Elem for $t {
            fn to_lit(self) -> Literal {
                Literal::Int(self as i64)
            }
            fn from_lit(lit: Literal) -> $t {
                match lit {
                    Literal::Int(v) => v as $t,
                    _ => 0,
                }
            }
        }
    )*};
}

int_elem!(i8 u8 i32 u32 i64 u64);

macro_rules! float_elem {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl Elem for $t {
            fn to_lit(self) -> Literal {
                Literal::Float($to(self))
            }
            fn from_lit(lit: Literal) -> $t {
                match lit {
                    Literal::Float(v) => $from(v),
                    _ => $from(0.0),
                }
            }
        }
    )*};
}

float_elem! {
    half::f16: |x: half::f16| x.to_f64(), crate::eval::f16_from_f64;
    half::bf16: |x: half::bf16| x.to_f64(), crate::eval::bf16_from_f64;
    f32: |x: f32| x as f64, |v: f64| v as f32;
    f64: |x: f64| x, |v: f64| v;
}

buffer_types! {
    Bool bool, Bool, as_bool, as_bool_mut;
    I8 i8, I8, as_i8, as_i8_mut;
    U8 u8, U8, as_u8, as_u8_mut;
    I32 i32, I32, as_i32, as_i32_mut;
    U32 u32, U32, as_u32, as_u32_mut;
    I64 i64, I64, as_i64, as_i64_mut;
    U64 u64, U64, as_u64, as_u64_mut;
    F16 half::f16, F16, as_f16, as_f16_mut;
    Bf16 half::bf16, Bf16, as_bf16, as_bf16_mut;
    F32 f32, F32, as_f32, as_f32_mut;
    F64 f64, F64, as_f64, as_f64_mut;
}

impl Buffer {
    /// A buffer of `elem` values read from `bytes` as memory holds them
    /// (little-endian): how a host that keeps device memory as bytes (the
    /// runtime's interpreter backend) hands a slice to the interpreter;
    /// [`Buffer::to_bytes`] gives the bytes back after the run. Refused:
    /// `e4m3` and `e5m2`, which the interpreter does not compute with, and
    /// a byte count that is not a whole number of elements.
    pub fn from_bytes(elem: Scalar, bytes: &[u8]) -> Result<Buffer, crate::Error> {
        let size = elem.size_bytes() as usize;
        if !bytes.len().is_multiple_of(size) {
            return Err(crate::Error::new(format!(
                "{} bytes are not a whole number of {} values ({size} bytes each): pass the \
                 bytes of whole elements",
                bytes.len(),
                elem.name()
            )));
        }
        let mut buffer = Buffer::zeroed(elem, bytes.len() / size).ok_or_else(|| unheld(elem))?;
        buffer.set_bytes(bytes);
        Ok(buffer)
    }

    /// Whether slices of `elem` can be interpreted: every scalar but `e4m3`
    /// and `e5m2`, whose error this is.
    pub fn check_elem(elem: Scalar) -> Result<(), crate::Error> {
        Buffer::zeroed(elem, 0)
            .map(|_| ())
            .ok_or_else(|| unheld(elem))
    }
}

/// Why slices of `elem` cannot be interpreted.
fn unheld(elem: Scalar) -> crate::Error {
    crate::Error::new(format!(
        "the interpreter holds no slices of {}: it does not compute with the 8-bit floats (only \
         Hopper's wgmma does). Convert the data to f16 or bf16, or run on a CUDA GPU",
        elem.name()
    ))
}

impl From<Buffer> for Arg {
    fn from(b: Buffer) -> Arg {
        Arg::Slice(b)
    }
}

/// What went wrong, for callers that match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The kernel breaks an IR invariant (the validator's message), or is not
    /// specialized.
    InvalidKernel,
    /// The grid or block shape, the kernel's `block(..)` or `requires(..)`,
    /// or the shared memory it needs.
    InvalidLaunch,
    /// An argument that does not fit its parameter.
    InvalidArgument,
    /// An index past the end of a slice, a shared array or a register array.
    OutOfBounds,
    /// An address that is not a multiple of what the access needs (a vector
    /// copy, an `ldmatrix` row).
    Misaligned,
    /// A read of a register array element or shared memory byte never written.
    Uninitialized,
    /// An integer `/` or `%` by zero.
    DivisionByZero,
    /// Threads of a block at different barriers, or some never at one that
    /// others wait at.
    BarrierDivergence,
    /// A warp shuffle or matrix operation that not every lane of the warp
    /// reaches together, or one that reads a lane the block does not have.
    WarpDivergence,
    /// More steps than [`Launch::max_steps`].
    StepBudget,
    /// With [`Launch::check_non_finite`]: a float operation on or giving an
    /// infinity or NaN.
    NonFinite,
    /// A construct the interpreter does not run.
    Unsupported,
}

/// An interpretation failure. `message` is the whole text (what `Display`
/// shows); the other fields are its parts, for callers that inspect them.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The kernel's name.
    pub kernel: String,
    /// `block_idx()` of the failing block.
    pub block: Option<[u32; 3]>,
    /// `thread_idx()` of the failing thread.
    pub thread: Option<[u32; 3]>,
    /// The statement: its path and its text.
    pub place: Option<String>,
    /// The whole message.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for crate::Error {
    fn from(e: Error) -> crate::Error {
        crate::Error::new(e.message)
    }
}

/// What a successful run took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Thread-steps: statements and loop tests, each counted once per thread.
    pub steps: u64,
}

/// Runs a specialized kernel (what [`crate::specialize::specialize`]
/// returns) over `launch.grid` blocks of `launch.block` threads, with one
/// argument per parameter. Slices are updated in place; on an error they
/// keep the values they had before the run.
pub fn interpret(kernel: &Kernel, launch: &Launch, args: &mut [Arg]) -> Result<Stats, Error> {
    let stats;
    {
        let mut m = machine::Machine::new(kernel, launch, args)?;
        stats = m.run()?;
        let results = m.into_slices();
        for (arg, bytes) in args.iter_mut().zip(results) {
            if let (Arg::Slice(buffer), Some(bytes)) = (arg, bytes) {
                buffer.set_bytes(&bytes);
            }
        }
    }
    Ok(stats)
}

/// [`interpret`] on one variant of a definition (`consts` in
/// `def.ir.const_params` order): checks its constraints and specializes it
/// first.
pub fn interpret_variant(
    def: &KernelDef,
    consts: &[i64],
    launch: &Launch,
    args: &mut [Arg],
) -> Result<Stats, Error> {
    interpret(&specialize_variant(def, consts)?, launch, args)
}

/// The variant `consts` (in `def.ir.const_params` order) of a definition,
/// as [`interpret`] takes it: its constraints checked, then specialized. A
/// host that launches one variant many times (the runtime's interpreter
/// backend) specializes it once with this.
pub fn specialize_variant(def: &KernelDef, consts: &[i64]) -> Result<Kernel, Error> {
    let setup =
        |e: crate::Error| Error::before_run(&def.ir.name, ErrorKind::InvalidKernel, e.message);
    def.check_constraints(consts).map_err(setup)?;
    crate::specialize::specialize(&def.ir, consts).map_err(setup)
}

/// The bytes of shared memory one block of a specialized kernel uses, as
/// the interpreter lays out its shared arrays (each 128-byte aligned, as
/// the backends do): what a host reports as the variant's shared memory.
/// An error when the kernel is not specialized or needs more than
/// [`MAX_SHARED_BYTES`].
pub fn shared_bytes(kernel: &Kernel) -> Result<usize, Error> {
    machine::Layout::new(kernel)
        .map(|layout| layout.shared_bytes)
        .map_err(|(kind, message)| {
            Error::before_run(
                &kernel.name,
                kind,
                format!("kernel `{}`: {message}", kernel.name),
            )
        })
}

impl Error {
    /// An error found before any thread ran: no block, thread or statement.
    pub(super) fn before_run(kernel: &str, kind: ErrorKind, message: String) -> Error {
        Error {
            kind,
            kernel: kernel.to_string(),
            block: None,
            thread: None,
            place: None,
            message,
        }
    }
}

/// The parameter type an argument must match, in words (for messages).
fn param_type_text(ty: &ParamType) -> String {
    match ty {
        ParamType::Scalar(s) => s.name().to_string(),
        ParamType::Slice { elem, mutable } => {
            format!("&{}[{}]", if *mutable { "mut " } else { "" }, elem.name())
        }
    }
}
