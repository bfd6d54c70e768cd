//! Copies between device ranges and host bytes with the locks they need: a range's region
//! locked (and the mapped window's, when the host side is mapped memory, in address order), the
//! bytes about to be overwritten prepared, then the bytes moved by the given mover.

use super::movers::{self, Mover};
use crate::memory::{Range, Region};
use std::sync::{Arc, MutexGuard};

/// Locks a device range's region and, when the host side of a copy lies in mapped memory, that
/// window's region too (in address order, so two opposite copies cannot deadlock).
fn lock_pair<'a>(
    range: &'a Range,
    host_window: Option<&'a Arc<Region>>,
) -> (MutexGuard<'a, ()>, Option<MutexGuard<'a, ()>>) {
    match host_window {
        Some(window) if !Arc::ptr_eq(window, &range.region) => {
            if window.start() < range.region.start() {
                let w = window.lock();
                (range.region.lock(), Some(w))
            } else {
                let r = range.region.lock();
                (r, Some(window.lock()))
            }
        }
        _ => (range.region.lock(), None),
    }
}

/// Copies host bytes into a device range. The host side may be mapped memory (even the same
/// memory as the device range), so the copy allows overlap and holds both regions' locks.
///
/// # Safety
/// `src` is readable for `range.len` bytes.
pub(crate) unsafe fn write_range(
    range: &Range,
    src: *const u8,
    host_window: Option<&Arc<Region>>,
    mover: Mover,
) {
    let (guard, _window) = lock_pair(range, host_window);
    range.region.prepare_write(&guard, range.offset, range.len);
    // SAFETY: the range was validated against the region, whose lock is held (and the mapped
    // window's, when the host side is mapped); `copy_by` allows the two sides to overlap; the
    // caller guarantees the source.
    unsafe { movers::copy_by(mover, src, range.region.host_ptr(range.offset), range.len) };
}

/// Copies a device range into host bytes (see [`write_range`]).
///
/// # Safety
/// `dst` is writable for `range.len` bytes.
pub(crate) unsafe fn read_range(
    range: &Range,
    dst: *mut u8,
    host_window: Option<&Arc<Region>>,
    mover: Mover,
) {
    let _guards = lock_pair(range, host_window);
    // SAFETY: as in `write_range`.
    unsafe { movers::copy_by(mover, range.region.host_ptr(range.offset), dst, range.len) };
}

/// Copies between two device ranges of equal length (possibly in the same region): the copy
/// engine's work.
pub(crate) fn copy_ranges(dst: &Range, src: &Range) {
    if Arc::ptr_eq(&dst.region, &src.region) {
        let guard = dst.region.lock();
        dst.region.prepare_write(&guard, dst.offset, dst.len);
        // SAFETY: both ranges were validated inside this region, whose lock is held; `copy`
        // allows overlap.
        unsafe {
            movers::copy_by(
                Mover::CopyEngine,
                src.region.host_ptr(src.offset),
                dst.region.host_ptr(dst.offset),
                dst.len,
            )
        };
        return;
    }
    // Lock in address order so two opposite copies cannot deadlock.
    let (dst_guard, _src_guard) = if dst.region.start() < src.region.start() {
        let d = dst.region.lock();
        (d, src.region.lock())
    } else {
        let s = src.region.lock();
        (dst.region.lock(), s)
    };
    dst.region.prepare_write(&dst_guard, dst.offset, dst.len);
    // SAFETY: both ranges were validated in distinct regions whose locks are held.
    unsafe {
        movers::copy_by(
            Mover::CopyEngine,
            src.region.host_ptr(src.offset),
            dst.region.host_ptr(dst.offset),
            dst.len,
        )
    };
}

pub(crate) fn fill_range(range: &Range, value: u8) {
    let guard = range.region.lock();
    range.region.prepare_write(&guard, range.offset, range.len);
    // SAFETY: the range was validated against the region, whose lock is held.
    unsafe { std::ptr::write_bytes(range.region.host_ptr(range.offset), value, range.len) };
}
