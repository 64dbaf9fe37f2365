// Two const params, four variants: an #[unroll] loop over a const bound, and
// an `if` on a const bool that specialization removes.
#[kernel(tune(N = [1, 4], SCALE = [true, false]))]
fn variants<const N: u32, const SCALE: bool>(x: &mut [f32], factor: f32) {
    let base = (block_idx().x * block_dim().x + thread_idx().x) * N;
    #[unroll]
    for j in 0..N {
        if SCALE {
            x[base + j] *= factor;
        } else {
            x[base + j] += factor;
        }
    }
}
