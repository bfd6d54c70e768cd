//! Per-device state: static facts read once, and the device's primary context, retained on
//! first use and made current on whichever thread calls.

use super::limits::LaunchLimits;
use crate::driver::CudaDriver;
use crate::driver::sys::{CUcontext, CUdevice_attribute, CUdevice_v1};
use crate::nvrtc::ComputeCapability;
use gpu_mem_core::backend::DeviceInfo;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::sync::Mutex;

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
    /// `CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED` (drivers too old to know the attribute
    /// predate devices without it: taken as supported).
    pub host_register: bool,
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` (0 when the driver does not know it).
    pub pools: bool,
    /// `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY` (0 when the driver does not know it).
    pub managed: bool,
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
        let managed =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY).unwrap_or(0) != 0;
        let stream_ordered_alloc = pools
            && driver.has("cuMemAllocAsync")
            && driver.has("cuMemFreeAsync")
            && pool_requested()?;
        tracing::debug!(ordinal, name = %info.name, arch = %info.arch, stream_ordered_alloc, "CUDA device");
        let capability = ComputeCapability::new(non_negative(major), non_negative(minor));
        let limits = LaunchLimits::query(driver, handle)?;
        let host_register =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED).unwrap_or(1) != 0;
        Ok(DeviceFacts {
            host_register,
            pools,
            managed,
            handle,
            info,
            capability,
            stream_ordered_alloc,
            limits,
        })
    }
}

/// One device: its facts and its lazily retained primary context (an address: the driver API
/// lets any thread make a context current, so sharing the value is sound). `None` until first
/// use, and again after [`DeviceSlot::release`].
#[derive(Debug)]
pub struct DeviceSlot {
    pub facts: DeviceFacts,
    /// Single assignments only: a poisoned lock is still consistent.
    context: Mutex<Option<usize>>,
    /// Set once gpu-mem has given the default pool its release threshold
    /// ([`default_release_threshold`], at the first stream-ordered allocation).
    pub pool_threshold_set: std::sync::Once,
}

/// The release threshold gpu-mem gives the device's default pool before its first
/// stream-ordered allocation: the device's whole memory, RMM's default for its pool, so freed
/// memory stays in the pool for the next `cuMemAllocAsync` instead of going back to the OS at
/// every synchronize (the driver's default of 0 makes a loop that allocates, works and
/// synchronizes pay that round trip each time). An allocation that then finds no room trims the
/// pool and tries again (the core's out-of-memory path), so plain `cuMemAlloc` still gets what
/// the pool keeps. Not measured on a GPU yet: `hw-bench alloc` in the hardware bundle measures
/// the pool with thresholds 0 and this one. `MemoryPool::set_release_threshold` changes it.
pub fn default_release_threshold(facts: &DeviceFacts) -> u64 {
    facts.info.total_memory
}

/// The calling thread's context before a backend call, put back when the call ends.
///
/// A caller that had its own context current (another library's, or a context it made with
/// `cuCtxCreate`) gets it back; a thread that had none keeps the device's primary context
/// current, so the next call finds it already set (one `cuCtxGetCurrent`, no switch).
#[must_use = "the previous context is restored when this is dropped"]
#[derive(Debug)]
pub struct Current<'a> {
    driver: &'a CudaDriver,
    restore: Option<usize>,
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        if let Some(previous) = self.restore {
            // SAFETY: `previous` was current on this thread when the call began, so the caller
            // keeps it alive (it is theirs); setting it back is what they had.
            if let Err(err) = unsafe { self.driver.ctx_set_current(previous as CUcontext) } {
                tracing::warn!(%err, "restoring the caller's CUDA context failed");
            }
        }
    }
}

impl DeviceSlot {
    pub fn new(facts: DeviceFacts) -> DeviceSlot {
        DeviceSlot {
            facts,
            context: Mutex::new(None),
            pool_threshold_set: std::sync::Once::new(),
        }
    }

    /// The device's primary context, retained the first time (it stays retained until
    /// [`DeviceSlot::release`]). Peer calls name a second device's context this way.
    pub fn context(&self, driver: &CudaDriver) -> Result<CUcontext> {
        let mut slot = lock(&self.context);
        match *slot {
            Some(context) => Ok(context as CUcontext),
            None => {
                let retained = driver.primary_ctx_retain(self.facts.handle)?;
                driver.note_primary_context(retained, self.facts.handle);
                *slot = Some(retained as usize);
                Ok(retained)
            }
        }
    }

    /// Makes the device's primary context current on the calling thread, retaining it the
    /// first time; the returned guard puts the caller's own context back. Every backend call
    /// that needs a context goes through here.
    pub fn make_current<'a>(&self, driver: &'a CudaDriver) -> Result<Current<'a>> {
        let context = self.context(driver)? as usize;
        let previous = driver.ctx_get_current()? as usize;
        if previous == context {
            return Ok(Current {
                driver,
                restore: None,
            });
        }
        // SAFETY: the context is a retained primary context, alive until `release` (backend
        // Drop, or a reset, which first checks nothing of the backend uses the device).
        unsafe { driver.ctx_set_current(context as CUcontext) }?;
        Ok(Current {
            driver,
            restore: (previous != 0).then_some(previous),
        })
    }

    /// Releases the primary context if it was retained (from the backend's Drop or a reset).
    pub fn release(&self, driver: &CudaDriver) {
        let retained = lock(&self.context).take();
        if let Some(context) = retained {
            // A thread left with the released context current would use a dead handle later.
            if driver.ctx_get_current().ok().map(|c| c as usize) == Some(context) {
                // SAFETY: null unbinds the thread's context.
                if let Err(err) = unsafe { driver.ctx_set_current(std::ptr::null_mut()) } {
                    tracing::warn!(%err, "unbinding the primary context failed");
                }
            }
            // SAFETY: balances the one retain this slot kept; the slot no longer hands the
            // context out.
            if let Err(err) = unsafe { driver.primary_ctx_release(self.facts.handle) } {
                tracing::warn!(%err, device = self.facts.info.ordinal, "cuDevicePrimaryCtxRelease failed");
            }
        }
    }
}

/// The environment variable choosing the device allocator: `plain` (the default) or `pool`.
pub const ALLOCATOR_ENV: &str = "GPU_MEM_CUDA_ALLOCATOR";

/// Whether `GPU_MEM_CUDA_ALLOCATOR=pool` asks for the stream-ordered pool.
///
/// The default is `cuMemAlloc` / `cuMemFree`, as Numba does: the default pool through
/// `cuMemAllocAsync` on the legacy stream orders every allocation and free against the work of
/// every blocking stream (a cross-stream barrier), and with the pool's default release threshold
/// of 0 its memory goes back to the OS at every synchronize, so a loop that allocates, works
/// and synchronizes pays the OS round trip each time, unless the threshold is raised
/// (`StreamOrderedPool::pool_set_release_threshold`, `cuMemPoolSetAttribute`). `hw-bench alloc` in the
/// hardware bundle measures both.
fn pool_requested() -> Result<bool> {
    match std::env::var(ALLOCATOR_ENV) {
        Err(_) => Ok(false),
        Ok(value) => match value.trim() {
            "" | "plain" => Ok(false),
            "pool" => Ok(true),
            other => Err(Error::InvalidArgument {
                name: ALLOCATOR_ENV,
                reason: format!("{other:?}: expected plain (cuMemAlloc, the default) or pool"),
            }),
        },
    }
}
