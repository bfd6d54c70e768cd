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
/// limit) while in-flight work keeps memory alive, waits for that work and runs it again.
pub(crate) fn allocate_or_release<R>(
    device: &Device,
    allocate: impl Fn() -> Result<R>,
) -> Result<R> {
    match allocate() {
        Err(Error::OutOfMemory { .. } | Error::HostOutOfMemory { .. })
            if RECLAIM.get().is_some_and(|reclaim| reclaim(device)) =>
        {
            allocate()
        }
        other => other,
    }
}
