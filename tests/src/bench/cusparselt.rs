//! cuSPARSELt, NVIDIA's 2:4 sparse GEMM library, as the baseline of the
//! bench's sparse section: loaded at run time where it is installed
//! (cudarc does not bind it, and warpforge does not depend on it), with
//! only what one f16 product needs.
//!
//! The library is found as `$WARPFORGE_CUSPARSELT` (a file path) or
//! `libcusparseLt.so.0` on the loader's path (PyTorch's wheels install it
//! under `site-packages/nvidia/*/lib`). The calls follow the library's
//! documented flow: descriptors, a matmul plan, the sparse operand
//! compressed by the library, its fastest kernel searched once, then
//! `cusparseLtMatmul` on the runtime's stream. Checked against
//! cuSPARSELt 0.10's header; versions before 0.6 (another compute-type
//! enumeration) are refused.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use libloading::Library;
use warpforge::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use warpforge::{f16, DeviceBuffer, Error, Runtime};

/// The environment variable naming the library file, where it is not on
/// the loader's path.
pub const LIBRARY_VAR: &str = "WARPFORGE_CUSPARSELT";
const LIBRARY_NAME: &str = "libcusparseLt.so.0";

/// The library's opaque structures (handle, descriptors, plan): 512 bytes
/// in 0.10, 1024 in some earlier versions; the larger fits both.
#[repr(C, align(16))]
struct Opaque([u8; 1024]);

impl Opaque {
    fn new() -> Box<Opaque> {
        Box::new(Opaque([0; 1024]))
    }
}

type Status = c_int;
type Ptr = *const Opaque;
type MutPtr = *mut Opaque;
type Stream = *mut c_void;

// The enumerations' values, from cusparseLt.h and library_types.h.
const CUDA_R_16F: c_int = 2;
const CUSPARSE_ORDER_ROW: c_int = 2;
const CUSPARSE_OPERATION_NON_TRANSPOSE: c_int = 0;
const CUSPARSE_OPERATION_TRANSPOSE: c_int = 1;
const CUSPARSELT_SPARSITY_50_PERCENT: c_int = 0;
const CUSPARSE_COMPUTE_32F: c_int = 2;
const CUSPARSELT_MATMUL_ALG_DEFAULT: c_int = 0;
/// 0.6.0 as `cusparseLtGetVersion` reports it (major * 1000000 + minor * 100
/// + patch): the first with this compute-type enumeration.
const OLDEST_VERSION: c_int = 600;

/// `cusparseLtMatmulSearch` and `cusparseLtMatmul`: handle, plan (const
/// in the latter, the same pointer), alpha, A, B, beta, C, D, workspace,
/// streams and their count.
type MatmulFn = unsafe extern "C" fn(
    Ptr,
    MutPtr,
    *const f32,
    u64,
    u64,
    *const f32,
    u64,
    u64,
    u64,
    *mut Stream,
    i32,
) -> Status;

/// The entry points used, resolved once.
struct Api {
    init: unsafe extern "C" fn(MutPtr) -> Status,
    destroy: unsafe extern "C" fn(Ptr) -> Status,
    get_version: unsafe extern "C" fn(Ptr, *mut c_int) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    dense: unsafe extern "C" fn(Ptr, MutPtr, i64, i64, i64, u32, c_int, c_int) -> Status,
    structured:
        unsafe extern "C" fn(Ptr, MutPtr, i64, i64, i64, u32, c_int, c_int, c_int) -> Status,
    mat_destroy: unsafe extern "C" fn(Ptr) -> Status,
    matmul_init:
        unsafe extern "C" fn(Ptr, MutPtr, c_int, c_int, Ptr, Ptr, Ptr, Ptr, c_int) -> Status,
    alg_init: unsafe extern "C" fn(Ptr, MutPtr, Ptr, c_int) -> Status,
    alg_destroy: unsafe extern "C" fn(Ptr) -> Status,
    plan_init: unsafe extern "C" fn(Ptr, MutPtr, Ptr, Ptr) -> Status,
    plan_destroy: unsafe extern "C" fn(Ptr) -> Status,
    workspace: unsafe extern "C" fn(Ptr, Ptr, *mut usize) -> Status,
    compressed_size: unsafe extern "C" fn(Ptr, Ptr, *mut usize, *mut usize) -> Status,
    compress: unsafe extern "C" fn(Ptr, Ptr, u64, u64, u64, Stream) -> Status,
    search: MatmulFn,
    matmul: MatmulFn,
    // Keeps the entry points valid.
    _library: Library,
}

