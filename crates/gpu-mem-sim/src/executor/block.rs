//! Running one block: its threads on fibers of the current OS thread (`super::fiber`), released
//! together at barriers and warp collectives, with divergence and faults turned into errors.
//!
//! A thread runs until it waits: at a barrier or collective ([`Block::wait`]), or to let the
//! others run ([`Block::yield_now`], from atomics and spin-wait hints). The waiting thread
//! itself picks the next thread to run — the next ready one in index order, or an unstarted one
//! on a fresh fiber — and switches to it; a thread that ends leaves its fiber to the next
//! unstarted thread. When the scan reaches the end of the block (a round), what can be released
//! is released: every thread waiting at one block barrier at once (counted as they arrive), or
//! the general checks for warp barriers, collectives and mixed waits. When nothing can proceed
//! the launch fails with [`Error::BarrierDivergence`] describing who waits where.

use super::Limits;
use super::body::{Body, CompiledLaunch, GmSimThread};
use super::fiber::{self, Fiber, Target};
use super::grid_barrier::GridBarrier;
use super::shared::SharedMemory;
use super::stack;
use crate::source::Entry;
use crate::thread::{
    ArgView, BarrierScope, BlockCtx, Collective, Fence, Site, ThreadCtx, ThreadOps,
};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::Dim3;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::panic::AssertUnwindSafe;

/// A thread lets the others run at every this many atomics / spin hints.
const PROGRESS_EVERY: u32 = 16;
/// Rounds in which threads only spun (no barrier reached, nothing finished), and for how long
/// (the device's watchdog, `SimDeviceConfig::watchdog`), before the launch is declared stuck.
/// Both: an atomic counts as a spin (useful atomics and a
/// spin-wait look the same to the executor), so a block whose last live thread adds up a large
/// input with atomics spins [`PROGRESS_EVERY`] times per round, ~16 M times per 2^20 rounds
/// (0.14 s), while doing its work; it is
/// reported only once it has done nothing else for the whole time as well.
const MAX_IDLE_ROUNDS: u64 = 1 << 20;
/// The watchdog time [`MAX_IDLE_ROUNDS`] goes with; a shorter one takes proportionally fewer
/// rounds (see [`idle_rounds_for`]).
const IDLE_ROUNDS_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// The rounds without progress a block is allowed besides `watchdog`'s time: [`MAX_IDLE_ROUNDS`]
/// for the default 10 s, proportionally fewer for a shorter time (never below twice
/// [`IDLE_CLOCK_FROM`], where the clock starts), so that a short watchdog is short.
fn idle_rounds_for(watchdog: std::time::Duration) -> u64 {
    let share = watchdog.as_secs_f64() / IDLE_ROUNDS_TIME.as_secs_f64();
    ((MAX_IDLE_ROUNDS as f64 * share.min(1.0)) as u64).max(2 * IDLE_CLOCK_FROM)
}
/// The idle round from which the time is taken (short idle stretches, common in blocks that
/// spin a little between barriers, never read the clock), and how often it is read after.
const IDLE_CLOCK_FROM: u64 = 1 << 10;

/// What a fiber runs next: thread `linear` of the block at `block` (its lifetime erased; see
/// [`run_threads`]).
#[derive(Clone, Copy)]
pub(crate) struct Start {
    block: *const Block<'static>,
    linear: u32,
}

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

/// The payload that unwinds a closure thread left waiting when its block ends.
struct Cancelled;

/// Runs thread `start.linear`, then, on the same fiber, further unstarted threads of its block,
/// until the block has none for this fiber; returns where the OS thread goes next. The block is
/// not touched after the return.
///
/// # Safety
/// `start.block` points to a live `Block` that ends every thread it started before it goes away.
pub(crate) unsafe fn run_threads(start: Start, fiber: *const Fiber) -> Target {
    // SAFETY: the caller's contract.
    let block: &Block<'_> = unsafe { &*start.block };
    if let Body::Compiled(launch) = block.body {
        if let Entry::Stackless(entry) = launch.program.entry {
            return block.drive_stackless(launch, entry, fiber);
        }
        if !launch.program.waits {
            return block.drive_direct(fiber);
        }
    }
    if let Body::Polled(body) = block.body {
        return block.drive_polled_on(body, fiber);
    }
    let mut linear = start.linear;
    loop {
        block.run_thread(linear, fiber);
        match block.thread_ended(linear, fiber) {
            Ended::StartHere(next) => linear = next,
            Ended::Go(target) => return target,
        }
    }
}

/// Where a suspended thread waits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Wait {
    scope: BarrierScope,
    fence: Fence,
    /// Lanes of the warp that must take part (warp scope).
    mask: u64,
    at: Site,
    op: Option<Collective>,
}

