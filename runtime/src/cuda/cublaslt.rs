//! cuBLASLt on the runtime's stream: the 8-bit float GEMMs the benchmarks
//! compare against, which `cublasGemmEx` lacks (cuBLAS runs fp8 only through
//! `cublasLtMatmul`). The checks and the column-major call come from
//! `super::cublas`; this file holds what only cuBLASLt needs.
//!
//! What the call relies on, from NVIDIA's cuBLAS documentation, part "Using
//! the cuBLASLt API", unless said otherwise:
//!
//! - fp8 kernels need the compute type `CUBLAS_COMPUTE_32F` and the scale
//!   type `CUDA_R_32F`, A transposed and B not ("TN") on Ada, Hopper and
//!   Blackwell GeForce, and 16-byte aligned pointers and dimensions
//!   (`cublasLtMatmul()`, FP8 requirements); `GemmProblem::check_fp8_form`
//!   and [`operand_alignments`] check those before cuBLASLt sees the call.
//! - e4m3 A and B with bf16 C and D is one of the listed fp8 type
//!   combinations (`cublasLtMatmul()`, the FP8 type table).
//! - A scale pointer (`CUBLASLT_MATMUL_DESC_A_SCALE_POINTER` and B's, C's,
//!   D's) left unset means a scale of 1 (`cublasLtMatmulDescAttributes_t`);
//!   none is set, so D = alpha A B + beta C with alpha 1 and beta 0.
//! - Attribute value types (`cublasLtMatmulDescAttributes_t`,
//!   `cublasLtMatmulPreferenceAttributes_t`): `TRANSA` and `TRANSB` take an
//!   `int32_t` holding a `cublasOperation_t` (`CUBLAS_OP_N` = 0,
//!   `CUBLAS_OP_T` = 1), `FAST_ACCUM` an `int8_t` (default 0: off),
//!   `MAX_WORKSPACE_BYTES` a `uint64_t` (default 0: no workspace), the
//!   `MIN_ALIGNMENT_*_BYTES` a `uint32_t` each (default 256).
//! - alpha and beta are host pointers by default (`POINTER_MODE`), read in
//!   the scale type (f32).
//! - C and D may be the same buffer with the same layout (`cublasLtMatmul()`:
//!   in-place); the call passes C as both.
//! - The workspace must start 256-byte aligned (`cublasLtMatmul()`; a CUDA
//!   allocation is); its recommended size is cuBLAS's own pool's, 32 MiB on
//!   Hopper and Blackwell and 4 MiB before (`cublasSetWorkspace()`). A call's
//!   kernels rely on the workspace staying intact between them (also
//!   `cublasSetWorkspace()`), so calls sharing it are enqueued one at a time.
//! - `cublasLtMatmulAlgoGetHeuristic` returns the algorithms in order of
//!   expected speed; cuBLASLt caches its answers per problem (the
//!   "Heuristics Cache", 8192 entries by default), so asking on every call
//!   costs little after the first.
//! - `cublasLtCreate` ties the handle to the current device.
//! - The call sequence follows NVIDIA's `LtFp8Matmul` sample
//!   (CUDALibrarySamples, `cuBLASLt/LtFp8Matmul`): descriptor, transposes,
//!   layouts as stored (rows and columns before the transpose), preference
//!   with the workspace size, one heuristic, `cublasLtMatmul`.
//!
//! A Python (ctypes) replica of this call sequence, same attributes, value
//! types and layouts, ran on an H200 with cuBLASLt 13.1 (driver 580.159.04):
//! e4m3 products of small integers came back exact in both accumulation
//! modes with no scale pointers set, e5m2 x e5m2 got no algorithm from the
//! heuristic (`CUBLAS_STATUS_NOT_SUPPORTED`), and `FAST_ACCUM` given 4 bytes
//! was refused (`CUBLAS_STATUS_INVALID_VALUE`): it takes exactly one byte.
//!
//! Fast accumulation (`CUBLASLT_MATMUL_DESC_FAST_ACCUM`): the documentation
//! says that with it on, intermediate results are not periodically promoted
//! to a higher precision, faster at the cost of accuracy, and that it has an
//! effect on Ada and Hopper. Hopper's fp8 `wgmma` keeps fewer bits in its sums
//! than f32; without fast accumulation cuBLASLt adds the Tensor Cores' partial
//! sums into f32 registers every so often, with it the Tensor Cores hold the
//! whole sum, as warpforge's `gemm_wgmma_e4m3` does. `torch._scaled_mm`
//! defaults to off (`use_fast_accum=False`).

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::{Mutex, PoisonError};

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result::{self, CublasError};
use cudarc::cublaslt::sys::{
    self, cublasComputeType_t, cublasLtMatmulDescAttributes_t as DescAttribute,
    cublasLtMatmulPreferenceAttributes_t as PreferenceAttribute, cudaDataType_t,
};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::cublas::{cublas_failure, ColumnMajorCall, GemmProblem};
use super::{driver_error, CudaBackend};
use crate::scalar::DeviceScalar;
use crate::Error;

