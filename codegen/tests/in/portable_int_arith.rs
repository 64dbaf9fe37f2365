// Arithmetic, bitwise operators, shifts (by run-time and literal amounts),
// comparisons and abs/min/max on i8 and u8 (stored widened), i32 and u32,
// and bool logic.
#[kernel]
fn portable_int_arith(x_i32: &mut [i32], x_u32: &mut [u32], s: u32, p: bool) {
    let i = thread_idx().x;
    let a_i8 = x_i32[i] as i8;
    let b_i8 = x_i32[i + 1] as i8;
    x_i32[i + 2] = ((a_i8 + b_i8) * (a_i8 - b_i8) / (b_i8 | 1) % (a_i8 | 3) + -a_i8) as i32;
    x_i32[i + 3] = ((a_i8 & b_i8) ^ !a_i8 | (a_i8 << s) | (b_i8 >> s) | (a_i8 >> 11u32)) as i32;
    x_i32[i + 4] = a_i8.abs().min(b_i8).max(-5) as i32;
    let a_u8 = x_u32[i] as u8;
    let b_u8 = x_u32[i + 1] as u8;
    x_u32[i + 2] = ((a_u8 + b_u8) * (a_u8 - b_u8) / (b_u8 | 1) % (a_u8 | 3)) as u32;
    x_u32[i + 3] = ((a_u8 & b_u8) ^ !a_u8 | (a_u8 << s) | (b_u8 >> s) | (a_u8 >> 3u32)) as u32;
    x_u32[i + 4] = a_u8.min(b_u8).max(7) as u32;
    let a_i32 = x_i32[i + 5];
    let b_i32 = x_i32[i + 6];
    x_i32[i + 7] = (a_i32 + b_i32) * (a_i32 - b_i32) / (b_i32 | 1) % (a_i32 | 3) + -a_i32;
    x_i32[i + 8] = (a_i32 & b_i32) ^ !a_i32 | (a_i32 << s) | (b_i32 >> s) | (a_i32 >> 35u32);
    x_i32[i + 9] = a_i32.abs().min(b_i32).max(i32::MIN);
    let a_u32 = x_u32[i + 5];
    let b_u32 = x_u32[i + 6];
    x_u32[i + 7] = (a_u32 + b_u32) * (a_u32 - b_u32) / (b_u32 | 1) % (a_u32 | 3);
    x_u32[i + 8] = (a_u32 & b_u32) ^ !a_u32 | (a_u32 << s) | (b_u32 >> s) | (a_u32 << 3u32);
    x_u32[i + 9] = a_u32.min(b_u32).max(u32::MAX);
    let q = a_i32 < b_i32;
    x_u32[i + 10] = (((p & q) ^ (p | !q) == (p < q)) != (p >= q)) as u32;
    x_u32[i + 11] = (a_i8 < b_i8 && a_u8 != b_u8 || a_i32 >= b_i32 && a_u32 <= b_u32 || a_u8 > b_u8) as u32;
}
