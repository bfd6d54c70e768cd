//! The C ABI between the simulator and the kernels it compiles: the layouts and entry points of
//! the prelude's host branch (`gpu_mem.h`, `GM_HOST`), and nothing else.
//!
//! A compiled program (`crate::source`) exports `gm_sim_abi`, `gm_sim_init` and the kernels'
//! entry points ([`Entry`]); the executor (`crate::executor`) hands every program the table of
//! its callbacks ([`GmSimRuntime`]) and runs the entry points, exchanging [`GmSimThread`],
//! [`GmSimThreads`], [`GmSimRound`] and [`GmSimWait`] with them. Every type here is `#[repr(C)]` and mirrors the
//! prelude's declaration field for field; a change to either side bumps [`ABI`], and a library
//! built for another ABI is refused at load.
//!
//! This module is a leaf: it names no other module of the crate, so the compiler side and the
//! executor side both depend on it and never on each other through it. What the fields mean to
//! the scheduler is read in the executor (`executor::compiled`).

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};

/// What the stackless and regions rewrites rename a kernel's `__shared__` array to, before its
/// name (`gm_sim_shared_tile`), which its symbol then holds.
pub(crate) const SHARED_ALIAS: &str = "gm_sim_shared_";

/// The prelude's `GM_SIM_ABI`: a library built for another layout is refused.
pub(crate) const ABI: u32 = 15;

/// `gm_sim_thread`: what compiled code reads through `threadIdx` & co.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GmSimThread {
    pub(crate) thread_idx: [u32; 3],
    pub(crate) block_idx: [u32; 3],
    pub(crate) block_dim: [u32; 3],
    pub(crate) grid_dim: [u32; 3],
    pub(crate) warp_size: u32,
    /// Nonzero where atomics and the spin hint call the runtime's `progress` (a thread on a
    /// fiber, which can let the block's other threads run); zero for a thread run as a plain
    /// call, which cannot.
    pub(crate) progress: u32,
    /// Checked programs: where a thread whose access is refused goes (the program's own
    /// `__builtin_setjmp` buffer), and the address of the frame that started the thread (its
    /// stack lies below); 0 elsewhere. Written by the program only.
    pub(crate) escape: usize,
    pub(crate) stack_top: usize,
    /// The block's dynamic shared memory (fixed for the block: a kernel reads it once, where
    /// it asked the runtime per thread before).
    pub(crate) dynamic_shared: usize,
}

/// `gm_sim_threads`: consecutive blocks' threads run as a loop by the program, for a kernel whose
/// threads never wait for each other (see `executor::runner::direct`). The program sets each
/// thread's block and thread indices in the current thread's [`GmSimThread`] (what the
/// runtime's `this` returns).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GmSimThreads {
    pub(crate) args: *const *mut c_void,
    /// Nonzero once a thread recorded a fault: the loop stops after that thread.
    pub(crate) faulted: *const u8,
    /// The linear index (x fastest) of the first block, and how many consecutive blocks run.
    pub(crate) first_block: u64,
    pub(crate) blocks: u64,
    /// Threads in a block.
    pub(crate) count: u32,
    pub(crate) dim_x: u32,
    pub(crate) dim_y: u32,
    pub(crate) warp_size: u32,
    /// The outcome: 0, 1 if a C++ exception reached a thread, 2 if a thread trapped (both
    /// recorded as the block's fault through the runtime's callbacks).
    pub(crate) status: c_int,
}

/// `gm_sim_round`: one round of a block's stackless threads, run by the program (see
/// `executor::stackless`).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GmSimRound {
    /// What compiled code reads through `threadIdx` & co; the program sets it to each thread.
    pub(crate) thread: *mut GmSimThread,
    pub(crate) args: *const *mut c_void,
    /// Per thread: its frame while it waits, else null.
    pub(crate) frames: *mut *mut c_void,
    /// Per thread: where it waits.
    pub(crate) waits: *mut *mut GmSimWait,
    pub(crate) count: u32,
    pub(crate) dim_x: u32,
    pub(crate) dim_y: u32,
    pub(crate) warp_size: u32,
    /// The round's outcome: threads now waiting, the fences of the barriers waited at (or'ed),
    /// whether all wait where the first one does, whether that is a block barrier.
    pub(crate) waiting: u32,
    pub(crate) fence: c_int,
    pub(crate) one_site: c_int,
    pub(crate) plain: c_int,
    /// Null: every waiting thread goes on in the next round; else those marked 1.
    pub(crate) ready: *const u8,
    /// Of the waiting threads, those that only let the others run (an atomic or a spin hint;
    /// [`YIELD_KIND`]).
    pub(crate) yielded: u32,
    /// Threads that ended in the round.
    pub(crate) ended: u32,
    /// `release_warp(block, waits, lanes, here)`: releases the lanes `here` (bit `k`: lane `k`,
    /// whose wait is `waits[k]`) of a warp of `lanes` lanes, all waiting at one warp barrier or
    /// collective, their results written into their waits; nonzero when they may go on. The
    /// program calls it to run a warp on within a round.
    pub(crate) release_warp:
        unsafe extern "C" fn(*const c_void, *const *mut GmSimWait, u32, u64) -> c_int,
    /// `release_warp`'s first argument.
    pub(crate) block: *const c_void,
}

