//! initcheck: which bytes of a device allocation were ever written since it was allocated, and
//! which bytes of a block's shared memory its threads wrote.
//!
//! A GPU's fresh allocation holds whatever its memory held before; the simulator's reads as
//! zero, which hides a kernel that reads memory nobody wrote. On a device with initcheck each
//! device allocation keeps one bit per byte ([`Written`]), set by every write that lands in it:
//! copies and fills (`crate::memory::Region::prepare_write`, which every host-side writer calls),
//! the checked accesses of compiled kernels (`super::memcheck::check`), and, for closure kernels
//! (whose accesses are not instrumented), the whole of every array they are given. A checked
//! kernel's read (or atomic) of a byte whose bit is clear is refused, as compute-sanitizer's
//! initcheck reports it. Managed, mapped and imported memory is not tracked: the host writes it
//! directly. Once every byte was written the allocation is granted like any other, so a kernel
//! over fully initialised memory pays nothing more than memcheck.
//!
//! A block's shared memory starts as whatever the previous block left there, on a GPU as on the
//! simulator; each block keeps the bytes its threads wrote of each shared array and of the
//! dynamic shared memory ([`SharedWritten`]), and a read of another byte is refused the same
//! way.

use super::Access;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The written bytes of one allocation: a bit per byte, and how many are still unwritten.
pub(crate) struct Written {
    bits: Box<[AtomicU64]>,
    missing: AtomicUsize,
    len: usize,
}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Written")
            .field("len", &self.len)
            .field("missing", &self.missing.load(Ordering::Relaxed))
            .finish()
    }
}

/// How far [`Written::written_run`] looks each way, in words of 64 bytes (32 KiB): a stretch
/// that long is granted at once, and a miss scans no more.
const RUN_WORDS: usize = 512;

/// The bits of word `word` that bytes `[start, end)` cover.
fn mask(word: usize, (start, end): (usize, usize)) -> u64 {
    let low = start.saturating_sub(word * 64).min(64);
    let high = end.saturating_sub(word * 64).min(64);
    let upto = |n: usize| if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    upto(high) & !upto(low)
}

impl Written {
    /// Nothing written yet, of `len` bytes.
    pub(crate) fn new(len: usize) -> Written {
        Written {
            bits: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            missing: AtomicUsize::new(len),
            len,
        }
    }

    /// Whether every byte was written.
    #[inline]
    pub(crate) fn complete(&self) -> bool {
        self.missing.load(Ordering::Acquire) == 0
    }

    /// Bytes `[offset, offset + len)` were written (clamped to the allocation).
    pub(crate) fn mark(&self, offset: usize, len: usize) {
        if self.complete() {
            return;
        }
        let end = offset.saturating_add(len).min(self.len);
        let start = offset.min(end);
        if start == end {
            return;
        }
        let mut newly = 0;
        for word in start / 64..end.div_ceil(64) {
            let bits = mask(word, (start, end));
            let old = self.bits[word].fetch_or(bits, Ordering::AcqRel);
            newly += (bits & !old).count_ones() as usize;
        }
        self.missing.fetch_sub(newly, Ordering::AcqRel);
    }

    /// The stretch of whole written words around `offset` (at most [`RUN_WORDS`] words each way),
    /// as byte offsets `[start, end)`; empty when the word at `offset` is not written whole.
    /// Accesses inside it need no recording nor checking, so it may be granted.
    pub(crate) fn written_run(&self, offset: usize) -> (usize, usize) {
        let whole = |word: usize| {
            self.bits
                .get(word)
                .is_some_and(|w| w.load(Ordering::Acquire) == u64::MAX)
        };
        let at = offset / 64;
        if !whole(at) {
            return (offset, offset);
        }
        let first = (at.saturating_sub(RUN_WORDS)..at)
            .rev()
            .find(|&w| !whole(w))
            .map_or(at.saturating_sub(RUN_WORDS), |w| w + 1);
        let last = (at + 1..at + 1 + RUN_WORDS)
            .find(|&w| !whole(w))
            .unwrap_or(at + 1 + RUN_WORDS);
        (first * 64, (last * 64).min(self.len))
    }

