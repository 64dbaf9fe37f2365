//! The checks of the stock kernels against the float64 references, one
//! function per kernel over every variant and the given sizes, on any
//! runtime: the GPU tier (`gpu-check`) runs them on CUDA, the wgpu test
//! (`tests/wgpu_lavapipe.rs`) on lavapipe. Each check draws fresh inputs from
//! `inputs`, poisons outputs with NaN so that an unwritten element fails, and
//! records one line per variant and size in `report`.

use warpforge::{
    BufferRef, DeviceBuffer, DeviceScalar, Error, GemmPrecision, Grid, MatrixLayout, Runtime,
    Scalar,
};
use warpforge_kernels::gemm_problem::{GemmProblem, GemmVariant, VariantLayouts, VariantTakes};
use warpforge_kernels::{gemm, gemm_tc, gemm_wgmma, gemm_wmma, reduce, simple, softmax, stream};

use crate::compare::{self, deviation, GemmTolerance};
use crate::reference::{Activation, GemmBatch, GemmProducts, GemmReference, GemmSpec};
use crate::report::Report;
use crate::{reference, GemmFloat, Inputs};

/// An output buffer of `n` NaNs: any element the kernel fails to write fails the check.
pub fn poisoned(rt: &Runtime, n: usize) -> Result<DeviceBuffer<f32>, Error> {
    rt.upload(&vec![f32::NAN; n])
}

pub fn check_saxpy(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for &n in sizes {
        let what = format!("saxpy n={n}");
        let (x, y, a) = (inputs.f32s(n), inputs.f32s(n), 1.5f32);
        let expected = reference::saxpy(a, &x, &y);
        let run = || -> Result<Vec<f32>, Error> {
            let dx = rt.upload(&x)?;
            let mut dy = rt.upload(&y)?;
            simple::saxpy::launch(rt, Grid::linear(n, 256), a, &dx, &mut dy)?;
            rt.download(&dy)
        };
        match run() {
            Ok(out) => {
                let d = deviation(&out, &expected);
                report.check(&what, d.passes(1e-6), d);
            }
            Err(e) => report.error(&what, e),
        }
    }
}

