//! The fibers runner: a block's threads on fibers of the current OS thread (`super::fiber`), released
//! together at barriers and warp collectives, with divergence and faults turned into errors.
//!
//! A thread runs until it waits: at a barrier or collective ([`Block::wait`]), or to let the
//! others run ([`Block::yield_now`], from atomics and spin-wait hints). The waiting thread
//! itself picks the next thread to run — the next ready one in the block's order (index order
//! unless the device asks for another: `Schedule::arrange`), or an unstarted one on a fresh
//! fiber — and switches to it; a thread that ends leaves its fiber to the next
//! unstarted thread. When the scan reaches the end of the block (a round), what can be released
//! is released: every thread waiting at one block barrier at once (counted as they arrive), or
//! the general checks for warp barriers, collectives and mixed waits. When nothing can proceed
//! the launch fails with [`Error::BarrierDivergence`] describing who waits where
//! (`crate::executor::release`).

use crate::executor::block::{Block, panic_message};
use crate::executor::fiber::{self, Fiber, Target};
use crate::executor::plan::{Calls, OnFibers};
use crate::executor::schedule::{Phase, Schedule, record_wait};
use crate::executor::sim_thread::{Cancelled, SimThread};
use crate::executor::stack;
use crate::thread::{BarrierScope, Collective, Fence, SimKernelFn, Site};
use gpu_mem_core::Error;
use std::panic::AssertUnwindSafe;

/// Switches from the running `fiber` to `to`: a fiber of the same block's OS thread holding a
/// runnable thread of the block, or an idle one given its first thread; null to return to the
/// block's `run`, which waits in `enter`.
///
/// # Safety
/// Called on `fiber`'s stack, by a thread of a block whose schedule named `to`.
#[inline(always)]
unsafe fn hand_over(fiber: *const Fiber, to: *const Fiber) {
    // SAFETY: the caller's contract.
    unsafe {
        if to.is_null() {
            fiber::to_main(fiber);
        } else {
            fiber::switch(fiber, to);
        }
    }
}

/// What happens after a thread ended.
enum Ended {
    /// Start this unstarted thread on the same fiber.
    StartHere(u32),
    Go(Target),
}

/// What runs next.
enum Next {
    /// A started thread (possibly the one asking).
    Run(usize),
    /// An unstarted thread, on a fresh fiber.
    Start(usize),
    /// The block is finished or stuck: back to `Block::run`.
    Finish,
}

