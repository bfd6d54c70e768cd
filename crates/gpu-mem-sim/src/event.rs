//! Simulated events: a generation counter bumped by each record, completed by a job on the
//! recording stream that also takes the timestamp.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

#[derive(Debug, Default)]
struct State {
    /// Records issued.
    recorded: u64,
    /// Records whose preceding work has completed.
    completed: u64,
    /// When the latest completed record completed.
    time: Option<Instant>,
}

/// One simulated event.
#[derive(Debug)]
pub(crate) struct SimEvent {
    pub(crate) timing: bool,
    state: Mutex<State>,
    changed: Condvar,
}

impl SimEvent {
    pub(crate) fn new(timing: bool) -> SimEvent {
        SimEvent {
            timing,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a new record; returns its generation, to be passed to [`SimEvent::complete`].
    pub(crate) fn begin_record(&self) -> u64 {
        let mut state = self.lock();
        state.recorded += 1;
        state.recorded
    }

    /// Marks record `generation` complete (run on the recording stream).
    pub(crate) fn complete(&self, generation: u64) {
        let mut state = self.lock();
        if generation > state.completed {
            state.completed = generation;
            state.time = Some(Instant::now());
        }
        drop(state);
        self.changed.notify_all();
    }

    /// The generation a waiter must wait for: the latest record issued so far.
    pub(crate) fn current_generation(&self) -> u64 {
        self.lock().recorded
    }

    pub(crate) fn is_complete(&self) -> bool {
        let state = self.lock();
        state.completed >= state.recorded
    }

    /// Blocks until record `generation` (or a later one) has completed.
    pub(crate) fn wait_for(&self, generation: u64) {
        let mut state = self.lock();
        while state.completed < generation {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The completion time of the latest record, once complete.
    pub(crate) fn time(&self) -> Option<Instant> {
        let state = self.lock();
        if state.completed >= state.recorded {
            state.time
        } else {
            None
        }
    }
}