    /// The first byte of `[offset, offset + len)` never written, if any (bytes past the
    /// allocation count as written: memcheck refuses them first).
    pub(crate) fn first_unwritten(&self, offset: usize, len: usize) -> Option<usize> {
        if self.complete() {
            return None;
        }
        let end = offset.saturating_add(len).min(self.len);
        let start = offset.min(end);
        (start / 64..end.div_ceil(64)).find_map(|word| {
            let wanted = mask(word, (start, end));
            let unwritten = wanted & !self.bits[word].load(Ordering::Acquire);
            (unwritten != 0).then(|| word * 64 + unwritten.trailing_zeros() as usize)
        })
    }
}

/// The bytes a block's threads wrote of its shared memory, per array (by its range).
#[derive(Debug, Default)]
pub(crate) struct SharedWritten {
    arrays: Vec<(usize, Written)>,
}

impl SharedWritten {
    /// An access of `[address, address + size)` inside the shared array at `[start, end)`: a
    /// write is recorded; a read or atomic of a byte no thread of the block wrote is refused
    /// with that byte's offset in the array. `Ok(true)` once the whole array was written.
    pub(crate) fn access(
        &mut self,
        (start, end): (usize, usize),
        address: usize,
        size: u64,
        access: Access,
    ) -> Result<bool, usize> {
        let index = match self.arrays.iter().position(|(at, _)| *at == start) {
            Some(index) => index,
            None => {
                self.arrays
                    .push((start, Written::new(end.saturating_sub(start))));
                self.arrays.len() - 1
            }
        };
        let written = &self.arrays[index].1;
        let offset = address.saturating_sub(start);
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if !access.reads() {
            written.mark(offset, size);
        } else if let Some(first) = written.first_unwritten(offset, size) {
            return Err(first);
        }
        Ok(written.complete())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_shared_arrays_are_written_apart() {
        let mut shared = SharedWritten::default();
        let tile = (1000, 1128);
        let sums = (2000, 2016);
        assert_eq!(shared.access(tile, 1000, 4, Access::Read), Err(0));
        assert_eq!(shared.access(tile, 1000, 64, Access::Write), Ok(false));
        assert_eq!(shared.access(tile, 1060, 4, Access::Read), Ok(false));
        assert_eq!(shared.access(tile, 1062, 4, Access::Atomic), Err(64));
        assert_eq!(
            shared.access(sums, 2000, 4, Access::Read),
            Err(0),
            "another array"
        );
        assert_eq!(shared.access(tile, 1064, 64, Access::Write), Ok(true));
        assert_eq!(shared.access(tile, 1124, 4, Access::Read), Ok(true));
    }

    #[test]
    fn masks_cover_the_bytes_of_their_word() {
        assert_eq!(mask(0, (0, 64)), u64::MAX);
        assert_eq!(mask(0, (1, 3)), 0b110);
        assert_eq!(mask(1, (60, 70)), 0b11_1111);
        assert_eq!(mask(0, (60, 70)), 0xf << 60);
        assert_eq!(mask(2, (60, 70)), 0);
    }

    #[test]
    fn writes_are_counted_once_and_reads_find_the_first_gap() {
        let written = Written::new(200);
        assert_eq!(written.first_unwritten(0, 4), Some(0));
        written.mark(0, 100);
        written.mark(50, 100);
        assert_eq!(written.first_unwritten(0, 150), None);
        assert_eq!(written.first_unwritten(148, 4), Some(150));
        assert!(!written.complete());
        written.mark(150, 1000);
        assert!(written.complete(), "{written:?}");
        assert_eq!(written.first_unwritten(0, 200), None);
        // A write across many words, and one clamped at the end.
        let wide = Written::new(1000);
        wide.mark(3, 990);
        assert_eq!(wide.first_unwritten(0, 1000), Some(0));
        // Whole words only: 64..960 (bytes 960..993 fill part of the last word).
        assert_eq!(wide.written_run(500), (64, 960));
        assert_eq!(wide.written_run(10), (10, 10));
        assert_eq!(wide.first_unwritten(3, 990), None);
        assert_eq!(wide.first_unwritten(990, 10), Some(993));
        wide.mark(0, 3);
        wide.mark(993, usize::MAX);
        assert!(wide.complete());
    }
}