impl Block<'_> {
    /// Runs every thread of the block to completion, on fibers of this OS thread.
    pub(super) fn run_fibers(&self) -> Result<(), Error> {
        let count = self.block_dim.count() as usize;
        // SAFETY: no thread runs yet.
        let s = unsafe { self.schedule() };
        *s = Schedule::take(count);
        s.arrange(self.thread_order, self.first_linear());
        // The fibers the block may need, in one go.
        fiber::take_idle(count, &mut s.spare);
        let leader = s.at(0);
        let first = self.fresh_fiber(s, leader)?;
        stack::running(self.kernel);
        s.phases[leader] = Phase::Ready;
        s.next_unstarted = 1;
        // SAFETY: `first` holds the block's first thread; the block outlives the call, and every
        // thread it starts has ended (or is ended below) before it returns.
        unsafe { fiber::enter(first) };
        self.end_waiting_threads();
        // SAFETY: no thread runs any more.
        let s = unsafe { self.schedule() };
        fiber::give_back_all(&mut s.spare);
        let result = std::mem::replace(&mut s.outcome, Ok(()));
        self.fault_or(result)
    }

    /// Runs thread `linear` on `fiber`, then, on the same fiber, further unstarted threads of
    /// the block, until the block has none for this fiber; returns where the OS thread goes
    /// next.
    pub(super) fn run_fiber_threads(
        &self,
        code: OnFibers<'_>,
        mut linear: u32,
        fiber: *const Fiber,
    ) -> Target {
        loop {
            match code {
                OnFibers::Compiled(calls) => self.run_compiled(calls, linear, fiber),
                OnFibers::Closure(body) => self.run_closure(body, linear, fiber),
            }
            match self.thread_ended(linear, fiber) {
                Ended::StartHere(next) => linear = next,
                Ended::Go(target) => return target,
            }
        }
    }

    /// Ends the threads left waiting (divergence, or another thread's fault): closures are
    /// unwound, running their destructors; compiled threads are dropped without unwinding.
    fn end_waiting_threads(&self) {
        let count = self.block_dim.count() as usize;
        {
            // SAFETY: no thread runs while `run` is back on the OS thread's stack.
            let s = unsafe { self.schedule() };
            if s.done == count {
                return;
            }
        }
        for linear in 0..count {
            let fiber = {
                // SAFETY: as above.
                let s = unsafe { self.schedule() };
                if matches!(s.phases[linear], Phase::Done | Phase::Unstarted) {
                    continue;
                }
                s.phases[linear] = Phase::Done;
                s.cancelling = true;
                std::mem::replace(&mut s.fibers[linear], std::ptr::null())
            };
            if fiber.is_null() {
                // A thread made ready that got no fiber (no memory for its stack): it never ran.
                continue;
            }
            if self.compiled {
                // Compiled frames must not be unwound (no Rust panic crosses C++ frames): the
                // suspended thread's stack is discarded instead. Nothing on it owns resources:
                // no borrow or lock is held across a suspension.
                // SAFETY: see above; the fiber is suspended in this block's thread.
                unsafe { fiber::reset(fiber) };
                // SAFETY: as above.
                unsafe { self.schedule() }.spare.push(fiber);
            } else {
                // The thread's `suspend` sees `cancelling` and unwinds with `Cancelled`, caught
                // by `run_thread`; its fiber then comes back here.
                // SAFETY: the fiber is suspended in a thread of this live block.
                unsafe { fiber::enter(fiber) };
            }
        }
    }

    /// Runs a compiled thread. Kept apart from the closure path so that this frame, which every
    /// waiting thread keeps on its stack, stays small (fewer cache lines per thread).
    #[inline(never)]
    fn run_compiled(&self, calls: Calls<'_>, linear: u32, fiber: *const Fiber) {
        // Compiled code cannot panic (its callbacks never unwind).
        calls.run_thread(&SimThread::new(self, linear, Some(fiber)));
    }

    /// Runs a closure thread; its panic becomes a fault.
    #[inline]
    fn run_closure(&self, body: &SimKernelFn, linear: u32, fiber: *const Fiber) {
        let me = SimThread::new(self, linear, Some(fiber));
        let thread = me.thread;
        if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| me.run_closure(body)))
            && !payload.is::<Cancelled>()
        {
            let message = panic_message(payload.as_ref());
            self.record_fault(thread, format!("the kernel panicked: {message}"));
        }
    }

    /// Bookkeeping of a thread that ended on `fiber`: the next unstarted thread runs on the same
    /// fiber; otherwise the fiber is left for the next thread to run.
    fn thread_ended(&self, linear: u32, fiber: *const Fiber) -> Ended {
        // SAFETY: the thread ended; nothing else holds the schedule.
        let s = unsafe { self.schedule() };
        let linear = linear as usize;
        s.fibers[linear] = std::ptr::null();
        if s.cancelling {
            s.spare.push(fiber);
            return Ended::Go(Target::Main);
        }
        s.phases[linear] = Phase::Done;
        s.done += 1;
        s.progressed = true;
        if s.next_unstarted < s.phases.len() {
            let next = s.at(s.next_unstarted);
            s.next_unstarted += 1;
            s.phases[next] = Phase::Ready;
            s.fibers[next] = fiber;
            return Ended::StartHere(next as u32);
        }
        // The fiber switches away right after this; only then can a new thread be started on it.
        s.spare.push(fiber);
        match self.pick(s, linear) {
            Next::Run(j) => {
                prefetch_after(s, j);
                Ended::Go(Target::Fiber(s.fibers[j]))
            }
            // Unreachable (no thread is unstarted), but harmless: finish.
            Next::Start(_) | Next::Finish => Ended::Go(Target::Main),
        }
    }

    /// Suspends thread `linear` (running on `fiber`) at a barrier or collective, runs the others,
    /// and returns when the thread may go on (or is being ended: see `cancelling`).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(in crate::executor) fn wait(
        &self,
        linear: u32,
        fiber: *const Fiber,
        scope: BarrierScope,
        fence: Fence,
        mask: u64,
        at: Site,
        op: Option<Collective>,
    ) {
        let linear = linear as usize;
        let to = {
            // SAFETY: the thread runs executor code; nothing else holds the schedule.
            let s = unsafe { self.schedule() };
            if s.cancelling {
                // A thread being ended (it caught `Cancelled`, or waits in a destructor while
                // unwinding): the block's schedule is over; see `SimThread::resumed`.
                return;
            }
            if !record_wait(s, linear, scope, fence, mask, at, op) {
                return;
            }
            match self.next_fiber(s, linear) {
                Some(to) => to,
                None => return,
            }
        };
        // SAFETY: we run on `fiber`; see `Block::hand_over`.
        unsafe { hand_over(fiber, to) };
    }

    /// Lets the block's other threads run (thread `linear`, on `fiber`, stays ready).
    pub(in crate::executor) fn yield_now(&self, linear: u32, fiber: *const Fiber) {
        let linear = linear as usize;
        let to = {
            // SAFETY: as in `wait`.
            let s = unsafe { self.schedule() };
            // While the block ends its waiting threads, nobody else is left to run.
            if s.cancelling || linear >= s.phases.len() {
                return;
            }
            match self.next_fiber(s, linear) {
                Some(to) => to,
                None => return,
            }
        };
        // SAFETY: we run on `fiber`; see `Block::hand_over`.
        unsafe { hand_over(fiber, to) };
    }

    /// The fiber to run after thread `linear` stopped; `None` when it runs on itself.
    #[inline(always)]
    fn next_fiber(&self, s: &mut Schedule, linear: usize) -> Option<*const Fiber> {
        if !s.in_index_order() {
            return self.next_after(s, linear);
        }
        // The common case: the next thread waits to be resumed. The one after it will most
        // likely run next: its stack starts coming into the cache now.
        let next = linear + 1;
        match s.phases.get(next) {
            Some(Phase::Ready) => {
                prefetch_after(s, next);
                Some(s.fibers[next])
            }
            // A block's first barrier: the next thread starts on a fiber of its own (what
            // `pick` would choose, without its scan).
            Some(Phase::Unstarted) => {
                s.phases[next] = Phase::Ready;
                s.next_unstarted = next + 1;
                match self.fresh_fiber(s, next) {
                    Ok(fresh) => Some(fresh),
                    // No stack for it: the thread is left without a fiber, which
                    // `end_waiting_threads` skips.
                    Err(error) => {
                        s.outcome = Err(error);
                        Some(std::ptr::null())
                    }
                }
            }
            _ => self.next_after(s, linear),
        }
    }

    /// The fiber to switch to after thread `linear` suspended, when it is not simply the next
    /// thread's: a fresh one for an unstarted thread (given its job, `fiber::Job`), null to go back to
    /// `Block::run`, or `None` when `linear` itself runs on.
    #[inline(never)]
    fn next_after(&self, s: &mut Schedule, linear: usize) -> Option<*const Fiber> {
        match self.pick(s, linear) {
            Next::Run(j) if j == linear => None,
            Next::Run(j) => Some(s.fibers[j]),
            Next::Start(j) => match self.fresh_fiber(s, j) {
                Ok(fresh) => Some(fresh),
                Err(error) => {
                    s.outcome = Err(error);
                    Some(std::ptr::null())
                }
            },
            Next::Finish => Some(std::ptr::null()),
        }
    }

    /// The next thread to run after thread `from`: the next ready or unstarted one in the
    /// block's order; at the end of the block, a round ends (see [`Block::end_round`]) and the
    /// scan starts over.
    #[inline]
    fn pick(&self, s: &mut Schedule, from: usize) -> Next {
        let count = s.phases.len();
        // Positions in the order (in index order, thread indices).
        let mut i = s.position_of(from) + 1;
        loop {
            while i < count {
                let thread = s.at(i);
                match s.phases[thread] {
                    Phase::Ready => return Next::Run(thread),
                    Phase::Unstarted => {
                        s.phases[thread] = Phase::Ready;
                        s.next_unstarted = i + 1;
                        return Next::Start(thread);
                    }
                    _ => i += 1,
                }
            }
            match self.end_round(s) {
                Ok(true) => i = 0,
                Ok(false) => return Next::Finish,
                Err(error) => {
                    s.outcome = Err(error);
                    return Next::Finish;
                }
            }
        }
    }

    /// Whether the block is ending the threads left waiting.
    #[inline]
    pub(in crate::executor) fn cancelling(&self) -> bool {
        // SAFETY: a short read; nothing else holds the schedule while a thread runs.
        unsafe { self.schedule() }.cancelling
    }
}

/// Starts bringing the stack of the thread after `j` into the cache: it most likely runs after
/// `j`.
#[inline(always)]
fn prefetch_after(s: &Schedule, j: usize) {
    if let Some(&after) = s.fibers.get(j + 1)
        && !after.is_null()
    {
        // SAFETY: the block's fibers are fibers of this OS thread.
        unsafe { fiber::prefetch(after) };
    }
}
