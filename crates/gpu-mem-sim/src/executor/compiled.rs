//! The executor's side of compiled code: the `gm_sim_runtime` callbacks through which
//! `threadIdx`, barriers, collectives, dynamic shared memory and faults of a compiled kernel
//! reach the executor, and what the scheduler reads from a stackless thread's wait. The layouts
//! are `crate::abi`'s.
//!
//! The callbacks find the calling thread through a thread-local pointer that a thread sets
//! whenever it (re)starts running; a block's threads share one OS thread and only one of them
//! runs at a time. No callback unwinds: they record faults instead of panicking.

use super::plan::Calls;
use super::schedule::{Operands, State, Wait};
use super::sim_thread::{make_current, with_current};
use crate::abi::{
    ABI, ACCESS_ATOMIC, ACCESS_ATOMIC_STORE, ACCESS_MISALIGNED, ACCESS_OUTSIDE_OBJECT,
    ACCESS_SYNCED, ACCESS_WRITE, DIVERGED_SITES, GLOBAL_FENCE, GmSimAllowed, GmSimLane,
    GmSimRuntime, GmSimThread, GmSimWait, GmSimWaitMore, VERDICT_BARRIER, VERDICT_COLLECTIVE,
    VERDICT_RELEASED, WARP_PARKED, WARP_SCOPE, YIELD_KIND,
};
use crate::sanitizer::{Access, Allowed, Flagged, IndexRefusal};
use crate::thread::{BarrierScope, Collective, Fence, Site, ThreadOps};
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::NonNull;

impl Calls<'_> {
    /// Runs the entry point as `thread`.
    #[inline(always)]
    pub(crate) fn run_thread(&self, thread: &super::sim_thread::SimThread<'_, '_>) {
        make_current(thread);
        // SAFETY: the program was compiled from the kernel's source with the prelude's host
        // branch, its parameters were checked against the launch's arguments, and `args` holds
        // one buffer of each parameter's exact layout, alive for the launch.
        let status = unsafe { (self.run)(self.args.as_ptr()) };
        if status != 0 {
            thread.block.record_fault(
                thread.thread,
                "a C++ exception escaped the kernel".to_string(),
            );
        }
    }
}

/// A wait as the block's scheduler keeps it.
pub(crate) struct WaitParts {
    pub(crate) scope: BarrierScope,
    pub(crate) fence: Fence,
    pub(crate) mask: u64,
    pub(crate) at: Site,
    pub(crate) op: Option<Collective>,
}

impl GmSimWait {
    /// Whether the thread only lets the others run (no barrier, no collective).
    ///
    /// # Safety
    /// `wait` points to the wait of a suspended thread (alive until it goes on).
    #[inline]
    pub(crate) unsafe fn is_yield(wait: *const GmSimWait) -> bool {
        // SAFETY: the caller's contract.
        unsafe { (*wait).kind == YIELD_KIND }
    }

    /// The rest of the wait, if it has more than the head. A raw pointer throughout: a
    /// reference to the head would not reach the rest.
    ///
    /// # Safety
    /// `wait` points to a live wait written by the prelude.
    unsafe fn more(wait: *const GmSimWait) -> Option<*const GmSimWaitMore> {
        // SAFETY: the caller's contract; any wait of another kind than a block barrier (kind 0)
        // or the yield site is the head of a `gm_sim_wait_more`.
        unsafe {
            let kind = (*wait).kind;
            (kind != 0 && kind != YIELD_KIND).then(|| wait.cast::<GmSimWaitMore>())
        }
    }

    /// The wait as the scheduler keeps it. Field by field: they were just stored one by one,
    /// and a wider load would wait for all of them.
    ///
    /// # Safety
    /// `wait` points to the wait of a suspended thread (alive until it goes on).
    #[inline]
    pub(crate) unsafe fn parts(wait: *const GmSimWait) -> WaitParts {
        // SAFETY: the caller's contract; `more` is the same wait's rest.
        unsafe {
            let kind = (*wait).kind;
            let scope = barrier_scope(kind >> 4);
            WaitParts {
                scope,
                fence: fence_of((*wait).fence),
                mask: match (scope, Self::more(wait)) {
                    (BarrierScope::Warp, Some(more)) => (*more).mask,
                    _ => u64::MAX,
                },
                at: site((*wait).file, (*wait).line),
                op: Collective::from_code(kind & 15),
            }
        }
    }

    /// A collective's operands: value, argument, width and mask (every lane for a collective
    /// of a block).
    ///
    /// # Safety
    /// As [`GmSimWait::parts`].
    #[inline]
    pub(crate) unsafe fn operands(wait: *const GmSimWait) -> Option<Operands> {
        // SAFETY: the caller's contract.
        unsafe {
            let kind = (*wait).kind;
            Collective::from_code(kind & 15)?;
            let more = Self::more(wait)?;
            Some(Operands {
                value: (*more).value,
                arg: (*more).arg,
                width: u32::try_from((*more).width).unwrap_or(0),
                mask: match barrier_scope(kind >> 4) {
                    BarrierScope::Warp => (*more).mask,
                    _ => u64::MAX,
                },
            })
        }
    }

