//! Kernels from CUDA C++ source on the simulator: a module's source is built by the host C++
//! compiler into one shared library (the prelude's host branch, `include/gpu_mem.h`, and the
//! simulator's CUDA vocabulary, `../include`), and every simulated thread runs its kernel's
//! entry point on the executor (`crate::executor`).
//!
//! Guarantees:
//! * a module (its source and template instantiations) is one library, loaded once per process:
//!   its kernels share its `__device__` and `__constant__` variables ([`variable`]), and two
//!   kernel objects of one module find it by content;
//! * a compile error is [`Error::KernelCompile`] with the compiler's message, naming the
//!   module's file (`<first kernel>.cu`) and line; a missing compiler is
//!   [`Error::CompilerUnavailable`] naming `GPU_MEM_SIM_CXX` and what was tried;
//! * libraries are cached on disk by a hash of everything that affects them and appear there by
//!   rename only; a kernel launched again in the same process touches neither the compiler nor
//!   the disk;
//! * a kernel the module does not have is [`Error::InvalidLaunch`] listing those it has; a
//!   launch whose arguments do not match the entry's parameters (count, kind, rank, element
//!   size and kind, as the C++ compiler sees them) is refused before anything runs;
//! * loaded libraries are never unloaded (C++ runtimes and thread-locals do not survive
//!   `dlclose` well);
//! * the source is compiled with two rewrites — `extern __shared__` arrays
//!   ([`dynamic_shared`]) and shifts made a GPU's ([`shifts`]) — and, where its threads allow,
//!   as coroutines ([`stackless`]); a way of building the compiler refuses falls back to the
//!   next, the last being the source as written.

mod atomics;
mod cache;
mod compiler;
mod declarations;
mod defines;
mod dynamic_shared;
mod elf;
mod explicit_instantiations;
mod expression;
mod flat_calls;
mod guards;
mod headers;
mod includes;
mod precompiled;
mod regions;
mod shifts;
mod signature;
mod stackless;
mod unroll;
mod wrapper;

use crate::abi::{ABI, CallsEntry, Entry, GmSimRound, GmSimRuntime, GmSimThreads, StacklessEntry};
use crate::executor::{self, RUNTIME};
use crate::sanitizer::{ProgramLayout, ShadowedProgram, ThreadLocal};
pub(crate) use compiler::Threads;
use compiler::{CompileFailure, Compiler, Instrumented};
use declarations::Declared;
use gpu_mem_core::kernel::compiled;
use gpu_mem_core::kernel::scan::is_name_expression;
use gpu_mem_core::kernel::{KernelSource, LaunchArg, Module};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Kernel, Result};
use signature::{Param, ParamKind, RawParam};
use std::collections::{BTreeSet, HashMap};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One kernel of a loaded module.
pub(crate) struct SourceProgram {
    /// Keeps the code mapped; libraries are kept for the life of the process.
    _library: Arc<libloading::Library>,
    pub(crate) entry: Entry,
    params: Vec<Param>,
    /// Per parameter: whether it is a pointer (an array passed to it is its first element's
    /// address).
    pointers: Vec<bool>,
    /// Bytes of static `__shared__` arrays per block (the module's: every kernel's arrays are
    /// thread-locals of its library).
    pub(crate) static_shared: usize,
    /// Whether its threads may wait for each other (the source names a barrier, collective,
    /// atomic or spin hint): such threads may wait on fibers of their own, the others run as
    /// plain calls.
    pub(crate) waits: bool,
    /// A checked program's memory (`crate::sanitizer`); `None` for others.
    layout: Option<Arc<ProgramLayout>>,
}

impl std::fmt::Debug for SourceProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceProgram")
            .field("stackless", &matches!(self.entry, Entry::Stackless(_)))
            .field("regions", &matches!(self.entry, Entry::Regions(_)))
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

    /// The program as the executor runs it.
    pub(crate) fn compiled(&self) -> executor::Compiled<'_> {
        executor::Compiled {
            entry: self.entry,
            waits: self.waits,
            pointers: &self.pointers,
            layout: self.layout.as_deref(),
        }
    }
}

/// A variable of a loaded module: where it is in this process, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Variable {
    pub(crate) name: String,
    pub(crate) address: usize,
    pub(crate) size: usize,
}

/// A loaded module: its kernels and variables.
pub(crate) struct LoadedModule {
    kernels: Vec<(String, Arc<SourceProgram>)>,
    variables: Vec<Variable>,
}

impl LoadedModule {
    /// This module with the kernels named in `only` (by function name, whatever their template
    /// arguments) taken from `part`, a build of the same module for them.
    fn with_kernels_of(&self, part: &LoadedModule, only: &BTreeSet<String>) -> LoadedModule {
        let function = |entry: &str| {
            let name = entry.split('<').next().unwrap_or(entry).trim();
            name.rsplit("::").next().unwrap_or(name).trim().to_string()
        };
        LoadedModule {
            kernels: self
                .kernels
                .iter()
                .map(|(entry, own)| {
                    let program = only
                        .contains(&function(entry))
                        .then(|| part.kernel(entry))
                        .flatten()
                        .unwrap_or(own);
                    (entry.clone(), program.clone())
                })
                .collect(),
            variables: self.variables.clone(),
        }
    }

    fn kernel(&self, entry: &str) -> Option<&Arc<SourceProgram>> {
        let wanted = spaced(entry);
        self.kernels
            .iter()
            .find(|(name, _)| spaced(name) == wanted)
            .map(|(_, program)| program)
    }

