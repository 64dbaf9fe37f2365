//! float64 CPU references of the stock kernels.

use std::thread;

use warpforge::MatrixLayout;
use warpforge_kernels::gemm_problem::reference_epilogue;

/// `a * x + y`.
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| a as f64 * x as f64 + y as f64)
        .collect()
}

/// Counts of `value % bins`.
pub fn histogram(values: &[u32], bins: u32) -> Vec<u32> {
    let mut counts = vec![0u32; bins as usize];
    for v in values {
        counts[(v % bins) as usize] += 1;
    }
    counts
}

pub fn sum(x: &[f32]) -> f64 {
    x.iter().map(|&v| v as f64).sum()
}

/// Row softmax of a row-major `rows x cols` matrix.
pub fn softmax_rows(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut y = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols).take(rows) {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let exps: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let total: f64 = exps.iter().sum();
        y.extend(exps.iter().map(|e| e / total));
    }
    y
}

/// `alpha * A B + beta * C` for row-major f32 matrices: [`gemm_general`]
/// with one batch and no epilogue beyond beta.
pub fn gemm(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, n, k): (usize, usize, usize),
    alpha: f64,
    beta: f64,
) -> Vec<f64> {
    let widen = |x: &[f32]| x.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
    let spec = GemmSpec {
        alpha,
        beta,
        ..GemmSpec::new(m, n, k)
    };
    let c_in = (beta != 0.0).then(|| widen(c));
    gemm_general(&spec, &widen(a), &widen(b), c_in.as_deref(), None).values
}

/// The epilogue's activation and the strided batches: the kernels' own
/// definitions (`warpforge_kernels::gemm_problem`), which the reference
/// follows.
pub use warpforge_kernels::gemm_problem::{Activation, GemmBatch};

/// A GEMM of the Tensor Core family, for [`gemm_general`]: for each batch,
/// `C = activation(alpha * A B + beta * C + bias)`, where A is `m x k`, B is
/// `k x n` and C is `m x n`, each in its layout, and `bias` is a row of n
/// values added to every row of every batch (`bias[col]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmSpec {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_layout: MatrixLayout,
    pub b_layout: MatrixLayout,
    pub c_layout: MatrixLayout,
    pub batch: GemmBatch,
    pub alpha: f64,
    pub beta: f64,
    pub activation: Activation,
}

impl GemmSpec {
    /// `C = A B` for one pair of row-major matrices; change the rest with
    /// struct update syntax (`GemmSpec { beta: 1.0, ..GemmSpec::new(m, n, k) }`).
    /// Panics past u32 dimensions (the kernels' limit).
    pub fn new(m: usize, n: usize, k: usize) -> GemmSpec {
        let dim = |x: usize| u32::try_from(x).expect("GEMM dimensions fit in u32");
        GemmSpec {
            m,
            n,
            k,
            a_layout: MatrixLayout::RowMajor,
            b_layout: MatrixLayout::RowMajor,
            c_layout: MatrixLayout::RowMajor,
            batch: GemmBatch::packed(1, (dim(m), dim(n), dim(k))),
            alpha: 1.0,
            beta: 0.0,
            activation: Activation::Identity,
        }
    }

    /// Elements A's buffer holds: up to the end of the last batch's matrix.
    pub fn a_len(&self) -> usize {
        self.buffer_len(self.batch.stride_a, self.m * self.k)
    }

    pub fn b_len(&self) -> usize {
        self.buffer_len(self.batch.stride_b, self.k * self.n)
    }

    pub fn c_len(&self) -> usize {
        self.buffer_len(self.batch.stride_c, self.m * self.n)
    }

    fn buffer_len(&self, stride: u32, matrix: usize) -> usize {
        match self.batch.count as usize {
            0 => 0,
            count => (count - 1) * stride as usize + matrix,
        }
    }
}

/// The exact result of a GEMM, in C's buffer, and for each element the
/// scale its rounding errors grow with (see `compare::GemmTolerance`).
#[derive(Clone, Debug, PartialEq)]
pub struct GemmReference {
    /// C after the GEMM (`spec.c_len()` elements). Elements between batches
    /// (when `stride_c > m * n`) keep C's initial value: no GEMM may write them.
    pub values: Vec<f64>,
    /// `|alpha| sum_p |a_ip b_pj| + |beta c_ij| + |bias_j|` for each element
    /// of a batch's C, the sum of the magnitudes of what was added before the
    /// activation; 0 between batches.
    pub magnitudes: Vec<f64>,
}

