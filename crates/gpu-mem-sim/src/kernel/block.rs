//! Running one block: its threads as coroutines on the current OS thread, released together at
//! barriers, with divergence and faults turned into errors.

use super::shared::SharedMemory;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::{ArgView, BarrierScope, Dim3, Fence, SimKernelFn, ThreadCtx, ThreadOps};
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, Location};
use std::sync::Mutex;

/// Stack size of a simulated thread.
const STACK_SIZE: usize = 256 << 10;
/// How many idle stacks are kept for reuse.
const POOLED_STACKS: usize = 8192;

static STACKS: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

fn take_stack() -> Result<DefaultStack, String> {
    if let Some(stack) = STACKS.lock().unwrap_or_else(|p| p.into_inner()).pop() {
        return Ok(stack);
    }
    DefaultStack::new(STACK_SIZE).map_err(|e| format!("cannot allocate a thread stack: {e}"))
}

fn return_stack(stack: DefaultStack) {
    let mut pool = STACKS.lock().unwrap_or_else(|p| p.into_inner());
    if pool.len() < POOLED_STACKS {
        pool.push(stack);
    }
}

/// Where a suspended thread waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wait {
    scope: BarrierScope,
    fence: Fence,
    at: &'static Location<'static>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Ready,
    Waiting(Wait),
    Done,
}

/// Everything the threads of one block share.
pub(crate) struct Block<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) body: &'a SimKernelFn,
    pub(crate) args: &'a [ArgView<'a>],
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) warp_size: u32,
    pub(crate) shared: SharedMemory,
    /// First fault of the block: thread index and message.
    fault: RefCell<Option<(Dim3, String)>>,
}

