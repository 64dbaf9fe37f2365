//! An app that links libcuda at build time (cudarc's `dynamic-linking`, the
//! choice candle makes) and uses warpforge in the same process: warpforge's
//! cudarc is built with `fallback-dynamic-loading`, which yields to the app's
//! choice, so the two agree instead of cudarc's build script refusing both.
//!
//! It makes a context, a stream and a slice with its own cudarc, scales the
//! slice in place with a warpforge kernel on that stream, and reads it back
//! itself: `cargo run` in this directory on a machine with an NVIDIA driver.

use cudarc::driver::DevicePtr;
use warpforge::prelude::*;

#[kernel]
fn scale(alpha: f32, x: &mut [f32], n: u32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < n {
        x[i] = alpha * x[i];
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The app's own context, stream and memory, through its own cudarc: the
    // version warpforge re-exports, so the types are the same (a mismatch
    // would not compile).
    let app_context = cudarc::driver::CudaContext::new(0)?;
    let app_stream = app_context.new_stream()?;
    let n = 1000u32;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let app_x: cudarc::driver::CudaSlice<f32> = app_stream.clone_htod(&host)?;
    let address = app_x.device_ptr(&app_stream).0;

    // warpforge on the app's stream, scaling the app's slice where it lies.
    let rt = Runtime::cuda_on_stream(app_stream.clone())?;
    let mut x = DeviceBuffer::from_cuda_slice(&rt, app_x)?;
    scale::launch(&rt, Grid::linear(n as usize, 256), 2.0, &mut x, n)?;
    let app_x = x
        .into_cuda_slice()
        .map_err(|_| "warpforge kept the app's slice")?;
    // The same allocation came back: warpforge computed in it, not in a copy.
    let returned = app_x.device_ptr(&app_stream).0;
    if returned != address {
        return Err(format!("the slice came back at {returned:#x}, not {address:#x}").into());
    }
    println!("the app's slice stayed at device address {address:#x}");

    let back = app_stream.clone_dtoh(&app_x)?;
    let wrong = host
        .iter()
        .zip(&back)
        .filter(|(h, b)| 2.0 * **h != **b)
        .count();
    println!("{wrong} of {n} elements wrong on {}", rt.device().name);
    if wrong > 0 {
        return Err(format!("{wrong} of {n} elements differ from 2 x the input").into());
    }
    Ok(())
}
