//! The built-in vocabularies of the language, one table each: the special
//! registers (`thread_idx().x`), the functions that are constructs of the
//! language (`sync_threads()`), the intrinsics called as functions
//! (`shfl_xor`, `f32::from_bits`), the math methods (`x.sqrt()`), the
//! atomics and the warp statement families. Every lookup of a built-in name
//! in the front ([`builtin`], [`near_miss`], [`math_method`]) and every list
//! a message gives ([`callable_list`] and the others) is derived from these
//! tables, so a built-in is added to its table, and lowered in
//! `lower/builtin.rs` or `lower/warp.rs`, and nowhere else.
//!
//! The names of the tables are disjoint (a test checks it), so a name is at
//! most one built-in.

use crate::ir::{AtomicOp, Axis, Intrinsic, Special};

/// A special register, read as `name().x`, `.y` or `.z` (a `u32`).
pub struct SpecialFn {
    pub name: &'static str,
    pub special: fn(Axis) -> Special,
    /// Whether a name that differs only by underscores and case
    /// (`threadidx`) is taken for a misspelling of this one.
    pub near_miss: bool,
}

pub static SPECIALS: [SpecialFn; 4] = [
    SpecialFn {
        name: "thread_idx",
        special: Special::ThreadIdx,
        near_miss: true,
    },
    SpecialFn {
        name: "block_idx",
        special: Special::BlockIdx,
        near_miss: true,
    },
    SpecialFn {
        name: "block_dim",
        special: Special::BlockDim,
        near_miss: false,
    },
    SpecialFn {
        name: "grid_dim",
        special: Special::GridDim,
        near_miss: false,
    },
];

/// A function that is a construct of the language rather than an IR
/// intrinsic: a value, a statement or a declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construct {
    /// `lane_id()`: the lane in the warp.
    LaneId,
    /// `sync_threads();`: the block barrier.
    SyncThreads,
    /// `let mut tile: [[T; N]; M] = shared();`: a shared array.
    Shared,
    /// `let pipe = pipeline(STAGES);`: a pipeline of async copies.
    Pipeline,
    /// `matrix_desc(&tile[r][c], SWIZZLE)`: a wgmma operand in shared memory.
    MatrixDesc,
    /// `cluster_rank()`: the block's rank in its thread block cluster.
    ClusterRank,
    /// `cluster_sync();`: the barrier over every thread of the cluster.
    ClusterSync,
}

pub struct Function {
    pub name: &'static str,
    pub construct: Construct,
    /// As [`SpecialFn::near_miss`].
    pub near_miss: bool,
}

pub static FUNCTIONS: [Function; 7] = [
    Function {
        name: "lane_id",
        construct: Construct::LaneId,
        near_miss: true,
    },
    Function {
        name: "sync_threads",
        construct: Construct::SyncThreads,
        near_miss: true,
    },
    Function {
        name: "shared",
        construct: Construct::Shared,
        near_miss: false,
    },
    Function {
        name: "pipeline",
        construct: Construct::Pipeline,
        near_miss: false,
    },
    Function {
        name: crate::ir::MATRIX_DESC_FUNCTION,
        construct: Construct::MatrixDesc,
        near_miss: false,
    },
    Function {
        name: "cluster_rank",
        construct: Construct::ClusterRank,
        near_miss: false,
    },
    Function {
        name: crate::ir::CLUSTER_BARRIER_FUNCTION,
        construct: Construct::ClusterSync,
        near_miss: false,
    },
];

/// An intrinsic called as a function, by its name or, for a function of a
/// scalar type, by its path (`["f32", "from_bits"]`).
pub struct IntrinsicFn {
    pub path: &'static [&'static str],
    pub intrinsic: Intrinsic,
}

pub static INTRINSICS: [IntrinsicFn; 6] = [
    IntrinsicFn {
        path: &["shfl_xor"],
        intrinsic: Intrinsic::ShflXor,
    },
    IntrinsicFn {
        path: &["shfl_down"],
        intrinsic: Intrinsic::ShflDown,
    },
    IntrinsicFn {
        path: &["pack_f16x2"],
        intrinsic: Intrinsic::PackF16x2,
    },
    IntrinsicFn {
        path: &["pack_bf16x2"],
        intrinsic: Intrinsic::PackBf16x2,
    },
    IntrinsicFn {
        path: &["to_tf32"],
        intrinsic: Intrinsic::ToTf32,
    },
    IntrinsicFn {
        path: &["f32", "from_bits"],
        intrinsic: Intrinsic::FromBits,
    },
];

