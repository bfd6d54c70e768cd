//! An owned device allocation, freed on drop.
//!
//! Arrays share a `DeviceAlloc` through an `Arc`; a stream that enqueues work on it keeps another
//! clone until that work has completed, so the memory is freed only after the last user — host
//! handle or in-flight operation — is gone.

use crate::accounting::{MemoryKind, Ticket};
use crate::backend::DevicePtr;
use crate::device::Device;
use crate::error::Result;
use std::sync::atomic::{AtomicBool, Ordering};

/// Device memory owned by gpu-mem.
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    device: Device,
    ptr: DevicePtr,
    /// Counts the allocation while it lives (none for zero bytes: nothing was allocated).
    ticket: Option<Ticket>,
    /// Freed another way (a stream-ordered free): dropping frees nothing.
    disarmed: AtomicBool,
}

impl DeviceAlloc {
    /// Allocates `bytes` bytes; zero bytes gives the null pointer and no backend call (Numba's
    /// zero-size arrays have a NULL device pointer).
    #[track_caller]
    pub(crate) fn new(device: &Device, bytes: usize) -> Result<DeviceAlloc> {
        if bytes == 0 {
            return Ok(DeviceAlloc {
                device: device.clone(),
                ptr: DevicePtr::NULL,
                ticket: None,
                disarmed: AtomicBool::new(false),
            });
        }
        let ptr = crate::memory::allocate_or_release(device, || {
            device.backend().alloc(device.ordinal(), bytes)
        })?;
        Ok(DeviceAlloc {
            device: device.clone(),
            ptr,
            ticket: Some(Ticket::new(device.usage(), MemoryKind::Device, bytes, None)),
            disarmed: AtomicBool::new(false),
        })
    }

    /// Takes ownership of `bytes` bytes at `ptr`, allocated from the stream-ordered pool on
    /// `device` ordered on `stream`, to be freed on drop like any other.
    #[track_caller]
    pub(crate) fn adopt(device: &Device, ptr: DevicePtr, bytes: usize, stream: u64) -> DeviceAlloc {
        DeviceAlloc {
            device: device.clone(),
            ptr,
            ticket: Some(Ticket::new(
                device.usage(),
                MemoryKind::Pool,
                bytes,
                Some(stream),
            )),
            disarmed: AtomicBool::new(false),
        }
    }

    /// Forgets the memory (it was freed another way, and is counted as freed now): dropping
    /// frees nothing.
    pub(crate) fn disarm(&self) {
        self.disarmed.store(true, Ordering::Release);
        if let Some(ticket) = &self.ticket {
            ticket.release();
        }
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
        if self.ptr.is_null() || self.disarmed.load(Ordering::Acquire) {
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
