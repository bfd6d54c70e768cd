//! [`ManagedMemory`] on CUDA: `cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)`, freed with `cuMemFree`.
//!
//! # Contract
//!
//! * Host and device address are the same; an allocation not 4096-byte aligned (the trait's
//!   host promise) is freed and refused.
//! * A device reporting `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0`, or a driver without the calls,
//!   is [`Error::NotSupportedByBackend`].

use super::{
    CudaBackend, HOST_ALIGNMENT, nonzero_bytes, not_supported, released, unsupported_code,
};
use crate::driver::sys::CUmemAttach_flags;
use gpu_mem_core::backend::{DevicePtr, HostAllocation, ManagedMemory};
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

// SAFETY: cuMemAllocManaged memory, checked 4096-byte aligned, is the caller's until
// `managed_free`, at the same address on the host and the device; it is freed only there, once
// (the registry refuses a second free).
unsafe impl ManagedMemory for CudaBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        nonzero_bytes(bytes)?;
        if !self.slot(device)?.facts.managed {
            return Err(not_supported(
                "managed memory",
                format!("device {device} reports CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0"),
            ));
        }
        self.need(&["cuMemAllocManaged", "cuMemFree"], "managed memory")?;
        let _cx = self.current(device)?;
        let ptr = self
            .driver
            .mem_alloc_managed(bytes, CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL.0)
            .map_err(|e| {
                unsupported_code(self.out_of_memory(device, bytes, e), "managed memory")
            })?;
        let host = NonNull::new(std::ptr::with_exposed_provenance_mut::<u8>(ptr as usize));
        let host = match host {
            Some(host) if ptr.is_multiple_of(HOST_ALIGNMENT) => host,
            _ => {
                // SAFETY: `ptr` was just allocated and nothing else has seen it.
                if let Err(err) = unsafe { self.driver.mem_free(ptr) } {
                    tracing::warn!(%err, "freeing a refused managed allocation failed");
                }
                return Err(Error::InvalidPointer {
                    kind: "managed",
                    address: ptr,
                    bytes: bytes as u64,
                    reason: "cuMemAllocManaged returned memory that is not 4096-byte aligned",
                });
            }
        };
        self.managed.insert(device, ptr, bytes);
        Ok(HostAllocation {
            host,
            device: Some(DevicePtr(ptr)),
            zeroed: false,
        })
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let address = host.as_ptr() as usize as u64;
        if self.managed.remove(device, address).is_none() {
            return Err(Error::InvalidPointer {
                kind: "managed",
                address,
                bytes: 0,
                reason: "not a managed allocation of this backend on this device, or already freed",
            });
        }
        if cx.is_none() {
            // The lost context took the allocation with it.
            return Ok(());
        }
        // SAFETY: the address came from cuMemAllocManaged on this device (registry), is freed
        // once (removed above) and unused by enqueued work (caller).
        released(unsafe { self.driver.mem_free(address) })
    }
}
