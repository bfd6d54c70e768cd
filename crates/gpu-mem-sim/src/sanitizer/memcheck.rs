//! memcheck: whether a simulated thread may make an access, and what to say when it may not.

use super::Access;
use super::initcheck::Written;
use super::layout::{ProgramLayout, ThreadLocal};
use crate::abi::{
    ALLOWED_EMPTY, ALLOWED_SLOTS, GmSimAllowed, OWN_INFO, OWN_STACK, SHARED_READ_SLOTS,
    SHARED_READS_EMPTY,
};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

/// A range of global memory a launch's threads may touch, by its host address.
#[derive(Debug, Clone)]
pub(crate) struct Allocation {
    pub(crate) host: usize,
    pub(crate) len: usize,
    /// Its address on the device.
    pub(crate) device: u64,
    /// The device it belongs to.
    pub(crate) device_index: usize,
    /// What it is, for messages ("allocation", "mapped host memory", ...).
    pub(crate) what: &'static str,
    /// initcheck: the bytes written since it was allocated (`None`: not tracked).
    pub(crate) written: Option<Arc<Written>>,
    /// Where the user allocated it, when known.
    pub(crate) site: Option<&'static std::panic::Location<'static>>,
}

impl Allocation {
    /// Where host `address` lies in the device's address space (wrapping: an address before
    /// the allocation lies before its device address, as a GPU's pointer arithmetic would put it).
    fn device_address(&self, address: usize) -> u64 {
        self.device
            .wrapping_add((address as u64).wrapping_sub(self.host as u64))
    }

    /// `the 1,024-byte allocation at 0x7f00... on device 0 (made at src/main.rs:12:5)`.
    fn described(&self) -> String {
        let made = self
            .site
            .map(|site| format!(" (made at {site})"))
            .unwrap_or_default();
        format!(
            "the {}-byte {} at {:#x} on device {}{made}",
            bytes(self.len),
            self.what,
            self.device,
            self.device_index
        )
    }
}

/// The global memory of a launch: its device's allocations and those of peers it may reach,
/// taken when the launch starts.
#[derive(Debug, Default)]
pub(crate) struct MemoryMap {
    /// Sorted by host address.
    by_host: Vec<Allocation>,
}

impl MemoryMap {
    pub(crate) fn new(mut allocations: Vec<Allocation>) -> MemoryMap {
        allocations.sort_by_key(|a| a.host);
        MemoryMap {
            by_host: allocations,
        }
    }

    /// The allocation holding all of `address..address + size`.
    fn holding(&self, address: usize, size: usize) -> Option<&Allocation> {
        self.index_holding(address, size).map(|i| &self.by_host[i])
    }

    /// The index (in [`MemoryMap::ranges`]' order) of the allocation holding all of
    /// `address..address + size`.
    fn index_holding(&self, address: usize, size: usize) -> Option<usize> {
        let i = self.by_host.partition_point(|a| a.host <= address);
        let a = self.by_host.get(i.checked_sub(1)?)?;
        (address.saturating_add(size) <= a.host.saturating_add(a.len)).then_some(i - 1)
    }

    /// Each allocation's `[start, end)` on the host.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.by_host.iter().map(|a| (a.host, a.host + a.len))
    }

    /// The device address of the byte at host `address`, and where it lies in its allocation:
    /// `byte 4 of the 1,024-byte allocation at 0x... on device 0 (made at src/main.rs:12:5)`.
    pub(crate) fn place(&self, address: usize) -> Option<(u64, String)> {
        let a = self.holding(address, 1)?;
        Some((
            a.device_address(address),
            format!("byte {} of {}", bytes(address - a.host), a.described()),
        ))
    }

    /// `address` as a report shows it in `space`: in global memory inside an allocation, its
    /// device address; elsewhere the simulator's.
    fn shown(&self, space: Space, address: usize) -> u64 {
        match self.holding(address, 1) {
            Some(a) if space == Space::Global => a.device_address(address),
            _ => address as u64,
        }
    }

    /// The allocation nearest to `address` (by its start or end).
    fn nearest(&self, address: usize) -> Option<&Allocation> {
        let distance = |a: &Allocation| {
            if address < a.host {
                a.host - address
            } else {
                address.saturating_sub(a.host.saturating_add(a.len))
            }
        };
        self.by_host.iter().min_by_key(|a| distance(a))
    }
}

