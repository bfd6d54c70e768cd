//! [`IpcMemory`] on the simulator: an exported allocation moves onto a shared file, which
//! another process maps into its address space (see `crate::ipc`).

use crate::{SimBackend, ipc, reentry};
use gpu_mem_core::backend::{DevicePtr, IpcMemHandle, IpcMemory};
use gpu_mem_core::{Error, Result};

// SAFETY: exporting keeps the allocation at its address (its block moves onto the shared
// file, with nothing writing it meanwhile); an opened handle is mapped as an imported region of
// its full length, kept until `ipc_close_handle`.
unsafe impl IpcMemory for SimBackend {
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        reentry::refuse_in_kernel("IPC handle export")?;
        let d = self.device(device)?;
        let region = d.memory.allocation(ptr)?;
        // The block's bytes move onto a shared file: nothing may be writing them meanwhile, and
        // a block not zeroed yet is zeroed first (`resolve` does it).
        d.activity.wait_idle();
        d.memory.resolve(ptr, region.len())?;
        ipc::export(&region)
    }

    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        let d = self.device(device)?;
        let (mapping, ptr) = ipc::import(handle)?;
        let len = usize::try_from(handle.bytes).map_err(|_| Error::Overflow {
            what: format!("an IPC mapping of {} bytes", handle.bytes),
        })?;
        d.memory.insert_imported(mapping, ptr, len)
    }

    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        reentry::refuse_in_kernel("IPC handle close")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        d.memory.remove_imported(ptr)
    }
}
