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
/// the temporary directory is shared (see [`prepare`]).
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

/// Creates the cache directory (private to the user where it is new) and makes sure no one
/// else can put a library into it: libraries found there are loaded into this process. A
/// directory of another user is refused; one of this user that its group or everyone may write
/// to (made under a umask of 002, or by hand) loses those permissions. The reason, for the
/// error.
pub(crate) fn prepare(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create it: {e}"))?;
        let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
        // SAFETY: as in `shared_fallback_name`.
        let uid = unsafe { libc::getuid() };
        if meta.uid() != uid {
            return Err(format!(
                "it belongs to user {}, not to this process's user {uid}, who would load the kernels found in it",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & !0o022))
                .map_err(|e| {
                    format!(
                        "other users may write to it (mode {mode:o}) and so put kernels into it that this process would load, and its permissions cannot be narrowed: {e}"
                    )
                })?;
            tracing::info!(dir = %dir.display(), "kernel cache made writable by its owner only");
        }
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create it: {e}"))?;
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
