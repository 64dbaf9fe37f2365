//! Whether a CUDA library can be loaded, asked before cudarc calls into it.
//!
//! cudarc loads libcuda, libcublas and libcublasLt on first use and panics
//! when it cannot find them. It is built with `fallback-dynamic-loading`, so an app that
//! links CUDA itself (cudarc's `dynamic-linking`, as candle does) decides how
//! the libraries are found, and cudarc's own probe (`is_culib_present`) exists
//! only in the loading mode. This probe works in both: when the app links the
//! library, the process has it already and the probe finds it.

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};

/// The file names tried for `lib` (`cuda`, `nvcuda`, `cublas`, `cublasLt`): the unversioned
/// name, the `.1` soname of the driver, and CUDA 12's names. Every name here is
/// one cudarc also tries, so a library this finds is one cudarc loads.
fn file_names(lib: &str) -> [String; 4] {
    [
        format!("{DLL_PREFIX}{lib}{DLL_SUFFIX}"),
        format!("{DLL_PREFIX}{lib}{DLL_SUFFIX}.1"),
        format!("{DLL_PREFIX}{lib}{DLL_SUFFIX}.12"),
        format!("{DLL_PREFIX}{lib}64_12{DLL_SUFFIX}"),
    ]
}

/// Whether one of `libs` (names without prefix or suffix) loads.
pub(crate) fn loads(libs: &[&str]) -> bool {
    libs.iter().flat_map(|lib| file_names(lib)).any(|name| {
        // SAFETY: loading a CUDA library runs only its initialisers, which
        // register nothing and call none of our code; the handle is dropped at
        // once (the library stays loaded while the process references it).
        unsafe { libloading::Library::new(&name) }.is_ok()
    })
}

/// Whether the library file `name` (e.g. `libnccl.so.2`) loads: for saying
/// which name is there when none that cudarc tries is.
#[cfg(feature = "nccl")]
pub(crate) fn loads_file(name: &str) -> bool {
    // SAFETY: as in `loads`.
    unsafe { libloading::Library::new(name) }.is_ok()
}

/// The driver library: libcuda on Linux, nvcuda on Windows.
pub(crate) fn driver_loads() -> bool {
    loads(&["cuda", "nvcuda"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_platform_and_cuda_12() {
        let names = file_names("cublas");
        assert!(names
            .iter()
            .all(|n| n.starts_with(DLL_PREFIX) && n.contains("cublas")));
        if cfg!(target_os = "linux") {
            assert_eq!(names[0], "libcublas.so");
            assert_eq!(names[2], "libcublas.so.12");
            assert_eq!(file_names("cublasLt")[2], "libcublasLt.so.12");
        }
    }

    #[test]
    fn a_library_that_does_not_exist_does_not_load() {
        assert!(!loads(&["warpforge_no_such_library"]));
    }
}
