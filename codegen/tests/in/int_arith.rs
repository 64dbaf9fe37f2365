// Arithmetic, bitwise operators, shifts and comparisons on every integer type, and bool logic.
#[kernel(arch(sm_70, sm_80, sm_90))]
fn int_arith(
    x_i8: &mut [i8],
    x_u8: &mut [u8],
    x_i32: &mut [i32],
    x_u32: &mut [u32],
    x_i64: &mut [i64],
    x_u64: &mut [u64],
    flags: &mut [bool],
    s: u32,
) {
    let i = thread_idx().x;
    let a_i8 = x_i8[i];
    let b_i8 = x_i8[i + 1];
    x_i8[i] = (a_i8 + b_i8) * (a_i8 - b_i8) / (b_i8 | 1) % (a_i8 | 3) + -a_i8;
    x_i8[i + 2] = (a_i8 & b_i8) ^ !a_i8 | (a_i8 << s) | (b_i8 >> s) | (a_i8 >> 3u32);
    flags[i * 8 + 0] = a_i8 < b_i8 && a_i8 != b_i8 || a_i8 >= b_i8 && a_i8 <= b_i8 || a_i8 > b_i8 || a_i8 == b_i8;
    let a_u8 = x_u8[i];
    let b_u8 = x_u8[i + 1];
    x_u8[i] = (a_u8 + b_u8) * (a_u8 - b_u8) / (b_u8 | 1) % (a_u8 | 3);
    x_u8[i + 2] = (a_u8 & b_u8) ^ !a_u8 | (a_u8 << s) | (b_u8 >> s) | (a_u8 >> 3u32);
    flags[i * 8 + 1] = a_u8 < b_u8 && a_u8 != b_u8 || a_u8 >= b_u8 && a_u8 <= b_u8 || a_u8 > b_u8 || a_u8 == b_u8;
    let a_i32 = x_i32[i];
    let b_i32 = x_i32[i + 1];
    x_i32[i] = (a_i32 + b_i32) * (a_i32 - b_i32) / (b_i32 | 1) % (a_i32 | 3) + -a_i32;
    x_i32[i + 2] = (a_i32 & b_i32) ^ !a_i32 | (a_i32 << s) | (b_i32 >> s) | (a_i32 >> 3u32);
    flags[i * 8 + 2] = a_i32 < b_i32 && a_i32 != b_i32 || a_i32 >= b_i32 && a_i32 <= b_i32 || a_i32 > b_i32 || a_i32 == b_i32;
    let a_u32 = x_u32[i];
    let b_u32 = x_u32[i + 1];
    x_u32[i] = (a_u32 + b_u32) * (a_u32 - b_u32) / (b_u32 | 1) % (a_u32 | 3);
    x_u32[i + 2] = (a_u32 & b_u32) ^ !a_u32 | (a_u32 << s) | (b_u32 >> s) | (a_u32 >> 3u32);
    flags[i * 8 + 3] = a_u32 < b_u32 && a_u32 != b_u32 || a_u32 >= b_u32 && a_u32 <= b_u32 || a_u32 > b_u32 || a_u32 == b_u32;
    let a_i64 = x_i64[i];
    let b_i64 = x_i64[i + 1];
    x_i64[i] = (a_i64 + b_i64) * (a_i64 - b_i64) / (b_i64 | 1) % (a_i64 | 3) + -a_i64;
    x_i64[i + 2] = (a_i64 & b_i64) ^ !a_i64 | (a_i64 << s) | (b_i64 >> s) | (a_i64 >> 3u32);
    flags[i * 8 + 4] = a_i64 < b_i64 && a_i64 != b_i64 || a_i64 >= b_i64 && a_i64 <= b_i64 || a_i64 > b_i64 || a_i64 == b_i64;
    let a_u64 = x_u64[i];
    let b_u64 = x_u64[i + 1];
    x_u64[i] = (a_u64 + b_u64) * (a_u64 - b_u64) / (b_u64 | 1) % (a_u64 | 3);
    x_u64[i + 2] = (a_u64 & b_u64) ^ !a_u64 | (a_u64 << s) | (b_u64 >> s) | (a_u64 >> 3u32);
    flags[i * 8 + 5] = a_u64 < b_u64 && a_u64 != b_u64 || a_u64 >= b_u64 && a_u64 <= b_u64 || a_u64 > b_u64 || a_u64 == b_u64;
    let p = flags[i];
    let q = flags[i + 1];
    flags[i + 2] = ((p & q) ^ (p | !q) == (p < q)) != (p >= q);
}
