// The math intrinsics PTX has for f64 (the approximate ones are f32-only).
#[kernel(arch(sm_70, sm_80, sm_90))]
fn intrinsics_f64(
    x: &mut [f64],
) {
    let i = thread_idx().x;
    let a = x[i];
    let b = x[i + 1];
    let c = x[i + 2];
    x[i + 3] = a.sqrt();
    x[i + 4] = a.rsqrt();
    x[i + 5] = a.floor();
    x[i + 6] = a.ceil();
    x[i + 7] = a.round();
    x[i + 8] = a.abs();
    x[i + 9] = a.min(b);
    x[i + 10] = a.max(b);
    x[i + 11] = a.mul_add(b, c);
}
