//! Tuning on wgpu, on Mesa's lavapipe in the CPU tier: `Runtime::time_ms`
//! and `Runtime::time_parts_ms` by both wgpu methods (timestamp queries, and
//! the host clock on a device without them), `Runtime::variant_resources`
//! and its pruning, `tune` over a small real family verified against a CPU
//! reference, and a `TuneNow` dispatcher recording its winner for a later
//! one. A missing adapter fails with what to install.

use warpforge::prelude::*;
use warpforge::tune::{
    tune, Call, Candidate, Dispatcher, Family, GpuModel, GpuTestbed, MissPolicy, PruneRule,
    ShapeBucket, Source, Status, TuneOptions, Workload,
};
use warpforge::{wgpu, ArgInfo, DeviceScalar, KernelArg, TimingMethod};
use warpforge_kernels::simple::saxpy;

/// The adapter `Runtime::wgpu` picks, chosen the same way.
fn adapter() -> wgpu::Adapter {
    warpforge_tests::quiet_mesa();
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))
    .unwrap_or_else(|e| {
        panic!(
            "this test needs a wgpu adapter; without a GPU install Mesa's lavapipe: apt-get \
             install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    })
}

const SAXPY_N: usize = 1 << 20;

/// The fastest of three timings of `launches` saxpy launches over 2^20 elements.
fn saxpy_ms(rt: &Runtime, launches: u32) -> f32 {
    let x = rt.upload(&vec![0.5f32; SAXPY_N]).unwrap();
    let mut y = rt.upload(&vec![1.0f32; SAXPY_N]).unwrap();
    let mut best = f32::INFINITY;
    for _ in 0..3 {
        let ms = rt
            .time_ms(|rt| {
                for _ in 0..launches {
                    saxpy::launch(rt, Grid::linear(SAXPY_N, 256), 2.0, &x, &mut y)?;
                }
                Ok(())
            })
            .unwrap();
        assert!(ms.is_finite() && ms > 0.0, "{launches} launch(es): {ms} ms");
        best = best.min(ms);
    }
    // The timed launches ran: 3 rounds of `launches` times y += 2 * 0.5.
    let expected = 1.0 + 3.0 * launches as f32;
    assert!(
        rt.download(&y).unwrap().iter().all(|&v| v == expected),
        "y should be {expected} everywhere"
    );
    best
}

/// 50 launches take clearly longer than one (ideally 50 times).
fn check_time_grows_with_the_work(rt: &Runtime) {
    let (one, fifty) = (saxpy_ms(rt, 1), saxpy_ms(rt, 50));
    eprintln!(
        "{} on {}: 1 saxpy launch {one:.3} ms, 50 launches {fifty:.3} ms",
        rt.timing_method(),
        rt.device().name
    );
    assert!(
        fifty > 10.0 * one,
        "50 launches took {fifty} ms and one {one} ms ({})",
        rt.timing_method()
    );
}

/// `time_parts_ms` times each piece apart: 1, 40 and 1 saxpy launches, the
/// middle piece clearly the longest, and every launch ran.
fn check_parts_are_timed_apart(rt: &Runtime) {
    let x = rt.upload(&vec![0.5f32; SAXPY_N]).unwrap();
    let mut y = rt.upload(&vec![1.0f32; SAXPY_N]).unwrap();
    let launches = [1, 40, 1];
    let parts = rt
        .time_parts_ms(launches.len(), |rt, piece| {
            for _ in 0..launches[piece] {
                saxpy::launch(rt, Grid::linear(SAXPY_N, 256), 2.0, &x, &mut y)?;
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "{} on {}: pieces {parts:?} ms",
        rt.timing_method(),
        rt.device().name
    );
    assert_eq!(parts.len(), 3);
    assert!(
        parts.iter().all(|ms| ms.is_finite() && *ms > 0.0),
        "{parts:?}"
    );
    assert!(parts[1] > 8.0 * parts[0].max(parts[2]), "{parts:?}");
    let expected = 1.0 + 42.0;
    assert!(
        rt.download(&y).unwrap().iter().all(|&v| v == expected),
        "y should be {expected} everywhere"
    );
}

#[test]
fn time_ms_uses_timestamps_where_the_adapter_has_them_and_grows_with_the_work() {
    let rt = warpforge_tests::lavapipe("the wgpu tuning tests");
    let expected = if adapter()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        TimingMethod::GpuTimestamps
    } else {
        TimingMethod::HostClock
    };
    assert_eq!(rt.timing_method(), expected);
    check_time_grows_with_the_work(&rt);
    check_parts_are_timed_apart(&rt);
}

#[test]
fn a_device_without_timestamp_queries_times_with_the_host_clock() {
    let adapter = adapter();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("no timestamps"),
        required_features: wgpu::Features::empty(),
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .unwrap();
    let rt = Runtime::wgpu_on_device(&device, &queue);
    assert_eq!(rt.timing_method(), TimingMethod::HostClock);
    check_time_grows_with_the_work(&rt);
    check_parts_are_timed_apart(&rt);
}

/// `y = a * x + y` staged through workgroup memory, `ITEMS` elements per
/// thread. `WRONG` variants add 1 to every output (verification must catch
/// them); `ITEMS = 2048` needs 512 KiB of workgroup memory, more than any
/// adapter allows (pruning must catch it).
#[kernel(
    arch(wgsl),
    block(64),
    tune(ITEMS = [1, 4, 2048], WRONG = [false, true]),
    requires(x.len() >= n, y.len() >= n)
)]
pub fn staged_axpy<const ITEMS: u32, const WRONG: bool>(a: f32, x: &[f32], y: &mut [f32], n: u32) {
    let mut stage: [f32; 64 * ITEMS] = shared();
    let base = block_idx().x * 64 * ITEMS;
    for j in 0..ITEMS {
        let local = j * 64 + thread_idx().x;
        if base + local < n {
            stage[local] = a * x[base + local];
        }
    }
    sync_threads();
    for j in 0..ITEMS {
        let local = j * 64 + thread_idx().x;
        if base + local < n {
            let mut out = stage[local] + y[base + local];
            if WRONG {
                out += 1.0;
            }
            y[base + local] = out;
        }
    }
}

fn staged_family() -> Family {
    Family::new("staged_axpy", &[staged_axpy::def()])
        .unwrap()
        .prefer(staged_axpy::def(), &[1, 0])
        .unwrap()
}

const STAGED_N: u32 = 100_003;
const ALPHA: f32 = 0.75;

/// The call of `staged_axpy` on `STAGED_N` elements.
fn staged_args() -> [ArgInfo; 4] {
    let buffer = |mutable| ArgInfo::Buffer {
        elem: f32::SCALAR,
        len: u64::from(STAGED_N),
        mutable,
    };
    [
        KernelArg::scalar(ALPHA).info(),
        buffer(false),
        buffer(true),
        KernelArg::scalar(STAGED_N).info(),
    ]
}

fn staged_call(args: &[ArgInfo]) -> Call<'_> {
    Call {
        dtypes: "f32",
        shape: ShapeBucket::gemm(STAGED_N.into(), 1, 1),
        alignments: &[],
        args,
    }
}

