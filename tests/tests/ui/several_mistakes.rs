use warpforge::prelude::*;

// Each mistake is reported, not only the first.
#[kernel]
pub fn histogram(data: &[u32], bins: &mut [u32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    let bin = data[i] % bins.len() as u64;
    atomic_add(&mut bins[bin], 1.0);
    println!("{}", bin);
}

fn main() {}
