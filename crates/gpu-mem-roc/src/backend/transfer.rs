//! Copies and fills.
//!
//! * Asynchronous copies: `hsa_amd_memory_async_copy` with a fresh completion signal that
//!   depends on the stream's previous signal (and pending event waits). The host side must be
//!   GPU-accessible already: memory from `host_alloc` (used as is) or `host_register` (its agent
//!   pointer); async copies do no implicit page-locking, so any other host pointer is refused.
//! * Synchronous copies: first every stream of the device is drained (the trait orders them
//!   after all enqueued work), then the same async copy with no dependencies, then a wait.
//!   Pageable host memory is never page-locked: the copy goes through a page-locked bounce
//!   buffer of [`BOUNCE_BYTES`] (system-pool memory every GPU may access) in chunks, the host
//!   side of each chunk copied by the CPU. Locking the user's pages per copy (what
//!   `hsa_memory_copy` does) pins whole pages, so two threads copying neighbouring buffers of
//!   one page would take overlapping locks, and the first unlock could unpin the page under the
//!   other's copy. Bounce buffers are kept for reuse (one per concurrent copy) and freed with
//!   the backend.
//! * Fills: `hsa_amd_memory_fill` writes whole, 4-byte-aligned 32-bit words and is synchronous.
//!   A byte fill writes the aligned middle with the byte replicated into a word and the unaligned
//!   head and tail (at most 3 bytes each) by read-modify-write of their words through
//!   `hsa_memory_copy`. The neighbouring bytes of those words are rewritten with the values just
//!   read, so device work racing on them (already undefined for the caller) could be undone.
//!   `memset_d8_async` waits for the stream's earlier work, fills, and returns when done (HSA
//!   5.2.3 has no asynchronous fill); ordering is kept, overlap is not.

use super::RocBackend;
use super::signal::{self, Signal, State};
use gpu_mem_core::backend::{DevicePtr, Enqueued, StreamHandle, Transfer};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// One side of a copy: the address the copy engine uses and the agent it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    pub address: usize,
    pub agent: sys::hsa_agent_t,
}

impl Side {
    /// The same side `bytes` further on.
    pub fn offset(self, bytes: usize) -> Side {
        Side {
            address: self.address + bytes,
            agent: self.agent,
        }
    }
}

/// Size of one bounce buffer: synchronous copies of pageable memory move in chunks of this.
pub const BOUNCE_BYTES: usize = 4 << 20;

/// Idle page-locked bounce buffers (addresses of system-pool allocations of [`BOUNCE_BYTES`]
/// that every GPU with system-pool access may use).
#[derive(Debug, Default)]
pub struct BouncePool {
    idle: Mutex<Vec<usize>>,
}

impl BouncePool {
    /// Frees every idle buffer (the backend is going away: none is in use).
    pub fn release(&self, hsa: &crate::driver::Hsa) {
        for address in std::mem::take(&mut *lock(&self.idle)) {
            // SAFETY: a pool allocation made by `RocBackend::bounce`, idle (in the list), freed
            // once (taken out of the list).
            if let Err(e) = unsafe { hsa.memory_pool_free(address as *mut c_void) } {
                tracing::warn!(error = %e, "freeing a bounce buffer failed");
            }
        }
    }
}

/// A bounce buffer taken for one synchronous copy; back to the pool when dropped (after the
/// copy's completion signal was observed, or the copy was never started).
pub(super) struct Bounce<'a> {
    pool: &'a BouncePool,
    address: usize,
}

impl Bounce<'_> {
    /// The buffer's address (host and GPU address alike).
    pub(super) fn address(&self) -> usize {
        self.address
    }
}

impl Drop for Bounce<'_> {
    fn drop(&mut self) {
        lock(&self.pool.idle).push(self.address);
    }
}

