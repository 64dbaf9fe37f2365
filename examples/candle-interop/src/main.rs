//! warpforge's tuned GEMM inside a candle program, on candle's own CUDA
//! tensors and stream, with no copy: `relu(a @ b + bias)` as a candle custom
//! op ([`FusedLinearRelu`]) whose CUDA forward is one launch of warpforge's
//! GEMM with its bias and ReLU epilogue, checked against candle's `matmul`,
//! `broadcast_add` and `relu` in f32 and f16 at several shapes (a ragged one
//! among them).
//!
//! That no copy is made is checked, not assumed: for each operand, the device
//! address of warpforge's buffer must be that of candle's storage, before and
//! after the launch; the output is memory that candle allocated and filled
//! with NaN, wrapped as the result tensor, and read back through candle.
//!
//! Exit status: 0 when every case passes, 1 when one fails, 2 when no CUDA
//! device can be opened.

use std::cell::Cell;
use std::process::ExitCode;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage};
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Shape, Storage, Tensor};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::f16;
use warpforge::prelude::*;
use warpforge::MatrixLayout;
use warpforge_kernels::gemm_problem::{Activation, GemmProblem};
use warpforge_kernels::tuned::{GemmKind, GemmOutput, TunedGemm, GEMM_F16, GEMM_F32};

/// (m, n, k) of each case: tile-aligned ones, and ragged ones whose edges cut
/// through tiles and whose rows are not 16-byte aligned (f16 with odd n and k).
const SHAPES: [(usize, usize, usize); 4] = [
    (256, 128, 64),
    (1024, 1024, 1024),
    (1000, 999, 333),
    (7, 5, 3),
];

/// Status when no CUDA device can be opened: neither a pass nor a failure.
const NO_GPU_EXIT: u8 = 2;

type BoxError = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let device = match Device::new_cuda(0) {
        Ok(device) => device,
        Err(error) => {
            eprintln!("==================================================================");
            eprintln!("NO GPU: candle could not open CUDA device 0, so nothing was run.");
            eprintln!("  {error}");
            eprintln!("Run this on a machine with an NVIDIA GPU and driver.");
            eprintln!("==================================================================");
            return ExitCode::from(NO_GPU_EXIT);
        }
    };
    match run(&device) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("FAIL: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every case; `Ok(false)` when one failed its checks.
fn run(device: &Device) -> Result<bool, BoxError> {
    let cuda = device.as_cuda_device()?;
    let stream = cuda.cuda_stream();
    // warpforge on candle's stream (and so on its context): its launches are
    // ordered with candle's own kernels with no synchronisation between them.
    let rt = Runtime::cuda_on_stream(stream.clone())?;
    println!(
        "warpforge on {}, on candle's stream {:p}",
        rt.device().name,
        stream.cu_stream()
    );
    let mut failures = Vec::new();
    for case in [DType::F32, DType::F16]
        .into_iter()
        .flat_map(|dtype| SHAPES.map(|dims| Case { dtype, dims }))
    {
        let name = case.name();
        let outcome = match case.dtype {
            DType::F32 => case.run(&rt, device, &GEMM_F32),
            _ => case.run(&rt, device, &GEMM_F16),
        };
        match outcome {
            Ok(report) if report.passed() => println!("PASS {name}: {report}"),
            Ok(report) => {
                println!("FAIL {name}: {report}");
                failures.push(name);
            }
            Err(error) => {
                println!("FAIL {name}: {error}");
                failures.push(name);
            }
        }
    }
    let total = SHAPES.len() * 2;
    println!();
    if failures.is_empty() {
        println!("PASS: all {total} cases match candle, computed in candle's memory on its stream");
    } else {
        println!(
            "FAIL: {} of {total} cases: {}",
            failures.len(),
            failures.join(", ")
        );
    }
    Ok(failures.is_empty())
}

/// One case: a dtype and a shape.
struct Case {
    dtype: DType,
    dims: (usize, usize, usize),
}

/// What one case found.
struct Report {
    /// The largest |warpforge - candle| over its error bound (at most 1 to pass).
    worst_error_ratio: f32,
    /// Outputs that are NaN or infinite: never written, or wrong.
    non_finite: usize,
    /// Operands whose warpforge address differed from candle's storage.
    moved: Vec<String>,
}

impl Report {
    fn passed(&self) -> bool {
        self.worst_error_ratio <= 1.0 && self.non_finite == 0 && self.moved.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "max error {:.3} of the bound, {} non-finite outputs, ",
            self.worst_error_ratio, self.non_finite
        )?;
        if self.moved.is_empty() {
            write!(f, "a, b, bias and the output in candle's memory (no copy)")
        } else {
            write!(f, "copied or moved: {}", self.moved.join("; "))
        }
    }
}

impl Case {
    fn name(&self) -> String {
        let (m, n, k) = self.dims;
        format!("{:?} {m}x{n}x{k}", self.dtype)
    }

