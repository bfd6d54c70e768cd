//! An owned device allocation, freed on drop.
//!
//! Arrays share a `DeviceAlloc` through an `Arc`; a stream that enqueues work on it keeps another
//! clone until that work has completed, so the memory is freed only after the last user — host
//! handle or in-flight operation — is gone.

use crate::accounting::{MemoryKind, Ticket};
use crate::allocator::DeviceAllocator;
use crate::backend::DevicePtr;
use crate::device::Device;
use crate::error::{Error, Result};
use std::sync::Arc;
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
    /// The user's allocator the memory came from (`None`: the backend's), with the size it
    /// was asked for.
    source: Option<(Arc<dyn DeviceAllocator>, usize)>,
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
                source: None,
            });
        }
        let allocator = crate::sync::read(&device.usage().allocator).clone();
        // The backend may name the user's call in its reports (the simulator's memcheck).
        let _site = crate::backend::CallSite::enter();
        let ptr = crate::memory::allocate_or_release(device, || match &allocator {
            Some(allocator) => from_allocator(allocator.as_ref(), device.ordinal(), bytes),
            None => device.backend().alloc(device.ordinal(), bytes),
        })?;
        Ok(DeviceAlloc {
            device: device.clone(),
            ptr,
            ticket: Some(Ticket::new(device.usage(), MemoryKind::Device, bytes, None)),
            disarmed: AtomicBool::new(false),
            source: allocator.map(|allocator| (allocator, bytes)),
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
            source: None,
        }
    }

    /// Forgets the memory (it was freed another way, and is counted as freed now): dropping
    /// frees nothing.
    pub(crate) fn disarm(&self) {
        if !self.disarmed.swap(true, Ordering::AcqRel)
            && let Some(ticket) = &self.ticket
        {
            self.device.usage().release(ticket);
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
        if let Some(ticket) = &self.ticket {
            self.device.usage().release(ticket);
        }
        let ordinal = self.device.ordinal();
        let result = match &self.source {
            // SAFETY: `ptr` came from this allocator's `allocate(ordinal, bytes)` and is freed
            // only here, once; no work uses it any more (as below).
            Some((allocator, bytes)) => unsafe { allocator.free(ordinal, self.ptr, *bytes) },
            // SAFETY: `ptr` came from `alloc` on this device and is freed only here, once. Every
            // enqueued operation that uses it holds an `Arc<DeviceAlloc>` until it has
            // completed, so reaching this drop means no work uses the memory any more.
            None => unsafe { self.device.backend().free(ordinal, self.ptr) },
        };
        if let Err(error) = result {
            self.device.report_release_error("device free", error);
        }
    }
}

/// Memory from the user's allocator, checked where it can be: not null and 256-byte aligned
/// (refused otherwise, and given back).
fn from_allocator(
    allocator: &dyn DeviceAllocator,
    ordinal: usize,
    bytes: usize,
) -> Result<DevicePtr> {
    let ptr = allocator.allocate(ordinal, bytes)?;
    if !ptr.is_null() && ptr.0.is_multiple_of(crate::allocator::ALIGNMENT as u64) {
        return Ok(ptr);
    }
    if !ptr.is_null() {
        // SAFETY: `ptr` was just returned by `allocate(ordinal, bytes)` and nothing used it.
        let _ = unsafe { allocator.free(ordinal, ptr, bytes) };
    }
    Err(Error::InvalidPointer {
        kind: "device",
        address: ptr.0,
        bytes: bytes as u64,
        reason: "the device's allocator returned memory that is null or not 256-byte aligned",
    })
}

/// Device memory taken straight from the backend, past any allocator the device was given:
/// what an allocator ([`DeviceAllocator`]) hands out in pieces. Freed when dropped. Not counted
/// in the statistics (what the allocator hands out from it is).
///
/// It keeps the device's backend alive, not the `Device`: an allocator set on a device may
/// hold its blocks without keeping the device's handles (and their settings) alive in a circle.
pub struct RawDeviceMemory {
    backend: Arc<dyn crate::backend::Backend>,
    ordinal: usize,
    ptr: DevicePtr,
    bytes: usize,
}

impl std::fmt::Debug for RawDeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawDeviceMemory")
            .field("backend", &self.backend.kind())
            .field("device", &self.ordinal)
            .field("ptr", &format_args!("{:#x}", self.ptr.0))
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl RawDeviceMemory {
    /// Allocates `bytes` (> 0) bytes of `device`'s memory from its backend.
    pub fn new(device: &Device, bytes: usize) -> Result<RawDeviceMemory> {
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "raw device memory needs at least one byte".into(),
            });
        }
        let ptr = crate::memory::allocate_or_release(device, || {
            device.backend().alloc(device.ordinal(), bytes)
        })?;
        Ok(RawDeviceMemory {
            backend: Arc::clone(device.backend()),
            ordinal: device.ordinal(),
            ptr,
            bytes,
        })
    }

    /// The address of the first byte (256-byte aligned, as every backend's allocations).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The size.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

impl Drop for RawDeviceMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc` on this device and is freed only here, once; the
        // safe API hands out its address only, and whoever used it for work (an allocator's
        // arrays) promised that work is done before this value goes (the allocator keeps it).
        let result = unsafe { self.backend.free(self.ordinal, self.ptr) };
        if let Err(error) = result {
            tracing::error!(
                device = self.ordinal,
                "freeing raw device memory failed: {error}"
            );
        }
    }
}

impl Device {
    /// Takes the memory of this device's arrays from `allocator` from now on (Numba's External
    /// Memory Management plugins), for every handle of the device; arrays made before keep
    /// theirs, and give it back where it came from.
    pub fn set_allocator(&self, allocator: Arc<dyn DeviceAllocator>) {
        *crate::sync::write(&self.usage().allocator) = Some(allocator);
    }

    /// Goes back to the backend's allocator for new arrays.
    pub fn clear_allocator(&self) {
        *crate::sync::write(&self.usage().allocator) = None;
    }

    /// The name of the allocator new arrays come from, when one was set.
    pub fn allocator_name(&self) -> Option<String> {
        crate::sync::read(&self.usage().allocator)
            .as_ref()
            .map(|allocator| allocator.name().to_string())
    }
}
