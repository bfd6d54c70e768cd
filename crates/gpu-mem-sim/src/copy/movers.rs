//! Copying bytes between simulated device memory and host memory.
//!
//! Two movers, as on a GPU. The host CPU copies to and from pageable memory (a driver stages
//! such copies through its own buffers with a CPU copy): [`copy`], a plain `memmove`. The copy
//! engine moves page-locked host memory and device memory (DMA): [`copy_by`] with
//! [`Mover::CopyEngine`], which for large copies writes with streaming (non-temporal) stores, as
//! DMA writes memory without passing through the CPU's caches. A copy larger than the last-level
//! cache gains from that: it skips reading every destination line into the cache before writing
//! it (measured on a 2-core AMD EPYC with a 32 MiB L3, copies cycling through three buffers:
//! 16 MiB 7.4-8.1 GiB/s with `memcpy`, 12.5-13.6 streaming; 64 MiB 7.2 vs 13.5-14.2). Smaller
//! copies stay in the cache, where `memcpy` is faster (4 MiB: 32 vs 14.5 GiB/s), so they are
//! plain copies whoever moves them. A copy engine's copy of [`ASSISTED_MIN`] bytes or more made
//! by a stream's job is split with the thread waiting for that stream (`super::assist`), and one
//! of [`STREAMING_MIN`] or more with the simulator's worker threads.
//!
//! `memmove` is avoided where it is pathologically slow: when the destination lies 1 to 31
//! bytes past the source modulo a page (4 KiB), glibc's `memcpy` on AMD Zen machines (`rep movsb`)
//! runs at ~2.8 GiB/s instead of 30-90 GiB/s for copies of 4 KiB to 256 KiB (and ~4 instead of
//! ~15 GiB/s for 256 MiB), each load waiting for a store it only seems to overlap (4 KiB
//! aliasing). That is exactly what happens between a
//! device block (page-aligned) and a `Vec` of 128 KiB or more (whose heap block starts 16 bytes
//! into a page). Such ranges are copied from the end backwards, in chunks small enough for
//! `memcpy`'s vector loop, which keeps every load clear of the stores before it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Who moves the bytes of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mover {
    /// The host CPU: copies to or from pageable host memory.
    Cpu,
    /// The device's copy engine: page-locked (or mapped) host memory, device to device.
    CopyEngine,
}

/// The copy engine streams copies of at least this many bytes: a copy this large (source and
/// destination together as large as a common last-level cache) leaves nothing useful in the
/// cache anyway.
pub(crate) const STREAMING_MIN: usize = 16 << 20;