/// `gm_sim_wait`: where a stackless thread waits. A block barrier and the yield site (an atomic
/// or spin hint letting the others run) are just this; anything else is the head of a
/// [`GmSimWaitMore`], which `kind` tells.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GmSimWait {
    pub(crate) file: *const c_char,
    pub(crate) line: c_int,
    /// [`GLOBAL_FENCE`] set: the barrier also orders global memory.
    pub(crate) fence: c_int,
    /// The scope (`GM_SIM_SCOPE_*`) times 16 plus the collective's code (0: a barrier), or
    /// [`YIELD_KIND`].
    pub(crate) kind: c_int,
}

/// `gm_sim_wait_more`: a warp barrier's or collective's wait.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GmSimWaitMore {
    pub(crate) head: GmSimWait,
    pub(crate) mask: u64,
    pub(crate) value: u64,
    pub(crate) arg: i64,
    pub(crate) width: c_int,
    pub(crate) result: u64,
}

/// `GM_SIM_KIND_YIELD`: the wait of a thread that only lets the others run (every 16th atomic
/// or spin hint of a stackless thread) and goes on in the next round.
pub(crate) const YIELD_KIND: c_int = 0x100;

/// `GM_FENCE_GLOBAL` in `gm_sim_wait::fence` and `gm_sim_round::fence`.
pub(crate) const GLOBAL_FENCE: c_int = 2;

/// `GM_SIM_SCOPE_WARP` (anything else is the block).
pub(crate) const WARP_SCOPE: c_int = 1;

/// `gm_sim_runtime`: the executor's entry points for compiled code.
#[repr(C)]
pub(crate) struct GmSimRuntime {
    pub(crate) abi: u32,
    pub(crate) this: extern "C" fn() -> *const GmSimThread,
    pub(crate) barrier: extern "C" fn(c_int, c_int, u64, *const c_char, c_int),
    pub(crate) collective: extern "C" fn(c_int, u64, u64, i64, c_int, *const c_char, c_int) -> u64,
    pub(crate) index_fault: extern "C" fn(c_int, *const i64, *const i64, u64) -> *mut c_void,
    pub(crate) fault: extern "C" fn(*const c_char),
    pub(crate) progress: extern "C" fn(),
    /// Checked programs: `access(address, size, kind, pc)` before every load and store
    /// ([`ACCESS_WRITE`], [`ACCESS_ATOMIC`], else a read); nonzero: refused (the fault is
    /// recorded and the thread ends).
    pub(crate) access: extern "C" fn(*const c_void, u64, c_int, *const c_void) -> c_int,
    /// Checked programs: this OS thread's [`GmSimAllowed`] (it lives as long as the OS thread).
    pub(crate) allowed: extern "C" fn() -> *const GmSimAllowed,
    /// Blocks run as regions: `diverged(kind, file, line, a, b)`, the block cannot go on
    /// ([`DIVERGED_EXITED`]: a barrier at `line` that `a` of the `b` threads reach, the others
    /// ended; [`DIVERGED_SITES`]: threads wait at two barriers, at lines `a` and `b`).
    pub(crate) diverged: extern "C" fn(c_int, *const c_char, c_int, u32, u32),
    /// Blocks run as regions: `warp(op, here, count, lanes)`, a warp collective (`op`, 0: a
    /// warp barrier) reached by the lanes `here` of a warp, computed as the scheduler does, each
    /// participant's result written into its [`GmSimLane`] (`lanes` points at the warp's
    /// `count`); nonzero when lanes its mask names are not there (it cannot complete).
    pub(crate) warp: extern "C" fn(c_int, u64, u32, *mut GmSimLane) -> c_int,
    /// Blocks run as regions: `verdict(file, line, kind, threads, parked_line, returned,
    /// lanes)`, every thread of the block waits or ended, some at warp collectives that cannot
    /// complete: each thread's state (`returned`: [`WARP_PARKED`] waits at the
    /// collective of line `lanes[t].result`, 2 at the barrier of line `parked_line`, 1 ended, 0
    /// as `kind` says: [`VERDICT_ENDED`], [`VERDICT_BARRIER`] at `line`, or
    /// [`VERDICT_COLLECTIVE`] at `line`, or [`VERDICT_RELEASED`]: released from the collective
    /// at `line`, they go on); nonzero when the block cannot go on (the divergence is recorded).
    pub(crate) verdict:
        extern "C" fn(*const c_char, c_int, c_int, u32, u32, *const u8, *const GmSimLane) -> c_int,
    /// Checked blocks run as regions: `own(start, bytes)`, memory of the block's own (its
    /// threads' per-thread slots), which its threads may touch until the block ends.
    pub(crate) own: extern "C" fn(*const c_void, u64),
    /// Checked programs: `index(array_type, index, is_signed, pc)`, an index outside a C array
    /// whose length the compiler knows (`array_type` as UBSan names it, `'float [8]'`; `index`
    /// sign-extended where `is_signed`), before any access through it; nonzero: refused (the
    /// fault is recorded and the thread ends).
    pub(crate) index: extern "C" fn(*const c_char, u64, c_int, *const c_void) -> c_int,
}

