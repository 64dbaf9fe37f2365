//! Benchmarks beside cuBLAS, in one run: CUDA-event medians after warm-up, on
//! random inputs larger than L2.
//!
//! `bench` times the `cp_async` stream (`stream_scale`, every variant, the best
//! beside `cuMemcpyDtoD`), the f16 and bf16 Tensor Core GEMMs at 8192^3 (every
//! 16-byte-copy variant, the best beside cuBLAS, the best per pipeline depth),
//! every variant of the SIMT f32 GEMM at 4096^3 and the fastest against cuBLAS
//! sgemm (no TF32), checking that each agrees with cuBLAS. Then the
//! same GEMM's WGSL variants through wgpu on the same GPU (the portable path):
//! wgpu has no event timer here, so those are host wall-clock medians of
//! launch + wait, which include a submission (microseconds against milliseconds).
//! Last, the host time a dispatched launch (the autotuner's `TunedGemm::run`)
//! adds to a direct launch of the same variant.
//! `bench --only PATTERN` runs only the 16-bit GEMM variants whose `Consts`
//! debug text holds PATTERN (for profilers).

use std::process::ExitCode;

use warpforge::{bf16, f16, DeviceBuffer, Error, GemmPrecision, MatrixLayout, Runtime};
use warpforge_kernels::{gemm, gemm_tc, stream};
use warpforge_tests::compare::deviation;
use warpforge_tests::{run_seed, Half, Inputs};

