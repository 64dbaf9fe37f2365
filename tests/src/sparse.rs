//! The GPU tier's 2:4 sparsity checks (the `mma.sp` layout, the device
//! prune/compress/decompress kernels, the sparse GEMMs).
//!
//! `mma_sp_tile_*` is one warp and two `mma.sp` m16n8k32 steps on a 16 x 64
//! tile of A compressed by the host ([`sparse::Compressed`]): its A and B
//! fragments are built lane by lane from the documented register layouts
//! (docs/ptx.md, "Sparse mma.sp"), and its metadata register is word `lane` of the tile's
//! metadata as stored, so an exact match with the host's dense product of
//! the decompressed tile proves the metadata layout and the selector
//! behaviour on the GPU, in both PTX forms. The `mma.sp` rate kernel is in
//! [`crate::rates`].

use warpforge::prelude::*;
use warpforge::{BufferRef, DeviceScalar, GemmPrecision, MatrixLayout};
use warpforge_kernels::gemm_problem::{Chunks, GemmProblem, VariantLayouts, VariantTakes};
use warpforge_kernels::gemm_sparse::{
    decompressed_gemm_f16, gemm_sparse_bf16, gemm_sparse_f16, has_sparse_tensor_cores,
    sparse_gemm_bf16, sparse_gemm_f16, SparseGemmVariant,
};
use warpforge_kernels::sparse::device::{self, DeviceCompressed, DeviceSparse};
use warpforge_kernels::sparse::{self, Compressed, SparseElement};

use crate::checks::{
    expected_refusal, in_layout, judge_gemm, store, GemmCase, GemmCoverage, GemmData, GEMM_CASES,
    LARGE_GEMM,
};
use crate::reference::{GemmBatch, GemmProducts};
use crate::report::Report;
use crate::{GemmFloat, Inputs};

/// One source for both 16-bit types: the element type and its packing.
macro_rules! mma_sp_tile {
    ($name:ident, $elem:ident, $pack:ident, $mma:ident, $mma_ordered:ident) => {
        /// `c = A b` for a 16 x 64 2:4 tile of A given as its compressed
        /// values `a` (16 x 32) and metadata `meta` (32 words), `b` 64 x 8
        /// stored as 8 rows of 64 (k contiguous) and `c` 16 x 8 row-major.
        #[kernel(arch(sm_80, sm_90), block(32), tune(ORDERED = [false, true]))]
        pub fn $name<const ORDERED: bool>(a: &[$elem], meta: &[u32], b: &[$elem], c: &mut [f32]) {
            let lane = lane_id();
            let g = lane / 4;
            let t = lane % 4;
            let e = meta[lane];
            let mut acc = [0.0f32; 4];
            let mut fa = [0u32; 4];
            let mut fb = [0u32; 4];
            #[unroll]
            for s in 0..2u32 {
                #[unroll]
                for i in 0..4u32 {
                    // A: rows g, g + 8, g, g + 8; compressed columns 2t (+ 8 for i >= 2).
                    let at = (g + i % 2 * 8) * 32 + s * 16 + 2 * t + i / 2 * 8;
                    fa[i] = $pack(a[at] as f32, a[at + 1] as f32);
                    // B: column g, rows 2t + 8i and the next.
                    let bt = g * 64 + s * 32 + 2 * t + 8 * i;
                    fb[i] = $pack(b[bt] as f32, b[bt + 1] as f32);
                }
                if ORDERED {
                    $mma_ordered(&mut acc, &fa, &fb, e, s);
                } else {
                    $mma(&mut acc, &fa, &fb, e, s);
                }
            }
            // C: rows g and g + 8, columns 2t and 2t + 1.
            #[unroll]
            for i in 0..4u32 {
                c[(g + i / 2 * 8) * 8 + 2 * t + i % 2] = acc[i];
            }
        }
    };
}

mma_sp_tile!(
    mma_sp_tile_f16,
    f16,
    pack_f16x2,
    mma_sp_m16n8k32_f16,
    mma_sp_ordered_m16n8k32_f16
);
mma_sp_tile!(
    mma_sp_tile_bf16,
    bf16,
    pack_bf16x2,
    mma_sp_m16n8k32_bf16,
    mma_sp_ordered_m16n8k32_bf16
);

