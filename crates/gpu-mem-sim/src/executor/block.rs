//! Running one block: its threads as coroutines on the current OS thread, released together at
//! barriers and warp collectives, with divergence and faults turned into errors.
//!
//! A thread runs until it suspends: at a barrier or collective ([`Suspend::Wait`]), or to let
//! the others run ([`Suspend::Progress`], from atomics and spin-wait hints). When every thread
//! that a barrier needs waits at it, the barrier releases them together; when nothing can
//! proceed, the launch fails with [`Error::BarrierDivergence`] describing who waits where.

use super::body::{Body, GmSimThread};
use super::shared::SharedMemory;
use super::stack;
use crate::thread::{ArgView, BarrierScope, Collective, Fence, Site, ThreadCtx, ThreadOps};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::Dim3;
use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;

/// A thread lets the others run at every this many atomics / spin hints.
const PROGRESS_EVERY: u32 = 16;
/// Rounds in which threads only spun (no barrier reached, nothing finished) before the launch is
/// declared stuck.
const MAX_IDLE_ROUNDS: u32 = 1 << 20;

/// A coroutine that runs simulated threads one after another on one OS thread: created once,
/// reused across blocks and launches.
type Fiber = Coroutine<Start, Suspend, (), stack::ColoredStack>;

/// What a fiber runs next: thread `linear` of the block at `block` (its lifetime erased; see
/// [`run_thread`]).
#[derive(Clone, Copy)]
pub(crate) struct Start {
    block: *const Block<'static>,
    linear: u32,
}

struct PooledFiber {
    fiber: Fiber,
    /// Its stack's limit, for the overflow report.
    limit: usize,
}

/// Idle fibers are kept up to the largest block.
const MAX_POOLED_FIBERS: usize = super::MAX_THREADS_PER_BLOCK as usize;

thread_local! {
    /// This OS thread's idle fibers, each suspended at [`Suspend::Exit`] (or never started).
    static FIBERS: RefCell<Vec<PooledFiber>> = const { RefCell::new(Vec::new()) };
}

fn new_fiber() -> Result<PooledFiber, String> {
    let stack = stack::take()?;
    let limit = stack::limit(&stack);
    let fiber = Fiber::with_stack(stack, |yielder: &Yielder<Start, Suspend>, first: Start| {
        let mut start = first;
        loop {
            // SAFETY: `Block::run` resumes a fiber with a `Start` naming itself, and only while
            // it is alive; the thread's frames are gone (returned, unwound or reset) before the
            // fiber is handed to another block.
            unsafe { run_thread(yielder, start) };
            start = yielder.suspend(Suspend::Exit);
        }
    });
    Ok(PooledFiber { fiber, limit })
}

/// Puts fibers back into this OS thread's pool; finished ones (a panic, a reset) give their
/// stacks back instead.
fn give_back(fibers: Vec<PooledFiber>) {
    FIBERS.with_borrow_mut(|pool| {
        for fiber in fibers {
            if fiber.fiber.done() {
                stack::give_back(fiber.fiber.into_stack());
            } else if pool.len() < MAX_POOLED_FIBERS {
                pool.push(fiber);
            }
        }
    });
}