fn main() -> ExitCode {
    let rt = match Runtime::cuda(0) {
        Ok(rt) => rt,
        Err(e) => {
            println!("BENCH NOT RUN: no usable CUDA GPU: {e}");
            return ExitCode::from(2);
        }
    };
    // `--only PATTERN`: only the 16-bit GEMM variants whose `Consts` debug text holds
    // PATTERN (for profilers), and nothing else.
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    let result = match only {
        Some(pattern) => bench_gemm_16bit(&rt, 8192, pattern),
        None => bench_stream(&rt, 1 << 28)
            .and_then(|()| bench_gemm_16bit(&rt, 8192, ""))
            .and_then(|()| bench_gemm_f32(&rt, 4096))
            .and_then(|ptx_ms| bench_gemm_f32_wgpu(4096, ptx_ms))
            .and_then(|()| bench_dispatch_overhead(&rt)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The WGSL variants of the same GEMM through wgpu, beside the PTX path's best time.
fn bench_gemm_f32_wgpu(size: usize, ptx_ms: f32) -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::wgpu()?;
    println!("\nwgpu: {} through {}", rt.device().name, rt.backend_name());
    let mut inputs = Inputs::new(run_seed());
    let a = rt.upload(&inputs.f32s(size * size))?;
    let b = rt.upload(&inputs.f32s(size * size))?;
    let mut c: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;
    let mut best: Option<(f32, gemm::gemm_f32::Consts)> = None;
    for consts in gemm::gemm_f32::variants() {
        let mut run = || -> Result<f32, Error> {
            let start = std::time::Instant::now();
            gemm::gemm_f32_with(&rt, consts, &a, &b, &mut c, (s, s, s), 1.0, 0.0)?;
            rt.synchronize()?;
            Ok(start.elapsed().as_secs_f32() * 1e3)
        };
        run()?;
        let mut times = (0..5).map(|_| run()).collect::<Result<Vec<_>, _>>()?;
        times.sort_by(f32::total_cmp);
        let ms = times[2];
        println!(
            "  {:<40} {:>8.3} ms {:>7.2} TFLOP/s",
            format!("{consts:?}"),
            ms,
            tflops(size, ms)
        );
        if best.is_none_or(|(b, _)| ms < b) {
            best = Some((ms, consts));
        }
    }
    let (ms, consts) = best.ok_or("gemm_f32 has no variants")?;
    println!("\n| path | best variant | ms | TFLOP/s |");
    println!("|---|---|---|---|");
    println!(
        "| PTX (CUDA events) | see above | {ptx_ms:.3} | {:.2} |",
        tflops(size, ptx_ms)
    );
    println!(
        "| WGSL via wgpu (wall clock) | {consts:?} | {ms:.3} | {:.2} |",
        tflops(size, ms)
    );
    Ok(())
}

/// The host time a dispatched launch adds to a direct one
/// ([`warpforge_tests::tuning::dispatch_overhead`]), with an empty database:
/// the heuristic default serves the call, and nothing is written.
fn bench_dispatch_overhead(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("warpforge-bench-empty-tune-db");
    let o = warpforge_tests::tuning::dispatch_overhead(rt, &dir)?;
    println!(
        "\ndispatch overhead ({} at {}x{}x{}, host time per launch, enqueue only):",
        o.variant, o.shape.0, o.shape.1, o.shape.2
    );
    println!("\n| launch | us |");
    println!("|---|---|");
    println!("| direct (gemm_f16_with) | {:.3} |", o.direct_us);
    println!("| dispatched (TunedGemm::run) | {:.3} |", o.dispatched_us);
    println!(
        "| overhead (target < {} us) | {:.3} |",
        warpforge_tests::tuning::OVERHEAD_TARGET_US,
        o.overhead_us
    );
    println!(
        "| one resolved TunedGemm::select | {:.3} |",
        o.select_ns / 1e3
    );
    if !o.within_target {
        return Err(format!("dispatch adds {:.3} us per launch", o.overhead_us).into());
    }
    Ok(())
}

/// Median of `reps` timed runs of `work`, after `warmup` untimed ones.
fn median_ms(
    rt: &Runtime,
    warmup: usize,
    reps: usize,
    mut work: impl FnMut(&Runtime) -> Result<(), Error>,
) -> Result<f32, Error> {
    for _ in 0..warmup {
        work(rt)?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(rt.time_ms(&mut work)?);
    }
    times.sort_by(f32::total_cmp);
    Ok(times[reps / 2])
}

fn tflops(size: usize, ms: f32) -> f64 {
    2.0 * (size as f64).powi(3) / (ms as f64 * 1e-3) / 1e12
}

/// Returns the best variant's median time in ms.
fn bench_gemm_f32(rt: &Runtime, size: usize) -> Result<f32, Box<dyn std::error::Error>> {
    let device = rt.device();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        device.name, device.compute_capability.0, device.compute_capability.1, device.sm_count
    );
    let mut inputs = Inputs::new(run_seed());
    let a = rt.upload(&inputs.f32s(size * size))?;
    let b = rt.upload(&inputs.f32s(size * size))?;
    let mut c: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;

    println!("\ngemm_f32 {size}^3, every variant (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for consts in gemm::gemm_f32::variants() {
        let ms = median_ms(rt, 2, 10, |rt| {
            gemm::gemm_f32_with(rt, consts, &a, &b, &mut c, (s, s, s), 1.0, 0.0)
        })?;
        println!(
            "  {:<40} {:>8.3} ms {:>7.2} TFLOP/s",
            format!("{consts:?}"),
            ms,
            tflops(size, ms)
        );
        results.push((ms, consts));
    }
    results.sort_by(|x, y| x.0.total_cmp(&y.0));
    let best = results[0].1;

    // The winner and cuBLAS, timed alternately so that drift hits both alike.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut reference: DeviceBuffer<f32> = rt.alloc_zeroed(size * size)?;
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            gemm::gemm_f32_with(rt, best, &a, &b, &mut c, (s, s, s), 1.0, 0.0)
        })?);
        theirs.push(median_ms(rt, 3, 20, |rt| {
            rt.cublas_sgemm(size, size, size, &a, &b, &mut reference)
        })?);
    }
    ours.sort_by(f32::total_cmp);
    theirs.sort_by(f32::total_cmp);
    let (ours, theirs) = (ours[2], theirs[2]);

    let cublas_result: Vec<f64> = rt.download(&reference)?.iter().map(|&v| v as f64).collect();
    // A zero difference is plausible (both accumulate k in order with FMA), so
    // show that the reference is not trivially zero.
    let reference_max = cublas_result.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let d = deviation(&rt.download(&c)?, &cublas_result);
    println!("\n| kernel | ms | TFLOP/s | vs cuBLAS |");
    println!("|---|---|---|---|");
    println!(
        "| warpforge gemm_f32 {best:?} | {ours:.3} | {:.2} | {:.3}x |",
        tflops(size, ours),
        theirs / ours
    );
    println!(
        "| cuBLAS sgemm (fp32, no TF32) | {theirs:.3} | {:.2} | 1.000x |",
        tflops(size, theirs)
    );
    println!("\nwarpforge vs cuBLAS result: {d} (max |cuBLAS| {reference_max:.3})");
    if !d.passes(1e-5) {
        return Err(format!("gemm_f32 disagrees with cuBLAS: {d}").into());
    }
    Ok(ours)
}