    /// Gives a collective its result, which the thread reads when it goes on.
    ///
    /// # Safety
    /// As [`GmSimWait::parts`]; nothing else touches the wait until the thread goes on.
    pub(crate) unsafe fn set_result(wait: *mut GmSimWait, result: u64) {
        // SAFETY: the caller's contract; the result lies in the wait's rest.
        unsafe {
            if let Some(more) = Self::more(wait) {
                (*more.cast_mut()).result = result;
            }
        }
    }
}

fn barrier_scope(scope: c_int) -> BarrierScope {
    if scope == WARP_SCOPE {
        BarrierScope::Warp
    } else {
        BarrierScope::Block
    }
}

fn fence_of(fence: c_int) -> Fence {
    if fence & GLOBAL_FENCE != 0 {
        Fence::Global
    } else {
        Fence::Local
    }
}

/// The table handed to every compiled program's `gm_sim_init`.
pub(crate) static RUNTIME: GmSimRuntime = GmSimRuntime {
    abi: ABI,
    this: rt_self,
    barrier: rt_barrier,
    collective: rt_collective,
    index_fault: rt_index_fault,
    fault: rt_fault,
    progress: rt_progress,
    access: rt_access,
    allowed: rt_allowed,
    diverged: rt_diverged,
    warp: rt_warp,
    verdict: rt_verdict,
    own: rt_own,
    index: rt_index,
};

thread_local! {
    /// Where out-of-bounds accesses of compiled code go (see [`Scratch`]).
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch(Vec::new())) };
}

static OUTSIDE: GmSimThread = GmSimThread {
    thread_idx: [0; 3],
    block_idx: [0; 3],
    block_dim: [1; 3],
    grid_dim: [1; 3],
    warp_size: 1,
    progress: 0,
    escape: 0,
    stack_top: 0,
    dynamic_shared: 0,
};

extern "C" fn rt_self() -> *const GmSimThread {
    with_current(|t| t.info.get().cast_const()).unwrap_or(&raw const OUTSIDE)
}

fn site(file: *const c_char, line: c_int) -> Site {
    // SAFETY: `file` comes from `__builtin_FILE()` in a loaded program (through a callback or a
    // `gm_sim_wait`), a string literal that stays valid because programs are never unloaded.
    unsafe { Site::c(file, line) }
}

extern "C" fn rt_barrier(scope: c_int, fence: c_int, mask: u64, file: *const c_char, line: c_int) {
    let (scope, fence) = (barrier_scope(scope), fence_of(fence));
    with_current(|t| t.barrier(scope, fence, mask, site(file, line)));
}

extern "C" fn rt_collective(
    op: c_int,
    mask: u64,
    value: u64,
    arg: i64,
    width: c_int,
    file: *const c_char,
    line: c_int,
) -> u64 {
    with_current(|t| match Collective::from_code(op) {
        Some(op) => t.collective(
            op,
            mask,
            value,
            arg,
            u32::try_from(width).unwrap_or(0),
            site(file, line),
        ),
        None => {
            t.fault(format!("unknown collective operation {op}"));
            value
        }
    })
    .unwrap_or(value)
}

extern "C" fn rt_index_fault(
    ndim: c_int,
    index: *const i64,
    shape: *const i64,
    itemsize: u64,
) -> *mut c_void {
    let n = usize::try_from(ndim).unwrap_or(0);
    let read = |p: *const i64| -> Vec<i64> {
        if p.is_null() {
            return Vec::new();
        }
        // SAFETY: the prelude passes arrays of `ndim` `long long`s (the index and the shape).
        unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
    };
    let (index, shape) = (read(index), read(shape));
    with_current(|t| {
        t.fault(format!(
            "index ({}) is out of bounds for a gm_array of shape ({})",
            join(&index),
            join(&shape)
        ))
    });
    let words = usize::try_from(itemsize).unwrap_or(0).div_ceil(16).max(1);
    SCRATCH.with_borrow_mut(|scratch| scratch.zeroed(words))
}

/// The memory out-of-bounds accesses of compiled code reach instead (zeroed at every fault), one
/// per OS thread. A faulting thread may keep its reference across a barrier while another
/// thread faults on a larger element, so buffers are only ever added (the last is the largest)
/// and freed with the OS thread, never moved; they are held as raw pointers, so handing out a
/// new one never invalidates one handed out before.
struct Scratch(Vec<NonNull<[u128]>>);

