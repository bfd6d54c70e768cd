//! Simulated events: each record is a generation, completed by a job on the recording stream
//! that also takes the timestamp.
//!
//! Records on different streams may complete in any order, so the event keeps the set of
//! generations still pending rather than a high-water mark: a stream that waits for record 1
//! goes on when record 1's work is done, not when a later record on an idle stream is (as
//! `cuStreamWaitEvent` waits for the record it saw). Query, synchronize and the timestamp speak
//! of the latest record, as CUDA's do.

use gpu_mem_core::sync::{lock, wait};
use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

#[derive(Debug, Default)]
struct State {
    /// Records issued (the latest generation).
    recorded: u64,
    /// Records whose preceding work has not completed yet.
    pending: BTreeSet<u64>,
    /// When the latest record completed (meaningful once it is not pending).
    time: Option<Instant>,
}

impl State {
    fn latest_complete(&self) -> bool {
        !self.pending.contains(&self.recorded)
    }

    fn finish(&mut self, generation: u64) {
        self.pending.remove(&generation);
        if generation == self.recorded {
            self.time = Some(Instant::now());
        }
    }
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

    /// Records the event: a new generation, and `enqueue` run (which enqueues the job that
    /// calls [`SimEvent::complete`] with it) while holding the state, so a concurrent
    /// `stream_wait_event` sees either the old generation or the new one with its job enqueued —
    /// never a generation that nothing will complete.
    pub(crate) fn record_with<E>(
        &self,
        enqueue: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut state = lock(&self.state);
        state.recorded += 1;
        let generation = state.recorded;
        state.pending.insert(generation);
        let result = enqueue(generation);
        if result.is_err() {
            // Nothing will complete this record; do not leave waiters hanging.
            state.finish(generation);
        }
        drop(state);
        self.changed.notify_all();
        result
    }

    /// Marks record `generation` complete (run on the recording stream).
    pub(crate) fn complete(&self, generation: u64) {
        lock(&self.state).finish(generation);
        self.changed.notify_all();
    }

    /// The generation a waiter must wait for: the latest record issued so far.
    pub(crate) fn current_generation(&self) -> u64 {
        lock(&self.state).recorded
    }

    /// Whether the latest record has completed (or the event was never recorded).
    pub(crate) fn is_complete(&self) -> bool {
        lock(&self.state).latest_complete()
    }

    /// Blocks until record `generation` has completed (0, no record: at once).
    pub(crate) fn wait_for(&self, generation: u64) {
        let mut state = lock(&self.state);
        while state.pending.contains(&generation) {
            state = wait(&self.changed, state);
        }
    }

    /// The completion time of the latest record, once complete.
    pub(crate) fn time(&self) -> Option<Instant> {
        let state = lock(&self.state);
        if state.latest_complete() {
            state.time
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SimEvent;

    fn record(event: &SimEvent) -> u64 {
        let mut generation = 0;
        event
            .record_with(|g| {
                generation = g;
                Ok::<(), ()>(())
            })
            .unwrap();
        generation
    }

    #[test]
    fn a_later_record_completing_first_does_not_release_waiters_of_an_earlier_one() {
        let event = SimEvent::new(true);
        let first = record(&event); // on a busy stream
        let second = record(&event); // on an idle one
        event.complete(second);
        assert!(event.is_complete(), "the latest record completed");
        assert!(event.time().is_some());
        // A waiter of the first record must still wait: its work has not run.
        let released = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                event.wait_for(first);
                released.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!released.load(std::sync::atomic::Ordering::SeqCst));
            event.complete(first);
        });
        assert!(released.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn query_and_time_speak_of_the_latest_record() {
        let event = SimEvent::new(true);
        assert!(event.is_complete(), "never recorded");
        let first = record(&event);
        assert!(!event.is_complete());
        event.complete(first);
        let t1 = event.time().unwrap();
        let second = record(&event);
        assert!(!event.is_complete());
        assert!(event.time().is_none());
        // The earlier record completing again (or late) changes nothing.
        event.complete(first);
        assert!(!event.is_complete());
        event.complete(second);
        assert!(event.time().unwrap() >= t1);
        event.wait_for(0);
        event.wait_for(first);
        event.wait_for(second);
    }

    #[test]
    fn a_record_that_could_not_be_enqueued_completes_at_once() {
        let event = SimEvent::new(false);
        assert!(event.record_with(|_| Err::<(), ()>(())).is_err());
        assert!(event.is_complete());
        event.wait_for(event.current_generation());
    }
}
