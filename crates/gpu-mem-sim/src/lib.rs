//! The CPU simulator backend of gpu-mem: the embedded default, and the reference the
//! conformance suite is checked against.
//!
//! It behaves like a GPU, not like a shortcut:
//! * device memory is separate from host memory, at synthetic addresses, with a capacity
//!   (`GPU_MEM_SIM_MEMORY`); allocations past it fail with `OutOfMemory`, and accesses outside a
//!   live allocation fail with `InvalidPointer`;
//! * device memory stays resident, as a GPU's: the host memory of a freed allocation is kept
//!   (up to the capacity or 1 GiB, [`SimBackend::cached_memory`]) and backs the next allocation
//!   of about its size, so a new array costs no page faults; new allocations read as zero, but
//!   a reused block is only zeroed where it is not about to be overwritten (never, for
//!   `to_device`), and a freed address stays invalid however its block is reused;
//! * each stream is a worker thread, so stream work runs asynchronously to the host;
//!   synchronous operations first wait for all streams of the device (the CUDA legacy default
//!   stream rule);
//! * events are timestamped when the work before them completes;
//! * page-locked, mapped and registered host memory is tracked with CUDA's rules; large copies
//!   between it (or device memory) and device memory go through a copy engine, as DMA does
//!   (split with the thread that waits for the stream, streaming stores from 16 MiB), while
//!   pageable copies are CPU copies;
//! * `GPU_MEM_SIM_DEVICES` devices, each with its own memory; every allocation is accounted, so
//!   leaks show in [`SimBackend::live_allocations`] and `mem_info`.

mod abi;
mod config;
mod copy;
mod event;
mod executor;
mod host;
mod ipc;
mod launch;
mod memory;
mod recent_stream;
mod reentry;
mod source;
mod stream;
#[cfg(test)]
mod test_support;
pub mod thread;
mod workers;

pub use config::{
    DEFAULT_PINNED_LIMIT, DEFAULT_SHARED_MEMORY, DEFAULT_WATCHDOG, SimConfig, SimDeviceConfig,
    Watchdog, parse_size, parse_size_of,
};
pub use thread::{SimKernel, ThreadCtx};

/// Measurements for the simulator's own benchmarks; not part of the API.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_support;

use copy::{Mover, copy_ranges, fill_range, read_range, write_range};
use event::SimEvent;
use gpu_mem_core::backend::{
    DeviceInfo, DevicePtr, Enqueued, EventHandle, Events, HostAllocFlags, HostAllocation,
    HostRegisterFlags, IpcMemHandle, IpcMemory, Launch, ManagedMemory, MemInfo, Memory, PeerAccess,
    PoolUsage, StreamHandle, StreamOrderedPool, Streams, Transfer,
};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig};
use gpu_mem_core::sync::{lock, read, write};
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use host::{HostTable, Pinned, RegisteredRange};
use memory::{AddressSpace, Region};
use recent_stream::StreamKey;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use stream::{DeviceActivity, Job, SimStream};

struct SimDevice {
    ordinal: usize,
    warp_size: u32,
    shared_memory: usize,
    watchdog: Watchdog,
    memory: Arc<AddressSpace>,
    activity: Arc<DeviceActivity>,
    /// Read-locked to find a stream (see [`SimBackend::on_stream`]).
    streams: RwLock<HashMap<u64, Arc<SimStream>, Handles>>,
    events: Mutex<HashMap<u64, Arc<SimEvent>, Handles>>,
    host: Mutex<HostTable>,
    /// Module variables mapped into the address space (by module and name), each once.
    symbols: Mutex<HashMap<(gpu_mem_core::kernel::Module, String), (DevicePtr, usize)>>,
}

/// The simulator backend.
pub struct SimBackend {
    /// Distinguishes this instance's stream handles from other instances' (see
    /// [`recent_stream`]).
    id: u64,
    devices: Vec<SimDevice>,
    next_handle: AtomicU64,
}

impl std::fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBackend")
            .field("devices", &self.devices.len())
            .finish()
    }
}

/// A host pointer moved into a stream job. The core guarantees the memory outlives the job and
/// is not accessed by the host meanwhile (see `gpu_mem_core::Backend`'s contract).
struct HostPtr(*mut u8);
// SAFETY: see the type's docs: the pointee is kept alive and unaliased until the job completes.
unsafe impl Send for HostPtr {}

