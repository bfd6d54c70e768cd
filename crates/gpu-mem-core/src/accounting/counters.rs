//! The statistics proper: atomic counters per kind of memory, updated on every allocation and
//! free without a lock, and read into plain values ([`KindStats`], [`MemoryStats`]).
//!
//! Counters are `Relaxed`: each is exact, but a reading taken while other threads allocate may
//! mix a counter from before an allocation with one from after it (as every allocator's
//! statistics do). A kind's peaks are exact: `fetch_max` after the add. An allocation or free
//! costs three atomic adds in all (two for the allocation, one for the free); the groups' totals
//! are summed from their kinds (see [`GroupPeaks`]).

use super::kind::MemoryKind;
use crate::backend::PoolUsage;
use crate::error::BackendKind;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live bytes and count packed in one word, so an allocation or a free is one atomic add:
/// the count above [`BYTES_BITS`], the bytes below (16 TiB of live memory per kind).
const BYTES_BITS: u32 = 44;
const BYTES_MASK: u64 = (1 << BYTES_BITS) - 1;

/// One allocation of `bytes` in the packed word (a size beyond the field counts as its
/// largest value: no allocation comes near it).
fn packed(bytes: u64) -> u64 {
    (1 << BYTES_BITS) | bytes.min(BYTES_MASK)
}

/// One kind's counters.
#[derive(Debug, Default)]
pub(crate) struct KindCounters {
    /// Live count and bytes ([`BYTES_BITS`]).
    live: AtomicU64,
    peak_bytes: AtomicU64,
    peak_count: AtomicU64,
    allocations: AtomicU64,
}

/// Moves `peak` up to `value` when it is higher: a plain load first, the locked `fetch_max`
/// only when the peak moves.
fn raise(peak: &AtomicU64, value: u64) {
    if value > peak.load(Relaxed) {
        peak.fetch_max(value, Relaxed);
    }
}

impl KindCounters {
    /// Counts an allocation: live, peaks, and the allocations made.
    pub(crate) fn on_alloc(&self, bytes: u64) {
        self.allocations.fetch_add(1, Relaxed);
        let one = packed(bytes);
        let now = self.live.fetch_add(one, Relaxed).wrapping_add(one);
        raise(&self.peak_bytes, now & BYTES_MASK);
        raise(&self.peak_count, now >> BYTES_BITS);
    }

    pub(crate) fn on_free(&self, bytes: u64) {
        self.live.fetch_sub(packed(bytes), Relaxed);
    }

    /// Live (count, bytes).
    pub(crate) fn live(&self) -> (u64, u64) {
        let live = self.live.load(Relaxed);
        (live >> BYTES_BITS, live & BYTES_MASK)
    }

    pub(crate) fn current_bytes(&self) -> u64 {
        self.live().1
    }

    pub(crate) fn reset_peak(&self) {
        let (count, bytes) = self.live();
        self.peak_bytes.store(bytes, Relaxed);
        self.peak_count.store(count, Relaxed);
    }

    /// The counters as values; frees are the allocations no longer live.
    pub(crate) fn read(&self) -> KindStats {
        let (current_count, current_bytes) = self.live();
        let allocations = self.allocations.load(Relaxed);
        KindStats {
            current_bytes,
            peak_bytes: self.peak_bytes.load(Relaxed),
            current_count,
            peak_count: self.peak_count.load(Relaxed),
            allocations,
            frees: allocations.saturating_sub(current_count),
        }
    }
}

/// The peaks of a group of kinds' sum (device-resident, host). The group's live figures are its
/// kinds' summed when read, so an allocation or free costs the group no atomic add: after an
/// allocation the kinds' live words are read and summed, and the peak raised. Exact for one
/// thread; with several threads allocating and freeing kinds of one group at once, the sum of
/// words read one after another may include an allocation next to memory another thread was
/// just freeing.
#[derive(Debug, Default)]
pub(crate) struct GroupPeaks {
    peak_bytes: AtomicU64,
    peak_count: AtomicU64,
}

/// The live (count, bytes) of `kinds` together.
pub(crate) fn live_sum<'a>(kinds: impl Iterator<Item = &'a KindCounters>) -> (u64, u64) {
    kinds.fold((0, 0), |(count, bytes), kind| {
        let (c, b) = kind.live();
        (count + c, bytes + b)
    })
}

impl GroupPeaks {
    /// Raises the peaks to the group's live sum.
    pub(crate) fn after_alloc(&self, (count, bytes): (u64, u64)) {
        raise(&self.peak_bytes, bytes);
        raise(&self.peak_count, count);
    }

