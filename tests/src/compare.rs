//! Comparing device results with float64 references.

use std::fmt;

use rayon::prelude::*;

use warpforge::prelude::*;
use warpforge::{
    bf16, f16, DeviceBuffer, DeviceScalar, Error, GemmPrecision, Grid, KernelArg, Runtime, Scalar,
};
use warpforge_codegen::KernelDef;

use crate::reference::{Activation, GemmReference};

/// How far a device result is from its reference.
#[derive(Clone, Copy, Debug)]
pub struct Deviation {
    /// `||out - ref|| / ||ref||` (absolute when the reference is all zeros).
    pub rel_l2: f64,
    pub max_abs: f64,
    /// Elements that are NaN or infinite where the reference is finite: an
    /// unwritten (poisoned) output or a broken computation.
    pub non_finite: usize,
}

impl fmt::Display for Deviation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rel_l2 {:.2e}, max_abs {:.2e}",
            self.rel_l2, self.max_abs
        )?;
        if self.non_finite > 0 {
            write!(f, ", {} non-finite", self.non_finite)?;
        }
        Ok(())
    }
}

pub fn deviation(out: &[f32], reference: &[f64]) -> Deviation {
    deviation_of(out, reference, |&o| f64::from(o), |&r| r)
}

/// [`deviation`] of outputs and references of any element types, each read
/// as an f64, summed on every core (a 16384 x 16384 output is 2^28 elements).
pub fn deviation_of<O: Sync, R: Sync>(
    out: &[O],
    reference: &[R],
    out_value: impl Fn(&O) -> f64 + Sync,
    reference_value: impl Fn(&R) -> f64 + Sync,
) -> Deviation {
    assert_eq!(
        out.len(),
        reference.len(),
        "result and reference lengths differ"
    );
    /// Squared differences, squared references, the largest difference and
    /// the non-finite outputs of a part of the elements.
    #[derive(Clone, Copy, Default)]
    struct Sums(f64, f64, f64, usize);
    let Sums(diff2, ref2, max_abs, non_finite) = out
        .par_iter()
        .zip(reference)
        .fold(
            Sums::default,
            |Sums(diff2, ref2, max_abs, non_finite), (o, r)| {
                let (o, r) = (out_value(o), reference_value(r));
                if !o.is_finite() && r.is_finite() {
                    return Sums(diff2, ref2, max_abs, non_finite + 1);
                }
                let d = (o - r).abs();
                Sums(diff2 + d * d, ref2 + r * r, max_abs.max(d), non_finite)
            },
        )
        .reduce(Sums::default, |a, b| {
            Sums(a.0 + b.0, a.1 + b.1, a.2.max(b.2), a.3 + b.3)
        });
    Deviation::from_sums(diff2, ref2, max_abs, non_finite)
}

impl Deviation {
    /// The deviation of outputs whose squared differences from the
    /// reference sum to `diff2`, and the reference's squares to `ref2`.
    fn from_sums(diff2: f64, ref2: f64, max_abs: f64, non_finite: usize) -> Deviation {
        let rel_l2 = if ref2 > 0.0 {
            (diff2 / ref2).sqrt()
        } else {
            diff2.sqrt()
        };
        Deviation {
            rel_l2,
            max_abs,
            non_finite,
        }
    }

    /// Within `tolerance` (relative L2) and no unwritten or non-finite element.
    pub fn passes(&self, tolerance: f64) -> bool {
        self.non_finite == 0 && self.rel_l2 <= tolerance
    }
}

