//! Finding and opening the native libraries of gpu-mem's GPU backends (the CUDA driver, NVRTC,
//! the HSA runtime, HIP/hiprtc, comgr), shared by `gpu-mem-cuda` and `gpu-mem-roc`.
//!
//! # Contract
//!
//! * **Once per process, never unloaded.** A library is opened at most once per process for a
//!   given (library, path) and the handle is leaked: every later open returns the same
//!   `&'static` [`Library`], and nothing ever calls `dlclose`. Unloading a GPU driver after its
//!   initialisation (`cuInit`, `hsa_init`) is undefined territory, and LLVM-based libraries
//!   (hiprtc, comgr) abort when loaded a second time; function pointers taken from a
//!   [`Library`] therefore stay valid for the rest of the process.
//! * **Search.** An override variable (`GPU_MEM_CUDA_LIBRARY`, `GPU_MEM_HSA_LIBRARY`, ...), when
//!   set to a non-blank value, is the only path tried: a user who names a file wants that file,
//!   not a silent fallback. Otherwise the candidates (sonames resolved by the dynamic loader's
//!   usual search, or paths) are tried in order, and the first that opens *and* passes the
//!   caller's check (`accept`, e.g. "exports `hsa_init`") wins.
//! * **Errors.** Failure is [`Error::LibraryLoad`] naming the library, every candidate tried and
//!   why each failed: the dynamic loader's message with its source chain ([`error_chain`]:
//!   libloading's own text is only "dlopen failed"), or why `accept` rejected a library that
//!   opened. A candidate that is simply not there says little, so when some candidate exists but
//!   failed (a dependency missing, a wrong architecture, rejected by `accept`) only those reasons
//!   are given. Nothing here panics.
//! * **Rejected libraries stay loaded.** A candidate that opens but is rejected has run its
//!   initialisers already; it is not closed either (a HIP library without hiprtc loads comgr's
//!   LLVM, which aborts when loaded a second time).
//! * **Symbols.** A backend's functions are resolved into a table of nullable function pointers
//!   defined with [`symbol_table!`] (module `table`): a symbol the library lacks disables only
//!   what needs it.

mod table;

/// The `libloading` version whose `Library` [`symbol_table!`] tables resolve from.
#[doc(hidden)]
pub use libloading;
pub use table::lookup;

use gpu_mem_core::error::error_chain;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::ffi::OsString;
use std::path::Path;
use std::sync::Mutex;

/// Where to look for one library.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySpec {
    /// Logical name used in errors ("the CUDA driver").
    pub library: &'static str,
    /// Environment variable that overrides the search with one path (`""`: none).
    pub override_var: &'static str,
    /// Sonames or paths tried in order when the variable is unset.
    pub candidates: &'static [&'static str],
}

/// A library opened for the rest of the process.
#[derive(Debug)]
pub struct Library {
    library: libloading::Library,
    path: String,
    name: &'static str,
}

/// Every library opened so far: (logical name, path it was opened by) → the leaked handle.
static OPENED: Mutex<Vec<(&'static str, String, &'static Library)>> = Mutex::new(Vec::new());

/// A check run on a freshly opened library; `Err` says why it is not the wanted one.
pub type Accept<'a> = &'a dyn Fn(&libloading::Library) -> std::result::Result<(), String>;

/// Accepts any library that opens.
pub fn accept_any(_: &libloading::Library) -> std::result::Result<(), String> {
    Ok(())
}

/// Opens the library following `spec`, honouring its override variable.
pub fn open(spec: &LibrarySpec, accept: Accept<'_>) -> Result<&'static Library> {
    open_among(spec.library, spec.override_var, spec.candidates, accept)
}

/// As [`open`], for candidates known only at run time: `library` is the logical name,
/// `override_var` the variable that replaces the search (`""`: none).
pub fn open_among(
    library: &'static str,
    override_var: &'static str,
    candidates: &[&str],
    accept: Accept<'_>,
) -> Result<&'static Library> {
    let forced = if override_var.is_empty() {
        None
    } else {
        std::env::var_os(override_var)
    };
    search(library, override_var, candidates, forced, accept)
}

