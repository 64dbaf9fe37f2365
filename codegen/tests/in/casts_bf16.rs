// `as` from every scalar type to bf16 (sm_80+: bf16 conversions).
#[kernel(arch(sm_80, sm_90))]
fn casts_bf16(
    v_bool: bool,
    v_i8: i8,
    v_u8: u8,
    v_i32: i32,
    v_u32: u32,
    v_i64: i64,
    v_u64: u64,
    v_f16: f16,
    v_f32: f32,
    v_f64: f64,
    out_bf16: &mut [bf16],
) {
    let i = thread_idx().x;
    out_bf16[i * 16 + 0] = (v_bool as u32) as bf16;
    out_bf16[i * 16 + 1] = v_i8 as bf16;
    out_bf16[i * 16 + 2] = v_u8 as bf16;
    out_bf16[i * 16 + 3] = v_i32 as bf16;
    out_bf16[i * 16 + 4] = v_u32 as bf16;
    out_bf16[i * 16 + 5] = v_i64 as bf16;
    out_bf16[i * 16 + 6] = v_u64 as bf16;
    out_bf16[i * 16 + 7] = v_f16 as bf16;
    out_bf16[i * 16 + 8] = v_f32 as bf16;
    out_bf16[i * 16 + 9] = v_f64 as bf16;
}
