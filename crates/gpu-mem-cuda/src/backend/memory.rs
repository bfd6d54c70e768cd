//! [`Memory`] on CUDA: device memory from `cuMemAlloc` (or the device's default pool with
//! `GPU_MEM_CUDA_ALLOCATOR=pool`, see `device::pool_requested`), page-locked memory from
//! `cuMemHostAlloc`, registrations with `cuMemHostRegister`.
//!
//! # Contract
//!
//! * Out of memory is [`Error::OutOfMemory`] with free / total bytes; a pool allocation not
//!   256-byte aligned is given back and `cuMemAlloc` used instead.
//! * Page-locked memory not 256-byte aligned (the trait's promise) is freed and refused.
//! * Registration needs `CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED`; a range registered
//!   already is [`Error::HostRegistration`].
//! * On a lost device a release only updates the bookkeeping: the dead context took the memory.

use super::registry::AllocKind;
use super::{
    CudaBackend, DEVICE_ALIGNMENT, HOST_ALIGNMENT, flags, is_code, legacy_stream, nonzero_bytes,
    released,
};
use crate::driver::sys::CUresult;
use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostAllocation, HostRegisterFlags, Memory};
use gpu_mem_core::{BackendKind, Error, Result};
use std::ffi::c_void;
use std::ptr::NonNull;

