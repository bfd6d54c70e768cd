//! [`ManagedMemory`] on the simulator: a zeroed host block the device's address space maps.
//!
//! Prefetch and advice are validated as CUDA's are (a non-empty range inside one live managed
//! allocation of the device, a location naming one of the simulator's devices, a stream of the
//! device) and recorded per allocation ([`ManagedHints`], read with
//! [`SimBackend::managed_hints`]). Nothing migrates: the memory is host memory throughout. A
//! prefetch is a job of its stream, recorded when the stream reaches it, so it is ordered after
//! the stream's earlier work as on a GPU; advice is recorded at once.

use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{
    DevicePtr, HostAllocation, ManagedAdvice, ManagedHints, ManagedLocation, ManagedMemory,
    StreamHandle,
};
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

impl SimBackend {
    /// What the advice and prefetches given so far say about the managed allocation holding
    /// `ptr` on `device` (any address inside it): a prefetch counts once its stream has run it.
    pub fn managed_hints(&self, device: usize, ptr: DevicePtr) -> Result<ManagedHints> {
        let range = self.device(device)?.memory.managed_range(ptr, 1)?;
        let hints = range.region.hints().clone();
        Ok(hints)
    }

    /// `Ok` when `to` names host memory or one of the simulator's devices.
    fn check_location(&self, to: ManagedLocation) -> Result<()> {
        match to.device() {
            Some(ordinal) => self.device(ordinal).map(drop),
            None => Ok(()),
        }
    }
}

/// `Ok` for a non-empty range.
fn nonzero(bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Err(Error::InvalidArgument {
            name: "bytes",
            reason: "a managed-memory hint needs a non-empty range".into(),
        });
    }
    Ok(())
}

// SAFETY: managed memory is a fresh, zeroed, page-aligned host block owned by the caller, mapped
// at a device address of its own until `managed_free`, which waits for the device first.
// Prefetch and advice only validate and record (in the region, under its own lock): they touch
// no byte of any memory.
unsafe impl ManagedMemory for SimBackend {
    fn managed_alloc(&self, device: usize, bytes: usize) -> Result<HostAllocation> {
        let d = self.device(device)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                name: "bytes",
                reason: "managed allocations must be non-empty".into(),
            });
        }
        let (ptr, host) = d.memory.allocate_managed(bytes)?;
        Ok(HostAllocation {
            host,
            device: Some(ptr),
            zeroed: true,
        })
    }

    unsafe fn managed_free(&self, device: usize, host: NonNull<u8>) -> Result<()> {
        reentry::refuse_in_kernel("free of managed memory")?;
        let d = self.device(device)?;
        d.activity.wait_idle();
        d.memory.free_managed(host)
    }

    unsafe fn managed_prefetch(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        to: ManagedLocation,
        stream: StreamHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        nonzero(bytes)?;
        self.check_location(to)?;
        // The job holds the region (not its memory's bytes): recorded when the stream runs it.
        let region = d.memory.managed_range(ptr, bytes)?.region;
        self.enqueue(
            d,
            stream,
            "managed prefetch",
            Box::new(move || {
                region.hints().prefetched(to);
                Ok(())
            }),
        )
    }

    fn managed_advise(
        &self,
        device: usize,
        ptr: DevicePtr,
        bytes: usize,
        advice: ManagedAdvice,
    ) -> Result<()> {
        let d = self.device(device)?;
        nonzero(bytes)?;
        if let Some(at) = advice.location() {
            self.check_location(at)?;
        }
        let range = d.memory.managed_range(ptr, bytes)?;
        range.region.hints().advise(advice);
        Ok(())
    }
}
