//! [`Launch`] on HSA: hiprtc-compiled portable source dispatched through an AQL queue.
//!
//! **Not yet run on AMD hardware**: checked against the real hiprtc and a stand-in runtime whose
//! packet processor reads these packets but runs no GPU code (tests/mock_backend.rs).
//!
//! A launch takes four steps: `code` compiles the source with the `gpu_mem.h` prelude for the
//! agent's ISA and loads it, once per (kernel id, device); `limits` checks block, grid and shared
//! memory against the agent ([`Error::InvalidLaunch`] naming the kernel); `kernargs` puts each
//! argument where the code object's metadata places its parameter, in a buffer of its own from
//! the kernarg pool; `queue` writes the dispatch packet to the device's one AQL queue, created at
//! its first launch. Guarantees:
//!
//! * A stream launch runs after the stream's previous work and pending event waits (a failed one
//!   refuses the launch): through the packet's barrier bit when that work is the queue's previous
//!   packet, through barrier-AND packets otherwise; its completion signal joins the stream's
//!   chain. Kernels of different streams carry no ordering and may overlap.
//! * A synchronous launch (`stream: None`) drains every stream of the device, then dispatches and
//!   waits; a failure is its error.
//! * Several threads may submit at once; the doorbell never goes lower than before.
//! * Nothing a packet names is freed under the packet processor: the completion signal owns the
//!   kernarg buffer and the loaded kernel until it is observed complete. A dispatch stuck behind
//!   failed work is reported failed, not waited on forever; it and its queue are leaked.
//! * A queue error or GPU memory fault fails every dispatch in flight on the device's queue; the
//!   next launch gets a new queue, and the broken one is kept, never destroyed.
//! * Refused with [`Error::NotSupportedByBackend`]: kernels needing host services (hostcall and
//!   printf buffers, device heap, multi-grid sync, device-side enqueue) and cooperative launches.
//!   Kernels cannot be timed through events (dispatch timestamps are not enabled).
//!
//! Details, and the HSA rules each step follows: the book's ROC notes, *Kernel launches*.

mod code;
mod kernargs;
mod limits;
mod metadata;
mod queue;

use super::RocBackend;
use super::signal::{self, QUEUE_FAILED, Signal, State};
use crate::driver::hsa::PoolInfo;
use code::{LoadedKernel, LoadedModule};
use gpu_mem_core::backend::{DevicePtr, Launch, StreamHandle};
use gpu_mem_core::kernel::{Kernel, KernelSource, LaunchArg, LaunchConfig, Module};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hsa_sys as sys;
use kernargs::{DispatchShape, KernargBuffer};
use limits::{Geometry, Limits};
use queue::AqlQueue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The device's current queue and its last packet.
#[derive(Debug)]
struct QueueState {
    queue: Arc<AqlQueue>,
    /// The last dispatch submitted to `queue` (in write-index order).
    tail: Option<Arc<Signal>>,
}

/// What one device needs to dispatch.
#[derive(Debug)]
struct DeviceLaunch {
    limits: Limits,
    agent: sys::hsa_agent_t,
    state: Mutex<QueueState>,
    /// Queues the runtime reported broken (an error or a memory fault) or found stuck behind
    /// failed work, replaced by a new one. Their failed packets never complete and still name
    /// kernargs and kernel objects, so they are never destroyed.
    retired: Mutex<Vec<Arc<AqlQueue>>>,
    kernarg_pool: PoolInfo,
    /// The GPU agent to grant access to kernarg buffers, when the pool does not by default.
    kernarg_grant: Option<sys::hsa_agent_t>,
}

impl DeviceLaunch {
    /// The queue to dispatch to: the current one, or a new one when the runtime reported the
    /// current one broken or it is stuck behind failed work (work already on it fails; later
    /// work runs on the new one).
    fn queue(&self, hsa: &Arc<crate::driver::Hsa>) -> Result<Arc<AqlQueue>> {
        let mut state = lock(&self.state);
        if let Some(reason) = state.queue.health().describe() {
            let fresh = Arc::new(AqlQueue::create(hsa, self.agent)?);
            let broken = std::mem::replace(&mut state.queue, fresh);
            state.tail = None;
            let retired = {
                let mut retired = lock(&self.retired);
                retired.push(broken);
                retired.len()
            };
            // Each kept for good: a program that keeps failing work uses up hardware queues.
            tracing::warn!(
                %reason,
                retired,
                "replacing a broken AQL queue with a new one (the broken one is never destroyed)"
            );
        }
        Ok(Arc::clone(&state.queue))
    }
}

