//! Running a block of a stackless program: a kernel whose threads wait only at barriers and
//! collectives, and let each other run only at atomics and spin hints, called in the kernel
//! itself, compiled with each thread a coroutine (`crate::source::stackless`).
//!
//! A thread is then a heap frame of the program's, not a stack: started, it runs until it first
//! waits, leaves the wait in its frame and returns. The block runs in rounds: the program runs
//! every thread that may go on (`gm_sim_run_round`, in index order), runs on the warps whose
//! lanes wait at a warp barrier or collective (released by [`Block::release_warp_in_round`],
//! which it calls back, up to 64 times a round), and reports how many wait,
//! and whether all at one block barrier; if so, all go on, else the block's scheduler
//! (`crate::executor::release`, the same releases, collective results and divergence reports as for threads
//! on fibers) says who goes on. A thread that only let the others run (every 16th atomic or spin
//! hint) goes on in the next round; rounds of nothing else count towards the report of a spin
//! that never ends, as on fibers. Where a thread on a fiber pays two stack switches and a stack
//! of its own per barrier, a stackless one pays a call and a return. The threads run on one
//! fiber of the block's OS thread, so their calls have the simulated stack size, and an
//! overflow is reported as for any other kernel.

use crate::abi::{GLOBAL_FENCE, GmSimRound, GmSimWait};
use crate::executor::block::Block;
use crate::executor::compiled::WaitParts;
use crate::executor::fiber::{Fiber, Target};
use crate::executor::plan::Rounds;
use crate::executor::release::{ballot_mask, combine_lanes, mask_groups};
use crate::executor::schedule::{Phase, record_wait};
use crate::executor::sim_thread::{SimThread, make_current};
use crate::thread::{BarrierScope, Combine};
use gpu_mem_core::Error;
use std::ffi::{c_int, c_void};