/// Copies `len` bytes from `src` to `dst` as `mover` does; the ranges may overlap. A large
/// copy-engine copy of disjoint ranges may be split with other threads, each copying whole
/// chunks; it is complete, and visible to this thread, when this returns.
///
/// # Safety
/// As for [`std::ptr::copy`]: `src` readable and `dst` writable for `len` bytes.
pub(crate) unsafe fn copy_by(mover: Mover, src: *const u8, dst: *mut u8, len: usize) {
    let disjoint = (dst as usize).abs_diff(src as usize) >= len;
    if mover == Mover::CopyEngine && disjoint {
        if len >= STREAMING_MIN {
            // SAFETY: the caller's contract; the ranges do not overlap.
            unsafe { copy_in_chunks(src, dst, len) };
            return;
        }
        if len >= ASSISTED_MIN {
            let chunks = Chunks::new(src, dst, len, ASSISTED_CHUNK, false);
            // The work outlives every helper's use (`offer_current` returns after them).
            if super::assist::offer_current(&|| chunks.copy_until_done()) {
                return;
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { copy(src, dst, len) };
}

/// A copy-engine copy of at least this many bytes, made by a stream's job, is shared with the
/// thread that waits for that stream (`super::assist`), which spins on a core of its own anyway:
/// it needs no wake-up, so copies far smaller than [`STREAMING_MIN`] gain.
/// (Under Miri, which checks the sharing and not the sizes, both are 16 times smaller.)
pub(crate) const ASSISTED_MIN: usize = if cfg!(miri) { 16 << 10 } else { 256 << 10 };

/// The part of an assisted copy one thread takes at a time.
const ASSISTED_CHUNK: usize = if cfg!(miri) { 4 << 10 } else { 64 << 10 };

/// The two ranges of a copy split into chunks, shared with the threads that take some.
struct Chunks {
    src: *const u8,
    dst: *mut u8,
    len: usize,
    /// Bytes per chunk.
    chunk: usize,
    /// Whether chunks are copied with streaming stores (else as by [`copy`]).
    streaming: bool,
    next: AtomicUsize,
}

// SAFETY: the chunks are disjoint parts of ranges the copying thread may read and write (and
// keeps valid until every helper is done, see `copy_in_chunks` and `crate::assist`); each chunk
// is claimed by one thread only, through `next`.
unsafe impl Sync for Chunks {}

impl Chunks {
    /// `src..src + len` to `dst..dst + len` (disjoint ranges) in chunks of `chunk` bytes.
    fn new(src: *const u8, dst: *mut u8, len: usize, chunk: usize, streaming: bool) -> Chunks {
        Chunks {
            src,
            dst,
            len,
            chunk,
            streaming,
            next: AtomicUsize::new(0),
        }
    }

    /// Copies chunks until none is left.
    fn copy_until_done(&self) {
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(at) = index.checked_mul(self.chunk).filter(|&at| at < self.len) else {
                return;
            };
            let len = self.chunk.min(self.len - at);
            // SAFETY: `at..at + len` lies in both ranges (`Chunks` contract), claimed by this
            // thread alone.
            unsafe {
                let (src, dst) = (self.src.add(at), self.dst.add(at));
                if self.streaming {
                    copy_streaming(src, dst, len);
                } else {
                    copy(src, dst, len);
                }
            }
        }
    }
}

/// The part of a large copy one thread takes at a time.
const CHUNK: usize = 2 << 20;

/// Streams a large copy in chunks, which the simulator's idle worker threads help copy: a GPU's
/// copy engine moves memory beside the CPU's work, and a multi-core machine's memory bandwidth is
/// more than one core can use (measured as above: 64 MiB 12.1-12.8 GiB/s on one core,
/// 15.7-17.2 on two; 256 MiB 12.6-14.1 vs 16.5-16.9). Smaller copies are not split this way:
/// waking a helper costs about as much as it saves below a few MiB (a 1 MiB device-to-device copy
/// split four ways was slower, 24-30 vs 33 GiB/s); they go to a thread that is awake already
/// (see [`ASSISTED_MIN`]).
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes; the ranges do not overlap.
unsafe fn copy_in_chunks(src: *const u8, dst: *mut u8, len: usize) {
    let chunks = Chunks::new(src, dst, len, CHUNK, true);
    // `run_parallel` returns once every helper is done (their copies visible here): the ranges
    // outlive every use.
    crate::workers::run_parallel(len.div_ceil(CHUNK) - 1, &|| chunks.copy_until_done());
}

/// Copies with streaming stores, 64 bytes at a time once the destination is aligned to a cache
/// line, reading ahead of the loads with non-temporal prefetches; ends with a store fence, so
/// the bytes are visible to whoever synchronizes with this thread afterwards.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes; the ranges do not overlap.
#[cfg(all(target_arch = "x86_64", not(miri)))]
unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{
        __m128i, _MM_HINT_NTA, _mm_loadu_si128, _mm_prefetch, _mm_sfence, _mm_stream_si128,
    };
    /// How far ahead of the loads the prefetches run.
    const AHEAD: usize = 512;
    let head = (dst as usize).wrapping_neg() % 64;
    let head = head.min(len);
    // SAFETY: the first `head` bytes of both ranges, which do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut at = head;
    while len - at >= 64 {
        // A prefetch is a hint that never faults: its address may lie past the source (made
        // with `wrapping_add`, never dereferenced). Loads may be unaligned.
        // SAFETY: `at..at + 64` lies within both ranges; SSE2 is part of x86-64; `dst + at` is
        // 64-byte aligned (the head took it there), as the streaming stores require.
        unsafe {
            _mm_prefetch::<_MM_HINT_NTA>(src.wrapping_add(at + AHEAD).cast::<i8>());
            let from = src.add(at).cast::<__m128i>();
            let to = dst.add(at).cast::<__m128i>();
            let (a, b) = (_mm_loadu_si128(from), _mm_loadu_si128(from.add(1)));
            let (c, d) = (_mm_loadu_si128(from.add(2)), _mm_loadu_si128(from.add(3)));
            _mm_stream_si128(to, a);
            _mm_stream_si128(to.add(1), b);
            _mm_stream_si128(to.add(2), c);
            _mm_stream_si128(to.add(3), d);
        }
        at += 64;
    }
    // Streaming stores are weakly ordered: fence them before anything that publishes the copy.
    // SAFETY: SSE is part of x86-64.
    unsafe { _mm_sfence() };
    // SAFETY: the rest of both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at) };
}

/// Elsewhere (and under Miri, which has no streaming stores) a plain copy.
///
/// # Safety
/// As for [`copy`].
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { copy(src, dst, len) };
}

