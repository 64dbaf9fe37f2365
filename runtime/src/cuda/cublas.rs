//! cuBLAS on the runtime's stream: the reference the benchmarks compare against.

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;

use super::CudaBackend;
use crate::Error;

impl CudaBackend {
    fn blas(&self) -> Result<&CudaBlas, Error> {
        if let Some(blas) = self.blas.get() {
            return Ok(blas);
        }
        // cudarc panics when it calls into a cuBLAS it cannot load, so probe first.
        // SAFETY: loading the library runs no code of ours; it only probes the search path.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::Cublas(
                "cuBLAS is not installed: libcublas.so could not be loaded. Install cuBLAS (the CUDA \
                 toolkit, or `pip install nvidia-cublas-cu12`) and put the directory holding \
                 libcublas.so on LD_LIBRARY_PATH."
                    .into(),
            ));
        }
        let blas = CudaBlas::new(self.stream.clone())
            .map_err(|e| Error::Cublas(format!("creating a cuBLAS handle failed: {e:?}")))?;
        Ok(self.blas.get_or_init(|| blas))
    }

    /// Row-major `c[m x n] = a[m x k] * b[k x n]` in f32. cuBLAS is
    /// column-major, and a row-major matrix is its transpose in column-major,
    /// so this computes `c^T = b^T * a^T` with no transposes.
    pub(crate) fn sgemm(
        &self,
        (m, n, k): (usize, usize, usize),
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), Error> {
        let shape = format!("m = {m}, n = {n}, k = {k}");
        let dim = |v: usize| {
            i32::try_from(v).map_err(|_| {
                Error::Cublas(format!(
                    "sgemm with {shape}: cuBLAS takes dimensions up to {}",
                    i32::MAX
                ))
            })
        };
        let (mi, ni, ki) = (dim(m)?, dim(n)?, dim(k)?);
        for (name, slice, rows, cols) in [("a", a, m, k), ("b", b, k, n)] {
            self.check_sgemm_operand(name, slice, rows, cols, &shape)?;
        }
        self.check_sgemm_operand("c", c, m, n, &shape)?;
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: ni,
            n: mi,
            k: ki,
            alpha: 1.0f32,
            // Leading dimensions must be at least 1 even for empty matrices.
            lda: ni.max(1),
            ldb: ki.max(1),
            beta: 0.0f32,
            ldc: ni.max(1),
        };
        let blas = self.blas()?;
        // SAFETY: the operands belong to this context and hold at least the
        // elements the shapes and leading dimensions address (checked above).
        unsafe { blas.gemm(cfg, b, a, c) }
            .map_err(|e| Error::Cublas(format!("cuBLAS sgemm with {shape} failed: {e:?}")))?;
        self.check_recorded("cuBLAS sgemm")
    }

    fn check_sgemm_operand(
        &self,
        name: &str,
        slice: &CudaSlice<f32>,
        rows: usize,
        cols: usize,
        shape: &str,
    ) -> Result<(), Error> {
        self.check_owner(slice.context(), &format!("sgemm operand `{name}`"))?;
        let needed = rows.checked_mul(cols);
        if needed.is_none_or(|needed| slice.len() < needed) {
            return Err(Error::Cublas(format!(
                "sgemm with {shape}: `{name}` is a {rows} x {cols} matrix, and its buffer holds {} \
                 elements: pass a buffer of at least rows * cols elements",
                slice.len()
            )));
        }
        Ok(())
    }
}
