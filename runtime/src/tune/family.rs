//! [`Family`]: the variants the tuner chooses among for one operation, which
//! one to take untuned, and how a call becomes a [`TuneKey`].

use sha2::{Digest, Sha256};
use warpforge_codegen::KernelDef;

use super::db::Record;
use super::key::{driver_version, GpuModel, ShapeBucket, TuneKey};
use super::prune::check_candidate;
use crate::buffer::ArgInfo;
use crate::device::DeviceInfo;
use crate::Error;

/// One variant the tuner can choose: a kernel and the values of its const
/// parameters (in `def.ir.const_params` order).
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The kernel.
    pub def: &'static KernelDef,
    /// The values of its const parameters.
    pub consts: Vec<i64>,
    name: String,
}

impl Candidate {
    /// The variant `consts` of `def`.
    pub fn new(def: &'static KernelDef, consts: Vec<i64>) -> Candidate {
        Candidate {
            name: def.variant_name(&consts),
            def,
            consts,
        }
    }

    /// `gemm_f16[BM=128,BN=128,..]`, as [`KernelDef::variant_name`] spells it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What of one call decides which variant is legal and fastest.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The dtype, layout and epilogue mix of the call (see
    /// [`TuneKey::dtypes`]), e.g. `f16.row*f16.col->f16.row` or, for a GEMM
    /// with a bias and ReLU, `f16.row*f16.col->f16.row+bias+relu`: calls
    /// with different mixes never share a winner.
    pub dtypes: &'a str,
    /// The call's problem size, coarsened.
    pub shape: ShapeBucket,
    /// The alignment facts the family's variants' legality depends on, in an
    /// order the family defines (see [`TuneKey::alignments`]). Every call with
    /// the same facts must admit the same variants: the dispatcher checks a
    /// stored winner against the first call of a (shape, alignments) pair
    /// and reuses the answer for the later ones.
    pub alignments: &'a [u32],
    /// The call's arguments in the kernels' parameter order, for the
    /// `requires` clauses. Every kernel of a family takes the same leading
    /// parameters; one may take more after them, whose arguments come last
    /// (the Hopper GEMMs' workspace), and a kernel with fewer parameters is
    /// checked on the leading arguments only.
    pub args: &'a [ArgInfo],
}

/// The variants of one operation, drawn from one or more kernels that take
/// the same parameters and compute the same result (e.g. the f16 GEMM's
/// `mma.sync` kernel for sm_80 and its `wmma` form for sm_70), and the
/// heuristic default: a fixed list of preferred variants, each for the calls
/// of some shapes or of all, of which the first that can take a call is used
/// when nothing was tuned for it.
#[derive(Clone, Debug)]
pub struct Family {
    name: String,
    candidates: Vec<Candidate>,
    /// Most preferred first.
    preferred: Vec<Preference>,
    codegen_version: String,
}

