//! Finding and running the host C++ compiler (`GPU_MEM_SIM_CXX`, default `c++`, then `g++`,
//! then `clang++` on `PATH`), and the linker it links kernels' libraries with.

use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable naming the compiler.
pub(crate) const VARIABLE: &str = "GPU_MEM_SIM_CXX";
/// Tried in order when the variable is unset.
const DEFAULTS: [&str; 3] = ["c++", "g++", "clang++"];

/// Not `-mtls-dialect=gnu2`: TLS descriptors would spare `__shared__` arrays (thread-locals of a
/// library loaded at run time) a `__tls_get_addr` call per access after a barrier, but glibc
/// before 2.40 clobbers vector registers the first time a thread reaches such a variable through
/// one (seen here: a tiled transpose came out wrong on Debian 12's glibc 2.36; the test
/// `tests/simulator/shared_arrays.rs` fails with the flag).
///
/// Flags of every compile (after the language standard, see [`standard`]): optimised,
/// position-independent, the prelude's host branch, stack probes, shift counts checked; only
/// the program's entry points are exported, so kernels loaded side by side never share symbols
/// (or `__shared__` variables).
pub(crate) const FLAGS: [&str; 9] = [
    "-O2",
    "-fPIC",
    "-fno-strict-aliasing",
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
    "-DGM_SIM=1",
    // Large frames touch their pages in order, so a stack overflow hits the guard page.
    "-fstack-clash-protection",
    // Shifts by the width or more are reported (gm_sim/output.h: a GPU and x86 answer them
    // differently), through handlers of the library's own: the link (`LINK_FLAGS`, a step of
    // its own) names no sanitizer runtime, which GCC would add to a one-step build.
    "-fsanitize=shift-exponent",
    "-w",
];

/// Flags of the link: a shared library with every symbol defined at link time (a `__device__`
/// function declared and never defined is an error here, not a process that ends when a thread
/// first calls it: the library is loaded lazily, and the dynamic linker exits on a symbol it
/// cannot bind).
pub(crate) const LINK_FLAGS: [&str; 2] = ["-shared", UNDEFINED_SYMBOLS_ARE_ERRORS];

/// The linkers a compiler is asked for before its default, fastest first (see
/// [`fastest_linker`]).
const FASTER_LINKERS: [&str; 2] = ["-fuse-ld=lld", "-fuse-ld=gold"];

/// How a program's threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Each thread a call of the entry (on a stack of its own when it may wait): `gm_sim_run`.
    Calls,
    /// Each thread a coroutine of the rewritten entry (`super::stackless`): `gm_sim_start_round`,
    /// `gm_sim_resume_round` and `gm_sim_begin_block`.
    Stackless,
    /// Whole blocks, each stretch between barriers a loop over the block's threads (the
    /// rewritten source of `super::regions`): `gm_sim_run_blocks`.
    Regions,
    /// As [`Threads::Calls`], every access of the kernel checked (`crate::sanitizer`): built
    /// with [`instrumentation`] and `GM_SIM_CHECKED`.
    Checked(Instrumented),
    /// As [`Threads::Regions`], every access tested against the shadow
    /// ([`Instrumented::Shadowed`]): memcheck alone, for kernels with barriers, which run as
    /// loops between them instead of on a stack per thread.
    ShadowedRegions,
}

impl Threads {
    /// Whether whole blocks run as regions (`gm_sim_run_blocks`).
    pub(crate) fn is_regions(self) -> bool {
        matches!(self, Threads::Regions | Threads::ShadowedRegions)
    }

    /// How a checked program's accesses are instrumented; `None` for unchecked programs.
    pub(crate) fn instrumented(self) -> Option<Instrumented> {
        match self {
            Threads::Checked(instrumented) => Some(instrumented),
            Threads::ShadowedRegions => Some(Instrumented::Shadowed),
            Threads::Calls | Threads::Stackless | Threads::Regions => None,
        }
    }
}

