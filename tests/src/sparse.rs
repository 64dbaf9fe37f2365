//! The GPU tier's 2:4 sparsity checks (the `mma.sp` layout, the device
//! prune/compress/decompress kernels, the sparse GEMMs) and the `mma.sp`
//! rate kernels.
//!
//! `mma_sp_tile_*` is one warp and two `mma.sp` m16n8k32 steps on a 16 x 64
//! tile of A compressed by the host ([`sparse::Compressed`]): its A and B
//! fragments are built lane by lane from the documented register layouts
//! (ptx-notes.md §6), and its metadata register is word `lane` of the tile's
//! metadata as stored, so an exact match with the host's dense product of
//! the decompressed tile proves the metadata layout and the selector
//! behaviour on the GPU, in both PTX forms. `mma_sp_rate` and
//! `mma_dense_rate` issue independent MMAs back to back for the bench.

use warpforge::prelude::*;
use warpforge::{DeviceScalar, GemmPrecision, MatrixLayout};
use warpforge_kernels::gemm_sparse::{
    decompressed_gemm_f16, gemm_sparse_bf16, gemm_sparse_bf16_with, gemm_sparse_f16,
    gemm_sparse_f16_with, has_sparse_tensor_cores, sparse_gemm_bf16, sparse_gemm_f16,
};
use warpforge_kernels::sparse::device::{self, DeviceCompressed, DeviceSparse};
use warpforge_kernels::sparse::{self, Compressed, SparseElement};

use crate::checks::judge_gemm_float;
use crate::reference::{self, GemmReference, GemmSpec};
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

/// MMAs issued per loop iteration of the rate kernels: independent
/// accumulators, so the Tensor Cores never wait on a previous result.
pub const RATE_CHAINS: u32 = 8;
/// Threads per block of the rate kernels.
pub const RATE_THREADS: u32 = 256;

/// `iters * RATE_CHAINS` sparse m16n8k32 f16 MMAs per warp; `words` gives
/// each lane 8 operand words, `meta` is a legal metadata word.
#[kernel(arch(sm_80, sm_90), block(256), tune(ORDERED = [false, true]))]
pub fn mma_sp_rate<const ORDERED: bool>(words: &[u32], meta: u32, iters: u32, out: &mut [f32]) {
    let lane = lane_id();
    let mut fa = [0u32; 4];
    let mut fb = [0u32; 4];
    #[unroll]
    for i in 0..4u32 {
        fa[i] = words[lane * 8 + i];
        fb[i] = words[lane * 8 + 4 + i];
    }
    let mut acc = [[0.0f32; 4]; 8];
    for _it in 0..iters {
        #[unroll]
        for j in 0..8u32 {
            if ORDERED {
                mma_sp_ordered_m16n8k32_f16(&mut acc[j], &fa, &fb, meta, j % 2);
            } else {
                mma_sp_m16n8k32_f16(&mut acc[j], &fa, &fb, meta, j % 2);
            }
        }
    }
    let mut sum = 0.0f32;
    #[unroll]
    for j in 0..8u32 {
        #[unroll]
        for i in 0..4u32 {
            sum += acc[j][i];
        }
    }
    out[block_idx().x * 256 + thread_idx().x] = sum;
}

/// The dense m16n8k16 f16 counterpart of [`mma_sp_rate`].
#[kernel(arch(sm_80, sm_90), block(256))]
pub fn mma_dense_rate(words: &[u32], iters: u32, out: &mut [f32]) {
    let lane = lane_id();
    let mut fa = [0u32; 4];
    let mut fb = [0u32; 2];
    #[unroll]
    for i in 0..4u32 {
        fa[i] = words[lane * 8 + i];
    }
    fb[0] = words[lane * 8 + 4];
    fb[1] = words[lane * 8 + 5];
    let mut acc = [[0.0f32; 4]; 8];
    for _it in 0..iters {
        #[unroll]
        for j in 0..8u32 {
            mma_m16n8k16_f16(&mut acc[j], &fa, &fb);
        }
    }
    let mut sum = 0.0f32;
    #[unroll]
    for j in 0..8u32 {
        #[unroll]
        for i in 0..4u32 {
            sum += acc[j][i];
        }
    }
    out[block_idx().x * 256 + thread_idx().x] = sum;
}

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

