//! A per-thread memo of the stream a thread looked up last.
//!
//! Stream work from the host comes in runs on one stream (copies, then a `synchronize`), and
//! every call names its stream by handle. Looking a handle up in the device's stream table costs
//! the table's read lock and a reference count: four locked instructions, as much as a small
//! copy's own bookkeeping. A thread that names the stream it named last finds it here instead,
//! with none.
//!
//! An entry is keyed by backend instance, device and handle; a backend never hands out a handle
//! twice, so a key names at most one stream ever. It holds a reference to that stream, and is
//! used only while the stream is open: a destroyed stream is closed when it leaves the table,
//! and a dropped backend closes all of its streams, so a stale entry is a miss, never a stream
//! found where the table has none. (The reference only keeps a closed stream's bookkeeping —
//! no thread — until the entry is replaced or the thread ends.)

use crate::stream::SimStream;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies a stream among all simulator instances of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamKey {
    pub(crate) backend: u64,
    pub(crate) device: usize,
    pub(crate) handle: u64,
}

struct Recent {
    key: StreamKey,
    stream: Arc<SimStream>,
}

thread_local! {
    static RECENT: RefCell<Option<Recent>> = const { RefCell::new(None) };
}

/// A number no other simulator instance of this process has (the backend part of a key).
pub(crate) fn new_backend_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `f` on the stream `key` names if it is this thread's remembered one and still open;
/// `None` otherwise (look it up in the table, then [`remember`] it).
pub(crate) fn with_recent<R>(key: StreamKey, f: &impl Fn(&Arc<SimStream>) -> R) -> Option<R> {
    RECENT
        .try_with(|slot| {
            // Busy only if `f` itself looks a stream up (it never does); a miss then.
            let slot = slot.try_borrow().ok()?;
            let recent = slot.as_ref()?;
            (recent.key == key && recent.stream.is_open()).then(|| f(&recent.stream))
        })
        .ok()
        .flatten()
}

/// Remembers `stream`, found in the table under `key`, as this thread's recent stream.
pub(crate) fn remember(key: StreamKey, stream: &Arc<SimStream>) {
    let previous = RECENT.try_with(|slot| {
        let mut slot = slot.try_borrow_mut().ok()?;
        slot.replace(Recent {
            key,
            stream: Arc::clone(stream),
        })
    });
    // Dropped outside the borrow: dropping the last reference to a stream shuts it down.
    drop(previous);
}
