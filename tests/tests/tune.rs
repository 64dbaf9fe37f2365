//! The tuner's logic on simulated timings (no GPU): pruning by arch, call,
//! shared memory, registers and occupancy; verification before winning;
//! early drop; the winner against an exhaustive search under noise;
//! re-validating another driver's winner; key building; and the stock GEMM
//! families' contract that a key's alignments decide which variants are
//! legal.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warpforge::prelude::*;
use warpforge::tune::{
    revalidate, sweep, tune, Candidate, Family, KeyBase, LoadedResources, PruneRule, ShapeBucket,
    Status, Testbed, TuneOptions, VariantResources, REVALIDATION_ROUNDS,
};
use warpforge::{check_call, DeviceInfo, MatrixLayout};
use warpforge_kernels::gemm_problem::{Activation, GemmBatch, GemmProblem};
use warpforge_kernels::tuned::{
    GemmCall, GemmElement, GemmKind, GemmOutput, OperandA, GEMM_BF16, GEMM_F16, GEMM_F32, GEMM_S8,
    GEMM_TF32, SPARSE_GEMM_BF16, SPARSE_GEMM_F16,
};
use warpforge_tests::h200_device_info;
use warpforge_tests::tuning::InPlaceCall;

/// Doubles the first `n` elements; `T` and `ALIGNED` only make variants.
/// The `ALIGNED` variants require n to be a multiple of 4.
#[kernel(
    arch(sm_70, sm_80, wgsl),
    block(64),
    tune(T = [1, 2, 4, 8], ALIGNED = [true, false]),
    requires(x.len() >= n, !ALIGNED || n % 4 == 0)
)]
pub fn scale<const T: u32, const ALIGNED: bool>(x: &mut [f32], n: u32) {
    let i = block_idx().x * 64 + thread_idx().x;
    if i < n {
        x[i] = x[i] * 2.0;
    }
}

/// The same for sm_90 only.
#[kernel(
    arch(sm_90),
    block(64),
    tune(T = [1, 2]),
    requires(x.len() >= n)
)]
pub fn scale_sm90<const T: u32>(x: &mut [f32], n: u32) {
    let i = block_idx().x * 64 + thread_idx().x;
    if i < n {
        x[i] = x[i] * 2.0;
    }
}

fn a100() -> DeviceInfo {
    DeviceInfo {
        name: "NVIDIA A100-SXM4-80GB".into(),
        compute_capability: (8, 0),
        sm_count: 108,
        ..h200_device_info()
    }
}

fn v100() -> DeviceInfo {
    DeviceInfo {
        name: "Tesla V100-SXM2-32GB".into(),
        compute_capability: (7, 0),
        sm_count: 80,
        ..h200_device_info()
    }
}

fn scale_family() -> Family {
    Family::new("scale", &[scale::def(), scale_sm90::def()])
        .unwrap()
        .prefer(scale::def(), &[4, 1])
        .unwrap()
}

/// A `scale` call on `n` elements: `x` aligned to 4 * 2^(trailing zeros)
/// bytes, capped at 16.
fn scale_call(n: u32) -> InPlaceCall {
    InPlaceCall::new(n, 1 << (n.trailing_zeros() + 2).min(4))
}

/// Simulated timings: each candidate's true time per launch, distorted by
/// multiplicative noise; what the tuner asked for is recorded.
struct Simulated {
    true_ms: BTreeMap<String, f64>,
    noise: f64,
    rng: StdRng,
    wrong: BTreeSet<String>,
    refused: BTreeSet<String>,
    faulting: BTreeSet<String>,
    resources: BTreeMap<String, VariantResources>,
    verified: Vec<String>,
    timed: BTreeMap<String, Vec<u32>>,
    /// The candidate of every `time_ms` call, in order.
    timing_order: Vec<String>,
}

impl Simulated {
    fn new(true_ms: impl IntoIterator<Item = (String, f64)>, noise: f64, seed: u64) -> Simulated {
        Simulated {
            true_ms: true_ms.into_iter().collect(),
            noise,
            rng: StdRng::seed_from_u64(seed),
            wrong: BTreeSet::new(),
            refused: BTreeSet::new(),
            faulting: BTreeSet::new(),
            resources: BTreeMap::new(),
            verified: Vec::new(),
            timed: BTreeMap::new(),
            timing_order: Vec::new(),
        }
    }

    fn launches_timed(&self, name: &str) -> usize {
        self.timed.get(name).map_or(0, Vec::len)
    }
}

/// What a variant that fits comfortably reports: 2 blocks of 64 threads per SM.
fn fitting() -> VariantResources {
    VariantResources {
        threads_per_block: Some(64),
        shared_bytes: 0,
        loaded: Some(LoadedResources {
            registers_per_thread: 32,
            local_bytes_per_thread: 0,
            max_threads_per_block: 1024,
            blocks_per_sm: Some(16),
            resident_clusters: None,
        }),
    }
}

impl Testbed for Simulated {
    fn resources(&mut self, candidate: &Candidate) -> Result<VariantResources, Error> {
        Ok(*self.resources.get(candidate.name()).unwrap_or(&fitting()))
    }

    fn verify(&mut self, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        self.verified.push(candidate.name().to_string());
        if self.refused.contains(candidate.name()) {
            return Err(Error::InvalidLaunch {
                kernel: candidate.name().to_string(),
                message: "refused for the test".into(),
            });
        }
        Ok(if self.wrong.contains(candidate.name()) {
            Err("off by one".to_string())
        } else {
            Ok(())
        })
    }

