//! Finding and opening a shared library, with errors that list every path tried.
//!
//! # Contract
//!
//! * An override variable (`GPU_MEM_CUDA_LIBRARY`, `GPU_MEM_NVRTC_LIBRARY`), when set, is the only
//!   path tried: a user who names a file wants that file, not a silent fallback. Set to an empty
//!   (or blank) value it counts as unset.
//! * Otherwise the candidates (sonames, resolved by the dynamic loader's usual search) are tried
//!   in order and the first that opens wins.
//! * Failure is [`Error::LibraryLoad`] naming the library, every candidate and the loader's last
//!   message. Nothing here panics.

use gpu_mem_core::error::error_chain;
use gpu_mem_core::{Error, Result};
use std::ffi::OsString;
use std::path::Path;

/// Where to look for one library.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySpec {
    /// Logical name used in errors ("libcuda (CUDA driver)").
    pub library: &'static str,
    /// Environment variable that overrides the search with one path.
    pub override_var: &'static str,
    /// Sonames or paths tried in order when the variable is unset.
    pub candidates: &'static [&'static str],
}

/// An opened library and the path or soname it was opened by.
#[derive(Debug)]
pub struct LoadedLibrary {
    library: libloading::Library,
    path: String,
    name: &'static str,
}

impl LoadedLibrary {
    /// Opens the library following `spec`, honouring its override variable.
    pub fn open(spec: &LibrarySpec) -> Result<LoadedLibrary> {
        Self::open_with_override(spec, std::env::var_os(spec.override_var))
    }

    /// Opens exactly `path` (what the override variable does).
    pub fn open_path(spec: &LibrarySpec, path: &Path) -> Result<LoadedLibrary> {
        Self::open_with_override(spec, Some(path.as_os_str().to_owned()))
    }

    fn open_with_override(spec: &LibrarySpec, forced: Option<OsString>) -> Result<LoadedLibrary> {
        // An empty (or blank) override means unset: `dlopen("")` would open the program itself.
        let forced = forced.filter(|path| !path.to_string_lossy().trim().is_empty());
        let candidates: Vec<(OsString, String)> = match forced {
            Some(path) => {
                let shown = format!("{} (from {})", path.to_string_lossy(), spec.override_var);
                vec![(path, shown)]
            }
            None => spec
                .candidates
                .iter()
                .map(|c| (OsString::from(c), (*c).to_string()))
                .collect(),
        };
        let mut tried = Vec::with_capacity(candidates.len());
        let mut last_reason = String::from("no candidate paths");
        for (path, shown) in candidates {
            // SAFETY: opening a library runs its initialisers. The candidates are the CUDA
            // driver or NVRTC (or a file the user named through the override variable), whose
            // initialisers are designed to run in any process that loads them.
            match unsafe { libloading::Library::new(&path) } {
                Ok(library) => {
                    tracing::debug!(library = spec.library, path = %shown, "loaded");
                    return Ok(LoadedLibrary {
                        library,
                        path: path.to_string_lossy().into_owned(),
                        name: spec.library,
                    });
                }
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

    /// The path or soname the library was opened by.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The logical library name (for errors).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Looks up the first of `names` that the library exports, as a nullable function pointer
    /// (`None` when the library exports none of them).
    ///
    /// # Safety
    /// `F` must be an `Option<unsafe extern "C" fn(..)>` type whose signature matches the
    /// symbol's real C signature (the `PFN_*` types of `gpu-mem-cuda-sys` do).
    pub unsafe fn function<F: Copy + Default>(&self, names: &[&str]) -> F {
        const { assert!(size_of::<F>() == size_of::<*mut std::ffi::c_void>()) };
        for name in names {
            // SAFETY: the caller guarantees `F` is the pointer type of this symbol; the pointer
            // is copied out and stays valid while `self.library` is loaded, which the owner of
            // `self` guarantees by keeping the two together.
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
            match LoadedLibrary::open_with_override(&MISSING, Some(OsString::from(empty))) {
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
        match LoadedLibrary::open(&MISSING) {
            Err(Error::LibraryLoad { reason, .. }) => {
                assert!(
                    reason.contains("libgpu-mem-definitely-missing.so.9"),
                    "{reason}"
                );
            }
            other => panic!("expected a load error, got {other:?}"),
        }
    }
}
