//! The watchdog: telling a block that makes no progress — threads that only spin, or threads
//! kept at a block barrier the others never reach — from one at work, and reporting it where a
//! GPU would hang. Its limits are the device's [`Watchdog`] (`crate::config`: a time, a count
//! of rounds, a count of an async thread's spins); both the count and the time must pass. Every
//! runner counts through here: rounds of a block ([`Block::spun_too_long`],
//! [`Block::barrier_stalled`]) and the spins of an async kernel's thread ([`SpinWatch`]).

use super::block::Block;
use super::release::describe_states;
use super::schedule::Schedule;
use crate::config::Watchdog;
use gpu_mem_core::Error;
use std::cell::Cell;
use std::time::Instant;

/// A thread lets the others run at every this many atomics / spin hints (on fibers; the
/// prelude's stackless form does the same).
pub(super) const PROGRESS_EVERY: u32 = 16;

/// The idle round from which the time is taken (short idle stretches, common in blocks that
/// spin a little between barriers, never read the clock), and how often it is read after.
pub(super) const IDLE_CLOCK_FROM: u64 = 1 << 10;

/// The spin of an async thread from which the time is taken, and how often it is read after.
const SPIN_CLOCK_FROM: u64 = 1 << 16;

impl Block<'_> {
    /// Counts a round that ends with threads waiting at a block barrier: `true` once such rounds
    /// went on for the watchdog's rounds and time without the barrier being released
    /// (report it with [`Block::stalled_at_barrier`]). Threads elsewhere may be making progress
    /// all along (a loop of warp votes waiting for a flag that the threads at the barrier would
    /// set after it), which `spun_too_long` counts as work.
    pub(super) fn barrier_stalled(&self, s: &mut Schedule) -> bool {
        if s.block_waiting == 0 {
            s.barrier_rounds = 0;
            return false;
        }
        s.barrier_rounds += 1;
        if s.barrier_rounds == IDLE_CLOCK_FROM {
            s.barrier_since = Some(std::time::Instant::now());
        }
        s.barrier_rounds > self.watchdog.rounds
            && s.barrier_rounds.is_multiple_of(IDLE_CLOCK_FROM)
            && s.barrier_since
                .is_some_and(|t| t.elapsed() >= self.watchdog.time)
    }

    /// The report of threads kept at a block barrier that the others never reach.
    #[cold]
    pub(super) fn stalled_at_barrier(&self, s: &Schedule) -> Error {
        self.divergence(format!(
            "no forward progress: threads wait at a block barrier for {:?} and over {} rounds while the others run without reaching it (GPU_MEM_SIM_WATCHDOG sets the time); {}",
            self.watchdog.time,
            self.watchdog.rounds,
            describe_states(&s.states(), |i| self.thread_index(i as u32))
        ))
    }

    /// Counts a round for telling threads that only spin from threads at work: `true` once
    /// rounds without progress (`s.progressed` false: no thread reached a barrier or
    /// collective, ended, or was released) went on for the watchdog's rounds and time (report
    /// it with [`Block::no_progress`]).
    pub(super) fn spun_too_long(&self, s: &mut Schedule) -> bool {
        let progressed = std::mem::replace(&mut s.progressed, false);
        if progressed {
            s.idle_rounds = 0;
            return false;
        }
        s.idle_rounds += 1;
        if s.idle_rounds == IDLE_CLOCK_FROM {
            s.idle_since = Some(std::time::Instant::now());
        }
        s.idle_rounds > self.watchdog.rounds
            && s.idle_rounds.is_multiple_of(IDLE_CLOCK_FROM)
            && s.idle_since
                .is_some_and(|t| t.elapsed() >= self.watchdog.time)
    }

    /// The report of threads that only spin, from the states in `s`.
    #[cold]
    pub(super) fn no_progress(&self, s: &Schedule) -> Error {
        self.divergence(format!(
            "no forward progress: threads spin (atomics or spin-wait hints) while nothing else can run, for {:?} and over {} rounds (GPU_MEM_SIM_WATCHDOG sets the time); {}",
            self.watchdog.time,
            self.watchdog.rounds,
            describe_states(&s.states(), |i| self.thread_index(i as u32))
        ))
    }
}

/// The spins of the async thread being polled since it last awaited.
#[derive(Default)]
pub(super) struct SpinWatch {
    spins: Cell<u64>,
    since: Cell<Option<Instant>>,
}

impl SpinWatch {
    /// Another thread is polled: its count starts at zero.
    pub(super) fn reset(&self) {
        self.spins.set(0);
        self.since.set(None);
    }

    /// Counts a spin; `true` once the thread spun for `watchdog`'s count and time.
    #[inline]
    pub(super) fn spun_too_long(&self, watchdog: &Watchdog) -> bool {
        let spins = self.spins.get() + 1;
        self.spins.set(spins);
        if !spins.is_multiple_of(SPIN_CLOCK_FROM) {
            return false;
        }
        match self.since.get() {
            None => {
                self.since.set(Some(Instant::now()));
                false
            }
            Some(since) => spins > watchdog.spins && since.elapsed() >= watchdog.time,
        }
    }
}
