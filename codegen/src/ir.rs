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
//! - Warp-level Tensor Core operations, ldmatrix and async copies will enter as
//!   statements over register arrays and shared places (see ARCHITECTURE.md).

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
    Bool,
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    Bf16,
    F32,
    F64,
}

impl Scalar {
    pub const ALL: [Scalar; 11] = [
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
        }
    }

    pub fn from_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Size in memory (global or shared), in bytes. `bool` is stored as one byte.
    pub fn size_bytes(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16 | Scalar::F32 | Scalar::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            Scalar::I8 | Scalar::U8 | Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64
        )
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I32 | Scalar::I64) || self.is_float()
    }
}

/// A CUDA architecture that a PTX variant targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Arch {
    Sm70,
    Sm80,
    Sm90,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Sm70, Arch::Sm80, Arch::Sm90];

    /// `sm_70`, `sm_80`, `sm_90`: the spelling of PTX `.target` and of the DSL.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm70 => "sm_70",
            Arch::Sm80 => "sm_80",
            Arch::Sm90 => "sm_90",
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Compute capability as (major, minor).
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm70 => (7, 0),
            Arch::Sm80 => (8, 0),
            Arch::Sm90 => (9, 0),
        }
    }
}

/// A whole kernel: signature, declarations and body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
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
    /// Host-side preconditions checked by the launcher before every launch.
    pub requires: Vec<Requirement>,
    pub body: Block,
}

/// A compile-time parameter. Its value is an integer of type `ty` (or a bool).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstParam {
    pub name: String,
    pub ty: Scalar,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub ty: ParamType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamType {
    /// A value passed by copy.
    Scalar(Scalar),
    /// A global-memory slice (`&[T]` or `&mut [T]`). Backends pass a pointer
    /// and the length in elements (a `u32`, read by [`ExprKind::Len`]).
    Slice { elem: Scalar, mutable: bool },
}

/// Where a local lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Space {
    /// Per-thread: a register, or a register array when `dims` is non-empty.
    Register,
    /// Per-block shared memory (always an array).
    Shared,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Local {
    pub name: String,
    pub ty: Scalar,
    pub space: Space,
    /// Array dimensions, outermost first; empty for a scalar. Constant
    /// expressions over const params (literals after specialization).
    pub dims: Vec<Expr>,
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

pub type Block = Vec<Stmt>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// Brings `local` into scope. Scalars take `init`; register arrays take
    /// `init` as a splat value for every element (or stay undefined with
    /// `None`); shared arrays never have `init`.
    Let {
        local: LocalId,
        init: Option<Expr>,
    },
    Assign {
        place: Place,
        value: Expr,
    },
    If {
        cond: Expr,
        then_body: Block,
        else_body: Block,
    },
    /// `for var in (start..end).step_by(step)`: `var` takes `start`, `start + step`, ...
    /// while `var < end`. `start`, `end` and `step` have the type of `var`
    /// (an integer); `step` is positive. `end` is evaluated once, before the loop.
    For {
        var: LocalId,
        start: Expr,
        end: Expr,
        step: Expr,
        unroll: bool,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    Break,
    Continue,
    Return,
    /// `sync_threads()`: a block-wide barrier that also orders shared and
    /// global memory accesses among the block's threads.
    Barrier,
    /// An expression evaluated for its effect (an atomic whose old value is unused).
    Expr(Expr),
}

/// A memory location that can be read, written or updated atomically.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Place {
    /// A scalar local, or one element of a register or shared array
    /// (`indices.len() == dims.len()`).
    Local { local: LocalId, indices: Vec<Expr> },
    /// One element of a slice parameter.
    Global { param: ParamId, index: Expr },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    pub ty: Scalar,
    pub kind: ExprKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    Literal(Literal),
    /// The value of a scalar parameter.
    Param(ParamId),
    /// The value of a compile-time parameter (gone after specialization).
    Const(ConstId),
    /// The length in elements of a slice parameter, as `u32`.
    Len(ParamId),
    /// A read of a place.
    Load(Box<Place>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// Numeric conversion with Rust `as` semantics (float to int saturates,
    /// float to narrower float rounds to nearest even).
    Cast(Box<Expr>),
    /// `cond ? a : b` with both operands evaluated (the front only builds this
    /// from operands without side effects or memory reads).
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Special(Special),
    Call(Intrinsic, Vec<Expr>),
    /// Atomic read-modify-write of a global or shared place; yields the old value.
    Atomic {
        op: AtomicOp,
        place: Box<Place>,
        value: Box<Expr>,
        compare: Option<Box<Expr>>,
    },
}

/// A literal value. Integers hold the value's bits zero- or sign-extended to 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Literal {
    Bool(bool),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Arithmetic negation (signed integers and floats).
    Neg,
    /// Logical not on `bool`, bitwise not on integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Short-circuit `&&`: the right operand is evaluated only when the left is true.
    LogicalAnd,
    /// Short-circuit `||`.
    LogicalOr,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Axis {
    X,
    Y,
    Z,
}

/// Hardware indices, all `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Special {
    ThreadIdx(Axis),
    BlockIdx(Axis),
    BlockDim(Axis),
    GridDim(Axis),
    /// Lane within the warp, 0..32.
    LaneId,
}

/// Math and warp intrinsics. Argument and result types are recorded in the
/// [`Expr`]s; which types each accepts is checked by the front and the validator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Intrinsic {
    // float -> float
    Sqrt,
    Rsqrt,
    Exp,
    Exp2,
    Ln,
    Log2,
    Sin,
    Cos,
    Tanh,
    Floor,
    Ceil,
    Round,
    // numeric
    Abs,
    Min,
    Max,
    /// `a.mul_add(b, c)` = a * b + c with one rounding.
    MulAdd,
    /// `shfl_xor(value, lane_mask)`: the value of lane `lane_id ^ lane_mask`
    /// (all 32 lanes of the warp take part). 32-bit types.
    ShflXor,
    /// `shfl_down(value, delta)`: the value of lane `lane_id + delta`, or the
    /// caller's own value past lane 31. 32-bit types.
    ShflDown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AtomicOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
    /// Compare-and-swap: writes `value` when the old value equals `compare`.
    CompareExchange,
}

impl Expr {
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

    pub fn u32(v: u32) -> Expr {
        Expr::literal(Scalar::U32, Literal::Int(v as i64))
    }

    /// The integer value of a literal expression, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self.kind {
            ExprKind::Literal(Literal::Int(v)) => Some(v),
            _ => None,
        }
    }
}

impl Kernel {
    pub fn local(&self, id: LocalId) -> &Local {
        &self.locals[id as usize]
    }

    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id as usize]
    }
}
