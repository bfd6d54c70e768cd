//! Host memory the simulated driver knows about: page-locked allocations (`host_alloc`) and
//! registered ranges (`host_register`), with CUDA's rules (no double registration, unregister by
//! base address, free only what was allocated).

use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::{Error, Result};
use std::alloc::Layout as AllocLayout;
use std::collections::BTreeMap;
use std::ptr::NonNull;

/// Host page size used for page-locked allocations.
pub(crate) const PAGE: usize = 4096;

#[derive(Debug)]
pub(crate) struct Pinned {
    pub(crate) layout: AllocLayout,
    pub(crate) mapped: Option<DevicePtr>,
}

#[derive(Debug)]
pub(crate) struct RegisteredRange {
    pub(crate) len: usize,
    pub(crate) mapped: Option<DevicePtr>,
}

/// Page-locked and registered host memory of one device.
#[derive(Debug, Default)]
pub(crate) struct HostTable {
    pinned: BTreeMap<usize, Pinned>,
    registered: BTreeMap<usize, RegisteredRange>,
}

impl HostTable {
    /// Allocates `len` zeroed page-aligned bytes.
    pub(crate) fn allocate(&mut self, len: usize) -> Result<(NonNull<u8>, AllocLayout)> {
        let layout =
            AllocLayout::from_size_align(len.max(1), PAGE).map_err(|_| Error::Overflow {
                what: format!("host allocation of {len} bytes"),
            })?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::InvalidArgument {
            name: "bytes",
            reason: format!("the host could not allocate {len} page-locked bytes"),
        })?;
        Ok((ptr, layout))
    }

    pub(crate) fn insert_pinned(&mut self, ptr: NonNull<u8>, pinned: Pinned) {
        self.pinned.insert(ptr.as_ptr() as usize, pinned);
    }

    pub(crate) fn remove_pinned(&mut self, ptr: NonNull<u8>) -> Result<Pinned> {
        self.pinned
            .remove(&(ptr.as_ptr() as usize))
            .ok_or(Error::InvalidPointer {
                kind: "host",
                address: ptr.as_ptr() as u64,
                bytes: 0,
                reason: "not a page-locked allocation of this device (double free?)",
            })
    }

    /// Registers `start..start+len`; overlapping an existing registration is an error, as
    /// CUDA's `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`.
    pub(crate) fn register(&mut self, start: usize, range: RegisteredRange) -> Result<()> {
        let end = start + range.len;
        let overlaps_before = self
            .registered
            .range(..=start)
            .next_back()
            .is_some_and(|(s, r)| s + r.len > start);
        let overlaps_after = self.registered.range(start..end).next().is_some();
        if overlaps_before || overlaps_after {
            return Err(Error::HostRegistration {
                address: start,
                bytes: range.len,
                reason: "already registered (part of the range is registered)",
            });
        }
        self.registered.insert(start, range);
        Ok(())
    }

    pub(crate) fn unregister(&mut self, start: usize) -> Result<RegisteredRange> {
        self.registered
            .remove(&start)
            .ok_or(Error::HostRegistration {
                address: start,
                bytes: 0,
                reason: "not registered (unregister takes the address given to register)",
            })
    }

    /// Number of live page-locked allocations and registrations (for leak checks).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.pinned.len(), self.registered.len())
    }
}