/// How many times a launch picks the device's queue again when it was replaced meanwhile.
const QUEUE_ATTEMPTS: usize = 4;

/// The backend's launch state: queues per device, loaded modules per (module, device), and
/// loaded kernels per (kernel id, device) with the source they were found for (a kernel value
/// carrying other source under the same id, a re-built clone, gets its own entry instead of
/// running stale code).
#[derive(Debug, Default)]
pub struct Launcher {
    devices: Mutex<HashMap<usize, Arc<DeviceLaunch>>>,
    modules: Mutex<HashMap<(Module, usize), BuiltModule>>,
    kernels: Mutex<HashMap<(u64, usize), FoundKernels>>,
}

/// A module for a device: empty until a build succeeded. Each has its own lock, held while it
/// is built, so that one module's build (seconds of hiprtc and loading) holds up neither the
/// launches of kernels already built nor other builds (hiprtc itself is serialised in
/// `hiprtc`).
type BuiltModule = Arc<Mutex<Option<Arc<LoadedModule>>>>;

/// The kernels found for one (kernel id, device), with the source each was found for.
type FoundKernels = Vec<(KernelSource, Arc<LoadedKernel>)>;

impl Launcher {
    /// Destroys queues and executables when every stream drained cleanly (`healthy`) and no
    /// queue reported an error; leaks them otherwise (failed work may still sit in a queue,
    /// naming its kernel objects and kernargs).
    pub fn release(&self, healthy: bool) {
        let kernels: Vec<Arc<LoadedKernel>> = lock(&self.kernels)
            .drain()
            .flat_map(|(_, built)| built.into_iter().map(|(_, kernel)| kernel))
            .collect();
        let modules: Vec<Arc<LoadedModule>> = lock(&self.modules)
            .drain()
            .filter_map(|(_, slot)| lock(&slot).take())
            .collect();
        let devices: Vec<_> = lock(&self.devices).drain().map(|(_, d)| d).collect();
        for d in &devices {
            // Never destroyed (see `DeviceLaunch::retired`).
            for queue in lock(&d.retired).drain(..) {
                std::mem::forget(queue);
            }
        }
        let broken = devices
            .iter()
            .any(|d| lock(&d.state).queue.health().describe().is_some());
        if healthy && !broken {
            for d in &devices {
                lock(&d.state).tail.take();
            }
            drop(kernels);
            drop(modules);
            drop(devices);
        } else if !devices.is_empty() {
            tracing::warn!(
                queues = devices.len(),
                "leaking AQL queues and loaded kernels: failed work may still reference them"
            );
            std::mem::forget(kernels);
            std::mem::forget(modules);
            std::mem::forget(devices);
        }
    }
}

