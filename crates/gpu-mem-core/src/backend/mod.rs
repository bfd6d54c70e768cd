//! The hardware abstraction every backend implements.
//!
//! [`Backend`] is object safe and is used as `Arc<dyn Backend>`: the core types
//! ([`DeviceArray`](crate::DeviceArray), [`Stream`](crate::Stream), ...) are written once against
//! it, and nothing backend-specific leaks into them. Handles ([`DevicePtr`], [`StreamHandle`],
//! [`EventHandle`]) are plain numbers whose meaning belongs to the backend that made them.
//!
//! # Contract
//!
//! * Every method takes the device ordinal it acts on; a backend makes whatever context it needs
//!   current itself (CUDA: the device's primary context on the calling thread).
//! * Methods without a stream are synchronous and ordered after all work already enqueued on the
//!   device's streams (the CUDA legacy-default-stream rule, which Numba relies on).
//! * `*_async` methods enqueue on a stream and return at once. The caller — the core types, not
//!   the user — guarantees that every buffer an enqueued operation touches stays allocated and
//!   unaliased by host code until that operation has completed (see the `stream` module: each [`Stream`](crate::Stream) keeps what its work uses alive).
//! * Handles are checked by no one but their creator: every method taking a [`StreamHandle`] or
//!   [`EventHandle`] is `unsafe`, and requires a live handle this backend made for the device.
//!   The core owns every handle inside a [`Stream`](crate::Stream) or [`Event`](crate::Event),
//!   so safe code never passes one.
//! * Errors are returned, never panicked; work that fails after it was enqueued is reported by the
//!   next synchronization of that stream as [`Error::AsyncFailure`].

mod types;

pub use types::*;

use crate::error::{BackendKind, Error, Result};
use crate::kernel::{Kernel, LaunchArg, LaunchConfig};
use std::fmt::Debug;
use std::ptr::NonNull;

