//! [`ManagedMemory`]: memory the host and the device both address (optional, through
//! [`Backend::managed`](super::Backend::managed)).

use super::types::HostAllocation;
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
}
