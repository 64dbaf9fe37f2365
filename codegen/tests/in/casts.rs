// `as` between every pair of scalar types except bf16 (see casts_bf16), with Rust's semantics.
#[kernel(arch(sm_70, sm_80, sm_90))]
fn casts(
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
    out_i8[i * 16 + 0] = v_bool as i8;
    out_i8[i * 16 + 1] = v_u8 as i8;
    out_i8[i * 16 + 2] = v_i32 as i8;
    out_i8[i * 16 + 3] = v_u32 as i8;
    out_i8[i * 16 + 4] = v_i64 as i8;
    out_i8[i * 16 + 5] = v_u64 as i8;
    out_i8[i * 16 + 6] = v_f16 as i8;
    out_i8[i * 16 + 7] = v_f32 as i8;
    out_i8[i * 16 + 8] = v_f64 as i8;
    out_u8[i * 16 + 0] = v_bool as u8;
    out_u8[i * 16 + 1] = v_i8 as u8;
    out_u8[i * 16 + 2] = v_i32 as u8;
    out_u8[i * 16 + 3] = v_u32 as u8;
    out_u8[i * 16 + 4] = v_i64 as u8;
    out_u8[i * 16 + 5] = v_u64 as u8;
    out_u8[i * 16 + 6] = v_f16 as u8;
    out_u8[i * 16 + 7] = v_f32 as u8;
    out_u8[i * 16 + 8] = v_f64 as u8;
    out_i32[i * 16 + 0] = v_bool as i32;
    out_i32[i * 16 + 1] = v_i8 as i32;
    out_i32[i * 16 + 2] = v_u8 as i32;
    out_i32[i * 16 + 3] = v_u32 as i32;
    out_i32[i * 16 + 4] = v_i64 as i32;
    out_i32[i * 16 + 5] = v_u64 as i32;
    out_i32[i * 16 + 6] = v_f16 as i32;
    out_i32[i * 16 + 7] = v_f32 as i32;
    out_i32[i * 16 + 8] = v_f64 as i32;
    out_u32[i * 16 + 0] = v_bool as u32;
    out_u32[i * 16 + 1] = v_i8 as u32;
    out_u32[i * 16 + 2] = v_u8 as u32;
    out_u32[i * 16 + 3] = v_i32 as u32;
    out_u32[i * 16 + 4] = v_i64 as u32;
    out_u32[i * 16 + 5] = v_u64 as u32;
    out_u32[i * 16 + 6] = v_f16 as u32;
    out_u32[i * 16 + 7] = v_f32 as u32;
    out_u32[i * 16 + 8] = v_f64 as u32;
    out_i64[i * 16 + 0] = v_bool as i64;
    out_i64[i * 16 + 1] = v_i8 as i64;
    out_i64[i * 16 + 2] = v_u8 as i64;
    out_i64[i * 16 + 3] = v_i32 as i64;
    out_i64[i * 16 + 4] = v_u32 as i64;
    out_i64[i * 16 + 5] = v_u64 as i64;
    out_i64[i * 16 + 6] = v_f16 as i64;
    out_i64[i * 16 + 7] = v_f32 as i64;
    out_i64[i * 16 + 8] = v_f64 as i64;
    out_u64[i * 16 + 0] = v_bool as u64;
    out_u64[i * 16 + 1] = v_i8 as u64;
    out_u64[i * 16 + 2] = v_u8 as u64;
    out_u64[i * 16 + 3] = v_i32 as u64;
    out_u64[i * 16 + 4] = v_u32 as u64;
    out_u64[i * 16 + 5] = v_i64 as u64;
    out_u64[i * 16 + 6] = v_f16 as u64;
    out_u64[i * 16 + 7] = v_f32 as u64;
    out_u64[i * 16 + 8] = v_f64 as u64;
    out_f16[i * 16 + 0] = (v_bool as u32) as f16;
    out_f16[i * 16 + 1] = v_i8 as f16;
    out_f16[i * 16 + 2] = v_u8 as f16;
    out_f16[i * 16 + 3] = v_i32 as f16;
    out_f16[i * 16 + 4] = v_u32 as f16;
    out_f16[i * 16 + 5] = v_i64 as f16;
    out_f16[i * 16 + 6] = v_u64 as f16;
    out_f16[i * 16 + 7] = v_f32 as f16;
    out_f16[i * 16 + 8] = v_f64 as f16;
    out_f32[i * 16 + 0] = (v_bool as u32) as f32;
    out_f32[i * 16 + 1] = v_i8 as f32;
    out_f32[i * 16 + 2] = v_u8 as f32;
    out_f32[i * 16 + 3] = v_i32 as f32;
    out_f32[i * 16 + 4] = v_u32 as f32;
    out_f32[i * 16 + 5] = v_i64 as f32;
    out_f32[i * 16 + 6] = v_u64 as f32;
    out_f32[i * 16 + 7] = v_f16 as f32;
    out_f32[i * 16 + 8] = v_f64 as f32;
    out_f64[i * 16 + 0] = (v_bool as u32) as f64;
    out_f64[i * 16 + 1] = v_i8 as f64;
    out_f64[i * 16 + 2] = v_u8 as f64;
    out_f64[i * 16 + 3] = v_i32 as f64;
    out_f64[i * 16 + 4] = v_u32 as f64;
    out_f64[i * 16 + 5] = v_i64 as f64;
    out_f64[i * 16 + 6] = v_u64 as f64;
    out_f64[i * 16 + 7] = v_f16 as f64;
    out_f64[i * 16 + 8] = v_f32 as f64;
}
