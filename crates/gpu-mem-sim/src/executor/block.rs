//! One block of a launch: what its threads share (indices, shared memory, the collectives'
//! slots, the first fault, the scheduling state) and the reports a block makes. How its threads
//! run is the launch's plan (`super::plan`), carried out by `super::runner`.

use super::Limits;
use super::grid_barrier::GridBarrier;
use super::plan::Plan;
use super::races::{self, PendingRaces, Report};
use super::schedule::{Schedule, Slot};
use super::shared::SharedMemory;
use crate::config::{ThreadOrder, Watchdog};
use crate::sanitizer::BlockGrants;
use crate::sanitizer::{Shadow, SharedWritten};
use crate::thread::{ArgView, BlockCtx};
use gpu_mem_core::Error;
use gpu_mem_core::kernel::Dim3;
use std::cell::{Cell, RefCell, UnsafeCell};

/// Everything the threads of one block share.
pub(crate) struct Block<'a> {
    pub(crate) kernel: &'a str,
    /// How its threads run.
    pub(crate) plan: Plan<'a>,
    /// Whether they run compiled code (`plan.is_compiled()`, read on every switch).
    pub(crate) compiled: bool,
    pub(crate) block_idx: Dim3,
    /// Consecutive blocks (in linear order from `block_idx`) run as this one: more than one only
    /// for the direct plan, whose threads share nothing across blocks (`grid::blocks_per_claim`).
    pub(crate) blocks: u64,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) warp_size: u32,
    /// How long, and for how many rounds, the block may go without progress before it is
    /// reported (`super::watchdog`).
    pub(super) watchdog: Watchdog,
    /// The order its threads run in between barriers (`super::schedule`).
    pub(super) thread_order: ThreadOrder,
    /// What a shadowed program's threads were let through for this block's life (before
    /// `shared`: forbidden again before the dynamic buffer is freed).
    pub(crate) grants: BlockGrants,
    /// What the program took for the block's own use (a checked block run as regions: its
    /// threads' per-thread variables), which its threads may touch until it ends.
    pub(crate) own_memory: RefCell<Vec<(usize, usize)>>,
    pub(crate) shared: SharedMemory,
    /// The grid barrier of a cooperative launch; `None` for others.
    pub(super) grid: Option<&'a GridBarrier>,
    /// What every closure thread's context refers to.
    pub(crate) ctx: BlockCtx<'a>,
    /// Each thread's operands and result of a collective (`super::release`).
    pub(super) slots: RefCell<Vec<Slot>>,
    /// First fault of the block: block and thread index, and message.
    pub(super) fault: RefCell<Option<(Dim3, Dim3, String)>>,
    /// 1 once `fault` holds one: what a program running the block's threads as a loop reads
    /// after each thread (`runner::direct`).
    faulted: Cell<u8>,
    /// A block run as regions that could not go on: which one, and why (the first only).
    diverged: RefCell<Option<(Dim3, String)>>,
    /// A checked program's block: its number among all blocks, which the OS thread's cache of
    /// allowed ranges belongs to (`crate::sanitizer::Allowed`); 0 for others.
    pub(crate) check_owner: u64,
    /// racecheck: the last accesses of each word of shared memory (`crate::sanitizer`).
    pub(crate) races: RefCell<Shadow>,
    /// racecheck: each thread's clock of its warp's lanes, `warp_size` entries per thread
    /// (`crate::sanitizer::synchronize`); empty without racecheck.
    pub(crate) warp_clocks: RefCell<Vec<u32>>,
    /// racecheck: whether a warp barrier or collective ordered some of its lanes: from then on
    /// the program asks for every read of shared memory (`SimThread::phase`).
    pub(crate) warp_ordered: Cell<bool>,
    /// initcheck: the bytes of shared memory its threads wrote (`crate::sanitizer`).
    pub(crate) shared_written: RefCell<SharedWritten>,
    /// racecheck: what it knows of global memory (`crate::sanitizer::GlobalRaces`).
    pub(crate) global: GlobalSeen,
    /// racecheck: hazards met at writes not yet settled (`super::races`).
    pending_races: PendingRaces,
    schedule: UnsafeCell<Schedule>,
}