/// One GPU API (CUDA, ROC, the simulator) seen through the operations a memory HAL needs.
///
/// # Safety
///
/// The core's `unsafe` code trusts what a backend returns, so implementing this trait is
/// `unsafe`: an implementation must uphold every point below, for every device ordinal it
/// accepts, whatever the caller does with the safe methods.
///
/// * **Device count.** [`Backend::device_count`] returns the same number for the backend's whole
///   life, and every method taking a device ordinal below it acts on that device (or returns an
///   error); ordinals at or past it are refused with an error.
/// * **Device memory.** [`Backend::alloc`] returns, on `Ok`, the start of a range of `bytes`
///   device bytes that overlaps no other live allocation of the device, and stays valid until it
///   is passed to [`Backend::free`].
/// * **Host memory.** [`Backend::host_alloc`] returns, on `Ok`, a host pointer aligned to at least
///   4096 bytes to `bytes` bytes of host memory that the caller exclusively owns, readable and
///   writable from any thread, which stays valid (and is not accessed by the backend except for
///   operations the caller enqueues or calls) until it is passed to [`Backend::host_free`]. When
///   `device` is `Some`, it is the device address of that same memory. The memory may be
///   uninitialised unless [`HostAllocation::zeroed`] is `true`, in which case every byte reads as
///   zero.
/// * **Completion.** [`Backend::synchronize`], [`Backend::stream_synchronize`] and
///   [`Backend::event_synchronize`] return `Ok` only once the work they wait for has completed:
///   every read and write of host and device memory made by that work has happened and is
///   visible to the calling thread. [`Backend::stream_query`] and [`Backend::event_query`]
///   return `Ok(true)` only under the same condition. A synchronous method (one without a
///   stream) returns only once its own accesses have completed. The core frees and reuses
///   memory on the strength of these answers.
/// * **Memory accesses.** A method touches host memory only inside the ranges its caller passes
///   (and only while its contract says the caller keeps them valid) and never writes through a
///   `*const` source.
/// * **Errors.** Failures are returned as [`Error`]s; no method unwinds across the trait.
///
/// A backend written without `unsafe` is therefore refused by the compiler:
///
/// ```compile_fail,E0200
/// #[derive(Debug)]
/// struct Careless;
/// impl gpu_mem_core::Backend for Careless {}
/// ```
pub unsafe trait Backend: Send + Sync + Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Number of devices this backend drives.
    fn device_count(&self) -> usize;

    /// Static facts about a device.
    fn device_info(&self, device: usize) -> Result<DeviceInfo>;

    /// Free and total device memory in bytes.
    fn mem_info(&self, device: usize) -> Result<MemInfo>;

    /// Waits until all work on all streams of the device has completed.
    fn synchronize(&self, device: usize) -> Result<()>;

    // ----- device memory -------------------------------------------------------------------

    /// Allocates `bytes` (> 0) bytes of device memory, aligned to at least 256 bytes.
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr>;

    /// Frees device memory.
    ///
    /// # Safety
    /// `ptr` came from [`Backend::alloc`] on this device, is freed once, and no enqueued work still
    /// uses it.
    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()>;

    // ----- host memory ---------------------------------------------------------------------

    /// Allocates page-locked host memory (`bytes` > 0), optionally mapped into the device.
    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation>;

    /// Frees memory from [`Backend::host_alloc`].
    ///
    /// # Safety
    /// `host` came from `host_alloc` on this device, is freed once, and no enqueued work uses it.
    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()>;

    /// Page-locks (and optionally maps) an existing host range; returns the device address when
    /// `flags.mapped` is set.
    ///
    /// # Safety
    /// `host..host+bytes` is valid host memory that stays allocated until
    /// [`Backend::host_unregister`] is called with the same `host`.
    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>>;

    /// Undoes [`Backend::host_register`] for the range starting at `host`.
    ///
    /// # Safety
    /// `host` was registered on this device and no enqueued work still uses the range.
    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()>;

    // ----- copies and memset ---------------------------------------------------------------

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

    /// Enqueues a host-to-device copy on `stream`.
    ///
    /// # Safety
    /// As [`Backend::copy_htod`], and both ranges stay valid and the host range unwritten until
    /// the operation completes. `src` is page-locked (from `host_alloc` or `host_register`).
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn copy_htod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a device-to-host copy on `stream`.
    ///
    /// # Safety
    /// As [`Backend::copy_dtoh`], and both ranges stay valid and the host range otherwise
    /// untouched until the operation completes. `dst` is page-locked.
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn copy_dtoh_async(
        &self,
        device: usize,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a device-to-device copy on `stream`.
    ///
    /// # Safety
    /// As [`Backend::copy_dtod`], and both ranges stay valid until the operation completes.
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn copy_dtod_async(
        &self,
        device: usize,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Enqueues a byte fill on `stream`.
    ///
    /// # Safety
    /// The range stays valid until the operation completes.
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn memset_d8_async(
        &self,
        device: usize,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()>;

    // ----- streams -------------------------------------------------------------------------

    /// Creates a stream (ordered queue of work) on the device.
    fn stream_create(&self, device: usize) -> Result<StreamHandle>;

    /// Destroys a stream after its work has completed.
    ///
    /// # Safety
    /// `stream` came from `stream_create` on this device and is destroyed once; no other call
    /// uses it concurrently or afterwards.
    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()>;

    /// Blocks until all work enqueued on `stream` has completed.
    ///
    /// # Safety
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()>;

    /// `true` when all work enqueued on `stream` has completed.
    ///
    /// # Safety
    /// As [`Backend::stream_synchronize`].
    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool>;

    /// Makes later work on `stream` wait until `event`'s recorded work has completed.
    ///
    /// # Safety
    /// `stream` came from [`Backend::stream_create`] and `event` from [`Backend::event_create`]
    /// on this device, and neither is destroyed.
    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()>;

    // ----- events --------------------------------------------------------------------------

    /// Creates an event; `timing` enables [`Backend::event_elapsed_ms`].
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle>;

    /// Destroys an event.
    ///
    /// # Safety
    /// `event` came from `event_create` on this device and is destroyed once; no other call
    /// uses it concurrently or afterwards.
    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()>;

    /// Records `event` at the current end of `stream`.
    ///
    /// # Safety
    /// As [`Backend::stream_wait_event`].
    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()>;

    /// `true` when the work before the event's last record has completed (or it was never
    /// recorded).
    ///
    /// # Safety
    /// `event` came from [`Backend::event_create`] on this device and is not destroyed.
    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool>;

    /// Blocks until the event's recorded work has completed.
    ///
    /// # Safety
    /// As [`Backend::event_query`].
    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()>;

    /// Milliseconds between two completed, timed events.
    ///
    /// # Safety
    /// Both events came from [`Backend::event_create`] on this device and are not destroyed.
    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32>;

    // ----- kernels -------------------------------------------------------------------------

    /// Launches `kernel` over `config`'s grid with `args`. With `stream: None` the launch is
    /// synchronous — ordered after all work on the device's streams, and returning the kernel's
    /// errors — as Numba's launches on the default stream are; with a stream it is enqueued and
    /// failures surface at the stream's next synchronization.
    ///
    /// # Safety
    /// The memory of every argument stays valid until the kernel has completed (the core keeps
    /// it alive for stream launches), and the kernel's accesses stay inside its arguments.
    /// A `Some(stream)` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        let _ = (device, config, args, stream);
        Err(Error::NotSupportedByBackend {
            backend: self.kind(),
            feature: "kernel launch",
            reason: format!("this backend cannot launch kernel `{}` yet", kernel.name()),
        })
    }
}