impl Api {
    fn load() -> Result<Api, String> {
        let name = std::env::var(LIBRARY_VAR).unwrap_or_else(|_| LIBRARY_NAME.to_string());
        // SAFETY: loading runs the library's initialisers, which call none of
        // our code.
        let library = unsafe { Library::new(&name) }.map_err(|e| {
            format!(
                "{name} does not load ({e}); install cuSPARSELt or name its library file in \
                 ${LIBRARY_VAR}"
            )
        })?;
        macro_rules! symbol {
            ($name:literal) => {
                // SAFETY: the type is the header's declaration of the symbol.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{name} has no {}: {e}", $name))?
            };
        }
        Ok(Api {
            init: symbol!("cusparseLtInit"),
            destroy: symbol!("cusparseLtDestroy"),
            get_version: symbol!("cusparseLtGetVersion"),
            error_string: symbol!("cusparseLtGetErrorString"),
            dense: symbol!("cusparseLtDenseDescriptorInit"),
            structured: symbol!("cusparseLtStructuredDescriptorInit"),
            mat_destroy: symbol!("cusparseLtMatDescriptorDestroy"),
            matmul_init: symbol!("cusparseLtMatmulDescriptorInit"),
            alg_init: symbol!("cusparseLtMatmulAlgSelectionInit"),
            alg_destroy: symbol!("cusparseLtMatmulAlgSelectionDestroy"),
            plan_init: symbol!("cusparseLtMatmulPlanInit"),
            plan_destroy: symbol!("cusparseLtMatmulPlanDestroy"),
            workspace: symbol!("cusparseLtMatmulGetWorkspace"),
            compressed_size: symbol!("cusparseLtSpMMACompressedSize"),
            compress: symbol!("cusparseLtSpMMACompress"),
            search: symbol!("cusparseLtMatmulSearch"),
            matmul: symbol!("cusparseLtMatmul"),
            _library: library,
        })
    }

    /// The library, loaded once per process and never unloaded (it links
    /// the CUDA runtime statically, whose exit handlers must outlive it).
    fn get() -> Result<&'static Api, String> {
        static API: OnceLock<Result<Api, String>> = OnceLock::new();
        API.get_or_init(Api::load).as_ref().map_err(String::clone)
    }

    /// `status` as an `Err` naming the call and the library's message.
    fn check(&self, call: &str, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: the library returns a static string for any status.
        let message = unsafe { CStr::from_ptr((self.error_string)(status)) };
        Err(format!(
            "cuSPARSELt {call} failed: {} ({status})",
            message.to_string_lossy()
        ))
    }
}

/// `c (m x n, row-major) = a (m x k, row-major, 2:4 along k) times b`, where
/// `b` is n x k row-major (B column-major), f16 in and out with f32 sums:
/// the bench sparse section's product, planned, compressed and searched once.
pub struct SparseGemm {
    api: &'static Api,
    handle: Box<Opaque>,
    matrices: [Box<Opaque>; 3],
    matmul: Box<Opaque>,
    algorithm: Box<Opaque>,
    plan: Box<Opaque>,
    compressed: CudaSlice<u8>,
    workspace: CudaSlice<u8>,
    /// Torn down in `drop`: only what was set up.
    ready: Setup,
}

/// How far [`SparseGemm::new`] got, for `drop`.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Setup {
    Nothing,
    Handle,
    Matrices,
    Algorithm,
    Plan,
}

fn device_error(e: impl std::fmt::Display) -> String {
    format!("cuSPARSELt's buffers: {e}")
}

