//! The cross-crate test support of warpforge: float64 references, random
//! inputs, comparisons, the checks of each stock kernel and the GPU tier's
//! report. The CPU tier lives in
//! `tests/` (integration tests); the GPU tier is the `gpu-check`, `bench` and
//! `tune` binaries, carried to a GPU machine by `cargo xtask gpu-bundle`.

pub mod bench;
pub mod checks;
pub mod compare;
pub mod generated;
pub mod hopper;
pub mod interop;
pub mod ldmatrix;
pub mod rates;
pub mod reference;
pub mod report;
pub mod sparse;
pub mod stderr_log;
pub mod threads;
pub mod tuning;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use warpforge::{BackendKind, Runtime};

/// Shared with the runtime's own wgpu tests: Mesa's XDG_RUNTIME_DIR, the adapter line.
#[path = "../../runtime/tests/common/mesa.rs"]
mod mesa;
pub use mesa::quiet_mesa;

/// The wgpu runtime of the CPU tier's test files (Mesa's lavapipe in CI),
/// its adapter printed once per test binary. Panics with what to install when
/// there is none: `tests` names the tests that need it, for that message.
pub fn lavapipe(tests: &str) -> Runtime {
    mesa::quiet_mesa();
    let rt = Runtime::with_backend(BackendKind::Wgpu).unwrap_or_else(|e| {
        panic!(
            "{tests} need a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    mesa::announce_adapter(&rt.backend_name(), &rt.device().name);
    rt
}

/// Fresh random inputs for one run: uniform in [-1, 1), never all zeros.
pub struct Inputs {
    rng: StdRng,
}

impl Inputs {
    pub fn new(seed: u64) -> Inputs {
        Inputs {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.draw(n, |rng| rng.random_range(-1.0f32..1.0))
    }

    /// Uniform over every i8 value, -128 and 127 included.
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        self.draw(n, |rng| rng.random())
    }

    pub fn u32s(&mut self, n: usize) -> Vec<u32> {
        self.draw(n, |rng| rng.random())
    }

    /// `n` values of `one`, drawn in chunks of [`INPUT_CHUNK`] on every core,
    /// each chunk by its own generator seeded from this one in order: a seed
    /// gives the same values on any number of threads, and the 2^28 elements
    /// of a 16384^3 GEMM's operand take a fraction of a second.
    fn draw<T: Copy + Default + Send>(
        &mut self,
        n: usize,
        one: impl Fn(&mut StdRng) -> T + Sync,
    ) -> Vec<T> {
        let seeds: Vec<u64> = (0..n.div_ceil(INPUT_CHUNK))
            .map(|_| self.rng.random())
            .collect();
        let mut values = vec![T::default(); n];
        values
            .par_chunks_mut(INPUT_CHUNK)
            .zip(seeds)
            .for_each(|(chunk, seed)| {
                let mut rng = StdRng::seed_from_u64(seed);
                chunk.iter_mut().for_each(|x| *x = one(&mut rng));
            });
        values
    }
}

/// The values one generator of [`Inputs`] draws in a row.
const INPUT_CHUNK: usize = 1 << 16;

/// The seed of this run: `WARPFORGE_SEED` when set (to replay a failure), else
/// the clock, so that every run draws new inputs.
pub fn run_seed() -> u64 {
    std::env::var("WARPFORGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
}

/// Runs checks on `rt` with inputs drawn from this run's seed, and fails
/// (panics) on any failed line, naming the device and the seed to replay.
pub fn run_checks(rt: &Runtime, run: impl FnOnce(&Runtime, &mut Inputs, &mut report::Report)) {
    let seed = run_seed();
    let mut report = report::Report::default();
    run(rt, &mut Inputs::new(seed), &mut report);
    report.finish();
    assert!(
        report.all_passed(),
        "failures above on {}: {} (replay with WARPFORGE_SEED={seed})",
        rt.backend_name(),
        rt.device().name
    );
}

/// The floating-point element types of the Tensor Core GEMMs: f16, bf16,
/// f32 (the tf32 GEMM's inputs and output), e4m3 and e5m2.
pub trait GemmFloat: warpforge::DeviceScalar {
    const NAN: Self;
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
}

impl GemmFloat for warpforge::f16 {
    const NAN: Self = warpforge::f16::NAN;
    fn from_f32(v: f32) -> Self {
        warpforge::f16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        warpforge::f16::to_f64(self)
    }
}

impl GemmFloat for warpforge::bf16 {
    const NAN: Self = warpforge::bf16::NAN;
    fn from_f32(v: f32) -> Self {
        warpforge::bf16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        warpforge::bf16::to_f64(self)
    }
}

/// The 8-bit floats: `from_f32` rounds to nearest (saturating at the
/// largest finite value), `to_f64` is exact.
macro_rules! fp8_gemm_float {
    ($($t:ident),*) => {$(
        impl GemmFloat for warpforge::$t {
            const NAN: Self = warpforge::$t::NAN;
            fn from_f32(v: f32) -> Self {
                warpforge::$t::from_f32(v)
            }
            fn to_f64(self) -> f64 {
                warpforge::$t::to_f64(&self)
            }
        }
    )*};
}

fp8_gemm_float!(e4m3, e5m2);

impl GemmFloat for f32 {
    const NAN: Self = f32::NAN;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// The H200 as the CUDA driver describes it (driver 580, CUDA 12.8 API),
/// for CPU-tier tests of launch checks and tuning that need a device's
/// limits without one.
pub fn h200_device_info() -> warpforge::DeviceInfo {
    warpforge::DeviceInfo {
        backend: warpforge::DeviceBackend::Cuda,
        name: "NVIDIA H200".into(),
        ordinal: 0,
        compute_capability: (9, 0),
        sm_count: 132,
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [2_147_483_647, 65_535, 65_535],
        shared_mem_per_block: 48 * 1024,
        shared_mem_per_block_optin: 227 * 1024,
        shared_mem_per_sm: 228 * 1024,
        registers_per_block: 65_536,
        warp_size: 32,
        l2_cache_bytes: 60 << 20,
        total_memory_bytes: 141 << 30,
        driver_version: (12, 8),
    }
}
