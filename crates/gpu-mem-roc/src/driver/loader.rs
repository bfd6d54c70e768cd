//! Opening a shared library from an ordered list of candidates.
//!
//! An environment variable, when set, replaces the candidate list (so a test or a user can point
//! at one exact file); otherwise each candidate is tried in order. The first one that opens *and*
//! passes the caller's check wins. Failure lists every candidate with the reason it was rejected.

use gpu_mem_core::error::error_chain;
use gpu_mem_core::{Error, Result};
use libloading::Library;

/// A library that was opened, with the name or path it was opened by.
#[derive(Debug)]
pub struct Opened {
    /// The library handle; dropping it unloads the library.
    pub library: Library,
    /// The candidate that opened (a soname such as `libhsa-runtime64.so.1`, or the override path).
    pub path: String,
}

/// Opens `library` from `$env_override` (ignored when empty) or the first acceptable entry of
/// `candidates`.
///
/// `accept` may reject a library that opened (returning why), e.g. one lacking a key symbol.
pub fn open_first(
    library: &'static str,
    env_override: &str,
    candidates: &[&str],
    accept: impl Fn(&Library) -> std::result::Result<(), String>,
) -> Result<Opened> {
    let from_env = match env_override {
        "" => None,
        name => std::env::var(name).ok().filter(|p| !p.trim().is_empty()),
    };
    let list: Vec<String> = match from_env {
        Some(path) => vec![path],
        None => candidates.iter().map(|c| (*c).to_string()).collect(),
    };
    let mut tried = Vec::with_capacity(list.len());
    let mut last_reason = String::from("no candidates");
    for candidate in list {
        // SAFETY: loading runs the library's initialisers. The candidates are the ROCm runtime
        // libraries (or a file the user named explicitly through the override), whose
        // initialisers only set up process-local state.
        match unsafe { Library::new(candidate.as_str()) } {
            Ok(lib) => match accept(&lib) {
                Ok(()) => {
                    tracing::debug!(library, path = %candidate, "loaded");
                    return Ok(Opened {
                        library: lib,
                        path: candidate,
                    });
                }
                Err(reason) => {
                    tracing::debug!(library, path = %candidate, %reason, "rejected");
                    last_reason = format!("{candidate}: {reason}");
                    tried.push(candidate);
                }
            },
            Err(e) => {
                tracing::debug!(library, path = %candidate, error = %e, "cannot open");
                // libloading's message is only "dlopen failed"; the loader's reason is its source.
                last_reason = error_chain(&e);
                tried.push(candidate);
            }
        }
    }
    Err(Error::LibraryLoad {
        library,
        tried,
        reason: last_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library that cannot be opened is reported with the dynamic loader's reason, as the
    /// CUDA backend does, not only "dlopen failed".
    #[test]
    fn load_errors_carry_the_loaders_reason() {
        match open_first(
            "libnothing",
            "",
            &["libgpu-mem-definitely-missing.so.9"],
            |_| Ok(()),
        ) {
            Err(Error::LibraryLoad { tried, reason, .. }) => {
                assert_eq!(
                    tried,
                    vec!["libgpu-mem-definitely-missing.so.9".to_string()]
                );
                assert!(
                    reason.contains("libgpu-mem-definitely-missing.so.9")
                        && reason.len() > "dlopen failed".len(),
                    "{reason}"
                );
            }
            other => panic!("expected a load error, got {other:?}"),
        }
    }
}
