//! The live allocations of one device, with where each was made, and (when asked for) a
//! bounded history of allocations and frees. What snapshots, leak reports and out-of-memory
//! explanations list.
//!
//! Eight shards, chosen by allocation id, each behind its own mutex: an allocation or free
//! locks one shard briefly, so threads allocating at once rarely meet.

use super::kind::MemoryKind;
use super::tracking::HISTORY_EVENTS;
use crate::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::panic::Location;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SHARDS: usize = 8;

/// What is known of a live allocation.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) kind: MemoryKind,
    pub(crate) bytes: u64,
    pub(crate) location: &'static Location<'static>,
    pub(crate) at: Instant,
    pub(crate) stream: Option<u64>,
    pub(crate) backtrace: Option<String>,
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
pub(crate) struct Ledger {
    shards: [Mutex<HashMap<u64, Record>>; SHARDS],
    history: Mutex<VecDeque<AllocationEvent>>,
}

impl Ledger {
    pub(crate) fn insert(&self, id: u64, record: Record, history: Option<Duration>) {
        if let Some(since_start) = history {
            self.remember(AllocationEvent {
                seconds: since_start.as_secs_f64(),
                allocated: true,
                id,
                kind: record.kind,
                bytes: record.bytes,
                location: record.location.to_string(),
            });
        }
        lock(&self.shards[shard(id)]).insert(id, record);
    }

    pub(crate) fn remove(&self, id: u64, history: Option<Duration>) {
        let record = lock(&self.shards[shard(id)]).remove(&id);
        if let (Some(since_start), Some(record)) = (history, record) {
            self.remember(AllocationEvent {
                seconds: since_start.as_secs_f64(),
                allocated: false,
                id,
                kind: record.kind,
                bytes: record.bytes,
                location: record.location.to_string(),
            });
        }
    }

    fn remember(&self, event: AllocationEvent) {
        let mut history = lock(&self.history);
        if history.len() == HISTORY_EVENTS {
            history.pop_front();
        }
        history.push_back(event);
    }

    /// Every live allocation, oldest first.
    pub(crate) fn live(&self) -> Vec<(u64, Record)> {
        let mut all: Vec<(u64, Record)> = self
            .shards
            .iter()
            .flat_map(|shard| {
                lock(shard)
                    .iter()
                    .map(|(id, r)| (*id, r.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort_by_key(|(id, _)| *id);
        all
    }

    pub(crate) fn history(&self) -> Vec<AllocationEvent> {
        lock(&self.history).iter().cloned().collect()
    }
}

fn shard(id: u64) -> usize {
    (id % SHARDS as u64) as usize
}
