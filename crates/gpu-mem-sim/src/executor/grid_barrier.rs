//! The barrier of a cooperative launch (`this_grid().sync()`): every block of the grid runs at
//! once, each on an OS thread of its own (see `grid::run_cooperative`), and a block whose
//! threads all reach the grid barrier waits here, its OS thread blocked, until every block of
//! the grid has.
//!
//! Contract: each block calls [`GridBarrier::wait`] once per grid barrier it reaches and
//! [`GridBarrier::leave`] once when it ends, however it ends. A barrier that can no longer
//! complete — a block ended while others wait, or ended before they arrived — is an error for
//! every block that waits at it or reaches it later, never a hang: a GPU would hang there.

use gpu_mem_core::sync;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The grid barrier of one cooperative launch of `blocks` blocks.
pub(crate) struct GridBarrier {
    blocks: u64,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Blocks waiting at the current barrier.
    arrived: u64,
    /// Barriers completed so far.
    generation: u64,
    /// Blocks that have ended.
    ended: u64,
    /// Why the barrier cannot complete, once it cannot.
    broken: Option<String>,
}

impl GridBarrier {
    pub(crate) fn new(blocks: u64) -> GridBarrier {
        GridBarrier {
            blocks,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        sync::lock(&self.state)
    }

    /// Waits until every block of the grid has reached the barrier; `Err` with the reason when
    /// one never will.
    pub(crate) fn wait(&self) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(why) = &state.broken {
            return Err(why.clone());
        }
        if state.ended > 0 {
            let why = format!(
                "{} of the grid's {} blocks ended without reaching it",
                state.ended, self.blocks
            );
            state.broken = Some(why.clone());
            self.changed.notify_all();
            return Err(why);
        }
        state.arrived += 1;
        if state.arrived == self.blocks {
            state.arrived = 0;
            state.generation += 1;
            self.changed.notify_all();
            return Ok(());
        }
        let generation = state.generation;
        while state.generation == generation && state.broken.is_none() {
            state = sync::wait(&self.changed, state);
        }
        match (&state.broken, state.generation == generation) {
            (Some(why), true) => Err(why.clone()),
            _ => Ok(()),
        }
    }

    /// Records that a block ended (finished, failed or was cancelled): blocks waiting at the
    /// barrier can no longer be released.
    pub(crate) fn leave(&self) {
        let mut state = self.lock();
        state.ended += 1;
        if state.arrived > 0 && state.broken.is_none() {
            state.broken = Some(format!(
                "{} of the grid's {} blocks ended without reaching it",
                state.ended, self.blocks
            ));
            self.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GridBarrier;

    #[test]
    fn every_block_passes_together_and_again() {
        let barrier = GridBarrier::new(4);
        let passed = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for round in 0..3u64 {
                        barrier.wait().unwrap();
                        // Nobody passes barrier `round` before all passed the one before.
                        assert!(passed.load(std::sync::atomic::Ordering::SeqCst) >= 4 * round);
                        passed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    barrier.leave();
                });
            }
        });
        assert_eq!(passed.into_inner(), 12);
    }

    #[test]
    fn a_block_that_ends_breaks_the_barrier_instead_of_a_hang() {
        let barrier = GridBarrier::new(3);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| barrier.wait());
            let late = s.spawn(|| {
                barrier.leave();
            });
            late.join().unwrap();
            let error = waiter.join().unwrap().unwrap_err();
            assert!(error.contains("1 of the grid's 3 blocks ended"), "{error}");
        });
        // A block arriving after another ended fails at once.
        assert!(barrier.wait().is_err());
    }
}
