//! A block's scheduling state: each thread's phase (unstarted, ready, waiting, done), where the
//! waiting ones wait, and the counts the release rules (`super::release`) and the watchdog
//! (`super::watchdog`) read. Every runner records its threads' waits here the same way
//! ([`record_wait`]), so the rules see one picture whatever runs the threads.

use super::fiber::Fiber;
use crate::abi::GmSimWait;
use crate::thread::{BarrierScope, Collective, Fence, Site};
use gpu_mem_core::Error;
use std::cell::Cell;

/// Where a suspended thread waits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Wait {
    pub(super) scope: BarrierScope,
    pub(super) fence: Fence,
    /// Lanes of the warp that must take part (warp scope).
    pub(super) mask: u64,
    pub(super) at: Site,
    pub(super) op: Option<Collective>,
}

impl Wait {
    /// A placeholder for threads that do not wait.
    pub(super) const NONE: Wait = Wait {
        scope: BarrierScope::Block,
        fence: Fence::Local,
        mask: 0,
        at: Site::NONE,
        op: None,
    };
}

/// A thread's state as the general release checks see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum State {
    Ready,
    Waiting(Wait),
    Done,
}

/// A thread's state as the scheduler keeps it (the wait itself is in `Schedule::waits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Not started yet (always a suffix of the block's threads).
    Unstarted,
    Ready,
    Waiting,
    Done,
}

/// The block's scheduling state. Touched only by code running on the block's OS thread, in
/// short stretches that never span a switch or a call into the kernel. Its buffers are kept per
/// OS thread and reused by the next block.
pub(super) struct Schedule {
    pub(super) phases: Vec<Phase>,
    /// Where each `Waiting` thread waits.
    pub(super) waits: Vec<Wait>,
    /// The fiber of each started thread that has not ended.
    pub(super) fibers: Vec<*const Fiber>,
    /// Fibers of ended threads, idle, for the block's next threads (then the OS thread's pool).
    pub(super) spare: Vec<*const Fiber>,
    /// The frame of each waiting thread of a stackless program, and where it waits (buffers
    /// of `super::stackless`, kept here to be reused).
    pub(super) frames: Vec<*mut std::ffi::c_void>,
    pub(super) wait_at: Vec<*mut GmSimWait>,
    pub(super) next_unstarted: usize,
    pub(super) waiting: usize,
    pub(super) done: usize,
    /// Threads waiting at block barriers, the first one's wait, and whether all wait at its site.
    pub(super) block_waiting: usize,
    pub(super) first_block_wait: Option<Wait>,
    pub(super) one_site: bool,
    /// Since the last round ended: did a thread wait, end or get released.
    pub(super) progressed: bool,
    pub(super) idle_rounds: u64,
    /// When round [`super::watchdog::IDLE_CLOCK_FROM`] of the rounds counted by `idle_rounds` ended.
    pub(super) idle_since: Option<std::time::Instant>,
    /// Rounds that ended with a thread waiting at a block barrier (reset when none waits), and
    /// when round [`super::watchdog::IDLE_CLOCK_FROM`] of them ended: other threads that loop on warp
    /// collectives make progress each round, and would otherwise keep such a block going for
    /// ever (see `Block::barrier_stalled`).
    pub(super) barrier_rounds: u64,
    pub(super) barrier_since: Option<std::time::Instant>,
    pub(super) outcome: Result<(), Error>,
    /// `Block::run` is ending threads left waiting.
    pub(super) cancelling: bool,
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            phases: Vec::new(),
            waits: Vec::new(),
            fibers: Vec::new(),
            spare: Vec::new(),
            frames: Vec::new(),
            wait_at: Vec::new(),
            next_unstarted: 0,
            waiting: 0,
            done: 0,
            block_waiting: 0,
            first_block_wait: None,
            one_site: true,
            progressed: false,
            idle_rounds: 0,
            idle_since: None,
            barrier_rounds: 0,
            barrier_since: None,
            outcome: Ok(()),
            cancelling: false,
        }
    }
}

impl Schedule {
    /// A schedule for `count` threads, reusing this OS thread's buffers.
    pub(super) fn take(count: usize) -> Schedule {
        let mut s = SPARE_SCHEDULE.take().unwrap_or_default();
        s.restart(count);
        s.fibers.clear();
        s.fibers.resize(count, std::ptr::null());
        s.spare.clear();
        s
    }

