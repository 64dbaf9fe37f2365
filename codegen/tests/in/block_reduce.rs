// Sum of a slice: a shared-memory tree per block, one atomic per block.
#[kernel(block(256), arch(sm_70, sm_80, sm_90))]
fn block_reduce(x: &[f32], sum: &mut [f32]) {
    let mut partial: [f32; 256] = shared();
    let t = thread_idx().x;
    let i = block_idx().x * 256 + t;
    let mut v = 0.0;
    if i < x.len() {
        v = x[i];
    }
    partial[t] = v;
    sync_threads();
    let mut stride = 128u32;
    while stride > 0 {
        if t < stride {
            partial[t] += partial[t + stride];
        }
        sync_threads();
        stride >>= 1;
    }
    if t == 0 {
        atomic_add(&mut sum[0], partial[0]);
    }
}
