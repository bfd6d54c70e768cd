//! [`Transfer`] on the simulator: synchronous copies on the calling thread after the whole
//! device is idle; stream copies as the stream's jobs, short ones on an idle stream at once.
//! Page-locked and mapped host memory goes through the copy engine, pageable memory through the
//! CPU (see `copy`).

use crate::copy::{self, Mover, copy_ranges, fill_range, read_range, write_range};
use crate::memory::Region;
use crate::{SimBackend, SimDevice, reentry};
use gpu_mem_core::Result;
use gpu_mem_core::backend::{DevicePtr, Enqueued, StreamHandle, Transfer};
use gpu_mem_core::sync::lock;
use std::sync::Arc;

/// Copies and fills up to this size run at once on the enqueuing thread when their stream is
/// idle: handing them to the stream's worker (and back) costs more than the copy itself, which
/// made small page-locked copies slower than pageable ones. Larger ones still overlap with the
/// host's work, as on a GPU.
const INLINE_TRANSFER_MAX: usize = 64 << 10;

/// How a copy between device memory and host memory runs: synchronously, or as a stream's job
/// (which the thread waiting for the stream may help with, see `copy::ASSISTED_MIN`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Now,
    OnStream,
}

/// Who moves a copy between device memory and the host bytes at `host..host + bytes`: the copy
/// engine when they are page-locked (allocated so, or registered) or mapped, else the CPU (see
/// [`copy`]).
fn host_mover(
    d: &SimDevice,
    host: *const u8,
    bytes: usize,
    window: Option<&Arc<Region>>,
    run: Run,
) -> Mover {
    // Below the size from which the movers copy differently (a synchronous copy gets no help),
    // no need to look the memory up.
    let differs_from = match run {
        Run::Now => copy::STREAMING_MIN,
        Run::OnStream => copy::ASSISTED_MIN,
    };
    if bytes < differs_from {
        return Mover::Cpu;
    }
    if window.is_some() || lock(&d.host).is_page_locked(host as usize, bytes) {
        Mover::CopyEngine
    } else {
        Mover::Cpu
    }
}

/// A host pointer moved into a stream job. The core guarantees the memory outlives the job and
/// is not accessed by the host meanwhile (see the `Transfer` contract).
struct HostPtr(*mut u8);
// SAFETY: see the type's docs: the pointee is kept alive and unaliased until the job completes.
unsafe impl Send for HostPtr {}

impl SimBackend {
    /// Enqueues a copy or fill of `bytes` bytes; a short one on an idle stream runs at once (see
    /// [`SimStream::run_if_idle`](crate::stream::SimStream::run_if_idle)).
    fn enqueue_transfer<F>(
        &self,
        device: &SimDevice,
        stream: StreamHandle,
        what: &'static str,
        bytes: usize,
        job: F,
    ) -> Result<Enqueued>
    where
        F: FnOnce() -> std::result::Result<(), String> + Send + 'static,
    {
        if bytes > INLINE_TRANSFER_MAX {
            self.enqueue(device, stream, what, Box::new(job))?;
            return Ok(Enqueued::Queued);
        }
        // `on_stream` takes a closure it may call on either path: the job goes in a cell, and
        // comes back in it when the stream is busy.
        let job = std::cell::Cell::new(Some(job));
        let clean = self.on_stream(device, stream, |s| match job.take() {
            Some(taken) => match s.run_if_idle(what, taken) {
                Ok(clean) => clean,
                Err(back) => {
                    job.set(Some(back));
                    false
                }
            },
            None => false,
        })?;
        match job.into_inner() {
            // Done; a failure waiting for the next synchronization makes it merely `Queued`, so
            // that synchronization asks for it.
            None if clean => Ok(Enqueued::Completed),
            None => Ok(Enqueued::Queued),
            Some(job) => {
                self.enqueue(device, stream, what, Box::new(job))?;
                Ok(Enqueued::Queued)
            }
        }
    }
}

