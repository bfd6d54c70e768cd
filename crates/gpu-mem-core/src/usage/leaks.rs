//! Leak reports: the allocations still alive when a test or a program says none should be.
//!
//! Memory of dropped arrays that in-flight work keeps alive is not a leak, nor are the staging
//! buffers streams keep for reuse: [`leaks`] first waits for the device's streams, which lets
//! that memory go, and releases what is cached (`Device::release_cached_memory`).

use super::snapshot::{self, LiveAllocation};
use crate::backend::Backend;
use crate::device::Device;
use crate::units::human_bytes;
use std::fmt::Write;
use std::sync::Arc;

/// `true` when a dropped runtime warns about live allocations: `GPU_MEM_LEAK_CHECK=1` turns it
/// on, `0` off; without it, on in debug builds (the check reads the ledger once, at the drop).
pub fn leak_check_enabled() -> bool {
    match std::env::var("GPU_MEM_LEAK_CHECK") {
        Ok(value) => !matches!(value.trim(), "0" | "false" | "off" | ""),
        Err(_) => cfg!(debug_assertions),
    }
}

/// The allocations alive on `device` once its streams' work is done, oldest first. Empty when
/// the ledger is off (`GPU_MEM_TRACK=off`): then only [`Device::memory_stats`]' counts remain.
pub fn leaks(device: &Device) -> Vec<LiveAllocation> {
    // Waiting lets go of what finished work kept alive; a device that cannot be waited for
    // (lost) still has its ledger read.
    if let Err(error) = device.synchronize() {
        tracing::debug!("leak check: synchronize failed ({error}); reading the ledger as it is");
    }
    // Buffers streams keep for reuse are not leaks.
    if let Err(error) = device.release_cached_memory() {
        tracing::debug!("leak check: releasing cached memory failed ({error})");
    }
    snapshot::take(device.usage(), None).allocations
}

fn describe(what: &str, allocations: &[LiveAllocation]) -> String {
    let total: u64 = allocations.iter().map(|a| a.bytes).sum();
    let mut text = format!(
        "{what}: {} allocation(s) still alive, {} in all:",
        allocations.len(),
        human_bytes(total)
    );
    for a in allocations {
        let _ = write!(
            text,
            "\n  #{} {} {} allocated at {} ({:.3} s ago)",
            a.id,
            human_bytes(a.bytes),
            a.kind,
            a.location,
            a.age_seconds
        );
        if let Some(backtrace) = &a.backtrace {
            let _ = write!(text, "\n{backtrace}");
        }
    }
    text
}

/// Panics, listing each allocation with its size, kind and location, when `device` still has
/// live allocations once its streams are done: for the end of a test, after its arrays are
/// dropped.
///
/// # Panics
/// When an allocation is alive; that is what it checks.
#[track_caller]
// A test assertion: panicking is how it reports.
#[allow(clippy::panic)]
pub fn assert_no_leaks(device: &Device) {
    let alive = leaks(device);
    if !alive.is_empty() {
        panic!(
            "{}",
            describe(
                &format!("{} device {} leaks", device.kind(), device.ordinal()),
                &alive
            )
        );
    }
}

/// Logs a `tracing` warning per device of `backend` that has live allocations, listing them;
/// returns how many there are. A runtime calls it when it is dropped with
/// [`leak_check_enabled`]; arrays kept by `mem::forget`, in reference cycles, or IPC mappings
/// never closed show here.
pub fn warn_about_leaks(backend: &Arc<dyn Backend>) -> usize {
    let mut count = 0;
    for usage in crate::accounting::of_backend(backend) {
        let alive = snapshot::take(&usage, None).allocations;
        if !alive.is_empty() {
            count += alive.len();
            tracing::warn!(
                "{}",
                describe(
                    &format!(
                        "{} device {} at the runtime's drop",
                        usage.backend, usage.ordinal
                    ),
                    &alive
                )
            );
        }
    }
    count
}
