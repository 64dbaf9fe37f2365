// A kernel for WGSL only: the float remainder, which PTX targets lack; the
// block comes from the launch.
#[kernel(arch(wgsl))]
fn wgsl_only(x: &mut [f32], y: &[f16]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        x[i] = x[i] % (y[i] as f32) + (x[i] as f16 % y[i]) as f32;
    }
}
