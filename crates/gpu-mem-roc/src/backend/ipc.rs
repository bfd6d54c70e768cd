//! Inter-process sharing of device allocations.
//!
//! * `ipc_get_handle`: `hsa_amd_ipc_memory_create` on the allocation's base with its **full
//!   length** (ROCr refuses any other; the length is the runtime's own size of the allocation
//!   from `hsa_amd_pointer_info`, which is the requested size rounded up to the pool granule, or
//!   that rounding when the query is missing). The 32-byte `hsa_amd_ipc_memory_t` (eight
//!   `uint32_t`, native byte order: both processes run on the same machine) is
//!   [`IpcMemHandle::data`]; [`IpcMemHandle::bytes`] is that full length.
//! * `ipc_open_handle`: `hsa_amd_ipc_memory_attach` with the handle and its full length, for this
//!   device's agent plus every device that enabled peer access to it; the mapping is recorded as
//!   an imported allocation of the device (copies and kernels may use it; `free` refuses it; it
//!   does not count as this device's memory use). ROCr maps the whole exported allocation
//!   whatever length the handle claims; the length is checked against what the runtime reports
//!   of the mapping (`hsa_amd_pointer_info`): on runtimes that report the exported block (older
//!   ROCr), a handle claiming more than it holds is refused and detached; runtimes that record
//!   the length the attach was given report that length back, and such a handle cannot be told
//!   from an honest one there (handles come from a cooperating process: IPC shares memory with
//!   it, it does not defend against it).
//! * `ipc_close_handle`: drains the device's streams, then `hsa_amd_ipc_memory_detach`.

use super::RocBackend;
use super::memory::DeviceAlloc;
use gpu_mem_core::backend::{DevicePtr, IpcMemHandle, IpcMemory};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;

/// Size of `hsa_amd_ipc_memory_t` in bytes.
pub const HANDLE_BYTES: usize = std::mem::size_of::<sys::hsa_amd_ipc_memory_t>();

