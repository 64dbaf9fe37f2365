//! The kernel IR: a typed, structured tree close to the DSL.
//!
//! One [`Kernel`] describes a whole variant family: compile-time parameters
//! ([`ConstParam`]) stay symbolic until [`crate::specialize`] substitutes the
//! values of one variant, folds constants and unrolls `#[unroll]` loops. The
//! macro therefore emits one IR per kernel, never one per variant.
//!
//! Design choices that matter for the backends:
//! - Every [`Expr`] carries its [`Scalar`] type, so backends never infer.
//! - Control flow is structured (if / for / while / break / continue / return),
//!   which maps directly onto WGSL and onto PTX labels.
//! - Register arrays are [`Local`]s with `dims`; after specialization every
//!   index into them must be a literal, so a backend can scalarize them into
//!   registers (no local-memory spills by construction).
//! - Shared arrays are [`Local`]s in [`Space::Shared`]; their sizes are known
//!   after specialization and backends lay them out in one dynamic block.
//! - Warp-level Tensor Core operations ([`MatrixOp`]) and asynchronous copies
//!   ([`Stmt::AsyncCopy`]) are statements over [`Fragment`]s (rows of register
//!   arrays) and places, so that fragments stay in registers like any other
//!   register array.

use serde::{Deserialize, Serialize};

/// Index of a [`Param`] in [`Kernel::params`].
pub type ParamId = u32;
/// Index of a [`ConstParam`] in [`Kernel::const_params`].
pub type ConstId = u32;
/// Index of a [`Local`] in [`Kernel::locals`].
pub type LocalId = u32;

/// Scalar element types of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scalar {
    /// `bool`: 1 byte in memory; it casts to integers only.
    Bool,
    /// `i8`.
    I8,
    /// `u8`.
    U8,
    /// `i32`.
    I32,
    /// `u32`: the type of indices, lengths and shift amounts.
    U32,
    /// `i64` (PTX only).
    I64,
    /// `u64` (PTX only).
    U64,
    /// `f16` (IEEE binary16; the host type is `half::f16`).
    F16,
    /// `bf16` (bfloat16; the host type is `half::bf16`; PTX only).
    Bf16,
    /// `f32`: the type of unsuffixed float literals.
    F32,
    /// `f64` (PTX only).
    F64,
    /// `e4m3`: 8-bit float, 4 exponent and 3 mantissa bits, no infinities
    /// (the host type is `float8::F8E4M3`; PTX only). A storage type:
    /// kernels move it and multiply it with `wgmma`, nothing else.
    E4m3,
    /// `e5m2`: 8-bit float, 5 exponent and 2 mantissa bits (the host type is
    /// `float8::F8E5M2`; PTX only). A storage type, as `e4m3`.
    E5m2,
}

impl Scalar {
    /// Every scalar type, in declaration order.
    pub const ALL: [Scalar; 13] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::U8,
        Scalar::I32,
        Scalar::U32,
        Scalar::I64,
        Scalar::U64,
        Scalar::F16,
        Scalar::Bf16,
        Scalar::F32,
        Scalar::F64,
        Scalar::E4m3,
        Scalar::E5m2,
    ];

    /// The DSL (Rust) spelling of the type.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::U8 => "u8",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::E4m3 => "e4m3",
            Scalar::E5m2 => "e5m2",
        }
    }

    /// The type the DSL spells `name` (`"f16"`), if any.
    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Size in memory (global or shared), in bytes. `bool` is stored as one byte.
    pub fn size_bytes(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 | Scalar::E4m3 | Scalar::E5m2 => 1,
            Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// Whether this is `f16`, `bf16`, `f32` or `f64`: a float kernels
    /// compute with (the 8-bit floats are not).
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16 | Scalar::F32 | Scalar::F64)
    }

    /// Whether this is a storage type (`e4m3`, `e5m2`): kernels load, store
    /// and copy it and hand it to `wgmma`, but compute nothing with it.
    pub fn is_storage_only(self) -> bool {
        matches!(self, Scalar::E4m3 | Scalar::E5m2)
    }

    /// Whether this is an integer type (`bool` is not).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            Scalar::I8 | Scalar::U8 | Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64
        )
    }

    /// Whether negation applies: the signed integers and the floats.
    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I32 | Scalar::I64) || self.is_float()
    }
}

/// A CUDA architecture that a PTX variant targets.
///
/// `Sm90a` is Hopper's arch-specific target: everything `Sm90` has, plus
/// the instructions only compute capability 9.0 runs (wgmma, setmaxnreg).
/// Its PTX loads on 9.0 devices only, never on a later architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Arch {
    /// Volta: `wmma`, no `cp.async` (async copies are register-staged).
    Sm70,
    /// Ampere: `mma.sync` m16n8 shapes, `ldmatrix`, `cp.async`, `mma.sp`.
    Sm80,
    /// Hopper, portable form: what sm_80 has, plus mbarriers and TMA.
    Sm90,
    /// Hopper's arch-specific form: sm_90 plus `wgmma` and `setmaxnreg`.
    Sm90a,
}

impl Arch {
    /// Every arch, lowest first.
    pub const ALL: [Arch; 4] = [Arch::Sm70, Arch::Sm80, Arch::Sm90, Arch::Sm90a];

    /// `sm_70`, `sm_80`, `sm_90`, `sm_90a`: the spelling of PTX `.target` and of the DSL.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm70 => "sm_70",
            Arch::Sm80 => "sm_80",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// The arch named `name` (`"sm_80"`), if any.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Compute capability as (major, minor).
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm70 => (7, 0),
            Arch::Sm80 => (8, 0),
            Arch::Sm90 | Arch::Sm90a => (9, 0),
        }
    }

    /// Whether this is an arch-specific target (`sm_90a`), whose code runs
    /// only on its own compute capability.
    pub fn is_arch_specific(self) -> bool {
        self == Arch::Sm90a
    }

    /// Whether code built for this arch runs on a device of compute
    /// capability `device`: the same or a higher one (the driver compiles
    /// PTX forward), and exactly its own for an arch-specific target.
    pub fn runs_on(self, device: (u32, u32)) -> bool {
        if self.is_arch_specific() {
            self.compute_capability() == device
        } else {
            self.compute_capability() <= device
        }
    }
}

