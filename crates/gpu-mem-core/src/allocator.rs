//! [`DeviceAllocator`]: device memory from the user's own allocator (Numba's External Memory
//! Management plugins, how RMM and CuPy pools sit under Numba).
//!
//! A device given an allocator ([`Device::set_allocator`](crate::Device::set_allocator)) takes
//! the memory of its device arrays (`device_array`, `to_device` and every call that makes one)
//! from it and gives it back to it; stream-ordered, page-locked, mapped and managed memory still
//! come from the backend. The statistics count what the allocator gives as device memory, with
//! the caller's location, as any other. An allocator typically sub-allocates blocks it got from
//! the backend with [`RawDeviceMemory`](crate::RawDeviceMemory), which bypasses the allocator.

use crate::backend::DevicePtr;
use crate::error::Result;
use std::fmt::Debug;

/// The alignment every allocation of an allocator must have (as the backends' allocations).
pub const ALIGNMENT: usize = 256;

/// Device memory for one device's arrays.
///
/// # Safety
///
/// The core hands the memory to safe code (copies, kernels, host views through the backend), so
/// an implementation promises, for every address [`DeviceAllocator::allocate`] returns:
///
/// * it is the start of at least `bytes` bytes of memory of the device it was asked for, of the
///   same backend instance (memory that backend's copies, memsets and kernels may use), aligned
///   to [`ALIGNMENT`] bytes (an address that is not is refused, given back, and an error);
/// * no other live allocation (of this allocator, the backend or anyone) overlaps it, until it
///   is passed to [`DeviceAllocator::free`].
pub unsafe trait DeviceAllocator: Send + Sync + Debug {
    /// A name for messages and snapshots.
    fn name(&self) -> &str;

    /// Allocates `bytes` (> 0) bytes on device `ordinal`. Out of room is
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) (the core then releases what it keeps
    /// and asks again).
    fn allocate(&self, ordinal: usize, bytes: usize) -> Result<DevicePtr>;

    /// Takes back memory from [`DeviceAllocator::allocate`].
    ///
    /// # Safety
    /// `ptr` came from `allocate(ordinal, bytes)` of this allocator, is freed once, and no work
    /// uses it any more.
    unsafe fn free(&self, ordinal: usize, ptr: DevicePtr, bytes: usize) -> Result<()>;
}
