//! Allocation under pressure: an allocation that finds no room (device memory, or the
//! page-locked limit) first waits for the in-flight work that keeps dropped memory alive, which
//! then goes, and tries once more — as Numba frees its pending deallocations then; then trims
//! the stream-ordered pool's kept memory and tries again.
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
/// limit), releases what gpu-mem itself holds for later (see [`RELEASERS`]) and runs it again
/// after each release that gave something back. The retries are counted in the device's
/// statistics, and an allocation that still finds no room fails with an error that says what
/// holds the memory.
pub(crate) fn allocate_or_release<R>(
    device: &Device,
    allocate: impl Fn() -> Result<R>,
) -> Result<R> {
    let result = match allocate() {
        Err(error) if is_out_of_room(&error) => retry(device, error, allocate),
        other => other,
    };
    result.map_err(|error| device.usage().explain(error, device.pool_usage()))
}

fn is_out_of_room(error: &Error) -> bool {
    matches!(
        error,
        Error::OutOfMemory { .. } | Error::HostOutOfMemory { .. }
    )
}

/// Gives back memory gpu-mem holds for later, for an allocation that failed with `error`;
/// `Some(bytes released)` when it did anything (another try may then find room).
type Releaser = fn(&Device, &Error) -> Option<u64>;

/// What is released, in order: the cheapest first.
const RELEASERS: [Releaser; 2] = [wait_for_kept_memory, trim_the_pool];

/// Waits for the in-flight work that keeps memory of dropped arrays alive.
fn wait_for_kept_memory(device: &Device, _: &Error) -> Option<u64> {
    let usage = device.usage();
    let held_before = usage.current_bytes();
    let waited = RECLAIM.get().is_some_and(|reclaim| reclaim(device));
    waited.then(|| held_before.saturating_sub(usage.current_bytes()))
}

/// Trims the stream-ordered pool to what its live allocations use, for device memory.
fn trim_the_pool(device: &Device, error: &Error) -> Option<u64> {
    if !matches!(error, Error::OutOfMemory { .. }) {
        return None;
    }
    trim_pool(device).ok().filter(|&released| released > 0)
}

/// Trims `device`'s stream-ordered pool to what its live allocations use: the freed memory it
/// keeps for reuse (its release threshold) is the driver's again. Returns the bytes released
/// (0 on a backend without a pool, when it kept nothing, or when it cannot say what it keeps);
/// the trim's own failure is the error.
pub(crate) fn trim_pool(device: &Device) -> Result<u64> {
    let backend = device.backend();
    let Some(pool) = backend.pool() else {
        return Ok(0);
    };
    let Ok(usage) = pool.pool_usage(device.ordinal()) else {
        return Ok(0);
    };
    let kept = usage.reserved.saturating_sub(usage.used);
    if kept > 0 {
        pool.pool_trim(device.ordinal(), 0)?;
    }
    Ok(kept)
}

/// The tries after a failure for want of room: one after each releaser that gave back memory.
#[cold]
fn retry<R>(device: &Device, mut error: Error, allocate: impl Fn() -> Result<R>) -> Result<R> {
    let oom = &device.usage().oom;
    for release in RELEASERS {
        let Some(released) = release(device, &error) else {
            continue;
        };
        oom.retries.fetch_add(1, Ordering::Relaxed);
        oom.reclaimed_bytes.fetch_add(released, Ordering::Relaxed);
        match allocate() {
            Ok(value) => {
                oom.retries_succeeded.fetch_add(1, Ordering::Relaxed);
                return Ok(value);
            }
            Err(again) if is_out_of_room(&again) => error = again,
            Err(other) => return Err(other),
        }
    }
    Err(error)
}
