// Block 0 hands `data` to the other blocks through global memory. Each of
// its threads writes an element, `fence_gpu()` (release), then counts
// itself on `flag` with an atomic; each thread of another block reads
// `flag` by atomics until all 32 have counted, then `fence_gpu()` (acquire)
// and reads an element another thread wrote. The waiting blocks need block
// 0 to run or to have run: they spin.
#[kernel(block(32), arch(sm_70, sm_80, sm_90))]
fn fence_gpu(data: &mut [u32], flag: &mut [u32], out: &mut [u32]) {
    let t = thread_idx().x;
    if block_idx().x == 0 {
        data[t] = t * 3 + 1;
        fence_gpu();
        atomic_add(&mut flag[0], 1u32);
    } else {
        while atomic_add(&mut flag[0], 0u32) < 32 {}
        fence_gpu();
        out[block_idx().x * 32 + t] = data[(t + 1) % 32];
    }
}
