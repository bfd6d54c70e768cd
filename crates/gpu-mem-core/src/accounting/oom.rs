//! What an out-of-memory error says beside the request: what gpu-mem holds on the device by
//! kind, what the pool's cache would give back, and the largest live allocations with where
//! they were made.

use super::device_usage::DeviceUsage;
use super::kind::MemoryKind;
use crate::backend::PoolUsage;
use crate::error::{Error, MemoryReport};

/// How many of the largest live allocations an out-of-memory error names.
const LARGEST: usize = 5;

impl DeviceUsage {
    /// The report for an allocation that found no room.
    pub(crate) fn report(&self, pool: Option<PoolUsage>) -> MemoryReport {
        let held = MemoryKind::ALL
            .iter()
            .map(|&kind| (kind.name(), self.kinds[kind.index()].current_bytes()))
            .filter(|(_, bytes)| *bytes > 0)
            .collect();
        let mut live = self.ledger.live();
        live.sort_by(|(a_id, a), (b_id, b)| b.bytes.cmp(&a.bytes).then(a_id.cmp(b_id)));
        let largest = live
            .into_iter()
            .take(LARGEST)
            .map(|(_, r)| (r.bytes, r.kind.name(), r.location.to_string()))
            .collect();
        let cached = super::counters::CacheStats::from_pool(pool);
        MemoryReport {
            held,
            releasable_bytes: cached.releasable_bytes(),
            largest,
        }
    }

    /// Counts a final out-of-memory failure and attaches the report to it; other errors pass.
    pub(crate) fn explain(&self, mut error: Error, pool: Option<PoolUsage>) -> Error {
        if let Error::OutOfMemory { report, .. } | Error::HostOutOfMemory { report, .. } =
            &mut error
            && report.is_none()
        {
            self.oom
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *report = Some(Box::new(self.report(pool)));
        }
        error
    }
}
