//! Generated programs on a device (issue 21): the random SIMT kernels of
//! `codegen/tests/genprog` (the same generator, included by path, so a seed
//! names the same programs here and in `codegen/tests/generated_programs.rs`)
//! launched through a [`Runtime`], each slice compared with the reference
//! interpreter's bit for bit. `tests/tests/generated_lavapipe.rs` runs them
//! on lavapipe in the CPU tier; `gpu-check --only generated` through CUDA.
//!
//! A program the runtime's adapter cannot run (warp shuffles without
//! 32-lane subgroups, f16 without `SHADER_F16`), or whose float arithmetic
//! reaches an infinity or NaN on a WGSL backend (WGSL leaves those to the
//! implementation: `genprog::Floats`), is counted as skipped, with the
//! reason; a launch the runtime refuses anyway is a failure. A failing program is
//! shrunk on the device and reported with the JSON that makes it a
//! regression case under `codegen/tests/generated/`, where the CPU tier's
//! files run every case too.

#[path = "../../codegen/tests/genprog/mod.rs"]
mod genprog;

use std::time::Instant;

pub use genprog::{count, run_seed};

use genprog::{Floats, Program};
use proptest::strategy::{Strategy, ValueTree};
use warpforge::{DeviceBackend, DeviceBuffer, DeviceScalar, Grid, KernelArg, Runtime};
use warpforge_codegen::interp::{Arg, Buffer, ErrorKind};
use warpforge_codegen::ir::{Literal, ParamType, Scalar};

use crate::report::Report;

/// Failures shrunk and reported per run: shrinking launches hundreds of
/// programs.
const REPORTED: usize = 3;

