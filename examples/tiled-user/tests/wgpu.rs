//! The tiled transpose through wgpu (Mesa's lavapipe in the CPU tier), every
//! variant of both element types, on ragged and tile-sized matrices with
//! poisoned outputs, compared element by element with the CPU. A missing
//! adapter fails the test with what to install: not run is never passed.

use std::fmt::Debug;
use std::ops::Mul;
use std::sync::Once;

use warpforge::{DeviceBuffer, DeviceScalar, Error, Grid, Runtime};
use warpforge_example_tiled::{grid, transpose_f32, transpose_i32, transpose_reference};

/// (rows, cols): one element, thin, ragged both ways, exactly one and
/// several whole tiles, more tile rows than one group of 8 of
/// `grouped_tile_order` (with a partial last group).
const SHAPES: &[(u32, u32)] = &[
    (1, 1),
    (1, 70),
    (70, 1),
    (31, 33),
    (64, 64),
    (128, 192),
    (333, 97),
    (1000, 77),
];

/// The wgpu runtime, or a panic that says what to install.
fn wgpu_runtime() -> Runtime {
    // Mesa warns on every Vulkan instance without a private runtime
    // directory: make one, once, before any thread creates an instance.
    static XDG: Once = Once::new();
    XDG.call_once(|| {
        #[cfg(unix)]
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            use std::os::unix::fs::DirBuilderExt;
            let dir = std::env::temp_dir().join("warpforge-example-xdg");
            let made = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir);
            if made.is_ok() {
                std::env::set_var("XDG_RUNTIME_DIR", dir);
            }
        }
    });
    let rt = Runtime::wgpu().unwrap_or_else(|e| {
        panic!(
            "this test needs a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    // Once per test binary, past the harness's capture: the log of a
    // passing run shows what ran it.
    static ANNOUNCE: Once = Once::new();
    ANNOUNCE.call_once(|| eprintln!("wgpu adapter: {}: {}", rt.backend_name(), rt.device().name));
    rt
}

/// A launch of one variant: its grid, `alpha`, `x`, `y`, `rows`, `cols`.
type Launch<'a, T> =
    dyn Fn(Grid, T, &DeviceBuffer<T>, &mut DeviceBuffer<T>, u32, u32) -> Result<(), Error> + 'a;

/// Runs one variant (tiles of `bm x bn`) on every shape of [`SHAPES`], with
/// `x[i] = x_at(i)` and an output filled with `poison` (so that an element
/// the kernel misses shows), and compares every element with
/// `alpha * x^T` computed on the CPU; panics with the first few that differ.
fn check_every_shape<T: DeviceScalar + PartialEq + Debug + Mul<Output = T>>(
    rt: &Runtime,
    what: &str,
    (bm, bn): (u32, u32),
    alpha: T,
    x_at: impl Fn(usize) -> T,
    poison: T,
    launch: &Launch<'_, T>,
) -> Result<(), Error> {
    for &(rows, cols) in SHAPES {
        let n = (rows * cols) as usize;
        let xs: Vec<T> = (0..n).map(&x_at).collect();
        let x = rt.upload(&xs)?;
        let mut y = rt.upload(&vec![poison; n])?;
        launch(grid(rows, cols, bm, bn), alpha, &x, &mut y, rows, cols)?;
        let got = rt.download(&y)?;
        let expected = transpose_reference(alpha, &xs, rows as usize, cols as usize);
        let wrong: Vec<String> = (0..n)
            .filter(|&i| got[i] != expected[i])
            .map(|i| format!("y[{i}] = {:?}, expected {:?}", got[i], expected[i]))
            .collect();
        assert!(
            wrong.is_empty(),
            "{what} of {rows} x {cols}: {} of {n} elements wrong, first: {}",
            wrong.len(),
            wrong[..wrong.len().min(5)].join("; ")
        );
    }
    Ok(())
}

#[test]
fn transpose_f32_every_variant_matches_the_cpu() -> Result<(), Error> {
    let rt = wgpu_runtime();
    for consts in transpose_f32::variants() {
        // Distinct values, exact in f32, and so is alpha times each.
        check_every_shape(
            &rt,
            &format!("transpose_f32 {consts:?}"),
            (consts.BM, consts.BN),
            -1.5,
            |i| i as f32 + 0.25,
            f32::NAN,
            &|tiles, alpha, x, y, rows, cols| {
                transpose_f32::launch(&rt, consts, tiles, alpha, x, y, rows, cols)
            },
        )?;
    }
    Ok(())
}

#[test]
fn transpose_i32_every_variant_matches_the_cpu() -> Result<(), Error> {
    let rt = wgpu_runtime();
    for consts in transpose_i32::variants() {
        check_every_shape(
            &rt,
            &format!("transpose_i32 {consts:?}"),
            (consts.BM, consts.BN),
            7,
            |i| i as i32 - 500,
            i32::MIN,
            &|tiles, alpha, x, y, rows, cols| {
                transpose_i32::launch(&rt, consts, tiles, alpha, x, y, rows, cols)
            },
        )?;
    }
    Ok(())
}

#[test]
fn a_wrong_output_length_is_refused_before_the_launch() {
    let rt = wgpu_runtime();
    let consts = transpose_f32::variants()[0];
    let x = rt.upload(&[1.0f32; 6]).unwrap();
    let mut y = rt.upload(&[0.0f32; 5]).unwrap();
    let err = transpose_f32::launch(&rt, consts, grid(2, 3, 32, 32), 1.0, &x, &mut y, 2, 3)
        .expect_err("y is one element short");
    assert!(err.to_string().contains("y.len() == x.len()"), "{err}");
}
