//! Device memory shared between processes (the simulator's `cuIpcGetMemHandle` /
//! `cuIpcOpenMemHandle`).
//!
//! Exporting an allocation moves its host block onto a memory file (`memfd_create`): the
//! block's contents are written to the file, the file is sealed against shrinking and growing
//! (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`: no holder of it can cut pages from under a
//! mapping, whose next access would be a SIGBUS), and it is mapped over the block's own pages
//! (`MAP_FIXED`), so every pointer to the block stays valid and now addresses shared pages. The
//! handle names the exporting process, its descriptor of the file and the file's identity
//! (device and inode); another process opens `/proc/<pid>/fd/<fd>`, checks that it is such a
//! sealed memory file of gpu-mem's (a forged handle naming any other open file, which copies
//! would write into, is refused) with that identity, and maps it, so both processes address
//! the same memory. When the exporting allocation is freed,
//! private pages are mapped over the block again before it is reused, so an importer never sees
//! what the block holds next. Linux only (and not under Miri); blocks under a page cannot be
//! exported, since they share their page with other allocations.
//!
//! This module builds on `memory`'s regions and not the reverse: what a region holds of a
//! shared block (the memory file, an imported mapping) and its release when the region is
//! dropped are `memory`'s (`memory::shared`); here are the handle, the export and the import.

use crate::memory::{Mapping, PAGE, Region};
use gpu_mem_core::backend::IpcMemHandle;
use gpu_mem_core::{BackendKind, Error, Result};
use std::ptr::NonNull;

fn unsupported(reason: impl Into<String>) -> Error {
    Error::NotSupportedByBackend {
        backend: BackendKind::Sim,
        feature: "IPC memory handles",
        reason: reason.into(),
    }
}

const HANDLE_LEN: usize = 32;

fn encode(pid: u32, fd: i32, dev: u64, ino: u64, size: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HANDLE_LEN);
    out.extend_from_slice(&pid.to_le_bytes());
    out.extend_from_slice(&fd.to_le_bytes());
    out.extend_from_slice(&dev.to_le_bytes());
    out.extend_from_slice(&ino.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out
}

#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
fn decode(data: &[u8]) -> Result<(u32, i32, u64, u64, u64)> {
    let bad = || Error::InvalidArgument {
        name: "IPC handle",
        reason: format!(
            "a simulator handle has {HANDLE_LEN} bytes, this one {}",
            data.len()
        ),
    };
    if data.len() != HANDLE_LEN {
        return Err(bad());
    }
    let u32_at = |i: usize| data.get(i..i + 4).and_then(|b| b.try_into().ok());
    let u64_at = |i: usize| data.get(i..i + 8).and_then(|b| b.try_into().ok());
    let pid = u32::from_le_bytes(u32_at(0).ok_or_else(bad)?);
    let fd = i32::from_le_bytes(u32_at(4).ok_or_else(bad)?);
    let dev = u64::from_le_bytes(u64_at(8).ok_or_else(bad)?);
    let ino = u64::from_le_bytes(u64_at(16).ok_or_else(bad)?);
    let size = u64::from_le_bytes(u64_at(24).ok_or_else(bad)?);
    Ok((pid, fd, dev, ino, size))
}

#[cfg(all(target_os = "linux", not(miri)))]
mod os {
    use super::*;
    use crate::memory::SharedFile;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn last_error(what: &str) -> Error {
        unsupported(format!("{what}: {}", std::io::Error::last_os_error()))
    }

    /// What an exported memory file is called (its link in `/proc/self/fd` reads
    /// `/memfd:<name> (deleted)`).
    const MEMFD_NAME: &std::ffi::CStr = c"gpu-mem-sim-ipc";
    /// The seals every exported memory file carries.
    const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

