//! Bookkeeping the driver does not do for us: which allocator produced each device pointer
//! (so it is freed by the matching call), which host ranges are registered, and which events
//! were created with timing.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

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
    entries: Mutex<HashMap<(usize, u64), V>>,
}

impl<V: Copy> Registry<V> {
    pub fn new() -> Registry<V> {
        Registry {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(usize, u64), V>> {
        // A panic while holding the lock cannot leave the map half-updated (single inserts
        // and removes), so a poisoned lock is still usable.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn insert(&self, device: usize, key: u64, value: V) {
        self.lock().insert((device, key), value);
    }

    pub fn get(&self, device: usize, key: u64) -> Option<V> {
        self.lock().get(&(device, key)).copied()
    }

    pub fn remove(&self, device: usize, key: u64) -> Option<V> {
        self.lock().remove(&(device, key))
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Entries of `device`.
    pub fn count(&self, device: usize) -> usize {
        self.lock().keys().filter(|(d, _)| *d == device).count()
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
}
