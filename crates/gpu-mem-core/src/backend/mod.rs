//! The hardware abstraction every backend implements.
//!
//! [`Backend`] is object safe and is used as `Arc<dyn Backend>`: the core types
//! ([`DeviceArray`](crate::DeviceArray), [`Stream`](crate::Stream), ...) are written once against
//! it, and nothing backend-specific leaks into them. Handles ([`DevicePtr`], [`StreamHandle`],
//! [`EventHandle`]) are plain numbers whose meaning belongs to the backend that made them.
//!
//! This module is the bottom of the core with `error`, `element` and `layout`: it depends on
//! `error` only. The data that crosses the trait is its own: addresses, handles and flags in
//! `types`, and what a kernel launch carries in `kernel` (which `crate::kernel` re-exports).
//! Devices, memory, streams and arrays are built on top of it.
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

pub(crate) mod kernel;
mod types;

pub use types::*;

use self::kernel::{Kernel, LaunchArg, LaunchConfig, Module};
use crate::error::{BackendKind, Error, Result};
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

    /// Enqueues a host-to-device copy on `stream`. This and the other asynchronous operations
    /// say whether the work is still to run ([`Enqueued`]); `Queued` is always a correct answer.
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
    ) -> Result<Enqueued>;

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
    ) -> Result<Enqueued>;

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
    ) -> Result<Enqueued>;

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
    ) -> Result<Enqueued>;

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

    // ----- several devices -----------------------------------------------------------------
    //
    // Every method below has a default that returns `Error::NotSupportedByBackend` naming the
    // feature, so a backend that lacks it still compiles and reports the gap at run time.

    /// `true` when kernels and copies on `device` can address memory of `peer` directly
    /// (`cuDeviceCanAccessPeer`; HSA: the peer's pool is accessible to the agent).
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool> {
        let _ = (device, peer);
        Err(unsupported(self.kind(), "peer access"))
    }

    /// Lets `device` address memory of `peer` (`cuCtxEnablePeerAccess`; HSA:
    /// `hsa_amd_agents_allow_access` on the peer's allocations). Enabling it twice is not an
    /// error.
    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()> {
        let _ = (device, peer);
        Err(unsupported(self.kind(), "peer access"))
    }

    /// Copies `bytes` from `src` on `src_device` to `dst` on `dst_device`, synchronously, ordered
    /// after all work on both devices (`cuMemcpyPeer`; HSA: `hsa_amd_memory_async_copy` between
    /// the agents, waited for).
    ///
    /// # Safety
    /// `dst..dst+bytes` lies in a live allocation of `dst_device` and `src..src+bytes` in one of
    /// `src_device`.
    unsafe fn copy_peer(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        let _ = (dst_device, dst, src_device, src, bytes);
        Err(unsupported(self.kind(), "peer copies"))
    }

    /// Enqueues a copy of `bytes` from `src` on `src_device` to `dst` on `dst_device` on
    /// `stream`, a stream of `dst_device` (`cuMemcpyPeerAsync`). It is ordered after earlier work
    /// on `stream` only.
    ///
    /// # Safety
    /// As [`Backend::copy_peer`], and both ranges stay valid until the operation completes.
    /// `stream` came from [`Backend::stream_create`] on `dst_device` and is not destroyed.
    unsafe fn copy_peer_async(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let _ = (dst_device, dst, src_device, src, bytes, stream);
        Err(unsupported(self.kind(), "peer copies"))
    }

    // ----- inter-process sharing -----------------------------------------------------------

    /// A handle another process can open to map the device allocation starting at `ptr`
    /// (`cuIpcGetMemHandle`; HSA: `hsa_amd_ipc_memory_create`).
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        let _ = (device, ptr);
        Err(unsupported(self.kind(), "IPC memory handles"))
    }

    /// Maps an allocation exported by another process into `device`'s address space, returning
    /// its address there (`cuIpcOpenMemHandle`; HSA: `hsa_amd_ipc_memory_attach`). The mapping
    /// stays valid until [`Backend::ipc_close_handle`].
    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        let _ = (device, handle);
        Err(unsupported(self.kind(), "IPC memory handles"))
    }

    /// Unmaps memory opened with [`Backend::ipc_open_handle`] (`cuIpcCloseMemHandle`; HSA:
    /// `hsa_amd_ipc_memory_detach`).
    ///
    /// # Safety
    /// `ptr` came from `ipc_open_handle` on this device, is closed once, and no enqueued work
    /// still uses it.
    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        let _ = (device, ptr);
        Err(unsupported(self.kind(), "IPC memory handles"))
    }

    // ----- managed memory ------------------------------------------------------------------

    /// Allocates `bytes` (> 0) of managed (unified) memory, reachable from the host at `host` and
    /// from the device at `device` of the result (`cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)`,
    /// where both addresses are equal; HSA: fine-grained system memory with
    /// `hsa_amd_agents_allow_access`, or SVM). The same promises as [`Backend::host_alloc`] hold
    /// for the host side.
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        let _ = (device, bytes);
        Err(unsupported(self.kind(), "managed memory"))
    }

    /// Frees memory from [`Backend::managed_alloc`].
    ///
    /// # Safety
    /// `host` came from `managed_alloc` on this device, is freed once, and no enqueued work uses
    /// it.
    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let _ = (device, host);
        Err(unsupported(self.kind(), "managed memory"))
    }

    // ----- memory pool ---------------------------------------------------------------------

    /// Allocates `bytes` (> 0) of device memory from the device's pool, ordered on `stream`: the
    /// memory may be used by work enqueued on `stream` after this call (`cuMemAllocAsync`; HSA
    /// has no stream-ordered allocation).
    ///
    /// # Safety
    /// `stream` came from [`Backend::stream_create`] on this device and is not destroyed.
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        let _ = (device, bytes, stream);
        Err(unsupported(self.kind(), "stream-ordered allocation"))
    }

    /// Returns memory to the device's pool once the work enqueued on `stream` before this call
    /// has completed (`cuMemFreeAsync`).
    ///
    /// # Safety
    /// `ptr` came from [`Backend::alloc`] or [`Backend::alloc_async`] on this device and is freed
    /// once; no work enqueued on other streams still uses it; `stream` is a live stream of this
    /// device.
    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()> {
        let _ = (device, ptr, stream);
        Err(unsupported(self.kind(), "stream-ordered allocation"))
    }

    /// How much memory the device's pool holds and how much of it is in use.
    fn pool_usage(&self, device: usize) -> Result<PoolUsage> {
        let _ = device;
        Err(unsupported(self.kind(), "memory pools"))
    }

    /// Sets how much freed memory the pool keeps for reuse instead of releasing it
    /// (`cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)`).
    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        let _ = (device, bytes);
        Err(unsupported(self.kind(), "memory pools"))
    }

    /// Releases freed memory the pool keeps until at most `keep` bytes remain reserved beyond
    /// what is in use (`cuMemPoolTrimTo`).
    fn pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        let _ = (device, keep);
        Err(unsupported(self.kind(), "memory pools"))
    }

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

    /// The device address and size in bytes of `name`, a `__device__`, `__constant__` or
    /// `__managed__` variable `module` defines at file scope (CUDA's `cuModuleGetGlobal`), the
    /// module built and loaded on `device` first where it is not yet. The memory stays valid
    /// while the backend lives (modules stay loaded); an unknown name is
    /// [`Error::InvalidArgument`] naming the variables the module has.
    fn module_global(
        &self,
        device: usize,
        module: &Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        let _ = (device, module, name);
        Err(unsupported(self.kind(), "module variables"))
    }
}

/// The error a [`Backend`] default method returns for a feature the backend does not provide.
fn unsupported(backend: BackendKind, feature: &'static str) -> Error {
    Error::NotSupportedByBackend {
        backend,
        feature,
        reason: format!("the {backend} backend does not provide {feature} yet"),
    }
}