/// What a thread may touch besides global memory, as the executor knows it at the access.
pub(crate) struct Frame<'a> {
    pub(crate) program: &'a ProgramLayout,
    pub(crate) memory: &'a MemoryMap,
    /// The thread's description (`threadIdx` & co read it).
    pub(crate) thread_info: (usize, usize),
    /// The frame that started the thread, and where the stack is now (below every frame of the
    /// kernel): the thread's own stack lies between.
    pub(crate) stack: (usize, usize),
    /// The block's dynamic shared memory.
    pub(crate) dynamic_shared: (usize, usize),
    /// What the program took for the block's own use (its threads' per-thread variables, where
    /// the block runs as regions).
    pub(crate) block_own: &'a [(usize, usize)],
    /// The launch's argument buffers.
    pub(crate) args: &'a [(usize, usize)],
    /// Whether the range lies in a buffer that out-of-bounds `gm_array` accesses reach.
    pub(crate) scratch: &'a dyn Fn(usize, usize) -> bool,
}

/// Where a refused access was headed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    Global,
    Shared,
    Local,
}

/// An access a thread may not make.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub(crate) access: Access,
    pub(crate) space: Space,
    pub(crate) size: u64,
    /// The address as the kernel's user knows it: in global memory near an allocation, its
    /// device address (what `device_ptr` and the allocation's own description give); elsewhere
    /// the simulator's.
    pub(crate) address: u64,
    /// The nearest allocation or shared array, and where the access lies from it.
    pub(crate) nearest: Option<String>,
    /// initcheck: the access lies inside an allocation but reads bytes never written.
    pub(crate) uninitialized: bool,
}

impl Violation {
    /// compute-sanitizer's words, then where it lies, then the source line (if known).
    pub(crate) fn message(&self, line: Option<&str>) -> String {
        let space = match self.space {
            Space::Global => "__global__",
            Space::Shared => "__shared__",
            Space::Local => "__local__",
        };
        let verb = match self.access {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic | Access::AtomicStore => "atomic",
        };
        let mut text = if self.uninitialized {
            format!(
                "initcheck: Uninitialized {space} memory {verb} of size {} at {:#x}",
                self.size, self.address
            )
        } else {
            format!(
                "memcheck: Invalid {space} {verb} of size {} at {:#x}",
                self.size, self.address
            )
        };
        if let Some(nearest) = &self.nearest {
            text.push_str(&format!(": {nearest}"));
        }
        if let Some(line) = line {
            text.push_str(&format!(" (at {line})"));
        }
        text
    }
}

/// Whether `[address, address + size)` lies in `[start, end)`.
pub(super) fn within(address: usize, size: usize, (start, end): (usize, usize)) -> bool {
    address >= start && address.saturating_add(size) <= end
}

/// `bytes` as a count with thousands separators.
fn bytes(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where `address` lies from `[start, start + len)`, in words.
fn relative(address: usize, start: usize, len: usize) -> String {
    if address < start {
        format!("{} bytes before", bytes(start - address))
    } else if address >= start + len {
        format!("{} bytes past the end of", bytes(address - (start + len)))
    } else {
        format!(
            "{} bytes into (and running past the end of)",
            bytes(address - start)
        )
    }
}

/// Where an allowed access lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    /// The whole range it may touch there.
    pub(crate) range: (usize, usize),
    /// The block's shared memory: the static array (its index in the program's
    /// [`ProgramLayout::thread_locals`]), or `None` for the dynamic memory; `None` outside
    /// shared memory (see [`Granted::shared`]).
    pub(crate) array: Option<usize>,
    pub(crate) shared: bool,
    /// Global memory: the index of an allocation of the launch's [`MemoryMap`] (racecheck
    /// watches them).
    pub(crate) global: Option<usize>,
    /// Whether later accesses of `range` need no asking (false for an allocation initcheck
    /// still tracks: each of its accesses is looked at).
    pub(crate) keep: bool,
    /// The running thread's own range ([`OWN_STACK`], [`OWN_INFO`]), kept apart from the
    /// block's.
    pub(crate) own: Option<usize>,
}

