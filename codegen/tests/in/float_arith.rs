// Arithmetic, negation, comparisons and selects on f16 (through f32), f32 and f64.
#[kernel(arch(sm_70, sm_80, sm_90))]
fn float_arith(
    x_f16: &mut [f16],
    x_f32: &mut [f32],
    x_f64: &mut [f64],
    flags: &mut [bool],
) {
    let i = thread_idx().x;
    let a_f16 = x_f16[i];
    let b_f16 = x_f16[i + 1];
    x_f16[i] = (a_f16 + b_f16) * (a_f16 - b_f16) / -b_f16 + 1.5;
    x_f16[i + 2] = if a_f16 < b_f16 { a_f16 } else { b_f16 };
    flags[i * 8 + 0] = a_f16 == b_f16 || a_f16 != b_f16 && a_f16 <= b_f16 || a_f16 > b_f16 || a_f16 >= b_f16;
    let a_f32 = x_f32[i];
    let b_f32 = x_f32[i + 1];
    x_f32[i] = (a_f32 + b_f32) * (a_f32 - b_f32) / -b_f32 + 1.5;
    x_f32[i + 2] = if a_f32 < b_f32 { a_f32 } else { b_f32 };
    flags[i * 8 + 1] = a_f32 == b_f32 || a_f32 != b_f32 && a_f32 <= b_f32 || a_f32 > b_f32 || a_f32 >= b_f32;
    let a_f64 = x_f64[i];
    let b_f64 = x_f64[i + 1];
    x_f64[i] = (a_f64 + b_f64) * (a_f64 - b_f64) / -b_f64 + 1.5;
    x_f64[i + 2] = if a_f64 < b_f64 { a_f64 } else { b_f64 };
    flags[i * 8 + 2] = a_f64 == b_f64 || a_f64 != b_f64 && a_f64 <= b_f64 || a_f64 > b_f64 || a_f64 >= b_f64;
}
