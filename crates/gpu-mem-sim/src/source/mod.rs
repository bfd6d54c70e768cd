//! Portable-source kernels on the simulator: the kernel's `gpu_mem.h` source is built by the
//! host C++ compiler into a shared library (prelude host branch, see `include/gpu_mem.h`), and
//! every simulated thread runs its entry point on the executor (`crate::executor`).
//!
//! Guarantees:
//! * a compile error is [`Error::KernelCompile`] with the compiler's message, naming the
//!   kernel's file (`<kernel>.cu`) and line; a missing compiler is
//!   [`Error::CompilerUnavailable`] naming `GPU_MEM_SIM_CXX` and what was tried;
//! * libraries are cached on disk by a hash of everything that affects them and appear there by
//!   rename only; a kernel launched again in the same process touches neither the compiler nor
//!   the disk;
//! * a launch whose arguments do not match the entry's parameters (count, kind, rank, element
//!   size and kind, as the C++ compiler sees them) is refused before anything runs;
//! * loaded libraries are never unloaded (C++ runtimes and thread-locals do not survive
//!   `dlclose` well).

mod cache;
mod compiler;
mod elf;
mod signature;
mod wrapper;

use crate::executor::body::{ABI, RUNTIME};
use compiler::Compiler;
use gpu_mem_core::kernel::{KernelSource, LaunchArg};
use gpu_mem_core::{BackendKind, Error, KERNEL_PRELUDE, Kernel, Result};
use signature::{Param, RawParam};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A loaded kernel library.
pub(crate) struct SourceProgram {
    /// Keeps the code mapped; programs are kept for the life of the process.
    _library: libloading::Library,
    /// `gm_sim_run`: runs the entry with one argument buffer per parameter.
    pub(crate) run: unsafe extern "C" fn(*const *mut c_void) -> c_int,
    params: Vec<Param>,
    /// Bytes of static `__shared__` arrays per block.
    pub(crate) static_shared: usize,
    /// Whether its threads may wait for each other (the source names a barrier, collective,
    /// atomic or spin hint): such threads may wait on fibers of their own, the others run as plain calls.
    pub(crate) waits: bool,
}

impl std::fmt::Debug for SourceProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceProgram")
            .field("params", &self.params)
            .field("static_shared", &self.static_shared)
            .finish_non_exhaustive()
    }
}

impl SourceProgram {
    /// Checks `args` against the entry's parameters.
    pub(crate) fn check_args(&self, kernel: &str, args: &[LaunchArg]) -> Result<()> {
        signature::check(&self.params, args).map_err(|reason| Error::InvalidLaunch {
            kernel: kernel.to_string(),
            reason,
        })
    }
}

/// Programs by kernel id (the fast path) and by content key.
#[derive(Default)]
struct Programs {
    by_kernel: HashMap<u64, Arc<SourceProgram>>,
    by_key: HashMap<String, Arc<SourceProgram>>,
}

static PROGRAMS: Mutex<Option<Programs>> = Mutex::new(None);

fn unsupported_under_miri() -> Error {
    Error::NotSupportedByBackend {
        backend: BackendKind::Sim,
        feature: "portable-source kernels under Miri",
        reason: "the host compiler and loaded libraries are outside what Miri interprets".into(),
    }
}

/// The program of `kernel`'s source, compiled (or taken from a cache) and loaded.
pub(crate) fn program(kernel: &Kernel, source: &KernelSource) -> Result<Arc<SourceProgram>> {
    if cfg!(miri) {
        return Err(unsupported_under_miri());
    }
    let lock = || PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = lock()
        .get_or_insert_with(Programs::default)
        .by_kernel
        .get(&kernel.id())
    {
        return Ok(found.clone());
    }
    if !wrapper::is_identifier(&source.entry) {
        return Err(Error::InvalidLaunch {
            kernel: kernel.name().to_string(),
            reason: format!("the entry point `{}` is not a C identifier", source.entry),
        });
    }
    let compiler = Compiler::from_env()?;
    let unit = wrapper::translation_unit(kernel.name(), &source.code, &source.entry);
    let flags = compiler::FLAGS.join(" ");
    let key = cache::key(&[
        b"gpu-mem-sim kernel",
        &ABI.to_le_bytes(),
        compiler.path.as_os_str().as_encoded_bytes(),
        compiler.version.as_bytes(),
        flags.as_bytes(),
        KERNEL_PRELUDE.as_bytes(),
        unit.as_bytes(),
    ]);
    let mut programs = lock();
    let programs = programs.get_or_insert_with(Programs::default);
    let program = match programs.by_key.get(&key) {
        Some(found) => found.clone(),
        None => {
            // Compiling under the lock keeps two threads from building the same kernel; other
            // processes are kept apart by the rename.
            let mut program = build(kernel.name(), &compiler, &unit, &key)?;
            program.waits = wrapper::may_wait(&source.code);
            let program = Arc::new(program);
            programs.by_key.insert(key, program.clone());
            program
        }
    };
    programs.by_kernel.insert(kernel.id(), program.clone());
    Ok(program)
}

