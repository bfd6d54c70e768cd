//! Loading the CUDA driver where there is none, or where the "driver" is the wrong library.
//!
//! Runs without a GPU. A check whose precondition does not hold here (e.g. a real libcuda is
//! installed, so "missing driver" cannot be observed) is reported as ignored with the reason.

use gpu_mem_core::Error;
use gpu_mem_cuda::driver::{CUDA_DRIVER_LIBRARY, CudaDriver, sys::CUresult};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child process that checks the `GPU_MEM_CUDA_LIBRARY` variable itself.
const CHILD_VAR: &str = "GPU_MEM_CUDA_LOADER_TEST_CHILD";
const MISSING_OVERRIDE: &str = "/nonexistent/gpu-mem-test/libcuda-override.so.1";

fn main() {
    let args = Arguments::from_args();
    if std::env::var_os(CHILD_VAR).is_some() {
        let trials = vec![Trial::test("child_env_override", child_env_override)];
        libtest_mimic::run(&args, trials).exit();
    }

    let mut trials = Vec::new();

    // The default search can only be seen failing where no driver is installed.
    let default_reason = if std::env::var_os("GPU_MEM_CUDA_LIBRARY").is_some() {
        Some("GPU_MEM_CUDA_LIBRARY is set, so the default search is not used".to_string())
    } else {
        match CudaDriver::load() {
            Ok(d) => Some(format!("a CUDA driver is installed here ({})", d.path())),
            Err(_) => None,
        }
    };
    for (name, test) in [
        (
            "missing_driver_error_names_libcuda",
            missing_driver_error_names_libcuda as fn() -> Result<(), Failed>,
        ),
        (
            "open_without_driver_is_library_load_error",
            open_without_driver_is_library_load_error,
        ),
    ] {
        trials.push(ignorable(name, default_reason.as_deref(), test));
    }

    trials.push(Trial::test(
        "override_path_to_missing_file_is_named",
        override_path_to_missing_file_is_named,
    ));
    trials.push(Trial::test(
        "override_env_var_is_honoured",
        override_env_var_is_honoured,
    ));
    trials.push(Trial::test(
        "libc_as_driver_gives_missing_symbol_errors",
        libc_as_driver_gives_missing_symbol_errors,
    ));
    trials.push(Trial::test(
        "error_text_without_driver_error_functions",
        error_text_without_driver_error_functions,
    ));

    let nvrtc = wheel_nvrtc();
    let nvrtc_reason = match &nvrtc {
        Some(_) => None,
        None => Some(
            "libnvrtc not found (run .ci/install-cuda-parts.sh or set GPU_MEM_NVRTC_LIBRARY)"
                .to_string(),
        ),
    };
    let path = nvrtc.unwrap_or_default();
    trials.push(ignorable_with(
        "nvrtc_as_driver_gives_missing_symbol_errors",
        nvrtc_reason.as_deref(),
        move || nvrtc_as_driver_gives_missing_symbol_errors(&path),
    ));

    libtest_mimic::run(&args, trials).exit();
}

fn ignorable(name: &str, reason: Option<&str>, test: fn() -> Result<(), Failed>) -> Trial {
    ignorable_with(name, reason, test)
}

