//! Tuned entry points of the stock GEMMs: each call goes to the variant tuned
//! for its shape on the GPU at hand (see [`warpforge::tune`] and the guide,
//! [`warpforge::guide::tuning`]).
//!
//! ```no_run
//! # use warpforge::prelude::*;
//! # use warpforge_kernels::tuned::{TunedGemm, GEMM_F16};
//! # fn main() -> Result<(), Error> {
//! let rt = Runtime::new()?;
//! let gemm = TunedGemm::new(&rt, &GEMM_F16)?; // once: opens the tuning database
//! # let (m, n, k) = (64u32, 64u32, 64u32);
//! let a = rt.upload(&vec![f16::ONE; (m * k) as usize])?;
//! let b = rt.upload(&vec![f16::ONE; (n * k) as usize])?;
//! let mut c = rt.alloc_zeroed::<f16>((m * n) as usize)?;
//! gemm.run(&rt, &a, &b, &mut c, (m, n, k), 1.0, 0.0)?; // C = A B with the tuned variant
//! # Ok(())
//! # }
//! ```
//!
//! The 2:4 sparse GEMMs ([`SPARSE_GEMM_F16`], [`SPARSE_GEMM_BF16`]) are
//! tuned the same way: a [`TunedGemm`] of them takes the compressed A
//! ([`DeviceCompressed`]) where the dense ones take a buffer ([`OperandA`]).
//!
//! [`TunedGemm::gemm`] takes a whole [`GemmProblem`] (A and B row- or
//! column-major, strided batches, alpha and beta, a bias, ReLU or GELU, C
//! row- or column-major) with the views of
//! [`GemmVariant::run`](crate::gemm_problem::GemmVariant::run), and
//! dispatches among the family's variants that can take it;
//! [`TunedGemm::run`] is its problem of one batch, A and C row-major, B in
//! the kind's layout, no bias or activation.
//!
//! A [`GemmKind`] describes one GEMM family: its kernels, which all take the
//! dense GEMMs' parameters (those of `gemm_problem::KernelProblem::args`, in
//! its order), have const parameters `BM` and `BN`,
//! and run one block per `BM x BN` tile of C and batch; the element types;
//! B's layout in [`TunedGemm::run`]; and the heuristic default. Adding a GEMM
//! kernel with that launcher shape is one more `GemmKind` constant (or one
//! more kernel in an existing one's list).
//!
//! The tuning key of a call ([`GemmKind::call`]) holds, besides the GPU,
//! driver, code generator and family:
//! - the dtypes: the element types and the problem's layouts and epilogue,
//!   `f16.row*f16.col->f16.row` for A (`sparse` for a compressed 2:4 A), B
//!   and C, then `+bias` with a bias and
//!   `+relu` or `+gelu` with an activation (`f16.row*f16.row->f16.col+bias+relu`);
//! - the alignment of A's, B's and C's leading dimension and of A's and B's
//!   batch stride in bytes (capped at 16: what 16-byte copies need; the
//!   strides 16 for one batch, where they are not read);
//! - the shape bucket of m, n, k and the batch count
//!   ([`ShapeBucket::batched_gemm`]).
//!
//! The layouts and the bias and activation decide which variants are
//! legal (fixed layouts; GELU only on float outputs) and which is fastest,
//! so each has its own winner. Alpha and beta are not in the key: no
//! variant's legality depends on them, and every variant's epilogue does
//! the same work for them. Every variant's `requires` depend on the call
//! only through the key (a test checks it), so a winner stored for a key
//! can take every call with that key.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::__private::KernelDef;
use warpforge::tune::{
    Call, Candidate, Dispatcher, Family, MissPolicy, Selection, ShapeBucket, TuneJob, Workload,
};
use warpforge::{
    bf16, e4m3, e5m2, f16, ArgInfo, BufferMut, BufferRef, DeviceBuffer, DeviceInfo, DeviceScalar,
    Error, GemmPrecision, KernelArg, MatrixLayout, Runtime,
};

use crate::gemm::{gemm_f32, DEFAULT_F32};
use crate::gemm_problem::{check_lengths, reference_epilogue, Activation, GemmBatch, GemmProblem};
use crate::gemm_sparse::{self, gemm_sparse_bf16, gemm_sparse_f16};
use crate::gemm_tc::{gemm_bf16, gemm_f16, gemm_s8, gemm_tf32};
use crate::gemm_wgmma::{
    self, gemm_wgmma_bf16, gemm_wgmma_bf16_f32, gemm_wgmma_e4m3, gemm_wgmma_e4m3_f16,
    gemm_wgmma_e4m3_f32, gemm_wgmma_e5m2, gemm_wgmma_e5m2_f16, gemm_wgmma_e5m2_f32, gemm_wgmma_f16,
    gemm_wgmma_f16_f32, gemm_wgmma_s8, gemm_wgmma_tf32,
};
use crate::gemm_wmma::gemm_f16_wmma;
use crate::sparse::device::DeviceCompressed;
use crate::sparse::{metadata_words, value_cols, Compressed, SparseElement};

/// One GEMM family, with input element `I`, output element `O` and A taken
/// as `A` ([`DenseA`], or [`SparseA`] for the 2:4 sparse GEMMs).
pub struct GemmKind<I, O, A = DenseA> {
    /// The family's name in tuning keys.
    pub name: &'static str,
    /// The element types and the arithmetic, for the dtypes of the key and
    /// the error bound of verification.
    pub precision: GemmPrecision,
    /// How B lies in its buffer in [`TunedGemm::run`]'s problem (A and C
    /// row-major there): the layout the heuristic default is for.
    pub b_layout: MatrixLayout,
    /// The kernels whose variants compete.
    pub kernels: fn() -> Vec<&'static KernelDef>,
    /// The heuristic default: variants in order of preference, each for the
    /// calls of the shapes it names; a call gets the first that is for its
    /// shape, runs on the device and can take it.
    pub preferred: fn() -> Vec<Preference>,
    types: PhantomData<fn(I, O) -> A>,
}

impl<I, O, A> GemmKind<I, O, A> {
    /// A GEMM family of kernels with the launcher shape above: `preferred`
    /// lists the heuristic default's variants (kernel, const values), most
    /// preferred first.
    pub const fn new(
        name: &'static str,
        precision: GemmPrecision,
        b_layout: MatrixLayout,
        kernels: fn() -> Vec<&'static KernelDef>,
        preferred: fn() -> Vec<Preference>,
    ) -> GemmKind<I, O, A> {
        GemmKind {
            name,
            precision,
            b_layout,
            kernels,
            preferred,
            types: PhantomData,
        }
    }
}

/// The SIMT f32 GEMM (row-major A, B and C). Heuristic default:
/// [`DEFAULT_F32`] (128 x 128 x 16 tiles, 8 x 8 per thread; the fastest at
/// 4096^3 on an H200 before tuning existed).
pub const GEMM_F32: GemmKind<f32, f32> = GemmKind::new(
    "gemm_f32",
    GemmPrecision::F32,
    MatrixLayout::RowMajor,
    || vec![gemm_f32::def()],
    || vec![(gemm_f32::def(), DEFAULT_F32.values(), every_shape)],
);

/// The f16 Tensor Core GEMM (row-major A, column-major B, f16 C, f32
/// accumulation): the sm_80 `mma.sync` kernel [`gemm_f16`], the sm_70
/// `wmma` kernel [`gemm_f16_wmma`] and on Hopper the sm_90a `wgmma`
/// kernel [`gemm_wgmma_f16`] compete. Heuristic default: on Hopper
/// (compute capability 9.0) a `gemm_wgmma_f16` tile by the size of C and k
/// ([`wgmma_defaults`]; 128 x 256 in 3 stages with stream-K for a C of
/// 4096 x 8192 or more and k of 4096 or more), when k is a multiple of 8;
/// elsewhere, or for other k, `gemm_f16` 128 x 128 x 64, 64 x 64 warp
/// tiles, 2 stages, 16-byte copies (the fastest sm_80 variant at 8192^3
/// on an H200 before tuning existed); for k not a multiple of 8 element
/// copies, BK = 32, 256 x 128 tiles from a C of 2048 x 2048
/// (`tensor_core_defaults`); on sm_70,
/// `gemm_f16_wmma` 64 x 128 x 32 with 2 stages.
pub const GEMM_F16: GemmKind<f16, f16> = GemmKind::new(
    "gemm_f16",
    GemmPrecision::F16,
    MatrixLayout::ColMajor,
    || vec![gemm_f16::def(), gemm_f16_wmma::def(), gemm_wgmma_f16::def()],
    || {
        let wmma = gemm_f16_wmma::Consts {
            BM: 64,
            BN: 128,
            BK: 32,
            STAGES: 2,
        };
        let mut preferred = wgmma_defaults::<f16>(gemm_wgmma_f16::def());
        preferred.extend(tensor_core_defaults(gemm_f16::def()));
        preferred.push((gemm_f16_wmma::def(), wmma.values(), every_shape));
        preferred
    },
);

/// The bf16 Tensor Core GEMM (layouts as [`GEMM_F16`]; the sm_80 kernel
/// and on Hopper [`gemm_wgmma_bf16`]); heuristic default as `gemm_f16`'s
/// (the sm_80 variants from the same kernel source).
pub const GEMM_BF16: GemmKind<bf16, bf16> = GemmKind::new(
    "gemm_bf16",
    GemmPrecision::Bf16,
    MatrixLayout::ColMajor,
    || vec![gemm_bf16::def(), gemm_wgmma_bf16::def()],
    || {
        let mut preferred = wgmma_defaults::<bf16>(gemm_wgmma_bf16::def());
        preferred.extend(tensor_core_defaults(gemm_bf16::def()));
        preferred
    },
);

/// The tf32 Tensor Core GEMM (f32 in and out, operands rounded to tf32 by
/// `gemm_tf32`, truncated by the sm_90a [`gemm_wgmma_tf32`], both within
/// the tuner's tolerance; layouts as [`GEMM_F16`]). Heuristic default: on
/// Hopper a `gemm_wgmma_tf32` tile as [`GEMM_F16`]'s (k a multiple of 4);
/// elsewhere, or for other k, `gemm_tf32` 128 x 128 x 16, 64 x 64 warp
/// tiles, 3 stages, 16-byte copies (k a multiple of 4), otherwise element
/// copies.
pub const GEMM_TF32: GemmKind<f32, f32> = GemmKind::new(
    "gemm_tf32",
    GemmPrecision::Tf32,
    MatrixLayout::ColMajor,
    || vec![gemm_tf32::def(), gemm_wgmma_tf32::def()],
    || {
        let tiles = |aligned: bool| gemm_tf32::Consts {
            BM: 128,
            BN: 128,
            BK: 16,
            WARP: 64,
            STAGES: if aligned { 3 } else { 2 },
            ALIGNED: aligned,
            A_COL_MAJOR: false,
            B_ROW_MAJOR: false,
        };
        let mut preferred = wgmma_defaults::<f32>(gemm_wgmma_tf32::def());
        preferred.extend([
            (
                gemm_tf32::def(),
                tiles(true).values(),
                every_shape as ShapeTest,
            ),
            (gemm_tf32::def(), tiles(false).values(), every_shape),
        ]);
        preferred
    },
);