/// A cuBLASLt handle and the workspace its calls use, behind one lock: a
/// call's kernels rely on the workspace staying intact between them, so two
/// threads must not enqueue calls that share it at the same time.
pub(crate) struct BlasLt {
    state: Mutex<LtState>,
}

struct LtState {
    handle: LtHandle,
    workspace: CudaSlice<u8>,
}

/// Owns a `cublasLtHandle_t`.
struct LtHandle(sys::cublasLtHandle_t);

// SAFETY: a cuBLASLt handle is host state that any thread may use (every call
// names its stream); `BlasLt`'s lock lets one thread use it at a time.
unsafe impl Send for LtHandle {}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from `cublasLtCreate` and is destroyed once,
        // here. A failure frees nothing more that could be acted on.
        let _ = unsafe { result::destroy_handle(self.0) };
    }
}

/// The workspace NVIDIA recommends for compute capability `major.minor`:
/// 32 MiB on Hopper and Blackwell, 4 MiB before.
fn workspace_bytes((major, _): (u32, u32)) -> usize {
    if major >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

/// The fp8 Tensor Cores arrived with Ada and Hopper: compute capability 8.9
/// (the documentation's "Narrow Precision Data Types Usage").
fn check_fp8_arch(problem: &GemmProblem, (major, minor): (u32, u32)) -> Result<(), Error> {
    if (major, minor) < (8, 9) {
        return Err(Error::Cublas(format!(
            "{}: cuBLASLt's fp8 GEMMs need compute capability 8.9 (Ada) or newer, and this GPU \
             has {major}.{minor}: run on an Ada, Hopper or newer GPU",
            problem.describe()
        )));
    }
    Ok(())
}

/// The alignment in bytes of each operand's start (`[a, b, c]`), capped at
/// 256, cuBLASLt's default assumption: its heuristic then picks no kernel
/// that needs more than the buffers have. An `Err` when one is not 16-byte
/// aligned, which the fp8 kernels need.
fn operand_alignments(problem: &GemmProblem, pointers: [u64; 3]) -> Result<[u32; 3], Error> {
    let alignments = pointers.map(|ptr| 1u32 << ptr.trailing_zeros().min(8));
    for (name, alignment) in ["a", "b", "c"].into_iter().zip(alignments) {
        if alignment < 16 {
            return Err(Error::Cublas(format!(
                "{}: cuBLASLt's fp8 GEMM needs 16-byte aligned operands, and `{name}` starts \
                 {alignment}-byte aligned: pass a buffer the runtime allocated (allocations \
                 start 256-byte aligned)",
                problem.describe()
            )));
        }
    }
    Ok(alignments)
}

/// A matrix as `cublasLtMatrixLayoutCreate` describes it: its rows and
/// columns as stored, before the call's transpose, and its leading dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StoredMatrix {
    rows: u64,
    cols: u64,
    ld: i64,
}

/// cuBLAS's A, B and C of a column-major call, as stored: `op(A)` is
/// `m x k`, so A is `k x m` when transposed; `op(B)` is `k x n`; C is `m x n`.
fn stored_matrices(call: &ColumnMajorCall) -> [StoredMatrix; 3] {
    let stored = |op: cublasOperation_t, (rows, cols): (i32, i32), ld: i32| {
        let (rows, cols) = match op {
            cublasOperation_t::CUBLAS_OP_N => (rows, cols),
            _ => (cols, rows),
        };
        // `plan` made every dimension a non-negative i32.
        StoredMatrix {
            rows: rows as u64,
            cols: cols as u64,
            ld: ld.into(),
        }
    };
    [
        stored(call.transa, (call.m, call.k), call.lda),
        stored(call.transb, (call.k, call.n), call.ldb),
        stored(cublasOperation_t::CUBLAS_OP_N, (call.m, call.n), call.ldc),
    ]
}