    /// `Ok` when `file` (opened from `path`) is a memory file gpu-mem exported: a memfd of its
    /// name, sealed against shrinking (so mapping it cannot end in a SIGBUS). Regular files
    /// have no seals (`F_GET_SEALS` fails on them).
    fn check_sealed_memory_file(file: &OwnedFd, path: &str) -> Result<()> {
        let refuse = |why: String| Error::InvalidArgument {
            name: "IPC handle",
            reason: format!("{path} {why}: not memory a gpu-mem simulator exported"),
        };
        // SAFETY: `file` is an open descriptor; F_GET_SEALS takes no argument.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 {
            return Err(refuse("is not a memory file".to_string()));
        }
        if seals & SEALS != SEALS {
            return Err(refuse(format!(
                "is a memory file without gpu-mem's seals ({seals:#x})"
            )));
        }
        let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| refuse(format!("cannot be named ({e})")))?;
        let expected = format!("/memfd:{}", MEMFD_NAME.to_string_lossy());
        if !link.to_string_lossy().starts_with(&expected) {
            return Err(refuse(format!("is {}", link.display())));
        }
        Ok(())
    }

    fn identity(fd: &OwnedFd) -> Result<(u64, u64)> {
        let st = status(fd)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// The file's `fstat`.
    fn status(fd: &OwnedFd) -> Result<libc::stat> {
        // SAFETY: `stat` is plain data; all-zero is a valid value that `fstat` overwrites.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is an open descriptor and `st` a writable `stat`.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(last_error("fstat of the shared memory file"));
        }
        Ok(st)
    }

    /// Moves `region`'s block onto a memory file (once) and returns the handle.
    pub(crate) fn export(region: &Region) -> Result<IpcMemHandle> {
        let layout = region
            .block_layout()
            .ok_or_else(|| unsupported("only device allocations can be exported"))?;
        let size = layout.size();
        // Decided by the request, not only the block: a small allocation may get a page-sized
        // block from the cache, and whether it can be exported must not depend on that.
        if region.len() < PAGE || layout.align() < PAGE || !size.is_multiple_of(PAGE) {
            return Err(unsupported(format!(
                "allocations under {PAGE} bytes share their page with others and cannot be \
                 exported on the simulator ({} bytes)",
                region.len()
            )));
        }
        let mut shared = region.shared();
        if shared.is_none() {
            let _guard = region.lock();
            let base = region.base_ptr();
            // SAFETY: the name is a NUL-terminated string; the flags are valid.
            let raw = unsafe {
                libc::memfd_create(
                    MEMFD_NAME.as_ptr(),
                    libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
                )
            };
            if raw < 0 {
                return Err(last_error("memfd_create"));
            }
            // SAFETY: `raw` is a fresh descriptor this function owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: `fd` is open; the size fits `off_t` (it is a live allocation's).
            if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
                return Err(last_error("ftruncate of the shared memory file"));
            }
            let mut done = 0usize;
            while done < size {
                // SAFETY: `base..base+size` is the region's block (its lock is held, so no copy
                // writes it meanwhile); the descriptor is open.
                let n = unsafe {
                    libc::pwrite(
                        fd.as_raw_fd(),
                        base.as_ptr().add(done).cast::<libc::c_void>(),
                        size - done,
                        done as libc::off_t,
                    )
                };
                if n <= 0 {
                    return Err(last_error("writing the shared memory file"));
                }
                done += n as usize;
            }
            // SAFETY: `fd` is an open memory file made with MFD_ALLOW_SEALING.
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
                return Err(last_error("sealing the shared memory file"));
            }
            // SAFETY: the block `base..base+size` is page-aligned whole pages owned by this
            // region; mapping the file (which now holds the same bytes) over it keeps every
            // pointer into it valid.
            let mapped = unsafe {
                libc::mmap(
                    base.as_ptr().cast::<libc::c_void>(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if mapped == libc::MAP_FAILED {
                return Err(last_error("mapping the shared memory file"));
            }
            let (dev, ino) = identity(&fd)?;
            *shared = Some(SharedFile::new(fd, dev, ino));
        }
        let file = shared
            .as_ref()
            .ok_or_else(|| unsupported("the shared memory file vanished"))?;
        let (dev, ino) = file.identity();
        Ok(IpcMemHandle {
            bytes: region.len() as u64,
            data: encode(std::process::id(), file.raw_fd(), dev, ino, size as u64),
        })
    }

    /// Opens another process's exported block and maps it here.
    pub(crate) fn import(handle: &IpcMemHandle) -> Result<(Mapping, NonNull<u8>)> {
        let (pid, fd, dev, ino, size) = decode(&handle.data)?;
        if pid == std::process::id() {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: "opened in the process that exported it (CUDA refuses this too; use the \
                         array itself)"
                    .into(),
            });
        }
        let size = usize::try_from(size).map_err(|_| unsupported("the mapping is too large"))?;
        if handle.bytes as usize > size {
            return Err(unsupported("the handle's size exceeds its memory file"));
        }
        let path = format!("/proc/{pid}/fd/{fd}");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| {
                unsupported(format!(
                    "cannot open {path} (has the exporting process freed the array or exited?): {e}"
                ))
            })?;
        let file = OwnedFd::from(file);
        check_sealed_memory_file(&file, &path)?;
        let st = status(&file)?;
        if (st.st_dev, st.st_ino) != (dev, ino) {
            return Err(unsupported(format!(
                "{path} is no longer the exported memory (the exporting process freed it)"
            )));
        }
        // The size comes from the handle: map no more than the file holds (touching a mapped
        // page past a file's end is a SIGBUS, not an error).
        if u64::try_from(st.st_size).map_or(true, |file_size| file_size < size as u64) {
            return Err(unsupported(format!(
                "the handle claims {size} bytes, but its memory file holds {}",
                st.st_size
            )));
        }
        // SAFETY: mapping a fresh range of `size` bytes of an open file; the kernel picks the
        // address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_error("mapping the exported memory"));
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| unsupported("mmap returned null"))?;
        // SAFETY: `ptr..ptr+size` was just mapped by `mmap` above; nothing else unmaps it.
        let mapping = unsafe { Mapping::new(ptr, size) };
        Ok((mapping, ptr))
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod os {
    use super::*;

    pub(crate) fn export(_region: &Region) -> Result<IpcMemHandle> {
        let _ = (PAGE, encode(0, 0, 0, 0, 0));
        Err(unsupported(
            "the simulator shares memory between processes on Linux only",
        ))
    }

    pub(crate) fn import(_handle: &IpcMemHandle) -> Result<(Mapping, NonNull<u8>)> {
        Err(unsupported(
            "the simulator shares memory between processes on Linux only",
        ))
    }
}

pub(crate) use os::{export, import};

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A forged handle naming another process's descriptor of a regular file (which copies
    /// would then write into) is refused: only gpu-mem's sealed memory files are imported.
    #[test]
    fn a_handle_to_an_ordinary_file_is_refused() {
        let path = std::env::temp_dir().join(format!("gpu-mem-ipc-forged-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let mut holder = std::process::Command::new("sleep")
            .arg("30")
            .stdin(file)
            .spawn()
            .unwrap();
        let handle = IpcMemHandle {
            bytes: 4096,
            data: encode(holder.id(), 0, meta.dev(), meta.ino(), 8192),
        };
        let refused = import(&handle);
        let _ = holder.kill();
        let _ = holder.wait();
        let contents = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        match refused {
            Err(Error::InvalidArgument { reason, .. }) => {
                assert!(reason.contains("not a memory file"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(contents.iter().all(|b| *b == 7));
    }
}
