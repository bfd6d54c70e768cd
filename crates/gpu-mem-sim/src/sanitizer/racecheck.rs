//! racecheck: conflicting accesses to memory by different threads with no barrier, fence or
//! atomic between them, as compute-sanitizer's racecheck finds them in shared memory on a GPU;
//! this module holds the order and a block's shared memory, `super::global_races` the launch's
//! global memory.
//!
//! Every simulated thread counts the block barriers it has passed (its [`Stamp`]). All threads
//! of a block pass the same block barriers in the same order, so an access by one thread is
//! ordered before another thread's access when the later one has passed more block barriers.
//! Within a warp, `__syncwarp(mask)` and the collectives order only the lanes that take part,
//! which need not be the whole warp: each thread keeps a clock of its warp's lanes (a vector
//! clock), joined among the lanes that pass a warp barrier or collective together
//! ([`synchronize`]); an access is ordered before a later one of another lane once that lane's
//! clock has seen the first lane's clock move past the access. Anything else may happen at the
//! same time on a GPU. Each byte keeps its last write and the reads since, of two threads at
//! most ([`Word`]: enough for a write to meet another thread's read where there is one); a
//! write after an unordered read or write of another thread, or a read after an unordered
//! write, is a [`Hazard`]. In shared memory an atomic is recorded as a write that never races
//! with another atomic (a counter every thread adds to), but does with another thread's plain
//! read or write that nothing orders (a count read before the block's atomics are done); in
//! global memory atomics are not recorded: they order ([`super::global_races`]). What orders
//! two accesses is an [`Order`]: [`InBlock`] for shared memory, which only one block sees.

use super::memcheck::{Allowed, Granted, within};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Who accessed a word, and where the thread stood then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The block (linear index in the grid) and the thread (linear index in the block).
    pub(crate) block: u64,
    pub(crate) thread: u32,
    /// The thread's warp.
    pub(crate) warp: u32,
    /// Block barriers the thread has passed.
    pub(crate) block_syncs: u32,
    /// Grid barriers the thread has passed: all blocks pass them together.
    pub(crate) grid_syncs: u32,
    /// The thread's lane, and its own entry of its warp clock at the access.
    pub(crate) lane: u8,
    pub(crate) warp_epoch: u32,
    /// The launch's clock of atomics at the access (`super::global_races`; 0 in shared
    /// memory).
    pub(crate) time: u64,
    /// The access's code address (for its source line).
    pub(crate) pc: usize,
    /// Whether it writes (an atomic does).
    pub(crate) write: bool,
    /// Whether it is an atomic: two atomics never race, an atomic and a plain access of
    /// another thread do unless something orders them.
    pub(crate) atomic: bool,
}

impl Stamp {
    /// Whether this (earlier) access is ordered before `later`'s within their block: the same
    /// thread, a block barrier between, or a warp barrier or collective that `later_clock` (the
    /// later thread's warp clock) has seen this lane pass after the access.
    pub(crate) fn ordered_in_block(&self, later: &Stamp, later_clock: &[u32]) -> bool {
        self.block == later.block
            && (self.thread == later.thread
                || later.block_syncs > self.block_syncs
                || (self.warp == later.warp
                    && later_clock
                        .get(usize::from(self.lane))
                        .is_some_and(|&seen| seen > self.warp_epoch)))
    }
}

#[cfg(test)]
impl Stamp {
    /// For tests: an access by `thread` (of block 0, in warps of 32) after `block_syncs` block
    /// barriers.
    pub(crate) fn of(thread: u32, block_syncs: u32, write: bool) -> Stamp {
        Stamp {
            block: 0,
            thread,
            warp: thread / 32,
            block_syncs,
            grid_syncs: 0,
            lane: (thread % 32) as u8,
            warp_epoch: 0,
            time: 0,
            pc: 0,
            write,
            atomic: false,
        }
    }
}

/// What orders an earlier access before a later one (happens before it).
pub(crate) trait Order {
    fn before(&self, earlier: &Stamp, later: &Stamp) -> bool;
}

