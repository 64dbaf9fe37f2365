//! Generated programs (issue 21) through the runtime on a wgpu adapter
//! (lavapipe in CI) against the interpreter, on the same random inputs:
//! every output and atomic target equal, integers exactly and floats bit for
//! bit (NaN against any NaN). The programs are `codegen/tests/genprog`'s, the
//! seed `WARPFORGE_GEN_SEED` or the clock, printed; `PROGRAMS` per run
//! (`WARPFORGE_GEN_LAVAPIPE_COUNT` overrides): lavapipe compiles every
//! pipeline with LLVM, which bounds the count (see `PROGRAMS`). Programs with
//! warp shuffles or `lane_id()` are skipped on an adapter without subgroups
//! of 32 lanes (lavapipe's follow the host's vector width), and f16 ones on
//! an adapter without `SHADER_F16`; the counts are printed. A failure is
//! shrunk and reported with a regression case for `codegen/tests/generated/`,
//! whose cases run here too.

#[path = "../../codegen/tests/genprog/mod.rs"]
mod genprog;
#[path = "../../runtime/tests/common/mesa.rs"]
mod mesa;

use std::time::Instant;

use genprog::Program;
use proptest::strategy::{Strategy, ValueTree};
use warpforge::{f16, BackendKind, DeviceBackend, DeviceBuffer, Grid, KernelArg, Runtime};
use warpforge_codegen::interp::{Arg, Buffer};
use warpforge_codegen::ir::{Literal, ParamType, Scalar};

/// Programs per run: about 25 ms each on lavapipe (a pipeline compile, five
/// uploads, a launch, four downloads) on 2 cores.
const PROGRAMS: usize = 1500;

/// Failures shrunk and reported per run.
const REPORTED: usize = 3;

fn lavapipe() -> Runtime {
    mesa::quiet_mesa();
    let rt = Runtime::with_backend(BackendKind::Wgpu).unwrap_or_else(|e| {
        panic!(
            "the wgpu tier needs a Vulkan, Metal or DX12 adapter; on Linux without a GPU install \
             Mesa's lavapipe: apt-get install mesa-vulkan-drivers libvulkan1\n{e}"
        )
    });
    mesa::announce_adapter(&rt.backend_name(), &rt.device().name);
    rt
}

/// Whether the adapter runs `program`: warp operations need subgroups of
/// 32 lanes, f16 needs `SHADER_F16`.
fn runs(rt: &Runtime, program: &Program) -> bool {
    let DeviceBackend::Wgpu(info) = &rt.device().backend else {
        unreachable!("the runtime was asked for wgpu")
    };
    let uses_f16 = program
        .def
        .ir
        .params
        .iter()
        .any(|p| p.ty == ParamType::Scalar(Scalar::F16));
    (info.subgroup_sizes == Some((32, 32)) || !program.uses_subgroups)
        && (info.shader_f16 || !uses_f16)
}

/// A slice on the device, typed.
enum Slice {
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<f16>),
}

/// Runs `program` on `rt` with the interpreter's inputs; the arguments after
/// the launch, as the interpreter returns them.
fn run(rt: &Runtime, program: &Program) -> Result<Vec<Arg>, String> {
    let args = program.args();
    let err = |e: warpforge::Error| e.to_string();
    let mut slices = Vec::new();
    for arg in &args {
        slices.push(match arg {
            Arg::Slice(Buffer::I32(v)) => Some(Slice::I32(rt.upload(v).map_err(err)?)),
            Arg::Slice(Buffer::U32(v)) => Some(Slice::U32(rt.upload(v).map_err(err)?)),
            Arg::Slice(Buffer::F32(v)) => Some(Slice::F32(rt.upload(v).map_err(err)?)),
            Arg::Slice(Buffer::F16(v)) => Some(Slice::F16(rt.upload(v).map_err(err)?)),
            Arg::Slice(other) => unreachable!("no {:?} slices", other.elem()),
            Arg::Scalar(_) => None,
        });
    }
    let params = &program.def.ir.params;
    let mut launch_args: Vec<KernelArg<'_>> = Vec::new();
    for ((param, arg), slice) in params.iter().zip(&args).zip(slices.iter_mut()) {
        launch_args.push(match (param.ty, arg, slice) {
            (ParamType::Scalar(ty), Arg::Scalar(lit), None) => scalar(ty, *lit),
            (ParamType::Slice { mutable, .. }, _, Some(slice)) => match (slice, mutable) {
                (Slice::I32(b), true) => KernelArg::buffer_mut(b),
                (Slice::U32(b), true) => KernelArg::buffer_mut(b),
                (Slice::F32(b), true) => KernelArg::buffer_mut(b),
                (Slice::F16(b), true) => KernelArg::buffer_mut(b),
                (Slice::I32(b), false) => KernelArg::buffer(&*b),
                (Slice::U32(b), false) => KernelArg::buffer(&*b),
                (Slice::F32(b), false) => KernelArg::buffer(&*b),
                (Slice::F16(b), false) => KernelArg::buffer(&*b),
            },
            _ => unreachable!("arguments follow the parameters"),
        });
    }
    rt.launch(
        &program.def,
        &[],
        Grid::new(program.grid, program.block),
        &mut launch_args,
    )
    .map_err(err)?;
    drop(launch_args);
    args.into_iter()
        .zip(slices)
        .map(|(arg, slice)| {
            Ok(match slice {
                None => arg,
                Some(Slice::I32(b)) => Arg::from(rt.download(&b).map_err(err)?),
                Some(Slice::U32(b)) => Arg::from(rt.download(&b).map_err(err)?),
                Some(Slice::F32(b)) => Arg::from(rt.download(&b).map_err(err)?),
                Some(Slice::F16(b)) => Arg::from(rt.download(&b).map_err(err)?),
            })
        })
        .collect()
}

