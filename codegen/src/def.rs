//! [`KernelDef`]: everything the macro records about one kernel, and the
//! variant space it spans.

use serde::{Deserialize, Serialize};

use crate::eval;
use crate::ir::{Arch, Kernel, Literal, Requirement};
use crate::Error;

/// What a kernel is compiled to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    Ptx(Arch),
    /// Portable WGSL for WebGPU (wgpu), see [`crate::back::wgsl`].
    Wgsl,
}

impl Target {
    /// Every target, in the order a kernel without `arch(..)` is built for.
    pub const ALL: [Target; 4] = [
        Target::Ptx(Arch::Sm70),
        Target::Ptx(Arch::Sm80),
        Target::Ptx(Arch::Sm90),
        Target::Wgsl,
    ];

    /// The spelling of `arch(..)`: `sm_70`, `sm_80`, `sm_90`, `wgsl`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Ptx(arch) => arch.name(),
            Target::Wgsl => "wgsl",
        }
    }

    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The CUDA architecture of a PTX target; `None` for WGSL.
    pub fn arch(self) -> Option<Arch> {
        match self {
            Target::Ptx(arch) => Some(arch),
            Target::Wgsl => None,
        }
    }
}

/// The values one const param takes across the variant space (`tune(BM = [64, 128])`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneAxis {
    pub name: String,
    pub values: Vec<i64>,
}

/// One kernel as the macro records it: the IR of the whole family, the targets
/// it is compiled for, and the values of its const params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelDef {
    pub ir: Kernel,
    /// Targets in the order declared (`arch(sm_70, sm_80)`).
    pub targets: Vec<Target>,
    /// One axis per const param, in `ir.const_params` order.
    pub tune: Vec<TuneAxis>,
    /// `constrain(..)`: conditions over const params that a combination of
    /// tune values must meet to be a variant.
    pub constraints: Vec<Requirement>,
}

impl KernelDef {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the IR always serializes")
    }

    pub fn from_json(json: &str) -> Result<KernelDef, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The variants: every combination of const-param values (the cartesian
    /// product of the tune axes, first axis slowest) that meets the
    /// constraints, each in `ir.const_params` order. A kernel without const
    /// params has exactly one variant: `[]`.
    pub fn variants(&self) -> Vec<Vec<i64>> {
        let mut all = self.tune_product();
        all.retain(|consts| self.check_constraints(consts).is_ok());
        all
    }

    /// Whether `consts` meets every `constrain(..)` condition, or the first it fails.
    pub fn check_constraints(&self, consts: &[i64]) -> Result<(), Error> {
        for c in &self.constraints {
            if eval::eval(&c.cond, consts, &[])? != Literal::Bool(true) {
                return Err(Error::new(format!(
                    "{} is not a variant: it fails `constrain({})`",
                    self.variant_name(consts),
                    c.text
                )));
            }
        }
        Ok(())
    }

    fn tune_product(&self) -> Vec<Vec<i64>> {
        let mut out = vec![Vec::new()];
        for axis in &self.tune {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    axis.values.iter().map(move |&v| {
                        let mut next = prefix.clone();
                        next.push(v);
                        next
                    })
                })
                .collect();
        }
        out
    }

    /// A short, stable name of one variant: `gemm_f32[BM=64,BN=64]`.
    pub fn variant_name(&self, consts: &[i64]) -> String {
        if consts.is_empty() {
            return self.ir.name.clone();
        }
        let parts: Vec<String> = self
            .ir
            .const_params
            .iter()
            .zip(consts)
            .map(|(p, v)| format!("{}={}", p.name, v))
            .collect();
        format!("{}[{}]", self.ir.name, parts.join(","))
    }
}