impl Granted {
    /// The space an access inside it is said to be in: shared memory or global.
    fn space(&self) -> Space {
        if self.shared {
            Space::Shared
        } else {
            Space::Global
        }
    }

    fn other(range: (usize, usize)) -> Granted {
        Granted {
            range,
            array: None,
            shared: false,
            global: None,
            keep: true,
            own: None,
        }
    }

    fn own(range: (usize, usize), slot: usize) -> Granted {
        Granted {
            own: Some(slot),
            ..Granted::other(range)
        }
    }
}

/// The checked prelude's thread-local that points at the OS thread's [`GmSimAllowed`]
/// (`gm_sim/checked.h`).
const ALLOWED_POINTER: &str = "gm_sim_allowed_here";

/// Where an access is allowed, or why it is not.
pub(crate) fn check(
    frame: &Frame<'_>,
    address: usize,
    size: u64,
    access: Access,
) -> Result<Granted, Violation> {
    let size_bytes = usize::try_from(size).unwrap_or(usize::MAX);
    if let Some(index) = frame.memory.index_holding(address, size_bytes) {
        let a = &frame.memory.by_host[index];
        let granted = match &a.written {
            Some(written) if !written.complete() => initialized(a, written, address, size, access),
            _ => Ok(Granted::other((a.host, a.host + a.len))),
        };
        return granted.map(|g| Granted {
            global: Some(index),
            ..g
        });
    }
    // The stack below the frame that started the thread (from where it is now).
    if within(address, size_bytes, frame.stack) {
        return Ok(Granted::own(frame.stack, OWN_STACK));
    }
    if within(address, size_bytes, frame.thread_info) {
        return Ok(Granted::own(frame.thread_info, OWN_INFO));
    }
    if let Some(&range) = frame
        .block_own
        .iter()
        .find(|&&r| within(address, size_bytes, r))
    {
        // Let through in the shadow for the block's life already: nothing kept longer.
        return Ok(Granted {
            keep: false,
            ..Granted::other(range)
        });
    }
    let (dyn_start, dyn_len) = frame.dynamic_shared;
    if dyn_len > 0 && within(address, size_bytes, (dyn_start, dyn_start + dyn_len)) {
        return Ok(Granted {
            range: (dyn_start, dyn_start + dyn_len),
            array: None,
            shared: true,
            global: None,
            keep: true,
            own: None,
        });
    }
    let tls = frame.program.tls_base();
    for (index, local) in frame.program.thread_locals.iter().enumerate() {
        let start = tls.wrapping_add(local.offset);
        if within(address, size_bytes, (start, start + local.size)) {
            if local.name.contains(ALLOWED_POINTER) {
                // Where the program finds the ranges it may skip asking for: a kernel that
                // wrote there would disable its own checks.
                break;
            }
            // The prelude's own thread-locals are not the kernel's shared memory.
            let prelude = local.prelude;
            return Ok(Granted {
                range: (start, start + local.size),
                array: (!prelude).then_some(index),
                shared: !prelude,
                global: None,
                keep: true,
                own: None,
            });
        }
    }
    if let Some(segment) = frame.program.in_segments(address, size_bytes) {
        return Ok(Granted::other(segment));
    }
    if let Some(&buffer) = frame.args.iter().find(|&&b| within(address, size_bytes, b)) {
        return Ok(Granted::other(buffer));
    }
    if (frame.scratch)(address, size_bytes) {
        return Ok(Granted::other((address, address + size_bytes)));
    }
    Err(describe(frame, address, size, access, tls))
}