/// The float64 reference of every GEMM of the Tensor Core family (see
/// [`GemmSpec`]). Inputs are f64 copies of the exact device inputs: convert
/// f16, bf16 and i8 exactly, and f32 as given (tf32 rounding is an error the
/// tolerance allows, or emulate it with [`round_to_tf32`]). `c` is C's
/// initial buffer, needed when beta is not 0 (C is not read where beta is
/// 0, as in BLAS, so NaNs there vanish) and kept between batches (zeros when
/// absent); `bias` holds n values. Sums run in f64 on every core, exact for
/// i8 inputs and far below any device rounding for the others.
///
/// A and B strides may overlap (0 shares one matrix between batches); C's
/// may not. Panics when a slice is shorter than the spec says, batches of C
/// overlap or beta needs a missing C (bugs in the test).
pub fn gemm_general(
    spec: &GemmSpec,
    a: &[f64],
    b: &[f64],
    c: Option<&[f64]>,
    bias: Option<&[f64]>,
) -> GemmReference {
    assert!(
        a.len() >= spec.a_len(),
        "A holds {} elements, the spec needs {}",
        a.len(),
        spec.a_len()
    );
    assert!(
        b.len() >= spec.b_len(),
        "B holds {} elements, the spec needs {}",
        b.len(),
        spec.b_len()
    );
    let GemmSpec { m, n, k, .. } = *spec;
    let batches = spec.batch.count as usize;
    // Each batch's A and B, row-major: every layout then takes one loop.
    let a_rows = gather_row_major(a, spec.a_layout, (m, k), spec.batch.stride_a, batches);
    let b_rows = gather_row_major(b, spec.b_layout, (k, n), spec.batch.stride_b, batches);
    GemmProducts::new(&a_rows, &b_rows, (m, n, k), batches).reference(spec, c, bias)
}

/// `A B` and `|A| |B|` for back-to-back row-major batches: the costly part
/// of [`gemm_general`], which GEMMs that differ only in layouts, scales,
/// bias, activation and batch count (up to these batches) share.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmProducts {
    dims: (usize, usize, usize),
    batches: usize,
    /// Batch after batch, row-major m x n.
    products: Vec<f64>,
    magnitudes: Vec<f64>,
}

impl GemmProducts {
    /// The products of `batches` row-major `m x k` matrices in `a` and `k x
    /// n` ones in `b`, back to back, on every core (the GPU tier checks
    /// shapes up to 4096^3).
    pub fn new(
        a: &[f64],
        b: &[f64],
        (m, n, k): (usize, usize, usize),
        batches: usize,
    ) -> GemmProducts {
        assert!(a.len() >= batches * m * k && b.len() >= batches * k * n);
        let b_abs: Vec<f64> = b.iter().map(|v| v.abs()).collect();
        let (products, magnitudes) = batched_products(a, b, &b_abs, (m, n, k), batches);
        GemmProducts {
            dims: (m, n, k),
            batches,
            products,
            magnitudes,
        }
    }

    /// `(m, n, k)`.
    pub fn dims(&self) -> (usize, usize, usize) {
        self.dims
    }

    /// The reference of `spec`, whose shape must be these products' and whose
    /// batches (`spec.batch.count` of them) these products' first ones; `c`
    /// and `bias` as [`gemm_general`] takes them.
    pub fn reference(
        &self,
        spec: &GemmSpec,
        c: Option<&[f64]>,
        bias: Option<&[f64]>,
    ) -> GemmReference {
        let GemmSpec { m, n, k, .. } = *spec;
        let batches = spec.batch.count as usize;
        let stride_c = spec.batch.stride_c as usize;
        assert_eq!(
            (m, n, k),
            self.dims,
            "the spec's shape is not the products'"
        );
        assert!(
            batches <= self.batches,
            "the spec has {batches} batches, the products {}",
            self.batches
        );
        if let Some(c) = c {
            assert!(
                c.len() >= spec.c_len(),
                "C holds {} elements, the spec needs {}",
                c.len(),
                spec.c_len()
            );
        }
        assert!(
            batches <= 1 || stride_c >= m * n,
            "C's batches overlap: stride_c is {stride_c} and each C holds {} elements",
            m * n
        );
        assert!(
            spec.beta == 0.0 || c.is_some(),
            "beta is {} and no initial C was given",
            spec.beta
        );
        if let Some(bias) = bias {
            assert!(
                bias.len() >= n,
                "bias holds {} values and C has {n} columns",
                bias.len()
            );
        }
        let mut values = match c {
            Some(c) => c[..spec.c_len()].to_vec(),
            None => vec![0.0; spec.c_len()],
        };
        let mut magnitudes = vec![0.0; spec.c_len()];
        for batch in 0..batches {
            for i in 0..m {
                for j in 0..n {
                    let dense = (batch * m + i) * n + j;
                    let at = batch * stride_c + spec.c_layout.index((i, j), (m, n));
                    (values[at], magnitudes[at]) = reference_epilogue(
                        (spec.alpha, spec.beta),
                        spec.activation,
                        (self.products[dense], self.magnitudes[dense]),
                        values[at],
                        bias.map_or(0.0, |bias| bias[j]),
                    );
                }
            }
        }
        GemmReference { values, magnitudes }
    }
}