// SAFETY: every copy resolves its device ranges against live allocations (`resolve`,
// `resolve_write`) and touches only the host range it is given, never writing a source;
// synchronous ones wait for the whole device (`DeviceActivity::wait_idle`) and complete on the
// calling thread; stream ones are the stream's jobs, run in order, and `Completed` is answered
// only when `SimStream::run_if_idle` ran the job at once, cleanly.
unsafe impl Transfer for SimBackend {
    unsafe fn copy_htod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()> {
        reentry::refuse_in_kernel("host-to-device copy")?;
        let d = self.device(device)?;
        let range = d.memory.resolve_write(dst, bytes)?;
        let window = d.memory.host_window(src, bytes);
        let mover = host_mover(d, src, bytes, window.as_ref(), Run::Now);
        d.activity.wait_idle();
        // SAFETY: the caller guarantees `src` is readable for `bytes` bytes.
        unsafe { write_range(&range, src, window.as_ref(), mover) };
        Ok(())
    }

    unsafe fn copy_dtoh(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        reentry::refuse_in_kernel("device-to-host copy")?;
        let d = self.device(device)?;
        let range = d.memory.resolve(src, bytes)?;
        let window = d.memory.host_window(dst, bytes);
        let mover = host_mover(d, dst, bytes, window.as_ref(), Run::Now);
        d.activity.wait_idle();
        // SAFETY: the caller guarantees `dst` is writable for `bytes` bytes.
        unsafe { read_range(&range, dst, window.as_ref(), mover) };
        Ok(())
    }

    unsafe fn copy_dtod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        reentry::refuse_in_kernel("device-to-device copy")?;
        let d = self.device(device)?;
        let to = d.memory.resolve_write(dst, bytes)?;
        let from = d.memory.resolve(src, bytes)?;
        d.activity.wait_idle();
        copy_ranges(&to, &from);
        Ok(())
    }

    unsafe fn memset_d8(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> Result<()> {
        reentry::refuse_in_kernel("memset")?;
        let d = self.device(device)?;
        let range = d.memory.resolve_write(dst, bytes)?;
        d.activity.wait_idle();
        fill_range(&range, value);
        Ok(())
    }

    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let d = self.device(device)?;
        let range = d.memory.resolve_write(dst, bytes)?;
        let window = d.memory.host_window(src, bytes);
        let mover = host_mover(d, src, bytes, window.as_ref(), Run::OnStream);
        let src = HostPtr(src.cast_mut());
        self.enqueue_transfer(d, stream, "host-to-device copy", bytes, move || {
            let src = src;
            // SAFETY: the caller keeps the source alive and unwritten until the job completes.
            unsafe { write_range(&range, src.0, window.as_ref(), mover) };
            Ok(())
        })
    }

    unsafe fn copy_dtoh_async(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let d = self.device(device)?;
        let range = d.memory.resolve(src, bytes)?;
        let window = d.memory.host_window(dst, bytes);
        let mover = host_mover(d, dst, bytes, window.as_ref(), Run::OnStream);
        let dst = HostPtr(dst);
        self.enqueue_transfer(d, stream, "device-to-host copy", bytes, move || {
            let dst = dst;
            // SAFETY: the caller keeps the destination alive and untouched until the job completes.
            unsafe { read_range(&range, dst.0, window.as_ref(), mover) };
            Ok(())
        })
    }

    unsafe fn copy_dtod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let d = self.device(device)?;
        let to = d.memory.resolve_write(dst, bytes)?;
        let from = d.memory.resolve(src, bytes)?;
        self.enqueue_transfer(d, stream, "device-to-device copy", bytes, move || {
            copy_ranges(&to, &from);
            Ok(())
        })
    }

    unsafe fn memset_d8_async(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let d = self.device(device)?;
        let range = d.memory.resolve_write(dst, bytes)?;
        self.enqueue_transfer(d, stream, "memset", bytes, move || {
            fill_range(&range, value);
            Ok(())
        })
    }
}
