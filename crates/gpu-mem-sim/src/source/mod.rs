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
mod includes;
mod signature;
mod stackless;
mod wrapper;

use crate::executor::body::{ABI, GmSimRound, RUNTIME};
use compiler::{CompileFailure, Compiler};
use gpu_mem_core::kernel::{KernelSource, LaunchArg};
use gpu_mem_core::{BackendKind, Error, KERNEL_PRELUDE, Kernel, Result};
use signature::{Param, RawParam};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
pub(crate) use wrapper::Threads;

/// How the executor runs a program's threads: its entry points.
#[derive(Clone, Copy)]
pub(crate) enum Entry {
    /// `gm_sim_run`: runs the entry with one argument buffer per parameter.
    Calls(unsafe extern "C" fn(*const *mut c_void) -> c_int),
    /// The entry points of coroutine threads.
    Stackless(StacklessEntry),
}

/// A stackless program's entry points (`wrapper::Threads::Stackless`).
#[derive(Clone, Copy)]
pub(crate) struct StacklessEntry {
    /// `gm_sim_start_round(&round)`: starts every thread of the block; each runs until it waits
    /// or ends (faults are recorded through the runtime's callbacks).
    pub(crate) start_round: unsafe extern "C" fn(*mut GmSimRound),
    /// `gm_sim_resume_round(&round)`: runs every waiting thread on, the same way.
    pub(crate) resume_round: unsafe extern "C" fn(*mut GmSimRound),
    /// `gm_sim_begin_block()`: the frames of this OS thread's previous block are all gone.
    pub(crate) begin_block: unsafe extern "C" fn(),
}

/// A loaded kernel library.
pub(crate) struct SourceProgram {
    /// Keeps the code mapped; programs are kept for the life of the process.
    _library: libloading::Library,
    pub(crate) entry: Entry,
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
            .field("stackless", &matches!(self.entry, Entry::Stackless(_)))
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

/// Kernel objects whose programs are found by id (the fast path) before the map starts over.
const MAX_KERNEL_ENTRIES: usize = 4096;

/// Programs by kernel id (the fast path) and by content key.
#[derive(Default)]
struct Programs {
    by_kernel: HashMap<u64, Arc<SourceProgram>>,
    by_key: HashMap<String, Arc<SourceProgram>>,
}

static PROGRAMS: Mutex<Option<Programs>> = Mutex::new(None);

/// Held while a kernel is built: one build at a time in a process (two threads launching the
/// same new kernel build it once), while [`PROGRAMS`] is held only to look programs up and add
/// them, so that kernels built already launch while another compiles.
static BUILDING: Mutex<()> = Mutex::new(());

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
    let plans = plans(kernel.name(), source, &compiler);
    let _building = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    let known = |key: &str| {
        lock()
            .get_or_insert_with(Programs::default)
            .by_key
            .get(key)
            .cloned()
    };
    let mut chosen = None;
    for (i, plan) in plans.iter().enumerate() {
        if let Some(found) = known(&plan.key) {
            chosen = Some(found);
            break;
        }
        let last = i + 1 == plans.len();
        if !last && cache::refused(&plan.key) {
            tracing::debug!(
                kernel = kernel.name(),
                threads = ?plan.threads,
                "not built this way: the compiler refused it before"
            );
            continue;
        }
        // Building under `BUILDING` keeps two threads from building the same kernel; other
        // processes are kept apart by the rename.
        match build(kernel.name(), &compiler, plan) {
            Ok(mut program) => {
                program.waits = wrapper::may_wait(&source.code);
                let program = Arc::new(program);
                lock()
                    .get_or_insert_with(Programs::default)
                    .by_key
                    .insert(plan.key.clone(), program.clone());
                chosen = Some(program);
                break;
            }
            Err(Failure::Refused(log)) if !last => {
                tracing::debug!(kernel = kernel.name(), %log, "kernel runs on stacks: the compiler refuses its stackless form");
                cache::remember_refusal(&plan.key);
            }
            // Not a refusal (the compiler did not run to the end): the next way is tried, and
            // this one again next time.
            Err(Failure::Other(error)) if !last => {
                tracing::debug!(kernel = kernel.name(), %error, "kernel runs on stacks this time: building its stackless form failed");
            }
            Err(Failure::Refused(log)) => {
                return Err(Error::KernelCompile {
                    kernel: kernel.name().to_string(),
                    compiler: compiler.describe(),
                    log,
                });
            }
            Err(Failure::Other(error)) => return Err(error),
        }
    }
    let program = chosen.ok_or_else(|| Error::KernelCompile {
        kernel: kernel.name().to_string(),
        compiler: compiler.describe(),
        log: "no way to build the kernel was tried".to_string(),
    })?;
    let mut programs = lock();
    let by_kernel = &mut programs.get_or_insert_with(Programs::default).by_kernel;
    if by_kernel.len() >= MAX_KERNEL_ENTRIES {
        // A program that makes kernel objects over and over (one per request) would otherwise
        // grow the map for ever; the kernels dropped from it find their programs by content.
        by_kernel.clear();
    }
    by_kernel.insert(kernel.id(), program.clone());
    Ok(program)
}

