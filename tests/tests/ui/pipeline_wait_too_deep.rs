use warpforge::prelude::*;

// A ring of STAGES tiles: waiting until at most STAGES groups are in flight
// leaves no stage sure to be complete.
#[kernel(arch(sm_70, sm_80), block(64), tune(STAGES = [2, 3]))]
pub fn deep_wait<const STAGES: u32>(x: &[f32], y: &mut [f32], tiles: u32) {
    let mut ring: [[f32; 256]; STAGES] = shared();
    let pipe = pipeline(STAGES);
    let tid = thread_idx().x;
    for t in 0..tiles + STAGES - 1 {
        if t >= STAGES - 1 {
            pipe.wait(STAGES);
            sync_threads();
        }
        if t < tiles {
            pipe.copy(&mut ring[t % STAGES][tid * 4], &x[t * 256 + tid * 4], 16, 16);
        }
        pipe.commit();
        if t >= STAGES - 1 {
            let u = t - (STAGES - 1);
            y[u * 256 + tid] = ring[u % STAGES][tid];
        }
    }
}

fn main() {}
