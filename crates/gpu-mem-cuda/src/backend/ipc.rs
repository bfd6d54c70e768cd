//! [`IpcMemory`] on CUDA: `cuIpcGetMemHandle`, `cuIpcOpenMemHandle`, `cuIpcCloseMemHandle`.
//!
//! # Contract
//!
//! * Only `cuMemAlloc` allocations can be exported (not pool memory:
//!   [`Error::NotSupportedByBackend`]); the 64 handle bytes travel in [`IpcMemHandle::data`].
//! * Opening checks the mapping the driver made (`cuMemGetAddressRange`) against the bytes the
//!   handle claims, and counts opens of one allocation: each is closed once.
//! * Opening a handle in the process that made it is refused by the driver
//!   (`CUDA_ERROR_INVALID_CONTEXT`).

use super::registry::AllocKind;
use super::{CudaBackend, not_supported, released, unsupported_code};
use crate::driver::sys::{CU_IPC_HANDLE_SIZE, CUipcMem_flags};
use gpu_mem_core::backend::{DevicePtr, IpcMemHandle, IpcMemory};
use gpu_mem_core::{Error, Result};

// SAFETY: an opened mapping is checked to start at the returned address and to hold at least
// the bytes the handle claims, and is unmapped only by `ipc_close_handle` (counted per open);
// exporting neither frees nor moves the allocation.
unsafe impl IpcMemory for CudaBackend {
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        const FEATURE: &str = "IPC memory handles";
        match self.allocations.get(device, ptr.0) {
            Some(AllocKind::Plain) => {}
            Some(AllocKind::StreamOrdered) => {
                return Err(not_supported(
                    FEATURE,
                    "the allocation comes from the stream-ordered pool; cuIpcGetMemHandle exports cuMemAlloc memory only".into(),
                ));
            }
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not the start of an allocation of this backend on this device",
                });
            }
        }
        self.need(&["cuIpcGetMemHandle"], FEATURE)?;
        let bytes = self.owners.bytes_at(ptr.0).unwrap_or(0);
        let _cx = self.current(device)?;
        // SAFETY: `ptr` is the base of a live cuMemAlloc allocation of this device (registry).
        let data = unsafe { self.driver.ipc_get_mem_handle(ptr.0) }
            .map_err(|e| unsupported_code(e, FEATURE))?;
        Ok(IpcMemHandle {
            bytes,
            data: data.to_vec(),
        })
    }

    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        const FEATURE: &str = "IPC memory handles";
        let data: [u8; CU_IPC_HANDLE_SIZE as usize] =
            handle
                .data
                .as_slice()
                .try_into()
                .map_err(|_| Error::InvalidArgument {
                    name: "handle",
                    reason: format!(
                        "a CUDA IPC handle has {CU_IPC_HANDLE_SIZE} bytes, this one {}",
                        handle.data.len()
                    ),
                })?;
        self.need(
            &[
                "cuIpcOpenMemHandle",
                "cuIpcCloseMemHandle",
                "cuMemGetAddressRange",
            ],
            FEATURE,
        )?;
        let _cx = self.current(device)?;
        let ptr = self
            .driver
            .ipc_open_mem_handle(&data, CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.0)
            .map_err(|e| unsupported_code(e, FEATURE))?;
        // The handle's size is the sender's word (its fields are public, its bytes may come
        // from anywhere): the arrays over the mapping are bounded by what the driver mapped.
        let mapped = match self.driver.mem_get_address_range(ptr) {
            Ok((base, bytes)) if base == ptr && bytes as u64 >= handle.bytes => Ok(()),
            Ok((base, bytes)) => Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "it claims {} bytes, but the driver mapped {bytes} bytes at {base:#x} for it",
                    handle.bytes
                ),
            }),
            Err(e) => Err(e),
        };
        if let Err(e) = mapped {
            // SAFETY: opened just above in this context, closed once, used by nothing yet.
            if let Err(close) = unsafe { self.driver.ipc_close_mem_handle(ptr) } {
                tracing::warn!(error = %close, "closing a refused IPC mapping failed");
            }
            return Err(e);
        }
        // Opening a handle of an allocation this context has mapped already returns the same
        // mapping with the driver's count raised: each open is closed once.
        let mut claimed = handle.bytes;
        self.ipc_mappings.update(device, ptr, |open| match open {
            Some((bytes, opens)) => {
                claimed = claimed.max(bytes);
                Some((claimed, opens.saturating_add(1)))
            }
            None => Some((claimed, 1)),
        });
        self.owners.insert(ptr, device, claimed);
        Ok(DevicePtr(ptr))
    }

    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let open = self.ipc_mappings.update(device, ptr.0, |open| match open {
            Some((bytes, opens)) if opens > 1 => Some((bytes, opens - 1)),
            _ => None,
        });
        match open {
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not an IPC mapping opened on this device, or already closed",
                });
            }
            // The last open: the range is no longer this process's.
            Some((_, 1)) => self.owners.remove(ptr.0),
            Some(_) => {}
        }
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the mapping came from cuIpcOpenMemHandle on this device (registry) and this
        // close matches one of its opens (counted down above); when it is the last, nothing
        // uses the mapping (caller).
        released(unsafe { self.driver.ipc_close_mem_handle(ptr.0) })
    }
}
