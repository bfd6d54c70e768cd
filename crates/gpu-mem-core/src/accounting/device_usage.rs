//! One device's accounting ([`DeviceUsage`]): the counters, the ledger of live allocations, and
//! the [`Ticket`] each counted allocation holds, whose drop counts the free.
//!
//! A device's accounting belongs to the device, not to a `Device` handle: `Runtime::device(0)`
//! called twice gives two handles over one accounting, which lives while some handle of the
//! device does (every array holds one). [`for_device`] finds it by backend
//! instance and ordinal (a lock taken when a `Device` is made, never on an allocation).

use super::clock::{self, Origin};
use super::counters::{CacheStats, GroupPeaks, KindCounters, MemoryStats, OomCounters, live_sum};
use super::kind::MemoryKind;
use super::ledger::{self, Ledger, Record};
use super::tracking::{Tracking, tracking};
use crate::backend::{Backend, PoolUsage};
use crate::error::BackendKind;
use std::panic::Location;
use std::sync::{Arc, Mutex, Weak};

/// The accounting of one device of one backend instance.
#[derive(Debug)]
pub(crate) struct DeviceUsage {
    pub(crate) backend: BackendKind,
    pub(crate) ordinal: usize,
    pub(crate) origin: Origin,
    pub(crate) tracking: Tracking,
    pub(crate) kinds: [KindCounters; MemoryKind::ALL.len()],
    pub(crate) device_peaks: GroupPeaks,
    pub(crate) host_peaks: GroupPeaks,
    pub(crate) oom: OomCounters,
    pub(crate) ledger: Ledger,
    /// The user's allocator for device arrays, when one is set (`crate::allocator`): a setting
    /// of the device, shared by its handles like the accounting, so it lives here.
    pub(crate) allocator: std::sync::RwLock<Option<Arc<dyn crate::allocator::DeviceAllocator>>>,
}

impl DeviceUsage {
    /// An accounting of its own, in no registry (for measuring the accounting alone).
    #[cfg(feature = "bench-internals")]
    pub(crate) fn standalone(tracking: Tracking) -> DeviceUsage {
        DeviceUsage::new(BackendKind::Sim, 0, tracking)
    }

    fn new(backend: BackendKind, ordinal: usize, tracking: Tracking) -> DeviceUsage {
        DeviceUsage {
            backend,
            ordinal,
            origin: Origin::now(),
            tracking,
            kinds: Default::default(),
            device_peaks: GroupPeaks::default(),
            host_peaks: GroupPeaks::default(),
            oom: OomCounters::default(),
            ledger: Ledger::default(),
            allocator: std::sync::RwLock::new(None),
        }
    }

    /// The counters of the kinds in `kind`'s group (device-resident or host), and its peaks.
    fn group(&self, on_device: bool) -> (impl Iterator<Item = &KindCounters>, &GroupPeaks) {
        let kinds = MemoryKind::ALL
            .iter()
            .filter(move |kind| kind.on_device() == on_device)
            .map(|kind| &self.kinds[kind.index()]);
        let peaks = if on_device {
            &self.device_peaks
        } else {
            &self.host_peaks
        };
        (kinds, peaks)
    }

    /// Bytes held by every live allocation of every kind.
    pub(crate) fn current_bytes(&self) -> u64 {
        live_sum(self.kinds.iter()).1
    }

    /// The counters read into plain values; `pool` is the stream-ordered pool's usage.
    pub(crate) fn stats(&self, pool: Option<PoolUsage>) -> MemoryStats {
        let (device_kinds, device_peaks) = self.group(true);
        let (host_kinds, host_peaks) = self.group(false);
        MemoryStats {
            backend: self.backend,
            device: self.ordinal,
            kinds: MemoryKind::ALL
                .iter()
                .map(|&kind| (kind, self.kinds[kind.index()].read()))
                .collect(),
            device_total: device_peaks.read(device_kinds),
            host_total: host_peaks.read(host_kinds),
            oom: self.oom.read(),
            cached: CacheStats::from_pool(pool),
        }
    }

    /// Starts the peaks again from what is held now.
    pub(crate) fn reset_peaks(&self) {
        for counters in &self.kinds {
            counters.reset_peak();
        }
        for on_device in [true, false] {
            let (kinds, peaks) = self.group(on_device);
            peaks.reset(live_sum(kinds));
        }
    }