/// A whole kernel: signature, declarations and body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// The kernel's name: the PTX `.entry`'s, and the one messages quote.
    pub name: String,
    /// Compile-time parameters (`const BM: u32`), in declaration order.
    pub const_params: Vec<ConstParam>,
    /// Run-time parameters, in declaration order.
    pub params: Vec<Param>,
    /// Every variable of the body, loop variables and arrays included.
    pub locals: Vec<Local>,
    /// The block shape the kernel is written for, if it declares one
    /// (`#[kernel(block(..))]`). Constant expressions over const params.
    pub block: Option<[Expr; 3]>,
    /// The blocks of a thread block cluster (sm_90), if the kernel declares
    /// one (`#[kernel(cluster(..))]`): constant expressions over const
    /// params. The blocks of a cluster run at once on one GPC and reach
    /// each other's shared memory; the grid is a whole number of clusters.
    pub cluster: Option<[Expr; 3]>,
    /// The blocks of this kernel an SM must be able to hold at once, if the
    /// kernel asks (`#[kernel(min_blocks_per_sm(..))]`): a constant
    /// expression over const params. ptxas then keeps the registers per
    /// thread within what that many blocks leave (CUDA's
    /// `__launch_bounds__` minimum). Absent from the JSON when absent, so
    /// that the definitions and digests of kernels without it stay as they
    /// were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_blocks_per_sm: Option<Expr>,
    /// Host-side preconditions checked by the launcher before every launch.
    pub requires: Vec<Requirement>,
    /// The statements of the kernel's body.
    pub body: Block,
}

/// A compile-time parameter. Its value is an integer of type `ty` (or a bool).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstParam {
    /// The name as written (`BM`).
    pub name: String,
    /// `u32`, `i32` or `bool`.
    pub ty: Scalar,
}

/// A run-time parameter of the kernel: a scalar or a global-memory slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// The name as written.
    pub name: String,
    /// Its type, which fixes the launcher's argument type.
    pub ty: ParamType,
    /// `#[tensor_map(..)]` on a slice: the launcher also passes a TMA
    /// tensor map over the slice (sm_90), which [`TmaOp`]s name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_map: Option<TensorMap>,
}

/// How the launcher views a slice parameter as a tensor for the TMA: the
/// tensor's shape and the strides of its outer dimensions (in elements,
/// the innermost dimension dense), and the tile one copy moves. All lists
/// are outermost first (as Rust's array types); the backends and the
/// driver take them innermost first. `shape` and `strides` are `u32`
/// expressions over literals, const params and scalar parameters,
/// evaluated at each launch; `tile` is over literals and const params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorMap {
    /// The tensor's extent in each dimension, outermost first.
    pub shape: Vec<Expr>,
    /// One per dimension but the innermost: `strides[i]` steps dimension `i`.
    pub strides: Vec<Expr>,
    /// The extent of the tile one copy moves, per dimension, outermost first.
    pub tile: Vec<Expr>,
    /// How a copy lays each tile row out in shared memory: the row is the
    /// innermost tile dimension, at most the pattern's span when swizzled.
    pub swizzle: Swizzle,
}

/// The type of a run-time parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamType {
    /// A value passed by copy.
    Scalar(Scalar),
    /// A global-memory slice (`&[T]` or `&mut [T]`). Backends pass a pointer
    /// and the length in elements (a `u32`, read by [`ExprKind::Len`]).
    Slice {
        /// The element type.
        elem: Scalar,
        /// `&mut [T]` (the kernel may write it) rather than `&[T]`.
        mutable: bool,
    },
}

/// Where a local lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Space {
    /// Per-thread: a register, or a register array when `dims` is non-empty.
    Register,
    /// Per-block shared memory (always an array).
    Shared,
}

/// A variable of the body: a scalar, a register array or a shared array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Local {
    /// The name as written (for messages and the IR printer).
    pub name: String,
    /// The scalar type (of each element, for arrays).
    pub ty: Scalar,
    /// Registers or shared memory.
    pub space: Space,
    /// Array dimensions, outermost first; empty for a scalar. Constant
    /// expressions over const params (literals after specialization).
    pub dims: Vec<Expr>,
    /// Whether the body may assign it (`let mut`).
    pub mutable: bool,
}

/// A host-side precondition, e.g. `a.len() >= m * k`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Requirement {
    /// A `bool` expression over scalar params, slice lengths and const params.
    pub cond: Expr,
    /// The source text, quoted in the launcher's error.
    pub text: String,
}

/// A sequence of statements, run in order.
pub type Block = Vec<Stmt>;

/// A statement of the body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// Brings `local` into scope. Scalars take `init`; register arrays take
    /// `init` as a splat value for every element (or stay undefined with
    /// `None`); shared arrays never have `init`.
    Let {
        /// The local brought into scope.
        local: LocalId,
        /// Its initial value (see above).
        init: Option<Expr>,
    },
    /// `place = value`.
    Assign {
        /// Where the value goes.
        place: Place,
        /// An expression of the place's type.
        value: Expr,
    },
    /// `if cond { then_body } else { else_body }`.
    If {
        /// A `bool` expression.
        cond: Expr,
        /// Run when `cond` is true.
        then_body: Block,
        /// Run when it is false (empty without an `else`).
        else_body: Block,
    },
    /// `for var in (start..end).step_by(step)`: `var` takes `start`, `start + step`, ...
    /// while `var < end`. `start`, `end` and `step` have the type of `var`
    /// (an integer); `step` is positive. `end` is evaluated once, before the loop.
    For {
        /// The loop variable (read-only in the body).
        var: LocalId,
        /// The first value of `var`.
        start: Expr,
        /// The bound `var` stays below (exclusive).
        end: Expr,
        /// The increment, positive.
        step: Expr,
        /// `#[unroll]`: specialization unrolls the loop, whose bounds and step are then constants.
        unroll: bool,
        /// The statements run per iteration.
        body: Block,
    },
    /// `while cond { body }` (and `loop { }`, with a literal `true`).
    While {
        /// A `bool` expression, evaluated before every iteration.
        cond: Expr,
        /// The statements run per iteration.
        body: Block,
    },
    /// Leaves the innermost loop.
    Break,
    /// Goes to the next iteration of the innermost loop.
    Continue,
    /// Ends the thread's run of the kernel.
    Return,
    /// `sync_threads()`: a block-wide barrier that also orders shared and
    /// global memory accesses among the block's threads.
    Barrier,
    /// `cluster_sync()` (sm_90): a barrier over every thread of every block
    /// of the cluster (`barrier.cluster.arrive` then `.wait`, release and
    /// acquire at cluster scope). Every thread of the cluster must reach it
    /// (not necessarily with its warp converged).
    ClusterBarrier,
    /// `fence_gpu()`: a memory fence at GPU scope with acquire-release
    /// semantics (`fence.acq_rel.gpu`; CUDA C++ uses `__threadfence()`
    /// here). The atomics are relaxed, so this is how blocks hand global
    /// memory to one another: a thread's writes, the fence, then an atomic
    /// that signals (release); an atomic that sees the signal, the fence,
    /// then the reads (acquire).
    GpuFence,
    /// An expression evaluated for its effect (an atomic whose old value is unused).
    Expr(Expr),
    /// A warp-collective matrix operation. All 32 lanes of the warp execute
    /// it together: it must be reached by warp-uniform control flow.
    Matrix(MatrixOp),
    /// Starts an asynchronous copy of `bytes` bytes from global memory to
    /// shared memory (`cp.async` on sm_80+, a synchronous load and store on
    /// sm_70). Only the first `src_bytes` bytes are read; the rest of the
    /// destination is filled with zeros, so ragged tiles need no branches.
    /// The copy belongs to the next group closed by [`Stmt::AsyncCommit`].
    AsyncCopy {
        /// The first element of the destination, in a shared array.
        dst: Place,
        /// The first element of the source, in a slice.
        src: Place,
        /// 4, 8 or 16; both addresses are multiples of it.
        bytes: u32,
        /// A `u32` in `0..=bytes`.
        src_bytes: Expr,
    },
    /// Closes the group of the copies started since the previous commit.
    AsyncCommit,
    /// Waits until at most `pending` of this thread's committed groups are
    /// still in flight. Other threads see the data only after a barrier.
    AsyncWait {
        /// A `u32` constant expression (a literal after specialization).
        pending: Expr,
    },
    /// An operation of this thread on an mbarrier (sm_90).
    Mbarrier(MbarrierOp),
    /// `fence.proxy.async.shared::cta`: orders this thread's earlier
    /// ordinary shared-memory accesses before later ones of the async
    /// proxy (wgmma operand reads, TMA), once a barrier has handed them over.
    ProxyFence,
    /// A warpgroup-collective operation (sm_90a `wgmma`): the 128 threads
    /// of a warpgroup (4 consecutive warps, the first a multiple of 4)
    /// execute it together, so it must be reached by warpgroup-uniform
    /// control flow.
    Warpgroup(WarpgroupOp),
    /// A TMA bulk tensor copy between shared memory and a tensor-mapped
    /// slice (sm_90), issued by the one thread that executes it.
    Tma(TmaOp),
    /// `setmaxnreg` (sm_90a): the warpgroup executing it, together, gives
    /// registers back to the block's pool (`grow == false`) or takes them
    /// from it, so that each of its threads has `count` (a `u32` constant
    /// expression, in 24..=256 and a multiple of 8 after specialization).
    SetMaxRegisters {
        /// `setmaxnreg.inc` (take registers) when true, `setmaxnreg.dec` (give them back) when false.
        grow: bool,
        /// The registers per thread after the statement.
        count: Expr,
    },
}

