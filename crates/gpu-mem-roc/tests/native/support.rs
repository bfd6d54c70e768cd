//! Shared helpers: loading the real libraries or skipping with a reason, locating files.

use gpu_mem_core::Error;
use gpu_mem_roc::driver::{Hip, Hsa};
use libtest_mimic::{Completion, Failed};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a test returns: pass, fail, or skipped at run time with a reason.
pub type Outcome = Result<Completion, Failed>;

const INSTALL_HINT: &str = "install it with `.ci/install-rocm-parts.sh` (Debian 12, as root)";

/// The real HSA runtime, or the reason to skip when it is not installed.
pub fn hsa_or_skip() -> Result<Hsa, Completion> {
    match Hsa::load() {
        Ok(hsa) => Ok(hsa),
        Err(e @ Error::LibraryLoad { .. }) => Err(Completion::ignored_with(format!(
            "HSA runtime not installed: {e}; {INSTALL_HINT}"
        ))),
        Err(e) => Err(Completion::ignored_with(format!(
            "HSA runtime unusable: {e}"
        ))),
    }
}

/// The real HIP library (hiprtc), or the reason to skip when it is not installed.
pub fn hip_or_skip() -> Result<Arc<Hip>, Completion> {
    match Hip::shared() {
        Ok(hip) => Ok(hip),
        Err(e @ Error::LibraryLoad { .. }) => Err(Completion::ignored_with(format!(
            "HIP (hiprtc) not installed: {e}; {INSTALL_HINT}"
        ))),
        Err(e) => Err(Completion::ignored_with(format!(
            "HIP library unusable: {e}"
        ))),
    }
}

/// The file a library opened by soname was mapped from, found in `/proc/self/maps` (the
/// library must be loaded when this runs).
pub fn mapped_file(soname_prefix: &str) -> Result<PathBuf, Failed> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| Failed::from(format!("cannot read /proc/self/maps: {e}")))?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(soname_prefix))
        })
        .map(PathBuf::from)
        .ok_or_else(|| Failed::from(format!("no mapping of {soname_prefix}* in /proc/self/maps")))
}

/// An `llvm-objdump` that knows the AMDGPU targets up to gfx11 (LLVM 15 or newer).
pub fn llvm_objdump() -> Option<PathBuf> {
    let candidates = [
        "/usr/bin/llvm-objdump-15",
        "/usr/lib/llvm-15/bin/llvm-objdump",
        "/usr/bin/llvm-objdump-16",
        "/usr/bin/llvm-objdump-17",
        "/usr/bin/llvm-objdump-18",
        "/usr/bin/llvm-objdump-19",
    ];
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// The workspace's `crates/` directory: `$GPU_MEM_SOURCE_ROOT/crates` where that is set (the
/// hardware bundle ships the kernel sources without the workspace), else the build's.
pub fn crates_dir() -> PathBuf {
    match std::env::var_os("GPU_MEM_SOURCE_ROOT") {
        Some(root) => PathBuf::from(root).join("crates"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    }
}

/// `Err(Failed)` with `message` unless `condition`.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(Failed::from(message()))
    }
}