    fn time_ms(&mut self, candidate: &Candidate, launches: u32) -> Result<f64, Error> {
        if self.faulting.contains(candidate.name()) {
            return Err(Error::Driver {
                code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                message: "simulated fault".into(),
            });
        }
        self.timed
            .entry(candidate.name().to_string())
            .or_default()
            .push(launches);
        self.timing_order.push(candidate.name().to_string());
        let ms = self.true_ms[candidate.name()];
        let factor = 1.0 + self.rng.random_range(-self.noise..=self.noise);
        Ok(ms * factor * f64::from(launches))
    }
}

/// True times: the variant with the given name is fastest (0.5 ms); the
/// others take 1 ms + 0.1 ms per position.
fn times(family: &Family, fastest: &str) -> Vec<(String, f64)> {
    family
        .candidates()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let ms = if c.name() == fastest {
                0.5
            } else {
                1.0 + 0.1 * i as f64
            };
            (c.name().to_string(), ms)
        })
        .collect()
}

fn name(family: &Family, index: usize) -> &str {
    family.candidates()[index].name()
}

#[test]
fn pruning_rules_and_order_of_work() {
    let family = scale_family();
    let n = 1001; // not a multiple of 4: the ALIGNED variants cannot take it
    let scale = scale_call(n);
    let call = scale.call();
    let mut sim = Simulated::new(times(&family, "scale[T=8,ALIGNED=0]"), 0.0, 1);
    let no_room = VariantResources {
        shared_bytes: 300 * 1024,
        loaded: None,
        ..fitting()
    };
    let no_occupancy = VariantResources {
        loaded: Some(LoadedResources {
            blocks_per_sm: Some(1),
            resident_clusters: None,
            ..fitting().loaded.unwrap()
        }),
        ..fitting()
    };
    let too_many_registers = VariantResources {
        threads_per_block: Some(1024),
        loaded: Some(LoadedResources {
            registers_per_thread: 255,
            max_threads_per_block: 256,
            ..fitting().loaded.unwrap()
        }),
        ..fitting()
    };
    sim.resources.insert("scale[T=1,ALIGNED=0]".into(), no_room);
    sim.resources
        .insert("scale[T=2,ALIGNED=0]".into(), no_occupancy);
    sim.resources
        .insert("scale[T=4,ALIGNED=0]".into(), too_many_registers);
    let report = tune(&family, &call, &a100(), &mut sim, &TuneOptions::default()).unwrap();

    let rule_of = |variant: &str| {
        let i = family
            .candidates()
            .iter()
            .position(|c| c.name() == variant)
            .unwrap();
        match &report.statuses[i] {
            Status::Pruned { rule, .. } => Some(*rule),
            _ => None,
        }
    };
    // sm_90 only, on an sm_80 device.
    assert_eq!(rule_of("scale_sm90[T=1]"), Some(PruneRule::Arch));
    for t in [1, 2, 4, 8] {
        assert_eq!(
            rule_of(&format!("scale[T={t},ALIGNED=1]")),
            Some(PruneRule::Call)
        );
    }
    assert_eq!(
        rule_of("scale[T=1,ALIGNED=0]"),
        Some(PruneRule::SharedMemory)
    );
    assert_eq!(rule_of("scale[T=2,ALIGNED=0]"), Some(PruneRule::Occupancy));
    assert_eq!(rule_of("scale[T=4,ALIGNED=0]"), Some(PruneRule::Registers));
    // Only the survivor was verified and timed; the preferred scale[T=4,
    // ALIGNED=1] cannot take the call, so the heuristic falls back to the
    // first variant that can, which the pruning by resources then removes.
    assert_eq!(sim.verified, ["scale[T=8,ALIGNED=0]"]);
    assert_eq!(name(&family, report.winner), "scale[T=8,ALIGNED=0]");
    assert_eq!(
        report.heuristic.map(|i| name(&family, i)),
        Some("scale[T=1,ALIGNED=0]")
    );
    assert_eq!(report.runner_up, None);
    let pruned_reason = report
        .statuses
        .iter()
        .find_map(|s| match s {
            Status::Pruned {
                rule: PruneRule::Call,
                reason,
            } => Some(reason.clone()),
            _ => None,
        })
        .unwrap();
    assert!(pruned_reason.contains("n % 4 == 0"), "{pruned_reason}");
}

#[test]
fn the_heuristic_goes_first_and_slow_candidates_are_dropped_early() {
    let family = scale_family();
    let n = 4096;
    let scale = scale_call(n);
    let call = scale.call();
    let fastest = "scale[T=2,ALIGNED=0]";
    // The heuristic scale[T=4,ALIGNED=1] takes 1.0 ms; a close second
    // (within the drop ratio) must be fully timed, the rest (1.5x and more)
    // dropped after the early samples.
    let true_ms: Vec<(String, f64)> = times(&family, fastest)
        .into_iter()
        .map(|(name, ms)| {
            let ms = match name.as_str() {
                "scale[T=4,ALIGNED=1]" => 1.0,
                "scale[T=8,ALIGNED=1]" => 0.55,
                _ if name == fastest => 0.5,
                _ => 1.5 + ms,
            };
            (name, ms)
        })
        .collect();
    let mut sim = Simulated::new(true_ms, 0.0, 2);
    let options = TuneOptions::default();
    let report = tune(&family, &call, &h200_device_info(), &mut sim, &options).unwrap();

    assert_eq!(sim.verified[0], "scale[T=4,ALIGNED=1]");
    assert_eq!(name(&family, report.winner), fastest);
    assert_eq!(
        report.runner_up.map(|i| name(&family, i)),
        Some("scale[T=8,ALIGNED=1]")
    );
    let full = 2 + options.samples as usize;
    let early = 2 + options.early_samples as usize;
    for (i, (candidate, status)) in family.candidates().iter().zip(&report.statuses).enumerate() {
        let launches = sim.launches_timed(candidate.name());
        match status {
            Status::Timed { median_ms } => {
                assert_eq!(launches, full, "{}", candidate.name());
                assert!((median_ms - sim.true_ms[candidate.name()]).abs() < 1e-9);
            }
            Status::Dropped { best_ms } => {
                assert_eq!(launches, early, "{}", candidate.name());
                assert!(*best_ms > options.drop_ratio * 0.5, "{}", candidate.name());
            }
            Status::Pruned { rule, .. } => {
                assert_eq!(*rule, PruneRule::Arch, "{}", name(&family, i));
                assert_eq!(launches, 0);
            }
            Status::Rejected { reason } => panic!("{}: {reason}", candidate.name()),
        }
    }
    // Samples of launches lasting at least min_sample_ms: 0.5 ms -> 4 launches.
    assert_eq!(sim.timed[fastest], [1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]);
    let dropped = report
        .statuses
        .iter()
        .filter(|s| matches!(s, Status::Dropped { .. }))
        .count();
    // Timed: the heuristic, the fastest and the close second; the other 7 dropped.
    assert_eq!(dropped, 7);

    let record = report.record(&family);
    assert_eq!(record.variant, fastest);
    assert_eq!(record.consts, [2, 0]);
    assert_eq!(record.median_ms, 0.5);
    assert!((record.runner_up_ms.unwrap() - 0.55).abs() < 1e-9);
    assert_eq!(record.heuristic_ms, Some(1.0));
}