/// The TMA copies. A tile is the tensor map's `tile` of elements, which
/// shared memory holds row-major (the innermost tile dimension a row)
/// from `smem`, an element of a shared array of the slice's type whose
/// trailing indices are zero and whose trailing dimensions hold exactly the
/// tile; `coords` (32-bit integers, outermost first, one per dimension) is
/// the tensor element at the tile's origin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TmaOp {
    /// Global to shared: elements outside the tensor read as zero, the
    /// whole tile's bytes complete on the mbarrier `bar` (a transaction the
    /// phase must expect: [`MbarrierOp::ArriveExpectTx`]).
    Load {
        /// The tile's first element in shared memory.
        smem: Place,
        /// The tensor-mapped slice parameter to copy from.
        map: ParamId,
        /// The tensor coordinates of the tile's first element, outermost first.
        coords: Vec<Expr>,
        /// The mbarrier on which the copy's bytes complete.
        bar: Place,
        /// `tma_load_multicast` (sm_90, in a cluster): a `u32` whose bit `i`
        /// sends the tile to the block of cluster rank `i` too, to the same
        /// shared-memory place, its bytes completing on the same mbarrier
        /// place of that block (bits 0-15; this block's own bit, when set,
        /// is its copy).
        multicast: Option<Expr>,
    },
    /// Shared to global: rows and outer dimensions outside the tensor are
    /// not written, but along the innermost dimension the copy writes whole
    /// 16-byte chunks: past the tensor's edge, the rest of a row's last
    /// chunk gets the tile's values (measured on the H200). The copy joins
    /// this thread's open bulk group ([`TmaOp::Commit`]).
    Store {
        /// The tile's first element in shared memory.
        smem: Place,
        /// The tensor-mapped slice parameter to copy to.
        map: ParamId,
        /// The tensor coordinates of the tile's first element, outermost first.
        coords: Vec<Expr>,
    },
    /// Closes this thread's group of stores issued since the previous one.
    Commit,
    /// Waits until at most `pending` (a `u32` constant expression) of this
    /// thread's store groups still read their shared memory, which may be
    /// written again after it.
    WaitRead {
        /// The store groups that may still read shared memory after the wait.
        pending: Expr,
    },
    /// Waits until at most `pending` of them are still writing global memory.
    Wait {
        /// The store groups that may still write global memory after the wait.
        pending: Expr,
    },
}

/// An mbarrier is an element of a `u64` shared array: a phase counter, the
/// arrivals still expected in the current phase, the count they re-arm to
/// and a transaction count of bytes still expected. A phase completes when
/// both its arrivals and its transaction bytes reach zero; the phase then
/// flips and the arrival count re-arms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MbarrierOp {
    /// Sets the mbarrier to phase 0 expecting `count` arrivals (a `u32` in
    /// 1..2^20). One thread initializes; other threads use it only after
    /// [`MbarrierOp::InitFence`] and a barrier.
    Init {
        /// The mbarrier: an element of a `u64` shared array.
        bar: Place,
        /// The arrivals each phase expects.
        count: Expr,
    },
    /// One arrival of this thread (release semantics at CTA scope).
    Arrive {
        /// The mbarrier: an element of a `u64` shared array.
        bar: Place,
    },
    /// One arrival of this thread on the mbarrier at `bar`'s place in the
    /// shared memory of the cluster's block of rank `rank` (a `u32`; this
    /// block's own rank arrives locally), with release semantics at
    /// cluster scope: how a consumer hands a stage back to every block
    /// whose copies write into it.
    ArriveCluster {
        /// The mbarrier: an element of a `u64` shared array.
        bar: Place,
        /// The rank in the cluster of the block whose mbarrier it is.
        rank: Expr,
    },
    /// One arrival that also expects `bytes` (a `u32`) more transaction
    /// bytes in the current phase, which asynchronous copies complete.
    ArriveExpectTx {
        /// The mbarrier: an element of a `u64` shared array.
        bar: Place,
        /// The transaction bytes the phase also expects.
        bytes: Expr,
    },
    /// Blocks until the phase of parity `parity` (a `u32`, 0 or 1) has
    /// completed (acquire semantics at CTA scope): `try_wait.parity` in a
    /// loop. The phase before the current one counts as completed.
    Wait {
        /// The mbarrier: an element of a `u64` shared array.
        bar: Place,
        /// The parity of the phase waited for.
        parity: Expr,
    },
    /// `fence.mbarrier_init.release.cluster`: makes this thread's earlier
    /// inits visible to the async proxy and to the threads that synchronize
    /// with it afterwards.
    InitFence,
}

