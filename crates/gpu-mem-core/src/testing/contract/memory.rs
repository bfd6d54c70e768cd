//! Device memory: allocation, accounting, and synchronous copies and fills.

use super::{
    Context, Contract, Expect, Factory, LARGE, Outcome, Verdict, download, ensure, offset, pattern,
    upload,
};
use crate::backend::{DevicePtr, HostAllocFlags};
use crate::error::Error;
use std::fmt::Debug;

/// Allocations of any size are 256-byte aligned (`cuMemAlloc` gives at least that, and Numba's
/// arrays assume it), never null, and disjoint: bytes written to each come back unchanged after
/// all were written.
pub(super) fn allocations_are_aligned_and_disjoint(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let sizes = [1usize, 255, 256, 257, 4096 + 13, LARGE];
    let mut live = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let data = pattern(n, i as u8);
        let ptr = upload(b.as_ref(), 0, &data)?;
        ensure(!ptr.is_null() && ptr.0 % 256 == 0, || {
            format!(
                "a {n}-byte allocation at {:#x} is not 256-byte aligned",
                ptr.0
            )
        })?;
        live.push((ptr, data));
    }
    let mut ranges: Vec<_> = live
        .iter()
        .map(|(p, d)| (p.0, p.0 + d.len() as u64))
        .collect();
    ranges.sort_unstable();
    ensure(ranges.windows(2).all(|w| w[0].1 <= w[1].0), || {
        format!("live allocations overlap: {ranges:x?}")
    })?;
    for (ptr, data) in live {
        // SAFETY: `ptr` is a live allocation of `data.len()` bytes.
        let back = unsafe { download(b.as_ref(), 0, ptr, data.len()) }?;
        ensure(back == data, || {
            format!("the {}-byte allocation lost its bytes", data.len())
        })?;
        // SAFETY: allocated above, freed once, unused.
        unsafe { b.free(0, ptr) }.ctx("free")?;
    }
    Ok(Outcome::Passed)
}

/// Empty allocations are refused with [`Error::InvalidArgument`] (the trait asks for
/// `bytes > 0`; Numba never asks the driver for zero bytes), device, page-locked and managed.
pub(super) fn empty_allocations_are_refused(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let refused = |what: &str, invalid: bool, got: &dyn Debug| {
        ensure(invalid, || {
            format!("{what} of 0 bytes gave {got:?}, not InvalidArgument")
        })
    };
    let r = b.alloc(0, 0);
    refused("alloc", matches!(r, Err(Error::InvalidArgument { .. })), &r)?;
    if contract.managed == Expect::Works {
        let managed = b.managed().ok_or("Backend::managed answered None")?;
        let r = managed.managed_alloc(0, 0);
        refused(
            "managed_alloc",
            matches!(r, Err(Error::InvalidArgument { .. })),
            &r,
        )?;
    }
    let r = b.host_alloc(0, 0, HostAllocFlags::default());
    if let Ok(wrongly) = &r {
        // SAFETY: allocated just above, freed once, unused.
        let _ = unsafe { b.host_free(0, wrongly.host) };
    }
    refused(
        "host_alloc",
        matches!(r, Err(Error::InvalidArgument { .. })),
        &r,
    )?;
    Ok(Outcome::Passed)
}

/// `mem_info` follows allocations: the total never changes, free never exceeds it, and where
/// accounting is exact, free drops by the bytes allocated and comes back when they are freed.
pub(super) fn mem_info_follows_allocations(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = (1 << 16) + 100;
    for device in 0..b.device_count() {
        let before = b.mem_info(device).ctx("mem_info")?;
        let ptr = b.alloc(device, n).ctx("alloc")?;
        let during = b.mem_info(device).ctx("mem_info")?;
        // SAFETY: allocated just above, unused.
        unsafe { b.free(device, ptr) }.ctx("free")?;
        let after = b.mem_info(device).ctx("mem_info")?;
        let infos = [before, during, after];
        ensure(
            infos
                .iter()
                .all(|m| m.total == before.total && m.free <= m.total),
            || format!("device {device}: {infos:?}"),
        )?;
        if contract.exact_accounting {
            ensure(
                before.free - during.free == n as u64 && after.free == before.free,
                || format!("device {device}, {n} bytes allocated and freed: {infos:?}"),
            )?;
        }
    }
    if !contract.exact_accounting {
        return Ok(Outcome::Skipped(
            "totals checked; free memory is not exact here, so its movement is not".into(),
        ));
    }
    Ok(Outcome::Passed)
}

