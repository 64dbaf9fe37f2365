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
//! A [`GemmKind`] describes one GEMM family: its kernels, which all take the
//! dense GEMMs' parameters (those of `gemm_problem::KernelProblem::args`, in
//! its order), have const parameters `BM` and `BN`,
//! and run one block per `BM x BN` tile of C and batch; the element types;
//! B's layout; and the heuristic default. Adding a GEMM kernel with that
//! launcher shape is one more `GemmKind` constant (or one more kernel in an
//! existing one's list). The tuned calls are single GEMMs without a bias or
//! activation, A row-major and C row-major.
//!
//! The tuning key of a call holds, besides the GPU, driver, code generator,
//! family and dtypes ([`GemmKind::dtypes`]), the alignment of A's, B's and
//! C's leading dimension in bytes (capped at 16: what 16-byte copies need),
//! and the shape bucket ([`ShapeBucket::gemm`]). Every variant's `requires`
//! depend on the call only through those alignments (a test checks it), so a
//! winner stored for a key can take every call with that key.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::__private::KernelDef;
use warpforge::tune::{
    Call, Candidate, Dispatcher, Family, MissPolicy, Selection, ShapeBucket, TuneJob, Workload,
};
use warpforge::{
    bf16, f16, ArgInfo, BufferMut, BufferRef, DeviceBuffer, DeviceScalar, Error, GemmPrecision,
    KernelArg, MatrixLayout, Runtime,
};

use crate::gemm::{gemm_f32, DEFAULT_F32};
use crate::gemm_problem::GemmProblem;
use crate::gemm_tc::{gemm_bf16, gemm_f16, gemm_s8, gemm_tf32};
use crate::gemm_wgmma::{self, gemm_wgmma_bf16, gemm_wgmma_f16, gemm_wgmma_s8, gemm_wgmma_tf32};
use crate::gemm_wmma::gemm_f16_wmma;

/// One GEMM family, with input element `I` and output element `O`.
pub struct GemmKind<I, O> {
    /// The family's name in tuning keys.
    pub name: &'static str,
    /// The element types and the arithmetic, for the dtypes of the key and
    /// the error bound of verification.
    pub precision: GemmPrecision,
    /// How B lies in its buffer (A and C are row-major).
    pub b_layout: MatrixLayout,
    /// The kernels whose variants compete.
    pub kernels: fn() -> Vec<&'static KernelDef>,
    /// The heuristic default: variants in order of preference; a call gets
    /// the first that runs on the device and can take it.
    pub preferred: fn() -> Vec<(&'static KernelDef, Vec<i64>)>,
    types: PhantomData<fn() -> (I, O)>,
}

impl<I, O> GemmKind<I, O> {
    /// A GEMM family of kernels with the launcher shape above: `preferred`
    /// lists the heuristic default's variants (kernel, const values), most
    /// preferred first.
    pub const fn new(
        name: &'static str,
        precision: GemmPrecision,
        b_layout: MatrixLayout,
        kernels: fn() -> Vec<&'static KernelDef>,
        preferred: fn() -> Vec<(&'static KernelDef, Vec<i64>)>,
    ) -> GemmKind<I, O> {
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
    || vec![(gemm_f32::def(), DEFAULT_F32.values())],
);

/// The f16 Tensor Core GEMM (row-major A, column-major B, f16 C, f32
/// accumulation): the sm_80 `mma.sync` kernel [`gemm_f16`], the sm_70
/// `wmma` kernel [`gemm_f16_wmma`] and on Hopper the sm_90a `wgmma`
/// kernel [`gemm_wgmma_f16`] compete. Heuristic default: on Hopper
/// (compute capability 9.0) `gemm_wgmma_f16` 128 x 256 with 3 stages (the
/// tuned winner at 4096^3 and 8192^3 on an H200, 1.7x the sm_80 default
/// there) when k is a multiple of 8; elsewhere, or for other k, `gemm_f16`
/// 128 x 128 x 64, 64 x 64 warp tiles, 2 stages, 16-byte copies (the fastest
/// sm_80 variant at 8192^3 on an H200 before tuning existed); for k not a
/// multiple of 8 the same tiles with BK = 32 and element copies; on sm_70,
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
        vec![
            (gemm_wgmma_f16::def(), wgmma_default(3)),
            (gemm_f16::def(), tensor_core_default(true)),
            (gemm_f16::def(), tensor_core_default(false)),
            (gemm_f16_wmma::def(), wmma.values()),
        ]
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
        vec![
            (gemm_wgmma_bf16::def(), wgmma_default(3)),
            (gemm_bf16::def(), tensor_core_default(true)),
            (gemm_bf16::def(), tensor_core_default(false)),
        ]
    },
);

/// The tf32 Tensor Core GEMM (f32 in and out, operands rounded to tf32 by
/// `gemm_tf32`, truncated by the sm_90a [`gemm_wgmma_tf32`], both within
/// the tuner's tolerance; layouts as [`GEMM_F16`]). Heuristic default: on
/// Hopper `gemm_wgmma_tf32` 128 x 256 with 3 stages (k a multiple of 4);
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
        vec![
            (gemm_wgmma_tf32::def(), wgmma_default(3)),
            (gemm_tf32::def(), tiles(true).values()),
            (gemm_tf32::def(), tiles(false).values()),
        ]
    },
);

