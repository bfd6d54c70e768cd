//! [`CudaBackend`]: `gpu_mem_core::Backend` (the book's *Architecture*) on the CUDA driver API.
//!
//! **Not yet run on hardware**: tested without a device (loading, missing driver, flags,
//! bookkeeping) and against a stand-in `libcuda` (tests/mock) with the real NVRTC. The
//! conformance suite under `GPU_MEM_BACKEND=cuda` on a GPU machine is its first real test.
//!
//! # Contract
//!
//! * Every method makes the device's primary context current on the calling thread (retained on
//!   first use, released when the backend is dropped) and puts back the context the caller had.
//! * Synchronous methods are ordered after all stream work: gpu-mem's streams are blocking (flags
//!   0), so the legacy default stream waits for them; calls that return early (`cuMemcpyDtoD`,
//!   `cuMemsetD8`, a kernel without a stream) are followed by a wait on that stream. Async copies
//!   rely on the trait's guarantee that host buffers are page-locked (from `host_alloc` /
//!   `host_register`) and untouched until the stream passes the copy.
//! * A device fault ([`crate::driver::is_device_fault`]) destroys the primary context for the
//!   whole process: every later call on the device is [`Error::DeviceLost`] naming the fault,
//!   synchronisations report [`Error::AsyncFailure`] (the work will never run, so what it used
//!   may be released), releases only update the bookkeeping. Recovery: drop everything of the
//!   device and call [`CudaBackend::reset_device`]. Other errors at a synchronisation stay
//!   [`Error::Native`]: they say nothing about the work, so its buffers are kept alive.
//! * Device memory is `cuMemAlloc` unless `GPU_MEM_CUDA_ALLOCATOR=pool`
//!   (`device::pool_requested`); out of memory is [`Error::OutOfMemory`] with free / total bytes.
//! * Kernels (`launch` states the contract) compile once per (kernel, device); the parts are
//!   public: [`CudaBackend::compile_kernel`], [`CudaBackend::module_load`],
//!   [`CudaBackend::module_function`], [`CudaBackend::launch_function`],
//!   [`CudaBackend::module_unload`]. A [`StreamHandle`] / [`EventHandle`] holds the `CUstream` /
//!   `CUevent` address. `CudaBackend` is `Send + Sync` without unsafe code (library, function
//!   pointers, numbers, mutex-guarded maps): the driver API is thread safe.
//!
//! The driver call behind each method: the book's CUDA notes, *How the trait maps*.

mod device;
mod extras;
mod flags;
mod kernels;
mod launch;
mod limits;
mod module_cache;
mod params;
pub mod ptx;
mod registry;

pub use kernels::{FunctionHandle, ModuleHandle};
pub use limits::LaunchLimits;
pub use params::KernelParams;