/// One way to build a kernel: how its threads run, the translation unit and its cache key.
struct Plan {
    threads: Threads,
    unit: String,
    key: String,
}

/// The ways to build `source`, best first: stackless threads when the source allows them, then
/// ordinary calls (always; the answer when the first is refused).
fn plans(kernel: &str, source: &KernelSource, compiler: &Compiler) -> Vec<Plan> {
    let headers = includes::fingerprint(&source.code);
    let plan = |threads: Threads, code: &str| {
        let unit = wrapper::translation_unit(kernel, code, &source.entry, threads);
        let flags = compiler::FLAGS.join(" ");
        let key = cache::key(&[
            b"gpu-mem-sim kernel",
            &ABI.to_le_bytes(),
            compiler.path.as_os_str().as_encoded_bytes(),
            compiler.version.as_bytes(),
            compiler::standard(threads, compiler.is_clang())
                .join(" ")
                .as_bytes(),
            flags.as_bytes(),
            KERNEL_PRELUDE.as_bytes(),
            unit.as_bytes(),
            &headers,
        ]);
        Plan { threads, unit, key }
    };
    let mut plans = Vec::with_capacity(2);
    // Clang builds the stackless form as C++20 (`compiler::standard`), which must not change
    // what the kernel computes.
    let as_cxx20 = || {
        compiler
            .is_clang()
            .then(|| stackless::why_not_as_cxx20(&source.code))
            .flatten()
    };
    match stackless::why_not(&source.code) {
        None => match as_cxx20() {
            None => {
                if let Some(code) = stackless::rewrite(&source.code) {
                    plans.push(plan(Threads::Stackless, &code));
                }
            }
            Some(reason) => {
                tracing::debug!(kernel, %reason, "kernel runs on stacks: clang would build its stackless form as C++20");
            }
        },
        // (A kernel whose threads wait for nothing runs them as plain calls, faster still.)
        Some(reason) if wrapper::may_wait(&source.code) => {
            tracing::debug!(kernel, %reason, "kernel runs on stacks: not tried stackless");
        }
        Some(_) => {}
    }
    plans.push(plan(Threads::Calls, &source.code));
    plans
}

/// Why a build failed: the compiler refused the unit (its message), or something else did.
enum Failure {
    Refused(String),
    Other(Error),
}

impl Failure {
    fn of_compile(kernel: &str, compiler: &Compiler, failure: CompileFailure) -> Failure {
        match failure {
            CompileFailure::Refused(log) => Failure::Refused(log),
            CompileFailure::DidNotRun(log) => Failure::Other(Error::KernelCompile {
                kernel: kernel.to_string(),
                compiler: compiler.describe(),
                log,
            }),
        }
    }
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
            "cannot {what} {}: {e} (set {} to a directory of your own that you can write)",
            path.display(),
            cache::VARIABLE
        ),
    }
}

/// Loads the cached library of `plan`, building it first if the cache lacks it (or holds one
/// that does not load).
fn build(
    kernel: &str,
    compiler: &Compiler,
    plan: &Plan,
) -> std::result::Result<SourceProgram, Failure> {
    let dir = cache::directory();
    cache::prepare(&dir)
        .map_err(|e| Failure::Other(cache_error(kernel, compiler, "use", &dir, e)))?;
    let library = dir.join(format!("{}.so", plan.key));
    if library.is_file() {
        match load(&library, plan.threads) {
            Ok(program) => {
                tracing::debug!(kernel, path = %library.display(), threads = ?plan.threads, "simulator kernel from the disk cache");
                return Ok(program);
            }
            Err(reason) => {
                tracing::warn!(kernel, path = %library.display(), "cached kernel library does not load ({reason}); rebuilding");
            }
        }
    }
    let started = std::time::Instant::now();
    compile_into(kernel, compiler, plan, &dir, &library)?;
    tracing::debug!(kernel, elapsed = ?started.elapsed(), compiler = %compiler.describe(), threads = ?plan.threads, "compiled simulator kernel");
    load(&library, plan.threads).map_err(|reason| {
        Failure::Other(Error::KernelCompile {
            kernel: kernel.to_string(),
            compiler: compiler.describe(),
            log: format!(
                "the compiled library {} does not load: {reason}",
                library.display()
            ),
        })
    })
}