/// The s8 Tensor Core GEMM (i8 in, i32 accumulation and out, i32 alpha and
/// beta; layouts as [`GEMM_F16`]; the sm_80 kernel and on Hopper
/// [`gemm_wgmma_s8`]). Heuristic default: on Hopper a `gemm_wgmma_s8` tile
/// as [`GEMM_F16`]'s, the 128 x 256 one in 4 stages (k a multiple of 16);
/// elsewhere, or for other k, `gemm_s8` 128 x 128 x 128,
/// 64 x 64 warp tiles, 3 stages, 16-byte copies (the fastest sm_80 variant
/// at 8192^3 on an H200 before tuning; k a multiple of 16); otherwise
/// element copies in 64 x 64 tiles, BK = 64, of 32 x 32 warp tiles, or 128
/// x 64 ones for a C of at least 2048 x 2048. In five default bench runs
/// on an H100 (sessions 29, 30 and 33, perf/LOG.md) the 128 x 64 tile ran
/// 1.18x (3001 x 2999 x 1000) and 1.24x (2048 x 2048 x 1020) faster than
/// the 64 x 64 one in every sweep; 64 x 128 was fastest at the first shape
/// (another 10%) and slowest at the second.
pub const GEMM_S8: GemmKind<i8, i32> = GemmKind::new(
    "gemm_s8",
    GemmPrecision::I8,
    MatrixLayout::ColMajor,
    || vec![gemm_s8::def(), gemm_wgmma_s8::def()],
    || {
        let aligned = gemm_s8::Consts {
            BM: 128,
            BN: 128,
            BK: 128,
            WARP: 64,
            STAGES: 3,
            ALIGNED: true,
            A_COL_MAJOR: false,
            B_ROW_MAJOR: false,
        };
        let element_copies = |bm| gemm_s8::Consts {
            BM: bm,
            BN: 64,
            BK: 64,
            WARP: 32,
            STAGES: 2,
            ALIGNED: false,
            A_COL_MAJOR: false,
            B_ROW_MAJOR: false,
        };
        let mut preferred = wgmma_defaults::<i8>(gemm_wgmma_s8::def());
        preferred.extend([
            (gemm_s8::def(), aligned.values(), every_shape as ShapeTest),
            (
                gemm_s8::def(),
                element_copies(128).values(),
                c_tiles_at_least::<256>,
            ),
            (gemm_s8::def(), element_copies(64).values(), every_shape),
        ]);
        preferred
    },
);

/// The fp8 e4m3 GEMM (e4m3 A and B, f32 accumulation, bf16 C, f32 alpha
/// and beta; A row-major, B column-major, k a multiple of 16): only the
/// sm_90a kernel [`gemm_wgmma_e4m3`], so it runs on compute capability 9.0
/// only. Heuristic default as [`GEMM_S8`]'s on Hopper (the 8-bit types
/// share the tile shapes: 128 bytes of k per stage).
pub const GEMM_E4M3: GemmKind<e4m3, bf16> = GemmKind::new(
    "gemm_e4m3",
    GemmPrecision::E4m3,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e4m3::def()],
    || wgmma_defaults::<e4m3>(gemm_wgmma_e4m3::def()),
);

/// The fp8 e5m2 GEMM, as [`GEMM_E4M3`] (kernel [`gemm_wgmma_e5m2`]).
pub const GEMM_E5M2: GemmKind<e5m2, bf16> = GemmKind::new(
    "gemm_e5m2",
    GemmPrecision::E5m2,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e5m2::def()],
    || wgmma_defaults::<e5m2>(gemm_wgmma_e5m2::def()),
);

/// The Hopper GEMMs whose C is not their precision's (f32 C from f16 or
/// bf16 products, f16 or f32 C from fp8 ones) have only the sm_90a kernel
/// each, so they run on compute capability 9.0 only: layouts as
/// [`GEMM_E4M3`], k a multiple of 8 for 16-bit inputs and of 16 for fp8
/// ones, the heuristic default as their input type's. They are tuned apart
/// from the kinds with the precision's C: the tuning key names C's type
/// (`f16.row*f16.col->f32.row`).
///
/// f16 A and B, f32 accumulation and C: kernel [`gemm_wgmma_f16_f32`].
pub const GEMM_F16_F32: GemmKind<f16, f32> = GemmKind::new(
    "gemm_f16_f32",
    GemmPrecision::F16,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_f16_f32::def()],
    || wgmma_defaults::<f16>(gemm_wgmma_f16_f32::def()),
);

/// bf16 A and B, f32 accumulation and C (kernel [`gemm_wgmma_bf16_f32`]); see [`GEMM_F16_F32`].
pub const GEMM_BF16_F32: GemmKind<bf16, f32> = GemmKind::new(
    "gemm_bf16_f32",
    GemmPrecision::Bf16,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_bf16_f32::def()],
    || wgmma_defaults::<bf16>(gemm_wgmma_bf16_f32::def()),
);

/// e4m3 A and B, f16 C (kernel [`gemm_wgmma_e4m3_f16`]); see [`GEMM_F16_F32`].
pub const GEMM_E4M3_F16: GemmKind<e4m3, f16> = GemmKind::new(
    "gemm_e4m3_f16",
    GemmPrecision::E4m3,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e4m3_f16::def()],
    || wgmma_defaults::<e4m3>(gemm_wgmma_e4m3_f16::def()),
);

/// e4m3 A and B, f32 C (kernel [`gemm_wgmma_e4m3_f32`]); see [`GEMM_F16_F32`].
pub const GEMM_E4M3_F32: GemmKind<e4m3, f32> = GemmKind::new(
    "gemm_e4m3_f32",
    GemmPrecision::E4m3,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e4m3_f32::def()],
    || wgmma_defaults::<e4m3>(gemm_wgmma_e4m3_f32::def()),
);

/// e5m2 A and B, f16 C (kernel [`gemm_wgmma_e5m2_f16`]); see [`GEMM_F16_F32`].
pub const GEMM_E5M2_F16: GemmKind<e5m2, f16> = GemmKind::new(
    "gemm_e5m2_f16",
    GemmPrecision::E5m2,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e5m2_f16::def()],
    || wgmma_defaults::<e5m2>(gemm_wgmma_e5m2_f16::def()),
);

/// e5m2 A and B, f32 C (kernel [`gemm_wgmma_e5m2_f32`]); see [`GEMM_F16_F32`].
pub const GEMM_E5M2_F32: GemmKind<e5m2, f32> = GemmKind::new(
    "gemm_e5m2_f32",
    GemmPrecision::E5m2,
    MatrixLayout::ColMajor,
    || vec![gemm_wgmma_e5m2_f32::def()],
    || wgmma_defaults::<e5m2>(gemm_wgmma_e5m2_f32::def()),
);

/// The 2:4 sparse f16 GEMM [`gemm_sparse_f16`] (A sparse and compressed,
/// [`SparseA`]; B column-major in [`TunedGemm::run`]; f16 C, f32
/// accumulation). Heuristic default: [`gemm_sparse::default_variant`]'s,
/// for each layout of B.
pub const SPARSE_GEMM_F16: GemmKind<f16, f16, SparseA> = GemmKind::new(
    "gemm_sparse_f16",
    GemmPrecision::F16,
    MatrixLayout::ColMajor,
    || vec![gemm_sparse_f16::def()],
    || sparse_defaults(gemm_sparse_f16::def()),
);

/// The 2:4 sparse bf16 GEMM [`gemm_sparse_bf16`], as [`SPARSE_GEMM_F16`].
pub const SPARSE_GEMM_BF16: GemmKind<bf16, bf16, SparseA> = GemmKind::new(
    "gemm_sparse_bf16",
    GemmPrecision::Bf16,
    MatrixLayout::ColMajor,
    || vec![gemm_sparse_bf16::def()],
    || sparse_defaults(gemm_sparse_bf16::def()),
);

/// The heuristic default of a sparse GEMM kernel: its
/// [`gemm_sparse::default_variant`] for a column-major B, then for a
/// row-major one (each variant reads one layout of B, so a call gets the
/// first of its own layout that takes it).
fn sparse_defaults(def: &'static KernelDef) -> Vec<Preference> {
    MatrixLayout::ALL
        .into_iter()
        .flat_map(gemm_sparse::default_consts)
        .map(|values| (def, values.to_vec(), every_shape as ShapeTest))
        .collect()
}