fn cache_error(
    kernel: &str,
    compiler: &Compiler,
    what: &str,
    path: &Path,
    e: impl std::fmt::Display,
) -> Error {
    Error::KernelCompile {
        kernel: kernel.to_string(),
        compiler: compiler.describe(),
        log: format!(
            "cannot {what} {}: {e} (set {} to a writable directory)",
            path.display(),
            cache::VARIABLE
        ),
    }
}

/// Loads the cached library for `key`, building it first if the cache lacks it (or holds one
/// that does not load).
fn build(kernel: &str, compiler: &Compiler, unit: &str, key: &str) -> Result<SourceProgram> {
    let dir = cache::directory();
    std::fs::create_dir_all(&dir).map_err(|e| cache_error(kernel, compiler, "create", &dir, e))?;
    let library = dir.join(format!("{key}.so"));
    if library.is_file() {
        match load(&library) {
            Ok(program) => {
                tracing::debug!(kernel, path = %library.display(), "simulator kernel from the disk cache");
                return Ok(program);
            }
            Err(reason) => {
                tracing::warn!(kernel, path = %library.display(), "cached kernel library does not load ({reason}); rebuilding");
            }
        }
    }
    let started = std::time::Instant::now();
    compile_into(kernel, compiler, unit, &dir, &library)?;
    tracing::debug!(kernel, elapsed = ?started.elapsed(), compiler = %compiler.describe(), "compiled simulator kernel");
    load(&library).map_err(|reason| Error::KernelCompile {
        kernel: kernel.to_string(),
        compiler: compiler.describe(),
        log: format!(
            "the compiled library {} does not load: {reason}",
            library.display()
        ),
    })
}

/// Compiles `unit` in a private scratch directory and renames the library to `library`.
fn compile_into(
    kernel: &str,
    compiler: &Compiler,
    unit: &str,
    dir: &Path,
    library: &Path,
) -> Result<()> {
    let scratch =
        cache::scratch_dir(dir).map_err(|e| cache_error(kernel, compiler, "write to", dir, e))?;
    let result = (|| {
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = scratch.join(name);
            std::fs::write(&path, text)
                .map_err(|e| cache_error(kernel, compiler, "write", &path, e))?;
            Ok(path)
        };
        write("gpu_mem.h", KERNEL_PRELUDE)?;
        let source = write(&wrapper::file_name(kernel).replace(".cu", ".cpp"), unit)?;
        let output = scratch.join("kernel.so");
        compiler
            .compile(&source, &output)
            .map_err(|log| Error::KernelCompile {
                kernel: kernel.to_string(),
                compiler: compiler.describe(),
                log,
            })?;
        std::fs::rename(&output, library)
            .map_err(|e| cache_error(kernel, compiler, "write", library, e))
    })();
    // Best effort: a leftover scratch directory only takes space.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Loads a kernel library and reads its description.
fn load(path: &Path) -> std::result::Result<SourceProgram, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let tls = elf::tls_size(&bytes).ok_or("not a 64-bit ELF shared library")?;
    // SAFETY: the library was built by `compile_into` from the prelude and one kernel; loading
    // it runs only the C++ runtime's and the kernel's static initialisers.
    let library = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    type Abi = unsafe extern "C" fn() -> u32;
    type Init = unsafe extern "C" fn(*const crate::executor::body::GmSimRuntime);
    type Params = unsafe extern "C" fn(*mut c_int) -> *const RawParam;
    type Run = unsafe extern "C" fn(*const *mut c_void) -> c_int;
    // SAFETY: the symbols are the wrapper's `extern "C"` functions with exactly these types.
    let (abi, init, params, run) = unsafe {
        let abi = *library
            .get::<Abi>(b"gm_sim_abi\0")
            .map_err(|e| e.to_string())?;
        let init = *library
            .get::<Init>(b"gm_sim_init\0")
            .map_err(|e| e.to_string())?;
        let params = *library
            .get::<Params>(b"gm_sim_params\0")
            .map_err(|e| e.to_string())?;
        let run = *library
            .get::<Run>(b"gm_sim_run\0")
            .map_err(|e| e.to_string())?;
        (abi, init, params, run)
    };
    // SAFETY: calling the wrapper's functions as declared; `RUNTIME` is a static in the prelude's
    // layout, and the parameter table is a static array of `count` entries.
    let params = unsafe {
        let found = abi();
        if found != ABI {
            return Err(format!("built for simulator ABI {found}, this is {ABI}"));
        }
        init(&RUNTIME);
        let mut count: c_int = 0;
        let table = params(&mut count);
        let count = usize::try_from(count).unwrap_or(0);
        if table.is_null() && count > 0 {
            return Err("no parameter table".to_string());
        }
        (0..count)
            .map(|i| Param::from_raw(&*table.add(i)))
            .collect()
    };
    Ok(SourceProgram {
        _library: library,
        run,
        params,
        static_shared: usize::try_from(tls).unwrap_or(usize::MAX),
        waits: true,
    })
}
