// Every math intrinsic on bf16 (sm_80+).
#[kernel(arch(sm_80, sm_90))]
fn intrinsics_bf16(
    x: &mut [bf16],
) {
    let i = thread_idx().x;
    let a = x[i];
    let b = x[i + 1];
    let c = x[i + 2];
    x[i + 3] = a.sqrt();
    x[i + 4] = a.rsqrt();
    x[i + 5] = a.exp();
    x[i + 6] = a.exp2();
    x[i + 7] = a.ln();
    x[i + 8] = a.log2();
    x[i + 9] = a.sin();
    x[i + 10] = a.cos();
    x[i + 11] = a.tanh();
    x[i + 12] = a.floor();
    x[i + 13] = a.ceil();
    x[i + 14] = a.round();
    x[i + 15] = a.abs();
    x[i + 16] = a.min(b);
    x[i + 17] = a.max(b);
    x[i + 18] = a.mul_add(b, c);
}
