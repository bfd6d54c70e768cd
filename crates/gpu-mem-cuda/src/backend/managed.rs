//! [`ManagedMemory`] on CUDA: `cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)`, freed with `cuMemFree`.
//!
//! # Contract
//!
//! * Host and device address are the same; an allocation not 4096-byte aligned (more than the
//!   trait's 256-byte host promise: the driver gives managed memory in pages) is freed and
//!   refused.
//! * A device reporting `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0`, or a driver without the calls,
//!   is [`Error::NotSupportedByBackend`].
//! * Prefetch is `cuMemPrefetchAsync_v2` on the caller's stream, advice `cuMemAdvise_v2`, both
//!   with a `CUmemLocation` (host, or a device by its `CUdevice`) and both from driver 12.2 on:
//!   an older driver, without the symbol, is [`Error::NotSupportedByBackend`]. So is a prefetch
//!   whose stream's device or destination device reports
//!   `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0` (such devices cannot migrate on
//!   request, and the host may not touch managed memory while they run work), and advice that
//!   sets a preferred location or an accessed-by mapping on such a device (the driver's rule);
//!   read-mostly advice and unsetting go through. Before the driver is asked, the range must lie
//!   in one managed allocation of the device (the registry); the stream is the driver's to
//!   check (adopted `CUstream`s are not in the registry), which refuses one of another context.

use super::{
    CudaBackend, MANAGED_ALIGNMENT, nonzero_bytes, not_supported, raw_stream, released,
    unsupported_code,
};
use crate::driver::sys::{
    CUdevice_attribute, CUmem_advise, CUmemAttach_flags, CUmemLocation,
    CUmemLocation_st__bindgen_ty_1, CUmemLocationType,
};
use gpu_mem_core::backend::{
    DevicePtr, HostAllocation, ManagedAdvice, ManagedLocation, ManagedMemory, StreamHandle,
};
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

impl CudaBackend {
    /// `Ok` when `ptr..ptr+bytes` (`bytes` > 0) lies in one managed allocation of `device`.
    fn managed_range(&self, device: usize, ptr: DevicePtr, bytes: usize) -> Result<()> {
        self.slot(device)?;
        nonzero_bytes(bytes)?;
        match self.managed.containing(device, ptr.0, bytes as u64) {
            Some(_) => Ok(()),
            None => Err(Error::InvalidPointer {
                kind: "managed",
                address: ptr.0,
                bytes: bytes as u64,
                reason: "not inside one managed allocation of this device",
            }),
        }
    }

    /// [`Error::NotSupportedByBackend`] for `feature` unless `device` reports
    /// `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS` (read at each call: the hints are rare
    /// next to the work they steer).
    fn concurrent_managed_access(&self, device: usize, feature: &'static str) -> Result<()> {
        let slot = self.slot(device)?;
        let attribute = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS;
        // A driver that does not know the attribute predates on-demand migration: no.
        let on = self
            .driver
            .device_get_attribute(attribute, slot.facts.handle)
            .unwrap_or(0);
        if on != 0 {
            return Ok(());
        }
        Err(not_supported(
            feature,
            format!("device {device} reports CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0"),
        ))
    }

    /// `at` as the driver names it; a device must exist, and when `migrating` (the memory is to
    /// move there or be mapped for it) report concurrent managed access.
    fn managed_location(
        &self,
        at: ManagedLocation,
        migrating: bool,
        feature: &'static str,
    ) -> Result<CUmemLocation> {
        let (type_, id) = match at {
            ManagedLocation::Host => (CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST, 0),
            ManagedLocation::Device(ordinal) => {
                let handle = self.slot(ordinal)?.facts.handle;
                if migrating {
                    self.concurrent_managed_access(ordinal, feature)?;
                }
                (CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, handle)
            }
        };
        Ok(CUmemLocation {
            type_,
            __bindgen_anon_1: CUmemLocation_st__bindgen_ty_1 { id },
        })
    }
}

// SAFETY: cuMemAllocManaged memory, checked 4096-byte aligned, is the caller's until
// `managed_free`, at the same address on the host and the device; it is freed only there, once
// (the registry refuses a second free). cuMemPrefetchAsync and cuMemAdvise change where pages
// live, never their bytes, and the driver keeps accesses coherent meanwhile.
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
            Some(host) if ptr.is_multiple_of(MANAGED_ALIGNMENT) => host,
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

    unsafe fn managed_prefetch(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        to: ManagedLocation,
        stream: StreamHandle,
    ) -> Result<()> {
        const FEATURE: &str = "managed memory prefetch";
        self.managed_range(device, ptr, bytes)?;
        self.need(&["cuMemPrefetchAsync"], FEATURE)?;
        // The stream's device must migrate on request as well as the destination.
        self.concurrent_managed_access(device, FEATURE)?;
        let location = self.managed_location(to, true, FEATURE)?;
        let _cx = self.current(device)?;
        // (An adopted `CUstream` is checked by the driver against the current context.)
        // SAFETY: the stream is a live one of this device's context (caller); the range lies in
        // a managed allocation of this device (registry) kept allocated until the prefetch ends.
        unsafe {
            self.driver
                .mem_prefetch_async(ptr.0, bytes, location, raw_stream(stream))
        }
        .map_err(|e| unsupported_code(e, FEATURE))
    }

    fn managed_advise(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        advice: ManagedAdvice,
    ) -> Result<()> {
        const FEATURE: &str = "managed memory advice";
        self.managed_range(device, ptr, bytes)?;
        self.need(&["cuMemAdvise"], FEATURE)?;
        let (code, location) = match advice {
            ManagedAdvice::SetReadMostly => (CUmem_advise::CU_MEM_ADVISE_SET_READ_MOSTLY, None),
            ManagedAdvice::UnsetReadMostly => (CUmem_advise::CU_MEM_ADVISE_UNSET_READ_MOSTLY, None),
            ManagedAdvice::SetPreferredLocation(at) => (
                CUmem_advise::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                Some((at, true)),
            ),
            ManagedAdvice::UnsetPreferredLocation => {
                (CUmem_advise::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, None)
            }
            ManagedAdvice::SetAccessedBy(at) => (
                CUmem_advise::CU_MEM_ADVISE_SET_ACCESSED_BY,
                Some((at, true)),
            ),
            ManagedAdvice::UnsetAccessedBy(at) => (
                CUmem_advise::CU_MEM_ADVISE_UNSET_ACCESSED_BY,
                Some((at, false)),
            ),
        };
        // Advice without a location ignores it: the advising device is passed.
        let (at, migrating) = location.unwrap_or((ManagedLocation::Device(device), false));
        let location = self.managed_location(at, migrating, FEATURE)?;
        let _cx = self.current(device)?;
        self.driver
            .mem_advise(ptr.0, bytes, code, location)
            .map_err(|e| unsupported_code(e, FEATURE))
    }
}