/// Launches variant `index` of a 16-bit GEMM on (a, b, c) with (m, n, k).
type Launch<'a, T> = dyn Fn(
        &Runtime,
        usize,
        &DeviceBuffer<T>,
        &DeviceBuffer<T>,
        &mut DeviceBuffer<T>,
        (u32, u32, u32),
    ) -> Result<(), Error>
    + 'a;

/// Every `ALIGNED` variant of the f16 and the bf16 Tensor Core GEMM at
/// `size`^3 whose name holds `only`.
fn bench_gemm_16bit(
    rt: &Runtime,
    size: usize,
    only: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let f16_variants: Vec<_> = gemm_tc::gemm_f16::variants()
        .into_iter()
        .filter(|c| c.ALIGNED)
        .collect();
    let f16_names: Vec<(String, u32)> = f16_variants
        .iter()
        .map(|c| (format!("{c:?}"), c.STAGES))
        .collect();
    bench_gemm_tc::<f16>(
        rt,
        size,
        only,
        GemmPrecision::F16,
        &f16_names,
        &|rt, i, a, b, c, dims| {
            gemm_tc::gemm_f16_with(rt, f16_variants[i], a, b, c, dims, 1.0, 0.0)
        },
    )?;
    let bf16_variants: Vec<_> = gemm_tc::gemm_bf16::variants()
        .into_iter()
        .filter(|c| c.ALIGNED)
        .collect();
    let bf16_names: Vec<(String, u32)> = bf16_variants
        .iter()
        .map(|c| (format!("{c:?}"), c.STAGES))
        .collect();
    bench_gemm_tc::<bf16>(
        rt,
        size,
        only,
        GemmPrecision::Bf16,
        &bf16_names,
        &|rt, i, a, b, c, dims| {
            gemm_tc::gemm_bf16_with(rt, bf16_variants[i], a, b, c, dims, 1.0, 0.0)
        },
    )
}

