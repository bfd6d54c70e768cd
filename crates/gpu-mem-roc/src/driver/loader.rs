//! Opening a shared library from an ordered list of candidates.
//!
//! An environment variable, when set, replaces the candidate list (so a test or a user can point
//! at one exact file); otherwise each candidate is tried in order. The first one that opens *and*
//! passes the caller's check wins. Failure lists every candidate with the reason it was rejected.

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
        name => std::env::var(name).ok().filter(|p| !p.is_empty()),
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
                last_reason = e.to_string();
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
