//! The optional `Backend` methods on CUDA: peer access and copies, IPC, managed memory and the
//! device's default memory pool.
//!
//! # Contract
//!
//! * **Missing features**: a symbol the driver lacks (older drivers), a device attribute saying
//!   no (`MEMORY_POOLS_SUPPORTED`, `MANAGED_MEMORY`) and `CUDA_ERROR_NOT_SUPPORTED` are
//!   [`Error::NotSupportedByBackend`] naming the feature, so the core falls back where it can
//!   (peer copies through the host, stream-ordered allocation as an ordinary one). Nothing else
//!   of the backend is affected.
//! * **Peer access**: a device can always access itself; enabling access twice is success. The
//!   enabled pairs are remembered (forgotten when either device is reset), and a launch on
//!   `device` given memory owned by another device whose access it has not enabled is refused
//!   with [`Error::InvalidLaunch`] instead of faulting on the GPU.
//! * **Peer copies**: the synchronous form synchronises both devices before the copy and after
//!   it, so it is ordered after all their work and complete when it returns (the trait's
//!   "synchronous"); the stream form is enqueued on the destination device's stream only.
//! * **Managed memory**: host and device address are the same; an allocation not 4096-byte
//!   aligned (the trait's host promise) is freed and refused.
//! * **Pool**: the device's default pool. Memory from `cuMemAlloc` has no stream-ordered free,
//!   so `free_async` is [`Error::NotSupportedByBackend`] for it (the core then frees it as usual
//!   when its last user is gone).
//! * **IPC**: only `cuMemAlloc` allocations can be exported (not pool memory:
//!   [`Error::NotSupportedByBackend`]); the 64 handle bytes travel in [`IpcMemHandle::data`].
//!   Opening a handle in the process that made it is refused by the driver
//!   (`CUDA_ERROR_INVALID_CONTEXT`).
//!
//! The driver call behind each method: the book's CUDA notes, *How the trait maps*.

use super::registry::AllocKind;
use super::{CudaBackend, DEVICE_ALIGNMENT, HOST_ALIGNMENT, is_code, nonzero_bytes, raw_stream};
use crate::driver::sys::{
    CU_IPC_HANDLE_SIZE, CUcontext, CUipcMem_flags, CUmemAttach_flags, CUmemPool_attribute,
    CUmemoryPool, CUresult,
};
use gpu_mem_core::backend::{DevicePtr, HostAllocation, IpcMemHandle, PoolUsage, StreamHandle};
use gpu_mem_core::kernel::{Kernel, LaunchArg};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use std::ptr::NonNull;

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

impl CudaBackend {
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

    // ----- peer access ---------------------------------------------------------------------

    pub(super) fn peer_possible(&self, device: usize, peer: usize) -> Result<bool> {
        let (d, p) = (self.slot(device)?, self.slot(peer)?);
        if device == peer {
            return Ok(true);
        }
        self.need(&["cuDeviceCanAccessPeer"], "peer access")?;
        self.driver
            .device_can_access_peer(d.facts.handle, p.facts.handle)
    }