/// `batches` matrices of `rows x cols` from a strided buffer in `layout`, row-major and back to back.
fn gather_row_major(
    x: &[f64],
    layout: MatrixLayout,
    (rows, cols): (usize, usize),
    stride: u32,
    batches: usize,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(batches * rows * cols);
    for batch in 0..batches {
        let matrix = &x[batch * stride as usize..];
        for r in 0..rows {
            out.extend((0..cols).map(|c| matrix[layout.index((r, c), (rows, cols))]));
        }
    }
    out
}

/// `A B` and `|A| |B|` for back-to-back row-major batches, on every core.
fn batched_products(
    a: &[f64],
    b: &[f64],
    b_abs: &[f64],
    (m, n, k): (usize, usize, usize),
    batches: usize,
) -> (Vec<f64>, Vec<f64>) {
    let rows = batches * m;
    let mut products = vec![0.0f64; rows * n];
    let mut magnitudes = vec![0.0f64; rows * n];
    if n == 0 {
        return (products, magnitudes);
    }
    let workers = thread::available_parallelism().map_or(1, |p| p.get());
    let rows_per_worker = rows.div_ceil(workers).max(1);
    thread::scope(|scope| {
        let chunks = products
            .chunks_mut(rows_per_worker * n)
            .zip(magnitudes.chunks_mut(rows_per_worker * n));
        for (chunk_index, (product_chunk, magnitude_chunk)) in chunks.enumerate() {
            scope.spawn(move || {
                let rows = product_chunk
                    .chunks_mut(n)
                    .zip(magnitude_chunk.chunks_mut(n));
                for (local_row, (product_row, magnitude_row)) in rows.enumerate() {
                    let row = chunk_index * rows_per_worker + local_row;
                    let batch = row / m;
                    let (b, b_abs) = (&b[batch * k * n..], &b_abs[batch * k * n..]);
                    for p in 0..k {
                        let a_ip = a[row * k + p];
                        let b_row = &b[p * n..p * n + n];
                        for (acc, &b_pj) in product_row.iter_mut().zip(b_row) {
                            *acc += a_ip * b_pj;
                        }
                        let a_abs = a_ip.abs();
                        for (acc, &b_abs_pj) in
                            magnitude_row.iter_mut().zip(&b_abs[p * n..p * n + n])
                        {
                            *acc += a_abs * b_abs_pj;
                        }
                    }
                }
            });
        }
    });
    (products, magnitudes)
}