impl Block<'_> {
    /// The block's threads, run on `fiber` (the driver `run_on_driver` entered): started in
    /// index order, then resumed round by round. Each round runs in the program
    /// (`gm_sim_round`); after it, all go on when every live thread waits at one block barrier,
    /// or at one collective in whole warps (with their results), or only let the others run
    /// (an atomic or spin hint; the round counts as one without progress unless a thread
    /// ended); anything else goes to the block's scheduler, which releases and reports exactly
    /// as for threads on fibers. Returns where the fiber goes next (back to `run_on_driver`).
    pub(super) fn drive_stackless(&self, rounds: Rounds<'_>, fiber: *const Fiber) -> Target {
        let entry = rounds.entry;
        let count = self.block_dim.count() as usize;
        // What compiled code reads through `threadIdx` & co: one for all threads, at one address
        // (a frame may keep a reference across a barrier), set by the program to each thread
        // before it runs; callbacks (faults) find it as the current thread.
        let thread = SimThread::new(self, 0, None);
        // Each thread's frame while it waits (null once it ended) and where it waits.
        let (mut frames, mut waits) = {
            // SAFETY: executor code between kernel calls; nothing else holds the schedule.
            let s = unsafe { self.schedule() };
            s.fibers[0] = std::ptr::null();
            (
                std::mem::take(&mut s.frames),
                std::mem::take(&mut s.wait_at),
            )
        };
        frames.clear();
        frames.resize(count, std::ptr::null_mut());
        waits.clear();
        waits.resize(count, std::ptr::null_mut());
        make_current(&thread);
        let mut round = GmSimRound {
            thread: thread.info_ptr(),
            args: rounds.args.as_ptr(),
            frames: frames.as_mut_ptr(),
            waits: waits.as_mut_ptr(),
            count: count as u32,
            dim_x: self.block_dim.x,
            dim_y: self.block_dim.y,
            warp_size: self.warp_size,
            waiting: 0,
            fence: 0,
            one_site: 1,
            plain: 1,
            ready: std::ptr::null(),
            yielded: 0,
            ended: 0,
            release_warp: release_warp_of_round,
            block: std::ptr::from_ref(self).cast(),
        };
        // Which waiting threads the scheduler released, when it did not release them all.
        let mut ready: Vec<u8> = Vec::new();
        // Nothing refers to the frames of this OS thread's previous block any more; the program
        // was compiled from the kernel's source (stackless form) and its parameters checked
        // against the launch's arguments.
        // SAFETY: as just said; `args` holds one buffer of each parameter's exact layout, alive
        // for the launch, and `frames` and `waits` hold `count` entries.
        unsafe {
            (entry.begin_block)();
            (entry.start_round)(&mut round);
        }
        let outcome = loop {
            let every_waiting_thread_ran = round.ready.is_null();
            if round.waiting == 0 && every_waiting_thread_ran {
                break Ok(());
            }
            // Threads that only let the others run (atomics, spin hints) go on in the next
            // round; only the scheduler tells them from the rest.
            let no_yield = round.yielded == 0;
            if no_yield
                && every_waiting_thread_ran
                && round.waiting == round.count
                && round.one_site != 0
                && round.plain != 0
            {
                // Every thread of the block waits at one block barrier (none has ended: a block
                // barrier waits for all of them): all go on.
                if round.fence & GLOBAL_FENCE != 0 {
                    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                }
                // SAFETY: executor code between kernel calls; nothing else holds the schedule.
                unsafe { self.schedule() }.note_progress();
                round.ready = std::ptr::null();
            } else if every_waiting_thread_ran && round.yielded == round.waiting {
                // Every live thread only let the others run (atomics, spin hints): all go on,
                // the round counted as one without progress unless a thread ended.
                // SAFETY: executor code between kernel calls; nothing else holds the schedule.
                let s = unsafe { self.schedule() };
                s.progressed = round.ended > 0;
                if self.spun_too_long(s) {
                    // The report names each thread's state: every live one spins.
                    s.restart_round(frames.len());
                    for (phase, frame) in s.phases.iter_mut().zip(&frames) {
                        *phase = if frame.is_null() {
                            Phase::Done
                        } else {
                            Phase::Ready
                        };
                    }
                    break Err(self.no_progress(s));
                }
                round.ready = std::ptr::null();
            } else if no_yield
                && every_waiting_thread_ran
                && round.one_site != 0
                && self.whole_warps_at_one_collective(&frames, &waits)
            {
                // Every live thread waits at one warp barrier or collective, in whole warps (or
                // the whole block, for a block vote): all go on, with their results.
                self.release_all_at_one_collective(&frames, &waits);
                // SAFETY: as above.
                unsafe { self.schedule() }.note_progress();
                round.ready = std::ptr::null();
            } else {
                // Progress, for telling a spin-wait that never ends: a thread reached a barrier
                // or collective, or ended (releases count in the scheduler).
                let progressed = round.waiting > round.yielded || round.ended > 0;
                match self.schedule_general(&frames, &waits, &mut ready, progressed) {
                    // (The scheduler reports a block where no thread can go on; this guard only
                    // keeps a broken invariant from spinning.)
                    Ok(Some(0)) => {
                        break Err(self.divergence("no waiting thread was released".to_string()));
                    }
                    Ok(Some(released)) => {
                        round.ready = if released == live(&frames) {
                            std::ptr::null()
                        } else {
                            ready.as_ptr()
                        };
                    }
                    Ok(None) => break Ok(()),
                    Err(error) => break Err(error),
                }
            }
            // SAFETY: as above; every non-null frame is a suspended thread of this block, and
            // `ready` (when set) holds `count` flags and is not touched during the call.
            unsafe { (entry.resume_round)(&mut round) };
        };
        // Threads left waiting (divergence) end without running on, and without their
        // destructors, as on fibers (whose stacks are discarded, not unwound): their frames go
        // with the arena when the OS thread's next block begins.
        // SAFETY: executor code, after the last kernel call.
        let s = unsafe { self.schedule() };
        s.frames = frames;
        s.wait_at = waits;
        self.driver_done(outcome, fiber)
    }

    /// Whether the waiting threads, all at one call site that is not a block barrier, can all go
    /// on as the scheduler would let them: a block vote needs every thread of the block; a warp
    /// barrier or collective needs each warp entirely waiting or entirely ended (no lane it could
    /// wait for has exited).
    fn whole_warps_at_one_collective(
        &self,
        frames: &[*mut c_void],
        waits: &[*mut GmSimWait],
    ) -> bool {
        let Some(first) = frames.iter().position(|f| !f.is_null()) else {
            return false;
        };
        // SAFETY: a waiting thread's `wait` points into its suspended frame.
        let parts = unsafe { GmSimWait::parts(waits[first]) };
        match parts.scope {
            BarrierScope::Block => parts.op.is_some() && frames.iter().all(|f| !f.is_null()),
            BarrierScope::Warp => {
                let warp = self.warp_size.max(1) as usize;
                frames.chunks(warp).all(|lanes| {
                    let waiting = lanes.iter().filter(|f| !f.is_null()).count();
                    waiting == 0 || waiting == lanes.len()
                })
            }
        }
    }

    /// Every live thread waits at the same warp barrier or collective (one call site, so one
    /// kind), in whole warps or, for a block vote, the whole block: computes each one's result
    /// as the scheduler would and writes it into its wait.
    fn release_all_at_one_collective(&self, frames: &[*mut c_void], waits: &[*mut GmSimWait]) {
        let Some(first) = frames.iter().position(|f| !f.is_null()) else {
            return;
        };
        // SAFETY: a waiting thread's `wait` points into its suspended frame.
        let Some(op) = (unsafe { GmSimWait::parts(waits[first]) }).op else {
            // A warp barrier: nothing to compute.
            return;
        };
        let live = |linear: usize| !frames[linear].is_null();
        // SAFETY: as above.
        self.set_all_operands(|l| live(l).then(|| unsafe { GmSimWait::operands(waits[l]) })?);
        if op.scope() == BarrierScope::Block {
            self.combine_block(op);
        } else {
            let warp = self.warp_size.max(1) as usize;
            for base in (0..frames.len()).step_by(warp) {
                let lanes = warp.min(frames.len() - base);
                if live(base) {
                    self.combine_warp(op, base, ballot_mask(lanes), lanes);
                }
            }
        }
        self.take_all_results(|linear, result| {
            if live(linear) {
                // SAFETY: as above; nothing else touches a suspended thread's wait.
                unsafe { GmSimWait::set_result(waits[linear], result) };
            }
        });
    }

    /// Releases lanes of a warp within a round (`gm_sim_round::release_warp`): the lanes `here`
    /// of a warp (`waits[k]`: lane `k`'s wait, which holds its operands and takes its result),
    /// which wait at one warp barrier or collective (the program checked the call site and
    /// kind), go on as the scheduler's `release_warp` lets them: once every lane the mask of
    /// each group they make names is among them, each with its result computed over its group (`combine_lanes`, as
    /// the scheduler's `combine_warp` computes it) and written into its wait. `false` for
    /// anything else (a lane missing, a collective that is no shuffle or vote): the round then
    /// ends, and the scheduler decides, as it would have.
    fn release_warp_in_round(&self, waits: &[*mut GmSimWait], here: u64) -> bool {
        let lanes = waits.len();
        if here == 0 || lanes > 64 || here & !ballot_mask(lanes) != 0 {
            return false;
        }
        let first = here.trailing_zeros() as usize;
        // SAFETY: the wait of every lane of `here` points into its thread's suspended frame.
        let parts = unsafe { GmSimWait::parts(waits[first]) };
        if parts.scope != BarrierScope::Warp {
            return false;
        }
        // Every group the lanes here make (the tiles of a warp) must be complete.
        // SAFETY: as above.
        let mask_of = |lane: usize| unsafe { GmSimWait::parts(waits[lane]) }.mask;
        if mask_groups(here, lanes, mask_of).any(|(_, mask)| mask & !here != 0) {
            return false;
        }
        if let Some(op) = parts.op {
            if !matches!(
                op.combine(),
                Combine::Shuffle | Combine::WarpVote | Combine::Reduce
            ) {
                return false;
            }
            // Read from the waits and written back there, without the block's slots: all of
            // the results first, then each into its wait.
            let mut results = [0u64; 64];
            combine_lanes(
                op,
                here,
                lanes,
                // SAFETY: as above (`combine_lanes` asks only for lanes of `here`).
                |lane| unsafe { GmSimWait::operands(waits[lane]) }.unwrap_or_default(),
                |lane, result| results[lane] = result,
            );
            for lane in (0..lanes).filter(|&l| here & (1 << l) != 0) {
                // SAFETY: as above; nothing else touches a suspended thread's wait.
                unsafe { GmSimWait::set_result(waits[lane], results[lane]) };
            }
        }
        // SAFETY: executor code called between two of the program's thread calls, holding
        // nothing of the schedule across them.
        unsafe { self.schedule() }.note_progress();
        true
    }

    /// Hands a round that is not "every live thread waits at one block barrier" to the block's
    /// scheduler, which releases what it can (warp collectives and barriers, block collectives,
    /// one barrier seen through two copies of its file name) exactly as for threads on fibers:
    /// `Ok(Some(n))` when it released `n` threads (marked in `ready`, their collectives' results
    /// written into their waits; threads that only let the others run are always marked),
    /// `Ok(None)` when every thread has ended, else the divergence — or, after rounds in which
    /// threads only spun (`progressed` false, nothing released) for as long as on fibers, the
    /// report that nothing makes progress.
    #[cold]
    #[inline(never)]
    fn schedule_general(
        &self,
        frames: &[*mut c_void],
        waits: &[*mut GmSimWait],
        ready: &mut Vec<u8>,
        progressed: bool,
    ) -> Result<Option<u32>, Error> {
        let count = frames.len();
        // SAFETY: executor code between kernel calls; nothing else holds the schedule.
        let s = unsafe { self.schedule() };
        s.restart_round(count);
        for linear in 0..count {
            if frames[linear].is_null() {
                s.phases[linear] = Phase::Done;
                s.done += 1;
                continue;
            }
            // SAFETY: a waiting thread's `wait` points to its frame's wait or the yield site.
            if unsafe { GmSimWait::is_yield(waits[linear]) } {
                s.phases[linear] = Phase::Ready;
                continue;
            }
            // SAFETY: a waiting thread's `wait` points into its frame, alive until it resumes.
            let (operands, parts) = unsafe {
                (
                    GmSimWait::operands(waits[linear]),
                    GmSimWait::parts(waits[linear]),
                )
            };
            if let Some(operands) = operands {
                self.set_operands(linear, operands);
            }
            let WaitParts {
                scope,
                fence,
                mask,
                at,
                op,
            } = parts;
            record_wait(s, linear, scope, fence, mask, at, op);
        }
        // (`record_wait` counts every wait as an arrival; only this round's count.)
        s.progressed = progressed;
        if !self.end_round(s)? {
            return Ok(None);
        }
        ready.clear();
        ready.resize(count, 0);
        let mut released = 0;
        for linear in 0..count {
            if frames[linear].is_null() || s.phases[linear] != Phase::Ready {
                continue;
            }
            ready[linear] = 1;
            released += 1;
            // SAFETY: as above; the thread is suspended, so nothing else touches its wait.
            unsafe {
                if GmSimWait::operands(waits[linear]).is_some() {
                    GmSimWait::set_result(waits[linear], self.result_of(linear));
                }
            }
        }
        Ok(Some(released))
    }
}

/// `gm_sim_round::release_warp`, for the program: [`Block::release_warp_in_round`] of the
/// round's block.
///
/// # Safety
/// `block` is the [`Block`] running the round (set by `drive_stackless`), called on its OS
/// thread during one of its rounds; `waits` holds `lanes` waits, those of `here` of its
/// suspended threads.
unsafe extern "C" fn release_warp_of_round(
    block: *const c_void,
    waits: *const *mut GmSimWait,
    lanes: u32,
    here: u64,
) -> c_int {
    // SAFETY: the caller's contract: the block outlives its rounds, and `waits` holds `lanes`
    // pointers.
    let (block, waits) = unsafe {
        (
            &*block.cast::<Block<'_>>(),
            std::slice::from_raw_parts(waits, lanes as usize),
        )
    };
    c_int::from(block.release_warp_in_round(waits, here))
}

/// The threads still in the block (waiting).
fn live(frames: &[*mut c_void]) -> u32 {
    frames.iter().filter(|f| !f.is_null()).count() as u32
}
