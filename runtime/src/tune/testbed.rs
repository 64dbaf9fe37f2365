//! [`GpuTestbed`]: the tuner's [`Testbed`] on a runtime (CUDA or wgpu), over
//! the tuning inputs a [`Workload`] provides.

use super::family::Candidate;
use super::prune::VariantResources;
use super::tuner::Testbed;
use crate::{Error, Runtime};

/// The tuning inputs of one call and how to run a candidate on them; written
/// once per family (the stock GEMMs' is `warpforge_kernels::tuned::GemmWorkload`).
///
/// Inputs must be random (never all zeros: zeros make some units faster),
/// and either larger than the L2 cache or spread over several input sets
/// that [`Workload::launch`] rotates through, so that no timed launch finds
/// its operands in L2 from the launch before.
pub trait Workload {
    /// How many input sets there are (at least 1).
    fn input_sets(&self) -> usize;
    /// Enqueues one launch of `candidate` on input set `set`.
    fn launch(&mut self, rt: &Runtime, candidate: &Candidate, set: usize) -> Result<(), Error>;
    /// Runs `candidate` once and checks its output against a reference:
    /// `Ok(Err(why))` when it ran and was wrong. Outputs should be poisoned
    /// first (NaN), so that an element left unwritten fails.
    fn verify(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<Result<(), String>, Error>;
    /// Called once when tuning is over, before the call runs its winner:
    /// e.g. to write back outputs the candidates overwrote. Does nothing by
    /// default.
    fn finish(&mut self, rt: &Runtime) -> Result<(), Error> {
        let _ = rt;
        Ok(())
    }
}

/// Candidates built and loaded by the runtime (sharing its variant cache, so
/// that a tuned variant is not built again to be launched), verified and
/// run by a [`Workload`], timed by [`Runtime::time_ms`]: CUDA events on the
/// runtime's stream, or on wgpu timestamp queries or the host clock
/// ([`Runtime::timing_method`]).
pub struct GpuTestbed<'a, W: Workload + ?Sized> {
    rt: &'a Runtime,
    workload: &'a mut W,
    next_set: usize,
}

impl<'a, W: Workload + ?Sized> GpuTestbed<'a, W> {
    /// A testbed on `rt`'s device running `workload`'s inputs and checks.
    pub fn new(rt: &'a Runtime, workload: &'a mut W) -> GpuTestbed<'a, W> {
        GpuTestbed {
            rt,
            workload,
            next_set: 0,
        }
    }
}

impl<W: Workload + ?Sized> Testbed for GpuTestbed<'_, W> {
    fn resources(&mut self, candidate: &Candidate) -> Result<VariantResources, Error> {
        self.rt.variant_resources(candidate.def, &candidate.consts)
    }

    fn verify(&mut self, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        self.workload.verify(self.rt, candidate)
    }

    fn time_ms(&mut self, candidate: &Candidate, launches: u32) -> Result<f64, Error> {
        let sets = self.workload.input_sets().max(1);
        let (workload, next_set) = (&mut *self.workload, &mut self.next_set);
        let ms = self.rt.time_ms(|rt| {
            for _ in 0..launches {
                workload.launch(rt, candidate, *next_set)?;
                *next_set = (*next_set + 1) % sets;
            }
            Ok(())
        })?;
        Ok(f64::from(ms))
    }
}
