//! Events: the set of signals a stream's work had reached when the event was recorded.
//!
//! HSA has no event object. Recording captures the stream's newest pending signal plus the
//! event waits it carries; the event is complete when all of them are. For timing, an event
//! whose signals are all async copies takes the latest copy end time
//! (`hsa_amd_profiling_get_async_copy_time`, enabled when the backend starts); an event recorded
//! on an idle stream takes the system timestamp at record time. Both are HSA system-clock ticks.

use super::signal::{self, Signal, State};
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