/// How a checked program's accesses reach the simulator (`gm_sim/checked.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Instrumented {
    /// Each access calls a hook (ThreadSanitizer's instrumentation): what racecheck and
    /// initcheck watch, access by access.
    EveryAccess,
    /// Each access tests its shadow byte inline and calls a hook only where it is not zero
    /// (AddressSanitizer's kernel-mode instrumentation over `sanitizer::shadow_memory`):
    /// memcheck alone, with GCC, where the shadow could be reserved.
    Shadowed,
}

/// The language of a program: C++17, the dialect kernels are written in, with coroutines for
/// stackless threads: GCC's in C++17 (the same language otherwise: C++20 would change results,
/// e.g. its implicit moves on `return`); clang has them only in C++20, so its stackless programs
/// are C++20, without `char8_t`; a kernel whose meaning C++20 could change otherwise (rewritten
/// comparison operators, `std::pair` compared through `<=>`, ...) is not built that way
/// (`stackless::why_not_as_cxx20`), and most other changes are refusals (aggregates with
/// declared constructors), after which a kernel runs on stacks.
pub(crate) fn standard(threads: Threads, clang: bool) -> &'static [&'static str] {
    match (threads, clang) {
        (Threads::Calls | Threads::Regions | Threads::Checked(_) | Threads::ShadowedRegions, _) => {
            &["-std=c++17"]
        }
        (Threads::Stackless, false) => &["-std=c++17", "-fcoroutines"],
        // (`u8` literals stay `char`, as in C++17, not C++20's `char8_t`.)
        (Threads::Stackless, true) => &["-std=c++20", "-fno-char8_t"],
    }
}

/// The optimisation a unit of `threads` asks for beyond [`FLAGS`]' `-O2`: blocks run as regions
/// are loops over threads, which `-O3`'s loop passes make 10-15% faster (the tiled matmul at
/// n=256 10.1-10.3 -> 8.3-9.1 ms, the block sum at 2^22 35-40 -> 32-34 ms, alternate runs), for
/// about a tenth more compile time (the conformance suite's kernels cold: 39.2 -> 43.7 s); then
/// the vector instructions of the machine that runs the program ([`host_vectors`]).
pub(crate) fn optimisation(threads: Threads) -> Vec<&'static str> {
    let level: &[&str] = match threads {
        Threads::Regions | Threads::ShadowedRegions => &["-O3"],
        Threads::Calls | Threads::Stackless | Threads::Checked(_) => &[],
    };
    [level, host_vectors()].concat()
}

/// Vector instructions every x86-64 processor since 2013-2015 has (AVX2 with FMA, BMI and F16C:
/// the x86-64-v3 level), where the processor this process runs on has them: a kernel's library is
/// built and loaded on the same machine, and the flags are part of its cache key, so a cache
/// shared with a machine without them keeps that machine's libraries apart. Loops over a
/// block's threads vectorise 8 lanes wide instead of 4 (the corpus bench: a vector add 2.1x ->
/// 1.4x its plain loop, a tiled transpose 0.9x -> 0.5x). Floating-point contraction stays off,
/// as without them: `a * b + c` is not fused into one FMA, so a kernel computes the same bits
/// on every machine (a fused multiply-add rounds once and may differ in the last bit).
pub(crate) fn host_vectors() -> &'static [&'static str] {
    static VECTORS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    VECTORS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let level_3 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2")
                && std::arch::is_x86_feature_detected!("f16c");
            if level_3 {
                return &[
                    "-mavx2",
                    "-mfma",
                    "-mbmi",
                    "-mbmi2",
                    "-mf16c",
                    "-ffp-contract=off",
                ];
            }
        }
        &[]
    })
}