impl SimBackend {
    /// The most devices one simulator has: each has an address window of its own (see
    /// `memory`), and more would not fit in 64 bits without overlapping.
    pub const MAX_DEVICES: usize = 4000;

    /// A simulator configured from the environment (see [`SimConfig::from_env`]).
    pub fn from_env() -> Result<SimBackend> {
        Ok(SimBackend::new(SimConfig::from_env()?))
    }

    /// A simulator with the given devices (at most [`SimBackend::MAX_DEVICES`]: the devices past
    /// that are left out, with a warning).
    pub fn new(config: SimConfig) -> SimBackend {
        if config.devices.len() > Self::MAX_DEVICES {
            tracing::warn!(
                asked = config.devices.len(),
                kept = Self::MAX_DEVICES,
                "the simulator has at most {} devices; the others are left out",
                Self::MAX_DEVICES
            );
        }
        let devices = config
            .devices
            .iter()
            .take(Self::MAX_DEVICES)
            .enumerate()
            .map(|(ordinal, c)| SimDevice {
                ordinal,
                warp_size: c.warp_size,
                shared_memory: c.shared_memory,
                watchdog: c.watchdog,
                memory: Arc::new(AddressSpace::new(ordinal, c.memory)),
                activity: Arc::new(DeviceActivity::default()),
                streams: RwLock::new(HashMap::default()),
                events: Mutex::new(HashMap::default()),
                host: Mutex::new(HostTable::new(ordinal, c.pinned_limit)),
                symbols: Mutex::new(HashMap::new()),
            })
            .collect();
        SimBackend {
            id: recent_stream::new_backend_id(),
            devices,
            next_handle: AtomicU64::new(1),
        }
    }

    fn device(&self, device: usize) -> Result<&SimDevice> {
        // A `match`, not `ok_or`: this runs on every operation, and an error built eagerly is
        // dropped through `Error`'s drop glue even when unused.
        match self.devices.get(device) {
            Some(d) => Ok(d),
            None => Err(Error::NoSuchDevice {
                backend: BackendKind::Sim,
                device,
                count: self.devices.len(),
            }),
        }
    }

    fn handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Live device allocations on `device` (0 once every array is dropped).
    pub fn live_allocations(&self, device: usize) -> Result<usize> {
        Ok(self.device(device)?.memory.live_allocations())
    }

    /// Host memory `device` keeps cached for reuse by new allocations: the blocks of freed
    /// allocations, at most the device's capacity or 1 GiB. It is not device memory in use
    /// (`mem_info` does not count it), and a freed address stays invalid however its block is
    /// reused.
    pub fn cached_memory(&self, device: usize) -> Result<u64> {
        Ok(self.device(device)?.memory.cached())
    }

    /// Gives every host block cached by `device` back to the host allocator.
    pub fn trim_memory_cache(&self, device: usize) -> Result<()> {
        self.device(device)?.memory.trim_cache();
        Ok(())
    }

    /// Open mappings of memory exported by other processes (`open_ipc_array`) on `device`.
    pub fn live_ipc_mappings(&self, device: usize) -> Result<usize> {
        Ok(self.device(device)?.memory.live_imports())
    }

    /// Live page-locked allocations and host registrations on `device`.
    pub fn live_host_memory(&self, device: usize) -> Result<(usize, usize)> {
        Ok(lock(&self.device(device)?.host).counts())
    }

    fn stream(&self, device: &SimDevice, stream: StreamHandle) -> Result<Arc<SimStream>> {
        self.on_stream(device, stream, Arc::clone)
    }

    /// Runs `f` on the stream `stream` names, never under the device's stream table lock (so
    /// `f` may wait: a job, even a small copy, can wait for a region's lock held by another
    /// stream's long copy, and creating or destroying streams must not wait for that). The
    /// stream this thread named last is found without the table (see [`recent_stream`]).
    fn on_stream<R>(
        &self,
        device: &SimDevice,
        stream: StreamHandle,
        f: impl Fn(&Arc<SimStream>) -> R,
    ) -> Result<R> {
        let key = StreamKey {
            backend: self.id,
            device: device.ordinal,
            handle: stream.0,
        };
        if let Some(result) = recent_stream::with_recent(key, &f) {
            return Ok(result);
        }
        let found = read(&device.streams).get(&stream.0).cloned();
        match found {
            Some(found) => {
                recent_stream::remember(key, &found);
                Ok(f(&found))
            }
            None => Err(Error::InvalidHandle {
                kind: "stream",
                handle: stream.0,
            }),
        }
    }