/// Owns a `cublasLtMatmulDesc_t`.
struct MatmulDesc(sys::cublasLtMatmulDesc_t);

impl MatmulDesc {
    /// Sets `attribute` to `value`, whose type must be the attribute's
    /// documented one (see the module's notes).
    fn set<T: Copy>(&self, attribute: DescAttribute, value: T) -> Result<(), CublasError> {
        // SAFETY: the descriptor is live; cuBLASLt copies size_of::<T>()
        // bytes from `value`, which outlives the call.
        unsafe {
            result::set_matmul_desc_attribute(
                self.0,
                attribute,
                &value as *const T as *const c_void,
                size_of::<T>(),
            )
        }
    }
}

impl Drop for MatmulDesc {
    fn drop(&mut self) {
        // SAFETY: created by `cublasLtMatmulDescCreate`, destroyed once, after
        // the call that used it was enqueued. A failure cannot be acted on.
        let _ = unsafe { result::destroy_matmul_desc(self.0) };
    }
}

/// Owns a `cublasLtMatrixLayout_t`.
struct LayoutDesc(sys::cublasLtMatrixLayout_t);

impl LayoutDesc {
    fn new(data_type: cudaDataType_t, matrix: StoredMatrix) -> Result<LayoutDesc, CublasError> {
        result::create_matrix_layout(data_type, matrix.rows, matrix.cols, matrix.ld).map(LayoutDesc)
    }
}

impl Drop for LayoutDesc {
    fn drop(&mut self) {
        // SAFETY: as for `MatmulDesc`.
        let _ = unsafe { result::destroy_matrix_layout(self.0) };
    }
}

/// Owns a `cublasLtMatmulPreference_t`.
struct Preference(sys::cublasLtMatmulPreference_t);

impl Preference {
    /// As [`MatmulDesc::set`].
    fn set<T: Copy>(&self, attribute: PreferenceAttribute, value: T) -> Result<(), CublasError> {
        // SAFETY: as in `MatmulDesc::set`.
        unsafe {
            result::set_matmul_pref_attribute(
                self.0,
                attribute,
                &value as *const T as *const c_void,
                size_of::<T>(),
            )
        }
    }
}

impl Drop for Preference {
    fn drop(&mut self) {
        // SAFETY: as for `MatmulDesc`.
        let _ = unsafe { result::destroy_matmul_pref(self.0) };
    }
}