    /// Starts the scheduling state over: every thread unstarted, nothing counted, the buffers
    /// and fibers kept (a stackless block does this for a round it hands to the scheduler).
    pub(super) fn restart(&mut self, count: usize) {
        let kept = std::mem::take(self);
        *self = Schedule {
            phases: kept.phases,
            waits: kept.waits,
            fibers: kept.fibers,
            spare: kept.spare,
            frames: kept.frames,
            wait_at: kept.wait_at,
            ..Schedule::default()
        };
        self.phases.clear();
        self.phases.resize(count, Phase::Unstarted);
        // Stale entries are harmless (a wait is read only where the phase says `Waiting`), so
        // the buffer only ever grows.
        if self.waits.len() < count {
            self.waits.resize(count, Wait::NONE);
        }
    }

    /// As [`Schedule::restart`], but the rounds in which threads only spun keep counting: a
    /// stackless block hands the scheduler one round after another, each started over.
    pub(super) fn restart_round(&mut self, count: usize) {
        let (idle_rounds, idle_since) = (self.idle_rounds, self.idle_since);
        let (barrier_rounds, barrier_since) = (self.barrier_rounds, self.barrier_since);
        self.restart(count);
        self.idle_rounds = idle_rounds;
        self.idle_since = idle_since;
        self.barrier_rounds = barrier_rounds;
        self.barrier_since = barrier_since;
    }

    /// Something other than spinning happened (a release outside the scheduler's rounds): the
    /// count of rounds without progress starts over.
    #[inline]
    pub(super) fn note_progress(&mut self) {
        self.idle_rounds = 0;
    }

    /// Keeps the buffers for the next block of this OS thread.
    pub(super) fn keep(self) {
        SPARE_SCHEDULE.set(Some(self));
    }

    /// The states as the general release checks see them.
    pub(super) fn states(&self) -> Vec<State> {
        self.phases
            .iter()
            .zip(&self.waits)
            .map(|(phase, wait)| match phase {
                Phase::Waiting => State::Waiting(*wait),
                Phase::Done => State::Done,
                _ => State::Ready,
            })
            .collect()
    }
}

thread_local! {
    static SPARE_SCHEDULE: Cell<Option<Schedule>> = const { Cell::new(None) };
}

/// Records that thread `linear` waits (see `Block::wait`, the fibers runner); `false` when the block has no such
/// thread. The wait's parts come as separate arguments: a `Wait` built on the stack and copied
/// whole stalls on store forwarding (its small fields are written as single bytes).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn record_wait(
    s: &mut Schedule,
    linear: usize,
    scope: BarrierScope,
    fence: Fence,
    mask: u64,
    at: Site,
    op: Option<Collective>,
) -> bool {
    if linear >= s.phases.len() || linear >= s.waits.len() {
        return false;
    }
    // SAFETY: `linear` is below the length of `phases` and `waits`.
    unsafe {
        *s.phases.get_unchecked_mut(linear) = Phase::Waiting;
        let slot = s.waits.get_unchecked_mut(linear);
        slot.scope = scope;
        slot.fence = fence;
        slot.mask = mask;
        at.store(&mut slot.at);
        slot.op = op;
    }
    s.waiting += 1;
    s.progressed = true;
    if scope == BarrierScope::Block {
        s.block_waiting += 1;
        match &s.first_block_wait {
            None => {
                s.first_block_wait = Some(Wait {
                    scope,
                    fence,
                    mask,
                    at,
                    op,
                })
            }
            Some(first) => s.one_site &= first.at == at,
        }
    }
    true
}

/// Recounts the waiting threads after a release (or a wait taken back).
pub(super) fn recount(s: &mut Schedule) {
    s.waiting = 0;
    s.block_waiting = 0;
    s.first_block_wait = None;
    s.one_site = true;
    for (phase, wait) in s.phases.iter().zip(&s.waits) {
        if *phase == Phase::Waiting {
            s.waiting += 1;
            if wait.scope == BarrierScope::Block {
                s.block_waiting += 1;
                match s.first_block_wait {
                    None => s.first_block_wait = Some(*wait),
                    Some(first) => s.one_site &= first.at == wait.at,
                }
            }
        }
    }
}

/// A thread's operands and result of a collective.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    pub(super) value: u64,
    pub(super) arg: i64,
    pub(super) width: u32,
    pub(super) result: u64,
}