/// The s8 Tensor Core GEMM (i8 in, i32 accumulation and out, i32 alpha and
/// beta; layouts as [`GEMM_F16`]; the sm_80 kernel and on Hopper
/// [`gemm_wgmma_s8`]). Heuristic default: on Hopper `gemm_wgmma_s8` 128 x
/// 256 with 4 stages (the tuned winner at 4096^3 and 8192^3 on an H200; k a
/// multiple of 16); elsewhere, or for other k, `gemm_s8` 128 x 128 x 128,
/// 64 x 64 warp tiles, 3 stages, 16-byte copies (the fastest sm_80 variant
/// at 8192^3 on an H200 before tuning; k a multiple of 16); otherwise 64 x
/// 64 x 64 tiles of 32 x 32 warp tiles with element copies (larger ones
/// spill).
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
        let element_copies = gemm_s8::Consts {
            BM: 64,
            BN: 64,
            BK: 64,
            WARP: 32,
            STAGES: 2,
            ALIGNED: false,
            A_COL_MAJOR: false,
            B_ROW_MAJOR: false,
        };
        vec![
            (gemm_wgmma_s8::def(), wgmma_default(4)),
            (gemm_s8::def(), aligned.values()),
            (gemm_s8::def(), element_copies.values()),
        ]
    },
);

/// The Hopper default of the `wgmma` GEMMs: 128 x 256 tiles with `stages`
/// stages (every `gemm_wgmma_*` instance has the same const parameters).
/// Listed first, it serves calls on compute capability 9.0 only: its
/// sm_90a target runs nowhere else.
fn wgmma_default(stages: u32) -> Vec<i64> {
    gemm_wgmma_f16::Consts {
        BM: 128,
        BN: 256,
        STAGES: stages,
    }
    .values()
}

/// The default tiles of the Tensor Core GEMMs (`gemm_f16` and `gemm_bf16`
/// come from one source and share their const parameters): with 16-byte
/// copies (k a multiple of 8), or with element copies (any k; those
/// variants have 2 stages and BK = 32).
fn tensor_core_default(aligned: bool) -> Vec<i64> {
    gemm_f16::Consts {
        BM: 128,
        BN: 128,
        BK: if aligned { 64 } else { 32 },
        WARP: 64,
        STAGES: 2,
        ALIGNED: aligned,
        A_COL_MAJOR: false,
        B_ROW_MAJOR: false,
    }
    .values()
}

