//! Simulated device memory: an address space of regions, each a separate host allocation (or,
//! for mapped host memory, a window onto host memory), with a capacity.
//!
//! Device addresses are synthetic (they are not host addresses), so a device pointer used as a
//! host pointer, an access past the end of an allocation, or a use after free is reported as an
//! error instead of silently touching host memory. Every access to a region holds its lock, so
//! racing operations from several streams are serialised rather than undefined.

use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::{BackendKind, Error, Result};
use std::alloc::Layout as AllocLayout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Alignment of device allocations (CUDA guarantees at least 256 bytes).
pub(crate) const DEVICE_ALIGN: usize = 256;

/// One allocation (or mapped window) in the device address space.
#[derive(Debug)]
pub(crate) struct Region {
    start: u64,
    len: usize,
    ptr: NonNull<u8>,
    /// `Some` when the region owns its memory (freed on drop).
    owned: Option<AllocLayout>,
    lock: Mutex<()>,
}

// SAFETY: the region's memory is only accessed while holding `lock` (or, for owned memory, when
// the last reference is dropped), so sharing the pointer between threads is safe.
unsafe impl Send for Region {}
// SAFETY: as above: all access is serialised by `lock`.
unsafe impl Sync for Region {}

impl Region {
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Host address of `offset` within the region (caller holds the lock to access it).
    pub(crate) fn host_ptr(&self, offset: usize) -> *mut u8 {
        self.ptr.as_ptr().wrapping_add(offset)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(layout) = self.owned {
            // SAFETY: `ptr` was allocated with exactly `layout` in `AddressSpace::allocate` and
            // this is the last reference to the region.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// A validated range inside a region.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub(crate) region: Arc<Region>,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

/// The address space and capacity accounting of one simulated device.
#[derive(Debug)]
pub(crate) struct AddressSpace {
    device: usize,
    capacity: u64,
    used: AtomicU64,
    next: AtomicU64,
    regions: RwLock<BTreeMap<u64, Arc<Region>>>,
    /// Mapped host windows by host address, so a copy whose host side lies in mapped memory
    /// can take that window's lock too.
    host_windows: RwLock<BTreeMap<usize, Arc<Region>>>,
}

impl AddressSpace {
    pub(crate) fn new(device: usize, capacity: u64) -> AddressSpace {
        // Each device gets its own 1 TiB window, starting well away from zero.
        let base = 0x7f00_0000_0000u64 + ((device as u64) << 40);
        AddressSpace {
            device,
            capacity,
            used: AtomicU64::new(0),
            next: AtomicU64::new(base),
            regions: RwLock::new(BTreeMap::new()),
            host_windows: RwLock::new(BTreeMap::new()),
        }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Number of live device allocations (mapped windows not included).
    pub(crate) fn live_allocations(&self) -> usize {
        self.read().values().filter(|r| r.owned.is_some()).count()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u64, Arc<Region>>> {
        self.regions.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<u64, Arc<Region>>> {
        self.regions.write().unwrap_or_else(|p| p.into_inner())
    }

    fn reserve_address(&self, len: usize) -> u64 {
        let step = (len as u64).div_ceil(DEVICE_ALIGN as u64).max(1) * DEVICE_ALIGN as u64;
        // Addresses are never reused, so a stale pointer can never reach a newer allocation.
        self.next
            .fetch_add(step + DEVICE_ALIGN as u64, Ordering::AcqRel)
    }

    /// Allocates `len` zeroed bytes, failing with `OutOfMemory` past the capacity.
    pub(crate) fn allocate(&self, len: usize) -> Result<DevicePtr> {
        let request = len as u64;
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let fits = used
                .checked_add(request)
                .is_some_and(|total| total <= self.capacity);
            if !fits {
                return Err(Error::OutOfMemory {
                    backend: BackendKind::Sim,
                    device: self.device,
                    requested: request,
                    free: self.capacity.saturating_sub(used),
                    total: self.capacity,
                });
            }
            match self.used.compare_exchange(
                used,
                used + request,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        let layout = match AllocLayout::from_size_align(len.max(1), DEVICE_ALIGN) {
            Ok(layout) => layout,
            Err(_) => {
                self.used.fetch_sub(request, Ordering::AcqRel);
                return Err(Error::Overflow {
                    what: format!("device allocation of {len} bytes"),
                });
            }
        };
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            self.used.fetch_sub(request, Ordering::AcqRel);
            return Err(Error::OutOfMemory {
                backend: BackendKind::Sim,
                device: self.device,
                requested: request,
                free: self.capacity.saturating_sub(self.used()),
                total: self.capacity,
            });
        };
        let start = self.reserve_address(len);
        let region = Region {
            start,
            len,
            ptr,
            owned: Some(layout),
            lock: Mutex::new(()),
        };
        self.write().insert(start, Arc::new(region));
        Ok(DevicePtr(start))
    }

    /// Frees an allocation made by [`AddressSpace::allocate`].
    pub(crate) fn free(&self, ptr: DevicePtr) -> Result<()> {
        let mut regions = self.write();
        match regions.get(&ptr.0) {
            Some(region) if region.owned.is_some() => {
                self.used.fetch_sub(region.len as u64, Ordering::AcqRel);
                regions.remove(&ptr.0);
                Ok(())
            }
            _ => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not the start of a live device allocation (double free?)",
            }),
        }
    }

    /// Maps `len` bytes of host memory at `host` into the address space.
    pub(crate) fn map_host(&self, host: NonNull<u8>, len: usize) -> DevicePtr {
        let start = self.reserve_address(len);
        let region = Arc::new(Region {
            start,
            len,
            ptr: host,
            owned: None,
            lock: Mutex::new(()),
        });
        // The window is known by its host address too, so a copy whose host side lies in this
        // memory (or a host access through the simulator) takes the same lock as device-side
        // accesses through the mapping.
        self.host_windows
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host.as_ptr() as usize, Arc::clone(&region));
        self.write().insert(start, region);
        DevicePtr(start)
    }

    /// Removes a mapping made by [`AddressSpace::map_host`].
    pub(crate) fn unmap_host(&self, ptr: DevicePtr) {
        let mut regions = self.write();
        if let Some(region) = regions.get(&ptr.0).filter(|r| r.owned.is_none()).cloned() {
            regions.remove(&ptr.0);
            let mut windows = self.host_windows.write().unwrap_or_else(|p| p.into_inner());
            let host = region.ptr.as_ptr() as usize;
            if windows.get(&host).is_some_and(|w| Arc::ptr_eq(w, &region)) {
                windows.remove(&host);
            }
        }
    }

    /// The mapped host window overlapping host memory `ptr..ptr+len`, if any.
    pub(crate) fn host_window(&self, ptr: *const u8, len: usize) -> Option<Arc<Region>> {
        let start = ptr as usize;
        let end = start.saturating_add(len.max(1));
        let windows = self.host_windows.read().unwrap_or_else(|p| p.into_inner());
        windows
            .range(..end)
            .next_back()
            .filter(|(host, region)| **host + region.len > start)
            .map(|(_, region)| Arc::clone(region))
    }

    /// Validates `ptr..ptr+len` and returns the region holding it.
    pub(crate) fn resolve(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        let invalid = |reason| Error::InvalidPointer {
            kind: "device",
            address: ptr.0,
            bytes: len as u64,
            reason,
        };
        let regions = self.read();
        let (_, region) = regions
            .range(..=ptr.0)
            .next_back()
            .ok_or_else(|| invalid("not inside any live device allocation"))?;
        let offset = ptr.0 - region.start;
        if offset > region.len as u64 {
            return Err(invalid("not inside any live device allocation"));
        }
        let offset = offset as usize;
        if offset.checked_add(len).is_none_or(|end| end > region.len) {
            return Err(invalid("the access runs past the end of its allocation"));
        }
        Ok(Range {
            region: Arc::clone(region),
            offset,
            len,
        })
    }
}