/// An allocation that does not fit is [`Error::OutOfMemory`] naming the backend, the device,
/// the bytes asked for, those free and the total (what Numba's `CudaAPIError` for
/// `CUDA_ERROR_OUT_OF_MEMORY` lacks), and the backend allocates on afterwards.
pub(super) fn out_of_memory_names_the_sizes(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let total = b.mem_info(0).ctx("mem_info")?.total;
    // With exact accounting, part of the memory is taken first, so that the free bytes the
    // error names are not simply the total.
    let taken = if contract.exact_accounting {
        Some(b.alloc(0, 1 << 16).ctx("alloc")?)
    } else {
        None
    };
    let free = b.mem_info(0).ctx("mem_info")?.free;
    let request = if contract.exact_accounting {
        free + 1
    } else {
        total.saturating_mul(2)
    };
    let request_bytes = usize::try_from(request).map_err(|e| e.to_string())?;
    match b.alloc(0, request_bytes) {
        Err(Error::OutOfMemory {
            backend,
            device: 0,
            requested,
            free: f,
            total: t,
            ..
        }) if backend == b.kind()
            && requested == request
            && t == total
            && f <= t
            && (!contract.exact_accounting || f == free) => {}
        Ok(ptr) => {
            // SAFETY: allocated just above, unused.
            let _ = unsafe { b.free(0, ptr) };
            return Err(format!(
                "{request} bytes allocated on a device of {total} with {free} free"
            ));
        }
        other => {
            return Err(format!(
                "{request} bytes of {total} ({free} free) gave {other:?}, not OutOfMemory naming them"
            ));
        }
    }
    let small = b.alloc(0, 4096).ctx("alloc after running out")?;
    // SAFETY: each allocation is freed once, unused.
    unsafe {
        b.free(0, small).ctx("free")?;
        if let Some(taken) = taken {
            b.free(0, taken).ctx("free")?;
        }
    }
    Ok(Outcome::Passed)
}

/// Freeing what is not a live allocation — twice, inside one, null — is an error, not a crash,
/// and the backend goes on working; so is freeing page-locked memory twice. (`free` is `unsafe`
/// because a backend may pass the pointer to a driver; each backend here looks it up first, so
/// that a caller's mistake is reported rather than corrupting another allocation.)
pub(super) fn freeing_what_is_not_allocated_is_an_error(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let start = b.mem_info(0).ctx("mem_info")?;
    let ptr = b.alloc(0, 4096).ctx("alloc")?;
    // SAFETY: deliberately breaks `free`'s rule (a pointer from `alloc`, freed once): the backend
    // must find that none of these is a live allocation's start, and touch nothing.
    unsafe {
        ensure(b.free(0, offset(ptr, 256)).is_err(), || {
            "freeing a pointer inside an allocation succeeded".into()
        })?;
        ensure(b.free(0, DevicePtr::NULL).is_err(), || {
            "freeing the null pointer succeeded".into()
        })?;
        b.free(0, ptr).ctx("free")?;
        ensure(b.free(0, ptr).is_err(), || "a second free succeeded".into())?;
    }
    let host = b
        .host_alloc(0, 4096, HostAllocFlags::default())
        .ctx("host_alloc")?;
    // SAFETY: freed once, then again on purpose (the second must be refused).
    unsafe {
        b.host_free(0, host.host).ctx("host_free")?;
        ensure(b.host_free(0, host.host).is_err(), || {
            "a second host_free succeeded".into()
        })?;
    }
    let again = upload(b.as_ref(), 0, &pattern(512, 3))?;
    // SAFETY: allocated just above, unused.
    unsafe { b.free(0, again) }.ctx("free after the refusals")?;
    let end = b.mem_info(0).ctx("mem_info")?;
    ensure(!contract.exact_accounting || end.free == start.free, || {
        format!("the refused frees changed the accounting: {start:?} -> {end:?}")
    })?;
    Ok(Outcome::Passed)
}

