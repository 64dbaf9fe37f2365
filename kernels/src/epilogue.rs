//! The dense GEMMs' epilogue as device functions: `C = act(alpha * A B +
//! beta * C + bias)`, rounded to C's type once, in phases that a kernel runs
//! over all of its outputs, one uniform branch per phase (the outputs of a
//! thread are unrolled code: a test of `beta`, `bias_mode` and `activation`
//! per output cost the 16-bit GEMMs 13% of their time, perf/LOG.md, session 6).
//!
//! The phases, in order, each a value of `PHASE`:
//!
//! | `PHASE` | runs when | does | memory |
//! |---|---|---|---|
//! | 0 | always | `v = alpha * v` | - |
//! | 1 | `beta != 0` | `v += beta * C[idx]` | reads C |
//! | 2 | `bias_mode == 1` | `v += bias[col]` | reads bias |
//! | 3 | `bias_mode == 2` | `v += bias[r]` | reads bias |
//! | 4 | `activation == 1` | `v = max(v, 0)` (ReLU) | - |
//! | 5 | `activation == 2`, float `S` | GELU, tanh form | - |
//! | 6 | always | `C[idx] = v` | writes C |
//!
//! A kernel loops `#[unroll] for phase in 0..7`, tests [`phase_runs`]
//! once, and applies [`apply_phase`] to each output in its register array; a phase that touches
//! memory ([`phase_touches_memory`]) runs only for outputs in bounds, the
//! others for every output (their value is never stored). C is not read
//! where beta is 0: it may hold anything, NaN included. Reads stay
//! predicated: without the test ptxas hoists every load of a phase, and the
//! 255-register variants spill.

use warpforge::prelude::*;

/// Whether phase `PHASE` runs for this launch: a uniform condition, tested
/// once per block. GELU is an activation of the float GEMMs only (`S`, the
/// scale type, is a float): the integer GEMMs have no code for it.
#[device]
pub fn phase_runs<const PHASE: u32, S: Number>(beta: S, bias_mode: u32, activation: u32) -> bool {
    if PHASE == 1 {
        beta != S::ZERO
    } else if PHASE == 2 {
        bias_mode == 1
    } else if PHASE == 3 {
        bias_mode == 2
    } else if PHASE == 4 {
        activation == 1
    } else if PHASE == 5 {
        S::IS_FLOAT && activation == 2
    } else {
        true
    }
}

/// Whether phase `PHASE` reads or writes memory, so that it runs only for
/// outputs inside C.
#[device]
pub fn phase_touches_memory<const PHASE: u32>() -> bool {
    PHASE >= 1 && PHASE <= 3 || PHASE == 6
}

/// Phase `PHASE` of the output `values[e]` (its value so far, in the scale
/// type `S`), at row `r`, column `col` and index `idx` of C, in place; the
/// store (phase 6) writes it to C as `O`. Only the phase's branch remains
/// once the variant is specialized, with no copy of the value.
#[device]
pub fn apply_phase<const PHASE: u32, const N: u32, S: Number, O: Number>(
    values: &mut [S; N],
    e: u32,
    c: &mut [O],
    bias: &[O],
    idx: u32,
    r: u32,
    col: u32,
    alpha: S,
    beta: S,
) {
    if PHASE == 0 {
        values[e] = alpha * values[e];
    } else if PHASE == 1 {
        values[e] += beta * c[idx] as S;
    } else if PHASE == 2 {
        values[e] += bias[col] as S;
    } else if PHASE == 3 {
        values[e] += bias[r] as S;
    } else if PHASE == 4 {
        values[e] = values[e].max(S::ZERO);
    } else if PHASE == 5 {
        // sqrt(2 / pi) = 0.7978846; computed in f32, the float GEMMs' scale type.
        let v = values[e] as f32;
        let inner = 0.797_884_6 * (v + 0.044_715 * v * v * v);
        values[e] = (0.5 * v * (1.0 + inner.tanh())) as S;
    } else {
        c[idx] = values[e] as O;
    }
}