impl SparseGemm {
    /// Plans the product for `dims` on `rt`'s stream, compresses `a` (which
    /// must already be 2:4 along k) and searches the fastest kernel with
    /// `b` and `c`. `Err` says why cuSPARSELt cannot run it here.
    pub fn new(
        rt: &Runtime,
        (m, n, k): (usize, usize, usize),
        a: &DeviceBuffer<f16>,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f16>,
    ) -> Result<SparseGemm, String> {
        let api = Api::get()?;
        let stream = rt
            .cuda_stream()
            .ok_or("cuSPARSELt runs on CUDA only")?
            .clone();
        let mut gemm = SparseGemm {
            api,
            handle: Opaque::new(),
            matrices: [Opaque::new(), Opaque::new(), Opaque::new()],
            matmul: Opaque::new(),
            algorithm: Opaque::new(),
            plan: Opaque::new(),
            compressed: stream.alloc_zeros(1).map_err(device_error)?,
            workspace: stream.alloc_zeros(1).map_err(device_error)?,
            ready: Setup::Nothing,
        };
        let api = gemm.api;
        // SAFETY (every call below): the pointers are to this struct's boxed
        // structures, which live as long as it, or to device memory of the
        // sizes the calls are told, alive for the call.
        api.check("init", unsafe { (api.init)(&mut *gemm.handle) })?;
        gemm.ready = Setup::Handle;
        // Taken after `init` wrote the handle, and again after `launch`
        // borrows the whole struct.
        let handle: Ptr = &*gemm.handle;
        let mut version = 0;
        api.check("version", unsafe {
            (api.get_version)(handle, &mut version)
        })?;
        if version < OLDEST_VERSION {
            return Err(format!(
                "cuSPARSELt {version} is older than 0.6, whose interface the bench uses"
            ));
        }
        let [sparse, dense, out] = &mut gemm.matrices;
        let (m, n, k) = (m as i64, n as i64, k as i64);
        api.check("structured descriptor", unsafe {
            (api.structured)(
                handle,
                &mut **sparse,
                m,
                k,
                k,
                16,
                CUDA_R_16F,
                CUSPARSE_ORDER_ROW,
                CUSPARSELT_SPARSITY_50_PERCENT,
            )
        })?;
        api.check("dense descriptor", unsafe {
            (api.dense)(
                handle,
                &mut **dense,
                n,
                k,
                k,
                16,
                CUDA_R_16F,
                CUSPARSE_ORDER_ROW,
            )
        })?;
        api.check("dense descriptor", unsafe {
            (api.dense)(
                handle,
                &mut **out,
                m,
                n,
                n,
                16,
                CUDA_R_16F,
                CUSPARSE_ORDER_ROW,
            )
        })?;
        gemm.ready = Setup::Matrices;
        let [sparse, dense, out]: [Ptr; 3] =
            [&*gemm.matrices[0], &*gemm.matrices[1], &*gemm.matrices[2]];
        api.check("matmul descriptor", unsafe {
            (api.matmul_init)(
                handle,
                &mut *gemm.matmul,
                CUSPARSE_OPERATION_NON_TRANSPOSE,
                CUSPARSE_OPERATION_TRANSPOSE,
                sparse,
                dense,
                out,
                out,
                CUSPARSE_COMPUTE_32F,
            )
        })?;
        api.check("algorithm selection", unsafe {
            (api.alg_init)(
                handle,
                &mut *gemm.algorithm,
                &*gemm.matmul,
                CUSPARSELT_MATMUL_ALG_DEFAULT,
            )
        })?;
        gemm.ready = Setup::Algorithm;
        api.check("plan", unsafe {
            (api.plan_init)(handle, &mut *gemm.plan, &*gemm.matmul, &*gemm.algorithm)
        })?;
        gemm.ready = Setup::Plan;
        let (mut compressed, mut scratch) = (0usize, 0usize);
        api.check("compressed size", unsafe {
            (api.compressed_size)(handle, &*gemm.plan, &mut compressed, &mut scratch)
        })?;
        gemm.compressed = stream
            .alloc_zeros(compressed.max(1))
            .map_err(device_error)?;
        let mut scratch: CudaSlice<u8> =
            stream.alloc_zeros(scratch.max(1)).map_err(device_error)?;
        let a = a.cuda_slice().ok_or("a is not a CUDA buffer")?;
        {
            let (a_ptr, _a) = a.device_ptr(&stream);
            let (compressed_ptr, _c) = gemm.compressed.device_ptr_mut(&stream);
            let (scratch_ptr, _s) = scratch.device_ptr_mut(&stream);
            api.check("compress", unsafe {
                (api.compress)(
                    handle,
                    &*gemm.plan,
                    a_ptr,
                    compressed_ptr,
                    scratch_ptr,
                    stream.cu_stream() as Stream,
                )
            })?;
        }
        // The search may pick a kernel (a split k, say) whose workspace
        // differs: it runs without one, as NVIDIA's sample does, and the
        // workspace is sized for its choice.
        gemm.launch(rt, b, c, true)?;
        let mut workspace = 0usize;
        api.check("workspace size", unsafe {
            (api.workspace)(&*gemm.handle, &*gemm.plan, &mut workspace)
        })?;
        gemm.workspace = stream.alloc_zeros(workspace.max(1)).map_err(device_error)?;
        Ok(gemm)
    }