impl RocBackend {
    pub(super) fn device_side(&self, device: usize, ptr: DevicePtr, bytes: usize) -> Result<Side> {
        let gpu = self.gpu(device)?;
        let end = ptr.checked_add(bytes as u64).ok_or(Error::InvalidPointer {
            kind: "device",
            address: ptr.0,
            bytes: bytes as u64,
            reason: "range overflows the address space",
        })?;
        let inside = lock(&self.registry.device)
            .range(..=ptr.0)
            .next_back()
            .is_some_and(|(base, a)| a.device == device && end.0 <= base + a.bytes as u64);
        if !inside {
            // The device address of host memory this GPU reaches (mapped page-locked, managed
            // or mapped-registered memory), which copies take as CUDA's do: a copy engine moves
            // it as the host side of a copy, at that address.
            if self
                .registry
                .host_of_gpu_address(device, ptr.0 as usize, bytes)
                .is_some()
            {
                return Ok(Side {
                    address: ptr.0 as usize,
                    agent: self.topology.host.agent,
                });
            }
            return Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: bytes as u64,
                reason: "not inside a live allocation of this device",
            });
        }
        Ok(Side {
            address: ptr.0 as usize,
            agent: gpu.agent,
        })
    }

    /// The host side of an asynchronous copy: must already be GPU-accessible.
    fn host_side_for_async(&self, device: usize, ptr: usize, bytes: usize) -> Result<Side> {
        let address = self
            .registry
            .gpu_address_of_host(device, ptr, bytes)
            .ok_or(Error::InvalidPointer {
                kind: "host",
                address: ptr as u64,
                bytes: bytes as u64,
                reason: "asynchronous copies need host memory from host_alloc or host_register, \
                         portable or made for this device",
            })?;
        Ok(Side {
            address,
            agent: self.topology.host.agent,
        })
    }

    /// The host side of a synchronous copy when `ptr` is already accessible to `device`'s GPU
    /// (host_alloc or host_register memory, portable or made for it); `None` otherwise (pageable
    /// memory, or another device's: copied through a bounce buffer).
    fn host_side_if_accessible(&self, device: usize, ptr: usize, bytes: usize) -> Option<Side> {
        self.registry
            .gpu_address_of_host(device, ptr, bytes)
            .map(|address| Side {
                address,
                agent: self.topology.host.agent,
            })
    }

    /// An idle bounce buffer, or a new one.
    pub(super) fn bounce(&self) -> Result<Bounce<'_>> {
        let pool = &self.bounce;
        if let Some(address) = lock(&pool.idle).pop() {
            return Ok(Bounce { pool, address });
        }
        // SAFETY: the system pool of the topology this runtime reported, initialised while the
        // backend lives.
        let ptr = unsafe {
            self.hsa
                .memory_pool_allocate(self.topology.host.pool.pool, BOUNCE_BYTES)
        }?;
        let agents: Vec<sys::hsa_agent_t> = self
            .topology
            .gpus
            .iter()
            .filter(|g| g.host_pool_access)
            .map(|g| g.agent)
            .collect();
        // SAFETY: `ptr` is the base of the allocation just made.
        if let Err(e) = unsafe { self.hsa.agents_allow_access(&agents, ptr) } {
            // SAFETY: just allocated, nothing uses it.
            let _ = unsafe { self.hsa.memory_pool_free(ptr) };
            return Err(e);
        }
        Ok(Bounce {
            pool,
            address: ptr as usize,
        })
    }

    /// Starts `dst <- src` behind `deps`, returning its completion signal.
    ///
    /// # Safety
    /// Both sides are accessible to the copy agents and stay valid until the signal completes.
    pub(super) unsafe fn start_copy(
        &self,
        dst: Side,
        src: Side,
        bytes: usize,
        deps: Vec<Arc<Signal>>,
        operation: &'static str,
    ) -> Result<Arc<Signal>> {
        let raw_deps: Vec<sys::hsa_signal_t> = deps.iter().map(|d| d.raw()).collect();
        let completion = Signal::new(&self.hsa, operation, true, deps)?;
        // SAFETY: guaranteed by the caller; the dependency signals are kept alive by
        // `completion` until it completes.
        unsafe {
            self.hsa.memory_async_copy(
                dst.address as *mut c_void,
                dst.agent,
                src.address as *const c_void,
                src.agent,
                bytes,
                &raw_deps,
                completion.raw(),
            )
        }?;
        Ok(completion)
    }

    /// Synchronous copy: drain the device, copy, wait.
    ///
    /// # Safety
    /// Both sides are accessible to the copy agents and valid for the call.
    unsafe fn copy_now(
        &self,
        device: usize,
        dst: Side,
        src: Side,
        bytes: usize,
        op: &'static str,
    ) -> Result<()> {
        self.drain_device_for_ordering(device);
        // SAFETY: forwarded from the caller.
        unsafe { self.copy_and_wait(dst, src, bytes, op) }
    }

    /// Copies and waits, without draining the device first (the caller did).
    ///
    /// # Safety
    /// As `copy_now`.
    pub(super) unsafe fn copy_and_wait(
        &self,
        dst: Side,
        src: Side,
        bytes: usize,
        op: &'static str,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller; this function waits for the copy to finish.
        let completion = unsafe { self.start_copy(dst, src, bytes, Vec::new(), op) }?;
        match signal::wait(&completion, self.wait_tick())? {
            State::Done | State::Pending => Ok(()),
            State::Failed(value) => Err(Error::AsyncFailure {
                operation: op,
                stream: 0,
                reason: format!(
                    "hsa_amd_memory_async_copy reported failure (signal value {value})"
                ),
            }),
        }
    }

    /// Enqueues a copy on `stream`.
    ///
    /// # Safety
    /// Both sides stay valid and GPU-accessible until the stream passes the copy.
    unsafe fn enqueue_copy(
        &self,
        device: usize,
        stream: StreamHandle,
        dst: Side,
        src: Side,
        bytes: usize,
        op: &'static str,
    ) -> Result<()> {
        let stream = self.stream(device, stream)?;
        let mut stream = lock(&stream);
        let deps = stream.dependencies()?;
        // SAFETY: forwarded from the caller.
        let completion = unsafe { self.start_copy(dst, src, bytes, deps, op) }?;
        stream.push(completion);
        Ok(())
    }

    /// Fills `bytes` bytes at `side` (from [`RocBackend::device_side`]) with `value`: device
    /// memory with the runtime's fills, host memory (the device address of page-locked, managed
    /// or registered memory) with the CPU at its host address.
    ///
    /// # Safety
    /// As [`RocBackend::fill_bytes`], for the memory `side` names.
    unsafe fn fill(&self, device: usize, side: Side, value: u8, bytes: usize) -> Result<()> {
        if side.agent.handle != self.topology.host.agent.handle {
            // SAFETY: forwarded.
            return unsafe { self.fill_bytes(side.address, value, bytes) };
        }
        let host = self
            .registry
            .host_of_gpu_address(device, side.address, bytes)
            .ok_or(Error::InvalidPointer {
                kind: "device",
                address: side.address as u64,
                bytes: bytes as u64,
                reason: "not inside a live allocation of this device",
            })?;
        // SAFETY: host memory of a live allocation or registration (looked up just now), which
        // no device work touches (caller).
        unsafe { std::ptr::write_bytes(host as *mut u8, value, bytes) };
        Ok(())
    }

    /// Byte fill of `[dst, dst + bytes)` from 32-bit word fills plus read-modify-write of the
    /// partial words at either end.
    ///
    /// # Safety
    /// The range lies in one live device allocation (whose base is word aligned) and no device
    /// work touches it.
    unsafe fn fill_bytes(&self, dst: usize, value: u8, bytes: usize) -> Result<()> {
        let plan = FillPlan::new(dst, bytes);
        if let Some((from, to)) = plan.head {
            // SAFETY: forwarded.
            unsafe { self.patch_bytes(from, to, value) }?;
        }
        if let Some((start, words)) = plan.words {
            let word = u32::from_ne_bytes([value; 4]);
            // SAFETY: `start` is 4-byte aligned and the words lie inside the allocation.
            unsafe { self.hsa.memory_fill(start as *mut c_void, word, words) }?;
        }
        if let Some((from, to)) = plan.tail {
            // SAFETY: forwarded.
            unsafe { self.patch_bytes(from, to, value) }?;
        }
        Ok(())
    }

    /// Sets `[from, to)` (within at most two words) to `value` by reading the enclosing words,
    /// patching them and writing them back (`hsa_memory_copy`, synchronous).
    ///
    /// # Safety
    /// The enclosing words lie in a live device allocation that no device work touches. Words
    /// never extend past the allocation: its base is page aligned and its size a multiple of the
    /// pool granule.
    unsafe fn patch_bytes(&self, from: usize, to: usize, value: u8) -> Result<()> {
        let lo = from & !3;
        let hi = to.next_multiple_of(4);
        let mut words = [0u8; 8];
        let len = hi - lo;
        if len > words.len() || to <= from {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: format!("internal fill split produced {from:#x}..{to:#x}"),
            });
        }
        // SAFETY: `words` is writable host memory for `len` bytes; the device words are live.
        unsafe {
            self.hsa
                .memory_copy(words.as_mut_ptr().cast(), lo as *const c_void, len)
        }?;
        words[from - lo..to - lo].fill(value);
        // SAFETY: as above, in the other direction.
        unsafe {
            self.hsa
                .memory_copy(lo as *mut c_void, words.as_ptr().cast(), len)
        }
    }
}

