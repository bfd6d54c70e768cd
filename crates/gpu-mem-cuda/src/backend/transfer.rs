//! [`Transfer`] on CUDA: `cuMemcpy*` and `cuMemsetD8`, on the legacy default stream when
//! synchronous and on the caller's stream when not.
//!
//! # Contract
//!
//! * Synchronous calls run on the legacy default stream, which waits for gpu-mem's blocking
//!   streams; `cuMemcpyDtoD` and `cuMemsetD8`, which may return early, are followed by a wait
//!   on that stream.
//! * Enqueued copies rely on the host side being page-locked (from `host_alloc` /
//!   `host_register`) and untouched until the stream passes them; they answer
//!   [`Enqueued::Queued`].

use super::{CudaBackend, raw_stream};
use gpu_mem_core::Result;
use gpu_mem_core::backend::{DevicePtr, Enqueued, StreamHandle, Transfer};
use std::ffi::c_void;

// SAFETY: each call touches exactly the given ranges; the synchronous ones complete before
// returning (the driver's synchronous copies, or a wait on the legacy stream after those that
// may return early) and are ordered after all blocking streams' work; the enqueued ones answer
// `Queued` only.
unsafe impl Transfer for CudaBackend {
    unsafe fn copy_htod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both ranges; the count is in bytes.
        unsafe { self.driver.memcpy_htod(dst.0, src.cast::<c_void>(), bytes) }
    }

    unsafe fn copy_dtoh(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both ranges; cuMemcpyDtoH returns once the data is in
        // host memory.
        unsafe { self.driver.memcpy_dtoh(dst.cast::<c_void>(), src.0, bytes) }
    }

    unsafe fn copy_dtod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both device ranges.
        unsafe { self.driver.memcpy_dtod(dst.0, src.0, bytes) }?;
        self.wait_legacy_stream()
    }

    unsafe fn memset_d8(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees the device range; the count is in bytes.
        unsafe { self.driver.memset_d8(dst.0, value, bytes) }?;
        self.wait_legacy_stream()
    }

    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees the ranges stay valid, `src` is page-locked and
        // unwritten until the stream passes the copy, and the stream is live.
        unsafe {
            self.driver
                .memcpy_htod_async(dst.0, src.cast::<c_void>(), bytes, raw_stream(stream))
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
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees the ranges stay valid, `dst` is page-locked and
        // untouched until the stream passes the copy, and the stream is live.
        unsafe {
            self.driver
                .memcpy_dtoh_async(dst.cast::<c_void>(), src.0, bytes, raw_stream(stream))
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
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both ranges stay valid until the copy completes.
        unsafe {
            self.driver
                .memcpy_dtod_async(dst.0, src.0, bytes, raw_stream(stream))
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
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees the range stays valid until the fill completes.
        unsafe {
            self.driver
                .memset_d8_async(dst.0, value, bytes, raw_stream(stream))
        }
        .map(|()| Enqueued::Queued)
    }
}
