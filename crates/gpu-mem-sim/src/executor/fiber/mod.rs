//! Fibers: the stacks simulated threads run on, and the switches between them.
//!
//! A block's threads run on fibers of the OS thread that runs the block, one at a time. A thread
//! that ends without having waited leaves its fiber to the block's next thread, so threads that
//! never wait cost a call, not a switch; a thread that waits keeps its fiber until it ends.
//! Switches are symmetric: a thread that waits hands the OS thread straight to the next thread to
//! run ([`switch`]), and the thread that finds the block finished (or stuck) hands it back to the
//! block's caller ([`to_main`]). A barrier costs each thread one switch.
//!
//! On x86-64 Unix (the System V ABI) a switch is a handful of instructions (`native.rs`);
//! elsewhere (Windows, whose ABI saves more registers and keeps stack limits in the thread
//! block; other architectures) fibers are corosensei coroutines and each switch passes through a
//! driver loop on the caller's stack (`coroutine.rs`), with the same behaviour. x86-64 Unix has
//! both, the native ones unless `GPU_MEM_SIM_FIBERS=portable` (`either.rs`). Fibers are kept
//! per OS thread and reused across blocks and launches; their stacks come from [`super::stack`],
//! which also reports overflows. `floor.rs` measures what a block's first barrier costs with
//! these switches and stacks and no scheduling at all, for the executor benchmark.

use super::stack;
use std::cell::{Cell, RefCell};

// x86-64 System V has both switches, chosen per process (`either.rs`); other targets (and
// Miri) have the coroutines only.
mod coroutine;
#[cfg(all(target_arch = "x86_64", unix, not(miri)))]
#[path = "either.rs"]
mod imp;
#[cfg(all(target_arch = "x86_64", unix, not(miri)))]
mod native;
#[cfg(not(all(target_arch = "x86_64", unix, not(miri))))]
mod imp {
    #[cfg(feature = "bench-internals")]
    pub(crate) use super::coroutine::first_barrier_floor;
    pub(super) use super::coroutine::{Context, enter, switch, to_main};

    /// The coroutine context of a fiber (the only kind here).
    #[inline(always)]
    pub(super) fn portable(context: &Context) -> &Context {
        context
    }

    /// Nothing to prefetch: corosensei keeps the stack pointer to itself.
    #[inline(always)]
    pub(super) fn prefetch(_context: &Context) {}

    /// Nothing to choose here.
    pub(super) fn chosen() -> Result<(), String> {
        Ok(())
    }
}

#[cfg(all(target_arch = "x86_64", unix, not(miri), feature = "bench-internals"))]
mod floor;

#[cfg(feature = "bench-internals")]
pub(crate) use imp::first_barrier_floor;

/// A stack on which simulated threads run one after another.
pub(crate) struct Fiber {
    context: imp::Context,
    /// The job this fiber runs next, set by whoever switches to it while it is idle.
    mailbox: Cell<Option<Job>>,
    /// Its stack's lowest address, for the overflow report.
    limit: usize,
}

/// What an idle fiber runs when it is switched to: `run(job, fiber)` on the fiber, which
/// returns where the OS thread goes next. Fibers know nothing of blocks: `data` and `index`
/// are the runner's (a block, and the thread to start).
#[derive(Clone, Copy)]
pub(crate) struct Job {
    /// # Safety
    /// Called on `fiber`'s stack with the job it was given (see [`assign`]).
    pub(crate) run: unsafe fn(Job, *const Fiber) -> Target,
    pub(crate) data: *const (),
    pub(crate) index: u32,
}

/// Where the OS thread goes when a fiber has no thread left to run.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    /// Another fiber, suspended in a thread that is ready to run.
    Fiber(*const Fiber),
    /// Back to the caller of [`enter`].
    Main,
}

/// Idle fibers are kept up to the largest block.
const MAX_FIBERS: usize = super::MAX_THREADS_PER_BLOCK as usize;

thread_local! {
    /// Every fiber of this OS thread (freed when the OS thread ends, when none runs). Boxed: the
    /// pointers handed out must stay put while the list grows.
    #[allow(clippy::vec_box)]
    static ALL: RefCell<Vec<Box<Fiber>>> = const { RefCell::new(Vec::new()) };
    /// The idle ones, each waiting for a [`Job`] at the top of its loop.
    static IDLE: RefCell<Vec<*const Fiber>> = const { RefCell::new(Vec::new()) };
}

/// An idle fiber of this OS thread, created when none is left.
pub(crate) fn take() -> Result<*const Fiber, String> {
    if let Some(fiber) = IDLE.with_borrow_mut(Vec::pop) {
        return Ok(fiber);
    }
    imp::chosen()?;
    let stack = stack::take()?;
    let limit = stack::limit(&stack);
    let fiber = Box::new(Fiber {
        context: imp::Context::new(stack),
        mailbox: Cell::new(None),
        limit,
    });
    let pointer: *const Fiber = &*fiber;
    // SAFETY: the fiber is boxed (its address is stable) and kept in `ALL` until the OS thread
    // ends, which outlives every use of the pointer its entry point receives.
    unsafe { fiber.context.prepare(pointer) };
    ALL.with_borrow_mut(|all| all.push(fiber));
    Ok(pointer)
}