// SAFETY: every copy and fill is checked to lie in a live allocation (or host memory the GPU
// reaches) and touches only its ranges, reading the source; synchronous ones drain the device's
// streams first and wait for their copies (pageable memory through a bounce buffer); enqueued
// ones chain on the stream's completion signals and answer `Queued`.
unsafe impl Transfer for RocBackend {
    unsafe fn copy_htod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let dst = self.device_side(device, dst, bytes)?;
        const OP: &str = "host-to-device copy";
        if let Some(src) = self.host_side_if_accessible(device, src as usize, bytes) {
            // SAFETY: both sides are GPU-accessible (pool memory) and valid (caller).
            return unsafe { self.copy_now(device, dst, src, bytes, OP) };
        }
        let bounce = self.bounce()?;
        self.drain_device_for_ordering(device);
        for offset in (0..bytes).step_by(BOUNCE_BYTES) {
            let len = BOUNCE_BYTES.min(bytes - offset);
            // SAFETY: the caller guarantees `src` is readable for `bytes`; the bounce buffer is
            // ours alone for this call and `len <= BOUNCE_BYTES`; the previous chunk's copy
            // out of it has finished (waited below).
            unsafe {
                std::ptr::copy_nonoverlapping(src.add(offset), bounce.address as *mut u8, len)
            };
            let chunk_dst = Side {
                address: dst.address + offset,
                agent: dst.agent,
            };
            let chunk_src = Side {
                address: bounce.address,
                agent: self.topology.host.agent,
            };
            // SAFETY: the bounce buffer is GPU-accessible pool memory, the device range is
            // inside a live allocation (checked above); both stay valid until the wait returns.
            unsafe { self.copy_and_wait(chunk_dst, chunk_src, len, OP) }?;
        }
        Ok(())
    }

    unsafe fn copy_dtoh(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let src = self.device_side(device, src, bytes)?;
        const OP: &str = "device-to-host copy";
        if let Some(dst) = self.host_side_if_accessible(device, dst as usize, bytes) {
            // SAFETY: as in `copy_htod`.
            return unsafe { self.copy_now(device, dst, src, bytes, OP) };
        }
        let bounce = self.bounce()?;
        self.drain_device_for_ordering(device);
        for offset in (0..bytes).step_by(BOUNCE_BYTES) {
            let len = BOUNCE_BYTES.min(bytes - offset);
            let chunk_src = Side {
                address: src.address + offset,
                agent: src.agent,
            };
            let chunk_dst = Side {
                address: bounce.address,
                agent: self.topology.host.agent,
            };
            // SAFETY: as in `copy_htod`.
            unsafe { self.copy_and_wait(chunk_dst, chunk_src, len, OP) }?;
            // SAFETY: the chunk's copy into the bounce buffer has finished (waited above); the
            // caller guarantees `dst` is writable for `bytes`.
            unsafe {
                std::ptr::copy_nonoverlapping(bounce.address as *const u8, dst.add(offset), len)
            };
        }
        Ok(())
    }

    unsafe fn copy_dtod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let dst = self.device_side(device, dst, bytes)?;
        let src = self.device_side(device, src, bytes)?;
        // SAFETY: both are live allocations of this GPU (checked) for the call (caller).
        unsafe { self.copy_now(device, dst, src, bytes, "device-to-device copy") }
    }

    unsafe fn memset_d8(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let side = self.device_side(device, dst, bytes)?;
        self.drain_device_for_ordering(device);
        // SAFETY: the range is inside a live allocation or host memory this GPU reaches
        // (checked), and no earlier work is pending.
        unsafe { self.fill(device, side, value, bytes) }
    }

    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        if bytes == 0 {
            return self.stream(device, stream).map(|_| Enqueued::Queued);
        }
        let dst = self.device_side(device, dst, bytes)?;
        let src = self.host_side_for_async(device, src as usize, bytes)?;
        // SAFETY: checked accessible; validity until completion is the caller's guarantee.
        unsafe {
            self.enqueue_copy(
                device,
                stream,
                dst,
                src,
                bytes,
                "asynchronous host-to-device copy",
            )
        }
        .map(|()| Enqueued::Queued)
    }

    unsafe fn copy_dtoh_async(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        if bytes == 0 {
            return self.stream(device, stream).map(|_| Enqueued::Queued);
        }
        let src = self.device_side(device, src, bytes)?;
        let dst = self.host_side_for_async(device, dst as usize, bytes)?;
        // SAFETY: as in `copy_htod_async`.
        unsafe {
            self.enqueue_copy(
                device,
                stream,
                dst,
                src,
                bytes,
                "asynchronous device-to-host copy",
            )
        }
        .map(|()| Enqueued::Queued)
    }

    unsafe fn copy_dtod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        if bytes == 0 {
            return self.stream(device, stream).map(|_| Enqueued::Queued);
        }
        let dst = self.device_side(device, dst, bytes)?;
        let src = self.device_side(device, src, bytes)?;
        // SAFETY: as in `copy_htod_async`.
        unsafe {
            self.enqueue_copy(
                device,
                stream,
                dst,
                src,
                bytes,
                "asynchronous device-to-device copy",
            )
        }
        .map(|()| Enqueued::Queued)
    }

    unsafe fn memset_d8_async(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let handle = self.stream(device, stream)?;
        if bytes == 0 {
            return Ok(Enqueued::Queued);
        }
        let side = self.device_side(device, dst, bytes)?;
        let mut stream = lock(&handle);
        stream.drain_with_waits(self.wait_tick())?;
        // SAFETY: inside a live allocation or host memory this GPU reaches (checked); the
        // stream's earlier work and the events it waits for have completed, and the stream
        // stays locked, so nothing later on it starts before the fill is done.
        unsafe { self.fill(device, side, value, bytes) }.map(|()| Enqueued::Queued)
    }
}