/// The input type of a [`Wgmma`], which fixes its k, its accumulator type
/// and its legal N. One instruction reads 32 bytes of k of each row: k16
/// for the 16-bit types, k8 for tf32 (`f32` tiles whose low 13 bits the
/// hardware ignores), k32 for the 8-bit ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WgmmaKind {
    /// f16 inputs, f32 accumulators, k16.
    F16,
    /// bf16 inputs, f32 accumulators, k16.
    Bf16,
    /// tf32 inputs (`f32` tiles), f32 accumulators, k8.
    Tf32,
    /// s8 inputs, s32 accumulators, k32.
    S8,
    /// u8 inputs, s32 accumulators, k32.
    U8,
    /// fp8 e4m3 inputs, f32 accumulators, k32.
    E4m3,
    /// fp8 e5m2 inputs, f32 accumulators, k32.
    E5m2,
}

impl WgmmaKind {
    /// Every kind, in declaration order.
    pub const ALL: [WgmmaKind; 7] = [
        WgmmaKind::F16,
        WgmmaKind::Bf16,
        WgmmaKind::Tf32,
        WgmmaKind::S8,
        WgmmaKind::U8,
        WgmmaKind::E4m3,
        WgmmaKind::E5m2,
    ];

    /// The DSL function: `wgmma_m64k16_f16`, `wgmma_m64k8_tf32`,
    /// `wgmma_m64k32_s8`, `wgmma_m64k32_e4m3`, ..
    pub fn function(self) -> &'static str {
        match self {
            WgmmaKind::F16 => "wgmma_m64k16_f16",
            WgmmaKind::Bf16 => "wgmma_m64k16_bf16",
            WgmmaKind::Tf32 => "wgmma_m64k8_tf32",
            WgmmaKind::S8 => "wgmma_m64k32_s8",
            WgmmaKind::U8 => "wgmma_m64k32_u8",
            WgmmaKind::E4m3 => "wgmma_m64k32_e4m3",
            WgmmaKind::E5m2 => "wgmma_m64k32_e5m2",
        }
    }

    /// The generic function of every element type that has a generic form,
    /// `wgmma_m64::<T, N>`: the k of one instruction is 32 bytes of `T`
    /// (k16 for f16/bf16, k8 for tf32 on `f32`, k32 for i8/u8/e4m3/e5m2).
    pub const ANY_TYPE_FUNCTION: &'static str = "wgmma_m64";

    /// The generic function whose element type picks this form
    /// (`wgmma_m64k16::<T, N>`, `wgmma_m64k8::<f32, N>`,
    /// `wgmma_m64k32::<i8, N>`, `wgmma_m64k32::<e4m3, N>`).
    pub fn generic_function(self) -> &'static str {
        match self {
            WgmmaKind::F16 | WgmmaKind::Bf16 => "wgmma_m64k16",
            WgmmaKind::Tf32 => "wgmma_m64k8",
            WgmmaKind::S8 | WgmmaKind::U8 | WgmmaKind::E4m3 | WgmmaKind::E5m2 => "wgmma_m64k32",
        }
    }

    /// The element type of the shared tiles of A and B.
    pub fn element(self) -> Scalar {
        match self {
            WgmmaKind::F16 => Scalar::F16,
            WgmmaKind::Bf16 => Scalar::Bf16,
            WgmmaKind::Tf32 => Scalar::F32,
            WgmmaKind::S8 => Scalar::I8,
            WgmmaKind::U8 => Scalar::U8,
            WgmmaKind::E4m3 => Scalar::E4m3,
            WgmmaKind::E5m2 => Scalar::E5m2,
        }
    }

    /// The type of the accumulators: `i32` for the integer forms, else `f32`.
    pub fn accumulator(self) -> Scalar {
        match self {
            WgmmaKind::S8 | WgmmaKind::U8 => Scalar::I32,
            _ => Scalar::F32,
        }
    }

    /// The type of A and B as PTX names it.
    pub fn ptx_type(self) -> &'static str {
        match self {
            WgmmaKind::F16 => "f16",
            WgmmaKind::Bf16 => "bf16",
            WgmmaKind::Tf32 => "tf32",
            WgmmaKind::S8 => "s8",
            WgmmaKind::U8 => "u8",
            WgmmaKind::E4m3 => "e4m3",
            WgmmaKind::E5m2 => "e5m2",
        }
    }

    /// The k of one instruction, in elements: 32 bytes of each row.
    pub fn k(self) -> u32 {
        32 / self.element().size_bytes()
    }

    /// Whether `n` is a legal N: 8 to 256 in steps of 8, except that the
    /// integer forms take 8, 16, 24, then 32 to 256 in steps of 16.
    pub fn legal_n(self, n: i64) -> bool {
        let steps_of_8 = (8..=256).contains(&n) && n % 8 == 0;
        match self.accumulator() {
            Scalar::I32 => steps_of_8 && (n <= 24 || n % 16 == 0),
            _ => steps_of_8,
        }
    }

    /// The legal N, in words.
    pub fn n_rule(self) -> &'static str {
        match self.accumulator() {
            Scalar::I32 => "8, 16, 24, then 32 to 256 in steps of 16",
            _ => "8 to 256 in steps of 8",
        }
    }
}

/// How the rows of a shared operand tile are swizzled, as the wgmma
/// descriptor declares it: the 16-byte chunks of each row of `bytes()`
/// bytes are XOR-permuted by the row's position in its 8-row group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Swizzle {
    /// No swizzle: the tile is made of 8-row x 16-byte core matrices.
    None,
    /// The 32-byte pattern: rows of 32 bytes.
    B32,
    /// The 64-byte pattern: rows of 64 bytes.
    B64,
    /// The 128-byte pattern: rows of 128 bytes.
    B128,
}

impl Swizzle {
    /// Every swizzle, in declaration order.
    pub const ALL: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

