// TMA copies through tensor maps: a 2-D tile of a row-major matrix loaded
// into a 128-byte-swizzled stage of a shared ring (run-time stage index,
// completing on that stage's mbarrier), and stored back with its group and
// both waits; a 3-D map over strided batches with an unswizzled tile; and
// a warpgroup giving registers back and taking them. `tests/src/hopper.rs`
// runs the copies on the GPU.
#[kernel(arch(sm_90a), block(128), tune(ROWS = [64]))]
fn tma<const ROWS: u32>(
    #[tensor_map(shape = [m, k], strides = [ld], tile = [ROWS, 64], swizzle = 128)] a: &[f16],
    #[tensor_map(shape = [m, k], strides = [ld], tile = [ROWS, 64], swizzle = 128)] c: &mut [f16],
    #[tensor_map(shape = [batches, m, 8], strides = [batch_stride, 8], tile = [1, 16, 8])] x: &[f32],
    m: u32,
    k: u32,
    ld: u32,
    batches: u32,
    batch_stride: u32,
    stage: u32,
) {
    let mut tiles: [[[f16; 64]; ROWS]; 2] = shared();
    let mut small: [[f32; 8]; 16] = shared();
    let mut bars: [u64; 2] = shared();
    let t = thread_idx().x;
    if t == 0 {
        mbarrier_init(&mut bars[stage], 1);
        mbarrier_init(&mut bars[1 - stage], 1);
        fence_mbarrier_init();
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(&mut bars[stage], ROWS * 64 * 2);
        tma_load(&mut tiles[stage][0][0], a, (block_idx().y * ROWS, block_idx().x * 64), &mut bars[stage]);
        mbarrier_arrive_expect_tx(&mut bars[1 - stage], 16 * 8 * 4);
        tma_load(&mut small[0][0], x, (block_idx().x, 0, 0), &mut bars[1 - stage]);
    }
    setmaxnreg_dec(40);
    setmaxnreg_inc(232);
    mbarrier_wait(&bars[stage], 0);
    mbarrier_wait(&bars[1 - stage], 0);
    if t == 0 {
        tma_store(&tiles[stage][0][0], c, (block_idx().y * ROWS, block_idx().x * 64));
        tma_store_commit();
        tma_store_wait_read(0);
        tma_store_wait(0);
    }
}
