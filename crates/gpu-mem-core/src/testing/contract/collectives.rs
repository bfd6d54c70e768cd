//! Collectives ([`Backend::collectives`]): NCCL's calls between the backend's devices.

use super::{
    Context, Contract, Factory, Outcome, Verdict, download, ensure, expected, pattern, upload,
};
use crate::backend::{Backend, CollectiveCall, CollectiveType, Collectives, DevicePtr, ReduceOp};

/// Collectives are handed out ([`Backend::collectives`]) where the backend has an engine; there
/// the engine names itself, `comm_init_all` makes one communicator per device, and an all-reduce
/// (`ncclAllReduce`, grouped as one thread driving every rank must be) sums every rank's bytes
/// into every rank's destination on its stream; a broadcast in place copies the root's bytes to
/// every rank; communicators are destroyed; a group end without a start is an error.
pub(super) fn collectives_meet_between_devices(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let c = match expected(contract.collectives, b.collectives(), "collectives")? {
        Ok(c) => c,
        Err(outcome) => return Ok(outcome),
    };
    let engine = c.engine().ctx("engine")?;
    ensure(!engine.trim().is_empty(), || {
        "the engine has no name".into()
    })?;
    ensure(c.group_end().is_err(), || {
        "group_end without group_start succeeded".into()
    })?;
    let ranks = b.device_count().min(2);
    let devices: Vec<usize> = (0..ranks).collect();
    let comms = c.comm_init_all(&devices).ctx("comm_init_all")?;
    ensure(comms.len() == ranks, || {
        format!("{} communicators for {ranks} devices", comms.len())
    })?;
    let verdict = all_reduce_and_broadcast(b.as_ref(), c, &comms);
    for (device, comm) in comms.into_iter().enumerate() {
        // SAFETY: each communicator came from comm_init_all for this device, its work was
        // synchronised, and it is destroyed once.
        unsafe { c.comm_destroy(device, comm) }.ctx("comm_destroy")?;
    }
    verdict
}

/// The calls of [`collectives_meet_between_devices`] on live communicators, one per device.
fn all_reduce_and_broadcast(
    b: &dyn Backend,
    c: &dyn Collectives,
    comms: &[crate::backend::CommHandle],
) -> Verdict {
    // Small under Miri, which interprets every byte.
    let n = if cfg!(miri) { 256 } else { 4096 };
    let inputs: Vec<Vec<u8>> = (0..comms.len())
        .map(|r| pattern(n, r as u8 * 7 + 1))
        .collect();
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    let mut streams = Vec::new();
    for (r, input) in inputs.iter().enumerate() {
        sends.push(upload(b, r, input)?);
        recvs.push(b.alloc(r, n).ctx("alloc")?);
        streams.push(b.stream_create(r).ctx("stream_create")?);
    }
    let call = |r: usize, call: CollectiveCall| -> Result<(), String> {
        // SAFETY: the communicator and stream are live and of device `r`; the ranges are the
        // n-byte allocations above, freed only after the streams are synchronised.
        unsafe { c.enqueue(r, comms[r], &call, CollectiveType::U8, streams[r]) }.ctx("enqueue")
    };
    c.group_start().ctx("group_start")?;
    let mut enqueued = Ok(());
    for r in 0..comms.len() {
        enqueued = enqueued.and_then(|()| {
            call(
                r,
                CollectiveCall::AllReduce {
                    send: sends[r],
                    recv: recvs[r],
                    count: n,
                    op: ReduceOp::Sum,
                },
            )
        });
    }
    c.group_end().ctx("group_end")?;
    enqueued?;
    let sum: Vec<u8> = (0..n)
        .map(|i| inputs.iter().fold(0u8, |a, input| a.wrapping_add(input[i])))
        .collect();
    for (r, &s) in streams.iter().enumerate() {
        // SAFETY: the stream is live and of device `r`.
        unsafe { b.stream_synchronize(r, s) }.ctx("stream_synchronize")?;
        // SAFETY: `recvs[r]` is a live n-byte allocation of device `r`, its writer complete.
        let got = unsafe { download(b, r, recvs[r], n) }?;
        ensure(got == sum, || {
            format!("rank {r}: the all-reduce is not the sum")
        })?;
    }
    // A broadcast in place from the last rank.
    let root = comms.len() - 1;
    c.group_start().ctx("group_start")?;
    let mut enqueued = Ok(());
    for (r, &buf) in sends.iter().enumerate() {
        enqueued = enqueued.and_then(|()| {
            call(
                r,
                CollectiveCall::Broadcast {
                    send: buf,
                    recv: buf,
                    count: n,
                    root,
                },
            )
        });
    }
    c.group_end().ctx("group_end")?;
    enqueued?;
    for (r, &s) in streams.iter().enumerate() {
        // SAFETY: as above.
        unsafe { b.stream_synchronize(r, s) }.ctx("stream_synchronize")?;
        // SAFETY: `sends[r]` is a live n-byte allocation of device `r`, its writer complete.
        let got = unsafe { download(b, r, sends[r], n) }?;
        ensure(got == inputs[root], || {
            format!("rank {r}: not the root's bytes")
        })?;
    }
    release(b, &sends, &recvs, &streams)?;
    Ok(Outcome::Passed)
}

/// Frees the buffers and destroys the streams of one rank each.
fn release(
    b: &dyn Backend,
    sends: &[DevicePtr],
    recvs: &[DevicePtr],
    streams: &[crate::backend::StreamHandle],
) -> Result<(), String> {
    for r in 0..streams.len() {
        // SAFETY: the stream's work is complete; each is destroyed and freed once.
        unsafe {
            b.stream_destroy(r, streams[r]).ctx("stream_destroy")?;
            b.free(r, sends[r]).ctx("free")?;
            b.free(r, recvs[r]).ctx("free")?;
        }
    }
    Ok(())
}
