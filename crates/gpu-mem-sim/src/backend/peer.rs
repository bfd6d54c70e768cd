//! [`PeerAccess`] on the simulator: every device reaches every other once access is enabled;
//! peer copies move bytes between the devices' address spaces.

use crate::copy::copy_ranges;
use crate::{SimBackend, reentry};
use gpu_mem_core::Result;
use gpu_mem_core::backend::{DevicePtr, PeerAccess, StreamHandle};

// SAFETY: each range is resolved against its own device's live allocations; the synchronous
// copy waits for both devices first and completes on the calling thread, the stream one is a
// job of the destination's stream.
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