impl CudaBackend {
    fn blas_lt(&self) -> Result<&BlasLt, Error> {
        if let Some(lt) = self.blas_lt.get() {
            return Ok(lt);
        }
        // cudarc panics when it calls into a cuBLASLt it cannot load, so probe first.
        if !super::library::loads(&["cublasLt"]) {
            return Err(Error::Cublas(
                "cuBLASLt is not installed: libcublasLt.so (or libcublasLt.so.12) could not be \
                 loaded. Install cuBLAS (the CUDA toolkit, or `pip install nvidia-cublas-cu12`, \
                 which ship libcublasLt beside libcublas) and put the directory holding \
                 libcublasLt.so on LD_LIBRARY_PATH."
                    .into(),
            ));
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the context current for cuBLASLt", e))?;
        let handle = result::create_handle()
            .map(LtHandle)
            .map_err(|e| Error::Cublas(format!("creating a cuBLASLt handle failed: {e:?}")))?;
        let bytes = workspace_bytes(self.info.compute_capability);
        let workspace = self.stream.alloc_zeros::<u8>(bytes).map_err(|e| {
            driver_error(
                &format!("allocating cuBLASLt's {} MiB workspace", bytes >> 20),
                e,
            )
        })?;
        Ok(self.blas_lt.get_or_init(|| BlasLt {
            state: Mutex::new(LtState { handle, workspace }),
        }))
    }

    /// `c = a b` for an 8-bit float `problem` whose A and B hold `input`,
    /// with fast accumulation on or off: see
    /// [`crate::Runtime::cublaslt_fp8_gemm`].
    pub(super) fn lt_fp8_matmul<I: DeviceScalar, O: DeviceScalar>(
        &self,
        problem: &GemmProblem,
        input: cudaDataType_t,
        fast_accumulation: bool,
        a: &CudaSlice<I>,
        b: &CudaSlice<I>,
        c: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        let call = self.checked_call(problem, a, b, c)?;
        check_fp8_arch(problem, self.info.compute_capability)?;
        let (m, n, k) = problem.dims;
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            // A sum of no products: C is zero. cuBLASLt's documentation does
            // not say that it takes k = 0.
            self.stream
                .memset_zeros(c)
                .map_err(|e| driver_error("zeroing C of an fp8 GEMM with k = 0", e))?;
            return self.check_recorded("cuBLASLt GEMM");
        }
        let lt = self.blas_lt()?;
        let failure =
            |routine: &'static str| move |e: CublasError| cublas_failure(problem, routine, e.0);
        let [a_stored, b_stored, c_stored] = stored_matrices(&call);
        {
            let (a_ptr, _a_sync) = a.device_ptr(&self.stream);
            let (b_ptr, _b_sync) = b.device_ptr(&self.stream);
            let (c_ptr, _c_sync) = c.device_ptr_mut(&self.stream);
            let [a_align, b_align, c_align] = operand_alignments(problem, [a_ptr, b_ptr, c_ptr])?;
            // Nothing panics while the lock is held, so a poisoned lock
            // guards intact state.
            let mut state = lt.state.lock().unwrap_or_else(PoisonError::into_inner);
            let LtState { handle, workspace } = &mut *state;
            let workspace_len = workspace.len();
            let (workspace_ptr, _workspace_sync) = workspace.device_ptr_mut(&self.stream);
            self.ctx
                .bind_to_thread()
                .map_err(|e| driver_error("making the context current for cuBLASLt", e))?;

            let desc = result::create_matmul_desc(
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cudaDataType_t::CUDA_R_32F,
            )
            .map(MatmulDesc)
            .map_err(failure("cublasLtMatmulDescCreate"))?;
            // cuBLAS's operands: its A is our B and its B our A (see `plan`).
            let set_desc = failure("cublasLtMatmulDescSetAttribute");
            desc.set(
                DescAttribute::CUBLASLT_MATMUL_DESC_TRANSA,
                call.transa as i32,
            )
            .map_err(set_desc)?;
            desc.set(
                DescAttribute::CUBLASLT_MATMUL_DESC_TRANSB,
                call.transb as i32,
            )
            .map_err(set_desc)?;
            desc.set(
                DescAttribute::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                i8::from(fast_accumulation),
            )
            .map_err(set_desc)?;
            let layout = failure("cublasLtMatrixLayoutCreate");
            let a_layout = LayoutDesc::new(input, a_stored).map_err(layout)?;
            let b_layout = LayoutDesc::new(input, b_stored).map_err(layout)?;
            let c_layout =
                LayoutDesc::new(cudaDataType_t::CUDA_R_16BF, c_stored).map_err(layout)?;

            let preference = result::create_matmul_pref()
                .map(Preference)
                .map_err(failure("cublasLtMatmulPreferenceCreate"))?;
            let set_preference = failure("cublasLtMatmulPreferenceSetAttribute");
            for (attribute, value) in [
                (
                    PreferenceAttribute::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    b_align,
                ),
                (
                    PreferenceAttribute::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    a_align,
                ),
                (
                    PreferenceAttribute::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    c_align,
                ),
                (
                    PreferenceAttribute::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                    c_align,
                ),
            ] {
                preference.set(attribute, value).map_err(set_preference)?;
            }
            preference
                .set(
                    PreferenceAttribute::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    workspace_len as u64,
                )
                .map_err(set_preference)?;

            // SAFETY: the handle, descriptors and preference are live; D's
            // layout is C's. cudarc's wrapper asks for one algorithm and
            // returns NOT_SUPPORTED when there is none.
            let heuristic = unsafe {
                result::get_matmul_algo_heuristic(
                    handle.0,
                    desc.0,
                    a_layout.0,
                    b_layout.0,
                    c_layout.0,
                    c_layout.0,
                    preference.0,
                )
            }
            .map_err(failure("cublasLtMatmulAlgoGetHeuristic"))?;
            let (alpha, beta) = (1.0f32, 0.0f32);
            // SAFETY: the operands belong to this context, hold at least the
            // elements the layouts address (checked by `plan`) and start as
            // aligned as the preference said; alpha and beta are f32, the
            // scale type, on the host, the default pointer mode; C is D, in
            // place, with one layout; the workspace is this backend's, of
            // `workspace_len` bytes, used by this call alone while the lock
            // is held, on the stream it was allocated on; the guards keep
            // every pointer valid and stream-ordered until the call is
            // enqueued.
            unsafe {
                result::matmul(
                    handle.0,
                    desc.0,
                    &alpha as *const f32 as *const c_void,
                    &beta as *const f32 as *const c_void,
                    b_ptr as *const c_void,
                    a_layout.0,
                    a_ptr as *const c_void,
                    b_layout.0,
                    c_ptr as *const c_void,
                    c_layout.0,
                    c_ptr as *mut c_void,
                    c_layout.0,
                    &heuristic.algo,
                    workspace_ptr as *mut c_void,
                    workspace_len,
                    self.stream.cu_stream() as sys::cudaStream_t,
                )
            }
            .map_err(failure("cublasLtMatmul"))?;
        }
        self.check_recorded("cuBLASLt GEMM")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::{GemmPrecision, MatrixLayout};
    use warpforge_codegen::ir::Scalar;

    fn fp8_problem(dims: (usize, usize, usize)) -> GemmProblem {
        GemmProblem {
            precision: GemmPrecision::E4m3,
            dims,
            layouts: (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
        }
    }

    #[test]
    fn layouts_describe_the_operands_as_stored() {
        let (m, n, k) = (37, 32, 48);
        let call = fp8_problem((m, n, k))
            .plan((Scalar::E4m3, Scalar::Bf16), [m * k, k * n, m * n])
            .unwrap();
        // cuBLAS's A is our column-major B: k x n, read transposed; its B is
        // our row-major A read as the k x m A^T; its C is our row-major C
        // read as the n x m C^T.
        assert_eq!(
            stored_matrices(&call),
            [
                StoredMatrix {
                    rows: 48,
                    cols: 32,
                    ld: 48
                },
                StoredMatrix {
                    rows: 48,
                    cols: 37,
                    ld: 48
                },
                StoredMatrix {
                    rows: 32,
                    cols: 37,
                    ld: 32
                },
            ]
        );
        // Every layout: a column-major matrix's leading dimension covers its
        // rows, and rows x columns are the matrix's elements.
        for layouts in [
            (MatrixLayout::RowMajor, MatrixLayout::RowMajor),
            (MatrixLayout::ColMajor, MatrixLayout::ColMajor),
            (MatrixLayout::ColMajor, MatrixLayout::RowMajor),
        ] {
            let problem = GemmProblem {
                precision: GemmPrecision::F32,
                dims: (m, n, k),
                layouts,
            };
            let call = problem
                .plan((Scalar::F32, Scalar::F32), [m * k, k * n, m * n])
                .unwrap();
            let stored = stored_matrices(&call);
            for (matrix, elements) in stored.iter().zip([k * n, m * k, m * n]) {
                assert!(matrix.ld >= matrix.rows as i64, "{layouts:?}: {matrix:?}");
                assert_eq!((matrix.rows * matrix.cols) as usize, elements);
            }
        }
    }

    #[test]
    fn operands_must_start_16_byte_aligned() {
        let problem = fp8_problem((16, 16, 16));
        assert_eq!(
            operand_alignments(
                &problem,
                [0x7f00_0000_0000, 0x7f00_0000_0010, 0x7f00_0000_0300]
            )
            .unwrap(),
            [256, 16, 256]
        );
        assert_eq!(
            operand_alignments(&problem, [0x200, 0x40, 0x20]).unwrap(),
            [256, 64, 32]
        );
        let err = operand_alignments(&problem, [0x100, 0x100, 0x108])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`c` starts 8-byte aligned") && err.contains("16-byte aligned"),
            "{err}"
        );
    }

    #[test]
    fn fp8_needs_ada_or_newer_and_the_workspace_follows_the_arch() {
        let problem = fp8_problem((16, 16, 16));
        let err = check_fp8_arch(&problem, (8, 6)).unwrap_err().to_string();
        assert!(
            err.contains("compute capability 8.9") && err.contains("has 8.6"),
            "{err}"
        );
        for arch in [(8, 9), (9, 0), (10, 0), (12, 0)] {
            assert!(check_fp8_arch(&problem, arch).is_ok(), "{arch:?}");
        }
        assert_eq!(workspace_bytes((9, 0)), 32 << 20);
        assert_eq!(workspace_bytes((8, 9)), 4 << 20);
    }
}
