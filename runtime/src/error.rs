//! [`Error`]: everything the runtime can refuse or fail at. Each message says
//! what was wrong and what to do about it.

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
    /// NCCL (feature `nccl`) is missing, was given runtimes or ranks it
    /// cannot take, or failed.
    #[error("{0}")]
    Nccl(String),
    /// The tuning database cannot be read, written or imported.
    #[error("{0}")]
    Tune(String),
    /// The interpreter refused or stopped a launch
    /// ([`crate::Runtime::interpreter`]): one of its checks fired (an index
    /// out of bounds, barrier or warp divergence, a read of a value nothing
    /// wrote, division by zero, the step budget) or the kernel uses what it
    /// does not run. Match on the error's `kind`
    /// ([`crate::InterpreterErrorKind`]); its message names the kernel and,
    /// for a check, the block, thread and statement.
    #[error("{0}")]
    Interpreter(Box<crate::InterpreterError>),
}

fn jit_log(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{}", log.trim_end())
    }
}
