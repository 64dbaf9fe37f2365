// Every mbarrier statement and both fences once, on two mbarriers of one
// shared array (the second at byte 8): a constant and a run-time count, a
// run-time transaction byte count and parity. `tests/src/hopper.rs` runs
// them through several phases on the GPU.
#[kernel(arch(sm_90, sm_90a))]
fn mbarrier(count: u32, bytes: u32, out: &mut [u32]) {
    let mut bars: [u64; 2] = shared();
    let mut data: [u32; 32] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut bars[0], 32);
        mbarrier_init(&mut bars[1], count);
        fence_mbarrier_init();
    }
    sync_threads();
    data[t % 32] = t;
    fence_proxy_async();
    mbarrier_arrive(&mut bars[0]);
    mbarrier_arrive_expect_tx(&mut bars[1], bytes);
    mbarrier_wait(&bars[0], 0);
    mbarrier_wait(&bars[1], t % 2);
    out[t] = data[(t + 1) % 32];
}
