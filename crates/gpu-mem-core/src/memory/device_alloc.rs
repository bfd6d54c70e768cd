//! An owned device allocation, freed on drop.
//!
//! Arrays share a `DeviceAlloc` through an `Arc`; a stream that enqueues work on it keeps another
//! clone until that work has completed, so the memory is freed only after the last user — host
//! handle or in-flight operation — is gone.

use crate::backend::DevicePtr;
use crate::device::Device;
use crate::error::Result;

/// Device memory owned by gpu-mem.
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    device: Device,
    ptr: DevicePtr,
    /// Size, for diagnostics.
    #[allow(dead_code)]
    bytes: usize,
}

impl DeviceAlloc {
    /// Allocates `bytes` bytes; zero bytes gives the null pointer and no backend call (Numba's
    /// zero-size arrays have a NULL device pointer).
    pub(crate) fn new(device: &Device, bytes: usize) -> Result<DeviceAlloc> {
        let ptr = if bytes == 0 {
            DevicePtr::NULL
        } else {
            device.backend().alloc(device.ordinal(), bytes)?
        };
        Ok(DeviceAlloc {
            device: device.clone(),
            ptr,
            bytes,
        })
    }

    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    pub(crate) fn ptr(&self) -> DevicePtr {
        self.ptr
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: `ptr` came from `alloc` on this device and is freed only here, once. Every
        // enqueued operation that uses it holds an `Arc<DeviceAlloc>` until it has completed, so
        // reaching this drop means no work uses the memory any more.
        let result = unsafe { self.device.backend().free(self.device.ordinal(), self.ptr) };
        if let Err(error) = result {
            self.device.report_release_error("device free", error);
        }
    }
}
