//! racecheck on global memory: conflicting accesses of a launch's threads to device, managed
//! and mapped memory and module variables, in one block or across blocks, with nothing that
//! orders them.
//!
//! Contract:
//! * one [`GlobalRaces`] per checked launch, shared by all its blocks (which run on several OS
//!   threads at once), with a shadow per allocation of the launch's memory map: each byte keeps
//!   its last write and reads as in shared memory (`super::racecheck`), in pages of
//!   [`PAGE_WORDS`] words made at their first access (about 150 bytes per 4-byte word), at most
//!   [`SHADOW_WORDS`] a launch: past them memory not met yet is not watched (a warning says so);
//! * an allocation no thread of the launch wrote yet is read without a record
//!   ([`GlobalRaces::read_only`]): inputs cost what memcheck's reads cost. Its first write starts
//!   the records, so a read made before it is not compared with it (a race between a launch's
//!   very first write to an array and an earlier read of the same bytes is missed; the next
//!   ones are not); a block on another OS thread sees that first write from its next block on;
//! * a thread's accesses to bytes it wrote last, with no wait since, are not recorded either
//!   (the executor grants them, `Allowed::mine`): a race with them is a race with that write;
//! * two accesses are ordered ([`Across`]) when the block orders them (the same thread, a block
//!   barrier, a warp barrier or collective: `Stamp::ordered_in_block`), when a grid barrier lies
//!   between them, or when an atomic orders them: the earlier access's block made an atomic
//!   after it, by the same thread or by one that passed a block barrier since ([`Release`]), no
//!   later than the latest atomic the later thread saw, its own or, through a block barrier,
//!   one of its block's ([`GlobalRaces::atomic`]). Every atomic counts as a release and an
//!   acquire, whatever its address and order: a kernel that publishes with a fence and an
//!   atomic, or takes a lock with one, is never reported; a race that only an atomic on an
//!   unrelated address hides is missed;
//! * atomics are not recorded (they never race with each other); a volatile access is recorded
//!   as a plain one (a flag polled through `volatile` across blocks is a race by this rule);
//! * memory lives until the launch ends: the next launch starts with nothing recorded.

use super::racecheck::{Hazard, Lanes, Order, Stamp};
use gpu_mem_core::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Words of an allocation's shadow made at once (and locked together): 256 bytes of memory,
/// few enough that blocks on two workers seldom share a page. A large allocation's pages are
/// larger, so that its table of pages holds at most [`MAX_PAGES`].
const PAGE_WORDS: usize = 64;
const MAX_PAGES: usize = 1 << 16;

/// The most words a launch's shadow holds (about 1.2 GiB): past them, the accesses of memory
/// not met yet are not looked at for races, and the launch warns once, instead of the process
/// running out of memory.
const SHADOW_WORDS: usize = 8 << 20;

/// How many of a block's atomics after an access are looked at for one that orders it before a
/// later access; past that, the two are taken as ordered (a miss, never a false report).
const RELEASES_LOOKED_AT: usize = 256;

/// What a launch's threads did to global memory, and its atomics.
#[derive(Default)]
pub(crate) struct GlobalRaces {
    /// The launch's clock: every atomic moves it on by one.
    clock: AtomicU64,
    /// One per allocation of the launch's memory map, in its order (none unless racecheck
    /// watches the launch).
    allocations: Box<[Shadow]>,
    /// Each block's atomics that may order its accesses before others', in the order made.
    releases: Mutex<HashMap<u64, Vec<Release>>>,
    /// Words the shadow may still make (of [`SHADOW_WORDS`]), and whether it ran out.
    budget: AtomicUsize,
    ran_out: AtomicBool,
}

/// What the launch's threads did to one allocation.
struct Shadow {
    /// The allocation's first word (host address / 4), its length and its pages' in words.
    first_word: usize,
    words: usize,
    page_words: usize,
    /// Whether a thread of the launch wrote it.
    written: AtomicBool,
    /// Each page's words (`Lanes`), made at their first access.
    pages: OnceLock<Box<[OnceLock<Page>]>>,
}

type Page = Box<Mutex<Box<[Lanes]>>>;

