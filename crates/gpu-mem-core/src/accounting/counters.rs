//! The statistics proper: atomic counters per kind of memory, updated on every allocation and
//! free without a lock, and read into plain values ([`KindStats`], [`MemoryStats`]).
//!
//! Counters are `Relaxed`: each is exact, but a reading taken while other threads allocate may
//! mix a counter from before an allocation with one from after it (as every allocator's
//! statistics do). The peaks are exact: `fetch_max` after the add.

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

/// One kind's counters (or a total's, whose cumulative ones stay 0: a total reads them as the
/// sum of its kinds').
#[derive(Debug, Default)]
pub(crate) struct KindCounters {
    /// Live count and bytes ([`BYTES_BITS`]).
    live: AtomicU64,
    peak_bytes: AtomicU64,
    peak_count: AtomicU64,
    allocations: AtomicU64,
}

impl KindCounters {
    /// Counts an allocation in the live word and the peaks (what a total counts).
    pub(crate) fn on_alloc_live(&self, bytes: u64) {
        let one = packed(bytes);
        let now = self.live.fetch_add(one, Relaxed).wrapping_add(one);
        let (count, bytes) = (now >> BYTES_BITS, now & BYTES_MASK);
        // A plain load first: the locked `fetch_max` only when a peak moves.
        if bytes > self.peak_bytes.load(Relaxed) {
            self.peak_bytes.fetch_max(bytes, Relaxed);
        }
        if count > self.peak_count.load(Relaxed) {
            self.peak_count.fetch_max(count, Relaxed);
        }
    }

    /// Counts an allocation of a kind: live, peaks and the cumulative counters.
    pub(crate) fn on_alloc(&self, bytes: u64) {
        self.allocations.fetch_add(1, Relaxed);
        self.on_alloc_live(bytes);
    }

    pub(crate) fn on_free(&self, bytes: u64) {
        self.live.fetch_sub(packed(bytes), Relaxed);
    }

    pub(crate) fn current_bytes(&self) -> u64 {
        self.live.load(Relaxed) & BYTES_MASK
    }

    pub(crate) fn reset_peak(&self) {
        let live = self.live.load(Relaxed);
        self.peak_bytes.store(live & BYTES_MASK, Relaxed);
        self.peak_count.store(live >> BYTES_BITS, Relaxed);
    }

    /// The counters as values; frees are the allocations no longer live.
    pub(crate) fn read(&self) -> KindStats {
        let live = self.live.load(Relaxed);
        let allocations = self.allocations.load(Relaxed);
        let current_count = live >> BYTES_BITS;
        KindStats {
            current_bytes: live & BYTES_MASK,
            peak_bytes: self.peak_bytes.load(Relaxed),
            current_count,
            peak_count: self.peak_count.load(Relaxed),
            allocations,
            frees: allocations.saturating_sub(current_count),
        }
    }

    /// A total's reading: its own live and peak counters, and its kinds' cumulative ones.
    pub(crate) fn read_total<'a>(
        &self,
        kinds: impl Iterator<Item = &'a KindCounters>,
    ) -> KindStats {
        let mut stats = self.read();
        for kind in kinds {
            stats.allocations += kind.allocations.load(Relaxed);
        }
        stats.frees = stats.allocations.saturating_sub(stats.current_count);
        stats
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
