//! One simulated thread as the executor sees it ([`SimThread`]): its indices, what compiled code
//! reads through `threadIdx` & co, and the [`ThreadOps`] behind a closure's `ThreadCtx` and a
//! compiled kernel's callbacks (`super::compiled`), which reach the current thread of this OS
//! thread through [`with_current`]. Waits go to the block's fiber scheduler
//! (`super::runner::fibers`); a thread run as a plain call (`Direct`, stackless) never waits
//! here.

use super::block::{Block, block_linear};
use super::fiber::Fiber;
use super::plan::{Checked, Looped, Plan};
use super::races::Report;
use super::schedule::Operands;
use super::watchdog::PROGRESS_EVERY;
use crate::abi::{ALLOWED_EMPTY, GmSimThread, OWN_STACK};
use crate::sanitizer::{
    Access, Across, Allowed, Flagged, Frame, Granted, IndexRefusal, Stamp, Violation, check,
    in_kernel, misaligned_access, outside_object_access, source_line, unwritten_shared,
};
use crate::thread::{BarrierScope, Collective, Fence, SimKernelFn, Site, ThreadCtx, ThreadOps};
use gpu_mem_core::kernel::Dim3;
use std::cell::{Cell, UnsafeCell};

/// The payload that unwinds a closure thread left waiting when its block ends.
pub(super) struct Cancelled;

