//! Runs the tiled transpose on the device `Runtime::new()` picks (CUDA when
//! there is an NVIDIA driver and GPU, else wgpu) and checks every element
//! against the CPU: `cargo run -p warpforge-example-tiled`.

use warpforge::prelude::*;
use warpforge::DeviceScalar;
use warpforge_example_tiled::{grid, transpose_f32, transpose_i32, transpose_reference};

/// A matrix whose sides are not multiples of any tile size, so that the edge
/// tiles are partial.
const ROWS: u32 = 1000;
const COLS: u32 = 777;

fn main() -> Result<(), Error> {
    let rt = Runtime::new()?;
    let n = (ROWS * COLS) as usize;

    let consts = transpose_f32::Consts { BM: 64, BN: 32 };
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let f32_wrong = check(
        &rt,
        &format!("transpose_f32 {consts:?}"),
        0.5,
        &xs,
        f32::NAN,
        |alpha, x, y| {
            let tiles = grid(ROWS, COLS, consts.BM, consts.BN);
            transpose_f32::launch(&rt, consts, tiles, alpha, x, y, ROWS, COLS)
        },
    )?;

    let consts = transpose_i32::Consts { BM: 32, BN: 64 };
    let xs: Vec<i32> = (0..n as i32).collect();
    let i32_wrong = check(
        &rt,
        &format!("transpose_i32 {consts:?}"),
        -3,
        &xs,
        i32::MIN,
        |alpha, x, y| {
            let tiles = grid(ROWS, COLS, consts.BM, consts.BN);
            transpose_i32::launch(&rt, consts, tiles, alpha, x, y, ROWS, COLS)
        },
    )?;

    assert_eq!(
        f32_wrong + i32_wrong,
        0,
        "the device disagrees with the CPU"
    );
    Ok(())
}

/// Runs `launch` with `alpha`, `xs` and an output filled with `poison` (so
/// that an element the kernel misses shows), compares the output with
/// `alpha * xs^T` computed on the CPU, prints a line, and returns the number
/// of wrong elements.
fn check<T: DeviceScalar + PartialEq + std::ops::Mul<Output = T>>(
    rt: &Runtime,
    what: &str,
    alpha: T,
    xs: &[T],
    poison: T,
    launch: impl FnOnce(T, &DeviceBuffer<T>, &mut DeviceBuffer<T>) -> Result<(), Error>,
) -> Result<usize, Error> {
    let x = rt.upload(xs)?;
    let mut y = rt.upload(&vec![poison; xs.len()])?;
    launch(alpha, &x, &mut y)?;
    let expected = transpose_reference(alpha, xs, ROWS as usize, COLS as usize);
    let got = rt.download(&y)?;
    let wrong = got.iter().zip(&expected).filter(|(g, e)| g != e).count();
    println!(
        "{what} of {ROWS} x {COLS} on {} ({}): {wrong} of {} elements wrong",
        rt.device().name,
        rt.backend_name(),
        xs.len()
    );
    Ok(wrong)
}
