//! The page-locked staging buffers of a stream's pageable copies, kept for reuse.
//!
//! A copy between a pageable host array and the device goes through a page-locked buffer (the
//! driver would stage it anyway, and only page-locked memory makes the copy asynchronous).
//! Allocating that buffer fresh each time costs more than small copies themselves (pytorch#134332),
//! so each stream keeps the buffers it made: a buffer is taken again once nothing but the cache
//! holds it (the copies that used it completed and their bookkeeping let it go). Sizes are
//! rounded up to a power of two, at least [`SMALLEST`], so buffers fit later copies of nearby
//! sizes; copies larger than [`LARGEST_KEPT`] get a buffer of their own size, not kept. A stream
//! keeps at most [`KEPT_PER_STREAM`] bytes; the buffers go with the stream, and idle ones go
//! when an allocation finds no room (`release_kept_memory`). While kept they are live
//! page-locked allocations in the device's statistics (made by the copy that first needed them).

use super::StreamInner;
use crate::backend::HostAllocFlags;
use crate::error::Result;
use crate::memory::HostBuffer;
use std::sync::Arc;

/// The smallest staging buffer made.
pub const SMALLEST: usize = 64 << 10;
/// The largest buffer kept for reuse (and rounded up to a power of two).
pub const LARGEST_KEPT: usize = 64 << 10 << 10;
/// The most bytes of staging buffers one stream keeps.
pub const KEPT_PER_STREAM: usize = 128 << 10 << 10;

/// The size of buffer made for a copy of `bytes` bytes.
fn size_for(bytes: usize) -> usize {
    if bytes > LARGEST_KEPT {
        bytes
    } else {
        bytes.max(SMALLEST).next_power_of_two()
    }
}

/// `true` when no copy uses `buffer`: only the cache holds it.
fn idle(buffer: &Arc<HostBuffer>) -> bool {
    Arc::strong_count(buffer) == 1
}

impl crate::device::Device {
    /// Gives back what gpu-mem keeps on this device for reuse and no work uses: the idle
    /// staging buffers of its streams' pageable copies, and the stream-ordered pool's kept
    /// memory (trimmed to what live allocations use), as PyTorch's `empty_cache`; returns the
    /// bytes given back. Allocations that find no room do this themselves first.
    pub fn release_cached_memory(&self) -> Result<u64> {
        let mut released = 0u64;
        for inner in super::streams_of(self) {
            released += inner.release_idle_staging() as u64;
        }
        released += crate::memory::trim_pool(self)?;
        Ok(released)
    }
}

impl StreamInner {
    /// A page-locked buffer of at least `bytes` bytes that no copy uses: a kept one of the
    /// right size, or a new one (kept when the stream has room for it).
    #[track_caller]
    pub(crate) fn staging_buffer(&self, bytes: usize) -> Result<Arc<HostBuffer>> {
        let size = size_for(bytes);
        {
            let kept = crate::sync::lock(&self.staging);
            if let Some(buffer) = kept.iter().find(|b| b.bytes() == size && idle(b)) {
                return Ok(Arc::clone(buffer));
            }
        }
        let buffer = Arc::new(HostBuffer::allocate(
            &self.device,
            size,
            HostAllocFlags::default(),
        )?);
        if size <= LARGEST_KEPT {
            let mut kept = crate::sync::lock(&self.staging);
            let held: usize = kept.iter().map(|b| b.bytes()).sum();
            if held + size <= KEPT_PER_STREAM {
                kept.push(Arc::clone(&buffer));
            }
        }
        Ok(buffer)
    }

    /// Drops the kept buffers no copy uses; the bytes they held (0: there were none, or the
    /// stream's list was busy).
    pub(crate) fn release_idle_staging(&self) -> usize {
        let Some(mut kept) = crate::sync::try_lock(&self.staging) else {
            return 0;
        };
        let mut released = 0;
        kept.retain(|buffer| {
            let keep = !idle(buffer);
            if !keep {
                released += buffer.bytes();
            }
            keep
        });
        released
    }
}

#[cfg(test)]
mod tests {
    use super::{LARGEST_KEPT, SMALLEST, size_for};

    #[test]
    fn sizes_round_to_powers_of_two_up_to_the_largest_kept() {
        assert_eq!(size_for(0), SMALLEST);
        assert_eq!(size_for(1), SMALLEST);
        assert_eq!(size_for(SMALLEST + 1), 2 * SMALLEST);
        assert_eq!(size_for(LARGEST_KEPT), LARGEST_KEPT);
        assert_eq!(size_for(LARGEST_KEPT + 1), LARGEST_KEPT + 1);
    }
}
