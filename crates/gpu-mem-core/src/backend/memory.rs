//! [`Memory`]: device memory, and page-locked or registered host memory, on every backend.

use super::types::{DevicePtr, HostAllocFlags, HostAllocation, HostRegisterFlags};
use crate::error::Result;
use std::ptr::NonNull;

/// Allocating device memory, and page-locked (or page-locking existing) host memory.
///
/// # Safety
///
/// The core hands out the memory this trait returns to safe code, so an implementation must
/// uphold, for every device it accepts:
///
/// * **Device memory.** [`Memory::alloc`] returns, on `Ok`, the start of a range of `bytes`
///   device bytes, aligned to at least 256 bytes, that overlaps no other live allocation of the
///   device, and stays valid until it is passed to [`Memory::free`].
/// * **Host memory.** [`Memory::host_alloc`] returns, on `Ok`, a host pointer aligned to at
///   least 256 bytes (not a page: CUDA drivers pack small allocations into shared pages) to `bytes` bytes of host memory that the caller exclusively owns, readable
///   and writable from any thread, which stays valid (and is not accessed by the backend except
///   for operations the caller enqueues or calls) until it is passed to [`Memory::host_free`].
///   When `device` is `Some`, it is the device address of that same memory. The memory may be
///   uninitialised unless [`HostAllocation::zeroed`] is `true`, in which case every byte reads as
///   zero.
/// * **Registration.** [`Memory::host_register`] never moves, frees or writes the caller's
///   range; the device address it returns maps that same range until
///   [`Memory::host_unregister`].
pub unsafe trait Memory {
    /// Allocates `bytes` (> 0) bytes of device memory, aligned to at least 256 bytes.
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr>;

    /// Frees device memory.
    ///
    /// # Safety
    /// `ptr` came from [`Memory::alloc`] on this device, is freed once, and no enqueued work still
    /// uses it.
    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()>;

    /// Allocates page-locked host memory (`bytes` > 0), optionally mapped into the device.
    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation>;

    /// Frees memory from [`Memory::host_alloc`].
    ///
    /// # Safety
    /// `host` came from `host_alloc` on this device, is freed once, and no enqueued work uses it.
    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()>;

    /// Page-locks (and optionally maps) an existing host range; returns the device address when
    /// `flags.mapped` is set.
    ///
    /// # Safety
    /// `host..host+bytes` is valid host memory that stays allocated until
    /// [`Memory::host_unregister`] is called with the same `host`.
    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>>;

    /// Undoes [`Memory::host_register`] for the range starting at `host`.
    ///
    /// # Safety
    /// `host` was registered on this device and no enqueued work still uses the range.
    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()>;
}