thread_local! {
    /// The simulated thread running on this OS thread (a `SimThread`), or null.
    static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

/// Makes `thread` the one compiled code's callbacks act for.
#[inline]
pub(crate) fn make_current(thread: &SimThread<'_, '_>) {
    CURRENT.set(std::ptr::from_ref(thread).cast::<()>());
    // A checked program reads the OS thread's allowed ranges without asking: they must be
    // this block's. (Unchecked programs never read them: their launches pay nothing here.)
    let owner = thread.block.check_owner;
    if owner != 0 {
        Allowed::serve(owner, thread.block.global.watch_atomics);
        let (start, end) = thread.info_range();
        Allowed::switched([thread.own_stack.get(), [start, end]]);
        Allowed::phase(thread.phase());
        if thread.own_let_through() {
            thread.block.grants.grant((start, end));
        }
    }
}

/// Held while an OS thread runs blocks: when dropped, no simulated thread is current on it any
/// more, so compiled code it calls later outside a launch (a library's initialisers, at load)
/// finds none instead of one whose block is gone.
pub(crate) struct RunningBlocks;

impl Drop for RunningBlocks {
    fn drop(&mut self) {
        CURRENT.set(std::ptr::null());
        Allowed::serve(0, false);
    }
}

/// Runs `f` with the current simulated thread; `None` outside one.
#[inline]
pub(super) fn with_current<R>(f: impl FnOnce(&SimThread<'_, '_>) -> R) -> Option<R> {
    let ptr = CURRENT.get();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `make_current` stored a pointer to a `SimThread` that lives on its fiber's
    // stack for as long as that fiber runs compiled code; callbacks only come from that
    // code, on this OS thread, while the thread runs.
    let thread = unsafe { &*ptr.cast::<SimThread<'_, '_>>() };
    Some(f(thread))
}

/// One simulated thread's view of the executor.
pub(crate) struct SimThread<'b, 'a> {
    pub(crate) block: &'b Block<'a>,
    pub(crate) thread: Dim3,
    pub(super) linear: u32,
    /// What compiled kernels read through `threadIdx` & co.
    /// (A cell: a stackless block's program sets it to each thread it runs, see
    /// [`SimThread::info_ptr`].)
    pub(crate) info: UnsafeCell<GmSimThread>,
    shared_calls: Cell<usize>,
    atomics: Cell<u32>,
    /// Block barriers, and warp barriers and collectives, it has passed (racecheck's order).
    block_syncs: Cell<u32>,
    /// Grid barriers it has passed (racecheck's order across blocks).
    grid_syncs: Cell<u32>,
    /// racecheck: the latest time on the launch's clock of atomics it saw (its own atomics, its
    /// block's through block barriers).
    seen: Cell<u64>,
    /// memcheck: the stack range it was last granted (`ALLOWED_EMPTY`: none yet), granted again
    /// whenever it becomes current.
    own_stack: Cell<[usize; 2]>,
    /// The fiber it runs on; `None` for a thread run as a plain call (a compiled kernel that
    /// never waits for other threads).
    pub(super) fiber: Option<*const Fiber>,
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
            info: UnsafeCell::new(if block.compiled {
                GmSimThread {
                    progress: u32::from(fiber.is_some()),
                    ..thread_info(block, thread)
                }
            } else {
                GmSimThread::default()
            }),
            shared_calls: Cell::new(0),
            atomics: Cell::new(0),
            block_syncs: Cell::new(0),
            grid_syncs: Cell::new(0),
            seen: Cell::new(0),
            own_stack: Cell::new(ALLOWED_EMPTY),
            fiber,
        }
    }

    /// The bytes of what compiled code reads as this thread (`[start, end)`).
    fn info_range(&self) -> (usize, usize) {
        let start = self.info.get() as usize;
        (start, start + std::mem::size_of::<GmSimThread>())
    }

    /// Where compiled code reads this thread's indices; a stackless block's program writes
    /// them there for each thread it runs (while no reference to them is held).
    pub(super) fn info_ptr(&self) -> *mut GmSimThread {
        self.info.get()
    }

    /// Runs the closure `body` as this thread.
    #[inline]
    pub(super) fn run_closure(&self, body: &SimKernelFn) {
        // SAFETY: the shared memory this thread hands out lives in `block`.
        let ctx = unsafe { ThreadCtx::new(self, &self.block.ctx, self.thread) };
        body(&ctx);
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
        let compiled = block.compiled;
        block.wait(self.linear, fiber, scope, fence, mask, at, op);
        // (Counted before the thread is current again: `make_current` publishes its phase.)
        if scope == BarrierScope::Block {
            self.block_syncs.set(self.block_syncs.get().wrapping_add(1));
            if op == Some(Collective::GridSync) {
                self.grid_syncs.set(self.grid_syncs.get().wrapping_add(1));
            }
        }
        self.resumed(block, compiled);
        // (Warp barriers and collectives move the warp clocks when they release:
        // `Block::release_warp`.)
        // racecheck: what the block's threads saw before a barrier, all see after it (after a
        // warp's, more than the warp saw: a race missed rather than one reported wrongly).
        self.seen.set(self.seen.get().max(block.global.seen.get()));
    }

    /// Back from a switch: other threads ran meanwhile.
    #[inline(always)]
    fn resumed(&self, block: &Block<'_>, compiled: bool) {
        if compiled {
            // Compiled code finds this thread again.
            make_current(self);
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
        self.block.set_operands(
            linear,
            Operands {
                value,
                arg,
                width,
                mask,
            },
        );
        self.wait(op.scope(), Fence::Local, mask, at, Some(op));
        self.block.result_of(linear)
    }

    fn progress(&self) {
        let n = self.atomics.get().wrapping_add(1);
        self.atomics.set(n);
        if n.is_multiple_of(PROGRESS_EVERY)
            && let Some(fiber) = self.fiber
        {
            let block = self.block;
            block.yield_now(self.linear, fiber);
            self.resumed(block, block.compiled);
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
        let (block, thread) = self.indices();
        self.block.record_fault_in(block, thread, message);
    }
}

impl SimThread<'_, '_> {
    /// A block run as regions cannot go on (`gm_sim/regions.h`): its divergence, `detail` in
    /// the scheduler's words, named by the block the program runs now.
    pub(crate) fn diverged(&self, detail: String) {
        let (block, _) = self.indices();
        self.block.record_divergence(block, detail);
    }

    /// A block run as regions whose threads are as `states` say (some waiting at warp
    /// collectives that cannot complete, none running): whether it cannot go on, its divergence
    /// then recorded in the scheduler's words.
    pub(super) fn diverged_in(&self, states: &[super::schedule::State]) -> bool {
        let verdict = super::release::verdict(states, self.block.warp_size as usize, |i| {
            self.block
                .thread_index(u32::try_from(i).unwrap_or(u32::MAX))
        });
        verdict.map(|detail| self.diverged(detail)).is_some()
    }

    /// The block and thread this thread is: a stackless or direct block's threads share one
    /// `SimThread`, whose `info` the program sets to the running thread (and a direct one's to
    /// its block; elsewhere both say the same).
    fn indices(&self) -> (Dim3, Dim3) {
        if self.block.compiled {
            // SAFETY: read on the thread's own OS thread, from a callback of the compiled code,
            // which writes `info` only between threads, never during this call.
            let info = unsafe { &*self.info.get() };
            (info.block_index(), info.thread_index())
        } else {
            (self.block.block_idx, self.thread)
        }
    }

    /// A checked block run as regions took `range` for its threads' per-thread variables:
    /// theirs to touch until the block ends.
    pub(crate) fn own_slots(&self, range: (usize, usize)) {
        if self.block.plan.checked().is_some() {
            self.block.own_memory.borrow_mut().push(range);
            self.block.grants.grant(range);
        }
    }

    /// Whether a shadowed program's threads may be let through their own ranges (stack, record)
    /// for the block's life: where they run as plain calls, one after another on one stack and
    /// one record, so that what one owns the next one owns too. Not elsewhere: a thread on a
    /// stack of its own asks for it.
    fn own_let_through(&self) -> bool {
        matches!(self.block.plan, Plan::Direct(Looped { checked: Some(checked), .. })
            if checked.layout.shadowed)
    }

    /// Whether this thread of a checked program may make an access (`crate::sanitizer`): if
    /// not, the fault is recorded (the program then ends the thread). `scratch`: whether a
    /// range lies where out-of-bounds `gm_array` accesses go. `flagged`: what the program found
    /// wrong with the access itself (`gm_sim/checked.h`): a misaligned access, which a GPU
    /// refuses, or one past the end of the object the compiler sees it in; either is always
    /// refused, in memcheck's words (as an access outside what the thread may touch, if it is
    /// that too).
    pub(crate) fn check_access(
        &self,
        (address, size, access): (usize, u64, Access),
        pc: usize,
        scratch: &dyn Fn(usize, usize) -> bool,
        flagged: Flagged,
    ) -> Result<(), ()> {
        // (The program asks only for what the OS thread's granted ranges do not hold.)
        let Some(checked) = self.block.plan.checked() else {
            return Ok(());
        };
        // SAFETY: read on the thread's own OS thread from a callback of its program, which
        // writes `info` only between threads (never during this call).
        let info = unsafe { &*self.info.get() };
        if checked.checks.racecheck {
            // Writes that met a hazard have landed by now.
            self.block.settle_races();
        }
        if checked.checks.racecheck && access.is_atomic() {
            // (Before its check: a refused atomic ends the thread, which then sees nothing.)
            self.atomic(info);
        }
        if checked.checks.racecheck && flagged == Flagged::No {
            // Shared memory the block met before: recorded without being looked up again.
            let known = self.block.races.borrow().shared_holding(address, size);
            if let Some(granted) = known {
                return self.shared_access(checked, info, &granted, (address, size, access), pc);
            }
            // So is global memory, unless initcheck looks at its bytes.
            let known = self.block.global.holding(address, size);
            if let Some(allocation) = known.filter(|_| !checked.checks.initcheck) {
                self.global_access(checked, info, allocation, (address, size, access), pc);
                return Ok(());
            }
        }
        // Below every frame of the kernel: where the stack is now.
        let here = std::ptr::addr_of!(address) as usize;
        let block_own = self.block.own_memory.borrow();
        let frame = self.frame(checked, info, here, scratch, &block_own);
        let watched = checked.checks.racecheck || checked.checks.initcheck;
        match check(&frame, address, size, access) {
            Ok(granted) if flagged == Flagged::Misaligned => {
                let refused = misaligned_access(frame.memory, &granted, (address, size, access));
                self.refuse(checked, &refused, pc)
            }
            Ok(granted) if flagged == Flagged::OutsideObject => {
                let refused = outside_object_access(&frame, &granted, (address, size, access));
                self.refuse(checked, &refused, pc)
            }
            Ok(granted) if watched && granted.shared => {
                // Not among the OS thread's ranges: shared memory is watched access by access.
                if checked.checks.racecheck {
                    self.block.races.borrow_mut().learn_shared(granted);
                }
                self.shared_access(checked, info, &granted, (address, size, access), pc)
            }
            Ok(Granted {
                range,
                global: Some(index),
                ..
            }) if checked.checks.racecheck => {
                // Global memory is watched access by access too.
                let allocation = (range, index);
                if !checked.checks.initcheck {
                    self.block.global.ranges.borrow_mut().push(allocation);
                }
                self.global_access(checked, info, allocation, (address, size, access), pc);
                Ok(())
            }
            Ok(granted) => {
                match granted.own {
                    _ if !granted.keep => {}
                    Some(slot) => {
                        if slot == OWN_STACK {
                            self.own_stack.set([granted.range.0, granted.range.1]);
                        }
                        Allowed::remember_own(slot, granted.range);
                        if self.own_let_through() {
                            self.block.grants.grant(granted.range);
                        }
                    }
                    None => {
                        Allowed::remember(granted.range);
                        if checked.layout.shadowed && granted.shared && granted.array.is_none() {
                            // The block's dynamic shared memory lives as long as the block.
                            self.block.grants.grant(granted.range);
                        } else if checked.layout.shadowed {
                            checked.grants.grant(granted.range);
                        }
                    }
                }
                Ok(())
            }
            Err(violation) => self.refuse(checked, &violation, pc),
        }
    }

    /// What the thread may touch, for `check`: `here`, an address below every frame of the
    /// kernel (where the stack is now).
    fn frame<'f>(
        &self,
        checked: Checked<'f>,
        info: &GmSimThread,
        here: usize,
        scratch: &'f dyn Fn(usize, usize) -> bool,
        block_own: &'f [(usize, usize)],
    ) -> Frame<'f> {
        let (dynamic, dynamic_len) = self.block.shared.dynamic_ptr();
        Frame {
            program: checked.layout,
            memory: checked.memory,
            thread_info: self.info_range(),
            stack: (here, info.stack_top),
            dynamic_shared: (dynamic as usize, dynamic_len),
            block_own,
            args: checked.args,
            scratch,
        }
    }

    /// An access of shared memory (`granted`) while racecheck or initcheck watch it: a read of
    /// bytes no thread of the block wrote is reported (initcheck, a warning: see below), the
    /// access recorded and compared with the others (racecheck). Under initcheck alone, an
    /// array written whole needs no more watching, and is granted.
    fn shared_access(
        &self,
        checked: Checked<'_>,
        info: &GmSimThread,
        granted: &Granted,
        (address, size, access): (usize, u64, Access),
        pc: usize,
    ) -> Result<(), ()> {
        if checked.checks.initcheck {
            let verdict =
                self.block
                    .shared_written
                    .borrow_mut()
                    .access(granted.range, address, size, access);
            match verdict {
                // A warning, once per launch, not a fault: such a read is often harmless (a
                // partial last warp's lanes reading a slot no lane filled, their results unused,
                // as in NVIDIA's shfl_integral_image sample), and the simulator cannot tell
                // whether the value is used. compute-sanitizer does not look at shared memory.
                Err(first) => {
                    if !checked
                        .warned
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                    {
                        let read = unwritten_shared(
                            checked.layout,
                            granted,
                            (address, size, access),
                            first,
                        );
                        let line = source_line(checked.layout, pc);
                        let (block, thread) = self.indices();
                        tracing::warn!(
                            kernel = self.block.kernel,
                            ?block,
                            ?thread,
                            "{}",
                            read.message(line.as_deref())
                        );
                    }
                }
                Ok(true) if !checked.checks.racecheck => Allowed::remember(granted.range),
                Ok(_) => {}
            }
        }
        if checked.checks.racecheck {
            self.record_shared(checked, info, granted, (address, size, access), pc);
        }
        Ok(())
    }

    /// Records the fault of a refused access (the program then ends the thread).
    fn refuse(&self, checked: Checked<'_>, violation: &Violation, pc: usize) -> Result<(), ()> {
        self.refuse_saying(checked, pc, |line| violation.message(line))
    }

    /// memcheck: an index outside a C array the program found before any access through it
    /// (`gm_sim/checked.h`, `gm_sim_out_of_bounds`): the thread ends.
    pub(crate) fn refuse_index(&self, refusal: &IndexRefusal, pc: usize) -> Result<(), ()> {
        match self.block.plan.checked() {
            Some(checked) => self.refuse_saying(checked, pc, |line| refusal.message(line)),
            None => Ok(()),
        }
    }

    /// Records the fault `message` gives for the source line of `pc`.
    fn refuse_saying(
        &self,
        checked: Checked<'_>,
        pc: usize,
        message: impl FnOnce(Option<&str>) -> String,
    ) -> Result<(), ()> {
        // Only the block's first fault is reported: the others need no source line (a run of
        // `addr2line` each).
        let line = if self.block.fault.borrow().is_none() {
            source_line(checked.layout, pc).map(|line| in_kernel(line, self.block.kernel))
        } else {
            None
        };
        self.fault(message(line.as_deref()));
        Err(())
    }

    /// The thread passed a block-wide synchronisation the executor does not see (a
    /// `cuda::barrier` phase): racecheck counts it as a block barrier.
    pub(crate) fn passed_block_sync(&self) {
        self.block_syncs.set(self.block_syncs.get().wrapping_add(1));
        Allowed::phase(self.phase());
    }

    /// racecheck: the phase the program reads shared memory in without asking where two
    /// threads read it in that phase (`crate::sanitizer::Allowed::share_reads`): the block
    /// barriers the thread passed + 1; 0 (nothing let through so) without racecheck, or once a
    /// warp barrier or collective ordered lanes of the block, which that rule does not follow.
    fn phase(&self) -> usize {
        if self.block.global.watch_atomics && !self.block.warp_ordered.get() {
            self.block_syncs.get() as usize + 1
        } else {
            0
        }
    }

    /// racecheck: records an access of shared memory, and the block's fault if it races with an
    /// earlier one (the first race only: the launch fails with it).
    fn record_shared(
        &self,
        checked: Checked<'_>,
        info: &GmSimThread,
        granted: &Granted,
        (address, size, access): (usize, u64, Access),
        pc: usize,
    ) {
        let (now, row) = self.stamp(info, access, pc);
        let clocks = self.block.warp_clocks.borrow();
        let clock = clocks.get(row).unwrap_or(&[]);
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let hazard = self
            .block
            .races
            .borrow_mut()
            .access(address, size, now, clock);
        drop(clocks);
        let Some(hazard) = hazard else {
            return;
        };
        let layout = checked.layout;
        let array = match granted.array.and_then(|i| layout.thread_locals.get(i)) {
            Some(local) => format!(
                "the shared array `{}`, byte {}",
                local.array_name(),
                hazard.address - granted.range.0
            ),
            None => format!(
                "dynamic shared memory, byte {}",
                hazard.address - granted.range.0
            ),
        };
        self.block.race(
            Report {
                at: (hazard.address as u64, array),
                hazard,
                unordered: "with no barrier between them",
            },
            (address, size),
        );
    }

    /// racecheck: an atomic (of any memory), which orders what its block did before it before
    /// what threads that see it do after (`crate::sanitizer::GlobalRaces`).
    fn atomic(&self, info: &GmSimThread) {
        let Some(checked) = self.block.plan.checked() else {
            return;
        };
        let (now, _) = self.stamp(info, Access::Atomic, 0);
        let after_accesses = self.block.global.accessed.replace(false);
        let time =
            checked
                .global_races
                .atomic(now.block, now.thread, now.block_syncs, after_accesses);
        self.seen.set(time);
        let seen = &self.block.global.seen;
        seen.set(seen.get().max(time));
    }

    /// racecheck: records an access of global memory in `allocation` (its range and index in
    /// the memory map), and the block's fault if it races with an earlier one. Atomics are not
    /// recorded (`atomic` saw them), nor reads of an allocation no thread wrote yet, which are
    /// granted for reads until one does (on this OS thread, until its block changes).
    fn global_access(
        &self,
        checked: Checked<'_>,
        info: &GmSimThread,
        (range, allocation): ((usize, usize), usize),
        (address, size, access): (usize, u64, Access),
        pc: usize,
    ) {
        let races = checked.global_races;
        if access.is_atomic() {
            return;
        }
        if races.read_only(allocation) {
            if access == Access::Read {
                Allowed::remember_reads(range);
                return;
            }
            // The first write: this OS thread's reads of it are asked for again.
            Allowed::forget(range);
        }
        self.block.global.accessed.set(true);
        let (mut now, row) = self.stamp(info, access, pc);
        now.time = races.now();
        let clocks = self.block.warp_clocks.borrow();
        let order = Across {
            clock: clocks.get(row).unwrap_or(&[]),
            seen: self.seen.get(),
            races,
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let hazard = races.access(allocation, (address, size), now, &order);
        drop(clocks);
        let Some(hazard) = hazard else {
            if now.write {
                Allowed::mine((address, address.saturating_add(size)));
            }
            return;
        };
        let at = checked
            .memory
            .place(hazard.address)
            .unwrap_or_else(|| (hazard.address as u64, "global memory".into()));
        self.block.race(
            Report {
                hazard,
                at,
                unordered: "with no barrier, grid barrier or atomic ordering them",
            },
            (address, size),
        );
    }

    /// Who this thread is, and where it stands, at an access at `pc` (`time`: 0); the range of
    /// its warp clock in the block's `warp_clocks`.
    fn stamp(
        &self,
        info: &GmSimThread,
        access: Access,
        pc: usize,
    ) -> (Stamp, std::ops::Range<usize>) {
        let (block, thread) = (info.block_index(), info.thread_index());
        let dim = self.block.block_dim;
        let linear = thread.x + dim.x * (thread.y + dim.y * thread.z);
        let warp = self.block.warp_size.max(1) as usize;
        let row = linear as usize * warp..(linear as usize + 1) * warp;
        // (Every recorded access asks: a division costs more than the rest of the stamp.)
        let (warp_index, lane) = if warp.is_power_of_two() {
            let shift = warp.trailing_zeros();
            (linear >> shift, linear as usize & (warp - 1))
        } else {
            (linear / warp as u32, linear as usize % warp)
        };
        let warp_epoch = self
            .block
            .warp_clocks
            .borrow()
            .get(row.start + lane)
            .copied()
            .unwrap_or(0);
        let now = Stamp {
            block: block_linear(block, self.block.grid_dim),
            thread: linear,
            warp: warp_index,
            block_syncs: self.block_syncs.get(),
            grid_syncs: self.grid_syncs.get(),
            lane: lane as u8,
            warp_epoch,
            time: 0,
            pc,
            write: access != Access::Read,
            atomic: access.is_atomic(),
        };
        (now, row)
    }
}