/// `GM_SIM_WARP_PARKED`: a thread of a block run as regions that waits at a warp collective
/// some of whose lanes are elsewhere.
pub(crate) const WARP_PARKED: u8 = 255;
/// `GM_SIM_VERDICT_*`: where the running threads of a block run as regions are.
pub(crate) const VERDICT_ENDED: c_int = 0;
pub(crate) const VERDICT_BARRIER: c_int = 1;
pub(crate) const VERDICT_COLLECTIVE: c_int = 2;
pub(crate) const VERDICT_RELEASED: c_int = 3;

/// `gm_sim_lane`: a lane's operands of the warp collective it reached, and its result.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct GmSimLane {
    pub(crate) mask: u64,
    pub(crate) value: u64,
    pub(crate) arg: i64,
    pub(crate) result: u64,
    pub(crate) width: c_int,
    pub(crate) op: c_int,
}

/// `GM_SIM_DIVERGED_EXITED`.
pub(crate) const DIVERGED_EXITED: c_int = 0;
/// `GM_SIM_DIVERGED_SITES`.
pub(crate) const DIVERGED_SITES: c_int = 1;
/// `GM_SIM_GUESS`: or'ed into the line of a barrier the regions rewrite only guesses a thread
/// reaches next (`crate::source::regions`).
pub(crate) const REGIONS_GUESS: usize = 0x8000_0000;

/// `GM_SIM_ALLOWED_SLOTS`.
pub(crate) const ALLOWED_SLOTS: usize = 8;

/// `gm_sim_allowed`: ranges (`[start, end)`) the simulated thread running on an OS thread may
/// touch, as the executor last granted them, which a checked program reads before it asks
/// (`access`); the executor writes them only between the program's reads (in its callbacks, on
/// the same OS thread). An empty slot is [`ALLOWED_EMPTY`].
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GmSimAllowed {
    pub(crate) ranges: [Cell<[usize; 2]>; ALLOWED_SLOTS],
    /// The slots (bit `i` for `ranges[i]`) granted for reads only: writes there are asked for.
    pub(crate) reads: Cell<usize>,
    /// Nonzero: every atomic is asked for, wherever it lies (racecheck orders accesses by them).
    pub(crate) atomics: Cell<usize>,
    /// What the running thread wrote last, recorded by racecheck (`[start, end)`): its accesses
    /// there need no asking until it waits. Emptied when another thread becomes current (here,
    /// or by the program when its loop starts the next thread: the one field it writes).
    pub(crate) mine: Cell<[usize; 2]>,
    /// The running thread's own ranges once granted ([`OWN_STACK`]: its stack; [`OWN_INFO`]:
    /// what describes it, `gm_sim_thread`): each thread on a fiber has its own, which would
    /// otherwise take turns with the block's memory in `ranges`. Emptied when another thread
    /// becomes current.
    pub(crate) own: [Cell<[usize; 2]>; 2],
    /// racecheck: shared memory whose words a thread may read without asking while their phase
    /// (`[start, end, phases]`, `phases` pointing to a `u32` per word from `start / 4`) equals
    /// [`GmSimAllowed::phase`] (`crate::sanitizer::Shadow`). Empty: [`SHARED_READS_EMPTY`].
    pub(crate) shared_reads: [Cell<[usize; 3]>; SHARED_READ_SLOTS],
    /// `[start, end)` around every slot of `shared_reads` (empty: [`ALLOWED_EMPTY`]), which
    /// other accesses are told apart by at one test.
    pub(crate) shared_span: Cell<[usize; 2]>,
    /// The running thread's phase: block barriers passed + 1; 0 lets no read through
    /// `shared_reads`.
    pub(crate) phase: Cell<usize>,
}