/// Math written as a method, `x.name(args)`.
pub struct MathMethod {
    pub name: &'static str,
    pub intrinsic: Intrinsic,
    /// The number of arguments besides the receiver, each of the
    /// receiver's type.
    pub args: usize,
}

const fn math(name: &'static str, intrinsic: Intrinsic, args: usize) -> MathMethod {
    MathMethod {
        name,
        intrinsic,
        args,
    }
}

pub static MATH_METHODS: [MathMethod; 16] = [
    math("sqrt", Intrinsic::Sqrt, 0),
    math("rsqrt", Intrinsic::Rsqrt, 0),
    math("exp", Intrinsic::Exp, 0),
    math("exp2", Intrinsic::Exp2, 0),
    math("ln", Intrinsic::Ln, 0),
    math("log2", Intrinsic::Log2, 0),
    math("sin", Intrinsic::Sin, 0),
    math("cos", Intrinsic::Cos, 0),
    math("tanh", Intrinsic::Tanh, 0),
    math("floor", Intrinsic::Floor, 0),
    math("ceil", Intrinsic::Ceil, 0),
    math("round", Intrinsic::Round, 0),
    math("abs", Intrinsic::Abs, 0),
    math("min", Intrinsic::Min, 1),
    math("max", Intrinsic::Max, 1),
    math("mul_add", Intrinsic::MulAdd, 2),
];

/// What every atomic's name starts with: a call of another name that
/// starts with it is an unknown atomic, reported with the list.
pub const ATOMIC_PREFIX: &str = "atomic_";

pub static ATOMICS: [(&str, AtomicOp); 8] = [
    ("atomic_add", AtomicOp::Add),
    ("atomic_min", AtomicOp::Min),
    ("atomic_max", AtomicOp::Max),
    ("atomic_and", AtomicOp::And),
    ("atomic_or", AtomicOp::Or),
    ("atomic_xor", AtomicOp::Xor),
    ("atomic_exchange", AtomicOp::Exchange),
    ("atomic_compare_exchange", AtomicOp::CompareExchange),
];

/// A family of warp statements (`lower/warp.rs`): a call whose name starts
/// with `prefix` is one of them, and an unknown member is reported with the
/// forms of every family.
pub struct WarpFamily {
    pub prefix: &'static str,
    /// The family's statements, for messages.
    pub forms: &'static str,
}

pub static WARP_STATEMENTS: [WarpFamily; 9] = [
    WarpFamily {
        prefix: "ldmatrix_",
        forms: "ldmatrix_x1/x2/x4[_trans]",
    },
    WarpFamily {
        prefix: "mma_",
        forms: "mma_m16n8k16_f16, mma_m16n8k16_bf16, mma_m16n8k8_tf32, mma_m16n8k32_s8, \
                mma_m16n8k32_u8, mma_m16n8::<T>, mma_sp[_ordered]_m16n8k32_{f16,bf16}, mma_sp[_ordered]_m16n8k32::<T>",
    },
    WarpFamily {
        prefix: "wmma_",
        forms: "wmma_load_{a,b,c}_{row,col}, wmma_mma_{row,col}_{row,col}, wmma_store_{row,col}",
    },
    WarpFamily {
        prefix: "cp_async",
        forms: "cp_async, cp_async_commit, cp_async_wait",
    },
    WarpFamily {
        prefix: "mbarrier_",
        forms: "mbarrier_init, mbarrier_arrive, mbarrier_arrive_cluster, mbarrier_arrive_expect_tx, mbarrier_wait",
    },
    WarpFamily {
        prefix: "fence_",
        forms: "fence_gpu, fence_mbarrier_init, fence_proxy_async",
    },
    WarpFamily {
        prefix: "wgmma_",
        forms: "wgmma_fence, wgmma_commit, wgmma_wait, wgmma_m64k16_{f16,bf16}::<N>, wgmma_m64k8_tf32::<N>, wgmma_m64k32_{s8,u8,e4m3,e5m2}::<N>, wgmma_m64k{16,8,32}::<T, N>, wgmma_m64::<T, N>",
    },
    WarpFamily {
        prefix: "tma_",
        forms: "tma_load, tma_load_multicast, tma_store, tma_store_commit, tma_store_wait_read, tma_store_wait",
    },
    WarpFamily {
        prefix: "setmaxnreg_",
        forms: "setmaxnreg_inc, setmaxnreg_dec",
    },
];

/// What a name calls among the built-ins.
#[derive(Clone, Copy)]
pub enum Builtin {
    /// A special register (`thread_idx`), which is read through its fields.
    Special(fn(Axis) -> Special),
    Function(Construct),
    Intrinsic(Intrinsic),
    /// A name of the atomics' family: its operation, `None` for a name
    /// that is no atomic.
    Atomic(Option<AtomicOp>),
    /// A name of a warp statement family (a statement of it or not).
    WarpStatement,
    /// A math method, which is not called as a function.
    MathMethod,
}

