// One block of 128 threads passes data from warps 1-3 to warp 0 through an
// mbarrier over several phases: `full` expects the 96 arrivals of warps 1-3,
// whose shared writes warp 0 reads after waiting on the phase's parity;
// `free` (one arrival, 0 transaction bytes) hands the buffer back. Every
// mbarrier statement and both fences, with run-time parities.
#[kernel(arch(sm_90, sm_90a), block(128))]
fn mbarrier(rounds: u32, out: &mut [u32]) {
    let mut full: [u64; 1] = shared();
    let mut free: [u64; 1] = shared();
    let mut buffer: [u32; 96] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut full[0], 96);
        mbarrier_init(&mut free[0], 1);
        fence_mbarrier_init();
    }
    sync_threads();
    let mut parity = 0u32;
    for r in 0..rounds {
        if t >= 32 {
            // The phase before the first counts as completed: round 0 passes at once.
            mbarrier_wait(&free[0], parity ^ 1);
            buffer[t - 32] = r * 1000 + t;
            fence_proxy_async();
            mbarrier_arrive(&mut full[0]);
        } else {
            mbarrier_wait(&full[0], parity);
            out[r * 96 + t] = buffer[t];
            out[r * 96 + t + 32] = buffer[t + 32];
            out[r * 96 + t + 64] = buffer[t + 64];
            if t == 0 {
                mbarrier_arrive_expect_tx(&mut free[0], 0);
            }
        }
        parity ^= 1;
    }
}
