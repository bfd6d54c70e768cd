//! Host pages a region shares with other processes, as the region holds them: the memory file an
//! exported block was moved onto ([`SharedFile`]), and another process's block mapped here
//! ([`Mapping`]).
//!
//! `ipc` makes them (it knows the export protocol: the memory file, its seals, the handle's
//! bytes); the region holding one gives its pages back when it is dropped: private pages are
//! mapped over an exported block again before the block is reused, and an imported mapping is
//! unmapped. So `memory` knows nothing of `ipc`, and `ipc` builds on `memory`'s regions. Only
//! Linux outside Miri exports and imports; elsewhere neither value is ever made.

use std::ptr::NonNull;

/// The memory file an exported block lives on.
#[derive(Debug)]
pub(crate) struct SharedFile {
    #[cfg(all(target_os = "linux", not(miri)))]
    fd: std::os::fd::OwnedFd,
    dev: u64,
    ino: u64,
}

/// Memory of another process mapped into this one, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    size: usize,
}

#[cfg(all(target_os = "linux", not(miri)))]
mod os {
    use super::{Mapping, SharedFile};
    use std::os::fd::{AsRawFd, OwnedFd, RawFd};
    use std::ptr::NonNull;

    impl SharedFile {
        /// The memory file `fd`, whose identity (`st_dev`, `st_ino`) is `dev` and `ino`, now
        /// mapped over a region's block.
        pub(crate) fn new(fd: OwnedFd, dev: u64, ino: u64) -> SharedFile {
            SharedFile { fd, dev, ino }
        }

        /// This process's descriptor of the file.
        pub(crate) fn raw_fd(&self) -> RawFd {
            self.fd.as_raw_fd()
        }

        /// The file's device and inode numbers.
        pub(crate) fn identity(&self) -> (u64, u64) {
            (self.dev, self.ino)
        }

        /// Maps private pages over the block again; `false` if that failed (the block must then
        /// never be reused).
        pub(in crate::memory) fn unshare(self, base: NonNull<u8>, size: usize) -> bool {
            // SAFETY: `base..base+size` is the block this file was mapped over, whole pages, and
            // no one uses it any more (its region is being dropped).
            let mapped = unsafe {
                libc::mmap(
                    base.as_ptr().cast::<libc::c_void>(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            mapped != libc::MAP_FAILED
        }
    }

    impl Mapping {
        /// Takes ownership of the mapping `ptr..ptr+size`, to be unmapped on drop.
        ///
        /// # Safety
        /// `ptr..ptr+size` is a mapping made by `mmap` that nothing else unmaps.
        pub(crate) unsafe fn new(ptr: NonNull<u8>, size: usize) -> Mapping {
            Mapping { ptr, size }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `ptr..ptr+size` was mapped by `mmap` and is owned by this value (`new`'s
            // contract), unmapped once, when the region holding it is dropped (no range of it is
            // in use any more).
            unsafe { libc::munmap(self.ptr.as_ptr().cast::<libc::c_void>(), self.size) };
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod os {
    use super::{Mapping, SharedFile};
    use std::ptr::NonNull;

    impl SharedFile {
        pub(in crate::memory) fn unshare(self, _base: NonNull<u8>, _size: usize) -> bool {
            let _ = (self.dev, self.ino);
            true
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            let _ = (self.ptr, self.size);
        }
    }
}
