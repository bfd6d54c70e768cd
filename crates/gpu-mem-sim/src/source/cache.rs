//! The on-disk cache of compiled kernels: `GPU_MEM_CACHE_DIR` (default the user's cache
//! directory, `$XDG_CACHE_HOME/gpu-mem` or `~/.cache/gpu-mem`), keyed by a SHA-256 of everything
//! that affects the output. Files appear by rename only, so concurrent processes never see a
//! half-written library.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the cache directory.
pub(crate) const VARIABLE: &str = "GPU_MEM_CACHE_DIR";

/// `<cache>/sim-kernels`.
pub(crate) fn directory() -> PathBuf {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = env(VARIABLE)
        .or_else(|| env("XDG_CACHE_HOME").map(|p| p.join("gpu-mem")))
        .or_else(|| env("HOME").map(|p| p.join(".cache").join("gpu-mem")))
        .unwrap_or_else(|| std::env::temp_dir().join(shared_fallback_name()));
    root.join("sim-kernels")
}

/// The cache's folder in the temporary directory when no home is known: one per user, since
/// the temporary directory is shared (see [`check_private`]).
fn shared_fallback_name() -> String {
    #[cfg(unix)]
    {
        // SAFETY: `getuid` only reads the calling process's credentials and cannot fail.
        let uid = unsafe { libc::getuid() };
        format!("gpu-mem-cache-{uid}")
    }
    #[cfg(not(unix))]
    {
        "gpu-mem-cache".to_string()
    }
}

/// Refuses a cache directory that someone else could put a library into: libraries found there
/// are loaded into this process, so a directory owned by another user, or writable by its group
/// or by everyone (the temporary directory's fallback made by someone else first), would run
/// their code here. The reason, for the error.
pub(crate) fn check_private(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
        // SAFETY: as in `shared_fallback_name`.
        let uid = unsafe { libc::getuid() };
        if meta.uid() != uid {
            return Err(format!(
                "it belongs to user {}, not to this process's user {uid}, who would load the kernels found in it",
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "other users may write to it (mode {:o}) and so put kernels into it that this process would load",
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// The hex SHA-256 of `parts`, each length-prefixed so that no two lists collide.
pub(crate) fn key(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh private directory inside `dir` for one compile (removed by the caller).
pub(crate) fn scratch_dir(dir: &Path) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let name = format!(
            "build-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Whether the compiler refused the unit of `key` before (a stackless form; see
/// [`remember_refusal`]), so this process does not try it again.
pub(crate) fn refused(key: &str) -> bool {
    directory().join(format!("{key}.refused")).is_file()
}

/// Remembers that the compiler refused the unit of `key`. Best effort: without the marker the
/// next process only tries again. The marker is empty, so a half-written one means the same.
pub(crate) fn remember_refusal(key: &str) {
    let _ = std::fs::write(directory().join(format!("{key}.refused")), b"");
}
