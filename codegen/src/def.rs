//! [`KernelDef`]: everything the macro records about one kernel, and the
//! variant space it spans.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::eval;
use crate::ir::{Arch, Kernel, Literal, Requirement};
use crate::Error;

/// What a kernel is compiled to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// PTX for one CUDA architecture.
    Ptx(Arch),
    /// Portable WGSL for WebGPU (wgpu), see [`crate::back::wgsl`].
    Wgsl,
}

impl Target {
    /// Every target `arch(..)` can name.
    pub const ALL: [Target; 5] = [
        Target::Ptx(Arch::Sm70),
        Target::Ptx(Arch::Sm80),
        Target::Ptx(Arch::Sm90),
        Target::Ptx(Arch::Sm90a),
        Target::Wgsl,
    ];

    /// The targets of a kernel without `arch(..)`, in order: every target
    /// but the arch-specific `sm_90a`, which a kernel asks for by name (its
    /// PTX runs on compute capability 9.0 only).
    pub const DEFAULT: [Target; 4] = [
        Target::Ptx(Arch::Sm70),
        Target::Ptx(Arch::Sm80),
        Target::Ptx(Arch::Sm90),
        Target::Wgsl,
    ];

    /// The spelling of `arch(..)`: `sm_70`, `sm_80`, `sm_90`, `sm_90a`, `wgsl`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Ptx(arch) => arch.name(),
            Target::Wgsl => "wgsl",
        }
    }

    /// The target `arch(..)` spells `name`, if any.
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
    /// The const param's name.
    pub name: String,
    /// The values it takes, in the order written.
    pub values: Vec<i64>,
}

/// The most parameters a tuned launch's `tune_key(..)` names, and so the
/// most sizes a tuning key holds.
pub const MAX_KEY_SIZES: usize = 4;

/// How a kernel's tuned launch (`tune_key(..)`) keys, starts and checks its
/// calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedLaunch {
    /// Indices into `ir.params` of the parameters that key a call, in the
    /// order `tune_key(..)` names them: an integer scalar contributes its
    /// value, a slice its length.
    pub key: Vec<usize>,
    /// The heuristic default's const values (`tune_default(..)`, the
    /// unnamed params at their axis's first value); `None`: the first
    /// variant.
    pub default: Option<Vec<i64>>,
    /// How far a candidate's outputs may be from the default's, relative to
    /// each output's largest magnitude (`tune_tolerance(..)`); `None`: the
    /// element type's own.
    pub tolerance: Option<f64>,
}

/// One kernel as the macro records it: the IR of the whole family, the targets
/// it is compiled for, and the values of its const params.
///
/// Change a definition's fields before its first launch only: the runtime
/// identifies a kernel by [`KernelDef::ir_digest`], computed once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelDef {
    /// The IR of the whole variant family (const params symbolic).
    pub ir: Kernel,
    /// Targets in the order declared (`arch(sm_70, sm_80)`).
    pub targets: Vec<Target>,
    /// One axis per const param, in `ir.const_params` order.
    pub tune: Vec<TuneAxis>,
    /// `constrain(..)`: conditions over const params that a combination of
    /// tune values must meet to be a variant.
    pub constraints: Vec<Requirement>,
    /// `tune_key(..)` and its companions: the kernel's tuned launch, if it
    /// has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_launch: Option<TunedLaunch>,
    #[serde(skip)]
    ir_digest: IrDigest,
}

/// The SHA-256 of a kernel's IR in its JSON form.
pub type Digest = [u8; 32];

/// [`KernelDef::ir_digest`]'s memo. It takes no part in comparisons, and a
/// clone starts empty (a clone is often changed before use).
#[derive(Debug, Default)]
struct IrDigest(OnceLock<Digest>);

impl Clone for IrDigest {
    fn clone(&self) -> IrDigest {
        IrDigest::default()
    }
}

impl PartialEq for IrDigest {
    fn eq(&self, _: &IrDigest) -> bool {
        true
    }
}

impl KernelDef {
    /// A definition of the family `ir` for `targets`, over the tune space
    /// `tune` restricted by `constraints`.
    pub fn new(
        ir: Kernel,
        targets: Vec<Target>,
        tune: Vec<TuneAxis>,
        constraints: Vec<Requirement>,
    ) -> KernelDef {
        KernelDef {
            ir,
            targets,
            tune,
            constraints,
            tuned_launch: None,
            ir_digest: IrDigest::default(),
        }
    }

    /// The SHA-256 of the IR, computed on the first call: equal for equal
    /// IRs, and what the runtime's variant caches compare on each launch
    /// (comparing whole IRs cost tens of microseconds per launch).
    pub fn ir_digest(&self) -> Digest {
        *self.ir_digest.0.get_or_init(|| {
            let json = serde_json::to_vec(&self.ir).expect("the IR always serializes");
            Sha256::digest(json).into()
        })
    }

    /// The definition as JSON: what the macro embeds in the user's crate.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the IR always serializes")
    }

    /// The definition [`KernelDef::to_json`] wrote. The IR of a kernel the
    /// front accepts nests deeper in JSON than serde_json's recursion limit
    /// of 128 (a sum of 45 terms does), so the limit is off; the front's
    /// nesting limit bounds the depth instead, and the stack grows on the
    /// heap where the caller's thread has too little left.
    pub fn from_json(json: &str) -> Result<KernelDef, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(json);
        deserializer.disable_recursion_limit();
        let def = KernelDef::deserialize(serde_stacker::Deserializer::new(&mut deserializer))?;
        deserializer.end()?;
        Ok(def)
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

#[cfg(all(test, feature = "front"))]
mod tests {
    use crate::front::parse_kernel_str;

    fn scale(factor: &str) -> crate::KernelDef {
        let body = format!(
            "pub fn scale(x: &mut [f32], n: u32) {{ let i = thread_idx().x; if i < n {{ x[i] *= {factor}; }} }}"
        );
        parse_kernel_str("", &body).unwrap()
    }

    #[test]
    fn the_ir_digest_tells_kernels_apart_and_is_computed_afresh_for_clones() {
        let (two, three) = (scale("2.0"), scale("3.0"));
        assert_eq!(two.ir_digest(), scale("2.0").ir_digest());
        assert_ne!(two.ir_digest(), three.ir_digest());
        // A clone's digest is its own IR's, not the memo of the original.
        let mut changed = two.clone();
        changed.ir = three.ir.clone();
        assert_eq!(changed.ir_digest(), three.ir_digest());
        // The memo takes no part in comparisons.
        let fresh = scale("2.0");
        assert_eq!(two, fresh);
        // NaN literals: equal IRs, equal digests (the IR's own `==` says
        // otherwise, as NaN != NaN).
        let nan = scale("f32::NAN");
        assert_eq!(nan.ir_digest(), scale("f32::NAN").ir_digest());
    }
}