    /// The span of the pattern in bytes, as the DSL writes it: 0 (none),
    /// 32, 64 or 128.
    pub fn bytes(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The swizzle the DSL writes as `bytes` (0, 32, 64 or 128), if any.
    pub fn from_bytes(bytes: i64) -> Option<Swizzle> {
        Swizzle::ALL.into_iter().find(|s| s.bytes() as i64 == bytes)
    }

    /// The alignment a tile with this swizzle needs, in bytes: the pattern
    /// repeats every 8 rows and starts on that boundary (16 without one).
    pub fn alignment(self) -> u32 {
        match self {
            Swizzle::None => 16,
            s => 8 * s.bytes(),
        }
    }
}

/// A K-major operand of a [`Wgmma`] in shared memory, from which the
/// backend builds the 64-bit matrix descriptor. The tile is a shared array
/// whose innermost dimension is one row of k: `swizzle.bytes()` bytes when
/// swizzled, 16 bytes (8 16-bit, 4 `f32` or 16 8-bit elements) without a
/// swizzle, where the dimension outside the rows steps k by those 16 bytes.
/// `start` is the
/// operand's first element (row 0, k 0 of this instruction).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixDescriptor {
    /// The operand's first element, in a shared array.
    pub start: Place,
    /// The layout of the tile's rows, which the descriptor declares.
    pub swizzle: Swizzle,
}

/// `d = a b (+ d)`: one `wgmma.mma_async` m64nNk (k = [`WgmmaKind::k`])
/// with A (64 x k) and B (N x k) read from shared memory, both K-major, and
/// the accumulators of [`WgmmaKind::accumulator`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wgmma {
    /// The input type, which fixes k and the accumulator type.
    pub kind: WgmmaKind,
    /// N: a `u32` constant expression, [`WgmmaKind::legal_n`] after
    /// specialization.
    pub n: Expr,
    /// N / 2 accumulators per thread: element `4j + 2h + i` of thread `t` (warp
    /// `w = t / 32`, lane `l`) is D[16w + l / 4 + 8h][8j + 2 (l % 4) + i].
    pub acc: Fragment,
    /// A: 64 rows of k, in shared memory.
    pub a: MatrixDescriptor,
    /// B: N rows of k, in shared memory.
    pub b: MatrixDescriptor,
    /// A `bool`: add to the accumulators (`true`) or overwrite them.
    pub accumulate: Expr,
}

/// Warpgroup-collective operations (see [`Stmt::Warpgroup`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WarpgroupOp {
    /// `wgmma.fence`: orders earlier register accesses to accumulators
    /// before the wgmmas that follow; needed before the first wgmma and
    /// after the accumulators are touched by ordinary code.
    Fence,
    /// `wgmma.commit_group`: closes the group of the wgmmas issued since
    /// the previous commit.
    Commit,
    /// `wgmma.wait_group`: waits until at most `pending` (a `u32` constant)
    /// of the committed groups are in flight. Accumulators of a group are
    /// read only after a wait covers it.
    Wait {
        /// The groups that may still be in flight after the wait.
        pending: Expr,
    },
    /// `wgmma.mma_async`: one asynchronous warpgroup MMA.
    Mma(Wgmma),
}

/// A fragment: the innermost row of a register array, `local[indices..]`
/// with one index fewer than the array has dimensions (all of the array when
/// it has one dimension). The elements are consecutive registers as the
/// instruction sees them: packed 32-bit words (`u32`) for A and B operands,
/// `f32` or `i32` for accumulators.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// The register array.
    pub local: LocalId,
    /// Indices over all its dimensions but the innermost, constants after specialization.
    pub indices: Vec<Expr>,
}

/// The Tensor Core instruction family of an [`MatrixOp::Mma`]: the element
/// type of A and B decides the shape (the sm_80 `mma.sync` shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MmaKind {
    /// m16n8k16, f16 inputs, f32 accumulators.
    F16,
    /// m16n8k16, bf16 inputs, f32 accumulators.
    Bf16,
    /// m16n8k8, tf32 inputs, f32 accumulators.
    Tf32,
    /// m16n8k32, s8 inputs, s32 accumulators.
    S8,
    /// m16n8k32, u8 inputs, s32 accumulators.
    U8,
}

impl MmaKind {
    /// Every kind, in declaration order.
    pub const ALL: [MmaKind; 5] = [
        MmaKind::F16,
        MmaKind::Bf16,
        MmaKind::Tf32,
        MmaKind::S8,
        MmaKind::U8,
    ];

    /// The DSL function: `mma_m16n8k16_f16`, ...
    pub fn function(self) -> &'static str {
        match self {
            MmaKind::F16 => "mma_m16n8k16_f16",
            MmaKind::Bf16 => "mma_m16n8k16_bf16",
            MmaKind::Tf32 => "mma_m16n8k8_tf32",
            MmaKind::S8 => "mma_m16n8k32_s8",
            MmaKind::U8 => "mma_m16n8k32_u8",
        }
    }

    /// (m, n, k).
    pub fn shape(self) -> (u32, u32, u32) {
        match self {
            MmaKind::F16 | MmaKind::Bf16 => (16, 8, 16),
            MmaKind::Tf32 => (16, 8, 8),
            MmaKind::S8 | MmaKind::U8 => (16, 8, 32),
        }
    }

    /// The accumulator element type.
    pub fn accumulator(self) -> Scalar {
        match self {
            MmaKind::S8 | MmaKind::U8 => Scalar::I32,
            _ => Scalar::F32,
        }
    }

    /// 32-bit registers per lane of A, B and the accumulator.
    pub fn registers(self) -> (u32, u32, u32) {
        (4, 2, 4)
    }

    /// The form over 32 bytes of k of element type `elem` (f32 elements are
    /// rounded to tf32), as `mma_m16n8::<T>` chooses it; every form has the
    /// same registers.
    pub fn for_element(elem: Scalar) -> Option<MmaKind> {
        Some(match elem {
            Scalar::F16 => MmaKind::F16,
            Scalar::Bf16 => MmaKind::Bf16,
            Scalar::F32 => MmaKind::Tf32,
            Scalar::I8 => MmaKind::S8,
            Scalar::U8 => MmaKind::U8,
            _ => return None,
        })
    }
}

/// The element type of a sparse [`MatrixOp::MmaSparse`]: `mma.sp`
/// m16n8k32 with f32 accumulators (sm_80).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SparseMmaKind {
    /// f16 inputs.
    F16,
    /// bf16 inputs.
    Bf16,
}

impl SparseMmaKind {
    /// Every kind, in declaration order.
    pub const ALL: [SparseMmaKind; 2] = [SparseMmaKind::F16, SparseMmaKind::Bf16];

    /// The DSL function: `mma_sp_m16n8k32_f16`, or with `ordered`
    /// `mma_sp_ordered_m16n8k32_f16`, ...
    pub fn function(self, ordered: bool) -> String {
        let ty = match self {
            SparseMmaKind::F16 => "f16",
            SparseMmaKind::Bf16 => "bf16",
        };
        let form = if ordered { "_ordered" } else { "" };
        format!("mma_sp{form}_m16n8k32_{ty}")
    }

