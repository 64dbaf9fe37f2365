// A bound on the registers per thread: with `min_blocks_per_sm(BLOCKS)`
// ptxas keeps this block of 256 threads within the registers that `BLOCKS`
// such blocks on one SM leave (`.minnctapersm`). One block asks nothing, so
// that variant has no directive; WGSL has no such bound.
#[kernel(arch(sm_80, wgsl), block(256), tune(BLOCKS = [1, 3]), min_blocks_per_sm(BLOCKS))]
fn min_blocks<const BLOCKS: u32>(x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * 256 + thread_idx().x;
    if i < x.len() {
        y[i] = x[i] * x[i];
    }
}
