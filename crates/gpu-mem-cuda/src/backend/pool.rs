//! [`StreamOrderedPool`] on CUDA: the device's default pool (`cuDeviceGetDefaultMemPool`),
//! `cuMemAllocAsync` / `cuMemFreeAsync`, and `cuMemPool*` for its settings.
//!
//! # Contract
//!
//! * A device reporting `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0`, a driver without the
//!   calls, and `CUDA_ERROR_NOT_SUPPORTED` are [`Error::NotSupportedByBackend`]: the core then
//!   allocates as usual.
//! * Memory from `cuMemAlloc` has no stream-ordered free, so `free_async` is
//!   [`Error::NotSupportedByBackend`] for it (the core then frees it as usual when its last
//!   user is gone); pool memory not 256-byte aligned is given back and refused.

use super::registry::AllocKind;
use super::{
    CudaBackend, DEVICE_ALIGNMENT, nonzero_bytes, not_supported, raw_stream, unsupported_code,
};
use crate::driver::sys::{CUmemPool_attribute, CUmemoryPool};
use gpu_mem_core::backend::{DevicePtr, PoolUsage, StreamHandle, StreamOrderedPool};
use gpu_mem_core::{Error, Result};

// SAFETY: cuMemAllocAsync memory, checked 256-byte aligned, never overlaps a live allocation and
// is usable by work enqueued on its stream after the call; cuMemFreeAsync gives it back only
// after the stream's earlier work.
unsafe impl StreamOrderedPool for CudaBackend {
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        nonzero_bytes(bytes)?;
        self.pools_supported(device, &["cuMemAllocAsync", "cuMemFreeAsync"])?;
        let _cx = self.current(device)?;
        self.give_pool_its_threshold(device);
        // SAFETY: the caller guarantees the stream is live and of this device.
        let ptr =
            unsafe { self.driver.mem_alloc_async(bytes, raw_stream(stream)) }.map_err(|e| {
                unsupported_code(
                    self.out_of_memory(device, bytes, e),
                    "stream-ordered allocation",
                )
            })?;
        if !ptr.is_multiple_of(DEVICE_ALIGNMENT) {
            // SAFETY: `ptr` was just allocated on this stream and never used.
            unsafe { self.driver.mem_free_async(ptr, raw_stream(stream)) }?;
            return Err(not_supported(
                "stream-ordered allocation",
                format!("cuMemAllocAsync returned {ptr:#x}, not {DEVICE_ALIGNMENT}-byte aligned"),
            ));
        }
        self.allocations
            .insert(device, ptr, AllocKind::StreamOrdered);
        self.owners.insert(ptr, device, bytes as u64);
        Ok(DevicePtr(ptr))
    }

    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()> {
        match self.allocations.get(device, ptr.0) {
            Some(AllocKind::StreamOrdered) => {}
            Some(AllocKind::Plain) => {
                return Err(not_supported(
                    "stream-ordered free",
                    "memory from cuMemAlloc has no stream-ordered free; it is freed when its last user is gone".into(),
                ));
            }
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not an allocation of this backend on this device, or already freed",
                });
            }
        }
        let cx = self.current_unless_lost(device)?;
        self.allocations.remove(device, ptr.0);
        self.owners.remove(ptr.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the pointer came from cuMemAllocAsync on this device (registry) and is freed
        // once (removed above); the caller guarantees only work on `stream`, ordered before
        // this free, still uses it, and that the stream is live.
        unsafe { self.driver.mem_free_async(ptr.0, raw_stream(stream)) }
    }

    fn pool_usage(&self, device: usize) -> Result<PoolUsage> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolGetAttribute")?;
        let get = |attribute: CUmemPool_attribute| {
            // SAFETY: the default pool lives as long as the device; the attributes read here
            // are the 64-bit ones.
            unsafe { self.driver.mem_pool_get_attribute_u64(pool, attribute) }
        };
        Ok(PoolUsage {
            used: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            reserved: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            release_threshold: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)?,
        })
    }

    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolSetAttribute")?;
        // SAFETY: the default pool lives as long as the device; RELEASE_THRESHOLD is a
        // cuuint64_t.
        unsafe {
            self.driver.mem_pool_set_attribute_u64(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                bytes,
            )
        }
    }

    fn pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolTrimTo")?;
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        // SAFETY: the default pool lives as long as the device.
        unsafe { self.driver.mem_pool_trim_to(pool, keep) }
    }
}

impl CudaBackend {
    /// Gives the default pool gpu-mem's release threshold, once per device, before its first
    /// stream-ordered allocation (`device::default_release_threshold`). A failure leaves the
    /// driver's threshold and is logged: allocations work either way.
    fn give_pool_its_threshold(&self, device: usize) {
        let Ok(slot) = self.slot(device) else { return };
        slot.pool_threshold_set.call_once(|| {
            let bytes = super::device::default_release_threshold(&slot.facts);
            if let Err(error) = self.pool_set_release_threshold(device, bytes) {
                tracing::warn!(device, %error, "could not set the pool's release threshold");
            }
        });
    }

    pub(super) fn pools_supported(&self, device: usize, symbols: &[&'static str]) -> Result<()> {
        if !self.slot(device)?.facts.pools {
            return Err(not_supported(
                "memory pools",
                format!("device {device} reports CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0"),
            ));
        }
        self.need(symbols, "memory pools")
    }

    /// The device's default pool (alive as long as the device's context).
    pub(super) fn default_pool(&self, device: usize, symbol: &'static str) -> Result<CUmemoryPool> {
        self.pools_supported(device, &["cuDeviceGetDefaultMemPool", symbol])?;
        let handle = self.slot(device)?.facts.handle;
        self.driver
            .device_get_default_mem_pool(handle)
            .map_err(|e| unsupported_code(e, "memory pools"))
    }
}
