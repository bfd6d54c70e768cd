//! [`ManagedMemory`] on the simulator: a zeroed host block the device's address space maps.

use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{HostAllocation, ManagedMemory};
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

// SAFETY: managed memory is a fresh, zeroed, page-aligned host block owned by the caller, mapped
// at a device address of its own until `managed_free`, which waits for the device first.
unsafe impl ManagedMemory for SimBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "managed allocations must be non-empty".into(),
            });
        }
        let (ptr, host) = d.memory.allocate_managed(bytes)?;
        Ok(HostAllocation {
            host,
            device: Some(ptr),
            zeroed: true,
        })
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("free of managed memory")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        d.memory.free_managed(host)
    }
}
