//! NVRTC compiles the real-kernel corpus (`tests/corpus/*/*.cu`, verbatim device code of public
//! collections) and gpu-mem's CUDA C++ test kernels (`tests/kernels/cuda/*.cu`) for sm_90, as
//! the CUDA backend compiles a module: the prelude in front, gpu-mem's C library headers, the
//! CUDA and CCCL headers of the wheels, the instantiations the conformance cases launch. Each
//! kernel the source defines (and each instantiation) must then be an entry of the PTX the
//! backend finds by its source name, with its parameters' sizes.
//!
//! Needs libnvrtc (`.ci/install-cuda-parts.sh`) but no GPU; without it the trials are reported
//! as ignored, with the reason.
//!
//! NVRTC compiles one program at a time in a process, so each file is compiled by a child
//! process of this binary (`gpu_mem_core::testing::child`): the harness's threads then keep as
//! many compiles going as the machine has cores.

use gpu_mem_core::kernel::Module;
use gpu_mem_core::kernel::scan;
use gpu_mem_core::testing::child::{self, Verdict};
use gpu_mem_cuda::backend::ptx;
use gpu_mem_cuda::nvrtc::{CodeKind, CompileRequest, ComputeCapability, Nvrtc};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one file's compile may take in its child (the slowest take seconds).
const CHILD_DEADLINE: Duration = Duration::from_secs(300);

/// The instantiations the conformance cases launch of the templates of `file`
/// (`tests/corpus/INSTANTIATIONS`).
fn instantiations(file: &str) -> Vec<String> {
    let list = std::fs::read_to_string(repository().join("tests/corpus/INSTANTIATIONS"))
        .unwrap_or_default();
    list.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.trim() == file)
        .flat_map(|(_, names)| names.split(';').map(|n| n.trim().to_string()))
        .filter(|n| !n.is_empty())
        .collect()
}

/// The repository's root: `GPU_MEM_SOURCE_ROOT` (the hardware bundle's copy), else this
/// checkout.
fn repository() -> PathBuf {
    match std::env::var_os("GPU_MEM_SOURCE_ROOT") {
        Some(root) => PathBuf::from(root),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    }
}

/// The kernels of the corpus that wait at a grid barrier (and so need a cooperative launch,
/// which the CUDA backend checks from the PTX): file, kernel, and the line of the first
/// barrier. Kernels that call `this_grid()` without its `sync` (binaryPartitionCG,
/// warpAggregatedAtomicsCG) are not among them.
const GRID_BARRIERS: &[(&str, &str, u32)] = &[
    (
        "reductionMultiBlockCG.cu",
        "reduceSinglePassMultiBlockCG",
        109,
    ),
    ("simpleAWBarrier.cu", "normVecByDotProductAWBarrier", 110),
];

/// The PTX's grid barriers are the kernels of [`GRID_BARRIERS`] of `file`, at their lines.
fn grid_barriers_are_found(file: &str, read: &ptx::PtxModule) -> Result<(), String> {
    for entry in &read.entries {
        let expected = GRID_BARRIERS.iter().find(|(f, kernel, _)| {
            *f == file && gpu_mem_core::kernel::compiled::is_named(&entry.name, kernel)
        });
        match (&entry.grid_sync, expected) {
            (None, None) => {}
            (Some(sync), Some((_, _, line)))
                if sync.line == *line
                    && sync.file.as_deref().is_some_and(|f| f.ends_with(file)) => {}
            (found, expected) => {
                return Err(format!(
                    "{file}: kernel `{}`: grid barrier {found:?}, expected {expected:?}",
                    entry.name
                ));
            }
        }
    }
    Ok(())
}

/// Every `.cu` file of the corpus and of the CUDA C++ test kernels.
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = repository().join("tests");
    let mut dirs = vec![root.join("kernels/cuda")];
    if let Ok(collections) = std::fs::read_dir(root.join("corpus")) {
        dirs.extend(
            collections
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir()),
        );
    }
    for dir in dirs {
        if let Ok(files) = std::fs::read_dir(&dir) {
            out.extend(
                files
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "cu")),
            );
        }
    }
    out.sort();
    out
}