/// Compiles `plan`'s unit in a private scratch directory and renames the library to `library`.
fn compile_into(
    kernel: &str,
    compiler: &Compiler,
    plan: &Plan,
    dir: &Path,
    library: &Path,
) -> std::result::Result<(), Failure> {
    let other = |what: &str, path: &Path, e: std::io::Error| {
        Failure::Other(cache_error(kernel, compiler, what, path, e))
    };
    let scratch = cache::scratch_dir(dir).map_err(|e| other("write to", dir, e))?;
    let result = (|| {
        let write = |name: &str, text: &str| -> std::result::Result<PathBuf, Failure> {
            let path = scratch.join(name);
            std::fs::write(&path, text).map_err(|e| other("write", &path, e))?;
            Ok(path)
        };
        write("gpu_mem.h", KERNEL_PRELUDE)?;
        // Not named after the kernel: a name may hold `/` or be longer than a file name may be
        // (messages name the kernel's file through the unit's `#line` directives).
        let source = write("kernel.cpp", &plan.unit)?;
        let output = scratch.join("kernel.so");
        compiler
            .compile(&source, &output, plan.threads)
            .map_err(|failure| Failure::of_compile(kernel, compiler, failure))?;
        std::fs::rename(&output, library).map_err(|e| other("write", library, e))
    })();
    // Best effort: a leftover scratch directory only takes space.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Loads a kernel library built for `threads` and reads its description.
fn load(path: &Path, threads: Threads) -> std::result::Result<SourceProgram, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let tls = elf::shared_bytes(&bytes).ok_or("not a 64-bit ELF shared library")?;
    // SAFETY: the library was built by `compile_into` from the prelude and one kernel; loading
    // it runs only the C++ runtime's and the kernel's static initialisers.
    let library = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    type Abi = unsafe extern "C" fn() -> u32;
    type Init = unsafe extern "C" fn(*const crate::executor::body::GmSimRuntime);
    type Params = unsafe extern "C" fn(*mut c_int) -> *const RawParam;
    // SAFETY: the symbols are the wrapper's `extern "C"` functions with exactly these types.
    let (abi, init, params) = unsafe {
        let abi = *library
            .get::<Abi>(b"gm_sim_abi\0")
            .map_err(|e| e.to_string())?;
        let init = *library
            .get::<Init>(b"gm_sim_init\0")
            .map_err(|e| e.to_string())?;
        let params = *library
            .get::<Params>(b"gm_sim_params\0")
            .map_err(|e| e.to_string())?;
        (abi, init, params)
    };
    // SAFETY: as above, for the entry points of `threads` (`wrapper::translation_unit`).
    let entry = unsafe {
        match threads {
            Threads::Calls => Entry::Calls(
                *library
                    .get::<unsafe extern "C" fn(*const *mut c_void) -> c_int>(b"gm_sim_run\0")
                    .map_err(|e| e.to_string())?,
            ),
            Threads::Stackless => Entry::Stackless(StacklessEntry {
                start_round: *library
                    .get(b"gm_sim_start_round\0")
                    .map_err(|e| e.to_string())?,
                resume_round: *library
                    .get(b"gm_sim_resume_round\0")
                    .map_err(|e| e.to_string())?,
                begin_block: *library
                    .get(b"gm_sim_begin_block\0")
                    .map_err(|e| e.to_string())?,
            }),
        }
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
        entry,
        params,
        static_shared: usize::try_from(tls).unwrap_or(usize::MAX),
        waits: true,
    })
}

