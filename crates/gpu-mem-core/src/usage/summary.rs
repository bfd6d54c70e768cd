//! A snapshot as a table a person reads at a glance ([`MemorySnapshot::summary`]), and byte
//! counts as people write them.

use super::snapshot::MemorySnapshot;
use crate::accounting::KindStats;
use crate::units::human_bytes;
use std::fmt::Write;

/// How many of the largest live allocations a summary lists.
pub const SUMMARY_LARGEST: usize = 10;

fn row(out: &mut String, name: &str, s: &KindStats) {
    let _ = writeln!(
        out,
        "{name:<13} {:>11} {:>11} {:>7} {:>9} {:>9} {:>9}",
        human_bytes(s.current_bytes),
        human_bytes(s.peak_bytes),
        s.current_count,
        s.peak_count,
        s.allocations,
        s.frees,
    );
}

impl MemorySnapshot {
    /// The statistics as a table (kinds that were never allocated are left out), the caches,
    /// out-of-memory retries, and the largest live allocations with their locations.
    pub fn summary(&self) -> String {
        let stats = &self.stats;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "gpu-mem memory of {} device {}: {} live allocation(s), {} on the device (peak {}), {} of host memory (peak {})",
            stats.backend,
            stats.device,
            stats.device_total.current_count + stats.host_total.current_count,
            human_bytes(stats.device_total.current_bytes),
            human_bytes(stats.device_total.peak_bytes),
            human_bytes(stats.host_total.current_bytes),
            human_bytes(stats.host_total.peak_bytes),
        );
        let _ = writeln!(
            out,
            "{:<13} {:>11} {:>11} {:>7} {:>9} {:>9} {:>9}",
            "kind", "current", "peak", "live", "peak live", "allocs", "frees"
        );
        for (kind, kind_stats) in &stats.kinds {
            if kind_stats.allocations > 0 {
                row(&mut out, kind.name(), kind_stats);
            }
        }
        row(&mut out, "device total", &stats.device_total);
        row(&mut out, "host total", &stats.host_total);
        if let (Some(reserved), Some(used)) = (stats.cached.pool_reserved, stats.cached.pool_used) {
            let _ = writeln!(
                out,
                "stream-ordered pool: {} reserved, {} in use, {} a trim would release",
                human_bytes(reserved),
                human_bytes(used),
                human_bytes(stats.cached.releasable_bytes()),
            );
        }
        let oom = &stats.oom;
        if oom.retries > 0 || oom.failures > 0 {
            let _ = writeln!(
                out,
                "out of memory: {} retr{} after waiting for in-flight work ({} found room, {} released), {} failure(s)",
                oom.retries,
                if oom.retries == 1 { "y" } else { "ies" },
                oom.retries_succeeded,
                human_bytes(oom.reclaimed_bytes),
                oom.failures,
            );
        }
        if !self.listed {
            let _ = writeln!(out, "live allocations not listed (GPU_MEM_TRACK=off)");
        } else if !self.allocations.is_empty() {
            let _ = writeln!(out, "largest live allocations:");
            for a in self.largest(SUMMARY_LARGEST) {
                let _ = writeln!(
                    out,
                    "  {:>11}  {:<11} #{:<6} age {:>8.3} s  {}",
                    human_bytes(a.bytes),
                    a.kind.name(),
                    a.id,
                    a.age_seconds,
                    a.location,
                );
            }
        }
        out
    }
}
