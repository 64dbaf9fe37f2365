use warpforge::prelude::*;

// The kernel has a mistake; its callers still see its module, so the build
// reports the mistake alone.
#[kernel(tune(N = [1, 2]))]
pub fn k<const N: u32>(x: &[f32], y: &mut [f32]) {
    y[0] = x[0] + 1u32;
}

pub fn run(rt: &Runtime, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<(), Error> {
    let consts = k::variants()[0];
    k::launch(rt, consts, Grid::linear(1, 32), x, y)
}

fn main() {}
