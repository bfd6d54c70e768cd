//! Running a block of a stackless program: a kernel whose threads wait only at block barriers,
//! compiled with each thread a C++20 coroutine (`crate::source::stackless`).
//!
//! A thread is then a heap frame of the program's, not a stack: started, it runs until its first
//! barrier, records where it waits and returns here; once every thread of the block waits at the
//! same barrier, the block's scheduler (`super::block`: the same rounds, releases and divergence
//! reports as for threads on fibers) releases them and each is resumed in turn, in index order.
//! Where a thread on a fiber pays two stack switches and a stack of its own per barrier, a
//! stackless one pays a call and a return. The threads run on one fiber of the block's OS
//! thread, so their calls have the simulated stack size, and an overflow is reported as for any
//! other kernel.

use super::block::{Block, Phase, Schedule, SimThread, record_wait};
use super::body::{CompiledLaunch, GmSimWait, make_current};
use super::fiber::{self, Fiber, Target};
use super::stack;
use crate::source::StacklessEntry;
use crate::thread::BarrierScope;
use gpu_mem_core::Error;
use std::ffi::c_void;

/// `gm_sim_start` / `gm_sim_resume`: the thread waits (frame and wait set).
const WAITS: i32 = 0;

impl Block<'_> {
    /// Runs every thread of the block to completion, from a fiber of this OS thread.
    pub(super) fn run_stackless(&self) -> Result<(), Error> {
        let count = self.block_dim.count() as usize;
        let driver = {
            // SAFETY: no thread runs yet.
            let s = unsafe { self.schedule() };
            *s = Schedule::take(count);
            fiber::take_idle(1, &mut s.spare);
            // Its `Start` names thread 0; `run_threads` sees a stackless program and runs
            // `drive_stackless` instead.
            self.fresh_fiber(s, 0)?
        };
        stack::running(self.kernel);
        // SAFETY: `driver` is idle and assigned this block, which outlives the call; the driver
        // ends every thread it starts before it returns.
        unsafe { fiber::enter(driver) };
        // SAFETY: no thread runs any more.
        let s = unsafe { self.schedule() };
        fiber::give_back_all(&mut s.spare);
        let result = std::mem::replace(&mut s.outcome, Ok(()));
        self.fault_or(result)
    }

    /// The block's threads, run on `fiber` (the driver `run_stackless` entered): started in
    /// index order, then resumed round by round as the scheduler releases them. Returns where
    /// the fiber goes next (back to `run_stackless`).
    pub(super) fn drive_stackless(
        &self,
        launch: &CompiledLaunch<'_>,
        entry: StacklessEntry,
        fiber: *const Fiber,
    ) -> Target {
        let count = self.block_dim.count() as usize;
        // What compiled code reads through `threadIdx` & co: one for all threads, at one address
        // (a frame may keep a reference across a barrier), set to each thread before it runs.
        let mut thread = SimThread::new(self, 0, None);
        {
            // SAFETY: executor code between kernel calls; nothing else holds the schedule.
            let s = unsafe { self.schedule() };
            s.fibers[0] = std::ptr::null();
            s.frames.clear();
            s.frames.resize(count, std::ptr::null_mut());
        }
        // SAFETY: the frames of this OS thread's previous block were all destroyed.
        unsafe { (entry.begin_block)() };
        for linear in 0..count {
            thread.set_linear(linear as u32);
            make_current(&thread);
            let mut frame = std::ptr::null_mut();
            let mut wait = std::ptr::null();
            // SAFETY: the program was compiled from the kernel's source (stackless form), its
            // parameters were checked against the launch's arguments, and `args` holds one
            // buffer of each parameter's exact layout, alive for the launch.
            let status = unsafe { (entry.start)(launch.args.as_ptr(), &mut frame, &mut wait) };
            self.settle(linear, status, frame, wait);
        }
        loop {
            {
                // SAFETY: as above.
                let s = unsafe { self.schedule() };
                match self.end_round(s) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(error) => {
                        s.outcome = Err(error);
                        break;
                    }
                }
            }
            for linear in 0..count {
                let frame = {
                    // SAFETY: as above.
                    let s = unsafe { self.schedule() };
                    if s.phases[linear] != Phase::Ready {
                        continue;
                    }
                    s.frames[linear]
                };
                thread.set_linear(linear as u32);
                make_current(&thread);
                let mut wait = std::ptr::null();
                // SAFETY: `frame` is the suspended coroutine of this thread, released by the
                // scheduler (`Ready`), resumed once.
                let status = unsafe { (entry.resume)(frame, &mut wait) };
                self.settle(linear, status, frame, wait);
            }
        }
        self.end_stackless_threads(&mut thread, entry);
        // SAFETY: as above.
        let s = unsafe { self.schedule() };
        // The fiber switches back to `run_stackless` right after this and is idle again.
        s.spare.push(fiber);
        Target::Main
    }

    /// Bookkeeping after thread `linear` started or resumed: it waits where `wait` says, in
    /// `frame`, or it ended.
    #[inline(always)]
    fn settle(&self, linear: usize, status: i32, frame: *mut c_void, wait: *const GmSimWait) {
        // SAFETY: executor code between kernel calls; nothing else holds the schedule.
        let s = unsafe { self.schedule() };
        if status == WAITS && !wait.is_null() {
            // SAFETY: a waiting thread's `wait` points into its frame, alive until it resumes.
            let (fence, at) = unsafe { &*wait }.parts();
            record_wait(s, linear, BarrierScope::Block, fence, u64::MAX, at, None);
            s.frames[linear] = frame;
        } else {
            s.phases[linear] = Phase::Done;
            s.frames[linear] = std::ptr::null_mut();
            s.done += 1;
            s.progressed = true;
        }
    }

    /// Ends the threads left waiting (divergence, or another thread's fault) without running
    /// them on: their frames are destroyed, which runs the destructors of what they hold.
    fn end_stackless_threads(&self, thread: &mut SimThread<'_, '_>, entry: StacklessEntry) {
        let count = self.block_dim.count() as usize;
        for linear in 0..count {
            let frame = {
                // SAFETY: executor code between kernel calls; nothing else holds the schedule.
                let s = unsafe { self.schedule() };
                if s.phases[linear] != Phase::Waiting {
                    continue;
                }
                s.phases[linear] = Phase::Done;
                std::mem::replace(&mut s.frames[linear], std::ptr::null_mut())
            };
            thread.set_linear(linear as u32);
            make_current(thread);
            // SAFETY: `frame` is this thread's suspended coroutine, destroyed once.
            unsafe { (entry.destroy)(frame) };
        }
    }
}
