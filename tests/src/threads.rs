//! Runtimes used from many threads (issue 22), checked on one GPU: threads
//! dispatch the tuned f32 GEMM at once, on one shared runtime and on a
//! runtime each of the same device. Every thread's C must equal, bit for bit,
//! the same call's C on the calling thread: the threads share one dispatcher
//! (runtimes of one GPU model and settings do), so they run the same
//! variant, which sums in the same order.

use std::sync::Arc;
use std::thread;

use warpforge::tune::Dispatcher;
use warpforge::{Error, Runtime};
use warpforge_kernels::tuned::{TunedGemm, GEMM_F32};

use crate::interop::record;
use crate::report::Report;
use crate::Inputs;

/// Threads per check: more than one per runtime-creation path, few enough
/// to keep the check under a second.
const THREADS: usize = 8;
/// Launches per thread.
const CALLS: usize = 4;
/// Not multiples of the tiles, so that edge blocks run too.
const DIMS: (u32, u32, u32) = (257, 190, 129);

/// A thread's C and the dispatcher that chose its variant.
type Served = (Vec<f32>, Arc<Dispatcher>);

/// C of the tuned GEMM on `a` and `b` (row-major A and C, B as the kind
/// takes it) on `rt`, and the dispatcher that chose its variant.
fn tuned_c(rt: &Runtime, a: &[f32], b: &[f32]) -> Result<Served, Error> {
    let gemm = TunedGemm::new(rt, &GEMM_F32)?;
    let (da, db) = (rt.upload(a)?, rt.upload(b)?);
    let mut dc = rt.alloc_zeroed::<f32>(DIMS.0 as usize * DIMS.1 as usize)?;
    for _ in 0..CALLS {
        gemm.run(rt, &da, &db, &mut dc, DIMS, 1.0, 0.0)?;
    }
    Ok((
        rt.download(&dc)?,
        rt.tuned_dispatcher(GEMM_F32.name, || GEMM_F32.family())?,
    ))
}

/// The first thread whose C or dispatcher differs from the calling
/// thread's, or a line of what agreed.
fn agree(want: &Served, got: Vec<Result<Served, Error>>) -> Result<Result<String, String>, Error> {
    for (index, outcome) in got.into_iter().enumerate() {
        let (c, dispatcher) = outcome?;
        if let Some(i) = (0..c.len()).find(|&i| c[i].to_bits() != want.0[i].to_bits()) {
            return Ok(Err(format!(
                "thread {index}: element {i} is {}, the calling thread's {}",
                c[i], want.0[i]
            )));
        }
        if !Arc::ptr_eq(&dispatcher, &want.1) {
            return Ok(Err(format!("thread {index} has a dispatcher of its own")));
        }
    }
    Ok(Ok(format!(
        "{THREADS} threads x {CALLS} calls at {}x{}x{}: every C bit for bit the calling thread's, one dispatcher",
        DIMS.0, DIMS.1, DIMS.2
    )))
}

/// The tuned GEMM from [`THREADS`] threads on `rt` itself, then on a new
/// runtime of `rt`'s device per thread.
pub fn check_concurrent_dispatch(rt: &Runtime, inputs: &mut Inputs, report: &mut Report) {
    let (m, n, k) = (DIMS.0 as usize, DIMS.1 as usize, DIMS.2 as usize);
    let (a, b) = (inputs.f32s(m * k), inputs.f32s(k * n));
    let want = match tuned_c(rt, &a, &b) {
        Ok(want) => want,
        Err(e) => return report.error("threads: the tuned f32 GEMM on the calling thread", e),
    };
    let shared = from_threads(|| tuned_c(rt, &a, &b));
    record(
        report,
        "threads: the tuned f32 GEMM from threads on one runtime",
        agree(&want, shared).map_err(Into::into),
    );
    let ordinal = rt.device().ordinal;
    let own = from_threads(|| tuned_c(&Runtime::cuda(ordinal)?, &a, &b));
    record(
        report,
        &format!("threads: the tuned f32 GEMM from threads, a runtime each on device {ordinal}"),
        agree(&want, own).map_err(Into::into),
    );
}

/// What `serve` returns on each of [`THREADS`] threads at once.
fn from_threads(serve: impl Fn() -> Result<Served, Error> + Sync) -> Vec<Result<Served, Error>> {
    thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS).map(|_| scope.spawn(&serve)).collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a GEMM thread panicked"))
            .collect()
    })
}