/// Synchronous copies (host to device, device to device, device to host) move exactly the
/// bytes asked for, between any offsets of their allocations, at odd sizes, and leave the bytes
/// around them alone.
pub(super) fn copies_round_trip_at_offsets(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = 8192 + 77;
    let base = pattern(n, 1);
    let (a, c) = (upload(b.as_ref(), 0, &base)?, upload(b.as_ref(), 0, &base)?);
    let (mut model_a, mut model_c) = (base.clone(), base);
    // (offset in a, offset in c, bytes)
    let cases = [
        (0, 0, 1),
        (3, 5, 1000),
        (4096, 17, 4097),
        (n - 1, 0, 1),
        (100, 3, 8000),
    ];
    for (i, &(at_a, at_c, len)) in cases.iter().enumerate() {
        let data = pattern(len, 100 + i as u8);
        // SAFETY: every range lies inside `a` or `c` (n bytes each) and inside the host buffers.
        unsafe {
            b.copy_htod(0, offset(a, at_a), data.as_ptr(), len)
                .ctx("copy_htod")?;
            b.copy_dtod(0, offset(c, at_c), offset(a, at_a), len)
                .ctx("copy_dtod")?;
        }
        model_a[at_a..at_a + len].copy_from_slice(&data);
        model_c[at_c..at_c + len].copy_from_slice(&data);
        let mut part = vec![0u8; len];
        // SAFETY: as above.
        unsafe { b.copy_dtoh(0, part.as_mut_ptr(), offset(c, at_c), len) }.ctx("copy_dtoh")?;
        ensure(part == data, || {
            format!("{len} bytes via offsets {at_a} and {at_c} came back changed")
        })?;
    }
    // SAFETY: both hold n bytes.
    let (got_a, got_c) = unsafe {
        (
            download(b.as_ref(), 0, a, n)?,
            download(b.as_ref(), 0, c, n)?,
        )
    };
    ensure(got_a == model_a && got_c == model_c, || {
        "copies wrote outside their ranges".into()
    })?;
    // SAFETY: allocated above, unused.
    unsafe {
        b.free(0, a).ctx("free")?;
        b.free(0, c).ctx("free")?;
    }
    Ok(Outcome::Passed)
}

/// `memset_d8` sets exactly the bytes of its range, at any offset and length (HSA fills in
/// 4-byte words, so the unaligned ends are where a backend can go wrong).
pub(super) fn memset_fills_exactly_its_range(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let n = 96;
    let mut model = pattern(n, 5);
    let ptr = upload(b.as_ref(), 0, &model)?;
    let cases = [
        (1, 2, 0x11),
        (3, 6, 0x22),
        (8, 8, 0x33),
        (17, 1, 0x44),
        (21, 30, 0x55),
        (60, 36, 0x66),
        (0, 3, 0x77),
        (0, 96, 0x00),
        (95, 1, 0xFF),
    ];
    for (at, len, value) in cases {
        // SAFETY: `at..at+len` lies inside the n-byte allocation.
        unsafe { b.memset_d8(0, offset(ptr, at), value, len) }.ctx("memset_d8")?;
        model[at..at + len].fill(value);
        // SAFETY: `ptr` holds n bytes.
        let back = unsafe { download(b.as_ref(), 0, ptr, n) }?;
        ensure(back == model, || {
            format!("memset of {len} bytes at {at} to {value:#x}: {back:?}, expected {model:?}")
        })?;
    }
    // SAFETY: allocated above, unused.
    unsafe { b.free(0, ptr) }.ctx("free")?;
    Ok(Outcome::Passed)
}