/// What compiled code reads as thread `thread` of `block`.
#[inline]
fn thread_info(block: &Block<'_>, thread: Dim3) -> GmSimThread {
    let (dynamic_shared, _) = block.shared.dynamic_ptr();
    GmSimThread {
        thread_idx: thread.to_array(),
        block_idx: block.block_idx.to_array(),
        block_dim: block.block_dim.to_array(),
        grid_dim: block.grid_dim.to_array(),
        warp_size: block.warp_size,
        progress: 0,
        escape: 0,
        stack_top: 0,
        dynamic_shared: dynamic_shared as usize,
    }
}

impl GmSimThread {
    /// The thread it describes.
    #[inline]
    pub(crate) fn thread_index(&self) -> Dim3 {
        let [x, y, z] = self.thread_idx;
        Dim3::new(x, y, z)
    }

    /// The block of the thread it describes.
    #[inline]
    pub(crate) fn block_index(&self) -> Dim3 {
        let [x, y, z] = self.block_idx;
        Dim3::new(x, y, z)
    }
}

#[cfg(test)]
mod tests {
    use super::{CURRENT, RunningBlocks, with_current};

    /// An OS thread that stops running blocks forgets its current thread: compiled code it runs
    /// later outside a launch (a library's initialisers) must not reach a thread whose block is
    /// gone. (Without the reset, `with_current` reads through the dangling pointer, which Miri
    /// reports.)
    #[test]
    fn an_os_thread_that_stops_running_blocks_has_no_current_thread() {
        {
            let _running = RunningBlocks;
            // What a finished block leaves behind: a pointer to a thread that is gone.
            CURRENT.set(
                std::ptr::NonNull::<u64>::dangling()
                    .as_ptr()
                    .cast_const()
                    .cast(),
            );
        }
        assert!(with_current(|_| ()).is_none());
    }
}
