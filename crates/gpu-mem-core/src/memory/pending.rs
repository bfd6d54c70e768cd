//! Which streams may still be using a host buffer.
//!
//! A host buffer that an enqueued copy reads or writes records the stream here. Host code that
//! wants to read the buffer first waits for the streams that may still write it; host code that
//! wants to write it waits for every stream that may still use it. Entries hold a weak reference
//! and the stream's submission number, so a stream that has since synchronized (or was dropped,
//! which synchronizes) costs nothing to check.
//!
//! The queues are known here only through [`WorkQueue`], which streams implement: the
//! dependency runs from `stream` to `memory`, never back.

use crate::error::Result;
use crate::sync::lock;
use smallvec::SmallVec;
use std::sync::{Arc, Mutex, Weak};

/// What the pending uses of a host buffer need of the queue that runs the work: its operations
/// are numbered by tickets in submission order and complete in that order, so one ticket says
/// whether everything up to it is done.
pub(crate) trait WorkQueue: Send + Sync {
    /// Whether the operation with `ticket`, and every one before it, is known complete.
    fn is_done(&self, ticket: u64) -> bool;

    /// Waits until the operation with `ticket` has completed.
    fn wait_ticket(&self, ticket: u64) -> Result<()>;
}

/// How an enqueued operation uses a host buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The device reads the buffer (H2D copy).
    Read,
    /// The device writes the buffer (D2H copy, memset of mapped memory).
    Write,
}

#[derive(Debug)]
struct Use {
    stream: Weak<dyn WorkQueue>,
    /// The stream's submission count right after the operation was enqueued.
    ticket: u64,
    access: Access,
}

/// What a stream's entry was before [`PendingUses::record`] merged a use into it (`None`: the
/// use made the entry).
#[derive(Debug, Clone, Copy)]
#[must_use]
pub(crate) struct Undo(Option<(u64, Access)>);

/// The set of in-flight uses of one host buffer.
#[derive(Debug, Default)]
pub(crate) struct PendingUses {
    uses: Mutex<Vec<Use>>,
}

impl PendingUses {
    /// Records that the operation with `ticket` on `stream` uses the buffer; returns what
    /// [`PendingUses::forget`] needs to undo it.
    pub(crate) fn record<Q: WorkQueue + 'static>(
        &self,
        stream: &Arc<Q>,
        ticket: u64,
        access: Access,
    ) -> Undo {
        let mut uses = lock(&self.uses);
        // A stream runs its work in order, so a later ticket on the same stream completes after
        // every earlier one: one entry per stream, with the latest ticket and the strongest
        // access (a write conflicts with more), says as much as all of them. The list stays as
        // short as the number of streams using the buffer, however much work is in flight.
        // (Compared by address: no reference is taken unless a new entry needs one.)
        if let Some(same) = uses.iter_mut().find(|u| is_stream(u, stream)) {
            let before = Undo(Some((same.ticket, same.access)));
            same.ticket = same.ticket.max(ticket);
            if access == Access::Write {
                same.access = Access::Write;
            }
            return before;
        }
        // Drop entries that are already complete so the list stays short.
        uses.retain(still_pending);
        let stream: Weak<Q> = Arc::downgrade(stream);
        uses.push(Use {
            stream,
            ticket,
            access,
        });
        Undo(None)
    }

    /// Forgets a use recorded (as `undo` says) for an operation that was then not enqueued:
    /// the stream's entry goes back to what it was, or goes away if the use made it.
    pub(crate) fn forget<Q: WorkQueue>(&self, stream: &Arc<Q>, ticket: u64, undo: Undo) {
        let mut uses = lock(&self.uses);
        let Some(at) = uses
            .iter()
            .position(|u| u.ticket == ticket && is_stream(u, stream))
        else {
            return;
        };
        match undo.0 {
            Some((ticket, access)) => {
                uses[at].ticket = ticket;
                uses[at].access = access;
            }
            None => {
                uses.swap_remove(at);
            }
        }
    }

    /// The in-flight uses that conflict with `access`, except those of the queue at address
    /// `except`, leaving them recorded (so every other host or stream user keeps seeing them
    /// until they are known to be complete).
    fn conflicting(
        &self,
        access: Access,
        except: Option<*const ()>,
    ) -> SmallVec<[(Arc<dyn WorkQueue>, u64); 2]> {
        let mut found = SmallVec::new();
        let mut uses = lock(&self.uses);
        let excepted = |u: &Use| except.is_some_and(|e| is_at(u, e));
        // The usual case, checked without taking references: no entry, or only the asking
        // stream's own (its uses are ordered by the stream and kept as they are).
        if uses.iter().all(excepted) {
            return found;
        }
        uses.retain(|u| excepted(u) || still_pending(u));
        for u in uses.iter() {
            if (access == Access::Write || u.access == Access::Write)
                && !excepted(u)
                && let Some(stream) = u.stream.upgrade()
            {
                found.push((stream, u.ticket));
            }
        }
        found
    }

    /// Waits until host code may access the buffer: for a read, until no stream may still write
    /// it; for a write, until no stream may use it at all.
    pub(crate) fn wait_for_host(&self, host_access: Access) -> Result<()> {
        for (stream, ticket) in self.conflicting(host_access, None) {
            stream.wait_ticket(ticket)?;
        }
        Ok(())
    }

    /// Waits until an operation about to be enqueued on `stream` may use the buffer: every
    /// conflicting use (one of them writes) on *another* stream must have completed. Uses on
    /// `stream` itself are ordered by the stream and need no wait.
    pub(crate) fn wait_for_stream<Q: WorkQueue>(
        &self,
        access: Access,
        stream: &Arc<Q>,
    ) -> Result<()> {
        // The usual case — no entry, or only the stream's own — answered without building the
        // list of conflicts (a value moved out whole after being written piece by piece, which
        // stalls).
        if lock(&self.uses).iter().all(|u| is_stream(u, stream)) {
            return Ok(());
        }
        for (other, ticket) in self.conflicting(access, Some(Arc::as_ptr(stream).cast())) {
            other.wait_ticket(ticket)?;
        }
        Ok(())
    }
}

/// Whether `u` is an entry of `stream` (by address: no reference is taken).
fn is_stream<Q: WorkQueue>(u: &Use, stream: &Arc<Q>) -> bool {
    is_at(u, Arc::as_ptr(stream).cast())
}

/// Whether `u` is an entry of the queue at `address`.
fn is_at(u: &Use, address: *const ()) -> bool {
    std::ptr::addr_eq(u.stream.as_ptr(), address)
}

/// Whether `u`'s stream may still be running it.
fn still_pending(u: &Use) -> bool {
    u.stream.upgrade().is_some_and(|s| !s.is_done(u.ticket))
}
