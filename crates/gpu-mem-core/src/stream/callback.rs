//! Host callbacks on a stream ([`Stream::add_callback`], Numba's `stream.add_callback`): a
//! function run once the work enqueued before it has completed.
//!
//! Each stream that is given callbacks gets one thread of its own, made on the first: it waits
//! for an event recorded where the callback was added, then runs the callback with the wait's
//! outcome. Callbacks of one stream therefore run one at a time, in the order they were added,
//! and never on a driver's thread (CUDA forbids driver calls from `cuLaunchHostFunc`'s), so a
//! callback may call gpu-mem, this stream included. The thread ends once the stream is dropped
//! and its last callback has run.

use super::{Event, Stream};
use crate::error::Result;
use std::sync::mpsc;

/// A callback and the event that marks the work it waits for.
pub(crate) struct Pending {
    event: Event,
    callback: Box<dyn FnOnce(Result<()>) + Send>,
}

/// Runs the callbacks sent to it in order, until every sender is gone.
fn serve(pending: mpsc::Receiver<Pending>) {
    for Pending { event, callback } in pending {
        let outcome = event.synchronize();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(outcome)));
        if ran.is_err() {
            tracing::error!("a stream callback panicked; later callbacks still run");
        }
    }
}

impl Stream {
    /// Runs `callback` once the work enqueued on this stream so far has completed, with `Ok(())`
    /// or the error waiting for that work found (Numba's `stream.add_callback`).
    ///
    /// Callbacks added to one stream run in the order they were added, one at a time, on a
    /// thread of the stream's own; they may call gpu-mem, this stream included. Unlike
    /// `cuStreamAddCallback`, work enqueued after the callback does not wait for it to return:
    /// order later work after a callback by having the callback enqueue it. A callback that
    /// panics is logged and does not stop those after it.
    pub fn add_callback<F>(&self, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        let event = Event::new(self.device(), false)?;
        event.record(self)?;
        let sender = {
            let mut slot = crate::sync::lock(&self.inner().callbacks);
            match &*slot {
                Some(sender) => sender.clone(),
                None => {
                    let (sender, receiver) = mpsc::channel();
                    std::thread::Builder::new()
                        .name("gpu-mem stream callbacks".into())
                        .spawn(move || serve(receiver))
                        .map_err(|e| crate::Error::Unsupported {
                            operation: "add_callback",
                            reason: format!("no thread could be made to run callbacks: {e}"),
                        })?;
                    slot.insert(sender).clone()
                }
            }
        };
        // The thread ends only once the stream's senders are gone, so it is there to receive.
        sender
            .send(Pending {
                event,
                callback: Box::new(callback),
            })
            .map_err(|_| crate::Error::Unsupported {
                operation: "add_callback",
                reason: "the stream's callback thread has ended".into(),
            })
    }
}
