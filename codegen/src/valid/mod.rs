//! The IR validator. STUB: interface only, being written.

use crate::ir::Kernel;
use crate::Error;

pub fn validate(kernel: &Kernel) -> Result<(), Error> {
    let _ = kernel;
    todo!("validator")
}