/// The host side of a GEMM's element types: random inputs, poisoned
/// outputs, and float64 references.
pub trait GemmElement: DeviceScalar {
    /// What outputs are filled with before a verification run: NaN for
    /// floats, a value no GEMM the tuner verifies can produce for integers.
    const POISON: Self;
    /// A random input: uniform in [-1, 1) for floats, over the whole type
    /// for integers.
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
    type Scale: DeviceScalar;
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
        rng.random()
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

impl<I: GemmElement, O: GemmOutput> GemmKind<I, O> {
    /// The tuning family: every variant of every kernel, and the heuristic default.
    pub fn family(&self) -> Result<Family, Error> {
        (self.preferred)().into_iter().try_fold(
            Family::new(self.name, self.dtypes(), &(self.kernels)())?,
            |family, (def, consts)| family.prefer(def, &consts),
        )
    }

    /// The dtype and layout mix of the tuning key: `f16.row*f16.col->f16.row`
    /// (inputs named by the precision, so tf32 differs from f32).
    pub fn dtypes(&self) -> String {
        let layout = |l: MatrixLayout| match l {
            MatrixLayout::RowMajor => "row",
            MatrixLayout::ColMajor => "col",
        };
        let input = self.precision.name();
        format!(
            "{input}.row*{input}.{}->{}.row",
            layout(self.b_layout),
            self.precision.output().name()
        )
    }

    /// The alignment facts of the key: the largest power of two, at most 16,
    /// that divides the byte length of A's, B's and C's leading dimension.
    pub fn alignments(&self, (_, n, k): (u32, u32, u32)) -> [u32; 3] {
        let ldb = self.b_layout.leading_dimension(k as usize, n as usize) as u64;
        [
            byte_alignment(u64::from(k) * size_of::<I>() as u64),
            byte_alignment(ldb * size_of::<I>() as u64),
            byte_alignment(u64::from(n) * size_of::<O>() as u64),
        ]
    }