pub fn check_histogram(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for consts in simple::histogram::variants() {
        for &n in sizes {
            let what = format!("histogram[BINS={}] n={n}", consts.BINS);
            let values = inputs.u32s(n);
            let expected = reference::histogram(&values, consts.BINS);
            let run = || -> Result<Vec<u32>, Error> {
                let dv = rt.upload(&values)?;
                let mut counts = rt.alloc_zeroed::<u32>(consts.BINS as usize)?;
                let blocks = (n as u32).div_ceil(256).min(1024);
                simple::histogram::launch(
                    rt,
                    consts,
                    Grid::blocks([blocks, 1, 1]),
                    &dv,
                    &mut counts,
                )?;
                rt.download(&counts)
            };
            match run() {
                Ok(out) => {
                    let wrong = out.iter().zip(&expected).filter(|(o, e)| o != e).count();
                    report.check(
                        &what,
                        wrong == 0,
                        format_args!("{wrong} of {} bins differ (exact)", out.len()),
                    );
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

pub fn check_sum(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for consts in reduce::block_sum::variants() {
        for &n in sizes {
            let what = format!("block_sum[THREADS={}] (two passes) n={n}", consts.THREADS);
            let x = inputs.f32s(n);
            let expected = reference::sum(&x);
            let magnitude: f64 = x.iter().map(|v| v.abs() as f64).sum();
            let run = || -> Result<f32, Error> {
                let dx = rt.upload(&x)?;
                let mut scratch = poisoned(rt, reduce::sum_blocks(n, consts.THREADS) as usize)?;
                let mut out = poisoned(rt, 1)?;
                reduce::sum(rt, consts, &dx, &mut scratch, &mut out)?;
                Ok(rt.download(&out)?[0])
            };
            match run() {
                Ok(out) => {
                    // f32 accumulation: error bounded by a small multiple of eps * sum |x|.
                    let err = (out as f64 - expected).abs();
                    let ok = out.is_finite() && err <= 1e-5 * magnitude.max(1.0);
                    report.check(
                        &what,
                        ok,
                        format_args!("got {out}, expected {expected:.6}, |err| {err:.2e}"),
                    );
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

/// Checks each of `variants` of `softmax_rows` on every shape, then
/// [`softmax::softmax`], which picks the variant for the device.
pub fn check_softmax(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    variants: &[softmax::softmax_rows::Consts],
    shapes: &[(usize, usize)],
) {
    let label = |consts: softmax::softmax_rows::Consts| {
        format!(
            "softmax_rows[THREADS={},WARP_SHUFFLE={}]",
            consts.THREADS, consts.WARP_SHUFFLE
        )
    };
    for &consts in variants {
        check_softmax_shapes(
            rt,
            inputs,
            report,
            shapes,
            |_| label(consts),
            |x, y, rows, cols| softmax::softmax_with(rt, consts, x, y, rows, cols),
        );
    }
    check_softmax_shapes(
        rt,
        inputs,
        report,
        shapes,
        |cols| {
            let picked = softmax::softmax_variant(rt.device(), cols);
            format!("softmax (picks {})", label(picked))
        },
        |x, y, rows, cols| softmax::softmax(rt, x, y, rows, cols),
    );
}

/// One line per shape for the softmax `run`, named by `name(cols)`.
fn check_softmax_shapes(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize)],
    name: impl Fn(u32) -> String,
    run: impl Fn(&DeviceBuffer<f32>, &mut DeviceBuffer<f32>, u32, u32) -> Result<(), Error>,
) {
    for &(rows, cols) in shapes {
        let what = format!("{} {rows}x{cols}", name(cols as u32));
        let x: Vec<f32> = inputs.f32s(rows * cols).iter().map(|v| v * 8.0).collect();
        let expected = reference::softmax_rows(&x, rows, cols);
        let result = || -> Result<Vec<f32>, Error> {
            let dx = rt.upload(&x)?;
            let mut dy = poisoned(rt, rows * cols)?;
            run(&dx, &mut dy, rows as u32, cols as u32)?;
            rt.download(&dy)
        };
        match result() {
            Ok(out) => {
                let d = deviation(&out, &expected);
                report.check(&what, d.passes(1e-5), d);
            }
            Err(e) => report.error(&what, e),
        }
    }
}

/// The cases each dense GEMM variant runs on each shape: every epilogue
/// (none, bias, bias + ReLU, bias + GELU) on one batch and on three strided
/// ones, both C layouts, beta 0 (C poisoned: it must be neither read nor
/// left unwritten) and beta != 0 (C random). The sparse GEMMs run them too
/// (`sparse::check_gemm_sparse`).
pub const GEMM_CASES: [GemmCase; 9] = {
    use Activation::{GeluTanh, Identity, Relu};
    use MatrixLayout::{ColMajor, RowMajor};
    [
        GemmCase::new(true, false, Identity, 1, RowMajor),
        GemmCase::new(false, false, Identity, 1, ColMajor),
        GemmCase::new(true, true, Identity, 1, RowMajor),
        GemmCase::new(false, true, Relu, 1, ColMajor),
        GemmCase::new(true, true, GeluTanh, 1, RowMajor),
        GemmCase::new(false, false, Identity, 3, RowMajor),
        GemmCase::new(true, true, Identity, 3, ColMajor),
        GemmCase::new(false, true, Relu, 3, RowMajor),
        GemmCase::new(true, true, GeluTanh, 3, ColMajor),
    ]
};

/// Shapes with more multiply-adds than this run the first case on every
/// variant and the other one-batch cases on the first variant of each
/// layout: the float64 reference and the comparisons grow with the shape,
/// the kernels' epilogue, layout and batch handling do not.
pub const LARGE_GEMM: usize = 1 << 28;

/// Which variants run which of [`GEMM_CASES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmCoverage {
    /// Every variant every case (up to [`LARGE_GEMM`]): the GPU tier.
    Full,
    /// Every variant the first case (no bias or activation, one batch, C
    /// row-major), the first variant of each layout every case: where each
    /// launch is dear (compute-sanitizer, lavapipe).
    Sampled,
}

/// One run of a GEMM variant: see [`GEMM_CASES`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCase {
    /// Beta 0 (the scales' first pair, C poisoned), or not (the second, C random).
    pub beta_zero: bool,
    pub bias: bool,
    pub activation: Activation,
    pub batches: u32,
    pub c_layout: MatrixLayout,
}

impl GemmCase {
    const fn new(
        beta_zero: bool,
        bias: bool,
        activation: Activation,
        batches: u32,
        c_layout: MatrixLayout,
    ) -> GemmCase {
        GemmCase {
            beta_zero,
            bias,
            activation,
            batches,
            c_layout,
        }
    }

    /// What this case starts from and must end with, on the shape and first
    /// batches of `products` (`batch`: this case's batches): its (alpha,
    /// beta), C's initial buffer (from `(c_in, poison, bias)`: the random C,
    /// or the poisoned one where beta is 0) and the float64 reference.
    pub fn expected<'c, S: GemmScale, O: GemmOutput>(
        &self,
        products: &GemmProducts,
        batch: GemmBatch,
        (c_in, poison, bias): (&'c [O], &'c [O], &[O]),
    ) -> ((S, S), &'c [O], GemmReference) {
        let widen = |v: &[O]| -> Vec<f64> { v.iter().map(|x| x.widen()).collect() };
        let (alpha, beta) = S::SCALES[usize::from(!self.beta_zero)];
        let (m, n, k) = products.dims();
        let spec = GemmSpec {
            c_layout: self.c_layout,
            batch,
            alpha: alpha.widen(),
            beta: beta.widen(),
            activation: self.activation,
            ..GemmSpec::new(m, n, k)
        };
        let c_initial = if self.beta_zero { poison } else { c_in };
        let c_initial = &c_initial[..spec.c_len()];
        let bias_values = self.bias.then(|| widen(bias));
        let expected = products.reference(&spec, Some(&widen(c_initial)), bias_values.as_deref());
        ((alpha, beta), c_initial, expected)
    }

    /// This case's problem on `(m, n, k)`, A and B in `layouts`.
    pub fn problem<S: Copy>(
        &self,
        (m, n, k): (usize, usize, usize),
        (a_layout, b_layout): (MatrixLayout, MatrixLayout),
        batch: GemmBatch,
        (alpha, beta): (S, S),
    ) -> GemmProblem<S> {
        GemmProblem {
            a_layout,
            b_layout,
            c_layout: self.c_layout,
            batch,
            activation: self.activation,
            ..GemmProblem::new((m as u32, n as u32, k as u32), alpha, beta)
        }
    }

    /// The report line's name of a run of `variant` on this case's `problem`.
    pub fn describe<S: GemmScale>(&self, variant: &str, problem: &GemmProblem<S>) -> String {
        format!(
            "{variant} {}x{}x{} A {} B {} C {}, {} batch(es), alpha={} beta={}, bias: {}, {:?}",
            problem.m,
            problem.n,
            problem.k,
            problem.a_layout.name(),
            problem.b_layout.name(),
            problem.c_layout.name(),
            self.batches,
            problem.alpha.widen(),
            problem.beta.widen(),
            self.bias,
            self.activation,
        )
    }

    /// The error bound of this case's outputs for a GEMM of `precision`
    /// with C of type `output`.
    pub fn tolerance(&self, precision: GemmPrecision, output: Scalar, k: usize) -> GemmTolerance {
        GemmTolerance {
            precision,
            output,
            k,
            activation: self.activation,
        }
    }

    /// Whether this case runs for any of the variants `representatives`
    /// describes (see [`GemmCase::runs`]): large shapes hold one batch, so
    /// their batched cases run nowhere, and need no reference.
    pub fn runs_on_any(
        &self,
        macs: usize,
        representatives: impl IntoIterator<Item = bool>,
        coverage: GemmCoverage,
    ) -> bool {
        representatives
            .into_iter()
            .any(|representative| self.runs(macs, representative, coverage))
    }

    /// Whether this case runs on a shape of `macs` multiply-adds for a
    /// variant that is (or is not) the first of its layouts.
    pub fn runs(&self, macs: usize, representative: bool, coverage: GemmCoverage) -> bool {
        let plain = self == &GEMM_CASES[0];
        let every_variant = plain || coverage == GemmCoverage::Full && macs <= LARGE_GEMM;
        let affordable = macs <= LARGE_GEMM || self.batches == 1;
        every_variant || representative && affordable
    }
}

/// The element types a dense GEMM check draws and compares.
pub trait GemmData: DeviceScalar {
    /// Random values: uniform in [-1, 1) for floats (of the type), every
    /// value for i8, integers in [-1000, 1000] for i32 (C and bias).
    fn draw(inputs: &mut Inputs, n: usize) -> Vec<Self>;
    fn widen(self) -> f64;
}

/// The output types: what an unwritten element of a poisoned C holds.
pub trait GemmOutput: GemmData {
    const POISON: Self;
}

impl<T: GemmFloat> GemmData for T {
    fn draw(inputs: &mut Inputs, n: usize) -> Vec<T> {
        inputs.f32s(n).into_iter().map(T::from_f32).collect()
    }
    fn widen(self) -> f64 {
        self.to_f64()
    }
}

impl<T: GemmFloat> GemmOutput for T {
    const POISON: T = T::NAN;
}

impl GemmData for i8 {
    fn draw(inputs: &mut Inputs, n: usize) -> Vec<i8> {
        inputs.i8s(n)
    }
    fn widen(self) -> f64 {
        self.into()
    }
}

impl GemmData for i32 {
    fn draw(inputs: &mut Inputs, n: usize) -> Vec<i32> {
        let values = inputs.u32s(n).into_iter();
        values.map(|x| (x % 2001) as i32 - 1000).collect()
    }
    fn widen(self) -> f64 {
        self.into()
    }
}

impl GemmOutput for i32 {
    const POISON: i32 = i32::MIN;
}

/// The scale types: the (alpha, beta) of the beta = 0 cases and of the others.
pub trait GemmScale: Copy {
    const SCALES: [(Self, Self); 2];
    fn widen(self) -> f64;
}

impl GemmScale for f32 {
    const SCALES: [(f32, f32); 2] = [(1.5, 0.0), (0.75, -0.5)];
    fn widen(self) -> f64 {
        self.into()
    }
}

impl GemmScale for i32 {
    const SCALES: [(i32, i32); 2] = [(1, 0), (2, -3)];
    fn widen(self) -> f64 {
        self.into()
    }
}

/// A dense GEMM family the GPU tier checks: its precision, which sets the
/// tolerance ([`GemmTolerance`]; exact for i8, whose float64 reference is
/// exact: |alpha A B + beta C + bias| stays far below 2^53).
pub trait CheckedGemm: GemmVariant<Elem: GemmData, Out: GemmOutput, Scale: GemmScale> {
    const PRECISION: GemmPrecision;
}

impl CheckedGemm for gemm::gemm_f32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F32;
}

impl CheckedGemm for gemm_tc::gemm_f16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F16;
}

impl CheckedGemm for gemm_tc::gemm_bf16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Bf16;
}

impl CheckedGemm for gemm_tc::gemm_tf32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Tf32;
}

impl CheckedGemm for gemm_tc::gemm_s8::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::I8;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_f16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F16;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_bf16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Bf16;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_tf32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Tf32;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_s8::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::I8;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e4m3::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E4m3;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e5m2::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E5m2;
}