    fn event(&self, device: &SimDevice, event: EventHandle) -> Result<Arc<SimEvent>> {
        match lock(&device.events).get(&event.0) {
            Some(found) => Ok(Arc::clone(found)),
            None => Err(Error::InvalidHandle {
                kind: "event",
                handle: event.0,
            }),
        }
    }

    /// Enqueues a copy or fill of `bytes` bytes; a short one on an idle stream runs at once (see
    /// [`stream::SimStream::run_if_idle`]).
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

    fn enqueue(
        &self,
        device: &SimDevice,
        stream: StreamHandle,
        what: &'static str,
        job: Job,
    ) -> Result<()> {
        self.stream(device, stream)?
            .enqueue(what, job)
            .map_err(|reason| Error::AsyncFailure {
                operation: what,
                stream: stream.0,
                reason,
            })
    }
}

impl Drop for SimBackend {
    // Shuts every stream down now, rather than when its last reference goes: a thread's
    // `recent_stream` memo may hold one past the backend.
    fn drop(&mut self) {
        for device in &self.devices {
            let streams = std::mem::take(&mut *write(&device.streams));
            for stream in streams.into_values() {
                stream.shut_down();
            }
        }
    }
}

/// Hashing of stream and event handles, which this backend hands out itself (sequential
/// numbers): a multiplicative hash instead of SipHash, whose resistance to chosen keys buys
/// nothing here and costs a lookup on every stream operation.
type Handles = std::hash::BuildHasherDefault<HandleHasher>;

#[derive(Default)]
struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

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