impl Shadow {
    fn new((start, end): (usize, usize)) -> Shadow {
        let first_word = start >> 2;
        let words = end.div_ceil(4).saturating_sub(first_word);
        Shadow {
            first_word,
            words,
            page_words: PAGE_WORDS.max(words.div_ceil(MAX_PAGES).next_power_of_two()),
            written: AtomicBool::new(false),
            pages: OnceLock::new(),
        }
    }

    /// The page holding word `word` (an address / 4), made if it was not and `budget` (words
    /// the launch's shadow may still make) allows it.
    fn page(&self, word: usize, budget: &AtomicUsize) -> Option<&Mutex<Box<[Lanes]>>> {
        let index = word.checked_sub(self.first_word)? / self.page_words;
        let pages = self.pages.get_or_init(|| {
            (0..self.words.div_ceil(self.page_words))
                .map(|_| OnceLock::new())
                .collect()
        });
        let slot = pages.get(index)?;
        if slot.get().is_none() {
            // (Two threads making one page may both pay for it: the budget errs low.)
            let take = |left: usize| left.checked_sub(self.page_words);
            budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, take)
                .ok()?;
        }
        let page = slot.get_or_init(|| {
            Box::new(Mutex::new(
                (0..self.page_words).map(|_| Lanes::default()).collect(),
            ))
        });
        Some(page)
    }
}

/// An atomic made by `thread` of a block after it had passed `block_syncs` block barriers, at
/// `time` on the launch's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Release {
    time: u64,
    thread: u32,
    block_syncs: u32,
}

impl Release {
    /// Whether the access `earlier` (of this atomic's block, before it in time) comes before
    /// this atomic in its block's order.
    fn follows(&self, earlier: &Stamp) -> bool {
        self.thread == earlier.thread || self.block_syncs > earlier.block_syncs
    }
}

impl GlobalRaces {
    /// The races of a launch over `allocations` (each `[start, end)` on the host, in the
    /// memory map's order).
    pub(crate) fn new(allocations: impl Iterator<Item = (usize, usize)>) -> GlobalRaces {
        GlobalRaces {
            allocations: allocations.map(Shadow::new).collect(),
            budget: AtomicUsize::new(SHADOW_WORDS),
            ..GlobalRaces::default()
        }
    }

    /// The launch's clock now (what an access's `Stamp::time` holds).
    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// Whether no thread of the launch wrote allocation `allocation` yet: a read of it needs
    /// no record.
    pub(crate) fn read_only(&self, allocation: usize) -> bool {
        self.allocations
            .get(allocation)
            .is_some_and(|a| !a.written.load(Ordering::Relaxed))
    }

    /// An atomic made by `thread` of `block` after `block_syncs` block barriers: its time on the
    /// launch's clock, which the thread has now seen. `after_accesses`: whether the block
    /// recorded an access of global memory since its last atomic recorded here (without one,
    /// this atomic orders nothing an earlier one does not).
    pub(crate) fn atomic(
        &self,
        block: u64,
        thread: u32,
        block_syncs: u32,
        after_accesses: bool,
    ) -> u64 {
        let time = self.clock.fetch_add(1, Ordering::Relaxed) + 1;
        if after_accesses {
            lock(&self.releases)
                .entry(block)
                .or_default()
                .push(Release {
                    time,
                    thread,
                    block_syncs,
                });
        }
        time
    }

