//! Simulated device memory: an address space of regions, each backed by its own block of host
//! memory (or, for mapped host memory, a window onto host memory), with a capacity.
//!
//! Device addresses are synthetic (they are not host addresses), so a device pointer used as a
//! host pointer, an access past the end of an allocation, or a use after free is reported as an
//! error instead of silently touching host memory. Every access to a region holds its lock, so
//! racing operations from several streams are serialised rather than undefined.
//!
//! Like a GPU's memory, the host blocks behind device allocations stay resident: a freed
//! allocation's block goes to a per-device [`BlockCache`] and backs a later allocation of (about)
//! the same size, so a new array does not pay for the host kernel faulting in and zeroing fresh
//! pages. Only the block is reused, never the address: a freed range stays invalid for every
//! access. New allocations read as zero, as they always have on the simulator, but a reused
//! block is zeroed lazily and only where it is not about to be overwritten: a copy that covers
//! the whole allocation (`to_device`) never zeroes it at all.

use crate::sanitizer::Written;
use gpu_mem_core::backend::{DevicePtr, ManagedHints};
use gpu_mem_core::sync::{get_mut, lock, read, write};
use gpu_mem_core::{BackendKind, Error, Result};
use std::alloc::Layout as AllocLayout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

mod host_windows;
mod shared;
use host_windows::HostWindows;
pub(crate) use shared::{Mapping, SharedFile};

/// Alignment of device allocations (CUDA guarantees at least 256 bytes).
pub(crate) const DEVICE_ALIGN: usize = 256;

/// The most host memory a device keeps cached for reuse (less when its capacity is smaller).
pub(crate) const CACHE_LIMIT: u64 = 1 << 30;

/// A cached block may back an allocation up to this fraction (1/8) smaller than itself.
const REUSE_SLACK_SHIFT: u32 = 3;

/// A block of host memory that backed a device allocation: `std::alloc` memory of `layout`.
#[derive(Debug)]
struct Block {
    ptr: NonNull<u8>,
    layout: AllocLayout,
}

// SAFETY: a cached block is owned by the cache alone (no region refers to it), so it may be
// handed to, and freed by, any thread.
unsafe impl Send for Block {}

