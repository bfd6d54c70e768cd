//! The live allocations of one device, with where each was made, and (when asked for) a
//! bounded history of allocations and frees. What snapshots, leak reports and out-of-memory
//! explanations list.
//!
//! Eight shards, each a slab (a slot per allocation, freed slots reused) behind its own mutex,
//! each on its own cache line. A thread records its allocations in the shard it was given when
//! it first allocated, so threads allocating at once do not meet; a free goes to the shard and
//! slot its allocation's [`Entry`] names (from whichever thread frees it).

use super::clock::{Origin, Ticks};
use super::kind::MemoryKind;
use super::tracking::HISTORY_EVENTS;
use crate::sync::lock;
use std::collections::VecDeque;
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const SHARDS: usize = 8;

/// What is known of a live allocation.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) kind: MemoryKind,
    pub(crate) bytes: u64,
    pub(crate) location: &'static Location<'static>,
    pub(crate) at: Ticks,
    pub(crate) stream: Option<u64>,
    pub(crate) backtrace: Option<String>,
}

/// Where an allocation's record is: its shard and slot. (The record holds its number: in order
/// of allocation within the shard, shards interleaved, `sequence * SHARDS + shard`.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    shard: u32,
    slot: u32,
}

/// An allocation or a free, as the history keeps it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocationEvent {
    /// Time since the device's statistics began (its first `Device`), in seconds.
    pub seconds: f64,
    /// `true` for an allocation, `false` for a free.
    pub allocated: bool,
    /// Which allocation (the id [`LiveAllocation::id`](crate::usage::LiveAllocation::id) shows).
    pub id: u64,
    /// Kind of memory.
    pub kind: MemoryKind,
    /// Bytes.
    pub bytes: u64,
    /// Where the allocation was made (`file:line:column`).
    pub location: String,
}

#[derive(Debug, Default)]
struct Shard {
    slots: Vec<Option<(u64, Record)>>,
    free: Vec<u32>,
    sequence: u64,
}

/// A shard on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(Mutex<Shard>);

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    shards: [Padded; SHARDS],
    history: Mutex<VecDeque<(Ticks, bool, u64, Record)>>,
}

/// The shard this thread records its allocations in.
fn my_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

impl Ledger {
    /// Records a live allocation (and, with `history`, the event).
    pub(crate) fn insert(&self, record: Record, history: bool) -> Entry {
        let index = my_shard();
        let at = record.at;
        let mut shard = lock(&self.shards[index].0);
        let id = shard.sequence * SHARDS as u64 + index as u64;
        shard.sequence += 1;
        let kept = if history { Some(record.clone()) } else { None };
        let slot = match shard.free.pop() {
            Some(slot) => {
                shard.slots[slot as usize] = Some((id, record));
                slot
            }
            None => {
                shard.slots.push(Some((id, record)));
                (shard.slots.len() - 1) as u32
            }
        };
        drop(shard);
        if let Some(record) = kept {
            self.remember(at, true, id, record);
        }
        Entry {
            shard: index as u32,
            slot,
        }
    }

    /// Forgets a live allocation (and, with `history`, records the free at `at`).
    pub(crate) fn remove(&self, entry: Entry, history: Option<Ticks>) {
        let mut shard = lock(&self.shards[entry.shard as usize].0);
        let taken = shard
            .slots
            .get_mut(entry.slot as usize)
            .and_then(Option::take);
        if taken.is_some() {
            shard.free.push(entry.slot);
        }
        drop(shard);
        if let (Some(at), Some((id, record))) = (history, taken) {
            self.remember(at, false, id, record);
        }
    }

    fn remember(&self, at: Ticks, allocated: bool, id: u64, record: Record) {
        let mut history = lock(&self.history);
        if history.len() == HISTORY_EVENTS {
            history.pop_front();
        }
        history.push_back((at, allocated, id, record));
    }

    /// Every live allocation, oldest first.
    pub(crate) fn live(&self) -> Vec<(u64, Record)> {
        let mut all: Vec<(u64, Record)> = self
            .shards
            .iter()
            .flat_map(|shard| {
                lock(&shard.0)
                    .slots
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort_by_key(|(id, record)| (record.at, *id));
        all
    }

    /// The history, in order, with times in seconds from `origin`.
    pub(crate) fn history(&self, origin: &Origin) -> Vec<AllocationEvent> {
        lock(&self.history)
            .iter()
            .map(|(at, allocated, id, record)| AllocationEvent {
                seconds: origin.seconds_at(*at),
                allocated: *allocated,
                id: *id,
                kind: record.kind,
                bytes: record.bytes,
                location: record.location.to_string(),
            })
            .collect()
    }
}