/// Moves up to `count` idle fibers of this OS thread into `into`.
pub(crate) fn take_idle(count: usize, into: &mut Vec<*const Fiber>) {
    IDLE.with_borrow_mut(|idle| {
        let keep = idle.len().saturating_sub(count);
        into.extend(idle.drain(keep..));
    });
}

/// Makes `fibers` idle again (emptying the list). Each must be suspended at the top of its loop
/// (a block keeps the fibers of its ended threads) or freshly [`reset`].
pub(crate) fn give_back_all(fibers: &mut Vec<*const Fiber>) {
    IDLE.with_borrow_mut(|idle| {
        let room = MAX_FIBERS.saturating_sub(idle.len());
        idle.extend(fibers.drain(..).take(room));
    });
    fibers.clear();
}

/// Gives `job` to the idle `fiber`, which runs it when switched to.
///
/// # Safety
/// `fiber` came from [`take`] on this OS thread and is idle; `job.run` may be called with `job`
/// on the fiber whenever it is switched to (whatever `job.data` points to outlives that).
pub(crate) unsafe fn assign(fiber: *const Fiber, job: Job) {
    // SAFETY: the caller's contract; fibers live until their OS thread ends.
    unsafe { (*fiber).mailbox.set(Some(job)) };
}

/// Runs fibers from the OS thread's own stack, starting with `to`, until one of them calls
/// [`to_main`].
///
/// # Safety
/// Called outside any fiber; `to` is a fiber of this OS thread with work ([`assign`]ed, or a
/// suspended thread) whose block outlives the call.
pub(crate) unsafe fn enter(to: *const Fiber) {
    // SAFETY: the caller's contract.
    let to = unsafe { &*to };
    stack::entering(to.limit);
    // SAFETY: as above.
    unsafe { imp::enter(to) };
}

/// Suspends the calling fiber `from` and runs `to`; returns when some fiber switches back.
///
/// # Safety
/// Called on `from`'s stack; `to` is another fiber of this OS thread with work.
#[inline]
pub(crate) unsafe fn switch(from: *const Fiber, to: *const Fiber) {
    // SAFETY: the caller's contract.
    let (from, to) = unsafe { (&*from, &*to) };
    stack::entering(to.limit);
    // SAFETY: as above.
    unsafe { imp::switch(from, to) };
}

/// Asks the CPU to bring the top of `fiber`'s suspended stack into the cache, ahead of a switch
/// to it: with hundreds of threads per block, a thread's stack has usually left the L1 cache by
/// the time it runs again. A hint only.
///
/// # Safety
/// `fiber` came from [`take`] on this OS thread.
#[inline(always)]
pub(crate) unsafe fn prefetch(fiber: *const Fiber) {
    // SAFETY: the caller's contract; fibers live until their OS thread ends.
    unsafe { imp::prefetch(&(*fiber).context) };
}

/// Suspends the calling fiber `from` and returns to the caller of [`enter`].
///
/// # Safety
/// Called on `from`'s stack, inside [`enter`].
pub(crate) unsafe fn to_main(from: *const Fiber) {
    // SAFETY: the caller's contract.
    unsafe { imp::to_main(&*from) };
}

/// Discards the frames of the thread suspended on `fiber` (without unwinding them): the fiber
/// starts over at the top of its loop.
///
/// # Safety
/// `fiber` is suspended (not running) and nothing on its stack owns resources or is referred
/// to from elsewhere: compiled kernel frames and the executor's own, which hold no borrow or lock
/// across a switch.
pub(crate) unsafe fn reset(fiber: *const Fiber) {
    // SAFETY: the caller's contract; the fiber stays at its address.
    unsafe { (*fiber).context.reset(fiber) };
}

/// A fiber's life: run the threads it is given, go idle, and wait for the next.
fn fiber_main(fiber: *const Fiber) -> ! {
    loop {
        // SAFETY: fibers live until their OS thread ends.
        let job = unsafe { (*fiber).mailbox.take() };
        let Some(job) = job else {
            abort("a simulator fiber was resumed without work");
        };
        // SAFETY: `assign`'s contract: the job may run on this fiber now.
        let next = unsafe { (job.run)(job, fiber) };
        // The job's data is not touched past this point: it may be gone once this fiber is
        // resumed. (The runner has kept this fiber for its next threads, or for the pool.)
        match next {
            // SAFETY: the job names a fiber with a suspended, runnable thread.
            Target::Fiber(to) => unsafe { switch(fiber, to) },
            // SAFETY: fibers run only inside `enter`.
            Target::Main => unsafe { to_main(fiber) },
        }
    }
}

/// Ends the process on a broken executor invariant: nothing can unwind out of a fiber's root.
#[cold]
fn abort(why: &str) -> ! {
    eprintln!("gpu-mem simulator: internal error: {why}");
    std::process::abort()
}

impl Drop for Fiber {
    fn drop(&mut self) {
        if let Some(stack) = self.context.take_stack() {
            stack::give_back(stack);
        }
    }
}
