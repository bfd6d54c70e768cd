//! Running a block of an async closure kernel: each thread a future (`crate::thread::PolledBody`),
//! polled in rounds instead of run on a stack of its own.
//!
//! A thread runs until it awaits a barrier or collective: the future records the wait in the
//! block's schedule (the same `record_wait` as for threads on fibers) and returns `Pending`.
//! Every round polls, in the block's order (`Schedule::arrange`), each thread that may go on; at
//! the end of the round the block's scheduler (`crate::executor::release`: `end_round`)
//! releases exactly what it releases for threads on fibers — a block barrier once every thread
//! waits there, warp collectives with their results — or reports divergence and spinning
//! threads the same way. A released thread
//! reads its result when polled again. Where a thread on a fiber pays two stack switches and a
//! stack per barrier, a polled one pays a return and a call, and keeps only its future.
//!
//! The round loop runs on one fiber of the block's OS thread (so the threads' code has the
//! simulated stack size and overflows are reported), or straight on the OS thread under Miri,
//! which cannot interpret stack switches: async kernels are the launches Miri can run.

use crate::executor::block::{Block, panic_message};
use crate::executor::fiber::{Fiber, Target};
use crate::executor::schedule::{Operands, Phase, Schedule, record_wait, recount};
use crate::executor::watchdog::SpinWatch;
use crate::thread::{
    Arrival, AsyncThreadCtx, BarrierScope, Collective, Fence, PolledBody, PolledThreads, Site,
    Suspend, ThreadCtx, ThreadOps,
};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::Dim3;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::panic::Location;
use std::task::Poll;

/// Where a polled thread stands with respect to waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Running (or not started): it may start a wait.
    Running,
    /// Its future recorded a wait and returned `Pending`: at a barrier, or at a collective
    /// (whose result it reads when released).
    AtBarrier,
    AtCollective,
    /// The block released its wait; its future takes the result when polled.
    Released,
    ReleasedWithResult,
    /// It let the others run once (`nanosleep().await`).
    Yielded,
}

/// The payload that unwinds a thread found spinning for too long.
struct Spinning;

/// The threads of a polled block as the executor sees them: the [`ThreadOps`] behind every
/// thread's [`ThreadCtx`] and the [`Suspend`] behind its futures, acting for the thread being
/// polled (one at a time, on the block's OS thread). Per thread it keeps two small counters, so
/// a block's threads take little more memory than their futures.
struct Polled<'b, 'a> {
    block: &'b Block<'a>,
    /// The thread being polled.
    current: Cell<usize>,
    standing: Vec<Cell<Standing>>,
    /// Static shared arrays each thread has asked for (they are matched by call order).
    shared_calls: Vec<Cell<usize>>,
    /// Spins of the current thread in this poll (the watchdog's count).
    spins: SpinWatch,
    /// The executor is dropping the current thread's future: its destructors' waits return at
    /// once, as on a fiber being unwound, and the waits it drops are not faults.
    ending: Cell<bool>,
}

impl<'b, 'a> Polled<'b, 'a> {
    fn new(block: &'b Block<'a>, count: usize) -> Self {
        Polled {
            block,
            current: Cell::new(0),
            standing: vec![Cell::new(Standing::Running); count],
            shared_calls: vec![Cell::new(0); count],
            spins: SpinWatch::default(),
            ending: Cell::new(false),
        }
    }

    /// Makes `linear`, which the block lets go on, the thread being polled.
    #[inline]
    fn start_poll(&self, linear: usize) {
        let standing = &self.standing[linear];
        let was = standing.get();
        if was == Standing::AtBarrier {
            standing.set(Standing::Released);
        } else if was != Standing::Running {
            standing.set(match was {
                Standing::AtCollective => Standing::ReleasedWithResult,
                Standing::Yielded => Standing::Running,
                other => other,
            });
        }
        self.current.set(linear);
        self.spins.reset();
    }

