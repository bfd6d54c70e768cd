//! The accounting of memory every allocation goes through: counters per device and kind of
//! memory, the ledger of live allocations with where each was made, and the [`Ticket`] an
//! allocation holds while it lives (making it counts the allocation, dropping it the free).
//!
//! The counters are atomics (no lock); the ledger takes one of eight shard locks, and can be
//! turned off (`GPU_MEM_TRACK`, [`Tracking`]). A device's accounting is shared by every
//! `Device` handle of it (found by backend instance and ordinal when a `Device` is made).
//!
//! A device's accounting also carries the one setting shared like it by every handle of the
//! device: the user's allocator for device arrays (`allocator`).
//!
//! This module depends on `backend`, `allocator` and `error` only: `device` holds a device's accounting and
//! `memory` makes the tickets; reading it (statistics, snapshots, leak reports) is `usage`'s.

mod clock;
mod counters;
mod device_usage;
mod kind;
mod ledger;
mod oom;
mod tracking;

pub use counters::{CacheStats, KindStats, MemoryStats, OomStats};
pub(crate) use device_usage::{DeviceUsage, Ticket, for_device, of_backend};
pub use kind::MemoryKind;
pub use ledger::AllocationEvent;
pub use tracking::{HISTORY_EVENTS, Tracking, set_tracking, tracking};