/// The rate kernels' inputs: 8 random f16 pairs per lane (never zeros; the
/// accumulators may overflow, which costs the Tensor Cores nothing).
pub fn rate_words(inputs: &mut Inputs) -> Vec<u32> {
    inputs
        .f32s(32 * 8 * 2)
        .chunks(2)
        .map(|p| {
            let lo = f16::from_f32(p[0] * 0.01 + 0.001).to_bits() as u32;
            let hi = f16::from_f32(p[1] * 0.01 - 0.001).to_bits() as u32;
            lo | hi << 16
        })
        .collect()
}

/// A legal metadata word: every group keeps positions 1 and 3 (`0xd`).
pub const RATE_META: u32 = 0xdddd_dddd;

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

/// What the sparse kernels' 16-byte-copy variants' refusal of a k that is not
/// a multiple of 8 quotes (their `requires`).
const KERNEL_K_REFUSAL: &str = "k % 8 == 0";

/// Launches variant `index` of a sparse GEMM: (a, b, c, (m, n, k), alpha, beta).
type SparseLaunch<'a, T> = dyn Fn(
        usize,
        &DeviceCompressed<T>,
        &DeviceBuffer<T>,
        &mut DeviceBuffer<T>,
        (u32, u32, u32),
        f32,
        f32,
    ) -> Result<(), Error>
    + 'a;

/// A sparse GEMM over `variants` (name, and for those that need k % 8 == 0
/// the text their refusal of another k contains):
/// A is random, pruned and compressed on the host; every variant must match
/// the float64 product of the decompressed A within the dense 16-bit GEMMs'
/// bound ([`judge_gemm_float`]); C is NaN-poisoned when beta = 0.
#[allow(clippy::too_many_arguments)]
fn check_gemm_sparse<T: GemmFloat + DeviceSparse>(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
    precision: GemmPrecision,
    variants: &[(String, Option<&str>)],
    launch: &SparseLaunch<'_, T>,
) {
    let narrow = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(T::from_f32).collect() };
    let widen = |v: &[T]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    for &(m, n, k) in shapes {
        let dense = narrow(inputs.f32s(m * k));
        let b = narrow(inputs.f32s(n * k));
        let c_in = narrow(inputs.f32s(m * n));
        let compressed = match Compressed::prune(&dense, m, k) {
            Ok(c) => c,
            Err(e) => {
                report.error(
                    &format!("sparse {} GEMM {m}x{n}x{k}: host", precision.name()),
                    e,
                );
                continue;
            }
        };
        let a = widen(&compressed.decompress());
        let cases = [(1.5f32, 0.0f32), (0.75, -0.5)];
        let expected: Vec<GemmReference> = cases
            .iter()
            .map(|&(alpha, beta)| {
                let spec = GemmSpec {
                    b_layout: MatrixLayout::ColMajor,
                    alpha: alpha as f64,
                    beta: beta as f64,
                    ..GemmSpec::new(m, n, k)
                };
                let c = (beta != 0.0).then(|| widen(&c_in));
                reference::gemm_general(&spec, &a, &widen(&b), c.as_deref(), None)
            })
            .collect();
        let uploaded =
            (|| Ok::<_, Error>((DeviceCompressed::upload(rt, &compressed)?, rt.upload(&b)?)))();
        let (da, db) = match uploaded {
            Ok(v) => v,
            Err(e) => {
                report.error(
                    &format!("sparse {} GEMM {m}x{n}x{k} upload", precision.name()),
                    e,
                );
                continue;
            }
        };
        for (index, (name, k_refusal)) in variants.iter().enumerate() {
            for (&(alpha, beta), expected) in cases.iter().zip(&expected) {
                let what = format!("{name} {m}x{n}x{k} alpha={alpha} beta={beta}");
                let run = || -> Result<Vec<f64>, Error> {
                    let mut dc = if beta == 0.0 {
                        rt.upload(&vec![T::NAN; m * n])?
                    } else {
                        rt.upload(&c_in)?
                    };
                    let dims = (m as u32, n as u32, k as u32);
                    launch(index, &da, &db, &mut dc, dims, alpha, beta)?;
                    Ok(widen(&rt.download(&dc)?))
                };
                judge_gemm_float(
                    report,
                    &what,
                    run(),
                    k_refusal.filter(|_| k % 8 != 0),
                    expected,
                    precision,
                    k,
                );
            }
        }
    }
}

