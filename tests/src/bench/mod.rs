//! The `bench` binary's parts that are not GPU plumbing: how a comparison is
//! timed ([`method`]), the clocks and power beside it ([`monitor`]), the
//! report as data with its tables ([`report`]) and its charts ([`charts`]),
//! and the one baseline library cudarc does not bind ([`cusparselt`]).
//! The readers are tested in the CPU tier on a recorded run
//! (`tests/tests/bench_report.rs`).

pub mod charts;
pub mod cusparselt;
pub mod method;
pub mod monitor;
pub mod report;
