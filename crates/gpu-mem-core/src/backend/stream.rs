//! [`Streams`]: ordered queues of work on a device, on every backend.

use super::types::{EventHandle, StreamHandle};
use crate::error::Result;

/// Creating, waiting for and ordering streams.
///
/// # Safety
///
/// The core releases what a stream's work used on the strength of these answers, so an
/// implementation must uphold, for every device it accepts:
///
/// * **Order.** Work enqueued on one stream runs in the order it was enqueued.
/// * **Completion.** [`Streams::stream_synchronize`] returns `Ok`, and
///   [`Streams::stream_query`] `Ok(true)`, only once all work enqueued on the stream before the
///   call has completed: every read and write of host and device memory made by that work has
///   happened and is visible to the calling thread.
/// * **Waits.** After [`Streams::stream_wait_event`], work enqueued on the stream later starts
///   only once the work the event recorded has completed.
/// * **Handles.** A [`StreamHandle`] stays valid until it is passed to
///   [`Streams::stream_destroy`].
pub unsafe trait Streams {
    /// Creates a stream (ordered queue of work) on the device.
    fn stream_create(&self, device: usize) -> Result<StreamHandle>;

    /// Destroys a stream after its work has completed.
    ///
    /// # Safety
    /// `stream` came from `stream_create` on this device and is destroyed once; no other call
    /// uses it concurrently or afterwards.
    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()>;

    /// Blocks until all work enqueued on `stream` has completed.
    ///
    /// # Safety
    /// `stream` came from [`Streams::stream_create`] on this device and is not destroyed.
    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()>;

    /// `true` when all work enqueued on `stream` has completed.
    ///
    /// # Safety
    /// As [`Streams::stream_synchronize`].
    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool>;

    /// Makes later work on `stream` wait until `event`'s recorded work has completed.
    ///
    /// # Safety
    /// `stream` came from [`Streams::stream_create`] and `event` from
    /// [`Events::event_create`](super::Events::event_create) on this device, and neither is
    /// destroyed.
    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()>;
}
