//! memcheck's shadow: one byte per 8 bytes of the process's memory, which checked programs
//! built with it (`source`'s `Instrumented::Shadowed`) test inline before every access, as
//! AddressSanitizer's kernel-mode instrumentation does (`-fsanitize=kernel-address`, no
//! runtime), calling their hook (`gm_sim/checked.h`) only where the byte is not zero.
//!
//! Contract:
//! * byte `(a >> 3) + OFFSET` says what may be touched of the 8 bytes from `a & !7`: 0 all of
//!   them, `k` in 1..=7 the first `k`, a negative value none of them. Only [`ShadowMemory::allow`]
//!   writes a value that lets anything through, and only for what the executor granted a
//!   launch's thread (`memcheck::check`); a byte that is not zero sends the access to the hook,
//!   which asks the executor as an unshadowed program does. So the shadow only spares asking:
//!   any doubt (a byte never written, one written 0xff by mistake) costs a question, never a
//!   wrong answer.
//! * What a launch's threads were granted is forbidden again when the launch ends
//!   ([`ShadowGrants`]), so memory that is freed and reused is never let through. Grants are
//!   shared by the launches running at once: a launch may pass where another one running
//!   beside it was granted (another device's allocation without peer access); the documented
//!   limit of the fast path.
//! * The shadow covers addresses below 2^47 (the user half of x86-64 Linux) and is reserved at
//!   [`OFFSET`], untouched (`PROT_NONE`), when a checked program first needs it: a page of it is
//!   mapped, filled with 0xff, when something is granted there or when a kernel's access reads
//!   it (a fault this module's signal handler answers). Pages come into place whole
//!   (`mremap`), so no thread ever reads a page of zeros that is being filled.
//! * Where the range cannot be reserved (something is mapped there: a process built with
//!   AddressSanitizer, a 32-bit or non-Linux host), there is no shadow, and checked programs
//!   call their hook at every access instead.

use super::shadow_faults as handler;
use gpu_mem_core::sync::lock;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::OnceLock;

/// Where the shadow starts: byte `(a >> 3) + OFFSET` shadows address `a` (AddressSanitizer's
/// x86-64 offset, in a range a Linux process leaves free). Compiled into every shadowed
/// program (`source::compiler::instrumentation`).
pub(crate) const OFFSET: usize = 0x7fff_8000;
/// The shadow's size: a byte per 8 of the 2^47 bytes user code can address.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
const LENGTH: usize = 1 << 44;
/// A shadow byte that lets nothing through.
const POISON: u8 = 0xff;

/// The shadow byte of the 8 bytes at `granule` (a multiple of 8).
fn shadow_of(granule: usize) -> usize {
    (granule >> 3) + OFFSET
}

/// What [`ShadowMemory::allow`] writes for `[start, end)`: the shadow bytes of the granules
/// wholly inside (`zeros`, as addresses of shadow bytes), and the byte of the granule the range
/// ends in part-way, if it starts inside the range (with how many of its bytes are granted). A
/// granule the range starts in part-way is left alone: the shadow cannot say "the last k".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allowed {
    pub(crate) zeros: std::ops::Range<usize>,
    pub(crate) partial: Option<(usize, u8)>,
}

/// See [`Allowed`].
pub(crate) fn allowed(start: usize, end: usize) -> Allowed {
    if end <= start {
        return Allowed {
            zeros: 0..0,
            partial: None,
        };
    }
    let first = start.next_multiple_of(8);
    let last = end & !7;
    let zeros = if first < last {
        shadow_of(first)..shadow_of(last)
    } else {
        0..0
    };
    let partial = (end & 7 != 0 && last >= start).then(|| (shadow_of(last), (end & 7) as u8));
    Allowed { zeros, partial }
}

/// The shadow bytes of every granule `[start, end)` touches, which [`ShadowMemory::forbid`]
/// poisons.
pub(crate) fn touched(start: usize, end: usize) -> std::ops::Range<usize> {
    if end <= start {
        return 0..0;
    }
    shadow_of(start & !7)..shadow_of((end - 1) & !7) + 1
}

/// The process's shadow (see the module's contract).
pub(crate) struct ShadowMemory {
    /// Pages of the shadow mapped by [`ShadowMemory::allow`] or [`ShadowMemory::forbid`] (the
    /// signal handler maps pages too, without noting them: mapping a page again only fills it
    /// with 0xff once more).
    mapped: Mutex<HashSet<usize>>,
    page: usize,
}

