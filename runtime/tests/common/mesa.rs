//! Mesa warns on every Vulkan instance when XDG_RUNTIME_DIR is unset. Shared
//! by the integration tests and, through `#[path]`, the crate's unit tests.

use std::sync::Once;

/// Gives Mesa a private XDG_RUNTIME_DIR when there is none. Call before the
/// test binary's first adapter: set once, before any thread reads it.
pub fn quiet_mesa() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        #[cfg(unix)]
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            use std::os::unix::fs::DirBuilderExt;
            let dir = std::env::temp_dir().join("warpforge-xdg");
            // Mesa wants the folder private; when it cannot be made, Mesa only warns.
            if std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .is_ok()
            {
                std::env::set_var("XDG_RUNTIME_DIR", dir);
            }
        }
    });
}

/// Prints the adapter once per test binary, past the test harness's
/// capture, so that the log of a passing run shows what ran the tests.
pub fn announce_adapter(backend_name: &str, device_name: &str) {
    static ANNOUNCE: Once = Once::new();
    ANNOUNCE.call_once(|| {
        use std::io::Write;
        // A lost log line is not worth failing a test over.
        let _ = writeln!(
            std::io::stderr(),
            "wgpu adapter: {backend_name}: {device_name}"
        );
    });
}
