//! One device's accounting ([`DeviceUsage`]): the counters, the ledger of live allocations, and
//! the [`Ticket`] each counted allocation holds, whose drop counts the free.
//!
//! A device's accounting belongs to the device, not to a `Device` handle: `Runtime::device(0)`
//! called twice gives two handles over one accounting, which lives while some handle of the
//! device does (every array holds one). [`for_device`] finds it by backend
//! instance and ordinal (a lock taken when a `Device` is made, never on an allocation).

use super::counters::{CacheStats, KindCounters, MemoryStats, OomCounters};
use super::kind::MemoryKind;
use super::ledger::{Ledger, Record};
use super::tracking::{Tracking, tracking};
use crate::backend::{Backend, PoolUsage};
use crate::error::BackendKind;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The accounting of one device of one backend instance.
#[derive(Debug)]
pub(crate) struct DeviceUsage {
    pub(crate) backend: BackendKind,
    pub(crate) ordinal: usize,
    pub(crate) started: Instant,
    pub(crate) tracking: Tracking,
    pub(crate) kinds: [KindCounters; MemoryKind::ALL.len()],
    pub(crate) device_total: KindCounters,
    pub(crate) host_total: KindCounters,
    pub(crate) oom: OomCounters,
    pub(crate) ledger: Ledger,
    next_id: AtomicU64,
    /// The user's allocator for device arrays, when one is set (`crate::allocator`): a setting
    /// of the device, shared by its handles like the accounting, so it lives here.
    pub(crate) allocator: std::sync::RwLock<Option<Arc<dyn crate::allocator::DeviceAllocator>>>,
}

impl DeviceUsage {
    fn new(backend: BackendKind, ordinal: usize, tracking: Tracking) -> DeviceUsage {
        DeviceUsage {
            backend,
            ordinal,
            started: Instant::now(),
            tracking,
            kinds: Default::default(),
            device_total: KindCounters::default(),
            host_total: KindCounters::default(),
            oom: OomCounters::default(),
            ledger: Ledger::default(),
            next_id: AtomicU64::new(1),
            allocator: std::sync::RwLock::new(None),
        }
    }

    fn total(&self, kind: MemoryKind) -> &KindCounters {
        if kind.on_device() {
            &self.device_total
        } else {
            &self.host_total
        }
    }

    /// Bytes held by every live allocation of every kind.
    pub(crate) fn current_bytes(&self) -> u64 {
        self.device_total.current_bytes() + self.host_total.current_bytes()
    }

    /// The counters read into plain values; `pool` is the stream-ordered pool's usage.
    pub(crate) fn stats(&self, pool: Option<PoolUsage>) -> MemoryStats {
        MemoryStats {
            backend: self.backend,
            device: self.ordinal,
            kinds: MemoryKind::ALL
                .iter()
                .map(|&kind| (kind, self.kinds[kind.index()].read()))
                .collect(),
            device_total: self.device_total.read(),
            host_total: self.host_total.read(),
            oom: self.oom.read(),
            cached: CacheStats::from_pool(pool),
        }
    }

    /// Starts the peaks again from what is held now.
    pub(crate) fn reset_peaks(&self) {
        for counters in &self.kinds {
            counters.reset_peak();
        }
        self.device_total.reset_peak();
        self.host_total.reset_peak();
    }

    fn history_clock(&self) -> Option<Duration> {
        self.tracking.history.then(|| self.started.elapsed())
    }
}

/// Counts one allocation while it lives: made after the backend allocated, dropped (or
/// [`release`](Ticket::release)d) when the memory is given back.
#[derive(Debug)]
pub(crate) struct Ticket {
    usage: Arc<DeviceUsage>,
    id: u64,
    kind: MemoryKind,
    bytes: u64,
    released: AtomicBool,
}

impl Ticket {
    /// Counts an allocation of `bytes` bytes made by the caller's caller chain (every function
    /// between the public API and here is `#[track_caller]`).
    #[track_caller]
    pub(crate) fn new(
        usage: &Arc<DeviceUsage>,
        kind: MemoryKind,
        bytes: usize,
        stream: Option<u64>,
    ) -> Ticket {
        let caller = Location::caller();
        let location = SITE.with(std::cell::Cell::get).unwrap_or(caller);
        let bytes = bytes as u64;
        usage.kinds[kind.index()].on_alloc(bytes);
        usage.total(kind).on_alloc(bytes);
        let id = usage.next_id.fetch_add(1, Ordering::Relaxed);
        if usage.tracking.locations {
            let backtrace = usage
                .tracking
                .backtraces
                .then(|| std::backtrace::Backtrace::force_capture().to_string());
            let record = Record {
                kind,
                bytes,
                location,
                at: Instant::now(),
                stream,
                backtrace,
            };
            usage.ledger.insert(id, record, usage.history_clock());
        }
        Ticket {
            usage: Arc::clone(usage),
            id,
            kind,
            bytes,
            released: AtomicBool::new(false),
        }
    }

    /// Counts the free now (a stream-ordered free was enqueued); dropping counts nothing more.
    pub(crate) fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let usage = &self.usage;
        usage.kinds[self.kind.index()].on_free(self.bytes);
        usage.total(self.kind).on_free(self.bytes);
        if usage.tracking.locations {
            usage.ledger.remove(self.id, usage.history_clock());
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.release();
    }
}

