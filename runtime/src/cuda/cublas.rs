//! cuBLAS on the runtime's stream: the reference the benchmarks and the GEMM
//! tests compare against. Every product goes through one call: `cublasGemmEx`,
//! whose data and compute types spell out the [`GemmPrecision`], or, for the
//! 8-bit floats GemmEx lacks, `cublasLtMatmul` (`super::cublaslt`). The
//! checks and the row-major to column-major mapping here serve both.

use std::ffi::c_void;

use cudarc::cublas::result::gemm_ex;
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasMath_t, cublasOperation_t, cublasSetMathMode,
    cudaDataType_t,
};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use warpforge_codegen::ir::Scalar;

use super::CudaBackend;
use crate::gemm::{GemmPrecision, MatrixLayout};
use crate::scalar::DeviceScalar;
use crate::Error;

impl CudaBackend {
    fn blas(&self) -> Result<&CudaBlas, Error> {
        if let Some(blas) = self.blas.get() {
            return Ok(blas);
        }
        // cudarc panics when it calls into a cuBLAS it cannot load, so probe first.
        if !super::library::loads(&["cublas"]) {
            return Err(Error::Cublas(
                "cuBLAS is not installed: libcublas.so (or libcublas.so.12) could not be loaded. Install cuBLAS (the CUDA \
                 toolkit, or `pip install nvidia-cublas-cu12`) and put the directory holding \
                 libcublas.so on LD_LIBRARY_PATH."
                    .into(),
            ));
        }
        let blas = CudaBlas::new(self.stream.clone())
            .map_err(|e| Error::Cublas(format!("creating a cuBLAS handle failed: {e:?}")))?;
        // By default cuBLAS may sum split-k partial results of f16 and bf16
        // products in the output type; the reference promises f32 accumulation
        // throughout. (Default math otherwise: f32 products use no TF32.)
        // SAFETY: the handle is live, and the mode is one cuBLAS defines.
        unsafe {
            cublasSetMathMode(
                *blas.handle(),
                cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
            )
        }
        .result()
        .map_err(|e| Error::Cublas(format!("setting cuBLAS's math mode failed: {e:?}")))?;
        Ok(self.blas.get_or_init(|| blas))
    }

    /// `c = a b` in `precision` with cuBLAS: see [`crate::Runtime::cublas_gemm`].
    /// The 8-bit floats go to cuBLASLt with fast accumulation.
    pub(crate) fn gemm<I: DeviceScalar, O: DeviceScalar>(
        &self,
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        layouts: (MatrixLayout, MatrixLayout),
        a: &CudaSlice<I>,
        b: &CudaSlice<I>,
        c: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        let problem = GemmProblem {
            precision,
            dims,
            layouts,
        };
        match CublasRoute::of(&problem)? {
            CublasRoute::GemmEx(types) => self.gemm_ex(&problem, &types, a, b, c),
            CublasRoute::LtFp8(input) => self.lt_fp8_matmul(&problem, input, true, a, b, c),
        }
    }