/// Runs `count` programs of `seed` and the checked-in regression cases on
/// `rt`. One report line for the regression cases, one per failing program
/// (shrunk, the first `REPORTED`), and one for the run's tally.
pub fn check_generated(rt: &Runtime, seed: u64, count: usize, report: &mut Report) {
    let device = format!("{} ({})", rt.device().name, rt.backend_name());
    let mut regression = Vec::new();
    let mut skipped_cases = 0;
    for (name, program) in genprog::regression_cases() {
        match run(rt, &program) {
            Outcome::Agrees => {}
            Outcome::Skipped(_) => skipped_cases += 1,
            Outcome::Differs(failure) => regression.push(format!("{name}: {failure}")),
        }
    }
    report.check(
        "generated programs, regression cases",
        regression.is_empty(),
        if regression.is_empty() {
            format!("agree with the interpreter on {device} ({skipped_cases} skipped)")
        } else {
            regression.join("\n")
        },
    );

    let started = Instant::now();
    let mut runner = genprog::runner(seed);
    let strategy = genprog::choices();
    let (mut agreed, mut failed) = (0, 0);
    let mut skipped: Vec<(&'static str, usize)> = Vec::new();
    for i in 0..count {
        let mut tree = strategy
            .new_tree(&mut runner)
            .expect("choices always generate");
        let name = format!("gen{i}");
        let program = Program::generate(&name, &tree.current());
        let first = match run(rt, &program) {
            Outcome::Agrees => {
                agreed += 1;
                continue;
            }
            Outcome::Skipped(reason) => {
                match skipped.iter_mut().find(|(r, _)| *r == reason) {
                    Some((_, n)) => *n += 1,
                    None => skipped.push((reason, 1)),
                }
                continue;
            }
            Outcome::Differs(failure) => failure,
        };
        failed += 1;
        let what = format!("generated program {i} of seed {seed}");
        if failed > REPORTED {
            report.check(&what, false, first);
            continue;
        }
        let (shrunk, failure) = genprog::shrink(&mut tree, &name, first, |p| match run(rt, p) {
            Outcome::Differs(failure) => Some(failure),
            Outcome::Agrees | Outcome::Skipped(_) => None,
        });
        report.check(&what, false, genprog::report(seed, i, &shrunk, &failure));
    }
    let skipped = skipped
        .iter()
        .map(|(reason, n)| format!(", {n} skipped ({reason})"))
        .collect::<String>();
    report.check(
        &format!("generated programs, seed {seed} (replay with WARPFORGE_GEN_SEED={seed})"),
        failed == 0,
        format!(
            "{agreed} of {count} agree with the interpreter on {device}, {failed} differ{skipped} \
             ({:.1}s)",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// What one program's run on a device came to.
enum Outcome {
    Agrees,
    /// Not compared, and why.
    Skipped(&'static str),
    /// What differs, or why it could not run.
    Differs(String),
}

/// Runs `program` on `rt` and compares every slice with the interpreter's,
/// under the device's float semantics.
fn run(rt: &Runtime, program: &Program) -> Outcome {
    let floats = match &rt.device().backend {
        DeviceBackend::Wgpu(wgpu) => {
            if program.uses_subgroups && wgpu.subgroup_sizes != Some((32, 32)) {
                return Outcome::Skipped("warp shuffles or lane_id, and no 32-lane subgroups");
            }
            let f16 = program.def.ir.params.iter().any(|p| match p.ty {
                ParamType::Scalar(ty) | ParamType::Slice { elem: ty, .. } => ty == Scalar::F16,
            });
            if f16 && !wgpu.shader_f16 {
                return Outcome::Skipped("f16, and no SHADER_F16");
            }
            Floats::Wgsl
        }
        _ => Floats::Ieee,
    };
    let expected = match program.interpret(floats) {
        Ok(args) => args,
        Err(e) if e.kind == ErrorKind::NonFinite => {
            return Outcome::Skipped(
                "an infinity or NaN in float arithmetic, which WGSL leaves open",
            )
        }
        Err(e) => return Outcome::Differs(format!("the interpreter: {e}")),
    };
    let got = match launch(rt, program) {
        Ok(args) => args,
        Err(e) => return Outcome::Differs(format!("the launch: {e}")),
    };
    match genprog::compare(program, &expected, &got, floats) {
        Ok(()) => Outcome::Agrees,
        Err(diff) => Outcome::Differs(diff),
    }
}

/// The program's arguments after one launch on `rt`.
fn launch(rt: &Runtime, program: &Program) -> Result<Vec<Arg>, warpforge::Error> {
    let args = program.args();
    let mut buffers = args
        .iter()
        .map(|arg| match arg {
            Arg::Slice(elements) => DeviceSlice::upload(rt, elements).map(Some),
            Arg::Scalar(_) => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut kernel_args: Vec<KernelArg<'_>> = program
        .def
        .ir
        .params
        .iter()
        .zip(&args)
        .zip(&mut buffers)
        .map(|((param, arg), buffer)| match (param.ty, arg, buffer) {
            (ParamType::Scalar(ty), Arg::Scalar(value), _) => scalar(ty, *value),
            (ParamType::Slice { mutable, .. }, _, Some(buffer)) => buffer.arg(mutable),
            _ => unreachable!("a program's arguments follow its parameters"),
        })
        .collect();
    rt.launch(
        &program.def,
        &[],
        Grid::new(program.grid, program.block),
        &mut kernel_args,
    )?;
    drop(kernel_args);
    args.into_iter()
        .zip(buffers)
        .map(|(arg, buffer)| match buffer {
            Some(buffer) => buffer.download(rt).map(Arg::Slice),
            None => Ok(arg),
        })
        .collect()
}

/// A scalar argument of the generated programs' types.
fn scalar<'a>(ty: Scalar, value: Literal) -> KernelArg<'a> {
    match (ty, value) {
        (Scalar::Bool, Literal::Bool(v)) => KernelArg::scalar(v),
        (Scalar::I32, Literal::Int(v)) => KernelArg::scalar(v as i32),
        (Scalar::U32, Literal::Int(v)) => KernelArg::scalar(v as u32),
        (Scalar::F32, Literal::Float(v)) => KernelArg::scalar(v as f32),
        (Scalar::F16, Literal::Float(v)) => {
            KernelArg::scalar(warpforge_codegen::eval::f16_from_f64(v))
        }
        _ => unreachable!(
            "generated programs have no {} = {value:?} scalars",
            ty.name()
        ),
    }
}

/// A slice argument on the device, of one of the generated programs' types.
enum DeviceSlice {
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<warpforge::f16>),
}

impl DeviceSlice {
    fn upload(rt: &Runtime, elements: &Buffer) -> Result<DeviceSlice, warpforge::Error> {
        Ok(match elements {
            Buffer::I32(v) => DeviceSlice::I32(rt.upload(v)?),
            Buffer::U32(v) => DeviceSlice::U32(rt.upload(v)?),
            Buffer::F32(v) => DeviceSlice::F32(rt.upload(v)?),
            Buffer::F16(v) => DeviceSlice::F16(rt.upload(v)?),
            other => unreachable!("generated programs have no {:?} slices", other.elem()),
        })
    }

    fn arg(&mut self, mutable: bool) -> KernelArg<'_> {
        fn of<T: DeviceScalar>(buffer: &mut DeviceBuffer<T>, mutable: bool) -> KernelArg<'_> {
            if mutable {
                KernelArg::buffer_mut(buffer)
            } else {
                KernelArg::buffer(&*buffer)
            }
        }
        match self {
            DeviceSlice::I32(b) => of(b, mutable),
            DeviceSlice::U32(b) => of(b, mutable),
            DeviceSlice::F32(b) => of(b, mutable),
            DeviceSlice::F16(b) => of(b, mutable),
        }
    }

    fn download(&self, rt: &Runtime) -> Result<Buffer, warpforge::Error> {
        Ok(match self {
            DeviceSlice::I32(b) => Buffer::I32(rt.download(b)?),
            DeviceSlice::U32(b) => Buffer::U32(rt.download(b)?),
            DeviceSlice::F32(b) => Buffer::F32(rt.download(b)?),
            DeviceSlice::F16(b) => Buffer::F16(rt.download(b)?),
        })
    }
}
