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
//! | 5 | `activation == 2`, with `GELU` | GELU, tanh form | - |
//! | 6 | always | `C[idx] = v` | writes C |
//!
//! A kernel loops `#[unroll] for phase in 0..7`, tests [`phase_runs`]
//! once, and applies [`apply_phase`] to each output; a phase that touches
//! memory ([`phase_touches_memory`]) runs only for outputs in bounds, the
//! others for every output (their value is never stored). C is not read
//! where beta is 0: it may hold anything, NaN included. Reads stay
//! predicated: without the test ptxas hoists every load of a phase, and the
//! 255-register variants spill.

use warpforge::prelude::*;

/// Whether phase `PHASE` runs for this launch: a uniform condition, tested
/// once per block. `GELU`: whether the kernel has the GELU activation
/// (the integer GEMMs have not).
#[device]
pub fn phase_runs<const PHASE: u32, const GELU: bool, S: Number>(
    beta: S,
    bias_mode: u32,
    activation: u32,
) -> bool {
    if PHASE == 1 {
        beta != S::ZERO
    } else if PHASE == 2 {
        bias_mode == 1
    } else if PHASE == 3 {
        bias_mode == 2
    } else if PHASE == 4 {
        activation == 1
    } else if PHASE == 5 {
        GELU && activation == 2
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

/// Phase `PHASE` of the output at row `r`, column `col` and index `idx` of
/// C, whose value so far is `v` (in the scale type `S`): its new value. The
/// store (phase 6) writes `v` to C as `O` and keeps it.
#[device]
pub fn apply_phase<const PHASE: u32, S: Number, O: Number>(
    v: S,
    c: &mut [O],
    bias: &[O],
    idx: u32,
    r: u32,
    col: u32,
    alpha: S,
    beta: S,
) -> S {
    if PHASE == 0 {
        alpha * v
    } else if PHASE == 1 {
        v + beta * c[idx] as S
    } else if PHASE == 2 {
        v + bias[col] as S
    } else if PHASE == 3 {
        v + bias[r] as S
    } else if PHASE == 4 {
        v.max(S::ZERO)
    } else if PHASE == 5 {
        // sqrt(2 / pi) = 0.7978846; computed in f32, the float GEMMs' scale type.
        let x = v as f32;
        let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
        (0.5 * x * (1.0 + inner.tanh())) as S
    } else {
        c[idx] = v as O;
        v
    }
}
