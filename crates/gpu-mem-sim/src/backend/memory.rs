//! [`Memory`] on the simulator: device memory from the device's address space, page-locked
//! memory from the host allocator, tracked in the device's host table.

use crate::host::{Pinned, RegisteredRange};
use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostAllocation, HostRegisterFlags, Memory};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

// SAFETY: device ranges come from an address space that never reuses an address (only the host
// blocks behind freed ranges are reused, once nothing refers to them), 256-byte aligned; host
// allocations are fresh, page-aligned, zeroed `std::alloc` memory owned by the caller until
// `host_free`; a registration records the range (and maps it when asked) without touching it.
// Frees wait for the whole device first (`DeviceActivity::wait_idle`).
unsafe impl Memory for SimBackend {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "device allocations must be non-empty".into(),
            });
        }
        d.memory.allocate(bytes)
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        reentry::refuse_in_kernel("free of device memory")?;
        let d = self.device(device)?;
        // cuMemFree synchronizes with outstanding work; so does the simulator.
        d.activity.wait_idle();
        d.memory.free(ptr)
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        let d = self.device(device)?;
        if bytes == 0 {
            // As CUDA and HSA: `cuMemHostAlloc` of 0 bytes is an invalid value.
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "page-locked allocations must be non-empty".into(),
            });
        }
        let mut host = lock(&d.host);
        let (ptr, layout) = host.allocate(bytes)?;
        let mapped = match flags
            .mapped
            .then(|| d.memory.map_host(ptr, bytes))
            .transpose()
        {
            Ok(mapped) => mapped,
            Err(e) => {
                host.release_unmapped(ptr, layout);
                return Err(e);
            }
        };
        host.insert_pinned(ptr, Pinned { layout, mapped });
        Ok(HostAllocation {
            host: ptr,
            device: mapped,
            zeroed: true,
        })
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("free of page-locked memory")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        let pinned = lock(&d.host).remove_pinned(host)?;
        if let Some(mapped) = pinned.mapped {
            d.memory.unmap_host(mapped);
        }
        // SAFETY: `host` was allocated by `host_alloc` with exactly this layout and has just been
        // removed from the table, so it is freed once.
        unsafe { std::alloc::dealloc(host.as_ptr(), pinned.layout) };
        Ok(())
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "cannot register an empty range".into(),
            });
        }
        let mut table = lock(&d.host);
        // Managed memory (and any other mapped window) is the simulator's own already.
        if d.memory.host_window(host.as_ptr(), bytes).is_some() {
            return Err(Error::HostRegistration {
                address: host.as_ptr() as usize,
                bytes,
                reason: "part of the range is memory the device maps already (managed or \
                         page-locked memory)",
            });
        }
        table.register(
            host.as_ptr() as usize,
            RegisteredRange {
                len: bytes,
                mapped: None,
            },
        )?;
        let mapped = match flags
            .mapped
            .then(|| d.memory.map_host(host, bytes))
            .transpose()
        {
            Ok(mapped) => mapped,
            Err(e) => {
                table.unregister(host.as_ptr() as usize)?;
                return Err(e);
            }
        };
        if let Some(ptr) = mapped {
            table.unregister(host.as_ptr() as usize)?;
            table.register(
                host.as_ptr() as usize,
                RegisteredRange {
                    len: bytes,
                    mapped: Some(ptr),
                },
            )?;
        }
        Ok(mapped)
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("host memory unregistration")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        let range = lock(&d.host).unregister(host.as_ptr() as usize)?;
        if let Some(mapped) = range.mapped {
            d.memory.unmap_host(mapped);
        }
        Ok(())
    }
}