/// Copies `len` bytes from `src` to `dst`; the ranges may overlap.
///
/// # Safety
/// As for [`std::ptr::copy`]: `src` readable and `dst` writable for `len` bytes.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    let delta = (dst as usize).wrapping_sub(src as usize) % 4096;
    let disjoint = (dst as usize).abs_diff(src as usize) >= len;
    if len >= 2048 && (1..32).contains(&delta) && disjoint {
        // SAFETY: the caller's contract; the ranges do not overlap.
        unsafe { copy_backwards(src, dst, len) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy(src, dst, len) };
    }
}

/// Copies the ranges from the end to the start in chunks of [`ALIASED_CHUNK`] bytes, each with
/// `memcpy`.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes; the ranges do not overlap.
unsafe fn copy_backwards(src: *const u8, dst: *mut u8, len: usize) {
    let mut end = len;
    while end > 0 {
        let chunk = end.min(ALIASED_CHUNK);
        end -= chunk;
        // SAFETY: `end..end + chunk` lies within both ranges, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(end), dst.add(end), chunk) };
    }
}

/// The chunk of [`copy_backwards`]: below the size from which glibc's AVX2 and
/// fast-short-`rep movsb` variants of `memcpy` use `rep movsb` (the slow path; 2,112 bytes and
/// more), so on the machines this was measured on each chunk takes the vector loop. (glibc's
/// SSE2-only variant starts `rep movsb` at 2,048, so there whole chunks take it.) The copy is
/// library code either way, as fast in a debug build, where a loop of our own over 64-byte
/// blocks ran at ~1 GiB/s (and the tests of most programs using the simulator are debug
/// builds).
const ALIASED_CHUNK: usize = 2048;

#[cfg(test)]
mod tests {
    use super::{
        ASSISTED_CHUNK, ASSISTED_MIN, Mover, STREAMING_MIN, copy, copy_by, copy_streaming,
    };
    use proptest::prelude::*;

    proptest! {
        // Miri runs this module too: a few cases there.
        #![proptest_config(crate::test_support::proptest_config(3))]

        /// Whatever the sizes and relative offsets (the backwards path included), the copy
        /// equals `ptr::copy`.
        #[test]
        fn copies_like_memmove(len in 0usize..9000, src_at in 0usize..4096, dst_at in 0usize..4096, seed in any::<u8>()) {
            let mut source = vec![0u8; len + 4096];
            for (i, b) in source.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
            }
            let mut ours = vec![0xAAu8; len + 4096];
            let mut theirs = ours.clone();
            let src_at = src_at.min(4096);
            let dst_at = dst_at.min(4096);
            // SAFETY: both ranges lie inside their buffers.
            unsafe {
                copy(source.as_ptr().add(src_at), ours.as_mut_ptr().add(dst_at), len);
                std::ptr::copy(source.as_ptr().add(src_at), theirs.as_mut_ptr().add(dst_at), len);
            }
            prop_assert_eq!(ours, theirs);
        }

        /// Streaming copies equal `ptr::copy` for any length and relative alignment (the head
        /// up to a cache line, the 64-byte body, the tail).
        #[test]
        fn streaming_copies_like_memmove(len in 0usize..5000, src_at in 0usize..128, dst_at in 0usize..128, seed in any::<u8>()) {
            let source: Vec<u8> = (0..len + 128).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect();
            let mut ours = vec![0x55u8; len + 128];
            let mut theirs = ours.clone();
            // SAFETY: both ranges lie inside their (distinct) buffers.
            unsafe {
                copy_streaming(source.as_ptr().add(src_at), ours.as_mut_ptr().add(dst_at), len);
                std::ptr::copy(source.as_ptr().add(src_at), theirs.as_mut_ptr().add(dst_at), len);
            }
            prop_assert_eq!(ours, theirs);
        }

