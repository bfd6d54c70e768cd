//! The on-disk cache of compiled kernels, and who may put a library into it (SECURITY.md).
//!
//! **Where**: `GPU_MEM_CACHE_DIR`, else `$XDG_CACHE_HOME/gpu-mem`, else `$HOME/.cache/gpu-mem`,
//! else `.cache/gpu-mem` in the home folder the password database gives this process's user;
//! `sim-kernels` under it. A process with no home at all (a service run without one) gets a
//! folder of its own, made with an unpredictable name in the temporary directory and used by it
//! alone: a shared folder whose name another user could guess is never used, since that user
//! could make it first.
//!
//! **Trust** (as ssh treats `~/.ssh`). The libraries found here are loaded into this process, so:
//! * the folder is found by its real path, and every folder on it from `/` must belong to root
//!   or to this process's user and be writable by no one else — but for a world-writable folder
//!   with the sticky bit (the temporary directory), in which no one else can remove or rename
//!   what is ours; the cache folder itself must belong to this process's user. A folder that
//!   fails is refused, naming it and why. gpu-mem changes the permissions of no folder: those it
//!   creates are made private to the user;
//! * a library is opened without following links and checked through that descriptor — a
//!   regular file of this user that no one else may write, ending with the SHA-256 of what
//!   precedes it, which gpu-mem appends when it stores one — and loaded from the same
//!   descriptor, so what was checked is what is loaded; one that fails is rebuilt;
//! * libraries appear by rename only, after an `fsync`, and the folder is synced after the
//!   rename: a crash leaves the old file, the new one or none, never part of one.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the cache directory.
pub(crate) const VARIABLE: &str = "GPU_MEM_CACHE_DIR";

/// What ends every stored library: this marker and the hex SHA-256 of the bytes before it.
const TRAILER_MARK: &[u8] = b"\ngpu-mem-sha256:";
const TRAILER_LEN: usize = TRAILER_MARK.len() + 64 + 1;

/// The cache folder, opened and checked ([`open`]).
#[derive(Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

/// A stored library that passed every check: its descriptor (what to load) and its ELF bytes
/// (without the trailer).
#[derive(Debug)]
pub(crate) struct Verified {
    pub(crate) file: File,
    pub(crate) elf: Vec<u8>,
}

/// The folder the cache lives in (`sim-kernels` under the root of the module docs), made
/// where missing.
fn location() -> Result<PathBuf, String> {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = env(VARIABLE)
        .or_else(|| env("XDG_CACHE_HOME").map(|p| p.join("gpu-mem")))
        .or_else(|| env("HOME").map(|p| p.join(".cache").join("gpu-mem")))
        .or_else(|| account_home().map(|p| p.join(".cache").join("gpu-mem")));
    match root {
        Some(root) => Ok(root.join("sim-kernels")),
        None => private_fallback().map(|p| p.join("sim-kernels")),
    }
}

/// The home folder of this process's user in the password database, when it names one.
fn account_home() -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::ffi::CStr;
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain data; `getpwuid_r` fills it or leaves `result` null.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buffer = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call and the buffer's length is given.
        let status = unsafe {
            libc::getpwuid_r(
                libc::geteuid(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut result,
            )
        };
        if status != 0 || result.is_null() || entry.pw_dir.is_null() {
            return None;
        }
        // SAFETY: `pw_dir` points into `buffer`, a NUL-terminated string.
        let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
        (path.is_absolute() && path.is_dir() && path != Path::new("/")).then_some(path)
    }
    #[cfg(not(unix))]
    None
}

/// A folder of this process's own in the temporary directory (`mkdtemp`: an unpredictable
/// name, created private; made once per process).
fn private_fallback() -> Result<PathBuf, String> {
    static MADE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let template = std::env::temp_dir().join("gpu-mem-cache-XXXXXX");
            let mut bytes = template.as_os_str().as_bytes().to_vec();
            bytes.push(0);
            // SAFETY: a NUL-terminated, writable template ending in six X.
            let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
            if made.is_null() {
                return Err(format!(
                    "no home folder to keep compiled kernels in, and no private folder can be made in {}: {} (set {VARIABLE})",
                    std::env::temp_dir().display(),
                    std::io::Error::last_os_error()
                ));
            }
            bytes.pop();
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
            tracing::info!(dir = %path.display(), "no home folder: kernels are cached in a private folder of this process");
            Ok(path)
        }
        #[cfg(not(unix))]
        Err(format!("no home folder to keep compiled kernels in (set {VARIABLE})"))
    })
    .clone()
}

