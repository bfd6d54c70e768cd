//! Streams and events.

use super::{
    Context, Contract, Expect, Factory, LARGE, Outcome, Verdict, ensure, not_supported, offset,
    pattern, upload,
};
use crate::backend::{Backend, DevicePtr, HostAllocFlags, HostAllocation, StreamHandle};
use crate::error::{Error, Result};

/// Page-locked buffer of `n` bytes holding `data` (or zeros when `data` is empty).
fn staged(b: &dyn Backend, n: usize, data: &[u8]) -> Result<HostAllocation, String> {
    let host = b
        .host_alloc(0, n, HostAllocFlags::default())
        .ctx("host_alloc")?;
    // SAFETY: the allocation holds n bytes, owned by this check; `data` is at most n bytes.
    unsafe {
        std::ptr::write_bytes(host.host.as_ptr(), 0, n);
        std::ptr::copy_nonoverlapping(data.as_ptr(), host.host.as_ptr(), data.len().min(n));
    }
    Ok(host)
}

/// The `n` bytes of page-locked `host`.
///
/// # Safety
/// `host` holds `n` bytes and no enqueued work still writes them.
unsafe fn read(host: &HostAllocation, n: usize) -> Vec<u8> {
    // SAFETY: as the caller guarantees.
    unsafe { std::slice::from_raw_parts(host.host.as_ptr(), n) }.to_vec()
}

/// Work on one stream runs in the order it was enqueued: a host-to-device copy, a copy on the
/// device, a fill of part of it and the copy back give the bytes of that order, and of several
/// fills of one range the last wins (CUDA streams; Numba's `stream=` arguments).
pub(super) fn stream_work_runs_in_order(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = LARGE;
    let data = pattern(n, 3);
    let src = staged(b.as_ref(), n, &data)?;
    let dst = staged(b.as_ref(), n, &[])?;
    let (d1, d2) = (b.alloc(0, n).ctx("alloc")?, b.alloc(0, n).ctx("alloc")?);
    let s = b.stream_create(0).ctx("stream_create")?;
    // SAFETY: every buffer holds n bytes and outlives the stream's work (synchronised below);
    // the host buffers are not touched meanwhile.
    unsafe {
        b.copy_htod_async(0, d1, src.host.as_ptr(), n, s)
            .ctx("copy_htod_async")?;
        b.copy_dtod_async(0, d2, d1, n, s).ctx("copy_dtod_async")?;
        b.memset_d8_async(0, offset(d2, 5), 0xEE, 1000, s)
            .ctx("memset_d8_async")?;
        for value in 1..=5u8 {
            b.memset_d8_async(0, offset(d2, 2000), value, 64, s)
                .ctx("memset_d8_async")?;
        }
        b.copy_dtoh_async(0, dst.host.as_ptr(), d2, n, s)
            .ctx("copy_dtoh_async")?;
        b.stream_synchronize(0, s).ctx("stream_synchronize")?;
    }
    let mut expected = data;
    expected[5..1005].fill(0xEE);
    expected[2000..2064].fill(5);
    // SAFETY: the stream has completed; `dst` holds n bytes.
    let got = unsafe { read(&dst, n) };
    ensure(got == expected, || {
        "the stream's copies and fills ran out of order".into()
    })?;
    // SAFETY: everything is idle and released once.
    unsafe {
        b.stream_destroy(0, s).ctx("stream_destroy")?;
        for p in [d1, d2] {
            b.free(0, p).ctx("free")?;
        }
        for h in [src, dst] {
            b.host_free(0, h.host).ctx("host_free")?;
        }
    }
    Ok(Outcome::Passed)
}

