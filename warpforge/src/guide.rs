//! The guides, kept in `warpforge/docs/` so that the repository and docs.rs
//! show the same text: the kernel language, and autotuning and dispatch.

#[doc = include_str!("../docs/dsl.md")]
pub mod dsl {}

#[doc = include_str!("../docs/tuning.md")]
pub mod tuning {}
