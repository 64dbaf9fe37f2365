//! float64 CPU references of the stock kernels.

use std::thread;

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

/// `alpha * A B + beta * C` for row-major f32 matrices, accumulated in f64 on
/// every core (the GPU tier checks shapes up to 1000^3 and larger).
pub fn gemm(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, n, k): (usize, usize, usize),
    alpha: f64,
    beta: f64,
) -> Vec<f64> {
    let mut out = vec![0.0f64; m * n];
    let workers = thread::available_parallelism().map_or(1, |p| p.get());
    let rows_per_worker = m.div_ceil(workers).max(1);
    thread::scope(|scope| {
        for (chunk_index, chunk) in out.chunks_mut(rows_per_worker * n).enumerate() {
            scope.spawn(move || {
                let mut row_acc = vec![0.0f64; n];
                for (local_row, out_row) in chunk.chunks_mut(n).enumerate() {
                    let i = chunk_index * rows_per_worker + local_row;
                    row_acc.iter_mut().for_each(|v| *v = 0.0);
                    for p in 0..k {
                        let a_ip = a[i * k + p] as f64;
                        for (acc, &b_pj) in row_acc.iter_mut().zip(&b[p * n..p * n + n]) {
                            *acc += a_ip * b_pj as f64;
                        }
                    }
                    for (j, o) in out_row.iter_mut().enumerate() {
                        *o = alpha * row_acc[j]
                            + if beta == 0.0 {
                                0.0
                            } else {
                                beta * c[i * n + j] as f64
                            };
                    }
                }
            });
        }
    });
    out
}