/// A variant of a GEMM family's heuristic default: the kernel, its const
/// values, and whether it is for a call of a shape bucket (m, n, k, batches).
pub type Preference = (&'static KernelDef, Vec<i64>, ShapeTest);

/// Whether a [`Preference`] is for the calls of a shape bucket.
pub type ShapeTest = fn(&ShapeBucket) -> bool;

/// A [`Preference`] for every call.
pub fn every_shape(_: &ShapeBucket) -> bool {
    true
}

/// A [`Preference`] for a GEMM of at most `M` rows of C (m, rounded up to a
/// power of two).
pub fn rows_at_most<const M: u64>(shape: &ShapeBucket) -> bool {
    shape.sizes()[0] <= M
}

/// The 128 x 128 tiles of a GEMM's C over its batches (m and n, and the
/// batches, rounded up to powers of two): how far a tile size fills the
/// GPU's SMs (132 on an H100 SXM or an H200).
fn c_tiles(shape: &ShapeBucket) -> u64 {
    let sizes = shape.sizes();
    let batches = sizes.get(3).copied().unwrap_or(1);
    (sizes[0] / 128).max(1) * (sizes[1] / 128).max(1) * batches
}

/// A [`Preference`] for a C of at most 16 tiles of 128 x 128 (512 x 512).
pub fn tiny_c(shape: &ShapeBucket) -> bool {
    c_tiles(shape) <= 16
}

/// A [`Preference`] for a C of at most 64 tiles of 128 x 128 (1024 x 1024).
pub fn small_c(shape: &ShapeBucket) -> bool {
    c_tiles(shape) <= 64
}

/// A [`Preference`] for a C of at least `TILES` tiles of 128 x 128 (256:
/// 2048 x 2048).
pub fn c_tiles_at_least<const TILES: u64>(shape: &ShapeBucket) -> bool {
    c_tiles(shape) >= TILES
}

/// The k-tiles of 128 bytes of a main loop long enough beside a 128 x 256
/// tile's epilogue: k of 8192 8-bit, 4096 16-bit or 2048 32-bit elements.
pub const LONG_K_TILES: u64 = 64;

/// Whether a main loop has at least `K_TILES` k-tiles of 128 bytes of
/// `BYTES`-byte operands.
fn k_tiles_at_least<const BYTES: u64, const K_TILES: u64>(shape: &ShapeBucket) -> bool {
    shape.sizes()[2] * BYTES >= K_TILES * 128
}

/// A [`Preference`] for a C of 1024 to 2047 tiles of 128 x 128 (4096 x
/// 4096, and 3001 x 2999, as the bucket rounds them) and a main loop of at
/// least `K_TILES` k-tiles of 128 bytes of `BYTES`-byte operands.
pub fn mid_c<const BYTES: u64, const K_TILES: u64>(shape: &ShapeBucket) -> bool {
    (1024..2048).contains(&c_tiles(shape)) && k_tiles_at_least::<BYTES, K_TILES>(shape)
}

/// A [`Preference`] for a C of at least 2048 tiles of 128 x 128 (4096 x
/// 8192, or 4096 x 11008 rounded up) and a main loop of [`LONG_K_TILES`]:
/// enough waves of 128 x 256 tiles that stream-K's split of the last one
/// pays for its partial sums.
pub fn larger_c_long_k<const BYTES: u64>(shape: &ShapeBucket) -> bool {
    c_tiles(shape) >= 2048 && k_tiles_at_least::<BYTES, LONG_K_TILES>(shape)
}

/// The heuristic default of a Hopper `wgmma` GEMM family (`def`, its
/// operands of type `T`; every instance has the same const parameters),
/// the fastest tile of each kind of shape in the default bench of session
/// 21 on an H100 (perf/LOG.md, session 22), where the one default of 128 x
/// 256 tiles ran at 0.41-0.63x of the fastest at 512^3, 1024^3 and 128 x
/// 8192 x 8192, and then 4-10% behind the ping-pong 128 x 128 tile at 4096
/// x 11008 x 4096, 8192 x 8192 x 1024 and 3001 x 2999 x 1000, and in
/// session 29's (below):
/// - at most 32 rows of C: 64 x 128 in 6 stages. In the three default
///   runs of sessions 29 and 30 on an H100, at m = 16 (n = k = 8192) it ran
///   10-20% faster than 64 x 64 for every operand type (f16 0.0506-0.0508
///   ms against 0.0611-0.0632), while at m = 64 and 128 the two were
///   within 1.5%, 64 x 64 ahead at 64;
/// - at most 128 rows of C, or C at most 512 x 512: 64 x 64 in 6 stages
///   (too few larger tiles to fill the SMs);
/// - C at most 1024 x 1024: 64 x 128 in 6 stages;
/// - C of at least 4096 x 8192 and a main loop of at least 64 k-tiles
///   ([`larger_c_long_k`]): the cooperative 128 x 256 in 3 stages (4 for
///   8-bit operands; its wider tile reads less per product, and the long
///   loop hides its epilogue), with stream-K (the last wave's tiles split
///   by k over every block). In session 29's default runs on an H100
///   (perf/LOG.md), where this bucket began at k = 8192 for every width,
///   the ping-pong default ran f16 at 4096^3 and 4096 x 11008 x 4096 at
///   0.913-0.962x of cuBLAS against 0.947-0.988x for the 128 x 256 tiles;
///   stream-K gained 1.5% over the same tile at 8192^3 (f16, tf32); with
///   8-bit operands the ping-pong tile stayed ahead at 4096^3 (e4m3
///   0.978-0.993x against 0.962-0.964x);
/// - C of about 4096 x 4096 ([`mid_c`]) and such a loop, or with 16-bit
///   operands one of at least 16 k-tiles (k of 1024, 3001 x 2999 x 1000's
///   as its bucket rounds it): the same tile in 4 stages without stream-K,
///   as a cluster pair (two blocks along m, each loading half of the B
///   tile they share and multicasting it to both). At 4096^3 its 512 tiles
///   are 3.9 waves of 132, the last nearly full, so splitting it only adds
///   the partial sums: in session 29's 41 rounds on an H100 (perf/LOG.md) the
///   128 x 256 tile in 3 stages ran f16 at 0.947x of cuBLAS with stream-K
///   and 0.963x without, tf32 0.992x and 1.002x.
///   In session 30 `tune` chose this tile at 4096^3 for f16, bf16 and tf32
///   (the runners-up, without the cluster, 0.2-0.6% behind). In the three
///   default runs of sessions 29 and 30 every f16, bf16 and tf32 sweep at
///   4096^3 chose a 128 x 256 tile without stream-K, this one in 5 of the 9
///   (the others in 3 stages or without the cluster, within 2% of it), and
///   at 3001 x 2999 x 1000 (short k) f16 and bf16 chose this one in all 6,
///   4.4-5.9% ahead of the ping-pong default there; tf32 at 3001 x 2999 x
///   1000 and the 8-bit types at 4096^3 kept the ping-pong tile ahead;
/// - otherwise: the ping-pong 128 x 128 in 5 stages (one consumer's
///   epilogue under the other's main loop).
pub fn wgmma_defaults<T: DeviceScalar>(def: &'static KernelDef) -> Vec<Preference> {
    let (large_stages, larger_c, mid): (u32, ShapeTest, ShapeTest) = match T::SCALAR.size_bytes() {
        1 => (4, larger_c_long_k::<1>, mid_c::<1, LONG_K_TILES>),
        2 => (3, larger_c_long_k::<2>, mid_c::<2, 16>),
        _ => (3, larger_c_long_k::<4>, mid_c::<4, LONG_K_TILES>),
    };
    let tile = |bm, bn, stages, pingpong, cluster, stream_k| {
        gemm_wgmma_f16::Consts {
            BM: bm,
            BN: bn,
            STAGES: stages,
            PINGPONG: pingpong,
            CLUSTER: cluster,
            STREAM_K: stream_k,
        }
        .values()
    };
    vec![
        (def, tile(64, 128, 6, false, 1, false), rows_at_most::<32>),
        (def, tile(64, 64, 6, false, 1, false), rows_at_most::<128>),
        (def, tile(64, 64, 6, false, 1, false), tiny_c),
        (def, tile(64, 128, 6, false, 1, false), small_c),
        (def, tile(128, 256, large_stages, false, 1, true), larger_c),
        (def, tile(128, 256, 4, false, 2, false), mid),
        (def, tile(128, 128, 5, true, 1, false), every_shape),
    ]
}

/// The heuristic defaults of the sm_80 Tensor Core GEMM `def` (`gemm_f16`
/// or `gemm_bf16`: one source, the same const parameters): 128 x 128 x 64
/// tiles of 64 x 64 warp tiles in 2 stages with 16-byte copies (k a
/// multiple of 8); for other k, element copies (those variants have 2
/// stages and BK = 32) in 256 x 128 tiles for a C of at least 2048 x 2048,
/// else 128 x 128. In five default bench runs on an H100 (sessions 29, 30
/// and 33, perf/LOG.md) every sweep at 2048 x 2048 x 1020 put the 256 x
/// 128 element-copy tile first (0.091-0.093 ms), 1.26x faster than the
/// 128 x 128 one (0.115-0.117 ms) the tuned path ran; no run measured
/// a smaller C with such a k.
fn tensor_core_defaults(def: &'static KernelDef) -> [Preference; 3] {
    let tile = |bm, aligned: bool| {
        gemm_f16::Consts {
            BM: bm,
            BN: 128,
            BK: if aligned { 64 } else { 32 },
            WARP: 64,
            STAGES: 2,
            ALIGNED: aligned,
            A_COL_MAJOR: false,
            B_ROW_MAJOR: false,
        }
        .values()
    };
    [
        (def, tile(128, true), every_shape),
        (def, tile(256, false), c_tiles_at_least::<256>),
        (def, tile(128, false), every_shape),
    ]
}

/// The host side of a GEMM's element types: random inputs, poisoned
/// outputs, and float64 references.
pub trait GemmElement: DeviceScalar {
    /// What outputs are filled with before a verification run: NaN for
    /// floats, a value no GEMM the tuner verifies can produce for integers.
    const POISON: Self;
    /// A random input: uniform in [-1, 1) for floats, over the whole type
    /// for i8; for i32 (C's initial values and the bias of the s8 GEMM),
    /// over i8's range, so that beta C and the bias stay far from
    /// overflow.
    fn random(rng: &mut StdRng) -> Self;
    /// The value as f64 (exact for every element type), for references.
    fn to_f64(self) -> f64;
    /// Whether an output is still the poison, or NaN or infinite: unwritten
    /// or overflowed.
    fn is_unwritten(self) -> bool {
        !self.to_f64().is_finite()
    }
}

/// An output element type, with the type of alpha and beta its kernels take.
pub trait GemmOutput: GemmElement {
    /// The type of alpha and beta: f32 for float outputs, i32 for i32.
    type Scale: DeviceScalar + Into<f64> + PartialEq;
    /// alpha = 1, beta = 0: `C = A B`, what tuning runs.
    const PLAIN: (Self::Scale, Self::Scale);
}

impl GemmElement for f32 {
    const POISON: Self = f32::NAN;
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-1.0f32..1.0)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

/// The 16-bit floats: random f32 inputs rounded to the type.
macro_rules! half_gemm_element {
    ($($half:ident),*) => {$(
        impl GemmElement for $half {
            const POISON: Self = $half::NAN;
            fn random(rng: &mut StdRng) -> Self {
                $half::from_f32(f32::random(rng))
            }
            fn to_f64(self) -> f64 {
                $half::to_f64(self)
            }
        }
    )*};
}
half_gemm_element!(f16, bf16);

/// The 8-bit floats: random f32 inputs rounded to the type.
macro_rules! fp8_gemm_element {
    ($($fp8:ident),*) => {$(
        impl GemmElement for $fp8 {
            const POISON: Self = $fp8::NAN;
            fn random(rng: &mut StdRng) -> Self {
                $fp8::from_f32(f32::random(rng))
            }
            fn to_f64(self) -> f64 {
                $fp8::to_f64(&self)
            }
        }
    )*};
}
fp8_gemm_element!(e4m3, e5m2);

impl GemmElement for i8 {
    const POISON: Self = i8::MIN;
    fn random(rng: &mut StdRng) -> Self {
        rng.random()
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl GemmElement for i32 {
    /// A sum of k products of i8 has |sum| <= 16384 k, below 2^31 for k <
    /// 2^17: i32::MIN is not a result there, and a larger k would wrap
    /// (which verification then reports as an unwritten output, not a
    /// wrong winner).
    const POISON: Self = i32::MIN;
    fn random(rng: &mut StdRng) -> Self {
        i32::from(rng.random::<i8>())
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn is_unwritten(self) -> bool {
        self == Self::POISON
    }
}

/// Float outputs take f32 alpha and beta (the accumulator's type).
macro_rules! float_gemm_output {
    ($($float:ident),*) => {$(
        impl GemmOutput for $float {
            type Scale = f32;
            const PLAIN: (f32, f32) = (1.0, 0.0);
        }
    )*};
}
float_gemm_output!(f32, f16, bf16);

impl GemmOutput for i32 {
    type Scale = i32;
    const PLAIN: (i32, i32) = (1, 0);
}

/// How a GEMM family's kernels take A: a dense matrix ([`DenseA`]: every
/// stock family but the sparse ones) or a 2:4 sparse one, compressed
/// ([`SparseA`]). The rest of a tuned GEMM (B, C, the bias, the problem,
/// the key's other parts, tuning and verification) is the same for both.
/// Sealed: these two are how the stock kernels take A.
pub trait OperandA<I: GemmElement, O: GemmOutput>: sealed::Sealed + Sized + 'static {
    /// What a call passes as A.
    type Arg<'a>: Copy;
    /// A tuning workload's A on the host: the dense matrix its reference
    /// multiplies, and what is uploaded.
    type Host;
    /// A tuning workload's A on the device.
    type Device;

    /// A's part of the key's dtypes for A in `layout`: the layout (`row`,
    /// `col`), or `sparse` (row-major and compressed).
    fn key_name(layout: MatrixLayout) -> &'static str;

    /// `count` GEMMs of `dims` stored back to back, as the kernels take them.
    fn packed(count: u32, dims: (u32, u32, u32)) -> GemmBatch;

    /// An `Err` (the message) for what the kernels cannot take in A's part
    /// of `problem`.
    fn refuse(problem: &GemmProblem<O::Scale>) -> Result<(), String>;

    /// `a` against `problem`, after [`OperandA::refuse`]: `Some` of its
    /// length in elements for `check_lengths` to check, `None` when checked
    /// here. The `Err` is the message.
    fn check(problem: &GemmProblem<O::Scale>, a: Self::Arg<'_>) -> Result<Option<usize>, String>;

    /// A workload's A from `random`, `problem.a_len()` random elements: as
    /// drawn, or pruned to 2:4 and compressed.
    fn host(problem: &GemmProblem<O::Scale>, random: Vec<I>) -> Result<Self::Host, Error>;

    /// The dense A of `host` (`problem.a_len()` elements in the problem's
    /// layout and batches).
    fn dense(host: &Self::Host) -> &[I];

    /// `host` uploaded.
    fn upload(rt: &Runtime, host: &Self::Host) -> Result<Self::Device, Error>;

    /// The device A as a call passes it.
    fn arg(device: &Self::Device) -> Self::Arg<'_>;

    /// `a` for a shorter borrow (both kinds of A are covariant in it; a
    /// generic associated type is not, unless it says so).
    fn reborrow<'l: 's, 's>(a: Self::Arg<'l>) -> Self::Arg<'s>;

    /// The arguments of a call with buffers of exactly the sizes the
    /// problem needs (a bias of n values, or a one-element one, unread,
    /// without): what legality is judged on. The `Err` is
    /// [`OperandA::refuse`]'s.
    fn call_args(problem: &GemmProblem<O::Scale>, with_bias: bool) -> Result<Vec<ArgInfo>, String>;

    /// One launch of `problem` with `candidate`, whose tile is `tile`
    /// ([`gemm_tile`]), after every check.
    fn launch(
        rt: &Runtime,
        candidate: &Candidate,
        tile: (u32, u32),
        problem: &GemmProblem<O::Scale>,
        operands: GemmOperands<'_, I, O, Self>,
    ) -> Result<(), Error>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DenseA {}
    impl Sealed for super::SparseA {}
}

/// A dense A: a buffer of `I` in the problem's layout ([`OperandA`]).
#[derive(Clone, Copy, Debug)]
pub struct DenseA;

/// A 2:4 sparse A, compressed: a [`DeviceCompressed`] of the row-major m x k
/// matrix (for batches, the stack the sparse GEMM's module docs describe:
/// [`crate::gemm_sparse`]) ([`OperandA`]).
#[derive(Clone, Copy, Debug)]
pub struct SparseA;

/// A buffer's [`ArgInfo`].
fn buffer_info(elem: warpforge::Scalar, len: u64, mutable: bool) -> ArgInfo {
    ArgInfo::Buffer { elem, len, mutable }
}

impl<I: GemmElement, O: GemmOutput> OperandA<I, O> for DenseA {
    type Arg<'a> = BufferRef<'a, I>;
    type Host = Vec<I>;
    type Device = DeviceBuffer<I>;

    fn key_name(layout: MatrixLayout) -> &'static str {
        layout_name(layout)
    }

    fn packed(count: u32, dims: (u32, u32, u32)) -> GemmBatch {
        GemmBatch::packed(count, dims)
    }

    fn refuse(_: &GemmProblem<O::Scale>) -> Result<(), String> {
        Ok(())
    }

    fn check(_: &GemmProblem<O::Scale>, a: BufferRef<'_, I>) -> Result<Option<usize>, String> {
        Ok(Some(a.len()))
    }

    fn host(_: &GemmProblem<O::Scale>, random: Vec<I>) -> Result<Vec<I>, Error> {
        Ok(random)
    }

    fn dense(host: &Vec<I>) -> &[I] {
        host
    }

    fn upload(rt: &Runtime, host: &Vec<I>) -> Result<DeviceBuffer<I>, Error> {
        rt.upload(host)
    }

    fn arg(device: &DeviceBuffer<I>) -> BufferRef<'_, I> {
        BufferRef::from(device)
    }

    fn reborrow<'l: 's, 's>(a: BufferRef<'l, I>) -> BufferRef<'s, I> {
        a
    }

    fn call_args(problem: &GemmProblem<O::Scale>, with_bias: bool) -> Result<Vec<ArgInfo>, String> {
        let kernel = problem.for_kernel();
        let (a_len, b_len) = kernel.operands(problem.a_len(), problem.b_len());
        let bias_len = if with_bias { problem.n.into() } else { 1 };
        let scalars = kernel.scalar_args(kernel.bias_mode(with_bias));
        // Last, the workspace the wgmma kernels also take (the launch lends
        // it; no clause reads its length): the other kernels' checks take
        // the arguments before it.
        let workspace = [
            buffer_info(O::Scale::SCALAR, 1, true),
            buffer_info(warpforge::Scalar::U32, 1, true),
        ];
        Ok([
            buffer_info(I::SCALAR, a_len, false),
            buffer_info(I::SCALAR, b_len, false),
            buffer_info(O::SCALAR, problem.c_len(), true),
            buffer_info(O::SCALAR, bias_len, false),
        ]
        .into_iter()
        .chain(scalars.iter().map(KernelArg::info))
        .chain(workspace)
        .collect())
    }

    /// A column-major C as `C^T = B^T A^T`, the operands swapped
    /// (`GemmProblem::for_kernel`); the persistent `wgmma` kernels on a grid
    /// of their own.
    fn launch(
        rt: &Runtime,
        candidate: &Candidate,
        tile: (u32, u32),
        problem: &GemmProblem<O::Scale>,
        operands: GemmOperands<'_, I, O, DenseA>,
    ) -> Result<(), Error> {
        let kernel = problem.for_kernel();
        let GemmOperands {
            a,
            b,
            c,
            bias,
            no_bias,
        } = operands;
        let bias_mode = kernel.bias_mode(bias.is_some());
        let (a, b) = kernel.operands(a, b);
        let (def, consts) = (candidate.def, &candidate.consts[..]);
        let walks = gemm_wgmma::walks_its_tiles(def);
        let grid = match walks {
            true => gemm_wgmma::persistent_grid(rt, def, consts, kernel.grid(tile))?,
            false => kernel.grid(tile),
        };
        let mut workspace = match walks {
            true => Some(gemm_wgmma::Workspace::<O::Scale>::lend(
                rt, def, consts, &grid,
            )?),
            false => None,
        };
        let mut args = kernel.args(a, b, c, bias.unwrap_or(no_bias), bias_mode);
        if let Some(workspace) = workspace.as_mut() {
            args.extend(workspace.args());
        }
        rt.launch(def, consts, grid, &mut args)
    }
}