    pub(crate) fn reset(&self, (count, bytes): (u64, u64)) {
        self.peak_bytes.store(bytes, Relaxed);
        self.peak_count.store(count, Relaxed);
    }

    /// The group's statistics from its kinds'.
    pub(crate) fn read<'a>(&self, kinds: impl Iterator<Item = &'a KindCounters>) -> KindStats {
        let mut total = KindStats::default();
        for kind in kinds {
            let stats = kind.read();
            total.current_bytes += stats.current_bytes;
            total.current_count += stats.current_count;
            total.allocations += stats.allocations;
            total.frees += stats.frees;
        }
        total.peak_bytes = self.peak_bytes.load(Relaxed).max(total.current_bytes);
        total.peak_count = self.peak_count.load(Relaxed).max(total.current_count);
        total
    }
}

/// Retries after an allocation found no room, and what they gave back.
#[derive(Debug, Default)]
pub(crate) struct OomCounters {
    pub(crate) retries: AtomicU64,
    pub(crate) retries_succeeded: AtomicU64,
    pub(crate) reclaimed_bytes: AtomicU64,
    pub(crate) failures: AtomicU64,
}

impl OomCounters {
    pub(crate) fn read(&self) -> OomStats {
        OomStats {
            retries: self.retries.load(Relaxed),
            retries_succeeded: self.retries_succeeded.load(Relaxed),
            reclaimed_bytes: self.reclaimed_bytes.load(Relaxed),
            failures: self.failures.load(Relaxed),
        }
    }
}

/// One kind's statistics (or a total's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KindStats {
    /// Bytes held by live allocations.
    pub current_bytes: u64,
    /// The most bytes held at once since the device's first allocation or the last
    /// [`reset_peak_memory_stats`](crate::Device::reset_peak_memory_stats).
    pub peak_bytes: u64,
    /// Live allocations.
    pub current_count: u64,
    /// The most live allocations at once (reset with the peak bytes).
    pub peak_count: u64,
    /// Allocations made.
    pub allocations: u64,
    /// Allocations freed.
    pub frees: u64,
}

/// Allocations that found no room, and the retries that followed: an allocation that fails for
/// want of room first waits for in-flight work keeping dropped memory alive, then tries again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OomStats {
    /// Retries after waiting for in-flight work.
    pub retries: u64,
    /// Retries that then found room.
    pub retries_succeeded: u64,
    /// Bytes the waits released (memory of dropped arrays that in-flight work kept alive).
    pub reclaimed_bytes: u64,
    /// Allocations that failed for want of room in the end (the out-of-memory errors returned).
    pub failures: u64,
}

/// Memory held for reuse rather than by live allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CacheStats {
    /// The stream-ordered pool's bytes in use (`used`) and held (`reserved`), on backends with
    /// one; `reserved - used` is what a [`trim`](crate::MemoryPool::trim) to zero releases.
    pub pool_used: Option<u64>,
    /// See `pool_used`.
    pub pool_reserved: Option<u64>,
}

impl CacheStats {
    pub(crate) fn from_pool(pool: Option<PoolUsage>) -> CacheStats {
        CacheStats {
            pool_used: pool.map(|p| p.used),
            pool_reserved: pool.map(|p| p.reserved),
        }
    }

    /// Bytes the caches hold beyond what live allocations use: what trimming them releases.
    pub fn releasable_bytes(&self) -> u64 {
        match (self.pool_reserved, self.pool_used) {
            (Some(reserved), Some(used)) => reserved.saturating_sub(used),
            _ => 0,
        }
    }
}

/// A device's memory statistics ([`Device::memory_stats`](crate::Device::memory_stats)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemoryStats {
    /// The device's backend.
    pub backend: BackendKind,
    /// The device's ordinal.
    pub device: usize,
    /// Per kind, in [`MemoryKind::ALL`]'s order.
    pub kinds: Vec<(MemoryKind, KindStats)>,
    /// Device-resident kinds together ([`MemoryKind::on_device`]); the peak is the peak of the
    /// sum, not the sum of the peaks.
    pub device_total: KindStats,
    /// Host kinds together (page-locked, mapped, registered, managed).
    pub host_total: KindStats,
    /// Out-of-memory retries.
    pub oom: OomStats,
    /// Caches.
    pub cached: CacheStats,
}

impl MemoryStats {
    /// The statistics of one kind.
    pub fn kind(&self, kind: MemoryKind) -> KindStats {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, stats)| *stats)
            .unwrap_or_default()
    }
}
