//! An app that links libcuda at build time (cudarc's `dynamic-linking`, the
//! choice candle makes) and uses warpforge in the same process: warpforge's
//! cudarc is built with `fallback-dynamic-loading`, which yields to the app's
//! choice, so the two agree instead of cudarc's build script refusing both.
//!
//! It creates a context with its own cudarc, then scales a vector with a
//! warpforge kernel and checks it: `cargo run` in this directory on a machine
//! with an NVIDIA driver.

use warpforge::prelude::*;

#[kernel]
fn scale(alpha: f32, x: &mut [f32], n: u32) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < n {
        x[i] = alpha * x[i];
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The app's own use of the driver, through the same cudarc version
    // warpforge re-exports (a type mismatch here would not compile).
    let app_context: std::sync::Arc<warpforge::cudarc::driver::CudaContext> =
        cudarc::driver::CudaContext::new(0)?;
    println!("the app's context is on device {}", app_context.ordinal());

    let rt = Runtime::cuda(0)?;
    let n = 1000u32;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut x = rt.upload(&host)?;
    scale::launch(&rt, Grid::linear(n as usize, 256), 2.0, &mut x, n)?;
    let back = rt.download(&x)?;
    let wrong = host.iter().zip(&back).filter(|(h, b)| 2.0 * **h != **b).count();
    println!("{} of {n} elements wrong on {}", wrong, rt.device().name);
    if wrong > 0 {
        return Err(format!("{wrong} of {n} elements differ from 2 x the input").into());
    }
    Ok(())
}
