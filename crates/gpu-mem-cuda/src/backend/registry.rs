//! Bookkeeping the driver does not do for us: which allocator produced each device pointer
//! (so it is freed by the matching call), which host ranges are registered, and which events
//! were created with timing.

use gpu_mem_core::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// How a device allocation was made; it must be freed the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocKind {
    /// `cuMemAlloc_v2` → `cuMemFree_v2`.
    Plain,
    /// `cuMemAllocAsync` on the legacy default stream → `cuMemFreeAsync`.
    StreamOrdered,
}

/// A map keyed by `(device, address)` behind a mutex.
#[derive(Debug)]
pub struct Registry<V> {
    /// Changed by single inserts and removes only: a panic under the lock cannot leave it
    /// half-updated, so a poisoned lock is still usable (`sync::lock`).
    entries: Mutex<HashMap<(usize, u64), V>>,
}

impl<V: Copy> Registry<V> {
    pub fn new() -> Registry<V> {
        Registry {
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn insert(&self, device: usize, key: u64, value: V) {
        lock(&self.entries).insert((device, key), value);
    }

    pub fn get(&self, device: usize, key: u64) -> Option<V> {
        lock(&self.entries).get(&(device, key)).copied()
    }

    pub fn remove(&self, device: usize, key: u64) -> Option<V> {
        lock(&self.entries).remove(&(device, key))
    }

    /// Replaces `key`'s entry by what `change` makes of it (`None`: no entry), under one lock;
    /// returns the entry as it was.
    pub fn update(
        &self,
        device: usize,
        key: u64,
        change: impl FnOnce(Option<V>) -> Option<V>,
    ) -> Option<V> {
        let mut entries = lock(&self.entries);
        let old = entries.get(&(device, key)).copied();
        match change(old) {
            Some(new) => entries.insert((device, key), new),
            None => entries.remove(&(device, key)),
        };
        old
    }

    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Entries of `device`.
    pub fn count(&self, device: usize) -> usize {
        lock(&self.entries)
            .keys()
            .filter(|(d, _)| *d == device)
            .count()
    }
}

impl Registry<usize> {
    /// The base of `device`'s entry whose range (`base`, and the value as its length in bytes)
    /// holds `address..address+bytes`. A scan of every entry: for the few ranges of a kind
    /// (managed memory) that are looked up by an interior address.
    pub fn containing(&self, device: usize, address: u64, bytes: u64) -> Option<u64> {
        let end = address.checked_add(bytes)?;
        lock(&self.entries)
            .iter()
            .find(|((d, base), len)| {
                *d == device && *base <= address && base.checked_add(**len as u64) >= Some(end)
            })
            .map(|((_, base), _)| *base)
    }
}

/// Which device owns each device address range (plain, stream-ordered and IPC-opened memory;
/// unified addressing makes addresses unique across devices), so a launch can tell a peer's
/// array from its own.
#[derive(Debug, Default)]
pub struct AddressMap {
    /// Single inserts and removes: a poisoned lock is still consistent.
    ranges: Mutex<BTreeMap<u64, (usize, u64)>>,
}

impl AddressMap {
    pub fn insert(&self, base: u64, device: usize, bytes: u64) {
        lock(&self.ranges).insert(base, (device, bytes));
    }

    pub fn remove(&self, base: u64) {
        lock(&self.ranges).remove(&base);
    }

    /// Bytes of the range starting exactly at `base`.
    pub fn bytes_at(&self, base: u64) -> Option<u64> {
        lock(&self.ranges).get(&base).map(|(_, bytes)| *bytes)
    }

    /// The device owning the range that contains `address`.
    pub fn owner(&self, address: u64) -> Option<usize> {
        let ranges = lock(&self.ranges);
        let (base, (device, bytes)) = ranges.range(..=address).next_back()?;
        (address - base < *bytes).then_some(*device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_device_and_removed_once() {
        let r = Registry::new();
        r.insert(0, 0x1000, AllocKind::Plain);
        r.insert(1, 0x1000, AllocKind::StreamOrdered);
        assert_eq!(r.get(0, 0x1000), Some(AllocKind::Plain));
        assert_eq!(r.get(1, 0x1000), Some(AllocKind::StreamOrdered));
        assert_eq!(r.remove(0, 0x1000), Some(AllocKind::Plain));
        assert_eq!(r.remove(0, 0x1000), None);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn updates_see_and_replace_the_entry_under_one_lock() {
        let r = Registry::new();
        assert_eq!(r.update(0, 0x1000, |old| Some(old.unwrap_or(0) + 1)), None);
        assert_eq!(
            r.update(0, 0x1000, |old| Some(old.unwrap_or(0) + 1)),
            Some(1)
        );
        assert_eq!(r.get(0, 0x1000), Some(2));
        assert_eq!(r.update(0, 0x1000, |_| None), Some(2));
        assert_eq!(r.get(0, 0x1000), None);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn a_range_is_found_inside_one_entry_of_its_device() {
        let r = Registry::<usize>::new();
        r.insert(0, 4096, 100);
        r.insert(1, 8192, 100);
        assert_eq!(r.containing(0, 4096, 100), Some(4096));
        assert_eq!(r.containing(0, 4100, 10), Some(4096));
        assert_eq!(r.containing(0, 4100, 100), None);
        assert_eq!(r.containing(0, 8192, 1), None);
        assert_eq!(r.containing(1, 8200, 1), Some(8192));
        assert_eq!(r.containing(0, u64::MAX, 2), None);
    }

    #[test]
    fn address_map_finds_the_owner_of_interior_addresses() {
        let m = AddressMap::default();
        m.insert(0x1000, 0, 0x100);
        m.insert(0x2000, 1, 0x10);
        assert_eq!(m.owner(0x1000), Some(0));
        assert_eq!(m.owner(0x10ff), Some(0));
        assert_eq!(m.owner(0x1100), None);
        assert_eq!(m.owner(0x0fff), None);
        assert_eq!(m.owner(0x200f), Some(1));
        assert_eq!(m.bytes_at(0x2000), Some(0x10));
        m.remove(0x2000);
        assert_eq!(m.owner(0x2000), None);
    }
}
