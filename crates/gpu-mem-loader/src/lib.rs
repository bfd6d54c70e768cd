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
//!   the last reason: the dynamic loader's message with its source chain
//!   ([`error_chain`]: libloading's own text is only "dlopen failed"), or why `accept` rejected
//!   a library that opened. Nothing here panics.

use gpu_mem_core::error::error_chain;
use gpu_mem_core::{Error, Result};
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

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
    let forced = if spec.override_var.is_empty() {
        None
    } else {
        std::env::var_os(spec.override_var)
    };
    open_with_override(spec, forced, accept)
}

/// Opens exactly `path` (what the override variable does), ignoring the variable.
pub fn open_path(spec: &LibrarySpec, path: &Path, accept: Accept<'_>) -> Result<&'static Library> {
    open_with_override(spec, Some(path.as_os_str().to_owned()), accept)
}

/// How many distinct libraries this process has opened through this crate.
pub fn opened_count() -> usize {
    OPENED.lock().unwrap_or_else(PoisonError::into_inner).len()
}

fn open_with_override(
    spec: &LibrarySpec,
    forced: Option<OsString>,
    accept: Accept<'_>,
) -> Result<&'static Library> {
    // An empty (or blank) override means unset: `dlopen("")` would open the program itself.
    let forced = forced.filter(|path| !path.to_string_lossy().trim().is_empty());
    let candidates: Vec<(OsString, String)> = match forced {
        Some(path) => {
            let shown = if spec.override_var.is_empty() {
                path.to_string_lossy().into_owned()
            } else {
                format!("{} (from {})", path.to_string_lossy(), spec.override_var)
            };
            vec![(path, shown)]
        }
        None => spec
            .candidates
            .iter()
            .map(|c| (OsString::from(c), (*c).to_string()))
            .collect(),
    };
    // Held across the search so two threads opening the same library share one handle. The
    // critical sections only push complete entries, so a poisoned lock is still consistent.
    let mut opened = OPENED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut tried = Vec::with_capacity(candidates.len());
    let mut last_reason = String::from("no candidate paths");
    for (path, shown) in candidates {
        let key = path.to_string_lossy().into_owned();
        if let Some((_, _, library)) = opened
            .iter()
            .find(|(name, p, _)| *name == spec.library && *p == key)
        {
            return Ok(library);
        }
        // SAFETY: opening a library runs its initialisers. The candidates are the GPU vendors'
        // runtime libraries (or a file the user named through the override variable), whose
        // initialisers are designed to run in any process that loads them.
        match unsafe { libloading::Library::new(&path) } {
            Ok(library) => match accept(&library) {
                Ok(()) => {
                    tracing::debug!(library = spec.library, path = %shown, "loaded (kept for the process)");
                    let leaked: &'static Library = Box::leak(Box::new(Library {
                        library,
                        path: key.clone(),
                        name: spec.library,
                    }));
                    opened.push((spec.library, key, leaked));
                    return Ok(leaked);
                }
                Err(reason) => {
                    tracing::debug!(library = spec.library, path = %shown, %reason, "rejected");
                    last_reason = format!("{shown}: {reason}");
                    tried.push(shown);
                    // A rejected library is closed again: nothing of it was initialised by us.
                    drop(library);
                }
            },
            Err(err) => {
                tracing::debug!(library = spec.library, path = %shown, %err, "cannot load");
                last_reason = error_chain(&err);
                tried.push(shown);
            }
        }
    }
    Err(Error::LibraryLoad {
        library: spec.library,
        tried,
        reason: last_reason,
    })
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

    /// The underlying handle (for symbol tables resolved by the backends' own macros).
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
        const { assert!(size_of::<F>() == size_of::<*mut std::ffi::c_void>()) };
        for name in names {
            // SAFETY: the caller guarantees `F` is the pointer type of this symbol; the pointer
            // is copied out and stays valid because the library is never unloaded.
            if let Ok(symbol) = unsafe { self.library.get::<F>(*name) } {
                return *symbol;
            }
        }
        F::default()
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
            match open_with_override(&MISSING, Some(OsString::from(empty)), &accept_any) {
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
            Err(Error::LibraryLoad { reason, tried, .. }) => {
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
            !OPENED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|(name, _, _)| *name == REJECTED.library)
        );
    }
}