/// How far a GEMM's output may be from its float64 reference, element by
/// element: a worst-case rounding-error bound, so a correct kernel never
/// fails it whatever the inputs, and a wrong one fails as soon as an error
/// outgrows what rounding can explain.
///
/// For an output element, with `magnitude` = `|alpha| sum_p |a_ip b_pj| +
/// |beta c_ij| + |bias_j|` ([`GemmReference::magnitudes`]) and `n = k + 3`
/// roundings on the way (k products summed, alpha, beta C, bias), the
/// allowed error before the activation is
///
/// `e = (gamma_n(u) + input) * magnitude + n * 2^-150`,
/// `gamma_n(u) = n u / (1 - n u)` (Higham, *Accuracy and Stability of
/// Numerical Algorithms*, 3.1; it holds for any summation order, so for
/// split-k and tree reductions too), where
/// - `u` is the accumulation's unit roundoff: 2^-24 for f32 fused
///   multiply-adds (`F32`), and 2^-23 on the Tensor Cores (`F16`, `Bf16`,
///   `Tf32`), whose adders may truncate instead of rounding (Fasi, Higham,
///   Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores",
///   2021); f16, bf16 and tf32 products are exact in f32; 2^-13 for the
///   8-bit floats (`E4m3`, `E5m2`), whose products are exact but whose
///   sums Hopper's fp8 MMA keeps in about 14 bits (DeepGEMM, 2025, measured
///   on H800: it promotes its sums to f32 every 128 of k for that reason);
/// - `input` is the rounding of the inputs: 0, except for `Tf32`, where each
///   of a and b may move by one tf32 unit in the last place (2^-10 relative:
///   `cvt.rna` moves it by at most half of that, truncation by all of it), so
///   each product by `2 * 2^-10 + 2^-20` relative;
/// - `n * 2^-150` covers f32 underflow.
///
/// The activation multiplies `e` by its largest slope and, for GELU, adds
/// `2^-10 * magnitude` for evaluating it in f32 (`tanh.approx.f32` is off by
/// less than 2^-10; 0.5 |x| of that, plus f32 roundings). Finally the output
/// rounds to its type: `u_out * (|value| + e)` plus half the smallest
/// subnormal, with `u_out` 2^-11 for f16, 2^-8 for bf16, 2^-24 for f32.
/// `I8` sums are exact in i32, so its allowed error is 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmTolerance {
    pub precision: GemmPrecision,
    /// C's type, whose rounding the bound allows for: the precision's
    /// (`GemmPrecision::output`), or a wider one (f16 products into f32 C).
    pub output: Scalar,
    /// The length of each dot product.
    pub k: usize,
    pub activation: Activation,
}

impl GemmTolerance {
    /// The allowed `|computed - reference|` for an element with reference
    /// value `value` (after the activation) and `magnitude` (before it).
    pub fn allowed_error(&self, magnitude: f64, value: f64) -> f64 {
        let (accumulation_unit, input_rounding) = match self.precision {
            GemmPrecision::I8 => return 0.0,
            GemmPrecision::F32 => (EPS_F32 / 2.0, 0.0),
            GemmPrecision::Tf32 => (EPS_F32, 2.0 * TF32_UNIT + TF32_UNIT * TF32_UNIT),
            GemmPrecision::F16 | GemmPrecision::Bf16 => (EPS_F32, 0.0),
            GemmPrecision::E4m3 | GemmPrecision::E5m2 => (FP8_MMA_UNIT, 0.0),
        };
        let (output_unit, output_subnormal) = match self.output {
            Scalar::F16 => (EPS_F16 / 2.0, F16_MIN_SUBNORMAL),
            Scalar::Bf16 => (EPS_BF16 / 2.0, BF16_MIN_SUBNORMAL),
            _ => (EPS_F32 / 2.0, F32_MIN_SUBNORMAL),
        };
        let roundings = (self.k + 3) as f64;
        let nu = roundings * accumulation_unit;
        let gamma = nu / (1.0 - nu);
        let before_activation =
            (gamma + input_rounding) * magnitude + roundings * F32_MIN_SUBNORMAL;
        let evaluation = match self.activation {
            Activation::GeluTanh => GELU_EVALUATION * magnitude,
            Activation::Identity | Activation::Relu => 0.0,
        };
        let activated = self.activation.max_slope() * before_activation + evaluation;
        activated + output_unit * (value.abs() + activated) + output_subnormal / 2.0
    }
}

/// The machine epsilons (one unit in the last place of 1) and smallest
/// subnormals of the output types, and tf32's relative unit (2^-10).
const EPS_F32: f64 = f32::EPSILON as f64;
const EPS_F16: f64 = 1.0 / 1024.0;
const EPS_BF16: f64 = 1.0 / 128.0;
const TF32_UNIT: f64 = 1.0 / 1024.0;
/// The unit roundoff allowed to the fp8 MMA's sums: 2^-13 (see [`judge_gemm`]).
const FP8_MMA_UNIT: f64 = 1.0 / 8192.0;
/// The relative error of GELU evaluated in f32, `tanh.approx.f32` included.
const GELU_EVALUATION: f64 = 1.0 / 1024.0;
const F32_MIN_SUBNORMAL: f64 = 1.401_298_464_324_817e-45;
const F16_MIN_SUBNORMAL: f64 = 5.960_464_477_539_063e-8;
const BF16_MIN_SUBNORMAL: f64 = 9.183_549_615_799_121e-41;