impl<'a> Block<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        kernel: &'a str,
        body: &'a SimKernelFn,
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
            fault: RefCell::new(None),
        }
    }

    fn thread_index(&self, linear: u32) -> Dim3 {
        let (bx, by) = (self.block_dim.x, self.block_dim.y);
        Dim3::new(linear % bx, (linear / bx) % by, linear / (bx * by))
    }

    fn record_fault(&self, thread: Dim3, message: String) {
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

    /// Runs every thread of the block to completion.
    pub(crate) fn run(&self) -> Result<(), Error> {
        let count = self.block_dim.count() as u32;
        let mut fibers = Vec::with_capacity(count as usize);
        for linear in 0..count {
            let stack = take_stack().map_err(|reason| Error::InvalidLaunch {
                kernel: self.kernel.to_string(),
                reason,
            })?;
            let block: &Block<'_> = self;
            let thread = self.thread_index(linear);
            let body = move |yielder: &Yielder<(), Wait>, ()| {
                let ops = SimThread {
                    block,
                    thread,
                    shared_calls: Cell::new(0),
                    yielder,
                };
                // SAFETY: the arguments' views were built by `grid::run_grid` from validated device
                // ranges kept alive for the whole launch; shared memory lives in `block`.
                let ctx = unsafe {
                    ThreadCtx::new(
                        &ops,
                        block.args,
                        thread,
                        block.block_idx,
                        block.block_dim,
                        block.grid_dim,
                        block.warp_size,
                    )
                };
                (block.body)(&ctx);
            };
            // SAFETY: the coroutine borrows `self` (and through it the arguments and the kernel
            // body), all of which outlive it: every coroutine is run to completion or dropped
            // (unwinding it) before this function returns.
            fibers.push(Some(unsafe {
                Coroutine::with_stack_unchecked(stack, body)
            }));
        }
        let result = self.schedule(&mut fibers);
        for fiber in fibers.into_iter().flatten() {
            if fiber.done() {
                return_stack(fiber.into_stack());
            }
            // An unfinished coroutine (after divergence) is unwound by its drop.
        }
        // A fault is the root cause of any divergence that follows it (a thread that panicked
        // never reaches the next barrier), so it is reported first.
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

    fn schedule(
        &self,
        fibers: &mut [Option<Coroutine<(), Wait, (), DefaultStack>>],
    ) -> Result<(), Error> {
        let count = fibers.len();
        let mut states = vec![State::Ready; count];
        let warp = self.warp_size.max(1) as usize;
        loop {
            for (index, fiber) in fibers.iter_mut().enumerate() {
                if states[index] != State::Ready {
                    continue;
                }
                let Some(coroutine) = fiber.as_mut() else {
                    continue;
                };
                let step = std::panic::catch_unwind(AssertUnwindSafe(|| coroutine.resume(())));
                states[index] = match step {
                    Ok(CoroutineResult::Yield(wait)) => State::Waiting(wait),
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
            }
            if states.iter().all(|s| *s == State::Done) {
                return Ok(());
            }
            let mut released = false;
            for (w, members) in states.chunks_mut(warp).enumerate() {
                released |= self.release_warp(w, members)?;
            }
            released |= self.release_block(&mut states)?;
            if !released {
                return Err(
                    self.divergence(describe_states(&states, |i| self.thread_index(i as u32)))
                );
            }
        }
    }

    /// Releases a warp whose live threads all wait at the same wave barrier.
    fn release_warp(&self, warp: usize, members: &mut [State]) -> Result<bool, Error> {
        let waits: Vec<Wait> = members
            .iter()
            .filter_map(|s| match s {
                State::Waiting(w) if w.scope == BarrierScope::Warp => Some(*w),
                _ => None,
            })
            .collect();
        let live = members.iter().filter(|s| **s != State::Done).count();
        if waits.is_empty() || waits.len() != live {
            return Ok(false);
        }
        if live < members.len() {
            return Err(self.divergence(format!(
                "wave barrier at {} reached by {live} of the {} threads of warp {warp}; the others exited",
                waits[0].at,
                members.len()
            )));
        }
        if let Some(other) = waits.iter().find(|w| w.at != waits[0].at) {
            return Err(self.divergence(format!(
                "threads of warp {warp} wait at different wave barriers: {} and {}",
                waits[0].at, other.at
            )));
        }
        members.iter_mut().for_each(|s| *s = State::Ready);
        Ok(true)
    }

    /// Releases the block when all its live threads wait at the same block barrier.
    fn release_block(&self, states: &mut [State]) -> Result<bool, Error> {
        let live = states.iter().filter(|s| **s != State::Done).count();
        let waits: Vec<Wait> = states
            .iter()
            .filter_map(|s| match s {
                State::Waiting(w) if w.scope == BarrierScope::Block => Some(*w),
                _ => None,
            })
            .collect();
        if waits.is_empty() || waits.len() != live {
            return Ok(false);
        }
        if live < states.len() {
            return Err(self.divergence(format!(
                "barrier at {} reached by {live} of {} threads; the others exited",
                waits[0].at,
                states.len()
            )));
        }
        if let Some(other) = waits.iter().find(|w| w.at != waits[0].at) {
            return Err(self.divergence(format!(
                "threads wait at different barriers: {} and {}",
                waits[0].at, other.at
            )));
        }
        if waits.iter().any(|w| w.fence == Fence::Global) {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        states.iter_mut().for_each(|s| *s = State::Ready);
        Ok(true)
    }
}

fn describe_states(states: &[State], index: impl Fn(usize) -> Dim3) -> String {
    let mut parts: Vec<String> = Vec::new();
    let done = states.iter().filter(|s| **s == State::Done).count();
    if done > 0 {
        parts.push(format!("{done} thread(s) exited"));
    }
    let mut seen: Vec<(Wait, usize, Dim3)> = Vec::new();
    for (i, s) in states.iter().enumerate() {
        if let State::Waiting(w) = s {
            match seen.iter_mut().find(|(x, _, _)| x == w) {
                Some(entry) => entry.1 += 1,
                None => seen.push((*w, 1, index(i))),
            }
        }
    }
    for (w, n, first) in seen {
        let kind = match w.scope {
            BarrierScope::Block => "barrier",
            BarrierScope::Warp => "wave barrier",
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
struct SimThread<'b, 'a> {
    block: &'b Block<'a>,
    thread: Dim3,
    shared_calls: Cell<usize>,
    yielder: &'b Yielder<(), Wait>,
}

impl ThreadOps for SimThread<'_, '_> {
    fn barrier(&self, scope: BarrierScope, fence: Fence, at: &'static Location<'static>) {
        self.yielder.suspend(Wait { scope, fence, at });
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
