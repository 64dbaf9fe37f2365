//! Backends: one module per target language.

pub mod ptx;
pub mod wgsl;

use crate::ir::{Expr, Kernel};
use crate::Error;

/// The block shape a specialized kernel declares (`block(..)`), evaluated;
/// `None` when it declares none.
pub fn declared_block(kernel: &Kernel) -> Result<Option<[u32; 3]>, Error> {
    declared_shape(kernel, kernel.block.as_ref(), "block")
}

/// The cluster shape a specialized kernel declares (`cluster(..)`),
/// evaluated; `None` when it declares none, or a cluster of one block (a
/// tune value of 1: every launch is such a cluster already).
pub fn declared_cluster(kernel: &Kernel) -> Result<Option<[u32; 3]>, Error> {
    let shape = declared_shape(kernel, kernel.cluster.as_ref(), "cluster")?;
    Ok(shape.filter(|dims| dims != &[1, 1, 1]))
}

/// The blocks per SM a specialized kernel asks for (`min_blocks_per_sm(..)`),
/// evaluated; `None` when it asks for none, or for one (a tune value of 1:
/// an SM always holds one block of a kernel that launches).
pub fn declared_min_blocks_per_sm(kernel: &Kernel) -> Result<Option<u32>, Error> {
    let Some(n) = &kernel.min_blocks_per_sm else {
        return Ok(None);
    };
    let n = constant(kernel, n, "min_blocks_per_sm")?;
    Ok((n > 1).then_some(n))
}

fn declared_shape(
    kernel: &Kernel,
    dims: Option<&[Expr; 3]>,
    option: &str,
) -> Result<Option<[u32; 3]>, Error> {
    let Some(dims) = dims else {
        return Ok(None);
    };
    let mut shape = [0u32; 3];
    for (out, dim) in shape.iter_mut().zip(dims) {
        *out = constant(kernel, dim, option)?;
    }
    Ok(Some(shape))
}

/// The value of an attribute's expression `e` (of `option(..)`), which
/// specialization has made a literal.
fn constant(kernel: &Kernel, e: &Expr, option: &str) -> Result<u32, Error> {
    e.as_int()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| {
            Error::new(format!(
                "kernel `{}`: `{option}(..)` is not constant: specialize it first",
                kernel.name
            ))
        })
}
