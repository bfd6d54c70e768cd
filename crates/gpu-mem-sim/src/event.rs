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

    /// Records the event: bumps the generation and runs `enqueue` (which enqueues the job that
    /// calls [`SimEvent::complete`] with it) while holding the state, so a concurrent
    /// `stream_wait_event` sees either the old generation or the new one with its job enqueued —
    /// never a generation that nothing will complete yet.
    pub(crate) fn record_with<E>(
        &self,
        enqueue: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut state = self.lock();
        state.recorded += 1;
        let generation = state.recorded;
        let result = enqueue(generation);
        if result.is_err() {
            // Nothing will complete this record; do not leave waiters hanging.
            state.completed = state.completed.max(generation);
            state.time = Some(Instant::now());
        }
        drop(state);
        self.changed.notify_all();
        result
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
