//! Allocation under pressure: an allocation that finds no room (device memory, or the
//! page-locked limit) first waits for the in-flight work that keeps dropped memory alive, which
//! then goes, and tries once more — as Numba frees its pending deallocations then.
//!
//! What keeps memory alive is the streams' bookkeeping, which `memory` does not know: the
//! `stream` module registers its reclaim function ([`set_reclaim`]) when it creates its first
//! stream, so the dependency runs from `stream` to `memory`, never back. Before any stream
//! exists no work can keep memory alive, and a failed allocation fails at once.

use crate::device::Device;
use crate::error::{Error, Result};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

/// Waits for the work of `device`'s streams that keeps memory alive whose owners are gone;
/// `true` when there was any (so another try may find room).
pub(crate) type Reclaim = fn(&Device) -> bool;

static RECLAIM: OnceLock<Reclaim> = OnceLock::new();

/// Registers the reclaim function (the first registration stands; there is one).
pub(crate) fn set_reclaim(reclaim: Reclaim) {
    // Every stream after the first finds it set: `set` then only reads.
    let _ = RECLAIM.set(reclaim);
}

/// Runs `allocate`, and when it fails for want of room (device memory, or the page-locked
/// limit) while in-flight work keeps memory alive, waits for that work and runs it again. The
/// retries are counted in the device's statistics, and an allocation that still finds no room
/// fails with an error that says what holds the memory.
pub(crate) fn allocate_or_release<R>(
    device: &Device,
    allocate: impl Fn() -> Result<R>,
) -> Result<R> {
    let result = match allocate() {
        Err(error @ (Error::OutOfMemory { .. } | Error::HostOutOfMemory { .. })) => {
            retry(device, error, allocate)
        }
        other => other,
    };
    result.map_err(|error| device.usage().explain(error, device.pool_usage()))
}

/// The retry after a failure for want of room, when there is in-flight work to wait for.
#[cold]
fn retry<R>(device: &Device, error: Error, allocate: impl Fn() -> Result<R>) -> Result<R> {
    let usage = device.usage();
    let held_before = usage.current_bytes();
    if !RECLAIM.get().is_some_and(|reclaim| reclaim(device)) {
        return Err(error);
    }
    let oom = &usage.oom;
    oom.retries.fetch_add(1, Ordering::Relaxed);
    oom.reclaimed_bytes.fetch_add(
        held_before.saturating_sub(usage.current_bytes()),
        Ordering::Relaxed,
    );
    let result = allocate();
    if result.is_ok() {
        oom.retries_succeeded.fetch_add(1, Ordering::Relaxed);
    }
    result
}