/// initcheck's verdict on an access of `a`, whose `written` bytes are tracked: a write is
/// recorded; a read or atomic of a byte never written is refused. What is granted is the
/// stretch of written bytes around the access (later accesses there need no look), or nothing.
fn initialized(
    a: &Allocation,
    written: &Written,
    address: usize,
    size: u64,
    access: Access,
) -> Result<Granted, Violation> {
    let offset = address - a.host;
    let size_bytes = usize::try_from(size).unwrap_or(usize::MAX);
    let unwritten = if access.reads() {
        written.first_unwritten(offset, size_bytes)
    } else {
        written.mark(offset, size_bytes);
        None
    };
    let Some(first) = unwritten else {
        let (start, end) = written.written_run(offset);
        return Ok(Granted {
            keep: start < end,
            ..Granted::other((a.host + start, a.host + end))
        });
    };
    Err(Violation {
        access,
        space: Space::Global,
        size,
        address: a.device_address(address),
        nearest: Some(format!(
            "byte {} of {} was never written since it was allocated (no copy, fill or kernel wrote it)",
            bytes(first),
            a.described()
        )),
        uninitialized: true,
    })
}

/// memcheck's refusal of an access inside `granted` (the thread's own stack, most often) that
/// reaches past the end of the object the compiler sees it in.
pub(crate) fn outside_object_access(
    frame: &Frame<'_>,
    granted: &Granted,
    (address, size, access): (usize, u64, Access),
) -> Violation {
    let size_bytes = usize::try_from(size).unwrap_or(usize::MAX);
    let local = within(address, size_bytes, frame.stack)
        || frame
            .block_own
            .iter()
            .any(|&r| within(address, size_bytes, r));
    let space = if local { Space::Local } else { granted.space() };
    Violation::inside(
        frame.memory,
        space,
        (address, size, access),
        "past the end of the array or object the code indexes there, as the compiler laid it out"
            .to_string(),
    )
}

/// memcheck's refusal of an access inside `granted` that does not lie on a multiple of its
/// size.
pub(crate) fn misaligned_access(
    memory: &MemoryMap,
    granted: &Granted,
    (address, size, access): (usize, u64, Access),
) -> Violation {
    let size_bytes = usize::try_from(size).unwrap_or(usize::MAX).max(1);
    let past = address % size_bytes;
    Violation::inside(
        memory,
        granted.space(),
        (address, size, access),
        format!(
            "misaligned: {past} byte{} past a multiple of {size_bytes}, where an access of {size_bytes} bytes must lie",
            if past == 1 { "" } else { "s" }
        ),
    )
}

impl Violation {
    /// The refusal of an access in `space` that lies inside memory the thread may touch but is
    /// wrong in itself (`why`: how).
    fn inside(
        memory: &MemoryMap,
        space: Space,
        (address, size, access): (usize, u64, Access),
        why: String,
    ) -> Violation {
        Violation {
            access,
            space,
            size,
            address: memory.shown(space, address),
            nearest: Some(why),
            uninitialized: false,
        }
    }
}

/// initcheck's refusal of a read of shared memory `granted` (a static array or the dynamic
/// memory) whose byte `first` (from the array's start) no thread of the block wrote.
pub(crate) fn unwritten_shared(
    program: &ProgramLayout,
    granted: &Granted,
    (address, size, access): (usize, u64, Access),
    first: usize,
) -> Violation {
    let (start, end) = granted.range;
    let what = match granted.array.and_then(|i| program.thread_locals.get(i)) {
        Some(local) => format!(
            "the {}-byte shared array `{}`",
            bytes(end - start),
            local.array_name()
        ),
        None => format!(
            "the {}-byte dynamic shared memory of the block",
            bytes(end - start)
        ),
    };
    Violation {
        access,
        space: Space::Shared,
        size,
        address: address as u64,
        nearest: Some(format!(
            "byte {} of {what} was not written by any thread of this block",
            bytes(first)
        )),
        uninitialized: true,
    }
}

