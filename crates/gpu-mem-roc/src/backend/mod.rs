//! [`RocBackend`]: `gpu_mem_core::Backend` (the book's *Architecture*) on the HSA runtime, one
//! file per concern and per capability; HSA has no stream-ordered allocation: no `pool`.
//!
//! **Not yet run on hardware.** Written against the HSA runtime specification and ROCr's
//! `hsa_ext_amd.h` (5.2.3) without an AMD GPU; tested against the real runtime's loading, the
//! real hiprtc, and a stand-in runtime made of host memory and threads (tests/mock_backend.rs).
//! Running the conformance suite with `GPU_MEM_BACKEND=roc` on an AMD GPU is its first real test.
//!
//! # Contract
//!
//! * **Devices** are the GPU agents (`topology` chooses their pools). Device memory comes from
//!   the GPU's coarse-grained pool; pinned and mapped host memory from the fine-grained system
//!   pool, its host pointer being the device pointer (`memory`). Write-combined is accepted and
//!   ignored: ROCr has no such memory.
//! * **Streams** (`stream`) are ordered chains of completion signals: each operation (copies and
//!   fills in `transfer`, kernel dispatches in `launch`) depends on the previous one's signal.
//!   **Events** (`event`) are the signals a stream had reached when recorded.
//! * **Synchronous calls** first drain every stream of the device, oldest operation first, so
//!   they are ordered after all enqueued work as the trait requires.
//! * Failed asynchronous work sets its signal negative; the stream is then poisoned and reports
//!   [`Error::AsyncFailure`] at its next synchronisation. Signals the runtime may still wait on
//!   are leaked, never destroyed.
//! * **Free memory** is the total minus what this backend allocated where the runtime has no
//!   free-memory query (HSA 5.2.3): other processes' use is invisible then.
//! * Handles: [`StreamHandle`] and [`EventHandle`] are numbers this backend hands out.
//!
//! `RocBackend` is `Send + Sync` without unsafe code (library, plain handles, addresses as
//! `usize`, mutex-guarded maps); the HSA runtime is thread safe.
//!
//! The runtime call behind each method: the book's ROC notes, *How the trait maps*.

mod event;
mod ipc;
mod launch;
mod managed;
mod memory;
mod peer;
mod queue_health;
mod signal;
mod stream;
mod topology;
mod transfer;

use crate::driver::Hsa;
use event::{Event, Recorded};
use gpu_mem_core::backend::{
    DeviceInfo, EventHandle, IpcMemory, ManagedHints, ManagedMemory, MemInfo, PeerAccess,
    StreamHandle,
};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use launch::Launcher;
use memory::Registry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use stream::Stream;
use topology::{Gpu, Topology};

/// A registered stream: its device and its shared state.
type StreamEntry = (usize, Arc<Mutex<Stream>>);

/// The HSA runtime as a gpu-mem backend.
#[derive(Debug)]
pub struct RocBackend {
    hsa: Arc<Hsa>,
    topology: Topology,
    registry: Registry,
    /// Stream handle → (device, stream); the device is kept outside the stream's own lock so
    /// looking a stream up never waits for another thread draining it.
    streams: Mutex<HashMap<u64, StreamEntry>>,
    events: Mutex<HashMap<u64, Event>>,
    next_handle: AtomicU64,
    /// Whether async-copy timestamps were enabled.
    copy_timing: bool,
    /// AQL queues and loaded kernels.
    launcher: Launcher,
    /// Page-locked bounce buffers for synchronous copies of pageable memory.
    bounce: transfer::BouncePool,
    /// `(device, peer)` pairs for which `enable_peer_access` granted `device` access to
    /// `peer`'s memory (see `peer`).
    peer_access: Mutex<BTreeSet<(usize, usize)>>,
    /// Advice and prefetches recorded per managed allocation, by base address (see `managed`).
    managed_hints: Mutex<BTreeMap<usize, ManagedHints>>,
}

impl RocBackend {
    /// Initialises the runtime (`hsa_init`: a reference of the backend's own, given back with
    /// `hsa_shut_down` when it is dropped) and discovers devices and pools.
    pub fn new(hsa: Arc<Hsa>) -> Result<RocBackend> {
        hsa.init()?;
        match Self::discover(&hsa) {
            Ok(parts) => Ok(Self::with_runtime(hsa, parts)),
            Err(error) => {
                // SAFETY: gives back the reference taken just above, which nothing used.
                if let Err(e) = unsafe { hsa.shut_down() } {
                    tracing::warn!(error = %e, "hsa_shut_down after a failed backend setup");
                }
                Err(error)
            }
        }
    }

    /// The topology and whether async-copy timestamps work, from an initialised runtime.
    fn discover(hsa: &Hsa) -> Result<(Topology, bool)> {
        let topology = Topology::discover(hsa)?;
        let copy_timing = match hsa.profiling_async_copy_enable(true) {
            Ok(()) => true,
            Err(e) => {
                tracing::info!(error = %e, "async-copy timestamps unavailable; events time with the system clock");
                false
            }
        };
        for gpu in &topology.gpus {
            tracing::info!(ordinal = gpu.info.ordinal, name = %gpu.info.name, arch = %gpu.info.arch,
                total = gpu.info.total_memory, "ROC device");
        }
        Ok((topology, copy_timing))
    }

    fn with_runtime(hsa: Arc<Hsa>, (topology, copy_timing): (Topology, bool)) -> RocBackend {
        RocBackend {
            hsa,
            topology,
            registry: Registry::default(),
            streams: Mutex::new(HashMap::new()),
            events: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            copy_timing,
            launcher: Launcher::default(),
            bounce: transfer::BouncePool::default(),
            peer_access: Mutex::new(BTreeSet::new()),
            managed_hints: Mutex::new(BTreeMap::new()),
        }
    }