/// racecheck: what a block knows of the launch's global memory and atomics.
#[derive(Default)]
pub(crate) struct GlobalSeen {
    /// Whether racecheck watches the block: its program then asks for every atomic.
    pub(crate) watch_atomics: bool,
    /// Allocations its threads accessed, with their indices in the memory map (their accesses
    /// need no look in it).
    pub(crate) ranges: RefCell<Vec<((usize, usize), usize)>>,
    /// Whether it recorded an access of global memory since its last atomic.
    pub(crate) accessed: Cell<bool>,
    /// The latest time on the launch's clock of atomics its threads saw; a thread sees it at a
    /// block barrier.
    pub(crate) seen: Cell<u64>,
}

impl GlobalSeen {
    /// The allocation met before that holds `[address, address + size)`: its range and index.
    pub(crate) fn holding(&self, address: usize, size: u64) -> Option<((usize, usize), usize)> {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        self.ranges
            .borrow()
            .iter()
            .copied()
            .find(|&((start, end), _)| address >= start && address.saturating_add(size) <= end)
    }
}

/// Numbers of checked blocks (never 0).
static CHECKED_BLOCKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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
        plan: Plan<'a>,
        args: &'a [ArgView<'a>],
        (block_idx, blocks): (Dim3, u64),
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
            plan,
            compiled: plan.is_compiled(),
            ctx,
            block_idx,
            blocks,
            block_dim,
            grid_dim,
            warp_size,
            watchdog: limits.watchdog,
            thread_order: limits.thread_order,
            grants: BlockGrants::default(),
            own_memory: RefCell::new(Vec::new()),
            shared,
            grid,
            // Sized by the first collective.
            slots: RefCell::new(Vec::new()),
            fault: RefCell::new(None),
            faulted: Cell::new(0),
            diverged: RefCell::new(None),
            check_owner: if plan.checked().is_some() {
                CHECKED_BLOCKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            } else {
                0
            },
            races: RefCell::new(Shadow::default()),
            warp_clocks: RefCell::new(if plan.checked().is_some_and(|c| c.checks.racecheck) {
                vec![0; block_dim.count() as usize * warp_size as usize]
            } else {
                Vec::new()
            }),
            warp_ordered: Cell::new(false),
            shared_written: RefCell::new(SharedWritten::default()),
            global: GlobalSeen {
                watch_atomics: plan.checked().is_some_and(|c| c.checks.racecheck),
                ..GlobalSeen::default()
            },
            pending_races: PendingRaces::default(),
            schedule: UnsafeCell::new(Schedule::default()),
        }
    }

    /// The scheduling state.
    ///
    /// # Safety
    /// No other reference to it is alive: callers hold it only within one function that neither
    /// switches fibers nor runs kernel code.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(super) unsafe fn schedule(&self) -> &mut Schedule {
        // SAFETY: the caller's contract; a block is only touched by its own OS thread.
        unsafe { &mut *self.schedule.get() }
    }

    #[inline]
    pub(super) fn thread_index(&self, linear: u32) -> Dim3 {
        thread_of(linear, self.block_dim)
    }

    /// The static shared buffer a thread's next `shared_array` call gets (`ThreadOps::shared`):
    /// `calls` counts that thread's calls, which are matched by order. `None` after `fault` got
    /// the reason (a size or type that does not match, the block's limit).
    #[inline]
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

    #[inline]
    pub(crate) fn record_fault(&self, thread: Dim3, message: String) {
        self.record_fault_in(self.block_idx, thread, message);
    }

    /// As [`Block::record_fault`], for a thread of block `block` (one of the consecutive blocks
    /// a direct block runs).
    pub(crate) fn record_fault_in(&self, block: Dim3, thread: Dim3, message: String) {
        let mut fault = self.fault.borrow_mut();
        if fault.is_none() {
            *fault = Some((block, thread, message));
            self.faulted.set(1);
        }
    }

    /// Records that block `block` (one of those a direct block runs) cannot go on: `detail`
    /// says why, in the scheduler's words (the first only).
    pub(crate) fn record_divergence(&self, block: Dim3, detail: String) {
        let mut diverged = self.diverged.borrow_mut();
        if diverged.is_none() {
            *diverged = Some((block, detail));
        }
    }

    /// The divergence a block run as regions recorded, as the scheduler reports one.
    pub(super) fn take_divergence(&self) -> Result<(), Error> {
        match self.diverged.borrow_mut().take() {
            Some((block, detail)) => Err(Error::BarrierDivergence {
                kernel: self.kernel.to_string(),
                block: block.to_array(),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// Where a program reads whether the block has faulted (nonzero: it has), valid as long as
    /// the block.
    #[inline]
    pub(super) fn faulted_flag(&self) -> *const u8 {
        self.faulted.as_ptr().cast_const()
    }

    /// The linear index of the (first) block it runs.
    #[inline]
    pub(super) fn first_linear(&self) -> u64 {
        block_linear(self.block_idx, self.grid_dim)
    }

    pub(super) fn divergence(&self, detail: String) -> Error {
        Error::BarrierDivergence {
            kernel: self.kernel.to_string(),
            block: self.block_idx.to_array(),
            detail,
        }
    }

    /// racecheck found `report`'s hazard at an access of `bytes` (host address, size): a fault
    /// now, or once the write has landed and changed them (`super::races`).
    pub(super) fn race(&self, report: Report, bytes: (usize, usize)) {
        if self.fault.borrow().is_none()
            && let Some(report) = self.pending_races.hold(report, bytes)
        {
            self.race_fault(&report);
        }
    }

    /// Settles the hazards met at writes that have landed since.
    #[inline]
    pub(super) fn settle_races(&self) {
        if self.pending_races.any() {
            for report in self.pending_races.settle(self.kernel) {
                self.race_fault(&report);
            }
        }
    }

    /// Records a race as the block's fault (the first only), naming the later access's thread.
    fn race_fault(&self, report: &Report) {
        let Some(checked) = self.plan.checked() else {
            return;
        };
        if self.fault.borrow().is_some() {
            return;
        }
        let grid = self.grid_dim;
        let message = races::message(
            checked,
            report,
            |t| self.thread_index(t),
            |b| block_index(b, grid),
        );
        let later = &report.hazard.later;
        self.record_fault_in(
            block_index(later.block, grid),
            self.thread_index(later.thread),
            message,
        );
    }

    /// The block's first fault, if any, else `result`. A fault is the root cause of any
    /// divergence that follows it (a thread that panicked never reaches the next barrier), so
    /// it is reported first.
    pub(super) fn fault_or(&self, result: Result<(), Error>) -> Result<(), Error> {
        self.settle_races();
        match self.fault.borrow_mut().take() {
            Some((block, thread, message)) => Err(Error::KernelFault {
                kernel: self.kernel.to_string(),
                block: block.to_array(),
                thread: thread.to_array(),
                message,
            }),
            None => result,
        }
    }
}

/// The index in a grid of `grid` of the block with linear index `linear` (x fastest).
pub(super) fn block_index(linear: u64, grid: Dim3) -> Dim3 {
    let (gx, gy) = (u64::from(grid.x.max(1)), u64::from(grid.y.max(1)));
    Dim3::new(
        (linear % gx) as u32,
        ((linear / gx) % gy) as u32,
        (linear / (gx * gy)) as u32,
    )
}

/// The linear index (x fastest) of block `block` in a grid of `grid`: [`block_index`]'s inverse.
pub(super) fn block_linear(block: Dim3, grid: Dim3) -> u64 {
    let (gx, gy) = (u64::from(grid.x), u64::from(grid.y));
    u64::from(block.x) + gx * (u64::from(block.y) + gy * u64::from(block.z))
}

/// The index in a block of `dim` of the thread with linear index `linear` (x fastest). Every
/// thread start asks. One-dimensional blocks stay a compare inline; the others go out of line,
/// where power-of-two extents (the usual ones) take shifts instead of three divisions (~10 ns a
/// thread).
#[inline]
pub(super) fn thread_of(linear: u32, dim: Dim3) -> Dim3 {
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

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_indices_and_linear_indices_are_inverse() {
        for (x, y, z) in [(1, 1, 1), (7, 1, 1), (4, 3, 1), (3, 5, 7), (65_535, 2, 1)] {
            let grid = Dim3::new(x, y, z);
            let total = grid.count();
            for linear in (0..total).step_by((total / 97).max(1) as usize) {
                let block = block_index(linear, grid);
                assert!(
                    block.x < x && block.y < y && block.z < z,
                    "{block:?} in {grid:?}"
                );
                assert_eq!(block_linear(block, grid), linear, "{block:?} in {grid:?}");
            }
        }
    }

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