thread_local! {
    /// Where this thread's allocations are attributed while an [`AttributeTo`] is alive.
    static SITE: std::cell::Cell<Option<&'static Location<'static>>> =
        const { std::cell::Cell::new(None) };
}

/// While alive, this thread's allocations are attributed to the caller of the function that
/// made it: for paths `#[track_caller]` cannot follow (a kernel's arguments prepared through
/// trait objects and closures). The outermost one wins.
#[must_use = "allocations are attributed only while it lives"]
pub(crate) struct AttributeTo {
    outermost: bool,
}

impl AttributeTo {
    #[track_caller]
    pub(crate) fn caller() -> AttributeTo {
        let site = Location::caller();
        let outermost = SITE.with(|s| {
            let unset = s.get().is_none();
            if unset {
                s.set(Some(site));
            }
            unset
        });
        AttributeTo { outermost }
    }
}

impl Drop for AttributeTo {
    fn drop(&mut self) {
        if self.outermost {
            SITE.with(|s| s.set(None));
        }
    }
}

/// A device's accounting, found by backend instance and ordinal. Weak: the accounting lives as
/// long as some `Device` handle of the device (every array holds one), so the registry keeps
/// neither it nor, through an allocator set on it, the backend alive.
struct Entry {
    backend: Weak<dyn Backend>,
    ordinal: usize,
    usage: Weak<DeviceUsage>,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn same_backend(weak: &Weak<dyn Backend>, backend: &Arc<dyn Backend>) -> bool {
    std::ptr::addr_eq(weak.as_ptr(), Arc::as_ptr(backend))
}

/// The accounting of device `ordinal` of `backend`, made on first use.
pub(crate) fn for_device(backend: &Arc<dyn Backend>, ordinal: usize) -> Arc<DeviceUsage> {
    let mut registry = crate::sync::lock(&REGISTRY);
    // A backend instance that is gone may share an address with a new one: forget it first.
    registry.retain(|entry| entry.backend.strong_count() > 0 && entry.usage.strong_count() > 0);
    let found = registry
        .iter()
        .find(|e| e.ordinal == ordinal && same_backend(&e.backend, backend))
        .and_then(|entry| entry.usage.upgrade());
    if let Some(usage) = found {
        return usage;
    }
    let usage = Arc::new(DeviceUsage::new(backend.kind(), ordinal, tracking()));
    registry.push(Entry {
        backend: Arc::downgrade(backend),
        ordinal,
        usage: Arc::downgrade(&usage),
    });
    usage
}

/// The accounting of every device of `backend` opened so far.
pub(crate) fn of_backend(backend: &Arc<dyn Backend>) -> Vec<Arc<DeviceUsage>> {
    let registry = crate::sync::lock(&REGISTRY);
    let mut usages: Vec<Arc<DeviceUsage>> = registry
        .iter()
        .filter(|e| same_backend(&e.backend, backend))
        .filter_map(|e| e.usage.upgrade())
        .collect();
    usages.sort_by_key(|u| u.ordinal);
    usages
}

#[cfg(test)]
mod tests {
    use super::{DeviceUsage, Ticket};
    use crate::accounting::{MemoryKind, Tracking};
    use crate::error::BackendKind;
    use std::sync::Arc;

    fn usage(tracking: Tracking) -> Arc<DeviceUsage> {
        Arc::new(DeviceUsage::new(BackendKind::Sim, 0, tracking))
    }

    #[test]
    fn history_keeps_allocations_and_frees_in_order() {
        let usage = usage(Tracking::parse("history").unwrap());
        let a = Ticket::new(&usage, MemoryKind::Device, 100, None);
        let b = Ticket::new(&usage, MemoryKind::Pool, 50, Some(7));
        drop(a);
        b.release();
        b.release();
        drop(b);
        let history = usage.ledger.history();
        let steps: Vec<(bool, MemoryKind, u64)> = history
            .iter()
            .map(|e| (e.allocated, e.kind, e.bytes))
            .collect();
        assert_eq!(
            steps,
            [
                (true, MemoryKind::Device, 100),
                (true, MemoryKind::Pool, 50),
                (false, MemoryKind::Device, 100),
                (false, MemoryKind::Pool, 50),
            ]
        );
        assert!(history.windows(2).all(|w| w[0].seconds <= w[1].seconds));
        assert!(history[0].location.starts_with(file!()));
        let stats = usage.stats(None);
        assert_eq!(
            stats.kind(MemoryKind::Pool).frees,
            1,
            "a release counts once"
        );
        assert_eq!(stats.device_total.current_bytes, 0);
        assert_eq!(stats.device_total.peak_bytes, 150);
    }

    #[test]
    fn off_counts_but_lists_nothing() {
        let usage = usage(Tracking::parse("off").unwrap());
        let a = Ticket::new(&usage, MemoryKind::Managed, 8, None);
        assert!(usage.ledger.live().is_empty());
        assert_eq!(usage.stats(None).host_total.current_bytes, 8);
        drop(a);
        assert_eq!(usage.stats(None).host_total.current_bytes, 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a backtrace reads the working directory: Miri's isolation forbids it"
    )]
    fn backtraces_are_kept_when_asked_for() {
        let usage = usage(Tracking::parse("backtrace").unwrap());
        let _a = Ticket::new(&usage, MemoryKind::Device, 8, None);
        let live = usage.ledger.live();
        assert!(
            live[0]
                .1
                .backtrace
                .as_deref()
                .is_some_and(|b| !b.is_empty())
        );
    }
}
