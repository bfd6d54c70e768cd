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
//!
//! The `Backend` family is implemented in `backend`, one file per concern and per capability
//! (the simulator hands out all of them).

mod abi;
mod backend;
mod collective;
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
mod sanitizer;
mod signals;
mod source;
mod stream;
#[cfg(test)]
mod test_support;
pub mod thread;
mod workers;

pub use config::{
    Checks, DEFAULT_PINNED_LIMIT, DEFAULT_SHARED_MEMORY, DEFAULT_WATCHDOG, SimConfig,
    SimDeviceConfig, ThreadOrder, Watchdog, parse_size, parse_size_of,
};
pub use thread::{SimKernel, ThreadCtx};

/// Measurements for the simulator's own benchmarks; not part of the API.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_support;

use event::SimEvent;
use gpu_mem_core::backend::{DevicePtr, EventHandle, StreamHandle};
use gpu_mem_core::sync::{lock, read, write};
use gpu_mem_core::{BackendKind, Error, Result};
use host::HostTable;
use memory::AddressSpace;
use recent_stream::StreamKey;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use stream::{DeviceActivity, Job, SimStream};

struct SimDevice {
    ordinal: usize,
    warp_size: u32,
    shared_memory: usize,
    watchdog: Watchdog,
    checks: Checks,
    thread_order: ThreadOrder,
    memory: Arc<AddressSpace>,
    activity: Arc<DeviceActivity>,
    /// Read-locked to find a stream (see [`SimBackend::on_stream`]).
    streams: RwLock<HashMap<u64, Arc<SimStream>, Handles>>,
    events: Mutex<HashMap<u64, Arc<SimEvent>, Handles>>,
    host: Mutex<HostTable>,
    /// Module variables mapped into the address space (by module and name), each once.
    symbols: Mutex<HashMap<(gpu_mem_core::kernel::Module, String), (DevicePtr, usize)>>,
}

impl SimDevice {
    /// How the device's modules are built, from its checks and thread order.
    fn build(&self) -> source::Build {
        source::Build::of(self.checks, self.thread_order)
    }
}

/// The simulator backend.
pub struct SimBackend {
    /// Distinguishes this instance's stream handles from other instances' (see
    /// [`recent_stream`]).
    id: u64,
    devices: Vec<SimDevice>,
    next_handle: AtomicU64,
    /// The communicators of collective calls (`collective`).
    collectives: collective::Registry,
}

impl std::fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBackend")
            .field("devices", &self.devices.len())
            .finish()
    }
}

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
                checks: c.checks,
                thread_order: c.thread_order,
                memory: Arc::new(
                    AddressSpace::new(ordinal, c.memory).tracking_writes(c.checks.initcheck),
                ),
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
            collectives: collective::Registry::new(),
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

    /// How long a rank's collective call waits for the other ranks before it fails, naming the
    /// ranks that never called (default 30 s, or `GPU_MEM_SIM_COLLECTIVE_TIMEOUT_MS`). NCCL
    /// would wait for ever; the simulator reports the mistake instead.
    pub fn set_collective_timeout(&self, timeout: std::time::Duration) {
        self.collectives.set_timeout(timeout);
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