/// A sparse workload's A: the dense 2:4 matrix and its compression.
pub struct SparseHost<T> {
    dense: Vec<T>,
    compressed: Compressed<T>,
}

/// Rows of the compressed matrix a sparse `problem` reads: every batch's, at
/// `stride_a / k` rows apart.
fn sparse_rows<S: Copy>(problem: &GemmProblem<S>) -> u64 {
    problem.a_len() / u64::from(problem.k.max(1))
}

impl<T: GemmOutput<Scale = f32> + SparseElement> OperandA<T, T> for SparseA {
    type Arg<'a> = &'a DeviceCompressed<T>;
    type Host = SparseHost<T>;
    type Device = DeviceCompressed<T>;

    fn key_name(_: MatrixLayout) -> &'static str {
        "sparse"
    }

    fn packed(count: u32, dims: (u32, u32, u32)) -> GemmBatch {
        gemm_sparse::packed_sparse_batch(count, dims)
    }

    fn refuse(problem: &GemmProblem<f32>) -> Result<(), String> {
        gemm_sparse::sparse_kernel_problem(problem).map(drop)
    }

    fn check(problem: &GemmProblem<f32>, a: &DeviceCompressed<T>) -> Result<Option<usize>, String> {
        gemm_sparse::check_compressed(problem, (a.rows(), a.cols())).map(|()| None)
    }

    fn host(problem: &GemmProblem<f32>, random: Vec<T>) -> Result<SparseHost<T>, Error> {
        let (rows, k) = (sparse_rows(problem) as usize, problem.k as usize);
        let compressed = Compressed::prune(&random, rows, k)
            .map_err(|e| Error::Tune(format!("cannot compress the tuning inputs' A: {e}")))?;
        Ok(SparseHost {
            dense: compressed.decompress(),
            compressed,
        })
    }

    fn dense(host: &SparseHost<T>) -> &[T] {
        &host.dense
    }

    fn upload(rt: &Runtime, host: &SparseHost<T>) -> Result<DeviceCompressed<T>, Error> {
        DeviceCompressed::upload(rt, &host.compressed)
    }

    fn arg(device: &DeviceCompressed<T>) -> &DeviceCompressed<T> {
        device
    }

    fn reborrow<'l: 's, 's>(a: &'l DeviceCompressed<T>) -> &'s DeviceCompressed<T> {
        a
    }

    fn call_args(problem: &GemmProblem<f32>, with_bias: bool) -> Result<Vec<ArgInfo>, String> {
        let kernel = gemm_sparse::sparse_kernel_problem(problem)?;
        let (rows, k) = (sparse_rows(problem) as usize, problem.k as usize);
        let bias_len = if with_bias { problem.n.into() } else { 1 };
        let c_col_major = u32::from(problem.c_layout == MatrixLayout::ColMajor);
        let scalars = kernel.scalar_args(kernel.bias_mode(with_bias));
        Ok([
            buffer_info(T::SCALAR, (rows * value_cols(k)) as u64, false),
            buffer_info(u32::SCALAR, metadata_words(rows, k) as u64, false),
            buffer_info(T::SCALAR, problem.b_len(), false),
            buffer_info(T::SCALAR, problem.c_len(), true),
            buffer_info(T::SCALAR, bias_len, false),
        ]
        .into_iter()
        .chain(scalars.iter().map(KernelArg::info))
        .chain([KernelArg::scalar(c_col_major).info()])
        .collect())
    }

    fn launch(
        rt: &Runtime,
        candidate: &Candidate,
        tile: (u32, u32),
        problem: &GemmProblem<f32>,
        operands: GemmOperands<'_, T, T, SparseA>,
    ) -> Result<(), Error> {
        let kernel = gemm_sparse::sparse_kernel_problem(problem).map_err(|message| {
            Error::InvalidLaunch {
                kernel: candidate.name().to_string(),
                message,
            }
        })?;
        let GemmOperands { a, b, c, bias, .. } = operands;
        let mut args = gemm_sparse::sparse_args(&kernel, problem.c_layout, a, b, c, bias);
        rt.launch(
            candidate.def,
            &candidate.consts,
            kernel.grid(tile),
            &mut args,
        )
    }
}

