//! Compiled kernels kept loaded per (kernel, device), so repeated launches do not recompile.
//!
//! # Contract
//!
//! * An entry is keyed by `Kernel::id()` and the device ordinal, and remembers the source it
//!   was built from: a kernel value carrying different source under the same id (a re-built
//!   clone) gets its own entry instead of running stale code.
//! * Each entry is built at most once even when several threads launch the same kernel at the
//!   same time: the map lock is held only to find the entry, and the entry's own lock while it
//!   compiles, so different kernels compile in parallel.
//! * A failed build leaves the entry empty; the next launch tries again (and reports again).
//! * Modules stay loaded until [`ModuleCache::take_all`] hands them to the backend's `Drop`,
//!   because a kernel enqueued on a stream may still be running from them.

use super::kernels::{FunctionHandle, ModuleHandle};
use gpu_mem_core::Result;
use gpu_mem_core::kernel::KernelSource;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A kernel's module and entry function on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadedKernel {
    pub module: ModuleHandle,
    pub function: FunctionHandle,
}

type Slot = Arc<Mutex<Option<LoadedKernel>>>;

#[derive(Debug)]
struct Entry {
    source: KernelSource,
    slot: Slot,
}

/// The cache; one per backend.
#[derive(Debug, Default)]
pub struct ModuleCache {
    entries: Mutex<HashMap<(u64, usize), Vec<Entry>>>,
}

// Every critical section below is a lookup, an insert or a single assignment, so a panic
// elsewhere cannot leave the data half-updated: a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ModuleCache {
    /// The loaded kernel for `(kernel_id, device, source)`, running `build` (compile, load,
    /// look up) only if no earlier call succeeded.
    pub fn get_or_build(
        &self,
        kernel_id: u64,
        device: usize,
        source: &KernelSource,
        build: impl FnOnce() -> Result<LoadedKernel>,
    ) -> Result<LoadedKernel> {
        let slot = {
            let mut entries = lock(&self.entries);
            let list = entries.entry((kernel_id, device)).or_default();
            match list.iter().find(|e| e.source == *source) {
                Some(entry) => Arc::clone(&entry.slot),
                None => {
                    let slot = Slot::default();
                    list.push(Entry {
                        source: source.clone(),
                        slot: Arc::clone(&slot),
                    });
                    slot
                }
            }
        };
        let mut loaded = lock(&slot);
        if let Some(kernel) = *loaded {
            return Ok(kernel);
        }
        let kernel = build()?;
        *loaded = Some(kernel);
        Ok(kernel)
    }

    /// Number of loaded modules.
    pub fn loaded(&self) -> usize {
        lock(&self.entries)
            .values()
            .flatten()
            .filter(|e| lock(&e.slot).is_some())
            .count()
    }

    /// Removes the entries of `device`, returning how many modules were loaded (after a context
    /// reset, which destroyed them).
    pub fn forget_device(&self, device: usize) -> usize {
        let mut entries = lock(&self.entries);
        let keys: Vec<(u64, usize)> = entries.keys().filter(|k| k.1 == device).copied().collect();
        let mut loaded = 0;
        for key in keys {
            for entry in entries.remove(&key).unwrap_or_default() {
                loaded += usize::from(lock(&entry.slot).take().is_some());
            }
        }
        loaded
    }

    /// Removes every loaded module, returning `(device, module)` pairs for unloading.
    pub fn take_all(&self) -> Vec<(usize, ModuleHandle)> {
        let mut out = Vec::new();
        for ((_, device), list) in lock(&self.entries).drain() {
            for entry in list {
                if let Some(kernel) = lock(&entry.slot).take() {
                    out.push((device, kernel.module));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_mem_core::Error;
    use std::cell::Cell;

    fn source(code: &str) -> KernelSource {
        KernelSource {
            module: gpu_mem_core::Module::from_source(code),
            entry: "k".to_string(),
        }
    }

    fn loaded(n: u64) -> LoadedKernel {
        LoadedKernel {
            module: ModuleHandle(n),
            function: FunctionHandle(n + 1),
        }
    }

    #[test]
    fn builds_once_per_kernel_device_and_source() {
        let cache = ModuleCache::default();
        let builds = Cell::new(0);
        let build = |n| {
            builds.set(builds.get() + 1);
            Ok(loaded(n))
        };
        let a = source("a");
        assert_eq!(
            cache.get_or_build(1, 0, &a, || build(10)).unwrap(),
            loaded(10)
        );
        assert_eq!(
            cache.get_or_build(1, 0, &a, || build(99)).unwrap(),
            loaded(10)
        );
        assert_eq!(builds.get(), 1);
        // Another device, another kernel id, or other source under the same id: new builds.
        cache.get_or_build(1, 1, &a, || build(20)).unwrap();
        cache.get_or_build(2, 0, &a, || build(30)).unwrap();
        cache
            .get_or_build(1, 0, &source("b"), || build(40))
            .unwrap();
        assert_eq!(builds.get(), 4);
        assert_eq!(cache.loaded(), 4);
        let mut taken = cache.take_all();
        taken.sort_by_key(|(_, m)| m.0);
        let want = [10, 20, 30, 40].map(ModuleHandle);
        let devices = [0, 1, 0, 0];
        assert_eq!(taken, devices.into_iter().zip(want).collect::<Vec<_>>());
        assert_eq!(cache.loaded(), 0);
    }

    #[test]
    fn failed_builds_are_retried() {
        let cache = ModuleCache::default();
        let a = source("a");
        let failed = cache.get_or_build(1, 0, &a, || {
            Err(Error::InvalidArgument {
                name: "source",
                reason: "broken".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(cache.loaded(), 0);
        assert_eq!(
            cache.get_or_build(1, 0, &a, || Ok(loaded(5))).unwrap(),
            loaded(5)
        );
    }
}