/// Opens exactly `path` (what the override variable does), ignoring the variable.
pub fn open_path(spec: &LibrarySpec, path: &Path, accept: Accept<'_>) -> Result<&'static Library> {
    search(
        spec.library,
        spec.override_var,
        &[],
        Some(path.as_os_str().to_owned()),
        accept,
    )
}

/// `candidates` with those this process has loaded already (as another library's dependency,
/// e.g. the comgr a loaded hiprtc uses) moved to the front, keeping their order otherwise: a
/// second copy of such a library in one process is at best a different version of what the
/// loaded one does (LLVM-based ones abort). Probing loads nothing (`RTLD_NOLOAD`); on systems
/// where that is not known here, the order is kept.
pub fn loaded_first<'a>(candidates: &[&'a str]) -> Vec<&'a str> {
    let (mut loaded, others): (Vec<&str>, Vec<&str>) =
        candidates.iter().partition(|c| is_loaded(c));
    loaded.extend(others);
    loaded
}

/// Whether the library `name` (a soname or path) is in the process already.
#[cfg(target_os = "linux")]
fn is_loaded(name: &str) -> bool {
    /// glibc's and musl's `RTLD_NOLOAD`: open only a library that is loaded already.
    const RTLD_NOLOAD: std::ffi::c_int = 0x4;
    // SAFETY: with RTLD_NOLOAD nothing is loaded, so no initialiser runs; the handle only adds a
    // reference to a library loaded already, kept (not closed), as every handle here.
    let probe = unsafe {
        libloading::os::unix::Library::open(
            Some(name),
            RTLD_NOLOAD | libloading::os::unix::RTLD_LAZY,
        )
    };
    match probe {
        Ok(library) => {
            std::mem::forget(library);
            true
        }
        Err(_) => false,
    }
}

#[cfg(not(target_os = "linux"))]
fn is_loaded(_: &str) -> bool {
    false
}

/// How many distinct libraries this process has opened through this crate.
pub fn opened_count() -> usize {
    lock(&OPENED).len()
}

/// Opens `forced` when it is set and not blank, else the first acceptable of `candidates`.
fn search(
    logical: &'static str,
    override_var: &'static str,
    candidates: &[&str],
    forced: Option<OsString>,
    accept: Accept<'_>,
) -> Result<&'static Library> {
    // An empty (or blank) override means unset: `dlopen("")` would open the program itself.
    let forced = forced.filter(|path| !path.to_string_lossy().trim().is_empty());
    let candidates: Vec<(OsString, String)> = match forced {
        Some(path) => {
            let shown = if override_var.is_empty() {
                path.to_string_lossy().into_owned()
            } else {
                format!("{} (from {override_var})", path.to_string_lossy())
            };
            vec![(path, shown)]
        }
        None => candidates
            .iter()
            .map(|c| (OsString::from(c), (*c).to_string()))
            .collect(),
    };
    // The table is locked only to look up and to add, not while a library opens or `accept`
    // runs: either may open other libraries through this crate (a check that loads a
    // dependency), which would otherwise wait for ever on the lock their caller holds. Two
    // threads opening one library at once both get the dynamic loader's one handle; the first
    // to add it wins, and the other's reference is kept (never closed), unused. The critical
    // sections only push complete entries, so a poisoned lock is still consistent.
    let known = |key: &str| {
        lock(&OPENED)
            .iter()
            .find(|(name, p, _)| *name == logical && *p == key)
            .map(|(_, _, library)| *library)
    };
    let mut tried = Vec::with_capacity(candidates.len());
    let mut failures = Vec::with_capacity(candidates.len());
    for (path, shown) in candidates {
        let key = path.to_string_lossy().into_owned();
        if let Some(library) = known(&key) {
            return Ok(library);
        }
        // SAFETY: opening a library runs its initialisers. The candidates are the GPU vendors'
        // runtime libraries (or a file the user named through the override variable), whose
        // initialisers are designed to run in any process that loads them.
        match unsafe { libloading::Library::new(&path) } {
            Ok(library) => match accept(&library) {
                Ok(()) => {
                    let mut opened = lock(&OPENED);
                    if let Some((_, _, first)) = opened
                        .iter()
                        .find(|(name, p, _)| *name == logical && *p == key)
                    {
                        // Another thread added it meanwhile: its entry is the one.
                        std::mem::forget(library);
                        return Ok(first);
                    }
                    tracing::debug!(library = logical, path = %shown, "loaded (kept for the process)");
                    let leaked: &'static Library = Box::leak(Box::new(Library {
                        library,
                        path: key.clone(),
                        name: logical,
                    }));
                    opened.push((logical, key, leaked));
                    return Ok(leaked);
                }
                Err(reason) => {
                    tracing::debug!(library = logical, path = %shown, %reason, "rejected");
                    failures.push(Failure {
                        absent: false,
                        reason: format!("{shown}: {reason}"),
                    });
                    tried.push(shown);
                    // Not closed: see the module's contract.
                    std::mem::forget(library);
                }
            },
            Err(err) => {
                tracing::debug!(library = logical, path = %shown, %err, "cannot load");
                let reason = error_chain(&err);
                failures.push(Failure {
                    absent: is_absent(&key, &reason),
                    reason,
                });
                tried.push(shown);
            }
        }
    }
    Err(Error::LibraryLoad {
        library: logical,
        tried,
        reason: summarize(&failures),
        present: failures.iter().any(|f| !f.absent),
    })
}