    /// 32-bit registers per lane of A (the compressed 16 x 16 tile), B
    /// (32 x 8) and the accumulator (16 x 8).
    pub fn registers(self) -> (u32, u32, u32) {
        (4, 4, 4)
    }
}

/// The operands of a Volta `wmma` m16n16k16 f16 operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WmmaOperand {
    /// The 16 x 16 f16 A operand.
    A,
    /// The 16 x 16 f16 B operand.
    B,
    /// The f32 accumulator.
    C,
}

/// How a matrix is laid out in memory for `wmma` loads and stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatrixLayout {
    /// Rows are contiguous; the stride is the distance between rows.
    Row,
    /// Columns are contiguous; the stride is the distance between columns.
    Col,
}

/// Warp-collective matrix operations (see [`Stmt::Matrix`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MatrixOp {
    /// `ldmatrix`: loads `count` (1, 2 or 4) 8x8 matrices of 16-bit elements
    /// from a shared array. Lane `l` gives the address of row `l % 8` of
    /// matrix `l / 8` (16 contiguous bytes, 16-byte aligned); register `j`
    /// of `dst` (a `u32` fragment of `count` words) receives this lane's two
    /// elements of matrix `j`: row `lane / 4`, columns `2 (lane % 4)` and
    /// `+ 1` (transposed: the same with rows and columns swapped), the lower
    /// column in the low half.
    LoadMatrix {
        /// The number of 8x8 matrices: 1, 2 or 4.
        count: u32,
        /// `.trans`: each matrix transposed as it is loaded.
        transpose: bool,
        /// The `u32` fragment of `count` words that receives them.
        dst: Fragment,
        /// This lane's row: an element of a shared array of a 16- or 8-bit type.
        src: Place,
    },
    /// `acc = a b + acc` on the Tensor Cores (sm_80 `mma.sync`, A row-major,
    /// B column-major), fragments as [`MmaKind::registers`] says.
    Mma {
        /// The instruction shape and element types.
        kind: MmaKind,
        /// The accumulators, read and written.
        acc: Fragment,
        /// The A operand words.
        a: Fragment,
        /// The B operand words.
        b: Fragment,
    },
    /// `acc = a b + acc` with A 2:4 sparse on the Tensor Cores (sm_80 `mma.sp`
    /// m16n8k32, A row-major, B column-major, f32 accumulators). `a` holds
    /// the compressed 16 x 16 tile of A (the kept values, two per group of
    /// four along k) in the dense m16n8k16 A layout, `b` the 32 x 8 tile of B
    /// (register `i` = rows `2t + 8i`, `+ 1` of column `g`), `acc` the dense
    /// accumulator layout (docs/ptx.md, "Sparse mma.sp"). `metadata` is this lane's `u32`
    /// word of 2-bit kept positions: lanes `t = 2 selector` and `+ 1` of each
    /// quad supply it, row `g` in bits 0..16 and row `g + 8` above, columns
    /// 0..16 (even `t`) or 16..32 (odd `t`), one nibble per group, lower
    /// position in the low two bits.
    MmaSparse {
        /// The element type of A and B.
        kind: SparseMmaKind,
        /// `mma.sp::ordered_metadata` (PTX 8.5) instead of `mma.sp` (PTX 7.1):
        /// the same results for the sorted metadata every 2:4 compressor
        /// emits; which is faster depends on the GPU.
        ordered: bool,
        /// The accumulators, read and written.
        acc: Fragment,
        /// The compressed A tile.
        a: Fragment,
        /// The B tile.
        b: Fragment,
        /// A `u32`.
        metadata: Expr,
        /// A `u32` constant expression: 0 or 1 after specialization.
        selector: Expr,
    },
    /// `wmma.load`: a warp loads a 16x16 f16 operand (8 `u32` words per
    /// lane) or f32 accumulator (8 `f32`) from shared or global memory.
    /// Which elements a lane holds is unspecified: fragments of `wmma` only
    /// meet `wmma` operations and element-wise accumulator arithmetic.
    WmmaLoad {
        /// Which operand the fragment is.
        operand: WmmaOperand,
        /// How the matrix is laid out in memory.
        layout: MatrixLayout,
        /// The fragment that receives this lane's elements.
        dst: Fragment,
        /// The matrix's first element (the same for every lane).
        src: Place,
        /// Elements between rows (`Row`) or columns (`Col`): a `u32`.
        stride: Expr,
    },
    /// `wmma.mma` m16n16k16: `acc = a b + acc`, f16 inputs, f32 accumulators.
    Wmma {
        /// The layout A was loaded with.
        a_layout: MatrixLayout,
        /// The layout B was loaded with.
        b_layout: MatrixLayout,
        /// The f32 accumulators, read and written.
        acc: Fragment,
        /// The A fragment.
        a: Fragment,
        /// The B fragment.
        b: Fragment,
    },
    /// `wmma.store`: writes a 16x16 f32 accumulator to shared or global memory.
    WmmaStore {
        /// How the matrix is laid out in memory.
        layout: MatrixLayout,
        /// The matrix's first element (an `f32` place).
        dst: Place,
        /// The accumulator fragment to store.
        src: Fragment,
        /// Elements between rows (`Row`) or columns (`Col`): a `u32`.
        stride: Expr,
    },
}

/// A memory location that can be read, written or updated atomically.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Place {
    /// A scalar local, or one element of a register or shared array
    /// (`indices.len() == dims.len()`).
    Local {
        /// The local.
        local: LocalId,
        /// One index per array dimension, outermost first; none for a scalar.
        indices: Vec<Expr>,
    },
    /// One element of a slice parameter.
    Global {
        /// The slice parameter.
        param: ParamId,
        /// The element's index, of any integer type.
        index: Expr,
    },
}

impl Place {
    /// The index expressions of the place.
    pub fn indices(&self) -> Vec<&Expr> {
        match self {
            Place::Local { indices, .. } => indices.iter().collect(),
            Place::Global { index, .. } => vec![index],
        }
    }
}

/// A typed expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    /// The type of the value: backends never infer it.
    pub ty: Scalar,
    /// What the expression computes.
    pub kind: ExprKind,
}

