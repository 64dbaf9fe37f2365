//! [`TunedKernel`]: the tuned launch of a kernel declared with
//! `tune_key(..)`, and the dispatchers a [`Runtime`] keeps for its tuned
//! entry points ([`TuneSettings`]).
//!
//! A tuned launch keys each call on the sizes `tune_key(..)` names (an
//! integer parameter's value, a slice's length), bucketed to powers of two
//! ([`ShapeBucket::of`]), with each size's power-of-two divisor (capped at
//! 16) as the alignment facts, so that `requires(n % 4 == 0)` on a keyed
//! size never sees a winner tuned for another residue. The first call of a
//! bucket resolves it as any [`Dispatcher`] does; with
//! [`MissPolicy::TuneNow`] it tunes on the call's own arguments
//! ([`OwnInputs`](super::own_inputs)): each candidate is checked against the
//! heuristic default's result, and the outputs are written back before the
//! call runs its winner. A resolved winner that the call's other arguments
//! rule out (a `requires` on an unkeyed parameter) gives way to the
//! heuristic default for that call.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use warpforge_codegen::eval::HostValue;
use warpforge_codegen::ir::Literal;
use warpforge_codegen::{KernelDef, MAX_KEY_SIZES};

use super::dispatch::{DispatchStats, Dispatcher, MissPolicy, Selection};
use super::family::{Call, Family};
use super::key::ShapeBucket;
use super::own_inputs::OwnInputs;
use super::prune::check_candidate;
use crate::buffer::{ArgInfo, Grid, KernelArg};
use crate::{Error, Runtime};

/// How a runtime's tuned entry points (a kernel's `tuned(&rt)`, the stock
/// `TunedGemm::new`) dispatch: set with [`Runtime::set_tune_settings`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TuneSettings {
    /// What a call nothing was tuned for does; `None`: the policy
    /// [`MISS_POLICY_ENV`](super::MISS_POLICY_ENV) names (heuristic when unset).
    pub policy: Option<MissPolicy>,
    /// The database directory; `None`: [`default_dir`](super::default_dir).
    pub dir: Option<PathBuf>,
}

/// A runtime's settings and the dispatcher of each tuned family it has
/// served: on the family's first call, the one [`SHARED_DISPATCHERS`] holds
/// for the runtime's GPU model and settings, else a new one.
#[derive(Default)]
pub(crate) struct RuntimeTuning {
    settings: RwLock<TuneSettings>,
    dispatchers: Mutex<HashMap<&'static str, Arc<Dispatcher>>>,
}

