//! Which streams may still be using a host buffer.
//!
//! A host buffer that an enqueued copy reads or writes records the stream here. Host code that
//! wants to read the buffer first waits for the streams that may still write it; host code that
//! wants to write it waits for every stream that may still use it. Entries hold a weak reference
//! and the stream's submission number, so a stream that has since synchronized (or was dropped,
//! which synchronizes) costs nothing to check.

use crate::error::Result;
use crate::stream::StreamInner;
use std::sync::{Arc, Mutex, Weak};

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
    stream: Weak<StreamInner>,
    /// The stream's submission count right after the operation was enqueued.
    ticket: u64,
    access: Access,
}

/// The set of in-flight uses of one host buffer.
#[derive(Debug, Default)]
pub(crate) struct PendingUses {
    uses: Mutex<Vec<Use>>,
}

impl PendingUses {
    pub(crate) fn record(&self, stream: Weak<StreamInner>, ticket: u64, access: Access) {
        let mut uses = self.lock();
        // Drop entries that are already complete so the list stays short.
        uses.retain(|u| u.stream.upgrade().is_some_and(|s| !s.is_done(u.ticket)));
        uses.push(Use {
            stream,
            ticket,
            access,
        });
    }

    /// Forgets a use recorded for an operation that was then not enqueued.
    pub(crate) fn forget(&self, stream: &Weak<StreamInner>, ticket: u64) {
        self.lock()
            .retain(|u| !(u.ticket == ticket && Weak::ptr_eq(&u.stream, stream)));
    }

    /// The in-flight uses that conflict with `access`, leaving them recorded (so every other
    /// host or stream user keeps seeing them until they are known to be complete).
    fn conflicting(
        &self,
        access: Access,
        except: Option<&Arc<StreamInner>>,
    ) -> Vec<(Arc<StreamInner>, u64)> {
        let mut uses = self.lock();
        uses.retain(|u| u.stream.upgrade().is_some_and(|s| !s.is_done(u.ticket)));
        uses.iter()
            .filter(|u| access == Access::Write || u.access == Access::Write)
            .filter_map(|u| u.stream.upgrade().map(|s| (s, u.ticket)))
            .filter(|(s, _)| except.is_none_or(|e| !Arc::ptr_eq(s, e)))
            .collect()
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
    pub(crate) fn wait_for_stream(&self, access: Access, stream: &Arc<StreamInner>) -> Result<()> {
        for (other, ticket) in self.conflicting(access, Some(stream)) {
            other.wait_ticket(ticket)?;
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Use>> {
        self.uses
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
