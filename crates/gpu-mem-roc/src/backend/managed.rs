//! Managed memory: HSA has no migrating unified memory in the 5.2.3 interface the backend is
//! built on (SVM attributes need HMM-capable kernels and say nothing about the host address), so
//! `managed_alloc` gives the closest equivalent with the same rules as `host_alloc`: memory from
//! the fine-grained system pool, made accessible with `hsa_amd_agents_allow_access` to every GPU
//! that may reach that pool (as `CU_MEM_ATTACH_GLOBAL` makes managed memory reachable from all
//! devices), with the host address as the device address. It stays in system memory (kernels
//! reach it over the bus, coherently) and is not zeroed by the runtime. `managed_free` frees only
//! memory from `managed_alloc` (and `host_free` refuses it).

use super::RocBackend;
use super::memory::{HostAlloc, free_or_restore, take_if};
use gpu_mem_core::backend::{DevicePtr, HostAllocation, ManagedMemory};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use std::ptr::NonNull;

impl RocBackend {}

// SAFETY: managed memory is fine-grained system-pool memory, page aligned and the caller's
// until `managed_free` (which drains the device's streams first), with the host address as the
// device address.
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
        free_or_restore(&self.registry.host, address, known, || {
            // SAFETY: the base of a live system-pool allocation, unused by enqueued work
            // (caller).
            unsafe { self.hsa.memory_pool_free(host.as_ptr().cast()) }
        })
    }
}