/// Copies and fills of zero bytes, synchronous or on a stream, succeed and change nothing (a
/// zero-size array's transfer; CUDA's `cuMemcpy*` accept a count of 0).
pub(super) fn zero_byte_transfers_do_nothing(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let data = pattern(256, 9);
    let ptr = upload(b.as_ref(), 0, &data)?;
    let other = upload(b.as_ref(), 0, &pattern(256, 10))?;
    let pinned = b
        .host_alloc(0, 256, HostAllocFlags::default())
        .ctx("host_alloc")?;
    let stream = b.stream_create(0).ctx("stream_create")?;
    let mut host = [0xEEu8; 4];
    // SAFETY: every range is empty and starts inside a live buffer; the stream is live.
    unsafe {
        b.copy_htod(0, offset(ptr, 8), host.as_ptr(), 0)
            .ctx("copy_htod of 0 bytes")?;
        b.copy_dtoh(0, host.as_mut_ptr(), ptr, 0)
            .ctx("copy_dtoh of 0 bytes")?;
        b.copy_dtod(0, ptr, other, 0).ctx("copy_dtod of 0 bytes")?;
        b.memset_d8(0, ptr, 0xAA, 0).ctx("memset_d8 of 0 bytes")?;
        b.copy_htod_async(0, ptr, pinned.host.as_ptr(), 0, stream)
            .ctx("copy_htod_async of 0 bytes")?;
        b.copy_dtoh_async(0, pinned.host.as_ptr(), ptr, 0, stream)
            .ctx("copy_dtoh_async of 0 bytes")?;
        b.copy_dtod_async(0, ptr, other, 0, stream)
            .ctx("copy_dtod_async of 0 bytes")?;
        b.memset_d8_async(0, ptr, 0xAA, 0, stream)
            .ctx("memset_d8_async of 0 bytes")?;
        b.stream_synchronize(0, stream).ctx("stream_synchronize")?;
    }
    // SAFETY: `ptr` holds 256 bytes; no work is pending.
    let back = unsafe { download(b.as_ref(), 0, ptr, 256) }?;
    ensure(back == data && host == [0xEE; 4], || {
        "a zero-byte transfer changed bytes".into()
    })?;
    // SAFETY: everything is idle and released once.
    unsafe {
        b.stream_destroy(0, stream).ctx("stream_destroy")?;
        b.host_free(0, pinned.host).ctx("host_free")?;
        b.free(0, ptr).ctx("free")?;
        b.free(0, other).ctx("free")?;
    }
    Ok(Outcome::Passed)
}

/// Calls without a stream come after all work already enqueued on the device's streams (CUDA's
/// legacy default stream, which Numba's synchronous copies rely on): a synchronous read sees
/// what a stream was still writing, and a synchronous write lands after a stream's read of the
/// old bytes.
pub(super) fn synchronous_calls_wait_for_stream_work(
    _: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let n = LARGE;
    let data = pattern(n, 21);
    let pinned = b
        .host_alloc(0, n, HostAllocFlags::default())
        .ctx("host_alloc")?;
    let out = b
        .host_alloc(0, n, HostAllocFlags::default())
        .ctx("host_alloc")?;
    let ptr = b.alloc(0, n).ctx("alloc")?;
    let stream = b.stream_create(0).ctx("stream_create")?;
    let mut back = vec![0u8; n];
    // SAFETY: `pinned`, `out` and `ptr` hold n bytes each and outlive the stream's work, which
    // the synchronous calls wait for (the rule checked) and the synchronisation below ends.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), pinned.host.as_ptr(), n);
        b.copy_htod_async(0, ptr, pinned.host.as_ptr(), n, stream)
            .ctx("copy_htod_async")?;
        b.memset_d8_async(0, ptr, 0x3C, 16, stream)
            .ctx("memset_d8_async")?;
        b.copy_dtoh(0, back.as_mut_ptr(), ptr, n).ctx("copy_dtoh")?;
        b.copy_dtoh_async(0, out.host.as_ptr(), ptr, n, stream)
            .ctx("copy_dtoh_async")?;
        b.memset_d8(0, ptr, 0x77, n).ctx("memset_d8")?;
        b.stream_synchronize(0, stream).ctx("stream_synchronize")?;
    }
    let mut expected = data;
    expected[..16].fill(0x3C);
    ensure(back == expected, || {
        "copy_dtoh did not wait for the stream's copy and fill".into()
    })?;
    // SAFETY: the stream's copy into `out` has completed; it holds n bytes.
    let streamed = unsafe { std::slice::from_raw_parts(out.host.as_ptr(), n) };
    ensure(streamed == expected.as_slice(), || {
        "memset_d8 ran before the stream's earlier read of the bytes".into()
    })?;
    // SAFETY: everything is idle and released once.
    unsafe {
        b.stream_destroy(0, stream).ctx("stream_destroy")?;
        b.free(0, ptr).ctx("free")?;
        b.host_free(0, pinned.host).ctx("host_free")?;
        b.host_free(0, out.host).ctx("host_free")?;
    }
    Ok(Outcome::Passed)
}