/// Small integers (|x| <= 8) of the element type: every product and every
/// sum of the tile is exact in f32, so the check is exact.
fn small_integers<T: GemmFloat>(inputs: &mut Inputs, n: usize) -> Vec<T> {
    inputs
        .f32s(n)
        .into_iter()
        .map(|v| T::from_f32((v * 8.0).round()))
        .collect()
}

/// The float64 product `C = A B` of a 16 x 64 dense `a` and `b` stored as 8 rows of 64.
fn tile_product<T: SparseElement>(a: &[T], b: &[T]) -> Vec<f64> {
    let mut c = vec![0.0; 16 * 8];
    for r in 0..16 {
        for n in 0..8 {
            c[r * 8 + n] = (0..64)
                .map(|k| a[r * 64 + k].to_f32() as f64 * b[n * 64 + k].to_f32() as f64)
                .sum();
        }
    }
    c
}

/// Launches `ORDERED` form of a tile kernel: (values, metadata, b, c).
type TileLaunch<'a, T> = dyn Fn(
        bool,
        &DeviceBuffer<T>,
        &DeviceBuffer<u32>,
        &DeviceBuffer<T>,
        &mut DeviceBuffer<f32>,
    ) -> Result<(), Error>
    + 'a;

fn check_tile<T: GemmFloat + SparseElement>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    name: &str,
    trials: usize,
    launch: &TileLaunch<'_, T>,
) {
    for trial in 0..trials {
        let dense = small_integers::<T>(inputs, 16 * 64);
        let b = small_integers::<T>(inputs, 8 * 64);
        let compressed = match Compressed::prune(&dense, 16, 64) {
            Ok(c) => c,
            Err(e) => {
                report.error(&format!("{name} trial {trial}: host compression"), e);
                continue;
            }
        };
        let expected = tile_product(&compressed.decompress(), &b);
        for ordered in [false, true] {
            let form = if ordered {
                "mma.sp::ordered_metadata"
            } else {
                "mma.sp"
            };
            let what = format!("{name} ({form}) trial {trial}: 16x64 2:4 tile x 64x8");
            let run = || -> Result<Vec<f32>, Error> {
                let values = rt.upload(compressed.values())?;
                let metadata = rt.upload(compressed.metadata())?;
                let db = rt.upload(&b)?;
                let mut c = crate::checks::poisoned(rt, 16 * 8)?;
                launch(ordered, &values, &metadata, &db, &mut c)?;
                rt.download(&c)
            };
            match run() {
                Ok(out) => {
                    let wrong: Vec<usize> = (0..out.len())
                        .filter(|&i| out[i] as f64 != expected[i])
                        .collect();
                    let detail = match wrong.first() {
                        None => "exact".to_string(),
                        Some(&i) => format!(
                            "{} of 128 differ; first C[{}][{}] = {}, expected {}",
                            wrong.len(),
                            i / 8,
                            i % 8,
                            out[i],
                            expected[i]
                        ),
                    };
                    report.check(&what, wrong.is_empty(), detail);
                }
                Err(e) => report.error(&what, e),
            }
        }
    }
}

/// `mma.sp` m16n8k32 against the host: random 2:4 tiles compressed by
/// [`Compressed`], both PTX forms, f16 and bf16, exact results.
pub fn check_mma_sp(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, trials: usize) {
    let grid = Grid::blocks([1, 1, 1]);
    check_tile::<f16>(
        rt,
        inputs,
        report,
        "mma_sp_tile_f16",
        trials,
        &|ordered, a, m, b, c| {
            let consts = mma_sp_tile_f16::Consts { ORDERED: ordered };
            mma_sp_tile_f16::launch(rt, consts, grid, a, m, b, c)
        },
    );
    check_tile::<bf16>(
        rt,
        inputs,
        report,
        "mma_sp_tile_bf16",
        trials,
        &|ordered, a, m, b, c| {
            let consts = mma_sp_tile_bf16::Consts { ORDERED: ordered };
            mma_sp_tile_bf16::launch(rt, consts, grid, a, m, b, c)
        },
    );
}