    /// The problem of an m x n x k call: A and C row-major, B in the kind's
    /// layout, one batch, no activation.
    fn problem(
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

    /// The arguments of a call with buffers of exactly the sizes the
    /// matrices need (and a one-element bias, unread), alpha 1 and beta 0:
    /// what legality is judged on (the launch checks the real buffers).
    pub fn call_args(&self, (m, n, k): (u32, u32, u32)) -> Vec<ArgInfo> {
        let (m64, n64, k64) = (u64::from(m), u64::from(n), u64::from(k));
        let buffer = |elem, len, mutable| ArgInfo::Buffer { elem, len, mutable };
        let (alpha, beta) = O::PLAIN;
        let scalars = self
            .problem((m, n, k), alpha, beta)
            .for_kernel()
            .scalar_args(0);
        [
            buffer(I::SCALAR, m64 * k64, false),
            buffer(I::SCALAR, k64 * n64, false),
            buffer(O::SCALAR, m64 * n64, true),
            buffer(O::SCALAR, 1, false),
        ]
        .into_iter()
        .chain(scalars.iter().map(KernelArg::info))
        .collect()
    }

    /// The error bound for one output element of a correct variant: with
    /// `magnitude` = sum over p of |a_ip b_pj| and `value` the float64
    /// result, `gamma_{k+1}(u) * magnitude` for the accumulation (Higham,
    /// *Accuracy and Stability of Numerical Algorithms*, 3.1: any summation
    /// order), plus the rounding of the output, `u_out * (|value| + that)`,
    /// plus half its smallest subnormal. `u` is 2^-24 for f32 FMAs and 2^-23
    /// on Tensor Cores (their adders may truncate); tf32 adds the rounding of
    /// both inputs; i8 is exact. `tests/src/compare.rs`'s `GemmTolerance` is
    /// the same bound with alpha, beta and activations, for the GPU tier.
    pub fn allowed_error(&self, k: u32, magnitude: f64, value: f64) -> f64 {
        const TF32_UNIT: f64 = 1.0 / 1024.0;
        let (unit, input, output_unit, output_subnormal) = match self.precision {
            GemmPrecision::I8 => return 0.0,
            GemmPrecision::F32 => (2f64.powi(-24), 0.0, 2f64.powi(-24), 2f64.powi(-149)),
            GemmPrecision::Tf32 => (
                2f64.powi(-23),
                2.0 * TF32_UNIT + TF32_UNIT * TF32_UNIT,
                2f64.powi(-24),
                2f64.powi(-149),
            ),
            GemmPrecision::F16 => (2f64.powi(-23), 0.0, 2f64.powi(-11), 2f64.powi(-24)),
            GemmPrecision::Bf16 => (2f64.powi(-23), 0.0, 2f64.powi(-8), 2f64.powi(-133)),
        };
        let n = f64::from(k) + 1.0;
        let gamma = n * unit / (1.0 - n * unit);
        let accumulated = (gamma + input) * magnitude;
        accumulated + output_unit * (value.abs() + accumulated) + output_subnormal / 2.0
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

/// The operands of one tuned launch: A, B, C and the bias argument, a
/// one-element buffer the kernels never read (no bias).
struct GemmBuffers<'a, I: DeviceScalar, O: DeviceScalar> {
    a: BufferRef<'a, I>,
    b: BufferRef<'a, I>,
    c: BufferMut<'a, O>,
    no_bias: BufferRef<'a, O>,
}

/// `C = alpha * A B + beta * C` with one candidate of a GEMM family, whose
/// tile is `tile` ([`gemm_tile`]).
fn launch_gemm<I: GemmElement, O: GemmOutput>(
    rt: &Runtime,
    candidate: &Candidate,
    tile: (u32, u32),
    problem: &GemmProblem<O::Scale>,
    buffers: GemmBuffers<'_, I, O>,
) -> Result<(), Error> {
    let kernel = problem.for_kernel();
    let GemmBuffers { a, b, c, no_bias } = buffers;
    let grid = match gemm_wgmma::walks_its_tiles(candidate.def) {
        true => {
            gemm_wgmma::persistent_grid(rt, candidate.def, &candidate.consts, kernel.grid(tile))?
        }
        false => kernel.grid(tile),
    };
    rt.launch(
        candidate.def,
        &candidate.consts,
        grid,
        &mut kernel.args(a, b, c, no_bias, 0),
    )
}

/// A GEMM family's dispatcher: [`TunedGemm::run`] sends each call to the
/// variant tuned for it.
pub struct TunedGemm<I: GemmElement, O: GemmOutput> {
    kind: &'static GemmKind<I, O>,
    dispatcher: Arc<Dispatcher>,
    /// Each candidate's (BM, BN).
    tiles: Vec<(u32, u32)>,
    /// The bias argument of every launch: one element, never read.
    no_bias: DeviceBuffer<O>,
}

/// The seed of the inputs [`MissPolicy::TuneNow`] tunes on: fixed, so that
/// a tuning run can be repeated.
const TUNE_NOW_SEED: u64 = 0x7761_7270_666f_7267;

impl<I: GemmElement, O: GemmOutput> TunedGemm<I, O> {
    /// The dispatcher of `kind` on `rt`'s device that the runtime shares
    /// among its tuned entry points, with the runtime's
    /// [`TuneSettings`](warpforge::tune::TuneSettings) (by default the miss
    /// policy of `WARPFORGE_TUNE_MISS` and the database in the default
    /// directory, `WARPFORGE_TUNE_DIR`, see `warpforge::tune::default_dir`).
    pub fn new(rt: &Runtime, kind: &'static GemmKind<I, O>) -> Result<TunedGemm<I, O>, Error> {
        TunedGemm::on(rt, kind, rt.tuned_dispatcher(kind.name, || kind.family())?)
    }

    /// A dispatcher of its own, with the miss policy and (when `Some`) the
    /// database directory given.
    pub fn with_policy(
        rt: &Runtime,
        kind: &'static GemmKind<I, O>,
        policy: MissPolicy,
        dir: Option<&Path>,
    ) -> Result<TunedGemm<I, O>, Error> {
        let dispatcher = Dispatcher::new(rt, kind.family()?, policy, dir)?;
        TunedGemm::on(rt, kind, Arc::new(dispatcher))
    }

    fn on(
        rt: &Runtime,
        kind: &'static GemmKind<I, O>,
        dispatcher: Arc<Dispatcher>,
    ) -> Result<TunedGemm<I, O>, Error> {
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
        })
    }