    fn names(&self) -> String {
        if self.kernels.is_empty() {
            "none".to_string()
        } else {
            self.kernels
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// A name expression without spaces, to compare spellings (`f<float,4>` is `f<float, 4>`).
fn spaced(name: &str) -> String {
    name.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Kernel objects whose programs are found by id (the fast path) before the map starts over.
const MAX_KERNEL_ENTRIES: usize = 4096;

/// Kernels by kernel id (the fast path), modules by content and by cache key.
#[derive(Default)]
struct Programs {
    by_kernel: HashMap<(u64, Build), Arc<SourceProgram>>,
    by_module: HashMap<(Module, Build), Arc<LoadedModule>>,
    by_key: HashMap<String, Arc<LoadedModule>>,
}

static PROGRAMS: Mutex<Option<Programs>> = Mutex::new(None);

/// The modules being built, each with the lock its builder holds: a module is built once (two
/// threads launching the same new kernel build it once), different modules side by side, while
/// [`PROGRAMS`] is held only to look programs up and add them, so that kernels built already
/// launch while others compile.
type Building = HashMap<(Module, Build), Arc<Mutex<()>>>;
static BUILDING: Mutex<Option<Building>> = Mutex::new(None);

/// The lock of `module`'s build (made for the first thread to build it).
fn build_lock(module: &(Module, Build)) -> Arc<Mutex<()>> {
    lock(&BUILDING)
        .get_or_insert_with(HashMap::new)
        .entry(module.clone())
        .or_default()
        .clone()
}

/// Forgets `module`'s build lock once its build is over: a thread still waiting for it holds
/// its own reference, and finds the module among the programs (or builds it, after a failure).
fn build_over(module: &(Module, Build)) {
    if let Some(building) = lock(&BUILDING).as_mut() {
        building.remove(module);
    }
}

/// The generated translation unit's file name (it includes the kernel's file, named after it).
const UNIT_FILE: &str = "kernel.cpp";

fn programs<R>(f: impl FnOnce(&mut Programs) -> R) -> R {
    f(lock(&PROGRAMS).get_or_insert_with(Programs::default))
}

fn unsupported_under_miri() -> Error {
    Error::NotSupportedByBackend {
        backend: BackendKind::Sim,
        feature: "source kernels under Miri",
        reason: "the host compiler and loaded libraries are outside what Miri interprets".into(),
    }
}

/// How a device has its modules built; each way is a library of its own (with its own module
/// variables) where the code built differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Build {
    /// Stackless threads where the source allows them, else threads as calls.
    Fastest,
    /// Threads as calls only, which the executor can run in any order (`crate::ThreadOrder`).
    Calls,
    /// Threads as calls (or, under memcheck alone, blocks as regions), every access checked
    /// (`crate::sanitizer`); `every_access`: each one
    /// asked for (racecheck, initcheck), not only those the shadow does not answer (memcheck),
    /// `index_order`: threads run in index order, so that blocks may run as regions (which the
    /// shadow alone allows).
    Checked {
        every_access: bool,
        index_order: bool,
    },
}

impl Build {
    /// The build a device with these settings runs.
    pub(crate) fn of(checks: crate::Checks, order: crate::ThreadOrder) -> Build {
        if checks.any() {
            Build::Checked {
                every_access: checks.racecheck || checks.initcheck,
                index_order: order == crate::ThreadOrder::Index,
            }
        } else if order != crate::ThreadOrder::Index {
            Build::Calls
        } else {
            Build::Fastest
        }
    }
}

/// The program of `kernel`'s entry point, its module compiled (or taken from a cache) and
/// loaded the way `build` says.
pub(crate) fn program(
    kernel: &Kernel,
    source: &KernelSource,
    build: Build,
) -> Result<Arc<SourceProgram>> {
    if cfg!(miri) {
        return Err(unsupported_under_miri());
    }
    if let Some(found) = programs(|p| p.by_kernel.get(&(kernel.id(), build)).cloned()) {
        return Ok(found);
    }
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.name().to_string(),
        reason,
    };
    if !is_name_expression(&source.entry) {
        return Err(invalid(format!(
            "`{}` is not a kernel name (a C++ name, with template arguments for a template kernel)",
            source.entry
        )));
    }
    let module = loaded_module(kernel.name(), &source.module, build)?;
    let program = module.kernel(&source.entry).cloned().ok_or_else(|| {
        invalid(format!(
            "the source has no kernel `{}` to launch; its kernels: {} (a template kernel is launched by an instantiation the module is made with: Kernel::from_source(code, \"name<arguments>\") or Module::with_name_expressions)",
            source.entry,
            module.names()
        ))
    })?;
    programs(|p| {
        if p.by_kernel.len() >= MAX_KERNEL_ENTRIES {
            // A program that makes kernel objects over and over (one per request) would
            // otherwise grow the map for ever; the kernels dropped from it find their programs
            // by content.
            p.by_kernel.clear();
        }
        p.by_kernel.insert((kernel.id(), build), program.clone());
    });
    Ok(program)
}

/// The variable `name` of `module` (built and loaded first if it is not yet): its address in
/// this process and its size.
pub(crate) fn variable(module: &Module, name: &str, build: Build) -> Result<Variable> {
    if cfg!(miri) {
        return Err(unsupported_under_miri());
    }
    let loaded = loaded_module(module.name(), module, build)?;
    let wanted = compiled::normalized(name);
    loaded
        .variables
        .iter()
        .find(|v| compiled::normalized(&v.name) == wanted)
        .cloned()
        .ok_or_else(|| {
            let mut known: Vec<&str> = loaded.variables.iter().map(|v| v.name.as_str()).collect();
            known.sort_unstable();
            Error::InvalidArgument {
                name: "symbol",
                reason: format!(
                    "the module `{}` has no __device__, __constant__ or __managed__ variable `{name}` at file scope; its variables: {}",
                    module.name(),
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            }
        })
}

/// `module` loaded: found by content, or built.
fn loaded_module(what: &str, module: &Module, build: Build) -> Result<Arc<LoadedModule>> {
    let by_module = (module.clone(), build);
    if let Some(found) = programs(|p| p.by_module.get(&by_module).cloned()) {
        return Ok(found);
    }
    if let Some(bad) = module
        .name_expressions()
        .iter()
        .find(|n| !is_name_expression(n))
    {
        return Err(Error::InvalidLaunch {
            kernel: what.to_string(),
            reason: format!(
                "`{bad}` is not a name expression (a C++ name with template arguments)"
            ),
        });
    }
    let compiler = Compiler::from_env()?;
    let plans = plans(module, &compiler, build);
    let slot = build_lock(&by_module);
    let built = {
        let _building = lock(&slot);
        match programs(|p| p.by_module.get(&by_module).cloned()) {
            Some(found) => Ok(found),
            None => build_module(what, module, &compiler, &plans, by_module.clone()),
        }
    };
    build_over(&by_module);
    built
}

/// Builds `module` by the first of its `plans` that the compiler takes (under its build lock).
fn build_module(
    what: &str,
    module: &Module,
    compiler: &Compiler,
    plans: &[Plan],
    by_module: (Module, Build),
) -> Result<Arc<LoadedModule>> {
    let cache = cache::open().map_err(|reason| Error::KernelCompile {
        kernel: what.to_string(),
        compiler: compiler.describe(),
        log: format!(
            "the kernel cache cannot be used: {reason} (set {} to a folder of your own that only you can write)",
            cache::VARIABLE
        ),
    })?;
    let mut declared: Option<Declared> = None;
    let mut chosen = None;
    // A build for some kernels only (`Plan::only`), and which.
    let mut partial: Option<(Arc<LoadedModule>, &BTreeSet<String>)> = None;
    for (i, plan) in plans.iter().enumerate() {
        if let Some(caveat) = plan.caveat {
            tracing::warn!(module = module.name(), "{caveat}");
        }
        if let Some(found) = programs(|p| p.by_key.get(&plan.key).cloned()) {
            if let Some(only) = &plan.only {
                partial = Some((found, only));
                continue;
            }
            chosen = Some(found);
            break;
        }
        let last = i + 1 == plans.len();
        if !last && cache.refused(&plan.key) {
            tracing::debug!(
                module = module.name(),
                threads = ?plan.threads,
                "not built this way: the compiler refused it before"
            );
            continue;
        }
        // The module's build lock keeps two threads from building it twice; other processes
        // (and two modules that share a unit) are kept apart by the rename.
        match build(&cache, compiler, module, plan, &mut declared) {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                programs(|p| p.by_key.insert(plan.key.clone(), loaded.clone()));
                if let Some(only) = &plan.only {
                    partial = Some((loaded, only));
                    continue;
                }
                chosen = Some(loaded);
                break;
            }
            Err(Failure::Refused(log)) if !last => {
                if std::env::var_os("GM_DEBUG_REFUSAL").is_some() {
                    eprintln!("{log}");
                }
                tracing::debug!(module = module.name(), threads = ?plan.threads, %log, "the compiler refuses this way of building the kernel; the next is tried");
                cache.remember_refusal(&plan.key);
            }
            // Not a refusal (the compiler did not run to the end): the next way is tried, and
            // this one again next time.
            Err(Failure::Other(error)) if !last => {
                tracing::debug!(module = module.name(), %error, "kernel runs on stacks this time: building its stackless form failed");
            }
            Err(Failure::Refused(log)) => {
                // (The last way builds the source as written: its refusal is the user's error.)
                return Err(Error::KernelCompile {
                    kernel: what.to_string(),
                    compiler: compiler.describe(),
                    log: with_hints(module.code(), log),
                });
            }
            Err(Failure::Other(error)) => return Err(error),
        }
    }
    let loaded = chosen.ok_or_else(|| Error::KernelCompile {
        kernel: what.to_string(),
        compiler: compiler.describe(),
        log: "no way to build the kernel was tried".to_string(),
    })?;
    // Kernels built apart from the rest of their module share nothing with it but what their
    // launches pass: not where the module has variables (each build would hold its own).
    let loaded = match partial {
        Some((part, only)) if loaded.variables.is_empty() && part.variables.is_empty() => {
            Arc::new(loaded.with_kernels_of(&part, only))
        }
        _ => loaded,
    };
    programs(|p| p.by_module.insert(by_module, loaded.clone()));
    Ok(loaded)
}

/// A compile error's log, with what the simulator cannot build said plainly where the source
/// shows it.
fn with_hints(code: &str, mut log: String) -> String {
    if code.contains("asm(") || code.contains("asm (") || code.contains("asm volatile") {
        log.push_str(
            "\n(gpu-mem: the kernel has inline assembly, which is PTX for a GPU: the simulator builds kernels with the host C++ compiler and cannot run it)",
        );
    }
    log
}

/// Whether `code` looks warp-synchronous in the pre-Volta style: `volatile` accesses and no
/// warp barrier (`__syncwarp`, a tile's `sync()`).
fn warp_synchronous(code: &str) -> bool {
    code.contains("volatile") && !code.contains("__syncwarp") && !code.contains(".sync(")
}

/// One way to build a module: how its threads run, the code compiled, and its cache key.
struct Plan {
    threads: Threads,
    code: String,
    key: String,
    /// Said (a warning) when the module is built this way: what it gives up.
    caveat: Option<&'static str>,
    /// A build for these kernels only (by name, `regions::rewrite_subset`): the module is
    /// built the next way too, and these kernels are taken from this build.
    only: Option<BTreeSet<String>>,
}

/// The caveat of building a module without `shifts::rewrite`.
const SHIFTS_AS_WRITTEN: &str = "the kernel did not compile with its shifts made a GPU's (a template argument list in a shift count?), so it is built as written: a shift by the width or more is reported as a fault rather than give a GPU's 0";

/// The ways to build `module`, best first: stackless threads when the source allows them, then
/// ordinary calls (always; the answer when the first is refused); only calls, or only checked
/// calls, where `build` says so.
fn plans(module: &Module, compiler: &Compiler, build: Build) -> Vec<Plan> {
    let as_written = unroll::rewrite(&dynamic_shared::rewrite(module.code())).into_owned();
    let code = shifts::rewrite(&as_written).into_owned();
    if warp_synchronous(&code) {
        tracing::warn!(
            module = module.name(),
            "the kernel reads memory through `volatile` and never calls __syncwarp: if its warps exchange values through shared memory without __syncwarp (the pre-Volta warp-synchronous style), the simulator, whose threads do not run in lockstep, computes something else than a pre-Volta GPU did (and a Volta or later GPU may too): add __syncwarp() between the steps"
        );
    }
    let included = includes::fingerprint(&code);
    let file = wrapper::file_name(module.name());
    let names = module.name_expressions().join("\n");
    let plan = |threads: Threads, compiled: &str| {
        let flags = [
            compiler::FLAGS.join(" "),
            compiler::optimisation(threads).join(" "),
            compiler::instrumentation(threads, compiler.is_clang()).join(" "),
            compiler::LINK_FLAGS.join(" "),
            compiler.linker.unwrap_or_default().to_string(),
        ]
        .join(" ");
        let key = cache::key(&[
            b"gpu-mem-sim module",
            &ABI.to_le_bytes(),
            compiler.path.as_os_str().as_encoded_bytes(),
            compiler.version.as_bytes(),
            compiler::standard(threads, compiler.is_clang())
                .join(" ")
                .as_bytes(),
            flags.as_bytes(),
            &headers::fingerprint(),
            file.as_bytes(),
            names.as_bytes(),
            compiled.as_bytes(),
            &included,
        ]);
        Plan {
            threads,
            code: compiled.to_string(),
            key,
            caveat: None,
            only: None,
        }
    };
    let calls = match build {
        Build::Checked { every_access, .. } => {
            Threads::Checked(instrumented(every_access, compiler))
        }
        Build::Fastest | Build::Calls => Threads::Calls,
    };
    // Fastest of all: whole blocks as loops between barriers, where the kernel's barriers allow
    // it (`regions`); a source the compiler then refuses is built the next way. Checked through
    // the shadow too: a check there is the same inline test in a loop as on a stack.
    let as_regions = match (build, calls) {
        (Build::Fastest, _) => Some(Threads::Regions),
        (
            Build::Checked {
                index_order: true, ..
            },
            Threads::Checked(Instrumented::Shadowed),
        ) => Some(Threads::ShadowedRegions),
        _ => None,
    };
    // The stackless and regions forms start from the source with its block groups' syncs
    // written as block barriers (`stackless::lower_block_groups`), where it has any.
    let lowered = (build == Build::Fastest || as_regions.is_some())
        .then(|| stackless::lower_block_groups(&code))
        .flatten();
    let stackless_code = lowered.as_deref().unwrap_or(&code);
    // memcheck refuses a thread another's own variables only on stacks of their own
    // (`regions::leaks_own_address`).
    let leaks = |threads: Threads| {
        let leak = (threads == Threads::ShadowedRegions)
            .then(|| regions::leaks_own_address(stackless_code))
            .flatten();
        if let Some(reason) = &leak {
            tracing::debug!(module = module.name(), %reason, "kernel checked on stacks, not as regions");
        }
        leak.is_some()
    };
    let mut plans = Vec::with_capacity(3);
    if let Some(threads) = as_regions
        .filter(|_| wrapper::may_wait(&code))
        .filter(|&threads| !leaks(threads))
    {
        // (Its kernels are inline functions there: `explicit_instantiations`.)
        let inline_kernels = |code: String| explicit_instantiations::rewrite(&code).into_owned();
        match regions::rewrite(stackless_code).map(inline_kernels) {
            Ok(rewritten) => plans.push(plan(threads, &rewritten)),
            Err(reason) => {
                tracing::debug!(module = module.name(), %reason, "kernel not run as regions");
                // Its kernels that can be, each on its own, are run as regions still.
                if let Some((rewritten, kernels)) = regions::rewrite_subset(&code)
                    .map(|(rewritten, kernels)| (inline_kernels(rewritten), kernels))
                {
                    tracing::debug!(
                        module = module.name(),
                        ?kernels,
                        "these kernels run as regions"
                    );
                    plans.push(Plan {
                        only: Some(kernels),
                        ..plan(threads, &rewritten)
                    });
                }
            }
        }
    }
    if build == Build::Fastest {
        // Clang builds the stackless form as C++20 (`compiler::standard`), which must not change
        // what the kernel computes.
        let as_cxx20 = || {
            compiler
                .is_clang()
                .then(|| stackless::why_not_as_cxx20(stackless_code))
                .flatten()
        };
        match stackless::why_not(stackless_code) {
            None => match as_cxx20() {
                None => {
                    if let Some(rewritten) = stackless::rewrite(stackless_code) {
                        plans.push(plan(Threads::Stackless, &rewritten));
                    }
                }
                Some(reason) => {
                    tracing::debug!(module = module.name(), %reason, "kernel runs on stacks: clang would build its stackless form as C++20");
                }
            },
            // (A kernel whose threads wait for nothing runs them as plain calls, faster still.)
            Some(reason) if wrapper::may_wait(&code) => {
                tracing::debug!(module = module.name(), %reason, "kernel runs on stacks: not tried stackless");
            }
            Some(_) => {}
        }
    }
    // Threads as plain calls skip what a leading guard refuses (`guards`), and run as flat
    // loops where their kernel allows (`flat_calls`); a checked build keeps every thread,
    // whose guard's reads it checks.
    let guarded = |code: &str| match calls {
        Threads::Calls => guards::rewrite(&flat_calls::rewrite(code)).into_owned(),
        _ => code.to_string(),
    };
    plans.push(plan(calls, &guarded(&code)));
    if code != as_written {
        plans.push(Plan {
            caveat: Some(SHIFTS_AS_WRITTEN),
            ..plan(calls, &guarded(&as_written))
        });
    }
    plans
}

/// How a checked program is instrumented: through the shadow where only memcheck asks, the
/// compiler is GCC (clang's kernel-address instrumentation was not tried) and the shadow could be
/// reserved; every access otherwise.
fn instrumented(every_access: bool, compiler: &Compiler) -> Instrumented {
    if every_access || compiler.is_clang() || crate::sanitizer::memory_shadow().is_none() {
        Instrumented::EveryAccess
    } else {
        Instrumented::Shadowed
    }
}

/// Why a build failed: the compiler refused the unit (its message), or something else did.
enum Failure {
    Refused(String),
    Other(Error),
}

impl Failure {
    fn of_compile(module: &Module, compiler: &Compiler, failure: CompileFailure) -> Failure {
        match failure {
            CompileFailure::Refused(log) => Failure::Refused(log),
            CompileFailure::DidNotRun(log) => Failure::Other(Error::KernelCompile {
                kernel: module.name().to_string(),
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
/// that fails its checks or does not load). `declared` keeps the module's declarations between
/// plans.
fn build(
    cache: &cache::Cache,
    compiler: &Compiler,
    module: &Module,
    plan: &Plan,
    declared: &mut Option<Declared>,
) -> std::result::Result<LoadedModule, Failure> {
    let name = module.name();
    match cache.library(&plan.key) {
        Ok(Some(verified)) => match load(verified, plan.threads, module.code()) {
            Ok(loaded) => {
                tracing::debug!(module = name, key = %plan.key, threads = ?plan.threads, "simulator kernel from the disk cache");
                return Ok(loaded);
            }
            Err(reason) => {
                tracing::warn!(module = name, key = %plan.key, "cached kernel library does not load ({reason}); rebuilding");
            }
        },
        Ok(None) => {}
        Err(reason) => {
            tracing::warn!(module = name, dir = %cache.path().display(), key = %plan.key, "cached kernel library refused ({reason}); rebuilding");
        }
    }
    let started = std::time::Instant::now();
    compile_into(cache, compiler, module, plan, declared)?;
    tracing::debug!(module = name, elapsed = ?started.elapsed(), compiler = %compiler.describe(), threads = ?plan.threads, "compiled simulator kernel");
    let failed = |reason: String| {
        Failure::Other(Error::KernelCompile {
            kernel: name.to_string(),
            compiler: compiler.describe(),
            log: format!(
                "the compiled library {}/{}.so does not load: {reason}",
                cache.path().display(),
                plan.key
            ),
        })
    };
    let verified = cache
        .library(&plan.key)
        .map_err(&failed)?
        .ok_or_else(|| failed("it is not there after it was stored".to_string()))?;
    load(verified, plan.threads, module.code()).map_err(failed)
}

/// Compiles `plan`'s unit in a private scratch directory and stores the library in the cache.
fn compile_into(
    cache: &cache::Cache,
    compiler: &Compiler,
    module: &Module,
    plan: &Plan,
    declared: &mut Option<Declared>,
) -> std::result::Result<(), Failure> {
    let name = module.name();
    let other = |what: &str, path: &Path, e: std::io::Error| {
        Failure::Other(cache_error(name, compiler, what, path, e))
    };
    let scratch = cache
        .scratch()
        .map_err(|e| other("write to", cache.path(), e))?;
    let result = (|| {
        let include = scratch.join("include");
        headers::write_into(&include).map_err(|e| other("write", &include, e))?;
        let file = wrapper::file_name(name);
        let declared = match declared {
            Some(found) => found,
            None => {
                let code = dynamic_shared::rewrite(module.code());
                let unit = wrapper::kernel_part(&file, &code, Threads::Calls);
                let found = declarations::declared(
                    compiler,
                    &scratch,
                    &include,
                    &unit,
                    &file,
                    module.name_expressions(),
                )
                .map_err(|failure| Failure::of_compile(module, compiler, failure))?;
                declared.insert(found)
            }
        };
        let unit = wrapper::translation_unit(&file, &plan.code, declared, plan.threads);
        let source = scratch.join(UNIT_FILE);
        std::fs::write(&source, unit).map_err(|e| other("write", &source, e))?;
        let output = scratch.join("kernel.so");
        let pch = match precompiled::place(cache, compiler, plan.threads, &include) {
            precompiled::Placed::Clang(pch) => Some(pch),
            precompiled::Placed::Beside | precompiled::Placed::Text => None,
        };
        let compiled = compiler.compile(&source, &include, &output, plan.threads, pch.as_ref());
        let compiled = match (compiled, &pch) {
            (Err(CompileFailure::Refused(message)), Some(pch))
                if Compiler::refused_pch(&message) =>
            {
                tracing::warn!(module = name, pch = %pch.file.display(), %message, "clang refused the precompiled prelude; compiling the prelude as text");
                precompiled::forget(pch);
                compiler.compile(&source, &include, &output, plan.threads, None)
            }
            (compiled, _) => compiled,
        };
        compiled.map_err(|failure| Failure::of_compile(module, compiler, failure))?;
        let library = std::fs::read(&output).map_err(|e| other("read", &output, e))?;
        cache
            .store(&plan.key, &library, &scratch)
            .map_err(|e| other("store the library in", cache.path(), e))
    })();
    // Best effort: a leftover scratch directory only takes space.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// `gm_sim_kernel` (the prelude's layout).
#[repr(C)]
struct RawKernel {
    name: *const c_char,
    params: Option<unsafe extern "C" fn(*mut c_int) -> *const RawParam>,
    run: Option<unsafe extern "C" fn(*const *mut c_void) -> c_int>,
    run_threads: Option<unsafe extern "C" fn(*mut GmSimThreads)>,
    start_round: Option<unsafe extern "C" fn(*mut GmSimRound)>,
    resume_round: Option<unsafe extern "C" fn(*mut GmSimRound)>,
}

/// The module's variables in a library loaded with `gm_sim_abi` at address `abi`: its data
/// objects but the prelude's and the C++ runtime's, at the library's load address (the
/// symbol table's values are offsets from it).
fn variables(bytes: &[u8], abi: usize) -> Vec<Variable> {
    let Some(symbols) = compiled::symbols(bytes) else {
        return Vec::new();
    };
    let Some(base) = symbols
        .iter()
        .find(|s| s.kind == compiled::STT_FUNC && s.name == "gm_sim_abi")
        .and_then(|s| abi.checked_sub(usize::try_from(s.value).ok()?))
    else {
        return Vec::new();
    };
    symbols
        .into_iter()
        .filter(|s| s.kind == compiled::STT_OBJECT && s.size > 0 && !s.name.contains("gm_sim"))
        .filter_map(|s| {
            Some(Variable {
                name: compiled::source_name(&s.name),
                address: base.checked_add(usize::try_from(s.value).ok()?)?,
                size: usize::try_from(s.size).ok()?,
            })
        })
        .filter(|v| is_source_name(&v.name))
        .collect()
}

/// Whether a data object's name is one a kernel source can have written: not the C++
/// runtime's (`{vtable(...)}`, `__dso_handle`, `completed.0`, `_DYNAMIC`), nor the
/// compiler's (`.LC0`).
fn is_source_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['{', '.'])
        && !name.starts_with("__")
        && !name.contains(['.', '{', ' '])
        && !matches!(name, "_DYNAMIC" | "_GLOBAL_OFFSET_TABLE_")
}

/// Loads a module's library built for `threads` (checked, `cache::Cache::library`) from its
/// descriptor, and reads its kernels and variables.
fn load(
    verified: cache::Verified,
    threads: Threads,
    code: &str,
) -> std::result::Result<LoadedModule, String> {
    let bytes = verified.elf;
    let tls = elf::shared_bytes(&bytes).ok_or("not a 64-bit ELF shared library")?;
    // What was checked is what is loaded: the open file itself, by its descriptor. The
    // descriptor stays open for the life of the process (as the library stays loaded): the
    // dynamic loader knows a library by the name it was opened by, and a descriptor number used
    // again would make it hand back the library first opened under that name.
    #[cfg(target_os = "linux")]
    let path = {
        use std::os::fd::AsRawFd;
        let path = PathBuf::from(format!("/proc/self/fd/{}", verified.file.as_raw_fd()));
        std::mem::forget(verified.file);
        path
    };
    #[cfg(not(target_os = "linux"))]
    let path: PathBuf =
        return Err("the simulator's kernel cache loads libraries on Linux only".into());
    // SAFETY: the library was built by `compile_into` from the prelude and one module and
    // checked since (owner, permissions, hash); loading it runs only the C++ runtime's and the
    // module's static initialisers.
    let library = Arc::new(unsafe { libloading::Library::new(&path) }.map_err(|e| e.to_string())?);
    type Abi = unsafe extern "C" fn() -> u32;
    type Init = unsafe extern "C" fn(*const GmSimRuntime);
    type Kernels = unsafe extern "C" fn(*mut c_int) -> *const RawKernel;
    // SAFETY: the symbols are the wrapper's `extern "C"` functions with exactly these types.
    let (abi, init, kernels) = unsafe {
        (
            *library
                .get::<Abi>(b"gm_sim_abi\0")
                .map_err(|e| e.to_string())?,
            *library
                .get::<Init>(b"gm_sim_init\0")
                .map_err(|e| e.to_string())?,
            *library
                .get::<Kernels>(b"gm_sim_kernels\0")
                .map_err(|e| e.to_string())?,
        )
    };
    let begin_block = match threads {
        Threads::Calls | Threads::Regions | Threads::Checked(_) | Threads::ShadowedRegions => None,
        // SAFETY: as above.
        Threads::Stackless => Some(unsafe {
            *library
                .get::<unsafe extern "C" fn()>(b"gm_sim_begin_block\0")
                .map_err(|e| e.to_string())?
        }),
    };
    // SAFETY: calling the wrapper's functions as declared; `RUNTIME` is a static in the
    // prelude's layout.
    unsafe {
        let found = abi();
        if found != ABI {
            return Err(format!("built for simulator ABI {found}, this is {ABI}"));
        }
        init(&RUNTIME);
    }
    let waits = wrapper::may_wait(code);
    let layout = match threads.instrumented() {
        Some(instrumented) => Some(Arc::new(checked_layout(
            &library,
            &bytes,
            &path,
            abi as usize,
            instrumented == Instrumented::Shadowed,
        )?)),
        None => None,
    };
    let static_shared = usize::try_from(tls).unwrap_or(usize::MAX);
    let text = |p: *const c_char| {
        // SAFETY: the wrapper's tables hold string literals (or null).
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let mut count: c_int = 0;
    // SAFETY: the table is a static array of `count` entries (and a terminator).
    let table = unsafe { kernels(&mut count) };
    let mut loaded = LoadedModule {
        kernels: Vec::new(),
        variables: Vec::new(),
    };
    for i in 0..usize::try_from(count).unwrap_or(0) {
        // SAFETY: `i` < `count`, within the table.
        let raw = unsafe { &*table.add(i) };
        let name = text(raw.name).ok_or("a kernel without a name")?;
        let params = raw.params.ok_or("a kernel without a parameter table")?;
        let entry = match (
            threads,
            (raw.run, raw.run_threads),
            raw.start_round,
            raw.resume_round,
            begin_block,
        ) {
            (Threads::Calls | Threads::Checked(_), (Some(run), Some(run_threads)), _, _, _) => {
                Entry::Calls(CallsEntry { run, run_threads })
            }
            (Threads::Regions | Threads::ShadowedRegions, (None, Some(run_blocks)), _, _, _) => {
                Entry::Regions(run_blocks)
            }
            (Threads::Stackless, _, Some(start_round), Some(resume_round), Some(begin_block)) => {
                Entry::Stackless(StacklessEntry {
                    start_round,
                    resume_round,
                    begin_block,
                })
            }
            _ => return Err(format!("the kernel `{name}` has no thread functions")),
        };
        let mut n: c_int = 0;
        // SAFETY: the wrapper's function returns a static array of `n` descriptions, whose
        // type names are NUL-terminated strings.
        let params: Vec<Param> = unsafe {
            let described = params(&mut n);
            let n = usize::try_from(n).unwrap_or(0);
            if described.is_null() && n > 0 {
                return Err("no parameter table".to_string());
            }
            (0..n)
                .map(|k| Param::from_raw(&*described.add(k)))
                .collect()
        };
        let program = SourceProgram {
            _library: Arc::clone(&library),
            entry,
            pointers: params
                .iter()
                .map(|p| p.kind == ParamKind::Pointer)
                .collect(),
            params,
            static_shared,
            waits,
            layout: layout.clone(),
        };
        loaded.kernels.push((name, Arc::new(program)));
    }
    loaded.variables = variables(&bytes, abi as usize);
    Ok(loaded)
}

/// Where a checked program keeps its own memory (`crate::sanitizer`), from its file and where
/// its `gm_sim_abi` was loaded (`abi`).
fn checked_layout(
    library: &libloading::Library,
    bytes: &[u8],
    path: &Path,
    abi: usize,
    shadowed: bool,
) -> std::result::Result<ProgramLayout, String> {
    let symbols = compiled::symbols(bytes).ok_or("a checked library without a symbol table")?;
    let base = symbols
        .iter()
        .find(|s| s.kind == compiled::STT_FUNC && s.name == "gm_sim_abi")
        .and_then(|s| abi.checked_sub(usize::try_from(s.value).ok()?))
        .ok_or("no gm_sim_abi in the symbol table")?;
    let loads = elf::loaded_segments(bytes).ok_or("not a 64-bit ELF library")?;
    let thread_locals = elf::thread_locals(bytes);
    let anchor_offset = thread_locals
        .iter()
        .find(|(name, _, _)| name.ends_with("gm_sim_tls_anchor"))
        .map(|&(_, offset, _)| offset)
        .ok_or("no gm_sim_tls_anchor in the symbol table")?;
    type Anchor = unsafe extern "C" fn() -> *mut u8;
    // SAFETY: the wrapper's `extern "C"` function of a checked unit, with exactly this type.
    let anchor = unsafe {
        *library
            .get::<Anchor>(b"gm_sim_tls_anchor_address\0")
            .map_err(|e| e.to_string())?
    };
    let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let segments: Vec<(usize, usize)> = loads
        .into_iter()
        .map(|(vaddr, size)| {
            let start = base.saturating_add(to_usize(vaddr));
            (start, start.saturating_add(to_usize(size)))
        })
        .collect();
    let faults = if shadowed {
        type Landing = unsafe extern "C" fn(*mut std::ffi::c_void);
        // SAFETY: the checked prelude's `extern "C"` function of a shadowed unit, with exactly
        // this type; only its address is taken.
        let landing = unsafe {
            *library
                .get::<Landing>(b"gm_sim_outside_address_space\0")
                .map_err(|e| e.to_string())?
        };
        let start = segments.iter().map(|s| s.0).min().unwrap_or(0);
        let end = segments.iter().map(|s| s.1).max().unwrap_or(0);
        Some(ShadowedProgram::new(start, end, landing as usize))
    } else {
        None
    };
    Ok(ProgramLayout {
        shadowed,
        _faults: faults,
        segments,
        thread_locals: thread_locals
            .into_iter()
            .filter(|(_, _, size)| *size > 0)
            .map(|(name, offset, size)| ThreadLocal {
                offset: to_usize(offset),
                size: to_usize(size),
                // (With the guards of a `static __shared__` with a constructor, `_ZGV...`,
                // which every thread checks.)
                prelude: elf::is_prelude_tls(name.as_bytes()) || name.starts_with("_ZGV"),
                name,
            })
            .collect(),
        tls_anchor: (anchor, to_usize(anchor_offset)),
        path: path.to_path_buf(),
        base,
        prelude_files: headers::all()
            .map(|(name, _)| name.rsplit('/').next().unwrap_or(name))
            .chain([UNIT_FILE])
            .collect(),
    })
}

#[cfg(all(test, not(miri)))]
#[allow(clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn threads_of(code: &str) -> Threads {
        threads_of_kernel(code, "k")
    }

    fn threads_of_kernel(code: &str, entry: &str) -> Threads {
        let kernel = Kernel::from_source(code, entry);
        let program = program(
            &kernel,
            kernel.source().expect("a source kernel"),
            Build::Fastest,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        match program.entry {
            Entry::Calls(_) => Threads::Calls,
            Entry::Stackless(_) => Threads::Stackless,
            Entry::Regions(_) => Threads::Regions,
        }
    }

    /// A kernel template instantiated explicitly with CUDA's word (`template __global__ ...`)
    /// runs as regions, where kernels are inline functions (`explicit_instantiations`).
    #[test]
    fn an_explicitly_instantiated_kernel_template_runs_as_regions() {
        let code = "#include \"gpu_mem.h\"\n\
                    template <typename T> __global__ void k(T* a) {\n\
                    \x20   T v = a[threadIdx.x];\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = v + a[(threadIdx.x + 1) % blockDim.x];\n}\n\
                    template __global__ void k<int>(int*);\n";
        assert_eq!(threads_of_kernel(code, "k<int>"), Threads::Regions);
    }

    /// A module one of whose kernels keeps it off regions (a wait the rewrite does not know,
    /// a helper that waits) runs its other kernels as regions still, from a build of their
    /// own; not where the module has variables, which each build would hold apart.
    #[test]
    fn kernels_that_can_run_as_regions_do_beside_one_that_cannot() {
        let code = "#include \"gpu_mem.h\"\n\
                    __device__ int twice(int v) { __syncthreads(); return 2 * v; }\n\
                    extern \"C\" __global__ void fast(int* a) {\n\
                    \x20   int v = a[threadIdx.x];\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = v + __shfl_xor_sync(~0u, v, 1);\n}\n\
                    extern \"C\" __global__ void slow(int* a) {\n\
                    \x20   a[threadIdx.x] = twice(a[threadIdx.x]) + (int)__activemask();\n}\n";
        assert_eq!(threads_of_kernel(code, "fast"), Threads::Regions);
        assert_ne!(threads_of_kernel(code, "slow"), Threads::Regions);
        let with_variable = code.replace(
            "__device__ int twice",
            "__device__ int counter;\n__device__ int twice",
        );
        assert_ne!(threads_of_kernel(&with_variable, "fast"), Threads::Regions);
    }

    /// memcheck alone runs a kernel with barriers as regions, checked through the shadow, in
    /// index order only, and not where a thread's own address could reach another thread;
    /// racecheck keeps every thread on a stack of its own.
    #[test]
    fn memcheck_runs_blocks_as_regions_where_nothing_of_a_threads_own_leaks() {
        if crate::sanitizer::memory_shadow().is_none() {
            eprintln!("skipped: this host has no shadow");
            return;
        }
        let built = |code: &str, build: Build| {
            let kernel = Kernel::from_source(code, "k");
            let program = program(&kernel, kernel.source().expect("a source kernel"), build)
                .unwrap_or_else(|e| panic!("{e}"));
            (
                matches!(program.entry, Entry::Regions(_)),
                program.layout.as_ref().map(|l| l.shadowed),
            )
        };
        let memcheck = |index_order| Build::Checked {
            every_access: false,
            index_order,
        };
        let code = "#include \"gpu_mem.h\"\n\
                    extern \"C\" __global__ void k(float* a) {\n\
                    \x20   __shared__ float tile[64];\n\
                    \x20   float v = a[threadIdx.x];\n\
                    \x20   tile[threadIdx.x] = v;\n\
                    \x20   __syncthreads();\n\
                    \x20   a[threadIdx.x] = v + tile[63 - threadIdx.x];\n}\n";
        assert_eq!(built(code, memcheck(true)), (true, Some(true)));
        assert_eq!(built(code, memcheck(false)), (false, Some(true)));
        let racecheck = Build::Checked {
            every_access: true,
            index_order: true,
        };
        assert_eq!(built(code, racecheck), (false, Some(false)));
        let leaks = code.replace(
            "float v = a[threadIdx.x];",
            "float v[1] = {a[threadIdx.x]};",
        );
        let leaks = leaks
            .replace("= v;", "= v[0];")
            .replace("= v +", "= v[0] +");
        assert_eq!(built(&leaks, memcheck(true)), (false, Some(true)));
    }

    #[test]
    fn kernel_objects_made_over_and_over_do_not_grow_the_id_map_for_ever() {
        let code = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void made_often() {}\n";
        let first = Kernel::from_source(code, "made_often");
        let program_of_first =
            program(&first, first.source().expect("source"), Build::Fastest).expect("built");
        for _ in 0..MAX_KERNEL_ENTRIES + 10 {
            let kernel = Kernel::from_source(code, "made_often");
            let again =
                program(&kernel, kernel.source().expect("source"), Build::Fastest).expect("found");
            // Found by content: the one program.
            assert!(Arc::ptr_eq(&again, &program_of_first));
        }
        let entries = lock(&PROGRAMS).as_ref().map_or(0, |p| p.by_kernel.len());
        assert!(entries <= MAX_KERNEL_ENTRIES, "{entries} kernel ids kept");
    }

    #[test]
    fn block_groups_run_stackless_and_other_groups_on_stacks() {
        let block = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
                     __global__ void k(int* a) {\n\
                     \x20   cg::thread_block cta = cg::this_thread_block();\n\
                     \x20   a[cta.thread_rank()] += 1; cg::sync(cta); cta.sync();\n}\n";
        // Block groups' syncs are block barriers: blocks run as regions between them, each
        // barrier on a line of its own (two on one line are one to the scheduler).
        assert_eq!(threads_of(block), Threads::Stackless);
        assert_eq!(
            threads_of(&block.replace("cta.sync();", "\n cta.sync();")),
            Threads::Regions
        );
        // A warp tile's sync, shuffles, votes and reductions are intrinsics over its lanes; its
        // matches are not lowered, nor are tiles wider than a warp of 32.
        let tile = block.replace(
            "cta.sync();",
            "cg::thread_block_tile<32> t = cg::tiled_partition<32>(cta); t.sync();",
        );
        assert_eq!(threads_of(&tile), Threads::Regions);
        let vote = tile.replace("t.sync();", "a[0] = t.any(a[1]);");
        assert_eq!(threads_of(&vote), Threads::Regions);
        let reduced = tile.replace("t.sync();", "a[0] = cg::reduce(t, a[1], cg::plus<int>());");
        assert_eq!(threads_of(&reduced), Threads::Regions);
        let matched = tile.replace("t.sync();", "a[0] = t.match_any(a[1]);");
        assert_eq!(threads_of(&matched), Threads::Calls);
        let wide = tile.replace("<32>", "<64>");
        assert_eq!(threads_of(&wide), Threads::Calls);
        // A helper that waits only at an atomic stays a plain function when it makes a bounded
        // number of them (its calls are the progress points); one with a loop would be a
        // coroutine per call: fibers instead.
        let atomic_helper = block.replace(
            "__global__ void k(int* a) {",
            "__device__ void add(int* a) { atomicAdd(a, 1); }\n__global__ void k(int* a) { add(a);",
        );
        assert_eq!(threads_of(&atomic_helper), Threads::Stackless);
        let looping_helper = atomic_helper.replace(
            "{ atomicAdd(a, 1); }",
            "{ for (int i = 0; i < 2; ++i) atomicAdd(a, 1); }",
        );
        assert_eq!(threads_of(&looping_helper), Threads::Calls);
    }

    /// NVIDIA's histogram256 form: helpers making a bounded number of atomics, called in
    /// counted loops of a kernel with barriers, run as regions (a thread waits for nobody at
    /// them); called in a loop that is not counted, stackless (the helpers plain functions).
    #[test]
    fn bounded_atomic_helpers_run_as_regions() {
        let code = "#include \"gpu_mem.h\"\n\
                    __device__ void add_byte(unsigned* h, unsigned b) { atomicAdd(h + b, 1u); }\n\
                    __device__ void add_word(unsigned* h, unsigned w) { add_byte(h, w & 7u); add_byte(h, w >> 8 & 7u); }\n\
                    extern \"C\" __global__ void k(unsigned* h, unsigned* d) {\n\
                    \x20   for (int i = 0; i < 4; ++i) add_word(h, d[i]);\n\
                    \x20   __syncthreads();\n}\n";
        assert_eq!(threads_of(code), Threads::Regions);
        let unbounded = code.replace("i < 4", "i < (int)d[0]");
        assert_eq!(threads_of(&unbounded), Threads::Stackless);
    }

    #[test]
    fn a_kernels_own_macros_for_waits_run_stackless_unless_they_name_a_helper() {
        let code = "#include \"gpu_mem.h\"\n\
                    #define __shfl_xor(v, d) __shfl_xor_sync(0xffffffff, v, d)\n\
                    #define SUM(v) (v + __shfl_xor(v, 1))\n\
                    __device__ int twice(int v) { return SUM(SUM(v)); }\n\
                    extern \"C\" __global__ void k(int* a) { a[threadIdx.x] = twice(a[threadIdx.x]); }\n";
        assert_eq!(threads_of(code), Threads::Stackless);
        // A macro naming a helper that waits hides a call the rewrite must await.
        let hiding = code
            .replace("extern \"C\"", "#define TWICE(v) twice(v)\nextern \"C\"")
            .replace("= twice(", "= TWICE(");
        assert_eq!(threads_of(&hiding), Threads::Calls);
        // So does one that pastes tokens.
        let pasting = code.replace("__shfl_xor_sync(", "__shfl_##xor_sync(");
        assert_eq!(threads_of(&pasting), Threads::Calls);
    }

    #[test]
    fn kernels_calling_barriers_collectives_and_atomics_themselves_run_stackless() {
        let body = "extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                    \x20   if (threadIdx.x >= a.shape[0]) return;\n\
                    \x20   __syncthreads(); a(threadIdx.x) += 1; barrier(GM_FENCE_GLOBAL);\n}\n";
        // (Barriers as statements of the body, each on a line of its own: its blocks run as
        // regions between them.)
        assert_eq!(
            threads_of(&format!("#include \"gpu_mem.h\"\n{body}")),
            Threads::Stackless
        );
        assert_eq!(
            threads_of(&format!(
                "#include \"gpu_mem.h\"\n{}",
                body.replace("barrier(", "\n barrier(")
            )),
            Threads::Regions
        );
        assert_eq!(
            threads_of(&format!(
                "#include \"gpu_mem.h\"\n{}",
                body.replace("return;", "{ return; } int v = 1; if (v) __syncthreads();")
            )),
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
        // Collectives called in the kernel suspend it too, where the regions cannot split at
        // them (in a loop's condition; an `if`'s is a statement like another).
        let shuffle = "#include \"gpu_mem.h\"\n\
                       extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                       \x20   syncthreads(); a(0) = __shfl_sync(~0ull, 1, 0);\n}\n";
        assert_eq!(threads_of(shuffle), Threads::Regions);
        let asked = shuffle.replace(
            "a(0) = __shfl_sync(~0ull, 1, 0);",
            "if (__any_sync(~0ull, 1)) a(0) = 1;",
        );
        assert_eq!(threads_of(&asked), Threads::Regions);
        let looped = shuffle.replace(
            "a(0) = __shfl_sync(~0ull, 1, 0);",
            "while (__any_sync(~0ull, a(0) < 3)) a(0) += 1;",
        );
        assert_eq!(threads_of(&looped), Threads::Stackless);
        // A warp reduction is one collective like a shuffle.
        let reduced = shuffle.replace(
            "a(0) = __shfl_sync(~0ull, 1, 0);",
            "a(0) = __reduce_add_sync(~0u, 1);",
        );
        assert_eq!(threads_of(&reduced), Threads::Regions);
        let reduced_off = format!("{reduced}// decltype: not as regions\n");
        assert_eq!(threads_of(&reduced_off), Threads::Stackless);
        // Atomics let the others run, called in the kernel or in a helper (as regions, a
        // thread that makes them once waits for nobody at them).
        let atomic = "#include \"gpu_mem.h\"\n\
                      extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                      \x20   syncthreads(); atomicAdd(&a(0), 1);\n}\n";
        assert_eq!(threads_of(atomic), Threads::Regions);
        let off_regions = format!("{atomic}// decltype: not as regions\n");
        assert_eq!(threads_of(&off_regions), Threads::Stackless);
        let in_helper = "#include \"gpu_mem.h\"\n\
                         __device__ void add(int* p) { atomicAdd(p, 1); }\n\
                         extern \"C\" __global__ void k(gm_array<int, 1> a) {\n\
                         \x20   syncthreads(); add(&a(0));\n}\n";
        // (A helper called once makes its atomic once: regions.)
        assert_eq!(threads_of(in_helper), Threads::Regions);
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
