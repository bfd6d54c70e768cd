//! Device memory gpu-mem did not allocate: a range another library owns (a DLPack producer, a
//! raw pointer with its owner or deleter), or an allocation of another process opened through an
//! IPC handle. Arrays share it through an `Arc` like their own allocations, so streams keep it
//! alive until their work is done, and it is released (the owner dropped, the deleter run, the
//! IPC mapping closed) only after the last user.

use crate::accounting::{MemoryKind, Ticket};
use crate::backend::{DevicePtr, require};
use crate::device::Device;
use std::any::Any;
use std::fmt;

/// How foreign memory is given back when the last array over it is gone.
pub(crate) enum Release {
    /// Dropping this value releases the memory (or keeps it alive until then).
    Owner(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
    /// Called once with the range's base address.
    Deleter(Box<dyn FnOnce(DevicePtr) + Send + Sync>),
    /// An allocation of another process mapped with `ipc_open_handle` at `base` (where the
    /// mapping starts, not necessarily the array: a handle may name a slice, or no element):
    /// closed with `ipc_close_handle`.
    IpcMapping {
        /// What `ipc_open_handle` returned.
        base: DevicePtr,
    },
}

/// A device range owned elsewhere.
pub(crate) struct ForeignMemory {
    device: Device,
    /// Lowest address of the range.
    base: DevicePtr,
    bytes: usize,
    release: Option<Release>,
    /// Counts the range while arrays use it (none when empty or not counted); released in
    /// `drop`.
    _ticket: Option<Ticket>,
}

impl fmt::Debug for ForeignMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match &self.release {
            Some(Release::Owner(_)) => "owner",
            Some(Release::Deleter(_)) => "deleter",
            Some(Release::IpcMapping { .. }) => "ipc mapping",
            None => "released",
        };
        f.debug_struct("ForeignMemory")
            .field("base", &format_args!("{:#x}", self.base.0))
            .field("bytes", &self.bytes)
            .field("release", &how)
            .finish()
    }
}

impl ForeignMemory {
    #[track_caller]
    pub(crate) fn new(
        device: &Device,
        base: DevicePtr,
        bytes: usize,
        release: Release,
        kind: Option<MemoryKind>,
    ) -> ForeignMemory {
        // A `match`, not a closure: the caller's location must reach the ticket.
        let ticket = match kind {
            Some(kind) if bytes > 0 => Some(Ticket::new(device.usage(), kind, bytes, None)),
            _ => None,
        };
        ForeignMemory {
            device: device.clone(),
            base,
            bytes,
            release: Some(release),
            _ticket: ticket,
        }
    }

    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    pub(crate) fn ptr(&self) -> DevicePtr {
        self.base
    }

    #[allow(dead_code)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for ForeignMemory {
    fn drop(&mut self) {
        if let Some(ticket) = &self._ticket {
            self.device.usage().release(ticket);
        }
        match self.release.take() {
            Some(Release::Owner(owner)) => drop(owner),
            Some(Release::Deleter(deleter)) => deleter(self.base),
            Some(Release::IpcMapping { base }) => {
                let backend = self.device.backend();
                let result = require(backend.as_ref(), backend.ipc(), "IPC memory handles")
                    .and_then(|ipc| {
                        // SAFETY: `base` came from `ipc_open_handle` on this device (the only
                        // place that makes this kind) and is closed here, once; every enqueued
                        // operation using it holds an `Arc` of this value, so none is in flight.
                        unsafe { ipc.ipc_close_handle(self.device.ordinal(), base) }
                    });
                if let Err(error) = result {
                    self.device.report_release_error("IPC handle close", error);
                }
            }
            None => {}
        }
    }
}