/// How far from the block's shared memory or the thread's stack a refused access may lie and
/// still be said to be headed there.
const NEAR: usize = 64 << 10;

/// How far `address` lies from `[start, start + len)` (0 inside).
fn distance(address: usize, start: usize, len: usize) -> usize {
    if address < start {
        start - address
    } else {
        address.saturating_sub(start.saturating_add(len))
    }
}

/// Addresses below this are a null pointer's, or a small offset from one: nothing lies there.
const NULL_PAGE: usize = 64 << 10;

/// What a refused access may have been headed for.
#[derive(Clone, Copy)]
enum Place<'a> {
    Allocation(&'a Allocation),
    SharedArray(&'a ThreadLocal, usize),
    DynamicShared(usize, usize),
    Stack,
}

/// The place nearest to `address` and how far it lies (0 inside): the launch's allocations, the
/// block's shared arrays and dynamic shared memory, and the thread's stack; only those within
/// [`NEAR`] where `near`, else the nearest allocation or shared memory at any distance (a wild
/// pointer is not a local one).
fn nearest_place<'a>(
    frame: &Frame<'a>,
    address: usize,
    tls: usize,
    near: bool,
) -> Option<(Place<'a>, usize)> {
    let global = frame
        .memory
        .nearest(address)
        .map(|a| (Place::Allocation(a), distance(address, a.host, a.len)));
    let shared = frame
        .program
        .thread_locals
        .iter()
        .filter(|l| !l.prelude)
        .map(|l| {
            let start = tls.wrapping_add(l.offset);
            (
                Place::SharedArray(l, start),
                distance(address, start, l.size),
            )
        })
        .min_by_key(|&(_, d)| d);
    let (dyn_start, dyn_len) = frame.dynamic_shared;
    let dynamic = (dyn_len > 0).then(|| {
        (
            Place::DynamicShared(dyn_start, dyn_len),
            distance(address, dyn_start, dyn_len),
        )
    });
    let (sp, top) = frame.stack;
    let stack = (near && top > sp).then(|| (Place::Stack, distance(address, sp, top - sp)));
    // (In this order: shared memory first where two are as near.)
    [shared, dynamic, global, stack]
        .into_iter()
        .flatten()
        .filter(|&(_, d)| !near || d <= NEAR)
        .min_by_key(|&(_, d)| d)
}

/// What a refused access was headed for, said with how far outside it the access lies: the
/// nearest place within [`NEAR`]; else one within it of where a 32-bit index that wrapped below
/// zero would have reached without wrapping (`s[threadIdx.x - 1]` at thread 0: 16 GiB past a
/// float array); else the nearest allocation or shared memory at any distance, said to be far.
/// A global address is shown as the device's where the allocation it came from is known (one
/// made up from an allocation the pointer never came from would mislead); nothing is named for a
/// null pointer.
fn describe(frame: &Frame<'_>, address: usize, size: u64, access: Access, tls: usize) -> Violation {
    let refused = |space, nearest: String, shown| Violation {
        access,
        space,
        size,
        address: shown,
        nearest: Some(nearest),
        uninitialized: false,
    };
    if address < NULL_PAGE {
        return refused(
            Space::Global,
            "a null pointer's (or a small offset from one), where nothing lies".to_string(),
            address as u64,
        );
    }
    let wrapped = || {
        [4usize, 1, 2, 8, 16].into_iter().find_map(|element| {
            let unwrapped = address.checked_sub(element << 32)?;
            nearest_place(frame, unwrapped, tls, true).map(|(place, _)| (place, unwrapped, element))
        })
    };
    let (place, at, how, far) = if let Some((place, _)) = nearest_place(frame, address, tls, true) {
        (place, address, String::new(), false)
    } else if let Some((place, unwrapped, element)) = wrapped() {
        let how = format!(
            "a 32-bit index of {element}-byte elements that wrapped below zero (+{} bytes): \
             unwrapped, ",
            bytes(address - unwrapped)
        );
        (place, unwrapped, how, false)
    } else if let Some((place, _)) = nearest_place(frame, address, tls, false) {
        let how = "far from anything the thread may touch: ".to_string();
        (place, address, how, true)
    } else {
        return refused(
            Space::Global,
            "far from anything the thread may touch".to_string(),
            address as u64,
        );
    };
    match place {
        Place::SharedArray(l, start) => refused(
            Space::Shared,
            format!(
                "{how}{} the {}-byte shared array `{}`",
                relative(at, start, l.size),
                bytes(l.size),
                l.array_name()
            ),
            address as u64,
        ),
        Place::DynamicShared(start, len) => refused(
            Space::Shared,
            format!(
                "{how}{} the {}-byte dynamic shared memory of the block",
                relative(at, start, len),
                bytes(len)
            ),
            address as u64,
        ),
        Place::Allocation(a) => refused(
            Space::Global,
            format!("{how}{} {}", relative(at, a.host, a.len), a.described()),
            if far {
                address as u64
            } else {
                a.device_address(address)
            },
        ),
        Place::Stack => refused(
            Space::Local,
            "outside the thread's own stack frames".to_string(),
            address as u64,
        ),
    }
}

