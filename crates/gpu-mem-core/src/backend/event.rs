//! [`Events`]: points in a stream's work, waited for and timed, on every backend.

use super::types::{EventHandle, StreamHandle};
use crate::error::Result;

/// Recording, waiting for and timing events.
///
/// # Safety
///
/// The core releases what recorded work used on the strength of these answers, so an
/// implementation must uphold, for every device it accepts:
///
/// * **Completion.** [`Events::event_synchronize`] returns `Ok`, and [`Events::event_query`]
///   `Ok(true)`, only once the work enqueued on the stream before the event's last
///   [`Events::event_record`] has completed: every read and write of host and device memory made
///   by that work has happened and is visible to the calling thread. An event never recorded is
///   complete.
/// * **Handles.** An [`EventHandle`] stays valid until [`Events::event_destroy`].
pub unsafe trait Events {
    /// Creates an event; `timing` enables [`Events::event_elapsed_ms`].
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle>;

    /// Destroys an event.
    ///
    /// # Safety
    /// `event` came from `event_create` on this device and is destroyed once; no other call
    /// uses it concurrently or afterwards.
    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()>;

    /// Records `event` at the current end of `stream`.
    ///
    /// # Safety
    /// As [`Streams::stream_wait_event`](super::Streams::stream_wait_event).
    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()>;

    /// `true` when the work before the event's last record has completed (or it was never
    /// recorded).
    ///
    /// # Safety
    /// `event` came from [`Events::event_create`] on this device and is not destroyed.
    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool>;

    /// Blocks until the event's recorded work has completed.
    ///
    /// # Safety
    /// As [`Events::event_query`].
    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()>;

    /// Milliseconds between two completed, timed events.
    ///
    /// # Safety
    /// Both events came from [`Events::event_create`] on this device and are not destroyed.
    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32>;
}