/// Runs one simulated thread on the calling fiber.
///
/// # Safety
/// `start.block` points to a live `Block` for as long as this thread runs (the block resumes
/// it, and ends it before it goes away).
unsafe fn run_thread(yielder: &Yielder<Start, Suspend>, start: Start) {
    // SAFETY: the caller's contract.
    let block: &Block<'_> = unsafe { &*start.block };
    let thread = block.thread_index(start.linear);
    let me = SimThread {
        block,
        thread,
        linear: start.linear,
        info: GmSimThread::new(block, thread, start.linear),
        shared_calls: Cell::new(0),
        atomics: Cell::new(0),
        yielder: Some(yielder),
    };
    me.run();
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

/// Why a thread's coroutine suspended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Suspend {
    Wait(Wait),
    Progress,
    /// The thread's code returned; the fiber waits for its next thread.
    Exit,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Ready,
    Waiting(Wait),
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

/// Everything the threads of one block share.
pub(crate) struct Block<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) body: Body<'a>,
    pub(crate) args: &'a [ArgView<'a>],
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) warp_size: u32,
    pub(crate) shared: SharedMemory,
    slots: RefCell<Vec<Slot>>,
    /// First fault of the block: thread index and message.
    fault: RefCell<Option<(Dim3, String)>>,
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
        warp_size: u32,
        shared: SharedMemory,
    ) -> Block<'a> {
        Block {
            kernel,
            body,
            args,
            block_idx,
            block_dim,
            grid_dim,
            warp_size,
            shared,
            slots: RefCell::new(vec![Slot::default(); block_dim.count() as usize]),
            fault: RefCell::new(None),
        }
    }

    fn thread_index(&self, linear: u32) -> Dim3 {
        let (bx, by) = (self.block_dim.x, self.block_dim.y);
        Dim3::new(linear % bx, (linear / bx) % by, linear / (bx * by))
    }

    pub(crate) fn record_fault(&self, thread: Dim3, message: String) {
        let mut fault = self.fault.borrow_mut();
        if fault.is_none() {
            *fault = Some((thread, message));
        }
    }

    fn divergence(&self, detail: String) -> Error {
        Error::BarrierDivergence {
            kernel: self.kernel.to_string(),
            block: self.block_idx.to_array(),
            detail,
        }
    }

    /// Runs every thread of the block to completion, on fibers of this OS thread's pool.
    pub(crate) fn run(&self) -> Result<(), Error> {
        if let Body::Compiled(launch) = self.body
            && !launch.program.waits
        {
            return self.run_direct();
        }
        let count = self.block_dim.count() as usize;
        let mut fibers: Vec<PooledFiber> = FIBERS.with_borrow_mut(|pool| {
            let keep = pool.len().saturating_sub(count);
            pool.split_off(keep)
        });
        while fibers.len() < count {
            match new_fiber() {
                Ok(fiber) => fibers.push(fiber),
                Err(reason) => {
                    give_back(fibers);
                    return Err(Error::InvalidLaunch {
                        kernel: self.kernel.to_string(),
                        reason,
                    });
                }
            }
        }
        let mut states = vec![State::Ready; count];
        let result = self.schedule(&mut fibers, &mut states);
        for (fiber, state) in fibers.iter_mut().zip(&states) {
            if *state == State::Done || fiber.fiber.done() {
                continue;
            }
            // A thread left waiting (divergence, or another thread's fault) is ended.
            if self.body.is_compiled() {
                // Compiled frames must not be unwound (no Rust panic crosses C++ frames): the
                // suspended thread's stack is discarded instead. Nothing on it owns resources:
                // no borrow or lock is held across a suspension.
                // SAFETY: see above; the fiber is not resumed again.
                unsafe { fiber.fiber.force_reset() };
            } else {
                // Unwinds the closure's frames, running their destructors.
                fiber.fiber.force_unwind();
            }
        }
        give_back(fibers);
        self.fault_or(result)
    }

    /// The block's first fault, if any, else `result`. A fault is the root cause of any
    /// divergence that follows it (a thread that panicked never reaches the next barrier), so
    /// it is reported first.
    fn fault_or(&self, result: Result<(), Error>) -> Result<(), Error> {
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

    /// Runs the threads one after another as plain calls on this OS thread: for compiled
    /// kernels that never wait for each other (no barrier, collective or atomic in their source),
    /// where any order is a valid schedule.
    fn run_direct(&self) -> Result<(), Error> {
        let count = self.block_dim.count() as u32;
        for linear in 0..count {
            let thread = self.thread_index(linear);
            let me = SimThread {
                block: self,
                thread,
                linear,
                info: GmSimThread::new(self, thread, linear),
                shared_calls: Cell::new(0),
                atomics: Cell::new(0),
                yielder: None,
            };
            me.run();
            if self.fault.borrow().is_some() {
                break;
            }
        }
        self.fault_or(Ok(()))
    }

    fn schedule(&self, fibers: &mut [PooledFiber], states: &mut [State]) -> Result<(), Error> {
        let count = fibers.len();
        let warp = self.warp_size.max(1) as usize;
        let this = std::ptr::from_ref(self).cast::<Block<'static>>();
        let compiled = self.body.is_compiled();
        stack::running(self.kernel);
        let mut idle_rounds = 0u32;
        loop {
            let mut advanced = false;
            let mut spinning = false;
            let mut done = 0usize;
            let mut at_block = 0usize;
            let mut block_wait: Option<Wait> = None;
            let mut one_site = true;
            for (index, fiber) in fibers.iter_mut().enumerate() {
                if states[index] == State::Ready {
                    let start = Start {
                        block: this,
                        linear: index as u32,
                    };
                    stack::entering(fiber.limit);
                    // Compiled code cannot panic (its callbacks never unwind); closures can.
                    let step = if compiled {
                        Ok(fiber.fiber.resume(start))
                    } else {
                        std::panic::catch_unwind(AssertUnwindSafe(|| fiber.fiber.resume(start)))
                    };
                    states[index] = match step {
                        Ok(CoroutineResult::Yield(Suspend::Wait(wait))) => State::Waiting(wait),
                        Ok(CoroutineResult::Yield(Suspend::Progress)) => {
                            spinning = true;
                            State::Ready
                        }
                        Ok(CoroutineResult::Yield(Suspend::Exit)) => State::Done,
                        // The fiber's body never returns; a panic ends the fiber.
                        Ok(CoroutineResult::Return(())) => State::Done,
                        Err(payload) => {
                            let message = panic_message(payload.as_ref());
                            self.record_fault(
                                self.thread_index(index as u32),
                                format!("the kernel panicked: {message}"),
                            );
                            State::Done
                        }
                    };
                    advanced |= states[index] != State::Ready;
                }
                match states[index] {
                    State::Done => done += 1,
                    State::Waiting(wait) if wait.scope == BarrierScope::Block => {
                        at_block += 1;
                        match block_wait {
                            None => block_wait = Some(wait),
                            Some(first) => one_site &= first.at == wait.at,
                        }
                    }
                    _ => {}
                }
            }
            if done == count {
                return Ok(());
            }
            // The common case: every thread waits at the same block barrier.
            let released = if let (Some(wait), true, 0) = (block_wait, one_site, done) {
                if at_block == count {
                    self.release_block_now(wait, states);
                    true
                } else {
                    self.release_general(states, warp)?
                }
            } else {
                self.release_general(states, warp)?
            };
            if released || advanced {
                idle_rounds = 0;
            } else if spinning {
                idle_rounds += 1;
                if idle_rounds > MAX_IDLE_ROUNDS {
                    return Err(self.divergence(format!(
                        "no forward progress: threads spin (atomics or spin-wait hints) while nothing else can run; {}",
                        describe_states(states, |i| self.thread_index(i as u32))
                    )));
                }
            } else {
                return Err(
                    self.divergence(describe_states(states, |i| self.thread_index(i as u32)))
                );
            }
        }
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
            if missing == 0 {
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

    /// Computes every participant's result of a warp collective.
    fn combine_warp(&self, op: Collective, base: usize, here: u64, lanes: usize) {
        let mut slots = self.slots.borrow_mut();
        let warp = &mut slots[base..base + lanes];
        let nonzero = |lane: usize| warp[lane].value != 0;
        let participants = (0..lanes).filter(|&l| here & (1 << l) != 0);
        let results: Vec<(usize, u64)> = participants
            .clone()
            .map(|lane| {
                let slot = warp[lane];
                let result = match op {
                    Collective::Ballot => participants
                        .clone()
                        .filter(|&l| nonzero(l))
                        .fold(0u64, |bits, l| bits | 1 << l),
                    Collective::All => participants.clone().all(nonzero).into(),
                    Collective::Any => participants.clone().any(nonzero).into(),
                    _ => {
                        let source = shuffle_source(op, lane, slot.arg, slot.width, lanes);
                        match source {
                            Some(src) if here & (1 << src) != 0 => warp[src].value,
                            _ => slot.value,
                        }
                    }
                };
                (lane, result)
            })
            .collect();
        for (lane, result) in results {
            warp[lane].result = result;
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
        self.release_block_now(wait, states);
        Ok(true)
    }

    /// Releases every thread of the block from `wait`, a block barrier or collective they all
    /// wait at.
    fn release_block_now(&self, wait: Wait, states: &mut [State]) {
        if let Some(op) = wait.op {
            let mut slots = self.slots.borrow_mut();
            let count = slots.iter().filter(|s| s.value != 0).count() as u64;
            let result = match op {
                Collective::SyncCount => count,
                Collective::SyncAnd => u64::from(count == slots.len() as u64),
                _ => u64::from(count > 0),
            };
            slots.iter_mut().for_each(|s| s.result = result);
        }
        if wait.fence == Fence::Global {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        states.iter_mut().for_each(|s| *s = State::Ready);
    }
}

/// The lane a shuffle reads for `lane`, or `None` when it reads its own value (CUDA: a source
/// outside the lane's group of `width` lanes).
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
        Collective::ShflUp => lane as i64 - arg,
        Collective::ShflDown => lane as i64 + arg,
        Collective::ShflXor => (lane as i64) ^ arg,
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

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
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
    pub(crate) info: GmSimThread,
    shared_calls: Cell<usize>,
    atomics: Cell<u32>,
    /// The fiber's yielder; `None` for a thread run as a plain call (a compiled kernel that
    /// never waits for other threads).
    yielder: Option<&'b Yielder<Start, Suspend>>,
}

impl SimThread<'_, '_> {
    fn run(&self) {
        match self.block.body {
            Body::Closure(body) => {
                // SAFETY: the arguments' views were built by `grid::run_grid` from validated
                // device ranges kept alive for the whole launch; shared memory lives in `block`.
                let ctx = unsafe {
                    ThreadCtx::new(
                        self,
                        self.block.args,
                        self.thread,
                        self.block.block_idx,
                        self.block.block_dim,
                        self.block.grid_dim,
                        self.block.warp_size,
                    )
                };
                body(&ctx);
            }
            Body::Compiled(entry) => entry.run_thread(self),
        }
    }

    #[inline]
    fn suspend(&self, why: Suspend) {
        let Some(yielder) = self.yielder else {
            self.cannot_suspend(why);
            return;
        };
        yielder.suspend(why);
        // Other threads ran meanwhile: compiled code finds this thread again.
        if self.block.body.is_compiled() {
            super::body::make_current(self);
        }
    }
}

impl SimThread<'_, '_> {
    /// A thread run as a plain call asked to wait. Only kernels whose source names no barrier,
    /// collective or atomic run without a coroutine; reaching here means the source check missed
    /// one.
    #[cold]
    #[inline(never)]
    fn cannot_suspend(&self, why: Suspend) {
        if !matches!(why, Suspend::Progress) {
            self.fault(
                "the kernel waited for other threads, but its source names no barrier, collective or atomic the simulator recognises".to_string(),
            );
        }
    }
}

impl ThreadOps for SimThread<'_, '_> {
    fn barrier(&self, scope: BarrierScope, fence: Fence, mask: u64, at: Site) {
        self.suspend(Suspend::Wait(Wait {
            scope,
            fence,
            mask,
            at,
            op: None,
        }));
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
            let slot = &mut slots[linear];
            slot.value = value;
            slot.arg = arg;
            slot.width = width;
        }
        self.suspend(Suspend::Wait(Wait {
            scope: op.scope(),
            fence: Fence::Local,
            mask,
            at,
            op: Some(op),
        }));
        self.block.slots.borrow()[linear].result
    }

    fn progress(&self) {
        let n = self.atomics.get().wrapping_add(1);
        self.atomics.set(n);
        if n.is_multiple_of(PROGRESS_EVERY) {
            self.suspend(Suspend::Progress);
        }
    }

    fn shared(&self, bytes: usize, align: usize, dtype: &'static str) -> Option<*mut u8> {
        let index = self.shared_calls.get();
        self.shared_calls.set(index + 1);
        match self.block.shared.get(index, bytes, align, dtype) {
            Ok(ptr) => Some(ptr),
            Err(message) => {
                self.fault(message);
                None
            }
        }
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        self.block.shared.dynamic_ptr()
    }

    fn fault(&self, message: String) {
        self.block.record_fault(self.thread, message);
    }
}