    /// Drops thread `linear`'s future where it stands (it ended by a fault, or the block is
    /// over); a panic of its destructors is the thread's fault.
    fn end_thread(&self, linear: usize, futures: &mut dyn PolledThreads) {
        self.current.set(linear);
        self.spins.reset();
        self.ending.set(true);
        let ended = std::panic::catch_unwind(AssertUnwindSafe(|| futures.end(linear)));
        self.ending.set(false);
        if ended.is_err() {
            self.fault("a destructor panicked while the thread was ended".to_string());
        }
    }

    /// Whether the current thread, having returned `Pending`, waits or yielded (else it
    /// awaited something the executor does not know).
    #[inline]
    fn suspended(&self) -> bool {
        matches!(
            self.standing[self.current.get()].get(),
            Standing::AtBarrier | Standing::AtCollective | Standing::Yielded
        )
    }

    fn current_thread(&self) -> Dim3 {
        self.block.thread_index(self.current.get() as u32)
    }

    #[cold]
    #[inline(never)]
    fn waiting_twice(&self, what: &str, at: Site) {
        if self.ending.get() {
            return;
        }
        self.fault(format!(
            "the thread awaits the {what} at {at} while it waits somewhere else (two barriers or collectives awaited at once)"
        ));
    }

    #[cold]
    #[inline(never)]
    fn blocking_wait(&self, what: &str, at: Site) {
        if self.ending.get() {
            // A destructor run as the thread is ended: nobody is left to wait for.
            return;
        }
        self.fault(format!(
            "the blocking {what} at {at} was called in an async kernel; await its async form (`t.syncthreads().await`)"
        ));
    }
}

impl ThreadOps for Polled<'_, '_> {
    fn barrier(&self, _scope: BarrierScope, _fence: Fence, _mask: u64, at: Site) {
        self.blocking_wait("barrier", at);
    }

    fn collective(
        &self,
        op: Collective,
        _mask: u64,
        value: u64,
        _arg: i64,
        _width: u32,
        at: Site,
    ) -> u64 {
        self.blocking_wait(op.name(), at);
        value
    }

    fn progress(&self) {
        if self.ending.get() || std::thread::panicking() {
            // Unwinding out of a destructor, or a second unwind, would abort the process.
            return;
        }
        if self.spins.spun_too_long(&self.block.watchdog) {
            std::panic::resume_unwind(Box::new(Spinning));
        }
    }

    fn shared(&self, bytes: usize, align: usize, dtype: &'static str) -> Option<*mut u8> {
        let calls = &self.shared_calls[self.current.get()];
        self.block
            .next_shared(calls, bytes, align, dtype, |message| self.fault(message))
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        self.block.shared.dynamic_ptr()
    }

    fn fault(&self, message: String) {
        self.block.record_fault(self.current_thread(), message);
    }
}

impl Suspend for Polled<'_, '_> {
    #[inline]
    fn arrive_at_barrier(
        &self,
        scope: BarrierScope,
        fence: Fence,
        location: &'static Location<'static>,
    ) -> bool {
        let linear = self.current.get();
        let standing = &self.standing[linear];
        if !may_arrive(standing.get()) || self.ending.get() {
            self.waiting_twice("barrier", Site::rust(location));
            return false;
        }
        standing.set(Standing::AtBarrier);
        // SAFETY: called from the thread's poll, while the round loop holds no reference to the
        // schedule (it never keeps one across a poll).
        let s = unsafe { self.block.schedule() };
        record_wait(
            s,
            linear,
            scope,
            fence,
            u64::MAX,
            Site::rust(location),
            None,
        );
        true
    }