    /// Records `now`'s access of `size` bytes at `address`, in allocation `allocation`; the
    /// first hazard it makes with an earlier access. `order`: what the accessing thread has
    /// seen.
    pub(crate) fn access(
        &self,
        allocation: usize,
        (address, size): (usize, usize),
        now: Stamp,
        order: &Across<'_>,
    ) -> Option<Hazard> {
        let shadow = self.allocations.get(allocation)?;
        // (Stored once: a store per write would move the flag's cache line between the
        // workers' cores on every write, as every read of it does.)
        if now.write && !shadow.written.load(Ordering::Relaxed) {
            shadow.written.store(true, Ordering::Relaxed);
        }
        let end = address.saturating_add(size.max(1));
        let mut found = None;
        let mut word = address >> 2;
        while word << 2 < end {
            let Some(page) = shadow.page(word, &self.budget) else {
                if !self.ran_out.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "racecheck: the launch's record of global memory reached its limit ({} words, about {} MiB); accesses of memory it has not met are not looked at for races",
                        SHADOW_WORDS,
                        (SHADOW_WORDS * std::mem::size_of::<Lanes>()) >> 20
                    );
                }
                return found;
            };
            let mut words = lock(page);
            // (Pages start at multiples of their size from the allocation's first word.)
            let lanes = words.get_mut((word - shadow.first_word) % shadow.page_words)?;
            found = found.or(lanes.record(word, (address, end), now, order));
            word += 1;
        }
        found
    }

    /// Whether an atomic of `earlier`'s block after it, that follows it in the block's order,
    /// came no later than `seen` on the launch's clock.
    fn released(&self, earlier: &Stamp, seen: u64) -> bool {
        let releases = lock(&self.releases);
        let Some(list) = releases.get(&earlier.block) else {
            return false;
        };
        // (A block's atomics are made on one OS thread at a time: their times rise.)
        let first = list.partition_point(|r| r.time <= earlier.time);
        let mut candidates = list[first..].iter().take_while(|r| r.time <= seen);
        candidates
            .by_ref()
            .take(RELEASES_LOOKED_AT)
            .any(|r| r.follows(earlier))
            || candidates.next().is_some()
    }
}

/// The order of global memory as a thread sees it at an access.
pub(crate) struct Across<'a> {
    /// The thread's warp clock (`super::racecheck::synchronize`).
    pub(crate) clock: &'a [u32],
    /// The latest time on the launch's clock the thread has seen: its own atomics, and through
    /// block barriers its block's.
    pub(crate) seen: u64,
    pub(crate) races: &'a GlobalRaces,
}

