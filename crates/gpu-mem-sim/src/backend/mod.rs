//! `gpu_mem_core::Backend` on the simulator, one file per concern (`memory`, `transfer`,
//! `stream`, `event`, `launch`) and per capability (`peer`, `ipc`, `managed`, `pool`,
//! `collective`): the
//! simulator hands out every capability the trait knows.
//!
//! # Contract
//!
//! * Synchronous operations first wait for every stream of the device
//!   (`DeviceActivity::wait_idle`), the CUDA legacy-default-stream rule; stream work runs on the
//!   stream's worker thread, in order.
//! * Blocking calls from inside a kernel (a synchronization, a free) are refused
//!   (`crate::reentry`) instead of waiting for the very work that makes them.
//! * Work that fails on a stream is reported by that stream's next synchronization as
//!   [`Error::AsyncFailure`]; `synchronize` reports the first failure of the device's streams
//!   and leaves each for its own stream too.

mod collective;
mod event;
mod ipc;
mod launch;
mod managed;
mod memory;
mod peer;
mod pool;
mod stream;
mod transfer;

use crate::stream::SimStream;
use crate::{SimBackend, reentry};
use gpu_mem_core::backend::{
    Collectives, DeviceInfo, IpcMemory, ManagedMemory, MemInfo, PeerAccess, StreamOrderedPool,
};
use gpu_mem_core::sync::read;
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use std::sync::Arc;

// SAFETY: the device count is fixed at construction; `synchronize` waits for every stream
// worker of the device to finish the jobs before it (`SimStream::wait_and_peek`); what each
// concern promises is kept in its file (see the SAFETY comment of each impl there); every
// capability is this backend itself, decided at compile time.
unsafe impl Backend for SimBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn device_info(&self, device: usize) -> Result<DeviceInfo> {
        let d = self.device(device)?;
        Ok(DeviceInfo {
            ordinal: d.ordinal,
            name: format!("gpu-mem simulator device {}", d.ordinal),
            arch: "sim".into(),
            total_memory: d.memory.capacity(),
            warp_size: d.warp_size,
            max_threads_per_block: 1024,
            max_shared_memory_per_block: d.shared_memory,
            can_map_host_memory: true,
        })
    }

    fn mem_info(&self, device: usize) -> Result<MemInfo> {
        let d = self.device(device)?;
        let total = d.memory.capacity();
        Ok(MemInfo {
            free: total.saturating_sub(d.memory.used()),
            total,
        })
    }

    fn synchronize(&self, device: usize) -> Result<()> {
        reentry::refuse_in_kernel("synchronize")?;
        let d = self.device(device)?;
        let streams: Vec<(u64, Arc<SimStream>)> = read(&d.streams)
            .iter()
            .map(|(h, s)| (*h, Arc::clone(s)))
            .collect();
        // Every stream is waited for, even after a failure; the first failure is returned, and
        // left for the stream's own synchronization too (its owner is told of it there, as on
        // a GPU, where such an error stays).
        let mut first = Ok(());
        for (handle, stream) in streams {
            if let Err((operation, reason)) = stream.wait_and_peek()
                && first.is_ok()
            {
                first = Err(Error::AsyncFailure {
                    operation,
                    stream: handle,
                    reason,
                });
            }
        }
        first
    }

    fn peer(&self) -> Option<&dyn PeerAccess> {
        Some(self)
    }

    fn ipc(&self) -> Option<&dyn IpcMemory> {
        Some(self)
    }

    fn managed(&self) -> Option<&dyn ManagedMemory> {
        Some(self)
    }

    fn pool(&self) -> Option<&dyn StreamOrderedPool> {
        Some(self)
    }

    fn collectives(&self) -> Option<&dyn Collectives> {
        Some(self)
    }
}