    /// `c = a b` in an 8-bit float `precision` with cuBLASLt, A row-major
    /// and B column-major: see [`crate::Runtime::cublaslt_fp8_gemm`].
    pub(crate) fn fp8_gemm<I: DeviceScalar, O: DeviceScalar>(
        &self,
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        a: &CudaSlice<I>,
        b: &CudaSlice<I>,
        c: &mut CudaSlice<O>,
        fast_accumulation: bool,
    ) -> Result<(), Error> {
        let problem = GemmProblem {
            precision,
            dims,
            layouts: (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
        };
        let input = CublasRoute::lt_fp8_input(&problem)?;
        self.lt_fp8_matmul(&problem, input, fast_accumulation, a, b, c)
    }

    /// Checks a product's types, shapes, buffer lengths and buffer owners,
    /// and maps it onto cuBLAS's column-major call.
    pub(super) fn checked_call<I: DeviceScalar, O: DeviceScalar>(
        &self,
        problem: &GemmProblem,
        a: &CudaSlice<I>,
        b: &CudaSlice<I>,
        c: &CudaSlice<O>,
    ) -> Result<ColumnMajorCall, Error> {
        let call = problem.plan((I::SCALAR, O::SCALAR), [a.len(), b.len(), c.len()])?;
        for (name, owner) in [("a", a.context()), ("b", b.context()), ("c", c.context())] {
            self.check_owner(owner, || format!("cuBLAS GEMM operand `{name}`"))?;
        }
        Ok(call)
    }

    fn gemm_ex<I: DeviceScalar, O: DeviceScalar>(
        &self,
        problem: &GemmProblem,
        types: &CublasTypes,
        a: &CudaSlice<I>,
        b: &CudaSlice<I>,
        c: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        let call = self.checked_call(problem, a, b, c)?;
        let blas = self.blas()?;
        let (alpha, beta) = (
            ScaleFactor::new(problem.precision, 1),
            ScaleFactor::new(problem.precision, 0),
        );
        {
            let (a_ptr, _a_sync) = a.device_ptr(&self.stream);
            let (b_ptr, _b_sync) = b.device_ptr(&self.stream);
            let (c_ptr, _c_sync) = c.device_ptr_mut(&self.stream);
            // cuBLAS's first operand is our B and its second our A: see `plan`.
            // SAFETY: the operands belong to this context and hold at least
            // the elements the shapes and leading dimensions address (checked
            // by `plan`); the scale factors have the compute type's scale
            // type and outlive the call; the guards keep the pointers valid
            // and stream-ordered until the call is enqueued.
            unsafe {
                gemm_ex(
                    *blas.handle(),
                    call.transa,
                    call.transb,
                    call.m,
                    call.n,
                    call.k,
                    alpha.as_ptr(),
                    b_ptr as *const c_void,
                    types.input,
                    call.lda,
                    a_ptr as *const c_void,
                    types.input,
                    call.ldb,
                    beta.as_ptr(),
                    c_ptr as *mut c_void,
                    types.output,
                    call.ldc,
                    types.compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| cublas_failure(problem, "cublasGemmEx", e.0))?;
        }
        self.check_recorded("cuBLAS GEMM")
    }
}

/// One row-major product as the caller states it.
pub(super) struct GemmProblem {
    pub(super) precision: GemmPrecision,
    /// `(m, n, k)`: C is `m x n`, A is `m x k`, B is `k x n`.
    pub(super) dims: (usize, usize, usize),
    /// The layouts of A and B.
    pub(super) layouts: (MatrixLayout, MatrixLayout),
}

/// The arguments of the column-major `cublasGemmEx` (or `cublasLtMatmul`)
/// call that computes a [`GemmProblem`]. cuBLAS's first operand is B and its
/// second is A: see [`GemmProblem::plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ColumnMajorCall {
    pub(super) transa: cublasOperation_t,
    pub(super) transb: cublasOperation_t,
    pub(super) m: i32,
    pub(super) n: i32,
    pub(super) k: i32,
    pub(super) lda: i32,
    pub(super) ldb: i32,
    pub(super) ldc: i32,
}

impl GemmProblem {
    /// How the product is described in messages.
    pub(super) fn describe(&self) -> String {
        let (m, n, k) = self.dims;
        let (a, b) = self.layouts;
        format!(
            "cuBLAS GEMM in {} with m = {m}, n = {n}, k = {k}, A {a}, B {b}",
            self.precision
        )
    }

    /// Checks the element types, dimensions and buffer lengths (`[a, b, c]`)
    /// and maps the row-major product onto cuBLAS's column-major one.
    ///
    /// cuBLAS reads a buffer as column-major, and a row-major `m x n` C read
    /// column-major is `C^T` (`n x m`, leading dimension n). So cuBLAS
    /// computes `C^T = B^T A^T`: its first operand is our B and its second is
    /// our A. A row-major B (`k x n`, leading dimension n) read column-major
    /// is already `B^T`: no transpose; a column-major B is B itself:
    /// transpose it, leading dimension k. Likewise for A: row-major A read
    /// column-major is `A^T` (leading dimension k), column-major A needs a
    /// transpose (leading dimension m).
    pub(super) fn plan(
        &self,
        (input, output): (Scalar, Scalar),
        [a_len, b_len, c_len]: [usize; 3],
    ) -> Result<ColumnMajorCall, Error> {
        let (m, n, k) = self.dims;
        let (a_layout, b_layout) = self.layouts;
        let precision = self.precision;
        if (input, output) != (precision.input(), precision.output()) {
            return Err(Error::Cublas(format!(
                "{}: this precision takes {} A and B and {} C, and the buffers hold {} A and B and \
                 {} C: pass buffers of the precision's types, or pick the precision of the buffers' \
                 types",
                self.describe(),
                precision.input().name(),
                precision.output().name(),
                input.name(),
                output.name()
            )));
        }
        for (name, len, (rows, cols), layout) in [
            ("a", a_len, (m, k), Some(a_layout)),
            ("b", b_len, (k, n), Some(b_layout)),
            ("c", c_len, (m, n), None),
        ] {
            let needed = rows.checked_mul(cols);
            if needed.is_none_or(|needed| len < needed) {
                let layout = layout.unwrap_or(MatrixLayout::RowMajor);
                return Err(Error::Cublas(format!(
                    "{}: `{name}` is a {rows} x {cols} matrix ({layout}), and its buffer holds \
                     {len} elements: pass a buffer of at least rows * cols elements",
                    self.describe()
                )));
            }
        }
        let dim = |name: &str, value: usize| {
            i32::try_from(value).map_err(|_| {
                Error::Cublas(format!(
                    "{}: {name} = {value} is past the {} cuBLAS's 32-bit interface takes: split \
                     the product into smaller ones",
                    self.describe(),
                    i32::MAX
                ))
            })
        };
        let (mi, ni, ki) = (dim("m", m)?, dim("n", n)?, dim("k", k)?);
        match precision {
            GemmPrecision::I8 => self.check_int8_form()?,
            GemmPrecision::E4m3 | GemmPrecision::E5m2 => self.check_fp8_form()?,
            _ => {}
        }
        let operand = |layout: MatrixLayout, rows: i32, cols: i32| match layout {
            MatrixLayout::RowMajor => (cublasOperation_t::CUBLAS_OP_N, cols),
            MatrixLayout::ColMajor => (cublasOperation_t::CUBLAS_OP_T, rows),
        };
        let (transa, lda) = operand(b_layout, ki, ni);
        let (transb, ldb) = operand(a_layout, mi, ki);
        // cuBLAS wants leading dimensions of at least 1, even for empty matrices.
        Ok(ColumnMajorCall {
            transa,
            transb,
            m: ni,
            n: mi,
            k: ki,
            lda: lda.max(1),
            ldb: ldb.max(1),
            ldc: ni.max(1),
        })
    }