// The families with another C than their precision's: the bound takes C's
// rounding from its type (`GemmTolerance::output`).
impl CheckedGemm for gemm_wgmma::gemm_wgmma_f16_f32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F16;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_bf16_f32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Bf16;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e4m3_f16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E4m3;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e4m3_f32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E4m3;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e5m2_f16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E5m2;
}

impl CheckedGemm for gemm_wgmma::gemm_wgmma_e5m2_f32::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::E5m2;
}

impl CheckedGemm for gemm_wmma::gemm_f16_wmma::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F16;
}

/// The lines [`check_gemm`] reports for family `V` on `shapes` when
/// nothing fails to upload: one per run of [`GEMM_CASES`].
pub fn dense_gemm_lines<V: GemmVariant>(
    shapes: &[(usize, usize, usize)],
    coverage: GemmCoverage,
) -> usize {
    let representatives = representatives::<V>();
    shapes
        .iter()
        .map(|&(m, n, k)| {
            let runs_of = |case: &GemmCase| {
                let runs = representatives.iter();
                let runs = runs.filter(|&&r| case.runs(m * n * k, r, coverage));
                runs.count()
            };
            GEMM_CASES.iter().map(runs_of).sum::<usize>()
        })
        .sum()
}

/// For each variant of `V`, whether it is the first of its layouts.
fn representatives<V: GemmVariant>() -> Vec<bool> {
    let mut seen = Vec::new();
    let layouts = V::variants().into_iter().map(|v| v.takes().layouts);
    layouts
        .map(|layouts| {
            let first = !seen.contains(&layouts);
            seen.push(layouts);
            first
        })
        .collect()
}

