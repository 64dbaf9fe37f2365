use warpforge::prelude::*;

#[kernel(block(256), tune(ITEMS = [1, 2, 4]), tune_key(y), tune_tolerance(1.5))]
pub fn scale<const ITEMS: u32>(a: f32, x: &[f32], y: &mut [f32]) {
    let first = block_idx().x * 256 * ITEMS + thread_idx().x;
    for item in 0..ITEMS {
        let i = first + item * 256;
        if i < y.len() {
            y[i] = a * x[i];
        }
    }
}

fn main() {}