    #[inline]
    fn arrive_at_collective(&self, arrival: &Arrival) -> bool {
        let linear = self.current.get();
        let standing = &self.standing[linear];
        if !may_arrive(standing.get()) || self.ending.get() {
            self.waiting_twice(arrival.op.name(), Site::rust(arrival.location));
            return false;
        }
        let op = arrival.op;
        self.block.set_operands(
            linear,
            Operands {
                value: arrival.value,
                arg: arrival.arg,
                width: arrival.width,
                mask: arrival.mask,
            },
        );
        standing.set(Standing::AtCollective);
        // SAFETY: as for a barrier.
        let s = unsafe { self.block.schedule() };
        // Made here, not earlier: a site kept across a call is spilled field by field and
        // reloaded whole, which stalls on store forwarding.
        let at = Site::rust(arrival.location);
        record_wait(
            s,
            linear,
            op.scope(),
            Fence::Local,
            arrival.mask,
            at,
            Some(op),
        );
        true
    }

    #[inline]
    fn released(&self) -> Option<u64> {
        let standing = &self.standing[self.current.get()];
        match standing.get() {
            Standing::Released => {
                standing.set(Standing::Running);
                Some(0)
            }
            Standing::ReleasedWithResult => {
                standing.set(Standing::Running);
                Some(self.block.result_of(self.current.get()))
            }
            _ => None,
        }
    }

    fn yield_now(&self) {
        let standing = &self.standing[self.current.get()];
        // (A thread that also waits somewhere is polled again when released anyway.)
        if standing.get() == Standing::Running {
            standing.set(Standing::Yielded);
        }
    }

    #[cold]
    fn abandon(&self) {
        if self.ending.get() {
            return;
        }
        let linear = self.current.get();
        let standing = &self.standing[linear];
        match standing.get() {
            Standing::AtBarrier | Standing::AtCollective => {
                standing.set(Standing::Running);
                // SAFETY: a wait is dropped by the thread's own code, in its poll, while the
                // round loop holds no reference to the schedule.
                let s = unsafe { self.block.schedule() };
                if s.phases[linear] == Phase::Waiting {
                    s.phases[linear] = Phase::Ready;
                    recount(s);
                }
                self.fault(
                    "a barrier or collective was dropped before the block released it (polled once and dropped, as `select` or `now_or_never` do); a thread must await its waits to the end".to_string(),
                );
            }
            // Released: it only never read its result.
            Standing::Released | Standing::ReleasedWithResult => standing.set(Standing::Running),
            Standing::Running | Standing::Yielded => {}
        }
    }
}

/// Whether a thread in `standing` may start a wait (a thread that let the others run may too).
fn may_arrive(standing: Standing) -> bool {
    matches!(standing, Standing::Running | Standing::Yielded)
}