impl Wait {
    /// A placeholder for threads that do not wait.
    const NONE: Wait = Wait {
        scope: BarrierScope::Block,
        fence: Fence::Local,
        mask: 0,
        at: Site::NONE,
        op: None,
    };
}

/// A thread's state as the general release checks see it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
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

/// A thread's operands and result of a collective.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    value: u64,
    arg: i64,
    width: u32,
    result: u64,
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

/// The block's scheduling state. Touched only by code running on the block's OS thread, in
/// short stretches that never span a switch or a call into the kernel. Its buffers are kept per
/// OS thread and reused by the next block.
pub(super) struct Schedule {
    pub(super) phases: Vec<Phase>,
    /// Where each `Waiting` thread waits.
    waits: Vec<Wait>,
    /// The fiber of each started thread that has not ended.
    pub(super) fibers: Vec<*const Fiber>,
    /// Fibers of ended threads, idle, for the block's next threads (then the OS thread's pool).
    pub(super) spare: Vec<*const Fiber>,
    /// The frame of each waiting thread of a stackless program, and where it waits (buffers
    /// of `super::stackless`, kept here to be reused).
    pub(super) frames: Vec<*mut std::ffi::c_void>,
    pub(super) wait_at: Vec<*mut super::body::GmSimWait>,
    next_unstarted: usize,
    waiting: usize,
    pub(super) done: usize,
    /// Threads waiting at block barriers, the first one's wait, and whether all wait at its site.
    block_waiting: usize,
    first_block_wait: Option<Wait>,
    one_site: bool,
    /// Since the last round ended: did a thread wait, end or get released.
    pub(super) progressed: bool,
    idle_rounds: u64,
    /// When round [`IDLE_CLOCK_FROM`] of the rounds counted by `idle_rounds` ended.
    idle_since: Option<std::time::Instant>,
    /// Rounds that ended with a thread waiting at a block barrier (reset when none waits), and
    /// when round [`IDLE_CLOCK_FROM`] of them ended: other threads that loop on warp
    /// collectives make progress each round, and would otherwise keep such a block going for
    /// ever (see [`Block::barrier_stalled`]).
    barrier_rounds: u64,
    barrier_since: Option<std::time::Instant>,
    pub(super) outcome: Result<(), Error>,
    /// `Block::run` is ending threads left waiting.
    cancelling: bool,
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
    fn keep(self) {
        SPARE_SCHEDULE.set(Some(self));
    }

    /// The states as the general release checks see them.
    fn states(&self) -> Vec<State> {
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

/// Everything the threads of one block share.
pub(crate) struct Block<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) body: Body<'a>,
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) warp_size: u32,
    /// How long the block may go without progress before it is reported.
    pub(super) watchdog: std::time::Duration,
    /// And for how many rounds ([`idle_rounds_for`] the watchdog).
    idle_rounds: u64,
    pub(crate) shared: SharedMemory,
    /// The grid barrier of a cooperative launch; `None` for others.
    grid: Option<&'a GridBarrier>,
    /// What every closure thread's context refers to.
    pub(crate) ctx: BlockCtx<'a>,
    slots: RefCell<Vec<Slot>>,
    /// First fault of the block: thread index and message.
    fault: RefCell<Option<(Dim3, String)>>,
    schedule: UnsafeCell<Schedule>,
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        let schedule = std::mem::take(self.schedule.get_mut());
        if !schedule.phases.is_empty() {
            schedule.keep();
        }
    }
}

