//! [`Collectives`] on CUDA (feature `nccl`): NCCL, loaded on first use ([`crate::nccl`]).
//!
//! # Contract
//!
//! * The capability is handed out whenever the feature is compiled in; NCCL is loaded on the
//!   first call that needs it, and a missing or too old library is that call's error (every
//!   later call tries again, so installing NCCL needs no restart).
//! * Every call makes the device's primary context current first: NCCL's runtime calls then
//!   use that context, the one gpu-mem's arrays and streams belong to. A gpu-mem
//!   [`StreamHandle`] is the `CUstream` NCCL takes as `cudaStream_t`; a [`CommHandle`] holds the
//!   `ncclComm_t`.
//! * `ncclCommInitAll` is given the devices' CUDA ordinals (`CUdevice`), which are gpu-mem's.

use super::{CudaBackend, raw_stream};
use crate::nccl::{Nccl, sys};
use gpu_mem_core::Result;
use gpu_mem_core::backend::{
    CollectiveCall, CollectiveType, Collectives, CommHandle, StreamHandle, UniqueId,
};
use gpu_mem_core::sync::lock;
use std::sync::Arc;

impl CudaBackend {
    /// The NCCL library collectives use, loaded on first use (`GPU_MEM_NCCL_LIBRARY`, else
    /// `libnccl.so.2`).
    pub fn nccl(&self) -> Result<Arc<Nccl>> {
        let mut slot = lock(&self.nccl);
        if let Some(nccl) = slot.as_ref() {
            return Ok(Arc::clone(nccl));
        }
        let nccl = Arc::new(Nccl::load()?);
        tracing::debug!(path = nccl.path(), version = ?nccl.version(), "NCCL loaded");
        *slot = Some(Arc::clone(&nccl));
        Ok(nccl)
    }

    /// Uses `nccl` for later collectives (e.g. one loaded from an explicit path).
    pub fn use_nccl(&self, nccl: Arc<Nccl>) {
        *lock(&self.nccl) = Some(nccl);
    }
}

fn comm(handle: CommHandle) -> sys::ncclComm_t {
    handle.0 as usize as sys::ncclComm_t
}

// SAFETY: `enqueue` gives NCCL exactly the call's ranges, on the given stream with the device's
// context current (so stream and device synchronizations cover NCCL's work); a handle is the
// `ncclComm_t` NCCL returned for the device, until `comm_destroy`.
unsafe impl Collectives for CudaBackend {
    fn engine(&self) -> Result<String> {
        let nccl = self.nccl()?;
        let (a, b, c) = nccl.version();
        Ok(format!("NCCL {a}.{b}.{c} ({})", nccl.path()))
    }

    fn unique_id(&self) -> Result<UniqueId> {
        self.nccl()?.unique_id().map(UniqueId)
    }

    fn comm_init_rank(
        &self,
        device: usize,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<CommHandle> {
        let nccl = self.nccl()?;
        let _cx = self.current(device)?;
        // SAFETY: the device's primary context is current until `_cx` drops.
        let comm = unsafe { nccl.comm_init_rank(nranks, &id.0, rank) }?;
        Ok(CommHandle(comm as usize as u64))
    }

    fn comm_init_all(&self, devices: &[usize]) -> Result<Vec<CommHandle>> {
        let nccl = self.nccl()?;
        let ordinals = devices
            .iter()
            .map(|&d| self.slot(d).map(|s| s.facts.handle))
            .collect::<Result<Vec<_>>>()?;
        // ncclCommInitAll switches devices itself and puts the caller's back; a current context
        // of the first device makes sure the runtime adopts gpu-mem's primary contexts.
        let _cx = match devices.first() {
            Some(&first) => Some(self.current(first)?),
            None => None,
        };
        let comms = nccl.comm_init_all(&ordinals)?;
        Ok(comms
            .into_iter()
            .map(|c| CommHandle(c as usize as u64))
            .collect())
    }

    unsafe fn comm_destroy(&self, device: usize, handle: CommHandle) -> Result<()> {
        let nccl = self.nccl()?;
        // A lost device took the communicator's resources with its context: nothing to do.
        let Some(_cx) = self.current_unless_lost(device)? else {
            return Ok(());
        };
        // SAFETY: the caller destroys a live handle once; the device's context is current.
        unsafe { nccl.comm_destroy(comm(handle)) }
    }

    unsafe fn comm_check(&self, _device: usize, handle: CommHandle) -> Result<()> {
        // SAFETY: the caller guarantees a live communicator.
        unsafe { self.nccl()?.comm_async_error(comm(handle)) }
    }

    unsafe fn enqueue(
        &self,
        device: usize,
        handle: CommHandle,
        call: &CollectiveCall,
        dtype: CollectiveType,
        stream: StreamHandle,
    ) -> Result<()> {
        let nccl = self.nccl()?;
        let _cx = self.current(device)?;
        let stream = raw_stream(stream) as usize as sys::cudaStream_t;
        // SAFETY: the caller guarantees a live communicator and stream of this device and the
        // ranges; the device's context is current until `_cx` drops.
        unsafe { nccl.enqueue(comm(handle), call, dtype, stream) }
    }

    fn group_start(&self) -> Result<()> {
        self.nccl()?.group_start()
    }

    fn group_end(&self) -> Result<()> {
        self.nccl()?.group_end()
    }
}
