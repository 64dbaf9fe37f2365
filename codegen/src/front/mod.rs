//! The Rust-syntax front end. STUB: being written.