impl Block {
    fn free(self) {
        // SAFETY: `ptr` was allocated with exactly `layout` and is owned by this block alone.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[derive(Debug, Default)]
struct CacheState {
    bytes: u64,
    /// Blocks by size.
    blocks: BTreeMap<usize, Vec<Block>>,
}

impl CacheState {
    /// Removes the largest cached block.
    fn pop_largest(&mut self) -> Option<Block> {
        let mut entry = self.blocks.last_entry()?;
        let block = entry.get_mut().pop();
        if entry.get().is_empty() {
            entry.remove();
        }
        if let Some(block) = &block {
            self.bytes -= block.layout.size() as u64;
        }
        block
    }

    /// Removes blocks (largest first) until at most `keep` bytes are cached.
    fn evict_to(&mut self, keep: u64) -> Vec<Block> {
        let mut evicted = Vec::new();
        while self.bytes > keep {
            match self.pop_largest() {
                Some(block) => evicted.push(block),
                None => break,
            }
        }
        evicted
    }
}

/// Host blocks of freed device allocations, kept (up to a limit) to back new allocations.
#[derive(Debug)]
pub(crate) struct BlockCache {
    /// The release threshold: most bytes kept (also bounded by the device's capacity).
    limit: AtomicU64,
    state: Mutex<CacheState>,
}

impl BlockCache {
    fn new(limit: u64) -> BlockCache {
        BlockCache {
            limit: AtomicU64::new(limit),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// A cached block of at least `layout.size()` bytes (and not much more), aligned at least
    /// as `layout` asks (a page-sized request must not get a block a smaller request left), if
    /// there is one.
    fn take(&self, layout: AllocLayout) -> Option<Block> {
        let (size, align) = (layout.size(), layout.align());
        let most = size.saturating_add(size >> REUSE_SLACK_SHIFT);
        let mut state = lock(&self.state);
        let (found, index) = state
            .blocks
            .range(size..=most)
            .find_map(|(&found, blocks)| {
                let index = blocks.iter().rposition(|b| b.layout.align() >= align)?;
                Some((found, index))
            })?;
        let blocks = state.blocks.get_mut(&found)?;
        let block = blocks.swap_remove(index);
        if blocks.is_empty() {
            state.blocks.remove(&found);
        }
        state.bytes -= block.layout.size() as u64;
        Some(block)
    }

    /// Keeps a block for reuse, or frees it (or older blocks) past the limit.
    fn put(&self, block: Block) {
        let size = block.layout.size() as u64;
        let limit = self.limit.load(Ordering::Acquire);
        if size > limit {
            block.free();
            return;
        }
        let evicted = {
            let mut state = lock(&self.state);
            let evicted = state.evict_to(limit - size);
            state.bytes += size;
            state
                .blocks
                .entry(block.layout.size())
                .or_default()
                .push(block);
            evicted
        };
        evicted.into_iter().for_each(Block::free);
    }

    /// Frees cached blocks until at most `keep` bytes remain cached.
    fn trim(&self, keep: u64) {
        let evicted = lock(&self.state).evict_to(keep);
        evicted.into_iter().for_each(Block::free);
    }

    /// Changes the release threshold, freeing what is cached past it.
    fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Release);
        self.trim(limit);
    }

    fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Bytes cached now.
    fn bytes(&self) -> u64 {
        lock(&self.state).bytes
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        let state = get_mut(&mut self.state);
        std::mem::take(&mut state.blocks)
            .into_values()
            .flatten()
            .for_each(Block::free);
    }
}

/// One allocation (or mapped window) in the device address space.
#[derive(Debug)]
pub(crate) struct Region {
    start: u64,
    len: usize,
    ptr: NonNull<u8>,
    /// `Some` when the region owns its memory (returned to the cache on drop).
    owned: Option<Owned>,
    /// The memory must read as zero but has not been zeroed yet (a reused block): zeroed, except
    /// where a write is about to cover it, on first access (under `lock`).
    unzeroed: AtomicBool,
    lock: Mutex<()>,
    /// Managed memory: the host reaches it too (it is also a host window).
    managed: bool,
    /// Managed memory: the advice and prefetches given for it (`backend::managed`).
    hints: Mutex<ManagedHints>,
    /// The memory file the block was moved onto when it was exported to other processes.
    shared: Mutex<Option<SharedFile>>,
    /// Memory of another process mapped here by `ipc_open_handle` (unmapped on drop).
    imported: Option<Mapping>,
    /// initcheck: the bytes of a device allocation written since it was allocated (`None`
    /// where the device does not track them; `crate::sanitizer`).
    written: Option<Arc<Written>>,
    /// Where the user allocated it, when the public API said (`backend::call_site`).
    site: Option<&'static std::panic::Location<'static>>,
}

#[derive(Debug)]
struct Owned {
    layout: AllocLayout,
    /// Where the block goes when the region is dropped; `None`: freed (managed memory, whose
    /// page-aligned blocks are not interchangeable with device blocks).
    cache: Option<Arc<BlockCache>>,
}

// SAFETY: the region's memory is only accessed while holding `lock` (or, by kernels, through a
// range resolved with `AddressSpace::resolve`, under the launch contract), or when the last
// reference is dropped, so sharing the pointer between threads is safe.
unsafe impl Send for Region {}
// SAFETY: as above: all access is serialised by `lock`.
unsafe impl Sync for Region {}

impl Region {
    fn new(
        start: u64,
        len: usize,
        ptr: NonNull<u8>,
        owned: Option<Owned>,
        unzeroed: bool,
    ) -> Region {
        Region {
            start,
            len,
            ptr,
            owned,
            unzeroed: AtomicBool::new(unzeroed),
            lock: Mutex::new(()),
            managed: false,
            hints: Mutex::new(ManagedHints::default()),
            shared: Mutex::new(None),
            imported: None,
            written: None,
            site: None,
        }
    }

    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Size and alignment of the host block behind an owned region.
    // Used by the memory-file export (`ipc`), which only Linux outside Miri has.
    #[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
    pub(crate) fn block_layout(&self) -> Option<AllocLayout> {
        self.owned.as_ref().map(|o| o.layout)
    }

    /// The memory file this region was exported through, if it was.
    // Used by the memory-file export (`ipc`), which only Linux outside Miri has.
    #[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
    pub(crate) fn shared(&self) -> MutexGuard<'_, Option<SharedFile>> {
        lock(&self.shared)
    }

    /// Start of the region's host memory.
    // Used by the memory-file export (`ipc`), which only Linux outside Miri has.
    #[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
    pub(crate) fn base_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        lock(&self.lock)
    }

