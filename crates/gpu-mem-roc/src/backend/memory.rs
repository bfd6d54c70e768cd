//! Device allocations, host allocations and registrations, and the address bookkeeping that
//! turns a host pointer into the address a GPU copy engine may use.
//!
//! * Device memory: `hsa_amd_memory_pool_allocate` on the GPU's coarse-grained pool; the pool's
//!   allocation alignment (a page in ROCr) exceeds the 256 bytes the trait promises.
//! * Pinned / mapped host memory: `hsa_amd_memory_pool_allocate` on the fine-grained system pool,
//!   then `hsa_amd_agents_allow_access` for this device's GPU (all GPUs when `portable`). The GPU
//!   uses the host address itself. ROCr has no write-combined host memory: the flag is accepted
//!   and has no effect (documented in the backend docs).
//! * Registration: `hsa_amd_memory_lock_to_pool` with the fine-grained system pool (as HIP's
//!   `hipHostRegister` does), falling back to `hsa_amd_memory_lock`; the returned **agent
//!   pointer** is what the GPU must use, and may differ from the host address.
//!   `hsa_memory_register` is not used: in ROCr it does not page-lock anything.

use super::RocBackend;
use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostAllocation, HostRegisterFlags, Memory};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hsa_sys as sys;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Mutex;

/// A device allocation.
#[derive(Debug, Clone, Copy)]
pub struct DeviceAlloc {
    pub device: usize,
    pub bytes: usize,
    /// For another process's allocation mapped with `hsa_amd_ipc_memory_attach`, how many
    /// attaches returned this address and are not closed yet (each is closed once with
    /// `ipc_close_handle`; never freed, not counted as this device's memory use); 0 for this
    /// process's own allocations.
    pub imports: u32,
}

/// A host allocation from the system pool.
#[derive(Debug, Clone, Copy)]
pub struct HostAlloc {
    pub device: usize,
    pub bytes: usize,
    /// Accessible to every GPU (portable or managed), not only to `device`.
    pub portable: bool,
    /// Made by `managed_alloc` (freed by `managed_free` only), else by `host_alloc`.
    pub managed: bool,
}

/// A page-locked (registered) host range.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    pub device: usize,
    pub bytes: usize,
    /// Accessible to every GPU, not only to `device`.
    pub portable: bool,
    /// The address GPUs use for the range's first byte.
    pub agent_ptr: usize,
    /// `false` while a thread is locking or unlocking the pages: the entry then only reserves
    /// the address, so that another registration of it is refused until the first is done
    /// (an unregistration's unlock would otherwise unpin the pages of a registration made while
    /// it drained the streams), and nothing is translated through it.
    pub settled: bool,
}

/// Address-keyed bookkeeping. Its maps change by single inserts and removes, so a poisoned lock
/// only means a panic elsewhere and the map stays valid (`sync::lock`).
#[derive(Debug, Default)]
pub struct Registry {
    pub device: Mutex<BTreeMap<u64, DeviceAlloc>>,
    pub host: Mutex<BTreeMap<usize, HostAlloc>>,
    pub registered: Mutex<BTreeMap<usize, Registration>>,
}

/// Takes `key`'s entry out of `map` when `wanted` accepts it. A free takes its entry out before
/// the runtime frees the memory: the runtime may hand the address to another thread's
/// allocation at once, which records it under the same key.
pub(super) fn take_if<K: Ord, V: Copy>(
    map: &Mutex<BTreeMap<K, V>>,
    key: K,
    wanted: impl Fn(&V) -> bool,
) -> Option<V> {
    let mut map = lock(map);
    match map.get(&key) {
        Some(v) if wanted(v) => map.remove(&key),
        _ => None,
    }
}

/// Runs `free`; if it fails, puts the entry [`take_if`] took back.
pub(super) fn free_or_restore<K: Ord, V>(
    map: &Mutex<BTreeMap<K, V>>,
    key: K,
    entry: V,
    free: impl FnOnce() -> Result<()>,
) -> Result<()> {
    free().inspect_err(|_| {
        lock(map).insert(key, entry);
    })
}

