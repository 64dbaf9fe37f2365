// A streaming copy through a STAGES-deep ring of shared tiles filled with the
// raw cp_async statements, each wait right after its copies: cp.async groups
// on sm_80; on sm_70 register staging, with the stores at the wait. A copy
// names all 16 source bytes even when it reads fewer, so x holds whole chunks.
#[kernel(arch(sm_70, sm_80), block(128), tune(STAGES = [1, 3]), requires(x.len() % 4 == 0))]
fn async_pipeline<const STAGES: u32>(x: &[f32], y: &mut [f32], tiles: u32) {
    let mut ring: [[f32; 512]; STAGES] = shared();
    let tid = thread_idx().x;
    let ahead = if STAGES > 1 { STAGES - 1 } else { 1 };
    for u in 0..tiles + ahead {
        if STAGES == 1 {
            sync_threads();
        }
        if u < tiles {
            let at = u * 512 + tid * 4;
            let bytes = if at < x.len() { (x.len() - at).min(4) * 4 } else { 0 };
            let src = if bytes > 0 { at } else { 0 };
            cp_async(&mut ring[u % STAGES][tid * 4], &x[src], 16, bytes);
        }
        cp_async_commit();
        if u + 1 >= ahead {
            if STAGES == 1 {
                cp_async_wait(0);
            } else {
                cp_async_wait(STAGES - 2);
            }
            sync_threads();
            let t = u + 1 - ahead;
            #[unroll]
            for e in 0..4u32 {
                let i = t * 512 + tid * 4 + e;
                if i < y.len() {
                    y[i] = ring[t % STAGES][tid * 4 + e];
                }
            }
        }
    }
}