    pub(super) fn enable_peer(&self, device: usize, peer: usize) -> Result<()> {
        self.slot(device)?;
        self.slot(peer)?;
        if device == peer {
            return Ok(());
        }
        self.need(&["cuCtxEnablePeerAccess"], "peer access")?;
        let peer_context = self.context_of(peer)?;
        let cx = self.current(device)?;
        // SAFETY: the peer's primary context stays retained by this backend until it is
        // dropped or the peer is reset.
        match unsafe { self.driver.ctx_enable_peer_access(peer_context) } {
            Ok(()) => {}
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) => {}
            Err(err) if is_code(&err, CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) => {
                return Err(not_supported(
                    "peer access",
                    format!("device {device} cannot address device {peer}'s memory: {err}"),
                ));
            }
            Err(err) => return Err(err),
        }
        drop(cx);
        self.grant_pool_access(device, peer)?;
        lock(&self.peers).insert((device, peer));
        Ok(())
    }

    /// Lets `device` reach the memory `peer`'s default pool hands out (its stream-ordered
    /// allocations): allocations from a pool are outside what `cuCtxEnablePeerAccess` covers,
    /// and a kernel touching one without `cuMemPoolSetAccess` faults. Nothing to do where the
    /// peer has no pools (no such memory exists).
    fn grant_pool_access(&self, device: usize, peer: usize) -> Result<()> {
        if self
            .pools_supported(peer, &["cuDeviceGetDefaultMemPool", "cuMemPoolSetAccess"])
            .is_err()
        {
            return Ok(());
        }
        let _cx = self.current(peer)?;
        let pool = self.default_pool(peer, "cuMemPoolSetAccess")?;
        let handle = self.slot(device)?.facts.handle;
        // SAFETY: the default pool lives as long as the peer device.
        unsafe { self.driver.mem_pool_grant_read_write(pool, handle) }
    }

    /// Whether this backend enabled `device`'s access to `peer`'s memory.
    pub fn peer_access_enabled(&self, device: usize, peer: usize) -> bool {
        device == peer || lock(&self.peers).contains(&(device, peer))
    }

    /// Forgets every peer relation of `device` (its context was reset).
    pub(super) fn forget_peers(&self, device: usize) {
        lock(&self.peers).retain(|(d, p)| *d != device && *p != device);
    }

    /// Refuses a launch on `device` given memory of another device whose access it has not
    /// enabled (the GPU would fault on it).
    pub(super) fn check_peer_args(
        &self,
        device: usize,
        kernel: &Kernel,
        args: &[LaunchArg],
    ) -> Result<()> {
        if self.devices.len() < 2 {
            return Ok(());
        }
        gpu_mem_core::kernel::check_peer_arguments(
            kernel.name(),
            device,
            args,
            |ptr| self.owners.owner(ptr),
            |owner| self.peer_access_enabled(device, owner),
        )
    }

    /// `cuMemcpyPeer` (`stream: None`, synchronous) or `cuMemcpyPeerAsync` on `stream`.
    ///
    /// # Safety
    /// As `Backend::copy_peer` / `copy_peer_async`.
    pub(super) unsafe fn peer_copy(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        let symbol = if stream.is_some() {
            "cuMemcpyPeerAsync"
        } else {
            "cuMemcpyPeer"
        };
        self.need(&[symbol], "peer copies")?;
        if bytes == 0 {
            return Ok(());
        }
        let dst_context = self.context_of(dst_device)?;
        let src_context = self.context_of(src_device)?;
        if let Some(stream) = stream {
            let _cx = self.current(dst_device)?;
            // SAFETY: both contexts stay retained by this backend; the caller guarantees both
            // ranges stay valid until the copy completes and that `stream` is a live stream of
            // the destination device.
            return unsafe {
                self.driver.memcpy_peer_async(
                    dst.0,
                    dst_context,
                    src.0,
                    src_context,
                    bytes,
                    raw_stream(stream),
                )
            };
        }
        // Ordered after all work on both devices, and complete on return.
        self.synchronize_device(src_device)?;
        let _cx = self.current(dst_device)?;
        self.driver.ctx_synchronize()?;
        // SAFETY: both contexts stay retained by this backend; the caller guarantees both
        // ranges lie in live allocations of their devices.
        unsafe {
            self.driver
                .memcpy_peer(dst.0, dst_context, src.0, src_context, bytes)
        }?;
        self.driver.ctx_synchronize()?;
        drop(_cx);
        self.synchronize_device(src_device)
    }

    fn synchronize_device(&self, device: usize) -> Result<()> {
        let _cx = self.current(device)?;
        self.driver.ctx_synchronize()
    }

    // ----- managed memory ------------------------------------------------------------------

    pub(super) fn managed_allocate(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        nonzero_bytes(bytes)?;
        if !self.slot(device)?.facts.managed {
            return Err(not_supported(
                "managed memory",
                format!("device {device} reports CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0"),
            ));
        }
        self.need(&["cuMemAllocManaged", "cuMemFree"], "managed memory")?;
        let _cx = self.current(device)?;
        let ptr = self
            .driver
            .mem_alloc_managed(bytes, CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL.0)
            .map_err(|e| {
                unsupported_code(self.out_of_memory(device, bytes, e), "managed memory")
            })?;
        let host = NonNull::new(std::ptr::with_exposed_provenance_mut::<u8>(ptr as usize));
        let host = match host {
            Some(host) if ptr.is_multiple_of(HOST_ALIGNMENT) => host,
            _ => {
                // SAFETY: `ptr` was just allocated and nothing else has seen it.
                if let Err(err) = unsafe { self.driver.mem_free(ptr) } {
                    tracing::warn!(%err, "freeing a refused managed allocation failed");
                }
                return Err(Error::InvalidPointer {
                    kind: "managed",
                    address: ptr,
                    bytes: bytes as u64,
                    reason: "cuMemAllocManaged returned memory that is not 4096-byte aligned",
                });
            }
        };
        self.managed.insert(device, ptr, bytes);
        Ok(HostAllocation {
            host,
            device: Some(DevicePtr(ptr)),
            zeroed: false,
        })
    }

    /// # Safety
    /// As `Backend::managed_free`.
    pub(super) unsafe fn managed_release(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let address = host.as_ptr() as usize as u64;
        if self.managed.remove(device, address).is_none() {
            return Err(Error::InvalidPointer {
                kind: "managed",
                address,
                bytes: 0,
                reason: "not a managed allocation of this backend on this device, or already freed",
            });
        }
        if cx.is_none() {
            // The lost context took the allocation with it.
            return Ok(());
        }
        // SAFETY: the address came from cuMemAllocManaged on this device (registry), is freed
        // once (removed above) and unused by enqueued work (caller).
        super::released(unsafe { self.driver.mem_free(address) })
    }

    // ----- memory pool ---------------------------------------------------------------------

    fn pools_supported(&self, device: usize, symbols: &[&'static str]) -> Result<()> {
        if !self.slot(device)?.facts.pools {
            return Err(not_supported(
                "memory pools",
                format!("device {device} reports CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0"),
            ));
        }
        self.need(symbols, "memory pools")
    }

    /// # Safety
    /// `stream` is a live stream of `device`.
    pub(super) unsafe fn pool_alloc(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        nonzero_bytes(bytes)?;
        self.pools_supported(device, &["cuMemAllocAsync", "cuMemFreeAsync"])?;
        let _cx = self.current(device)?;
        // SAFETY: the caller guarantees the stream is live and of this device.
        let ptr =
            unsafe { self.driver.mem_alloc_async(bytes, raw_stream(stream)) }.map_err(|e| {
                unsupported_code(
                    self.out_of_memory(device, bytes, e),
                    "stream-ordered allocation",
                )
            })?;
        if !ptr.is_multiple_of(DEVICE_ALIGNMENT) {
            // SAFETY: `ptr` was just allocated on this stream and never used.
            unsafe { self.driver.mem_free_async(ptr, raw_stream(stream)) }?;
            return Err(not_supported(
                "stream-ordered allocation",
                format!("cuMemAllocAsync returned {ptr:#x}, not {DEVICE_ALIGNMENT}-byte aligned"),
            ));
        }
        self.allocations
            .insert(device, ptr, AllocKind::StreamOrdered);
        self.owners.insert(ptr, device, bytes as u64);
        Ok(DevicePtr(ptr))
    }

    /// # Safety
    /// As `Backend::free_async`.
    pub(super) unsafe fn pool_free(
        &self,
        device: usize,
        ptr: DevicePtr,
        stream: StreamHandle,
    ) -> Result<()> {
        match self.allocations.get(device, ptr.0) {
            Some(AllocKind::StreamOrdered) => {}
            Some(AllocKind::Plain) => {
                return Err(not_supported(
                    "stream-ordered free",
                    "memory from cuMemAlloc has no stream-ordered free; it is freed when its last user is gone".into(),
                ));
            }
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not an allocation of this backend on this device, or already freed",
                });
            }
        }
        let cx = self.current_unless_lost(device)?;
        self.allocations.remove(device, ptr.0);
        self.owners.remove(ptr.0);
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the pointer came from cuMemAllocAsync on this device (registry) and is freed
        // once (removed above); the caller guarantees only work on `stream`, ordered before
        // this free, still uses it, and that the stream is live.
        unsafe { self.driver.mem_free_async(ptr.0, raw_stream(stream)) }
    }

    /// The device's default pool (alive as long as the device's context).
    fn default_pool(&self, device: usize, symbol: &'static str) -> Result<CUmemoryPool> {
        self.pools_supported(device, &["cuDeviceGetDefaultMemPool", symbol])?;
        let handle = self.slot(device)?.facts.handle;
        self.driver
            .device_get_default_mem_pool(handle)
            .map_err(|e| unsupported_code(e, "memory pools"))
    }

    pub(super) fn default_pool_usage(&self, device: usize) -> Result<PoolUsage> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolGetAttribute")?;
        let get = |attribute: CUmemPool_attribute| {
            // SAFETY: the default pool lives as long as the device; the attributes read here
            // are the 64-bit ones.
            unsafe { self.driver.mem_pool_get_attribute_u64(pool, attribute) }
        };
        Ok(PoolUsage {
            used: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            reserved: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            release_threshold: get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)?,
        })
    }

    pub(super) fn default_pool_set_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolSetAttribute")?;
        // SAFETY: the default pool lives as long as the device; RELEASE_THRESHOLD is a
        // cuuint64_t.
        unsafe {
            self.driver.mem_pool_set_attribute_u64(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                bytes,
            )
        }
    }

    pub(super) fn default_pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        let _cx = self.current(device)?;
        let pool = self.default_pool(device, "cuMemPoolTrimTo")?;
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        // SAFETY: the default pool lives as long as the device.
        unsafe { self.driver.mem_pool_trim_to(pool, keep) }
    }

    // ----- inter-process sharing -----------------------------------------------------------

    pub(super) fn ipc_export(&self, device: usize, ptr: DevicePtr) -> Result<IpcMemHandle> {
        const FEATURE: &str = "IPC memory handles";
        match self.allocations.get(device, ptr.0) {
            Some(AllocKind::Plain) => {}
            Some(AllocKind::StreamOrdered) => {
                return Err(not_supported(
                    FEATURE,
                    "the allocation comes from the stream-ordered pool; cuIpcGetMemHandle exports cuMemAlloc memory only".into(),
                ));
            }
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not the start of an allocation of this backend on this device",
                });
            }
        }
        self.need(&["cuIpcGetMemHandle"], FEATURE)?;
        let bytes = self.owners.bytes_at(ptr.0).unwrap_or(0);
        let _cx = self.current(device)?;
        // SAFETY: `ptr` is the base of a live cuMemAlloc allocation of this device (registry).
        let data = unsafe { self.driver.ipc_get_mem_handle(ptr.0) }
            .map_err(|e| unsupported_code(e, FEATURE))?;
        Ok(IpcMemHandle {
            bytes,
            data: data.to_vec(),
        })
    }

    pub(super) fn ipc_import(&self, device: usize, handle: &IpcMemHandle) -> Result<DevicePtr> {
        const FEATURE: &str = "IPC memory handles";
        let data: [u8; CU_IPC_HANDLE_SIZE as usize] =
            handle
                .data
                .as_slice()
                .try_into()
                .map_err(|_| Error::InvalidArgument {
                    name: "handle",
                    reason: format!(
                        "a CUDA IPC handle has {CU_IPC_HANDLE_SIZE} bytes, this one {}",
                        handle.data.len()
                    ),
                })?;
        self.need(
            &[
                "cuIpcOpenMemHandle",
                "cuIpcCloseMemHandle",
                "cuMemGetAddressRange",
            ],
            FEATURE,
        )?;
        let _cx = self.current(device)?;
        let ptr = self
            .driver
            .ipc_open_mem_handle(&data, CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.0)
            .map_err(|e| unsupported_code(e, FEATURE))?;
        // The handle's size is the sender's word (its fields are public, its bytes may come
        // from anywhere): the arrays over the mapping are bounded by what the driver mapped.
        let mapped = match self.driver.mem_get_address_range(ptr) {
            Ok((base, bytes)) if base == ptr && bytes as u64 >= handle.bytes => Ok(()),
            Ok((base, bytes)) => Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "it claims {} bytes, but the driver mapped {bytes} bytes at {base:#x} for it",
                    handle.bytes
                ),
            }),
            Err(e) => Err(e),
        };
        if let Err(e) = mapped {
            // SAFETY: opened just above in this context, closed once, used by nothing yet.
            if let Err(close) = unsafe { self.driver.ipc_close_mem_handle(ptr) } {
                tracing::warn!(error = %close, "closing a refused IPC mapping failed");
            }
            return Err(e);
        }
        // Opening a handle of an allocation this context has mapped already returns the same
        // mapping with the driver's count raised: each open is closed once.
        let mut claimed = handle.bytes;
        self.ipc_mappings.update(device, ptr, |open| match open {
            Some((bytes, opens)) => {
                claimed = claimed.max(bytes);
                Some((claimed, opens.saturating_add(1)))
            }
            None => Some((claimed, 1)),
        });
        self.owners.insert(ptr, device, claimed);
        Ok(DevicePtr(ptr))
    }

    /// # Safety
    /// As `Backend::ipc_close_handle`.
    pub(super) unsafe fn ipc_close(&self, device: usize, ptr: DevicePtr) -> Result<()> {
        let cx = self.current_unless_lost(device)?;
        let open = self.ipc_mappings.update(device, ptr.0, |open| match open {
            Some((bytes, opens)) if opens > 1 => Some((bytes, opens - 1)),
            _ => None,
        });
        match open {
            None => {
                return Err(Error::InvalidPointer {
                    kind: "device",
                    address: ptr.0,
                    bytes: 0,
                    reason: "not an IPC mapping opened on this device, or already closed",
                });
            }
            // The last open: the range is no longer this process's.
            Some((_, 1)) => self.owners.remove(ptr.0),
            Some(_) => {}
        }
        if cx.is_none() {
            return Ok(());
        }
        // SAFETY: the mapping came from cuIpcOpenMemHandle on this device (registry) and this
        // close matches one of its opens (counted down above); when it is the last, nothing
        // uses the mapping (caller).
        super::released(unsafe { self.driver.ipc_close_mem_handle(ptr.0) })
    }
}
