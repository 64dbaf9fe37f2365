// `as` from bf16 to every other type (sm_80+).
#[kernel(arch(sm_80, sm_90))]
fn casts_from_bf16(
    v: bf16,
    out_i8: &mut [i8],
    out_u8: &mut [u8],
    out_i32: &mut [i32],
    out_u32: &mut [u32],
    out_i64: &mut [i64],
    out_u64: &mut [u64],
    out_f16: &mut [f16],
    out_f32: &mut [f32],
    out_f64: &mut [f64],
) {
    let i = thread_idx().x;
    out_i8[i] = v as i8;
    out_u8[i] = v as u8;
    out_i32[i] = v as i32;
    out_u32[i] = v as u32;
    out_i64[i] = v as i64;
    out_u64[i] = v as u64;
    out_f16[i] = v as f16;
    out_f32[i] = v as f32;
    out_f64[i] = v as f64;
}
