//! [`OwnInputs`]: the tuning workload of a kernel's tuned launch, made of
//! the call's own arguments.
//!
//! The call's outputs (its `&mut [T]` views) are saved on the device first.
//! The reference is the heuristic default's result on them; before each
//! candidate is verified the outputs are written back, so every candidate
//! starts from the call's data (a kernel that updates its output in place
//! sees what the caller passed), and after tuning they are written back once
//! more, so the call itself then runs on the caller's data: tuning never
//! changes what the call computes.

use half::{bf16, f16};
use warpforge_codegen::ir::Scalar;

use super::family::Candidate;
use super::testbed::Workload;
use crate::buffer::{ArgKind, Grid, KernelArg, MemoryRef};
use crate::runtime::Backend;
use crate::{Error, Runtime};

/// A device copy of one output view's bytes.
enum SavedBytes {
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaSlice<u8>),
    #[cfg(feature = "wgpu")]
    Wgpu(crate::wgpu_backend::WgpuBuffer),
    Interpreter(Vec<u8>),
}

/// One output of the call: which argument, its saved bytes and the
/// reference's result.
struct Output {
    arg: usize,
    elem: Scalar,
    len: usize,
    saved: SavedBytes,
    reference: Vec<u8>,
}

/// The tuning inputs of one tuned launch: the call's arguments, with its
/// outputs saved and restored around each verification and after tuning.
pub(crate) struct OwnInputs<'w, 'a> {
    args: &'w mut [KernelArg<'a>],
    grid: &'w dyn Fn(&[i64]) -> Grid,
    outputs: Vec<Output>,
    /// Relative to each output's largest magnitude; `None`: per element type.
    tolerance: Option<f64>,
}

impl<'w, 'a> OwnInputs<'w, 'a> {
    /// Saves the call's outputs, runs `reference` on them and reads its
    /// result, and writes the outputs back.
    pub(crate) fn new(
        rt: &Runtime,
        reference: &Candidate,
        grid: &'w dyn Fn(&[i64]) -> Grid,
        args: &'w mut [KernelArg<'a>],
        tolerance: Option<f64>,
    ) -> Result<OwnInputs<'w, 'a>, Error> {
        let mut outputs = Vec::new();
        for (index, arg) in args.iter().enumerate() {
            if let ArgKind::Buffer {
                elem,
                len,
                offset_bytes,
                memory,
            } = &arg.kind
            {
                if !memory.is_mutable() {
                    continue;
                }
                let saved = save(rt, memory, *offset_bytes, len * elem.size_bytes() as usize)?;
                outputs.push(Output {
                    arg: index,
                    elem: *elem,
                    len: *len,
                    saved,
                    reference: Vec::new(),
                });
            }
        }
        let mut inputs = OwnInputs {
            args,
            grid,
            outputs,
            tolerance,
        };
        inputs.run(rt, reference)?;
        let results = inputs.read_outputs(rt)?;
        for (output, result) in inputs.outputs.iter_mut().zip(results) {
            output.reference = result;
        }
        inputs.restore(rt)?;
        Ok(inputs)
    }

    fn run(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<(), Error> {
        let grid = (self.grid)(&candidate.consts);
        rt.launch(candidate.def, &candidate.consts, grid, self.args)
    }

    /// Writes every saved output back.
    fn restore(&mut self, rt: &Runtime) -> Result<(), Error> {
        for output in &self.outputs {
            let ArgKind::Buffer {
                offset_bytes,
                memory,
                ..
            } = &mut self.args[output.arg].kind
            else {
                unreachable!("outputs are buffer arguments")
            };
            restore(rt, &output.saved, memory, *offset_bytes)?;
        }
        Ok(())
    }

    /// Each output's bytes as the last launch left them.
    fn read_outputs(&self, rt: &Runtime) -> Result<Vec<Vec<u8>>, Error> {
        self.outputs
            .iter()
            .map(|output| {
                let ArgKind::Buffer {
                    offset_bytes,
                    memory,
                    ..
                } = &self.args[output.arg].kind
                else {
                    unreachable!("outputs are buffer arguments")
                };
                let bytes = output.len * output.elem.size_bytes() as usize;
                let copy = save(rt, memory, *offset_bytes, bytes)?;
                let mut read = download(rt, &copy)?;
                read.truncate(bytes);
                Ok(read)
            })
            .collect()
    }
}

impl Workload for OwnInputs<'_, '_> {
    /// One: the call's own inputs. Timed launches may find them in L2 as the
    /// call itself will.
    fn input_sets(&self) -> usize {
        1
    }

    fn launch(&mut self, rt: &Runtime, candidate: &Candidate, _set: usize) -> Result<(), Error> {
        self.run(rt, candidate)
    }

