//! Host memory the device can reach: page-locked allocations, and existing host memory
//! registered (page-locked, optionally mapped) for as long as the buffer lives.
//!
//! A `HostBuffer` is shared through an `Arc`; streams keep a clone while they use it, and every
//! host-side access first waits on its [`PendingUses`], so no safe code can read memory an
//! in-flight copy writes, or write or free memory an in-flight copy uses.

use crate::accounting::{MemoryKind, Ticket};
use crate::backend::{DevicePtr, HostAllocFlags, HostRegisterFlags, require};
use crate::device::Device;
use crate::error::Result;
use crate::memory::PendingUses;
use std::any::Any;
use std::ptr::NonNull;

/// Where the memory came from, which decides how it is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostBufferKind {
    /// `host_alloc`: freed with `host_free`.
    Allocated(HostAllocFlags),
    /// `host_register` over memory owned by `owner`: unregistered, then the owner is dropped.
    Registered(HostRegisterFlags),
    /// `managed_alloc`: freed with `managed_free`.
    Managed,
}

/// Page-locked host memory with its in-flight uses.
pub(crate) struct HostBuffer {
    device: Device,
    /// Start of the locked range (None for an empty range: nothing was locked).
    base: Option<NonNull<u8>>,
    bytes: usize,
    device_ptr: Option<DevicePtr>,
    /// The backend guaranteed the memory reads as zero when it was allocated.
    zeroed: bool,
    kind: HostBufferKind,
    /// Keeps registered memory alive; dropped after the memory is unregistered.
    _owner: Option<Box<dyn Any + Send>>,
    pending: PendingUses,
    /// Counts the memory while it is held (none for an empty range); released in `drop`.
    _ticket: Option<Ticket>,
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("base", &self.base)
            .field("bytes", &self.bytes)
            .field("device_ptr", &self.device_ptr)
            .field("kind", &self.kind)
            .finish()
    }
}

// SAFETY: the buffer is plain memory; the raw pointer is only dereferenced by code that has waited
// on `pending` (host side) or by the backend for operations the core enqueued. The owner box is
// `Send` and never accessed, only dropped.
unsafe impl Send for HostBuffer {}
// SAFETY: all shared access goes through `pending` (a mutex) or hands out the pointer for
// operations whose exclusivity is checked by the callers (`&mut` on the owning array type).
unsafe impl Sync for HostBuffer {}

/// The ticket of a buffer (none for an empty one). A function rather than a closure over
/// `base`, so that the caller's location reaches the ticket.
#[track_caller]
fn ticket(
    device: &Device,
    base: Option<NonNull<u8>>,
    kind: MemoryKind,
    bytes: usize,
) -> Option<Ticket> {
    base?;
    Some(Ticket::new(device.usage(), kind, bytes, None))
}

impl HostBuffer {
    /// Allocates page-locked host memory; `bytes == 0` allocates nothing.
    #[track_caller]
    pub(crate) fn allocate(device: &Device, bytes: usize, flags: HostAllocFlags) -> Result<Self> {
        let (base, device_ptr, zeroed) = if bytes == 0 {
            (None, None, true)
        } else {
            let alloc = crate::memory::allocate_or_release(device, || {
                device.backend().host_alloc(device.ordinal(), bytes, flags)
            })?;
            (Some(alloc.host), alloc.device, alloc.zeroed)
        };
        let kind = if flags.mapped {
            MemoryKind::Mapped
        } else {
            MemoryKind::PageLocked
        };
        Ok(HostBuffer {
            device: device.clone(),
            base,
            bytes,
            device_ptr,
            zeroed,
            kind: HostBufferKind::Allocated(flags),
            _owner: None,
            pending: PendingUses::default(),
            _ticket: ticket(device, base, kind, bytes),
        })
    }

