use warpforge::prelude::*;

/// Runs `body(i, start + i)` for each of `N` rows.
#[device]
pub fn for_each_row<const N: u32>(start: u32, mut body: impl FnMut(u32, u32)) {
    #[unroll]
    for i in 0..N {
        body(i, start + i);
    }
}

#[kernel(arch(sm_80), block(64))]
pub fn rows(x: &[f32], y: &mut [f32]) {
    let t = thread_idx().x;
    for_each_row::<4>(t, |row| {
        y[row] = x[row];
    });
}

fn main() {}
