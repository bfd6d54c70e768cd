//! Several GPUs: peer access and peer copies.
//!
//! * `can_access_peer(d, p)`: `hsa_amd_agent_memory_pool_get_info(agent of d, device pool of p,
//!   HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS)` is not `NEVER_ALLOWED` (a device reaches its own
//!   pool).
//! * `enable_peer_access(d, p)` records the pair and grants d's agent access to p's memory with
//!   `hsa_amd_agents_allow_access`: at once for every **existing** allocation of p, and at
//!   allocation time for every **later** one (as `cuCtxEnablePeerAccess` covers both). Since the
//!   call replaces an allocation's access set, every grant lists all devices that enabled access
//!   to p. IPC mappings get the same list when they are opened, not when access is enabled
//!   later. There is no disable.
//! * Peer copies use `hsa_amd_memory_async_copy` between the two GPU agents when each may reach
//!   the other's memory (both directions enabled), since hsa_ext_amd.h requires both agents to
//!   access both buffers. Otherwise they are staged through page-locked system memory every GPU
//!   may access: source GPU → staging, then staging → destination GPU, chunk by chunk.
//!   `copy_peer` first drains every stream of both devices and waits for its copies;
//!   `copy_peer_async` chains its copies on the destination device's stream like the other
//!   asynchronous copies (after that stream's earlier work only), a staged one through a staging
//!   buffer of its own that is freed once its last copy has completed.

use super::RocBackend;
use super::transfer::{BOUNCE_BYTES, Side};
use crate::driver::Hsa;
use gpu_mem_core::backend::{DevicePtr, PeerAccess, StreamHandle};
use gpu_mem_core::kernel::LaunchArg;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Kernel, Result};
use gpu_mem_hsa_sys as sys;
use std::collections::BTreeSet;
use std::ffi::c_void;
use std::sync::Arc;

/// A system-pool buffer staging one asynchronous peer copy; freed when the last copy using it
/// has completed (it rides on their signals as a keep-alive).
struct Staging {
    hsa: Arc<Hsa>,
    address: usize,
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: a pool allocation owned by this value alone; it is dropped only once every
        // copy holding it completed (released with their signals' dependencies) or never
        // (leaked with a failed stream's signals).
        if let Err(e) = unsafe { self.hsa.memory_pool_free(self.address as *mut c_void) } {
            tracing::warn!(error = %e, "freeing a peer-copy staging buffer failed");
        }
    }
}

impl RocBackend {
    /// The agents of every device that enabled access to `owner`'s memory (`peers` is the
    /// locked set of `(device, peer)` pairs).
    pub(super) fn peer_agents_of(
        &self,
        peers: &BTreeSet<(usize, usize)>,
        owner: usize,
    ) -> Vec<sys::hsa_agent_t> {
        peers
            .iter()
            .filter(|(_, peer)| *peer == owner)
            .filter_map(|(device, _)| self.topology.gpus.get(*device).map(|g| g.agent))
            .collect()
    }

    /// `Ok` when every array or record argument of a launch on `device` is memory its GPU may
    /// reach: its own, or of a device it enabled peer access to. (Memory of another device
    /// without that was never granted to this GPU's agent: the kernel would fault, and take
    /// its queue's other work with it.) Host and unknown addresses are left to the caller's
    /// contract.
    pub(super) fn check_peer_args(
        &self,
        device: usize,
        kernel: &Kernel,
        args: &[LaunchArg],
    ) -> Result<()> {
        if self.topology.gpus.len() < 2 {
            return Ok(());
        }
        // Looked up first, then checked: the allocation table and the peer set are separate
        // locks, never held together.
        let owners: Vec<(u64, usize)> = {
            let allocations = lock(&self.registry.device);
            args.iter()
                .filter_map(|arg| match arg {
                    LaunchArg::Array { ptr, .. } | LaunchArg::Record { ptr, .. } => {
                        let (base, alloc) = allocations.range(..=ptr.0).next_back()?;
                        (ptr.0 < base.saturating_add(alloc.bytes as u64))
                            .then_some((ptr.0, alloc.device))
                    }
                    LaunchArg::Scalar { .. } => None,
                })
                .collect()
        };
        let peers = lock(&self.peer_access);
        gpu_mem_core::kernel::check_peer_arguments(
            kernel.name(),
            device,
            args,
            |ptr| {
                owners
                    .iter()
                    .find(|(p, _)| *p == ptr)
                    .map(|(_, owner)| *owner)
            },
            |owner| peers.contains(&(device, owner)),
        )
    }

    /// Whether a direct copy between the two devices is allowed: each agent reaches the other's
    /// memory.
    fn direct_peer_copy(&self, a: usize, b: usize) -> bool {
        let peers = lock(&self.peer_access);
        peers.contains(&(a, b)) && peers.contains(&(b, a))
    }

    /// A system-pool buffer of `bytes` every GPU with system-pool access may use.
    fn staging(&self, bytes: usize) -> Result<Staging> {
        // SAFETY: the system pool of the topology this runtime reported, initialised while the
        // backend lives.
        let ptr = unsafe {
            self.hsa
                .memory_pool_allocate(self.topology.host.pool.pool, bytes)
        }?;
        let staging = Staging {
            hsa: Arc::clone(&self.hsa),
            address: ptr as usize,
        };
        let agents = self.host_agents(0, true);
        // SAFETY: `ptr` is the base of the allocation just made (freed by `staging` on error).
        unsafe { self.hsa.agents_allow_access(&agents, ptr) }?;
        Ok(staging)
    }
}

