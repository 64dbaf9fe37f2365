// Arithmetic, negation, comparisons and selects on bf16 (through f32; sm_80+).
#[kernel(arch(sm_80, sm_90))]
fn bf16_arith(
    x_bf16: &mut [bf16],
    flags: &mut [bool],
) {
    let i = thread_idx().x;
    let a_bf16 = x_bf16[i];
    let b_bf16 = x_bf16[i + 1];
    x_bf16[i] = (a_bf16 + b_bf16) * (a_bf16 - b_bf16) / -b_bf16 + 1.5;
    x_bf16[i + 2] = if a_bf16 < b_bf16 { a_bf16 } else { b_bf16 };
    flags[i * 8 + 0] = a_bf16 == b_bf16 || a_bf16 != b_bf16 && a_bf16 <= b_bf16 || a_bf16 > b_bf16 || a_bf16 >= b_bf16;
}