/// The macros a unit of `threads` defines before it includes the prelude (`wrapper::kernel_part`),
/// defined the same way for the prelude precompiled for it, as GCC requires.
pub(crate) fn prelude_defines(threads: Threads) -> &'static [&'static str] {
    match threads {
        Threads::Calls => &[],
        Threads::Stackless => &["-DGM_SIM_STACKLESS=1"],
        Threads::Regions => &["-DGM_SIM_REGIONS=1"],
        Threads::Checked(Instrumented::EveryAccess) => &["-DGM_SIM_CHECKED=1"],
        Threads::Checked(Instrumented::Shadowed) => &[
            "-DGM_SIM_CHECKED=1",
            "-DGM_SIM_SHADOWED=1",
            SHADOW_OFFSET_DEFINE,
        ],
        Threads::ShadowedRegions => &[
            "-DGM_SIM_REGIONS=1",
            "-DGM_SIM_CHECKED=1",
            "-DGM_SIM_SHADOWED=1",
            SHADOW_OFFSET_DEFINE,
        ],
    }
}

/// Where a shadowed program finds its shadow, as C spells it: `sanitizer::shadow_memory::OFFSET`
/// (a test holds them together).
macro_rules! shadow_offset {
    () => {
        "0x7fff8000"
    };
}
pub(crate) use shadow_offset;
const SHADOW_OFFSET_DEFINE: &str = concat!("-DGM_SIM_SHADOW_OFFSET=", shadow_offset!());
const SHADOW_OFFSET_FLAG: &str = concat!("-fasan-shadow-offset=", shadow_offset!());

/// UBSan's checks in every checked build (see [`instrumentation`]): GCC's spelling, and
/// clang's, whose `bounds` would add a check that traps instead of calling a handler.
const UBSAN_CHECKS: &str = "-fsanitize=alignment,object-size,bounds";
const CLANG_UBSAN_CHECKS: &str = "-fsanitize=alignment,object-size,array-bounds";
/// No calls in tail position in checked builds: a refused access's line is its hook's return
/// address (see [`instrumentation`]).
const NO_TAIL_CALLS: &str = "-fno-optimize-sibling-calls";

/// The instrumentation of a unit of `threads`: for checked programs, a call before every load,
/// store and atomic of the kernel (ThreadSanitizer's, whose functions the prelude's
/// `gm_sim/checked.h` supplies: no sanitizer runtime is linked, see [`LINK_FLAGS`]), without
/// calls at function entry and exit, or, shadowed, an inline test of each access's shadow byte
/// that calls a hook only where it is not zero (AddressSanitizer's kernel mode, which needs no
/// runtime either: no redzones on the stack or around globals, every access tested inline, the
/// hook returning where the access is allowed); a test of every typed pointer's alignment, and
/// of every access the compiler can trace to its object against the object's end (UBSan's
/// `alignment` and `object-size`, whose one handler `gm_sim/checked.h` supplies too: a local
/// array the kernel keeps to itself is otherwise not instrumented at all), and of every index
/// of a C array of known length against its bounds (UBSan's `bounds`: below the start, where the
/// object-size check does not look); and line tables to
/// name the line of a refused access, from the return address of the hook that refused it (so no
/// hook is called as a tail call, which would return to the kernel's caller: an atomic as a
/// kernel's last statement named the prelude's line). (Only GCC builds shadowed programs: `Build`.)
pub(crate) fn instrumentation(threads: Threads, clang: bool) -> &'static [&'static str] {
    match (threads, clang) {
        (Threads::Calls | Threads::Stackless | Threads::Regions, _) => &[],
        (Threads::Checked(Instrumented::Shadowed) | Threads::ShadowedRegions, _) => &[
            "-fsanitize=kernel-address",
            "-fsanitize-recover=kernel-address",
            SHADOW_OFFSET_FLAG,
            "--param",
            "asan-instrumentation-with-call-threshold=1000000",
            "--param",
            "asan-stack=0",
            "--param",
            "asan-globals=0",
            "--param",
            "asan-use-after-return=0",
            UBSAN_CHECKS,
            "-g1",
            NO_TAIL_CALLS,
        ],
        (Threads::Checked(Instrumented::EveryAccess), false) => &[
            "-fsanitize=thread",
            UBSAN_CHECKS,
            "--param",
            "tsan-instrument-func-entry-exit=0",
            "-g1",
            NO_TAIL_CALLS,
        ],
        (Threads::Checked(Instrumented::EveryAccess), true) => &[
            "-fsanitize=thread",
            CLANG_UBSAN_CHECKS,
            "-mllvm",
            "-tsan-instrument-func-entry-exit=0",
            "-gline-tables-only",
            NO_TAIL_CALLS,
        ],
    }
}