fn ignorable_with(
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

/// libnvrtc from the pinned wheel (or `GPU_MEM_NVRTC_LIBRARY`).
fn wheel_nvrtc() -> Option<PathBuf> {
    gpu_mem_core::testing::wheels::file("GPU_MEM_NVRTC_LIBRARY", "nvidia/cu13/lib/libnvrtc.so.13")
}

fn missing_driver_error_names_libcuda() -> Result<(), Failed> {
    let err = CudaDriver::load()
        .err()
        .ok_or("libcuda loaded although the precondition said it is absent")?;
    let text = err.to_string();
    match &err {
        Error::LibraryLoad { tried, reason, .. } => {
            let expected: Vec<String> = CUDA_DRIVER_LIBRARY
                .candidates
                .iter()
                .map(|c| c.to_string())
                .collect();
            if *tried != expected {
                return Err(
                    format!("tried {tried:?}, expected every candidate {expected:?}").into(),
                );
            }
            if !reason.contains("libcuda.so.1") {
                return Err(format!("the loader's reason should name the file: {reason}").into());
            }
        }
        other => return Err(format!("expected LibraryLoad, got {other:?}").into()),
    }
    if !text.contains("cannot load") || !text.contains("tried libcuda.so.1") {
        return Err(format!("unclear message: {text}").into());
    }
    println!("message: {text}");
    Ok(())
}

fn open_without_driver_is_library_load_error() -> Result<(), Failed> {
    let opened: Result<(), Failed> = match gpu_mem_cuda::open() {
        Ok(b) => Err(format!("open() succeeded without a driver: {b:?}").into()),
        Err(Error::LibraryLoad { tried, .. }) if tried.iter().any(|t| t == "libcuda.so.1") => {
            Ok(())
        }
        Err(other) => Err(format!("expected LibraryLoad naming libcuda.so.1, got {other}").into()),
    };
    opened?;
    match gpu_mem_cuda::probe() {
        Err(Error::LibraryLoad { .. }) => Ok(()),
        other => Err(format!("probe() should fail to load too, got {other:?}").into()),
    }
}

fn override_path_to_missing_file_is_named() -> Result<(), Failed> {
    let err = CudaDriver::load_from(Path::new(MISSING_OVERRIDE))
        .err()
        .ok_or("a nonexistent file loaded")?;
    check_override_error(&err)
}

fn check_override_error(err: &Error) -> Result<(), Failed> {
    match err {
        Error::LibraryLoad { tried, .. } => {
            if tried.len() != 1
                || !tried[0].contains(MISSING_OVERRIDE)
                || !tried[0].contains("GPU_MEM_CUDA_LIBRARY")
            {
                return Err(format!(
                    "the override should be the only path tried, named with its variable: {tried:?}"
                )
                .into());
            }
            if !err.to_string().contains(MISSING_OVERRIDE) {
                return Err(format!("message does not name the path: {err}").into());
            }
            Ok(())
        }
        other => Err(format!("expected LibraryLoad, got {other:?}").into()),
    }
}

/// Runs this test binary again with `GPU_MEM_CUDA_LIBRARY` set, so the variable itself is
/// read by `CudaDriver::load()` (setting it in this multi-threaded process would be unsound).
fn override_env_var_is_honoured() -> Result<(), Failed> {
    let exe = std::env::current_exe()?;
    let output = Command::new(exe)
        .env(CHILD_VAR, "1")
        .env("GPU_MEM_CUDA_LIBRARY", MISSING_OVERRIDE)
        .args(["--exact", "child_env_override", "--test-threads", "1"])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !stdout.contains("1 passed") {
        return Err(format!(
            "child run failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(())
}

fn child_env_override() -> Result<(), Failed> {
    let err = CudaDriver::load()
        .err()
        .ok_or("a nonexistent override loaded")?;
    check_override_error(&err)?;
    match gpu_mem_cuda::open() {
        Err(e) => check_override_error(&e),
        Ok(_) => Err("open() ignored GPU_MEM_CUDA_LIBRARY".into()),
    }
}

fn libc_as_driver_gives_missing_symbol_errors() -> Result<(), Failed> {
    wrong_library_gives_missing_symbols(Path::new("libc.so.6"))
}

fn nvrtc_as_driver_gives_missing_symbol_errors(path: &Path) -> Result<(), Failed> {
    wrong_library_gives_missing_symbols(path)
}

fn wrong_library_gives_missing_symbols(path: &Path) -> Result<(), Failed> {
    let driver = CudaDriver::load_from(path)?;
    let present: Vec<_> = driver
        .symbol_presence()
        .into_iter()
        .filter(|(_, _, p)| *p)
        .collect();
    if !present.is_empty() {
        return Err(format!(
            "{} unexpectedly exports driver symbols: {present:?}",
            path.display()
        )
        .into());
    }
    let expect_missing = |result: Result<(), Error>, symbol: &str| -> Result<(), Failed> {
        match result {
            Err(Error::MissingSymbol {
                symbol: s, path: p, ..
            }) if s == symbol && p == path.to_string_lossy() => Ok(()),
            other => Err(format!(
                "expected MissingSymbol {symbol} in {}, got {other:?}",
                path.display()
            )
            .into()),
        }
    };
    expect_missing(driver.init(0), "cuInit")?;
    expect_missing(driver.device_get_count().map(drop), "cuDeviceGetCount")?;
    expect_missing(driver.mem_alloc(256).map(drop), "cuMemAlloc_v2")?;
    expect_missing(driver.stream_create(0).map(drop), "cuStreamCreate")?;
    // SAFETY: the call never reaches a driver: the symbol is missing, so the null handles are
    // never dereferenced.
    let elapsed = unsafe { driver.event_elapsed_time(std::ptr::null_mut(), std::ptr::null_mut()) };
    expect_missing(elapsed.map(drop), "cuEventElapsedTime")?;
    let text = driver
        .init(0)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    if !text.contains("cuInit") || !text.contains(&*path.to_string_lossy()) {
        return Err(format!("message should name the symbol and the file: {text}").into());
    }
    println!("message: {text}");
    Ok(())
}

fn error_text_without_driver_error_functions() -> Result<(), Failed> {
    let driver = CudaDriver::load_from(Path::new("libc.so.6"))?;
    match driver.error("cuMemAlloc_v2", CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
        Error::Native {
            call,
            code,
            code_name,
            description,
            ..
        } => {
            if call != "cuMemAlloc_v2" || code != i64::from(CUresult::CUDA_ERROR_OUT_OF_MEMORY.0) {
                return Err(format!("wrong call/code: {call} {code}").into());
            }
            if !code_name.contains(&CUresult::CUDA_ERROR_OUT_OF_MEMORY.0.to_string()) {
                return Err(
                    format!("code name should fall back to the number: {code_name}").into(),
                );
            }
            if !description.contains("cuGetErrorString") {
                return Err(
                    format!("description should say why it is missing: {description}").into(),
                );
            }
            Ok(())
        }
        other => Err(format!("expected Native, got {other:?}").into()),
    }
}