    /// The advice and prefetches recorded for managed memory (never set for other regions).
    pub(crate) fn hints(&self) -> MutexGuard<'_, ManagedHints> {
        lock(&self.hints)
    }

    /// Host address of `offset` within the region (caller holds the lock to access it).
    pub(crate) fn host_ptr(&self, offset: usize) -> *mut u8 {
        self.ptr.as_ptr().wrapping_add(offset)
    }

    /// Zeroes `offset..offset+len` of the region's memory.
    fn zero(&self, _guard: &MutexGuard<'_, ()>, offset: usize, len: usize) {
        if len > 0 {
            // SAFETY: callers pass a range inside the region (checked by `prepare_write`'s and
            // `materialize`'s arithmetic against `self.len`), and the region's lock is held.
            unsafe { std::ptr::write_bytes(self.host_ptr(offset), 0, len) };
        }
    }

    /// Makes sure the memory reads as zero where it was never written (call under the lock).
    fn materialize(&self, guard: &MutexGuard<'_, ()>) {
        if self.unzeroed.load(Ordering::Acquire) {
            self.zero(guard, 0, self.len);
            self.unzeroed.store(false, Ordering::Release);
        }
    }

    /// Prepares `offset..offset+len` (inside the region) to be overwritten: a region not zeroed
    /// yet is zeroed everywhere else, so the write leaves it fully defined. Call under the lock.
    /// Every host-side write calls it, so it also records the written bytes for initcheck.
    pub(crate) fn prepare_write(&self, guard: &MutexGuard<'_, ()>, offset: usize, len: usize) {
        self.mark_written(offset, len);
        if self.unzeroed.load(Ordering::Acquire) {
            let end = offset.saturating_add(len).min(self.len);
            let offset = offset.min(end);
            self.zero(guard, 0, offset);
            self.zero(guard, end, self.len - end);
            self.unzeroed.store(false, Ordering::Release);
        }
    }

    /// initcheck: `offset..offset+len` of the region was written (or handed to code whose
    /// writes are not seen, a closure kernel's arguments).
    pub(crate) fn mark_written(&self, offset: usize, len: usize) {
        if let Some(written) = &self.written {
            written.mark(offset, len);
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let shared = get_mut(&mut self.shared).take();
        if let Some(file) = shared {
            // The block's pages are the shared file's: give it private memory again before the
            // block is reused or freed, so other processes never see what it holds next.
            let size = self.owned.as_ref().map_or(0, |o| o.layout.size());
            if !file.unshare(self.ptr, size) {
                // Still shared: never reuse or free it (leaked rather than exposed).
                self.owned = None;
            }
        }
        if let Some(owned) = self.owned.take() {
            let block = Block {
                ptr: self.ptr,
                layout: owned.layout,
            };
            // This is the last reference to the region, so the block is unused from here on.
            match owned.cache {
                Some(cache) => cache.put(block),
                None => block.free(),
            }
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
    regions: Arc<RwLock<RegionMap>>,
    /// Address spaces of peer devices this device may address (`enable_peer_access`).
    peers: RwLock<Vec<(usize, Arc<RwLock<RegionMap>>)>>,
    /// Mapped host windows by host address, so a copy whose host side lies in mapped memory
    /// can take that window's lock too.
    host_windows: HostWindows,
    /// Host blocks of freed allocations, for reuse.
    cache: Arc<BlockCache>,
    /// initcheck: device allocations record the bytes written to them.
    track_writes: bool,
}

/// The regions of one device, by start address.
pub(crate) type RegionMap = BTreeMap<u64, Arc<Region>>;

/// Host page size: blocks of at least a page are whole, page-aligned pages (so they can be moved
/// onto a memory file and shared with another process).
pub(crate) const PAGE: usize = 4096;

/// Size of the host block behind an allocation of `len` bytes.
fn block_layout(len: usize) -> Option<AllocLayout> {
    let align = if len >= PAGE { PAGE } else { DEVICE_ALIGN };
    let size = len.max(1).checked_next_multiple_of(align)?;
    AllocLayout::from_size_align(size, align).ok()
}

/// The region holding `ptr..ptr+len` in `regions`: `None` when no region starts at or before
/// `ptr` close enough to contain its start.
fn find(
    regions: &RegionMap,
    ptr: DevicePtr,
    len: usize,
) -> Option<std::result::Result<Range, &'static str>> {
    let (_, region) = regions.range(..=ptr.0).next_back()?;
    let offset = ptr.0 - region.start;
    if offset > region.len as u64 {
        return None;
    }
    let offset = offset as usize;
    if offset.checked_add(len).is_none_or(|end| end > region.len) {
        return Some(Err("the access runs past the end of its allocation"));
    }
    Some(Ok(Range {
        region: Arc::clone(region),
        offset,
        len,
    }))
}

/// Bytes of address space each device hands out over its life (4 PiB): addresses are never
/// reused, so this bounds the total of all allocations a device makes, not what is live.
const WINDOW: u64 = 1 << 52;

/// First address of device `device`'s window (64 devices end below 2^59; the most devices a
/// simulator has, `SimBackend::MAX_DEVICES`, end below 2^64).
fn window_base(device: usize) -> u64 {
    0x7f00_0000_0000u64.wrapping_add((device as u64).wrapping_mul(WINDOW))
}

impl AddressSpace {
    pub(crate) fn new(device: usize, capacity: u64) -> AddressSpace {
        // Each device gets its own window (`WINDOW` bytes), starting well away from zero.
        let base = window_base(device);
        AddressSpace {
            device,
            capacity,
            used: AtomicU64::new(0),
            next: AtomicU64::new(base),
            regions: Arc::new(RwLock::new(BTreeMap::new())),
            peers: RwLock::new(Vec::new()),
            host_windows: HostWindows::new(),
            cache: Arc::new(BlockCache::new(capacity.min(CACHE_LIMIT))),
            track_writes: false,
        }
    }

    /// The same, its device allocations recording the bytes written to them when `initcheck`
    /// (one bit per byte; `crate::sanitizer`).
    pub(crate) fn tracking_writes(self, initcheck: bool) -> AddressSpace {
        AddressSpace {
            track_writes: initcheck,
            ..self
        }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Host memory kept for reuse by freed allocations (not counted as used device memory).
    pub(crate) fn cached(&self) -> u64 {
        self.cache.bytes()
    }

    /// Frees every cached host block.
    pub(crate) fn trim_cache(&self) {
        self.cache.trim(0);
    }

    /// Frees cached host blocks until at most `keep` bytes remain cached.
    pub(crate) fn trim_cache_to(&self, keep: u64) {
        self.cache.trim(keep);
    }

    /// The most freed memory kept cached.
    pub(crate) fn cache_limit(&self) -> u64 {
        self.cache.limit()
    }

    /// Sets the most freed memory kept cached (never more than the capacity).
    pub(crate) fn set_cache_limit(&self, bytes: u64) {
        self.cache.set_limit(bytes.min(self.capacity));
    }

    /// This device's regions, for a peer that may address them.
    pub(crate) fn shared_regions(&self) -> Arc<RwLock<RegionMap>> {
        Arc::clone(&self.regions)
    }

    /// Lets accesses through this address space reach `peer`'s regions.
    pub(crate) fn enable_peer(&self, peer: usize, regions: Arc<RwLock<RegionMap>>) {
        let mut peers = write(&self.peers);
        if !peers.iter().any(|(d, _)| *d == peer) {
            peers.push((peer, regions));
        }
    }

    /// What a checked kernel's threads may touch of global memory (`crate::sanitizer`): every
    /// region of this device and of the peers it may address, by host address.
    pub(crate) fn accessible(&self) -> crate::sanitizer::MemoryMap {
        let describe = |device: usize, r: &Region| crate::sanitizer::Allocation {
            host: r.ptr.as_ptr() as usize,
            len: r.len,
            device: r.start,
            device_index: device,
            what: if r.managed {
                "managed allocation"
            } else if r.imported.is_some() {
                "memory of another process"
            } else if r.owned.is_some() {
                "allocation"
            } else {
                "mapped host memory"
            },
            written: r.written.clone(),
            site: r.site,
        };
        let mut all: Vec<_> = self
            .read()
            .values()
            .map(|r| describe(self.device, r))
            .collect();
        for (peer, regions) in read(&self.peers).iter() {
            all.extend(read(regions).values().map(|r| describe(*peer, r)));
        }
        crate::sanitizer::MemoryMap::new(all)
    }

    /// Number of live device allocations (mapped windows not included).
    pub(crate) fn live_allocations(&self) -> usize {
        self.read().values().filter(|r| r.owned.is_some()).count()
    }

    /// Open mappings of other processes' memory.
    pub(crate) fn live_imports(&self) -> usize {
        self.read()
            .values()
            .filter(|r| r.imported.is_some())
            .count()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, RegionMap> {
        read(&self.regions)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, RegionMap> {
        write(&self.regions)
    }

    /// A fresh address range of `len` bytes in the device's window. Addresses are never
    /// reused, so a stale pointer can never reach a newer allocation; once the window is spent
    /// (4 PiB allocated over the device's life) reservations fail rather than run into the
    /// next device's window.
    fn reserve_address(&self, len: usize) -> Result<u64> {
        let step = (len as u64).div_ceil(DEVICE_ALIGN as u64).max(1) * DEVICE_ALIGN as u64;
        let start = self
            .next
            .fetch_add(step + DEVICE_ALIGN as u64, Ordering::AcqRel);
        let base = window_base(self.device);
        let end = base.wrapping_add(WINDOW);
        // (`start < base`: the counter wrapped after ~2^64 bytes of refused requests.)
        if start < base || start.checked_add(step).is_none_or(|last| last > end) {
            return Err(Error::Overflow {
                what: format!(
                    "simulator device {}'s address space: {} bytes allocated over its life",
                    self.device, WINDOW
                ),
            });
        }
        Ok(start)
    }

    fn out_of_memory(&self, request: u64, used: u64) -> Error {
        Error::OutOfMemory {
            backend: BackendKind::Sim,
            device: self.device,
            requested: request,
            free: self.capacity.saturating_sub(used),
            total: self.capacity,
            report: None,
        }
    }

    /// A fresh zeroed host block, freeing cached blocks first so that the device's resident
    /// memory (live plus cached) stays within its capacity.
    fn fresh_block(&self, layout: AllocLayout) -> Option<NonNull<u8>> {
        self.cache.trim(self.capacity.saturating_sub(self.used()));
        // SAFETY: the layout has a non-zero size (`block_layout` makes at least one byte).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(raw).or_else(|| {
            // The host is short of memory: give back everything cached and try once more.
            self.cache.trim(0);
            // SAFETY: as above.
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
        })
    }

    /// Allocates `len` bytes that read as zero, failing with `OutOfMemory` past the capacity.
    pub(crate) fn allocate(&self, len: usize) -> Result<DevicePtr> {
        let request = len as u64;
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let fits = used
                .checked_add(request)
                .is_some_and(|total| total <= self.capacity);
            if !fits {
                return Err(self.out_of_memory(request, used));
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
        let Some(layout) = block_layout(len) else {
            self.used.fetch_sub(request, Ordering::AcqRel);
            return Err(Error::Overflow {
                what: format!("device allocation of {len} bytes"),
            });
        };
        let start = match self.reserve_address(len) {
            Ok(start) => start,
            Err(e) => {
                self.used.fetch_sub(request, Ordering::AcqRel);
                return Err(e);
            }
        };
        // A cached block is resident already but holds a freed allocation's bytes, so it is
        // zeroed on first use; a fresh block is zero already.
        let (ptr, layout, unzeroed) = match self.cache.take(layout) {
            Some(block) => (block.ptr, block.layout, true),
            None => match self.fresh_block(layout) {
                Some(ptr) => (ptr, layout, false),
                None => {
                    self.used.fetch_sub(request, Ordering::AcqRel);
                    return Err(self.out_of_memory(request, self.used()));
                }
            },
        };
        let owned = Owned {
            layout,
            cache: Some(Arc::clone(&self.cache)),
        };
        let mut region = Region::new(start, len, ptr, Some(owned), unzeroed);
        if self.track_writes {
            region.written = Some(Arc::new(Written::new(len)));
        }
        region.site = gpu_mem_core::backend::call_site();
        self.write().insert(start, Arc::new(region));
        Ok(DevicePtr(start))
    }

    /// Reserves `len` bytes of the capacity.
    fn reserve(&self, len: usize) -> Result<()> {
        let request = len as u64;
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let fits = used
                .checked_add(request)
                .is_some_and(|total| total <= self.capacity);
            if !fits {
                return Err(self.out_of_memory(request, used));
            }
            match self.used.compare_exchange(
                used,
                used + request,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    /// Allocates `len` bytes of managed memory: a zeroed, page-aligned block counted against the
    /// capacity, at a device address, and known as a host window by its host address (so copies
    /// whose host side lies in it take its lock). Freed with [`AddressSpace::free_managed`].
    pub(crate) fn allocate_managed(&self, len: usize) -> Result<(DevicePtr, NonNull<u8>)> {
        self.reserve(len)?;
        let layout = len
            .max(1)
            .checked_next_multiple_of(PAGE)
            .and_then(|size| AllocLayout::from_size_align(size, PAGE).ok());
        let Some(layout) = layout else {
            self.used.fetch_sub(len as u64, Ordering::AcqRel);
            return Err(Error::Overflow {
                what: format!("managed allocation of {len} bytes"),
            });
        };
        let start = match self.reserve_address(len) {
            Ok(start) => start,
            Err(e) => {
                self.used.fetch_sub(len as u64, Ordering::AcqRel);
                return Err(e);
            }
        };
        let Some(ptr) = self.fresh_block(layout) else {
            self.used.fetch_sub(len as u64, Ordering::AcqRel);
            return Err(self.out_of_memory(len as u64, self.used()));
        };
        let owned = Owned {
            layout,
            cache: None,
        };
        let mut region = Region::new(start, len, ptr, Some(owned), false);
        region.managed = true;
        let region = Arc::new(region);
        self.host_windows
            .insert(ptr.as_ptr() as usize, Arc::clone(&region));
        self.write().insert(start, region);
        Ok((DevicePtr(start), ptr))
    }

    /// Frees managed memory by its host address.
    pub(crate) fn free_managed(&self, host: NonNull<u8>) -> Result<()> {
        let key = host.as_ptr() as usize;
        let region = self.host_windows.remove_if(key, |region| region.managed);
        let Some(region) = region else {
            return Err(Error::InvalidPointer {
                kind: "managed",
                address: key as u64,
                bytes: 0,
                reason: "not the start of a live managed allocation (double free?)",
            });
        };
        self.free(DevicePtr(region.start))
    }

    /// Inserts memory of another process (mapped by the caller) as a region; returns its address.
    pub(crate) fn insert_imported(
        &self,
        mapping: Mapping,
        ptr: NonNull<u8>,
        len: usize,
    ) -> Result<DevicePtr> {
        let start = self.reserve_address(len)?;
        let mut region = Region::new(start, len, ptr, None, false);
        region.imported = Some(mapping);
        self.write().insert(start, Arc::new(region));
        Ok(DevicePtr(start))
    }

    /// Removes a region made by [`AddressSpace::insert_imported`]; its memory is unmapped once
    /// the last in-flight use of it is done.
    pub(crate) fn remove_imported(&self, ptr: DevicePtr) -> Result<()> {
        let mut regions = self.write();
        match regions.get(&ptr.0) {
            Some(region) if region.imported.is_some() => {
                let region = regions.remove(&ptr.0);
                drop(regions);
                drop(region);
                Ok(())
            }
            _ => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not an open IPC mapping (closed twice?)",
            }),
        }
    }

    /// The live owned region starting at `ptr` (an allocation made by `allocate`).
    pub(crate) fn allocation(&self, ptr: DevicePtr) -> Result<Arc<Region>> {
        match self.read().get(&ptr.0) {
            Some(region) if region.owned.is_some() && !region.managed => Ok(Arc::clone(region)),
            _ => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not the start of a live device allocation",
            }),
        }
    }

    /// Frees an allocation made by [`AddressSpace::allocate`]. Its address is invalid from here
    /// on; its host block goes back to the cache once the last in-flight use of it is done.
    pub(crate) fn free(&self, ptr: DevicePtr) -> Result<()> {
        let mut regions = self.write();
        match regions.get(&ptr.0) {
            Some(region) if region.owned.is_some() => {
                if region.managed {
                    // Managed memory leaves the host windows too (`free_managed` did that).
                    self.host_windows.remove_region(region);
                }
                self.used.fetch_sub(region.len as u64, Ordering::AcqRel);
                let region = regions.remove(&ptr.0);
                drop(regions);
                drop(region);
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
    pub(crate) fn map_host(&self, host: NonNull<u8>, len: usize) -> Result<DevicePtr> {
        let start = self.reserve_address(len)?;
        let region = Arc::new(Region::new(start, len, host, None, false));
        // The window is known by its host address too, so a copy whose host side lies in this
        // memory (or a host access through the simulator) takes the same lock as device-side
        // accesses through the mapping.
        self.host_windows
            .insert(host.as_ptr() as usize, Arc::clone(&region));
        self.write().insert(start, region);
        Ok(DevicePtr(start))
    }

    /// Removes a mapping made by [`AddressSpace::map_host`].
    pub(crate) fn unmap_host(&self, ptr: DevicePtr) {
        let mut regions = self.write();
        if let Some(region) = regions
            .get(&ptr.0)
            .filter(|r| r.owned.is_none() && r.imported.is_none())
            .cloned()
        {
            regions.remove(&ptr.0);
            let host = region.ptr.as_ptr() as usize;
            self.host_windows
                .remove_if(host, |window| Arc::ptr_eq(window, &region));
        }
    }

    /// The mapped host window overlapping host memory `ptr..ptr+len`, if any.
    pub(crate) fn host_window(&self, ptr: *const u8, len: usize) -> Option<Arc<Region>> {
        self.host_windows.find(ptr, len)
    }

    /// Validates `ptr..ptr+len` and returns the region holding it, its memory defined (zeroed
    /// where never written), so the range may be read, or accessed without the region's lock.
    pub(crate) fn resolve(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        let range = self.resolve_write(ptr, len)?;
        if range.region.unzeroed.load(Ordering::Acquire) {
            let guard = range.region.lock();
            range.region.materialize(&guard);
        }
        Ok(range)
    }

    /// Validates `ptr..ptr+len` for a write made under the region's lock, after
    /// [`Region::prepare_write`] (so a write covering a whole reused block never zeroes it).
    pub(crate) fn resolve_write(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        let invalid = |reason| Error::InvalidPointer {
            kind: "device",
            address: ptr.0,
            bytes: len as u64,
            reason,
        };
        if let Some(found) = find(&self.read(), ptr, len) {
            return found.map_err(invalid);
        }
        let peers = read(&self.peers);
        for (_, regions) in peers.iter() {
            let regions = read(regions);
            if let Some(found) = find(&regions, ptr, len) {
                return found.map_err(invalid);
            }
        }
        // Name the owner when the address lies in another device's window.
        let owner = ptr
            .0
            .checked_sub(window_base(0))
            .map(|offset| offset / WINDOW);
        if owner.is_some_and(|d| d != self.device as u64 && d < 64) {
            return Err(invalid(
                "memory of another simulated device: enable peer access to it first",
            ));
        }
        Err(invalid("not inside any live device allocation"))
    }

    /// Validates that `ptr..ptr+len` (`len` > 0) lies in one live managed allocation of this
    /// device, and returns it (its memory as it is: nothing is read).
    pub(crate) fn managed_range(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        let invalid = |reason| Error::InvalidPointer {
            kind: "managed",
            address: ptr.0,
            bytes: len as u64,
            reason,
        };
        match find(&self.read(), ptr, len) {
            Some(Ok(range)) if range.region.managed && range.offset < range.region.len => Ok(range),
            Some(Err(reason)) => Err(invalid(reason)),
            _ => Err(invalid(
                "not inside a live managed allocation of this device",
            )),
        }
    }

    /// Validates `ptr..ptr+len` in this device's own regions only (peers not consulted).
    pub(crate) fn resolve_own(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        let range = self.resolve_own_write(ptr, len)?;
        if range.region.unzeroed.load(Ordering::Acquire) {
            let guard = range.region.lock();
            range.region.materialize(&guard);
        }
        Ok(range)
    }

    /// As [`AddressSpace::resolve_own`], for a range about to be overwritten: a region not
    /// zeroed yet is left to the writer (`Region::prepare_write` zeroes only the rest).
    pub(crate) fn resolve_own_write(&self, ptr: DevicePtr, len: usize) -> Result<Range> {
        match find(&self.read(), ptr, len) {
            Some(found) => found.map_err(|reason| Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: len as u64,
                reason,
            }),
            None => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: len as u64,
                reason: "not inside any live allocation of this device",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AddressSpace, WINDOW, window_base};

    /// The last device's window ends inside the 64-bit address space, after the one before.
    #[test]
    fn every_device_window_fits() {
        let last = crate::SimBackend::MAX_DEVICES - 1;
        assert!(window_base(last).checked_add(WINDOW).is_some());
        assert!(window_base(last) > window_base(last - 1));
    }
    use gpu_mem_core::Error;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_spent_address_window_refuses_instead_of_reaching_the_next_device() {
        let space = AddressSpace::new(0, 1 << 20);
        let end = window_base(0) + WINDOW;
        // As if 4 PiB less 512 bytes had been allocated over the device's life.
        space.next.store(end - 512, Ordering::Release);
        let last = space.allocate(256).unwrap();
        assert!(last.0 + 256 <= end && last.0 < window_base(1));
        match space.allocate(256) {
            Err(Error::Overflow { what }) => assert!(what.contains("address space"), "{what}"),
            other => panic!("expected Overflow, got {other:?}"),
        }
        // The refused allocation gave its capacity back.
        assert_eq!(space.used(), 256);
        space.free(last).unwrap();
        assert_eq!(space.used(), 0);
    }

    #[test]
    fn a_page_sized_allocation_never_reuses_a_block_of_smaller_alignment() {
        let space = AddressSpace::new(0, 1 << 20);
        // 3,900 bytes: a 4,096-byte block at 256-byte alignment, cached when freed.
        let small = space.allocate(3900).unwrap();
        space.free(small).unwrap();
        for _ in 0..8 {
            let page = space.allocate(4096).unwrap();
            let range = space.resolve(page, 4096).unwrap();
            let host = range.region.host_ptr(range.offset) as usize;
            assert_eq!(host % 4096, 0, "a page-sized block at {host:#x}");
            space.free(page).unwrap();
        }
    }
}
