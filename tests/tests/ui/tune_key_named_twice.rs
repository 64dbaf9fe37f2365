use warpforge::prelude::*;

#[kernel(block(256), tune(ROWS = [1, 2, 4]), tune_key(rows, cols, rows))]
pub fn row_sums<const ROWS: u32>(x: &[f32], sums: &mut [f32], rows: u32, cols: u32) {
    let row = block_idx().x * ROWS + thread_idx().x / (256 / ROWS);
    if row < rows && thread_idx().x % (256 / ROWS) == 0 {
        let mut sum = 0.0f32;
        for c in 0..cols {
            sum += x[row * cols + c];
        }
        sums[row] = sum;
    }
}

fn main() {}
