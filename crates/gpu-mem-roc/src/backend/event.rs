//! Events: the set of signals a stream's work had reached when the event was recorded.
//!
//! HSA has no event object. Recording captures the stream's newest pending signal plus the
//! event waits it carries; the event is complete when all of them are. For timing, an event
//! whose signals are all async copies takes the latest copy end time
//! (`hsa_amd_profiling_get_async_copy_time`, enabled when the backend starts); an event recorded
//! on an idle stream takes the system timestamp at record time. Both are HSA system-clock ticks.

use super::RocBackend;
use super::signal::{self, Signal, State};
use gpu_mem_core::backend::{EventHandle, Events, StreamHandle};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::sync::Arc;

/// The host-side state of one event.
#[derive(Debug)]
pub struct Event {
    /// Device ordinal.
    pub device: usize,
    /// Created with timing enabled.
    pub timing: bool,
    /// `None` until recorded.
    pub recorded: Option<Recorded>,
}

/// What an `event_record` captured.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Signals that must complete for the event to complete (empty: complete at record time).
    pub signals: Vec<Arc<Signal>>,
    /// System timestamp at record time (ticks).
    pub recorded_at: u64,
    /// The stream it was recorded on.
    pub stream: u64,
}

impl Recorded {
    /// `true` when every captured signal completed; a failure is an error.
    pub fn is_complete(&self) -> Result<bool> {
        for s in &self.signals {
            match s.state()? {
                State::Done => {}
                State::Pending => {
                    if let Some((operation, value)) = s.failed_dependency()? {
                        return Err(self.failure(operation, value));
                    }
                    return Ok(false);
                }
                State::Failed(value) => return Err(self.failure(s.operation, value)),
            }
        }
        Ok(true)
    }

    /// Blocks until every captured signal completed.
    pub fn wait(&self, tick: u64) -> Result<()> {
        for s in &self.signals {
            match signal::wait(s, tick)? {
                State::Done | State::Pending => {}
                State::Failed(value) => return Err(self.failure(s.operation, value)),
            }
        }
        Ok(())
    }

    fn failure(&self, operation: &'static str, value: i64) -> Error {
        Error::AsyncFailure {
            operation: "work before an event",
            stream: self.stream,
            reason: format!("{operation} failed (signal value {value})"),
        }
    }
}

// SAFETY: an event is the set of signals its stream had reached when recorded, complete only
// when every one of them is observed complete; an event never recorded is complete.
unsafe impl Events for RocBackend {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        self.gpu(device)?;
        let handle = self.new_handle();
        lock(&self.events).insert(
            handle,
            Event {
                device,
                timing,
                recorded: None,
            },
        );
        Ok(EventHandle(handle))
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        self.with_event(device, event, |_| Ok(()))?;
        // Dropping the captured signals only releases references; streams hold their own.
        lock(&self.events).remove(&event.0);
        Ok(())
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        let s = self.stream(device, stream)?;
        let signals = lock(&s).marker()?;
        let recorded_at = self.now_ticks()?;
        self.with_event(device, event, |e| {
            e.recorded = Some(Recorded {
                signals,
                recorded_at,
                stream: stream.0,
            });
            Ok(())
        })
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        match self.recorded(device, event)? {
            None => Ok(true),
            Some(r) => r.is_complete(),
        }
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        match self.recorded(device, event)? {
            None => Ok(()),
            Some(r) => r.wait(self.wait_tick()),
        }
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        let timed = |e: EventHandle| -> Result<Recorded> {
            let (timing, recorded) =
                self.with_event(device, e, |ev| Ok((ev.timing, ev.recorded.clone())))?;
            if !timing {
                return Err(Error::EventTiming {
                    reason: "the event was created without timing",
                });
            }
            let recorded = recorded.ok_or(Error::EventTiming {
                reason: "the event was never recorded",
            })?;
            if !recorded.is_complete()? {
                return Err(Error::EventTiming {
                    reason: "the event's work has not completed yet",
                });
            }
            Ok(recorded)
        };
        let (start, end) = (timed(start)?, timed(end)?);
        let (t0, t1) = (self.completion_ticks(&start)?, self.completion_ticks(&end)?);
        let ticks = t1 as f64 - t0 as f64;
        Ok((ticks * 1000.0 / self.topology.timestamp_frequency as f64) as f32)
    }
}
