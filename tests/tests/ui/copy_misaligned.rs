use warpforge::prelude::*;

// Row 1 of a [[f32; 6]; 8] tile starts at byte 24: a 16-byte copy there is
// misaligned in the variant ROW = 1.
#[kernel(arch(sm_70, sm_80), block(32), tune(ROW = [0, 1]))]
pub fn misaligned<const ROW: u32>(x: &[f32], y: &mut [f32]) {
    let mut tile: [[f32; 6]; 8] = shared();
    let pipe = pipeline(1);
    pipe.copy(&mut tile[ROW][0], &x[0], 16, 16);
    pipe.commit();
    pipe.wait(0);
    sync_threads();
    y[thread_idx().x] = tile[0][0];
}

fn main() {}
