//! The NCCL loader against the real `libnccl.so.2` (the pinned `nvidia-nccl-cu13` wheel that
//! `.ci/install-cuda-parts.sh` installs, or `GPU_MEM_NCCL_LIBRARY`): every bound call exists,
//! the version is read and checked, unique ids are made, and without a GPU creating a
//! communicator is an error carrying NCCL's own text. Runs without a GPU; a check whose
//! precondition does not hold here is reported as ignored with the reason.

use gpu_mem_core::Error;
use gpu_mem_cuda::driver::CudaDriver;
use gpu_mem_cuda::nccl::{MIN_NCCL_VERSION, NCCL_LIBRARY, Nccl};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

type LibraryTest = fn(&Path) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let library = wheel_nccl();
    let missing = library.is_none().then_some(
        "libnccl.so.2 not found (run .ci/install-cuda-parts.sh or set GPU_MEM_NCCL_LIBRARY)",
    );
    let path = library.clone().unwrap_or_default();
    let with_library: [(&str, LibraryTest); 3] = [
        (
            "every_bound_call_is_exported_by_the_real_library",
            every_bound_call_is_exported_by_the_real_library,
        ),
        (
            "version_is_read_and_new_enough",
            version_is_read_and_new_enough,
        ),
        (
            "unique_ids_are_made_without_a_gpu",
            unique_ids_are_made_without_a_gpu,
        ),
    ];
    for (name, test) in with_library {
        let path = path.clone();
        trials.push(ignorable(name, missing, move || test(&path)));
    }
    // Without a GPU (no CUDA driver), creating a communicator must fail with NCCL's text.
    let gpu = CudaDriver::load()
        .ok()
        .map(|d| format!("a CUDA driver is installed here ({})", d.path()));
    let reason = missing.map(str::to_string).or(gpu);
    trials.push(ignorable(
        "init_without_a_gpu_is_an_error_with_nccls_text",
        reason.as_deref(),
        move || init_without_a_gpu_is_an_error_with_nccls_text(&path),
    ));
    trials.push(Trial::test(
        "a_missing_library_is_a_load_error_naming_the_path",
        a_missing_library_is_a_load_error_naming_the_path,
    ));
    trials.push(Trial::test(
        "a_library_that_is_not_nccl_is_refused",
        a_library_that_is_not_nccl_is_refused,
    ));
    libtest_mimic::run(&args, trials).exit();
}

fn ignorable(
    name: &str,
    reason: Option<&str>,
    test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    match reason {
        Some(reason) => {
            println!("ignoring {name}: {reason}");
            Trial::test(name, test).with_ignored_flag(true)
        }
        None => Trial::test(name, test),
    }
}

fn wheel_nccl() -> Option<PathBuf> {
    gpu_mem_core::testing::wheels::file(NCCL_LIBRARY.override_var, "nvidia/nccl/lib/libnccl.so.2")
}

fn every_bound_call_is_exported_by_the_real_library(path: &Path) -> Result<(), Failed> {
    let nccl = Nccl::load_from(path).map_err(|e| format!("load: {e}"))?;
    let absent: Vec<&str> = nccl
        .presence()
        .into_iter()
        .filter(|(_, _, resolved)| !resolved)
        .map(|(_, name, _)| name)
        .collect();
    if !absent.is_empty() {
        return Err(format!("{} lacks {}", nccl.path(), absent.join(", ")).into());
    }
    if nccl.presence().len() < 17 {
        return Err(format!("only {} calls bound", nccl.presence().len()).into());
    }
    Ok(())
}

fn version_is_read_and_new_enough(path: &Path) -> Result<(), Failed> {
    let nccl = Nccl::load_from(path).map_err(|e| format!("load: {e}"))?;
    let version = nccl.version();
    if version < MIN_NCCL_VERSION || version.0 != 2 {
        return Err(format!("implausible version {version:?}").into());
    }
    let code = nccl
        .version_code()
        .map_err(|e| format!("ncclGetVersion: {e}"))?;
    if gpu_mem_cuda::nccl::decode_version(code) != version {
        return Err(format!("code {code} vs. {version:?}").into());
    }
    Ok(())
}

fn unique_ids_are_made_without_a_gpu(path: &Path) -> Result<(), Failed> {
    let nccl = Nccl::load_from(path).map_err(|e| format!("load: {e}"))?;
    let a = nccl
        .unique_id()
        .map_err(|e| format!("ncclGetUniqueId: {e}"))?;
    let b = nccl
        .unique_id()
        .map_err(|e| format!("ncclGetUniqueId: {e}"))?;
    if a.iter().all(|&x| x == 0) || a == b {
        return Err("unique ids are blank or repeat".into());
    }
    Ok(())
}

fn init_without_a_gpu_is_an_error_with_nccls_text(path: &Path) -> Result<(), Failed> {
    let nccl = Nccl::load_from(path).map_err(|e| format!("load: {e}"))?;
    let err = nccl
        .comm_init_all(&[0])
        .err()
        .ok_or("ncclCommInitAll succeeded without a GPU")?;
    match &err {
        Error::Native {
            call: "ncclCommInitAll",
            code,
            code_name,
            ..
        } if *code != 0 && !code_name.is_empty() && !code_name.starts_with("ncclResult_t") => {
            Ok(())
        }
        other => Err(format!("expected NCCL's error for ncclCommInitAll, got {other}").into()),
    }
}

fn a_missing_library_is_a_load_error_naming_the_path() -> Result<(), Failed> {
    let missing = Path::new("/nonexistent/gpu-mem-test/libnccl.so.2");
    match Nccl::load_from(missing) {
        Err(Error::LibraryLoad { library, tried, .. })
            if library == "NCCL" && tried.iter().any(|t| t.contains("/nonexistent/")) =>
        {
            Ok(())
        }
        other => Err(format!("expected a load error naming the path, got {other:?}").into()),
    }
}

fn a_library_that_is_not_nccl_is_refused() -> Result<(), Failed> {
    match Nccl::load_from(Path::new("libc.so.6")) {
        Err(Error::LibraryLoad {
            reason, present, ..
        }) if present && reason.contains("ncclGetVersion") => Ok(()),
        other => Err(format!("expected libc to be refused as NCCL, got {other:?}").into()),
    }
}
