//! Devices: their numbering, their facts, their independence, and use from many threads.

use super::{
    Context, Contract, Expect, Factory, Outcome, Verdict, download, ensure, needs_two_devices,
    pattern, upload,
};
use crate::backend::{Backend, DevicePtr, HostAllocFlags, ManagedAdvice};
use crate::error::{Error, Result};

/// The backend drives the devices the contract names, numbered from 0; each reports its
/// ordinal, one capacity in `device_info` and `mem_info` (Numba's `get_memory_info()` total),
/// at most that much free, a power-of-two warp, and whether it maps host memory as the
/// contract expects.
pub(super) fn devices_report_their_ordinal_and_capacity(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    ensure(b.device_count() == contract.devices, || {
        format!(
            "device_count() is {}, the contract says {}",
            b.device_count(),
            contract.devices
        )
    })?;
    for device in 0..b.device_count() {
        let info = b.device_info(device).ctx("device_info")?;
        let mem = b.mem_info(device).ctx("mem_info")?;
        ensure(info.ordinal == device, || {
            format!("device {device} says it is {}", info.ordinal)
        })?;
        ensure(
            info.total_memory == mem.total && mem.free <= mem.total,
            || format!("device {device}: {info:?} against {mem:?}"),
        )?;
        if let Some(capacity) = contract.capacity {
            ensure(mem.total == capacity, || {
                format!("device {device} has {} bytes, not {capacity}", mem.total)
            })?;
        }
        ensure(
            info.warp_size.is_power_of_two() && info.max_threads_per_block >= info.warp_size,
            || format!("device {device}: {info:?}"),
        )?;
        let maps = match contract.mapped_host {
            Expect::Works => Some(true),
            Expect::NotSupported => Some(false),
            Expect::Skip(_) => None,
        };
        ensure(maps.is_none_or(|m| m == info.can_map_host_memory), || {
            format!(
                "device {device} says can_map_host_memory = {}, the contract expects {:?}",
                info.can_map_host_memory, contract.mapped_host
            )
        })?;
    }
    Ok(Outcome::Passed)
}

/// An ordinal at or past `device_count()` is refused by every method taking one, with
/// [`Error::NoSuchDevice`] naming the ordinal and the count (CUDA's `CUDA_ERROR_INVALID_DEVICE`;
/// Numba raises it as `CudaSupportError`). A capability the backend hands out may answer
/// `NotSupportedByBackend` instead (a device or driver without it).
pub(super) fn bad_device_index_is_an_error(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let count = b.device_count();
    for device in [count, count + 7] {
        let refused = |what: &str, result: Result<()>, optional: bool| match result {
            Err(Error::NoSuchDevice {
                device: d,
                count: c,
                ..
            }) if d == device && c == count => Ok(()),
            Err(Error::NotSupportedByBackend { .. }) if optional => Ok(()),
            other => Err(format!(
                "{what} on device {device} of {count} gave {other:?}, not NoSuchDevice"
            )),
        };
        refused("device_info", b.device_info(device).map(drop), false)?;
        refused("mem_info", b.mem_info(device).map(drop), false)?;
        refused("synchronize", b.synchronize(device), false)?;
        refused("alloc", b.alloc(device, 256).map(drop), false)?;
        let flags = HostAllocFlags::default();
        refused(
            "host_alloc",
            b.host_alloc(device, 4096, flags).map(drop),
            false,
        )?;
        refused("stream_create", b.stream_create(device).map(drop), false)?;
        refused(
            "event_create",
            b.event_create(device, true).map(drop),
            false,
        )?;
        if let Some(p) = b.peer() {
            refused(
                "can_access_peer",
                p.can_access_peer(device, 0).map(drop),
                true,
            )?;
            refused(
                "can_access_peer",
                p.can_access_peer(0, device).map(drop),
                true,
            )?;
            refused("enable_peer_access", p.enable_peer_access(device, 0), true)?;
        }
        if let Some(managed) = b.managed() {
            refused(
                "managed_alloc",
                managed.managed_alloc(device, 4096).map(drop),
                true,
            )?;
            let advice = ManagedAdvice::SetReadMostly;
            refused(
                "managed_advise",
                managed.managed_advise(device, DevicePtr(1 << 20), 4096, advice),
                true,
            )?;
        }
        if let Some(pool) = b.pool() {
            refused("pool_usage", pool.pool_usage(device).map(drop), true)?;
        }
    }
    Ok(Outcome::Passed)
}

