//! [`PeerAccess`] on CUDA: `cuDeviceCanAccessPeer`, `cuCtxEnablePeerAccess` (with access to the
//! peer's default pool, whose memory it does not cover), `cuMemcpyPeer` / `cuMemcpyPeerAsync`.
//!
//! # Contract
//!
//! * A device can always access itself; enabling access twice is success. The enabled pairs
//!   are remembered (forgotten when either device is reset), and a launch on `device` given
//!   memory owned by another device whose access it has not enabled is refused with
//!   [`Error::InvalidLaunch`](gpu_mem_core::Error::InvalidLaunch) instead of faulting on the GPU.
//! * The synchronous copy synchronises both devices before the copy and after it, so it is
//!   ordered after all their work and complete when it returns; the stream form is enqueued on
//!   the destination device's stream only.
//! * A driver without the calls, or a pair the hardware cannot connect, is
//!   [`Error::NotSupportedByBackend`](gpu_mem_core::Error::NotSupportedByBackend); the core then
//!   copies through the host.

use super::{CudaBackend, is_code, not_supported, raw_stream};
use crate::driver::sys::CUresult;
use gpu_mem_core::Result;
use gpu_mem_core::backend::{DevicePtr, PeerAccess, StreamHandle};
use gpu_mem_core::kernel::{Kernel, LaunchArg};
use gpu_mem_core::sync::lock;

// SAFETY: both copies touch exactly the given ranges of their devices; the synchronous one is
// bracketed by synchronisations of both devices, so it is ordered after their work and complete
// on return; the stream one is work of the destination's stream.
unsafe impl PeerAccess for CudaBackend {
    fn can_access_peer(&self, device: usize, peer: usize) -> Result<bool> {
        let (d, p) = (self.slot(device)?, self.slot(peer)?);
        if device == peer {
            return Ok(true);
        }
        self.need(&["cuDeviceCanAccessPeer"], "peer access")?;
        self.driver
            .device_can_access_peer(d.facts.handle, p.facts.handle)
    }

    fn enable_peer_access(&self, device: usize, peer: usize) -> Result<()> {
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

    unsafe fn copy_peer(
        &self,
        dst_device: usize,
        dst: DevicePtr,
        src_device: usize,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller upholds PeerAccess::copy_peer's contract, which peer_copy shares.
        unsafe { self.peer_copy(dst_device, dst, src_device, src, bytes, None) }
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
        // SAFETY: the caller upholds PeerAccess::copy_peer_async's contract, which peer_copy
        // shares.
        unsafe { self.peer_copy(dst_device, dst, src_device, src, bytes, Some(stream)) }
    }
}

impl CudaBackend {
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
    /// As `PeerAccess::copy_peer` / `copy_peer_async`.
    unsafe fn peer_copy(
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
}