/// A dense GEMM family `V` over every variant, shape and [`GEMM_CASES`] case
/// (as `coverage` and [`LARGE_GEMM`] allow), through [`GemmVariant::run`] with
/// fresh random inputs against the float64 reference, element by element
/// within the bound of [`GemmTolerance`] for its precision (0 for i8). A
/// variant with fixed layouts gets its own A and B layouts (swapped and
/// flipped when C is column-major); one with run-time layouts a different
/// A and B layout in each case, so that every variant meets every layout of
/// A, B and C. A variant that copies 16-byte chunks must refuse leading
/// dimensions that are not multiples of a chunk, and an integer one GELU,
/// with an `Err` naming the constraint.
pub fn check_gemm<V: CheckedGemm>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
    coverage: GemmCoverage,
) {
    let variants = V::variants();
    let representatives = representatives::<V>();
    let widen = |v: &[V::Elem]| -> Vec<f64> { v.iter().map(|x| x.widen()).collect() };
    let widen_out = |v: &[V::Out]| -> Vec<f64> { v.iter().map(|x| x.widen()).collect() };
    for &(m, n, k) in shapes {
        let macs = m * n * k;
        let batches = if macs <= LARGE_GEMM { 3 } else { 1 };
        // Batch strides a multiple of every chunk (16 elements), with a gap.
        let padded = |len: usize| len.next_multiple_of(16) + 16;
        let strides = (padded(m * k), padded(k * n), padded(m * n));
        let batch = |count| GemmBatch {
            count,
            stride_a: strides.0 as u32,
            stride_b: strides.1 as u32,
            stride_c: strides.2 as u32,
        };
        // The logical matrices, row-major and back to back, stored in each
        // layout below; their products serve every case.
        let a_rows = V::Elem::draw(inputs, batches * m * k);
        let b_rows = V::Elem::draw(inputs, batches * k * n);
        let c_in = V::Out::draw(inputs, (batches - 1) * strides.2 + m * n);
        let bias = V::Out::draw(inputs, n);
        let products = GemmProducts::new(&widen(&a_rows), &widen(&b_rows), (m, n, k), batches);
        let uploaded = (|| {
            let mut a = Vec::new();
            let mut b = Vec::new();
            for layout in MatrixLayout::ALL {
                let a_stored = store(&a_rows, layout, (m, k), strides.0, batches);
                a.push((layout, rt.upload(&a_stored)?));
                let b_stored = store(&b_rows, layout, (k, n), strides.1, batches);
                b.push((layout, rt.upload(&b_stored)?));
            }
            Ok::<_, Error>((a, b, rt.upload(&bias)?))
        })();
        let (a_buffers, b_buffers, bias_buffer) = match uploaded {
            Ok(buffers) => buffers,
            Err(e) => {
                report.error(
                    &format!("{} GEMM {m}x{n}x{k} upload", V::PRECISION.name()),
                    e,
                );
                continue;
            }
        };
        let poison = vec![V::Out::POISON; c_in.len()];
        for (case_index, case) in GEMM_CASES.iter().enumerate() {
            if !case.runs_on_any(macs, representatives.iter().copied(), coverage) {
                continue;
            }
            let c_buffers = (&c_in[..], &poison[..], &bias[..]);
            let ((alpha, beta), c_initial, expected) =
                case.expected::<V::Scale, V::Out>(&products, batch(case.batches), c_buffers);
            for (index, variant) in variants.iter().enumerate() {
                if !case.runs(macs, representatives[index], coverage) {
                    continue;
                }
                let (a_layout, b_layout) =
                    problem_layouts(variant.takes().layouts, case_index, case);
                let problem = case.problem(
                    (m, n, k),
                    (a_layout, b_layout),
                    batch(case.batches),
                    (alpha, beta),
                );
                let what = case.describe(&variant.name(), &problem);
                let run = || -> Result<Vec<f64>, Error> {
                    let mut dc = rt.upload(c_initial)?;
                    let bias = case.bias.then(|| BufferRef::from(&bias_buffer));
                    let (a, b) = (
                        in_layout(&a_buffers, a_layout),
                        in_layout(&b_buffers, b_layout),
                    );
                    variant.run(rt, &problem, a, b, &mut dc, bias)?;
                    Ok(widen_out(&rt.download(&dc)?))
                };
                let refusal = expected_refusal(&variant.takes(), &problem, true);
                let tolerance = case.tolerance(V::PRECISION, V::Out::SCALAR, k);
                judge_gemm(
                    report,
                    &what,
                    run(),
                    refusal.as_deref(),
                    &expected,
                    &tolerance,
                );
            }
        }
    }
}