/// Ranges this OS thread was allowed lately, for one block (`Block::check_owner`): most accesses
/// are answered from them, without looking anything up. They are a [`GmSimAllowed`] that a
/// checked program tests itself before it asks (`gm_sim/checked.h`), so they are emptied
/// whenever a thread of another checked block becomes current on the OS thread
/// ([`Allowed::serve`]), and when the OS thread stops running blocks.
pub(crate) struct Allowed;

/// The cache of one OS thread: one thread-local, so that a hit costs one lookup.
struct Cache {
    owner: Cell<u64>,
    allowed: GmSimAllowed,
    next: Cell<usize>,
    /// The tables `allowed.shared_reads` points into, held while it does, and the slot the next
    /// one takes.
    shared_reads: RefCell<[Option<Arc<[AtomicU32]>>; SHARED_READ_SLOTS]>,
    next_shared: Cell<usize>,
}

thread_local! {
    static CACHE: Cache = const {
        Cache {
            owner: Cell::new(0),
            allowed: GmSimAllowed {
                ranges: [const { Cell::new(ALLOWED_EMPTY) }; ALLOWED_SLOTS],
                reads: Cell::new(0),
                atomics: Cell::new(0),
                mine: Cell::new(ALLOWED_EMPTY),
                own: [const { Cell::new(ALLOWED_EMPTY) }; 2],
                shared_reads: [const { Cell::new(SHARED_READS_EMPTY) }; SHARED_READ_SLOTS],
                shared_span: Cell::new(ALLOWED_EMPTY),
                phase: Cell::new(0),
            },
            next: Cell::new(0),
            shared_reads: RefCell::new([const { None }; SHARED_READ_SLOTS]),
            next_shared: Cell::new(0),
        }
    };
}

impl Allowed {
    /// A thread of checked block `owner` becomes current on this OS thread (0: the OS thread
    /// stops running blocks): the ranges of another block are forgotten. `atomics`: whether the
    /// block's program asks for every atomic (`GmSimAllowed::atomics`).
    #[inline]
    pub(crate) fn serve(owner: u64, atomics: bool) {
        CACHE.with(|cache| {
            if cache.owner.get() != owner {
                cache.owner.set(owner);
                cache.allowed.atomics.set(usize::from(atomics));
                for slot in &cache.allowed.ranges {
                    slot.set(ALLOWED_EMPTY);
                }
                cache.allowed.reads.set(0);
                cache.allowed.mine.set(ALLOWED_EMPTY);
                for slot in &cache.allowed.own {
                    slot.set(ALLOWED_EMPTY);
                }
                cache.next.set(0);
                cache.allowed.phase.set(0);
                for slot in &cache.allowed.shared_reads {
                    slot.set(SHARED_READS_EMPTY);
                }
                cache.allowed.shared_span.set(ALLOWED_EMPTY);
                // (After the slots: none points into a table dropped here.)
                *cache.shared_reads.borrow_mut() = [const { None }; SHARED_READ_SLOTS];
                cache.next_shared.set(0);
            }
        });
    }