    /// The family this dispatches.
    pub fn kind(&self) -> &'static GemmKind<I, O> {
        self.kind
    }

    /// The dispatcher underneath: its statistics, warnings, stored records
    /// and the tuning key of a call ([`Dispatcher::key`] of
    /// [`TunedGemm::call`]):
    ///
    /// ```no_run
    /// # use warpforge::prelude::*;
    /// # use warpforge_kernels::tuned::{TunedGemm, GEMM_F16};
    /// # fn main() -> Result<(), Error> {
    /// # let rt = Runtime::new()?;
    /// let gemm = TunedGemm::new(&rt, &GEMM_F16)?;
    /// let dims = (4096, 4096, 4096);
    /// let (alignments, args) = (GEMM_F16.alignments(dims), GEMM_F16.call_args(dims));
    /// let call = gemm.call(dims, &alignments, &args);
    /// let key = gemm.dispatcher().key(&call); // what the call's winner is stored under
    /// let stored = gemm.dispatcher().stored(&call); // its record, if the call was tuned
    /// # let _ = (key, stored);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// `C = alpha * A B + beta * C` (A m x k row-major, B k x n in the
    /// kind's layout, C m x n row-major) with the variant
    /// [`TunedGemm::select`] picks.
    #[allow(clippy::too_many_arguments)]
    pub fn run<'a>(
        &self,
        rt: &Runtime,
        a: impl Into<BufferRef<'a, I>>,
        b: impl Into<BufferRef<'a, I>>,
        c: impl Into<BufferMut<'a, O>>,
        dims: (u32, u32, u32),
        alpha: O::Scale,
        beta: O::Scale,
    ) -> Result<(), Error> {
        let selection = self.select(rt, dims)?;
        self.launch(rt, selection.candidate, a, b, c, dims, alpha, beta)
    }

    /// The variant for an m x n x k call, and where it came from.
    pub fn select(&self, rt: &Runtime, dims: (u32, u32, u32)) -> Result<Selection, Error> {
        let alignments = self.kind.alignments(dims);
        let args = self.kind.call_args(dims);
        let call = self.call(dims, &alignments, &args);
        self.dispatcher.select(rt, &call, || {
            let workload = GemmWorkload::new(rt, self.kind, dims, TUNE_NOW_SEED)?;
            Ok(Box::new(workload) as Box<dyn Workload>)
        })
    }

    /// The tuning call of an m x n x k GEMM, over `alignments` and `args`
    /// from [`GemmKind::alignments`] and [`GemmKind::call_args`].
    pub fn call<'a>(
        &self,
        (m, n, k): (u32, u32, u32),
        alignments: &'a [u32],
        args: &'a [ArgInfo],
    ) -> Call<'a> {
        Call {
            shape: ShapeBucket::gemm(m.into(), n.into(), k.into()),
            alignments,
            args,
        }
    }

    /// `C = alpha * A B + beta * C` with the family's candidate `candidate`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch<'a>(
        &self,
        rt: &Runtime,
        candidate: usize,
        a: impl Into<BufferRef<'a, I>>,
        b: impl Into<BufferRef<'a, I>>,
        c: impl Into<BufferMut<'a, O>>,
        dims: (u32, u32, u32),
        alpha: O::Scale,
        beta: O::Scale,
    ) -> Result<(), Error> {
        let chosen = &self.dispatcher.family().candidates()[candidate];
        let buffers = GemmBuffers {
            a: a.into(),
            b: b.into(),
            c: c.into(),
            no_bias: BufferRef::from(&self.no_bias),
        };
        let problem = self.kind.problem(dims, alpha, beta);
        launch_gemm(rt, chosen, self.tiles[candidate], &problem, buffers)
    }
}