    /// cuBLAS runs i8 products on its integer Tensor Core (IMMA) kernels,
    /// which NVIDIA documents as needing both operands contiguous along k
    /// (cuBLAS's "TN" form: row-major A, column-major B), leading dimensions
    /// of A, B and C that are multiples of 4, and cuBLAS's m (our n) and k
    /// multiples of 4. On an H200 with cuBLAS 13.1, every NT and TT call and
    /// most NN calls returned `CUBLAS_STATUS_NOT_SUPPORTED`, as did every
    /// call with k = 45; TN took any m and n with k a multiple of 4, and no
    /// call gave a wrong result. Other GPUs and versions differ (sm_120 is
    /// reported to refuse n not a multiple of 4), so the documented form is
    /// enforced here, before cuBLAS sees the call.
    fn check_int8_form(&self) -> Result<(), Error> {
        let (_, n, k) = self.dims;
        if self.layouts != (MatrixLayout::RowMajor, MatrixLayout::ColMajor) {
            return Err(Error::Cublas(format!(
                "{}: cuBLAS's i8 GEMM needs A row-major and B column-major (both contiguous along \
                 k: cuBLAS's \"TN\" form): store A row-major and B column-major, transposing on \
                 the host",
                self.describe()
            )));
        }
        if n % 4 != 0 || k % 4 != 0 {
            return Err(Error::Cublas(format!(
                "{}: cuBLAS's i8 GEMM needs n and k to be multiples of 4 (they are the leading \
                 dimensions of A, B and C): pad the matrices with zero columns of B and C (n) or \
                 zero columns of A and rows of B (k) up to multiples of 4",
                self.describe()
            )));
        }
        Ok(())
    }

    /// cuBLASLt's fp8 kernels need, by NVIDIA's cuBLAS documentation
    /// (`cublasLtMatmul()`, the FP8 requirements): A transposed and B not
    /// (cuBLAS's "TN" form, required on Ada, Hopper and Blackwell GeForce),
    /// which for cuBLAS's A = our B and B = our A (see `plan`) means our A
    /// row-major and our B column-major, both contiguous along k; and the
    /// dimensions and leading dimensions of "Tensor Core Usage", whose
    /// conditions for this form are k (1-byte A and B, leading dimension k)
    /// a multiple of 16 and n (the bf16 C's rows, leading dimension n) a
    /// multiple of 8. n must be a multiple of 16 here, as `torch._scaled_mm`
    /// asks of its B; m is free (also in `torch._scaled_mm`). On an H200
    /// with cuBLASLt 13.1, a ctypes replica of this call also ran n = 8 and
    /// 24 and k = 40 exactly; as for i8, the documented form is enforced.
    fn check_fp8_form(&self) -> Result<(), Error> {
        let (_, n, k) = self.dims;
        if self.layouts != (MatrixLayout::RowMajor, MatrixLayout::ColMajor) {
            return Err(Error::Cublas(format!(
                "{}: cuBLASLt's fp8 GEMM needs A row-major and B column-major (both contiguous \
                 along k: cuBLAS's \"TN\" form): store A row-major and B column-major, \
                 transposing on the host",
                self.describe()
            )));
        }
        if n % 16 != 0 || k % 16 != 0 {
            return Err(Error::Cublas(format!(
                "{}: cuBLASLt's fp8 GEMM needs n and k to be multiples of 16 (16-byte aligned \
                 rows of A, B and C): pad the matrices with zero columns of B and C (n) or zero \
                 columns of A and rows of B (k) up to multiples of 16",
                self.describe()
            )));
        }
        Ok(())
    }
}

/// Which cuBLAS routine computes a precision, with its types.
pub(super) enum CublasRoute {
    /// `cublasGemmEx` with these data and compute types.
    GemmEx(CublasTypes),
    /// `cublasLtMatmul` with A and B of this 8-bit float type (and f32
    /// compute, f32 scales, bf16 C: `super::cublaslt`).
    LtFp8(cudarc::cublaslt::sys::cudaDataType_t),
}

impl CublasRoute {
    /// The routine and types of `problem`'s precision, or an `Err` for the
    /// precision no cuBLAS routine computes.
    fn of(problem: &GemmProblem) -> Result<CublasRoute, Error> {
        use cublasComputeType_t::*;
        use cudaDataType_t::*;
        let (input, output, compute) = match problem.precision {
            GemmPrecision::F16 => (CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F),
            GemmPrecision::Bf16 => (CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F),
            GemmPrecision::Tf32 => (CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32),
            GemmPrecision::I8 => (CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I),
            GemmPrecision::F32 => (CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F),
            // cublasGemmEx has no 8-bit floats; cuBLASLt has them.
            GemmPrecision::E4m3 => {
                return Ok(CublasRoute::LtFp8(
                    cudarc::cublaslt::sys::cudaDataType_t::CUDA_R_8F_E4M3,
                ))
            }
            // NVIDIA's table of cublasLtMatmul's fp8 types pairs e4m3 with
            // e4m3, e4m3 with e5m2 and e5m2 with e4m3, never e5m2 with e5m2
            // (torch._scaled_mm refuses that pair too).
            GemmPrecision::E5m2 => {
                return Err(Error::Cublas(format!(
                    "{}: cuBLAS has no e5m2 x e5m2 GEMM (cuBLASLt's fp8 kernels pair e5m2 only \
                     with e4m3): compare with an f16 GEMM of the same values instead (every e5m2 \
                     value is exact in f16)",
                    problem.describe()
                )))
            }
        };
        Ok(CublasRoute::GemmEx(CublasTypes {
            input,
            output,
            compute,
        }))
    }