/// How a GEMM's output compares with its reference under a [`GemmTolerance`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCheck {
    pub elements: usize,
    /// Elements past their allowed error, or NaN or infinite where the
    /// reference is not.
    pub failures: usize,
    /// The element furthest past (or closest to) its allowed error.
    pub worst: Option<ElementError>,
}

/// One output element against its reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElementError {
    /// Its index in C's buffer.
    pub index: usize,
    pub got: f64,
    pub want: f64,
    pub allowed: f64,
}

impl ElementError {
    /// `|got - want| - allowed`: positive past the bound, infinite for a
    /// NaN or infinity where a finite value belongs.
    fn excess(&self) -> f64 {
        if self.got == self.want || (self.got.is_nan() && self.want.is_nan()) {
            -self.allowed
        } else if !self.got.is_finite() || !self.want.is_finite() {
            f64::INFINITY
        } else {
            (self.got - self.want).abs() - self.allowed
        }
    }
}

impl GemmCheck {
    pub fn passes(&self) -> bool {
        self.failures == 0
    }
}

impl fmt::Display for GemmCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} elements past their bound",
            self.failures, self.elements
        )?;
        if let Some(worst) = self.worst {
            write!(
                f,
                "; worst at {}: got {:e}, want {:e}, allowed error {:.2e}",
                worst.index, worst.got, worst.want, worst.allowed
            )?;
        }
        Ok(())
    }
}

/// The relative L2 error of a GEMM's output (C's whole buffer, widened to
/// f64) over the elements it computes, relative to the magnitudes of what
/// each element sums ([`GemmReference::magnitudes`]) rather than to the
/// outputs: cancellation can make an output far smaller than its terms,
/// whose rounding (tf32's inputs, 2^-11 of each) is relative to the terms.
/// A 1 x 1 x 1 tf32 GEMM `0.75 a b - 0.5 c = -0.0487` is off by 1.4e-4 from
/// the rounding of `a` and `b`: 2.9e-3 of the output, 2.3e-4 of its terms
/// (device run 5 of session 9, perf/LOG.md).
pub fn rel_l2_of_terms(out: &[f64], reference: &GemmReference) -> f64 {
    let (mut diff2, mut terms2) = (0.0f64, 0.0f64);
    for ((&o, &r), &m) in out.iter().zip(&reference.values).zip(&reference.magnitudes) {
        if r.is_finite() {
            diff2 += (o - r) * (o - r);
            terms2 += m * m;
        }
    }
    if terms2 > 0.0 {
        (diff2 / terms2).sqrt()
    } else {
        diff2.sqrt()
    }
}

/// Compares a GEMM's output (C's whole buffer, widened to f64) with its
/// reference, element by element, under `tolerance`.
pub fn check_gemm(out: &[f64], reference: &GemmReference, tolerance: &GemmTolerance) -> GemmCheck {
    assert_eq!(
        out.len(),
        reference.values.len(),
        "result and reference lengths differ"
    );
    let mut check = GemmCheck {
        elements: out.len(),
        failures: 0,
        worst: None,
    };
    for (index, ((&got, &want), &magnitude)) in out
        .iter()
        .zip(&reference.values)
        .zip(&reference.magnitudes)
        .enumerate()
    {
        let element = ElementError {
            index,
            got,
            want,
            allowed: tolerance.allowed_error(magnitude, want),
        };
        let excess = element.excess();
        if excess > 0.0 {
            check.failures += 1;
        }
        if check.worst.is_none_or(|worst| excess > worst.excess()) {
            check.worst = Some(element);
        }
    }
    check
}

/// Threads a block of [`deviation_partials`].
const DEVIATION_THREADS: u32 = 256;