/// A new stream is idle (`stream_query` is `true`, `cuStreamQuery`'s `CUDA_SUCCESS`); after
/// `stream_synchronize` its work is complete and it is idle again; `synchronize` completes the
/// work of every stream of the device (Numba's `cuda.synchronize()`).
pub(super) fn stream_query_and_synchronize(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = LARGE;
    let (s1, s2) = (
        b.stream_create(0).ctx("stream_create")?,
        b.stream_create(0).ctx("stream_create")?,
    );
    let out = [staged(b.as_ref(), n, &[])?, staged(b.as_ref(), n, &[])?];
    let sources = [pattern(n, 7), pattern(n, 8)];
    let ptrs = [
        upload(b.as_ref(), 0, &sources[0])?,
        upload(b.as_ref(), 0, &sources[1])?,
    ];
    // SAFETY: the streams are live ones of device 0.
    unsafe {
        ensure(b.stream_query(0, s1).ctx("stream_query")?, || {
            "a new stream is not idle".into()
        })?;
        b.stream_synchronize(0, s1)
            .ctx("stream_synchronize of an idle stream")?;
    }
    // Round 1: each stream synchronised on its own; round 2: the device synchronised at once.
    for round in 0..2 {
        for ((s, host), ptr) in [s1, s2].into_iter().zip(&out).zip(ptrs) {
            // SAFETY: `host` and `ptr` hold n bytes and outlive the work, which completes below
            // before the host reads `host`.
            unsafe {
                b.copy_dtoh_async(0, host.host.as_ptr(), ptr, n, s)
                    .ctx("copy_dtoh_async")?;
                if round == 0 {
                    b.stream_synchronize(0, s).ctx("stream_synchronize")?;
                }
            }
        }
        if round == 1 {
            b.synchronize(0).ctx("synchronize")?;
        }
        for (i, s) in [s1, s2].into_iter().enumerate() {
            // SAFETY: a live stream of device 0.
            let idle = unsafe { b.stream_query(0, s) }.ctx("stream_query")?;
            // SAFETY: the stream's copy has completed (the rule under check); n bytes.
            let got = unsafe { read(&out[i], n) };
            ensure(idle && got == sources[i], || {
                format!(
                    "round {round}, stream {i}: idle {idle}, bytes right {}",
                    got == sources[i]
                )
            })?;
        }
    }
    // SAFETY: everything is idle and released once.
    unsafe {
        for s in [s1, s2] {
            b.stream_destroy(0, s).ctx("stream_destroy")?;
        }
        for p in ptrs {
            b.free(0, p).ctx("free")?;
        }
        for h in out {
            b.host_free(0, h.host).ctx("host_free")?;
        }
    }
    Ok(Outcome::Passed)
}

/// An event never recorded is complete (`cuEventQuery` answers `CUDA_SUCCESS`) and
/// synchronising it returns at once; once recorded after work, synchronising it completes that
/// work and `event_query` then says so; an event can be recorded again.
pub(super) fn events_record_query_and_synchronize(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = LARGE;
    let s = b.stream_create(0).ctx("stream_create")?;
    let events = [
        b.event_create(0, false).ctx("event_create")?,
        b.event_create(0, true).ctx("event_create")?,
    ];
    let host = staged(b.as_ref(), n, &[])?;
    for event in events {
        // SAFETY: live handles of device 0.
        unsafe {
            ensure(b.event_query(0, event).ctx("event_query")?, || {
                "an event never recorded is not complete".into()
            })?;
            b.event_synchronize(0, event)
                .ctx("event_synchronize of an event never recorded")?;
        }
        for round in 0..2u8 {
            let data = pattern(n, 30 + round);
            let ptr = upload(b.as_ref(), 0, &data)?;
            // SAFETY: `host` and `ptr` hold n bytes and outlive the copy, which the event's
            // synchronisation completes (the rule under check) before `host` is read.
            unsafe {
                b.copy_dtoh_async(0, host.host.as_ptr(), ptr, n, s)
                    .ctx("copy_dtoh_async")?;
                b.event_record(0, event, s).ctx("event_record")?;
                b.event_synchronize(0, event).ctx("event_synchronize")?;
                ensure(b.event_query(0, event).ctx("event_query")?, || {
                    "event_query after event_synchronize is false".into()
                })?;
                ensure(read(&host, n) == data, || {
                    format!("round {round}: the recorded work was not complete")
                })?;
                b.free(0, ptr).ctx("free")?;
            }
        }
    }
    // SAFETY: everything is idle and released once.
    unsafe {
        for event in events {
            b.event_destroy(0, event).ctx("event_destroy")?;
        }
        b.stream_destroy(0, s).ctx("stream_destroy")?;
        b.host_free(0, host.host).ctx("host_free")?;
    }
    Ok(Outcome::Passed)
}

