//! The tuned launches of this crate on wgpu (Mesa's lavapipe in the CPU
//! tier): results against the CPU for every shape class, the in-place
//! output restored around tuning, and the second call of a bucket served
//! from memory. A missing adapter fails the test with what to install: not
//! run is never passed.

use warpforge::tune::{MissPolicy, Source, TuneSettings};
use warpforge::{BackendKind, Runtime};
use warpforge_example_tuned::{random, row_sums, row_sums_grid, scale_add, scale_add_grid};

fn lavapipe(policy: MissPolicy, dir: &std::path::Path) -> Runtime {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let rt = Runtime::with_backend(BackendKind::Wgpu).unwrap_or_else(|e| {
        panic!(
            "this test needs a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    rt.set_tune_settings(TuneSettings {
        policy: Some(policy),
        dir: Some(dir.to_path_buf()),
    });
    rt
}

fn scale_add_reference(alpha: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| alpha * x + y).collect()
}

#[test]
fn untuned_calls_take_the_default_and_compute_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let rt = lavapipe(MissPolicy::Heuristic, dir.path());
    for n in [1usize, 255, 256 * 4 + 3, 100_000] {
        let (hx, hy) = (random(n, 7), random(n, 8));
        let x = rt.upload(&hx).unwrap();
        let mut y = rt.upload(&hy).unwrap();
        let tuned = scale_add::tuned(&rt).unwrap();
        let selection = tuned
            .launch(|c| scale_add_grid(n, c.ITEMS), 2.0, &x, &mut y)
            .unwrap();
        assert_eq!(selection.source, Source::Heuristic);
        let chosen = tuned.kernel().dispatcher().candidate(selection);
        assert_eq!(chosen.consts, vec![4], "tune_default(ITEMS = 4)");
        assert_eq!(
            rt.download(&y).unwrap(),
            scale_add_reference(2.0, &hx, &hy),
            "n = {n}"
        );
    }
    let (rows, cols) = (37u32, 1000u32);
    let hx = random((rows * cols) as usize, 9);
    let x = rt.upload(&hx).unwrap();
    let mut sums = rt.alloc_zeroed::<f32>(rows as usize).unwrap();
    row_sums::tuned(&rt)
        .unwrap()
        .launch(|c| row_sums_grid(rows, c.ROWS), &x, &mut sums, rows, cols)
        .unwrap();
    let got = rt.download(&sums).unwrap();
    for (r, sum) in got.iter().enumerate() {
        let want: f64 = hx[r * cols as usize..][..cols as usize]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        assert!(
            (f64::from(*sum) - want).abs() < 1e-3,
            "row {r}: {sum} against {want}"
        );
    }
}