    fn verify(&mut self, rt: &Runtime, candidate: &Candidate) -> Result<Result<(), String>, Error> {
        self.restore(rt)?;
        self.run(rt, candidate)?;
        let results = self.read_outputs(rt)?;
        for (output, result) in self.outputs.iter().zip(&results) {
            if let Err(why) = compare(output.elem, &output.reference, result, self.tolerance) {
                return Ok(Err(format!("output {} {why}", output.arg)));
            }
        }
        Ok(Ok(()))
    }

    fn finish(&mut self, rt: &Runtime) -> Result<(), Error> {
        self.restore(rt)
    }
}

fn save(
    rt: &Runtime,
    memory: &MemoryRef<'_>,
    offset: u64,
    bytes: usize,
) -> Result<SavedBytes, Error> {
    match (&rt.backend, memory) {
        #[cfg(feature = "cuda")]
        (Backend::Cuda(cuda), MemoryRef::Cuda(m)) => {
            cuda.save_bytes(*m, offset, bytes).map(SavedBytes::Cuda)
        }
        #[cfg(feature = "cuda")]
        (Backend::Cuda(cuda), MemoryRef::CudaMut(m)) => {
            cuda.save_bytes(&**m, offset, bytes).map(SavedBytes::Cuda)
        }
        #[cfg(feature = "wgpu")]
        (Backend::Wgpu(wgpu), MemoryRef::Wgpu(b)) => {
            wgpu.save_bytes(b, offset, bytes).map(SavedBytes::Wgpu)
        }
        #[cfg(feature = "wgpu")]
        (Backend::Wgpu(wgpu), MemoryRef::WgpuMut(b)) => {
            wgpu.save_bytes(b, offset, bytes).map(SavedBytes::Wgpu)
        }
        (Backend::Interpreter(_), MemoryRef::Interpreter(b)) => {
            Ok(interpreter_bytes(b, offset, bytes))
        }
        (Backend::Interpreter(_), MemoryRef::InterpreterMut(b)) => {
            Ok(interpreter_bytes(b, offset, bytes))
        }
        #[allow(unreachable_patterns)]
        _ => Err(foreign()),
    }
}

fn restore(
    rt: &Runtime,
    saved: &SavedBytes,
    memory: &mut MemoryRef<'_>,
    offset: u64,
) -> Result<(), Error> {
    match (&rt.backend, saved, memory) {
        #[cfg(feature = "cuda")]
        (Backend::Cuda(cuda), SavedBytes::Cuda(s), MemoryRef::CudaMut(m)) => {
            cuda.restore_bytes(s, &mut **m, offset)
        }
        #[cfg(feature = "wgpu")]
        (Backend::Wgpu(wgpu), SavedBytes::Wgpu(s), MemoryRef::WgpuMut(b)) => {
            wgpu.restore_bytes(s, b, offset)
        }
        (Backend::Interpreter(_), SavedBytes::Interpreter(s), MemoryRef::InterpreterMut(b)) => {
            let start = offset as usize;
            b.bytes[start..start + s.len()].copy_from_slice(s);
            Ok(())
        }
        #[allow(unreachable_patterns)]
        _ => Err(foreign()),
    }
}

fn download(rt: &Runtime, saved: &SavedBytes) -> Result<Vec<u8>, Error> {
    match (&rt.backend, saved) {
        #[cfg(feature = "cuda")]
        (Backend::Cuda(cuda), SavedBytes::Cuda(s)) => cuda.download::<u8>(s),
        #[cfg(feature = "wgpu")]
        (Backend::Wgpu(wgpu), SavedBytes::Wgpu(s)) => Ok(wgpu
            .download::<u32>(s)?
            .into_iter()
            .flat_map(u32::to_le_bytes)
            .collect()),
        (Backend::Interpreter(_), SavedBytes::Interpreter(s)) => Ok(s.clone()),
        #[allow(unreachable_patterns)]
        _ => Err(foreign()),
    }
}

/// A copy of `bytes` bytes of an interpreter buffer from `offset`.
fn interpreter_bytes(
    buffer: &crate::interpreter::InterpreterBuffer,
    offset: u64,
    bytes: usize,
) -> SavedBytes {
    let start = offset as usize;
    SavedBytes::Interpreter(buffer.bytes[start..start + bytes].to_vec())
}

fn foreign() -> Error {
    Error::Buffer(
        "a buffer of the tuned call belongs to another backend's runtime: create every buffer \
         with the runtime the kernel is tuned on"
            .into(),
    )
}