/// The built-in that a call of the plain name `name` calls.
pub fn builtin(name: &str) -> Option<Builtin> {
    if let Some(s) = SPECIALS.iter().find(|s| s.name == name) {
        return Some(Builtin::Special(s.special));
    }
    if let Some(f) = FUNCTIONS.iter().find(|f| f.name == name) {
        return Some(Builtin::Function(f.construct));
    }
    if let Some(f) = INTRINSICS.iter().find(|f| f.path == [name]) {
        return Some(Builtin::Intrinsic(f.intrinsic));
    }
    if name.starts_with(ATOMIC_PREFIX) {
        let op = ATOMICS.iter().find(|(n, _)| *n == name).map(|(_, op)| *op);
        return Some(Builtin::Atomic(op));
    }
    if WARP_STATEMENTS.iter().any(|f| name.starts_with(f.prefix)) {
        return Some(Builtin::WarpStatement);
    }
    math_method(name).map(|_| Builtin::MathMethod)
}

/// The intrinsic called by a path of several segments (`f32::from_bits`)
/// for which `is_path` holds: whether the callee is that path.
pub fn path_intrinsic(is_path: impl Fn(&[&str]) -> bool) -> Option<&'static IntrinsicFn> {
    INTRINSICS
        .iter()
        .find(|f| f.path.len() > 1 && is_path(f.path))
}

/// The built-in function `name` misspells by its underscores or case
/// (`syncthreads`), among those that take such names for misspellings.
pub fn near_miss(name: &str) -> Option<&'static str> {
    let plain = |n: &str| n.replace('_', "").to_lowercase();
    let specials = SPECIALS.iter().filter(|s| s.near_miss).map(|s| s.name);
    let functions = FUNCTIONS.iter().filter(|f| f.near_miss).map(|f| f.name);
    specials
        .chain(functions)
        .find(|b| *b != name && plain(b) == plain(name))
}

pub fn math_method(name: &str) -> Option<&'static MathMethod> {
    MATH_METHODS.iter().find(|m| m.name == name)
}

/// The functions a kernel can call besides its device functions, for
/// messages: `thread_idx(), .., and the warp matrix and async copy
/// statements`.
pub fn callable_list() -> String {
    let specials = SPECIALS.iter().map(|s| format!("{}()", s.name));
    let functions = FUNCTIONS.iter().map(|f| format!("{}()", f.name));
    let intrinsics = INTRINSICS.iter().map(|f| f.path.join("::"));
    let atomics = ATOMICS.iter().map(|(n, _)| n.to_string());
    let mut all: Vec<String> = specials
        .chain(functions)
        .chain(intrinsics)
        .chain(atomics)
        .collect();
    all.push("and the warp matrix and async copy statements".to_string());
    all.join(", ")
}

