//! [`CudaBackend`]: `gpu_mem_core::Backend` (the book's *Architecture*) on the CUDA driver API,
//! one file per concern (`memory`, `transfer`, `stream`, `event`, `launch`) and per capability
//! (`peer`, `ipc`, `managed`, `pool`, and with feature `nccl` `collective`), each stating its
//! part of the contract.
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
//!   0), so the legacy default stream waits for them.
//! * A device fault ([`crate::driver::is_device_fault`]) destroys the primary context for the
//!   whole process: every later call on the device is [`Error::DeviceLost`] naming the fault,
//!   synchronisations report [`Error::AsyncFailure`] (the work will never run, so what it used
//!   may be released), releases only update the bookkeeping. Recovery: drop everything of the
//!   device and call [`CudaBackend::reset_device`]. Other errors at a synchronisation stay
//!   [`Error::Native`]: they say nothing about the work, so its buffers are kept alive.
//! * Every capability is handed out; where the driver lacks a symbol (older drivers), a device
//!   attribute says no (`MEMORY_POOLS_SUPPORTED`, `MANAGED_MEMORY`) or the driver answers
//!   `CUDA_ERROR_NOT_SUPPORTED`, the call is [`Error::NotSupportedByBackend`] naming the feature,
//!   so the core falls back where it can. Nothing else of the backend is affected.
//! * Kernels compile once per (kernel, device); the parts are public:
//!   [`CudaBackend::compile_kernel`], [`CudaBackend::module_load`],
//!   [`CudaBackend::module_function`], [`CudaBackend::launch_function`],
//!   [`CudaBackend::module_unload`]. `CudaBackend` is `Send + Sync` without unsafe code: the
//!   driver API is thread safe.
//!
//! The driver call behind each method: the book's CUDA notes, *How the trait maps*.

#[cfg(feature = "nccl")]
mod collective;
mod device;
mod event;
mod flags;
mod grid_sync;
mod ipc;
mod kernels;
mod launch;
mod limits;
mod managed;
mod memory;
mod module_cache;
mod params;
mod peer;
mod pool;
pub mod ptx;
mod registry;
mod stream;
mod transfer;

pub use kernels::{FunctionHandle, ModuleHandle};
pub use limits::LaunchLimits;
pub use params::KernelParams;

use crate::driver::CudaDriver;
use crate::driver::sys::{CUcontext, CUevent, CUresult, CUstream};
use crate::nvrtc::Nvrtc;
use device::{Current, DeviceFacts, DeviceSlot};
use gpu_mem_core::backend::{
    DeviceInfo, EventHandle, IpcMemory, ManagedMemory, MemInfo, PeerAccess, StreamHandle,
    StreamOrderedPool,
};
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use module_cache::ModuleCache;
use registry::{AddressMap, AllocKind, Registry};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Host alignment the trait promises for page-locked memory (`host_alloc`): a driver breaking it
/// is refused rather than trusted. Not a page: the H200's driver (580.159) put allocations of 8
/// to 48 bytes 512 bytes past a page boundary.
const HOST_ALIGNMENT: u64 = 256;

/// Alignment checked for managed memory (`managed_alloc`), which the driver gives in pages.
const MANAGED_ALIGNMENT: u64 = 4096;

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
    /// NCCL for collectives, loaded on first use.
    #[cfg(feature = "nccl")]
    nccl: Mutex<Option<Arc<crate::nccl::Nccl>>>,
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

fn not_supported(feature: &'static str, reason: String) -> Error {
    Error::NotSupportedByBackend {
        backend: BackendKind::Cuda,
        feature,
        reason,
    }
}

/// `CUDA_ERROR_NOT_SUPPORTED` from the driver becomes [`Error::NotSupportedByBackend`].
fn unsupported_code(err: Error, feature: &'static str) -> Error {
    if is_code(&err, CUresult::CUDA_ERROR_NOT_SUPPORTED) {
        not_supported(feature, format!("the CUDA driver refused: {err}"))
    } else {
        err
    }
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
            #[cfg(feature = "nccl")]
            nccl: Mutex::new(None),
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
            report: None,
        }
    }

    /// [`Error::NotSupportedByBackend`] unless the driver exports every one of `symbols`.
    fn need(&self, symbols: &[&'static str], feature: &'static str) -> Result<()> {
        match symbols.iter().find(|s| !self.driver.has(s)) {
            None => Ok(()),
            Some(symbol) => Err(not_supported(
                feature,
                format!(
                    "the CUDA driver at {} does not export {symbol} (too old a driver)",
                    self.driver.path()
                ),
            )),
        }
    }

    /// The primary context of `device` (retained on first use), or the device's fault.
    fn context_of(&self, device: usize) -> Result<CUcontext> {
        let slot = self.slot(device)?;
        if let Some(fault) = self.driver.fault(slot.facts.handle) {
            return Err(self.driver.lost(slot.facts.handle, fault));
        }
        slot.context(self.driver)
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

// SAFETY: the device count is read once at start-up; `synchronize` is cuCtxSynchronize, which
// returns success only once the context's work has completed (a device fault is a failure, never
// completion); each concern keeps its promises in its own file (see the SAFETY comment of each
// impl there); every capability is this backend itself, decided at compile time (a device or
// driver lacking one refuses at run time).
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

    #[cfg(feature = "nccl")]
    fn collectives(&self) -> Option<&dyn gpu_mem_core::backend::Collectives> {
        Some(self)
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