/// Every symbol of a program defined at link time (see [`LINK_FLAGS`]). For stackless programs this
/// matters more: GCC leaves an await in an unevaluated operand (`sizeof(helper(x))`) calling
/// functions it never instantiates, which would otherwise fail only when a thread got there (a
/// refusal instead: built the ordinary way). Apple's linker spells it `-undefined error`.
const UNDEFINED_SYMBOLS_ARE_ERRORS: &str = if cfg!(target_vendor = "apple") {
    "-Wl,-undefined,error"
} else {
    "-Wl,-z,defs"
};

/// The prelude precompiled (`super::precompiled`): the header, and the folder of headers it was
/// built from. clang's names them by their full paths and checks them when used, so its folder
/// is kept in the cache; GCC's was a scratch folder, gone since (GCC finds its header beside
/// the prelude instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrecompiledPrelude {
    pub(crate) file: PathBuf,
    pub(crate) include: PathBuf,
}

/// Why a compile failed.
#[derive(Debug)]
pub(crate) enum CompileFailure {
    /// The compiler ran and refused the unit: its message.
    Refused(String),
    /// It did not run to the end (not found, killed by a signal): what happened.
    DidNotRun(String),
}

/// A usable compiler: where it is and what it says it is.
#[derive(Debug, Clone)]
pub(crate) struct Compiler {
    pub(crate) path: PathBuf,
    /// The first line of `--version`, part of the cache key and of messages.
    pub(crate) version: String,
    /// How long one compile may take (`GPU_MEM_SIM_CXX_TIMEOUT`).
    limit: Duration,
    /// The `-fuse-ld=` flag of the linker it links with, `None` for its default (see
    /// [`fastest_linker`]); part of the cache key.
    pub(crate) linker: Option<&'static str>,
}