/// The A and B layouts a variant gets in case `case_index`: its own (for C
/// column-major, those of the product it computes, `C^T = B^T A^T`), or,
/// when it takes any, the `case_index`-th combination (the cases' C layouts
/// are spread so that every variant meets all eight).
fn problem_layouts(
    layouts: VariantLayouts,
    case_index: usize,
    case: &GemmCase,
) -> (MatrixLayout, MatrixLayout) {
    use MatrixLayout::{ColMajor, RowMajor};
    let flip = |l| if l == RowMajor { ColMajor } else { RowMajor };
    match layouts {
        VariantLayouts::Fixed { a, b, .. } if case.c_layout == ColMajor => (flip(b), flip(a)),
        VariantLayouts::Fixed { a, b, .. } => (a, b),
        VariantLayouts::Any => {
            let combination = case_index % 4;
            (
                MatrixLayout::ALL[combination / 2],
                MatrixLayout::ALL[combination % 2],
            )
        }
    }
}

/// What the `Err` of a variant that must refuse `problem` names: GELU on an
/// integer C, or a leading dimension of A (where `a_in_chunks`: not a
/// compressed sparse A) or B (k or m for A, n or k for B, by layout) that is
/// not a multiple of its 16-byte chunks. Batch strides are multiples of
/// every chunk here.
pub fn expected_refusal<S: Copy>(
    takes: &VariantTakes,
    problem: &GemmProblem<S>,
    a_in_chunks: bool,
) -> Option<String> {
    if problem.activation == Activation::GeluTanh && !takes.gelu {
        return Some("GELU needs a floating-point output".to_string());
    }
    let chunk = takes.chunks?.elements;
    let a_leading = match problem.a_layout {
        MatrixLayout::RowMajor => problem.k,
        MatrixLayout::ColMajor => problem.m,
    };
    let b_leading = match problem.b_layout {
        MatrixLayout::RowMajor => problem.n,
        MatrixLayout::ColMajor => problem.k,
    };
    (a_in_chunks && a_leading % chunk != 0 || b_leading % chunk != 0)
        .then(|| format!("must be a multiple of {chunk} elements"))
}

