// Arithmetic, negation, comparisons and selects on f16 and f32, and the
// special float constants.
#[kernel]
fn portable_float_arith(x_f16: &mut [f16], x_f32: &mut [f32], flags: &mut [u32]) {
    let i = thread_idx().x;
    let a_f16 = x_f16[i];
    let b_f16 = x_f16[i + 1];
    x_f16[i] = (a_f16 + b_f16) * (a_f16 - b_f16) / -b_f16 + 1.5;
    x_f16[i + 2] = if a_f16 < b_f16 { a_f16 } else { b_f16 };
    x_f16[i + 3] = f16::INFINITY + f16::NEG_INFINITY + f16::NAN + f16::MAX + f16::MIN_POSITIVE;
    x_f16[i + 4] = a_f16.max(f16::NEG_INFINITY).min(f16::INFINITY).max(f16::MIN_POSITIVE);
    flags[i * 8 + 0] = (a_f16 == b_f16 || a_f16 != b_f16 && a_f16 <= b_f16 || a_f16 > b_f16 || a_f16 >= b_f16) as u32;
    let a_f32 = x_f32[i];
    let b_f32 = x_f32[i + 1];
    x_f32[i] = (a_f32 + b_f32) * (a_f32 - b_f32) / -b_f32 + 1.5;
    x_f32[i + 2] = if a_f32 < b_f32 { a_f32 } else { b_f32 };
    x_f32[i + 3] = f32::INFINITY + f32::NEG_INFINITY + f32::NAN + f32::MAX + f32::EPSILON + 1.0e-45;
    x_f32[i + 4] = a_f32.max(f32::NEG_INFINITY).min(f32::INFINITY).max(1.0e-45).min(-0.0);
    flags[i * 8 + 1] = (a_f32 == b_f32 || a_f32 != b_f32 && a_f32 <= b_f32 || a_f32 > b_f32 || a_f32 >= b_f32) as u32;
}