impl Runtime {
    /// Replaces how this runtime's tuned entry points dispatch. Handles made
    /// after this (`k::tuned(&rt)`, `TunedGemm::new`) get dispatchers with
    /// the new settings; a handle made before keeps its dispatcher and the
    /// old settings, so make the handles after setting them.
    pub fn set_tune_settings(&self, settings: TuneSettings) {
        *self
            .tuning
            .settings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = settings;
        self.tuning
            .dispatchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How this runtime's tuned entry points dispatch.
    pub fn tune_settings(&self) -> TuneSettings {
        self.tuning
            .settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The dispatcher of the tuned family `name` on this runtime, with its
    /// [`TuneSettings`]: made from `family` on the first call (which opens
    /// the database), shared afterwards. `name` must identify the family in
    /// the process (the stock GEMMs and the macro use the item's path).
    ///
    /// Runtimes of GPUs of one model ([`crate::DeviceInfo::same_model`]:
    /// each GPU of a multi-GPU host, or two runtimes of one GPU) with equal
    /// settings share the dispatcher, from whichever thread they run on: a
    /// call resolved or tuned on one is resolved for all of them, and
    /// resolutions are serialized, so one tuning serves every GPU of the
    /// model. Runtimes of other models, or other settings, get their own.
    pub fn tuned_dispatcher(
        &self,
        name: &'static str,
        family: impl FnOnce() -> Result<Family, Error>,
    ) -> Result<Arc<Dispatcher>, Error> {
        let mut dispatchers = self
            .tuning
            .dispatchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(dispatcher) = dispatchers.get(name) {
            return Ok(dispatcher.clone());
        }
        let settings = self.tune_settings();
        let policy = match settings.policy {
            Some(policy) => policy,
            None => MissPolicy::from_env()?,
        };
        // Held while the dispatcher is made, so that runtimes of one model
        // racing to a family's first call make one dispatcher between them.
        let mut shared = SHARED_DISPATCHERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shared.retain(|entry| entry.dispatcher.strong_count() > 0);
        let found = shared
            .iter()
            .filter(|entry| {
                entry.name == name
                    && entry.policy == policy
                    && entry.dir == settings.dir
                    && entry.device.same_model(self.device())
            })
            .find_map(|entry| entry.dispatcher.upgrade());
        let dispatcher = match found {
            Some(dispatcher) => dispatcher,
            None => {
                let dispatcher = Arc::new(Dispatcher::new(
                    self,
                    family()?,
                    policy,
                    settings.dir.as_deref(),
                )?);
                shared.push(SharedDispatcher {
                    name,
                    device: self.device().clone(),
                    policy,
                    dir: settings.dir,
                    dispatcher: Arc::downgrade(&dispatcher),
                });
                dispatcher
            }
        };
        dispatchers.insert(name, dispatcher.clone());
        Ok(dispatcher)
    }

    /// Every dispatcher this runtime's tuned entry points have made since
    /// the settings last changed, by family name: their stats, warnings and
    /// [`Dispatcher::take_outcomes`].
    pub fn tuned_dispatchers(&self) -> Vec<(&'static str, Arc<Dispatcher>)> {
        let dispatchers = self
            .tuning
            .dispatchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = dispatchers
            .iter()
            .map(|(&name, dispatcher)| (name, dispatcher.clone()))
            .collect();
        all.sort_by_key(|&(name, _)| name);
        all
    }
}

/// The dispatchers of the tuned entry points of every runtime in the
/// process, for [`Runtime::tuned_dispatcher`]: the runtimes of GPUs of one
/// model (eight H100s of a host, two runtimes of one GPU) with the same
/// policy and database directory share a family's dispatcher, so a call
/// tuned on one of them is resolved for all, in memory, and two of them
/// never tune the same call at once. Held weakly: a dispatcher goes when the
/// last runtime (or handle) using it does.
static SHARED_DISPATCHERS: Mutex<Vec<SharedDispatcher>> = Mutex::new(Vec::new());

struct SharedDispatcher {
    name: &'static str,
    /// The model it serves ([`crate::DeviceInfo::same_model`]).
    device: crate::DeviceInfo,
    policy: MissPolicy,
    dir: Option<PathBuf>,
    dispatcher: Weak<Dispatcher>,
}

/// The tuned launch of one kernel on one runtime: what a kernel's generated
/// `tuned(&rt)` wraps. The kernel's variants form a [`Family`] named by the
/// kernel's path, whose heuristic default is `tune_default(..)` (else the
/// first variant that can take the call).
pub struct TunedKernel<'rt> {
    rt: &'rt Runtime,
    def: &'static KernelDef,
    dispatcher: Arc<Dispatcher>,
    /// The dtypes of every call's key: the kernel's parameter types.
    dtypes: String,
}

impl<'rt> TunedKernel<'rt> {
    /// The tuned launch of `def` on `rt`; `path` names the kernel in the
    /// process and in tuning keys (the macro passes the kernel's module
    /// path). An `Err` when the kernel has no `tune_key(..)`, or when the
    /// database or the miss policy cannot be used.
    pub fn new(
        rt: &'rt Runtime,
        path: &'static str,
        def: &'static KernelDef,
    ) -> Result<TunedKernel<'rt>, Error> {
        let Some(tuned) = &def.tuned_launch else {
            return Err(Error::Tune(format!(
                "`{}` has no tuned launch: add `tune_key(..)` to its `#[kernel(..)]`, naming the \
                 parameters whose sizes decide which variant is fastest",
                def.ir.name
            )));
        };
        let dispatcher = rt.tuned_dispatcher(path, || {
            let family = Family::new(path, &[def])?;
            match &tuned.default {
                Some(consts) => family.prefer(def, consts),
                None => Ok(family),
            }
        })?;
        Ok(TunedKernel {
            rt,
            def,
            dispatcher,
            dtypes: signature(def),
        })
    }