/// A layout's name in the key's dtypes.
fn layout_name(layout: MatrixLayout) -> &'static str {
    match layout {
        MatrixLayout::RowMajor => "row",
        MatrixLayout::ColMajor => "col",
    }
}

impl<I: GemmElement, O: GemmOutput, A: OperandA<I, O>> GemmKind<I, O, A> {
    /// The tuning family: every variant of every kernel, and the heuristic default.
    pub fn family(&self) -> Result<Family, Error> {
        (self.preferred)().into_iter().try_fold(
            Family::new(self.name, &(self.kernels)())?,
            |family, (def, consts, applies)| family.prefer_for(def, &consts, applies),
        )
    }

    /// The problem of [`TunedGemm::run`]: one m x n x k GEMM, A and C
    /// row-major, B in the kind's layout, no activation.
    pub fn problem(
        &self,
        dims: (u32, u32, u32),
        alpha: O::Scale,
        beta: O::Scale,
    ) -> GemmProblem<O::Scale> {
        GemmProblem {
            b_layout: self.b_layout,
            ..GemmProblem::new(dims, alpha, beta)
        }
    }

    /// What decides the variant of a call on `problem`, with a bias when
    /// `with_bias`: its tuning key's dtypes, shape bucket and alignments, and
    /// the arguments legality is judged on (see the module's doc). An `Err`
    /// for a problem no variant of the kind computes: GELU on an integer
    /// output.
    pub fn call(
        &self,
        problem: &GemmProblem<O::Scale>,
        with_bias: bool,
    ) -> Result<GemmCall, Error> {
        self.refuse_uncomputable(problem)?;
        let GemmProblem { m, n, k, batch, .. } = *problem;
        Ok(GemmCall {
            dtypes: self.dtypes(problem, with_bias),
            shape: ShapeBucket::batched_gemm(m.into(), n.into(), k.into(), batch.count.into()),
            alignments: self.alignments(problem),
            args: A::call_args(problem, with_bias).map_err(|message| self.refusal(message))?,
        })
    }

    /// Why no variant of the kind takes `problem` (with a bias when
    /// `with_bias`) on `device`, or `None` when one does: the call's refusal,
    /// or the first candidate's (an fp8 GEMM off Hopper, or with k not a
    /// multiple of 16). `Err` only when the kind's family cannot be built.
    pub fn unrunnable(
        &self,
        problem: &GemmProblem<O::Scale>,
        with_bias: bool,
        device: &DeviceInfo,
    ) -> Result<Option<String>, Error> {
        let call = match self.call(problem, with_bias) {
            Ok(call) => call,
            Err(refusal) => return Ok(Some(refusal.to_string())),
        };
        let (family, call) = (self.family()?, call.call());
        if family.heuristic(&call, device).is_some() {
            return Ok(None);
        }
        let why = family.first_refusal(&call, device);
        Ok(Some(format!(
            "no variant of `{}` takes this problem on {}{why}",
            self.name, device.name
        )))
    }

    /// An `Err` for what no kernel of a kind computes: GELU needs a float
    /// output, and a sparse A has its own needs ([`OperandA::refuse`]).
    fn refuse_uncomputable(&self, problem: &GemmProblem<O::Scale>) -> Result<(), Error> {
        if problem.activation == Activation::GeluTanh && self.precision == GemmPrecision::I8 {
            return Err(self.refusal(
                "it has an integer output, and GELU needs a floating-point one: use no \
                 activation or ReLU, or convert the output and apply GELU in a kernel of its own"
                    .to_string(),
            ));
        }
        A::refuse(problem).map_err(|message| self.refusal(message))
    }

    /// The error of a call the kind refuses, from what was wrong and what to do.
    fn refusal(&self, message: String) -> Error {
        Error::Tune(format!("`{}` cannot take this GEMM: {message}", self.name))
    }

    /// The dtype, layout and epilogue mix of the key:
    /// `f16.row*f16.col->f16.row`, then `+bias` with a bias, then `+relu` or
    /// `+gelu` with an activation (inputs named by the precision, so tf32
    /// differs from f32).
    fn dtypes(&self, problem: &GemmProblem<O::Scale>, with_bias: bool) -> String {
        let input = self.precision.name();
        let bias = if with_bias { "+bias" } else { "" };
        let activation = match problem.activation {
            Activation::Identity => "",
            Activation::Relu => "+relu",
            Activation::GeluTanh => "+gelu",
        };
        format!(
            "{input}.{}*{input}.{}->{}.{}{bias}{activation}",
            A::key_name(problem.a_layout),
            layout_name(problem.b_layout),
            O::SCALAR.name(),
            layout_name(problem.c_layout),
        )
    }

    /// The alignment facts of the key: the largest power of two, at most 16,
    /// that divides the byte length of A's, B's and C's leading dimension,
    /// and of A's and B's batch stride (16 for one batch, where strides are
    /// not read).
    fn alignments(&self, problem: &GemmProblem<O::Scale>) -> [u32; 5] {
        let GemmProblem { m, n, k, batch, .. } = *problem;
        let leading = |layout: MatrixLayout, (rows, cols): (u32, u32)| {
            layout.leading_dimension(rows as usize, cols as usize) as u64
        };
        let (input, output) = (size_of::<I>() as u64, size_of::<O>() as u64);
        let stride = |stride: u32| match batch.count {
            0 | 1 => 16,
            _ => byte_alignment(u64::from(stride) * input),
        };
        [
            byte_alignment(leading(problem.a_layout, (m, k)) * input),
            byte_alignment(leading(problem.b_layout, (k, n)) * input),
            byte_alignment(leading(problem.c_layout, (m, n)) * output),
            stride(batch.stride_a),
            stride(batch.stride_b),
        ]
    }

    /// The error bound for one output element of a correct variant: with
    /// `magnitude` the sum of the magnitudes of what is added before the
    /// activation (`|alpha| sum_p |a_ip b_pj| + |beta c_ij| + |bias_j|`) and
    /// `value` the float64 result, `gamma_{k+3}(u) * magnitude` for the
    /// accumulation and the roundings of alpha, beta C and the bias (Higham,
    /// *Accuracy and Stability of Numerical Algorithms*, 3.1: any summation
    /// order), times the activation's largest slope, plus GELU's evaluation
    /// in f32 (2^-10 of the magnitude), plus the rounding of the output,
    /// `u_out * (|value| + that)`, plus half its smallest subnormal. `u` is
    /// 2^-24 for f32 FMAs, 2^-23 on Tensor Cores (their adders may
    /// truncate) and 2^-13 for the fp8 ones (their sums keep about 14 bits);
    /// tf32 adds the rounding of both inputs; i8 is exact.
    /// `tests/src/compare.rs`'s `GemmTolerance` is the same bound, for the
    /// GPU tier.
    pub fn allowed_error(&self, k: u32, activation: Activation, magnitude: f64, value: f64) -> f64 {
        const TF32_UNIT: f64 = 1.0 / 1024.0;
        const GELU_EVALUATION: f64 = 1.0 / 1024.0;
        let (unit, input) = match self.precision {
            GemmPrecision::I8 => return 0.0,
            GemmPrecision::F32 => (2f64.powi(-24), 0.0),
            GemmPrecision::Tf32 => (2f64.powi(-23), 2.0 * TF32_UNIT + TF32_UNIT * TF32_UNIT),
            GemmPrecision::F16 | GemmPrecision::Bf16 => (2f64.powi(-23), 0.0),
            GemmPrecision::E4m3 | GemmPrecision::E5m2 => (2f64.powi(-13), 0.0),
        };
        // The output's rounding: C's type, which a kind may have wider than
        // its precision's (f16 products into f32 C).
        let (output_unit, output_subnormal) = match O::SCALAR {
            warpforge::Scalar::F16 => (2f64.powi(-11), 2f64.powi(-24)),
            warpforge::Scalar::Bf16 => (2f64.powi(-8), 2f64.powi(-133)),
            _ => (2f64.powi(-24), 2f64.powi(-149)),
        };
        let n = f64::from(k) + 3.0;
        let gamma = n * unit / (1.0 - n * unit);
        let accumulated = (gamma + input) * magnitude;
        let evaluation = match activation {
            Activation::GeluTanh => GELU_EVALUATION * magnitude,
            Activation::Identity | Activation::Relu => 0.0,
        };
        let activated = activation.max_slope() * accumulated + evaluation;
        activated + output_unit * (value.abs() + activated) + output_subnormal / 2.0
    }
}

/// What decides the variant of one GEMM call ([`GemmKind::call`]): the
/// parts of its tuning key that come from the call, and the arguments the
/// variants' `requires` are checked on. [`GemmCall::call`] lends it to a
/// dispatcher.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmCall {
    dtypes: String,
    shape: ShapeBucket,
    alignments: [u32; 5],
    args: Vec<ArgInfo>,
}

impl GemmCall {
    /// The call as [`Dispatcher::select`] and [`Dispatcher::key`] take it.
    pub fn call(&self) -> Call<'_> {
        Call {
            dtypes: &self.dtypes,
            shape: self.shape,
            alignments: &self.alignments,
            args: &self.args,
        }
    }
}

/// The largest power of two dividing `bytes`, at most 16 (16 for 0).
fn byte_alignment(bytes: u64) -> u32 {
    if bytes == 0 {
        16
    } else {
        1 << bytes.trailing_zeros().min(4)
    }
}

/// The tile (BM, BN) of a GEMM candidate: its grid has one block per tile.
pub fn gemm_tile(candidate: &Candidate) -> Result<(u32, u32), Error> {
    let value = |name: &str| {
        candidate
            .def
            .ir
            .const_params
            .iter()
            .position(|p| p.name == name)
            .and_then(|i| candidate.consts.get(i))
            .and_then(|&v| u32::try_from(v).ok())
            .ok_or_else(|| {
                Error::Tune(format!(
                    "`{}` is listed as a GEMM kernel, and has no const parameter `{name}` (u32): \
                     a GemmKind's kernels run one block per BM x BN tile",
                    candidate.name()
                ))
            })
    };
    Ok((value("BM")?, value("BN")?))
}

/// The operands of one tuned launch ([`OperandA::launch`]): A, B, C, the
/// bias if any, and the bias argument of a launch without one (a
/// one-element buffer the kernels never read). Made by [`TunedGemm`] and
/// [`GemmWorkload`].
pub struct GemmOperands<'a, I: GemmElement, O: GemmOutput, A: OperandA<I, O>> {
    a: A::Arg<'a>,
    b: BufferRef<'a, I>,
    c: BufferMut<'a, O>,
    bias: Option<BufferRef<'a, O>>,
    no_bias: BufferRef<'a, O>,
}

/// A GEMM family's dispatcher: [`TunedGemm::gemm`] sends each call to the
/// variant tuned for its problem.
pub struct TunedGemm<I: GemmElement, O: GemmOutput, A: OperandA<I, O> = DenseA> {
    kind: &'static GemmKind<I, O, A>,
    dispatcher: Arc<Dispatcher>,
    /// Each candidate's (BM, BN).
    tiles: Vec<(u32, u32)>,
    /// The bias argument of every launch without a bias: one element, never read.
    no_bias: DeviceBuffer<O>,
    /// The last selection's problem, bias flag and result: a call that
    /// repeats it (a loop's) skips building its tuning key and the
    /// dispatcher's lookup (0.6 us of a launch's host time), which would
    /// give the same result, since the dispatcher's resolutions never change.
    last: Mutex<Option<LastSelection<O::Scale>>>,
}

