//! The `#[kernel]` macro's diagnostics: each case in `ui/` is a small kernel
//! with one mistake and its expected compiler output beside it; `ui/pass/`
//! holds kernels that must compile. Refresh the outputs with
//! `TRYBUILD=overwrite cargo test -p warpforge-tests --test compile_fail`
//! and read every changed `.stderr`.

#[test]
fn kernel_diagnostics() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