impl Compiler {
    /// The compiler named by `GPU_MEM_SIM_CXX`, or the first default found on `PATH`.
    pub(crate) fn from_env() -> Result<Compiler> {
        let limit = compile_time_limit()?;
        let named = match std::env::var(VARIABLE) {
            Ok(v) => Some(v).filter(|v| !v.trim().is_empty()),
            Err(std::env::VarError::NotPresent) => None,
            // Not silently replaced by the default: the user named a compiler.
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(Error::CompilerUnavailable {
                    variable: VARIABLE,
                    tried: vec![v.to_string_lossy().into_owned()],
                    reason: format!("{VARIABLE} is not valid UTF-8"),
                });
            }
        };
        let candidates: Vec<String> = match &named {
            Some(name) => vec![name.trim().to_string()],
            None => DEFAULTS.iter().map(|s| s.to_string()).collect(),
        };
        let mut tried = Vec::new();
        for candidate in &candidates {
            match resolve(candidate) {
                Some(path) => return identify(path, &candidates, limit),
                None => tried.push(candidate.clone()),
            }
        }
        Err(Error::CompilerUnavailable {
            variable: VARIABLE,
            tried,
            reason: match named {
                Some(name) if name.trim().contains(char::is_whitespace) => format!(
                    "{VARIABLE}={name} is not an executable program: it names one program, without arguments (for a wrapper such as ccache, or extra flags, point it to a script that runs the compiler)"
                ),
                Some(name) => format!("{VARIABLE}={name} is not an executable program"),
                None => "none of the default C++ compilers is on PATH; install one (e.g. Debian's g++) to run portable-source kernels on the simulator".to_string(),
            },
        })
    }

    /// Compiles `source_file` into the shared library `output`, with the headers of `include`
    /// (or, with `pch`, clang's precompiled prelude and the headers it was built from); the
    /// compiler's message on failure.
    pub(crate) fn compile(
        &self,
        source_file: &Path,
        include: &Path,
        output: &Path,
        threads: Threads,
        pch: Option<&PrecompiledPrelude>,
    ) -> std::result::Result<(), CompileFailure> {
        // Run in the build's folder, naming its files relatively: the library records header
        // paths (in shift checks' locations), and the folder is a fresh one each build, so the
        // same source builds the same library.
        let folder = include.parent().unwrap_or(Path::new("."));
        let within = |path: &Path| path.strip_prefix(folder).unwrap_or(path).to_path_buf();
        let object = output.with_extension("o");
        let mut command = Command::new(&self.path);
        command
            .current_dir(folder)
            .args(standard(threads, self.is_clang()))
            .args(FLAGS)
            .args(optimisation(threads))
            .args(instrumentation(threads, self.is_clang()));
        match pch {
            // The headers the header was built from, where it recorded them: a header of the
            // prelude included again (`#pragma once` goes by file) is then the same file.
            Some(pch) => command
                .arg("-include-pch")
                .arg(&pch.file)
                .arg("-fpch-validate-input-files-content")
                .arg("-I")
                .arg(&pch.include),
            None => command.arg("-I").arg(within(include)),
        };
        command
            .arg("-c")
            .arg("-o")
            .arg(within(&object))
            .arg(within(source_file));
        self.run(&mut command)?;
        let mut command = Command::new(&self.path);
        command
            .current_dir(folder)
            .args(LINK_FLAGS)
            .args(self.linker)
            .arg("-o")
            .arg(within(output))
            .arg(within(&object));
        let linked = self.run(&mut command).map(drop);
        // Best effort: the build's folder is removed after the build.
        let _ = std::fs::remove_file(&object);
        linked
    }

    /// Precompiles the prelude (`include`'s `gpu_mem.h`) into `output` for units of `threads`,
    /// with the flags of every compile (GCC's `.gch`, clang's `.pch`; see
    /// `super::precompiled`). Run in `include`'s parent, naming files relatively as
    /// [`Compiler::compile`] does.
    pub(crate) fn precompile(
        &self,
        include: &Path,
        output: &Path,
        threads: Threads,
    ) -> std::result::Result<(), CompileFailure> {
        let folder = include.parent().unwrap_or(Path::new("."));
        let within = |path: &Path| path.strip_prefix(folder).unwrap_or(path).to_path_buf();
        let mut command = Command::new(&self.path);
        command
            .current_dir(folder)
            .args(standard(threads, self.is_clang()))
            .args(FLAGS)
            .args(optimisation(threads))
            .args(instrumentation(threads, self.is_clang()))
            .args(prelude_defines(threads))
            .arg("-I")
            .arg(within(include))
            .args(["-x", "c++-header"])
            .arg(within(&include.join("gpu_mem.h")))
            .arg("-o")
            .arg(within(output));
        self.run(&mut command).map(drop)
    }

    /// Whether it takes a precompiled header from beside the header it includes, as GCC does
    /// (checking that it fits, and reading the header as text otherwise). Anything but clang is
    /// taken for GCC (`c++` names it without saying so); clang is given its header with
    /// `-include-pch` ([`PrecompiledPrelude`], in [`Compiler::compile`]).
    pub(crate) fn takes_gch(&self) -> bool {
        !self.is_clang()
    }

    /// Whether a failed compile's `message` is clang refusing its precompiled header (one
    /// changed or removed behind the cache's back) rather than the unit: the unit is then
    /// compiled again without it.
    pub(crate) fn refused_pch(message: &str) -> bool {
        ["AST file", "precompiled header", "PCH file"]
            .iter()
            .any(|words| message.contains(words))
    }

    /// The text of `source_file` after preprocessing with the headers of `include`, the prelude
    /// in scan mode (`GM_SIM_SCAN`: CUDA's declaration words stay, for
    /// [`super::declarations`]).
    pub(crate) fn preprocess(
        &self,
        source_file: &Path,
        include: &Path,
    ) -> std::result::Result<String, CompileFailure> {
        let mut command = Command::new(&self.path);
        command
            .args(standard(Threads::Calls, self.is_clang()))
            .args(["-E", "-DGM_SIM=1", "-DGM_SIM_SCAN=1", "-I"])
            .arg(include)
            .arg(source_file);
        self.run(&mut command)
            .map(|stdout| String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Runs the compiler within the time limit; its standard output, or why it failed.
    fn run(&self, command: &mut Command) -> std::result::Result<Vec<u8>, CompileFailure> {
        let limit = self.limit;
        let run = run_within(command, limit).map_err(|e| {
            CompileFailure::DidNotRun(match e {
                Ran::NotStarted(e) => format!("cannot run {}: {e}", self.path.display()),
                Ran::TooLong => format!(
                    "{} did not finish within {} s, and was stopped ({TIME_LIMIT_VARIABLE} sets the limit)",
                    self.path.display(),
                    limit.as_secs()
                ),
            })
        })?;
        if run.status.success() {
            return Ok(run.stdout);
        }
        let mut log = String::from_utf8_lossy(&run.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&run.stdout));
        let log = log.trim_end().to_string();
        match run.status.code() {
            Some(_) if !stopped_by_the_machine(&log) => Err(CompileFailure::Refused(log)),
            Some(_) => Err(CompileFailure::DidNotRun(format!(
                "{} did not finish: {log}",
                self.path.display()
            ))),
            None => Err(CompileFailure::DidNotRun(format!(
                "{} ended by a signal ({}){}{log}",
                self.path.display(),
                run.status,
                if log.is_empty() { "" } else { ": " }
            ))),
        }
    }

    /// Whether it is clang, whose coroutines need C++20 (see [`standard`]).
    pub(crate) fn is_clang(&self) -> bool {
        self.version.contains("clang")
    }

    /// How messages name the compiler.
    pub(crate) fn describe(&self) -> String {
        format!("{} ({})", self.path.display(), self.version)
    }
}

