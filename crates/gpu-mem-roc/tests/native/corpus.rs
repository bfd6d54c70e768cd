//! hiprtc compiles the real-kernel corpus (`tests/corpus/*/*.cu`) and gpu-mem's CUDA C++ test
//! kernels (`tests/kernels/cuda/*.cu`), a trial for each collection, for gfx90a as the ROC
//! backend compiles a module (`hiprtc::compile_module`: the prelude, gpu-mem's C library headers,
//! CUDA's header names made HIP's, the instantiations the conformance cases launch), and each
//! kernel the source defines is a kernel descriptor (`<name>.kd`) of the code object that reads
//! as its source name.

use crate::support::{Outcome, crates_dir, ensure, hip_or_skip};
use gpu_mem_core::kernel::compiled::{STT_OBJECT, is_named, symbols};
use gpu_mem_core::kernel::{Module, scan};
use gpu_mem_roc::hiprtc;
use libtest_mimic::Completion;
use std::path::PathBuf;

/// The child trial's prefix: `corpus:<collection>` (see `support::in_own_process`).
pub const TRIAL: &str = "corpus:";

/// The name of gpu-mem's own CUDA C++ test kernels among the corpus collections.
const OWN_KERNELS: &str = "kernels";

/// The folder of each collection: gpu-mem's CUDA C++ test kernels and each corpus collection.
fn collection_dirs() -> Vec<(String, PathBuf)> {
    let tests = crates_dir().join("..").join("tests");
    let mut dirs = vec![(OWN_KERNELS.to_string(), tests.join("kernels/cuda"))];
    if let Ok(collections) = std::fs::read_dir(tests.join("corpus")) {
        dirs.extend(
            collections
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .map(|p| {
                    let name = p
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    (name, p)
                }),
        );
    }
    dirs.sort();
    dirs
}

/// The collections, each compiled by a trial of its own.
pub fn collections() -> Vec<String> {
    collection_dirs()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// Every `.cu` file of `collection`.
fn sources(collection: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = collection_dirs()
        .into_iter()
        .filter(|(name, _)| name == collection)
        .filter_map(|(_, dir)| std::fs::read_dir(dir).ok())
        .flat_map(|files| files.flatten().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    out.sort();
    out
}

/// The instantiations the conformance cases launch of `file`'s templates.
fn instantiations(file: &str) -> Vec<String> {
    let path = crates_dir().join("../tests/corpus/INSTANTIATIONS");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.trim() == file)
        .flat_map(|(_, names)| names.split(';').map(|n| n.trim().to_string()))
        .filter(|n| !n.is_empty())
        .collect()
}

/// Compiles every file of `collection` for gfx90a; lists each failure.
pub fn compiles(collection: &str) -> Outcome {
    if let Err(skip) = hip_or_skip() {
        return Ok(skip);
    }
    let sources = sources(collection);
    ensure(!sources.is_empty(), || {
        format!("no files in the collection {collection}")
    })?;
    let mut failures = Vec::new();
    for path in &sources {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let code = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let module = Module::from_source(code).with_name_expressions(instantiations(file));
        let compiled = match hiprtc::compile_module(&module, "gfx90a") {
            Ok(compiled) => compiled,
            Err(e) => {
                failures.push(format!("{file}: {e}"));
                continue;
            }
        };
        let descriptors: Vec<String> = symbols(&compiled.code)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.kind == STT_OBJECT)
            .filter_map(|s| s.name.strip_suffix(".kd").map(str::to_string))
            .collect();
        let plain = scan::kernels(module.code()).unwrap_or_default();
        for kernel in plain.iter().filter(|k| !k.template) {
            if !descriptors.iter().any(|d| is_named(d, &kernel.name)) {
                failures.push(format!(
                    "{file}: no kernel descriptor for `{}`",
                    kernel.name
                ));
            }
        }
        for expression in module.name_expressions() {
            let found = match compiled.lowered.iter().find(|(e, _)| e == expression) {
                Some((_, lowered)) => descriptors.contains(lowered),
                None => descriptors.iter().any(|d| is_named(d, expression)),
            };
            if !found {
                failures.push(format!("{file}: no kernel for `{expression}`"));
            }
        }
        println!("    {file}: {} kernels", descriptors.len());
    }
    ensure(failures.is_empty(), || failures.join("\n"))?;
    Ok(Completion::Completed)
}
