//! Backends: one module per target language.

pub mod ptx;
pub mod wgsl;

use crate::ir::Kernel;
use crate::Error;

/// The block shape a specialized kernel declares (`block(..)`), evaluated;
/// `None` when it declares none.
pub fn declared_block(kernel: &Kernel) -> Result<Option<[u32; 3]>, Error> {
    let Some(dims) = &kernel.block else {
        return Ok(None);
    };
    let mut shape = [0u32; 3];
    for (out, dim) in shape.iter_mut().zip(dims) {
        *out = dim
            .as_int()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                Error::new(format!(
                    "kernel `{}`: `block(..)` is not constant: specialize it first",
                    kernel.name
                ))
            })?;
    }
    Ok(Some(shape))
}
