//! What a device array's memory is: a device allocation, host memory mapped into the device,
//! or device memory owned elsewhere.
//!
//! Defined here, with the memory it holds, rather than with the arrays: streams keep it alive
//! ([`KeepAlive::Storage`](crate::memory::KeepAlive::Storage), see `keep_alive`) and look into
//! it, and arrays sit above streams.

use crate::backend::DevicePtr;
use crate::device::Device;
use crate::memory::{DeviceAlloc, ForeignMemory, HostBuffer};
use std::sync::Arc;

/// Shared memory behind one or more arrays.
#[derive(Debug, Clone)]
pub(crate) enum Storage {
    /// Device memory.
    Device(Arc<DeviceAlloc>),
    /// Page-locked host memory mapped into the device address space (zero copy).
    Mapped(Arc<HostBuffer>),
    /// Device memory owned elsewhere (raw pointers, DLPack, IPC).
    Foreign(Arc<ForeignMemory>),
}

impl Storage {
    pub(crate) fn device(&self) -> &Device {
        match self {
            Storage::Device(alloc) => alloc.device(),
            Storage::Mapped(buffer) => buffer.device(),
            Storage::Foreign(memory) => memory.device(),
        }
    }

    /// Device address of the first byte.
    pub(crate) fn base(&self) -> DevicePtr {
        match self {
            Storage::Device(alloc) => alloc.ptr(),
            Storage::Mapped(buffer) => buffer.device_ptr().unwrap_or(DevicePtr::NULL),
            Storage::Foreign(memory) => memory.ptr(),
        }
    }

    /// The host buffer, for mapped memory (whose host side must wait for device work).
    pub(crate) fn host_buffer(&self) -> Option<&Arc<HostBuffer>> {
        match self {
            Storage::Device(_) | Storage::Foreign(_) => None,
            Storage::Mapped(buffer) => Some(buffer),
        }
    }

    /// `true` when both are the same memory.
    pub(crate) fn same_as(&self, other: &Storage) -> bool {
        match (self, other) {
            (Storage::Device(a), Storage::Device(b)) => Arc::ptr_eq(a, b),
            (Storage::Mapped(a), Storage::Mapped(b)) => Arc::ptr_eq(a, b),
            (Storage::Foreign(a), Storage::Foreign(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether the byte at `offset` is aligned to `align` at its device address and, for mapped
    /// memory, at its host address too (the simulator and the host side access it there).
    pub(crate) fn is_aligned(&self, offset: usize, align: usize) -> bool {
        let device = (self.base().0 as usize).wrapping_add(offset);
        let host = match self {
            Storage::Device(_) | Storage::Foreign(_) => 0,
            Storage::Mapped(buffer) => (buffer.base().as_ptr() as usize).wrapping_add(offset),
        };
        device.is_multiple_of(align) && host.is_multiple_of(align)
    }
}
