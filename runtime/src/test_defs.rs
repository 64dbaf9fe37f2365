//! Kernel definitions for unit tests: an empty body over the given
//! parameters, for the checks and caches that look at a kernel's signature
//! and identity, not at what it computes.

use warpforge_codegen::ir::{Block, Kernel, Param, ParamType};
use warpforge_codegen::{KernelDef, Target};

/// A kernel `name` with no const parameters, taking `params`, for `targets`.
pub(crate) fn kernel_def(
    name: &str,
    params: Vec<(&str, ParamType)>,
    targets: Vec<Target>,
) -> KernelDef {
    KernelDef::new(
        Kernel {
            name: name.into(),
            const_params: vec![],
            params: params
                .into_iter()
                .map(|(name, ty)| Param {
                    name: name.into(),
                    ty,
                    tensor_map: None,
                })
                .collect(),
            locals: vec![],
            block: None,
            cluster: None,
            min_blocks_per_sm: None,
            requires: vec![],
            body: Block::new(),
        },
        targets,
        vec![],
        vec![],
    )
}
