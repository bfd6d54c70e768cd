//! The prelude precompiled: most of a kernel's compile is the prelude (`gpu_mem.h` and the
//! simulator's headers), the same for every kernel, so GCC reads it precompiled (a `.gch`),
//! about 4x faster for a small kernel (0.36 → 0.08 s measured here).
//!
//! One header per compiler, language standard, flags and thread form ([`key`]), built the first
//! time a compile needs it, stored in the kernel cache beside the libraries with the same
//! trust (`super::cache`: this user's folder, checked files, rename after sync) and the SHA-256
//! of its content beside it, checked once per process before first use. A compile finds it as
//! `gpu_mem.h.gch` beside the prelude in its scratch folder (a hard link to the cached file);
//! GCC checks that it fits the unit (flags, the macros defined before the `#include`) and
//! reads the prelude as text when it does not, so a missing, refused or unusable header makes
//! a compile slower, never different: the library built is the same byte for byte.
//! `GPU_MEM_SIM_PRECOMPILED=0` turns it off.

use super::cache::{self, Cache};
use super::compiler::{self, Compiler, Threads};
use super::headers;
use crate::abi::ABI;
use gpu_mem_core::sync::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The variable that turns precompiled preludes off (`0`).
pub(crate) const VARIABLE: &str = "GPU_MEM_SIM_PRECOMPILED";

/// What this process knows of each header: its checked path, or `None` once it could not be
/// built or checked (the process then reads the prelude as text, without trying again).
static KNOWN: Mutex<Option<HashMap<String, Option<PathBuf>>>> = Mutex::new(None);

/// The cache key of the prelude precompiled by `compiler` for units of `threads`.
fn key(compiler: &Compiler, threads: Threads) -> String {
    cache::key(&[
        b"gpu-mem-sim precompiled prelude",
        &ABI.to_le_bytes(),
        compiler.path.as_os_str().as_encoded_bytes(),
        compiler.version.as_bytes(),
        compiler::standard(threads, compiler.is_clang())
            .join(" ")
            .as_bytes(),
        compiler::FLAGS.join(" ").as_bytes(),
        compiler::instrumentation(threads, compiler.is_clang())
            .join(" ")
            .as_bytes(),
        compiler::prelude_defines(threads).join(" ").as_bytes(),
        &headers::fingerprint(),
    ])
}

/// Puts the prelude precompiled for `threads` beside the prelude in `include` (a compile's
/// scratch headers), building it into the cache first if it is not there; `false` when there is
/// none to put (turned off, a compiler that takes none, or it could not be built: the compile
/// reads the prelude as text).
pub(crate) fn place(cache: &Cache, compiler: &Compiler, threads: Threads, include: &Path) -> bool {
    if !compiler.takes_gch() || std::env::var_os(VARIABLE).is_some_and(|v| v == "0") {
        return false;
    }
    let Some(header) = header(cache, compiler, threads) else {
        return false;
    };
    let at = include.join("gpu_mem.h.gch");
    std::fs::hard_link(&header, &at).is_ok() || std::fs::copy(&header, &at).is_ok()
}

/// The checked path of the header for `threads`, built when missing.
fn header(cache: &Cache, compiler: &Compiler, threads: Threads) -> Option<PathBuf> {
    let key = key(compiler, threads);
    // Held while building: the process's other compiles wait for the header rather than
    // build it again.
    let mut known = lock(&KNOWN);
    let known = known.get_or_insert_with(HashMap::new);
    if let Some(found) = known.get(&key) {
        return found.clone();
    }
    let name = format!("{key}.gch");
    let found = match cache.checked_file(&name) {
        Ok(Some(path)) => Some(path),
        Ok(None) => build(cache, compiler, threads, &name),
        Err(reason) => {
            tracing::warn!(dir = %cache.path().display(), %name, %reason, "precompiled prelude refused; rebuilding");
            build(cache, compiler, threads, &name)
        }
    };
    known.insert(key, found.clone());
    found
}

/// Builds the header into the cache as `name`; its checked path.
fn build(cache: &Cache, compiler: &Compiler, threads: Threads, name: &str) -> Option<PathBuf> {
    let scratch = cache.scratch().ok()?;
    let built = (|| {
        let include = scratch.join("include");
        headers::write_into(&include).map_err(|e| e.to_string())?;
        let output = scratch.join("prelude.gch");
        compiler
            .precompile(&include, &output, threads)
            .map_err(|failure| format!("{failure:?}"))?;
        cache
            .store_checked(name, &output)
            .map_err(|e| e.to_string())?;
        cache
            .checked_file(name)?
            .ok_or_else(|| "it is not there after it was stored".to_string())
    })();
    // Best effort: a leftover scratch directory only takes space.
    let _ = std::fs::remove_dir_all(&scratch);
    built
        .inspect_err(|reason| {
            tracing::warn!(compiler = %compiler.describe(), ?threads, %reason, "cannot precompile the prelude; kernels compile without it");
        })
        .ok()
}
