//! Per-device state: static facts read once, and the device's primary context, retained on
//! first use and made current on whichever thread calls.

use super::limits::LaunchLimits;
use crate::driver::CudaDriver;
use crate::driver::sys::{CUcontext, CUdevice_attribute, CUdevice_v1};
use crate::nvrtc::ComputeCapability;
use gpu_mem_core::backend::DeviceInfo;
use gpu_mem_core::{BackendKind, Error, Result};
use std::sync::OnceLock;

/// Facts about one device that do not need a context.
#[derive(Debug, Clone)]
pub struct DeviceFacts {
    pub handle: CUdevice_v1,
    pub info: DeviceInfo,
    pub capability: ComputeCapability,
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` and the driver exports the stream-ordered
    /// allocator: `alloc` / `free` use `cuMemAllocAsync` / `cuMemFreeAsync`.
    pub stream_ordered_alloc: bool,
    /// Grid, block and shared-memory limits for kernel launches.
    pub limits: LaunchLimits,
}

impl DeviceFacts {
    /// Reads the device's attributes (no context is created).
    pub fn query(driver: &CudaDriver, ordinal: usize) -> Result<DeviceFacts> {
        let index = i32::try_from(ordinal).map_err(|_| Error::InvalidArgument {
            name: "device",
            reason: format!("ordinal {ordinal} does not fit a C int"),
        })?;
        let handle = driver.device_get(index)?;
        let attr = |a: CUdevice_attribute| driver.device_get_attribute(a, handle);
        let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let non_negative = |v: i32| u32::try_from(v).unwrap_or(0);
        let info = DeviceInfo {
            ordinal,
            name: driver.device_get_name(handle)?,
            arch: format!("sm_{major}{minor}"),
            total_memory: driver.device_total_mem(handle)? as u64,
            warp_size: non_negative(attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?),
            max_threads_per_block: non_negative(attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )?),
            // The per-block limit without opting in (cuFuncSetAttribute), which is what a
            // launch gets by default.
            max_shared_memory_per_block: non_negative(attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            )?) as usize,
            can_map_host_memory: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?
                != 0,
        };
        // Pools need driver 11.2; an older driver rejects the attribute itself, which only
        // means "no pools".
        let pools =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0) != 0;
        let stream_ordered_alloc =
            pools && driver.has("cuMemAllocAsync") && driver.has("cuMemFreeAsync");
        tracing::debug!(ordinal, name = %info.name, arch = %info.arch, stream_ordered_alloc, "CUDA device");
        let capability = ComputeCapability::new(non_negative(major), non_negative(minor));
        let limits = LaunchLimits::query(driver, handle)?;
        Ok(DeviceFacts {
            handle,
            info,
            capability,
            stream_ordered_alloc,
            limits,
        })
    }
}

/// A retained primary context. Stored as an address because `CUcontext` is a raw pointer;
/// the driver API lets any thread make a context current, so sharing the value is sound.
#[derive(Debug)]
pub struct PrimaryContext {
    context: usize,
}

impl PrimaryContext {
    pub fn raw(&self) -> CUcontext {
        self.context as CUcontext
    }
}

/// One device: its facts and its lazily retained primary context.
#[derive(Debug)]
pub struct DeviceSlot {
    pub facts: DeviceFacts,
    context: OnceLock<PrimaryContext>,
}

impl DeviceSlot {
    pub fn new(facts: DeviceFacts) -> DeviceSlot {
        DeviceSlot {
            facts,
            context: OnceLock::new(),
        }
    }

    /// Makes the device's primary context current on the calling thread, retaining it the
    /// first time. Every backend call that needs a context goes through here.
    pub fn make_current(&self, driver: &CudaDriver) -> Result<()> {
        let context = match self.context.get() {
            Some(c) => c,
            None => {
                let retained = driver.primary_ctx_retain(self.facts.handle)?;
                let fresh = PrimaryContext {
                    context: retained as usize,
                };
                if self.context.set(fresh).is_err() {
                    // Another thread retained it first; the primary context is reference
                    // counted, so give back this thread's extra reference.
                    // SAFETY: balances the retain just above; the context stays alive through
                    // the reference the winning thread stored.
                    if let Err(err) = unsafe { driver.primary_ctx_release(self.facts.handle) } {
                        tracing::warn!(%err, "releasing a duplicate primary-context reference failed");
                    }
                }
                self.context
                    .get()
                    .ok_or_else(|| Error::BackendUnavailable {
                        backend: BackendKind::Cuda,
                        reason: "the primary context vanished while being retained".to_string(),
                    })?
            }
        };
        // SAFETY: the context is a retained primary context, alive until `release` runs in
        // the backend's Drop, after which no method can be called.
        unsafe { driver.ctx_set_current(context.raw()) }
    }

    /// Releases the primary context if it was retained (called once, from the backend's Drop).
    pub fn release(&mut self, driver: &CudaDriver) {
        if self.context.take().is_some() {
            // SAFETY: balances the one retain this slot kept; nothing of the backend uses
            // the context afterwards (this runs in Drop).
            if let Err(err) = unsafe { driver.primary_ctx_release(self.facts.handle) } {
                tracing::warn!(%err, device = self.facts.info.ordinal, "cuDevicePrimaryCtxRelease failed");
            }
        }
    }
}