    /// Allocates managed memory; `bytes == 0` allocates nothing.
    #[track_caller]
    pub(crate) fn allocate_managed(device: &Device, bytes: usize) -> Result<Self> {
        let (base, device_ptr, zeroed) = if bytes == 0 {
            (None, None, true)
        } else {
            let alloc = crate::memory::allocate_or_release(device, || {
                let backend = device.backend();
                require(backend.as_ref(), backend.managed(), "managed memory")?
                    .managed_alloc(device.ordinal(), bytes)
            })?;
            (Some(alloc.host), alloc.device, alloc.zeroed)
        };
        Ok(HostBuffer {
            device: device.clone(),
            base,
            bytes,
            device_ptr,
            zeroed,
            kind: HostBufferKind::Managed,
            _owner: None,
            pending: PendingUses::default(),
            _ticket: ticket(device, base, MemoryKind::Managed, bytes),
        })
    }

    /// Registers `bytes` bytes at `base`, owned by `owner`, for the device.
    ///
    /// # Safety
    /// `base..base+bytes` lies in memory owned by `owner` that does not move when `owner` moves
    /// (a heap buffer), and nothing else accesses it while this buffer lives except through it.
    #[track_caller]
    pub(crate) unsafe fn register(
        device: &Device,
        owner: Box<dyn Any + Send>,
        base: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> std::result::Result<Self, (crate::Error, Box<dyn Any + Send>)> {
        let (base, device_ptr) = if bytes == 0 {
            (None, None)
        } else {
            // SAFETY: the caller guarantees the range is valid memory that stays allocated (it is
            // owned by `owner`, which this buffer keeps until after `host_unregister`).
            match unsafe {
                device
                    .backend()
                    .host_register(device.ordinal(), base, bytes, flags)
            } {
                Ok(device_ptr) => (Some(base), device_ptr),
                Err(error) => return Err((error, owner)),
            }
        };
        Ok(HostBuffer {
            device: device.clone(),
            base,
            bytes,
            device_ptr,
            zeroed: false,
            kind: HostBufferKind::Registered(flags),
            _owner: Some(owner),
            pending: PendingUses::default(),
            _ticket: ticket(device, base, MemoryKind::Registered, bytes),
        })
    }

    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    /// `true` when the backend handed out the memory already zero-filled.
    pub(crate) fn is_zeroed(&self) -> bool {
        self.zeroed
    }

    /// Start of the memory; dangling (never dereferenced) for an empty buffer.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base.unwrap_or(NonNull::dangling())
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device address of the memory, when it is mapped.
    pub(crate) fn device_ptr(&self) -> Option<DevicePtr> {
        self.device_ptr
    }

    pub(crate) fn kind(&self) -> HostBufferKind {
        self.kind
    }

    pub(crate) fn pending(&self) -> &PendingUses {
        &self.pending
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // Streams hold an Arc while they use the buffer, so nothing is in flight here; waiting is
        // still cheap and keeps the invariant local.
        if let Err(error) = self.pending.wait_for_host(crate::memory::Access::Write) {
            self.device
                .report_release_error("waiting for host buffer users", error);
        }
        let Some(base) = self.base else { return };
        if let Some(ticket) = &self._ticket {
            self.device.usage().release(ticket);
        }
        let device = self.device.ordinal();
        let result = match self.kind {
            // SAFETY: `base` came from `host_alloc` on this device and is freed once, here, after
            // every use has completed.
            HostBufferKind::Allocated(_) => unsafe {
                self.device.backend().host_free(device, base)
            },
            HostBufferKind::Managed => {
                let backend = self.device.backend();
                require(backend.as_ref(), backend.managed(), "managed memory").and_then(|managed| {
                    // SAFETY: `base` came from `managed_alloc` on this device and is freed
                    // once, here, after every use has completed.
                    unsafe { managed.managed_free(device, base) }
                })
            }
            // SAFETY: `base` was registered on this device by `register` and is unregistered once,
            // here, before the owner in `self.owner` is dropped (fields drop after this body).
            HostBufferKind::Registered(_) => unsafe {
                self.device.backend().host_unregister(device, base)
            },
        };
        if let Err(error) = result {
            self.device
                .report_release_error("host memory release", error);
        }
    }
}