/// Why one candidate failed.
struct Failure {
    /// The file itself was not found (rather than found and unusable).
    absent: bool,
    reason: String,
}

/// Whether the dynamic loader's `reason` says that `candidate` itself does not exist (and not,
/// say, a library it depends on: glibc words both alike, naming the missing file first).
fn is_absent(candidate: &str, reason: &str) -> bool {
    let name = candidate.rsplit('/').next().unwrap_or(candidate);
    [candidate, name].iter().any(|shown| {
        reason.contains(&format!("{shown}: cannot open shared object file"))
            || reason.contains(&format!("dlopen({shown}"))
    }) && (reason.contains("No such file") || reason.contains("not found"))
}

/// The reasons worth reading: those of candidates that exist but failed, else the last one.
fn summarize(failures: &[Failure]) -> String {
    let telling: Vec<&str> = failures
        .iter()
        .filter(|f| !f.absent)
        .map(|f| f.reason.as_str())
        .collect();
    if telling.is_empty() {
        failures
            .last()
            .map_or_else(|| "no candidate paths".to_string(), |f| f.reason.clone())
    } else {
        telling.join("; ")
    }
}

impl Library {
    /// The path or soname the library was opened by.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The logical library name (for errors).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The underlying handle (what [`symbol_table!`] tables resolve from).
    pub fn raw(&self) -> &libloading::Library {
        &self.library
    }

