//! Copying bytes between simulated device memory and host memory.
//!
//! A plain `memmove`, except where it is pathologically slow: when the destination lies 1 to 31
//! bytes past the source modulo a page (4 KiB), glibc's `memcpy` on AMD Zen machines (`rep movsb`)
//! runs at ~2.8 GiB/s instead of 30-90 GiB/s for copies of 4 KiB to 256 KiB (and ~4 instead of
//! ~15 GiB/s for 256 MiB), each load waiting for a store it only seems to overlap (4 KiB
//! aliasing). That is exactly what happens between a
//! device block (page-aligned) and a `Vec` of 128 KiB or more (whose heap block starts 16 bytes
//! into a page). Copying such ranges from the end backwards keeps every load clear of the stores
//! before it.

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

/// Copies 64-byte blocks from the end to the start, then the head.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes; the ranges do not overlap.
unsafe fn copy_backwards(src: *const u8, dst: *mut u8, len: usize) {
    type Block = [u128; 4];
    const BLOCK: usize = std::mem::size_of::<Block>();
    let mut end = len;
    while end >= BLOCK {
        end -= BLOCK;
        // SAFETY: `end..end + BLOCK` lies within both ranges; unaligned accesses are allowed.
        unsafe {
            let block = src.add(end).cast::<Block>().read_unaligned();
            dst.add(end).cast::<Block>().write_unaligned(block);
        }
    }
    // SAFETY: the first `end` bytes of both ranges, which do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, end) };
}

#[cfg(test)]
mod tests {
    use super::copy;
    use proptest::prelude::*;

    proptest! {
        // Miri runs this module too: a few cases there, and no failure file (no file system).
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 3 } else { 256 },
            failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
            ..ProptestConfig::default()
        })]

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

    #[test]
    fn the_backwards_path_is_taken_and_correct() {
        // A destination 16 bytes past the source modulo a page, as between a device block and
        // a large `Vec`.
        let source: Vec<u8> = (0..70_000u32).map(|i| (i * 7) as u8).collect();
        let mut target = vec![0u8; 70_000 + 8192];
        let src = source.as_ptr();
        let page = 4096;
        let offset =
            (page + 16 - (target.as_ptr() as usize).wrapping_sub(src as usize) % page) % page;
        // SAFETY: `offset + 70_000` fits in `target`.
        unsafe { copy(src, target.as_mut_ptr().add(offset), source.len()) };
        assert_eq!(
            (target.as_ptr() as usize + offset).wrapping_sub(src as usize) % page,
            16
        );
        assert_eq!(&target[offset..offset + source.len()], &source[..]);
    }
}