/// The buffer of `buffers` stored in `layout` (every layout is there).
pub fn in_layout<T>(buffers: &[(MatrixLayout, T)], layout: MatrixLayout) -> &T {
    let found = buffers.iter().find(|(stored, _)| *stored == layout);
    &found.expect("an operand is uploaded in every layout").1
}

/// `batches` row-major `rows x cols` matrices (back to back in `rows_data`)
/// stored in `layout` at `stride` elements apart; the gaps hold copies of
/// the first elements (never read by a correct kernel).
pub fn store<T: Copy>(
    rows_data: &[T],
    layout: MatrixLayout,
    (rows, cols): (usize, usize),
    stride: usize,
    batches: usize,
) -> Vec<T> {
    let mut out: Vec<T> = (0..(batches - 1) * stride + rows * cols)
        .map(|i| rows_data[i % rows_data.len()])
        .collect();
    for batch in 0..batches {
        for r in 0..rows {
            for c in 0..cols {
                let at = batch * stride + layout.index((r, c), (rows, cols));
                out[at] = rows_data[(batch * rows + r) * cols + c];
            }
        }
    }
    out
}

/// Records one run of a GEMM variant: a run that must be refused (`refusal`:
/// text its `Err` must contain) must return that `Err`; any other run must
/// match the float64 reference element by element within `tolerance`, with
/// a relative L2 error near the output's rounding (0 for i8).
pub fn judge_gemm(
    report: &mut Report,
    what: &str,
    run: Result<Vec<f64>, Error>,
    refusal: Option<&str>,
    expected: &GemmReference,
    tolerance: &GemmTolerance,
) {
    // Four times the relative L2 of rounding every output once (for tf32: of
    // rounding every input, 2^-11 relative, which dominates), relative to the
    // terms each output sums (`compare::rel_l2_of_terms`).
    let typical_error = match tolerance.precision {
        GemmPrecision::I8 => 0.0,
        GemmPrecision::Bf16 | GemmPrecision::E4m3 | GemmPrecision::E5m2 => 1e-2,
        GemmPrecision::Tf32 => 2e-3,
        GemmPrecision::F16 | GemmPrecision::F32 => 1e-3,
    };
    match (run, refusal) {
        (Err(e), Some(refusal)) => {
            let named = e.to_string().contains(refusal);
            report.check(what, named, format!("refused as it must be: {e}"));
        }
        (Ok(_), Some(refusal)) => {
            let why = format!("ran instead of refusing (the refusal names \"{refusal}\")");
            report.check(what, false, why);
        }
        (Ok(out), None) => {
            // The bound is a worst case (it grows with k); the relative L2 error
            // must also be near the output's rounding, which a missing or
            // doubled k-tile is not.
            let check = compare::check_gemm(&out, expected, tolerance);
            // Over the elements the GEMM writes: the gaps between batches keep
            // C's initial values, NaN where C is poisoned.
            let (narrow, wanted): (Vec<f32>, Vec<f64>) = out
                .iter()
                .zip(&expected.values)
                .filter(|(_, want)| want.is_finite())
                .map(|(&got, &want)| (got as f32, want))
                .unzip();
            let d = deviation(&narrow, &wanted);
            let of_terms = compare::rel_l2_of_terms(&out, expected);
            let ok = check.passes() && of_terms <= typical_error;
            report.check(
                what,
                ok,
                format!("{check}; {d}, rel_l2 of the terms {of_terms:.2e} (at most {typical_error:.0e})"),
            );
        }
        (Err(e), None) => report.error(what, e),
    }
}

/// `stream_scale` (the pipelined `cp_async` stream) over every variant:
/// `y = alpha * x` exactly (one rounding, as the reference's f32 product).
pub fn check_stream(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, sizes: &[usize]) {
    for &n in sizes {
        let x = inputs.f32s(n);
        let alpha = 1.5f32;
        let expected: Vec<f64> = x.iter().map(|&v| (alpha * v) as f64).collect();
        let dx = match rt.upload(&x) {
            Ok(dx) => dx,
            Err(e) => {
                report.error(&format!("stream_scale n={n} upload"), e);
                continue;
            }
        };
        for consts in stream::stream_scale::variants() {
            let what = format!(
                "stream_scale[THREADS={},STAGES={}] n={n}",
                consts.THREADS, consts.STAGES
            );
            let run = || -> Result<Vec<f32>, Error> {
                let mut dy = poisoned(rt, n)?;
                stream::stream_scale_with(rt, consts, &dx, &mut dy, alpha)?;
                rt.download(&dy)
            };
            match run() {
                Ok(out) => {
                    let d = deviation(&out, &expected);
                    report.check(&what, d.passes(0.0) && d.max_abs == 0.0, d);
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}