/// A selection and the call it was made for.
#[derive(Clone, Copy)]
struct LastSelection<S> {
    problem: GemmProblem<S>,
    with_bias: bool,
    selection: Selection,
}

/// The seed of the inputs [`MissPolicy::TuneNow`] tunes on: fixed, so that
/// a tuning run can be repeated.
const TUNE_NOW_SEED: u64 = 0x7761_7270_666f_7267;

impl<I: GemmElement, O: GemmOutput, A: OperandA<I, O>> TunedGemm<I, O, A> {
    /// The dispatcher of `kind` on `rt`'s device that the runtime shares
    /// among its tuned entry points, with the runtime's
    /// [`TuneSettings`](warpforge::tune::TuneSettings) (by default the miss
    /// policy of `WARPFORGE_TUNE_MISS` and the database in the default
    /// directory, `WARPFORGE_TUNE_DIR`, see `warpforge::tune::default_dir`).
    pub fn new(
        rt: &Runtime,
        kind: &'static GemmKind<I, O, A>,
    ) -> Result<TunedGemm<I, O, A>, Error> {
        TunedGemm::on(rt, kind, rt.tuned_dispatcher(kind.name, || kind.family())?)
    }

    /// A dispatcher of its own, with the miss policy and (when `Some`) the
    /// database directory given.
    pub fn with_policy(
        rt: &Runtime,
        kind: &'static GemmKind<I, O, A>,
        policy: MissPolicy,
        dir: Option<&Path>,
    ) -> Result<TunedGemm<I, O, A>, Error> {
        let dispatcher = Dispatcher::new(rt, kind.family()?, policy, dir)?;
        TunedGemm::on(rt, kind, Arc::new(dispatcher))
    }

    fn on(
        rt: &Runtime,
        kind: &'static GemmKind<I, O, A>,
        dispatcher: Arc<Dispatcher>,
    ) -> Result<TunedGemm<I, O, A>, Error> {
        let tiles = dispatcher
            .family()
            .candidates()
            .iter()
            .map(gemm_tile)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TunedGemm {
            kind,
            dispatcher,
            tiles,
            no_bias: rt.alloc_zeroed(1)?,
            last: Mutex::new(None),
        })
    }

    /// The family this dispatches.
    pub fn kind(&self) -> &'static GemmKind<I, O, A> {
        self.kind
    }

    /// The dispatcher underneath: its statistics, warnings, stored records
    /// and the tuning key of a call ([`Dispatcher::key`] of
    /// [`GemmKind::call`]):
    ///
    /// ```no_run
    /// # use warpforge::prelude::*;
    /// # use warpforge_kernels::gemm_problem::{Activation, GemmProblem};
    /// # use warpforge_kernels::tuned::{TunedGemm, GEMM_F16};
    /// # fn main() -> Result<(), Error> {
    /// # let rt = Runtime::new()?;
    /// let gemm = TunedGemm::new(&rt, &GEMM_F16)?;
    /// let problem = GemmProblem {
    ///     activation: Activation::Relu,
    ///     ..GemmProblem::new((4096, 4096, 4096), 1.0, 0.0)
    /// };
    /// let call = GEMM_F16.call(&problem, true)?; // with a bias
    /// let key = gemm.dispatcher().key(&call.call()); // what the call's winner is stored under
    /// assert_eq!(key.dtypes, "f16.row*f16.col->f16.row+bias+relu");
    /// let stored = gemm.dispatcher().stored(&call.call()); // its record, if the call was tuned
    /// # let _ = stored;
    /// # Ok(())
    /// # }
    /// ```
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// `C = alpha * A B + beta * C` (A m x k row-major, B k x n in the
    /// kind's layout, C m x n row-major): [`TunedGemm::gemm`] on
    /// [`GemmKind::problem`] without a bias.
    #[allow(clippy::too_many_arguments)]
    pub fn run<'a>(
        &self,
        rt: &Runtime,
        a: impl Into<A::Arg<'a>>,
        b: impl Into<BufferRef<'a, I>>,
        c: impl Into<BufferMut<'a, O>>,
        dims: (u32, u32, u32),
        alpha: O::Scale,
        beta: O::Scale,
    ) -> Result<(), Error> {
        let problem = self.kind.problem(dims, alpha, beta);
        self.gemm(rt, &problem, a, b, c, None)
    }

    /// For each batch, `C = activation(alpha * A B + beta * C + bias)` (see
    /// [`GemmProblem`]: layouts, strided batches, a bias of one value per
    /// column of C) with the variant [`TunedGemm::select`] picks for the
    /// problem. The buffers and views are those of
    /// [`GemmVariant::run`](crate::gemm_problem::GemmVariant::run); they are
    /// checked against the problem before anything is selected or tuned,
    /// and a problem with no output element does nothing.
    pub fn gemm<'a>(
        &self,
        rt: &Runtime,
        problem: &GemmProblem<O::Scale>,
        a: impl Into<A::Arg<'a>>,
        b: impl Into<BufferRef<'a, I>>,
        c: impl Into<BufferMut<'a, O>>,
        bias: Option<BufferRef<'a, O>>,
    ) -> Result<(), Error> {
        let operands = self.operands(a.into(), b.into(), c.into(), bias);
        if !self.check(problem, &operands)? {
            return Ok(());
        }
        let selection = self.select(rt, problem, operands.bias.is_some())?;
        let candidate = selection.candidate;
        let chosen = &self.dispatcher.family().candidates()[candidate];
        A::launch(rt, chosen, self.tiles[candidate], problem, operands)
    }

    /// The variant for a call on `problem` (with a bias when `with_bias`),
    /// and where it came from.
    pub fn select(
        &self,
        rt: &Runtime,
        problem: &GemmProblem<O::Scale>,
        with_bias: bool,
    ) -> Result<Selection, Error> {
        // A poisoned memo is still whole: it is written in one assignment.
        // Not held while a call resolves, which may tune for seconds.
        let last = || self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = *last() {
            if last.problem == *problem && last.with_bias == with_bias {
                return Ok(last.selection);
            }
        }
        let call = self.kind.call(problem, with_bias)?;
        let selection = self.dispatcher.select(rt, &call.call(), || {
            let workload = GemmWorkload::new(rt, self.kind, problem, with_bias, TUNE_NOW_SEED)?;
            Ok(Box::new(workload) as Box<dyn Workload>)
        })?;
        *last() = Some(LastSelection {
            problem: *problem,
            with_bias,
            selection,
        });
        Ok(selection)
    }

    /// [`TunedGemm::gemm`] with the family's candidate `candidate` instead
    /// of the selected one (which must be able to take the problem: the
    /// launch checks its `requires`).
    #[allow(clippy::too_many_arguments)]
    pub fn launch<'a>(
        &self,
        rt: &Runtime,
        candidate: usize,
        problem: &GemmProblem<O::Scale>,
        a: impl Into<A::Arg<'a>>,
        b: impl Into<BufferRef<'a, I>>,
        c: impl Into<BufferMut<'a, O>>,
        bias: Option<BufferRef<'a, O>>,
    ) -> Result<(), Error> {
        let chosen = self
            .dispatcher
            .family()
            .candidates()
            .get(candidate)
            .ok_or_else(|| {
                Error::Tune(format!(
                "`{}` has {} candidates, and candidate {candidate} was asked for: pass an index \
                 from its dispatcher's family or selection",
                self.kind.name,
                self.tiles.len()
            ))
            })?;
        let operands = self.operands(a.into(), b.into(), c.into(), bias);
        if !self.check(problem, &operands)? {
            return Ok(());
        }
        A::launch(rt, chosen, self.tiles[candidate], problem, operands)
    }

    fn operands<'a, 'l: 'a>(
        &'a self,
        a: A::Arg<'l>,
        b: BufferRef<'a, I>,
        c: BufferMut<'a, O>,
        bias: Option<BufferRef<'a, O>>,
    ) -> GemmOperands<'a, I, O, A> {
        GemmOperands {
            a: A::reborrow(a),
            b,
            c,
            bias,
            no_bias: BufferRef::from(&self.no_bias),
        }
    }

    /// The buffers against the problem, and whether it has an output
    /// element (`Ok(false)`: nothing to do). The `Err` says what is wrong.
    fn check(
        &self,
        problem: &GemmProblem<O::Scale>,
        operands: &GemmOperands<'_, I, O, A>,
    ) -> Result<bool, Error> {
        self.kind.refuse_uncomputable(problem)?;
        let refuse = |message| Error::InvalidLaunch {
            kernel: self.kind.name.to_string(),
            message,
        };
        let a_len = A::check(problem, operands.a).map_err(refuse)?;
        let lengths = (
            a_len,
            operands.b.len(),
            operands.c.len(),
            operands.bias.map(|bias| bias.len()),
        );
        check_lengths(problem, lengths).map_err(refuse)?;
        Ok(problem.m > 0 && problem.n > 0 && problem.batch.count > 0)
    }
}

/// The most input sets a workload rotates through.
const MAX_INPUT_SETS: usize = 16;
/// Output elements checked against the float64 reference per verification
/// (all of them for smaller outputs); the rest are checked for NaN only.
const CHECKED_OUTPUTS: usize = 256;

/// One output element verification compares with the float64 reference.
#[derive(Clone, Copy, Debug)]
struct CheckedOutput {
    /// Its index in C's buffer.
    index: usize,
    /// Its batch, row and column.
    at: (usize, usize, usize),
    /// `sum_p a_ip b_pj` and `sum_p |a_ip b_pj|`.
    product: (f64, f64),
    /// C's initial value there (0 where the problem does not read C).
    c: f64,
    /// The bias of its column (0 without one).
    bias: f64,
}

/// The tuning inputs of one GEMM call on a whole [`GemmProblem`]: random A
/// and B (in [-1, 1) for floats) in the problem's layouts and batch
/// strides, a random bias when the call has one, and as many copies of (A,
/// B, C) as make them together at least twice the L2 cache (at most
/// `MAX_INPUT_SETS`, 16), launched with the problem's alpha, beta and
/// activation.
///
/// Verification runs the candidate on the first set with C poisoned and
/// beta = 0, and checks that every output element of every batch is
/// written, finite, and that 256 (`CHECKED_OUTPUTS`) of them (the corners of
/// the first and last batch, last rows and columns, and random ones) are
/// within [`GemmKind::allowed_error`] of the float64 reference (which
/// applies the layouts, batches, alpha, the bias and the activation:
/// [`reference_epilogue`]), and that the elements between batches of C are
/// still the poison. Where beta is not 0 it then runs again from a random
/// C (the poison between batches) and checks the same elements with beta.
pub struct GemmWorkload<I: GemmElement, O: GemmOutput, A: OperandA<I, O> = DenseA> {
    kind: &'static GemmKind<I, O, A>,
    problem: GemmProblem<O::Scale>,
    sets: Vec<(A::Device, DeviceBuffer<I>, DeviceBuffer<O>)>,
    poison: DeviceBuffer<O>,
    /// C before the run with the problem's beta, where it is not 0.
    initial_c: Option<DeviceBuffer<O>>,
    bias: Option<DeviceBuffer<O>>,
    no_bias: DeviceBuffer<O>,
    checked: Vec<CheckedOutput>,
}