    fn run<T: Element>(
        &self,
        rt: &Runtime,
        device: &Device,
        kind: &'static GemmKind<T, T>,
    ) -> Result<Report, BoxError> {
        let (m, n, k) = self.dims;
        // Inputs made by candle on the GPU, uniform in [-1, 1).
        let random = |shape: &[usize]| -> candle_core::Result<Tensor> {
            Tensor::rand(-1f32, 1f32, shape, device)?.to_dtype(self.dtype)
        };
        let (a, b, bias) = (random(&[m, k])?, random(&[k, n])?, random(&[n])?);
        let stream = device.as_cuda_device()?.cuda_stream();
        let before = storage_addresses::<T>([&a, &b, &bias], &stream)?;

        let op = FusedLinearRelu {
            rt,
            gemm: TunedGemm::new(rt, kind)?,
            seen: Cell::new(None),
        };
        let ours = a.apply_op3_no_bwd(&b, &bias, &op)?;
        let reference = a.matmul(&b)?.broadcast_add(&bias)?.relu()?;

        let seen = op
            .seen
            .get()
            .ok_or("candle did not call the op's CUDA forward")?;
        let after = storage_addresses::<T>([&a, &b, &bias], &stream)?;
        let mut moved = Vec::new();
        for (i, name) in ["a", "b", "bias"].iter().enumerate() {
            let (before, warpforge, after) = (before[i], seen.inputs[i], after[i]);
            if before != warpforge || warpforge != after {
                moved.push(format!(
                    "{name}: candle {before:#x} before, warpforge {warpforge:#x}, candle {after:#x} after"
                ));
            }
        }
        let result_address = storage_address::<T>(&ours, &stream)?;
        if result_address != seen.output {
            moved.push(format!(
                "output: warpforge wrote {:#x}, the result tensor is at {result_address:#x}",
                seen.output
            ));
        }

        // The bound: both sides sum k products in f32 (each within k unit
        // roundoffs of the exact sum, relative to the sum of |products|), and
        // round to T: warpforge once, candle after the product and again
        // after the bias.
        let relative = 2.0 * k as f32 * f32::ROUNDOFF + 3.0 * T::ROUNDOFF;
        let abs32 = |t: &Tensor| t.to_dtype(DType::F32)?.abs();
        let magnitude = abs32(&a)?
            .matmul(&abs32(&b)?)?
            .broadcast_add(&abs32(&bias)?)?;
        // Read through candle: the result tensor's own storage.
        let ours = ours.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let reference = reference
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let magnitude = magnitude.flatten_all()?.to_vec1::<f32>()?;
        let mut worst_error_ratio = 0f32;
        let mut non_finite = 0;
        for ((ours, reference), magnitude) in ours.iter().zip(&reference).zip(&magnitude) {
            if !ours.is_finite() {
                non_finite += 1;
                continue;
            }
            // The floor keeps an exact 0 (a ReLU'd output) from dividing by 0.
            let bound = relative * magnitude + f32::MIN_POSITIVE;
            worst_error_ratio = worst_error_ratio.max((ours - reference).abs() / bound);
        }
        Ok(Report {
            worst_error_ratio,
            non_finite,
            moved,
        })
    }
}

/// The element types of the cases: what candle stores and warpforge's GEMM
/// takes and returns.
trait Element: GemmOutput + CudaDType + cudarc::driver::DeviceRepr {
    /// The unit roundoff: half the distance from 1 to the next value.
    const ROUNDOFF: f32;
}
impl Element for f32 {
    const ROUNDOFF: f32 = f32::EPSILON / 2.0;
}
impl Element for f16 {
    const ROUNDOFF: f32 = 1.0 / 2048.0;
}

/// The device address of the storage behind `tensor`, which must start its
/// storage and be laid out densely (as a fresh tensor is).
fn storage_address<T: Element>(tensor: &Tensor, stream: &CudaStream) -> Result<u64, BoxError> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cuda(storage) = &*storage else {
        return Err("the tensor is not on a CUDA device".into());
    };
    check_dense(layout)?;
    let (address, _record) = storage.as_cuda_slice::<T>()?.device_ptr(stream);
    Ok(address)
}

/// [`storage_address`] of each of `tensors`.
fn storage_addresses<T: Element>(
    tensors: [&Tensor; 3],
    stream: &CudaStream,
) -> Result<[u64; 3], BoxError> {
    let mut addresses = [0; 3];
    for (address, tensor) in addresses.iter_mut().zip(tensors) {
        *address = storage_address::<T>(tensor, stream)?;
    }
    Ok(addresses)
}

fn check_dense(layout: &Layout) -> candle_core::Result<()> {
    if layout.is_contiguous() && layout.start_offset() == 0 {
        Ok(())
    } else {
        Err(candle_core::Error::msg(format!(
            "warpforge's GEMM takes dense row-major tensors, and this one has strides {:?} \
             from offset {}: call .contiguous() on it first",
            layout.stride(),
            layout.start_offset()
        )))
    }
}

