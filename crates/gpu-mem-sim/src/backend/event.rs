//! [`Events`] on the simulator: an event is a generation counter, completed (and timestamped)
//! by a job put on the stream where it is recorded.

use crate::event::SimEvent;
use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{EventHandle, Events, StreamHandle};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::sync::Arc;

// SAFETY: a recorded generation completes only when the job enqueued after the stream's earlier
// work runs, so `event_query` and `event_synchronize` report completion only after that work;
// an event never recorded is complete.
unsafe impl Events for SimBackend {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        let d = self.device(device)?;
        let handle = self.handle();
        lock(&d.events).insert(handle, Arc::new(SimEvent::new(timing)));
        Ok(EventHandle(handle))
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        let d = self.device(device)?;
        lock(&d.events)
            .remove(&event.0)
            .map(drop)
            .ok_or(Error::InvalidHandle {
                kind: "event",
                handle: event.0,
            })
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        let job_event = Arc::clone(&event);
        event.record_with(|generation| {
            self.enqueue(
                d,
                stream,
                "event record",
                Box::new(move || {
                    job_event.complete(generation);
                    Ok(())
                }),
            )
        })
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        let d = self.device(device)?;
        Ok(self.event(d, event)?.is_complete())
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        reentry::refuse_in_kernel("event synchronize")?;
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        event.wait_for(event.current_generation());
        Ok(())
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        let d = self.device(device)?;
        let (start, end) = (self.event(d, start)?, self.event(d, end)?);
        if !start.timing || !end.timing {
            return Err(Error::EventTiming {
                reason: "an event was created with timing disabled",
            });
        }
        match (start.time(), end.time()) {
            (Some(a), Some(b)) => {
                let ms = if b >= a {
                    (b - a).as_secs_f64() * 1e3
                } else {
                    -((a - b).as_secs_f64() * 1e3)
                };
                Ok(ms as f32)
            }
            _ => Err(Error::EventTiming {
                reason: "an event has not completed (synchronize it first)",
            }),
        }
    }
}