/// Devices are separate: memory allocated on one does not show in another's `mem_info`, and
/// each has streams, events and copies of its own.
pub(super) fn devices_are_separate(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    if let Some(skip) = needs_two_devices(b.as_ref()) {
        return Ok(skip);
    }
    let before = b.mem_info(1).ctx("mem_info(1)")?;
    let on_0 = b.alloc(0, 1 << 16).ctx("alloc on device 0")?;
    let during = b.mem_info(1).ctx("mem_info(1)")?;
    if contract.exact_accounting {
        ensure(during.free == before.free, || {
            format!("an allocation on device 0 moved device 1's memory: {before:?} -> {during:?}")
        })?;
    }
    let data = pattern(4096, 41);
    let on_1 = upload(b.as_ref(), 1, &data)?;
    let stream = b.stream_create(1).ctx("stream_create(1)")?;
    let event = b.event_create(1, false).ctx("event_create(1)")?;
    // SAFETY: `on_1` holds 4096 bytes; the handles are live ones of device 1.
    unsafe {
        b.memset_d8_async(1, on_1, 0x5A, 16, stream)
            .ctx("memset_d8_async on device 1")?;
        b.event_record(1, event, stream).ctx("event_record")?;
        b.event_synchronize(1, event).ctx("event_synchronize")?;
    }
    // SAFETY: `on_1` holds 4096 bytes and no work uses it any more.
    let back = unsafe { download(b.as_ref(), 1, on_1, 4096) }?;
    let mut expected = data;
    expected[..16].fill(0x5A);
    ensure(back == expected, || {
        "work on device 1 gave the wrong bytes".into()
    })?;
    // SAFETY: each handle and allocation is released once, after its work.
    unsafe {
        b.event_destroy(1, event).ctx("event_destroy")?;
        b.stream_destroy(1, stream).ctx("stream_destroy")?;
        b.free(1, on_1).ctx("free on device 1")?;
        b.free(0, on_0).ctx("free on device 0")?;
    }
    Ok(Outcome::Passed)
}

/// The backend is `Send + Sync` in earnest: threads allocating, copying (synchronously and on
/// streams of their own) and freeing at once, on every device, each get their own bytes back
/// (CUDA: each thread gets the device's context made current by the backend).
pub(super) fn work_from_several_threads(_: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let count = b.device_count();
    let b = b.as_ref();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4u8)
            .map(|t| scope.spawn(move || round_trips(b, usize::from(t) % count, t)))
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| "a worker thread panicked".to_string())?
        })
    })?;
    Ok(Outcome::Passed)
}

/// Several synchronous and stream round trips on `device`, with bytes unique to `seed`.
fn round_trips(b: &dyn Backend, device: usize, seed: u8) -> Result<(), String> {
    // (Under Miri, which interprets every byte, smaller: the threads still overlap.)
    let n = if cfg!(miri) { 1000 } else { 3000 };
    let stream = b.stream_create(device).ctx("stream_create")?;
    let pinned = b
        .host_alloc(device, n, HostAllocFlags::default())
        .ctx("host_alloc")?;
    for round in 0..4u8 {
        let data = pattern(n, seed.wrapping_mul(16).wrapping_add(round));
        let ptr = upload(b, device, &data)?;
        // SAFETY: `pinned` and `ptr` hold `n` bytes each; the stream is live, and is
        // synchronised before the host reads `pinned`.
        unsafe {
            std::ptr::write_bytes(pinned.host.as_ptr(), 0, n);
            b.copy_dtoh_async(device, pinned.host.as_ptr(), ptr, n, stream)
                .ctx("copy_dtoh_async")?;
            b.stream_synchronize(device, stream)
                .ctx("stream_synchronize")?;
        }
        // SAFETY: the copy into `pinned` has completed; it holds `n` bytes.
        let got = unsafe { std::slice::from_raw_parts(pinned.host.as_ptr(), n) };
        ensure(got == data.as_slice(), || {
            format!("thread {seed}, round {round}: another thread's bytes or none")
        })?;
        // SAFETY: nothing uses `ptr` any more.
        unsafe { b.free(device, ptr) }.ctx("free")?;
    }
    // SAFETY: the stream is idle; both are released once.
    unsafe {
        b.host_free(device, pinned.host).ctx("host_free")?;
        b.stream_destroy(device, stream).ctx("stream_destroy")
    }
}
