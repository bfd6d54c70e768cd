//! Where memory goes, as users read it: a device's statistics ([`Device::memory_stats`]), a
//! table to read ([`Device::memory_summary`]), a snapshot of every live allocation with where it
//! was made ([`Device::memory_snapshot`], JSON with the `serde` feature), and leak reports
//! ([`assert_no_leaks`] for test suites; [`warn_about_leaks`] when a runtime is dropped).
//!
//! The counting itself is `accounting`'s: every allocation holds a ticket while it lives, so
//! what is read here is what the allocations did, whatever the backend.

#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_support;
mod leaks;
mod snapshot;
mod summary;

pub use crate::accounting::{
    AllocationEvent, CacheStats, HISTORY_EVENTS, KindStats, MemoryKind, MemoryStats, OomStats,
    Tracking, set_tracking, tracking,
};
pub use leaks::{assert_no_leaks, leak_check_enabled, leaks, warn_about_leaks};
pub use snapshot::{LiveAllocation, MemorySnapshot};
pub use summary::SUMMARY_LARGEST;

use crate::device::Device;

impl Device {
    /// This device's memory statistics: per kind of memory, current and peak bytes and counts,
    /// allocations and frees; the caches; out-of-memory retries (PyTorch's `memory_stats`).
    pub fn memory_stats(&self) -> MemoryStats {
        self.usage().stats(self.pool_usage())
    }

    /// Starts the peaks again from what is held now (PyTorch's `reset_peak_memory_stats`).
    pub fn reset_peak_memory_stats(&self) {
        self.usage().reset_peaks();
    }

    /// The statistics and the largest live allocations as a table to read (PyTorch's
    /// `memory_summary`).
    pub fn memory_summary(&self) -> String {
        self.memory_snapshot().summary()
    }

    /// The statistics, every live allocation with its size, kind, stream, age and location, and
    /// the history when `GPU_MEM_TRACK=history` (PyTorch's memory snapshot).
    pub fn memory_snapshot(&self) -> MemorySnapshot {
        snapshot::take(self.usage(), self.pool_usage())
    }
}
