//! The GPU tier binaries' logger: warpforge's `log` warnings (an unusable
//! tuning database, a result that could not be stored) on stderr, as
//! `warpforge: <message>`, so that a run's log shows them.

use log::{Level, LevelFilter, Log, Metadata, Record};

struct StderrLog;

/// Only warpforge's own crates: wgpu and naga log through `log` too, and
/// their warnings are not the tier's to print.
fn is_warpforge(target: &str) -> bool {
    target.starts_with("warpforge")
}

impl Log for StderrLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= Level::Warn && is_warpforge(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("warpforge: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger; a second call, or another logger already set, leaves
/// the first in place.
pub fn init() {
    if log::set_logger(&StderrLog).is_ok() {
        log::set_max_level(LevelFilter::Warn);
    }
}