/// The order of a block's shared memory, which no other block sees: the later thread's warp
/// clock.
pub(crate) struct InBlock<'a>(pub(crate) &'a [u32]);

impl Order for InBlock<'_> {
    fn before(&self, earlier: &Stamp, later: &Stamp) -> bool {
        earlier.block != later.block || earlier.ordered_in_block(later, self.0)
    }
}

/// The lanes `lanes` (a mask) of the warp whose first thread is `first` passed a warp barrier
/// or collective together: each moves its own entry on, then all take the latest of every
/// entry. `clocks` holds `warp` entries per thread of the block.
pub(crate) fn synchronize(clocks: &mut [u32], warp: usize, first: usize, lanes: u64) {
    let taking_part = |lane: usize| lane < 64 && lanes & (1 << lane) != 0;
    // (A warp has at most 64 lanes: no allocation per release.)
    let warp = warp.min(64);
    let mut joined = [0u32; 64];
    let joined = &mut joined[..warp];
    for lane in (0..warp).filter(|&l| taking_part(l)) {
        let Some(row) = clocks.get_mut((first + lane) * warp..(first + lane + 1) * warp) else {
            continue;
        };
        row[lane] = row[lane].wrapping_add(1);
        for (j, seen) in joined.iter_mut().zip(row.iter()) {
            *j = (*j).max(*seen);
        }
    }
    for lane in (0..warp).filter(|&l| taking_part(l)) {
        if let Some(row) = clocks.get_mut((first + lane) * warp..(first + lane + 1) * warp) {
            row.copy_from_slice(joined);
        }
    }
}

/// Two unordered accesses of different threads to one word, at least one a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hazard {
    pub(crate) earlier: Stamp,
    pub(crate) later: Stamp,
    pub(crate) address: usize,
}

/// What one byte (or a word accessed whole) remembers.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Word {
    write: Option<Stamp>,
    /// Reads since the write: one, and another thread's beside it when they are unordered.
    read: Option<Stamp>,
    other_read: Option<Stamp>,
}

/// The last write and reads of each byte of a block's shared memory touched so far, by the
/// shared array (or dynamic shared memory) it belongs to: each array met keeps a dense index of
/// its 4-byte words into one list of the words touched, so that finding a word's history costs
/// a subtraction and two loads, not a hash and a probe. Arrays met are also what lets an access
/// of them skip the search among everything a thread may touch ([`Shadow::shared_holding`]).
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    regions: Vec<Region>,
    /// The region the last lookup found: a thread's accesses come in runs over one array.
    last: Cell<usize>,
    /// The words touched, in the order first touched; `Region::words` index this.
    touched: Vec<Lanes>,
}

/// A shared array met by the block, and its words' places in [`Shadow::touched`] (0: not
/// touched yet, else the place plus one).
#[derive(Debug)]
struct Region {
    granted: Granted,
    /// The first word (address / 4) of the range.
    first_word: usize,
    words: Vec<u32>,
    /// Per word, the phase (block barriers + 1) in which two threads read it whole with no
    /// write ordered after theirs, else 0: the program lets further reads of it in that phase
    /// through without asking ([`Allowed::share_reads`], [`read_by_all`]).
    phases: Arc<[AtomicU32]>,
}

/// What a word's bytes remember: most words are only ever accessed whole (a `float`, an `int`),
/// and then their four bytes remember the same, once.
#[derive(Debug, Clone)]
pub(crate) enum Lanes {
    Whole(Word),
    Bytes(Box<[Word; 4]>),
}

impl Shadow {
    /// The shared array or dynamic shared memory met before that holds the access.
    pub(crate) fn shared_holding(&self, address: usize, size: u64) -> Option<Granted> {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        self.region_holding(address, size)
            .map(|r| self.regions[r].granted)
    }

    fn region_holding(&self, address: usize, size: usize) -> Option<usize> {
        let last = self.last.get();
        if self
            .regions
            .get(last)
            .is_some_and(|r| within(address, size, r.granted.range))
        {
            return Some(last);
        }
        let found = self
            .regions
            .iter()
            .position(|r| within(address, size, r.granted.range))?;
        self.last.set(found);
        Some(found)
    }