#[cfg(all(test, not(miri)))]
#[allow(clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn threads_of(code: &str) -> Threads {
        let kernel = Kernel::from_source(code, "k");
        let program = program(&kernel, kernel.source().expect("a source kernel"))
            .unwrap_or_else(|e| panic!("{e}"));
        match program.entry {
            Entry::Calls(_) => Threads::Calls,
            Entry::Stackless(_) => Threads::Stackless,
        }
    }

    #[test]
    fn kernel_objects_made_over_and_over_do_not_grow_the_id_map_for_ever() {
        let code = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void made_often() {}\n";
        let first = Kernel::from_source(code, "made_often");
        let program_of_first = program(&first, first.source().expect("source")).expect("built");
        for _ in 0..MAX_KERNEL_ENTRIES + 10 {
            let kernel = Kernel::from_source(code, "made_often");
            let again = program(&kernel, kernel.source().expect("source")).expect("found");
            // Found by content: the one program.
            assert!(Arc::ptr_eq(&again, &program_of_first));
        }
        let entries = PROGRAMS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |p| p.by_kernel.len());
        assert!(entries <= MAX_KERNEL_ENTRIES, "{entries} kernel ids kept");
    }

    #[test]
    fn kernels_calling_barriers_collectives_and_atomics_themselves_run_stackless() {
        let body = "extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                    \x20   if (threadIdx.x >= a.shape[0]) return;\n\
                    \x20   __syncthreads(); a(threadIdx.x) += 1; barrier(GM_FENCE_GLOBAL);\n}\n";
        assert_eq!(
            threads_of(&format!("#include \"gpu_mem.h\"\n{body}")),
            Threads::Stackless
        );
        // A helper that waits is a coroutine too.
        let helper = "#include \"gpu_mem.h\"\n__device__ void wait() { syncthreads(); }\n\
                      extern \"C\" __global__ void k(gm_array<int, 1> a) { wait(); a(0) = 1; }\n";
        assert_eq!(threads_of(helper), Threads::Stackless);
        // Operator functions before the kernel (`=`, `<` in their names) hide nothing.
        let operators = "#include \"gpu_mem.h\"\nstruct V { int x; };\n\
                         __device__ V& operator+=(V& a, V b) { a.x += b.x; return a; }\n\
                         __device__ V operator<<(V a, int s) { return V{a.x << s}; }\n\
                         extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                         \x20   V v{1}; v += V{2}; syncthreads(); a(0) = (v << 1).x;\n}\n";
        assert_eq!(threads_of(operators), Threads::Stackless);
        // Refused by the compiler in stackless form: a barrier in a lambda.
        let lambda = "#include \"gpu_mem.h\"\n\
                      extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                      \x20   auto step = [&](int i) { syncthreads(); return i; };\n\
                      \x20   a(0) = step(1);\n}\n";
        assert_eq!(threads_of(lambda), Threads::Calls);
        // Collectives called in the kernel suspend it too.
        let shuffle = "#include \"gpu_mem.h\"\n\
                       extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                       \x20   syncthreads(); a(0) = __shfl_sync(~0ull, 1, 0);\n}\n";
        assert_eq!(threads_of(shuffle), Threads::Stackless);
        // Atomics let the others run, called in the kernel or in a helper.
        let atomic = "#include \"gpu_mem.h\"\n\
                      extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                      \x20   syncthreads(); atomicAdd(&a(0), 1);\n}\n";
        assert_eq!(threads_of(atomic), Threads::Stackless);
        let in_helper = "#include \"gpu_mem.h\"\n\
                         __device__ void add(int* p) { atomicAdd(p, 1); }\n\
                         extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                         \x20   syncthreads(); add(&a(0));\n}\n";
        assert_eq!(threads_of(in_helper), Threads::Stackless);
        // One in a struct's member function cannot suspend: on stacks, without a try.
        let member = "#include \"gpu_mem.h\"\n\
                      struct counter { __device__ void add(int* p) { atomicAdd(p, 1); } };\n\
                      extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                      \x20   syncthreads(); counter{}.add(&a(0));\n}\n";
        assert_eq!(threads_of(member), Threads::Calls);
    }

    #[test]
    fn helpers_of_every_shape_compile_stackless() {
        let code = r#"#include "gpu_mem.h"
struct pair_of { int first; int second; };
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(~0ull, v, o);
    return v;
}
__device__ int depth(int n);
__device__ int depth(int n) {
    if (n == 0) { syncthreads(); return 0; }
    return depth(n - 1) + 1;
}
GM_DEVICE int& slot(int* s) { __syncwarp(); return s[threadIdx.x]; }
static __device__ pair_of both(int v) { return pair_of{__shfl_xor_sync(~0ull, v, 1), v}; }
__device__ void settle(int* count) { atomicAdd(count, 1); __nanosleep(1); __syncthreads(); }
__device__ unsigned long long twice(int v) { return 2ull * warp_sum(v) + (unsigned)depth(1); }
__device__ int checked(int i) { __syncwarp(); if (i < 0) throw i; return i; }
extern "C" __global__ void k(gm_array<int, 1> a) {
    __shared__ int s[64];
    __shared__ int count;
    try { s[1] = checked(-1); } catch (int e) { s[1] = e; }
    if (twice(a(threadIdx.x)) > 3) slot(s) = warp_sum<int>(1); else slot(s) = both(2).first;
    settle(&count);
    a(threadIdx.x) = s[0] + warp_sum(1.5f) + depth(2);
}
"#;
        assert_eq!(threads_of(code), Threads::Stackless);
    }
}