    /// The dispatcher: its stats, stored records and outcomes.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// How the calls so far were resolved.
    pub fn stats(&self) -> DispatchStats {
        self.dispatcher.stats()
    }

    /// Launches the variant tuned for this call: `grid` gives each variant's
    /// launch shape from its const values (in `def.ir.const_params` order),
    /// `args` are the kernel's arguments in parameter order. Returns the
    /// selection it launched.
    pub fn launch(
        &self,
        grid: &dyn Fn(&[i64]) -> Grid,
        args: &mut [KernelArg<'_>],
    ) -> Result<Selection, Error> {
        let infos: Vec<ArgInfo> = args.iter().map(KernelArg::info).collect();
        let (shape, alignments, count) = self.key_of(&infos)?;
        let call = Call {
            dtypes: &self.dtypes,
            shape,
            alignments: &alignments[..count],
            args: &infos,
        };
        let family = self.dispatcher.family();
        let device = self.rt.device();
        let tolerance = self.def.tuned_launch.as_ref().and_then(|t| t.tolerance);
        let mut selection = self.dispatcher.select(self.rt, &call, || {
            let reference = family
                .heuristic(&call, device)
                .ok_or_else(|| no_variant(family, self.rt))?;
            let inputs = OwnInputs::new(
                self.rt,
                &family.candidates()[reference],
                grid,
                args,
                tolerance,
            )?;
            Ok(Box::new(inputs) as Box<dyn super::Workload + '_>)
        })?;
        if check_candidate(self.dispatcher.candidate(selection), &call, device).is_err() {
            selection = Selection {
                candidate: family
                    .heuristic(&call, device)
                    .ok_or_else(|| no_variant(family, self.rt))?,
                source: super::Source::Heuristic,
            };
        }
        let candidate = self.dispatcher.candidate(selection);
        let grid = grid(&candidate.consts);
        self.rt
            .launch(candidate.def, &candidate.consts, grid, args)?;
        Ok(selection)
    }

    /// The call's shape bucket and alignment facts (of which the first
    /// `count` hold), from the parameters `tune_key(..)` names.
    fn key_of(
        &self,
        infos: &[ArgInfo],
    ) -> Result<(ShapeBucket, [u32; MAX_KEY_SIZES], usize), Error> {
        let key = &self
            .def
            .tuned_launch
            .as_ref()
            .expect("TunedKernel::new checked the tuned launch")
            .key;
        let mut sizes = [0u64; MAX_KEY_SIZES];
        let mut alignments = [0u32; MAX_KEY_SIZES];
        for (slot, &param) in key.iter().enumerate() {
            let size = match infos.get(param).map(ArgInfo::host_value) {
                Some(HostValue::Slice { len }) => len,
                Some(HostValue::Scalar(Literal::Int(v))) if v >= 0 => v as u64,
                Some(other) => {
                    return Err(Error::InvalidLaunch {
                        kernel: self.def.ir.name.clone(),
                        message: format!(
                            "`tune_key` parameter `{}` is {other:?}, and a tuning key holds \
                             sizes: pass a non-negative value",
                            self.def.ir.params[param].name
                        ),
                    })
                }
                None => {
                    return Err(Error::InvalidLaunch {
                        kernel: self.def.ir.name.clone(),
                        message: format!(
                            "the tuned launch got {} arguments and the kernel takes {}",
                            infos.len(),
                            self.def.ir.params.len()
                        ),
                    })
                }
            };
            sizes[slot] = size;
            // The power-of-two divisor, capped: 0 is divisible by everything.
            alignments[slot] = 1 << size.trailing_zeros().min(4);
        }
        Ok((ShapeBucket::of(&sizes[..key.len()])?, alignments, key.len()))
    }
}

/// The kernel's parameter types, as the dtypes of its calls' tuning keys:
/// `u32,&[f32],&mut [f32]`.
fn signature(def: &KernelDef) -> String {
    let types: Vec<String> = def
        .ir
        .params
        .iter()
        .map(|p| crate::validate::param_type_name(p.ty))
        .collect();
    types.join(",")
}

fn no_variant(family: &Family, rt: &Runtime) -> Error {
    Error::Tune(format!(
        "no variant of `{}` can take this call on {}: check the arguments against the kernel's \
         `requires`",
        family.name(),
        rt.device().name
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;

    use warpforge_codegen::ir::{ParamType, Scalar};
    use warpforge_codegen::Target;

    use super::*;
    use crate::test_defs::kernel_def;
    use crate::tune::{no_workload, Source};

    const FAMILY: &str = "warpforge_runtime::tune::tuned_kernel::tests::shared";

    fn settings(dir: &std::path::Path) -> TuneSettings {
        TuneSettings {
            policy: Some(MissPolicy::Heuristic),
            dir: Some(dir.to_path_buf()),
        }
    }

    /// One runtime per thread, as an app drives one GPU per thread: runtimes
    /// of one model (here the interpreter's) share one dispatcher, made once,
    /// and their concurrent calls resolve a key once between them.
    #[test]
    fn runtimes_of_one_model_share_a_dispatcher_across_threads() {
        let def: &'static KernelDef = Box::leak(Box::new(kernel_def(
            "shared",
            vec![(
                "y",
                ParamType::Slice {
                    elem: Scalar::F32,
                    mutable: true,
                },
            )],
            vec![Target::Wgsl],
        )));
        let dir = tempfile::tempdir().unwrap();
        let families_made = AtomicUsize::new(0);
        let args = [ArgInfo::Buffer {
            elem: Scalar::F32,
            len: 4096,
            mutable: true,
        }];
        let call = Call {
            dtypes: "&mut [f32]",
            shape: ShapeBucket::of(&[4096]).unwrap(),
            alignments: &[16],
            args: &args,
        };
        let threads = 8;
        let served: Vec<(Runtime, Arc<Dispatcher>, Vec<Selection>)> = thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let rt = Runtime::interpreter();
                        rt.set_tune_settings(settings(dir.path()));
                        let dispatcher = rt
                            .tuned_dispatcher(FAMILY, || {
                                families_made.fetch_add(1, Ordering::SeqCst);
                                Family::new(FAMILY, &[def])
                            })
                            .unwrap();
                        let selections = (0..100)
                            .map(|_| dispatcher.select(&rt, &call, no_workload).unwrap())
                            .collect();
                        (rt, dispatcher, selections)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(families_made.load(Ordering::SeqCst), 1);
        let first = &served[0].1;
        for (rt, dispatcher, selections) in &served {
            assert!(Arc::ptr_eq(dispatcher, first));
            assert!(Arc::ptr_eq(&rt.tuned_dispatchers()[0].1, first));
            assert!(selections.iter().all(|s| *s == selections[0]));
            assert_eq!(selections[0].source, Source::Heuristic);
        }
        // Every thread's 100 calls, resolved once.
        assert_eq!(first.stats().heuristic, 1);

        // Other settings are another dispatcher: another database.
        let elsewhere = tempfile::tempdir().unwrap();
        let other = Runtime::interpreter();
        other.set_tune_settings(settings(elsewhere.path()));
        let own = other
            .tuned_dispatcher(FAMILY, || Family::new(FAMILY, &[def]))
            .unwrap();
        assert!(!Arc::ptr_eq(&own, first));

        // A dispatcher goes with the last runtime that holds it.
        let weak = Arc::downgrade(first);
        drop(served);
        assert!(weak.upgrade().is_none());
    }
}