/// Random inputs of `staged_axpy`; `verify` compares every output with
/// `a * x + y` computed on the CPU (exact: one f32 product, one f32 sum).
struct StagedWorkload {
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    x_host: Vec<f32>,
    y_host: Vec<f32>,
}

impl StagedWorkload {
    fn new(rt: &Runtime) -> StagedWorkload {
        let mut inputs = warpforge_tests::Inputs::new(17);
        let (x_host, y_host) = (
            inputs.f32s(STAGED_N as usize),
            inputs.f32s(STAGED_N as usize),
        );
        StagedWorkload {
            x: rt.upload(&x_host).unwrap(),
            y: rt.upload(&y_host).unwrap(),
            x_host,
            y_host,
        }
    }
}

impl Workload for StagedWorkload {
    fn input_sets(&self) -> usize {
        1
    }

    fn launch(&mut self, rt: &Runtime, candidate: &Candidate, _set: usize) -> Result<(), Error> {
        let per_block = 64 * candidate.consts[0] as u32;
        let mut args = [
            KernelArg::scalar(ALPHA),
            KernelArg::buffer(&self.x),
            KernelArg::buffer_mut(&mut self.y),
            KernelArg::scalar(STAGED_N),
        ];
        let grid = Grid::blocks([STAGED_N.div_ceil(per_block), 1, 1]);
        rt.launch(candidate.def, &candidate.consts, grid, &mut args)
    }

    fn verify(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        rt.copy_from_host(&mut self.y, &self.y_host)?;
        self.launch(rt, candidate, 0)?;
        let out = rt.download(&self.y)?;
        let wrong = (0..out.len()).find(|&i| out[i] != ALPHA * self.x_host[i] + self.y_host[i]);
        Ok(match wrong {
            None => Ok(()),
            Some(i) => Err(format!(
                "output {i} is {}, and the CPU reference {}",
                out[i],
                ALPHA * self.x_host[i] + self.y_host[i]
            )),
        })
    }
}