/// Opens the cache folder ([`location`]), making it where missing, and checks it and every
/// folder on its way (module docs).
pub(crate) fn open() -> Result<Cache, String> {
    let dir = location()?;
    #[cfg(unix)]
    {
        let fd = trusted::open_dir(&dir)?;
        Ok(Cache { dir, fd })
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create it: {e}"))?;
        Ok(Cache { dir })
    }
}

/// The hex SHA-256 of `parts`, each length-prefixed so that no two lists collide.
pub(crate) fn key(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `bytes` without its trailer, when the trailer holds their hash.
fn checked_content(bytes: &[u8]) -> Option<&[u8]> {
    let split = bytes.len().checked_sub(TRAILER_LEN)?;
    let (content, trailer) = bytes.split_at(split);
    let digest = trailer.strip_prefix(TRAILER_MARK)?.strip_suffix(b"\n")?;
    (digest == hex(&Sha256::digest(content)).as_bytes()).then_some(content)
}

impl Cache {
    /// The folder's path (messages, and the compiler's scratch folders in it).
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// The library stored under `key`, when it is there and passes every check; why not
    /// otherwise (`Ok(None)`: there is none).
    pub(crate) fn library(&self, key: &str) -> Result<Option<Verified>, String> {
        let Some(mut file) = self.open_file(&format!("{key}.so"))? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read it: {e}"))?;
        let elf = checked_content(&bytes)
            .ok_or("it does not end with the hash of its content (truncated, or not stored by gpu-mem)")?
            .to_vec();
        Ok(Some(Verified { file, elf }))
    }

    /// Stores `library` (the compiler's output) under `key`: its content and hash written to a
    /// new file in `scratch` (a folder of [`Cache::scratch`]), synced, renamed into place, and
    /// the folder synced.
    pub(crate) fn store(&self, key: &str, library: &[u8], scratch: &Path) -> std::io::Result<()> {
        let staged = scratch.join("stored.so");
        let mut out = Vec::with_capacity(library.len() + TRAILER_LEN);
        out.extend_from_slice(library);
        out.extend_from_slice(TRAILER_MARK);
        out.extend_from_slice(hex(&Sha256::digest(library)).as_bytes());
        out.push(b'\n');
        {
            let mut file = private_create(&staged)?;
            std::io::Write::write_all(&mut file, &out)?;
            file.sync_all()?;
        }
        std::fs::rename(&staged, self.dir.join(format!("{key}.so")))?;
        File::open(&self.dir)?.sync_all()
    }

    /// The path of the file stored under `name` by [`Cache::store_checked`], when it is there,
    /// passes the file checks and its content has the hash stored beside it (`{name}.sha256`);
    /// why not otherwise (`Ok(None)`: there is none). For files a compiler reads by path (a
    /// precompiled header): the folder is this user's alone, so the file checked is the file
    /// read.
    pub(crate) fn checked_file(&self, name: &str) -> Result<Option<PathBuf>, String> {
        let Some(mut file) = self.open_file(name)? else {
            return Ok(None);
        };
        let Some(mut digest) = self.open_file(&format!("{name}.sha256"))? else {
            return Ok(None);
        };
        let mut expected = Vec::new();
        digest
            .read_to_end(&mut expected)
            .map_err(|e| format!("cannot read its hash: {e}"))?;
        let mut hash = Sha256::new();
        std::io::copy(&mut file, &mut hash).map_err(|e| format!("cannot read it: {e}"))?;
        if expected != hex(&hash.finalize()).as_bytes() {
            return Err("its content does not have the hash stored beside it".into());
        }
        Ok(Some(self.dir.join(name)))
    }

    /// Stores the file at `staged` (in a folder of [`Cache::scratch`]) under `name`, with the
    /// hash of its content beside it (`{name}.sha256`): both synced and renamed into place, the
    /// hash last, so a reader that finds the hash finds the whole file.
    pub(crate) fn store_checked(&self, name: &str, staged: &Path) -> std::io::Result<()> {
        let mut hash = Sha256::new();
        {
            let mut file = File::open(staged)?;
            std::io::copy(&mut file, &mut hash)?;
            file.sync_all()?;
        }
        let digest_staged = staged.with_extension("sha256");
        {
            let mut file = private_create(&digest_staged)?;
            std::io::Write::write_all(&mut file, hex(&hash.finalize()).as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(staged, self.dir.join(name))?;
        std::fs::rename(&digest_staged, self.dir.join(format!("{name}.sha256")))?;
        File::open(&self.dir)?.sync_all()
    }

    /// A fresh private folder inside the cache for one compile (removed by the caller).
    pub(crate) fn scratch(&self) -> std::io::Result<PathBuf> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let name = format!(
                "build-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let path = self.dir.join(name);
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => return Ok(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether the compiler refused the unit of `key` before (a stackless form; see
    /// [`Cache::remember_refusal`]), so this process does not try it again. A marker that does
    /// not pass the file checks is not believed.
    pub(crate) fn refused(&self, key: &str) -> bool {
        matches!(self.open_file(&format!("{key}.refused")), Ok(Some(_)))
    }

    /// Remembers that the compiler refused the unit of `key`. Best effort: without the marker
    /// the next process only tries again. The marker is empty, so a half-written one means the
    /// same.
    pub(crate) fn remember_refusal(&self, key: &str) {
        let _ = private_create(&self.dir.join(format!("{key}.refused")));
    }

    /// `name` in the cache folder, opened without following a link and checked through the
    /// descriptor: a regular file of this user that no one else may write. `Ok(None)` when there
    /// is none; why it is refused otherwise.
    fn open_file(&self, name: &str) -> Result<Option<File>, String> {
        #[cfg(unix)]
        {
            trusted::open_file(&self.fd, name)
        }
        #[cfg(not(unix))]
        match File::open(self.dir.join(name)) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A new file private to the user (`O_EXCL`: an existing file or link is never reused).
fn private_create(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Whether `path` names no `..` (the cache's location is walked component by component).
fn plain(path: &Path) -> bool {
    !path.components().any(|c| matches!(c, Component::ParentDir))
}

/// The checks of the module docs, through descriptors (`openat`, `fstat`, `mkdirat`).
#[cfg(unix)]
mod trusted {
    use std::ffi::CString;
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path, PathBuf};

    fn c_name(name: &std::ffi::OsStr) -> Result<CString, String> {
        CString::new(name.as_bytes()).map_err(|_| "a NUL byte in a name".to_string())
    }

    fn status(fd: &OwnedFd) -> Result<libc::stat, String> {
        // SAFETY: plain data that `fstat` overwrites.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open and `st` writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(st)
    }

    /// `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)`.
    fn open_at(parent: Option<&OwnedFd>, name: &CString) -> std::io::Result<OwnedFd> {
        let dirfd = parent.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
        // SAFETY: a NUL-terminated name relative to an open folder (or an absolute one).
        let fd = unsafe {
            libc::openat(
                dirfd,
                name.as_ptr(),
                libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor this function owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Why the folder `shown` (its `fstat` in `st`) cannot be on the cache's path; `last`: it
    /// is the cache folder itself.
    fn refusal(st: &libc::stat, shown: &Path, last: bool) -> Option<String> {
        // SAFETY: reads the process's credentials; cannot fail.
        let me = unsafe { libc::geteuid() };
        let mode = st.st_mode & 0o7777;
        if st.st_uid != me && (last || st.st_uid != 0) {
            return Some(format!(
                "{} belongs to user {}, not to this process's user {me}, who would load the kernels found there",
                shown.display(),
                st.st_uid
            ));
        }
        let others_write = mode & 0o022 != 0;
        let sticky = mode & libc::S_ISVTX != 0;
        if others_write && (last || !sticky) {
            return Some(format!(
                "others may write to {} (mode {mode:o}) and so change the kernels this process would load (chmod go-w it, or set {} to a folder only you can write)",
                shown.display(),
                super::VARIABLE
            ));
        }
        None
    }

    /// Opens `dir`, checking every folder from `/` on its real path and making the missing ones
    /// (private to the user).
    pub(super) fn open_dir(dir: &Path) -> Result<OwnedFd, String> {
        let absolute = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?
                .join(dir)
        };
        if !super::plain(&absolute) {
            return Err(format!("{} names `..`", absolute.display()));
        }
        // The longest part that exists, by its real path; the rest is made below it.
        let mut existing = absolute.clone();
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        let real = loop {
            match std::fs::canonicalize(&existing) {
                Ok(real) => break real,
                Err(_) => {
                    let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
                        return Err(format!("cannot resolve {}", absolute.display()));
                    };
                    missing.push(name);
                    existing.pop();
                }
            }
        };
        missing.reverse();
        let steps = real
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
            + missing.len();
        let mut shown = PathBuf::from("/");
        let root = c_name(std::ffi::OsStr::new("/"))?;
        let mut current = open_at(None, &root).map_err(|e| format!("cannot open /: {e}"))?;
        let st = status(&current)?;
        if let Some(why) = refusal(&st, &shown, steps == 0) {
            return Err(why);
        }
        let mut step = 0;
        for component in real.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            step += 1;
            shown.push(name);
            current = open_at(Some(&current), &c_name(name)?).map_err(|e| {
                format!(
                    "cannot open {} without following links: {e}",
                    shown.display()
                )
            })?;
            if let Some(why) = refusal(&status(&current)?, &shown, step == steps) {
                return Err(why);
            }
        }
        for name in missing {
            step += 1;
            shown.push(&name);
            let c = c_name(&name)?;
            // SAFETY: a NUL-terminated name in an open folder.
            let made = unsafe { libc::mkdirat(current.as_raw_fd(), c.as_ptr(), 0o700) };
            if made != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(format!("cannot create {}: {e}", shown.display()));
                }
            }
            current = open_at(Some(&current), &c).map_err(|e| {
                format!(
                    "cannot open {} without following links: {e}",
                    shown.display()
                )
            })?;
            if let Some(why) = refusal(&status(&current)?, &shown, step == steps) {
                return Err(why);
            }
        }
        Ok(current)
    }

    /// `name` in the folder `dir`, opened without following a link, when it is a regular file
    /// of this user that no one else may write.
    pub(super) fn open_file(dir: &OwnedFd, name: &str) -> Result<Option<File>, String> {
        let c = CString::new(name).map_err(|_| "a NUL byte in a name".to_string())?;
        // SAFETY: a NUL-terminated name in an open folder.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                Some(libc::ELOOP) => Err("it is a symbolic link".to_string()),
                _ => Err(e.to_string()),
            };
        }
        // SAFETY: a fresh descriptor this function owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = status(&fd)?;
        // SAFETY: as in `refusal`.
        let me = unsafe { libc::geteuid() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err("it is not a regular file".to_string());
        }
        if st.st_uid != me {
            return Err(format!("it belongs to user {}, not {me}", st.st_uid));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(format!(
                "others may write to it (mode {:o})",
                st.st_mode & 0o7777
            ));
        }
        Ok(Some(File::from(fd)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_content_is_checked_against_its_hash() {
        let content = b"\x7fELF not really a library";
        let mut stored = content.to_vec();
        stored.extend_from_slice(TRAILER_MARK);
        stored.extend_from_slice(hex(&Sha256::digest(content)).as_bytes());
        stored.push(b'\n');
        assert_eq!(checked_content(&stored), Some(&content[..]));
        // Truncated anywhere, or changed: refused.
        for cut in [1, 10, stored.len() / 2, stored.len() - 1] {
            assert_eq!(checked_content(&stored[..cut]), None, "cut at {cut}");
        }
        let mut changed = stored.clone();
        changed[3] ^= 1;
        assert_eq!(checked_content(&changed), None);
        assert_eq!(checked_content(b""), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn keys_separate_their_parts() {
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        assert_eq!(key(&[b"x"]).len(), 64);
    }
}