impl<'a> Block<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        kernel: &'a str,
        body: Body<'a>,
        args: &'a [ArgView<'a>],
        block_idx: Dim3,
        block_dim: Dim3,
        grid_dim: Dim3,
        limits: Limits,
        shared: SharedMemory,
        grid: Option<&'a GridBarrier>,
    ) -> Block<'a> {
        let warp_size = limits.warp_size;
        // SAFETY: `grid::run_grid` built the arguments' views from validated device ranges kept
        // alive for the whole launch.
        let ctx = unsafe { BlockCtx::new(args, block_idx, block_dim, grid_dim, warp_size) };
        Block {
            kernel,
            body,
            ctx,
            block_idx,
            block_dim,
            grid_dim,
            warp_size,
            watchdog: limits.watchdog,
            idle_rounds: idle_rounds_for(limits.watchdog),
            shared,
            grid,
            // Sized by the first collective.
            slots: RefCell::new(Vec::new()),
            fault: RefCell::new(None),
            schedule: UnsafeCell::new(Schedule::default()),
        }
    }

    /// The scheduling state.
    ///
    /// # Safety
    /// No other reference to it is alive: callers hold it only within one function that neither
    /// switches fibers nor runs kernel code.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn schedule(&self) -> &mut Schedule {
        // SAFETY: the caller's contract; a block is only touched by its own OS thread.
        unsafe { &mut *self.schedule.get() }
    }

    #[inline]
    pub(super) fn thread_index(&self, linear: u32) -> Dim3 {
        thread_of(linear, self.block_dim)
    }

    /// Sets thread `linear`'s operands of a collective (sizing the block's slots first).
    pub(super) fn set_operands(&self, linear: usize, (value, arg, width): (u64, i64, u32)) {
        let count = self.block_dim.count() as usize;
        let mut slots = self.slots.borrow_mut();
        if slots.len() != count {
            slots.clear();
            slots.resize(count, Slot::default());
        }
        if let Some(slot) = slots.get_mut(linear) {
            slot.value = value;
            slot.arg = arg;
            slot.width = width;
        }
    }

    /// The static shared buffer a thread's next `shared_array` call gets (`ThreadOps::shared`):
    /// `calls` counts that thread's calls, which are matched by order. `None` after `fault` got
    /// the reason (a size or type that does not match, the block's limit).
    pub(super) fn next_shared(
        &self,
        calls: &Cell<usize>,
        bytes: usize,
        align: usize,
        dtype: &'static str,
        fault: impl FnOnce(String),
    ) -> Option<*mut u8> {
        let index = calls.get();
        calls.set(index + 1);
        self.shared
            .get(index, bytes, align, dtype)
            .map_err(fault)
            .ok()
    }

    /// Thread `linear`'s result of the collective it was released from.
    pub(super) fn result_of(&self, linear: usize) -> u64 {
        self.slots
            .borrow()
            .get(linear)
            .map_or(0, |slot| slot.result)
    }

    pub(crate) fn record_fault(&self, thread: Dim3, message: String) {
        let mut fault = self.fault.borrow_mut();
        if fault.is_none() {
            *fault = Some((thread, message));
        }
    }

    pub(super) fn divergence(&self, detail: String) -> Error {
        Error::BarrierDivergence {
            kernel: self.kernel.to_string(),
            block: self.block_idx.to_array(),
            detail,
        }
    }

    /// Runs every thread of the block to completion, on fibers of this OS thread.
    pub(crate) fn run(&self) -> Result<(), Error> {
        if let Body::Compiled(launch) = self.body {
            if !launch.program.waits {
                // On the driver fiber, so deep recursion overflows a simulated stack, which
                // is reported naming the kernel, not the OS thread's.
                return self.run_on_driver();
            }
            if let Entry::Stackless(_) = launch.program.entry {
                return self.run_stackless();
            }
        }
        if let Body::Polled(body) = self.body {
            return self.run_polled(body);
        }
        let count = self.block_dim.count() as usize;
        // SAFETY: no thread runs yet.
        let s = unsafe { self.schedule() };
        *s = Schedule::take(count);
        // The fibers the block may need, in one go.
        fiber::take_idle(count, &mut s.spare);
        let first = self.fresh_fiber(s, 0)?;
        stack::running(self.kernel);
        s.phases[0] = Phase::Ready;
        s.next_unstarted = 1;
        // SAFETY: `first` holds thread 0; the block outlives the call, and every thread it
        // starts has ended (or is ended below) before it returns.
        unsafe { fiber::enter(first) };
        self.end_waiting_threads();
        // SAFETY: no thread runs any more.
        let s = unsafe { self.schedule() };
        fiber::give_back_all(&mut s.spare);
        let result = std::mem::replace(&mut s.outcome, Ok(()));
        self.fault_or(result)
    }

    /// Runs a block whose threads are not fibers of their own (a stackless program's coroutines,
    /// an async kernel's futures): its round loop runs on one fiber of this OS thread, so the
    /// threads' code has the simulated stack size. That fiber's `Start` names thread 0;
    /// `run_threads` sees the kind of body and drives the block's rounds instead, ending with
    /// [`Block::driver_done`].
    pub(super) fn run_on_driver(&self) -> Result<(), Error> {
        let count = self.block_dim.count() as usize;
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
    pub(super) fn driver_done(&self, outcome: Result<(), Error>, fiber: *const Fiber) -> Target {
        // SAFETY: executor code, after the last call into the kernel.
        let s = unsafe { self.schedule() };
        s.fibers[0] = std::ptr::null();
        if let Err(error) = outcome {
            s.outcome = Err(error);
        }
        s.spare.push(fiber);
        Target::Main
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
            if self.body.is_compiled() {
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

    /// The block's first fault, if any, else `result`. A fault is the root cause of any
    /// divergence that follows it (a thread that panicked never reaches the next barrier), so
    /// it is reported first.
    pub(super) fn fault_or(&self, result: Result<(), Error>) -> Result<(), Error> {
        match self.fault.borrow_mut().take() {
            Some((thread, message)) => Err(Error::KernelFault {
                kernel: self.kernel.to_string(),
                block: self.block_idx.to_array(),
                thread: thread.to_array(),
                message,
            }),
            None => result,
        }
    }

    /// Runs the threads one after another as plain calls on the driver `fiber`
    /// ([`Block::run_on_driver`]): for compiled kernels that never wait for each other (no
    /// barrier, collective or atomic in their source), where any order is a valid schedule.
    fn drive_direct(&self, fiber: *const Fiber) -> Target {
        let count = self.block_dim.count() as u32;
        for linear in 0..count {
            SimThread::new(self, linear, None).run();
            if self.fault.borrow().is_some() {
                break;
            }
        }
        self.driver_done(Ok(()), fiber)
    }

    /// Runs thread `linear` on `fiber` until it ends (a closure's panic becomes a fault).
    fn run_thread(&self, linear: u32, fiber: *const Fiber) {
        match self.body {
            Body::Compiled(launch) => self.run_compiled(launch, linear, fiber),
            // (`run_threads` drives a polled block itself.)
            Body::Closure(_) | Body::Polled(_) => self.run_closure(linear, fiber),
        }
    }

    /// Runs a compiled thread. Kept apart from the closure path so that this frame, which every
    /// waiting thread keeps on its stack, stays small (fewer cache lines per thread).
    #[inline(never)]
    fn run_compiled(&self, launch: &CompiledLaunch<'_>, linear: u32, fiber: *const Fiber) {
        // Compiled code cannot panic (its callbacks never unwind).
        launch.run_thread(&SimThread::new(self, linear, Some(fiber)));
    }

    /// Runs a closure thread; its panic becomes a fault.
    #[inline]
    fn run_closure(&self, linear: u32, fiber: *const Fiber) {
        let me = SimThread::new(self, linear, Some(fiber));
        let thread = me.thread;
        if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| me.run()))
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
            let next = s.next_unstarted;
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
    fn wait(
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
    fn yield_now(&self, linear: u32, fiber: *const Fiber) {
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
    /// thread's: a fresh one for an unstarted thread (given its [`Start`]), null to go back to
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

    /// An idle fiber (the block's spare ones first) given thread `linear` to start.
    pub(super) fn fresh_fiber(
        &self,
        s: &mut Schedule,
        linear: usize,
    ) -> Result<*const Fiber, Error> {
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
        let this = std::ptr::from_ref(self).cast::<Block<'static>>();
        // SAFETY: `fresh` is idle and this block's; the block ends every thread it starts
        // before it goes away.
        unsafe {
            fiber::assign(
                fresh,
                Start {
                    block: this,
                    linear: linear as u32,
                },
            )
        };
        Ok(fresh)
    }

    /// The next thread to run after `from`: the next ready or unstarted one in index order; at
    /// the end of the block, a round ends (see [`Block::end_round`]) and the scan starts over.
    #[inline]
    fn pick(&self, s: &mut Schedule, from: usize) -> Next {
        let count = s.phases.len();
        let mut i = from + 1;
        loop {
            while i < count {
                match s.phases[i] {
                    Phase::Ready => return Next::Run(i),
                    Phase::Unstarted => {
                        s.phases[i] = Phase::Ready;
                        s.next_unstarted = i + 1;
                        return Next::Start(i);
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

    /// Ends a round: releases what can be released; `Ok(false)` when every thread has ended,
    /// an error when no thread can proceed (or threads only spin for too long).
    #[inline(never)]
    pub(super) fn end_round(&self, s: &mut Schedule) -> Result<bool, Error> {
        let count = s.phases.len();
        if s.done == count {
            return Ok(false);
        }
        if self.fault.borrow().is_some() {
            // A thread faulted: that fault is the block's result (`fault_or` reports it before
            // any error), and as on a GPU the kernel stops; the threads left would only wait
            // for what the faulted thread never does, or spin until the no-progress limit.
            return Err(self.divergence("a thread of the block faulted".to_string()));
        }
        let released = match s.first_block_wait {
            // The common case: every thread waits at the same block barrier.
            Some(wait) if s.block_waiting == count && s.one_site => {
                self.release_block_now(wait)?;
                s.phases.fill(Phase::Ready);
                s.waiting = 0;
                s.block_waiting = 0;
                s.first_block_wait = None;
                s.one_site = true;
                true
            }
            _ if s.waiting > 0 => {
                let warp = self.warp_size.max(1) as usize;
                let mut states = s.states();
                let released = self.release_general(&mut states, warp)?;
                if released {
                    for (phase, state) in s.phases.iter_mut().zip(&states) {
                        if *phase == Phase::Waiting && *state == State::Ready {
                            *phase = Phase::Ready;
                        }
                    }
                    recount(s);
                }
                released
            }
            _ => false,
        };
        if released {
            s.progressed = true;
        }
        if s.waiting + s.done == count {
            return Err(self.divergence(describe_states(&s.states(), |i| {
                self.thread_index(i as u32)
            })));
        }
        if self.spun_too_long(s) {
            return Err(self.no_progress(s));
        }
        if self.barrier_stalled(s) {
            return Err(self.stalled_at_barrier(s));
        }
        Ok(true)
    }

    /// Counts a round that ends with threads waiting at a block barrier: `true` once such rounds
    /// went on for the watchdog's rounds and time without the barrier being released
    /// (report it with [`Block::stalled_at_barrier`]). Threads elsewhere may be making progress
    /// all along (a loop of warp votes waiting for a flag that the threads at the barrier would
    /// set after it), which `spun_too_long` counts as work.
    fn barrier_stalled(&self, s: &mut Schedule) -> bool {
        if s.block_waiting == 0 {
            s.barrier_rounds = 0;
            return false;
        }
        s.barrier_rounds += 1;
        if s.barrier_rounds == IDLE_CLOCK_FROM {
            s.barrier_since = Some(std::time::Instant::now());
        }
        s.barrier_rounds > self.idle_rounds
            && s.barrier_rounds.is_multiple_of(IDLE_CLOCK_FROM)
            && s.barrier_since
                .is_some_and(|t| t.elapsed() >= self.watchdog)
    }

    /// The report of threads kept at a block barrier that the others never reach.
    #[cold]
    fn stalled_at_barrier(&self, s: &Schedule) -> Error {
        self.divergence(format!(
            "no forward progress: threads wait at a block barrier for {:?} and over {} rounds while the others run without reaching it (GPU_MEM_SIM_WATCHDOG sets the time); {}",
            self.watchdog,
            self.idle_rounds,
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
        s.idle_rounds > self.idle_rounds
            && s.idle_rounds.is_multiple_of(IDLE_CLOCK_FROM)
            && s.idle_since.is_some_and(|t| t.elapsed() >= self.watchdog)
    }

    /// The report of threads that only spin, from the states in `s`.
    #[cold]
    pub(super) fn no_progress(&self, s: &Schedule) -> Error {
        self.divergence(format!(
            "no forward progress: threads spin (atomics or spin-wait hints) while nothing else can run, for {:?} and over {} rounds (GPU_MEM_SIM_WATCHDOG sets the time); {}",
            self.watchdog,
            self.idle_rounds,
            describe_states(&s.states(), |i| self.thread_index(i as u32))
        ))
    }

    /// Whether the block is ending the threads left waiting.
    fn cancelling(&self) -> bool {
        // SAFETY: a short read; nothing else holds the schedule while a thread runs.
        unsafe { self.schedule() }.cancelling
    }

    /// Warp barriers and collectives, then a block barrier with its checks.
    fn release_general(&self, states: &mut [State], warp: usize) -> Result<bool, Error> {
        let mut released = false;
        for (w, members) in states.chunks_mut(warp).enumerate() {
            released |= self.release_warp(w * warp, members)?;
        }
        Ok(self.release_block(states)? || released)
    }

    /// Releases the groups of a warp's lanes that wait at the same warp barrier or collective
    /// once every lane its mask names is there.
    fn release_warp(&self, base: usize, members: &mut [State]) -> Result<bool, Error> {
        let lanes = members.len();
        let existing = if lanes >= 64 {
            u64::MAX
        } else {
            (1u64 << lanes) - 1
        };
        let mut visited = 0u64;
        let mut released = false;
        for first in 0..lanes {
            let State::Waiting(wait) = members[first] else {
                continue;
            };
            if wait.scope != BarrierScope::Warp || visited & (1 << first) != 0 {
                continue;
            }
            let mut here = 0u64;
            for (lane, state) in members.iter().enumerate() {
                if matches!(state, State::Waiting(w) if w.scope == BarrierScope::Warp && w.at == wait.at)
                {
                    here |= 1 << lane;
                }
            }
            visited |= here;
            let missing = wait.mask & existing & !here;
            // An active mask is complete once no lane of the warp can still arrive: the others
            // wait elsewhere or have ended.
            let complete = if wait.op == Some(Collective::Active) {
                !members.contains(&State::Ready)
            } else {
                missing == 0
            };
            if complete {
                if let Some(op) = wait.op {
                    self.combine_warp(op, base, here, lanes);
                }
                for (lane, state) in members.iter_mut().enumerate() {
                    if here & (1 << lane) != 0 {
                        *state = State::Ready;
                    }
                }
                released = true;
                continue;
            }
            if wait.op == Some(Collective::Active) {
                continue;
            }
            let exited = (0..lanes)
                .filter(|&lane| missing & (1 << lane) != 0 && members[lane] == State::Done)
                .count();
            if exited > 0 {
                let what = match wait.op {
                    Some(op) => op.name().to_string(),
                    None => "wave barrier".to_string(),
                };
                return Err(self.divergence(format!(
                    "{what} at {} reached by {} of the {lanes} threads of warp {}; {exited} lane(s) it waits for exited",
                    wait.at,
                    here.count_ones(),
                    base / self.warp_size.max(1) as usize,
                )));
            }
        }
        Ok(released)
    }

    /// Computes every participant's result of a warp collective (in place: results and
    /// operands are separate fields of the slots).
    pub(super) fn combine_warp(&self, op: Collective, base: usize, here: u64, lanes: usize) {
        let mut slots = self.slots.borrow_mut();
        let Some(warp) = slots.get_mut(base..base + lanes) else {
            return;
        };
        let taking_part = |lane: usize| here & (1 << lane) != 0;
        // The votes are the same for every participant.
        let ballot = (0..lanes)
            .filter(|&l| taking_part(l) && warp[l].value != 0)
            .fold(0u64, |bits, l| bits | 1 << l);
        let vote = match op {
            Collective::Ballot => Some(ballot),
            Collective::All => Some(u64::from(ballot == here & ballot_mask(lanes))),
            Collective::Any => Some(u64::from(ballot != 0)),
            Collective::Active => Some(here),
            _ => None,
        };
        for lane in (0..lanes).filter(|&l| taking_part(l)) {
            warp[lane].result = match vote {
                Some(result) => result,
                None => {
                    let slot = warp[lane];
                    match shuffle_source(op, lane, slot.arg, slot.width, lanes) {
                        Some(src) if taking_part(src) => warp[src].value,
                        _ => slot.value,
                    }
                }
            };
        }
    }

    /// Releases the block when all its live threads wait at the same block barrier.
    fn release_block(&self, states: &mut [State]) -> Result<bool, Error> {
        let live = states.iter().filter(|s| **s != State::Done).count();
        let mut first: Option<Wait> = None;
        for state in states.iter() {
            match state {
                State::Waiting(w) if w.scope == BarrierScope::Block => match first {
                    None => first = Some(*w),
                    Some(f) if f.at != w.at => {
                        if states.iter().all(|s| {
                            matches!(s, State::Done)
                                || matches!(s, State::Waiting(x) if x.scope == BarrierScope::Block)
                        }) {
                            return Err(self.divergence(format!(
                                "threads wait at different barriers: {} and {}",
                                f.at, w.at
                            )));
                        }
                        return Ok(false);
                    }
                    Some(_) => {}
                },
                State::Done => {}
                _ => return Ok(false),
            }
        }
        let Some(wait) = first else {
            return Ok(false);
        };
        if live < states.len() {
            return Err(self.divergence(format!(
                "barrier at {} reached by {live} of {} threads; the others exited",
                wait.at,
                states.len()
            )));
        }
        self.release_block_now(wait)?;
        states.iter_mut().for_each(|s| *s = State::Ready);
        Ok(true)
    }

    /// Releases every thread of the block from `wait`, a block barrier or collective they all
    /// wait at; at a grid barrier, once every block of the grid has reached it.
    fn release_block_now(&self, wait: Wait) -> Result<(), Error> {
        match wait.op {
            Some(Collective::GridSync) => self.wait_for_the_grid(wait.at)?,
            Some(op) => self.combine_block(op),
            None => {}
        }
        if wait.fence == Fence::Global {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Waits, with the block's OS thread, until every block of the grid is at its grid barrier.
    fn wait_for_the_grid(&self, at: Site) -> Result<(), Error> {
        let Some(grid) = self.grid else {
            return Err(self.divergence(format!(
                "this_grid().sync() at {at} needs a cooperative launch (LaunchConfig::cooperative), whose blocks all run at once: in another launch a GPU's blocks need not, and the grid barrier can hang"
            )));
        };
        grid.wait()
            .map_err(|why| self.divergence(format!("grid barrier at {at}: {why}")))?;
        // What other blocks wrote before the barrier is seen after it.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Computes every thread's result of a block collective (`syncthreads_count` & co).
    pub(super) fn combine_block(&self, op: Collective) {
        let mut slots = self.slots.borrow_mut();
        let count = slots.iter().filter(|s| s.value != 0).count() as u64;
        let result = match op {
            Collective::SyncCount => count,
            Collective::SyncAnd => u64::from(count == slots.len() as u64),
            _ => u64::from(count > 0),
        };
        slots.iter_mut().for_each(|s| s.result = result);
    }
}

/// Records that thread `linear` waits (see [`Block::wait`]); `false` when the block has no such
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

/// The index in a block of `dim` of the thread with linear index `linear` (x fastest). Every
/// thread start asks. One-dimensional blocks stay a compare inline; the others go out of line,
/// where power-of-two extents (the usual ones) take shifts instead of three divisions (~10 ns a
/// thread).
#[inline]
fn thread_of(linear: u32, dim: Dim3) -> Dim3 {
    if dim.y == 1 && dim.z == 1 {
        return Dim3::new(linear, 0, 0);
    }
    thread_of_nd(linear, dim)
}

#[inline(never)]
fn thread_of_nd(linear: u32, dim: Dim3) -> Dim3 {
    let (bx, by) = (dim.x, dim.y);
    if bx.is_power_of_two() && by.is_power_of_two() {
        let (sx, sy) = (bx.trailing_zeros(), by.trailing_zeros());
        return Dim3::new(
            linear & (bx - 1),
            (linear >> sx) & (by - 1),
            linear >> (sx + sy),
        );
    }
    Dim3::new(linear % bx, (linear / bx) % by, linear / (bx * by))
}

/// The bits of a warp's `lanes` lanes.
pub(super) fn ballot_mask(lanes: usize) -> u64 {
    if lanes >= 64 {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
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

/// The lane a shuffle reads for `lane`, or `None` when it reads its own value (CUDA: a source
/// outside the lane's group of `width` lanes; for a butterfly, only one in a later group: an
/// earlier group's lane is read). Deltas are CUDA's `unsigned int`s: a negative one, as the
/// stackless form passes it, is a huge delta.
fn shuffle_source(
    op: Collective,
    lane: usize,
    arg: i64,
    width: u32,
    lanes: usize,
) -> Option<usize> {
    let width = (width as usize).clamp(1, lanes.max(1));
    let group = lane - lane % width;
    let end = group + width;
    let src = match op {
        Collective::Shfl => group as i64 + arg.rem_euclid(width as i64),
        Collective::ShflUp => lane as i64 - i64::from(arg as u32),
        Collective::ShflDown => lane as i64 + i64::from(arg as u32),
        Collective::ShflXor => {
            return usize::try_from((lane as i64) ^ arg)
                .ok()
                .filter(|&s| s < end && s < lanes);
        }
        _ => return None,
    };
    usize::try_from(src)
        .ok()
        .filter(|&s| s >= group && s < end && s < lanes)
}

fn describe_states(states: &[State], index: impl Fn(usize) -> Dim3) -> String {
    let mut parts: Vec<String> = Vec::new();
    let done = states.iter().filter(|s| **s == State::Done).count();
    if done > 0 {
        parts.push(format!("{done} thread(s) exited"));
    }
    let spinning = states.iter().filter(|s| **s == State::Ready).count();
    if spinning > 0 {
        parts.push(format!("{spinning} thread(s) spin"));
    }
    let mut seen: Vec<(Wait, usize, Dim3)> = Vec::new();
    for (i, s) in states.iter().enumerate() {
        if let State::Waiting(w) = s {
            match seen
                .iter_mut()
                .find(|(x, _, _)| x.at == w.at && x.scope == w.scope)
            {
                Some(entry) => entry.1 += 1,
                None => seen.push((*w, 1, index(i))),
            }
        }
    }
    for (w, n, first) in seen {
        let kind = match (w.op, w.scope) {
            (Some(op), _) => op.name(),
            (None, BarrierScope::Block) => "barrier",
            (None, BarrierScope::Warp) => "wave barrier",
        };
        parts.push(format!(
            "{n} thread(s) wait at the {kind} at {} (first: thread {first})",
            w.at
        ));
    }
    format!("no thread can proceed: {}", parts.join("; "))
}

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// One simulated thread's view of the executor.
pub(crate) struct SimThread<'b, 'a> {
    pub(crate) block: &'b Block<'a>,
    pub(crate) thread: Dim3,
    linear: u32,
    /// What compiled kernels read through `threadIdx` & co.
    /// (A cell: a stackless block's program sets it to each thread it runs, see
    /// [`SimThread::info_ptr`].)
    pub(crate) info: UnsafeCell<GmSimThread>,
    shared_calls: Cell<usize>,
    atomics: Cell<u32>,
    /// The fiber it runs on; `None` for a thread run as a plain call (a compiled kernel that
    /// never waits for other threads).
    fiber: Option<*const Fiber>,
}

impl<'b, 'a> SimThread<'b, 'a> {
    /// Thread `linear` of `block`, on `fiber` (`None`: run as a plain call, or stackless).
    #[inline(always)]
    pub(super) fn new(block: &'b Block<'a>, linear: u32, fiber: Option<*const Fiber>) -> Self {
        let thread = block.thread_index(linear);
        SimThread {
            block,
            thread,
            linear,
            // Only compiled code reads it.
            info: UnsafeCell::new(if block.body.is_compiled() {
                GmSimThread::new(block, thread, linear)
            } else {
                GmSimThread::default()
            }),
            shared_calls: Cell::new(0),
            atomics: Cell::new(0),
            fiber,
        }
    }

    /// Where compiled code reads this thread's indices; a stackless block's program writes
    /// them there for each thread it runs (while no reference to them is held).
    pub(super) fn info_ptr(&self) -> *mut GmSimThread {
        self.info.get()
    }

    fn run(&self) {
        match self.block.body {
            Body::Closure(body) => {
                // SAFETY: the shared memory this thread hands out lives in `block`.
                let ctx = unsafe { ThreadCtx::new(self, &self.block.ctx, self.thread) };
                body(&ctx);
            }
            Body::Compiled(entry) => entry.run_thread(self),
            // `Block::run` runs polled blocks itself.
            Body::Polled(_) => self.fault("an async kernel's thread was run as a call".to_string()),
        }
    }

    /// Waits at a barrier or collective until the block releases it.
    #[inline(always)]
    fn wait(&self, scope: BarrierScope, fence: Fence, mask: u64, at: Site, op: Option<Collective>) {
        let Some(fiber) = self.fiber else {
            self.cannot_wait();
            return;
        };
        // Read before the switch, kept in registers: after it, this thread's own stack (where
        // `self` lives) is likely out of the cache.
        let block = self.block;
        let compiled = block.body.is_compiled();
        block.wait(self.linear, fiber, scope, fence, mask, at, op);
        self.resumed(block, compiled);
    }

    /// Back from a switch: other threads ran meanwhile.
    #[inline(always)]
    fn resumed(&self, block: &Block<'_>, compiled: bool) {
        if compiled {
            // Compiled code finds this thread again.
            super::body::make_current(self);
        } else if block.cancelling() && !std::thread::panicking() {
            // The block ended while this thread waited (or it waits again after catching the
            // cancellation): unwind its frames. A wait in a destructor that runs during that
            // unwinding returns at once instead (a second panic would abort the process).
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    }
}

impl SimThread<'_, '_> {
    /// A thread run as a plain call asked to wait. Only kernels whose source names no barrier,
    /// collective or atomic run without a fiber of their own; reaching here means the source
    /// check missed one.
    #[cold]
    #[inline(never)]
    fn cannot_wait(&self) {
        self.fault(
            "the kernel waited for other threads, but its source names no barrier, collective or atomic the simulator recognises".to_string(),
        );
    }
}

impl ThreadOps for SimThread<'_, '_> {
    #[inline]
    fn barrier(&self, scope: BarrierScope, fence: Fence, mask: u64, at: Site) {
        self.wait(scope, fence, mask, at, None);
    }

    fn collective(
        &self,
        op: Collective,
        mask: u64,
        value: u64,
        arg: i64,
        width: u32,
        at: Site,
    ) -> u64 {
        let linear = self.linear as usize;
        {
            let mut slots = self.block.slots.borrow_mut();
            if slots.is_empty() {
                slots.resize(self.block.block_dim.count() as usize, Slot::default());
            }
            let slot = &mut slots[linear];
            slot.value = value;
            slot.arg = arg;
            slot.width = width;
        }
        self.wait(op.scope(), Fence::Local, mask, at, Some(op));
        self.block.slots.borrow()[linear].result
    }

    fn progress(&self) {
        let n = self.atomics.get().wrapping_add(1);
        self.atomics.set(n);
        if n.is_multiple_of(PROGRESS_EVERY)
            && let Some(fiber) = self.fiber
        {
            let block = self.block;
            block.yield_now(self.linear, fiber);
            self.resumed(block, block.body.is_compiled());
        }
    }

    fn shared(&self, bytes: usize, align: usize, dtype: &'static str) -> Option<*mut u8> {
        let calls = &self.shared_calls;
        self.block
            .next_shared(calls, bytes, align, dtype, |message| self.fault(message))
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        self.block.shared.dynamic_ptr()
    }

    fn fault(&self, message: String) {
        // A stackless block's threads share one `SimThread`, whose `info` the program sets to
        // the running thread (elsewhere both say the same).
        let thread = if self.block.body.is_compiled() {
            // SAFETY: read on the thread's own OS thread, from a callback of the compiled code,
            // which writes `info` only between threads, never during this call.
            unsafe { (*self.info.get()).thread_index() }
        } else {
            self.thread
        };
        self.block.record_fault(thread, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_indices_match_the_division_formula() {
        for (x, y, z) in [
            (1, 1, 1),
            (256, 1, 1),
            (16, 16, 1),
            (8, 4, 2),
            (3, 5, 7),
            (4, 6, 2),
            (6, 4, 2),
            (1, 32, 2),
        ] {
            let dim = Dim3::new(x, y, z);
            for linear in 0..x * y * z {
                let expected = Dim3::new(linear % x, (linear / x) % y, linear / (x * y));
                assert_eq!(thread_of(linear, dim), expected, "{linear} in {x}x{y}x{z}");
            }
        }
    }
}
