//! Carrying out a launch's plan (`super::plan`) for one block, on the OS thread that runs it.
//!
//! Each plan has its runner: `direct` (plain calls), `stackless` (a compiled program's
//! coroutines, round by round), `fibers` (a stack per waiting thread) and `polled` (futures,
//! round by round). Every one records its threads' waits in the block's schedule
//! (`super::schedule`) and has them released by the same rules (`super::release`), so what a
//! kernel does never depends on its plan, only what it costs.
//!
//! The runners other than `fibers` run the whole block from one fiber of this OS thread, the
//! driver ([`Block::run_on_driver`]), so that the threads' code has the simulated stack size and
//! an overflow is reported naming the kernel (under Miri, which cannot switch stacks, the
//! polled runner runs on the OS thread's own stack instead).

mod direct;
pub(super) mod fibers;
mod polled;
mod stackless;

use super::block::Block;
use super::fiber::{self, Fiber, Job, Target};
use super::plan::Plan;
use super::schedule::Schedule;
use super::stack;
use gpu_mem_core::Error;

impl Block<'_> {
    /// Runs every thread of the block to completion, as its plan says.
    pub(crate) fn run(&self) -> Result<(), Error> {
        match self.plan {
            Plan::Fibers(_) => self.run_fibers(),
            Plan::Polled(body) if cfg!(miri) => self.run_polled_here(body),
            Plan::Direct(_) | Plan::Stackless(_) | Plan::Polled(_) => self.run_on_driver(),
        }
    }

    /// Runs the block from one fiber of this OS thread, the driver, which [`run_on_fiber`]
    /// hands to the plan's runner; the runner ends with [`Block::driver_done`].
    fn run_on_driver(&self) -> Result<(), Error> {
        // A direct block's threads never wait: its schedule holds the driver only.
        let count = match self.plan {
            Plan::Direct(_) => 1,
            _ => self.block_dim.count() as usize,
        };
        let driver = {
            // SAFETY: no thread runs yet.
            let s = unsafe { self.schedule() };
            *s = Schedule::take(count);
            fiber::take_idle(1, &mut s.spare);
            self.fresh_fiber(s, 0)?
        };
        stack::running(self.kernel);
        // SAFETY: `driver` is idle and assigned this block, which outlives the call; the driver
        // is done with every thread it starts before it returns.
        unsafe { fiber::enter(driver) };
        // SAFETY: no thread runs any more.
        let s = unsafe { self.schedule() };
        fiber::give_back_all(&mut s.spare);
        let result = std::mem::replace(&mut s.outcome, Ok(()));
        self.fault_or(result)
    }

    /// The driver `fiber` of [`Block::run_on_driver`] is done with the block's threads:
    /// records the rounds' `outcome`; returns where the fiber goes next (back to
    /// `run_on_driver`, after which it is idle again).
    fn driver_done(&self, outcome: Result<(), Error>, fiber: *const Fiber) -> Target {
        // SAFETY: executor code, after the last call into the kernel.
        let s = unsafe { self.schedule() };
        s.fibers[0] = std::ptr::null();
        if let Err(error) = outcome {
            s.outcome = Err(error);
        }
        s.spare.push(fiber);
        Target::Main
    }

    /// An idle fiber (the block's spare ones first) given thread `linear` to start (for the
    /// driver, thread 0).
    #[inline]
    fn fresh_fiber(&self, s: &mut Schedule, linear: usize) -> Result<*const Fiber, Error> {
        let fresh = match s.spare.pop() {
            Some(fiber) => fiber,
            None => fiber::take().map_err(|reason| Error::InvalidLaunch {
                kernel: self.kernel.to_string(),
                reason,
            })?,
        };
        if let Some(&following) = s.spare.last() {
            // SAFETY: spare fibers are fibers of this OS thread.
            unsafe { fiber::prefetch(following) };
        }
        s.fibers[linear] = fresh;
        let job = Job {
            run: run_on_fiber,
            data: std::ptr::from_ref(self).cast::<()>(),
            index: linear as u32,
        };
        // SAFETY: `fresh` is idle and this block's; the block ends every thread it starts
        // before it goes away, so `job.data` outlives every run of the job.
        unsafe { fiber::assign(fresh, job) };
        Ok(fresh)
    }
}

/// A block's job on `fiber`: thread `job.index` and, on the same fiber, further unstarted
/// threads (fibers), or the whole block (the driver of the other plans); returns where the OS
/// thread goes next. The block is not touched after the return.
///
/// # Safety
/// `job.data` points to a live `Block` (see [`Block::fresh_fiber`]) that ends every thread it
/// started before it goes away; called on `fiber`.
unsafe fn run_on_fiber(job: Job, fiber: *const Fiber) -> Target {
    // SAFETY: the caller's contract; the block's lifetime is erased in `data` only.
    let block: &Block<'_> = unsafe { &*job.data.cast::<Block<'static>>() };
    match block.plan {
        Plan::Fibers(code) => block.run_fiber_threads(code, job.index, fiber),
        Plan::Direct(calls) => block.drive_direct(calls, fiber),
        Plan::Stackless(rounds) => block.drive_stackless(rounds, fiber),
        Plan::Polled(body) => block.drive_polled_on(body, fiber),
    }
}
