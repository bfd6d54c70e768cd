//! Compiling for an ISA the system's hiprtc does not know (gfx1100 with Debian 12's ROCm 5.2.3,
//! whose comgr 2.4 stops at gfx1036) with a newer HIP userland: Debian 13's HIP 5.7.1 (comgr 6.0,
//! LLVM 17), unpacked beside the build by `.ci/fetch-hip-userland.sh`.
//!
//! Those libraries need a newer C library than the system's, so they cannot be loaded into this
//! process. The test binary runs again as a child under the userland's own dynamic loader and
//! library path, with `GPU_MEM_HIPRTC_LIBRARY` and `GPU_MEM_COMGR_LIBRARY` naming its libraries,
//! and the trial runs there unchanged: the real hiprtc, the backend's loader and compile options,
//! the same checks of the code object. The child's exit status carries the outcome back.

use crate::support::{Outcome, mapped_file};
use gpu_mem_roc::hiprtc;
use libtest_mimic::{Completion, Failed};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Names the unpacked root (the directory holding `usr/`) instead of the default,
/// `<target dir>/hip-userland/root` found from the test binary's location.
pub const USERLAND_ENV: &str = "GPU_MEM_TEST_HIP_USERLAND";

/// The child role's prefix; the rest is `<trial>:<arch>`.
pub const ROLE_PREFIX: &str = "newer-hip:";

/// Exit status of a child whose trial was skipped (its reason on the last line of stderr).
const EXIT_IGNORED: i32 = 2;

/// Where the fetch script's note on the missing userland points.
pub const FETCH_HINT: &str = "`.ci/fetch-hip-userland.sh` fetches Debian 13's HIP 5.7.1, which can";

/// An unpacked userland: its dynamic loader and library directory.
struct Userland {
    loader: PathBuf,
    libraries: PathBuf,
}

impl Userland {
    fn at(root: &Path) -> Option<Userland> {
        let loader = root.join("usr/lib64/ld-linux-x86-64.so.2");
        let libraries = root.join("usr/lib/x86_64-linux-gnu");
        (loader.exists() && libraries.join("libamdhip64.so.5").exists())
            .then_some(Userland { loader, libraries })
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
    std::env::var(crate::CHILD_ENV).is_ok_and(|role| role.starts_with(ROLE_PREFIX))
}

/// For `arch` unknown to the system's comgr, the outcome of `trial` run under the newer
/// userland; `None` when it runs here (the ISA is known, this is the child already, or no newer
/// userland is unpacked: the trial then reports the ISA as not compilable, with [`FETCH_HINT`]).
pub fn elsewhere(trial: &str, arch: &str) -> Option<Outcome> {
    if in_child() {
        return None;
    }
    let known_here = hiprtc::supported_isas().is_ok_and(|list| list.isas.iter().any(|i| i == arch));
    if known_here {
        return None;
    }
    let userland = Userland::find()?;
    Some(run_child(&userland, trial, arch))
}

fn run_child(userland: &Userland, trial: &str, arch: &str) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(&userland.loader)
        .arg("--library-path")
        .arg(&userland.libraries)
        .arg(&exe)
        .env(crate::CHILD_ENV, format!("{ROLE_PREFIX}{trial}:{arch}"))
        .env(
            "GPU_MEM_HIPRTC_LIBRARY",
            userland.libraries.join("libamdhip64.so.5"),
        )
        .env(
            "GPU_MEM_COMGR_LIBRARY",
            userland.libraries.join("libamd_comgr.so.2"),
        )
        .output()
        .map_err(|e| {
            format!(
                "cannot run the test binary under {}: {e}",
                userland.loader.display()
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    match out.status.code() {
        Some(0) => Ok(Completion::Completed),
        Some(EXIT_IGNORED) => Ok(Completion::ignored_with(
            stderr.lines().last().unwrap_or("skipped in the child"),
        )),
        _ => Err(Failed::from(format!(
            "under {} ({}): {stderr}",
            userland.loader.display(),
            out.status
        ))),
    }
}

/// The child's side: runs the trial named by the role `rest` (`<trial>:<arch>`) with `run`,
/// after checking that hiprtc and comgr come from the newer userland; returns the exit status.
pub fn child_main(rest: &str, run: impl FnOnce(&str, &str) -> Option<Outcome>) -> i32 {
    let Some((trial, arch)) = rest.split_once(':') else {
        eprintln!("bad role {rest}");
        return 1;
    };
    let outcome = (|| {
        let list = hiprtc::supported_isas()?;
        let expected = std::env::var("GPU_MEM_COMGR_LIBRARY").unwrap_or_default();
        if list.library != expected {
            return Err(Failed::from(format!(
                "comgr came from {}, not {expected}",
                list.library
            )));
        }
        println!(
            "    newer userland: comgr {}.{} ({}), {} ISAs",
            list.version.0,
            list.version.1,
            list.library,
            list.isas.len()
        );
        let outcome = run(trial, arch).ok_or_else(|| format!("no trial named {trial}"))??;
        let hip = mapped_file("libamdhip64.so")?;
        let expected = std::env::var_os("GPU_MEM_HIPRTC_LIBRARY").map(PathBuf::from);
        let directory = expected.as_deref().and_then(Path::parent);
        if !directory.is_some_and(|d| hip.starts_with(d)) {
            return Err(Failed::from(format!(
                "hiprtc came from {}, not {expected:?}",
                hip.display()
            )));
        }
        println!("    hiprtc: {}", hip.display());
        Ok(outcome)
    })();
    match outcome {
        Ok(Completion::Completed) => 0,
        Ok(Completion::Ignored { reason }) => {
            eprintln!("{}", reason.unwrap_or_else(|| "skipped".into()));
            EXIT_IGNORED
        }
        Err(failed) => {
            eprintln!("{}", failed.message().unwrap_or("failed"));
            1
        }
    }
}
