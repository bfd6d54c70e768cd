//! The mapped host windows of one device's address space, by host address.
//!
//! Every copy between device memory and host memory looks its host side up here, to take the
//! window's lock too when the host side is mapped memory (a kernel may reach it meanwhile). Most
//! host memory is not mapped and many programs map none, so the lowest and highest host address
//! of any window are kept beside the map: a range outside them is answered without its lock.
//!
//! Guarantee: every window in the map lies inside the bounds at any time a lookup can see it.
//! The bounds are widened *before* a window goes into the map and narrowed *after* one left
//! it, both under the map's write lock, so a lookup that reads the bounds without the lock
//! misses only windows it could also have missed by looking just before they were inserted.

use super::Region;
use gpu_mem_core::sync::{read, write};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

#[derive(Debug)]
pub(crate) struct HostWindows {
    map: RwLock<BTreeMap<usize, Arc<Region>>>,
    /// Lowest host address of any window (`usize::MAX` when there is none).
    lo: AtomicUsize,
    /// One past the highest host address of any window (0 when there is none).
    hi: AtomicUsize,
}

impl HostWindows {
    pub(crate) fn new() -> HostWindows {
        HostWindows {
            map: RwLock::new(BTreeMap::new()),
            lo: AtomicUsize::new(usize::MAX),
            hi: AtomicUsize::new(0),
        }
    }

    /// Adds the window of `region`, whose memory starts at host address `host`.
    pub(crate) fn insert(&self, host: usize, region: Arc<Region>) {
        let mut map = self.write();
        self.lo.fetch_min(host, Ordering::SeqCst);
        self.hi
            .fetch_max(host.saturating_add(region.len), Ordering::SeqCst);
        map.insert(host, region);
    }

    /// Removes the window starting at `host` if `which` accepts it; returns it.
    pub(crate) fn remove_if(
        &self,
        host: usize,
        which: impl FnOnce(&Arc<Region>) -> bool,
    ) -> Option<Arc<Region>> {
        let mut map = self.write();
        let removed = match map.get(&host) {
            Some(region) if which(region) => map.remove(&host),
            _ => None,
        };
        if removed.is_some() {
            self.narrow(&map);
        }
        removed
    }

    /// Removes every window of `region`.
    pub(crate) fn remove_region(&self, region: &Arc<Region>) {
        let mut map = self.write();
        let before = map.len();
        map.retain(|_, window| !Arc::ptr_eq(window, region));
        if map.len() != before {
            self.narrow(&map);
        }
    }

    /// The window overlapping host memory `ptr..ptr+len`, if any (of two, the one that starts
    /// last).
    pub(crate) fn find(&self, ptr: *const u8, len: usize) -> Option<Arc<Region>> {
        let start = ptr as usize;
        let end = start.saturating_add(len.max(1));
        if end <= self.lo.load(Ordering::SeqCst) || start >= self.hi.load(Ordering::SeqCst) {
            return None;
        }
        let map = read(&self.map);
        map.range(..end)
            .next_back()
            .filter(|(host, region)| host.saturating_add(region.len) > start)
            .map(|(_, region)| Arc::clone(region))
    }

    /// Recomputes the bounds from the windows left in `map` (its write lock held).
    fn narrow(&self, map: &BTreeMap<usize, Arc<Region>>) {
        let lo = map.keys().next().copied().unwrap_or(usize::MAX);
        let hi = map
            .iter()
            .map(|(host, region)| host.saturating_add(region.len))
            .max()
            .unwrap_or(0);
        self.lo.store(lo, Ordering::SeqCst);
        self.hi.store(hi, Ordering::SeqCst);
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<usize, Arc<Region>>> {
        write(&self.map)
    }
}

#[cfg(test)]
mod tests {
    use super::HostWindows;
    use crate::memory::Region;
    use proptest::prelude::*;
    use std::ptr::NonNull;
    use std::sync::Arc;

    /// A window of `len` bytes at host address `host` (the memory is never touched).
    fn window(host: usize, len: usize) -> Arc<Region> {
        let ptr =
            NonNull::new(std::ptr::without_provenance_mut(host)).unwrap_or(NonNull::dangling());
        Arc::new(Region::new(host as u64, len, ptr, None, false))
    }

    /// A host address that is never dereferenced.
    fn at(address: usize) -> *const u8 {
        std::ptr::without_provenance(address)
    }

    /// What `find` must answer, by a plain scan: of the windows overlapping
    /// `start..start+len`, the one that starts last (a range may span two).
    fn scan(live: &[(usize, Arc<Region>)], start: usize, len: usize) -> Option<usize> {
        let end = start + len.max(1);
        live.iter()
            .filter(|(host, region)| *host < end && host + region.len() > start)
            .map(|(host, _)| *host)
            .max()
    }

    #[test]
    fn empty_finds_nothing_and_bounds_follow_the_windows() {
        let windows = HostWindows::new();
        assert!(windows.find(at(4096), 64).is_none());
        let a = window(0x10_000, 0x1000);
        windows.insert(0x10_000, Arc::clone(&a));
        assert!(windows.find(at(0x10_fff), 1).is_some());
        assert!(windows.find(at(0x11_000), 1).is_none());
        assert!(windows.find(at(0xf_fff), 1).is_none());
        assert!(windows.find(at(0xf_fff), 2).is_some());
        let b = window(0x40_000, 0x100);
        windows.insert(0x40_000, Arc::clone(&b));
        // Between the two windows: inside the bounds, found by the map.
        assert!(windows.find(at(0x20_000), 16).is_none());
        assert!(
            windows
                .remove_if(0x40_000, |w| !Arc::ptr_eq(w, &b))
                .is_none()
        );
        assert!(
            windows
                .remove_if(0x40_000, |w| Arc::ptr_eq(w, &b))
                .is_some()
        );
        assert!(windows.find(at(0x40_000), 1).is_none());
        windows.remove_region(&a);
        assert!(windows.find(at(0x10_000), 1).is_none());
        assert_eq!(
            windows.lo.load(std::sync::atomic::Ordering::SeqCst),
            usize::MAX
        );
        assert_eq!(windows.hi.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    proptest! {
        // Miri: a handful of cases is enough to check the code for undefined behaviour.
        #![proptest_config(crate::test_support::proptest_config(4))]

        /// Inserting and removing windows (disjoint slots of a 64-slot space) in any order,
        /// every lookup answers what a plain scan of the live windows answers.
        #[test]
        #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
        fn lookups_match_a_scan(
            steps in proptest::collection::vec((0usize..64, 1usize..3, any::<bool>()), 1..40),
            probes in proptest::collection::vec((0usize..70 * 256, 0usize..600), 1..20),
        ) {
            let windows = HostWindows::new();
            let mut live: Vec<(usize, Arc<Region>)> = Vec::new();
            for (slot, len_slots, remove) in steps {
                let host = 0x1000 + slot * 256;
                let taken = live.iter().any(|(h, r)| *h < host + len_slots * 256 && h + r.len() > host);
                if remove {
                    if let Some(at) = live.iter().position(|(h, _)| *h == host) {
                        let (_, region) = live.swap_remove(at);
                        windows.remove_region(&region);
                    }
                } else if !taken {
                    let region = window(host, len_slots * 256);
                    windows.insert(host, Arc::clone(&region));
                    live.push((host, region));
                }
                for &(offset, len) in &probes {
                    let start = 0x1000 - 256 + offset;
                    let found = windows.find(at(start), len).map(|r| r.start() as usize);
                    prop_assert_eq!(found, scan(&live, start, len));
                }
            }
        }
    }
}