use crate::driver::CudaDriver;
use crate::driver::sys::{CUevent, CUresult, CUstream};
use crate::nvrtc::Nvrtc;
use device::{Current, DeviceFacts, DeviceSlot};
use gpu_mem_core::backend::{
    DeviceInfo, DevicePtr, Enqueued, EventHandle, Events, HostAllocFlags, HostAllocation,
    HostRegisterFlags, IpcMemHandle, IpcMemory, Launch, ManagedMemory, MemInfo, Memory, PeerAccess,
    PoolUsage, StreamHandle, StreamOrderedPool, Streams, Transfer,
};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig};
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use module_cache::ModuleCache;
use registry::{AddressMap, AllocKind, Registry};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Host alignment the trait promises for page-locked and managed memory (`host_alloc`,
/// `managed_alloc`): a driver breaking it is refused rather than trusted.
const HOST_ALIGNMENT: u64 = 4096;

/// The alignment the trait promises for device allocations.
const DEVICE_ALIGNMENT: u64 = 256;

/// The CUDA driver API as a gpu-mem backend.
#[derive(Debug)]
pub struct CudaBackend {
    devices: Vec<DeviceSlot>,
    allocations: Registry<AllocKind>,
    /// Registered host ranges: base address → bytes (for messages and double-unregister checks).
    registrations: Registry<usize>,
    /// Events: handle → created with timing.
    events: Registry<bool>,
    /// Page-locked host allocations: base address → bytes.
    host_allocs: Registry<usize>,
    /// Streams created and not yet destroyed.
    streams: Registry<()>,
    /// Which device owns each device range (allocations and IPC mappings), for launches.
    owners: AddressMap,
    /// Managed allocations: base address → bytes.
    managed: Registry<usize>,
    /// IPC mappings opened on a device: address → bytes.
    /// Opened IPC mappings: the bytes their handles claim (the most of them) and how many
    /// opens are not closed yet (the driver returns the existing mapping, counted, when a
    /// handle of the same allocation is opened again).
    ipc_mappings: Registry<(u64, u32)>,
    /// `(device, peer)` pairs whose peer access was enabled through this backend.
    peers: Mutex<HashSet<(usize, usize)>>,
    /// NVRTC for kernel compilation, loaded on first use.
    nvrtc: Mutex<Option<Arc<Nvrtc>>>,
    /// Kernel modules compiled and loaded by launches, per (kernel, device).
    modules: ModuleCache,
    /// What each loaded function says about itself (parameters, static shared memory).
    functions: Mutex<HashMap<u64, launch::FunctionInfo>>,
    /// The process's driver, shared with every other backend over the same library.
    driver: &'static CudaDriver,
}

fn legacy_stream() -> CUstream {
    std::ptr::null_mut()
}

fn raw_stream(stream: StreamHandle) -> CUstream {
    stream.0 as usize as CUstream
}

fn raw_event(event: EventHandle) -> CUevent {
    event.0 as usize as CUevent
}

fn native_code(err: &Error) -> Option<i64> {
    match err {
        Error::Native { code, .. } => Some(*code),
        _ => None,
    }
}

fn is_code(err: &Error, code: CUresult) -> bool {
    native_code(err) == Some(i64::from(code.0))
}

fn nonzero_bytes(bytes: usize) -> Result<()> {
    if bytes == 0 {
        Err(Error::InvalidArgument {
            name: "bytes",
            reason: "must be greater than 0".to_string(),
        })
    } else {
        Ok(())
    }
}

/// The outcome of a release that reached the driver: a device fault it was the first call to
/// see took the object with the context, so the release succeeded (as on a device already
/// known lost).
fn released(result: Result<()>) -> Result<()> {
    match result {
        Err(Error::DeviceLost { .. }) => Ok(()),
        other => other,
    }
}

/// What a synchronisation reports. A device fault ([`Error::DeviceLost`], now or earlier) is
/// the stream's work failing: the context is dead, so nothing of it runs any more and what the
/// work used may be released ([`Error::AsyncFailure`]). Every other error (misuse, a
/// deinitialised driver, a destroyed context) says nothing about whether the work finished and
/// stays as it is, so core keeps the work's buffers alive.
fn as_async_failure(err: Error, operation: &'static str, stream: u64) -> Error {
    match err {
        lost @ Error::DeviceLost { .. } => Error::AsyncFailure {
            operation,
            stream,
            reason: lost.to_string(),
        },
        other => other,
    }
}

impl CudaBackend {
    /// Builds the backend over an initialised driver (`cuInit` succeeded) with `device_count`
    /// devices, reading every device's attributes. Contexts are created lazily.
    pub fn new(driver: &'static CudaDriver, device_count: usize) -> Result<CudaBackend> {
        let mut devices = Vec::with_capacity(device_count);
        for ordinal in 0..device_count {
            devices.push(DeviceSlot::new(DeviceFacts::query(driver, ordinal)?));
        }
        Ok(CudaBackend {
            devices,
            allocations: Registry::new(),
            registrations: Registry::new(),
            events: Registry::new(),
            host_allocs: Registry::new(),
            streams: Registry::new(),
            owners: AddressMap::default(),
            managed: Registry::new(),
            ipc_mappings: Registry::new(),
            peers: Mutex::new(HashSet::new()),
            nvrtc: Mutex::new(None),
            modules: ModuleCache::default(),
            functions: Mutex::new(HashMap::new()),
            driver,
        })
    }

    /// The driver this backend calls.
    pub fn driver(&self) -> &'static CudaDriver {
        self.driver
    }

    /// Whether a device fault destroyed `device`'s primary context (see
    /// [`CudaBackend::reset_device`]).
    pub fn device_lost(&self, device: usize) -> Result<Option<String>> {
        Ok(self.driver.fault(self.slot(device)?.facts.handle))
    }

    /// Recovers a device after a fault: resets its primary context (`cuDevicePrimaryCtxReset`),
    /// which destroys everything the old context held, and forgets the fault, so the next call
    /// starts a fresh context. Refused with [`Error::InvalidArgument`] while anything this
    /// backend made on the device (arrays, pinned or registered host memory, streams, events)
    /// is still alive; compiled kernels are recompiled on their next launch.
    ///
    /// # Safety
    /// Nothing else in the process (another runtime, another library) still uses an object of
    /// the device's primary context: the reset destroys them all.
    pub unsafe fn reset_device(&self, device: usize) -> Result<()> {
        let slot = self.slot(device)?;
        let live = [
            ("device allocations", self.allocations.count(device)),
            ("host allocations", self.host_allocs.count(device)),
            ("host registrations", self.registrations.count(device)),
            ("streams", self.streams.count(device)),
            ("events", self.events.count(device)),
            ("managed allocations", self.managed.count(device)),
            ("IPC mappings", self.ipc_mappings.count(device)),
        ];
        let alive: Vec<String> = live
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        if !alive.is_empty() {
            return Err(Error::InvalidArgument {
                name: "device",
                reason: format!(
                    "device {device} cannot be reset while {} of it are alive; drop them first",
                    alive.join(", ")
                ),
            });
        }
        let forgotten = self.modules.forget_device(device);
        tracing::info!(device, forgotten, "resetting the CUDA primary context");
        slot.release(self.driver);
        // The reset destroys the context's peer mappings in both directions.
        self.forget_peers(device);
        // SAFETY: this backend holds nothing of the device (checked above, modules forgotten,
        // its context reference released); the caller guarantees nobody else does.
        unsafe { self.driver.primary_ctx_reset(slot.facts.handle) }?;
        self.driver.clear_fault(slot.facts.handle);
        Ok(())
    }

    /// The launch limits of `device`.
    pub fn launch_limits(&self, device: usize) -> Result<LaunchLimits> {
        Ok(self.slot(device)?.facts.limits)
    }

    /// Whether `alloc` on `device` uses the stream-ordered allocator.
    pub fn uses_stream_ordered_alloc(&self, device: usize) -> Result<bool> {
        Ok(self.slot(device)?.facts.stream_ordered_alloc)
    }

    fn slot(&self, device: usize) -> Result<&DeviceSlot> {
        self.devices.get(device).ok_or(Error::NoSuchDevice {
            backend: BackendKind::Cuda,
            device,
            count: self.devices.len(),
        })
    }

    /// Makes the device's primary context current on this thread until the guard drops (which
    /// restores the caller's own context). A lost device is [`Error::DeviceLost`] naming the
    /// original fault.
    fn current(&self, device: usize) -> Result<Current<'static>> {
        let slot = self.slot(device)?;
        if let Some(fault) = self.driver.fault(slot.facts.handle) {
            return Err(self.driver.lost(slot.facts.handle, fault));
        }
        slot.make_current(self.driver)
    }

    /// As [`CudaBackend::current`] for calls that release something: `None` when the device is
    /// lost, because its dead context took the object with it (the call then only updates the
    /// bookkeeping; a reset reclaims the memory).
    fn current_unless_lost(&self, device: usize) -> Result<Option<Current<'static>>> {
        match self.current(device) {
            Ok(current) => Ok(Some(current)),
            Err(Error::DeviceLost { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn out_of_memory(&self, device: usize, bytes: usize, err: Error) -> Error {
        if !is_code(&err, CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
            return err;
        }
        let total_fallback = self
            .devices
            .get(device)
            .map_or(0, |d| d.facts.info.total_memory);
        let (free, total) = self
            .driver
            .mem_get_info()
            .map_or((0, total_fallback), |(f, t)| (f as u64, t as u64));
        Error::OutOfMemory {
            backend: BackendKind::Cuda,
            device,
            requested: bytes as u64,
            free,
            total,
        }
    }

    /// `cuMemAllocAsync` on the legacy stream; `None` when the pool cannot serve the request
    /// in a form the trait allows (unsupported, or not 256-byte aligned), so the caller falls
    /// back to `cuMemAlloc`.
    fn alloc_stream_ordered(&self, device: usize, bytes: usize) -> Result<Option<u64>> {
        // SAFETY: the legacy default stream (null) of the current context is always valid.
        match unsafe { self.driver.mem_alloc_async(bytes, legacy_stream()) } {
            Ok(ptr) if ptr.is_multiple_of(DEVICE_ALIGNMENT) => Ok(Some(ptr)),
            Ok(ptr) => {
                tracing::warn!(
                    ptr,
                    "pool allocation not 256-byte aligned; using cuMemAlloc"
                );
                // SAFETY: `ptr` was just allocated on the legacy stream and never used.
                unsafe { self.driver.mem_free_async(ptr, legacy_stream()) }?;
                Ok(None)
            }
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_NOT_SUPPORTED) => {
                tracing::info!(device, "cuMemAllocAsync not supported; using cuMemAlloc");
                Ok(None)
            }
            Err(err) => Err(self.out_of_memory(device, bytes, err)),
        }
    }

    /// Waits for the legacy default stream (and so for every blocking stream's earlier work).
    fn wait_legacy_stream(&self) -> Result<()> {
        // SAFETY: the legacy default stream of the current context is always valid.
        unsafe { self.driver.stream_synchronize(legacy_stream()) }
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let leaked = self.allocations.len();
        if leaked > 0 {
            tracing::warn!(
                leaked,
                "CUDA backend dropped with device allocations still live"
            );
        }
        // Modules belong to the contexts, so they go first.
        self.unload_kernel_modules();
        for slot in &self.devices {
            slot.release(self.driver);
        }
    }
}

// SAFETY: the driver keeps the trait's promises: cuMemAlloc ranges never overlap while live;
// cuMemHostAlloc returns page-aligned memory owned by the caller until cuMemFreeHost; the
// synchronize and query calls are cuCtxSynchronize / cuStreamSynchronize / cuEventSynchronize,
// which return success only once the work has completed; the device count is read once at
// start-up.
unsafe impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn device_info(&self, device: usize) -> Result<DeviceInfo> {
        Ok(self.slot(device)?.facts.info.clone())
    }

    fn mem_info(&self, device: usize) -> Result<MemInfo> {
        let _cx = self.current(device)?;
        let (free, total) = self.driver.mem_get_info()?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    fn synchronize(&self, device: usize) -> Result<()> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "device work", 0))?;
        self.driver
            .ctx_synchronize()
            .map_err(|e| as_async_failure(e, "device work", 0))
    }

    fn peer(&self) -> Option<&dyn PeerAccess> {
        Some(self)
    }

    fn ipc(&self) -> Option<&dyn IpcMemory> {
        Some(self)
    }

    fn managed(&self) -> Option<&dyn ManagedMemory> {
        Some(self)
    }

    fn pool(&self) -> Option<&dyn StreamOrderedPool> {
        Some(self)
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Memory for CudaBackend {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        nonzero_bytes(bytes)?;
        let slot = self.slot(device)?;
        let _cx = self.current(device)?;
        if slot.facts.stream_ordered_alloc
            && let Some(ptr) = self.alloc_stream_ordered(device, bytes)?
        {
            self.allocations
                .insert(device, ptr, AllocKind::StreamOrdered);
            self.owners.insert(ptr, device, bytes as u64);
            return Ok(DevicePtr(ptr));
        }
        let ptr = self
            .driver
            .mem_alloc(bytes)
            .map_err(|e| self.out_of_memory(device, bytes, e))?;
        self.allocations.insert(device, ptr, AllocKind::Plain);
        self.owners.insert(ptr, device, bytes as u64);
        Ok(DevicePtr(ptr))
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let kind = self.allocations.remove(device, ptr.0);
        if kind.is_some() {
            self.owners.remove(ptr.0);
        }
        if cx.is_none() && kind.is_some() {
            // The lost context took the allocation with it.
            return Ok(());
        }
        match kind {
            Some(AllocKind::StreamOrdered) => {
                // SAFETY: the pointer came from cuMemAllocAsync on this device (registry) and
                // the caller guarantees no enqueued work still uses it; the legacy stream orders
                // the free after all earlier work of blocking streams anyway.
                released(unsafe { self.driver.mem_free_async(ptr.0, legacy_stream()) })
            }
            // SAFETY: the pointer came from cuMemAlloc on this device (registry), freed once
            // (removed above), unused by enqueued work (caller).
            Some(AllocKind::Plain) => released(unsafe { self.driver.mem_free(ptr.0) }),
            None => Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not an allocation of this backend on this device, or already freed",
            }),
        }
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        nonzero_bytes(bytes)?;
        let _cx = self.current(device)?;
        let raw = self
            .driver
            .mem_host_alloc(bytes, flags::host_alloc_flags(flags))?;
        let host = match NonNull::new(raw.cast::<u8>()) {
            Some(host) if (raw as u64).is_multiple_of(HOST_ALIGNMENT) => host,
            host => {
                if host.is_some() {
                    // SAFETY: `raw` was just allocated by cuMemHostAlloc and nothing else has
                    // seen it.
                    if let Err(err) = unsafe { self.driver.mem_free_host(raw) } {
                        tracing::warn!(%err, "freeing a refused host allocation failed");
                    }
                }
                return Err(Error::InvalidPointer {
                    kind: "host",
                    address: raw as u64,
                    bytes: bytes as u64,
                    reason: if host.is_some() {
                        "cuMemHostAlloc returned memory that is not 4096-byte aligned"
                    } else {
                        "cuMemHostAlloc succeeded but returned a null pointer"
                    },
                });
            }
        };
        self.host_allocs.insert(device, host.as_ptr() as u64, bytes);
        if !flags.mapped {
            return Ok(HostAllocation {
                host,
                device: None,
                zeroed: false,
            });
        }
        // SAFETY: `raw` is a live allocation made with CU_MEMHOSTALLOC_DEVICEMAP just above.
        match unsafe { self.driver.mem_host_get_device_pointer(raw) } {
            Ok(device_ptr) => Ok(HostAllocation {
                host,
                device: Some(DevicePtr(device_ptr)),
                zeroed: false,
            }),
            Err(err) => {
                self.host_allocs.remove(device, host.as_ptr() as u64);
                // SAFETY: `raw` came from cuMemHostAlloc above and nothing else has seen it.
                if let Err(free_err) = unsafe { self.driver.mem_free_host(raw) } {
                    tracing::warn!(%free_err, "freeing an unmappable host allocation failed");
                }
                Err(err)
            }
        }
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.host_allocs.remove(device, host.as_ptr() as u64);
        if cx.is_none() {
            // The lost context's page-locked memory goes with it at the reset.
            return Ok(());
        }
        // SAFETY: the caller guarantees `host` came from host_alloc, is freed once and unused.
        released(unsafe { self.driver.mem_free_host(host.as_ptr().cast::<c_void>()) })
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        nonzero_bytes(bytes)?;
        if !self.slot(device)?.facts.host_register {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Cuda,
                feature: "registering host memory",
                reason: format!(
                    "device {device} reports CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 0; use pinned_array instead"
                ),
            });
        }
        let _cx = self.current(device)?;
        let raw = host.as_ptr().cast::<c_void>();
        let address = host.as_ptr() as usize;
        // SAFETY: the caller guarantees the range is valid host memory that outlives the
        // registration.
        let registered = unsafe {
            self.driver
                .mem_host_register(raw, bytes, flags::host_register_flags(flags))
        };
        if let Err(err) = registered {
            return Err(
                if is_code(&err, CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
                    Error::HostRegistration {
                        address,
                        bytes,
                        reason: "already registered",
                    }
                } else {
                    err
                },
            );
        }
        self.registrations.insert(device, address as u64, bytes);
        if !flags.mapped {
            return Ok(None);
        }
        // SAFETY: the range was registered with CU_MEMHOSTREGISTER_DEVICEMAP just above.
        match unsafe { self.driver.mem_host_get_device_pointer(raw) } {
            Ok(device_ptr) => Ok(Some(DevicePtr(device_ptr))),
            Err(err) => {
                self.registrations.remove(device, address as u64);
                // SAFETY: undoing the registration made above; nothing has used it.
                if let Err(undo) = unsafe { self.driver.mem_host_unregister(raw) } {
                    tracing::warn!(%undo, "unregistering an unmappable range failed");
                }
                Err(err)
            }
        }
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let address = host.as_ptr() as usize;
        // Out of the bookkeeping first: whatever the driver answers below, the registration
        // must not keep `reset_device` refusing for good.
        let registered = self.registrations.remove(device, address as u64);
        let not_registered = |bytes| Error::HostRegistration {
            address,
            bytes,
            reason: "not registered",
        };
        if cx.is_none() {
            // The lost context's registrations end with it.
            return registered.map(|_| ()).ok_or_else(|| not_registered(0));
        }
        // SAFETY: the caller guarantees `host` is the registered base and unused by enqueued work.
        let result = unsafe {
            self.driver
                .mem_host_unregister(host.as_ptr().cast::<c_void>())
        };
        match released(result) {
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) => {
                Err(not_registered(registered.unwrap_or(0)))
            }
            other => other,
        }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
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

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Streams for CudaBackend {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        let _cx = self.current(device)?;
        let stream = self.driver.stream_create(flags::stream_flags())?;
        self.streams.insert(device, stream as usize as u64, ());
        Ok(StreamHandle(stream as usize as u64))
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.streams.remove(device, stream.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the caller guarantees the stream came from stream_create and is destroyed once.
        released(unsafe { self.driver.stream_destroy(raw_stream(stream)) })
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "stream work", stream.0))?;
        // SAFETY: the caller guarantees the stream came from stream_create on this device and
        // is not destroyed (the trait's contract).
        unsafe { self.driver.stream_synchronize(raw_stream(stream)) }
            .map_err(|e| as_async_failure(e, "stream work", stream.0))
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "stream work", stream.0))?;
        // SAFETY: as in stream_synchronize.
        unsafe { self.driver.stream_query(raw_stream(stream)) }
            .map_err(|e| as_async_failure(e, "stream work", stream.0))
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both handles came from this backend's create calls on
        // this device and are not destroyed (the trait's contract).
        unsafe {
            self.driver
                .stream_wait_event(raw_stream(stream), raw_event(event))
        }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Events for CudaBackend {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        let _cx = self.current(device)?;
        let event = self.driver.event_create(flags::event_flags(timing))?;
        let handle = event as usize as u64;
        self.events.insert(device, handle, timing);
        Ok(EventHandle(handle))
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        self.events.remove(device, event.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the caller guarantees the event came from event_create and is destroyed once.
        released(unsafe { self.driver.event_destroy(raw_event(event)) })
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees both handles came from this backend on this device and
        // are not destroyed (the trait's contract).
        unsafe {
            self.driver
                .event_record(raw_event(event), raw_stream(stream))
        }
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "work before an event", 0))?;
        // SAFETY: as in event_record. A never-recorded event reports complete (CUDA_SUCCESS).
        unsafe { self.driver.event_query(raw_event(event)) }
            .map_err(|e| as_async_failure(e, "work before an event", 0))
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        let _cx = self
            .current(device)
            .map_err(|e| as_async_failure(e, "work before an event", 0))?;
        // SAFETY: as in event_record.
        unsafe { self.driver.event_synchronize(raw_event(event)) }
            .map_err(|e| as_async_failure(e, "work before an event", 0))
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        let _cx = self.current(device)?;
        for event in [start, end] {
            if self.events.get(device, event.0) == Some(false) {
                return Err(Error::EventTiming {
                    reason: "an event was created without timing",
                });
            }
        }
        // SAFETY: as in event_record.
        match unsafe {
            self.driver
                .event_elapsed_time(raw_event(start), raw_event(end))
        } {
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_NOT_READY) => Err(Error::EventTiming {
                reason: "an event has not completed yet",
            }),
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_INVALID_HANDLE) => {
                Err(Error::EventTiming {
                    reason: "an event was never recorded",
                })
            }
            other => other,
        }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Launch for CudaBackend {
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        // SAFETY: the caller upholds Backend::launch's contract, which launch_kernel shares.
        unsafe { self.launch_kernel(device, kernel, config, args, stream) }
    }

    fn module_global(
        &self,
        device: usize,
        module: &gpu_mem_core::kernel::Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        self.module_variable(device, module, name)
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl PeerAccess for CudaBackend {
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool> {
        self.peer_possible(device, peer)
    }

    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()> {
        self.enable_peer(device, peer)
    }

    unsafe fn copy_peer(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller upholds Backend::copy_peer's contract, which peer_copy shares.
        unsafe { self.peer_copy(dst_device, dst, src_device, src, bytes, None) }
    }

    unsafe fn copy_peer_async(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller upholds Backend::copy_peer_async's contract, which peer_copy shares.
        unsafe { self.peer_copy(dst_device, dst, src_device, src, bytes, Some(stream)) }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl IpcMemory for CudaBackend {
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        self.ipc_export(device, ptr)
    }

    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        self.ipc_import(device, handle)
    }

    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        // SAFETY: the caller upholds Backend::ipc_close_handle's contract.
        unsafe { self.ipc_close(device, ptr) }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl ManagedMemory for CudaBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        self.managed_allocate(device, bytes)
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        // SAFETY: the caller upholds Backend::managed_free's contract.
        unsafe { self.managed_release(device, host) }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl StreamOrderedPool for CudaBackend {
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        // SAFETY: the caller guarantees the stream is a live stream of this device.
        unsafe { self.pool_alloc(device, bytes, stream) }
    }

    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()> {
        // SAFETY: the caller upholds Backend::free_async's contract.
        unsafe { self.pool_free(device, ptr, stream) }
    }

    fn pool_usage(&self, device: usize) -> Result<PoolUsage> {
        self.default_pool_usage(device)
    }

    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        self.default_pool_set_threshold(device, bytes)
    }

    fn pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        self.default_pool_trim(device, keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_through_raw_pointers() {
        let raw = 0x7f00_dead_b000_usize as CUstream;
        let handle = StreamHandle(raw as usize as u64);
        assert_eq!(raw_stream(handle), raw);
        let raw_e = 0x5555_0000_1230_usize as CUevent;
        assert_eq!(raw_event(EventHandle(raw_e as usize as u64)), raw_e);
    }

    fn native(code: CUresult) -> Error {
        Error::Native {
            backend: BackendKind::Cuda,
            call: "cuStreamSynchronize",
            code: i64::from(code.0),
            code_name: format!("{}", code.0),
            description: String::new(),
        }
    }

    #[test]
    fn only_device_faults_become_async_failures() {
        let lost = Error::DeviceLost {
            backend: BackendKind::Cuda,
            device: 0,
            fault: "cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)".into(),
            recovery: crate::driver::DEVICE_LOST_RECOVERY,
        };
        match as_async_failure(lost, "stream work", 7) {
            Error::AsyncFailure {
                stream: 7, reason, ..
            } => assert!(reason.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{reason}"),
            other => panic!("{other:?}"),
        }
        // Misuse, deinitialisation and destroyed contexts say nothing about the work.
        for code in [
            CUresult::CUDA_ERROR_INVALID_HANDLE,
            CUresult::CUDA_ERROR_DEINITIALIZED,
            CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        ] {
            let kept = as_async_failure(native(code), "stream work", 7);
            assert!(matches!(kept, Error::Native { .. }), "{kept:?}");
        }
        let other = as_async_failure(Error::EventTiming { reason: "x" }, "stream work", 7);
        assert!(matches!(other, Error::EventTiming { .. }));
    }

    #[test]
    fn zero_byte_requests_are_rejected() {
        assert!(matches!(
            nonzero_bytes(0),
            Err(Error::InvalidArgument { name: "bytes", .. })
        ));
        assert!(nonzero_bytes(1).is_ok());
    }
}