/// The default tolerance of an element type, relative to an output's
/// largest magnitude: a few units in the last place of a sum's rounding, as
/// variants that split a reduction differently round differently. Integers
/// (and bool) compare exactly.
fn default_tolerance(elem: Scalar) -> Option<f64> {
    match elem {
        Scalar::F64 => Some(1e-10),
        Scalar::F32 => Some(1e-4),
        Scalar::F16 => Some(1e-2),
        Scalar::Bf16 => Some(5e-2),
        _ => None,
    }
}

/// Whether `result` matches `reference` (both the bytes of `elem` values):
/// integers exactly; floats where both are NaN, equal (infinities too), or
/// within `tolerance` (else the type's) times the reference's largest finite
/// magnitude. The error names the first element that differs.
fn compare(
    elem: Scalar,
    reference: &[u8],
    result: &[u8],
    tolerance: Option<f64>,
) -> Result<(), String> {
    let size = elem.size_bytes() as usize;
    let Some(type_tolerance) = default_tolerance(elem) else {
        return match reference
            .chunks_exact(size)
            .zip(result.chunks_exact(size))
            .position(|(r, x)| r != x)
        {
            None => Ok(()),
            Some(i) => Err(format!(
                "differs from the default variant's at element {i} (exact comparison of {})",
                elem.name()
            )),
        };
    };
    let value = |bytes: &[u8]| -> f64 {
        match elem {
            Scalar::F64 => f64::from_le_bytes(bytes.try_into().expect("8 bytes")),
            Scalar::F32 => f64::from(f32::from_le_bytes(bytes.try_into().expect("4 bytes"))),
            Scalar::F16 => f16::from_le_bytes(bytes.try_into().expect("2 bytes")).to_f64(),
            Scalar::Bf16 => bf16::from_le_bytes(bytes.try_into().expect("2 bytes")).to_f64(),
            _ => unreachable!("only float types have a tolerance"),
        }
    };
    let scale = reference
        .chunks_exact(size)
        .map(value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let allowed = tolerance.unwrap_or(type_tolerance) * scale;
    for (i, (r, x)) in reference
        .chunks_exact(size)
        .zip(result.chunks_exact(size))
        .enumerate()
    {
        let (r, x) = (value(r), value(x));
        let same = (r.is_nan() && x.is_nan()) || r == x || (r - x).abs() <= allowed;
        if !same {
            return Err(format!(
                "differs from the default variant's at element {i}: {x} against {r}, more than \
                 {allowed:e} apart (tolerance {} of the largest magnitude {scale:e}; \
                 `tune_tolerance(..)` sets it)",
                tolerance.unwrap_or(type_tolerance)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn floats_compare_within_the_tolerance_of_the_largest_magnitude() {
        let reference = f32_bytes(&[1000.0, 0.001, f32::NAN, f32::INFINITY]);
        let close = f32_bytes(&[1000.05, 0.05, f32::NAN, f32::INFINITY]);
        assert_eq!(compare(Scalar::F32, &reference, &close, None), Ok(()));
        let far = f32_bytes(&[1000.0, 0.2, f32::NAN, f32::INFINITY]);
        let err = compare(Scalar::F32, &reference, &far, None).unwrap_err();
        assert!(err.contains("element 1") && err.contains("0.2"), "{err}");
        assert_eq!(compare(Scalar::F32, &reference, &far, Some(0.5)), Ok(()));
        let nan = f32_bytes(&[1000.0, 0.001, 1.0, f32::INFINITY]);
        assert!(compare(Scalar::F32, &reference, &nan, None).is_err());
        let sign = f32_bytes(&[1000.0, 0.001, f32::NAN, f32::NEG_INFINITY]);
        assert!(compare(Scalar::F32, &reference, &sign, None).is_err());
    }

    #[test]
    fn integers_compare_exactly() {
        let reference: Vec<u8> = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let other: Vec<u8> = [1i32, 2, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            compare(Scalar::I32, &reference, &reference, Some(0.5)),
            Ok(())
        );
        let err = compare(Scalar::I32, &reference, &other, Some(0.5)).unwrap_err();
        assert!(err.contains("element 2") && err.contains("exact"), "{err}");
    }

    #[test]
    fn half_types_have_wider_tolerances() {
        let bytes = |values: &[f32]| -> Vec<u8> {
            values
                .iter()
                .flat_map(|&v| f16::from_f32(v).to_le_bytes())
                .collect()
        };
        assert_eq!(
            compare(Scalar::F16, &bytes(&[1.0, 2.0]), &bytes(&[1.0, 2.01]), None),
            Ok(())
        );
        assert!(compare(Scalar::F16, &bytes(&[1.0, 2.0]), &bytes(&[1.0, 2.1]), None).is_err());
    }
}
