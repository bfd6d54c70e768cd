//! What a device's memory looks like at one moment ([`MemorySnapshot`]): the statistics, every
//! live allocation with where it was made, and the history when it is kept. Saved as JSON with
//! the `serde` feature; `gpu-mem memory FILE` reads it back.

use crate::accounting::{AllocationEvent, DeviceUsage, MemoryKind, MemoryStats};
use crate::backend::PoolUsage;

/// A live allocation, as a snapshot lists it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LiveAllocation {
    /// The allocation's number on its device (in order of allocation, from 1).
    pub id: u64,
    /// Kind of memory.
    pub kind: MemoryKind,
    /// Bytes.
    pub bytes: u64,
    /// Where it was allocated: the caller of gpu-mem's allocating function (`file:line:column`).
    pub location: String,
    /// Seconds since it was allocated.
    pub age_seconds: f64,
    /// The stream it was allocated on (stream-ordered allocations), as the backend's handle.
    pub stream: Option<u64>,
    /// The backtrace of the allocation, with `GPU_MEM_TRACK=backtrace`.
    pub backtrace: Option<String>,
}

/// A device's memory at one moment ([`Device::memory_snapshot`](crate::Device::memory_snapshot)).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemorySnapshot {
    /// Seconds between the device's first use and the snapshot (the history's time axis).
    pub seconds: f64,
    /// The statistics.
    pub stats: MemoryStats,
    /// `false` when `GPU_MEM_TRACK=off`: the allocations are then not listed.
    pub listed: bool,
    /// Every live allocation, oldest first.
    pub allocations: Vec<LiveAllocation>,
    /// Allocations and frees in order, with `GPU_MEM_TRACK=history` (the last
    /// [`HISTORY_EVENTS`](crate::accounting::HISTORY_EVENTS) of them); empty otherwise.
    pub history: Vec<AllocationEvent>,
}

impl MemorySnapshot {
    /// The live allocations, largest first (the first `n`).
    pub fn largest(&self, n: usize) -> Vec<&LiveAllocation> {
        let mut by_size: Vec<&LiveAllocation> = self.allocations.iter().collect();
        by_size.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.id.cmp(&b.id)));
        by_size.truncate(n);
        by_size
    }

    /// The snapshot as JSON.
    #[cfg(feature = "serde")]
    pub fn to_json(&self) -> String {
        // A snapshot holds strings, numbers and enums only: serialising it cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Reads a snapshot saved with [`to_json`](MemorySnapshot::to_json).
    #[cfg(feature = "serde")]
    pub fn from_json(json: &str) -> crate::Result<MemorySnapshot> {
        serde_json::from_str(json).map_err(|e| crate::Error::InvalidArgument {
            name: "memory snapshot",
            reason: format!("not a gpu-mem memory snapshot: {e}"),
        })
    }
}

pub(crate) fn take(usage: &DeviceUsage, pool: Option<PoolUsage>) -> MemorySnapshot {
    let origin = &usage.origin;
    let seconds = origin.seconds_now();
    let allocations = usage
        .ledger
        .live()
        .into_iter()
        .map(|(id, record)| LiveAllocation {
            id,
            kind: record.kind,
            bytes: record.bytes,
            location: record.location.to_string(),
            age_seconds: (seconds - origin.seconds_at(record.at)).max(0.0),
            stream: record.stream,
            backtrace: record.backtrace,
        })
        .collect();
    MemorySnapshot {
        seconds,
        stats: usage.stats(pool),
        listed: usage.tracking.locations,
        allocations,
        history: usage.ledger.history(origin),
    }
}