// SAFETY: cuMemAlloc ranges (and pool ranges, checked 256-byte aligned) never overlap while
// live; cuMemHostAlloc memory, checked 256-byte aligned, is the caller's until cuMemFreeHost;
// cuMemHostRegister neither moves nor writes the range, and its device pointer maps that range
// until cuMemHostUnregister.
unsafe impl Memory for CudaBackend {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        nonzero_bytes(bytes)?;
        let slot = self.slot(device)?;
        let _cx = self.current(device)?;
        if slot.facts.stream_ordered_alloc
            && let Some(ptr) = self.alloc_stream_ordered(device, bytes)?
        {
            self.allocations
                .insert(device, ptr, AllocKind::StreamOrdered);
            self.owners.insert(ptr, device, bytes as u64);
            return Ok(DevicePtr(ptr));
        }
        let ptr = self
            .driver
            .mem_alloc(bytes)
            .map_err(|e| self.out_of_memory(device, bytes, e))?;
        self.allocations.insert(device, ptr, AllocKind::Plain);
        self.owners.insert(ptr, device, bytes as u64);
        Ok(DevicePtr(ptr))
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let kind = self.allocations.remove(device, ptr.0);
        if kind.is_some() {
            self.owners.remove(ptr.0);
        }
        if cx.is_none() && kind.is_some() {
            // The lost context took the allocation with it.
            return Ok(());
        }
        match kind {
            Some(AllocKind::StreamOrdered) => {
                // SAFETY: the pointer came from cuMemAllocAsync on this device (registry) and
                // the caller guarantees no enqueued work still uses it; the legacy stream orders
                // the free after all earlier work of blocking streams anyway.
                released(unsafe { self.driver.mem_free_async(ptr.0, legacy_stream()) })
            }
            // SAFETY: the pointer came from cuMemAlloc on this device (registry), freed once
            // (removed above), unused by enqueued work (caller).
            Some(AllocKind::Plain) => released(unsafe { self.driver.mem_free(ptr.0) }),
            None => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not an allocation of this backend on this device, or already freed",
            }),
        }
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        nonzero_bytes(bytes)?;
        let _cx = self.current(device)?;
        let raw = self
            .driver
            .mem_host_alloc(bytes, flags::host_alloc_flags(flags))?;
        let host = match NonNull::new(raw.cast::<u8>()) {
            Some(host) if (raw as u64).is_multiple_of(HOST_ALIGNMENT) => host,
            host => {
                if host.is_some() {
                    // SAFETY: `raw` was just allocated by cuMemHostAlloc and nothing else has
                    // seen it.
                    if let Err(err) = unsafe { self.driver.mem_free_host(raw) } {
                        tracing::warn!(%err, "freeing a refused host allocation failed");
                    }
                }
                return Err(Error::InvalidPointer {
                    kind: "host",
                    address: raw as u64,
                    bytes: bytes as u64,
                    reason: if host.is_some() {
                        "cuMemHostAlloc returned memory that is not 256-byte aligned"
                    } else {
                        "cuMemHostAlloc succeeded but returned a null pointer"
                    },
                });
            }
        };
        self.host_allocs.insert(device, host.as_ptr() as u64, bytes);
        if !flags.mapped {
            return Ok(HostAllocation {
                host,
                device: None,
                zeroed: false,
            });
        }
        // SAFETY: `raw` is a live allocation made with CU_MEMHOSTALLOC_DEVICEMAP just above.
        match unsafe { self.driver.mem_host_get_device_pointer(raw) } {
            Ok(device_ptr) => Ok(HostAllocation {
                host,
                device: Some(DevicePtr(device_ptr)),
                zeroed: false,
            }),
            Err(err) => {
                self.host_allocs.remove(device, host.as_ptr() as u64);
                // SAFETY: `raw` came from cuMemHostAlloc above and nothing else has seen it.
                if let Err(free_err) = unsafe { self.driver.mem_free_host(raw) } {
                    tracing::warn!(%free_err, "freeing an unmappable host allocation failed");
                }
                Err(err)
            }
        }
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.host_allocs.remove(device, host.as_ptr() as u64);
        if cx.is_none() {
            // The lost context's page-locked memory goes with it at the reset.
            return Ok(());
        }
        // SAFETY: the caller guarantees `host` came from host_alloc, is freed once and unused.
        released(unsafe { self.driver.mem_free_host(host.as_ptr().cast::<c_void>()) })
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        nonzero_bytes(bytes)?;
        if !self.slot(device)?.facts.host_register {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Cuda,
                feature: "registering host memory",
                reason: format!(
                    "device {device} reports CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 0; use pinned_array instead"
                ),
            });
        }
        let _cx = self.current(device)?;
        let raw = host.as_ptr().cast::<c_void>();
        let address = host.as_ptr() as usize;
        // SAFETY: the caller guarantees the range is valid host memory that outlives the
        // registration.
        let registered = unsafe {
            self.driver
                .mem_host_register(raw, bytes, flags::host_register_flags(flags))
        };
        if let Err(err) = registered {
            return Err(
                if is_code(&err, CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
                    Error::HostRegistration {
                        address,
                        bytes,
                        reason: "already registered",
                    }
                } else {
                    err
                },
            );
        }
        self.registrations.insert(device, address as u64, bytes);
        if !flags.mapped {
            return Ok(None);
        }
        // SAFETY: the range was registered with CU_MEMHOSTREGISTER_DEVICEMAP just above.
        match unsafe { self.driver.mem_host_get_device_pointer(raw) } {
            Ok(device_ptr) => Ok(Some(DevicePtr(device_ptr))),
            Err(err) => {
                self.registrations.remove(device, address as u64);
                // SAFETY: undoing the registration made above; nothing has used it.
                if let Err(undo) = unsafe { self.driver.mem_host_unregister(raw) } {
                    tracing::warn!(%undo, "unregistering an unmappable range failed");
                }
                Err(err)
            }
        }
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let address = host.as_ptr() as usize;
        // Out of the bookkeeping first: whatever the driver answers below, the registration
        // must not keep `reset_device` refusing for good.
        let registered = self.registrations.remove(device, address as u64);
        let not_registered = |bytes| Error::HostRegistration {
            address,
            bytes,
            reason: "not registered",
        };
        if cx.is_none() {
            // The lost context's registrations end with it.
            return registered.map(|_| ()).ok_or_else(|| not_registered(0));
        }
        // SAFETY: the caller guarantees `host` is the registered base and unused by enqueued work.
        let result = unsafe {
            self.driver
                .mem_host_unregister(host.as_ptr().cast::<c_void>())
        };
        match released(result) {
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) => {
                Err(not_registered(registered.unwrap_or(0)))
            }
            other => other,
        }
    }
}

impl CudaBackend {
    /// `cuMemAllocAsync` on the legacy stream; `None` when the pool cannot serve the request
    /// in a form the trait allows (unsupported, or not 256-byte aligned), so the caller falls
    /// back to `cuMemAlloc`.
    fn alloc_stream_ordered(&self, device: usize, bytes: usize) -> Result<Option<u64>> {
        // SAFETY: the legacy default stream (null) of the current context is always valid.
        match unsafe { self.driver.mem_alloc_async(bytes, legacy_stream()) } {
            Ok(ptr) if ptr.is_multiple_of(DEVICE_ALIGNMENT) => Ok(Some(ptr)),
            Ok(ptr) => {
                tracing::warn!(
                    ptr,
                    "pool allocation not 256-byte aligned; using cuMemAlloc"
                );
                // SAFETY: `ptr` was just allocated on the legacy stream and never used.
                unsafe { self.driver.mem_free_async(ptr, legacy_stream()) }?;
                Ok(None)
            }
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_NOT_SUPPORTED) => {
                tracing::info!(device, "cuMemAllocAsync not supported; using cuMemAlloc");
                Ok(None)
            }
            Err(err) => Err(self.out_of_memory(device, bytes, err)),
        }
    }
}