/// Random values with many zeros and equal magnitudes (ties), and a NaN and
/// both infinities when the matrix has room: what the pruning rule must
/// order the same way on both sides.
fn prunable<T: GemmFloat>(inputs: &mut Inputs, n: usize) -> Vec<T> {
    let mut v: Vec<T> = inputs
        .f32s(n)
        .into_iter()
        .map(|x| T::from_f32((x * 4.0).round() * 0.25))
        .collect();
    for (at, special) in [
        (n / 3, f32::NAN),
        (n / 2, f32::INFINITY),
        (n * 2 / 3, -f32::INFINITY),
    ] {
        if n >= 8 {
            v[at] = T::from_f32(special);
        }
    }
    v
}

fn same_bits<T: DeviceScalar>(what: &str, got: &[T], want: &[T]) -> (bool, String) {
    let first = got
        .iter()
        .zip(want)
        .position(|(g, w)| g.param_bits() != w.param_bits());
    match (got.len() == want.len(), first) {
        (false, _) => (
            false,
            format!("{what}: {} elements, expected {}", got.len(), want.len()),
        ),
        (true, None) => (true, format!("{what}: bit-exact")),
        (true, Some(i)) => (
            false,
            format!(
                "{what}: element {i} has bits {:#x}, the host {:#x}",
                got[i].param_bits(),
                want[i].param_bits()
            ),
        ),
    }
}

fn check_device_type<T: GemmFloat + DeviceSparse>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize)],
    ty: &str,
) {
    for &(rows, cols) in shapes {
        let dense = prunable::<T>(inputs, rows * cols);
        let (pruned, compressed) = match (
            sparse::prune_2_4(&dense, rows, cols),
            Compressed::prune(&dense, rows, cols),
        ) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => {
                report.error(&format!("sparse {ty} {rows}x{cols}: host"), e);
                continue;
            }
        };
        let what = format!("sparse device prune, compress, decompress {ty} {rows}x{cols}");
        let run = || -> Result<Vec<(bool, String)>, Error> {
            let d_dense = rt.upload(&dense)?;
            let d_pruned = device::prune_2_4(rt, &d_dense, rows, cols)?;
            let d_compressed = device::compress(rt, &d_dense, rows, cols)?;
            let d_uploaded = DeviceCompressed::upload(rt, &compressed)?;
            let d_decompressed = device::decompress(rt, &d_uploaded)?;
            Ok(vec![
                same_bits("prune", &rt.download(&d_pruned)?, &pruned),
                same_bits(
                    "compressed values",
                    &rt.download(d_compressed.values())?,
                    compressed.values(),
                ),
                same_bits(
                    "metadata",
                    &rt.download(d_compressed.metadata())?,
                    compressed.metadata(),
                ),
                same_bits(
                    "decompress",
                    &rt.download(&d_decompressed)?,
                    &compressed.decompress(),
                ),
            ])
        };
        match run() {
            Ok(parts) => {
                let ok = parts.iter().all(|(ok, _)| *ok);
                let detail: Vec<String> = parts.into_iter().map(|(_, d)| d).collect();
                report.check(&what, ok, detail.join("; "));
            }
            Err(e) => report.error(&what, e),
        }
    }
}

/// The device's 2:4 kernels against the host's functions, bit for bit: prune,
/// compress (of the unpruned matrix: it prunes as it compresses) and
/// decompress, f16 and bf16 (bf16 from sm_80 on), ragged shapes included.
pub fn check_sparse_device(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize)],
) {
    check_device_type::<f16>(rt, inputs, report, shapes, "f16");
    if rt.device().compute_capability >= (8, 0) {
        check_device_type::<bf16>(rt, inputs, report, shapes, "bf16");
    }
}

/// A shorthand sparse GEMM entry point: `(rt, problem, a, b, c, bias)`.
pub type SparseLaunch<T> = fn(
    &Runtime,
    &GemmProblem<f32>,
    &DeviceCompressed<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    Option<&DeviceBuffer<T>>,
) -> Result<(), Error>;