impl RocBackend {
    /// The device's queue and limits, set up at its first launch.
    fn device_launch(&self, device: usize) -> Result<Arc<DeviceLaunch>> {
        let mut devices = lock(&self.launcher.devices);
        if let Some(d) = devices.get(&device) {
            return Ok(Arc::clone(d));
        }
        let gpu = self.gpu(device)?;
        let limits = Limits::read(
            &self.hsa,
            gpu.agent,
            gpu.info.max_shared_memory_per_block as u64,
        )?;
        let host = &self.topology.host;
        let kernarg_pool = host.kernarg_pool.unwrap_or(host.pool);
        // SAFETY: HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS is an hsa_amd_memory_pool_access_t (u32).
        let access: u32 = unsafe {
            self.hsa.agent_memory_pool_get_info(
                gpu.agent,
                kernarg_pool.pool,
                sys::HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
            )
        }?;
        if access == sys::HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "kernel launch",
                reason: format!("GPU {device} may never access the kernarg memory pool"),
            });
        }
        let kernarg_grant =
            (access != sys::HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT).then_some(gpu.agent);
        let queue = Arc::new(AqlQueue::create(&self.hsa, gpu.agent)?);
        let launch = Arc::new(DeviceLaunch {
            limits,
            agent: gpu.agent,
            state: Mutex::new(QueueState { queue, tail: None }),
            retired: Mutex::new(Vec::new()),
            kernarg_pool,
            kernarg_grant,
        });
        devices.insert(device, Arc::clone(&launch));
        Ok(launch)
    }

    /// `module` compiled and loaded for `device`, from the cache or now. The entry's lock is
    /// held while compiling so concurrent first launches of one module load it once (see
    /// [`BuiltModule`]); a failed build leaves it empty, for the next launch to try again.
    pub(super) fn loaded_module(
        &self,
        device: usize,
        module: &Module,
    ) -> Result<Arc<LoadedModule>> {
        let slot = Arc::clone(
            lock(&self.launcher.modules)
                .entry((module.clone(), device))
                .or_default(),
        );
        let mut entry = lock(&slot);
        if let Some(loaded) = &*entry {
            return Ok(Arc::clone(loaded));
        }
        let gpu = self.gpu(device)?;
        let started = std::time::Instant::now();
        let compiled = crate::hiprtc::compile_module(module, &gpu.info.arch)?;
        let bytes = compiled.code.len();
        let loaded = Arc::new(code::load_module(
            &self.hsa,
            gpu.agent,
            compiled.code,
            compiled.lowered,
        )?);
        tracing::debug!(
            module = module.name(),
            arch = %gpu.info.arch,
            bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "module compiled and loaded"
        );
        *entry = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// The kernel loaded for `device`, its module compiled and loaded first where it is not yet.
    fn loaded_kernel(
        &self,
        device: usize,
        kernel: &Kernel,
        source: &KernelSource,
    ) -> Result<Arc<LoadedKernel>> {
        if let Some(built) = lock(&self.launcher.kernels).get(&(kernel.id(), device))
            && let Some((_, found)) = built.iter().find(|(from, _)| from == source)
        {
            return Ok(Arc::clone(found));
        }
        let module = self.loaded_module(device, &source.module)?;
        let loaded = Arc::new(module.kernel(&self.hsa, kernel.name(), &source.entry)?);
        lock(&self.launcher.kernels)
            .entry((kernel.id(), device))
            .or_default()
            .push((source.clone(), Arc::clone(&loaded)));
        Ok(loaded)
    }

    /// Submits the dispatch behind `deps` and returns its completion signal; `None`, with
    /// nothing submitted, when `queue` was replaced or found broken or stuck since the caller
    /// chose it (the caller chooses again).
    fn dispatch(
        &self,
        dev: &DeviceLaunch,
        queue: &Arc<AqlQueue>,
        loaded: Arc<LoadedKernel>,
        buffer: KernargBuffer,
        geometry: Geometry,
        deps: Vec<Arc<Signal>>,
    ) -> Result<Option<Arc<Signal>>> {
        // Finished dependencies need no packet; a failed one means the dispatch could never run.
        let mut pending = Vec::new();
        for dep in &deps {
            match dep.state()? {
                State::Done => {}
                State::Failed(value) => {
                    return Err(Error::AsyncFailure {
                        operation: "kernel launch",
                        stream: 0,
                        reason: format!(
                            "`{}` cannot run: {} it waits for failed (signal value {value})",
                            loaded.entry, dep.operation
                        ),
                    });
                }
                State::Pending => pending.push(Arc::clone(dep)),
            }
        }
        let kernarg_address = buffer.address();
        let (kernel_object, private_size) = (loaded.kernel_object, loaded.private_size);
        let completion = Signal::for_dispatch(
            &self.hsa,
            "kernel dispatch",
            deps,
            Arc::clone(queue.health()),
            Box::new((buffer, loaded)),
        )?;
        let packet = sys::hsa_kernel_dispatch_packet_t {
            setup: geometry.dims << sys::HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
            workgroup_size_x: geometry.workgroup[0],
            workgroup_size_y: geometry.workgroup[1],
            workgroup_size_z: geometry.workgroup[2],
            grid_size_x: geometry.grid[0],
            grid_size_y: geometry.grid[1],
            grid_size_z: geometry.grid[2],
            private_segment_size: private_size,
            group_segment_size: geometry.group_segment,
            kernel_object,
            kernarg_address: kernarg_address as *mut std::ffi::c_void,
            completion_signal: completion.raw(),
            ..Default::default()
        };
        // Slots are reserved under the tail lock so that `tail` is exactly the queue's last
        // packet; writing them and ringing the doorbell happen outside it, concurrently with
        // other submitters.
        let (first, packets) = {
            let mut state = lock(&dev.state);
            // A queue replaced meanwhile, or found broken or stuck: the launch picks the queue
            // again (a packet written there would wait behind the stuck one, unlinked to it).
            if !Arc::ptr_eq(&state.queue, queue) || queue.health().describe().is_some() {
                return Ok(None);
            }
            let tail = &mut state.tail;
            // The barrier bit when the queue's previous packet is one this dispatch waits for
            // (its stream's previous kernel); barrier-AND packets for every other pending one.
            let barrier = tail
                .as_ref()
                .is_some_and(|t| pending.iter().any(|d| Arc::ptr_eq(d, t)));
            let waits: Vec<sys::hsa_signal_t> = pending
                .iter()
                .filter(|d| !(barrier && tail.as_ref().is_some_and(|t| Arc::ptr_eq(d, t))))
                .map(|d| d.raw())
                .collect();
            let mut packets = queue::barrier_packets(&waits);
            packets.push(queue::dispatch_packet(packet, barrier));
            // SAFETY: the queue lives in `dev`; the slots are written below.
            let first = unsafe { queue.reserve(packets.len()) }?;
            // The packet processor launches packets in order: if the previous packet never
            // runs (it waits for failed work), neither does this one. Holding it as a
            // dependency lets a wait notice that.
            if let Some(previous) = tail.replace(Arc::clone(&completion)) {
                completion.add_dependency(previous);
            }
            (first, packets)
        };
        // Asked while the queue is full: whether it waits behind failed work (never drains).
        let stuck = || match completion.failed_dependency() {
            Ok(Some((operation, value))) => Some(format!("{operation} failed with {value}")),
            _ => None,
        };
        // The completion signal owns the kernargs, the kernel object and the signals waited on
        // until observed complete; the queue lives in `dev`, kept until its work completed.
        // SAFETY: as just said; the slots were reserved above for these packets.
        unsafe { queue.write(first, &packets, &stuck) }?;
        Ok(Some(completion))
    }

    /// A synchronous launch (after all enqueued work of the device, drained by the caller),
    /// waited for; `None` when `dispatch` submitted nothing (the caller chooses the queue again).
    fn dispatch_now(
        &self,
        dev: &DeviceLaunch,
        queue: &Arc<AqlQueue>,
        loaded: Arc<LoadedKernel>,
        buffer: KernargBuffer,
        geometry: Geometry,
    ) -> Result<Option<()>> {
        let entry = loaded.entry.clone();
        let Some(completion) = self.dispatch(dev, queue, loaded, buffer, geometry, Vec::new())?
        else {
            return Ok(None);
        };
        match signal::wait(&completion, self.wait_tick())? {
            State::Done | State::Pending => Ok(Some(())),
            State::Failed(value) => {
                // The packet may stay in the queue forever: keep what it names alive.
                Signal::leak(completion);
                let health = queue.health();
                if health.failure() == Some(sys::HSA_STATUS_ERROR_MEMORY_FAULT) {
                    return Err(Error::AsyncFailure {
                        operation: "kernel launch",
                        stream: 0,
                        reason: format!(
                            "`{entry}` failed: {} (later launches use a new queue)",
                            health.describe().unwrap_or_default()
                        ),
                    });
                }
                if let Some(status) = health.failure() {
                    return Err(self.hsa.native_error("kernel dispatch", status));
                }
                let reason = if value == QUEUE_FAILED {
                    "the runtime reported an error on the device's dispatch queue".to_string()
                } else {
                    format!(
                        "`{entry}` cannot run: work it waits for on the device's queue failed \
                         (signal value {value})"
                    )
                };
                Err(Error::AsyncFailure {
                    operation: "kernel launch",
                    stream: 0,
                    reason,
                })
            }
        }
    }
}

