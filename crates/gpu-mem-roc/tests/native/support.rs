//! Shared helpers: loading the real libraries or skipping with a reason, locating files.

use gpu_mem_core::Error;
use gpu_mem_core::testing::child::{self, Verdict};
use gpu_mem_roc::driver::{Hip, Hsa};
use libtest_mimic::{Completion, Failed};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a test returns: pass, fail, or skipped at run time with a reason.
pub type Outcome = Result<Completion, Failed>;

/// How long a trial run in a child process may take (compiling a corpus collection takes tens
/// of seconds).
pub const CHILD_DEADLINE: Duration = Duration::from_secs(300);

/// The role prefix of a trial run by this binary again, under the same libraries (see
/// [`in_own_process`]).
pub const OWN_PROCESS: &str = "own:";

/// A trial's outcome as a child process reports it.
pub fn verdict(outcome: Outcome) -> Verdict {
    match outcome {
        Ok(Completion::Completed) => Verdict::Passed,
        Ok(Completion::Ignored { reason }) => {
            Verdict::Skipped(reason.unwrap_or_else(|| "skipped".into()))
        }
        Err(failed) => Verdict::Failed(failed.message().unwrap_or("failed").to_string()),
    }
}

/// A child process's verdict as the trial's outcome.
pub fn outcome(verdict: Verdict) -> Outcome {
    match verdict {
        Verdict::Passed => Ok(Completion::Completed),
        Verdict::Skipped(reason) => Ok(Completion::ignored_with(reason)),
        Verdict::Failed(message) => Err(Failed::from(message)),
    }
}

/// The outcome of `trial` (a name `main`'s `run_in_child` knows) run by a child process of this
/// binary under the same libraries. hiprtc compiles one program at a time in a process (the
/// backend holds a lock around it), so compile trials run this way to run side by side.
pub fn in_own_process(trial: &str) -> Outcome {
    let command = child::this_binary()?;
    outcome(child::run(
        command,
        &format!("{OWN_PROCESS}{trial}"),
        CHILD_DEADLINE,
    ))
}

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
