//! The `#[kernel]` attribute. STUB: being written.
