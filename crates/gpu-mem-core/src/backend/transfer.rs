//! [`Transfer`]: copies and fills, synchronous and enqueued on a stream, on every backend.

use super::types::{DevicePtr, Enqueued, StreamHandle};
use crate::error::Result;

/// Copying bytes between host and device memory and within a device, and filling device bytes.
///
/// # Safety
///
/// The core reads and frees memory on the strength of these methods' answers, so an
/// implementation must uphold, for every device it accepts:
///
/// * **Ranges.** A method reads and writes only the ranges it is given, exactly `bytes` of
///   them, and never writes through a `*const` source.
/// * **Synchronous copies** (without a stream) are ordered after all work already enqueued on
///   the device's streams, and return only once their own reads and writes have completed and
///   are visible to the calling thread.
/// * **Enqueued copies** run in their stream's order. [`Enqueued::Completed`] is answered only
///   when the operation and everything put on the stream before it had completed when the call
///   returned, with no failure left for the stream's next synchronization; otherwise the answer
///   is [`Enqueued::Queued`], which is always correct.
pub unsafe trait Transfer {
    /// Copies `bytes` host bytes to the device, synchronously.
    ///
    /// # Safety
    /// `src..src+bytes` is readable host memory; `dst..dst+bytes` lies in a live allocation.
    unsafe fn copy_htod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()>;

    /// Copies `bytes` device bytes to the host, synchronously.
    ///
    /// # Safety
    /// `dst..dst+bytes` is writable host memory not aliased elsewhere; `src` range is live.
    unsafe fn copy_dtoh(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()>;

    /// Copies `bytes` between device allocations, synchronously.
    ///
    /// # Safety
    /// Both ranges lie in live allocations of this device.
    unsafe fn copy_dtod(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()>;

    /// Sets `bytes` device bytes to `value`, synchronously.
    ///
    /// # Safety
    /// The range lies in a live allocation of this device.
    unsafe fn memset_d8(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> Result<()>;

    /// Enqueues a host-to-device copy on `stream`. This and the other asynchronous operations
    /// say whether the work is still to run ([`Enqueued`]); `Queued` is always a correct answer.
    ///
    /// # Safety
    /// As [`Transfer::copy_htod`], and both ranges stay valid and the host range unwritten until
    /// the operation completes. `src` is page-locked (from `host_alloc` or `host_register`).
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this device
    /// and is not destroyed.
    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued>;

    /// Enqueues a device-to-host copy on `stream`.
    ///
    /// # Safety
    /// As [`Transfer::copy_dtoh`], and both ranges stay valid and the host range otherwise
    /// untouched until the operation completes. `dst` is page-locked.
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this device
    /// and is not destroyed.
    unsafe fn copy_dtoh_async(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued>;

    /// Enqueues a device-to-device copy on `stream`.
    ///
    /// # Safety
    /// As [`Transfer::copy_dtod`], and both ranges stay valid until the operation completes.
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this device
    /// and is not destroyed.
    unsafe fn copy_dtod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued>;

    /// Enqueues a byte fill on `stream`.
    ///
    /// # Safety
    /// The range stays valid until the operation completes.
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this device
    /// and is not destroyed.
    unsafe fn memset_d8_async(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<Enqueued>;
}
