//! Managed memory: HSA has no migrating unified memory in the 5.2.3 interface the backend is
//! built on (SVM attributes need HMM-capable kernels and say nothing about the host address), so
//! `managed_alloc` gives the closest equivalent with the same rules as `host_alloc`: memory from
//! the fine-grained system pool, made accessible with `hsa_amd_agents_allow_access` to every GPU
//! that may reach that pool (as `CU_MEM_ATTACH_GLOBAL` makes managed memory reachable from all
//! devices), with the host address as the device address. It stays in system memory (kernels
//! reach it over the bus, coherently) and is not zeroed by the runtime. `managed_free` frees only
//! memory from `managed_alloc` (and `host_free` refuses it).
//!
//! **Prefetch and advice** do not reach the runtime. HSA's hints, `hsa_amd_svm_prefetch_async`
//! and `hsa_amd_svm_attributes_set`, act on SVM ranges (system-allocator memory the kernel driver
//! tracks through HMM); memory from `hsa_amd_memory_pool_allocate` is a buffer object the driver
//! has mapped already, and KFD refuses SVM attributes on such a range (`svm_range_check_vm`:
//! `-EADDRINUSE`). Nor would they mean anything here: fine-grained system memory is coherent for
//! every agent and never migrates. So `managed_prefetch` is a validated no-op, and
//! `managed_advise` is validated and recorded ([`ManagedHints`], read with
//! [`RocBackend::managed_hints`]; a prefetch is recorded too, at once, since there is nothing to
//! wait for). Validation: a non-empty range inside one managed allocation of the device, a
//! stream of the device (prefetch), and a location that is the host or a GPU that may reach the
//! system pool (a GPU that may not is [`Error::NotSupportedByBackend`]).

use super::RocBackend;
use super::memory::{HostAlloc, containing, free_or_restore, take_if};
use gpu_mem_core::backend::{
    DevicePtr, HostAllocation, ManagedAdvice, ManagedHints, ManagedLocation, ManagedMemory,
    StreamHandle,
};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use std::ptr::NonNull;

impl RocBackend {
    /// What the advice and prefetches given so far say about the managed allocation holding
    /// `ptr` on `device` (any address inside it).
    pub fn managed_hints(&self, device: usize, ptr: DevicePtr) -> Result<ManagedHints> {
        let base = self.managed_base(device, ptr, 1)?;
        Ok(lock(&self.managed_hints)
            .get(&base)
            .cloned()
            .unwrap_or_default())
    }

    /// The base of the managed allocation of `device` holding `ptr..ptr+bytes` (`bytes` > 0).
    fn managed_base(&self, device: usize, ptr: DevicePtr, bytes: usize) -> Result<usize> {
        self.gpu(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "a managed-memory hint needs a non-empty range".into(),
            });
        }
        let invalid = |reason| Error::InvalidPointer {
            kind: "managed",
            address: ptr.0,
            bytes: bytes as u64,
            reason,
        };
        let address = usize::try_from(ptr.0).map_err(|_| invalid("not a host address"))?;
        match containing(&lock(&self.registry.host), address, bytes, |a| a.bytes) {
            Some((base, alloc)) if alloc.managed && alloc.device == device => Ok(base),
            _ => Err(invalid("not inside one managed allocation of this device")),
        }
    }

    /// `Ok` for the host, or a GPU that may reach the system pool managed memory lives in.
    fn check_location(&self, at: ManagedLocation) -> Result<()> {
        let Some(ordinal) = at.device() else {
            return Ok(());
        };
        if self.gpu(ordinal)?.host_pool_access {
            return Ok(());
        }
        Err(Error::NotSupportedByBackend {
            backend: BackendKind::Roc,
            feature: "managed memory hints",
            reason: format!(
                "GPU {ordinal} may never access the system memory pool managed memory lives in"
            ),
        })
    }

    /// Records what `change` does to the hints of the allocation at `base`.
    fn record_hint(&self, base: usize, change: impl FnOnce(&mut ManagedHints)) {
        change(lock(&self.managed_hints).entry(base).or_default());
    }
}

// SAFETY: managed memory is fine-grained system-pool memory, page aligned and the caller's
// until `managed_free` (which drains the device's streams first), with the host address as the
// device address. Prefetch and advice only validate and record: they reach no memory at all.
unsafe impl ManagedMemory for RocBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        let gpu = self.gpu(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "managed allocations must be larger than 0 bytes".into(),
            });
        }
        if !gpu.host_pool_access {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "managed memory",
                reason: format!("GPU {device} may never access the system memory pool"),
            });
        }
        // SAFETY: the system pool of the topology this runtime reported, initialised while the
        // backend lives.
        let ptr = unsafe {
            self.hsa
                .memory_pool_allocate(self.topology.host.pool.pool, bytes)
        }?;
        let agents = self.host_agents(device, true);
        // SAFETY: `ptr` is the base of the allocation just made.
        if let Err(e) = unsafe { self.hsa.agents_allow_access(&agents, ptr) } {
            // SAFETY: just allocated, nothing uses it.
            let _ = unsafe { self.hsa.memory_pool_free(ptr) };
            return Err(e);
        }
        let Some(host) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(Error::InvalidPointer {
                kind: "host",
                address: 0,
                bytes: bytes as u64,
                reason: "the system pool returned a null pointer",
            });
        };
        lock(&self.registry.host).insert(
            ptr as usize,
            HostAlloc {
                device,
                bytes,
                // Granted to every GPU with system-pool access (`host_agents(device, true)`).
                portable: true,
                managed: true,
            },
        );
        // A fresh allocation has no hints (an entry left at the address by a hint that raced
        // with the free of the memory there before goes).
        lock(&self.managed_hints).remove(&(ptr as usize));
        Ok(HostAllocation {
            host,
            device: Some(DevicePtr(ptr as u64)),
            zeroed: false,
        })
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        self.gpu(device)?;
        let address = host.as_ptr() as usize;
        let taken = take_if(&self.registry.host, address, |a| {
            a.device == device && a.managed
        });
        let Some(known) = taken else {
            return Err(Error::InvalidPointer {
                kind: "managed",
                address: address as u64,
                bytes: 0,
                reason: "not the base of a managed allocation of this device",
            });
        };
        // Kernels reach managed memory without the backend knowing: order the free after all
        // of the device's work, as the synchronous calls are.
        self.drain_device_for_ordering(device);
        let hints = lock(&self.managed_hints).remove(&address);
        free_or_restore(&self.registry.host, address, known, || {
            // SAFETY: the base of a live system-pool allocation, unused by enqueued work
            // (caller).
            unsafe { self.hsa.memory_pool_free(host.as_ptr().cast()) }
        })
        .inspect_err(|_| {
            if let Some(hints) = hints {
                lock(&self.managed_hints).insert(address, hints);
            }
        })
    }

    unsafe fn managed_prefetch(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        to: ManagedLocation,
        stream: StreamHandle,
    ) -> Result<()> {
        let base = self.managed_base(device, ptr, bytes)?;
        self.check_location(to)?;
        self.stream(device, stream)?;
        // Fine-grained system memory never migrates: nothing to enqueue (see the module docs).
        self.record_hint(base, |hints| hints.prefetched(to));
        Ok(())
    }

    fn managed_advise(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        advice: ManagedAdvice,
    ) -> Result<()> {
        let base = self.managed_base(device, ptr, bytes)?;
        if let Some(at) = advice.location() {
            self.check_location(at)?;
        }
        self.record_hint(base, |hints| hints.advise(advice));
        Ok(())
    }
}