        /// Overlapping ranges inside one buffer behave as `ptr::copy`.
        #[test]
        fn overlapping_ranges(len in 0usize..6000, src_at in 0usize..64, dst_at in 0usize..64) {
            let mut ours: Vec<u8> = (0..len + 64).map(|i| i as u8).collect();
            let mut theirs = ours.clone();
            // SAFETY: both ranges lie inside the buffer.
            unsafe {
                let base = ours.as_mut_ptr();
                copy(base.add(src_at), base.add(dst_at), len);
                let base = theirs.as_mut_ptr();
                std::ptr::copy(base.add(src_at), base.add(dst_at), len);
            }
            prop_assert_eq!(ours, theirs);
        }
    }

    /// A copy-engine copy large enough to be streamed in chunks by several threads, with a
    /// ragged head and tail, equals `ptr::copy`; so does a CPU copy of the same size.
    #[test]
    #[cfg_attr(miri, ignore = "copies tens of MiB")]
    fn large_copies_by_either_mover_are_exact() {
        let len = STREAMING_MIN + 3 * 4096 + 17;
        let source: Vec<u8> = (0..len + 64).map(|i| (i % 251) as u8).collect();
        for mover in [Mover::CopyEngine, Mover::Cpu] {
            for (src_at, dst_at) in [(0, 0), (3, 40), (33, 1)] {
                let mut target = vec![0u8; len + 64];
                // SAFETY: both ranges lie inside their (distinct) buffers.
                unsafe {
                    copy_by(
                        mover,
                        source.as_ptr().add(src_at),
                        target.as_mut_ptr().add(dst_at),
                        len,
                    )
                };
                assert!(
                    target[dst_at..dst_at + len] == source[src_at..src_at + len],
                    "{mover:?} from +{src_at} to +{dst_at}"
                );
                assert!(
                    target[..dst_at].iter().all(|&b| b == 0),
                    "{mover:?}: before"
                );
                assert!(
                    target[dst_at + len..].iter().all(|&b| b == 0),
                    "{mover:?}: after"
                );
            }
        }
    }

    #[test]
    fn the_backwards_path_is_taken_and_correct() {
        // A destination 16 bytes past the source modulo a page, as between a device block and
        // a large `Vec`.
        // Several chunks and a ragged end (fewer under Miri, which interprets every byte).
        let len: u32 = if cfg!(miri) { 9_000 } else { 70_000 };
        let source: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let mut target = vec![0u8; len as usize + 8192];
        let src = source.as_ptr();
        let page = 4096;
        let offset =
            (page + 16 - (target.as_ptr() as usize).wrapping_sub(src as usize) % page) % page;
        // SAFETY: `offset + len` fits in `target`.
        unsafe { copy(src, target.as_mut_ptr().add(offset), source.len()) };
        assert_eq!(
            (target.as_ptr() as usize + offset).wrapping_sub(src as usize) % page,
            16
        );
        assert_eq!(&target[offset..offset + source.len()], &source[..]);
    }

    /// Copy-engine copies made in a stream's job, split with a thread that helps as a waiting
    /// thread does (chunks from either thread, a ragged last chunk), are exact; so are those
    /// made outside any job, which nobody helps.
    #[test]
    fn assisted_copies_are_exact() {
        use crate::copy::assist::{Assist, with_helper};
        let sizes: &[usize] = if cfg!(miri) {
            &[ASSISTED_MIN + 9]
        } else {
            &[
                ASSISTED_MIN,
                ASSISTED_MIN + 4096 + 13,
                3 * ASSISTED_CHUNK * 7 + 5,
                4 << 20,
            ]
        };
        let assist = Assist::default();
        with_helper(&assist, || {
            for &len in sizes {
                let source: Vec<u8> = (0..len + 8).map(|i| (i % 241) as u8).collect();
                for in_job in [true, false] {
                    let mut target = vec![0u8; len + 8];
                    let mut copy_now = || {
                        // SAFETY: both ranges lie inside their (distinct) buffers.
                        unsafe {
                            copy_by(
                                Mover::CopyEngine,
                                source.as_ptr().add(3),
                                target.as_mut_ptr().add(5),
                                len,
                            )
                        }
                    };
                    if in_job {
                        assist.running(copy_now);
                    } else {
                        copy_now();
                    }
                    assert!(target[5..5 + len] == source[3..3 + len], "{len} bytes");
                    assert!(
                        target[..5]
                            .iter()
                            .chain(&target[5 + len..])
                            .all(|&b| b == 0)
                    );
                }
            }
        });
    }
}
