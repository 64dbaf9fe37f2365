//! Specialization. STUB: interface only, being written.

use crate::ir::Kernel;
use crate::Error;

/// Substitutes const params, folds constants, unrolls `#[unroll]` loops.
pub fn specialize(kernel: &Kernel, consts: &[i64]) -> Result<Kernel, Error> {
    let _ = (kernel, consts);
    todo!("specialize")
}