/// The entry whose range `[base, base + len)` contains `[addr, addr + bytes)`.
pub(super) fn containing<V: Copy>(
    map: &BTreeMap<usize, V>,
    addr: usize,
    bytes: usize,
    len: impl Fn(&V) -> usize,
) -> Option<(usize, V)> {
    let (base, v) = map.range(..=addr).next_back()?;
    let end = base.checked_add(len(v))?;
    (addr.checked_add(bytes)? <= end).then_some((*base, *v))
}

impl Registry {
    /// The address `device`'s GPU may use for host bytes `[addr, addr + bytes)` when the whole
    /// range lies in one host allocation (same address) or one registration (agent pointer +
    /// offset) made accessible to it (portable, or made for `device`).
    pub fn gpu_address_of_host(&self, device: usize, addr: usize, bytes: usize) -> Option<usize> {
        let reaches = |owner: usize, portable: bool| portable || owner == device;
        if containing(&lock(&self.host), addr, bytes, |a| a.bytes)
            .is_some_and(|(_, a)| reaches(a.device, a.portable))
        {
            return Some(addr);
        }
        containing(&lock(&self.registered), addr, bytes, |r| r.bytes)
            .filter(|(_, r)| r.settled && reaches(r.device, r.portable))
            .map(|(base, r)| r.agent_ptr + (addr - base))
    }

    /// Where in the host's address space the bytes `device`'s GPU reaches at device address
    /// `[addr, addr + bytes)` are, when that range is the device address of host memory made
    /// accessible to it: a host or managed allocation (the same address) or a registration
    /// (its agent pointer + offset).
    pub fn host_of_gpu_address(&self, device: usize, addr: usize, bytes: usize) -> Option<usize> {
        let reaches = |owner: usize, portable: bool| portable || owner == device;
        if containing(&lock(&self.host), addr, bytes, |a| a.bytes)
            .is_some_and(|(_, a)| reaches(a.device, a.portable))
        {
            return Some(addr);
        }
        let end = addr.checked_add(bytes)?;
        lock(&self.registered)
            .iter()
            .find(|(_, r)| {
                r.settled
                    && reaches(r.device, r.portable)
                    && r.agent_ptr <= addr
                    && r.agent_ptr.checked_add(r.bytes).is_some_and(|e| end <= e)
            })
            .map(|(base, r)| base + (addr - r.agent_ptr))
    }

    /// Device bytes still free by this process' own accounting.
    pub fn device_bytes_in_use(&self, device: usize) -> u64 {
        lock(&self.device)
            .values()
            .filter(|a| a.device == device && a.imports == 0)
            .map(|a| a.bytes as u64)
            .sum()
    }
}

impl RocBackend {
    /// The GPU agents a host allocation or registration is made accessible to.
    pub(super) fn host_agents(&self, device: usize, portable: bool) -> Vec<sys::hsa_agent_t> {
        if portable {
            self.topology
                .gpus
                .iter()
                .filter(|g| g.host_pool_access)
                .map(|g| g.agent)
                .collect()
        } else {
            self.topology
                .gpus
                .get(device)
                .map(|g| g.agent)
                .into_iter()
                .collect()
        }
    }
}