#[test]
fn wrong_or_refused_variants_never_win_and_faults_end_the_tuning() {
    let family = scale_family();
    let n = 4096;
    let scale = scale_call(n);
    let call = scale.call();
    let wrong = "scale[T=1,ALIGNED=1]";
    let refused = "scale[T=2,ALIGNED=1]";
    let mut true_ms = times(&family, wrong);
    for (name, ms) in &mut true_ms {
        if name == refused {
            *ms = 0.1;
        }
    }
    let mut sim = Simulated::new(true_ms.clone(), 0.01, 3);
    sim.wrong.insert(wrong.into());
    sim.refused.insert(refused.into());
    let report = tune(
        &family,
        &call,
        &h200_device_info(),
        &mut sim,
        &TuneOptions::default(),
    )
    .unwrap();
    let status_of = |variant: &str| {
        let i = family
            .candidates()
            .iter()
            .position(|c| c.name() == variant)
            .unwrap();
        report.statuses[i].clone()
    };
    assert!(
        matches!(status_of(wrong), Status::Rejected { reason } if reason.contains("wrong result: off by one"))
    );
    assert!(
        matches!(status_of(refused), Status::Rejected { reason } if reason.contains("refused for the test"))
    );
    assert_eq!(sim.launches_timed(wrong), 0);
    assert_eq!(sim.launches_timed(refused), 0);
    assert_ne!(name(&family, report.winner), wrong);

    let mut faulting = Simulated::new(true_ms, 0.0, 4);
    faulting.faulting.insert("scale[T=8,ALIGNED=0]".into());
    let err = tune(
        &family,
        &call,
        &h200_device_info(),
        &mut faulting,
        &TuneOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("simulated fault"), "{err}");

    // Nothing that can run: the error says why, per candidate.
    let mut none = Simulated::new(times(&family, wrong), 0.0, 5);
    none.wrong = family
        .candidates()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let err = tune(
        &family,
        &call,
        &h200_device_info(),
        &mut none,
        &TuneOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("no variant of `scale` could be timed") && err.contains("wrong result"),
        "{err}"
    );
}

#[test]
fn with_noise_the_winner_is_within_three_percent_of_an_exhaustive_search() {
    let family = scale_family();
    let n = 4096;
    let scale = scale_call(n);
    let call = scale.call();
    let options = TuneOptions::default();
    let mut searched = 0;
    for seed in 0..200u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let true_ms: Vec<(String, f64)> = family
            .candidates()
            .iter()
            .map(|c| (c.name().to_string(), rng.random_range(0.2..2.0)))
            .collect();
        // +-3% per sample: more than CUDA-event medians of a GEMM vary.
        let mut sim = Simulated::new(true_ms, 0.03, seed);
        let report = tune(&family, &call, &h200_device_info(), &mut sim, &options).unwrap();
        let legal: Vec<usize> = (0..family.candidates().len())
            .filter(|&i| !matches!(report.statuses[i], Status::Pruned { .. }))
            .collect();
        let swept = sweep(&family, &legal, &mut sim, &options).unwrap();
        assert!(swept.iter().all(|(_, s)| matches!(s, Status::Timed { .. })));
        let best = legal
            .iter()
            .map(|&i| sim.true_ms[name(&family, i)])
            .fold(f64::INFINITY, f64::min);
        let winner = sim.true_ms[name(&family, report.winner)];
        assert!(
            winner <= 1.03 * best,
            "seed {seed}: winner {winner} ms, best {best} ms"
        );
        searched += 1;
    }
    assert_eq!(searched, 200);
}

#[test]
fn inconsistent_options_are_refused() {
    let family = scale_family();
    let scale = scale_call(64);
    let call = scale.call();
    let options = TuneOptions {
        early_samples: 5,
        samples: 3,
        ..TuneOptions::default()
    };
    let mut sim = Simulated::new(times(&family, ""), 0.0, 6);
    let err = tune(&family, &call, &h200_device_info(), &mut sim, &options)
        .unwrap_err()
        .to_string();
    assert!(err.contains("early_samples <= samples"), "{err}");
    assert!(sim.verified.is_empty());
}

