//! The RCCL loader on a library with NCCL's API. RCCL itself is not packaged where the tests run
//! (Debian 12 has no RCCL); NCCL's `libnccl.so.2` (the wheel `.ci/install-cuda-parts.sh`
//! installs) exports the same calls, so the loader's table and version check are exercised on
//! it. Without that library the trial is reported as ignored, with the reason.

use gpu_mem_roc::rccl::{MIN_RCCL_API, Rccl};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;

fn main() {
    let args = Arguments::from_args();
    let library = nccl_wheel();
    let trial = Trial::test("the_table_resolves_from_a_library_with_nccls_api", {
        let library = library.clone().unwrap_or_default();
        move || -> Result<(), Failed> {
            let rccl = Rccl::load_from(&library).map_err(|e| format!("load: {e}"))?;
            let absent: Vec<&str> = rccl
                .presence()
                .into_iter()
                .filter(|(_, _, resolved)| !resolved)
                .map(|(_, name, _)| name)
                .collect();
            if !absent.is_empty() {
                return Err(format!("{} lacks {}", rccl.path(), absent.join(", ")).into());
            }
            if rccl.version() < MIN_RCCL_API {
                return Err(format!("version {:?}", rccl.version()).into());
            }
            Ok(())
        }
    });
    let trial = match library {
        Some(_) => trial,
        None => {
            println!(
                "ignoring the_table_resolves_from_a_library_with_nccls_api: libnccl.so.2 not \
                 found (run .ci/install-cuda-parts.sh or set GPU_MEM_NCCL_LIBRARY)"
            );
            trial.with_ignored_flag(true)
        }
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}

fn nccl_wheel() -> Option<PathBuf> {
    gpu_mem_core::testing::wheels::file("GPU_MEM_NCCL_LIBRARY", "nvidia/nccl/lib/libnccl.so.2")
}