/// The device addresses warpforge's buffers had in the op's forward pass.
#[derive(Clone, Copy)]
struct Seen {
    /// a, b and the bias.
    inputs: [u64; 3],
    output: u64,
}

/// `relu(a @ b + bias)` for a `m x k`, b `k x n` and bias `n`, all dense
/// and row-major: one launch of warpforge's tuned GEMM with its bias and
/// ReLU epilogue, on candle's memory and stream.
struct FusedLinearRelu<'rt, T: Element> {
    rt: &'rt Runtime,
    gemm: TunedGemm<T, T>,
    /// Where warpforge's buffers were, for the caller's no-copy check.
    seen: Cell<Option<Seen>>,
}

impl<T: Element> CustomOp3 for FusedLinearRelu<'_, T> {
    fn name(&self) -> &'static str {
        "warpforge-fused-linear-relu"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(candle_core::Error::msg(
            "warpforge-fused-linear-relu runs on CUDA tensors only: move them with .to_device()",
        ))
    }

    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        a_layout: &Layout,
        b: &CudaStorage,
        b_layout: &Layout,
        bias: &CudaStorage,
        bias_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (m, k, n) = gemm_dims(a_layout, b_layout, bias_layout)?;
        let device: &CudaDevice = a.device();
        let stream = device.cuda_stream();
        let problem = GemmProblem {
            b_layout: MatrixLayout::RowMajor,
            activation: Activation::Relu,
            ..GemmProblem::new(
                (to_u32(m, "m")?, to_u32(n, "n")?, to_u32(k, "k")?),
                T::PLAIN.0,
                T::PLAIN.1,
            )
        };
        // The output, allocated by candle on its stream and filled with NaN,
        // so that a value read back was written by the kernel.
        let mut output: CudaSlice<T> = device.clone_htod(&vec![T::POISON; m * n])?;
        let (a, b, bias) = (
            a.as_cuda_slice::<T>()?,
            b.as_cuda_slice::<T>()?,
            bias.as_cuda_slice::<T>()?,
        );
        let wf = |error: warpforge::Error| candle_core::Error::wrap(error);
        // Borrowed, not copied: warpforge's views of candle's slices.
        let a_buffer = DeviceBuffer::borrow_cuda_slice(self.rt, a).map_err(wf)?;
        let b_buffer = DeviceBuffer::borrow_cuda_slice(self.rt, b).map_err(wf)?;
        let bias_buffer = DeviceBuffer::borrow_cuda_slice(self.rt, bias).map_err(wf)?;
        let mut output_buffer =
            DeviceBuffer::borrow_cuda_slice_mut(self.rt, &mut output).map_err(wf)?;
        self.seen.set(Some(Seen {
            inputs: [
                buffer_address(&a_buffer, &stream)?,
                buffer_address(&b_buffer, &stream)?,
                buffer_address(&bias_buffer, &stream)?,
            ],
            output: buffer_address(&output_buffer, &stream)?,
        }));
        self.gemm
            .gemm(
                self.rt,
                &problem,
                &*a_buffer,
                &*b_buffer,
                &mut *output_buffer,
                Some((&*bias_buffer).into()),
            )
            .map_err(wf)?;
        drop(output_buffer);
        Ok((
            CudaStorage::wrap_cuda_slice(output, device.clone()),
            Shape::from((m, n)),
        ))
    }
}

/// (m, k, n) from the operands' layouts, which must be dense, `m x k`,
/// `k x n` and `n`.
fn gemm_dims(a: &Layout, b: &Layout, bias: &Layout) -> candle_core::Result<(usize, usize, usize)> {
    for layout in [a, b, bias] {
        check_dense(layout)?;
    }
    match (a.dims(), b.dims(), bias.dims()) {
        (&[m, k], &[k_b, n], &[n_bias]) if k == k_b && n == n_bias => Ok((m, k, n)),
        (a, b, bias) => Err(candle_core::Error::msg(format!(
            "warpforge-fused-linear-relu takes a (m, k), b (k, n) and bias (n), and got \
             {a:?}, {b:?} and {bias:?}"
        ))),
    }
}

fn to_u32(value: usize, name: &str) -> candle_core::Result<u32> {
    u32::try_from(value).map_err(|_| {
        candle_core::Error::msg(format!(
            "{name} = {value} is past warpforge's GEMM's 32-bit dimensions: split the product"
        ))
    })
}

/// The device address of a warpforge CUDA buffer.
fn buffer_address<T: Element>(
    buffer: &DeviceBuffer<T>,
    stream: &CudaStream,
) -> candle_core::Result<u64> {
    let slice = buffer
        .cuda_slice()
        .ok_or_else(|| candle_core::Error::msg("warpforge's buffer is not a CUDA buffer"))?;
    Ok(slice.device_ptr(stream).0)
}