/// `GM_SIM_SHARED_READ_SLOTS`.
pub(crate) const SHARED_READ_SLOTS: usize = 4;

/// A slot of [`GmSimAllowed::shared_reads`] that holds no access.
pub(crate) const SHARED_READS_EMPTY: [usize; 3] = [usize::MAX, 0, 0];

/// [`GmSimAllowed::own`]'s slot of the running thread's stack.
pub(crate) const OWN_STACK: usize = 0;
/// [`GmSimAllowed::own`]'s slot of the running thread's `gm_sim_thread`.
pub(crate) const OWN_INFO: usize = 1;

/// A slot of [`GmSimAllowed`] that holds no access.
pub(crate) const ALLOWED_EMPTY: [usize; 2] = [usize::MAX, 0];

/// `GM_SIM_ACCESS_WRITE`.
pub(crate) const ACCESS_WRITE: c_int = 1;
/// `GM_SIM_ACCESS_ATOMIC`.
pub(crate) const ACCESS_ATOMIC: c_int = 2;
/// `GM_SIM_ACCESS_ATOMIC_STORE`: an atomic that only writes.
pub(crate) const ACCESS_ATOMIC_STORE: c_int = 4;
/// `GM_SIM_ACCESS_MISALIGNED`, or'ed into a kind: the access does not lie on a multiple of its
/// size.
pub(crate) const ACCESS_MISALIGNED: c_int = 8;
/// `GM_SIM_ACCESS_OUTSIDE_OBJECT`, or'ed into a kind: the access reaches past the object the
/// compiler sees it in.
pub(crate) const ACCESS_OUTSIDE_OBJECT: c_int = 16;
/// `GM_SIM_ACCESS_SYNCED`: no access, the thread passed a block-wide synchronisation the
/// executor does not see (a `cuda::barrier` phase).
pub(crate) const ACCESS_SYNCED: c_int = 3;

/// How the executor runs a program's threads: its entry points.
#[derive(Clone, Copy)]
pub(crate) enum Entry {
    /// The entry points of threads as calls.
    Calls(CallsEntry),
    /// The entry points of coroutine threads.
    Stackless(StacklessEntry),
    /// `run_blocks(&threads)`: runs whole blocks, each as loops over its threads between its
    /// barriers (`gm_sim/regions.h`).
    Regions(unsafe extern "C" fn(*mut GmSimThreads)),
}

/// A kernel's entry points for threads as calls.
#[derive(Clone, Copy)]
pub(crate) struct CallsEntry {
    /// `run(args)`: runs the kernel as one thread, with one argument buffer per parameter.
    pub(crate) run: unsafe extern "C" fn(*const *mut c_void) -> c_int,
    /// `run_threads(&threads)`: runs a block's threads one after another, for threads that
    /// never wait.
    pub(crate) run_threads: unsafe extern "C" fn(*mut GmSimThreads),
}

/// A stackless kernel's entry points.
#[derive(Clone, Copy)]
pub(crate) struct StacklessEntry {
    /// `start_round(&round)`: starts every thread of the block; each runs until it waits or
    /// ends (faults are recorded through the runtime's callbacks).
    pub(crate) start_round: unsafe extern "C" fn(*mut GmSimRound),
    /// `resume_round(&round)`: runs every waiting thread on, the same way.
    pub(crate) resume_round: unsafe extern "C" fn(*mut GmSimRound),
    /// `gm_sim_begin_block()`: the frames of this OS thread's previous block are all gone.
    pub(crate) begin_block: unsafe extern "C" fn(),
}