/// Whether a compiler that exited with a status was stopped by the machine rather than refusing
/// the unit: its driver reports a compiler pass killed (SIGKILL: the out-of-memory killer) with
/// status 1, and so it does a full disk or exhausted memory. (A pass that crashes is a refusal:
/// clang 14 crashes on some coroutines, and those kernels are built the ordinary way.) Such a failure is not
/// remembered as a refusal (the next process tries the same form again).
fn stopped_by_the_machine(log: &str) -> bool {
    const SIGNS: [&str; 7] = [
        "Killed signal terminated program",
        "unable to execute command: Killed",
        "No space left on device",
        "virtual memory exhausted",
        "out of memory",
        "Cannot allocate memory",
        "Disk quota exceeded",
    ];
    SIGNS.iter().any(|sign| log.contains(sign))
}

/// `name` as an executable file: a path as given, or the first match on `PATH`.
fn resolve(name: &str) -> Option<PathBuf> {
    let is_program = |p: &Path| {
        p.is_file() && {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                p.metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
            }
            #[cfg(not(unix))]
            true
        }
    };
    if name.contains(std::path::MAIN_SEPARATOR) {
        let path = PathBuf::from(name);
        return is_program(&path).then_some(path);
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| is_program(p))
}

/// The variable that sets how long one compile may take, in seconds.
pub(crate) const TIME_LIMIT_VARIABLE: &str = "GPU_MEM_SIM_CXX_TIMEOUT";

/// How long one compile may take: `GPU_MEM_SIM_CXX_TIMEOUT` seconds (a whole number from 1), 600
/// by default (a kernel compiles in well under a second; a compiler that hangs must not hang
/// every launch with it). Anything else is an error naming the variable, never a silent 600.
fn compile_time_limit() -> Result<Duration> {
    let Some(value) = std::env::var_os(TIME_LIMIT_VARIABLE) else {
        return Ok(Duration::from_secs(600));
    };
    value
        .to_str()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| (1..=86_400).contains(&s))
        .map(Duration::from_secs)
        .ok_or_else(|| Error::InvalidArgument {
            name: TIME_LIMIT_VARIABLE,
            reason: format!(
                "{TIME_LIMIT_VARIABLE}={} is not a number of seconds from 1 to 86400",
                value.to_string_lossy()
            ),
        })
}