fn to_bytes(handle: &sys::hsa_amd_ipc_memory_t) -> Vec<u8> {
    handle.handle.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fn from_bytes(data: &[u8]) -> Result<sys::hsa_amd_ipc_memory_t> {
    if data.len() != HANDLE_BYTES {
        return Err(Error::InvalidArgument {
            name: "IPC handle",
            reason: format!(
                "a ROC IPC handle is {HANDLE_BYTES} bytes (hsa_amd_ipc_memory_t), not {}",
                data.len()
            ),
        });
    }
    let mut handle = sys::hsa_amd_ipc_memory_t::default();
    for (word, chunk) in handle.handle.iter_mut().zip(data.chunks_exact(4)) {
        let mut raw = [0u8; 4];
        raw.copy_from_slice(chunk);
        *word = u32::from_ne_bytes(raw);
    }
    Ok(handle)
}

impl RocBackend {
    /// `Ok` when the runtime reports a mapping at `mapped` of at least `len` bytes.
    fn check_mapping(&self, mapped: usize, len: usize) -> std::result::Result<(), String> {
        let info = self
            .hsa
            .pointer_info(mapped)
            .map_err(|e| format!("cannot check the size of the mapping: {e}"))?;
        // The mapping may lie inside a larger block the runtime reports (a small allocation
        // exported as a fragment of a 2 MiB block, at an offset): it must end inside it.
        let base = info.agentBaseAddress as usize;
        let fits = mapped
            .checked_sub(base)
            .and_then(|offset| offset.checked_add(len))
            .is_some_and(|end| end <= info.sizeInBytes);
        if !fits {
            return Err(format!(
                "the handle claims {len} bytes at {mapped:#x}, but the runtime mapped {} bytes at \
                 {base:#x}",
                info.sizeInBytes
            ));
        }
        Ok(())
    }
}

// SAFETY: an attached mapping is recorded as an imported allocation of its full length (its
// size checked against what the runtime reports, where it reports the block) and detached only
// by `ipc_close_handle`, after the device's streams drain; exporting keeps the allocation.
unsafe impl IpcMemory for RocBackend {
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        let gpu = self.gpu(device)?;
        let entry = lock(&self.registry.device).get(&ptr.0).copied();
        let Some(alloc) = entry.filter(|a| a.device == device && a.imports == 0) else {
            return Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not the base of a live allocation of this device",
            });
        };
        let len = match self.hsa.pointer_info(ptr.0 as usize) {
            Ok(info) if info.sizeInBytes >= alloc.bytes => info.sizeInBytes,
            _ => alloc.bytes.next_multiple_of(gpu.device_pool.granule.max(1)),
        };
        // SAFETY: `ptr` is the base of a live pool allocation of `len` bytes (its full length).
        let handle = unsafe { self.hsa.ipc_memory_create(ptr.0 as *mut c_void, len) }?;
        Ok(IpcMemHandle {
            bytes: len as u64,
            data: to_bytes(&handle),
        })
    }

    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        self.gpu(device)?;
        let raw = from_bytes(&handle.data)?;
        let len = usize::try_from(handle.bytes)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| Error::InvalidArgument {
                name: "IPC handle",
                reason: format!("invalid allocation length {}", handle.bytes),
            })?;
        let peers = lock(&self.peer_access);
        let mut agents = vec![self.gpu(device)?.agent];
        agents.extend(self.peer_agents_of(&peers, device));
        // SAFETY: the agents come from the topology this runtime reported, initialised while
        // the backend lives.
        let mapped = unsafe { self.hsa.ipc_memory_attach(&raw, len, &agents) }?;
        // ROCr maps the whole exported allocation whatever `len` says: a handle that claims
        // more (corrupted, or forged) would let copies run past the mapping. The runtime's own
        // size of what it mapped decides.
        if let Err(reason) = self.check_mapping(mapped as usize, len) {
            // SAFETY: attached just above, used by nothing yet.
            if let Err(error) = unsafe { self.hsa.ipc_memory_detach(mapped) } {
                tracing::warn!(%error, "detaching a refused IPC mapping failed");
            }
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason,
            });
        }
        let address = mapped as u64;
        // Should the runtime hand out an address it mapped before (one mapping, counted, as
        // CUDA does for a handle opened again), each attach is still closed once.
        lock(&self.registry.device)
            .entry(address)
            .and_modify(|a| {
                a.imports = a.imports.saturating_add(1);
                a.bytes = a.bytes.max(len);
            })
            .or_insert(DeviceAlloc {
                device,
                bytes: len,
                imports: 1,
            });
        drop(peers);
        Ok(DevicePtr(address))
    }

    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        self.gpu(device)?;
        // Counted down (the last open taken out) before the runtime detaches, so that two
        // threads closing one mapping cannot both detach it; counted up again if detaching
        // fails.
        let closing = {
            let mut mappings = lock(&self.registry.device);
            match mappings.get_mut(&ptr.0) {
                Some(a) if a.device == device && a.imports > 1 => {
                    a.imports -= 1;
                    Some(*a)
                }
                Some(a) if a.device == device && a.imports == 1 => mappings.remove(&ptr.0),
                _ => None,
            }
        };
        let Some(closing) = closing else {
            return Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not an IPC mapping opened on this device, or already closed",
            });
        };
        self.drain_device_for_ordering(device);
        // SAFETY: a mapping from `ipc_memory_attach`, and this close matches one of its
        // attaches (counted down above); unused by enqueued work (caller; the device was drained
        // too).
        let detached = unsafe { self.hsa.ipc_memory_detach(ptr.0 as *mut c_void) };
        if detached.is_err() {
            lock(&self.registry.device)
                .entry(ptr.0)
                .and_modify(|a| a.imports = a.imports.saturating_add(1))
                .or_insert(DeviceAlloc {
                    imports: 1,
                    ..closing
                });
        }
        detached
    }
}

#[cfg(test)]
mod tests {
    use super::{HANDLE_BYTES, from_bytes, to_bytes};
    use gpu_mem_hsa_sys as sys;

    #[test]
    fn handles_round_trip_and_wrong_sizes_are_refused() {
        let handle = sys::hsa_amd_ipc_memory_t {
            handle: [1, 2, 3, 0xdead_beef, 5, 6, 7, u32::MAX],
        };
        let bytes = to_bytes(&handle);
        assert_eq!(bytes.len(), HANDLE_BYTES);
        assert_eq!(HANDLE_BYTES, 32);
        let back = from_bytes(&bytes).map(|h| h.handle);
        assert_eq!(back.ok(), Some(handle.handle));
        assert!(from_bytes(&bytes[..31]).is_err());
        assert!(from_bytes(&[0u8; 64]).is_err());
    }
}