/// `gemm_sparse_f16` over every variant (on GPUs with sparse Tensor Cores),
/// then `sparse_gemm_f16` (the runtime's choice) and `decompressed_gemm_f16`
/// (the sm_70 fallback, which every GPU runs); see [`check_gemm_sparse`].
pub fn check_gemm_sparse_f16(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
) {
    // Without sparse Tensor Cores only the two paths that run there.
    let variants = if has_sparse_tensor_cores(rt) {
        gemm_sparse_f16::variants()
    } else {
        Vec::new()
    };
    let mut names: Vec<(String, Option<&str>)> = variants
        .iter()
        .map(|c| {
            let name = gemm_sparse_f16::def().variant_name(&c.values());
            (name, c.ALIGNED.then_some(KERNEL_K_REFUSAL))
        })
        .collect();
    names.push(("sparse_gemm_f16 (the runtime's choice)".into(), None));
    // The fallback's wmma GEMM refuses through `GemmVariant::check`.
    let fallback_refusal = "A's leading dimension must be a multiple of 8 elements";
    names.push((
        "decompressed_gemm_f16 (the sm_70 fallback)".into(),
        Some(fallback_refusal),
    ));
    let launch = |i: usize,
                  a: &DeviceCompressed<f16>,
                  b: &DeviceBuffer<f16>,
                  c: &mut DeviceBuffer<f16>,
                  dims,
                  alpha,
                  beta| match i.checked_sub(variants.len()) {
        None => gemm_sparse_f16_with(rt, variants[i], a, b, c, dims, alpha, beta),
        Some(0) => sparse_gemm_f16(rt, a, b, c, dims, alpha, beta),
        Some(_) => decompressed_gemm_f16(rt, a, b, c, dims, alpha, beta),
    };
    check_gemm_sparse(
        rt,
        inputs,
        report,
        shapes,
        GemmPrecision::F16,
        &names,
        &launch,
    );
}

/// `gemm_sparse_bf16` over every variant, then `sparse_gemm_bf16`; see
/// [`check_gemm_sparse`].
pub fn check_gemm_sparse_bf16(
    rt: &Runtime,
    inputs: &mut Inputs,
    report: &mut Report,
    shapes: &[(usize, usize, usize)],
) {
    let variants = gemm_sparse_bf16::variants();
    let mut names: Vec<(String, Option<&str>)> = variants
        .iter()
        .map(|c| {
            let name = gemm_sparse_bf16::def().variant_name(&c.values());
            (name, c.ALIGNED.then_some(KERNEL_K_REFUSAL))
        })
        .collect();
    names.push(("sparse_gemm_bf16 (the runtime's choice)".into(), None));
    let launch = |i: usize,
                  a: &DeviceCompressed<bf16>,
                  b: &DeviceBuffer<bf16>,
                  c: &mut DeviceBuffer<bf16>,
                  dims,
                  alpha,
                  beta| match variants.get(i) {
        Some(&consts) => gemm_sparse_bf16_with(rt, consts, a, b, c, dims, alpha, beta),
        None => sparse_gemm_bf16(rt, a, b, c, dims, alpha, beta),
    };
    check_gemm_sparse(
        rt,
        inputs,
        report,
        shapes,
        GemmPrecision::Bf16,
        &names,
        &launch,
    );
}