// SAFETY: the simulator keeps the trait's promises: the device count is fixed at construction;
// device ranges come from an address space that never reuses an address (only the host blocks
// behind freed ranges are reused, once nothing refers to them); host allocations are
// fresh, page-aligned, zeroed `std::alloc` memory owned by the caller until `host_free`; every
// synchronization waits for the stream worker to finish the jobs before it (`SimStream`), and
// synchronous operations wait for the whole device (`DeviceActivity::wait_idle`) first.
unsafe impl Backend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn device_info(&self, device: usize) -> Result<DeviceInfo> {
        let d = self.device(device)?;
        Ok(DeviceInfo {
            ordinal: d.ordinal,
            name: format!("gpu-mem simulator device {}", d.ordinal),
            arch: "sim".into(),
            total_memory: d.memory.capacity(),
            warp_size: d.warp_size,
            max_threads_per_block: 1024,
            max_shared_memory_per_block: d.shared_memory,
            can_map_host_memory: true,
        })
    }

    fn mem_info(&self, device: usize) -> Result<MemInfo> {
        let d = self.device(device)?;
        let total = d.memory.capacity();
        Ok(MemInfo {
            free: total.saturating_sub(d.memory.used()),
            total,
        })
    }

    fn synchronize(&self, device: usize) -> Result<()> {
        reentry::refuse_in_kernel("synchronize")?;
        let d = self.device(device)?;
        let streams: Vec<(u64, Arc<SimStream>)> = read(&d.streams)
            .iter()
            .map(|(h, s)| (*h, Arc::clone(s)))
            .collect();
        // Every stream is waited for, even after a failure; the first failure is returned, and
        // left for the stream's own synchronization too (its owner is told of it there, as on
        // a GPU, where such an error stays).
        let mut first = Ok(());
        for (handle, stream) in streams {
            if let Err((operation, reason)) = stream.wait_and_peek()
                && first.is_ok()
            {
                first = Err(Error::AsyncFailure {
                    operation,
                    stream: handle,
                    reason,
                });
            }
        }
        first
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
unsafe impl Memory for SimBackend {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "device allocations must be non-empty".into(),
            });
        }
        d.memory.allocate(bytes)
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        reentry::refuse_in_kernel("free of device memory")?;
        let d = self.device(device)?;
        // cuMemFree synchronizes with outstanding work; so does the simulator.
        d.activity.wait_idle();
        d.memory.free(ptr)
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        let d = self.device(device)?;
        if bytes == 0 {
            // As CUDA and HSA: `cuMemHostAlloc` of 0 bytes is an invalid value.
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "page-locked allocations must be non-empty".into(),
            });
        }
        let mut host = lock(&d.host);
        let (ptr, layout) = host.allocate(bytes)?;
        let mapped = match flags
            .mapped
            .then(|| d.memory.map_host(ptr, bytes))
            .transpose()
        {
            Ok(mapped) => mapped,
            Err(e) => {
                host.release_unmapped(ptr, layout);
                return Err(e);
            }
        };
        host.insert_pinned(ptr, Pinned { layout, mapped });
        Ok(HostAllocation {
            host: ptr,
            device: mapped,
            zeroed: true,
        })
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("free of page-locked memory")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        let pinned = lock(&d.host).remove_pinned(host)?;
        if let Some(mapped) = pinned.mapped {
            d.memory.unmap_host(mapped);
        }
        // SAFETY: `host` was allocated by `host_alloc` with exactly this layout and has just been
        // removed from the table, so it is freed once.
        unsafe { std::alloc::dealloc(host.as_ptr(), pinned.layout) };
        Ok(())
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "cannot register an empty range".into(),
            });
        }
        let mut table = lock(&d.host);
        // Managed memory (and any other mapped window) is the simulator's own already.
        if d.memory.host_window(host.as_ptr(), bytes).is_some() {
            return Err(Error::HostRegistration {
                address: host.as_ptr() as usize,
                bytes,
                reason: "part of the range is memory the device maps already (managed or \
                         page-locked memory)",
            });
        }
        table.register(
            host.as_ptr() as usize,
            RegisteredRange {
                len: bytes,
                mapped: None,
            },
        )?;
        let mapped = match flags
            .mapped
            .then(|| d.memory.map_host(host, bytes))
            .transpose()
        {
            Ok(mapped) => mapped,
            Err(e) => {
                table.unregister(host.as_ptr() as usize)?;
                return Err(e);
            }
        };
        if let Some(ptr) = mapped {
            table.unregister(host.as_ptr() as usize)?;
            table.register(
                host.as_ptr() as usize,
                RegisteredRange {
                    len: bytes,
                    mapped: Some(ptr),
                },
            )?;
        }
        Ok(mapped)
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("host memory unregistration")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        let range = lock(&d.host).unregister(host.as_ptr() as usize)?;
        if let Some(mapped) = range.mapped {
            d.memory.unmap_host(mapped);
        }
        Ok(())
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
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

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Streams for SimBackend {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        let d = self.device(device)?;
        let handle = self.handle();
        let stream = SimStream::spawn(
            format!("gpu-mem-sim-d{device}-s{handle}"),
            Arc::clone(&d.activity),
        )
        .map_err(|reason| Error::NotSupportedByBackend {
            backend: BackendKind::Sim,
            feature: "streams",
            reason,
        })?;
        write(&d.streams).insert(handle, Arc::new(stream));
        Ok(StreamHandle(handle))
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        reentry::refuse_in_kernel("stream destruction")?;
        let d = self.device(device)?;
        let removed = write(&d.streams).remove(&stream.0);
        match removed {
            Some(stream) => {
                stream.shut_down();
                Ok(())
            }
            None => Err(Error::InvalidHandle {
                kind: "stream",
                handle: stream.0,
            }),
        }
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        reentry::refuse_in_kernel("stream synchronize")?;
        let d = self.device(device)?;
        // Done already (the usual case after small copies): answered without a reference to
        // the stream; otherwise the wait happens with one.
        let result =
            match self.on_stream(d, stream, |s| s.finished().ok_or_else(|| Arc::clone(s)))? {
                Ok(result) => result,
                Err(running) => running.synchronize(),
            };
        result.map_err(|(operation, reason)| Error::AsyncFailure {
            operation,
            stream: stream.0,
            reason,
        })
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        let d = self.device(device)?;
        let sim_stream = self.stream(d, stream)?;
        if !sim_stream.is_idle() {
            return Ok(false);
        }
        // Finished, but with a failure: say so (as `cuStreamQuery` returns the error), leaving
        // it for the stream's synchronization, which reports it to the stream's owner.
        match sim_stream.peek_failure() {
            Ok(()) => Ok(true),
            Err((operation, reason)) => Err(Error::AsyncFailure {
                operation,
                stream: stream.0,
                reason,
            }),
        }
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        let generation = event.current_generation();
        self.enqueue(
            d,
            stream,
            "event wait",
            Box::new(move || {
                event.wait_for(generation);
                Ok(())
            }),
        )
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Events for SimBackend {
    fn event_create(&self, device: usize, timing: bool) -> Result<EventHandle> {
        let d = self.device(device)?;
        let handle = self.handle();
        lock(&d.events).insert(handle, Arc::new(SimEvent::new(timing)));
        Ok(EventHandle(handle))
    }

    unsafe fn event_destroy(&self, device: usize, event: EventHandle) -> Result<()> {
        let d = self.device(device)?;
        lock(&d.events)
            .remove(&event.0)
            .map(drop)
            .ok_or(Error::InvalidHandle {
                kind: "event",
                handle: event.0,
            })
    }

    unsafe fn event_record(
        &self,
        device: usize,
        event: EventHandle,
        stream: StreamHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        let job_event = Arc::clone(&event);
        event.record_with(|generation| {
            self.enqueue(
                d,
                stream,
                "event record",
                Box::new(move || {
                    job_event.complete(generation);
                    Ok(())
                }),
            )
        })
    }

    unsafe fn event_query(&self, device: usize, event: EventHandle) -> Result<bool> {
        let d = self.device(device)?;
        Ok(self.event(d, event)?.is_complete())
    }

    unsafe fn event_synchronize(&self, device: usize, event: EventHandle) -> Result<()> {
        reentry::refuse_in_kernel("event synchronize")?;
        let d = self.device(device)?;
        let event = self.event(d, event)?;
        event.wait_for(event.current_generation());
        Ok(())
    }

    unsafe fn event_elapsed_ms(
        &self,
        device: usize,
        start: EventHandle,
        end: EventHandle,
    ) -> Result<f32> {
        let d = self.device(device)?;
        let (start, end) = (self.event(d, start)?, self.event(d, end)?);
        if !start.timing || !end.timing {
            return Err(Error::EventTiming {
                reason: "an event was created with timing disabled",
            });
        }
        match (start.time(), end.time()) {
            (Some(a), Some(b)) => {
                let ms = if b >= a {
                    (b - a).as_secs_f64() * 1e3
                } else {
                    -((a - b).as_secs_f64() * 1e3)
                };
                Ok(ms as f32)
            }
            _ => Err(Error::EventTiming {
                reason: "an event has not completed (synchronize it first)",
            }),
        }
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl Launch for SimBackend {
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        let d = self.device(device)?;
        if !matches!(d.warp_size, 32 | 64) {
            // `SimDeviceConfig` is plain data; only `from_env` checks what it parses. Warp masks
            // and ballots are 64 bits wide.
            return Err(Error::InvalidLaunch {
                kernel: kernel.name().to_string(),
                reason: format!(
                    "simulated device {device} has a warp size of {}; the simulator runs warps of 32 or 64 threads (SimDeviceConfig::warp_size)",
                    d.warp_size
                ),
            });
        }
        // Portable source is what a GPU runs, so it is preferred; the closure form is for
        // kernels written only for the simulator.
        let code = launch::LaunchCode::of(kernel)?;
        code.check_args(kernel.name(), args)?;
        executor::check_config(kernel, config, d.shared_memory, code.static_shared())?;
        let resolved = executor::resolve_args(&d.memory, kernel.name(), args)?;
        let name = kernel.name().to_string();
        let config = *config;
        let limits = executor::Limits {
            warp_size: d.warp_size,
            shared_memory: d.shared_memory,
            watchdog: d.watchdog,
        };
        match stream {
            None => {
                reentry::refuse_in_kernel("synchronous kernel launch")?;
                d.activity.wait_idle();
                executor::run_grid(&name, code.code(), &resolved, &config, limits)
            }
            Some(stream) => self.enqueue(
                d,
                stream,
                "kernel launch",
                Box::new(move || {
                    let ran = executor::run_grid(&name, code.code(), &resolved, &config, limits);
                    // The job may hold the last clone of the kernel, whose captures are dropped
                    // here: a blocking call from their `Drop` would wait for this very job, so
                    // it is refused as one from the kernel's threads is.
                    let _in_kernel = reentry::enter_kernel(&name);
                    drop(code);
                    ran.map_err(|e| e.to_string())
                }),
            ),
        }
    }

    fn module_global(
        &self,
        device: usize,
        module: &gpu_mem_core::kernel::Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        self.map_module_global(device, module, name)
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl PeerAccess for SimBackend {
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool> {
        self.device(device)?;
        self.device(peer)?;
        Ok(true)
    }

    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()> {
        let d = self.device(device)?;
        let p = self.device(peer)?;
        if device != peer {
            d.memory.enable_peer(peer, p.memory.shared_regions());
        }
        Ok(())
    }

    unsafe fn copy_peer(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        reentry::refuse_in_kernel("peer copy")?;
        let (d, s) = (self.device(dst_device)?, self.device(src_device)?);
        let to = d.memory.resolve_own_write(dst, bytes)?;
        let from = s.memory.resolve_own(src, bytes)?;
        d.activity.wait_idle();
        s.activity.wait_idle();
        copy_ranges(&to, &from);
        Ok(())
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
        let (d, s) = (self.device(dst_device)?, self.device(src_device)?);
        let to = d.memory.resolve_own_write(dst, bytes)?;
        let from = s.memory.resolve_own(src, bytes)?;
        self.enqueue(
            d,
            stream,
            "peer copy",
            Box::new(move || {
                copy_ranges(&to, &from);
                Ok(())
            }),
        )
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl IpcMemory for SimBackend {
    fn ipc_get_handle(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        reentry::refuse_in_kernel("IPC handle export")?;
        let d = self.device(device)?;
        let region = d.memory.allocation(ptr)?;
        // The block's bytes move onto a shared file: nothing may be writing them meanwhile, and
        // a block not zeroed yet is zeroed first (`resolve` does it).
        d.activity.wait_idle();
        d.memory.resolve(ptr, region.len())?;
        ipc::export(&region)
    }

    fn ipc_open_handle(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        let d = self.device(device)?;
        let (mapping, ptr) = ipc::import(handle)?;
        let len = usize::try_from(handle.bytes).map_err(|_| Error::Overflow {
            what: format!("an IPC mapping of {} bytes", handle.bytes),
        })?;
        d.memory.insert_imported(mapping, ptr, len)
    }

    unsafe fn ipc_close_handle(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        reentry::refuse_in_kernel("IPC handle close")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        d.memory.remove_imported(ptr)
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl ManagedMemory for SimBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "managed allocations must be non-empty".into(),
            });
        }
        let (ptr, host) = d.memory.allocate_managed(bytes)?;
        Ok(HostAllocation {
            host,
            device: Some(ptr),
            zeroed: true,
        })
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("free of managed memory")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        d.memory.free_managed(host)
    }
}

// SAFETY: the promises this concern makes are among those the `Backend` impl above keeps (see its SAFETY comment).
unsafe impl StreamOrderedPool for SimBackend {
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        let d = self.device(device)?;
        // The stream must exist; the block is taken from the pool (the cache) at once, which
        // work enqueued later on the stream may use.
        self.stream(d, stream)?;
        self.alloc(device, bytes)
    }

    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()> {
        let d = self.device(device)?;
        d.memory.allocation(ptr)?;
        let memory = Arc::clone(&d.memory);
        self.enqueue(
            d,
            stream,
            "stream-ordered free",
            Box::new(move || memory.free(ptr).map_err(|e| e.to_string())),
        )
    }

    fn pool_usage(&self, device: usize) -> Result<PoolUsage> {
        let d = self.device(device)?;
        let used = d.memory.used();
        Ok(PoolUsage {
            used,
            reserved: used + d.memory.cached(),
            release_threshold: d.memory.cache_limit(),
        })
    }

    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        self.device(device)?.memory.set_cache_limit(bytes);
        Ok(())
    }

    fn pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        self.device(device)?.memory.trim_cache_to(keep);
        Ok(())
    }
}

impl SimBackend {
    /// `Backend::module_global`: the module's library holds the variable in this process (one
    /// copy for every simulated device: libraries are loaded once per process); it is mapped
    /// into the device's address space once, like mapped host memory, so copies reach it and
    /// kernels reach it directly.
    fn map_module_global(
        &self,
        device: usize,
        module: &gpu_mem_core::kernel::Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        let d = self.device(device)?;
        let key = (module.clone(), name.trim().to_string());
        let mut symbols = lock(&d.symbols);
        if let Some(found) = symbols.get(&key) {
            return Ok(*found);
        }
        let variable = source::variable(module, name)?;
        let host = NonNull::new(std::ptr::with_exposed_provenance_mut::<u8>(
            variable.address,
        ))
        .ok_or_else(|| Error::InvalidArgument {
            name: "symbol",
            reason: format!("the variable `{name}` has no address"),
        })?;
        let ptr = d.memory.map_host(host, variable.size.max(1))?;
        symbols.insert(key, (ptr, variable.size));
        Ok((ptr, variable.size))
    }
}
