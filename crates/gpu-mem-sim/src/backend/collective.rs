//! [`Collectives`] on the simulator: NCCL's contract between simulated devices of one process
//! (see `crate::collective`), each rank's call a job of its stream.

use crate::SimBackend;
use crate::collective::Job;
use crate::memory::Range;
use gpu_mem_core::backend::{
    CollectiveCall, CollectiveType, Collectives, CommHandle, DevicePtr, StreamHandle, UniqueId,
};
use gpu_mem_core::{Error, Result};
use std::cell::Cell;

thread_local! {
    /// Groups open on this thread (`ncclGroupStart` minus `ncclGroupEnd`).
    static GROUP_DEPTH: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: a call's ranges are resolved against the device's live allocations when enqueued
// (`resolve` / `resolve_write`, sized by count and type) and only they are touched, by a job of
// the given stream; a handle names a registry member until `comm_destroy`.
unsafe impl Collectives for SimBackend {
    fn engine(&self) -> Result<String> {
        Ok("the gpu-mem simulator's model of NCCL (one process)".into())
    }

    fn unique_id(&self) -> Result<UniqueId> {
        Ok(self.collectives.unique_id(self.id))
    }

    fn comm_init_rank(
        &self,
        device: usize,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<CommHandle> {
        self.device(device)?;
        self.collectives
            .init_rank(self.id, device, id, nranks, rank)
            .map(CommHandle)
    }

    fn comm_init_all(&self, devices: &[usize]) -> Result<Vec<CommHandle>> {
        for &d in devices {
            self.device(d)?;
        }
        Ok(self
            .collectives
            .init_all(devices)
            .into_iter()
            .map(CommHandle)
            .collect())
    }

    unsafe fn comm_destroy(&self, _device: usize, comm: CommHandle) -> Result<()> {
        self.collectives.destroy(comm.0)
    }

    unsafe fn comm_check(&self, _device: usize, comm: CommHandle) -> Result<()> {
        let member = self.collectives.member(comm.0)?;
        match member.broken() {
            None => Ok(()),
            Some(why) => Err(Error::Collective {
                call: "ncclCommGetAsyncError",
                rank: member.rank,
                nranks: member.nranks(),
                reason: format!("the communicator is unusable: {why}"),
            }),
        }
    }

    unsafe fn enqueue(
        &self,
        device: usize,
        comm: CommHandle,
        call: &CollectiveCall,
        dtype: CollectiveType,
        stream: StreamHandle,
    ) -> Result<()> {
        let d = self.device(device)?;
        let member = self.collectives.member(comm.0)?;
        let (rank, nranks) = (member.rank, member.nranks());
        let invalid = |reason: String| Error::Collective {
            call: call.name(),
            rank,
            nranks,
            reason,
        };
        if member.device != device {
            return Err(invalid(format!(
                "the communicator's rank runs on device {}, not {device}",
                member.device
            )));
        }
        let bytes = |count: usize, parts: usize| {
            count
                .checked_mul(parts)
                .and_then(|n| n.checked_mul(dtype.size()))
                .ok_or_else(|| invalid(format!("{count} elements overflow")))
        };
        let read = |ptr: DevicePtr, len: usize| -> Result<Option<Range>> {
            if len == 0 {
                Ok(None)
            } else {
                d.memory.resolve(ptr, len).map(Some)
            }
        };
        let write = |ptr: DevicePtr, len: usize| -> Result<Option<Range>> {
            if len == 0 {
                Ok(None)
            } else {
                d.memory.resolve_write(ptr, len).map(Some)
            }
        };
        let check_rank = |r: usize, what: &str| {
            if r < nranks {
                Ok(())
            } else {
                Err(invalid(format!("{what} {r} is not a rank")))
            }
        };
        let (input, output) = match *call {
            CollectiveCall::AllReduce {
                send, recv, count, ..
            } => (
                read(send, bytes(count, 1)?)?,
                write(recv, bytes(count, 1)?)?,
            ),
            CollectiveCall::Reduce {
                send,
                recv,
                count,
                root,
                ..
            } => {
                check_rank(root, "root")?;
                let out = if rank == root {
                    write(recv, bytes(count, 1)?)?
                } else {
                    None
                };
                (read(send, bytes(count, 1)?)?, out)
            }
            CollectiveCall::Broadcast {
                send,
                recv,
                count,
                root,
            } => {
                check_rank(root, "root")?;
                let input = if rank == root {
                    read(send, bytes(count, 1)?)?
                } else {
                    None
                };
                (input, write(recv, bytes(count, 1)?)?)
            }
            CollectiveCall::AllGather { send, recv, count } => (
                read(send, bytes(count, 1)?)?,
                write(recv, bytes(count, nranks)?)?,
            ),
            CollectiveCall::ReduceScatter {
                send, recv, count, ..
            } => (
                read(send, bytes(count, nranks)?)?,
                write(recv, bytes(count, 1)?)?,
            ),
            CollectiveCall::Send { buf, count, peer } => {
                check_rank(peer, "peer")?;
                (read(buf, bytes(count, 1)?)?, None)
            }
            CollectiveCall::Recv { buf, count, peer } => {
                check_rank(peer, "peer")?;
                (None, write(buf, bytes(count, 1)?)?)
            }
        };
        let number = match call {
            CollectiveCall::Send { .. } | CollectiveCall::Recv { .. } => 0,
            _ => member.number_call(),
        };
        let job = Job {
            member,
            number,
            call: *call,
            dtype,
            input,
            output,
            timeout: self.collectives.timeout(),
            rendezvous: GROUP_DEPTH.with(Cell::get) == 0,
        };
        self.enqueue(d, stream, call.name(), Box::new(move || job.run()))
    }

    fn group_start(&self) -> Result<()> {
        GROUP_DEPTH.with(|g| g.set(g.get() + 1));
        Ok(())
    }

    fn group_end(&self) -> Result<()> {
        GROUP_DEPTH.with(|g| match g.get() {
            0 => Err(Error::Collective {
                call: "ncclGroupEnd",
                rank: 0,
                nranks: 0,
                reason: "no group is open on this thread".into(),
            }),
            n => {
                g.set(n - 1);
                Ok(())
            }
        })
    }
}