    /// The fp8 type of `problem`'s A and B, or an `Err` for a precision
    /// cuBLASLt's fp8 GEMM does not compute.
    fn lt_fp8_input(problem: &GemmProblem) -> Result<cudarc::cublaslt::sys::cudaDataType_t, Error> {
        match CublasRoute::of(problem)? {
            CublasRoute::LtFp8(input) => Ok(input),
            CublasRoute::GemmEx(_) => Err(Error::Cublas(format!(
                "{}: cuBLASLt's fp8 GEMM takes the 8-bit float precisions (e4m3) only: use \
                 `cublas_gemm` for {}",
                problem.describe(),
                problem.precision.name()
            ))),
        }
    }
}

/// The `cublasGemmEx` data and compute types of a precision.
pub(super) struct CublasTypes {
    input: cudaDataType_t,
    output: cudaDataType_t,
    compute: cublasComputeType_t,
}

/// alpha or beta, in the scale type cuBLAS reads for the compute type:
/// f32 for `CUBLAS_COMPUTE_32F*`, i32 for `CUBLAS_COMPUTE_32I`.
enum ScaleFactor {
    F32(f32),
    I32(i32),
}

impl ScaleFactor {
    fn new(precision: GemmPrecision, value: i8) -> ScaleFactor {
        match precision.accumulator() {
            Scalar::I32 => ScaleFactor::I32(value.into()),
            _ => ScaleFactor::F32(value.into()),
        }
    }