fn wheel_nvrtc() -> Option<PathBuf> {
    Some(gpu_mem_core::testing::wheels::prefix()?.join("nvidia/cu13/lib/libnvrtc.so.13"))
        .filter(|p| p.is_file())
}

fn load_nvrtc() -> Result<Nvrtc, String> {
    if std::env::var_os("GPU_MEM_NVRTC_LIBRARY").is_none()
        && let Some(wheel) = wheel_nvrtc()
    {
        return Nvrtc::load_from(&wheel).map_err(|e| e.to_string());
    }
    Nvrtc::load()
        .map_err(|e| format!("{e} (run .ci/install-cuda-parts.sh or set GPU_MEM_NVRTC_LIBRARY)"))
}

/// Compiles `path` as the backend compiles a module and checks its entries.
fn compile_and_find(nvrtc: &Nvrtc, path: &Path) -> Result<(), Failed> {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
    let code = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let expressions = instantiations(file);
    let module = Module::from_source(code).with_name_expressions(expressions.clone());
    let source = format!(
        "#include \"gpu_mem.h\"\n#line 1 \"{file}\"\n{}",
        module.code()
    );
    let compiled = nvrtc
        .compile_request(&CompileRequest {
            source: &source,
            name: file,
            capability: ComputeCapability::new(9, 0),
            kind: CodeKind::Cubin,
            extra_options: &["-lineinfo"],
            name_expressions: module.name_expressions(),
        })
        .map_err(|e| format!("{file}: {e}"))?;
    let read = ptx::read(&compiled.ptx, file);
    if read.entries.is_empty() {
        return Err(format!("{file}: the PTX has no entries").into());
    }
    grid_barriers_are_found(file, &read)?;
    let plain: Vec<String> = scan::kernels(module.code())
        .ok_or_else(|| format!("{file}: the source cannot be read"))?
        .into_iter()
        .filter(|k| !k.template)
        .map(|k| k.name)
        .collect();
    for name in &plain {
        match ptx::find_entry(&read, name) {
            Ok(Some(_)) => {}
            other => {
                return Err(format!(
                    "{file}: kernel `{name}` not found in the PTX ({other:?}); entries: {:?}",
                    ptx::entry_names(&read)
                )
                .into());
            }
        }
    }
    for (expression, lowered) in &compiled.lowered {
        if !read.entries.iter().any(|e| &e.name == lowered) {
            return Err(
                format!("{file}: `{expression}` lowered to {lowered}, not an entry").into(),
            );
        }
    }
    if compiled.lowered.len() != expressions.len() {
        return Err(format!(
            "{file}: {} of {} instantiations lowered",
            compiled.lowered.len(),
            expressions.len()
        )
        .into());
    }
    Ok(())
}

/// The child's side: compiles the file `path` names and exits with the verdict.
fn child_main(path: &str) -> ! {
    let verdict = match load_nvrtc() {
        Err(e) => Verdict::Skipped(format!("NVRTC unavailable: {e}")),
        Ok(nvrtc) => match compile_and_find(&nvrtc, Path::new(path)) {
            Ok(()) => Verdict::Passed,
            Err(failed) => Verdict::Failed(failed.message().unwrap_or("failed").to_string()),
        },
    };
    child::exit(verdict)
}

/// The parent's side: `path` compiled in a child process of its own.
fn compiled_in_child(path: &Path) -> Result<(), Failed> {
    let command = child::this_binary()?;
    match child::run(command, &path.display().to_string(), CHILD_DEADLINE) {
        Verdict::Passed => Ok(()),
        Verdict::Skipped(reason) => Err(format!("the child could not compile: {reason}").into()),
        Verdict::Failed(message) => Err(message.into()),
    }
}

fn main() {
    if let Some(path) = child::role() {
        child_main(&path);
    }
    let args = Arguments::from_args();
    let reason = load_nvrtc()
        .err()
        .map(|e| format!("NVRTC unavailable: {e}"));
    if let Some(reason) = &reason {
        println!("ignoring the corpus under NVRTC: {reason}");
    }
    let trials = sources()
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(repository().join("tests"))
                .unwrap_or(&path)
                .display()
                .to_string();
            Trial::test(format!("sm_90::{name}"), move || compiled_in_child(&path))
                .with_ignored_flag(reason.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