/// A sparse GEMM family the GPU tier checks: its precision, and its
/// shorthand entry points besides the variants.
pub trait CheckedSparseGemm: SparseGemmVariant<Elem: GemmFloat + DeviceSparse> {
    const PRECISION: GemmPrecision;
    /// The entry point that picks the variant (the runtime's choice).
    const PICKED: (&'static str, SparseLaunch<Self::Elem>);
    /// The fallback without sparse Tensor Cores (a decompressed A through a
    /// dense GEMM that copies 16-byte chunks of A and B), where there is one.
    const FALLBACK: Option<(&'static str, SparseLaunch<Self::Elem>)>;
}

impl CheckedSparseGemm for gemm_sparse_f16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::F16;
    // Closures: the entry points are generic over their buffer arguments.
    const PICKED: (&'static str, SparseLaunch<f16>) =
        ("sparse_gemm_f16", |rt, p, a, b, c, bias| {
            sparse_gemm_f16(rt, p, a, b, c, bias.map(BufferRef::from))
        });
    const FALLBACK: Option<(&'static str, SparseLaunch<f16>)> =
        Some(("decompressed_gemm_f16", |rt, p, a, b, c, bias| {
            decompressed_gemm_f16(rt, p, a, b, c, bias.map(BufferRef::from))
        }));
}

impl CheckedSparseGemm for gemm_sparse_bf16::Consts {
    const PRECISION: GemmPrecision = GemmPrecision::Bf16;
    const PICKED: (&'static str, SparseLaunch<bf16>) =
        ("sparse_gemm_bf16", |rt, p, a, b, c, bias| {
            sparse_gemm_bf16(rt, p, a, b, c, bias.map(BufferRef::from))
        });
    const FALLBACK: Option<(&'static str, SparseLaunch<bf16>)> = None;
}

/// One way the check runs a sparse GEMM.
enum SparseRun<V: CheckedSparseGemm> {
    /// A variant (on GPUs with sparse Tensor Cores), and whether it is the
    /// first of its B layout (which runs every case where coverage is sampled).
    Variant(V, bool),
    /// An entry point that takes either B layout and runs every case; `dense`
    /// for the fallback, which copies 16-byte chunks of A and B.
    Path(&'static str, SparseLaunch<V::Elem>, bool),
}

impl<V: CheckedSparseGemm> SparseRun<V> {
    /// The variants (with sparse Tensor Cores), then the entry points.
    fn all(sparse_tensor_cores: bool) -> Vec<SparseRun<V>> {
        let mut seen = Vec::new();
        let variants = V::variants().into_iter().filter(|_| sparse_tensor_cores);
        let mut runs: Vec<SparseRun<V>> = variants
            .map(|v| {
                let first = !seen.contains(&v.b_layout());
                seen.push(v.b_layout());
                SparseRun::Variant(v, first)
            })
            .collect();
        runs.push(SparseRun::Path(V::PICKED.0, V::PICKED.1, false));
        if let Some((name, launch)) = V::FALLBACK {
            runs.push(SparseRun::Path(name, launch, true));
        }
        runs
    }

    fn name(&self) -> String {
        match self {
            SparseRun::Variant(v, _) => v.name(),
            SparseRun::Path(name, _, _) => format!("{name} (picks its variant)"),
        }
    }

    fn reads(&self, b_layout: MatrixLayout) -> bool {
        match self {
            SparseRun::Variant(v, _) => v.b_layout() == b_layout,
            SparseRun::Path(..) => true,
        }
    }

    fn representative(&self) -> bool {
        match self {
            SparseRun::Variant(_, first) => *first,
            SparseRun::Path(..) => true,
        }
    }

    /// What its refusal of `problem` names, if it must refuse it.
    fn refusal(&self, problem: &GemmProblem<f32>) -> Option<String> {
        let takes = |chunks| VariantTakes {
            layouts: VariantLayouts::Any,
            chunks,
            gelu: true,
        };
        match self {
            SparseRun::Variant(v, _) => expected_refusal(&takes(v.chunks()), problem, false),
            SparseRun::Path(_, _, false) => None,
            SparseRun::Path(_, _, true) => {
                let chunks = Chunks {
                    elements: 8,
                    otherwise: "",
                };
                expected_refusal(&takes(Some(chunks)), problem, true)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        rt: &Runtime,
        problem: &GemmProblem<f32>,
        a: &DeviceCompressed<V::Elem>,
        b: &DeviceBuffer<V::Elem>,
        c: &mut DeviceBuffer<V::Elem>,
        bias: Option<&DeviceBuffer<V::Elem>>,
    ) -> Result<(), Error> {
        match self {
            SparseRun::Variant(v, _) => v.run(rt, problem, a, b, c, bias.map(BufferRef::from)),
            SparseRun::Path(_, launch, _) => launch(rt, problem, a, b, c, bias),
        }
    }
}

/// The lines [`check_gemm_sparse`] reports for family `V` on `shapes` (on a
/// GPU with sparse Tensor Cores) when nothing fails to upload: one per run.
pub fn sparse_gemm_lines<V: CheckedSparseGemm>(
    shapes: &[(usize, usize, usize)],
    coverage: GemmCoverage,
) -> usize {
    let runs = SparseRun::<V>::all(true);
    let count = |&(m, n, k): &(usize, usize, usize)| {
        let runs_of = |case: &GemmCase| {
            let per_layout = |b| {
                let reading = runs.iter().filter(|run| run.reads(b));
                let running =
                    reading.filter(|run| case.runs(m * n * k, run.representative(), coverage));
                running.count()
            };
            MatrixLayout::ALL.into_iter().map(per_layout).sum::<usize>()
        };
        GEMM_CASES.iter().map(runs_of).sum::<usize>()
    };
    shapes.iter().map(count).sum()
}

/// A sparse GEMM family `V` over every variant (where the GPU has sparse
/// Tensor Cores) and its entry points ([`CheckedSparseGemm`]), every shape,
/// both B layouts and every [`GEMM_CASES`] case (C layout, bias, ReLU, GELU,
/// beta, strided batches; as `coverage` and [`LARGE_GEMM`] allow): A is
/// random, each batch padded to a multiple of 16 rows, the stack pruned and
/// compressed on the host (`stride_a` = 16-row-aligned batches, as the
/// sparse GEMMs take them); every run must match the float64 reference of
/// the decompressed A within [`GemmTolerance`], or refuse (16-byte copies of
/// a B whose leading dimension is not a multiple of 8) with an `Err` naming
/// the constraint.
pub fn check_gemm_sparse<V: CheckedSparseGemm>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
    coverage: GemmCoverage,
) {
    let runs = SparseRun::<V>::all(has_sparse_tensor_cores(rt));
    let precision = V::PRECISION;
    let widen = |v: &[V::Elem]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    for &(m, n, k) in shapes {
        let macs = m * n * k;
        let batches = if macs <= LARGE_GEMM { 3 } else { 1 };
        // A's batches 16-row aligned; B's and C's a multiple of every chunk apart, with a gap.
        let a_rows_apart = m.next_multiple_of(16);
        let padded = |len: usize| len.next_multiple_of(16) + 16;
        let (stride_b, stride_c) = (padded(k * n), padded(m * n));
        let batch = |count| GemmBatch {
            count,
            stride_a: (a_rows_apart * k) as u32,
            stride_b: stride_b as u32,
            stride_c: stride_c as u32,
        };
        let stack_rows = (batches - 1) * a_rows_apart + m;
        let mut stack = V::Elem::draw(inputs, stack_rows * k);
        for (r, row) in stack.chunks_mut(k.max(1)).enumerate() {
            if r % a_rows_apart >= m {
                row.fill(V::Elem::ZERO);
            }
        }
        let compressed = match Compressed::prune(&stack, stack_rows, k) {
            Ok(c) => c,
            Err(e) => {
                report.error(&format!("sparse {precision} GEMM {m}x{n}x{k}: host"), e);
                continue;
            }
        };
        // Each batch's pruned A, back to back, for the products.
        let pruned = compressed.decompress();
        let a_rows: Vec<V::Elem> = (0..batches)
            .flat_map(|i| &pruned[i * a_rows_apart * k..(i * a_rows_apart + m) * k])
            .copied()
            .collect();
        let b_rows = V::Elem::draw(inputs, batches * k * n);
        let c_in = V::Elem::draw(inputs, (batches - 1) * stride_c + m * n);
        let bias = V::Elem::draw(inputs, n);
        let products = GemmProducts::new(&widen(&a_rows), &widen(&b_rows), (m, n, k), batches);
        let uploaded = (|| {
            let mut b = Vec::new();
            for layout in MatrixLayout::ALL {
                let stored = store(&b_rows, layout, (k, n), stride_b, batches);
                b.push((layout, rt.upload(&stored)?));
            }
            Ok::<_, Error>((
                DeviceCompressed::upload(rt, &compressed)?,
                b,
                rt.upload(&bias)?,
            ))
        })();
        let (a, b_buffers, bias_buffer) = match uploaded {
            Ok(buffers) => buffers,
            Err(e) => {
                report.error(&format!("sparse {precision} GEMM {m}x{n}x{k} upload"), e);
                continue;
            }
        };
        let poison = vec![V::Elem::NAN; c_in.len()];
        for case in &GEMM_CASES {
            if !case.runs_on_any(macs, runs.iter().map(SparseRun::representative), coverage) {
                continue;
            }
            let c_buffers = (&c_in[..], &poison[..], &bias[..]);
            let ((alpha, beta), c_initial, expected) =
                case.expected::<f32, V::Elem>(&products, batch(case.batches), c_buffers);
            for b_layout in MatrixLayout::ALL {
                for run in runs.iter().filter(|run| run.reads(b_layout)) {
                    if !case.runs(macs, run.representative(), coverage) {
                        continue;
                    }
                    let layouts = (MatrixLayout::RowMajor, b_layout);
                    let scales = (alpha, beta);
                    let problem = case.problem((m, n, k), layouts, batch(case.batches), scales);
                    let what = case.describe(&run.name(), &problem);
                    let result = || -> Result<Vec<f64>, Error> {
                        let mut dc = rt.upload(c_initial)?;
                        let bias = case.bias.then_some(&bias_buffer);
                        let b = in_layout(&b_buffers, b_layout);
                        run.run(rt, &problem, &a, b, &mut dc, bias)?;
                        Ok(widen(&rt.download(&dc)?))
                    };
                    let tolerance = case.tolerance(precision, precision.output(), k);
                    let refusal = run.refusal(&problem);
                    judge_gemm(
                        report,
                        &what,
                        result(),
                        refusal.as_deref(),
                        &expected,
                        &tolerance,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant runs in its B layout, the entry points in both; where
    /// coverage is sampled, the first variant of each B layout and the entry
    /// points run every case, the rest the first.
    #[test]
    fn the_sparse_check_runs_every_variant_in_its_b_layout() {
        let variants = gemm_sparse_f16::variants().len();
        let runs = SparseRun::<gemm_sparse_f16::Consts>::all(true);
        assert_eq!(runs.len(), variants + 2);
        let first_of_layout = runs
            .iter()
            .filter(|run| matches!(run, SparseRun::Variant(_, true)));
        assert_eq!(first_of_layout.count(), 2);
        let small = [(8, 8, 8)];
        let cases = GEMM_CASES.len();
        // Both entry points run in each B layout.
        let per_case = variants + 2 * 2;
        assert_eq!(
            sparse_gemm_lines::<gemm_sparse_f16::Consts>(&small, GemmCoverage::Full),
            cases * per_case
        );
        assert_eq!(
            sparse_gemm_lines::<gemm_sparse_f16::Consts>(&small, GemmCoverage::Sampled),
            per_case + (cases - 1) * 2 * (1 + 2)
        );
        // bf16 has no fallback; without sparse Tensor Cores only the entry points run.
        let bf16 = SparseRun::<gemm_sparse_bf16::Consts>::all(false);
        assert_eq!(bf16.len(), 1);
        assert!(bf16[0].reads(MatrixLayout::RowMajor) && bf16[0].reads(MatrixLayout::ColMajor));
    }

    #[test]
    fn only_copies_of_a_misaligned_b_are_refused() {
        let tn = GemmProblem::new((64, 64, 63), 1.0f32, 0.0);
        let runs = SparseRun::<gemm_sparse_f16::Consts>::all(true);
        for run in &runs {
            let refusal = run.refusal(&tn);
            let copies_b = match run {
                SparseRun::Variant(v, _) => v.chunks().is_some(),
                // The fallback copies 16-byte chunks of its dense A (k = 63) too.
                SparseRun::Path(_, _, dense) => *dense,
            };
            assert_eq!(refusal.is_some(), copies_b, "{}", run.name());
        }
        // A compressed A is never refused for its k; a row-major B's n counts.
        let nn = GemmProblem {
            b_layout: MatrixLayout::RowMajor,
            ..GemmProblem::new((64, 60, 63), 1.0f32, 0.0)
        };
        let aligned = runs.iter().find(|run| match run {
            SparseRun::Variant(v, _) => v.chunks().is_some(),
            SparseRun::Path(..) => false,
        });
        let refusal = aligned.unwrap().refusal(&nn).unwrap();
        assert!(refusal.contains("multiple of 8 elements"), "{refusal}");
        let fine = GemmProblem { n: 64, ..nn };
        assert!(aligned.unwrap().refusal(&fine).is_none());
    }
}
