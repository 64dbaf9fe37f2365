use warpforge::prelude::*;

// The default targets include WGSL, whose arrays (naga's types) take at
// most 2^31 - 1 bytes: 2^29 f32s are 2^31 bytes.
#[kernel(tune(ROWS = [1, 524288]))]
pub fn big_tile<const ROWS: u32>(y: &mut [f32]) {
    let mut tile: [[f32; 1024]; ROWS] = shared();
    tile[0][0] = y[0];
    y[0] = tile[0][0];
}

fn main() {}