/// Two completed timed events have a finite elapsed time, not negative from the earlier to the
/// later; an event created without timing (Numba's `cuda.event(timing=False)`), or a timed one
/// never recorded, has none: [`Error::EventTiming`] (`cuEventElapsedTime`'s
/// `CUDA_ERROR_INVALID_HANDLE`).
pub(super) fn event_timing(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let s = b.stream_create(0).ctx("stream_create")?;
    let (start, end) = (
        b.event_create(0, true).ctx("event_create")?,
        b.event_create(0, true).ctx("event_create")?,
    );
    let untimed = b.event_create(0, false).ctx("event_create")?;
    let ptr = b.alloc(0, LARGE).ctx("alloc")?;
    let timing_error = |what: &str, r: Result<f32>| match r {
        Err(Error::EventTiming { .. }) => Ok(()),
        other => Err(format!("{what} gave {other:?}, not EventTiming")),
    };
    // SAFETY: live handles of device 0; `ptr` holds the LARGE bytes filled, and outlives the fill
    // (synchronised below).
    unsafe {
        if contract.event_timing == Expect::Works {
            timing_error(
                "elapsed time of events never recorded",
                b.event_elapsed_ms(0, start, end),
            )?;
        }
        b.event_record(0, start, s).ctx("event_record")?;
        b.memset_d8_async(0, ptr, 1, LARGE, s)
            .ctx("memset_d8_async")?;
        b.event_record(0, end, s).ctx("event_record")?;
        b.event_record(0, untimed, s).ctx("event_record")?;
        b.event_synchronize(0, end).ctx("event_synchronize")?;
        b.stream_synchronize(0, s).ctx("stream_synchronize")?;
    }
    // SAFETY: live handles of device 0, recorded and complete.
    let verdict = unsafe {
        match contract.event_timing {
            Expect::Works => {
                let ms = b.event_elapsed_ms(0, start, end).ctx("event_elapsed_ms")?;
                ensure(ms.is_finite() && ms >= 0.0, || {
                    format!("elapsed time {ms} ms from the earlier event to the later")
                })?;
                timing_error(
                    "elapsed time to an untimed event",
                    b.event_elapsed_ms(0, start, untimed),
                )?;
                timing_error(
                    "elapsed time from an untimed event",
                    b.event_elapsed_ms(0, untimed, end),
                )?;
                Outcome::Passed
            }
            Expect::NotSupported => {
                not_supported(b.event_elapsed_ms(0, start, end), "event_elapsed_ms")?;
                Outcome::Passed
            }
            Expect::Skip(reason) => Outcome::Skipped(reason.into()),
        }
    };
    // SAFETY: everything is idle and released once.
    unsafe {
        for e in [start, end, untimed] {
            b.event_destroy(0, e).ctx("event_destroy")?;
        }
        b.stream_destroy(0, s).ctx("stream_destroy")?;
        b.free(0, ptr).ctx("free")?;
    }
    Ok(verdict)
}

/// `stream_wait_event` makes a stream's later work wait for another stream's work recorded in
/// the event (`cuStreamWaitEvent`): a stream that reads and fills what the other wrote gets the
/// written bytes, and only its own synchronisation is needed to see them.
pub(super) fn stream_wait_event_orders_streams(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = 4 * LARGE;
    let data = pattern(n, 13);
    let src = staged(b.as_ref(), n, &data)?;
    let dst = staged(b.as_ref(), n, &[])?;
    let d = b.alloc(0, n).ctx("alloc")?;
    let (writer, reader) = (
        b.stream_create(0).ctx("stream_create")?,
        b.stream_create(0).ctx("stream_create")?,
    );
    let event = b.event_create(0, false).ctx("event_create")?;
    // SAFETY: the buffers hold n bytes and outlive the work (synchronised below); live handles.
    unsafe {
        b.copy_htod_async(0, d, src.host.as_ptr(), n, writer)
            .ctx("copy_htod_async")?;
        b.memset_d8_async(0, offset(d, n - 100), 0x42, 100, writer)
            .ctx("memset_d8_async")?;
        b.event_record(0, event, writer).ctx("event_record")?;
        b.stream_wait_event(0, reader, event)
            .ctx("stream_wait_event")?;
        b.memset_d8_async(0, d, 0x24, 10, reader)
            .ctx("memset_d8_async")?;
        b.copy_dtoh_async(0, dst.host.as_ptr(), d, n, reader)
            .ctx("copy_dtoh_async")?;
        b.stream_synchronize(0, reader).ctx("stream_synchronize")?;
    }
    let mut expected = data;
    expected[n - 100..].fill(0x42);
    expected[..10].fill(0x24);
    // SAFETY: the reader's copy has completed; `dst` holds n bytes.
    let got = unsafe { read(&dst, n) };
    ensure(got == expected, || {
        "the waiting stream ran before the work it waits for".into()
    })?;
    // SAFETY: live handles and memory of device 0, each released once; the event is destroyed
    // after the streams' work has completed.
    unsafe {
        release(b.as_ref(), &[writer, reader], &[d], &[src, dst])?;
        b.event_destroy(0, event).ctx("event_destroy")?;
    }
    Ok(Outcome::Passed)
}

/// Synchronises and destroys `streams`, then frees `device` and `host` memory of device 0.
///
/// # Safety
/// Every handle and pointer is a live one of device 0, released by nothing else, and no work
/// on other streams still uses the memory.
unsafe fn release(
    b: &dyn Backend,
    streams: &[StreamHandle],
    device: &[DevicePtr],
    host: &[HostAllocation],
) -> Result<(), String> {
    for &s in streams {
        // SAFETY: a live stream of device 0 (the caller's promise), destroyed once after its
        // work.
        unsafe {
            b.stream_synchronize(0, s).ctx("stream_synchronize")?;
            b.stream_destroy(0, s).ctx("stream_destroy")?;
        }
    }
    for &p in device {
        // SAFETY: live allocations (the caller's promise); their work has completed above.
        unsafe { b.free(0, p) }.ctx("free")?;
    }
    for h in host {
        // SAFETY: live page-locked memory (the caller's promise); its work has completed above.
        unsafe { b.host_free(0, h.host) }.ctx("host_free")?;
    }
    Ok(())
}