/// The forms of an [`Expr`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    /// A constant.
    Literal(Literal),
    /// The value of a scalar parameter.
    Param(ParamId),
    /// The value of a compile-time parameter (gone after specialization).
    Const(ConstId),
    /// The length in elements of a slice parameter, as `u32`.
    Len(ParamId),
    /// A read of a place.
    Load(Box<Place>),
    /// `op operand`, of the operand's type.
    Unary(UnaryOp, Box<Expr>),
    /// `lhs op rhs`: operands of one type (shift amounts `u32`); see [`Expr::binary`] for the result type.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// Numeric conversion with Rust `as` semantics (float to int saturates,
    /// float to narrower float rounds to nearest even).
    Cast(Box<Expr>),
    /// `cond ? a : b` with both operands evaluated (the front only builds this
    /// from operands without side effects or memory reads).
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A hardware index (`thread_idx().x`, ...).
    Special(Special),
    /// A math or warp intrinsic applied to its arguments.
    Call(Intrinsic, Vec<Expr>),
    /// Atomic read-modify-write of a global or shared place; yields the old value.
    Atomic {
        /// The read-modify-write operation.
        op: AtomicOp,
        /// The element updated: of a `&mut` slice or a shared array.
        place: Box<Place>,
        /// The operand (the new value, for exchanges).
        value: Box<Expr>,
        /// The expected old value, for [`AtomicOp::CompareExchange`] only.
        compare: Option<Box<Expr>>,
    },
}

/// A literal value. Integers hold the value's bits zero- or sign-extended to 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Literal {
    /// `true` or `false`.
    Bool(bool),
    /// An integer of any integer type, as 64 bits.
    Int(i64),
    /// Serialized as its bits: JSON has no infinities or NaNs.
    Float(#[serde(with = "float_bits")] f64),
}

mod float_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Arithmetic negation (signed integers and floats).
    Neg,
    /// Logical not on `bool`, bitwise not on integers.
    Not,
}

/// Binary operators, with Rust's semantics (integer arithmetic wraps, shift
/// amounts are taken modulo the width, as in release builds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`: truncating for integers.
    Div,
    /// `%`: the sign of the dividend for integers.
    Rem,
    /// `&` (also on `bool`).
    BitAnd,
    /// `|` (also on `bool`).
    BitOr,
    /// `^` (also on `bool`).
    BitXor,
    /// `<<`.
    Shl,
    /// `>>`: arithmetic on signed integers, logical on unsigned ones.
    Shr,
    /// `==`.
    Eq,
    /// `!=` (true when either float operand is NaN).
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// Short-circuit `&&`: the right operand is evaluated only when the left is true.
    LogicalAnd,
    /// Short-circuit `||`.
    LogicalOr,
}

impl BinaryOp {
    /// Whether the operator compares (its result is `bool`).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// A dimension of a block or grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Axis {
    /// The first dimension (`.x`).
    X,
    /// The second dimension (`.y`).
    Y,
    /// The third dimension (`.z`).
    Z,
}

/// Hardware indices, all `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Special {
    /// `thread_idx()`: the thread's index in its block.
    ThreadIdx(Axis),
    /// `block_idx()`: the block's index in the grid.
    BlockIdx(Axis),
    /// `block_dim()`: threads per block.
    BlockDim(Axis),
    /// `grid_dim()`: blocks per grid.
    GridDim(Axis),
    /// Lane within the warp, 0..32.
    LaneId,
    /// `cluster_rank()` (sm_90): the block's rank in its cluster, 0 to the
    /// cluster's blocks less one (0 without a cluster).
    ClusterRank,
}

/// Math and warp intrinsics. Argument and result types are recorded in the
/// [`Expr`]s; which types each accepts is checked by the front and the validator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Intrinsic {
    // float -> float
    /// `x.sqrt()`.
    Sqrt,
    /// `x.rsqrt()`: 1 / sqrt(x).
    Rsqrt,
    /// `x.exp()`: e^x.
    Exp,
    /// `x.exp2()`: 2^x.
    Exp2,
    /// `x.ln()`: the natural logarithm.
    Ln,
    /// `x.log2()`.
    Log2,
    /// `x.sin()`.
    Sin,
    /// `x.cos()`.
    Cos,
    /// `x.tanh()`.
    Tanh,
    /// `x.floor()`.
    Floor,
    /// `x.ceil()`.
    Ceil,
    /// `x.round()`: to nearest, ties away from zero, as Rust's.
    Round,
    // numeric
    /// `x.abs()` on signed integers and floats.
    Abs,
    /// `x.min(y)` on numbers.
    Min,
    /// `x.max(y)` on numbers.
    Max,
    /// `a.mul_add(b, c)` = a * b + c with one rounding.
    MulAdd,
    /// `shfl_xor(value, lane_mask)`: the value of lane `lane_id ^ lane_mask`
    /// (all 32 lanes of the warp take part). 32-bit types.
    ShflXor,
    /// `shfl_down(value, delta)`: the value of lane `lane_id + delta`, or the
    /// caller's own value past lane 31. 32-bit types.
    ShflDown,
    /// `pack_f16x2(lo, hi)`: two `f32`s rounded to f16 and packed into a
    /// `u32`, `lo` in bits 0..16 (a Tensor Core operand word).
    PackF16x2,
    /// `pack_bf16x2(lo, hi)`: the same with bf16.
    PackBf16x2,
    /// `to_tf32(x)`: `x` rounded to tf32 (to nearest, ties away from zero),
    /// as the `u32` word a tf32 Tensor Core operand takes.
    ToTf32,
    /// `f32::from_bits(u)`: the `f32` whose bits are the `u32` `u`.
    FromBits,
    /// `x.to_bits()`: the bits of the `f32` `x`, as a `u32`.
    ToBits,
}

/// The read-modify-write operations of [`ExprKind::Atomic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AtomicOp {
    /// `atomic_add`: adds the value.
    Add,
    /// `atomic_min`: keeps the smaller.
    Min,
    /// `atomic_max`: keeps the larger.
    Max,
    /// `atomic_and`: bitwise and.
    And,
    /// `atomic_or`: bitwise or.
    Or,
    /// `atomic_xor`: bitwise exclusive or.
    Xor,
    /// `atomic_exchange`: writes the value.
    Exchange,
    /// Compare-and-swap: writes `value` when the old value equals `compare`.
    CompareExchange,
}

impl MatrixLayout {
    /// `row` or `col`, as in the DSL function names and PTX.
    pub fn name(self) -> &'static str {
        match self {
            MatrixLayout::Row => "row",
            MatrixLayout::Col => "col",
        }
    }
}

impl WmmaOperand {
    /// `a`, `b` or `c`, as in the DSL function names and PTX.
    pub fn name(self) -> &'static str {
        match self {
            WmmaOperand::A => "a",
            WmmaOperand::B => "b",
            WmmaOperand::C => "c",
        }
    }
}

