//! [`Event`]: a marker in a stream's work, for ordering between streams and for timing
//! (Numba's `cuda.event()`).

use crate::backend::{EventHandle, StreamHandle};
use crate::device::Device;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// A marker recorded into a stream.
#[derive(Debug)]
pub struct Event {
    device: Device,
    handle: EventHandle,
    timing: bool,
    recorded: AtomicBool,
}

impl Event {
    /// Creates an event; `timing = false` is Numba's `event(timing=False)` (cheaper; no
    /// [`Event::elapsed_since`]).
    pub fn new(device: &Device, timing: bool) -> Result<Event> {
        let handle = device.backend().event_create(device.ordinal(), timing)?;
        Ok(Event {
            device: device.clone(),
            handle,
            timing,
            recorded: AtomicBool::new(false),
        })
    }

    /// The device the event belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The backend's handle.
    pub fn handle(&self) -> EventHandle {
        self.handle
    }

    /// Whether the event can be used for timing.
    pub fn is_timing(&self) -> bool {
        self.timing
    }

    /// Records the event at the current end of the stream `stream` (see `Event::record`).
    ///
    /// # Safety
    /// `stream` is a live stream handle of this event's device.
    pub(crate) unsafe fn record_on(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: the event's handle lives as long as `self` and belongs to this device; the
        // stream handle is the caller's contract.
        unsafe {
            self.device
                .backend()
                .event_record(self.device.ordinal(), self.handle, stream)?
        };
        self.recorded.store(true, Ordering::Release);
        Ok(())
    }

    /// `true` when the recorded work has completed (or the event was never recorded).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the handle came from `event_create` on this device and is destroyed only when
        // `self` drops.
        unsafe {
            self.device
                .backend()
                .event_query(self.device.ordinal(), self.handle)
        }
    }

    /// Blocks until the recorded work has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: as in `query`.
        unsafe {
            self.device
                .backend()
                .event_synchronize(self.device.ordinal(), self.handle)
        }
    }

    /// Milliseconds from `start` to `self` (Numba's `start.elapsed_time(end)` is
    /// `end.elapsed_since(&start)` here). Both must be timing events, recorded and complete.
    pub fn elapsed_since(&self, start: &Event) -> Result<f32> {
        self.device.check_same(start.device(), "event")?;
        if !self.timing || !start.timing {
            return Err(Error::EventTiming {
                reason: "an event was created with timing disabled",
            });
        }
        if !self.recorded.load(Ordering::Acquire) || !start.recorded.load(Ordering::Acquire) {
            return Err(Error::EventTiming {
                reason: "an event has not been recorded",
            });
        }
        // SAFETY: both handles live as long as their (borrowed) events, on this device (checked
        // above).
        unsafe {
            self.device
                .backend()
                .event_elapsed_ms(self.device.ordinal(), start.handle, self.handle)
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the handle came from `event_create` on this device and is destroyed once, here.
        let result = unsafe {
            self.device
                .backend()
                .event_destroy(self.device.ordinal(), self.handle)
        };
        if let Err(error) = result {
            self.device.report_release_error("event destroy", error);
        }
    }
}