impl<I: GemmElement, O: GemmOutput, A: OperandA<I, O>> GemmWorkload<I, O, A> {
    /// The inputs of a call of `kind` on `problem` (with a bias when
    /// `with_bias`) on `rt`'s device, drawn from `seed`.
    pub fn new(
        rt: &Runtime,
        kind: &'static GemmKind<I, O, A>,
        problem: &GemmProblem<O::Scale>,
        with_bias: bool,
        seed: u64,
    ) -> Result<GemmWorkload<I, O, A>, Error> {
        let GemmProblem { m, n, k, batch, .. } = *problem;
        if m == 0 || n == 0 || k == 0 || batch.count == 0 {
            return Err(Error::Tune(format!(
                "cannot tune {} batches of a {m} x {n} x {k} GEMM: every dimension and the batch \
                 count must be at least 1",
                batch.count
            )));
        }
        kind.refuse_uncomputable(problem)?;
        let (a_len, b_len, c_len) = (
            problem.a_len() as usize,
            problem.b_len() as usize,
            problem.c_len() as usize,
        );
        check_lengths(problem, (Some(a_len), b_len, c_len, Some(n as usize)))
            .map_err(|message| Error::Tune(format!("cannot tune this GEMM: {message}")))?;
        let mut rng = StdRng::seed_from_u64(seed);
        let a_host = A::host(problem, (0..a_len).map(|_| I::random(&mut rng)).collect())?;
        let host_a = A::dense(&a_host);
        let host_b: Vec<I> = (0..b_len).map(|_| I::random(&mut rng)).collect();
        let host_bias: Option<Vec<O>> =
            with_bias.then(|| (0..n).map(|_| O::random(&mut rng)).collect());
        let reads_c = problem.beta.into() != 0.0;
        // C's initial values within its batches, the poison between them.
        let host_c: Option<Vec<O>> = reads_c.then(|| {
            (0..c_len)
                .map(|index| match in_batch(problem, index) {
                    Some(_) => O::random(&mut rng),
                    None => O::POISON,
                })
                .collect()
        });
        let set_bytes = (a_len + b_len) * size_of::<I>() + c_len * size_of::<O>();
        let l2 = rt.device().l2_cache_bytes as usize;
        let count = (2 * l2).div_ceil(set_bytes).clamp(1, MAX_INPUT_SETS);
        let sets = (0..count)
            .map(|_| {
                Ok((
                    A::upload(rt, &a_host)?,
                    rt.upload(&host_b)?,
                    rt.alloc_zeroed(c_len)?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let (m, n, batches) = (m as usize, n as usize, batch.count as usize);
        let positions: Vec<(usize, usize, usize)> = if batches * m * n <= CHECKED_OUTPUTS {
            (0..batches)
                .flat_map(|b| (0..m).flat_map(move |i| (0..n).map(move |j| (b, i, j))))
                .collect()
        } else {
            let last = batches - 1;
            let mut positions = vec![
                (0, 0, 0),
                (0, 0, n - 1),
                (0, m - 1, 0),
                (0, m - 1, n - 1),
                (last, 0, 0),
                (last, 0, n - 1),
                (last, m - 1, 0),
                (last, m - 1, n - 1),
            ];
            let random_batch = |rng: &mut StdRng| rng.random_range(0..batches);
            for _ in 0..16 {
                let b = random_batch(&mut rng);
                positions.push((b, m - 1, rng.random_range(0..n)));
                let b = random_batch(&mut rng);
                positions.push((b, rng.random_range(0..m), n - 1));
            }
            while positions.len() < CHECKED_OUTPUTS {
                let b = random_batch(&mut rng);
                positions.push((b, rng.random_range(0..m), rng.random_range(0..n)));
            }
            positions
        };
        let checked = positions
            .into_iter()
            .map(|(b, i, j)| {
                let a_at = |p: usize| {
                    b * batch.stride_a as usize + problem.a_layout.index((i, p), (m, k as usize))
                };
                let b_at = |p: usize| {
                    b * batch.stride_b as usize + problem.b_layout.index((p, j), (k as usize, n))
                };
                let product = (0..k as usize).fold((0.0, 0.0), |(sum, magnitude), p| {
                    let ab = host_a[a_at(p)].to_f64() * host_b[b_at(p)].to_f64();
                    (sum + ab, magnitude + ab.abs())
                });
                let index = b * batch.stride_c as usize + problem.c_layout.index((i, j), (m, n));
                CheckedOutput {
                    index,
                    at: (b, i, j),
                    product,
                    c: host_c.as_ref().map_or(0.0, |c| c[index].to_f64()),
                    bias: host_bias.as_ref().map_or(0.0, |bias| bias[j].to_f64()),
                }
            })
            .collect();
        Ok(GemmWorkload {
            kind,
            problem: *problem,
            poison: rt.upload(&vec![O::POISON; c_len])?,
            initial_c: host_c.map(|c| rt.upload(&c)).transpose()?,
            bias: host_bias.map(|bias| rt.upload(&bias)).transpose()?,
            no_bias: rt.alloc_zeroed(1)?,
            sets,
            checked,
        })
    }

    fn launch_problem(
        &mut self,
        rt: &Runtime,
        candidate: &Candidate,
        set: usize,
        problem: &GemmProblem<O::Scale>,
    ) -> Result<(), Error> {
        let tile = gemm_tile(candidate)?;
        let (a, b, c) = &mut self.sets[set];
        let operands = GemmOperands {
            a: A::arg(a),
            b: BufferRef::from(&*b),
            c: BufferMut::from(c),
            bias: self.bias.as_ref().map(BufferRef::from),
            no_bias: BufferRef::from(&self.no_bias),
        };
        A::launch(rt, candidate, tile, problem, operands)
    }

    /// Runs `candidate` on the first set with `problem` (this workload's,
    /// or it with beta 0), C first set to `initial`, and checks the outputs.
    fn verify_run(
        &mut self,
        rt: &Runtime,
        candidate: &Candidate,
        problem: &GemmProblem<O::Scale>,
        initial: Initial,
    ) -> Result<Result<(), String>, Error> {
        match initial {
            Initial::Poison => rt.copy(&self.poison, &mut self.sets[0].2)?,
            Initial::Random => {
                let Some(initial_c) = &self.initial_c else {
                    return Ok(Ok(()));
                };
                rt.copy(initial_c, &mut self.sets[0].2)?
            }
        }
        self.launch_problem(rt, candidate, 0, problem)?;
        let out = rt.download(&self.sets[0].2)?;
        let mut unwritten = (0, None);
        let mut between = (0, None);
        for (index, v) in out.iter().enumerate() {
            match in_batch(problem, index) {
                Some(at) if v.is_unwritten() => {
                    unwritten.0 += 1;
                    unwritten.1 = unwritten.1.or(Some(at));
                }
                None if !v.is_unwritten() => {
                    between.0 += 1;
                    between.1 = between.1.or(Some(index));
                }
                _ => {}
            }
        }
        if let (count, Some((b, i, j))) = unwritten {
            let batches = problem.batch.count;
            return Ok(Err(format!(
                "{count} of {} outputs are the poison, NaN or infinite (unwritten or \
                 overflowed), the first in batch {b} of {batches}, at row {i}, column {j}",
                batches as usize * problem.m as usize * problem.n as usize,
            )));
        }
        if let (count, Some(index)) = between {
            return Ok(Err(format!(
                "{count} elements of C between its batches were written (none may be), the first \
                 at index {index}"
            )));
        }
        let scales = (problem.alpha.into(), problem.beta.into());
        for checked in &self.checked {
            let (value, magnitude) = reference_epilogue(
                scales,
                problem.activation,
                checked.product,
                checked.c,
                checked.bias,
            );
            let got = out[checked.index].to_f64();
            let allowed = self
                .kind
                .allowed_error(problem.k, problem.activation, magnitude, value);
            if (got - value).abs() > allowed {
                let (b, i, j) = checked.at;
                return Ok(Err(format!(
                    "C[{i}][{j}] of batch {b} = {got}, the float64 reference is {value}, and the \
                     error bound {allowed:.2e}"
                )));
            }
        }
        Ok(Ok(()))
    }
}

/// What C holds before a verification run.
#[derive(Clone, Copy)]
enum Initial {
    /// The poison: the problem run with beta 0 must write every element.
    Poison,
    /// Random values, for the problem's own beta (none when it is 0).
    Random,
}

/// The (batch, row, column) of element `index` of C's buffer, or `None`
/// between batches.
fn in_batch<S: Copy>(problem: &GemmProblem<S>, index: usize) -> Option<(usize, usize, usize)> {
    let (m, n) = (problem.m as usize, problem.n as usize);
    let (count, stride) = (
        problem.batch.count as usize,
        problem.batch.stride_c as usize,
    );
    let (batch, offset) = match (count, stride) {
        (0 | 1, _) | (_, 0) => (0, index),
        _ => (index / stride, index % stride),
    };
    if batch >= count || offset >= m * n {
        return None;
    }
    Some(match problem.c_layout {
        MatrixLayout::RowMajor => (batch, offset / n, offset % n),
        MatrixLayout::ColMajor => (batch, offset % m, offset / m),
    })
}

impl<I: GemmElement, O: GemmOutput, A: OperandA<I, O>> Workload for GemmWorkload<I, O, A> {
    fn input_sets(&self) -> usize {
        self.sets.len()
    }

    fn launch(&mut self, rt: &Runtime, candidate: &Candidate, set: usize) -> Result<(), Error> {
        let problem = self.problem;
        self.launch_problem(rt, candidate, set, &problem)
    }

    fn verify(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        let unread_c = GemmProblem {
            beta: O::PLAIN.1,
            ..self.problem
        };
        if let Err(message) = self.verify_run(rt, candidate, &unread_c, Initial::Poison)? {
            return Ok(Err(message));
        }
        let problem = self.problem;
        self.verify_run(rt, candidate, &problem, Initial::Random)
    }
}

/// A whole-problem case of the stock GEMM jobs (and of the GPU tier's
/// `tune --forms`): how its calls differ from [`TunedGemm::run`]'s problem
/// ([`GemmKind::problem`]), with alpha 1 and beta 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmForm {
    /// What jobs and `tune --forms` call it.
    pub name: &'static str,
    /// B's layout, where it is not the kind's.
    pub b_layout: Option<MatrixLayout>,
    /// C's layout.
    pub c_layout: MatrixLayout,
    /// Whether the calls add a bias (one value per column of C).
    pub bias: bool,
    /// The activation.
    pub activation: Activation,
    /// Packed strided batches (1: a single GEMM).
    pub batches: u32,
}

impl GemmForm {
    /// [`TunedGemm::run`]'s problem.
    pub const PLAIN: GemmForm = GemmForm {
        name: "plain",
        b_layout: None,
        c_layout: MatrixLayout::RowMajor,
        bias: false,
        activation: Activation::Identity,
        batches: 1,
    };

    /// Row-major A and B ("NN"), a bias and ReLU: a linear layer.
    pub const NN_BIAS_RELU: GemmForm = GemmForm {
        name: "nn_bias_relu",
        b_layout: Some(MatrixLayout::RowMajor),
        bias: true,
        activation: Activation::Relu,
        ..GemmForm::PLAIN
    };

    /// 16 packed strided batches.
    pub const BATCHED: GemmForm = GemmForm {
        name: "batched",
        batches: 16,
        ..GemmForm::PLAIN
    };

    /// A column-major C.
    pub const COL_C: GemmForm = GemmForm {
        name: "col_c",
        c_layout: MatrixLayout::ColMajor,
        ..GemmForm::PLAIN
    };

    /// Every form, [`GemmForm::PLAIN`] first.
    pub const ALL: [GemmForm; 4] = [
        GemmForm::PLAIN,
        GemmForm::NN_BIAS_RELU,
        GemmForm::BATCHED,
        GemmForm::COL_C,
    ];

    /// The form's problem for `kind` at m x n x k, alpha 1 and beta 0.
    pub fn problem<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
        &self,
        kind: &GemmKind<I, O, A>,
        dims: (u32, u32, u32),
    ) -> GemmProblem<O::Scale> {
        let (alpha, beta) = O::PLAIN;
        GemmProblem {
            b_layout: self.b_layout.unwrap_or(kind.b_layout),
            c_layout: self.c_layout,
            batch: A::packed(self.batches, dims),
            activation: self.activation,
            ..kind.problem(dims, alpha, beta)
        }
    }
}

/// The [`TuneJob`] of one stock GEMM family: named as the family, at
/// `shapes` ([`JOB_SHAPES`] by default), on [`TunedGemm::run`]'s problem; or
/// named `name`, at `shapes`, on the problems of a [`GemmForm`]. It skips
/// the shapes where no variant of the family runs on the device
/// ([`GemmKind::unrunnable`]).
macro_rules! gemm_job {
    ($kind:ident) => {
        gemm_job!($kind, JOB_SHAPES)
    };
    ($kind:ident, $shapes:expr) => {
        gemm_job!($kind.name, $kind, $shapes, GemmForm::PLAIN)
    };
    ($name:expr, $kind:ident, $shapes:expr, $form:expr) => {
        TuneJob {
            name: $name,
            shapes: $shapes,
            run: |rt, shape| run_gemm_job(rt, &$kind, shape, $form),
            skip: |rt, shape| {
                let problem = $form.problem(&$kind, gemm_dims(shape)?);
                $kind.unrunnable(&problem, $form.bias, rt.device())
            },
        }
    };
}

/// A GEMM job's shape as m, n and k.
fn gemm_dims(shape: &[u64]) -> Result<(u32, u32, u32), Error> {
    let dims = match shape {
        &[m, n, k] => (u32::try_from(m), u32::try_from(n), u32::try_from(k)),
        _ => {
            return Err(Error::Tune(format!(
                "a GEMM job's shape is m, n and k, and {shape:?} has {} sizes",
                shape.len()
            )))
        }
    };
    let (Ok(m), Ok(n), Ok(k)) = dims else {
        return Err(Error::Tune(format!(
            "the GEMM shape {shape:?} does not fit u32 sizes"
        )));
    };
    Ok((m, n, k))
}

/// One tuned call of `kind` at `shape` (m, n, k) on random inputs, on the
/// problem of `form`.
fn run_gemm_job<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    rt: &Runtime,
    kind: &'static GemmKind<I, O, A>,
    shape: &[u64],
    form: GemmForm,
) -> Result<(), Error> {
    let problem = form.problem(kind, gemm_dims(shape)?);
    let mut rng = StdRng::seed_from_u64(TUNE_NOW_SEED);
    let a: Vec<I> = (0..problem.a_len()).map(|_| I::random(&mut rng)).collect();
    let a = A::upload(rt, &A::host(&problem, a)?)?;
    let b: Vec<I> = (0..problem.b_len()).map(|_| I::random(&mut rng)).collect();
    let bias: Vec<O> = (0..problem.n).map(|_| O::random(&mut rng)).collect();
    let (b, bias) = (rt.upload(&b)?, rt.upload(&bias)?);
    let mut c = rt.alloc_zeroed::<O>(problem.c_len() as usize)?;
    let bias = form.bias.then(|| BufferRef::from(&bias));
    TunedGemm::new(rt, kind)?.gemm(rt, &problem, A::arg(&a), &b, &mut c, bias)?;
    rt.synchronize()
}

/// The shapes the stock GEMM jobs tune for: squares that fill the GPU, and
/// ragged ones whose edges take other tiles.
const JOB_SHAPES: &[&[u64]] = &[
    &[4096, 4096, 4096],
    &[8192, 8192, 8192],
    &[3001, 2999, 1000],
    &[2048, 2048, 1020],
];

/// The shapes the Hopper-only GEMM jobs tune for: [`JOB_SHAPES`] with the
/// ragged ones' k a multiple of 16, as the fp8 kernels need.
const WGMMA_JOB_SHAPES: &[&[u64]] = &[
    &[4096, 4096, 4096],
    &[8192, 8192, 8192],
    &[3001, 2999, 1008],
    &[2048, 2048, 1024],
];

/// The shapes of the whole-problem jobs: a square and a ragged one.
const FORM_SHAPES: &[&[u64]] = &[&[4096, 4096, 4096], &[3001, 2999, 1000]];

/// The shapes of the strided-batch job: of 16 batches, as large in all as
/// one GEMM of [`FORM_SHAPES`].
const BATCHED_SHAPES: &[&[u64]] = &[&[1024, 1024, 1024], &[1000, 999, 1000]];

/// The stock GEMM families as tuning jobs, for a workspace's
/// `warpforge_tuner::main`: each job runs one [`TunedGemm`] call per shape
/// (m, n, k) on random inputs. The families' own jobs tune
/// [`TunedGemm::run`]'s problem; the `gemm_f16_..` ones the whole problems
/// of [`GemmForm::NN_BIAS_RELU`], [`GemmForm::BATCHED`] and
/// [`GemmForm::COL_C`]. The Hopper-only families (fp8, f32 C from 16-bit
/// products) are skipped on other GPUs.
pub static TUNE_JOBS: &[TuneJob] = &[
    gemm_job!(GEMM_F32),
    gemm_job!(GEMM_F16),
    gemm_job!(GEMM_BF16),
    gemm_job!(GEMM_TF32),
    gemm_job!(GEMM_S8),
    gemm_job!(
        "gemm_f16_nn_bias_relu",
        GEMM_F16,
        FORM_SHAPES,
        GemmForm::NN_BIAS_RELU
    ),
    gemm_job!(
        "gemm_f16_batched",
        GEMM_F16,
        BATCHED_SHAPES,
        GemmForm::BATCHED
    ),
    gemm_job!("gemm_f16_col_c", GEMM_F16, FORM_SHAPES, GemmForm::COL_C),
    gemm_job!(SPARSE_GEMM_F16),
    gemm_job!(SPARSE_GEMM_BF16),
    gemm_job!(GEMM_E4M3, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_E5M2, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_F16_F32, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_BF16_F32, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_E4M3_F16, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_E4M3_F32, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_E5M2_F16, WGMMA_JOB_SHAPES),
    gemm_job!(GEMM_E5M2_F32, WGMMA_JOB_SHAPES),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wgmma_kernel_of_every_kind_is_launched_on_the_persistent_grid() {
        let kernels = [
            (GEMM_F16.kernels)(),
            (GEMM_BF16.kernels)(),
            (GEMM_TF32.kernels)(),
            (GEMM_S8.kernels)(),
            (GEMM_E4M3.kernels)(),
            (GEMM_E5M2.kernels)(),
            (GEMM_F16_F32.kernels)(),
            (GEMM_BF16_F32.kernels)(),
            (GEMM_E4M3_F16.kernels)(),
            (GEMM_E4M3_F32.kernels)(),
            (GEMM_E5M2_F16.kernels)(),
            (GEMM_E5M2_F32.kernels)(),
        ];
        let mut wgmma = 0;
        for def in kernels.into_iter().flatten() {
            let persistent = def.ir.name.starts_with("gemm_wgmma");
            wgmma += usize::from(persistent);
            assert_eq!(
                gemm_wgmma::walks_its_tiles(def),
                persistent,
                "{}",
                def.ir.name
            );
        }
        assert_eq!(wgmma, 12, "the 12 instances of gemm_wgmma");
    }

    #[test]
    fn the_hopper_only_jobs_skip_other_gpus_and_the_others_run() {
        // The interpreter runs PTX up to sm_80, as an Ampere GPU would.
        let rt = Runtime::interpreter();
        for job in TUNE_JOBS {
            for shape in job.shapes {
                let skipped = (job.skip)(&rt, shape).unwrap();
                let hopper_only = job.name.starts_with("gemm_e")
                    || job.name == "gemm_f16_f32"
                    || job.name == "gemm_bf16_f32";
                match skipped {
                    Some(why) if hopper_only => {
                        assert!(why.contains("sm_90a"), "{}: {why}", job.name)
                    }
                    None if !hopper_only => {}
                    other => panic!("{} {shape:?}: skip says {other:?}", job.name),
                }
            }
        }
        // Every Hopper-only shape keeps k a multiple of 16, so that on Hopper
        // each runs.
        assert!(WGMMA_JOB_SHAPES.iter().all(|shape| shape[2] % 16 == 0));
    }

    #[test]
    fn a_kind_s_key_and_tolerance_follow_its_output_type() {
        let f16_c = GemmProblem::new((64, 64, 64), 1.0f32, 0.0);
        let key = |call: GemmCall| call.call().dtypes.to_string();
        assert_eq!(
            key(GEMM_F16.call(&f16_c, false).unwrap()),
            "f16.row*f16.col->f16.row"
        );
        assert_eq!(
            key(GEMM_F16_F32.call(&f16_c, false).unwrap()),
            "f16.row*f16.col->f32.row"
        );
        assert_eq!(
            key(GEMM_E4M3_F16.call(&f16_c, false).unwrap()),
            "e4m3.row*e4m3.col->f16.row"
        );
        assert_eq!(
            key(GEMM_E5M2.call(&f16_c, false).unwrap()),
            "e5m2.row*e5m2.col->bf16.row"
        );
        // The same sums, without C's rounding to 16 bits: a tighter bound,
        // by f16's half unit (2^-11) of the value.
        let (k, magnitude, value) = (64, 10.0, 4.0);
        let f16 = GEMM_F16.allowed_error(k, Activation::Identity, magnitude, value);
        let f32 = GEMM_F16_F32.allowed_error(k, Activation::Identity, magnitude, value);
        assert!(f32 < f16, "{f32} < {f16}");
        assert!(
            (f16 - f32 - value * 2f64.powi(-11)).abs() < 1e-6,
            "{f16} - {f32}"
        );
        // fp8 sums into f16 C: f16's rounding, not bf16's.
        let bf16_c = GEMM_E4M3.allowed_error(k, Activation::Identity, magnitude, value);
        let f16_c = GEMM_E4M3_F16.allowed_error(k, Activation::Identity, magnitude, value);
        assert!(f16_c < bf16_c, "{f16_c} < {bf16_c}");
    }
}