/// The index of the candidate named `variant`.
fn index_of(family: &Family, variant: &str) -> usize {
    family
        .candidates()
        .iter()
        .position(|c| c.name() == variant)
        .unwrap()
}

/// The heuristic default of `scale` for n = 4096 on an H200, and another variant.
const SCALE_HEURISTIC: &str = "scale[T=4,ALIGNED=1]";
const SCALE_FOREIGN: &str = "scale[T=2,ALIGNED=0]";

/// Re-validates `SCALE_FOREIGN` for n = 4096 on an H200 with the given true
/// times and wrong variants.
fn revalidate_scale(
    foreign_ms: f64,
    heuristic_ms: f64,
    wrong: &[&str],
) -> (
    Result<Option<warpforge::tune::Revalidation>, Error>,
    Simulated,
) {
    let family = scale_family();
    let n = 4096;
    let scale = scale_call(n);
    let call = scale.call();
    let true_ms = times(&family, "").into_iter().map(|(name, ms)| {
        let ms = match name.as_str() {
            SCALE_FOREIGN => foreign_ms,
            SCALE_HEURISTIC => heuristic_ms,
            _ => ms,
        };
        (name, ms)
    });
    let mut sim = Simulated::new(true_ms, 0.01, 7);
    sim.wrong = wrong.iter().map(|w| w.to_string()).collect();
    let foreign = index_of(&family, SCALE_FOREIGN);
    let outcome = revalidate(&family, &call, &h200_device_info(), foreign, &mut sim);
    (outcome, sim)
}

#[test]
fn another_drivers_faster_winner_is_kept() {
    let family = scale_family();
    let (outcome, sim) = revalidate_scale(0.5, 1.0, &[]);
    let outcome = outcome.unwrap().unwrap();
    assert_eq!(outcome.winner, index_of(&family, SCALE_FOREIGN));
    assert!(outcome.kept);
    assert_eq!(outcome.record.variant, SCALE_FOREIGN);
    assert_eq!(outcome.record.consts, [2, 0]);
    assert!((outcome.record.median_ms - 0.5).abs() < 0.5 * 0.011);
    assert!((outcome.record.runner_up_ms.unwrap() - 1.0).abs() < 0.011);
    assert_eq!(outcome.record.heuristic_ms, outcome.record.runner_up_ms);
    assert_eq!(sim.verified, [SCALE_FOREIGN, SCALE_HEURISTIC]);
    // Per round, each in turn: an estimate, a warm-up and one sample.
    let expected: Vec<&str> = (0..REVALIDATION_ROUNDS)
        .flat_map(|_| [SCALE_FOREIGN; 3].into_iter().chain([SCALE_HEURISTIC; 3]))
        .collect();
    assert_eq!(sim.timing_order, expected);
}

#[test]
fn another_drivers_slower_winner_gives_way_to_the_heuristic() {
    let family = scale_family();
    let (outcome, _) = revalidate_scale(2.0, 1.0, &[]);
    let outcome = outcome.unwrap().unwrap();
    assert_eq!(outcome.winner, index_of(&family, SCALE_HEURISTIC));
    assert!(!outcome.kept);
    assert_eq!(outcome.record.variant, SCALE_HEURISTIC);
    assert!((outcome.record.median_ms - 1.0).abs() < 0.011);
    assert!((outcome.record.runner_up_ms.unwrap() - 2.0).abs() < 0.021);
    assert_eq!(outcome.record.heuristic_ms, Some(outcome.record.median_ms));
}

#[test]
fn another_drivers_winner_that_fails_verification_is_never_used() {
    let family = scale_family();
    // Faster, but wrong on this driver.
    let (outcome, sim) = revalidate_scale(0.1, 1.0, &[SCALE_FOREIGN]);
    let outcome = outcome.unwrap().unwrap();
    assert_eq!(outcome.winner, index_of(&family, SCALE_HEURISTIC));
    assert!(!outcome.kept);
    assert_eq!(outcome.record.variant, SCALE_HEURISTIC);
    assert_eq!(outcome.record.runner_up_ms, None);
    assert_eq!(sim.launches_timed(SCALE_FOREIGN), 0);
    // The heuristic default is verified too before it is recorded.
    let (outcome, _) = revalidate_scale(0.5, 1.0, &[SCALE_FOREIGN, SCALE_HEURISTIC]);
    assert_eq!(outcome.unwrap(), None);
    let (outcome, _) = revalidate_scale(2.0, 1.0, &[SCALE_HEURISTIC]);
    let outcome = outcome.unwrap().unwrap();
    assert!(outcome.kept);
    assert_eq!(
        (outcome.record.runner_up_ms, outcome.record.heuristic_ms),
        (None, None)
    );
}

#[test]
fn revalidating_the_heuristic_default_itself_times_it_once_per_round() {
    let family = scale_family();
    let n = 4096;
    let scale = scale_call(n);
    let call = scale.call();
    let mut sim = Simulated::new(times(&family, SCALE_HEURISTIC), 0.0, 8);
    let heuristic = index_of(&family, SCALE_HEURISTIC);
    let outcome = revalidate(&family, &call, &h200_device_info(), heuristic, &mut sim)
        .unwrap()
        .unwrap();
    assert!(outcome.kept);
    assert_eq!(outcome.record.heuristic_ms, Some(0.5));
    assert_eq!(outcome.record.runner_up_ms, None);
    assert_eq!(sim.verified, [SCALE_HEURISTIC]);
    assert_eq!(sim.timing_order.len(), 3 * REVALIDATION_ROUNDS);

    // A fault ends the re-validation with the driver's error.
    sim.faulting.insert(SCALE_HEURISTIC.into());
    let err = revalidate(&family, &call, &h200_device_info(), heuristic, &mut sim).unwrap_err();
    assert!(err.to_string().contains("simulated fault"), "{err}");
}