    fn as_ptr(&self) -> *const c_void {
        match self {
            ScaleFactor::F32(v) => v as *const f32 as *const c_void,
            ScaleFactor::I32(v) => v as *const i32 as *const c_void,
        }
    }
}

/// A failed cuBLAS or cuBLASLt call (`routine`), with what to do for the
/// statuses a caller can act on. cudarc binds cuBLAS's and cuBLASLt's
/// `cublasStatus_t` (one C enum) as two Rust types, so the status is told by
/// its name.
pub(super) fn cublas_failure(
    problem: &GemmProblem,
    routine: &str,
    status: impl std::fmt::Debug,
) -> Error {
    let status = format!("{status:?}");
    let fp8 = matches!(problem.precision, GemmPrecision::E4m3 | GemmPrecision::E5m2);
    let hint = match status.as_str() {
        "CUBLAS_STATUS_NOT_SUPPORTED" | "CUBLAS_STATUS_ARCH_MISMATCH" if fp8 => {
            " This cuBLASLt has no fp8 kernel for this shape on this GPU (fp8 needs compute \
             capability 8.9 or newer and CUDA 11.8's cuBLASLt or newer): try a newer cuBLAS."
        }
        "CUBLAS_STATUS_NOT_SUPPORTED" | "CUBLAS_STATUS_ARCH_MISMATCH" => {
            " This cuBLAS has no kernel for this precision, shape and layout on this GPU (bf16 and \
             tf32 need compute capability 8.0 or newer, i8 Tensor Cores 7.5): try another \
             precision or layout, or a newer cuBLAS."
        }
        "CUBLAS_STATUS_ALLOC_FAILED" => {
            " cuBLAS could not allocate its workspace: free buffers you no longer need."
        }
        "CUBLAS_STATUS_EXECUTION_FAILED" => {
            " The GPU failed to run cuBLAS's kernel (possibly an earlier kernel faulted): run under \
             compute-sanitizer to find the faulting access."
        }
        _ => "",
    };
    Error::Cublas(format!(
        "{} failed in {routine}: {status}.{hint}",
        problem.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bf16, e4m3, f16, DeviceBuffer, DeviceScalar, Runtime};
    use MatrixLayout::{ColMajor, RowMajor};

    fn problem(
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        layouts: (MatrixLayout, MatrixLayout),
    ) -> GemmProblem {
        GemmProblem {
            precision,
            dims,
            layouts,
        }
    }

    fn types(precision: GemmPrecision) -> (Scalar, Scalar) {
        (precision.input(), precision.output())
    }

    /// `C = op(A) op(B)` exactly as column-major BLAS defines it, on the
    /// host: `A` is the first operand's buffer, `B` the second's, C is
    /// `m x n` with leading dimension ldc.
    fn column_major_gemm(call: &ColumnMajorCall, a: &[f64], b: &[f64]) -> Vec<f64> {
        let (m, n, k) = (call.m as usize, call.n as usize, call.k as usize);
        let (lda, ldb, ldc) = (call.lda as usize, call.ldb as usize, call.ldc as usize);
        let element = |x: &[f64], op: cublasOperation_t, ld: usize, row: usize, col: usize| match op
        {
            cublasOperation_t::CUBLAS_OP_N => x[col * ld + row],
            _ => x[row * ld + col],
        };
        let mut c = vec![0.0; ldc * n];
        for j in 0..n {
            for i in 0..m {
                c[j * ldc + i] = (0..k)
                    .map(|p| {
                        element(a, call.transa, lda, i, p) * element(b, call.transb, ldb, p, j)
                    })
                    .sum();
            }
        }
        c
    }

    /// A dense `rows x cols` matrix with distinct entries, stored in `layout`.
    fn matrix(rows: usize, cols: usize, layout: MatrixLayout, seed: usize) -> Vec<f64> {
        let mut x = vec![0.0; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                x[layout.index((r, c), (rows, cols))] = ((r * 7 + c * 3 + seed) % 11) as f64 - 5.0;
            }
        }
        x
    }

    #[test]
    fn the_column_major_call_computes_the_row_major_product_for_every_layout() {
        let (m, n, k) = (5, 3, 4);
        for a_layout in MatrixLayout::ALL {
            for b_layout in MatrixLayout::ALL {
                let call = problem(GemmPrecision::F32, (m, n, k), (a_layout, b_layout))
                    .plan(types(GemmPrecision::F32), [m * k, k * n, m * n])
                    .unwrap();
                let (a, b) = (matrix(m, k, a_layout, 1), matrix(k, n, b_layout, 2));
                // cuBLAS's first operand is B, its second A.
                let c = column_major_gemm(&call, &b, &a);
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k)
                            .map(|p| {
                                a[a_layout.index((i, p), (m, k))]
                                    * b[b_layout.index((p, j), (k, n))]
                            })
                            .sum();
                        assert_eq!(c[i * n + j], want, "{a_layout} A, {b_layout} B, ({i}, {j})");
                    }
                }
            }
        }
    }

    #[test]
    fn row_major_operands_need_no_transposes() {
        let call = problem(GemmPrecision::F16, (37, 29, 45), (RowMajor, RowMajor))
            .plan(types(GemmPrecision::F16), [37 * 45, 45 * 29, 37 * 29])
            .unwrap();
        assert_eq!(
            call,
            ColumnMajorCall {
                transa: cublasOperation_t::CUBLAS_OP_N,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: 29,
                n: 37,
                k: 45,
                lda: 29,
                ldb: 45,
                ldc: 29,
            }
        );
        // The i8 "TN" form: row-major A and column-major B, both read along k.
        let call = problem(GemmPrecision::I8, (37, 28, 44), (RowMajor, ColMajor))
            .plan(types(GemmPrecision::I8), [37 * 44, 44 * 28, 37 * 28])
            .unwrap();
        assert_eq!(
            (call.transa, call.transb, call.lda, call.ldb, call.ldc),
            (
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                44,
                44,
                28
            )
        );
        // Empty products keep leading dimensions of at least 1.
        let call = problem(GemmPrecision::F32, (0, 0, 0), (ColMajor, ColMajor))
            .plan(types(GemmPrecision::F32), [1, 1, 1])
            .unwrap();
        assert_eq!((call.lda, call.ldb, call.ldc), (1, 1, 1));
    }

    #[test]
    fn short_buffers_and_huge_dimensions_are_refused() {
        let tf32 = problem(GemmPrecision::Tf32, (38, 29, 13), (RowMajor, ColMajor));
        let err = tf32
            .plan(types(GemmPrecision::Tf32), [37 * 13, 13 * 29, 38 * 29])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`a` is a 38 x 13 matrix (row-major)")
                && err.contains("holds 481 elements")
                && err.contains("tf32")
                && err.contains("at least rows * cols"),
            "{err}"
        );
        let err = tf32
            .plan(types(GemmPrecision::Tf32), [38 * 13, 13 * 29, 38 * 29 - 1])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`c` is a 38 x 29 matrix"), "{err}");
        let err = tf32
            .plan(types(GemmPrecision::Tf32), [38 * 13, 13 * 28, 38 * 29])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`b` is a 13 x 29 matrix (column-major)"),
            "{err}"
        );

        let huge = 1usize << 31;
        let err = problem(GemmPrecision::F32, (1, huge, 1), (RowMajor, RowMajor))
            .plan(types(GemmPrecision::F32), [1, huge, huge])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("n = 2147483648") && err.contains("split"),
            "{err}"
        );
        let err = problem(GemmPrecision::F32, (usize::MAX, 2, 1), (RowMajor, RowMajor))
            .plan(types(GemmPrecision::F32), [1, 2, 2])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`a` is a"), "{err}");
    }

    #[test]
    fn buffers_of_other_types_than_the_precisions_are_refused() {
        let err = problem(GemmPrecision::Tf32, (2, 2, 2), (RowMajor, RowMajor))
            .plan((Scalar::F16, Scalar::F32), [4, 4, 4])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("takes f32 A and B and f32 C")
                && err.contains("hold f16 A and B and f32 C"),
            "{err}"
        );
        let err = problem(GemmPrecision::I8, (4, 4, 4), (RowMajor, ColMajor))
            .plan((Scalar::I8, Scalar::F32), [16, 16, 16])
            .unwrap_err()
            .to_string();
        assert!(err.contains("and i32 C"), "{err}");
    }

    #[test]
    fn int8_products_must_have_cublas_tn_form_and_multiples_of_4() {
        let i8_types = types(GemmPrecision::I8);
        for layouts in [
            (RowMajor, RowMajor),
            (ColMajor, ColMajor),
            (ColMajor, RowMajor),
        ] {
            let err = problem(GemmPrecision::I8, (8, 8, 8), layouts)
                .plan(i8_types, [64, 64, 64])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("A row-major and B column-major") && err.contains("\"TN\""),
                "{err}"
            );
        }
        for dims in [(8, 6, 8), (8, 8, 6)] {
            let err = problem(GemmPrecision::I8, dims, (RowMajor, ColMajor))
                .plan(i8_types, [64, 64, 64])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("multiples of 4") && err.contains("pad"),
                "{err}"
            );
        }
        // m is free.
        assert!(problem(GemmPrecision::I8, (7, 8, 4), (RowMajor, ColMajor))
            .plan(i8_types, [28, 32, 56])
            .is_ok());
    }

    #[test]
    fn scale_factors_have_the_compute_types_scale_type() {
        let one = ScaleFactor::new(GemmPrecision::I8, 1);
        assert!(matches!(one, ScaleFactor::I32(1)));
        // SAFETY: the pointer points at the i32 inside `one`.
        assert_eq!(unsafe { *(one.as_ptr() as *const i32) }, 1);
        let zero = ScaleFactor::new(GemmPrecision::Bf16, 0);
        assert!(matches!(zero, ScaleFactor::F32(v) if v == 0.0));
        let problem = |precision| GemmProblem {
            precision,
            dims: (64, 64, 64),
            layouts: (MatrixLayout::RowMajor, MatrixLayout::ColMajor),
        };
        let Ok(CublasRoute::GemmEx(types)) = CublasRoute::of(&problem(GemmPrecision::Tf32)) else {
            panic!("tf32 goes through cublasGemmEx");
        };
        assert_eq!(
            types.compute,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        );
    }

    #[test]
    fn e4m3_goes_to_cublaslt_and_e5m2_is_refused() {
        use cudarc::cublaslt::sys::cudaDataType_t as LtType;
        let problem = |precision| GemmProblem {
            precision,
            dims: (64, 64, 64),
            layouts: (RowMajor, ColMajor),
        };
        assert!(matches!(
            CublasRoute::of(&problem(GemmPrecision::E4m3)),
            Ok(CublasRoute::LtFp8(LtType::CUDA_R_8F_E4M3))
        ));
        assert_eq!(
            CublasRoute::lt_fp8_input(&problem(GemmPrecision::E4m3)).unwrap(),
            LtType::CUDA_R_8F_E4M3
        );
        for err in [
            CublasRoute::of(&problem(GemmPrecision::E5m2)).err(),
            CublasRoute::lt_fp8_input(&problem(GemmPrecision::E5m2)).err(),
        ] {
            let err = err.unwrap().to_string();
            assert!(
                err.contains("no e5m2 x e5m2 GEMM") && err.contains("f16 GEMM"),
                "{err}"
            );
        }
        let err = CublasRoute::lt_fp8_input(&problem(GemmPrecision::Bf16))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("e4m3) only") && err.contains("`cublas_gemm` for bf16"),
            "{err}"
        );
    }

    #[test]
    fn fp8_products_must_have_cublas_tn_form_and_multiples_of_16() {
        let e4m3 = types(GemmPrecision::E4m3);
        for layouts in [
            (RowMajor, RowMajor),
            (ColMajor, ColMajor),
            (ColMajor, RowMajor),
        ] {
            let err = problem(GemmPrecision::E4m3, (16, 16, 16), layouts)
                .plan(e4m3, [256, 256, 256])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("A row-major and B column-major") && err.contains("\"TN\""),
                "{err}"
            );
        }
        for dims in [(16, 8, 16), (16, 16, 40), (16, 24, 16)] {
            let err = problem(GemmPrecision::E4m3, dims, (RowMajor, ColMajor))
                .plan(e4m3, [1024, 1024, 1024])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("multiples of 16") && err.contains("pad"),
                "{dims:?}: {err}"
            );
        }
        // m is free; both operands are read along k: cuBLAS's "TN".
        let call = problem(GemmPrecision::E4m3, (37, 32, 48), (RowMajor, ColMajor))
            .plan(e4m3, [37 * 48, 48 * 32, 37 * 32])
            .unwrap();
        assert_eq!(
            call,
            ColumnMajorCall {
                transa: cublasOperation_t::CUBLAS_OP_T,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: 32,
                n: 37,
                k: 48,
                lda: 48,
                ldb: 48,
                ldc: 32,
            }
        );
        // The buffers must hold e4m3 A and B and bf16 C.
        let err = problem(GemmPrecision::E4m3, (16, 16, 16), (RowMajor, ColMajor))
            .plan((Scalar::E4m3, Scalar::F32), [256, 256, 256])
            .unwrap_err()
            .to_string();
        assert!(err.contains("takes e4m3 A and B and bf16 C"), "{err}");
    }

    fn gpu() -> Runtime {
        Runtime::cuda(0)
            .unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"))
    }

    /// Uploads a `rows x cols` matrix of small integers (exact in every
    /// input type) in `layout`; returns the buffer and the values, row-major.
    fn upload_integers<T: DeviceScalar>(
        rt: &Runtime,
        (rows, cols): (usize, usize),
        layout: MatrixLayout,
        seed: usize,
        convert: impl Fn(i32) -> T,
    ) -> (DeviceBuffer<T>, Vec<i64>) {
        let values: Vec<i64> = (0..rows * cols)
            .map(|i| ((i * 37 + seed * 11) % 7) as i64 - 3)
            .collect();
        let mut stored = vec![convert(0); rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                stored[layout.index((r, c), (rows, cols))] = convert(values[r * cols + c] as i32);
            }
        }
        (rt.upload(&stored).unwrap(), values)
    }

    fn exact_product(a: &[i64], b: &[i64], (m, n, k): (usize, usize, usize)) -> Vec<i64> {
        let mut c = vec![0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    /// Runs one precision on every layout combination cuBLAS takes and
    /// compares with the exact product, rounded once to the output type
    /// (small integers: the f32 or i32 sums are exact).
    fn check_precision<I: DeviceScalar, O: DeviceScalar + PartialEq + std::fmt::Debug>(
        rt: &Runtime,
        precision: GemmPrecision,
        dims: (usize, usize, usize),
        input: impl Fn(i32) -> I + Copy,
        output: impl Fn(i64) -> O,
    ) {
        let (m, n, k) = dims;
        for a_layout in MatrixLayout::ALL {
            for b_layout in MatrixLayout::ALL {
                let (a, a_values) = upload_integers(rt, (m, k), a_layout, 1, input);
                let (b, b_values) = upload_integers(rt, (k, n), b_layout, 2, input);
                let mut c = rt.alloc_zeroed::<O>(m * n).unwrap();
                let result = rt.cublas_gemm(precision, dims, (a_layout, b_layout), &a, &b, &mut c);
                let tn_form = (a_layout, b_layout) == (RowMajor, ColMajor);
                let tn_only = matches!(precision, GemmPrecision::I8 | GemmPrecision::E4m3);
                if tn_only && !tn_form {
                    let err = result.unwrap_err().to_string();
                    assert!(err.contains("\"TN\""), "{err}");
                    continue;
                }
                result.unwrap_or_else(|e| panic!("{e}"));
                let want: Vec<O> = exact_product(&a_values, &b_values, dims)
                    .into_iter()
                    .map(&output)
                    .collect();
                assert_eq!(
                    rt.download(&c).unwrap(),
                    want,
                    "{precision}, A {a_layout}, B {b_layout}"
                );
            }
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn every_precision_and_layout_matches_the_exact_product() {
        let rt = gpu();
        // The GPU tier needs cuBLAS (the benchmarks compare with it): missing is a failure.
        let ragged = (37, 29, 45);
        check_precision(
            &rt,
            GemmPrecision::F16,
            ragged,
            |v| f16::from_f64(v.into()),
            |v| f16::from_f64(v as f64),
        );
        check_precision(
            &rt,
            GemmPrecision::Bf16,
            ragged,
            |v| bf16::from_f64(v.into()),
            |v| bf16::from_f64(v as f64),
        );
        check_precision(&rt, GemmPrecision::Tf32, ragged, |v| v as f32, |v| v as f32);
        check_precision(&rt, GemmPrecision::F32, ragged, |v| v as f32, |v| v as f32);
        check_precision(
            &rt,
            GemmPrecision::I8,
            (37, 28, 44),
            |v| v as i8,
            |v| v as i32,
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn e4m3_products_match_the_exact_product_in_both_accumulation_modes() {
        let rt = gpu();
        // The fp8 GEMMs need compute capability 8.9 or newer (an H200 in the
        // GPU tier); small integers are exact in e4m3, their sums (at most
        // 9 * 48) in either accumulation and, rounded once, in bf16.
        let dims = (37, 32, 48);
        let to_e4m3 = |v: i32| e4m3::from_f32(v as f32);
        let to_bf16 = |v: i64| bf16::from_f64(v as f64);
        let (m, n, k) = dims;
        let (a, a_values) = upload_integers(&rt, (m, k), RowMajor, 1, to_e4m3);
        let (b, b_values) = upload_integers(&rt, (k, n), ColMajor, 2, to_e4m3);
        let want: Vec<bf16> = exact_product(&a_values, &b_values, dims)
            .into_iter()
            .map(to_bf16)
            .collect();
        for fast_accumulation in [true, false] {
            let mut c = rt.alloc_zeroed::<bf16>(m * n).unwrap();
            rt.cublaslt_fp8_gemm(GemmPrecision::E4m3, dims, &a, &b, &mut c, fast_accumulation)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                rt.download(&c).unwrap(),
                want,
                "fast accumulation {fast_accumulation}"
            );
        }
        // `cublas_gemm` sends e4m3 to cuBLASLt and refuses all but the TN form.
        check_precision(&rt, GemmPrecision::E4m3, dims, to_e4m3, to_bf16);
        let mut c = rt.alloc_zeroed::<bf16>(m * n).unwrap();
        let err = rt
            .cublaslt_fp8_gemm(GemmPrecision::E5m2, dims, &a, &b, &mut c, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no e5m2 x e5m2 GEMM"), "{err}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn int8_sums_use_the_whole_i8_range() {
        let rt = gpu();
        let (m, n, k) = (33, 64, 128);
        // A row-major, B column-major: B[p][j] at j * k + p.
        let a: Vec<i8> = (0..m * k)
            .map(|i| if i % 3 == 0 { -128 } else { 127 })
            .collect();
        let b: Vec<i8> = (0..k * n)
            .map(|i| if i % 5 == 0 { 127 } else { -128 })
            .collect();
        let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
        let mut dc = rt.alloc_zeroed::<i32>(m * n).unwrap();
        rt.cublas_gemm(
            GemmPrecision::I8,
            (m, n, k),
            (RowMajor, ColMajor),
            &da,
            &db,
            &mut dc,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let c = rt.download(&dc).unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: i32 = (0..k)
                    .map(|p| i32::from(a[i * k + p]) * i32::from(b[j * k + p]))
                    .sum();
                assert_eq!(c[i * n + j], want, "({i}, {j})");
            }
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run by the GPU tier (cargo xtask gpu-bundle)"]
    fn tf32_rounds_the_inputs_and_f32_does_not() {
        let rt = gpu();
        let (m, n, k) = (64, 64, 64);
        // 1 + 2^-12 is not a tf32 value: rounded to nearest it is 1.
        let a = rt.upload(&vec![1.0f32 + 2f32.powi(-12); m * k]).unwrap();
        let b = rt.upload(&vec![1.0f32; k * n]).unwrap();
        let mut c = rt.alloc_zeroed::<f32>(m * n).unwrap();
        let layouts = (RowMajor, RowMajor);
        for (precision, want) in [
            (GemmPrecision::Tf32, 64.0),
            (GemmPrecision::F32, 64.0 + 2f32.powi(-6)),
        ] {
            rt.cublas_gemm(precision, (m, n, k), layouts, &a, &b, &mut c)
                .unwrap_or_else(|e| panic!("{e}"));
            let out = rt.download(&c).unwrap();
            assert!(
                out.iter().all(|&v| v == want),
                "{precision}: {:?}",
                &out[..4]
            );
        }
    }
}