/// The epilogue of the Tensor Core GEMMs (`gemm_tc`, `gemm_sparse`, `gemm_wgmma`), whose
/// warps hold `NI x NJ` accumulator fragments of `m16n8` tiles (`acc`, in the
/// scale type `S`): every phase over this thread's outputs, then C (of `O`)
/// written. The warp's tile starts at row `wm0` and column `wn0` of the
/// block's `BM x BN` tile `tile` (its batch, first row and first column: a
/// kernel launched on the plain grid takes it from
/// [`grouped_tile_order`](crate::tile::grouped_tile_order) and `block_idx().z`
/// right before the call, so that its main loop does not keep it live; a
/// persistent one, per tile); C is row-major, or column-major
/// where `c_col_major` is 1 (the sparse GEMM's; the dense GEMMs store a
/// column-major C as `C^T = B^T A^T` and pass 0).
///
/// Accumulator element `h * 2 + q` of fragment `(i, j)` is `C[g + 8 h][2 t4
/// + q]` of the 16 x 8 tile (docs/ptx.md, "mma.sync fragments"; the same for
/// `mma.sp`), `g = lane / 4`, `t4 = lane % 4`.
///
/// With `IN_FOURS` (a row-major C), the store of a whole tile (every output
/// of the block inside C, whose rows and batches start at multiples of 4)
/// goes four outputs at a time: the two lanes of a pair (`t4` and `t4 ^ 1`)
/// swap halves of their fragments `2 jp` and `2 jp + 1`, so that the even
/// lane holds 4 consecutive outputs of fragment `2 jp` and the odd one 4 of
/// `2 jp + 1`, which the backend writes with one 8-byte (16-bit C) or
/// 16-byte (32-bit C) store (`vectorize`: the index is a multiple of 4 by
/// construction). A quad's stores then cover 32 (or 64) consecutive bytes of
/// a row, whole sectors, where the element-wise store wrote 2 or 4 bytes per
/// instruction. Other tiles, and every tile without `IN_FOURS`, store
/// element by element, testing each output's bounds.
#[device]
pub fn mma_epilogue<
    const BM: u32,
    const BN: u32,
    const IN_FOURS: bool,
    const NJ: u32,
    const NI: u32,
    S: Number,
    O: Number,
>(
    acc: &mut [[[S; 4]; NJ]; NI],
    c: &mut [O],
    bias: &[O],
    m: u32,
    n: u32,
    batches: u32,
    stride_c: u32,
    alpha: S,
    beta: S,
    bias_mode: u32,
    activation: u32,
    c_col_major: u32,
    lane: u32,
    wm0: u32,
    wn0: u32,
    tile: (u32, u32, u32),
) {
    let (batch, row0, col0) = tile;
    let g = lane / 4;
    let t4 = lane % 4;
    let c_at = batch * stride_c;
    // The store goes four outputs at a time: every output of the block is
    // inside C, whose rows and batches start at multiples of 4 (uniform over
    // the block). (`IN_FOURS` leads each condition that reads this, so that
    // `false` removes the path when the variant is specialized.)
    let in_fours = row0 + BM <= m
        && col0 + BN <= n
        && batch < batches
        && n % 4 == 0
        && (batches == 1 || stride_c % 4 == 0);
    #[unroll]
    for phase in 0..7 {
        if phase_runs::<phase>(beta, bias_mode, activation) && !(IN_FOURS && phase == 6 && in_fours)
        {
            #[unroll]
            for i in 0..NI {
                #[unroll]
                for j in 0..NJ {
                    #[unroll]
                    for h in 0..2u32 {
                        let r = row0 + wm0 + i * 16 + h * 8 + g;
                        #[unroll]
                        for q in 0..2u32 {
                            let col = col0 + wn0 + j * 8 + t4 * 2 + q;
                            if !phase_touches_memory::<phase>()
                                || r < m && col < n && batch < batches
                            {
                                let idx = if c_col_major == 1 {
                                    c_at + col * m + r
                                } else {
                                    c_at + r * n + col
                                };
                                apply_phase::<phase>(
                                    &mut acc[i][j],
                                    h * 2 + q,
                                    c,
                                    bias,
                                    idx,
                                    r,
                                    col,
                                    alpha,
                                    beta,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    if IN_FOURS && in_fours {
        let odd = t4 % 2 == 1;
        // The index in fours of the lane's first store: columns `4 (t4 / 2)`
        // (even lanes) and `8 + 4 (t4 / 2)` (odd) of the warp tile's first
        // pair of fragments, at its row `g`.
        let n_fours = n / 4;
        let first_fours = batch * (stride_c / 4)
            + (row0 + wm0 + g) * n_fours
            + (col0 + wn0) / 4
            + t4 % 2 * 2
            + t4 / 2;
        #[unroll]
        for i in 0..NI {
            #[unroll]
            for jp in 0..NJ / 2 {
                #[unroll]
                for h in 0..2u32 {
                    // Each lane sends the pair its partner keeps.
                    let sent0 = if odd {
                        acc[i][2 * jp][h * 2]
                    } else {
                        acc[i][2 * jp + 1][h * 2]
                    };
                    let sent1 = if odd {
                        acc[i][2 * jp][h * 2 + 1]
                    } else {
                        acc[i][2 * jp + 1][h * 2 + 1]
                    };
                    let got0 = shfl_xor(sent0, 1);
                    let got1 = shfl_xor(sent1, 1);
                    let x0 = if odd { got0 } else { acc[i][2 * jp][h * 2] };
                    let x1 = if odd { got1 } else { acc[i][2 * jp][h * 2 + 1] };
                    let x2 = if odd { acc[i][2 * jp + 1][h * 2] } else { got0 };
                    let x3 = if odd {
                        acc[i][2 * jp + 1][h * 2 + 1]
                    } else {
                        got1
                    };
                    let fours = first_fours + (i * 16 + h * 8) * n_fours + jp * 4;
                    c[fours * 4] = x0 as O;
                    c[fours * 4 + 1] = x1 as O;
                    c[fours * 4 + 2] = x2 as O;
                    c[fours * 4 + 3] = x3 as O;
                }
            }
        }
    }
}