    /// Remembers shared memory an access was granted.
    pub(crate) fn learn_shared(&mut self, granted: Granted) {
        if self.regions.iter().any(|r| r.granted == granted) {
            return;
        }
        let (start, end) = granted.range;
        let first_word = start >> 2;
        let words = end.div_ceil(4).saturating_sub(first_word);
        let phases: Arc<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
        Allowed::share_reads(granted.range, &phases);
        self.regions.push(Region {
            granted,
            first_word,
            words: vec![0; words],
            phases,
        });
    }

    /// Records an access of `size` bytes at `address`, in shared memory learnt before (the
    /// executor learns an array before it records an access of it; anything else is learnt
    /// here as a range of its own); the first hazard it makes, if any. `clock`: the accessing
    /// thread's warp clock.
    pub(crate) fn access(
        &mut self,
        address: usize,
        size: usize,
        now: Stamp,
        clock: &[u32],
    ) -> Option<Hazard> {
        let size = size.max(1);
        let end = address.saturating_add(size);
        let region = match self.region_holding(address, size) {
            Some(region) => region,
            None => {
                self.learn_shared(Granted {
                    range: (address, end),
                    array: None,
                    shared: true,
                    global: None,
                    keep: true,
                    own: None,
                });
                self.regions.len() - 1
            }
        };
        let mut found = None;
        let mut word = address >> 2;
        while word << 2 < end {
            let lanes = self.lanes(region, word);
            found = found.or(lanes.record(word, (address, end), now, &InBlock(clock)));
            let phase = if now.write {
                Some(0)
            } else {
                read_by_all(lanes, &now)
            };
            if let Some(phase) = phase {
                let region = &self.regions[region];
                region.phases[word - region.first_word].store(phase, Ordering::Relaxed);
            }
            word += 1;
        }
        found
    }

    /// What `word` of `region` remembers (made on its first touch).
    fn lanes(&mut self, region: usize, word: usize) -> &mut Lanes {
        let region = &mut self.regions[region];
        let slot = &mut region.words[word - region.first_word];
        if *slot == 0 {
            self.touched.push(Lanes::Whole(Word::default()));
            *slot = u32::try_from(self.touched.len()).unwrap_or(u32::MAX);
        }
        let place = *slot as usize - 1;
        &mut self.touched[place]
    }
}

/// The phase tag (block barriers + 1) under which any thread's read of a word whose bytes
/// remember `lanes` adds nothing racecheck would find, after `now`'s read: the word is read
/// whole by two threads in `now`'s phase and written, if at all, in an earlier one. A third
/// thread's read then meets no write of the phase, and would only take the place of one of the
/// two reads kept, each of which a later write of the phase races with just as well (a write by
/// either reader races with the other). Exact only while no warp barrier or collective orders
/// lanes within a phase: the executor lets no read through (phase 0) once one has.
fn read_by_all(lanes: &Lanes, now: &Stamp) -> Option<u32> {
    let Lanes::Whole(w) = lanes else {
        return None;
    };
    let (read, other) = (w.read?, w.other_read?);
    let in_phase = |s: &Stamp| s.block_syncs == now.block_syncs && !s.write;
    let written_before = w
        .write
        .is_none_or(|write| write.block_syncs < now.block_syncs);
    (in_phase(&read) && in_phase(&other) && read.thread != other.thread && written_before)
        .then(|| now.block_syncs.wrapping_add(1))
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes::Whole(Word::default())
    }
}

