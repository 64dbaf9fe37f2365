//! The GPU tier's running tally: one line per check, and a closing
//! `N passed, N failed` line that CI-style readers understand.

use std::fmt::Display;

#[derive(Default)]
pub struct Report {
    passed: usize,
    failed: Vec<String>,
}

impl Report {
    /// Records one check: `what` names kernel, variant and shape.
    pub fn check(&mut self, what: &str, ok: bool, detail: impl Display) {
        let status = if ok { "ok  " } else { "FAIL" };
        println!("{status} {what}: {detail}");
        if ok {
            self.passed += 1;
        } else {
            self.failed.push(format!("{what}: {detail}"));
        }
    }

    /// Records a check that could not run because of an error (launch refused,
    /// driver error): a failure.
    pub fn error(&mut self, what: &str, error: impl Display) {
        self.check(what, false, format_args!("error: {error}"));
    }

    pub fn all_passed(&self) -> bool {
        self.failed.is_empty()
    }

    /// Prints the failures again and the closing tally.
    pub fn finish(&self) {
        if !self.failed.is_empty() {
            println!("\nfailures:");
            for f in &self.failed {
                println!("  {f}");
            }
        }
        println!("\n{} passed, {} failed", self.passed, self.failed.len());
    }
}