/// The most input sets a workload rotates through.
const MAX_INPUT_SETS: usize = 16;
/// Output elements checked against the float64 reference per verification
/// (all of them for smaller outputs); the rest are checked for NaN only.
const CHECKED_OUTPUTS: usize = 256;

/// The tuning inputs of one GEMM call: random A and B in [-1, 1), as many
/// copies of (A, B, C) as make them together at least twice the L2 cache
/// (at most `MAX_INPUT_SETS`, 16), launched with alpha 1 and beta 0.
/// Verification poisons C with NaN, runs the candidate on the first set,
/// and checks that every output is finite and that 256 (`CHECKED_OUTPUTS`) of
/// them (the corners, the last row and column, and random ones) are within
/// [`GemmKind::allowed_error`] of the float64 reference.
pub struct GemmWorkload<I: GemmElement, O: GemmOutput> {
    kind: &'static GemmKind<I, O>,
    dims: (u32, u32, u32),
    sets: Vec<(DeviceBuffer<I>, DeviceBuffer<I>, DeviceBuffer<O>)>,
    poison: DeviceBuffer<O>,
    no_bias: DeviceBuffer<O>,
    /// The checked outputs: (row, column, float64 value, magnitude).
    checked: Vec<(usize, usize, f64, f64)>,
}