fn scalar(ty: Scalar, lit: Literal) -> KernelArg<'static> {
    match (ty, lit) {
        (Scalar::I32, Literal::Int(v)) => KernelArg::scalar(v as i32),
        (Scalar::U32, Literal::Int(v)) => KernelArg::scalar(v as u32),
        (Scalar::F32, Literal::Float(v)) => KernelArg::scalar(v as f32),
        (Scalar::F16, Literal::Float(v)) => KernelArg::scalar(f16::from_f64(v)),
        other => unreachable!("no {other:?} scalars"),
    }
}

/// The interpreter's results against the adapter's; the difference, if any.
fn check(rt: &Runtime, program: &Program) -> Option<String> {
    let expected = match program.interpret() {
        Ok(args) => args,
        Err(e) => return Some(format!("the interpreter: {e}")),
    };
    let got = match run(rt, program) {
        Ok(args) => args,
        Err(e) => return Some(format!("the launch on {}: {e}", rt.device().name)),
    };
    genprog::compare(program, &expected, &got)
        .err()
        .map(|diff| {
            format!(
                "{} disagrees with the interpreter:\n{diff}",
                rt.device().name
            )
        })
}

#[test]
fn generated_programs_on_lavapipe_equal_the_interpreter() {
    let rt = lavapipe();
    let seed = genprog::run_seed();
    let count = genprog::count("WARPFORGE_GEN_LAVAPIPE_COUNT", PROGRAMS);
    let started = Instant::now();
    let mut runner = genprog::runner(seed);
    let strategy = genprog::choices();
    let mut failures = Vec::new();
    let mut skipped = 0;
    for i in 0..count {
        let mut tree = strategy
            .new_tree(&mut runner)
            .expect("choices always generate");
        let name = format!("gen{i}");
        let program = Program::generate(&name, &tree.current());
        if !runs(&rt, &program) {
            skipped += 1;
            continue;
        }
        if let Some(first) = check(&rt, &program) {
            if failures.len() < REPORTED {
                let (program, failure) = genprog::shrink(&mut tree, &name, first, |p| {
                    runs(&rt, p).then(|| check(&rt, p)).flatten()
                });
                failures.push(genprog::report(seed, i, &program, &failure));
            } else {
                failures.push(format!("program {i} fails too"));
            }
        }
    }
    println!(
        "generated programs on {}: {count}, {} run against the interpreter, {skipped} skipped \
         (warp shuffles or f16 the adapter lacks), {} failed; {:.1}s",
        rt.device().name,
        count - skipped,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} generated programs failed on {} (seed {seed}):\n\n{}",
        failures.len(),
        rt.device().name,
        failures.join("\n\n")
    );
}

#[test]
fn regression_cases_on_lavapipe_equal_the_interpreter() {
    let rt = lavapipe();
    for (name, program) in genprog::regression_cases() {
        if !runs(&rt, &program) {
            continue;
        }
        if let Some(failure) = check(&rt, &program) {
            panic!("regression case {name}:\n{}\n{failure}", program.def.ir);
        }
    }
}
