//! The GPU tier's check of the transposed operand loads the Tensor Core
//! GEMMs use for column-major A and row-major B (`gemm_tc`), whose lane
//! addresses were derived by hand from the PTX ISA (docs/ptx.md, "ldmatrix"):
//! proven on their own so that a failure points here rather than at a whole GEMM.
//!
//! `ldmatrix_trans_tile` is one warp and one 16-wide k step: A stored as 16 k
//! rows of 128 m values (256-byte rows), B as 16 k rows of 64 n values
//! (128-byte rows), each placed in shared memory with `gemm_tc`'s swizzle for
//! m- and n-contiguous tiles (chunk `ch` of row `r` at `ch ^ (r % 8)`, which
//! keeps a chunk in its group of 8), then read with `ldmatrix_x4_trans` at
//! `gemm_tc`'s addresses for a 64 x 64 warp tile at m = 64 (chunks past the
//! first group of 8): A lane `l` at k row `l % 8 + 8 (l / 16)`, m chunk
//! `l / 8 % 2`; B lane `l` at k row `l % 16`, n chunk `l / 16`. With
//! integer-valued data every product and sum is exact, so the 64 x 64
//! result must equal the host's `A^T B` exactly.

use warpforge::prelude::*;

use crate::report::Report;
use crate::Inputs;

/// `c` (64 x 64, row-major) = the product of the A columns (m) 64..128 and
/// B, for `a` 16 x 128 and `b` 16 x 64, both k-major (row `k`).
#[kernel(arch(sm_80, sm_90), block(32))]
pub fn ldmatrix_trans_tile(a: &[f16], b: &[f16], c: &mut [f32]) {
    let mut a_tile: [[f16; 128]; 16] = shared();
    let mut b_tile: [[f16; 64]; 16] = shared();
    let lane = lane_id();
    for e in (lane..16 * 128).step_by(32) {
        let r = e / 128;
        let m = e % 128;
        a_tile[r][(m / 8 ^ r % 8) * 8 + m % 8] = a[e];
    }
    for e in (lane..16 * 64).step_by(32) {
        let r = e / 64;
        let n = e % 64;
        b_tile[r][(n / 8 ^ r % 8) * 8 + n % 8] = b[e];
    }
    sync_threads();
    let mut fa = [[0u32; 4]; 4];
    let mut pairs = [[0u32; 4]; 4];
    let mut fb = [[0u32; 2]; 8];
    #[unroll]
    for i in 0..4u32 {
        let chunk = 64 / 8 + i * 2 + lane / 8 % 2;
        ldmatrix_x4_trans(
            &mut fa[i],
            &a_tile[lane % 8 + lane / 16 * 8][(chunk ^ lane % 8) * 8],
        );
    }
    // One x4 load gives {b0, b1} of two 8-column n tiles.
    #[unroll]
    for j in 0..4u32 {
        let chunk = j * 2 + lane / 16;
        ldmatrix_x4_trans(&mut pairs[j], &b_tile[lane % 16][(chunk ^ lane % 8) * 8]);
        fb[2 * j][0] = pairs[j][0];
        fb[2 * j][1] = pairs[j][1];
        fb[2 * j + 1][0] = pairs[j][2];
        fb[2 * j + 1][1] = pairs[j][3];
    }
    let mut acc = [[[0.0f32; 4]; 8]; 4];
    let g = lane / 4;
    let t = lane % 4;
    #[unroll]
    for i in 0..4u32 {
        #[unroll]
        for j in 0..8u32 {
            mma_m16n8k16_f16(&mut acc[i][j], &fa[i], &fb[j]);
            // Rows g and g + 8, columns 2t and 2t + 1 of the 16 x 8 tile.
            #[unroll]
            for e in 0..4u32 {
                c[(i * 16 + e / 2 * 8 + g) * 64 + j * 8 + 2 * t + e % 2] = acc[i][j][e];
            }
        }
    }
}

/// `trials` runs of [`ldmatrix_trans_tile`] on fresh integer-valued data in
/// [-4, 4], each against the exact host product: one line per trial.
pub fn check_ldmatrix_trans(rt: &Runtime, inputs: &mut Inputs, report: &mut Report, trials: usize) {
    for trial in 0..trials {
        let what = format!(
            "ldmatrix_trans_tile (ldmatrix.x4.trans of swizzled k-major A and B into mma m16n8k16) trial {trial}"
        );
        let mut values = |n: usize| -> Vec<f16> {
            let drawn = inputs.f32s(n).into_iter();
            drawn.map(|x| f16::from_f32((x * 4.0).round())).collect()
        };
        let (a, b) = (values(16 * 128), values(16 * 64));
        let run = || -> Result<Vec<f32>, Error> {
            let (da, db) = (rt.upload(&a)?, rt.upload(&b)?);
            let mut dc = rt.upload(&vec![f32::NAN; 64 * 64])?;
            ldmatrix_trans_tile::launch(rt, Grid::blocks([1, 1, 1]), &da, &db, &mut dc)?;
            rt.download(&dc)
        };
        let expected: Vec<f32> = (0..64 * 64)
            .map(|at| {
                let (m, n) = (64 + at / 64, at % 64);
                let products = (0..16).map(|k| a[k * 128 + m].to_f32() * b[k * 64 + n].to_f32());
                products.sum()
            })
            .collect();
        match run() {
            Ok(out) => {
                let wrong = out
                    .iter()
                    .zip(&expected)
                    .position(|(got, want)| got != want);
                let detail = match wrong {
                    None => "all 4096 elements exact".to_string(),
                    Some(at) => format!(
                        "element (m {}, n {}) is {}, the exact value is {}",
                        64 + at / 64,
                        at % 64,
                        out[at],
                        expected[at]
                    ),
                };
                report.check(&what, wrong.is_none(), detail);
            }
            Err(e) => report.error(&what, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge_codegen::{compile_ptx, Arch};

    #[test]
    fn the_tile_kernel_builds_with_eight_transposed_loads_and_32_mmas() {
        let ptx = compile_ptx(ldmatrix_trans_tile::def(), &[], Arch::Sm80)
            .unwrap_or_else(|e| panic!("{}", e.message))
            .text;
        let count = |what: &str| ptx.lines().filter(|l| l.contains(what)).count();
        assert_eq!(count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 8);
        assert_eq!(
            count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
            32
        );
    }
}
