//! wgpu interop, views, forked runtimes and host-buffer copies on lavapipe: a stock kernel on the app's own wgpu
//! device, writing the app's own buffer, and on views of larger buffers (see
//! `warpforge_tests::interop`; the CUDA checks are `gpu-check --only
//! interop`). A missing adapter fails.

use warpforge_tests::interop::wgpu_app::{check_refusals, check_saxpy_in_place};
use warpforge_tests::interop::{check_host_copies, check_streams, check_views};
use warpforge_tests::report::Report;
use warpforge_tests::{run_seed, Inputs};

#[test]
fn kernels_write_the_apps_buffers_and_views_in_place() {
    // The app's own runtimes are made inside the checks.
    warpforge_tests::quiet_mesa();
    let mut inputs = Inputs::new(run_seed());
    let mut report = Report::default();
    check_saxpy_in_place(&mut inputs, &mut report);
    check_refusals(&mut report);
    let rt = warpforge_tests::lavapipe("the wgpu interop tests");
    check_views(&rt, &mut inputs, &mut report);
    check_streams(&rt, &mut inputs, &mut report);
    check_host_copies(&rt, &mut inputs, &mut report);
    report.finish();
    assert!(report.all_passed(), "an interop check failed (above)");
}
