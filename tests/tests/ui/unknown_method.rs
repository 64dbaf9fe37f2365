use warpforge::prelude::*;

#[kernel]
pub fn square_all(x: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        x[i] = x[i].powi(2);
    }
}

fn main() {}