/// `x` rounded to tf32 as `cvt.rna.tf32.f32` rounds it: to the nearest value
/// with 10 mantissa bits, ties away from zero, kept in an f32 with the low 13
/// bits zero. Past the largest tf32 value it rounds to infinity; NaN stays NaN.
pub fn round_to_tf32(x: f32) -> f32 {
    const DROPPED_BITS: u32 = 13;
    if x.is_nan() {
        // Adding the half unit to a NaN's bits could carry into the sign.
        return f32::NAN;
    }
    // The magnitude's bits grow with the magnitude, so adding half a unit of
    // the last kept bit and truncating rounds the magnitude to nearest, ties
    // up, whatever the sign: ties away from zero. A carry out of the mantissa
    // steps the exponent, up to infinity's bits.
    let half_unit = 1u32 << (DROPPED_BITS - 1);
    let kept = !((1u32 << DROPPED_BITS) - 1);
    f32::from_bits((x.to_bits() + half_unit) & kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Inputs;
    use MatrixLayout::{ColMajor, RowMajor};

    /// Where element `(row, col)` of batch `batch` lies in a strided buffer.
    fn element_at(
        layout: MatrixLayout,
        (rows, cols): (usize, usize),
        stride: usize,
        (batch, row, col): (usize, usize, usize),
    ) -> usize {
        let within = match layout {
            RowMajor => row * cols + col,
            ColMajor => col * rows + row,
        };
        batch * stride + within
    }

    fn f64s(inputs: &mut Inputs, n: usize) -> Vec<f64> {
        inputs.f32s(n).into_iter().map(f64::from).collect()
    }

    #[test]
    fn general_gemm_follows_its_definition_for_every_layout_batch_and_epilogue() {
        let (m, n, k) = (5, 3, 4);
        let mut inputs = Inputs::new(7);
        // Padded strides: the gaps between batches stay untouched.
        let batch = GemmBatch {
            count: 3,
            stride_a: (m * k + 2) as u32,
            stride_b: (k * n + 1) as u32,
            stride_c: (m * n + 3) as u32,
        };
        let (stride_a, stride_b, stride_c) = (m * k + 2, k * n + 1, m * n + 3);
        let layouts = MatrixLayout::ALL.into_iter();
        let layouts = layouts.flat_map(|a| MatrixLayout::ALL.map(|b| (a, b)));
        let layouts = layouts.flat_map(|ab| MatrixLayout::ALL.map(|c| (ab, c)));
        for ((a_layout, b_layout), c_layout) in layouts {
            for activation in Activation::ALL {
                let spec = GemmSpec {
                    a_layout,
                    b_layout,
                    c_layout,
                    batch,
                    alpha: 2.0,
                    beta: -0.5,
                    activation,
                    ..GemmSpec::new(m, n, k)
                };
                let (a, b) = (
                    f64s(&mut inputs, spec.a_len()),
                    f64s(&mut inputs, spec.b_len()),
                );
                let (c, bias) = (f64s(&mut inputs, spec.c_len()), f64s(&mut inputs, n));
                let out = gemm_general(&spec, &a, &b, Some(&c), Some(&bias));
                assert_eq!(spec.c_len(), 2 * stride_c + m * n);
                let mut written = vec![false; spec.c_len()];
                for batch_index in 0..3 {
                    for i in 0..m {
                        for (j, &bias_j) in bias.iter().enumerate() {
                            let at = element_at(c_layout, (m, n), stride_c, (batch_index, i, j));
                            written[at] = true;
                            let (mut sum, mut magnitude) = (0.0, 0.0);
                            for p in 0..k {
                                let a_ip =
                                    a[element_at(a_layout, (m, k), stride_a, (batch_index, i, p))];
                                let b_pj =
                                    b[element_at(b_layout, (k, n), stride_b, (batch_index, p, j))];
                                sum += a_ip * b_pj;
                                magnitude += (a_ip * b_pj).abs();
                            }
                            let pre = 2.0 * sum - 0.5 * c[at] + bias_j;
                            let what = format!(
                                "{a_layout} A, {b_layout} B, {c_layout} C, {activation:?}, \
                                 batch {batch_index} ({i}, {j})"
                            );
                            assert!(
                                (out.values[at] - activation.apply(pre)).abs() < 1e-12,
                                "{what}"
                            );
                            let want_magnitude = 2.0 * magnitude + 0.5 * c[at].abs() + bias_j.abs();
                            assert!(
                                (out.magnitudes[at] - want_magnitude).abs() < 1e-12,
                                "{what}"
                            );
                        }
                    }
                }
                for (at, _) in written.iter().enumerate().filter(|(_, w)| !**w) {
                    assert_eq!(out.values[at], c[at], "gap element {at}");
                    assert_eq!(out.magnitudes[at], 0.0);
                }
            }
        }
    }

    #[test]
    fn shared_products_give_the_general_reference() {
        let (m, n, k) = (4, 6, 5);
        let mut inputs = Inputs::new(13);
        let (a, b) = (f64s(&mut inputs, 2 * m * k), f64s(&mut inputs, 2 * k * n));
        let (c, bias) = (f64s(&mut inputs, 2 * m * n), f64s(&mut inputs, n));
        let products = GemmProducts::new(&a, &b, (m, n, k), 2);
        for count in [1, 2] {
            let spec = GemmSpec {
                batch: GemmBatch::packed(count, (m as u32, n as u32, k as u32)),
                beta: 0.25,
                activation: Activation::Relu,
                ..GemmSpec::new(m, n, k)
            };
            assert_eq!(
                products.reference(&spec, Some(&c), Some(&bias)),
                gemm_general(&spec, &a, &b, Some(&c), Some(&bias))
            );
        }
    }

    #[test]
    fn beta_zero_never_reads_c_and_a_missing_c_is_zeros() {
        let spec = GemmSpec {
            batch: GemmBatch {
                count: 2,
                stride_a: 4,
                stride_b: 4,
                stride_c: 5,
            },
            ..GemmSpec::new(2, 2, 2)
        };
        let a = [1.0, 2.0, 3.0, 4.0, 1.0, 0.0, 0.0, 1.0];
        let b = [1.0, 0.0, 0.0, 1.0, 5.0, 6.0, 7.0, 8.0];
        let c = [f64::NAN; 9];
        let out = gemm_general(&spec, &a, &b, Some(&c), None);
        // Batch 0: A times the identity; batch 1: the identity times B.
        assert_eq!(&out.values[..4], &[1.0, 2.0, 3.0, 4.0]);
        assert!(out.values[4].is_nan(), "the gap keeps C's value");
        assert_eq!(&out.values[5..], &[5.0, 6.0, 7.0, 8.0]);
        let out = gemm_general(&spec, &a, &b, None, None);
        assert_eq!(out.values[4], 0.0);
        assert_eq!(&out.magnitudes[..4], &[1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn the_f32_gemm_is_the_general_one_on_row_major_f32() {
        let (m, n, k) = (7, 5, 3);
        let mut inputs = Inputs::new(3);
        let (a, b, c) = (inputs.f32s(m * k), inputs.f32s(k * n), inputs.f32s(m * n));
        let out = gemm(&a, &b, &c, (m, n, k), 1.5, 0.25);
        for i in 0..m {
            for j in 0..n {
                let sum: f64 = (0..k)
                    .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                    .sum();
                let want = 1.5 * sum + 0.25 * f64::from(c[i * n + j]);
                assert!((out[i * n + j] - want).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn tf32_rounding_is_to_nearest_ties_away_from_zero() {
        let unit = 2f32.powi(-10);
        // Already tf32 values stay.
        for x in [
            0.0,
            -0.0,
            1.0,
            1.0 + unit,
            -3.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(round_to_tf32(x).to_bits(), x.to_bits(), "{x}");
        }
        // Below half a unit: down; above: up; exactly half: away from zero.
        assert_eq!(round_to_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(round_to_tf32(1.0 + 3.0 * 2f32.powi(-12)), 1.0 + unit);
        assert_eq!(round_to_tf32(1.0 + 2f32.powi(-11)), 1.0 + unit);
        assert_eq!(round_to_tf32(-(1.0 + 2f32.powi(-11))), -(1.0 + unit));
        assert_eq!(round_to_tf32(1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2.0 * unit);
        // A carry out of the mantissa steps the exponent, up to infinity.
        assert_eq!(round_to_tf32(2.0 - 2f32.powi(-23)), 2.0);
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
        assert_eq!(round_to_tf32(-f32::MAX), f32::NEG_INFINITY);
        // Subnormals keep 10 bits below the same exponent.
        let tiny = f32::from_bits(0x0000_1000);
        assert_eq!(round_to_tf32(tiny).to_bits(), 0x0000_2000);
        assert_eq!(round_to_tf32(f32::from_bits(0x0000_0fff)).to_bits(), 0);
        assert!(round_to_tf32(f32::NAN).is_nan());
        assert!(round_to_tf32(f32::from_bits(0xffff_ffff)).is_nan());
        // Every result has its 13 low bits clear.
        let mut inputs = Inputs::new(11);
        for x in inputs.f32s(1000) {
            let r = round_to_tf32(x * 1e3);
            assert_eq!(r.to_bits() & 0x1fff, 0);
            assert!(
                (f64::from(r) - f64::from(x * 1e3)).abs()
                    <= f64::from((x * 1e3).abs()) * 2f64.powi(-11)
            );
        }
    }
}