impl Block<'_> {
    /// Runs every thread of an async kernel's block to completion on this OS thread's own
    /// stack (under Miri, which cannot switch stacks).
    pub(super) fn run_polled_here(&self, body: &dyn PolledBody) -> Result<(), Error> {
        // SAFETY: no thread runs yet.
        *unsafe { self.schedule() } = Schedule::take(self.block_dim.count() as usize);
        let outcome = self.drive_polled(body);
        self.fault_or(outcome)
    }

    /// The block's threads, run on `fiber` (the driver `run_on_driver` entered); returns where
    /// the fiber goes next (back to `run_on_driver`).
    pub(super) fn drive_polled_on(&self, body: &dyn PolledBody, fiber: *const Fiber) -> Target {
        let outcome = self.drive_polled(body);
        self.driver_done(outcome, fiber)
    }

    /// Makes the threads' contexts and futures and runs them round by round; every future has
    /// been dropped when it returns.
    fn drive_polled(&self, body: &dyn PolledBody) -> Result<(), Error> {
        let count = self.block_dim.count() as usize;
        // SAFETY: no thread runs yet.
        unsafe { self.schedule() }.arrange(self.thread_order, self.first_linear());
        let polled = Polled::new(self, count);
        let dim = self.block_dim;
        let mut ctxs: Vec<AsyncThreadCtx<'_>> = Vec::with_capacity(count);
        // In index order (x fastest), without dividing the linear index.
        for z in 0..dim.z {
            for y in 0..dim.y {
                for x in 0..dim.x {
                    // SAFETY: `polled` hands out the block's shared memory.
                    let ctx = unsafe { ThreadCtx::new(&polled, &self.ctx, Dim3::new(x, y, z)) };
                    ctxs.push(AsyncThreadCtx::new(ctx, &polled));
                }
            }
        }
        let mut outcome = Ok(());
        body.run_block(&ctxs, &mut |futures| {
            outcome = self.poll_rounds(&polled, futures);
            // SAFETY: executor code after the last poll.
            if unsafe { self.schedule() }.done == count {
                // Every future completed or was ended (and was dropped then).
                return;
            }
            // Threads left waiting (divergence, a fault) are dropped where they stand, their
            // destructors run, as a closure's frames are unwound on a fiber.
            for linear in 0..count {
                polled.end_thread(linear, futures);
            }
        });
        outcome
    }

    /// Polls the threads round by round until all have ended, or the block is stuck.
    fn poll_rounds(
        &self,
        polled: &Polled<'_, '_>,
        futures: &mut dyn PolledThreads,
    ) -> Result<(), Error> {
        let count = polled.standing.len();
        loop {
            // One `catch_unwind` per round, not per poll: after a panic the round goes on with
            // the next thread.
            let mut from = 0;
            while from < count {
                let round = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    self.poll_round_from(polled, futures, from);
                }));
                let Err(payload) = round else {
                    break;
                };
                let message = if payload.is::<Spinning>() {
                    format!(
                        "no forward progress: the thread spun (atomics) for {:?} without awaiting (GPU_MEM_SIM_WATCHDOG sets the time); a spin-wait in an async kernel must await `t.nanosleep()` so that the thread it waits for can run",
                        self.watchdog.time
                    )
                } else {
                    format!("the kernel panicked: {}", panic_message(payload.as_ref()))
                };
                polled.fault(message);
                let linear = polled.current.get();
                self.polled_thread_ended(linear);
                polled.end_thread(linear, futures);
                // SAFETY: executor code between polls; nothing else holds the schedule.
                from = unsafe { self.schedule() }.position_of(linear) + 1;
            }
            // SAFETY: executor code between polls; nothing else holds the schedule.
            let s = unsafe { self.schedule() };
            if !self.end_round(s)? {
                return Ok(());
            }
        }
    }

    /// Polls, in the block's order from position `from`, every thread that may go on.
    #[inline]
    fn poll_round_from(
        &self,
        polled: &Polled<'_, '_>,
        futures: &mut dyn PolledThreads,
        from: usize,
    ) {
        for position in from..polled.standing.len() {
            let linear = {
                // SAFETY: executor code between polls; nothing else holds the schedule.
                let s = unsafe { self.schedule() };
                let linear = s.at(position);
                // Compares, not a `match`: the usual round has every thread in one phase, and
                // the branches stay predicted where a jump table's would not.
                let phase = s.phases[linear];
                if phase == Phase::Waiting || phase == Phase::Done {
                    continue;
                }
                if phase == Phase::Unstarted {
                    s.phases[linear] = Phase::Ready;
                }
                linear
            };
            polled.start_poll(linear);
            match futures.poll(linear) {
                Poll::Ready(()) => self.polled_thread_ended(linear),
                Poll::Pending if polled.suspended() => {}
                Poll::Pending => {
                    polled.fault(
                        "the kernel's thread returned `Pending` without waiting at one of the simulator's barriers, collectives or `nanosleep` (it awaited something else, a timer or a channel, say); nothing else can wake a simulated thread".to_string(),
                    );
                    self.polled_thread_ended(linear);
                    polled.end_thread(linear, futures);
                }
            }
        }
    }

    /// Counts thread `linear` as ended (once, whatever it was doing).
    fn polled_thread_ended(&self, linear: usize) {
        // SAFETY: executor code between polls; nothing else holds the schedule.
        let s = unsafe { self.schedule() };
        let was = s.phases[linear];
        if was == Phase::Done {
            return;
        }
        s.phases[linear] = Phase::Done;
        s.done += 1;
        s.progressed = true;
        if was == Phase::Waiting {
            // It ended by a fault while counted as waiting.
            recount(s);
        }
    }
}