    /// Counts the free of `ticket`'s allocation: called once, by the owner of the memory, when
    /// it gives the memory back.
    pub(crate) fn release(&self, ticket: &Ticket) {
        self.kinds[ticket.kind.index()].on_free(ticket.bytes);
        if let Some(entry) = ticket.entry {
            let history = self.tracking.history.then(clock::now);
            self.ledger.remove(entry, history);
        }
    }
}

/// One counted allocation: made when the memory is allocated, given to
/// [`DeviceUsage::release`] once when it is given back, by its owner (which holds the device,
/// so the ticket holds nothing: counting costs a few atomic adds and, with locations, one
/// uncontended lock).
#[derive(Debug)]
#[must_use = "an allocation's ticket is released when its memory is given back"]
pub(crate) struct Ticket {
    kind: MemoryKind,
    bytes: u64,
    /// Its record in the ledger, when locations are kept.
    entry: Option<ledger::Entry>,
}

impl Ticket {
    /// Counts an allocation of `bytes` bytes made by the caller's caller chain (every function
    /// between the public API and here is `#[track_caller]`).
    #[track_caller]
    pub(crate) fn new(
        usage: &DeviceUsage,
        kind: MemoryKind,
        bytes: usize,
        stream: Option<u64>,
    ) -> Ticket {
        let caller = Location::caller();
        let bytes = bytes as u64;
        usage.kinds[kind.index()].on_alloc(bytes);
        let (kinds, peaks) = usage.group(kind.on_device());
        peaks.after_alloc(live_sum(kinds));
        let entry = usage.tracking.locations.then(|| {
            let location = crate::backend::call_site().unwrap_or(caller);
            let backtrace = usage
                .tracking
                .backtraces
                .then(|| std::backtrace::Backtrace::force_capture().to_string());
            let record = Record {
                kind,
                bytes,
                location,
                at: clock::now(),
                stream,
                backtrace,
            };
            usage.ledger.insert(record, usage.tracking.history)
        });
        Ticket { kind, bytes, entry }
    }
}

/// A device's accounting, found by backend instance and ordinal. Weak: the accounting lives as
/// long as some `Device` handle of the device (every array holds one), so the registry keeps
/// neither it nor, through an allocator set on it, the backend alive.
struct Registered {
    backend: Weak<dyn Backend>,
    ordinal: usize,
    usage: Weak<DeviceUsage>,
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

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
    registry.push(Registered {
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

    fn usage(tracking: Tracking) -> DeviceUsage {
        DeviceUsage::new(BackendKind::Sim, 0, tracking)
    }

    #[test]
    fn history_keeps_allocations_and_frees_in_order() {
        let usage = usage(Tracking::parse("history").unwrap());
        let a = Ticket::new(&usage, MemoryKind::Device, 100, None);
        let b = Ticket::new(&usage, MemoryKind::Pool, 50, Some(7));
        usage.release(&a);
        usage.release(&b);
        let history = usage.ledger.history(&usage.origin);
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
        assert_eq!(stats.kind(MemoryKind::Pool).frees, 1);
        assert_eq!(stats.device_total.current_bytes, 0);
        assert_eq!(stats.device_total.peak_bytes, 150);
        assert_eq!(
            (stats.device_total.allocations, stats.device_total.frees),
            (2, 2)
        );
    }

    #[test]
    fn off_counts_but_lists_nothing() {
        let usage = usage(Tracking::parse("off").unwrap());
        let a = Ticket::new(&usage, MemoryKind::Managed, 8, None);
        assert!(usage.ledger.live().is_empty());
        assert_eq!(usage.stats(None).host_total.current_bytes, 8);
        usage.release(&a);
        assert_eq!(usage.stats(None).host_total.current_bytes, 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a backtrace reads the working directory: Miri's isolation forbids it"
    )]
    fn backtraces_are_kept_when_asked_for() {
        let usage = usage(Tracking::parse("backtrace").unwrap());
        let a = Ticket::new(&usage, MemoryKind::Device, 8, None);
        let live = usage.ledger.live();
        assert!(
            live[0]
                .1
                .backtrace
                .as_deref()
                .is_some_and(|b| !b.is_empty())
        );
        usage.release(&a);
    }

    #[test]
    fn freed_slots_are_reused_and_ids_keep_growing() {
        let usage = usage(Tracking::default());
        let a = Ticket::new(&usage, MemoryKind::Device, 1, None);
        let first = usage.ledger.live()[0].0;
        usage.release(&a);
        let b = Ticket::new(&usage, MemoryKind::Device, 2, None);
        let live = usage.ledger.live();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].1.bytes, 2);
        assert!(live[0].0 > first);
        usage.release(&b);
        assert!(usage.ledger.live().is_empty());
    }
}
