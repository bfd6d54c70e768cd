//! racecheck: conflicting accesses to a block's shared memory by different threads with no
//! barrier between them, as compute-sanitizer's racecheck finds them on a GPU.
//!
//! Every simulated thread counts the block barriers it has passed, and the warp barriers and
//! warp collectives (its [`Stamp`]). All threads of a block pass the same block barriers in the
//! same order, so an access by one thread is ordered before another thread's access exactly
//! when the later one has passed more block barriers, or, in the same warp, more warp
//! barriers; anything else may happen at the same time on a GPU. Each byte of shared memory
//! keeps its last write and the reads since, of two threads at most ([`Shadow`]: enough for a
//! write to meet another thread's read where there is one); a write after an unordered read or
//! write of another thread, or a read after an unordered write, is a [`Hazard`]. Atomics order
//! themselves and are not recorded.

use std::collections::HashMap;

/// Who accessed a word, and where the thread stood then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The block (linear index in the grid) and the thread (linear index in the block).
    pub(crate) block: u64,
    pub(crate) thread: u32,
    /// The thread's warp.
    pub(crate) warp: u32,
    /// Block barriers, and warp barriers and collectives, the thread has passed.
    pub(crate) block_syncs: u32,
    pub(crate) warp_syncs: u32,
    /// The access's code address (for its source line).
    pub(crate) pc: usize,
    pub(crate) write: bool,
}

impl Stamp {
    /// Whether this (earlier) access is ordered before `later`'s.
    fn ordered_before(&self, later: &Stamp) -> bool {
        self.block != later.block
            || self.thread == later.thread
            || later.block_syncs > self.block_syncs
            || (self.warp == later.warp && later.warp_syncs > self.warp_syncs)
    }
}

/// Two unordered accesses of different threads to one word, at least one a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hazard {
    pub(crate) earlier: Stamp,
    pub(crate) later: Stamp,
    pub(crate) address: usize,
}

/// What one word of shared memory remembers.
#[derive(Debug, Default, Clone, Copy)]
struct Word {
    write: Option<Stamp>,
    /// Reads since the write: one, and another thread's beside it when they are unordered.
    read: Option<Stamp>,
    other_read: Option<Stamp>,
}

/// The last write and reads of each byte of a block's shared memory touched so far, a 4-byte
/// word's bytes under one key (one lookup per word for most accesses).
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    words: HashMap<usize, [Word; 4]>,
}

impl Shadow {
    /// Records an access of `size` bytes at `address`; the first hazard it makes, if any.
    pub(crate) fn access(&mut self, address: usize, size: usize, now: Stamp) -> Option<Hazard> {
        let end = address.saturating_add(size.max(1));
        let mut found = None;
        let mut byte = address;
        while byte < end {
            let lanes = self.words.entry(byte & !3).or_default();
            let w = &mut lanes[byte & 3];
            let unordered = |earlier: Option<Stamp>| earlier.filter(|e| !e.ordered_before(&now));
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
            found = found.or(hazard);
            if now.write {
                *w = Word {
                    write: Some(now),
                    read: None,
                    other_read: None,
                };
            } else {
                match unordered(w.read) {
                    // Another thread's read stays; this one is kept beside it.
                    Some(read) if read.thread != now.thread => w.other_read = Some(now),
                    _ => w.read = Some(now),
                }
            }
            byte += 1;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(thread: u32, block_syncs: u32, write: bool) -> Stamp {
        Stamp {
            block: 0,
            thread,
            warp: thread / 32,
            block_syncs,
            warp_syncs: 0,
            pc: 0,
            write,
        }
    }

    #[test]
    fn a_read_of_another_threads_write_needs_a_barrier_between() {
        let mut shadow = Shadow::default();
        assert_eq!(shadow.access(64, 4, stamp(0, 0, true)), None);
        let hazard = shadow
            .access(64, 4, stamp(1, 0, false))
            .expect("a read-after-write race");
        assert_eq!((hazard.earlier.thread, hazard.later.thread), (0, 1));
        let mut shadow = Shadow::default();
        shadow.access(64, 4, stamp(0, 0, true));
        assert_eq!(shadow.access(64, 4, stamp(1, 1, false)), None);
    }

    #[test]
    fn writes_after_reads_and_writes_of_others_are_races_reads_alone_are_not() {
        let mut shadow = Shadow::default();
        shadow.access(8, 4, stamp(3, 2, false));
        assert_eq!(shadow.access(8, 4, stamp(4, 2, false)), None);
        assert!(shadow.access(8, 4, stamp(5, 2, true)).is_some());
        let mut shadow = Shadow::default();
        shadow.access(8, 4, stamp(3, 2, true));
        assert!(
            shadow.access(10, 2, stamp(4, 2, true)).is_some(),
            "same bytes"
        );
        assert_eq!(shadow.access(12, 4, stamp(4, 2, true)), None, "next word");
        let mut shadow = Shadow::default();
        shadow.access(16, 1, stamp(0, 0, true));
        assert_eq!(
            shadow.access(17, 1, stamp(1, 0, true)),
            None,
            "other bytes of a word"
        );
        assert!(
            shadow.access(16, 4, stamp(2, 0, false)).is_some(),
            "a word over both"
        );
    }

    #[test]
    fn a_write_meets_another_threads_read_even_after_its_own() {
        let mut shadow = Shadow::default();
        shadow.access(8, 4, stamp(0, 1, false));
        shadow.access(8, 4, stamp(8, 1, false));
        let hazard = shadow
            .access(8, 4, stamp(8, 1, true))
            .expect("a write-after-read race");
        assert_eq!(hazard.earlier.thread, 0);
    }

    #[test]
    fn one_thread_or_a_warp_barrier_orders_its_own_accesses() {
        let mut shadow = Shadow::default();
        shadow.access(0, 4, stamp(7, 0, true));
        assert_eq!(shadow.access(0, 4, stamp(7, 0, false)), None);
        let mut later = stamp(8, 0, false);
        later.warp_syncs = 1;
        assert_eq!(
            shadow.access(0, 4, later),
            None,
            "same warp, after __syncwarp"
        );
        let mut other_warp = stamp(40, 0, true);
        other_warp.warp_syncs = 1;
        assert!(
            shadow.access(0, 4, other_warp).is_some(),
            "another warp's lanes"
        );
    }
}