/// The shadow, reserved on first use; `None` where it cannot be.
pub(crate) fn shadow() -> Option<&'static ShadowMemory> {
    static SHADOW: OnceLock<Option<ShadowMemory>> = OnceLock::new();
    SHADOW.get_or_init(reserve).as_ref()
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri))))]
fn reserve() -> Option<ShadowMemory> {
    None
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
fn reserve() -> Option<ShadowMemory> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    // SAFETY: a new anonymous mapping at a fixed address that must not replace anything
    // (`MAP_FIXED_NOREPLACE`: it fails where something is mapped); nothing can touch it.
    let at = unsafe {
        libc::mmap(
            OFFSET as *mut libc::c_void,
            LENGTH,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "memcheck's shadow cannot be reserved: every access of a checked kernel calls its hook"
        );
        return None;
    }
    if at as usize != OFFSET {
        // (A kernel before 4.17 takes the flag as a hint.)
        // SAFETY: unmapping the mapping just made, which nothing uses.
        unsafe { libc::munmap(at, LENGTH) };
        return None;
    }
    handler::install(page, OFFSET..OFFSET + LENGTH, POISON);
    Some(ShadowMemory {
        mapped: Mutex::new(HashSet::new()),
        page,
    })
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
const MAP_FIXED_NOREPLACE: libc::c_int = 0x10_0000;

impl ShadowMemory {
    /// Lets checked programs touch `[start, end)` without asking (see [`allowed`]).
    pub(crate) fn allow(&self, start: usize, end: usize) {
        let Allowed { zeros, partial } = allowed(start, end);
        // (The part-way byte follows the zeros, or stands alone.)
        let bytes = match (zeros.is_empty(), partial) {
            (_, None) => zeros.clone(),
            (true, Some((at, _))) => at..at + 1,
            (false, Some((at, _))) => zeros.start..at + 1,
        };
        if !self.map(bytes.start, bytes.end) {
            return;
        }
        write(zeros, 0);
        if let Some((at, k)) = partial {
            write(at..at + 1, k);
        }
    }

    /// Sends every access of the granules `[start, end)` touches to the hook again.
    pub(crate) fn forbid(&self, start: usize, end: usize) {
        let bytes = touched(start, end);
        let mapped = lock(&self.mapped);
        // (A page nobody allowed anything in holds no zero.)
        let mut at = bytes.start;
        while at < bytes.end {
            let page = at - at % self.page;
            let stop = (page + self.page).min(bytes.end);
            if mapped.contains(&page) {
                write(at..stop, POISON);
            }
            at = stop;
        }
    }

    /// Maps the pages holding shadow bytes `[first, last)`; false if it cannot.
    fn map(&self, first: usize, last: usize) -> bool {
        if first >= last {
            return true;
        }
        let mut mapped = lock(&self.mapped);
        let mut page = first - first % self.page;
        while page < last {
            if !mapped.contains(&page) {
                // The run of pages not mapped yet, mapped at once.
                let mut end = page + self.page;
                while end < last && !mapped.contains(&end) {
                    end += self.page;
                }
                if !handler::map_poisoned(page, end - page) {
                    return false;
                }
                mapped.extend((page..end).step_by(self.page));
                page = end;
            } else {
                page += self.page;
            }
        }
        true
    }
}

/// Writes `value` to the shadow bytes `bytes`, which are mapped. Checked programs read them
/// meanwhile, so the writes are atomic ones (8 bytes at a time where they can be).
fn write(bytes: std::ops::Range<usize>, value: u8) {
    use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
    let mut at = bytes.start;
    let wide = u64::from_ne_bytes([value; 8]);
    while at < bytes.end {
        if at.is_multiple_of(8) && at + 8 <= bytes.end {
            // SAFETY: a mapped, writable shadow page (the caller mapped it), aligned to 8;
            // shared with other threads only through atomic accesses and compiled code's reads.
            unsafe { AtomicU64::from_ptr(at as *mut u64) }.store(wide, Ordering::Relaxed);
            at += 8;
        } else {
            // SAFETY: as above, one byte.
            unsafe { AtomicU8::from_ptr(at as *mut u8) }.store(value, Ordering::Relaxed);
            at += 1;
        }
    }
}

/// A launch's grants, forbidden again when it ends (dropped).
#[derive(Default)]
pub(crate) struct ShadowGrants {
    granted: Mutex<HashSet<(usize, usize)>>,
}

impl ShadowGrants {
    /// Lets the launch's threads touch `[start, end)` without asking, until it ends. (Granted
    /// again, a range is let through once: where a launch that ended beside this one forbade
    /// it meanwhile, this one's threads ask again, and are answered.)
    pub(crate) fn grant(&self, (start, end): (usize, usize)) {
        if let Some(shadow) = shadow()
            && lock(&self.granted).insert((start, end))
        {
            shadow.allow(start, end);
        }
    }
}

impl Drop for ShadowGrants {
    fn drop(&mut self) {
        let granted = std::mem::take(
            self.granted
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if let (Some(shadow), false) = (shadow(), granted.is_empty()) {
            for (start, end) in granted {
                shadow.forbid(start, end);
            }
        }
    }
}

/// A block's grants: what lives only as long as the block (its dynamic shared memory; the stack
/// and record its threads share where they run as plain calls), forbidden again when it ends
/// (dropped), since the memory is freed or reused then.
#[derive(Default)]
pub(crate) struct BlockGrants {
    granted: std::cell::RefCell<Vec<(usize, usize)>>,
}

impl BlockGrants {
    /// Lets the block's threads touch `[start, end)` without asking, until it ends.
    pub(crate) fn grant(&self, range: (usize, usize)) {
        if let Some(shadow) = shadow() {
            let mut granted = self.granted.borrow_mut();
            if !granted.contains(&range) {
                granted.push(range);
                shadow.allow(range.0, range.1);
            }
        }
    }
}

impl Drop for BlockGrants {
    fn drop(&mut self) {
        if let Some(shadow) = shadow() {
            for (start, end) in self.granted.get_mut().drain(..) {
                shadow.forbid(start, end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_granules_are_zeroed_and_a_part_way_end_says_how_far() {
        let a = allowed(0x1000, 0x1000 + 20);
        assert_eq!(a.zeros, shadow_of(0x1000)..shadow_of(0x1010));
        assert_eq!(a.partial, Some((shadow_of(0x1010), 4)));
        // Aligned both ends: no partial byte.
        assert_eq!(
            allowed(0x2000, 0x2040),
            Allowed {
                zeros: shadow_of(0x2000)..shadow_of(0x2040),
                partial: None
            }
        );
    }

    #[test]
    fn a_granule_entered_part_way_is_left_to_the_hook() {
        // [0x1003, 0x1010): the granule at 0x1000 holds 3 bytes outside: left alone.
        let a = allowed(0x1003, 0x1010);
        assert_eq!(a.zeros, shadow_of(0x1008)..shadow_of(0x1010));
        assert_eq!(a.partial, None);
        // Within one granule, starting part-way: nothing at all.
        let b = allowed(0x1003, 0x1006);
        assert!(b.zeros.is_empty() && b.partial.is_none(), "{b:?}");
        // Within one granule from its start: its first bytes.
        assert_eq!(
            allowed(0x1000, 0x1006).partial,
            Some((shadow_of(0x1000), 6))
        );
    }

    /// The shadow bytes of `[start, end)` (8-aligned), which a grant mapped.
    fn shadow_bytes(start: usize, end: usize) -> Vec<u8> {
        (start..end)
            .step_by(8)
            // SAFETY: the shadow bytes of a range the shadow mapped (`allow`; `forbid` keeps
            // them mapped); read, never written, here.
            .map(|a| unsafe { std::ptr::read_volatile(shadow_of(a) as *const u8) })
            .collect()
    }

    #[test]
    fn a_launchs_grants_let_through_until_it_ends() {
        let Some(shadow) = shadow() else {
            eprintln!("skipped: this host has no shadow (not x86-64 Linux, or its range is taken)");
            return;
        };
        let buffer = vec![7u64; 100];
        let start = buffer.as_ptr() as usize;
        let end = start + 8 * buffer.len();
        let bytes = || shadow_bytes(start, end);
        {
            let grants = ShadowGrants::default();
            grants.grant((start, end));
            assert!(bytes().iter().all(|&b| b == 0), "{:?}", bytes());
            // The launch is still running: a range forbidden by another launch's end asks
            // again (conservative), this one's stays granted.
            shadow.forbid(end, end + 8);
            assert!(bytes().iter().all(|&b| b == 0), "{:?}", bytes());
        }
        assert!(bytes().iter().all(|&b| b == POISON), "{:?}", bytes());
    }

    #[test]
    fn a_blocks_grants_let_through_until_it_ends() {
        if shadow().is_none() {
            eprintln!("skipped: this host has no shadow (not x86-64 Linux, or its range is taken)");
            return;
        }
        let buffer = vec![7u64; 32];
        let (start, end) = (buffer.as_ptr() as usize, buffer.as_ptr() as usize + 8 * 32);
        let bytes = || shadow_bytes(start, end);
        let block = BlockGrants::default();
        block.grant((start, end));
        block.grant((start, end));
        assert!(bytes().iter().all(|&b| b == 0), "{:?}", bytes());
        drop(block);
        assert!(bytes().iter().all(|&b| b == POISON), "{:?}", bytes());
    }

    #[test]
    fn forbidding_covers_every_granule_touched() {
        assert_eq!(
            touched(0x1003, 0x1011),
            shadow_of(0x1000)..shadow_of(0x1010) + 1
        );
        assert!(touched(5, 5).is_empty());
    }

    #[test]
    fn nothing_outside_the_range_is_ever_let_through() {
        // Every byte a granted shadow byte lets through lies in the range, for ranges of
        // every start and length near a granule's edges.
        for start in 0x1000..0x1020usize {
            for len in 0..40usize {
                let end = start + len;
                let a = allowed(start, end);
                let through = |shadow: usize, k: u8| {
                    let granule = (shadow - OFFSET) << 3;
                    (granule..granule + usize::from(k)).collect::<Vec<_>>()
                };
                let mut bytes: Vec<usize> = a.zeros.clone().flat_map(|s| through(s, 8)).collect();
                if let Some((s, k)) = a.partial {
                    bytes.extend(through(s, k));
                }
                assert!(
                    bytes.iter().all(|b| (start..end).contains(b)),
                    "[{start:#x}, {end:#x}): {a:?}"
                );
            }
        }
    }
}