/// Why [`run_within`] has no output.
enum Ran {
    NotStarted(std::io::Error),
    TooLong,
}

/// A file for a child's output, private to this process: made with `O_EXCL` under a name no
/// one can have planted (a link there makes the creation fail, never followed), and unlinked
/// at once.
fn private_output_file() -> std::io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    loop {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "gpu-mem-cxx-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(file) => {
                let _ = std::fs::remove_file(&path);
                return Ok(file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Runs `command` to its end, as `Command::output` does, but stops it once it has run for
/// `limit`, whatever it does: its output goes to private files rather than pipes (so a helper
/// it leaves holding them blocks nothing), it runs in a process group of its own that is killed
/// when it ends or is stopped (its passes and helpers with it), and on Linux it is killed if
/// the thread that started it ends first (the host program killed).
fn run_within(command: &mut Command, limit: Duration) -> std::result::Result<Output, Ran> {
    use std::io::{Read, Seek};
    let stdout = private_output_file().map_err(Ran::NotStarted)?;
    let stderr = private_output_file().map_err(Ran::NotStarted)?;
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(command, 0);
    #[cfg(target_os = "linux")]
    // SAFETY: the closure runs in the child between fork and exec and calls only `prctl`,
    // which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout.try_clone().map_err(Ran::NotStarted)?))
        .stderr(Stdio::from(stderr.try_clone().map_err(Ran::NotStarted)?))
        .spawn()
        .map_err(Ran::NotStarted)?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            // Too long, or it cannot be waited for.
            _ => break None,
        }
    };
    // Whatever it left running in its group goes too.
    #[cfg(unix)]
    if let Ok(group) = libc::pid_t::try_from(child.id()) {
        // SAFETY: signals the process group the child leads (made above); the child is not
        // reaped yet (or just was, by `try_wait`, and its group id names only what it left).
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let read = |mut file: std::fs::File| {
        let mut bytes = Vec::new();
        if file.rewind().is_ok() {
            let _ = file.read_to_end(&mut bytes);
        }
        bytes
    };
    match status {
        Some(status) => Ok(Output {
            status,
            stdout: read(stdout),
            stderr: read(stderr),
        }),
        None => Err(Ran::TooLong),
    }
}

/// What a compiler is asked once: the first line of its `--version`, and its linker flag.
type Identity = (String, Option<&'static str>);

/// Each compiler's identity, asked for once per process.
static IDENTIFIED: Mutex<Option<HashMap<PathBuf, Identity>>> = Mutex::new(None);

fn identify(path: PathBuf, candidates: &[String], limit: Duration) -> Result<Compiler> {
    let mut identified = lock(&IDENTIFIED);
    let known = identified.get_or_insert_with(HashMap::new);
    if let Some((version, linker)) = known.get(&path) {
        return Ok(Compiler {
            version: version.clone(),
            linker: *linker,
            path,
            limit,
        });
    }
    let output = run_within(
        Command::new(&path).arg("--version"),
        Duration::from_secs(60),
    )
    .map_err(|e| Error::CompilerUnavailable {
        variable: VARIABLE,
        tried: candidates.to_vec(),
        reason: match e {
            Ran::NotStarted(e) => format!("{} does not run: {e}", path.display()),
            Ran::TooLong => format!("{} --version did not finish within 60 s", path.display()),
        },
    })?;
    let version = String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or("unknown version")
        .trim()
        .to_string();
    let linker = fastest_linker(&path);
    known.insert(path.clone(), (version.clone(), linker));
    Ok(Compiler {
        path,
        version,
        limit,
        linker,
    })
}

/// The fastest linker `compiler` can drive, as its `-fuse-ld=` flag; `None` for its default.
///
/// A kernel's library is one object linked against the C++ runtime, once per kernel a process
/// builds: GNU ld, the drivers' default on Linux, takes 0.10-0.14 s for it, gold 0.03-0.05 s
/// (lld less still) on two-core machines. The libraries are alike whichever links them (every
/// symbol resolved at link time). Each candidate is asked by linking nothing: the driver exits 0
/// for `-fuse-ld=<name> -Wl,--version` only where it finds that linker. Apple's toolchains have
/// one linker: nothing is asked there.
fn fastest_linker(compiler: &Path) -> Option<&'static str> {
    if cfg!(target_vendor = "apple") {
        return None;
    }
    FASTER_LINKERS.into_iter().find(|flag| {
        run_within(
            Command::new(compiler).arg(flag).arg("-Wl,--version"),
            Duration::from_secs(60),
        )
        .is_ok_and(|output| output.status.success())
    })
}

#[cfg(test)]
mod tests {
    use super::{FASTER_LINKERS, fastest_linker, stopped_by_the_machine};
    use std::path::Path;

    #[test]
    fn shadowed_programs_are_built_for_the_shadow_reserved() {
        let spelled = super::shadow_offset!();
        assert_eq!(
            usize::from_str_radix(spelled.trim_start_matches("0x"), 16),
            Ok(crate::sanitizer::SHADOW_OFFSET)
        );
    }

    /// A stand-in compiler driver that finds only the linkers `finds` names.
    #[cfg(unix)]
    fn driver_finding(name: &str, finds: &[&str]) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!(
            "gpu-mem-linker-probe-{}-{name}",
            std::process::id()
        ));
        let cases: String = finds
            .iter()
            .map(|f| format!("  {f}) exit 0 ;;\n"))
            .collect();
        std::fs::write(
            &path,
            format!("#!/bin/sh\ncase \"$1\" in\n{cases}esac\nexit 1\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    #[cfg(unix)]
    #[cfg_attr(miri, ignore = "runs programs")]
    fn the_fastest_linker_the_driver_finds_is_chosen() {
        let both = driver_finding("both", &FASTER_LINKERS);
        let gold = driver_finding("gold", &["-fuse-ld=gold"]);
        let none = driver_finding("none", &[]);
        let chosen = [&both, &gold, &none].map(|d| fastest_linker(d));
        for driver in [both, gold, none] {
            let _ = std::fs::remove_file(driver);
        }
        if cfg!(target_vendor = "apple") {
            assert_eq!(chosen, [None, None, None]);
        } else {
            assert_eq!(chosen, [Some("-fuse-ld=lld"), Some("-fuse-ld=gold"), None]);
        }
        assert_eq!(fastest_linker(Path::new("/nonexistent/c++")), None);
    }

    #[test]
    fn a_compiler_stopped_by_the_machine_is_not_a_refusal() {
        // What GCC's driver prints when the out-of-memory killer ends cc1plus (status 1).
        assert!(stopped_by_the_machine(
            "g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated."
        ));
        assert!(stopped_by_the_machine(
            "/usr/bin/ld: final link failed: No space left on device"
        ));
        assert!(stopped_by_the_machine(
            "cc1plus: out of memory allocating 65536 bytes after a total of 0 bytes"
        ));
        // What clang's driver prints for its killed frontend.
        assert!(stopped_by_the_machine(
            "clang++: error: unable to execute command: Killed\nclang++: error: clang frontend command failed due to signal (use -v to see invocation)"
        ));
        // A crash of the compiler is a refusal (remembered: it crashes again next time).
        assert!(!stopped_by_the_machine(
            "While splitting coroutine\nclang++: error: clang frontend command failed due to signal (use -v to see invocation)"
        ));
        // A compile error is a refusal.
        assert!(!stopped_by_the_machine(
            "k.cu:4:12: error: 'undefined_name' was not declared in this scope"
        ));
    }
}
