//! The `#[kernel]` macro's diagnostics: each case in `ui/` is a small kernel
//! with one mistake and its expected compiler output beside it; `ui/pass/`
//! holds kernels that must compile. Refresh the outputs with
//! `TRYBUILD=overwrite cargo test -p warpforge-tests --test compile_fail`
//! and read every changed `.stderr`.

#[test]
fn kernel_mistakes_are_reported_at_their_span() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

#[test]
fn kernels_expand_to_typed_launchers() {
    trybuild::TestCases::new().pass("tests/ui/pass/*.rs");
}
