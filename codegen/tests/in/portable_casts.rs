// `as` between every pair of the types WGSL has (bool, i8, u8, i32, u32, f16,
// f32), with Rust's semantics; 8-bit results are stored widened.
#[kernel]
fn portable_casts(
    v_bool: bool,
    v_i8: i8,
    v_u8: u8,
    v_i32: i32,
    v_u32: u32,
    v_f16: f16,
    v_f32: f32,
    out_i32: &mut [i32],
    out_u32: &mut [u32],
    out_f16: &mut [f16],
    out_f32: &mut [f32],
) {
    let i = thread_idx().x;
    out_i32[i * 16 + 0] = (v_bool as i8) as i32;
    out_i32[i * 16 + 1] = (v_u8 as i8) as i32;
    out_i32[i * 16 + 2] = (v_i32 as i8) as i32;
    out_i32[i * 16 + 3] = (v_u32 as i8) as i32;
    out_i32[i * 16 + 4] = (v_f16 as i8) as i32;
    out_i32[i * 16 + 5] = (v_f32 as i8) as i32;
    out_u32[i * 16 + 0] = (v_bool as u8) as u32;
    out_u32[i * 16 + 1] = (v_i8 as u8) as u32;
    out_u32[i * 16 + 2] = (v_i32 as u8) as u32;
    out_u32[i * 16 + 3] = (v_u32 as u8) as u32;
    out_u32[i * 16 + 4] = (v_f16 as u8) as u32;
    out_u32[i * 16 + 5] = (v_f32 as u8) as u32;
    out_i32[i * 16 + 6] = v_bool as i32;
    out_i32[i * 16 + 7] = v_i8 as i32;
    out_i32[i * 16 + 8] = v_u8 as i32;
    out_i32[i * 16 + 9] = v_u32 as i32;
    out_i32[i * 16 + 10] = v_f16 as i32;
    out_i32[i * 16 + 11] = v_f32 as i32;
    out_u32[i * 16 + 6] = v_bool as u32;
    out_u32[i * 16 + 7] = v_i8 as u32;
    out_u32[i * 16 + 8] = v_u8 as u32;
    out_u32[i * 16 + 9] = v_i32 as u32;
    out_u32[i * 16 + 10] = v_f16 as u32;
    out_u32[i * 16 + 11] = v_f32 as u32;
    out_f16[i * 16 + 0] = (v_bool as u32) as f16;
    out_f16[i * 16 + 1] = v_i8 as f16;
    out_f16[i * 16 + 2] = v_u8 as f16;
    out_f16[i * 16 + 3] = v_i32 as f16;
    out_f16[i * 16 + 4] = v_u32 as f16;
    out_f16[i * 16 + 5] = v_f32 as f16;
    out_f32[i * 16 + 0] = (v_bool as u32) as f32;
    out_f32[i * 16 + 1] = v_i8 as f32;
    out_f32[i * 16 + 2] = v_u8 as f32;
    out_f32[i * 16 + 3] = v_i32 as f32;
    out_f32[i * 16 + 4] = v_u32 as f32;
    out_f32[i * 16 + 5] = v_f16 as f32;
}
