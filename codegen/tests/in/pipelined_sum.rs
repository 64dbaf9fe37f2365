// A stream through a `pipeline` in the usual order: wait, barrier, copy the
// tile STAGES - 1 ahead, math on the oldest tile. Each thread copies 16
// bytes (8 f16) of each 1024-element tile and sums 8 elements other threads
// copied. sm_80: cp.async groups; sm_70: register staging, with the loads
// before the math and the (flagged: the copy sits in an `if`) stores after it.
#[kernel(arch(sm_70, sm_80), block(128), tune(STAGES = [2, 4]), requires(x.len() % 8 == 0))]
fn pipelined_sum<const STAGES: u32>(x: &[f16], y: &mut [f32]) {
    let mut ring: [[f16; 1024]; STAGES] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    let tiles = (x.len() + 1023) / 1024;
    let mut sum = 0.0f32;
    for t in 0..tiles + STAGES - 1 {
        if t >= STAGES - 1 {
            pipe.wait(STAGES - 2);
            sync_threads();
        }
        if t < tiles {
            let at = t * 1024 + tid * 8;
            // Whole chunks (x.len() % 8 == 0): 16 bytes, or none past the end.
            let bytes = if at < x.len() { 16u32 } else { 0 };
            let src = if at < x.len() { at } else { 0 };
            pipe.copy(&mut ring[t % STAGES][tid * 8], &x[src], 16, bytes);
        }
        pipe.commit();
        if t >= STAGES - 1 {
            let u = t - (STAGES - 1);
            #[unroll]
            for e in 0..8u32 {
                sum += ring[u % STAGES][tid + e * 128] as f32;
            }
        }
    }
    y[block_idx().x * 128 + tid] = sum;
}