#[test]
fn variant_resources_report_threads_and_workgroup_memory() {
    let rt = warpforge_tests::lavapipe("the wgpu tuning tests");
    for items in [1u32, 4, 2048] {
        let resources = rt
            .variant_resources(staged_axpy::def(), &[items.into(), 0])
            .unwrap();
        assert_eq!(resources.threads_per_block, Some(64));
        assert_eq!(resources.shared_bytes, 64 * items * 4, "ITEMS = {items}");
        assert_eq!(resources.loaded, None, "wgpu reports no registers");
    }
    // saxpy declares no block: no threads, and no workgroup memory.
    let resources = rt.variant_resources(saxpy::def(), &[]).unwrap();
    assert_eq!(
        (resources.threads_per_block, resources.shared_bytes),
        (None, 0)
    );
}

#[test]
fn tune_a_family_on_wgpu() {
    let rt = warpforge_tests::lavapipe("the wgpu tuning tests");
    assert!(
        rt.device().shared_mem_per_block_optin < 64 * 2048 * 4,
        "the test needs ITEMS = 2048 to be over {}'s workgroup memory",
        rt.device().name
    );
    let family = staged_family();
    let args = staged_args();
    let call = staged_call(&args);
    let mut workload = StagedWorkload::new(&rt);
    let report = tune(
        &family,
        &call,
        rt.device(),
        &mut GpuTestbed::new(&rt, &mut workload),
        &TuneOptions::default(),
    )
    .unwrap();
    for (candidate, status) in family.candidates().iter().zip(&report.statuses) {
        eprintln!("{}: {status:?}", candidate.name());
        let (items, wrong) = (candidate.consts[0], candidate.consts[1] == 1);
        match status {
            Status::Pruned { rule, reason } => {
                assert_eq!((items, *rule), (2048, PruneRule::SharedMemory), "{reason}");
                assert!(reason.contains("524288 bytes"), "{reason}");
            }
            Status::Rejected { reason } => {
                assert!(wrong && items != 2048, "{}: {reason}", candidate.name());
                assert!(reason.contains("CPU reference"), "{reason}");
            }
            Status::Timed { median_ms } | Status::Dropped { best_ms: median_ms } => {
                assert!(!wrong && items != 2048, "{}", candidate.name());
                assert!(median_ms.is_finite() && *median_ms > 0.0, "{median_ms}");
            }
        }
    }
    let winner = &family.candidates()[report.winner];
    assert_eq!(winner.consts[1], 0, "the winner {} is wrong", winner.name());
    let median = report.median_ms(report.winner).unwrap();
    assert!(median.is_finite() && median > 0.0, "{median}");
    // The winner verifies again, as a dispatched launch would run.
    assert_eq!(workload.verify(&rt, winner).unwrap(), Ok(()));
}

#[test]
fn tune_now_records_the_winner_and_a_later_dispatcher_finds_it() {
    let rt = warpforge_tests::lavapipe("the wgpu tuning tests");
    let dir = tempfile::tempdir().unwrap();
    let args = staged_args();
    let call = staged_call(&args);
    let tuning =
        Dispatcher::new(&rt, staged_family(), MissPolicy::TuneNow, Some(dir.path())).unwrap();
    let tuned = tuning
        .select(&rt, &call, || {
            Ok(Box::new(StagedWorkload::new(&rt)) as Box<dyn Workload>)
        })
        .unwrap();
    assert_eq!(tuned.source, Source::Tuned);
    assert_eq!(tuning.candidate(tuned).consts[1], 0, "a verified winner");
    assert_eq!(tuning.stats().tuned, 1);
    assert!(tuning.warnings().is_empty(), "{:?}", tuning.warnings());
    let record = tuning.stored(&call).expect("the winner is stored");
    assert!(record.median_ms.is_finite() && record.median_ms > 0.0);

    // The database file is the adapter's, and no CUDA model's.
    let gpu = GpuModel::of(rt.device());
    assert!(gpu.name.starts_with("wgpu "), "{}", gpu.name);
    let file = dir.path().join(format!("{}.json", gpu.file_stem()));
    assert!(file.is_file(), "{} is missing", file.display());
    assert!(
        gpu.file_stem().contains("_sm00_0sms"),
        "{}",
        gpu.file_stem()
    );

    let later =
        Dispatcher::new(&rt, staged_family(), MissPolicy::TuneNow, Some(dir.path())).unwrap();
    let found = later
        .select(&rt, &call, warpforge::tune::no_workload)
        .unwrap();
    assert_eq!(found.source, Source::Database);
    assert_eq!(
        later.candidate(found).name(),
        tuning.candidate(tuned).name()
    );
    assert_eq!((later.stats().database, later.stats().tuned), (1, 0));
}
