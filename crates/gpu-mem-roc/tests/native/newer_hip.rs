//! Trials under a newer HIP userland: Debian 13's HIP 5.7.1 (hiprtc, comgr 6.0 on LLVM 17) and
//! the HSA runtime it depends on (ROCr 6.1), unpacked beside the build by
//! `.ci/fetch-hip-userland.sh`. It compiles for ISAs the system's hiprtc does not know (gfx1100:
//! Debian 12's ROCm 5.2.3 comgr stops at gfx1036), and its libraries are what the loaders meet
//! on a current ROCm.
//!
//! Those libraries need a newer C library than the system's, so they cannot be loaded into this
//! process. The test binary runs again as a child under the userland's own dynamic loader and
//! library path, with `GPU_MEM_HIPRTC_LIBRARY`, `GPU_MEM_COMGR_LIBRARY` and `GPU_MEM_HSA_LIBRARY`
//! naming its libraries, and the trial runs there unchanged: the real libraries, the backend's
//! loaders and compile options, the same checks. The child's exit status carries the outcome
//! back (`gpu_mem_core::testing::child`).

use crate::support::{CHILD_DEADLINE, Outcome, mapped_file, outcome, verdict};
use gpu_mem_core::testing::child::{self, Verdict};
use gpu_mem_roc::hiprtc;
use libtest_mimic::{Completion, Failed};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Names the unpacked root (the directory holding `usr/`) instead of the default,
/// `<target dir>/hip-userland/root` found from the test binary's location.
pub const USERLAND_ENV: &str = "GPU_MEM_TEST_HIP_USERLAND";

/// The child role's prefix; the rest names the trial (`<trial>:<arch>` for compile trials).
pub const ROLE_PREFIX: &str = "newer-hip:";

/// How to get the newer userland, for the reasons of skipped trials.
pub const FETCH_HINT: &str = "`.ci/fetch-hip-userland.sh` unpacks Debian 13's HIP 5.7.1 and ROCr 6.1, whose hiprtc knows gfx11";

/// An unpacked userland: its root, dynamic loader and library directory.
struct Userland {
    root: PathBuf,
    loader: PathBuf,
    libraries: PathBuf,
}

impl Userland {
    fn at(root: &Path) -> Option<Userland> {
        let loader = root.join("usr/lib64/ld-linux-x86-64.so.2");
        let libraries = root.join("usr/lib/x86_64-linux-gnu");
        (loader.exists() && libraries.join("libamdhip64.so.5").exists()).then_some(Userland {
            root: root.to_path_buf(),
            loader,
            libraries,
        })
    }

    /// `GPU_MEM_TEST_HIP_USERLAND`, else `hip-userland/root` in a directory above the test
    /// binary (`target/debug/deps/native-*` → `target/hip-userland/root`).
    fn find() -> Option<Userland> {
        if let Some(root) = std::env::var_os(USERLAND_ENV) {
            return Userland::at(Path::new(&root));
        }
        let exe = std::env::current_exe().ok()?;
        exe.ancestors()
            .skip(1)
            .find_map(|dir| Userland::at(&dir.join("hip-userland").join("root")))
    }
}

/// Whether this process is the child running a trial under the newer userland.
fn in_child() -> bool {
    child::role().is_some_and(|role| role.starts_with(ROLE_PREFIX))
}

/// For `arch` unknown to the system's comgr, the outcome of the compile trial `trial` run under
/// the newer userland; `None` when it runs here (the ISA is known, this is the child already, or
/// no newer userland is unpacked: the trial then reports the ISA as not compilable, with
/// [`FETCH_HINT`]).
pub fn for_unknown_isa(trial: &str, arch: &str) -> Option<Outcome> {
    if in_child() {
        return None;
    }
    let known_here = hiprtc::supported_isas().is_ok_and(|list| list.isas.iter().any(|i| i == arch));
    if known_here {
        return None;
    }
    let userland = Userland::find()?;
    Some(run_child(&userland, &format!("{trial}:{arch}")))
}

/// The outcome of `trial` run under the newer userland (ignored, with the reason, when none is
/// unpacked).
pub fn run(trial: &str) -> Outcome {
    match Userland::find() {
        Some(userland) => run_child(&userland, trial),
        None => Ok(Completion::ignored_with(format!(
            "no newer HIP userland unpacked; {FETCH_HINT}"
        ))),
    }
}

fn run_child(userland: &Userland, trial: &str) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(&userland.loader);
    command
        .arg("--library-path")
        .arg(&userland.libraries)
        .arg(&exe)
        .env(USERLAND_ENV, &userland.root)
        .env(
            "GPU_MEM_HIPRTC_LIBRARY",
            userland.libraries.join("libamdhip64.so.5"),
        )
        .env(
            "GPU_MEM_COMGR_LIBRARY",
            userland.libraries.join("libamd_comgr.so.2"),
        )
        .env(
            "GPU_MEM_HSA_LIBRARY",
            userland.libraries.join("libhsa-runtime64.so.1"),
        );
    match child::run(command, &format!("{ROLE_PREFIX}{trial}"), CHILD_DEADLINE) {
        Verdict::Failed(message) => Err(Failed::from(format!(
            "under {}: {message}",
            userland.loader.display()
        ))),
        verdict => outcome(verdict),
    }
}

/// The child's side: runs `trial` with `run`, then checks that every ROCm library it loaded
/// came from the newer userland; returns the verdict.
pub fn child_main(trial: &str, run: impl FnOnce(&str) -> Option<Outcome>) -> Verdict {
    let outcome = (|| {
        let userland = std::env::var_os(USERLAND_ENV)
            .and_then(|root| Userland::at(Path::new(&root)))
            .ok_or("the child was not given the userland's root")?;
        let outcome = run(trial).ok_or_else(|| format!("no trial named {trial}"))??;
        for library in ["libamdhip64.so", "libamd_comgr.so", "libhsa-runtime64.so"] {
            if let Ok(file) = mapped_file(library) {
                if !file.starts_with(&userland.libraries) {
                    return Err(Failed::from(format!(
                        "{} is not the newer userland's",
                        file.display()
                    )));
                }
                println!("    (under the newer userland: {})", file.display());
            }
        }
        Ok(outcome)
    })();
    verdict(outcome)
}