/// The special registers, for messages: `thread_idx(), .. and grid_dim()`.
pub fn special_list() -> String {
    let names: Vec<String> = SPECIALS.iter().map(|s| format!("{}()", s.name)).collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The math methods, for messages: `sqrt, rsqrt, ..`.
pub fn math_method_list() -> String {
    let names: Vec<&str> = MATH_METHODS.iter().map(|m| m.name).collect();
    names.join(", ")
}

/// The atomics, for messages: `atomic_add, atomic_min, ..`.
pub fn atomic_list() -> String {
    let names: Vec<&str> = ATOMICS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

/// The warp statements, for messages: `ldmatrix_x1/x2/x4[_trans], ..`.
pub fn warp_statement_list() -> String {
    let forms: Vec<&str> = WARP_STATEMENTS.iter().map(|f| f.forms).collect();
    forms.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{MmaKind, SparseMmaKind, WgmmaKind};
    use crate::valid::{atomic_name, intrinsic_name};

    #[test]
    fn the_lists_are_the_ones_the_messages_always_gave() {
        assert_eq!(
            callable_list(),
            "thread_idx(), block_idx(), block_dim(), grid_dim(), lane_id(), sync_threads(), shared(), pipeline(), matrix_desc(), \
             cluster_rank(), cluster_sync(), \
             shfl_xor, shfl_down, pack_f16x2, pack_bf16x2, to_tf32, f32::from_bits, atomic_add, atomic_min, atomic_max, atomic_and, atomic_or, \
             atomic_xor, atomic_exchange, atomic_compare_exchange, and the warp matrix and async copy statements"
        );
        assert_eq!(
            special_list(),
            "thread_idx(), block_idx(), block_dim() and grid_dim()"
        );
        assert_eq!(
            math_method_list(),
            "sqrt, rsqrt, exp, exp2, ln, log2, sin, cos, tanh, floor, ceil, round, abs, min, max, mul_add"
        );
        assert_eq!(
            atomic_list(),
            "atomic_add, atomic_min, atomic_max, atomic_and, atomic_or, atomic_xor, atomic_exchange, atomic_compare_exchange"
        );
        assert_eq!(
            warp_statement_list(),
            "ldmatrix_x1/x2/x4[_trans], mma_m16n8k16_f16, mma_m16n8k16_bf16, \
             mma_m16n8k8_tf32, mma_m16n8k32_s8, mma_m16n8k32_u8, mma_m16n8::<T>, mma_sp[_ordered]_m16n8k32_{f16,bf16}, mma_sp[_ordered]_m16n8k32::<T>, \
             wmma_load_{a,b,c}_{row,col}, \
             wmma_mma_{row,col}_{row,col}, wmma_store_{row,col}, cp_async, cp_async_commit, cp_async_wait, \
             mbarrier_init, mbarrier_arrive, mbarrier_arrive_cluster, mbarrier_arrive_expect_tx, mbarrier_wait, \
             fence_gpu, fence_mbarrier_init, fence_proxy_async, wgmma_fence, wgmma_commit, wgmma_wait, wgmma_m64k16_{f16,bf16}::<N>, wgmma_m64k8_tf32::<N>, wgmma_m64k32_{s8,u8,e4m3,e5m2}::<N>, wgmma_m64k{16,8,32}::<T, N>, wgmma_m64::<T, N>, \
             tma_load, tma_load_multicast, tma_store, tma_store_commit, tma_store_wait_read, tma_store_wait, \
             setmaxnreg_inc, setmaxnreg_dec"
        );
    }

    #[test]
    fn each_name_is_one_builtin_of_its_own_table() {
        for s in &SPECIALS {
            assert!(matches!(builtin(s.name), Some(Builtin::Special(_))));
        }
        for f in &FUNCTIONS {
            assert!(matches!(builtin(f.name), Some(Builtin::Function(c)) if c == f.construct));
        }
        for f in INTRINSICS.iter().filter(|f| f.path.len() == 1) {
            assert!(matches!(builtin(f.path[0]), Some(Builtin::Intrinsic(i)) if i == f.intrinsic));
        }
        for (name, op) in &ATOMICS {
            assert!(name.starts_with(ATOMIC_PREFIX));
            assert!(matches!(builtin(name), Some(Builtin::Atomic(Some(o))) if o == *op));
        }
        for m in &MATH_METHODS {
            assert!(matches!(builtin(m.name), Some(Builtin::MathMethod)));
        }
        assert!(matches!(
            builtin("atomic_nand"),
            Some(Builtin::Atomic(None))
        ));
        assert!(builtin("from_bits").is_none());
        assert_eq!(
            path_intrinsic(|p| p == ["f32", "from_bits"]).map(|f| f.intrinsic),
            Some(Intrinsic::FromBits)
        );
        assert!(path_intrinsic(|p| p == ["shfl_xor"]).is_none());
    }

    #[test]
    fn the_names_are_the_irs() {
        for f in &INTRINSICS {
            assert_eq!(f.path.join("::"), intrinsic_name(f.intrinsic));
        }
        for m in &MATH_METHODS {
            assert_eq!(m.name, intrinsic_name(m.intrinsic));
        }
        for (name, op) in &ATOMICS {
            assert_eq!(*name, atomic_name(*op));
        }
    }

    #[test]
    fn every_matrix_statement_is_of_a_warp_family() {
        let sparse = SparseMmaKind::ALL
            .into_iter()
            .flat_map(|k| [k.function(false), k.function(true)]);
        let dense = MmaKind::ALL.into_iter().map(|k| k.function().to_string());
        let wgmma = WgmmaKind::ALL.into_iter().map(|k| k.function().to_string());
        for name in dense.chain(sparse).chain(wgmma) {
            assert!(matches!(builtin(&name), Some(Builtin::WarpStatement)));
        }
    }

    #[test]
    fn near_misses_are_the_marked_names() {
        assert_eq!(near_miss("syncthreads"), Some("sync_threads"));
        assert_eq!(near_miss("laneId"), Some("lane_id"));
        assert_eq!(near_miss("threadIdx"), Some("thread_idx"));
        assert_eq!(near_miss("blockidx"), Some("block_idx"));
        assert_eq!(near_miss("blockdim"), None);
        assert_eq!(near_miss("sync_threads"), None);
    }
}