/// How a byte fill of `[dst, dst + bytes)` splits into whole aligned words and partial ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillPlan {
    /// Bytes before the first whole word (or the whole range when it contains no whole word).
    pub head: Option<(usize, usize)>,
    /// First aligned word address and word count.
    pub words: Option<(usize, usize)>,
    /// Bytes after the last whole word.
    pub tail: Option<(usize, usize)>,
}

impl FillPlan {
    /// Splits a non-empty range.
    pub fn new(dst: usize, bytes: usize) -> FillPlan {
        let end = dst + bytes;
        let body_start = dst.next_multiple_of(4);
        let body_end = end & !3;
        if body_start >= body_end {
            return FillPlan {
                head: Some((dst, end)),
                words: None,
                tail: None,
            };
        }
        FillPlan {
            head: (dst < body_start).then_some((dst, body_start)),
            words: Some((body_start, (body_end - body_start) / 4)),
            tail: (body_end < end).then_some((body_end, end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FillPlan;

    /// Every byte of the range is covered exactly once, words are aligned, and each partial
    /// piece fits in the (at most two) words `patch_bytes` reads.
    #[test]
    fn fill_plan_covers_each_byte_once() {
        for dst in 4096..4096 + 9 {
            for bytes in 1..40 {
                let plan = FillPlan::new(dst, bytes);
                let mut covered = vec![0u8; bytes];
                let mut mark = |from: usize, to: usize| {
                    for a in from..to {
                        covered[a - dst] += 1;
                    }
                };
                for (from, to) in [plan.head, plan.tail].into_iter().flatten() {
                    assert!(from < to, "{plan:?}");
                    assert!(to.next_multiple_of(4) - (from & !3) <= 8, "{plan:?}");
                    mark(from, to);
                }
                if let Some((start, words)) = plan.words {
                    assert_eq!(start % 4, 0, "{plan:?}");
                    assert!(words > 0, "{plan:?}");
                    mark(start, start + 4 * words);
                    // Whole words exist exactly when the range contains an aligned word.
                }
                assert!(
                    covered.iter().all(|c| *c == 1),
                    "dst {dst} bytes {bytes}: {plan:?}"
                );
                let has_whole_word = dst.next_multiple_of(4) + 4 <= dst + bytes;
                assert_eq!(
                    plan.words.is_some(),
                    has_whole_word,
                    "dst {dst} bytes {bytes}"
                );
            }
        }
    }
}
