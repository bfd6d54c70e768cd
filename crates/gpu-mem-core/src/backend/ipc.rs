//! [`IpcMemory`]: device allocations shared with other processes (optional, through
//! [`Backend::ipc`](super::Backend::ipc)).

use super::types::{DevicePtr, IpcMemHandle};
use crate::error::Result;

/// Exporting device allocations to other processes and mapping theirs (`cuIpcGetMemHandle`,
/// `cuIpcOpenMemHandle`; HSA: `hsa_amd_ipc_memory_*`).
///
/// # Safety
///
/// An implementation must uphold [`Backend`](super::Backend)'s contract, and:
///
/// * **Mappings.** [`IpcMemory::ipc_open_handle`] returns, on `Ok`, the device address of a
///   mapping of at least [`IpcMemHandle::bytes`] bytes, aligned as the allocations of
///   [`Memory::alloc`](super::Memory::alloc) are, which stays valid until it is passed to
///   [`IpcMemory::ipc_close_handle`].
/// * **Exports.** [`IpcMemory::ipc_get_handle`] neither frees nor moves the allocation it
///   exports.
pub unsafe trait IpcMemory: Send + Sync {
    /// A handle another process can open to map the device allocation starting at `ptr`
    /// (`cuIpcGetMemHandle`; HSA: `hsa_amd_ipc_memory_create`).
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle>;

    /// Maps an allocation exported by another process into `device`'s address space, returning
    /// its address there (`cuIpcOpenMemHandle`; HSA: `hsa_amd_ipc_memory_attach`). The mapping
    /// stays valid until [`IpcMemory::ipc_close_handle`].
    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr>;

    /// Unmaps memory opened with [`IpcMemory::ipc_open_handle`] (`cuIpcCloseMemHandle`; HSA:
    /// `hsa_amd_ipc_memory_detach`).
    ///
    /// # Safety
    /// `ptr` came from `ipc_open_handle` on this device, is closed once, and no enqueued work
    /// still uses it.
    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()>;
}