// SAFETY: a launch without a stream drains the device's streams, dispatches and waits for the
// kernel; one on a stream chains on its completion signals; the kernarg buffer and the loaded
// code live until the dispatch is observed complete. Module variables are the loaded code
// object's, which stays loaded while the backend lives.
unsafe impl Launch for RocBackend {
    /// See the module contract.
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        self.gpu(device)?;
        let source = kernel
            .source()
            .ok_or_else(|| Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "kernel launch",
                reason: format!(
                    "kernel `{}` has no portable GPU source (the ROC backend compiles source with \
                 hiprtc; a simulator closure cannot run on a GPU)",
                    kernel.name()
                ),
            })?;
        if config.cooperative {
            // HIP's grid barrier needs the multi-grid arguments hipLaunchCooperativeKernel
            // passes and a co-residency check; a dispatch packet of this backend has neither.
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "cooperative launch",
                reason: format!(
                    "kernel `{}`: the ROC backend dispatches through HSA queues and cannot make a cooperative launch (this_grid().sync()); run it on CUDA or the simulator",
                    kernel.name()
                ),
            });
        }
        self.check_peer_args(device, kernel, args)?;
        let stream = stream.map(|h| self.stream(device, h)).transpose()?;
        let dev = self.device_launch(device)?;
        if stream.is_none() {
            // A synchronous launch runs after all enqueued work of the device. Drained before
            // the queue is chosen: a wait that finds a dispatch stuck behind failed work marks
            // its queue blocked, and this launch then goes to a new queue instead of behind it.
            self.drain_device_for_ordering(device);
        }
        let loaded = self.loaded_kernel(device, kernel, source)?;
        let geometry = limits::check(kernel.name(), config, &dev.limits, loaded.group_size)?;
        let explicit = kernargs::pack(kernel.name(), args, loaded.explicit.as_deref())?;
        let shape = DispatchShape {
            grid: config.grid,
            block: config.block,
            dims: geometry.dims,
            dynamic_group: u32::try_from(config.shared_bytes).unwrap_or(u32::MAX),
        };
        if loaded.kernarg_alignment as usize > dev.kernarg_pool.alignment.max(16) {
            return Err(Error::InvalidLaunch {
                kernel: kernel.name().to_string(),
                reason: format!(
                    "its kernarg segment needs {}-byte alignment; the kernarg pool gives {}",
                    loaded.kernarg_alignment, dev.kernarg_pool.alignment
                ),
            });
        }
        // The queue is chosen last, and chosen again when it was replaced (or found stuck)
        // while this launch waited for its stream: the kernarg segment names the queue.
        for _ in 0..QUEUE_ATTEMPTS {
            let queue = dev.queue(&self.hsa)?;
            let segment = kernargs::segment(
                kernel.name(),
                &explicit,
                loaded.kernarg_size as usize,
                loaded.abi_version,
                loaded.hidden.as_deref(),
                shape,
                queue.address(),
            )?;
            let buffer = KernargBuffer::new(
                &self.hsa,
                dev.kernarg_pool.pool,
                dev.kernarg_grant,
                &segment,
            )?;
            let loaded = Arc::clone(&loaded);
            let dispatched = match &stream {
                None => self.dispatch_now(&dev, &queue, loaded, buffer, geometry)?,
                Some(s) => {
                    let mut s = lock(s);
                    let deps = s.dependencies()?;
                    match self.dispatch(&dev, &queue, loaded, buffer, geometry, deps)? {
                        Some(completion) => {
                            s.push(completion);
                            Some(())
                        }
                        None => None,
                    }
                }
            };
            if dispatched.is_some() {
                return Ok(());
            }
        }
        Err(Error::AsyncFailure {
            operation: "kernel launch",
            stream: 0,
            reason: format!(
                "the device's queue was replaced {QUEUE_ATTEMPTS} times while `{}` was being \
                 submitted (work on it keeps failing)",
                kernel.name()
            ),
        })
    }

    fn module_global(
        &self,
        device: usize,
        module: &gpu_mem_core::kernel::Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        let loaded = self.loaded_module(device, module)?;
        let (address, size) = loaded.variable(&self.hsa, module.name(), name)?;
        Ok((DevicePtr(address), size))
    }
}
