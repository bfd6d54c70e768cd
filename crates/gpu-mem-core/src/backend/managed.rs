//! [`ManagedMemory`]: memory the host and the device both address (optional, through
//! [`Backend::managed`](super::Backend::managed)), and the hints about where it should live
//! (prefetch and advice, whose plain data is in `advice`).

use super::advice::{ManagedAdvice, ManagedLocation};
use super::types::{DevicePtr, HostAllocation, StreamHandle};
use crate::error::Result;
use std::ptr::NonNull;

/// Managed (unified) memory (`cuMemAllocManaged`; HSA: fine-grained system memory the agents
/// are allowed to reach).
///
/// # Safety
///
/// An implementation must uphold [`Backend`](super::Backend)'s contract, and:
///
/// * **Host side.** [`ManagedMemory::managed_alloc`] keeps the promises of
///   [`Memory::host_alloc`](super::Memory::host_alloc) for the host address it returns, until it
///   is passed to [`ManagedMemory::managed_free`].
/// * **Device side.** The device address it returns is of that same memory, for as long.
/// * **Hints.** [`ManagedMemory::managed_prefetch`] and [`ManagedMemory::managed_advise`] change
///   no byte of the memory and touch no other memory: host code and kernels may use the memory
///   meanwhile exactly as before (the driver keeps such accesses coherent while it migrates).
///   Both refuse, with an error, a range that does not lie in one live managed allocation of the
///   device, a location naming no device of the backend, and (prefetch) a stream of another
///   device; a device that cannot act on the hint is
///   [`Error::NotSupportedByBackend`](crate::Error::NotSupportedByBackend).
pub unsafe trait ManagedMemory: Send + Sync {
    /// Allocates `bytes` (> 0) of managed (unified) memory, reachable from the host at `host` and
    /// from the device at `device` of the result (`cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)`,
    /// where both addresses are equal; HSA: fine-grained system memory with
    /// `hsa_amd_agents_allow_access`, or SVM). The same promises as
    /// [`Memory::host_alloc`](super::Memory::host_alloc) hold for the host side.
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation>;

    /// Frees memory from [`ManagedMemory::managed_alloc`].
    ///
    /// # Safety
    /// `host` came from `managed_alloc` on this device, is freed once, and no enqueued work uses
    /// it.
    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()>;

    /// Enqueues on `stream` a migration of `ptr..ptr+bytes` (`bytes` > 0) of managed memory to
    /// `to` (`cuMemPrefetchAsync`): ordered after the work enqueued on `stream` before it, so
    /// that later work finds the memory there. A hint: it changes no byte, and a backend whose
    /// managed memory never migrates only validates it.
    ///
    /// # Safety
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this
    /// device and is not destroyed; the managed allocation holding the range stays allocated
    /// until the prefetch has completed. (A range outside the device's managed memory is the
    /// backend's to refuse.)
    unsafe fn managed_prefetch(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        to: ManagedLocation,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Gives `advice` for `ptr..ptr+bytes` (`bytes` > 0) of managed memory of `device`, by its
    /// device address (`cuMemAdvise`). Synchronous; a hint that changes no byte.
    fn managed_advise(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        advice: ManagedAdvice,
    ) -> Result<()>;
}
