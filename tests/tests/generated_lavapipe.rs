//! Generated programs on lavapipe (issue 21): random SIMT kernels through
//! wgpu on Mesa's CPU Vulkan driver, each slice compared bit for bit with the
//! reference interpreter's (`warpforge_tests::generated`). The seed rotates
//! per run (`WARPFORGE_GEN_SEED` replays one) and is printed;
//! `WARPFORGE_GEN_LAVAPIPE_COUNT` overrides the count.

use warpforge_tests::generated::{check_generated, count, run_seed};
use warpforge_tests::report::Report;

/// Programs per run (`WARPFORGE_GEN_LAVAPIPE_COUNT` overrides): each is a
/// pipeline lavapipe compiles with LLVM; 3,000 took 40 s on this project's
/// 2-core machine.
const PROGRAMS: usize = 1500;

#[test]
fn generated_programs_agree_with_the_interpreter_on_lavapipe() {
    let rt = warpforge_tests::lavapipe("the generated-program tests");
    let count = count("WARPFORGE_GEN_LAVAPIPE_COUNT", PROGRAMS);
    let seed = run_seed();
    let mut report = Report::default();
    check_generated(&rt, seed, count, &mut report);
    report.finish();
    assert!(report.all_passed(), "failures above (seed {seed})");
}
