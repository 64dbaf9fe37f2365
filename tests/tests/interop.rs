//! wgpu interop on lavapipe: a stock kernel on the app's own wgpu device,
//! writing the app's own buffer (see `warpforge_tests::interop`; the CUDA
//! checks are `gpu-check --only interop`). A missing adapter fails.

use warpforge_tests::interop::wgpu_app::{check_refusals, check_saxpy_in_place};
use warpforge_tests::report::Report;
use warpforge_tests::{run_seed, Inputs};

// Only its quiet_mesa: the runtimes here are made inside the checks.
#[allow(dead_code)]
#[path = "../../runtime/tests/common/mesa.rs"]
mod mesa;

#[test]
fn a_kernel_writes_the_apps_buffer_on_the_apps_device() {
    mesa::quiet_mesa();
    let mut inputs = Inputs::new(run_seed());
    let mut report = Report::default();
    check_saxpy_in_place(&mut inputs, &mut report);
    check_refusals(&mut report);
    report.finish();
    assert!(report.all_passed(), "an interop check failed (above)");
}
