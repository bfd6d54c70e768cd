//! The real HSA runtime: loading, symbol table, `hsa_init` and `open()` without a GPU.

use crate::elf::Elf;
use crate::support::{Outcome, ensure, hsa_or_skip, mapped_file};
use gpu_mem_core::Error;
use gpu_mem_roc::KFD_DEVICE;
use gpu_mem_roc::driver::hsa::{CANDIDATES, ENV_OVERRIDE};
use libtest_mimic::{Completion, Failed};
use std::collections::HashSet;
use std::path::Path;

/// Functions of the table that only ROCm 6.x exports and may be absent from a 5.x runtime.
/// The table is generated from the 5.2.3 headers, so none of them is in it today; the 6.x-only
/// calls (`hsa_amd_memory_async_copy_on_engine`, ...) are probed separately when used.
pub const OPTIONAL_6X: &[&str] = &[];

/// HSA_STATUS_ERROR_OUT_OF_RESOURCES, what ROCr's hsa_init reports when /dev/kfd is missing.
const OUT_OF_RESOURCES: u32 = 0x1008;

pub fn library_loads() -> Outcome {
    let hsa = match hsa_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    ensure(
        CANDIDATES.contains(&hsa.path()) || std::env::var(ENV_OVERRIDE).is_ok(),
        || format!("loaded from unexpected {}", hsa.path()),
    )?;
    let file = mapped_file("libhsa-runtime64.so")?;
    ensure(file.exists(), || {
        format!("{} does not exist", file.display())
    })?;
    // hsa_status_string must work without a successful init (NATIVE_APIS.md §0.2).
    let text = hsa
        .status_string(OUT_OF_RESOURCES)
        .ok_or("no status text for 0x1008")?;
    ensure(
        text.starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
        || format!("unexpected status text {text:?}"),
    )?;
    println!(
        "    loaded {} ({}), status text for 0x1008: {text:?}",
        hsa.path(),
        file.display()
    );
    Ok(Completion::Completed)
}

pub fn every_symbol_exists() -> Outcome {
    let hsa = match hsa_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    let file = mapped_file("libhsa-runtime64.so")?;
    let bytes = std::fs::read(&file).map_err(|e| format!("read {}: {e}", file.display()))?;
    let exported: HashSet<String> = Elf::parse(&bytes)?
        .symbols(true)?
        .into_iter()
        .filter(|s| s.defined)
        .map(|s| s.name)
        .collect();
    ensure(exported.len() > 100, || {
        format!(
            "only {} dynamic symbols in {}",
            exported.len(),
            file.display()
        )
    })?;
    let table = hsa.symbols();
    let mut problems = Vec::new();
    for (name, resolved) in &table {
        let in_library = exported.contains(*name);
        if OPTIONAL_6X.contains(name) {
            continue;
        }
        if !in_library {
            problems.push(format!(
                "{name} is in the loader's table but not exported by {}",
                file.display()
            ));
        }
        if !resolved {
            problems.push(format!("{name} was not resolved"));
        }
    }
    ensure(problems.is_empty(), || problems.join("\n"))?;
    println!(
        "    {} table functions all resolved and exported ({} defined dynamic symbols in {})",
        table.len(),
        exported.len(),
        file.display()
    );
    Ok(Completion::Completed)
}

pub fn init_fails_without_kfd() -> Outcome {
    if Path::new(KFD_DEVICE).exists() {
        return Ok(Completion::ignored_with(format!(
            "{KFD_DEVICE} exists: this machine has an AMD GPU driver"
        )));
    }
    let hsa = match hsa_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    match hsa.init() {
        Ok(()) => Err(Failed::from(format!(
            "hsa_init succeeded although {KFD_DEVICE} is missing"
        ))),
        Err(Error::Native {
            call,
            code,
            code_name,
            description,
            ..
        }) => {
            ensure(call == "hsa_init", || format!("error names call {call}"))?;
            ensure(code == i64::from(OUT_OF_RESOURCES), || {
                format!("code {code:#x}, expected 0x1008")
            })?;
            ensure(code_name == "HSA_STATUS_ERROR_OUT_OF_RESOURCES", || {
                format!("name {code_name}")
            })?;
            ensure(!description.is_empty(), || "empty description".to_string())?;
            println!("    hsa_init: {code_name} ({code:#x}): {description}");
            Ok(Completion::Completed)
        }
        Err(other) => Err(Failed::from(format!("unexpected error kind: {other}"))),
    }
}

pub fn open_reports_missing_driver() -> Outcome {
    if Path::new(KFD_DEVICE).exists() {
        return Ok(Completion::ignored_with(format!(
            "{KFD_DEVICE} exists: open() may succeed here"
        )));
    }
    let hsa = match hsa_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    let full = hsa
        .status_string(OUT_OF_RESOURCES)
        .ok_or("no status text for 0x1008")?;
    // The runtime's sentence after "HSA_STATUS_ERROR_OUT_OF_RESOURCES: ".
    let sentence = full
        .split_once(": ")
        .map(|(_, s)| s)
        .unwrap_or(&full)
        .to_string();
    let error = match gpu_mem_roc::open() {
        Ok(backend) => {
            return Err(Failed::from(format!(
                "open() succeeded without {KFD_DEVICE}: {backend:?}"
            )));
        }
        Err(e) => e,
    };
    let message = error.to_string();
    ensure(matches!(error, Error::BackendUnavailable { .. }), || {
        format!("not BackendUnavailable: {message}")
    })?;
    for needle in [
        "no AMD GPU driver (/dev/kfd missing)",
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        "hsa_init",
        sentence.as_str(),
    ] {
        ensure(message.contains(needle), || {
            format!("{message:?} lacks {needle:?}")
        })?;
    }
    println!("    open(): {message}");
    Ok(Completion::Completed)
}

/// Runs in a child process with `GPU_MEM_HSA_LIBRARY` pointing at a file that does not exist.
pub fn override_child() -> Result<(), String> {
    let wanted = std::env::var(ENV_OVERRIDE).map_err(|e| e.to_string())?;
    match gpu_mem_roc::open() {
        Err(Error::LibraryLoad {
            library,
            tried,
            reason,
            present,
        }) => {
            if present {
                return Err(format!(
                    "a file that does not exist counted as present: {reason}"
                ));
            }
            // The shared loader names the variable the path came from, as the CUDA backend does.
            let shown = format!("{wanted} (from {ENV_OVERRIDE})");
            if tried != vec![shown.clone()] {
                return Err(format!("tried {tried:?}, expected only {shown}"));
            }
            println!("LibraryLoad library={library} tried={tried:?} reason={reason}");
            Ok(())
        }
        Err(other) => Err(format!("expected LibraryLoad, got {other}")),
        Ok(_) => Err("open() succeeded with a missing library".to_string()),
    }
}

pub fn override_names_path() -> Outcome {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let missing = "/nonexistent/libhsa-runtime64-gpu-mem-test.so.1";
    let out = std::process::Command::new(exe)
        .env(ENV_OVERRIDE, missing)
        .env(gpu_mem_core::testing::child::ROLE, "hsa-override")
        .output()
        .map_err(|e| format!("cannot re-run the test binary: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure(out.status.success(), || {
        format!("child failed: {stdout}{stderr}")
    })?;
    ensure(
        stdout.contains(missing) && stdout.contains("libhsa-runtime64"),
        || format!("child output lacks the path: {stdout}"),
    )?;
    Ok(Completion::Completed)
}