impl Lanes {
    /// Records `now`'s access of the bytes `[address, end)` that lie in `word` (an address / 4);
    /// the first hazard it makes with an earlier access, by `order`.
    pub(crate) fn record(
        &mut self,
        word: usize,
        (address, end): (usize, usize),
        now: Stamp,
        order: &impl Order,
    ) -> Option<Hazard> {
        let first = (word << 2).max(address);
        let last = ((word << 2) + 4).min(end);
        match self {
            // The whole word, remembered as one: its first byte answers for all four.
            Lanes::Whole(w) if last - first == 4 => record(w, first, now, order),
            _ => {
                let mut bytes = match self {
                    Lanes::Whole(w) => [*w; 4],
                    Lanes::Bytes(bytes) => **bytes,
                };
                let mut hazard = None;
                for byte in first..last {
                    let h = record(&mut bytes[byte & 3], byte, now, order);
                    hazard = hazard.or(h);
                }
                // A write of the whole word leaves its bytes alike again.
                *self = if last - first == 4 && now.write {
                    Lanes::Whole(bytes[0])
                } else {
                    Lanes::Bytes(Box::new(bytes))
                };
                hazard
            }
        }
    }
}

/// Records `now` in the shadow `w` of `byte`; the hazard it makes with an earlier access, by
/// `order`.
fn record(w: &mut Word, byte: usize, now: Stamp, order: &impl Order) -> Option<Hazard> {
    let both_atomic = |e: &Stamp| e.atomic && now.atomic;
    // (Two atomics never race.)
    let unordered =
        |earlier: Option<Stamp>| earlier.filter(|e| !both_atomic(e) && !order.before(e, &now));
    let conflict = |earlier: Option<Stamp>| {
        unordered(earlier).map(|earlier| Hazard {
            earlier,
            later: now,
            address: byte,
        })
    };
    let hazard = if now.write {
        conflict(w.write)
            .or_else(|| conflict(w.read))
            .or_else(|| conflict(w.other_read))
    } else {
        conflict(w.write)
    };
    if now.write {
        *w = Word {
            write: Some(now),
            read: None,
            other_read: None,
        };
    } else {
        match unordered(w.read) {
            // Another thread's read stays; this one is kept beside it.
            Some(read) if (read.block, read.thread) != (now.block, now.thread) => {
                w.other_read = Some(now);
            }
            _ => w.read = Some(now),
        }
    }
    hazard
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's shadow that met one shared array, at 0..4096.
    fn with_one_array() -> Shadow {
        let mut shadow = Shadow::default();
        shadow.learn_shared(Granted {
            range: (0, 4096),
            array: Some(0),
            shared: true,
            global: None,
            keep: true,
            own: None,
        });
        shadow
    }

    fn stamp(thread: u32, block_syncs: u32, write: bool) -> Stamp {
        Stamp::of(thread, block_syncs, write)
    }

    /// The warp clock of a thread that never passed a warp barrier.
    const NO_CLOCK: &[u32] = &[0; 32];

    #[test]
    fn a_read_of_another_threads_write_needs_a_barrier_between() {
        let mut shadow = with_one_array();
        assert_eq!(shadow.access(64, 4, stamp(0, 0, true), NO_CLOCK), None);
        let hazard = shadow
            .access(64, 4, stamp(1, 0, false), NO_CLOCK)
            .expect("a read-after-write race");
        assert_eq!((hazard.earlier.thread, hazard.later.thread), (0, 1));
        let mut shadow = with_one_array();
        shadow.access(64, 4, stamp(0, 0, true), NO_CLOCK);
        assert_eq!(shadow.access(64, 4, stamp(1, 1, false), NO_CLOCK), None);
    }

    /// An atomic by `thread` after `block_syncs` block barriers.
    fn atomic(thread: u32, block_syncs: u32) -> Stamp {
        Stamp {
            atomic: true,
            ..stamp(thread, block_syncs, true)
        }
    }

    #[test]
    fn atomics_race_with_plain_accesses_of_others_but_not_with_each_other() {
        // A counter every thread adds to: no hazard among the atomics.
        let mut shadow = with_one_array();
        for thread in 0..8 {
            assert_eq!(shadow.access(64, 4, atomic(thread, 1), NO_CLOCK), None);
        }
        // Read by another thread before a barrier: the count may not be complete.
        let hazard = shadow
            .access(64, 4, stamp(9, 1, false), NO_CLOCK)
            .expect("a read racing with an atomic");
        assert!(hazard.earlier.atomic && !hazard.later.atomic, "{hazard:?}");
        // After a barrier, or by the thread that made the last atomic, it is ordered.
        let mut shadow = with_one_array();
        shadow.access(64, 4, atomic(3, 1), NO_CLOCK);
        assert_eq!(shadow.access(64, 4, stamp(3, 1, false), NO_CLOCK), None);
        assert_eq!(shadow.access(64, 4, stamp(5, 2, false), NO_CLOCK), None);
        // An atomic after another thread's unordered read or write (the counter's reset by
        // thread 0 with no barrier before the others add to it).
        let mut shadow = with_one_array();
        shadow.access(64, 4, stamp(0, 0, true), NO_CLOCK);
        let hazard = shadow
            .access(64, 4, atomic(1, 0), NO_CLOCK)
            .expect("an atomic racing with a plain write");
        assert!(!hazard.earlier.atomic && hazard.later.atomic, "{hazard:?}");
        let mut shadow = with_one_array();
        shadow.access(64, 4, stamp(0, 0, true), NO_CLOCK);
        assert_eq!(shadow.access(64, 4, atomic(1, 1), NO_CLOCK), None);
    }

    #[test]
    fn writes_after_reads_and_writes_of_others_are_races_reads_alone_are_not() {
        let mut shadow = with_one_array();
        shadow.access(8, 4, stamp(3, 2, false), NO_CLOCK);
        assert_eq!(shadow.access(8, 4, stamp(4, 2, false), NO_CLOCK), None);
        assert!(shadow.access(8, 4, stamp(5, 2, true), NO_CLOCK).is_some());
        let mut shadow = with_one_array();
        shadow.access(8, 4, stamp(3, 2, true), NO_CLOCK);
        assert!(
            shadow.access(10, 2, stamp(4, 2, true), NO_CLOCK).is_some(),
            "same bytes"
        );
        assert_eq!(
            shadow.access(12, 4, stamp(4, 2, true), NO_CLOCK),
            None,
            "next word"
        );
        let mut shadow = with_one_array();
        shadow.access(16, 1, stamp(0, 0, true), NO_CLOCK);
        assert_eq!(
            shadow.access(17, 1, stamp(1, 0, true), NO_CLOCK),
            None,
            "other bytes of a word"
        );
        assert!(
            shadow.access(16, 4, stamp(2, 0, false), NO_CLOCK).is_some(),
            "a word over both"
        );
    }

    #[test]
    fn words_split_by_byte_accesses_and_joined_by_whole_writes_keep_each_bytes_history() {
        let mut shadow = with_one_array();
        shadow.access(32, 4, stamp(0, 0, true), NO_CLOCK);
        // Thread 1 writes byte 33 after a barrier: no race; the word is split.
        assert_eq!(shadow.access(33, 1, stamp(1, 1, true), NO_CLOCK), None);
        // Thread 2, same phase: byte 32 (thread 0's, ordered) is fine, byte 33 races.
        assert_eq!(shadow.access(32, 1, stamp(2, 1, false), NO_CLOCK), None);
        let hazard = shadow
            .access(32, 4, stamp(2, 1, false), NO_CLOCK)
            .expect("byte 33's write by thread 1");
        assert_eq!((hazard.earlier.thread, hazard.address), (1, 33));
        // A whole write after a barrier joins the word: every byte now remembers thread 3.
        assert_eq!(shadow.access(32, 4, stamp(3, 2, true), NO_CLOCK), None);
        let hazard = shadow
            .access(34, 1, stamp(4, 2, false), NO_CLOCK)
            .expect("thread 3's write");
        assert_eq!((hazard.earlier.thread, hazard.address), (3, 34));
    }

    #[test]
    fn shared_memory_met_once_is_known_by_its_range() {
        let mut shadow = Shadow::default();
        let tile = Granted {
            range: (4096, 4096 + 128),
            array: Some(3),
            shared: true,
            global: None,
            keep: true,
            own: None,
        };
        assert_eq!(shadow.shared_holding(4096, 4), None);
        shadow.learn_shared(tile);
        shadow.learn_shared(tile);
        assert_eq!(shadow.regions.len(), 1);
        assert_eq!(shadow.shared_holding(4096 + 124, 4), Some(tile));
        assert_eq!(shadow.shared_holding(4096 + 125, 4), None, "past its end");
        assert_eq!(shadow.shared_holding(4095, 1), None);
    }

    #[test]
    fn a_write_meets_another_threads_read_even_after_its_own() {
        let mut shadow = with_one_array();
        shadow.access(8, 4, stamp(0, 1, false), NO_CLOCK);
        shadow.access(8, 4, stamp(8, 1, false), NO_CLOCK);
        let hazard = shadow
            .access(8, 4, stamp(8, 1, true), NO_CLOCK)
            .expect("a write-after-read race");
        assert_eq!(hazard.earlier.thread, 0);
    }

    #[test]
    fn one_thread_or_a_warp_barrier_orders_its_own_accesses() {
        let mut shadow = with_one_array();
        shadow.access(0, 4, stamp(7, 0, true), NO_CLOCK);
        assert_eq!(shadow.access(0, 4, stamp(7, 0, false), NO_CLOCK), None);
        // Lanes 7 and 8 pass a __syncwarp together.
        let mut clocks = vec![0u32; 64 * 32];
        synchronize(&mut clocks, 32, 0, 1 << 7 | 1 << 8);
        let lane8 = &clocks[8 * 32..9 * 32];
        assert_eq!(
            shadow.access(0, 4, stamp(8, 0, false), lane8),
            None,
            "same warp, after __syncwarp"
        );
        let other_warp = stamp(40, 0, true);
        assert!(
            shadow
                .access(0, 4, other_warp, &clocks[40 * 32..41 * 32])
                .is_some(),
            "another warp's lanes"
        );
    }

    #[test]
    fn a_partial_warp_barrier_orders_only_the_lanes_in_its_mask() {
        let warp = 32;
        let mut clocks = vec![0u32; 32 * warp];
        let row = |clocks: &[u32], t: usize| clocks[t * warp..(t + 1) * warp].to_vec();
        let mut shadow = with_one_array();
        shadow.access(0, 4, stamp(0, 0, true), &row(&clocks, 0));
        // Each half of the warp passes its own __syncwarp(mask).
        synchronize(&mut clocks, warp, 0, 0x0000_ffff);
        synchronize(&mut clocks, warp, 0, 0xffff_0000);
        assert_eq!(
            shadow.access(0, 4, stamp(5, 0, false), &row(&clocks, 5)),
            None,
            "lane 5 synchronised with lane 0"
        );
        let mut shadow = with_one_array();
        shadow.access(0, 4, stamp(0, 0, true), NO_CLOCK);
        assert!(
            shadow
                .access(0, 4, stamp(20, 0, false), &row(&clocks, 20))
                .is_some(),
            "lane 20 only synchronised with its own half"
        );
        // Through a third lane: 0 with 1, then 1 with 2 orders 0's access before 2's.
        let mut clocks = vec![0u32; 32 * warp];
        let mut shadow = with_one_array();
        shadow.access(0, 4, stamp(0, 0, true), &row(&clocks, 0));
        synchronize(&mut clocks, warp, 0, 0b011);
        synchronize(&mut clocks, warp, 0, 0b110);
        assert_eq!(
            shadow.access(0, 4, stamp(2, 0, false), &row(&clocks, 2)),
            None
        );
        // A lane's later access is not ordered by a barrier it passed before it.
        let mut epoch = stamp(0, 0, true);
        epoch.warp_epoch = clocks[0];
        let mut shadow = with_one_array();
        shadow.access(8, 4, epoch, &row(&clocks, 0));
        assert!(
            shadow
                .access(8, 4, stamp(1, 0, false), &row(&clocks, 1))
                .is_some(),
            "lane 0 wrote after the barrier it passed with lane 1"
        );
    }
}