#[test]
fn keys_name_everything_that_decides_the_winner() {
    let family = scale_family();
    let base = KeyBase::of(&h200_device_info());
    let scale = scale_call(1000);
    let call = scale.call();
    let key = family.key(&base, &call);
    assert_eq!(key.gpu.name, "NVIDIA H200");
    assert_eq!(key.gpu.compute_capability, (9, 0));
    assert_eq!(key.gpu.sm_count, 132);
    assert!(
        key.driver_version.starts_with("cuda-12.8"),
        "{}",
        key.driver_version
    );
    assert_eq!(key.kernel, "scale");
    assert_eq!(key.dtypes, "f32");
    assert_eq!(key.alignments, [16]);
    assert_eq!(key.shape, ShapeBucket::gemm(1024, 1, 1));
    assert_eq!(key.codegen_version.len(), 16);
    // Another kernel set is another code generation, and so another key.
    let other = Family::new("scale", &[scale::def()]).unwrap();
    assert_ne!(other.codegen_version(), family.codegen_version());
    assert_eq!(
        scale_family().codegen_version(),
        family.codegen_version(),
        "deterministic"
    );
    // Another model of the same name differs in its SM count (MIG slices).
    let slice = DeviceInfo {
        sm_count: 16,
        ..h200_device_info()
    };
    assert_ne!(family.key(&KeyBase::of(&slice), &call), key);

    let err = Family::new("twice", &[scale::def(), scale::def()]).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = scale_family()
        .prefer(scale::def(), &[3, 1])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scale[T=3,ALIGNED=1]") && err.contains("not one of its variants"),
        "{err}"
    );
}

/// Shapes over which the stock GEMM families' legality is compared: squares,
/// ragged ones, k of every residue mod 8, tiny and large; fewer for
/// `every_form`, where each shape is tried in every form of the key.
fn gemm_shapes(every_form: bool) -> Vec<(u32, u32, u32)> {
    let sizes: &[u32] = match every_form {
        false => &[1, 7, 8, 31, 64, 100, 1000, 1020, 1024, 3001, 4096, 8192],
        true => &[1, 7, 8, 31, 64, 1020],
    };
    let mut shapes = Vec::new();
    for &m in &sizes[..4] {
        for &n in sizes {
            for &k in sizes {
                shapes.push((m * 7 + 1, n, k));
                shapes.push((m, n + 1, k + 3));
            }
        }
    }
    shapes
}

/// The problems of every form the key tells apart: each layout of A, B and
/// C, with and without a bias, each activation, one batch or three, packed
/// as `A` packs them, the batch strides then padded.
fn gemm_problems<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    plain: GemmProblem<O::Scale>,
) -> impl Iterator<Item = (GemmProblem<O::Scale>, bool)> {
    let layouts = MatrixLayout::ALL.into_iter().flat_map(|a| {
        MatrixLayout::ALL
            .into_iter()
            .flat_map(move |b| MatrixLayout::ALL.into_iter().map(move |c| (a, b, c)))
    });
    layouts.flat_map(move |(a_layout, b_layout, c_layout)| {
        Activation::ALL.into_iter().flat_map(move |activation| {
            [(1, false), (3, true)]
                .into_iter()
                .map(move |(batches, with_bias)| {
                    let (m, n, k) = (plain.m, plain.n, plain.k);
                    let mut batch = A::packed(batches, (m, n, k));
                    // Padded batch strides, so that their alignment differs from the matrices'.
                    if batches > 1 {
                        // A dense A's stride may be off by elements, a
                        // sparse A's by whole 16-row tiles (packed pads a row to one).
                        let tile_rows = A::packed(2, (1, 1, k)).stride_a / k;
                        let step = if tile_rows == 1 { 1 } else { tile_rows * k };
                        batch.stride_a += k % 5 * step;
                        batch.stride_b += n % 3;
                    }
                    let problem = GemmProblem {
                        a_layout,
                        b_layout,
                        c_layout,
                        batch,
                        activation,
                        ..plain
                    };
                    (problem, with_bias)
                })
        })
    })
}

/// The variants of `kind` that can take each call, grouped by the key's
/// dtypes, alignments and batch count (one or several): every group must
/// admit one set. Also: the heuristic default can take every call on an
/// H200 whose key admits any variant.
///
/// `refused` says which problems the kind refuses before any variant is
/// asked.
fn key_decides_legality<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    kind: &GemmKind<I, O, A>,
    every_form: bool,
    refused: fn(&GemmProblem<O::Scale>) -> bool,
) {
    let family = kind.family().unwrap();
    assert_eq!(I::SCALAR, kind.precision.input(), "{}", kind.name);
    assert_eq!(O::SCALAR, kind.precision.output(), "{}", kind.name);
    // Per key part: which candidates are legal, and the first shape seen.
    type Seen = (Vec<bool>, (u32, u32, u32));
    let mut legal_by_key: BTreeMap<(String, Vec<u32>, bool), Seen> = BTreeMap::new();
    let (alpha, beta) = O::PLAIN;
    for dims in gemm_shapes(every_form) {
        let plain = kind.problem(dims, alpha, beta);
        let problems: Vec<(GemmProblem<O::Scale>, bool)> = match every_form {
            true => gemm_problems::<I, O, A>(plain).collect(),
            false => vec![(plain, false)],
        };
        for (problem, with_bias) in problems {
            let Ok(gemm_call) = kind.call(&problem, with_bias) else {
                let (a, batch) = (problem.a_layout, problem.batch);
                assert!(refused(&problem), "{}: {dims:?} {a:?} {batch:?}", kind.name);
                continue;
            };
            let (a, batch) = (problem.a_layout, problem.batch);
            assert!(
                !refused(&problem),
                "{}: {dims:?} {a:?} {batch:?}",
                kind.name
            );
            let call = gemm_call.call();
            let legal: Vec<bool> = family
                .candidates()
                .iter()
                .map(|c| check_call(c.def, &c.consts, call.args).is_ok())
                .collect();
            let part = (
                call.dtypes.to_string(),
                call.alignments.to_vec(),
                problem.batch.count > 1,
            );
            let (first, first_dims) = legal_by_key
                .entry(part.clone())
                .or_insert((legal.clone(), dims));
            assert_eq!(
                *first, legal,
                "{}: {dims:?} and {first_dims:?} share the key part {part:?} and admit different variants",
                kind.name
            );
            if legal.iter().any(|&l| l) {
                let heuristic = family.heuristic(&call, &h200_device_info()).unwrap();
                assert!(legal[heuristic], "{}: {dims:?} {part:?}", kind.name);
            }
        }
    }
    // Every k residue class appears, so both legal sets of the 16-byte-copy kernels were seen.
    assert!(legal_by_key.len() >= 2, "{}", kind.name);
}