/// Per block, over the elements of `ours` and `theirs` it visits (a
/// grid-stride loop): in `sums[3 b ..]` the squared differences, the squared
/// references and the largest difference (in f32, as f32 values), and in
/// `counts[2 b ..]` the outputs that are not finite where the reference is,
/// and the elements that differ at all (compared in `T`, for the exact
/// integer check). A value is finite where `x - x == 0`.
#[kernel(
    arch(sm_70, sm_80, sm_90),
    block(256),
    instances(
        deviation_f16 = <f16>,
        deviation_bf16 = <bf16> arch(sm_80, sm_90),
        deviation_f32 = <f32>,
        deviation_i32 = <i32>
    ),
    requires(theirs.len() == ours.len())
)]
pub fn deviation_partials<T: Number>(
    ours: &[T],
    theirs: &[T],
    sums: &mut [f32],
    counts: &mut [u32],
) {
    let mut diff2: [f32; 256] = shared();
    let mut ref2: [f32; 256] = shared();
    let mut worst: [f32; 256] = shared();
    let mut non_finite: [u32; 256] = shared();
    let mut differ: [u32; 256] = shared();
    let tid = thread_idx().x;
    let (mut d2, mut r2, mut most, mut bad, mut other) = (0.0f32, 0.0f32, 0.0f32, 0u32, 0u32);
    for i in (block_idx().x * 256 + tid..ours.len()).step_by(grid_dim().x * 256) {
        let (o, r) = (ours[i], theirs[i]);
        if o != r {
            other += 1;
        }
        let (of, rf) = (o as f32, r as f32);
        if !(of - of == 0.0) && rf - rf == 0.0 {
            bad += 1;
        } else {
            let d = (of - rf).abs();
            d2 += d * d;
            r2 += rf * rf;
            most = most.max(d);
        }
    }
    diff2[tid] = d2;
    ref2[tid] = r2;
    worst[tid] = most;
    non_finite[tid] = bad;
    differ[tid] = other;
    sync_threads();
    let mut half = 128u32;
    while half > 0 {
        if tid < half {
            diff2[tid] += diff2[tid + half];
            ref2[tid] += ref2[tid + half];
            worst[tid] = worst[tid].max(worst[tid + half]);
            non_finite[tid] += non_finite[tid + half];
            differ[tid] += differ[tid + half];
        }
        sync_threads();
        half /= 2;
    }
    if tid == 0 {
        let b = block_idx().x;
        sums[3 * b] = diff2[0];
        sums[3 * b + 1] = ref2[0];
        sums[3 * b + 2] = worst[0];
        counts[2 * b] = non_finite[0];
        counts[2 * b + 1] = differ[0];
    }
}

/// An output's [`Deviation`] from a reference of the same type, both on the
/// device, and how many of their elements differ at all: computed there
/// ([`deviation_partials`], partial sums in f32, added up here in f64), so
/// that a check downloads a few kilobytes instead of the output (a 16384 x
/// 16384 one is 512 MiB in f16).
pub fn device_deviation<T: DeviationElement>(
    rt: &Runtime,
    ours: &DeviceBuffer<T>,
    theirs: &DeviceBuffer<T>,
) -> Result<(Deviation, u64), Error> {
    let blocks = ours
        .len()
        .div_ceil(DEVIATION_THREADS as usize * 8)
        .clamp(1, 1024) as u32;
    let mut sums = rt.alloc_zeroed::<f32>(3 * blocks as usize)?;
    let mut counts = rt.alloc_zeroed::<u32>(2 * blocks as usize)?;
    let mut args = [
        KernelArg::buffer(ours),
        KernelArg::buffer(theirs),
        KernelArg::buffer_mut(&mut sums),
        KernelArg::buffer_mut(&mut counts),
    ];
    rt.launch(
        T::deviation_kernel(),
        &[],
        Grid::blocks([blocks, 1, 1]),
        &mut args,
    )?;
    let (sums, counts) = (rt.download(&sums)?, rt.download(&counts)?);
    let (mut diff2, mut ref2, mut max_abs) = (0.0f64, 0.0f64, 0.0f64);
    for block in sums.chunks(3) {
        diff2 += f64::from(block[0]);
        ref2 += f64::from(block[1]);
        max_abs = max_abs.max(f64::from(block[2]));
    }
    let (mut non_finite, mut differ) = (0u64, 0u64);
    for block in counts.chunks(2) {
        non_finite += u64::from(block[0]);
        differ += u64::from(block[1]);
    }
    let deviation = Deviation::from_sums(diff2, ref2, max_abs, non_finite as usize);
    Ok((deviation, differ))
}

