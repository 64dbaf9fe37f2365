use warpforge::prelude::*;

// A `const` names a compile-time constant; `n` is a run-time parameter.
#[kernel(tune(TILE = [64, 128]))]
pub fn scale<const TILE: u32>(x: &mut [f32], n: u32) {
    const ROWS: u32 = TILE / 32;
    const LAST: u32 = n - 1;
    let i = block_idx().x * TILE + thread_idx().x * ROWS;
    if i < LAST {
        x[i] = 2.0 * x[i];
    }
}

fn main() {}