    /// One product on `rt`'s stream (`search`: cuSPARSELt's search of its
    /// kernels for this plan, which it keeps, instead).
    fn launch(
        &mut self,
        rt: &Runtime,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f16>,
        search: bool,
    ) -> Result<(), String> {
        let stream = rt.cuda_stream().ok_or("cuSPARSELt runs on CUDA only")?;
        let b = b.cuda_slice().ok_or("b is not a CUDA buffer")?;
        let c = c.cuda_slice_mut().ok_or("c is not a CUDA buffer")?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (a_ptr, _a) = self.compressed.device_ptr(stream);
        let (b_ptr, _b) = b.device_ptr(stream);
        let (c_ptr, _c) = c.device_ptr_mut(stream);
        let (workspace, _w) = self.workspace.device_ptr_mut(stream);
        // The search runs without a workspace (see `new`).
        let workspace_ptr = if search { 0 } else { workspace };
        let mut streams = [stream.cu_stream() as Stream];
        let handle: Ptr = &*self.handle;
        // SAFETY: as in `new`; C is also D (beta is 0, C is only written).
        let call = if search {
            self.api.search
        } else {
            self.api.matmul
        };
        let status = unsafe {
            call(
                handle,
                &mut *self.plan,
                &alpha,
                a_ptr,
                b_ptr,
                &beta,
                c_ptr,
                c_ptr,
                workspace_ptr,
                streams.as_mut_ptr(),
                1,
            )
        };
        self.api
            .check(if search { "search" } else { "matmul" }, status)
    }

    /// One product `c = a b` on `rt`'s stream.
    pub fn run(
        &mut self,
        rt: &Runtime,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f16>,
    ) -> Result<(), Error> {
        self.launch(rt, b, c, false)
            .map_err(|message| Error::Driver {
                code: "cuSPARSELt".into(),
                message,
            })
    }
}

impl Drop for SparseGemm {
    fn drop(&mut self) {
        let api = self.api;
        // SAFETY: each structure is destroyed once, and only if it was made.
        // Failures here leave nothing to do.
        unsafe {
            if self.ready >= Setup::Plan {
                (api.plan_destroy)(&*self.plan);
            }
            if self.ready >= Setup::Algorithm {
                (api.alg_destroy)(&*self.algorithm);
            }
            if self.ready >= Setup::Matrices {
                for matrix in &self.matrices {
                    (api.mat_destroy)(&**matrix);
                }
            }
            if self.ready >= Setup::Handle {
                (api.destroy)(&*self.handle);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_named_with_what_to_do() {
        // Set for this test binary only; no other test here reads it.
        std::env::set_var(LIBRARY_VAR, "/nonexistent/libcusparseLt.so.0");
        let Err(why) = Api::load() else {
            panic!("a library that does not exist loaded")
        };
        assert!(
            why.contains("/nonexistent/libcusparseLt.so.0 does not load"),
            "{why}"
        );
        assert!(why.contains(LIBRARY_VAR), "{why}");
    }
}