/// An element type [`device_deviation`] compares: its instance of
/// [`deviation_partials`].
pub trait DeviationElement: DeviceScalar {
    fn deviation_kernel() -> &'static KernelDef;
}

macro_rules! deviation_elements {
    ($($t:ty => $kernel:ident),*) => {$(
        impl DeviationElement for $t {
            fn deviation_kernel() -> &'static KernelDef {
                $kernel::def()
            }
        }
    )*};
}

deviation_elements!(f16 => deviation_f16, bf16 => deviation_bf16, f32 => deviation_f32, i32 => deviation_i32);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{gemm_general, round_to_tf32, GemmSpec};
    use crate::Inputs;
    use warpforge::{bf16, f16};

    fn tolerance(precision: GemmPrecision, k: usize) -> GemmTolerance {
        GemmTolerance {
            precision,
            output: precision.output(),
            k,
            activation: Activation::Identity,
        }
    }

    /// A row-major `m x n x k` GEMM as a device computes it: products of the
    /// (already rounded) inputs summed in f32 one after another, fused for
    /// `F32`, then the output rounded by `round_output`.
    fn device_gemm(
        a: &[f32],
        b: &[f32],
        (m, n, k): (usize, usize, usize),
        fused: bool,
        round_output: impl Fn(f32) -> f64,
    ) -> Vec<f64> {
        let mut out = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f32;
                for p in 0..k {
                    let (x, y) = (a[i * k + p], b[p * n + j]);
                    acc = if fused {
                        x.mul_add(y, acc)
                    } else {
                        acc + x * y
                    };
                }
                out.push(round_output(acc));
            }
        }
        out
    }

    /// How a device computes one precision, for [`device_gemm`].
    struct Emulation {
        precision: GemmPrecision,
        /// Makes an f32 a value of the input type (the reference sees this).
        input_type: fn(f32) -> f32,
        /// What the device does to the inputs before multiplying.
        device_rounding: fn(f32) -> f32,
        fused: bool,
        output: fn(f32) -> f64,
    }

    fn widen(x: &[f32]) -> Vec<f64> {
        x.iter().map(|&v| f64::from(v)).collect()
    }

    #[test]
    fn emulated_device_results_pass_in_every_float_precision() {
        let dims @ (m, n, k) = (9, 7, 1000);
        let mut inputs = Inputs::new(5);
        let (a, b) = (inputs.f32s(m * k), inputs.f32s(k * n));
        let round = |x: &[f32], to: fn(f32) -> f32| x.iter().map(|&v| to(v)).collect::<Vec<f32>>();
        let to_f16 = |v: f32| f16::from_f32(v).to_f32();
        let to_bf16 = |v: f32| bf16::from_f32(v).to_f32();
        let truncate_to_tf32 = |v: f32| f32::from_bits(v.to_bits() & !0x1fff);
        let spec = GemmSpec::new(m, n, k);
        let identity = |v: f32| v;
        let cases = [
            Emulation {
                precision: GemmPrecision::F16,
                input_type: to_f16,
                device_rounding: identity,
                fused: false,
                output: |v| f16::from_f32(v).to_f64(),
            },
            Emulation {
                precision: GemmPrecision::Bf16,
                input_type: to_bf16,
                device_rounding: identity,
                fused: false,
                output: |v| bf16::from_f32(v).to_f64(),
            },
            // tf32: the reference keeps the f32 inputs, the device rounds them.
            Emulation {
                precision: GemmPrecision::Tf32,
                input_type: identity,
                device_rounding: round_to_tf32,
                fused: false,
                output: f64::from,
            },
            Emulation {
                precision: GemmPrecision::Tf32,
                input_type: identity,
                device_rounding: truncate_to_tf32,
                fused: false,
                output: f64::from,
            },
            Emulation {
                precision: GemmPrecision::F32,
                input_type: identity,
                device_rounding: identity,
                fused: true,
                output: f64::from,
            },
        ];
        for case in cases {
            let precision = case.precision;
            let (a, b) = (round(&a, case.input_type), round(&b, case.input_type));
            let reference = gemm_general(&spec, &widen(&a), &widen(&b), None, None);
            let (da, db) = (
                round(&a, case.device_rounding),
                round(&b, case.device_rounding),
            );
            let out = device_gemm(&da, &db, dims, case.fused, case.output);
            let check = check_gemm(&out, &reference, &tolerance(precision, k));
            assert!(check.passes(), "{precision}: {check}");
            // The bound is not vacuous: the worst element used part of it.
            let worst = check.worst.unwrap();
            assert!((worst.got - worst.want).abs() > 0.0, "{precision}: {check}");
        }
        // Summing in f16 instead of f32 is caught.
        let (a, b) = (round(&a, to_f16), round(&b, to_f16));
        let reference = gemm_general(&spec, &widen(&a), &widen(&b), None, None);
        let mut out = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let sum = (0..k).fold(f16::ZERO, |acc, p| {
                    f16::from_f32(acc.to_f32() + a[i * k + p] * b[p * n + j])
                });
                out.push(sum.to_f64());
            }
        }
        let check = check_gemm(&out, &reference, &tolerance(GemmPrecision::F16, k));
        assert!(!check.passes(), "{check}");
    }

    /// One product `a * b` with k = 1 and its bound.
    fn single_product(precision: GemmPrecision, a: f64, b: f64) -> (GemmReference, GemmTolerance) {
        let reference = gemm_general(&GemmSpec::new(1, 1, 1), &[a], &[b], None, None);
        (reference, tolerance(precision, 1))
    }

    fn passes(out: f64, reference: &GemmReference, tolerance: &GemmTolerance) -> bool {
        check_gemm(&[out], reference, tolerance).passes()
    }

    #[test]
    fn one_output_ulp_off_fails_in_f16_and_bf16() {
        let x = 1.5f64;
        let (reference, f16_bound) = single_product(GemmPrecision::F16, 1.0, x);
        assert!(passes(x, &reference, &f16_bound));
        let next_f16 = f16::from_bits(f16::from_f64(x).to_bits() + 1).to_f64();
        assert!(!passes(next_f16, &reference, &f16_bound));
        let (reference, bf16_bound) = single_product(GemmPrecision::Bf16, 1.0, x);
        assert!(passes(x, &reference, &bf16_bound));
        let previous_bf16 = bf16::from_bits(bf16::from_f64(x).to_bits() - 1).to_f64();
        assert!(!passes(previous_bf16, &reference, &bf16_bound));
        // The exact value 1 + 2^-11 + 2^-12 rounded to f16 (1 + 2^-10) passes, 1 fails.
        let (reference, f16_bound) = single_product(
            GemmPrecision::F16,
            1.0 + 2f64.powi(-11),
            1.0 + 2f64.powi(-12),
        );
        assert!(passes(1.0 + 2f64.powi(-10), &reference, &f16_bound));
        assert!(!passes(1.0, &reference, &f16_bound));
    }

    #[test]
    fn tf32_allows_input_rounding_and_no_more() {
        // Neither input is a tf32 value; each rounds up to 1 + 2^-10.
        let a = 1.0 + 3.0 * 2f64.powi(-12);
        let (reference, bound) = single_product(GemmPrecision::Tf32, a, a);
        let rounded = f64::from(round_to_tf32(a as f32));
        assert_eq!(rounded, 1.0 + 2f64.powi(-10));
        assert!(passes(rounded * rounded, &reference, &bound));
        let truncated = 1.0f64;
        assert!(passes(truncated * truncated, &reference, &bound));
        // Both inputs two tf32 units off is more than rounding explains.
        let far = a + 2.0 * 2f64.powi(-10);
        assert!(!passes(far * far, &reference, &bound));
        // f32 allows far less for the same product: the rounded product fails.
        let (reference, f32_bound) = single_product(GemmPrecision::F32, a, a);
        assert!(!passes(rounded * rounded, &reference, &f32_bound));
        assert!(passes(
            f64::from((a as f32) * (a as f32)),
            &reference,
            &f32_bound
        ));
    }

    #[test]
    fn f32_allows_a_few_ulps_per_product_and_rounding() {
        // k = 1: gamma_4 (3 ulps at 1.5) plus the output rounding (0.75 ulp).
        let x = 1.5f64;
        let (reference, bound) = single_product(GemmPrecision::F32, 1.0, x);
        let ulp = f64::from(f32::EPSILON);
        assert!(passes(x + 3.0 * ulp, &reference, &bound));
        assert!(!passes(x + 4.0 * ulp, &reference, &bound));
        // The bound grows with k and with the magnitude, not with the value.
        let bound_at =
            |k, magnitude| tolerance(GemmPrecision::F32, k).allowed_error(magnitude, 0.0);
        assert!(bound_at(1000, 1.0) > 100.0 * bound_at(1, 1.0));
        assert!((bound_at(10, 8.0) / bound_at(10, 1.0) - 8.0).abs() < 1e-9);
    }

    #[test]
    fn the_typical_error_is_relative_to_the_terms_summed() {
        // 0.75 a b - 0.5 c = -0.0487 from terms of magnitude 0.3: the tf32
        // rounding of a and b moves it by 1.4e-4, 2.9e-3 of the output.
        let reference = GemmReference {
            values: vec![-0.0487, f64::NAN],
            magnitudes: vec![0.3, 0.0],
        };
        let rounded = rel_l2_of_terms(&[-0.0488420, 7.0], &reference);
        assert!((rounded - 1.42e-4 / 0.3).abs() < 1e-6, "{rounded}");
        // Half the terms missing is far off the terms too.
        assert!(rel_l2_of_terms(&[-0.0487 + 0.15, 0.0], &reference) > 0.4);
    }

    #[test]
    fn int8_products_must_be_exact() {
        let spec = GemmSpec::new(2, 2, 3);
        let a = [-128.0, 127.0, 5.0, 1.0, -1.0, 0.0];
        let b = [127.0, -128.0, -128.0, 127.0, 3.0, 3.0];
        let reference = gemm_general(&spec, &a, &b, None, None);
        let bound = tolerance(GemmPrecision::I8, 3);
        assert_eq!(bound.allowed_error(1e6, 1e6), 0.0);
        let mut out = reference.values.clone();
        assert!(check_gemm(&out, &reference, &bound).passes());
        out[3] += 1.0;
        let check = check_gemm(&out, &reference, &bound);
        assert_eq!(check.failures, 1);
        assert_eq!(check.worst.unwrap().index, 3);
        assert!(
            check
                .to_string()
                .starts_with("1 of 4 elements past their bound; worst at 3"),
            "{check}"
        );
    }

    #[test]
    fn non_finite_outputs_fail_unless_the_reference_has_them() {
        let reference = GemmReference {
            values: vec![1.0, f64::NAN, f64::INFINITY, 2.0],
            magnitudes: vec![1.0, 1.0, 1.0, 1.0],
        };
        let bound = tolerance(GemmPrecision::F16, 64);
        let check = check_gemm(&[1.0, f64::NAN, f64::INFINITY, 2.0], &reference, &bound);
        assert!(check.passes(), "{check}");
        let check = check_gemm(
            &[f64::NAN, f64::NAN, 1.0, f64::INFINITY],
            &reference,
            &bound,
        );
        assert_eq!(check.failures, 3, "{check}");
    }

    #[test]
    fn c_s_type_sets_the_rounding_allowed() {
        let at = |output| {
            GemmTolerance {
                precision: GemmPrecision::F16,
                output,
                k: 64,
                activation: Activation::Identity,
            }
            .allowed_error(10.0, 4.0)
        };
        // f16 products into f32 C: no rounding to f16's 2^-11 of the value.
        let (f16, f32) = (at(Scalar::F16), at(Scalar::F32));
        assert!(f32 < f16, "{f32} < {f16}");
        assert!(
            (f16 - f32 - 4.0 * (EPS_F16 - EPS_F32) / 2.0).abs() < 1e-6,
            "{f16} {f32}"
        );
    }

    #[test]
    fn activations_widen_the_bound() {
        let at = |activation| {
            GemmTolerance {
                precision: GemmPrecision::Bf16,
                output: Scalar::Bf16,
                k: 256,
                activation,
            }
            .allowed_error(4.0, 1.0)
        };
        assert_eq!(at(Activation::Identity), at(Activation::Relu));
        assert!(at(Activation::GeluTanh) > at(Activation::Identity) + 4.0 * GELU_EVALUATION * 0.99);
        // A GELU evaluated in f32 with a perturbed tanh passes; a larger error fails.
        let (m, n, k) = (4, 4, 64);
        let mut inputs = Inputs::new(9);
        let spec = GemmSpec {
            activation: Activation::GeluTanh,
            ..GemmSpec::new(m, n, k)
        };
        let (a, b) = (widen(&inputs.f32s(m * k)), widen(&inputs.f32s(k * n)));
        let reference = gemm_general(&spec, &a, &b, None, None);
        let pre = gemm_general(&GemmSpec::new(m, n, k), &a, &b, None, None).values;
        let gelu_f32 = |x: f64, tanh_error: f32| {
            let x = x as f32;
            let inner = (2.0f32 / std::f32::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            f64::from(0.5 * x * (1.0 + inner.tanh() + tanh_error))
        };
        let bound = GemmTolerance {
            precision: GemmPrecision::F32,
            output: Scalar::F32,
            k,
            activation: Activation::GeluTanh,
        };
        let near: Vec<f64> = pre.iter().map(|&x| gelu_f32(x, 2f32.powi(-11))).collect();
        assert!(check_gemm(&near, &reference, &bound).passes());
        let far: Vec<f64> = pre.iter().map(|&x| gelu_f32(x, 2f32.powi(-6))).collect();
        assert!(!check_gemm(&far, &reference, &bound).passes());
    }

    #[test]
    fn the_device_deviation_is_the_host_one() {
        let rt = Runtime::interpreter();
        let mut inputs = Inputs::new(7);
        // More elements than the blocks' threads visit in one pass.
        let n = 3 * 256 * 8 + 5;
        let theirs = inputs.f32s(n);
        let mut ours: Vec<f32> = theirs
            .iter()
            .zip(inputs.f32s(n))
            .map(|(t, e)| t + 1e-3 * e)
            .collect();
        ours[17] = f32::NAN;
        ours[n - 1] = f32::INFINITY;
        let host = deviation_of(&ours, &theirs, |&o| f64::from(o), |&t| f64::from(t));
        let device = |ours: &[f32], theirs: &[f32]| {
            device_deviation(&rt, &rt.upload(ours).unwrap(), &rt.upload(theirs).unwrap()).unwrap()
        };
        let (found, differ) = device(&ours, &theirs);
        assert_eq!((found.non_finite, host.non_finite), (2, 2));
        assert!(
            (found.rel_l2 / host.rel_l2 - 1.0).abs() < 1e-4,
            "{found} against {host}"
        );
        assert!(
            (found.max_abs / host.max_abs - 1.0).abs() < 1e-6,
            "{found} against {host}"
        );
        assert_eq!(
            differ,
            ours.iter().zip(&theirs).filter(|(o, t)| o != t).count() as u64
        );
        // f16 and bf16 through their instances, compared in f32.
        let half = |v: &[f32]| -> Vec<f16> { v.iter().map(|&x| f16::from_f32(x)).collect() };
        let (o16, t16) = (half(&ours), half(&theirs));
        let host16 = deviation_of(&o16, &t16, |o| o.to_f64(), |t| t.to_f64());
        let (found16, _) =
            device_deviation(&rt, &rt.upload(&o16).unwrap(), &rt.upload(&t16).unwrap()).unwrap();
        assert!(
            (found16.rel_l2 / host16.rel_l2 - 1.0).abs() < 1e-4,
            "{found16} against {host16}"
        );
        let brain: Vec<bf16> = theirs.iter().map(|&x| bf16::from_f32(x)).collect();
        let (same, differ) = device_deviation(
            &rt,
            &rt.upload(&brain).unwrap(),
            &rt.upload(&brain).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (same.rel_l2, same.max_abs, same.non_finite, differ),
            (0.0, 0.0, 0, 0)
        );
        // i32: exact, element by element.
        let exact: Vec<i32> = (0..n as i32).collect();
        let mut off = exact.clone();
        off[1000] += 1;
        let (_, differ) =
            device_deviation(&rt, &rt.upload(&off).unwrap(), &rt.upload(&exact).unwrap()).unwrap();
        assert_eq!(differ, 1);
        // Lengths that differ are refused at the launch.
        let short = rt.upload(&exact[1..]).unwrap();
        let refused = device_deviation(&rt, &rt.upload(&exact).unwrap(), &short).unwrap_err();
        assert!(
            refused.to_string().contains("theirs.len() == ours.len()"),
            "{refused}"
        );
    }
}