impl<I: GemmElement, O: GemmOutput> GemmWorkload<I, O> {
    /// The inputs of an m x n x k call of `kind` on `rt`'s device, drawn from
    /// `seed`.
    pub fn new(
        rt: &Runtime,
        kind: &'static GemmKind<I, O>,
        dims: (u32, u32, u32),
        seed: u64,
    ) -> Result<GemmWorkload<I, O>, Error> {
        let (m, n, k) = (dims.0 as usize, dims.1 as usize, dims.2 as usize);
        if m == 0 || n == 0 || k == 0 {
            return Err(Error::Tune(format!(
                "cannot tune a {m} x {n} x {k} GEMM: every dimension must be at least 1"
            )));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut values = |len: usize| -> Vec<I> { (0..len).map(|_| I::random(&mut rng)).collect() };
        let host_a = values(m * k);
        let host_b = values(k * n);
        let set_bytes = (m * k + k * n) * size_of::<I>() + m * n * size_of::<O>();
        let l2 = rt.device().l2_cache_bytes as usize;
        let count = (2 * l2).div_ceil(set_bytes).clamp(1, MAX_INPUT_SETS);
        let sets = (0..count)
            .map(|_| {
                Ok((
                    rt.upload(&host_a)?,
                    rt.upload(&host_b)?,
                    rt.alloc_zeroed(m * n)?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let checked = if m * n <= CHECKED_OUTPUTS {
            (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect()
        } else {
            let mut positions = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
            positions.extend((0..16).map(|_| (m - 1, rng.random_range(0..n))));
            positions.extend((0..16).map(|_| (rng.random_range(0..m), n - 1)));
            while positions.len() < CHECKED_OUTPUTS {
                positions.push((rng.random_range(0..m), rng.random_range(0..n)));
            }
            positions
        };
        // The float64 value and magnitude (sum of |a b|) of each checked output.
        let checked = checked
            .into_iter()
            .map(|(i, j)| {
                let (value, magnitude) = (0..k).fold((0.0, 0.0), |(sum, magnitude), p| {
                    let a = host_a[i * k + p].to_f64();
                    let b = host_b[kind.b_layout.index((p, j), (k, n))].to_f64();
                    (sum + a * b, magnitude + (a * b).abs())
                });
                (i, j, value, magnitude)
            })
            .collect();
        Ok(GemmWorkload {
            kind,
            dims,
            poison: rt.upload(&vec![O::POISON; m * n])?,
            no_bias: rt.alloc_zeroed(1)?,
            sets,
            checked,
        })
    }
}

impl<I: GemmElement, O: GemmOutput> Workload for GemmWorkload<I, O> {
    fn input_sets(&self) -> usize {
        self.sets.len()
    }

    fn launch(&mut self, rt: &Runtime, candidate: &Candidate, set: usize) -> Result<(), Error> {
        let tile = gemm_tile(candidate)?;
        let (a, b, c) = &mut self.sets[set];
        let (alpha, beta) = O::PLAIN;
        let buffers = GemmBuffers {
            a: BufferRef::from(&*a),
            b: BufferRef::from(&*b),
            c: BufferMut::from(c),
            no_bias: BufferRef::from(&self.no_bias),
        };
        launch_gemm(
            rt,
            candidate,
            tile,
            &self.kind.problem(self.dims, alpha, beta),
            buffers,
        )
    }

    fn verify(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        rt.copy(&self.poison, &mut self.sets[0].2)?;
        self.launch(rt, candidate, 0)?;
        let out = rt.download(&self.sets[0].2)?;
        let n = self.dims.1 as usize;
        let bad: Vec<usize> = out
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_unwritten())
            .map(|(i, _)| i)
            .collect();
        if let Some(&first) = bad.first() {
            return Ok(Err(format!(
                "{} of {} outputs are the poison, NaN or infinite (unwritten or overflowed), the \
                 first at row \
                 {}, column {}",
                bad.len(),
                out.len(),
                first / n,
                first % n
            )));
        }
        for &(i, j, value, magnitude) in &self.checked {
            let got = out[i * n + j].to_f64();
            let allowed = self.kind.allowed_error(self.dims.2, magnitude, value);
            if (got - value).abs() > allowed {
                return Ok(Err(format!(
                    "C[{i}][{j}] = {got}, the float64 reference is {value}, and the error bound \
                     {allowed:.2e}"
                )));
            }
        }
        Ok(Ok(()))
    }
}

/// The [`TuneJob`] of one stock GEMM family: named as the family.
macro_rules! gemm_job {
    ($kind:ident) => {
        TuneJob {
            name: $kind.name,
            shapes: JOB_SHAPES,
            run: |rt, shape| run_gemm_job(rt, &$kind, shape),
        }
    };
}

/// One tuned call of `kind` at `shape` (m, n, k) on random inputs.
fn run_gemm_job<I: GemmElement, O: GemmOutput>(
    rt: &Runtime,
    kind: &'static GemmKind<I, O>,
    shape: &[u64],
) -> Result<(), Error> {
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
    let mut rng = StdRng::seed_from_u64(TUNE_NOW_SEED);
    let mut values = |rows: u32, cols: u32| -> Vec<I> {
        (0..rows as usize * cols as usize)
            .map(|_| I::random(&mut rng))
            .collect()
    };
    let a = rt.upload(&values(m, k))?;
    let b = rt.upload(&values(k, n))?;
    let mut c = rt.alloc_zeroed::<O>(m as usize * n as usize)?;
    let (alpha, beta) = O::PLAIN;
    TunedGemm::new(rt, kind)?.run(rt, &a, &b, &mut c, (m, n, k), alpha, beta)?;
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

/// The stock GEMM families as tuning jobs, for a workspace's
/// `warpforge_tuner::main`: each job runs one [`TunedGemm`] call per shape
/// (m, n, k) on random inputs.
pub static TUNE_JOBS: &[TuneJob] = &[
    gemm_job!(GEMM_F32),
    gemm_job!(GEMM_F16),
    gemm_job!(GEMM_BF16),
    gemm_job!(GEMM_TF32),
    gemm_job!(GEMM_S8),
];
