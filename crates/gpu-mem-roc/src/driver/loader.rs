//! Opening a shared library from an ordered list of candidates, through the loader shared with
//! the CUDA backend (`gpu-mem-loader`): each library is opened once per process and never
//! unloaded (unloading ROCr after `hsa_init`, or libamdhip64/comgr at all, is unsafe: LLVM
//! aborts when loaded twice).
//!
//! An environment variable, when set, replaces the candidate list (so a test or a user can point
//! at one exact file); otherwise each candidate is tried in order. The first one that opens *and*
//! passes the caller's check wins. Failure lists every candidate, with the dynamic loader's
//! reasons (or the check's): see `gpu_mem_loader`'s contract.

use gpu_mem_core::Result;
use libloading::Library;

/// A library that was opened, with the name or path it was opened by.
#[derive(Debug)]
pub struct Opened {
    /// The library handle, valid for the rest of the process (never unloaded).
    pub library: &'static Library,
    /// The candidate that opened (a soname such as `libhsa-runtime64.so.1`, or the override path).
    pub path: String,
}

/// Opens `library` from `$env_override` (ignored when empty) or the first acceptable entry of
/// `candidates`.
///
/// `accept` may reject a library that opened (returning why), e.g. one lacking a key symbol.
pub fn open_first(
    library: &'static str,
    env_override: &'static str,
    candidates: &[&str],
    accept: impl Fn(&Library) -> std::result::Result<(), String>,
) -> Result<Opened> {
    let opened = gpu_mem_loader::open_among(library, env_override, candidates, &accept)?;
    Ok(Opened {
        library: opened.raw(),
        path: opened.path().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_mem_core::Error;

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

    /// Opening the same library twice gives the same handle: it is loaded once per process.
    #[test]
    fn libraries_are_opened_once() {
        let a = open_first("the C library (roc test)", "", &["libc.so.6"], |_| Ok(()));
        let b = open_first("the C library (roc test)", "", &["libc.so.6"], |_| Ok(()));
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(std::ptr::eq(a.library, b.library)),
            other => panic!("libc did not open: {other:?}"),
        }
    }
}
