// y = a * x + y, one element per thread.
#[kernel]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}
