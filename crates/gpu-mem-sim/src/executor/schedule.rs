//! A block's scheduling state: each thread's phase (unstarted, ready, waiting, done), where the
//! waiting ones wait, and the counts the release rules (`super::release`) and the watchdog
//! (`super::watchdog`) read. Every runner records its threads' waits here the same way
//! ([`record_wait`]), so the rules see one picture whatever runs the threads. The order the
//! runners that scan the block (fibers, polled) take its threads in is kept here too
//! ([`Schedule::arrange`]): positions in a scan map to threads, in index order unless the
//! device asks for another (`crate::ThreadOrder`).

use super::fiber::Fiber;
use crate::abi::GmSimWait;
use crate::config::ThreadOrder;
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
    /// The thread at each position of a scan; empty for index order ([`Schedule::at`]).
    order: Vec<u32>,
    /// Each thread's position in `order`.
    position: Vec<u32>,
    /// A random order's generator state, which the next stretch's order is drawn from.
    draws: Option<u64>,
    /// The position of the first unstarted thread (unstarted threads are always the last ones
    /// in the order).
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
            order: Vec::new(),
            position: Vec::new(),
            draws: None,
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
            order: kept.order,
            position: kept.position,
            ..Schedule::default()
        };
        self.order.clear();
        self.position.clear();
        self.phases.clear();
        self.phases.resize(count, Phase::Unstarted);
        // Stale entries are harmless (a wait is read only where the phase says `Waiting`), so
        // the buffer only ever grows.
        if self.waits.len() < count {
            self.waits.resize(count, Wait::NONE);
        }
    }

    /// Puts the threads of block `block` (its linear index in the grid) in `order`, each until
    /// it waits; a random order is drawn again for every stretch between barriers
    /// ([`Schedule::next_stretch`]). Called after [`Schedule::take`], before any thread starts.
    pub(super) fn arrange(&mut self, order: ThreadOrder, block: u64) {
        let count = self.phases.len();
        match order {
            ThreadOrder::Index => return,
            ThreadOrder::Reverse => self.order.extend((0..count as u32).rev()),
            ThreadOrder::Random { seed } => {
                self.order.extend(0..count as u32);
                let mut state = seed ^ mix(block.wrapping_add(0x5851_f42d_4c95_7f2d));
                shuffle(&mut self.order, &mut state);
                self.draws = Some(state);
            }
        }
        self.position.resize(count, 0);
        for (p, &thread) in self.order.iter().enumerate() {
            self.position[thread as usize] = p as u32;
        }
    }

    /// The thread at position `p` of a scan of the block.
    #[inline(always)]
    pub(super) fn at(&self, p: usize) -> usize {
        match self.order.get(p) {
            Some(&thread) => thread as usize,
            None => p,
        }
    }

    /// The position of thread `linear` in a scan of the block.
    #[inline(always)]
    pub(super) fn position_of(&self, linear: usize) -> usize {
        match self.position.get(linear) {
            Some(&p) => p as usize,
            None => linear,
        }
    }

    /// Whether the threads run in index order.
    #[inline(always)]
    pub(super) fn in_index_order(&self) -> bool {
        self.order.is_empty()
    }

    /// A round ended and the block goes on: a random order is drawn again once every thread has
    /// started (unstarted threads must stay the last ones in the order).
    pub(super) fn next_stretch(&mut self) {
        let Some(mut state) = self.draws else {
            return;
        };
        if self.phases.contains(&Phase::Unstarted) {
            return;
        }
        shuffle(&mut self.order, &mut state);
        self.draws = Some(state);
        for (p, &thread) in self.order.iter().enumerate() {
            self.position[thread as usize] = p as u32;
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

/// SplitMix64's output function: a well-mixed 64-bit value of `x`.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Fisher-Yates over `order`, drawing from a SplitMix64 sequence at `state`.
fn shuffle(order: &mut [u32], state: &mut u64) {
    for i in (1..order.len()).rev() {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // Multiply-shift: an index below `i + 1` without a division.
        let j = ((u128::from(mix(*state)) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
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

/// A thread's operands of a collective.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Operands {
    pub(crate) value: u64,
    /// A shuffle's lane or delta.
    pub(crate) arg: i64,
    /// A shuffle's width.
    pub(crate) width: u32,
    /// The lanes of its warp that take part with it (a warp collective's mask).
    pub(crate) mask: u64,
}

/// A thread's operands and result of a collective.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    pub(super) operands: Operands,
    pub(super) result: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arranged(order: ThreadOrder, block: u64, count: usize) -> Schedule {
        let mut s = Schedule::default();
        s.restart(count);
        s.arrange(order, block);
        s
    }

    fn scan(s: &Schedule) -> Vec<usize> {
        (0..s.phases.len()).map(|p| s.at(p)).collect()
    }

    fn is_permutation(scan: &[usize]) -> bool {
        let mut sorted = scan.to_vec();
        sorted.sort_unstable();
        sorted == (0..scan.len()).collect::<Vec<_>>()
    }

    #[test]
    fn index_and_reverse_orders_scan_as_named() {
        let s = arranged(ThreadOrder::Index, 3, 5);
        assert!(s.in_index_order());
        assert_eq!(scan(&s), [0, 1, 2, 3, 4]);
        let s = arranged(ThreadOrder::Reverse, 3, 5);
        assert_eq!(scan(&s), [4, 3, 2, 1, 0]);
        assert_eq!(
            (0..5).map(|t| s.position_of(t)).collect::<Vec<_>>(),
            [4, 3, 2, 1, 0]
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn random_orders_are_permutations_per_seed_block_and_stretch() {
        let seed = ThreadOrder::Random { seed: 7 };
        let a = arranged(seed, 0, 256);
        assert!(is_permutation(&scan(&a)));
        for p in 0..256 {
            assert_eq!(a.position_of(a.at(p)), p);
        }
        // The same seed and block: the same order; another block or seed: another.
        assert_eq!(scan(&a), scan(&arranged(seed, 0, 256)));
        assert_ne!(scan(&a), scan(&arranged(seed, 1, 256)));
        assert_ne!(
            scan(&a),
            scan(&arranged(ThreadOrder::Random { seed: 8 }, 0, 256))
        );
        assert_ne!(scan(&a), (0..256).collect::<Vec<_>>());
        // A new stretch waits until every thread has started, then draws a new order.
        let mut s = arranged(seed, 0, 256);
        s.next_stretch();
        assert_eq!(
            scan(&s),
            scan(&a),
            "threads not started yet keep their places"
        );
        s.phases.fill(Phase::Ready);
        s.next_stretch();
        let next = scan(&s);
        assert!(is_permutation(&next));
        assert_ne!(next, scan(&a));
        for p in 0..256 {
            assert_eq!(s.position_of(s.at(p)), p);
        }
        // A restart (the next block of this OS thread) is in index order until arranged.
        s.restart(4);
        assert!(s.in_index_order());
        assert_eq!(scan(&s), [0, 1, 2, 3]);
    }
}