impl MatrixOp {
    /// The DSL function that wrote the operation (for messages).
    pub fn function(&self) -> String {
        match self {
            MatrixOp::LoadMatrix {
                count, transpose, ..
            } => format!(
                "ldmatrix_x{count}{}",
                if *transpose { "_trans" } else { "" }
            ),
            MatrixOp::Mma { kind, .. } => kind.function().to_string(),
            MatrixOp::MmaSparse { kind, ordered, .. } => kind.function(*ordered),
            MatrixOp::WmmaLoad {
                operand, layout, ..
            } => format!("wmma_load_{}_{}", operand.name(), layout.name()),
            MatrixOp::Wmma {
                a_layout, b_layout, ..
            } => format!("wmma_mma_{}_{}", a_layout.name(), b_layout.name()),
            MatrixOp::WmmaStore { layout, .. } => format!("wmma_store_{}", layout.name()),
        }
    }
}

impl MbarrierOp {
    /// The DSL function that wrote the operation (for messages).
    pub fn function(&self) -> &'static str {
        match self {
            MbarrierOp::Init { .. } => "mbarrier_init",
            MbarrierOp::Arrive { .. } => "mbarrier_arrive",
            MbarrierOp::ArriveCluster { .. } => "mbarrier_arrive_cluster",
            MbarrierOp::ArriveExpectTx { .. } => "mbarrier_arrive_expect_tx",
            MbarrierOp::Wait { .. } => "mbarrier_wait",
            MbarrierOp::InitFence => "fence_mbarrier_init",
        }
    }

    /// The mbarrier and the `u32` operand (count, bytes or parity), where
    /// the operation has them.
    pub fn operands(&self) -> (Option<&Place>, Option<&Expr>) {
        match self {
            MbarrierOp::Init { bar, count: e }
            | MbarrierOp::ArriveExpectTx { bar, bytes: e }
            | MbarrierOp::Wait { bar, parity: e }
            | MbarrierOp::ArriveCluster { bar, rank: e } => (Some(bar), Some(e)),
            MbarrierOp::Arrive { bar } => (Some(bar), None),
            MbarrierOp::InitFence => (None, None),
        }
    }

    /// Whether the operation writes the mbarrier (all but a wait).
    pub fn writes(&self) -> bool {
        !matches!(self, MbarrierOp::Wait { .. })
    }
}

/// The DSL function of [`Stmt::GpuFence`].
pub const GPU_FENCE_FUNCTION: &str = "fence_gpu";

/// The DSL function of [`Stmt::ProxyFence`].
pub const PROXY_FENCE_FUNCTION: &str = "fence_proxy_async";

/// The DSL function of [`Stmt::ClusterBarrier`].
pub const CLUSTER_BARRIER_FUNCTION: &str = "cluster_sync";

/// The DSL builtin that makes a [`MatrixDescriptor`], written as an
/// operand of a wgmma: `matrix_desc(&tile[r][c], SWIZZLE)`.
pub const MATRIX_DESC_FUNCTION: &str = "matrix_desc";

impl WarpgroupOp {
    /// The DSL function that wrote the operation (for messages).
    pub fn function(&self) -> &'static str {
        match self {
            WarpgroupOp::Fence => "wgmma_fence",
            WarpgroupOp::Commit => "wgmma_commit",
            WarpgroupOp::Wait { .. } => "wgmma_wait",
            WarpgroupOp::Mma(mma) => mma.kind.function(),
        }
    }
}

impl Expr {
    /// A literal `lit` of type `ty`.
    pub fn literal(ty: Scalar, lit: Literal) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Literal(lit),
        }
    }

    /// `lhs op rhs`, typed as the IR requires: `bool` for comparisons and
    /// logical operators, the left operand's type otherwise.
    pub fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
        let ty = if op.is_comparison() || matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            Scalar::Bool
        } else {
            lhs.ty
        };
        Expr {
            ty,
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        }
    }

    /// The `u32` literal `v`.
    pub fn u32(v: u32) -> Expr {
        Expr::literal(Scalar::U32, Literal::Int(v as i64))
    }

    /// Whether the expression may be computed when its value is not needed
    /// (a branch-free `&&`, `||` or `if` value): no reads of global or
    /// shared memory, no atomics, no warp shuffles (they need every lane),
    /// no division but by a nonzero literal. `locals` tells register
    /// locals, whose reads are free, from shared arrays.
    pub fn is_speculatable(&self, locals: &[Local]) -> bool {
        let all = |es: &[&Expr]| es.iter().all(|e| e.is_speculatable(locals));
        match &self.kind {
            ExprKind::Literal(_)
            | ExprKind::Param(_)
            | ExprKind::Const(_)
            | ExprKind::Len(_)
            | ExprKind::Special(_) => true,
            ExprKind::Load(place) => match &**place {
                Place::Local { local, indices } => {
                    locals[*local as usize].space == Space::Register
                        && indices.iter().all(|i| i.is_speculatable(locals))
                }
                Place::Global { .. } => false,
            },
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => a.is_speculatable(locals),
            ExprKind::Binary(BinaryOp::Div | BinaryOp::Rem, a, b) => {
                b.as_int().is_some_and(|d| d != 0) && a.is_speculatable(locals)
            }
            ExprKind::Binary(_, a, b) => all(&[a, b]),
            ExprKind::Select(c, a, b) => all(&[c, a, b]),
            ExprKind::Call(Intrinsic::ShflXor | Intrinsic::ShflDown, _) => false,
            ExprKind::Call(_, args) => args.iter().all(|a| a.is_speculatable(locals)),
            ExprKind::Atomic { .. } => false,
        }
    }

    /// The expressions this one reads directly: its operands, and the
    /// indices of the place it loads or updates.
    pub fn operands(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Literal(_)
            | ExprKind::Param(_)
            | ExprKind::Const(_)
            | ExprKind::Len(_)
            | ExprKind::Special(_) => Vec::new(),
            ExprKind::Load(place) => place.indices(),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => vec![a],
            ExprKind::Binary(_, a, b) => vec![a, b],
            ExprKind::Select(c, a, b) => vec![c, a, b],
            ExprKind::Call(_, args) => args.iter().collect(),
            ExprKind::Atomic {
                place,
                value,
                compare,
                ..
            } => {
                let mut all = place.indices();
                all.push(value);
                all.extend(compare.as_deref());
                all
            }
        }
    }

    /// The integer value of a literal expression, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self.kind {
            ExprKind::Literal(Literal::Int(v)) => Some(v),
            _ => None,
        }
    }
}

/// Calls `f` on every statement of `body`, nested ones too.
pub(crate) fn visit_stmts<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for stmt in body {
        f(stmt);
        match stmt {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                visit_stmts(then_body, f);
                visit_stmts(else_body, f);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => visit_stmts(body, f),
            _ => {}
        }
    }
}

impl Kernel {
    /// The local `id`.
    pub fn local(&self, id: LocalId) -> &Local {
        &self.locals[id as usize]
    }

    /// The parameter `id`.
    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id as usize]
    }
}
