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

/// One kind's counters (or a total's).
#[derive(Debug, Default)]
pub(crate) struct KindCounters {
    current_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    current_count: AtomicU64,
    peak_count: AtomicU64,
    allocations: AtomicU64,
    frees: AtomicU64,
    allocated_bytes: AtomicU64,
}

impl KindCounters {
    pub(crate) fn on_alloc(&self, bytes: u64) {
        self.allocations.fetch_add(1, Relaxed);
        self.allocated_bytes.fetch_add(bytes, Relaxed);
        let now = self.current_bytes.fetch_add(bytes, Relaxed) + bytes;
        self.peak_bytes.fetch_max(now, Relaxed);
        let count = self.current_count.fetch_add(1, Relaxed) + 1;
        self.peak_count.fetch_max(count, Relaxed);
    }

    pub(crate) fn on_free(&self, bytes: u64) {
        self.frees.fetch_add(1, Relaxed);
        self.current_bytes.fetch_sub(bytes, Relaxed);
        self.current_count.fetch_sub(1, Relaxed);
    }

    pub(crate) fn current_bytes(&self) -> u64 {
        self.current_bytes.load(Relaxed)
    }

    pub(crate) fn reset_peak(&self) {
        self.peak_bytes
            .store(self.current_bytes.load(Relaxed), Relaxed);
        self.peak_count
            .store(self.current_count.load(Relaxed), Relaxed);
    }

    pub(crate) fn read(&self) -> KindStats {
        KindStats {
            current_bytes: self.current_bytes.load(Relaxed),
            peak_bytes: self.peak_bytes.load(Relaxed),
            current_count: self.current_count.load(Relaxed),
            peak_count: self.peak_count.load(Relaxed),
            allocations: self.allocations.load(Relaxed),
            frees: self.frees.load(Relaxed),
            allocated_bytes: self.allocated_bytes.load(Relaxed),
        }
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
    /// Bytes allocated, summed over every allocation made.
    pub allocated_bytes: u64,
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
