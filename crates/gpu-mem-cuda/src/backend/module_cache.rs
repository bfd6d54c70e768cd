//! Compiled modules kept loaded per (module, device), and each kernel's function found in its
//! module once per (kernel, device), so repeated launches neither recompile nor look up again.
//!
//! # Contract
//!
//! * A module is keyed by its content ([`Module`]: source and name expressions) and the device
//!   ordinal: kernels made from one source share one loaded module, and so its variables.
//! * Each module is built at most once even when several threads launch its kernels at the
//!   same time: the map lock is held only to find the entry, and the entry's own lock while it
//!   compiles, so different modules compile in parallel.
//! * A kernel's function is keyed by `Kernel::id()` and the device, and remembers the source it
//!   was found for: a kernel value carrying different source under the same id (a re-built
//!   clone) gets its own entry instead of running stale code.
//! * A failed build leaves the entry empty; the next launch tries again (and reports again).
//! * Modules stay loaded until [`ModuleCache::take_all`] hands them to the backend's `Drop`,
//!   because a kernel enqueued on a stream may still be running from them.

use super::kernels::{FunctionHandle, ModuleHandle};
use super::ptx::PtxModule;
use gpu_mem_core::Result;
use gpu_mem_core::kernel::{KernelSource, Module};
use gpu_mem_core::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A module loaded on one device, with what its PTX says about its kernels and variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModule {
    pub module: ModuleHandle,
    pub ptx: PtxModule,
    /// Each name expression with its lowered name.
    pub lowered: Vec<(String, String)>,
}

/// A kernel's module and entry function on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadedKernel {
    pub module: ModuleHandle,
    pub function: FunctionHandle,
}

type Slot = Arc<Mutex<Option<Arc<LoadedModule>>>>;

/// The kernels found for one (kernel id, device), with the source each was found for.
type FoundKernels = Vec<(KernelSource, LoadedKernel)>;

/// The cache; one per backend.
#[derive(Debug, Default)]
pub struct ModuleCache {
    modules: Mutex<HashMap<(Module, usize), Slot>>,
    kernels: Mutex<HashMap<(u64, usize), FoundKernels>>,
}

// Every critical section below is a lookup, an insert or a single assignment, so a panic
// elsewhere cannot leave the data half-updated: a poisoned lock is still usable (`sync::lock`).
impl ModuleCache {
    /// The loaded `module` on `device`, running `build` (compile, load) only if no earlier call
    /// succeeded.
    pub fn module(
        &self,
        module: &Module,
        device: usize,
        build: impl FnOnce() -> Result<LoadedModule>,
    ) -> Result<Arc<LoadedModule>> {
        let slot = Arc::clone(
            lock(&self.modules)
                .entry((module.clone(), device))
                .or_default(),
        );
        let mut loaded = lock(&slot);
        if let Some(found) = &*loaded {
            return Ok(Arc::clone(found));
        }
        let built = Arc::new(build()?);
        *loaded = Some(Arc::clone(&built));
        Ok(built)
    }

    /// The function of `kernel_id` (made from `source`) on `device`, looked up by `find` only
    /// the first time.
    pub fn kernel(
        &self,
        kernel_id: u64,
        device: usize,
        source: &KernelSource,
        find: impl FnOnce() -> Result<LoadedKernel>,
    ) -> Result<LoadedKernel> {
        if let Some(list) = lock(&self.kernels).get(&(kernel_id, device))
            && let Some((_, found)) = list.iter().find(|(s, _)| s == source)
        {
            return Ok(*found);
        }
        let found = find()?;
        lock(&self.kernels)
            .entry((kernel_id, device))
            .or_default()
            .push((source.clone(), found));
        Ok(found)
    }

    /// Number of loaded modules.
    pub fn loaded(&self) -> usize {
        lock(&self.modules)
            .values()
            .filter(|slot| lock(slot).is_some())
            .count()
    }

    /// Removes the entries of `device`, returning how many modules were loaded (after a context
    /// reset, which destroyed them).
    pub fn forget_device(&self, device: usize) -> usize {
        lock(&self.kernels).retain(|(_, d), _| *d != device);
        let mut modules = lock(&self.modules);
        let keys: Vec<(Module, usize)> =
            modules.keys().filter(|k| k.1 == device).cloned().collect();
        let mut loaded = 0;
        for key in keys {
            if let Some(slot) = modules.remove(&key) {
                loaded += usize::from(lock(&slot).take().is_some());
            }
        }
        loaded
    }

    /// Removes every loaded module, returning `(device, module)` pairs for unloading.
    pub fn take_all(&self) -> Vec<(usize, ModuleHandle)> {
        lock(&self.kernels).clear();
        let mut out = Vec::new();
        for ((_, device), slot) in lock(&self.modules).drain() {
            if let Some(loaded) = lock(&slot).take() {
                out.push((device, loaded.module));
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

    fn loaded(n: u64) -> LoadedModule {
        LoadedModule {
            module: ModuleHandle(n),
            ptx: PtxModule::default(),
            lowered: Vec::new(),
        }
    }

    #[test]
    fn builds_once_per_module_and_device() {
        let cache = ModuleCache::default();
        let builds = Cell::new(0);
        let build = |n| {
            builds.set(builds.get() + 1);
            Ok(loaded(n))
        };
        let a = Module::from_source("a");
        assert_eq!(
            cache.module(&a, 0, || build(10)).unwrap().module,
            ModuleHandle(10)
        );
        // The same source again, as another value: the same module.
        let again = Module::from_source("a");
        assert_eq!(
            cache.module(&again, 0, || build(99)).unwrap().module,
            ModuleHandle(10)
        );
        assert_eq!(builds.get(), 1);
        // Another device, or other source: new builds.
        cache.module(&a, 1, || build(20)).unwrap();
        cache
            .module(&Module::from_source("b"), 0, || build(30))
            .unwrap();
        assert_eq!(builds.get(), 3);
        assert_eq!(cache.loaded(), 3);
        let mut taken = cache.take_all();
        taken.sort_by_key(|(_, m)| m.0);
        let want = [10, 20, 30].map(ModuleHandle);
        assert_eq!(taken, [0, 1, 0].into_iter().zip(want).collect::<Vec<_>>());
        assert_eq!(cache.loaded(), 0);
    }

    #[test]
    fn failed_builds_are_retried_and_kernels_found_once() {
        let cache = ModuleCache::default();
        let a = Module::from_source("a");
        let failed = cache.module(&a, 0, || {
            Err(Error::InvalidArgument {
                name: "source",
                reason: "broken".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(cache.loaded(), 0);
        assert_eq!(
            cache.module(&a, 0, || Ok(loaded(5))).unwrap().module,
            ModuleHandle(5)
        );
        let source = KernelSource {
            module: a.clone(),
            entry: "k".into(),
        };
        let kernel = LoadedKernel {
            module: ModuleHandle(5),
            function: FunctionHandle(6),
        };
        let finds = Cell::new(0);
        for _ in 0..3 {
            let found = cache
                .kernel(1, 0, &source, || {
                    finds.set(finds.get() + 1);
                    Ok(kernel)
                })
                .unwrap();
            assert_eq!(found, kernel);
        }
        assert_eq!(finds.get(), 1);
        assert_eq!(cache.forget_device(0), 1);
        assert_eq!(cache.loaded(), 0);
    }
}