impl Order for Across<'_> {
    fn before(&self, earlier: &Stamp, later: &Stamp) -> bool {
        earlier.ordered_in_block(later, self.clock)
            || later.grid_syncs > earlier.grid_syncs
            || (self.seen > earlier.time && self.races.released(earlier, self.seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(block: u64, thread: u32, block_syncs: u32, time: u64, write: bool) -> Stamp {
        Stamp {
            block,
            time,
            ..Stamp::of(thread, block_syncs, write)
        }
    }

    const NO_CLOCK: &[u32] = &[0; 32];

    fn seeing(races: &GlobalRaces, seen: u64) -> Across<'_> {
        Across {
            clock: NO_CLOCK,
            seen,
            races,
        }
    }

    #[test]
    fn blocks_race_unless_a_grid_barrier_lies_between() {
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        assert_eq!(
            races.access(0, (64, 4), stamp(0, 5, 0, 0, true), &seeing(&races, 0)),
            None
        );
        let hazard = races
            .access(0, (64, 4), stamp(1, 5, 0, 0, false), &seeing(&races, 0))
            .expect("another block's thread 5 reads what block 0's wrote");
        assert_eq!((hazard.earlier.block, hazard.later.block), (0, 1));
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        races.access(0, (64, 4), stamp(0, 5, 0, 0, true), &seeing(&races, 0));
        let mut after = stamp(1, 5, 1, 0, false);
        after.grid_syncs = 1;
        assert_eq!(races.access(0, (64, 4), after, &seeing(&races, 0)), None);
    }

    #[test]
    fn reads_of_two_blocks_are_kept_for_a_later_write() {
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        races.access(0, (8, 4), stamp(0, 1, 0, 0, false), &seeing(&races, 0));
        races.access(0, (8, 4), stamp(1, 1, 0, 0, false), &seeing(&races, 0));
        // Block 0's thread 1 writes: ordered after its own read, not after block 1's.
        let hazard = races
            .access(0, (8, 4), stamp(0, 1, 0, 0, true), &seeing(&races, 0))
            .expect("a write after block 1's read");
        assert_eq!(hazard.earlier.block, 1);
    }

    #[test]
    fn an_atomic_after_a_write_orders_it_before_accesses_that_saw_the_atomic() {
        // Block 0's thread 0 writes its partial sum, then counts itself done with an atomic;
        // block 1's thread 0 counts itself after it and its threads read block 0's sum.
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        let write = stamp(0, 0, 1, races.now(), true);
        races.access(0, (256, 4), write, &seeing(&races, 0));
        let released = races.atomic(0, 0, 1, true);
        let seen = races.atomic(1, 0, 1, false);
        assert!(seen > released);
        assert_eq!(
            races.access(
                0,
                (256, 4),
                stamp(1, 7, 2, races.now(), false),
                &seeing(&races, seen)
            ),
            None
        );
        // A thread that saw only the launch's clock before the atomic is not ordered after it.
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        races.access(0, (256, 4), write, &seeing(&races, 0));
        let before = races.atomic(1, 0, 0, false);
        races.atomic(0, 0, 1, true);
        assert!(
            races
                .access(
                    0,
                    (256, 4),
                    stamp(1, 7, 2, races.now(), false),
                    &seeing(&races, before)
                )
                .is_some()
        );
    }

    #[test]
    fn an_atomic_orders_only_what_comes_before_it_in_its_block() {
        // Thread 3 writes; thread 0 of its block makes an atomic with no barrier between: the
        // atomic does not follow the write, and a thread that saw it still races.
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        races.access(0, (16, 4), stamp(0, 3, 0, 0, true), &seeing(&races, 0));
        races.atomic(0, 0, 0, true);
        let seen = races.atomic(1, 0, 0, false);
        assert!(
            races
                .access(
                    0,
                    (16, 4),
                    stamp(1, 0, 0, seen, false),
                    &seeing(&races, seen)
                )
                .is_some()
        );
        // After a barrier, thread 0's atomic follows thread 3's write.
        let races = GlobalRaces::new([(0, 4096)].into_iter());
        races.access(0, (16, 4), stamp(0, 3, 0, 0, true), &seeing(&races, 0));
        races.atomic(0, 0, 1, true);
        let seen = races.atomic(1, 0, 0, false);
        assert_eq!(
            races.access(
                0,
                (16, 4),
                stamp(1, 0, 0, seen, false),
                &seeing(&races, seen)
            ),
            None
        );
    }

    #[test]
    fn reads_before_the_first_write_need_no_record() {
        let races = GlobalRaces::new([(0, 64), (64, 4096)].into_iter());
        assert!(races.read_only(0) && races.read_only(1));
        races.access(1, (64, 4), stamp(0, 0, 0, 0, true), &seeing(&races, 0));
        assert!(races.read_only(0) && !races.read_only(1));
        assert!(!races.read_only(2), "no such allocation");
    }

    #[test]
    fn the_record_stops_growing_at_its_limit() {
        let races = GlobalRaces::new([(0, 4 * PAGE_WORDS * 3)].into_iter());
        races.budget.store(2 * PAGE_WORDS, Ordering::Relaxed);
        let write = |address: usize, thread: u32| {
            races.access(
                0,
                (address, 4),
                stamp(0, thread, 0, 0, true),
                &seeing(&races, 0),
            )
        };
        write(0, 1);
        write(4 * PAGE_WORDS, 1);
        assert!(write(0, 2).is_some(), "pages made race as before");
        write(8 * PAGE_WORDS, 1);
        assert_eq!(write(8 * PAGE_WORDS, 2), None, "a third page is not made");
        assert!(races.ran_out.load(Ordering::Relaxed));
    }

    #[test]
    fn a_large_allocation_has_larger_pages() {
        let words = 64 * MAX_PAGES * 4;
        let shadow = Shadow::new((0, 4 * words));
        assert_eq!(shadow.page_words, 4 * PAGE_WORDS);
        assert_eq!(Shadow::new((0, 4096)).page_words, PAGE_WORDS);
    }

    #[test]
    fn pages_split_an_allocation_and_end_with_it() {
        let races = GlobalRaces::new([(4096, 4096 + 4 * PAGE_WORDS + 8)].into_iter());
        let last = 4096 + 4 * PAGE_WORDS + 4;
        races.access(0, (last, 4), stamp(0, 1, 0, 0, true), &seeing(&races, 0));
        assert!(
            races
                .access(0, (last, 4), stamp(0, 2, 0, 0, false), &seeing(&races, 0))
                .is_some(),
            "the last word's page"
        );
        assert_eq!(
            races.access(
                0,
                (4096 + 4 * PAGE_WORDS, 4),
                stamp(0, 2, 0, 0, false),
                &seeing(&races, 0)
            ),
            None,
            "the word before it"
        );
    }
}