    /// Looks up the first of `names` that the library exports, as a nullable function pointer
    /// (`None` when the library exports none of them). The pointer stays valid for the rest of
    /// the process: the library is never unloaded.
    ///
    /// # Safety
    /// `F` must be an `Option<unsafe extern "C" fn(..)>` type whose signature matches the
    /// symbol's real C signature.
    pub unsafe fn function<F: Copy + Default>(&self, names: &[&str]) -> F {
        // SAFETY: the caller guarantees `F` matches the symbols' signatures; the library is
        // never unloaded, so the pointer stays valid.
        unsafe { lookup(&self.library, names) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MISSING: LibrarySpec = LibrarySpec {
        library: "a library that does not exist",
        override_var: "GPU_MEM_TEST_LIBRARY",
        candidates: &["libgpu-mem-definitely-missing.so.9"],
    };

    /// An empty override means "unset": `dlopen("")` would open the program itself.
    #[test]
    fn an_empty_override_is_unset() {
        for empty in ["", "  "] {
            match search(
                MISSING.library,
                MISSING.override_var,
                MISSING.candidates,
                Some(OsString::from(empty)),
                &accept_any,
            ) {
                Err(Error::LibraryLoad { tried, .. }) => {
                    assert_eq!(
                        tried,
                        vec!["libgpu-mem-definitely-missing.so.9".to_string()]
                    );
                }
                other => panic!("an empty override was used as a path: {other:?}"),
            }
        }
    }

    #[test]
    fn load_errors_carry_the_loaders_reason() {
        match open(&MISSING, &accept_any) {
            Err(Error::LibraryLoad {
                reason,
                tried,
                present,
                ..
            }) => {
                assert!(!present, "nothing was found");
                assert_eq!(tried.len(), 1);
                assert!(
                    reason.contains("libgpu-mem-definitely-missing.so.9")
                        && reason.len() > "dlopen failed".len(),
                    "{reason}"
                );
            }
            other => panic!("expected a load error, got {other:?}"),
        }
    }

    const LIBC: LibrarySpec = LibrarySpec {
        library: "the C library",
        override_var: "",
        candidates: &["libc.so.6"],
    };

    #[test]
    fn a_library_is_opened_once_and_shared() {
        let first = open(&LIBC, &accept_any).expect("libc opens");
        let count = opened_count();
        let second = open(&LIBC, &accept_any).expect("libc opens again");
        assert!(std::ptr::eq(first, second), "two handles for one library");
        assert_eq!(opened_count(), count, "the second open added an entry");
        // SAFETY: getpid's signature is `pid_t getpid(void)`.
        let getpid: Option<unsafe extern "C" fn() -> i32> = unsafe { first.function(&["getpid"]) };
        assert!(getpid.is_some());
    }

    /// A candidate that exists but fails is what the error reports, not the absent ones after it.
    #[test]
    fn a_present_candidate_that_fails_is_the_reason_given() {
        let dir = std::env::temp_dir().join(format!("gpu-mem-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let broken = dir.join("libbroken.so.1");
        std::fs::write(&broken, b"not an ELF file").expect("write");
        let broken_path: &'static str = Box::leak(broken.display().to_string().into_boxed_str());
        let candidates: &'static [&'static str] = Box::leak(Box::new([
            broken_path,
            "libgpu-mem-definitely-missing.so.9",
        ]));
        let spec = LibrarySpec {
            library: "a broken library",
            override_var: "",
            candidates,
        };
        let result = open(&spec, &accept_any);
        let _ = std::fs::remove_dir_all(&dir);
        match result {
            Err(Error::LibraryLoad {
                reason,
                tried,
                present,
                ..
            }) => {
                assert!(present, "a file that exists but fails counts as present");
                assert_eq!(tried.len(), 2);
                assert!(reason.contains("libbroken.so.1"), "{reason}");
                assert!(
                    !reason.contains("definitely-missing"),
                    "the absent candidate hid nothing but is reported: {reason}"
                );
            }
            other => panic!("expected a load error, got {other:?}"),
        }
    }

    /// A check that opens a library through this crate itself (a dependency) does not wait for
    /// ever on the table its caller would hold.
    #[test]
    fn a_check_may_open_libraries_itself() {
        const OUTER: LibrarySpec = LibrarySpec {
            library: "libc, checked by opening libm",
            override_var: "",
            candidates: &["libc.so.6"],
        };
        const INNER: LibrarySpec = LibrarySpec {
            library: "libm, opened by a check",
            override_var: "",
            candidates: &["libm.so.6"],
        };
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let opened = open(&OUTER, &|_| {
                open(&INNER, &accept_any)
                    .map(drop)
                    .map_err(|e| e.to_string())
            });
            let _ = done.send(opened.is_ok());
        });
        let result = finished.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(result, Ok(true), "the nested open hung or failed");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn loaded_libraries_come_first() {
        let order = loaded_first(&[
            "libgpu-mem-definitely-missing.so.9",
            "libc.so.6",
            "libgpu-mem-also-missing.so.1",
        ]);
        assert_eq!(
            order,
            [
                "libc.so.6",
                "libgpu-mem-definitely-missing.so.9",
                "libgpu-mem-also-missing.so.1"
            ]
        );
    }

    #[test]
    fn absent_files_are_told_from_missing_dependencies() {
        assert!(is_absent(
            "libhiprtc.so.6",
            "dlopen failed: libhiprtc.so.6: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_absent(
            "libhiprtc.so.6",
            "dlopen failed: libamd_comgr.so.2: cannot open shared object file: No such file or directory"
        ));
        assert!(is_absent(
            "/opt/rocm/lib/libhiprtc.so",
            "/opt/rocm/lib/libhiprtc.so: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_absent("/tmp/x.so", "/tmp/x.so: invalid ELF header"));
    }

    #[test]
    fn a_rejected_library_names_the_reason_and_is_not_kept() {
        const REJECTED: LibrarySpec = LibrarySpec {
            library: "libc as something else",
            override_var: "",
            candidates: &["libc.so.6"],
        };
        match open(&REJECTED, &|_| Err("no such symbol".to_string())) {
            Err(Error::LibraryLoad { reason, .. }) => {
                assert_eq!(reason, "libc.so.6: no such symbol");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert!(
            !lock(&OPENED)
                .iter()
                .any(|(name, _, _)| *name == REJECTED.library)
        );
    }
}