// SAFETY: peer copies touch only the given ranges of their devices (checked against their
// allocations); the synchronous one drains both devices' streams first and waits for its
// copies, the stream one chains on the destination's stream; access is granted with
// `hsa_amd_agents_allow_access` on the peer's allocations, existing and later.
unsafe impl PeerAccess for RocBackend {
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool> {
        let gpu = self.gpu(device)?;
        let target = self.gpu(peer)?;
        if device == peer {
            return Ok(true);
        }
        // SAFETY: HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS is an hsa_amd_memory_pool_access_t (u32).
        let access: u32 = unsafe {
            self.hsa.agent_memory_pool_get_info(
                gpu.agent,
                target.device_pool.pool,
                sys::HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
            )
        }?;
        Ok(access != sys::HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)
    }

    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()> {
        if !self.can_access_peer(device, peer)? {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "peer access",
                reason: format!(
                    "GPU {device} may never access the memory pool of GPU {peer} (HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)"
                ),
            });
        }
        if device == peer {
            return Ok(());
        }
        let mut peers = lock(&self.peer_access);
        if peers.contains(&(device, peer)) {
            return Ok(());
        }
        let mut with = peers.clone();
        with.insert((device, peer));
        let agents = self.peer_agents_of(&with, peer);
        let existing: Vec<u64> = lock(&self.registry.device)
            .iter()
            .filter(|(_, a)| a.device == peer && a.imports == 0)
            .map(|(base, _)| *base)
            .collect();
        for base in existing {
            // SAFETY: the base of a live pool allocation of `peer`: allocations are inserted and
            // granted under the peer-access lock held here, and freeing one while this call runs
            // would break the caller's contract of `free` (nothing else may use it).
            unsafe { self.hsa.agents_allow_access(&agents, base as *const c_void) }?;
        }
        peers.insert((device, peer));
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
        self.gpu(dst_device)?;
        self.gpu(src_device)?;
        if bytes == 0 {
            return Ok(());
        }
        let dst = self.device_side(dst_device, dst, bytes)?;
        let src = self.device_side(src_device, src, bytes)?;
        const OP: &str = "peer copy";
        self.drain_device_for_ordering(dst_device);
        self.drain_device_for_ordering(src_device);
        if dst_device == src_device || self.direct_peer_copy(dst_device, src_device) {
            // SAFETY: each agent reaches both allocations (its own, and the other's through the
            // grants of both enabled directions); they are live for the call (caller).
            return unsafe { self.copy_and_wait(dst, src, bytes, OP) };
        }
        let bounce = self.bounce()?;
        let staged = Side {
            address: bounce.address(),
            agent: self.topology.host.agent,
        };
        for offset in (0..bytes).step_by(BOUNCE_BYTES) {
            let len = BOUNCE_BYTES.min(bytes - offset);
            // SAFETY: the bounce buffer is system memory every GPU may access, ours alone for
            // this call; the device ranges are inside live allocations (checked); each copy is
            // waited for before the buffer is reused.
            unsafe {
                self.copy_and_wait(staged, src.offset(offset), len, OP)?;
                self.copy_and_wait(dst.offset(offset), staged, len, OP)?;
            }
        }
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
        let handle = self.stream(dst_device, stream)?;
        self.gpu(src_device)?;
        if bytes == 0 {
            return Ok(());
        }
        let dst = self.device_side(dst_device, dst, bytes)?;
        let src = self.device_side(src_device, src, bytes)?;
        const OP: &str = "asynchronous peer copy";
        if dst_device == src_device || self.direct_peer_copy(dst_device, src_device) {
            let mut stream = lock(&handle);
            let deps = stream.dependencies()?;
            // SAFETY: as in `copy_peer`; the ranges stay valid until the copy completes (caller).
            let completion = unsafe { self.start_copy(dst, src, bytes, deps, OP) }?;
            stream.push(completion);
            return Ok(());
        }
        let staging = Arc::new(self.staging(BOUNCE_BYTES.min(bytes))?);
        let staged = Side {
            address: staging.address,
            agent: self.topology.host.agent,
        };
        let mut stream = lock(&handle);
        let mut deps = stream.dependencies()?;
        for offset in (0..bytes).step_by(BOUNCE_BYTES) {
            if offset > 0 {
                // Two operations per chunk: the stream's bound on work in flight holds here too.
                stream.make_room()?;
            }
            let len = BOUNCE_BYTES.min(bytes - offset);
            // SAFETY: the staging buffer is GPU-accessible system memory kept alive by each copy
            // using it; each copy waits for the previous one, so its reuse is ordered; the device
            // ranges stay valid until the stream passes the copies (caller).
            let into = unsafe { self.start_copy(staged, src.offset(offset), len, deps, OP) }?;
            into.hold(Box::new(Arc::clone(&staging)));
            stream.push(Arc::clone(&into));
            // SAFETY: as above.
            let out = unsafe { self.start_copy(dst.offset(offset), staged, len, vec![into], OP) }?;
            out.hold(Box::new(Arc::clone(&staging)));
            stream.push(Arc::clone(&out));
            deps = vec![out];
        }
        Ok(())
    }
}
