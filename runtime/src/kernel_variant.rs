//! [`KernelVariant`]: what host code generic over kernels knows of one
//! variant, implemented by the `Consts` that `#[kernel]` generates.

use std::fmt::Debug;
use std::hash::Hash;

use warpforge_codegen::KernelDef;

/// The const-parameter values of one variant of a kernel with const
/// parameters. Every kernel module's `Consts` implements it, so that host
/// code (a family's launcher, a tuner, a check over every variant) can be
/// generic over kernels instead of written once per kernel.
pub trait KernelVariant: Copy + Debug + Eq + Hash + Send + Sync + 'static {
    /// The kernel this is a variant of.
    fn def() -> &'static KernelDef;

    /// Every variant the kernel is built in, in the order of its `tune(..)`
    /// values, `constrain(..)` applied.
    fn variants() -> Vec<Self>;

    /// The values in declaration order, as the runtime takes them.
    fn values(&self) -> Vec<i64>;

    /// `kernel[CONST=value,..]`.
    fn name(&self) -> String {
        Self::def().variant_name(&self.values())
    }
}