#[test]
fn stock_gemm_keys_decide_legality() {
    // Every form of the key at a few shapes, and the plain problem at many.
    // GELU needs a float output.
    fn gelu<S>(p: &GemmProblem<S>) -> bool {
        p.activation == Activation::GeluTanh
    }
    fn none<S>(_: &GemmProblem<S>) -> bool {
        false
    }
    // A sparse A is row-major, its batches at whole 16-row tiles.
    fn sparse(p: &GemmProblem<f32>) -> bool {
        let batches_off_tiles = p.batch.count > 1 && !p.batch.stride_a.is_multiple_of(16 * p.k);
        p.a_layout == MatrixLayout::ColMajor || batches_off_tiles
    }
    for every_form in [true, false] {
        key_decides_legality(&GEMM_F32, every_form, none);
        key_decides_legality(&GEMM_F16, every_form, none);
        key_decides_legality(&GEMM_BF16, every_form, none);
        key_decides_legality(&GEMM_TF32, every_form, none);
        key_decides_legality(&GEMM_S8, every_form, gelu);
        key_decides_legality(&SPARSE_GEMM_F16, every_form, sparse);
        key_decides_legality(&SPARSE_GEMM_BF16, every_form, sparse);
    }
}

/// The name of the heuristic default of `kind` for an m x n x k call on `device`.
fn heuristic_for<I: GemmElement, O: GemmOutput, A: OperandA<I, O>>(
    kind: &GemmKind<I, O, A>,
    (m, n, k): (u32, u32, u32),
    device: &DeviceInfo,
) -> Option<String> {
    let family = kind.family().unwrap();
    let (alpha, beta) = O::PLAIN;
    let gemm_call = kind
        .call(&kind.problem((m, n, k), alpha, beta), false)
        .unwrap();
    let call = gemm_call.call();
    family
        .heuristic(&call, device)
        .map(|i| family.candidates()[i].name().to_string())
}