impl Family {
    /// Every variant of every kernel in `kernels`, in order. `name` names
    /// the family in tuning keys (`TuneKey::kernel`); each [`Call`] names its
    /// dtypes.
    pub fn new(name: impl Into<String>, kernels: &[&'static KernelDef]) -> Result<Family, Error> {
        let name = name.into();
        for (i, def) in kernels.iter().enumerate() {
            if kernels[..i].iter().any(|d| d.ir.name == def.ir.name) {
                return Err(Error::Tune(format!(
                    "tuning family `{name}` lists kernel `{}` twice: list each kernel once",
                    def.ir.name
                )));
            }
        }
        let candidates: Vec<Candidate> = kernels
            .iter()
            .flat_map(|&def| {
                def.variants()
                    .into_iter()
                    .map(move |consts| Candidate::new(def, consts))
            })
            .collect();
        if candidates.is_empty() {
            return Err(Error::Tune(format!(
                "tuning family `{name}` has no variants: give it at least one kernel whose \
                 `tune(..)` and `constrain(..)` leave a variant"
            )));
        }
        Ok(Family {
            codegen_version: codegen_version(kernels),
            name,
            candidates,
            preferred: Vec::new(),
        })
    }

    /// Appends a variant to the heuristic default's preference list.
    pub fn prefer(self, def: &KernelDef, consts: &[i64]) -> Result<Family, Error> {
        self.prefer_for(def, consts, |_| true)
    }

    /// Appends a variant to the heuristic default's preference list for
    /// the calls whose shape bucket `applies` admits (a narrow tile for a
    /// GEMM of few rows, say); other calls pass over it.
    pub fn prefer_for(
        mut self,
        def: &KernelDef,
        consts: &[i64],
        applies: fn(&ShapeBucket) -> bool,
    ) -> Result<Family, Error> {
        let index = self
            .candidates
            .iter()
            .position(|c| c.def.ir.name == def.ir.name && c.consts == consts)
            .ok_or_else(|| {
                Error::Tune(format!(
                    "the heuristic default `{}` of tuning family `{}` is not one of its variants: \
                     name a variant of a kernel of the family (one its `tune(..)` and \
                     `constrain(..)` admit)",
                    def.variant_name(consts),
                    self.name
                ))
            })?;
        self.preferred.push(Preference {
            candidate: index,
            applies,
        });
        Ok(self)
    }

    /// The family's name in tuning keys ([`TuneKey::kernel`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every variant of every kernel of the family: the kernels in the order
    /// [`Family::new`] was given them, each kernel's variants in the order of
    /// [`KernelDef::variants`].
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// A hash of the code generator ([`warpforge_codegen::VERSION_HASH`])
    /// and of the family's kernel definitions: a change to either makes
    /// stored results miss.
    pub fn codegen_version(&self) -> &str {
        &self.codegen_version
    }

    /// The heuristic default for `call`: the first preferred variant that
    /// runs on `device` and can take the call, else the first such variant
    /// of the family; `None` when no variant can.
    pub fn heuristic(&self, call: &Call<'_>, device: &DeviceInfo) -> Option<usize> {
        let usable = |&i: &usize| check_candidate(&self.candidates[i], call, device).is_ok();
        self.preferred
            .iter()
            .filter(|p| (p.applies)(&call.shape))
            .map(|p| p.candidate)
            .find(usable)
            .or_else(|| (0..self.candidates.len()).find(usable))
    }

    /// Why the family's first variant cannot take `call` on `device`, as
    /// `` (e.g. `NAME`, RULE: REASON)``, or nothing when it can: the example
    /// an error gives when no variant takes a call.
    pub fn first_refusal(&self, call: &Call<'_>, device: &DeviceInfo) -> String {
        let first = &self.candidates[0];
        check_candidate(first, call, device)
            .err()
            .map_or_else(String::new, |(rule, reason)| {
                format!(" (e.g. `{}`, {rule}: {reason})", first.name())
            })
    }

    /// The candidate a stored record names, if the family still has it.
    pub fn position(&self, record: &Record) -> Option<usize> {
        self.candidates
            .iter()
            .position(|c| c.name == record.variant && c.consts == record.consts)
    }

    /// The tuning key of `call` on the device `base` describes.
    pub fn key(&self, base: &KeyBase, call: &Call<'_>) -> TuneKey {
        TuneKey {
            gpu: base.gpu.clone(),
            driver_version: base.driver_version.clone(),
            codegen_version: self.codegen_version.clone(),
            kernel: self.name.clone(),
            dtypes: call.dtypes.to_string(),
            alignments: call.alignments.to_vec(),
            shape: call.shape,
        }
    }
}

/// A variant of the heuristic default ([`Family::prefer_for`]).
#[derive(Clone, Copy, Debug)]
struct Preference {
    /// An index into the family's candidates.
    candidate: usize,
    /// Whether it is for a call of this shape.
    applies: fn(&ShapeBucket) -> bool,
}

/// The parts of a tuning key that come from the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyBase {
    /// The GPU model.
    pub gpu: GpuModel,
    /// The driver, as [`driver_version`](super::driver_version) spells it.
    pub driver_version: String,
}

impl KeyBase {
    /// The key parts of `device`.
    pub fn of(device: &DeviceInfo) -> KeyBase {
        KeyBase {
            gpu: GpuModel::of(device),
            driver_version: driver_version(device),
        }
    }
}

/// 16 hex digits of SHA-256 over the code generator's hash and each
/// kernel's definition (JSON, which holds its IR, targets and tune space).
fn codegen_version(kernels: &[&KernelDef]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(warpforge_codegen::VERSION_HASH.as_bytes());
    for def in kernels {
        let json = def.to_json();
        hasher.update((json.len() as u64).to_le_bytes());
        hasher.update(json.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
