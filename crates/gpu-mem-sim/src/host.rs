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
#[derive(Debug)]
pub(crate) struct HostTable {
    device: usize,
    pinned: BTreeMap<usize, Pinned>,
    registered: BTreeMap<usize, RegisteredRange>,
    /// Bytes page-locked now (allocations and registrations).
    locked: u64,
    /// The most that may be page-locked at once.
    limit: u64,
}

impl HostTable {
    pub(crate) fn new(device: usize, limit: u64) -> HostTable {
        HostTable {
            device,
            pinned: BTreeMap::new(),
            registered: BTreeMap::new(),
            locked: 0,
            limit,
        }
    }

    /// Refuses to page-lock `len` more bytes past the limit.
    fn check_limit(&self, len: usize, what: &str) -> Result<()> {
        let requested = len as u64;
        if self
            .locked
            .checked_add(requested)
            .is_some_and(|total| total <= self.limit)
        {
            return Ok(());
        }
        Err(Error::HostOutOfMemory {
            what: format!("{what} on simulator device {}", self.device),
            requested,
            reason: format!(
                "the simulator's page-locked limit is {} bytes and {} are locked already \
                 (GPU_MEM_SIM_PINNED_LIMIT raises it)",
                self.limit, self.locked
            ),
            report: None,
        })
    }

    /// Allocates `len` zeroed page-aligned bytes, within the page-locked limit. The memory is
    /// accounted from here on; hand it to [`HostTable::insert_pinned`].
    pub(crate) fn allocate(&mut self, len: usize) -> Result<(NonNull<u8>, AllocLayout)> {
        let what = "page-locked allocation";
        let layout =
            AllocLayout::from_size_align(len.max(1), PAGE).map_err(|_| Error::HostOutOfMemory {
                what: format!("{what} on simulator device {}", self.device),
                requested: len as u64,
                reason: "the size is larger than any allocation can be".into(),
                report: None,
            })?;
        self.check_limit(layout.size(), what)?;
        // SAFETY: the layout has a non-zero size. Zeroed memory comes from the allocator
        // (for large sizes, fresh zero pages that cost nothing until touched), so the core need
        // not fill it again.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::HostOutOfMemory {
            what: format!("{what} on simulator device {}", self.device),
            requested: len as u64,
            reason: "the host allocator refused".into(),
            report: None,
        })?;
        self.locked += layout.size() as u64;
        Ok((ptr, layout))
    }

    /// Gives back an allocation from [`HostTable::allocate`] that was never inserted (its
    /// mapping failed): frees it and its share of the page-locked limit.
    pub(crate) fn release_unmapped(&mut self, ptr: NonNull<u8>, layout: AllocLayout) {
        self.locked = self.locked.saturating_sub(layout.size() as u64);
        // SAFETY: `ptr` came from `allocate` with this layout and was never handed out.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
    }

    pub(crate) fn insert_pinned(&mut self, ptr: NonNull<u8>, pinned: Pinned) {
        self.pinned.insert(ptr.as_ptr() as usize, pinned);
    }

    pub(crate) fn remove_pinned(&mut self, ptr: NonNull<u8>) -> Result<Pinned> {
        let pinned = self
            .pinned
            .remove(&(ptr.as_ptr() as usize))
            .ok_or(Error::InvalidPointer {
                kind: "host",
                address: ptr.as_ptr() as u64,
                bytes: 0,
                reason: "not a page-locked allocation of this device (double free?)",
            })?;
        self.locked = self.locked.saturating_sub(pinned.layout.size() as u64);
        Ok(pinned)
    }

    /// Registers `start..start+len`; overlapping an existing registration is an error, as
    /// CUDA's `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`.
    pub(crate) fn register(&mut self, start: usize, range: RegisteredRange) -> Result<()> {
        let end = start
            .checked_add(range.len)
            .ok_or(Error::HostRegistration {
                address: start,
                bytes: range.len,
                reason: "the range runs past the end of the address space",
            })?;
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
        // Page-locked allocations are locked already (CUDA answers ALREADY_REGISTERED too), and
        // counting them twice would spend the page-locked limit for nothing.
        let in_pinned = self
            .pinned
            .range(..end)
            .next_back()
            .is_some_and(|(s, p)| s + p.layout.size() > start);
        if in_pinned {
            return Err(Error::HostRegistration {
                address: start,
                bytes: range.len,
                reason: "already page-locked (part of the range is a page-locked allocation)",
            });
        }
        self.check_limit(range.len, "host memory registration")?;
        self.locked += range.len as u64;
        self.registered.insert(start, range);
        Ok(())
    }

    pub(crate) fn unregister(&mut self, start: usize) -> Result<RegisteredRange> {
        let range = self
            .registered
            .remove(&start)
            .ok_or(Error::HostRegistration {
                address: start,
                bytes: 0,
                reason: "not registered (unregister takes the address given to register)",
            })?;
        self.locked = self.locked.saturating_sub(range.len as u64);
        Ok(range)
    }

    /// Whether `start..start + len` lies inside one page-locked allocation or registration.
    pub(crate) fn is_page_locked(&self, start: usize, len: usize) -> bool {
        let Some(end) = start.checked_add(len) else {
            return false;
        };
        let pinned = self
            .pinned
            .range(..=start)
            .next_back()
            .is_some_and(|(base, p)| base + p.layout.size() >= end);
        pinned
            || self
                .registered
                .range(..=start)
                .next_back()
                .is_some_and(|(base, r)| base + r.len >= end)
    }

    /// Number of live page-locked allocations and registrations (for leak checks).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.pinned.len(), self.registered.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_locked_ranges_are_found_whole_and_only_whole() {
        let mut table = HostTable::new(0, 1 << 30);
        let (ptr, layout) = table.allocate(3 * PAGE).unwrap_or_else(|e| panic!("{e}"));
        let base = ptr.as_ptr() as usize;
        table.insert_pinned(
            ptr,
            Pinned {
                layout,
                mapped: None,
            },
        );
        // Registered memory is only bookkeeping here: any address range will do.
        let registered = base + (1 << 20);
        table
            .register(
                registered,
                RegisteredRange {
                    len: 100,
                    mapped: None,
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(table.is_page_locked(base, 3 * PAGE));
        assert!(table.is_page_locked(base + 10, PAGE));
        assert!(
            !table.is_page_locked(base + 10, 3 * PAGE),
            "runs past the end"
        );
        assert!(!table.is_page_locked(base - 1, 2), "starts before it");
        assert!(table.is_page_locked(registered, 100));
        assert!(table.is_page_locked(registered + 99, 1));
        assert!(!table.is_page_locked(registered + 50, 51));
        assert!(!table.is_page_locked(registered + 100, 1));
        assert!(!table.is_page_locked(usize::MAX, 2), "overflowing range");
        let pinned = table.remove_pinned(ptr).unwrap_or_else(|e| panic!("{e}"));
        assert!(!table.is_page_locked(base, 1), "freed");
        // SAFETY: allocated above with this layout, freed once.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), pinned.layout) };
    }
}