#[test]
fn stock_gemm_heuristic_defaults() {
    let square = (4096, 4096, 4096);
    let ragged_k = (4096, 4096, 1020);
    // At most 128 rows of C: the narrow wgmma tile on Hopper; 129 rows are
    // past it; an A100 keeps its sm_80 default.
    let few_rows = (128, 8192, 8192);
    let cases = [
        (
            heuristic_for(&GEMM_F16, few_rows, &h200_device_info()),
            Some("gemm_wgmma_f16[BM=64,BN=64,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        // At most 32 rows: the 64 x 128 tile.
        (
            heuristic_for(&GEMM_BF16, (1, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_bf16[BM=64,BN=128,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (16, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=64,BN=128,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (33, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=64,BN=64,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_TF32, few_rows, &h200_device_info()),
            Some("gemm_wgmma_tf32[BM=64,BN=64,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_S8, few_rows, &h200_device_info()),
            Some("gemm_wgmma_s8[BM=64,BN=64,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (129, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=128,STAGES=5,PINGPONG=1,CLUSTER=1,STREAM_K=0]"),
        ),
        // By the size of C and k: small squares take narrow tiles; a large
        // C with a long k the cooperative 128 x 256 (with stream-K from 4096
        // x 8192, as a cluster pair below); the rest the ping-pong 128 x 128.
        (
            heuristic_for(&GEMM_F16, (512, 512, 512), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=64,BN=64,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_BF16, (1024, 1000, 1024), &h200_device_info()),
            Some("gemm_wgmma_bf16[BM=64,BN=128,STAGES=6,PINGPONG=0,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (8192, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=256,STAGES=3,PINGPONG=0,CLUSTER=1,STREAM_K=1]"),
        ),
        (
            heuristic_for(&GEMM_S8, (8192, 8192, 8192), &h200_device_info()),
            Some("gemm_wgmma_s8[BM=128,BN=256,STAGES=4,PINGPONG=0,CLUSTER=1,STREAM_K=1]"),
        ),
        (
            heuristic_for(&GEMM_F16, (8192, 8192, 1024), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=128,STAGES=5,PINGPONG=1,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, few_rows, &a100()),
            Some("gemm_f16[BM=128,BN=128,BK=64,WARP=64,STAGES=2,ALIGNED=1,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        // A C of about 4096 x 4096: the 128 x 256 cluster pair, with 16-bit
        // operands from 16 k-tiles of 128 bytes, with others at a long k (64 k-tiles of 128
        // bytes: 4096^3 is one for tf32, not for 8-bit operands); stream-K
        // begins at 4096 x 8192.
        (
            heuristic_for(&GEMM_F16, square, &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=256,STAGES=4,PINGPONG=0,CLUSTER=2,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_BF16, (3001, 2999, 1000), &h200_device_info()),
            Some("gemm_wgmma_bf16[BM=128,BN=256,STAGES=4,PINGPONG=0,CLUSTER=2,STREAM_K=0]"),
        ),
        // Under 16 k-tiles, the ping-pong tile's overlapped epilogues stay.
        (
            heuristic_for(&GEMM_F16, (4096, 4096, 512), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=128,STAGES=5,PINGPONG=1,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_TF32, (3001, 2999, 1000), &h200_device_info()),
            Some("gemm_wgmma_tf32[BM=128,BN=128,STAGES=5,PINGPONG=1,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (4096, 8192, 4096), &h200_device_info()),
            Some("gemm_wgmma_f16[BM=128,BN=256,STAGES=3,PINGPONG=0,CLUSTER=1,STREAM_K=1]"),
        ),
        (
            heuristic_for(&GEMM_BF16, (4096, 11008, 4096), &h200_device_info()),
            Some("gemm_wgmma_bf16[BM=128,BN=256,STAGES=3,PINGPONG=0,CLUSTER=1,STREAM_K=1]"),
        ),
        // sm_90a runs on compute capability 9.0 only: an A100 takes the sm_80 default.
        (
            heuristic_for(&GEMM_F16, square, &a100()),
            Some("gemm_f16[BM=128,BN=128,BK=64,WARP=64,STAGES=2,ALIGNED=1,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_BF16, square, &h200_device_info()),
            Some("gemm_wgmma_bf16[BM=128,BN=256,STAGES=4,PINGPONG=0,CLUSTER=2,STREAM_K=0]"),
        ),
        // k = 1020 is not a multiple of 8: element copies, in 256 x 128
        // tiles from a C of 2048 x 2048, else 128 x 128.
        (
            heuristic_for(&GEMM_F16, ragged_k, &h200_device_info()),
            Some("gemm_f16[BM=256,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_BF16, ragged_k, &a100()),
            Some("gemm_bf16[BM=256,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (2048, 2048, 1020), &h200_device_info()),
            Some("gemm_f16[BM=256,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_F16, (1024, 2048, 1020), &h200_device_info()),
            Some("gemm_f16[BM=128,BN=128,BK=32,WARP=64,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        // A V100 runs only the wmma kernel, which needs k % 8 == 0.
        (
            heuristic_for(&GEMM_F16, square, &v100()),
            Some("gemm_f16_wmma[BM=64,BN=128,BK=32,STAGES=2]"),
        ),
        (heuristic_for(&GEMM_F16, ragged_k, &v100()), None),
        (
            heuristic_for(&GEMM_F32, ragged_k, &v100()),
            Some("gemm_f32[BM=128,BN=128,BK=16,TM=8,TN=8]"),
        ),
        (
            heuristic_for(&GEMM_TF32, square, &h200_device_info()),
            Some("gemm_wgmma_tf32[BM=128,BN=256,STAGES=4,PINGPONG=0,CLUSTER=2,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_TF32, square, &a100()),
            Some("gemm_tf32[BM=128,BN=128,BK=16,WARP=64,STAGES=3,ALIGNED=1,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_S8, square, &h200_device_info()),
            Some("gemm_wgmma_s8[BM=128,BN=128,STAGES=5,PINGPONG=1,CLUSTER=1,STREAM_K=0]"),
        ),
        (
            heuristic_for(&GEMM_S8, square, &a100()),
            Some("gemm_s8[BM=128,BN=128,BK=128,WARP=64,STAGES=3,ALIGNED=1,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        // k = 1020 i8 elements is not a multiple of 16: element copies, in
        // 128 x 64 tiles from a C of 2048 x 2048, else 64 x 64.
        (
            heuristic_for(&GEMM_S8, ragged_k, &h200_device_info()),
            Some("gemm_s8[BM=128,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_S8, (3001, 2999, 1000), &h200_device_info()),
            Some("gemm_s8[BM=128,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&GEMM_S8, (16, 8192, 1000), &a100()),
            Some("gemm_s8[BM=64,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=0,A_COL_MAJOR=0,B_ROW_MAJOR=0]"),
        ),
        // The s8 kernel does not run on sm_70.
        (heuristic_for(&GEMM_S8, square, &v100()), None),
        // The sparse GEMMs: gemm_sparse::default_variant's, for each layout of B.
        (
            heuristic_for(&SPARSE_GEMM_F16, square, &h200_device_info()),
            Some("gemm_sparse_f16[BM=128,BN=128,BK=64,WARP=64,STAGES=3,ALIGNED=1,B_ROW_MAJOR=0]"),
        ),
        (
            heuristic_for(&SPARSE_GEMM_BF16, ragged_k, &a100()),
            Some("gemm_sparse_bf16[BM=64,BN=64,BK=64,WARP=32,STAGES=2,ALIGNED=0,B_ROW_MAJOR=0]"),
        ),
        (heuristic_for(&SPARSE_GEMM_F16, square, &v100()), None),
    ];
    for (got, want) in cases {
        assert_eq!(got.as_deref(), want);
    }
    let key_parts = |call: GemmCall| {
        let call = call.call();
        (
            call.dtypes.to_string(),
            call.shape,
            call.alignments.to_vec(),
        )
    };
    let plain = |dims| GEMM_F16.problem(dims, 1.0, 0.0);
    // k = 1020 f16 elements is 2040 bytes: 8-byte aligned rows of A and B;
    // one batch, whose strides count as aligned.
    assert_eq!(
        key_parts(GEMM_F16.call(&plain(ragged_k), false).unwrap()),
        (
            "f16.row*f16.col->f16.row".to_string(),
            ShapeBucket::batched_gemm(4096, 4096, 1020, 1),
            vec![8, 8, 16, 16, 16]
        )
    );
    let dtypes = |call: Result<GemmCall, Error>| key_parts(call.unwrap()).0;
    assert_eq!(
        dtypes(GEMM_TF32.call(&GEMM_TF32.problem(square, 1.0, 0.0), false)),
        "tf32.row*tf32.col->f32.row"
    );
    assert_eq!(
        dtypes(GEMM_S8.call(&GEMM_S8.problem(square, 1, 0), false)),
        "i8.row*i8.col->i32.row"
    );
    assert_eq!(
        dtypes(GEMM_BF16.call(&GEMM_BF16.problem(square, 1.0, 0.0), false)),
        "bf16.row*bf16.col->bf16.row"
    );
    assert_eq!(
        dtypes(GEMM_F32.call(&GEMM_F32.problem((3, 5, 7), 1.0, 0.0), false)),
        "f32.row*f32.row->f32.row"
    );
    assert_eq!(
        key_parts(
            GEMM_F32
                .call(&GEMM_F32.problem((3, 5, 7), 1.0, 0.0), false)
                .unwrap()
        )
        .2,
        [4, 4, 4, 16, 16]
    );
    // The layouts and the epilogue: NN with a bias and ReLU into a
    // column-major C, in 3 batches whose A stride is 2 elements off.
    let nn = GemmProblem {
        a_layout: MatrixLayout::RowMajor,
        b_layout: MatrixLayout::RowMajor,
        c_layout: MatrixLayout::ColMajor,
        activation: Activation::Relu,
        batch: GemmBatch {
            count: 3,
            stride_a: 64 * 64 + 2,
            stride_b: 64 * 64,
            stride_c: 64 * 64,
        },
        ..plain((64, 64, 64))
    };
    assert_eq!(
        key_parts(GEMM_F16.call(&nn, true).unwrap()),
        (
            "f16.row*f16.row->f16.col+bias+relu".to_string(),
            ShapeBucket::batched_gemm(64, 64, 64, 4),
            vec![16, 16, 16, 4, 16]
        )
    );
    let gelu = GemmProblem {
        activation: Activation::GeluTanh,
        ..nn
    };
    assert_eq!(
        dtypes(GEMM_F16.call(&gelu, false)),
        "f16.row*f16.row->f16.col+gelu"
    );
    // A sparse A: `sparse` in the key; row-major, its batches at whole 16-row tiles.
    let sparse_nn = GemmProblem {
        b_layout: MatrixLayout::RowMajor,
        activation: Activation::Relu,
        batch: GemmBatch {
            count: 3,
            stride_a: 64 * 64,
            stride_b: 64 * 64,
            stride_c: 64 * 64,
        },
        ..SPARSE_GEMM_F16.problem((64, 64, 64), 1.0, 0.0)
    };
    assert_eq!(
        key_parts(SPARSE_GEMM_F16.call(&sparse_nn, true).unwrap()),
        (
            "f16.sparse*f16.row->f16.row+bias+relu".to_string(),
            ShapeBucket::batched_gemm(64, 64, 64, 4),
            vec![16, 16, 16, 16, 16]
        )
    );
    let refusal = |problem: GemmProblem<f32>| {
        SPARSE_GEMM_BF16
            .call(&problem, false)
            .unwrap_err()
            .to_string()
    };
    let col_a = refusal(GemmProblem {
        a_layout: MatrixLayout::ColMajor,
        ..sparse_nn
    });
    assert!(
        col_a.contains("gemm_sparse_bf16") && col_a.contains("must be row-major"),
        "{col_a}"
    );
    let off_tiles = refusal(GemmProblem {
        batch: GemmBatch {
            stride_a: 64 * 64 + 64,
            ..sparse_nn.batch
        },
        ..sparse_nn
    });
    assert!(
        off_tiles.contains("multiple of 16 * k") && off_tiles.contains("next_multiple_of(16)"),
        "{off_tiles}"
    );
    let err = GEMM_S8
        .call(
            &GemmProblem {
                activation: Activation::GeluTanh,
                ..GEMM_S8.problem(square, 1, 0)
            },
            false,
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GELU needs a floating-point") && err.contains("ReLU"),
        "{err}"
    );
}

#[test]
fn stock_gemm_error_bounds() {
    // f16 output: half an ulp of the value dominates for short sums.
    let bound = GEMM_F16.allowed_error(4, Activation::Identity, 4.0, 2.0);
    assert!(
        bound > 2.0 * 2f64.powi(-11) && bound < 2.0 * 2f64.powi(-11) * 1.01,
        "{bound}"
    );
    // f32: the accumulation term grows with k.
    let identity = Activation::Identity;
    assert!(
        GEMM_F32.allowed_error(8192, identity, 100.0, 1.0)
            > GEMM_F32.allowed_error(64, identity, 100.0, 1.0)
    );
    assert!(
        GEMM_BF16.allowed_error(64, identity, 1.0, 1.0)
            > GEMM_F16.allowed_error(64, identity, 1.0, 1.0)
    );
    // GELU's evaluation in f32 and its steeper slope widen the bound; ReLU's does not.
    assert!(
        GEMM_F32.allowed_error(64, Activation::GeluTanh, 1.0, 1.0)
            > GEMM_F32.allowed_error(64, identity, 1.0, 1.0)
    );
    assert_eq!(
        GEMM_F32.allowed_error(64, Activation::Relu, 1.0, 1.0),
        GEMM_F32.allowed_error(64, identity, 1.0, 1.0)
    );
}