/// The variants (debug name, stages) of one 16-bit GEMM at `size`^3 (A
/// row-major, B column-major) whose name holds `only`, then the best beside
/// cuBLAS (same types, f32 accumulation), alternating, then the best per
/// pipeline depth.
fn bench_gemm_tc<T: Half>(
    rt: &Runtime,
    size: usize,
    only: &str,
    precision: GemmPrecision,
    variants: &[(String, u32)],
    launch: &Launch<'_, T>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let mut values = |n: usize| -> Vec<T> { inputs.f32s(n).into_iter().map(T::from_f32).collect() };
    let a = rt.upload(&values(size * size))?;
    let b = rt.upload(&values(size * size))?;
    let mut c: DeviceBuffer<T> = rt.alloc_zeroed(size * size)?;
    let s = size as u32;
    let kind = precision.name();
    println!("\n{kind} GEMM {size}^3 (A row-major, B column-major), every 16-byte-copy variant (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for (index, (name, stages)) in variants
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| name.contains(only))
    {
        let ms = median_ms(rt, 2, 10, |rt| launch(rt, index, &a, &b, &mut c, (s, s, s)))?;
        println!(
            "  {name:<72} {ms:>8.3} ms {:>7.2} TFLOP/s",
            tflops(size, ms)
        );
        results.push((ms, index, *stages));
    }
    results.sort_by(|x, y| x.0.total_cmp(&y.0));
    let &(_, best, _) = results.first().ok_or("no variant matched")?;

    let mut reference: DeviceBuffer<T> = rt.alloc_zeroed(size * size)?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            launch(rt, best, &a, &b, &mut c, (s, s, s))
        })?);
        theirs.push(median_ms(rt, 3, 20, |rt| {
            rt.cublas_gemm(
                precision,
                (size, size, size),
                (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
                &a,
                &b,
                &mut reference,
            )
        })?);
    }
    ours.sort_by(f32::total_cmp);
    theirs.sort_by(f32::total_cmp);
    let (ours, theirs) = (ours[2], theirs[2]);
    let cublas_result: Vec<f64> = rt
        .download(&reference)?
        .into_iter()
        .map(T::to_f64)
        .collect();
    let ours_result: Vec<f32> = rt
        .download(&c)?
        .into_iter()
        .map(|x| x.to_f64() as f32)
        .collect();
    let d = deviation(&ours_result, &cublas_result);
    println!("\n| kernel | ms | TFLOP/s | vs cuBLAS |");
    println!("|---|---|---|---|");
    println!(
        "| warpforge {kind} GEMM {} | {ours:.3} | {:.1} | {:.3}x |",
        variants[best].0,
        tflops(size, ours),
        theirs / ours
    );
    println!(
        "| cuBLAS GemmEx {kind} (f32 accumulation) | {theirs:.3} | {:.1} | 1.000x |",
        tflops(size, theirs)
    );
    println!("\nwarpforge vs cuBLAS result: {d}");
    // Both round f32 sums of the same products to the output type; summation orders differ.
    let tolerance = if precision == GemmPrecision::F16 {
        1e-3
    } else {
        8e-3
    };
    if !d.passes(tolerance) {
        return Err(format!("the {kind} GEMM disagrees with cuBLAS: {d}").into());
    }

    println!("\n| STAGES | best variant | ms | TFLOP/s |");
    println!("|---|---|---|---|");
    for stages in 1..=5 {
        if let Some((ms, index, _)) = results.iter().find(|r| r.2 == stages) {
            println!(
                "| {stages} | {} | {ms:.3} | {:.1} |",
                variants[*index].0,
                tflops(size, *ms)
            );
        }
    }
    Ok(())
}

/// Every `stream_scale` variant on `n` f32 (read once, written once), then
/// the best beside a device-to-device copy of the same buffers
/// (`cuMemcpyDtoD`), alternating; bandwidth counts bytes read plus written.
fn bench_stream(rt: &Runtime, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new(run_seed());
    let x = rt.upload(&inputs.f32s(n))?;
    let mut y: DeviceBuffer<f32> = rt.alloc_zeroed(n)?;
    let bytes = 2.0 * 4.0 * n as f64;
    let gbps = |ms: f32| bytes / (ms as f64 * 1e-3) / 1e9;
    println!("\nstream_scale, {n} f32 (median of 10 after 2 warm-ups):");
    let mut results = Vec::new();
    for consts in stream::stream_scale::variants() {
        let ms = median_ms(rt, 2, 10, |rt| {
            stream::stream_scale_with(rt, consts, &x, &mut y, 1.5)
        })?;
        println!(
            "  {:<40} {ms:>8.3} ms {:>8.1} GB/s",
            format!("{consts:?}"),
            gbps(ms)
        );
        results.push((ms, consts));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let best = results[0].1;
    let (mut ours, mut copies) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        ours.push(median_ms(rt, 3, 20, |rt| {
            stream::stream_scale_with(rt, best, &x, &mut y, 1.5)
        })?);
        copies.push(median_ms(rt, 3, 20, |rt| rt.copy(&x, &mut y))?);
    }
    ours.sort_by(f32::total_cmp);
    copies.sort_by(f32::total_cmp);
    let (ours, copy) = (ours[2], copies[2]);
    println!("\n| kernel | ms | GB/s (read + written) | vs copy |");
    println!("|---|---|---|---|");
    println!(
        "| stream_scale {best:?} | {ours:.3} | {:.1} | {:.3}x |",
        gbps(ours),
        copy / ours
    );
    println!("| cuMemcpyDtoD | {copy:.3} | {:.1} | 1.000x |", gbps(copy));
    println!("\n| STAGES | best variant | ms | GB/s |");
    println!("|---|---|---|---|");
    for stages in 1..=5 {
        if let Some((ms, consts)) = results.iter().find(|(_, c)| c.STAGES == stages) {
            println!("| {stages} | {consts:?} | {ms:.3} | {:.1} |", gbps(*ms));
        }
    }
    Ok(())
}