    /// racecheck: the current block's shared memory `[start, end)`, whose word `w` (from
    /// `start / 4`) any thread of the block may read without asking while `phases[w]` is its
    /// phase ([`Allowed::phase`]); the table is held until another block becomes current.
    pub(crate) fn share_reads((start, end): (usize, usize), phases: &Arc<[AtomicU32]>) {
        CACHE.with(|cache| {
            let slot = cache.next_shared.get() % SHARED_READ_SLOTS;
            cache.next_shared.set(slot + 1);
            let mut held = cache.shared_reads.borrow_mut();
            // The slot stops pointing at the table it replaces before that table may go.
            cache.allowed.shared_reads[slot].set(SHARED_READS_EMPTY);
            held[slot] = Some(Arc::clone(phases));
            cache.allowed.shared_reads[slot].set([start, end, phases.as_ptr() as usize]);
            let [lo, hi] = cache.allowed.shared_span.get();
            cache.allowed.shared_span.set([lo.min(start), hi.max(end)]);
        });
    }

    /// racecheck: the running thread's phase (block barriers passed + 1), against which
    /// [`Allowed::share_reads`]' tables are read; 0 lets nothing through them.
    #[inline]
    pub(crate) fn phase(phase: usize) {
        CACHE.with(|cache| cache.allowed.phase.set(phase));
    }

    /// Remembers that the current block may touch `range`.
    pub(crate) fn remember(range: (usize, usize)) {
        Allowed::grant(range, false);
    }

    /// Remembers that the running thread may touch `range`, its own (`slot`: [`OWN_STACK`],
    /// [`OWN_INFO`]), until another thread becomes current.
    pub(crate) fn remember_own(slot: usize, range: (usize, usize)) {
        CACHE.with(|cache| {
            if let Some(own) = cache.allowed.own.get(slot) {
                own.set([range.0, range.1]);
            }
        });
    }

    /// Remembers that the current block may read `range` (its writes are still asked for).
    pub(crate) fn remember_reads(range: (usize, usize)) {
        Allowed::grant(range, true);
    }

    fn grant((start, end): (usize, usize), reads_only: bool) {
        CACHE.with(|cache| {
            let next = cache.next.get();
            let slot = next % ALLOWED_SLOTS;
            cache.allowed.ranges[slot].set([start, end]);
            let reads = cache.allowed.reads.get() & !(1 << slot);
            cache
                .allowed
                .reads
                .set(reads | (usize::from(reads_only) << slot));
            cache.next.set(next.wrapping_add(1));
        });
    }

    /// Another thread becomes current on this OS thread: what the last one wrote is not its,
    /// and its own ranges are `own` (by slot: [`OWN_STACK`], [`OWN_INFO`]; empty where none
    /// was granted yet).
    #[inline]
    pub(crate) fn switched(own: [[usize; 2]; 2]) {
        CACHE.with(|cache| {
            cache.allowed.mine.set(ALLOWED_EMPTY);
            for (slot, range) in cache.allowed.own.iter().zip(own) {
                slot.set(range);
            }
        });
    }

    /// The running thread wrote `range`, and racecheck recorded it: until it waits, its
    /// accesses there need no record (a race with them is a race with that write).
    pub(crate) fn mine((start, end): (usize, usize)) {
        CACHE.with(|cache| cache.allowed.mine.set([start, end]));
    }

    /// Forgets what was granted of `range` on this OS thread.
    pub(crate) fn forget((start, end): (usize, usize)) {
        CACHE.with(|cache| {
            for (slot, range) in cache.allowed.ranges.iter().enumerate() {
                if range.get() == [start, end] {
                    range.set(ALLOWED_EMPTY);
                    let reads = cache.allowed.reads.get();
                    cache.allowed.reads.set(reads & !(1 << slot));
                }
            }
        });
    }