// SAFETY: device memory comes from the GPU's coarse-grained pool, whose allocations never
// overlap while live and are aligned to its granule (a page, past the 256 bytes promised);
// host memory from the fine-grained system pool, page aligned and the caller's until freed;
// registration page-locks the range in place (`hsa_amd_memory_lock*`) and never writes it.
// Releases drain the device's streams first.
unsafe impl Memory for RocBackend {
    fn alloc(&self, device: usize, bytes: usize) -> Result<DevicePtr> {
        let gpu = self.gpu(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "device allocations must be larger than 0 bytes".into(),
            });
        }
        // SAFETY: the device's pool from the topology this runtime reported, initialised while
        // the backend lives.
        let ptr = match unsafe { self.hsa.memory_pool_allocate(gpu.device_pool.pool, bytes) } {
            Ok(p) => p,
            Err(Error::Native { code, .. })
                if code == i64::from(sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES)
                    || code == i64::from(sys::HSA_STATUS_ERROR_INVALID_ALLOCATION) =>
            {
                let info = self.memory_info(device)?;
                return Err(Error::OutOfMemory {
                    backend: BackendKind::Roc,
                    device,
                    requested: bytes as u64,
                    free: info.free,
                    total: info.total,
                    report: None,
                });
            }
            Err(e) => return Err(e),
        };
        let address = ptr as u64;
        if !address.is_multiple_of(256) {
            // Cannot happen with ROCr's page-aligned pools; refuse rather than break the promise.
            // SAFETY: `ptr` was just allocated and nothing uses it.
            let _ = unsafe { self.hsa.memory_pool_free(ptr) };
            return Err(Error::InvalidPointer {
                kind: "device",
                address,
                bytes: bytes as u64,
                reason: "the pool returned memory aligned to less than 256 bytes",
            });
        }
        // Peers that enabled access to this device reach this allocation too. The grant and the
        // registry insertion happen under the peer-access lock, so `enable_peer_access` either
        // sees this allocation or has already added its peer to the list used here.
        let peers = lock(&self.peer_access);
        let agents = self.peer_agents_of(&peers, device);
        if !agents.is_empty() {
            // SAFETY: `ptr` is the base of the pool allocation just made.
            if let Err(e) = unsafe { self.hsa.agents_allow_access(&agents, ptr) } {
                // SAFETY: just allocated, nothing uses it.
                let _ = unsafe { self.hsa.memory_pool_free(ptr) };
                return Err(e);
            }
        }
        lock(&self.registry.device).insert(
            address,
            DeviceAlloc {
                device,
                bytes,
                imports: 0,
            },
        );
        drop(peers);
        Ok(DevicePtr(address))
    }

    unsafe fn free(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        self.gpu(device)?;
        let taken = take_if(&self.registry.device, ptr.0, |a| {
            a.device == device && a.imports == 0
        });
        let Some(entry) = taken else {
            return Err(Error::InvalidPointer {
                kind: "device",
                address: ptr.0,
                bytes: 0,
                reason: "not the base of a live allocation of this device",
            });
        };
        free_or_restore(&self.registry.device, ptr.0, entry, || {
            // SAFETY: the base of a live pool allocation, unused by enqueued work (caller).
            unsafe { self.hsa.memory_pool_free(ptr.0 as *mut c_void) }
        })
    }

    fn host_alloc(
        &self,
        device: usize,
        bytes: usize,
        flags: HostAllocFlags,
    ) -> Result<HostAllocation> {
        let gpu = self.gpu(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "host allocations must be larger than 0 bytes".into(),
            });
        }
        if !gpu.host_pool_access {
            return Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "page-locked host memory",
                reason: format!("GPU {device} may never access the system memory pool"),
            });
        }
        if flags.write_combined {
            tracing::debug!(
                "write-combined host memory does not exist on ROCr; allocating fine-grained memory"
            );
        }
        // SAFETY: the system pool of the topology this runtime reported, initialised while the
        // backend lives.
        let ptr = unsafe {
            self.hsa
                .memory_pool_allocate(self.topology.host.pool.pool, bytes)
        }?;
        let agents = self.host_agents(device, flags.portable);
        // SAFETY: `ptr` is the base of the allocation just made.
        if let Err(e) = unsafe { self.hsa.agents_allow_access(&agents, ptr) } {
            // SAFETY: just allocated, nothing uses it.
            let _ = unsafe { self.hsa.memory_pool_free(ptr) };
            return Err(e);
        }
        let host = NonNull::new(ptr.cast::<u8>()).ok_or(Error::InvalidPointer {
            kind: "host",
            address: 0,
            bytes: bytes as u64,
            reason: "the system pool returned a null pointer",
        })?;
        lock(&self.registry.host).insert(
            ptr as usize,
            HostAlloc {
                device,
                bytes,
                portable: flags.portable,
                managed: false,
            },
        );
        let device_ptr = flags.mapped.then_some(DevicePtr(ptr as u64));
        Ok(HostAllocation {
            host,
            device: device_ptr,
            zeroed: false,
        })
    }

    unsafe fn host_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        self.gpu(device)?;
        let address = host.as_ptr() as usize;
        let taken = take_if(&self.registry.host, address, |a| {
            a.device == device && !a.managed
        });
        let Some(known) = taken else {
            return Err(Error::InvalidPointer {
                kind: "host",
                address: address as u64,
                bytes: 0,
                reason: "not the base of a host allocation of this device",
            });
        };
        free_or_restore(&self.registry.host, address, known, || {
            // SAFETY: the base of a live system-pool allocation, unused by enqueued work
            // (caller).
            unsafe { self.hsa.memory_pool_free(host.as_ptr().cast()) }
        })
    }

    unsafe fn host_register(
        &self,
        device: usize,
        host: NonNull<u8>,
        bytes: usize,
        flags: HostRegisterFlags,
    ) -> Result<Option<DevicePtr>> {
        self.gpu(device)?;
        let address = host.as_ptr() as usize;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "cannot register an empty host range".into(),
            });
        }
        {
            let mut registered = lock(&self.registry.registered);
            let end = address.checked_add(bytes).ok_or(Error::HostRegistration {
                address,
                bytes,
                reason: "the range overflows the address space",
            })?;
            // As CUDA (`CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`): no byte may be locked twice,
            // by another registration or as page-locked memory of `host_alloc`; unlocking one of
            // two overlapping locks would unpin pages the other still needs.
            let overlapping = registered
                .range(..end)
                .next_back()
                .filter(|(base, r)| **base + r.bytes > address);
            if let Some((_, known)) = overlapping {
                return Err(Error::HostRegistration {
                    address,
                    bytes,
                    reason: if known.settled {
                        "already registered"
                    } else {
                        "being registered or unregistered by another thread"
                    },
                });
            }
            let pinned = lock(&self.registry.host)
                .range(..end)
                .next_back()
                .is_some_and(|(base, a)| base + a.bytes > address);
            if pinned {
                return Err(Error::HostRegistration {
                    address,
                    bytes,
                    reason: "already page-locked (memory of host_alloc or managed_alloc)",
                });
            }
            // Reserved while the pages are locked (see `Registration::settled`).
            registered.insert(
                address,
                Registration {
                    device,
                    bytes,
                    portable: flags.portable,
                    agent_ptr: 0,
                    settled: false,
                },
            );
        }
        let agents = self.host_agents(device, flags.portable);
        let host_ptr = host.as_ptr().cast::<c_void>();
        // SAFETY: the range is valid host memory until host_unregister (caller).
        let locked = unsafe {
            self.hsa
                .memory_lock_to_pool(host_ptr, bytes, &agents, self.topology.host.pool.pool)
        };
        let locked = match locked {
            Err(Error::MissingSymbol { .. }) => {
                // SAFETY: as above.
                unsafe { self.hsa.memory_lock(host_ptr, bytes, &agents) }
            }
            other => other,
        };
        let mut registered = lock(&self.registry.registered);
        let agent_ptr = match locked {
            Ok(agent_ptr) => agent_ptr as usize,
            Err(e) => {
                registered.remove(&address);
                return Err(e);
            }
        };
        registered.insert(
            address,
            Registration {
                device,
                bytes,
                portable: flags.portable,
                agent_ptr,
                settled: true,
            },
        );
        Ok(flags.mapped.then_some(DevicePtr(agent_ptr as u64)))
    }

    unsafe fn host_unregister(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        self.gpu(device)?;
        let address = host.as_ptr() as usize;
        // Marked unsettled first, so that two threads unregistering the same range cannot both
        // unlock it, and nobody registers it again before it is unlocked; settled again if
        // unlocking fails.
        let registration = {
            let mut registered = lock(&self.registry.registered);
            match registered.get_mut(&address) {
                Some(r) if r.device == device && r.settled => {
                    r.settled = false;
                    Ok(*r)
                }
                Some(r) if r.device == device => {
                    Err("being registered or unregistered by another thread")
                }
                _ => Err("not registered on this device"),
            }
        };
        let registration = registration.map_err(|reason| Error::HostRegistration {
            address,
            bytes: 0,
            reason,
        })?;
        // The caller promises that no enqueued work still uses the range; as hipHostUnregister
        // does, the streams that may use it (every device's, for a portable registration) are
        // drained first all the same, so a broken promise cannot leave a copy engine or kernel
        // reading pages that are no longer locked.
        if registration.portable {
            for d in 0..self.topology.gpus.len() {
                self.drain_device_for_ordering(d);
            }
        } else {
            self.drain_device_for_ordering(device);
        }
        // SAFETY: `host` was locked by register_host, is still allocated and unused (caller, and
        // the work drained above).
        let unlocked = unsafe { self.hsa.memory_unlock(host.as_ptr().cast()) };
        let mut registered = lock(&self.registry.registered);
        if let Err(e) = unlocked {
            registered.insert(
                address,
                Registration {
                    settled: true,
                    ..registration
                },
            );
            return Err(e);
        }
        registered.remove(&address);
        drop(registered);
        tracing::trace!(address, bytes = registration.bytes, "unlocked host range");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{HostAlloc, Registration, Registry, lock};

    #[test]
    fn host_addresses_translate_through_allocations_and_registrations() {
        let r = Registry::default();
        lock(&r.host).insert(
            0x10_000,
            HostAlloc {
                device: 0,
                bytes: 0x1000,
                portable: false,
                managed: false,
            },
        );
        lock(&r.registered).insert(
            0x50_000,
            Registration {
                device: 0,
                bytes: 0x2000,
                portable: false,
                agent_ptr: 0x7f_0000,
                settled: true,
            },
        );
        // Being locked or unlocked by another thread: only a reservation.
        lock(&r.registered).insert(
            0x70_000,
            Registration {
                device: 0,
                bytes: 0x1000,
                portable: true,
                agent_ptr: 0x8f_0000,
                settled: false,
            },
        );
        lock(&r.host).insert(
            0x90_000,
            HostAlloc {
                device: 0,
                bytes: 0x1000,
                portable: true,
                managed: false,
            },
        );
        // Pool memory: the GPU uses the host address itself.
        assert_eq!(r.gpu_address_of_host(0, 0x10_000, 0x1000), Some(0x10_000));
        assert_eq!(r.gpu_address_of_host(0, 0x10_800, 0x10), Some(0x10_800));
        // Past the end of the allocation.
        assert_eq!(r.gpu_address_of_host(0, 0x10_800, 0x801), None);
        // Registered memory: agent pointer plus offset.
        assert_eq!(r.gpu_address_of_host(0, 0x50_000, 1), Some(0x7f_0000));
        assert_eq!(r.gpu_address_of_host(0, 0x51_000, 0x1000), Some(0x7f_1000));
        assert_eq!(r.gpu_address_of_host(0, 0x51_000, 0x1001), None);
        // Unknown (pageable) memory, and a registration not settled.
        assert_eq!(r.gpu_address_of_host(0, 0x30_000, 8), None);
        assert_eq!(r.gpu_address_of_host(0, 0x70_000, 8), None);
        assert_eq!(r.gpu_address_of_host(0, 0x0f_fff, 2), None);
        // Another device reaches only portable memory.
        assert_eq!(r.gpu_address_of_host(1, 0x10_000, 8), None);
        assert_eq!(r.gpu_address_of_host(1, 0x50_000, 8), None);
        assert_eq!(r.gpu_address_of_host(1, 0x90_000, 8), Some(0x90_000));
    }
}
