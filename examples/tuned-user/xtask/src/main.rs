//! `cargo xtask tune`: tunes this workspace's kernels and the stock GEMMs
//! on the GPU at hand (all a user's xtask needs for it).

use std::process::ExitCode;

fn main() -> ExitCode {
    warpforge_tuner::main(&[
        warpforge_example_tuned::TUNE_JOBS,
        warpforge_kernels::tuned::TUNE_JOBS,
    ])
}
