//! Backends: one module per target language.

pub mod ptx;
