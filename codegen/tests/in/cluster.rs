// Thread block clusters in two dimensions (2 x 2 blocks): the block's rank,
// a multicast of a 3-D tile whose mask and an arrival whose cluster rank are
// run-time arguments, each block's mbarrier expecting its own arrival with
// the bytes and one from a peer, and the cluster barrier after the init and
// before the exit. `tests/src/hopper.rs` runs clusters of two on the GPU
// (`cluster_multicast`).
#[kernel(arch(sm_90a), block(64), cluster(2, 2), tune(ROWS = [4, 8]))]
fn cluster<const ROWS: u32>(
    #[tensor_map(shape = [batches, m, 32], strides = [batch_stride, 32], tile = [1, ROWS, 32])] x: &[f32],
    batches: u32,
    m: u32,
    batch_stride: u32,
    mask: u32,
    peer: u32,
    ranks: &mut [u32],
) {
    let mut rows: [[f32; 32]; ROWS] = shared();
    let mut bars: [u64; 1] = shared();
    if thread_idx().x == 0 {
        mbarrier_init(&mut bars[0], 2);
        fence_mbarrier_init();
    }
    cluster_sync();
    if thread_idx().x == 0 {
        mbarrier_arrive_expect_tx(&mut bars[0], ROWS * 32 * 4);
        tma_load_multicast(&mut rows[0][0], x, (block_idx().z, block_idx().y * ROWS, 0), &mut bars[0], mask);
        mbarrier_arrive_cluster(&mut bars[0], peer);
    }
    mbarrier_wait(&bars[0], 0);
    ranks[block_idx().y * grid_dim().x + block_idx().x] = cluster_rank();
    cluster_sync();
}
