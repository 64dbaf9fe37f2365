use warpforge::prelude::*;

/// `y = a * x + y`, one thread per element.
#[kernel(requires(x.len() == y.len()))]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = block_idx().x * block_dim().x + thread_idx().x;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

fn main() -> Result<(), Error> {
    let n = 1 << 20;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys = vec![1.0f32; n];

    // An Err that says what to do when there is no GPU or no driver.
    let rt = Runtime::new()?;
    let x = rt.upload(&xs)?;
    let mut y = rt.upload(&ys)?;
    axpy::launch(&rt, Grid::linear(n, 256), 2.0, &x, &mut y)?;

    let out = rt.download(&y)?;
    let wrong = (0..n).filter(|&i| out[i] != 2.0 * xs[i] + ys[i]).count();
    println!(
        "axpy on {}: {wrong} of {n} elements wrong",
        rt.device().name
    );
    assert_eq!(wrong, 0);
    Ok(())
}