    /// This OS thread's ranges, for its checked programs to read (valid while the OS thread
    /// lives).
    pub(crate) fn here() -> *const GmSimAllowed {
        CACHE.with(|cache| std::ptr::from_ref(&cache.allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocation(host: usize, len: usize) -> Allocation {
        Allocation {
            host,
            len,
            device: 0x7f00_0000_0000 + host as u64,
            device_index: 0,
            what: "allocation",
            written: None,
            site: None,
        }
    }

    #[test]
    fn an_access_is_held_only_by_an_allocation_around_all_of_it() {
        let map = MemoryMap::new(vec![allocation(4096, 1024), allocation(1000, 16)]);
        assert!(map.holding(4096, 4).is_some());
        assert!(map.holding(4096 + 1020, 4).is_some());
        assert!(map.holding(4096 + 1021, 4).is_none());
        assert!(map.holding(4095, 1).is_none());
        assert!(map.holding(1000, 16).is_some());
        assert_eq!(map.nearest(5124).map(|a| a.host), Some(4096));
        assert_eq!(map.nearest(1020).map(|a| a.host), Some(1000));
    }

    #[test]
    fn distances_are_said_in_bytes() {
        assert_eq!(relative(5124, 4096, 1024), "4 bytes past the end of");
        assert_eq!(relative(4000, 4096, 1024), "96 bytes before");
        assert_eq!(bytes(1_048_576), "1,048,576");
        assert_eq!(bytes(12), "12");
    }

    /// Whether the OS thread's granted ranges hold a read: the test `gm_sim/checked.h`'s
    /// `gm_sim_granted` makes.
    fn granted(address: usize, size: usize) -> bool {
        granted_for(address, size, false)
    }

    /// As [`granted`], for a read or (`write`) a write.
    fn granted_for(address: usize, size: usize, write: bool) -> bool {
        // SAFETY: this OS thread's cache, read on it while nothing writes it.
        let allowed = unsafe { &*Allowed::here() };
        let [start, end] = allowed.mine.get();
        if within(address, size, (start, end)) {
            return true;
        }
        let refused = if write { allowed.reads.get() } else { 0 };
        allowed.ranges.iter().enumerate().any(|(slot, range)| {
            let [start, end] = range.get();
            within(address, size, (start, end)) && (refused >> slot) & 1 == 0
        })
    }

    #[test]
    fn ranges_granted_for_reads_refuse_writes_and_a_threads_own_writes_end_with_it() {
        Allowed::serve(9, true);
        Allowed::remember_reads((1000, 2000));
        assert!(granted_for(1500, 4, false));
        assert!(!granted_for(1500, 4, true), "granted for reads only");
        Allowed::forget((1000, 2000));
        assert!(!granted_for(1500, 4, false), "forgotten");
        Allowed::remember((1000, 2000));
        assert!(granted_for(1500, 4, true), "granted again, for writes too");
        Allowed::mine((5000, 5004));
        assert!(granted_for(5000, 4, true) && !granted_for(5000, 8, false));
        Allowed::switched([ALLOWED_EMPTY; 2]);
        assert!(!granted_for(5000, 4, false), "another thread's write");
        Allowed::mine((5000, 5004));
        Allowed::serve(10, false);
        assert!(!granted_for(5000, 4, false) && !granted_for(1500, 4, false));
    }

    #[test]
    fn the_cache_answers_only_for_its_block() {
        Allowed::serve(7, false);
        Allowed::remember((100, 200));
        assert!(granted(100, 100));
        assert!(!granted(150, 100));
        assert!(!granted(usize::MAX, 0), "empty slots hold nothing");
        Allowed::serve(7, false);
        assert!(granted(100, 4), "the same block keeps its ranges");
        Allowed::serve(8, false);
        assert!(!granted(100, 4), "another block's are forgotten");
        Allowed::remember((300, 400));
        assert!(granted(300, 4));
    }
}