    fn gpu(&self, device: usize) -> Result<&Gpu> {
        self.topology.gpus.get(device).ok_or(Error::NoSuchDevice {
            backend: BackendKind::Roc,
            device,
            count: self.topology.gpus.len(),
        })
    }

    /// How long one blocking wait lasts before dependencies are re-checked: 100 ms.
    fn wait_tick(&self) -> u64 {
        (self.topology.timestamp_frequency / 10).max(1)
    }

    fn stream(&self, device: usize, handle: StreamHandle) -> Result<Arc<Mutex<Stream>>> {
        self.gpu(device)?;
        let streams = lock(&self.streams);
        match streams.get(&handle.0) {
            Some((owner, s)) if *owner == device => Ok(Arc::clone(s)),
            _ => Err(Error::InvalidHandle {
                kind: "stream",
                handle: handle.0,
            }),
        }
    }

    fn streams_of(&self, device: usize) -> Vec<Arc<Mutex<Stream>>> {
        lock(&self.streams)
            .values()
            .filter(|(owner, _)| *owner == device)
            .map(|(_, s)| Arc::clone(s))
            .collect()
    }

    /// Waits for everything enqueued on the device so a synchronous call runs after it. A
    /// failed stream's remaining work never runs, so it does not delay anything; its failure is
    /// left for that stream's own synchronisation.
    fn drain_device_for_ordering(&self, device: usize) {
        for s in self.streams_of(device) {
            if let Err(e) = lock(&s).drain(self.wait_tick()) {
                tracing::debug!(error = %e, "stream failure seen while ordering a synchronous call");
            }
        }
    }

    fn memory_info(&self, device: usize) -> Result<MemInfo> {
        let gpu = self.gpu(device)?;
        let total = gpu.info.total_memory;
        let free = topology::probe_memory_avail(&self.hsa, gpu.agent)
            .unwrap_or_else(|| total.saturating_sub(self.registry.device_bytes_in_use(device)));
        Ok(MemInfo {
            free: free.min(total),
            total,
        })
    }

    fn new_handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    fn with_event<T>(
        &self,
        device: usize,
        event: EventHandle,
        f: impl FnOnce(&mut Event) -> Result<T>,
    ) -> Result<T> {
        self.gpu(device)?;
        let mut events = lock(&self.events);
        match events.get_mut(&event.0) {
            Some(e) if e.device == device => f(e),
            _ => Err(Error::InvalidHandle {
                kind: "event",
                handle: event.0,
            }),
        }
    }

    /// The recorded state of an event (cloned so waits happen without the events lock).
    fn recorded(&self, device: usize, event: EventHandle) -> Result<Option<Recorded>> {
        self.with_event(device, event, |e| Ok(e.recorded.clone()))
    }

    /// System-clock ticks at which the event's work completed.
    fn completion_ticks(&self, recorded: &Recorded) -> Result<u64> {
        if recorded.signals.is_empty() {
            return Ok(recorded.recorded_at);
        }
        if !self.copy_timing {
            return Err(Error::EventTiming {
                reason: "the HSA runtime did not enable async-copy timestamps",
            });
        }
        let mut latest = 0u64;
        for s in &recorded.signals {
            if !s.is_copy {
                return Err(Error::EventTiming {
                    reason: "the event follows work that records no timestamps",
                });
            }
            // SAFETY: the signal is live (held by `recorded`) and its copy completed (the caller
            // waited for the event).
            let (_, end) = unsafe { self.hsa.profiling_get_async_copy_time(s.raw()) }?;
            latest = latest.max(end);
        }
        Ok(latest)
    }

    fn now_ticks(&self) -> Result<u64> {
        // SAFETY: HSA_SYSTEM_INFO_TIMESTAMP is a uint64_t.
        unsafe {
            self.hsa
                .system_get_info(gpu_mem_hsa_sys::HSA_SYSTEM_INFO_TIMESTAMP)
        }
    }
}

impl Drop for RocBackend {
    fn drop(&mut self) {
        // Streams and events first: their signals must be destroyed while the runtime is up.
        let streams: Vec<_> = lock(&self.streams).drain().map(|(_, (_, s))| s).collect();
        let mut healthy = true;
        for s in streams {
            if let Err(e) = lock(&s).drain(self.wait_tick()) {
                tracing::warn!(error = %e, "stream failure while dropping the ROC backend");
                healthy = false;
            }
        }
        lock(&self.events).clear();
        // Queues and executables after the streams (their dispatches completed), before
        // the runtime goes.
        self.launcher.release(healthy);
        self.bounce.release(&self.hsa);
        // SAFETY: gives back the reference `new` took; everything the backend made is gone.
        if let Err(e) = unsafe { self.hsa.shut_down() } {
            tracing::warn!(error = %e, "hsa_shut_down failed");
        }
    }
}

// SAFETY: the agent list is read once at start-up; `synchronize` drains every stream of the
// device, waiting on the completion signals of its work (which the runtime sets only after the
// copies and dispatches have finished); each concern keeps its promises in its own file (see the
// SAFETY comment of each impl there); the capabilities are this backend itself, decided at
// compile time.
unsafe impl Backend for RocBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Roc
    }

    fn device_count(&self) -> usize {
        self.topology.gpus.len()
    }

    fn device_info(&self, device: usize) -> Result<DeviceInfo> {
        Ok(self.gpu(device)?.info.clone())
    }

    fn mem_info(&self, device: usize) -> Result<MemInfo> {
        self.memory_info(device)
    }

    fn synchronize(&self, device: usize) -> Result<()> {
        self.gpu(device)?;
        let mut first_error = None;
        for s in self.streams_of(device) {
            if let Err(e) = lock(&s).drain(self.wait_tick()) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
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
}
