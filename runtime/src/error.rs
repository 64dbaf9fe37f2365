//! [`Error`]: everything the runtime can refuse or fail at. Each message says
//! what was wrong and what to do about it.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;
use warpforge_codegen::{Arch, Target};

/// Why a runtime operation could not be done. Every variant's message
/// (`Display`) says what was wrong and what to do; the variants tell callers
/// that react differently apart (no device at all, a call to fix, a driver
/// failure).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable CUDA driver: the library is missing, is the toolkit's stub,
    /// is too old, or failed to initialize.
    #[error("{0}")]
    NoDriver(String),
    /// The driver works but the requested device does not exist.
    #[error("{0}")]
    NoDevice(String),
    /// A launch rejected before it reached the driver: arguments, const
    /// values, requirements, grid or block shape, shared memory, targets.
    #[error("cannot launch `{kernel}`: {message}")]
    InvalidLaunch {
        /// The kernel's name.
        kernel: String,
        /// What was wrong with the call and what to change.
        message: String,
    },
    /// Code generation failed for one variant; `source` keeps codegen's message.
    #[error("cannot build `{variant}` for {}: {source}", target.name())]
    Codegen {
        /// The kernel and its const values, e.g. `gemm_f16[BM=128,BN=128,..]`.
        variant: String,
        /// The target it was built for.
        target: Target,
        /// Codegen's error.
        #[source]
        source: warpforge_codegen::Error,
    },
    /// The driver could not JIT-compile or load the PTX of a variant.
    #[error("the CUDA driver rejected the PTX of `{variant}` for {}: {code}. {hint}{}", arch.name(), jit_log(log))]
    ModuleLoad {
        /// The kernel and its const values.
        variant: String,
        /// The arch the PTX was built for.
        arch: Arch,
        /// The `CUresult` name (or what else was wrong with the text).
        code: String,
        /// What to do about it.
        hint: String,
        /// The JIT's error log, when it wrote one.
        log: String,
    },
    /// A driver call failed. `code` is the `CUresult` name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
    #[error("{message}")]
    Driver {
        /// The `CUresult` name.
        code: String,
        /// The call that failed and what to do.
        message: String,
    },
    /// A buffer that cannot be used as asked: wrong length, unsupported
    /// element type, or owned by another device.
    #[error("{0}")]
    Buffer(String),
    /// cuBLAS is missing or failed.
    #[error("{0}")]
    Cublas(String),
    /// A wgpu call failed: no adapter, a rejected shader, a lost device, out
    /// of memory, or an operation this backend does not have.
    #[error("{0}")]
    Wgpu(String),
    /// The tuning database cannot be read, written or imported.
    #[error("{0}")]
    Tune(String),
}

fn jit_log(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{}", log.trim_end())
    }
}

/// The name of a driver result, e.g. `CUDA_ERROR_OUT_OF_MEMORY`; needs no driver call.
pub(crate) fn code_name(code: CUresult) -> String {
    format!("{code:?}")
}

/// What to do about a driver error, for the codes a user can act on.
pub(crate) fn driver_hint(code: CUresult) -> &'static str {
    match code {
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            "The GPU is out of memory: free buffers you no longer need, use smaller sizes, or check \
             nvidia-smi for other processes holding memory."
        }
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
            "The block needs more registers or resources than an SM has: launch with fewer threads \
             per block or pick a variant that uses fewer registers."
        }
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
        | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
        | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUresult::CUDA_ERROR_LAUNCH_FAILED
        | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR => {
            "A kernel faulted (possibly an earlier one: launches are asynchronous). The CUDA context \
             is now unusable: restart the process, and run it under compute-sanitizer to find the \
             faulting access."
        }
        CUresult::CUDA_ERROR_LAUNCH_TIMEOUT => {
            "A kernel ran longer than the display watchdog allows: use a GPU without a display or \
             split the work into shorter launches."
        }
        CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION | CUresult::CUDA_ERROR_INVALID_PTX => {
            "The installed driver is older than the PTX ISA version the module declares, or the PTX \
             is malformed: update the NVIDIA driver; if that does not help, report the kernel with \
             the JIT log."
        }
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
            "The module holds no code this GPU can run: build the kernel for an arch at or below \
             the device's compute capability."
        }
        CUresult::CUDA_ERROR_NO_DEVICE | CUresult::CUDA_ERROR_INVALID_DEVICE => {
            "Check that nvidia-smi lists the GPU and that CUDA_VISIBLE_DEVICES names it."
        }
        CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "The CUDA driver library does not match the loaded kernel driver, or the CUDA forward-compatibility \
             package does not support this GPU: reinstall the NVIDIA driver so that both match."
        }
        CUresult::CUDA_ERROR_STUB_LIBRARY => {
            "The libcuda.so that was loaded is the CUDA toolkit's stub, not the driver: install the \
             NVIDIA driver and remove the toolkit's `stubs` directory from LD_LIBRARY_PATH."
        }
        CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE => {
            "The GPU is busy or in exclusive-process mode: stop the other process using it or change \
             the compute mode with nvidia-smi."
        }
        _ => "",
    }
}

/// Maps a failed driver call to an [`Error::Driver`] naming the operation.
pub(crate) fn driver_error(op: &str, err: DriverError) -> Error {
    let code = code_name(err.0);
    // `error_string` asks the driver; a failure there only loses the description.
    let description = err
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hint = driver_hint(err.0);
    let mut message = format!("{op} failed: {code}");
    if !description.is_empty() {
        message.push_str(&format!(" ({description})"));
    }
    if !hint.is_empty() {
        message.push_str(". ");
        message.push_str(hint);
    }
    Error::Driver { code, message }
}