impl Scratch {
    /// A zeroed buffer of at least `words` 16-byte words.
    fn zeroed(&mut self, words: usize) -> *mut c_void {
        let last = match self.0.last() {
            Some(&last) if last.len() >= words => last,
            _ => {
                let buffer = vec![0u128; words.next_power_of_two()].into_boxed_slice();
                let last = NonNull::from(Box::leak(buffer));
                self.0.push(last);
                last
            }
        };
        // SAFETY: `last` came from a leaked box of `last.len()` words, freed only on drop.
        unsafe { last.cast::<u128>().as_ptr().write_bytes(0, last.len()) };
        last.cast::<c_void>().as_ptr()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for buffer in self.0.drain(..) {
            // SAFETY: each came from `Box::leak` in `zeroed`; no compiled code runs on this OS
            // thread any more (its thread-locals are being destroyed).
            drop(unsafe { Box::from_raw(buffer.as_ptr()) });
        }
    }
}

fn join(values: &[i64]) -> String {
    values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

extern "C" fn rt_fault(message: *const c_char) {
    let text = if message.is_null() {
        "(no message)".to_string()
    } else {
        // SAFETY: the prelude passes NUL-terminated string literals.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    };
    with_current(|t| t.fault(text));
}

extern "C" fn rt_diverged(kind: c_int, file: *const c_char, line: c_int, a: u32, b: u32) {
    // The scheduler's words for the same state (`super::release`), so that a block run as
    // regions reports what it would.
    let line_of = |n: u32| c_int::try_from(n).unwrap_or(c_int::MAX);
    let detail = if kind == DIVERGED_SITES {
        format!(
            "threads wait at different barriers: {} and {}",
            site(file, line_of(a)),
            site(file, line_of(b))
        )
    } else {
        format!(
            "barrier at {} reached by {a} of {b} threads; the others exited",
            site(file, line)
        )
    };
    with_current(|t| t.diverged(detail));
}

extern "C" fn rt_warp(op: c_int, here: u64, count: u32, lanes: *mut GmSimLane) -> c_int {
    let count = count.min(64) as usize;
    if lanes.is_null() || count == 0 || here == 0 {
        return 0;
    }
    // SAFETY: the program passes its warp's `count` lanes (`gm_sim_regions::warp_exchange`),
    // which nothing else touches while it waits in this call.
    let lanes = unsafe { std::slice::from_raw_parts_mut(lanes, count) };
    let op = Collective::from_code(op);
    // The scheduler's rule (`super::release::mask_groups`): the lowest lane's mask names the
    // lanes its group waits for, and they complete it together; the warp's lanes here may be
    // several groups (tiles of a warp, each calling with its own lanes). Without all of a
    // group's lanes it cannot complete (yet: the program parks the lanes here, and asks for the
    // verdict once no thread can go on).
    if super::release::mask_groups(here, count, |lane| lanes[lane].mask)
        .any(|(_, mask)| mask & !here != 0)
    {
        return 1;
    }
    if let Some(op) = op {
        let mut results = [0u64; 64];
        super::release::combine_lanes(
            op,
            here,
            count,
            |lane| {
                let l = &lanes[lane];
                Operands {
                    value: l.value,
                    arg: l.arg,
                    width: u32::try_from(l.width).unwrap_or(0),
                    mask: l.mask,
                }
            },
            |lane, result| results[lane] = result,
        );
        for (lane, l) in lanes.iter_mut().enumerate() {
            if here & (1 << lane) != 0 {
                l.result = results[lane];
            }
        }
    }
    0
}

extern "C" fn rt_verdict(
    file: *const c_char,
    line: c_int,
    kind: c_int,
    threads: u32,
    parked_line: u32,
    returned: *const u8,
    lanes: *const GmSimLane,
) -> c_int {
    if returned.is_null() || lanes.is_null() {
        return 0;
    }
    let n = threads as usize;
    // SAFETY: the program passes its block's `threads` states and lanes
    // (`gm_sim_regions::verdict`), which it does not touch while it waits in this call.
    let (returned, lanes) = unsafe {
        (
            std::slice::from_raw_parts(returned, n),
            std::slice::from_raw_parts(lanes, n),
        )
    };
    let line_of = |n: u64| c_int::try_from(n).unwrap_or(c_int::MAX);
    let barrier = |line: c_int| Wait {
        scope: BarrierScope::Block,
        fence: Fence::Local,
        mask: u64::MAX,
        at: site(file, line),
        op: None,
    };
    let collective = |line: c_int, lane: &GmSimLane| Wait {
        scope: BarrierScope::Warp,
        fence: Fence::Local,
        mask: lane.mask,
        at: site(file, line),
        op: Collective::from_code(lane.op),
    };
    let states: Vec<State> = (0..n)
        .map(|t| match returned[t] {
            0 => match kind {
                VERDICT_BARRIER => State::Waiting(barrier(line)),
                VERDICT_COLLECTIVE => State::Waiting(collective(line, &lanes[t])),
                VERDICT_RELEASED => State::Ready,
                _ => State::Done,
            },
            2 => State::Waiting(barrier(line_of(u64::from(parked_line)))),
            WARP_PARKED => State::Waiting(collective(line_of(lanes[t].result), &lanes[t])),
            _ => State::Done,
        })
        .collect();
    c_int::from(with_current(|t| t.diverged_in(&states)).unwrap_or(false))
}

extern "C" fn rt_progress() {
    with_current(|t| t.progress());
}

extern "C" fn rt_access(
    address: *const c_void,
    size: u64,
    kind: c_int,
    pc: *const c_void,
) -> c_int {
    let flagged = if kind & ACCESS_MISALIGNED != 0 {
        Flagged::Misaligned
    } else if kind & ACCESS_OUTSIDE_OBJECT != 0 {
        Flagged::OutsideObject
    } else {
        Flagged::No
    };
    let kind = match kind & !(ACCESS_MISALIGNED | ACCESS_OUTSIDE_OBJECT) {
        ACCESS_SYNCED => {
            with_current(|t| t.passed_block_sync());
            return 0;
        }
        ACCESS_WRITE => Access::Write,
        ACCESS_ATOMIC => Access::Atomic,
        ACCESS_ATOMIC_STORE => Access::AtomicStore,
        _ => Access::Read,
    };
    let access = (address as usize, size, kind);
    let refused = with_current(|t| {
        t.check_access(access, pc as usize, &in_scratch, flagged)
            .is_err()
    });
    c_int::from(refused.unwrap_or(false))
}

extern "C" fn rt_index(
    array_type: *const c_char,
    index: u64,
    is_signed: c_int,
    pc: *const c_void,
) -> c_int {
    let name = if array_type.is_null() {
        String::new()
    } else {
        // SAFETY: UBSan's type descriptors, in the loaded program's data (never unloaded), end
        // their names with a NUL.
        unsafe { CStr::from_ptr(array_type) }
            .to_string_lossy()
            .into_owned()
    };
    let refusal = IndexRefusal::new(&name, index, is_signed != 0);
    let refused = with_current(|t| t.refuse_index(&refusal, pc as usize).is_err());
    c_int::from(refused.unwrap_or(false))
}

extern "C" fn rt_own(start: *const c_void, bytes: u64) {
    let start = start as usize;
    let end = start.saturating_add(usize::try_from(bytes).unwrap_or(usize::MAX));
    with_current(|t| t.own_slots((start, end)));
}

extern "C" fn rt_allowed() -> *const GmSimAllowed {
    Allowed::here()
}

/// Whether `address..address + bytes` lies in a scratch buffer of this OS thread, which an
/// out-of-bounds `gm_array` access reaches instead of its element.
fn in_scratch(address: usize, bytes: usize) -> bool {
    SCRATCH.with_borrow(|scratch| {
        scratch.0.iter().any(|buffer| {
            let start = buffer.cast::<u8>().as_ptr() as usize;
            let len = buffer.len() * std::mem::size_of::<u128>();
            address >= start && address.saturating_add(bytes) <= start + len
        })
    })
}

#[cfg(test)]
mod tests {
    use super::rt_index_fault;

    /// The element an out-of-bounds access gets stays valid while later faults ask for larger
    /// elements: a thread may hold it across a barrier while another thread faults. (Miri
    /// reports the write through the first pointer if a later fault freed or moved it.)
    #[test]
    fn fault_scratch_stays_valid_across_larger_faults() {
        let (index, shape) = ([7i64], [3i64]);
        let small = rt_index_fault(1, index.as_ptr(), shape.as_ptr(), 4).cast::<u32>();
        assert!(!small.is_null());
        for itemsize in [64, 1000, 40_000] {
            let large = rt_index_fault(1, index.as_ptr(), shape.as_ptr(), itemsize).cast::<u8>();
            assert!(!large.is_null());
            // SAFETY: each fault hands out at least `itemsize` writable bytes, which stay valid
            // for the OS thread's life.
            unsafe {
                large.write_bytes(0xAB, itemsize as usize);
                small.write(42);
                assert_eq!(small.read(), 42);
            }
        }
        // A smaller fault reuses the largest buffer; earlier pointers into it stay usable.
        let reused = rt_index_fault(1, index.as_ptr(), shape.as_ptr(), 8).cast::<u8>();
        assert!(!reused.is_null());
        // SAFETY: as above.
        unsafe {
            assert_eq!(reused.read(), 0, "zeroed at the fault");
            small.write(7);
            reused.write(1);
        }
    }
}
