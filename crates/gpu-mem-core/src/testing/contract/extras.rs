//! The optional capabilities: peer access, managed memory, stream-ordered pools and IPC. Each is
//! handed out by its accessor exactly where the contract expects it, and then works as it says.

use super::{
    Context, Contract, Factory, LARGE, Outcome, Verdict, download, ensure, expected,
    needs_two_devices, not_supported, offset, pattern, upload,
};
use crate::backend::{
    Backend, DevicePtr, HostAllocFlags, IpcMemory, PeerAccess, StreamHandle, StreamOrderedPool,
};
use crate::error::Error;

/// Peer access is handed out ([`Backend::peer`]) where the backend has it; there,
/// `can_access_peer` says a device reaches its own memory (`cuDeviceCanAccessPeer`; Numba's
/// `can_access_peer`); enabling access a device can have succeeds, twice too, and access it
/// cannot have is `NotSupportedByBackend`; peer copies, synchronous and on the destination's
/// stream, move the bytes between devices whatever the access (`cuMemcpyPeer`).
pub(super) fn peer_access_and_copies(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let p = match expected(contract.peer, b.peer(), "peer")? {
        Ok(p) => p,
        Err(outcome) => return Ok(outcome),
    };
    ensure(
        p.can_access_peer(0, 0).ctx("can_access_peer(0, 0)")?,
        || "device 0 cannot access its own memory".into(),
    )?;
    if let Some(skip) = needs_two_devices(b.as_ref()) {
        return Ok(skip);
    }
    peer_round_trip(b.as_ref(), p)
}

/// [`peer_access_and_copies`] on two devices where peer access is handed out.
fn peer_round_trip(b: &dyn Backend, p: &dyn PeerAccess) -> Verdict {
    for (device, other) in [(0, 1), (1, 0)] {
        if p.can_access_peer(device, other).ctx("can_access_peer")? {
            p.enable_peer_access(device, other)
                .ctx("enable_peer_access")?;
            p.enable_peer_access(device, other)
                .ctx("enable_peer_access a second time")?;
        } else {
            not_supported(
                p.enable_peer_access(device, other),
                "enable_peer_access where can_access_peer is false",
            )?;
        }
    }
    let n = 8192 + 3;
    let data = pattern(n, 61);
    let on_1 = upload(b, 1, &data)?;
    let on_0 = upload(b, 0, &pattern(n, 62))?;
    let back_on_1 = b.alloc(1, n).ctx("alloc")?;
    let stream = b.stream_create(1).ctx("stream_create")?;
    // SAFETY: every range lies in a live allocation of the device named with it; the stream is
    // a live one of the destination device, synchronised before the bytes are read.
    let (on_0_now, back) = unsafe {
        p.copy_peer(0, offset(on_0, 10), 1, on_1, n - 10)
            .ctx("copy_peer")?;
        p.copy_peer(0, on_0, 1, on_1, 0)
            .ctx("copy_peer of 0 bytes")?;
        p.copy_peer_async(1, back_on_1, 0, on_0, n, stream)
            .ctx("copy_peer_async")?;
        b.stream_synchronize(1, stream).ctx("stream_synchronize")?;
        (download(b, 0, on_0, n)?, download(b, 1, back_on_1, n)?)
    };
    let mut expected = pattern(n, 62);
    expected[10..].copy_from_slice(&data[..n - 10]);
    ensure(on_0_now == expected, || {
        "copy_peer moved the wrong bytes".into()
    })?;
    ensure(back == expected, || {
        "copy_peer_async moved the wrong bytes".into()
    })?;
    // SAFETY: everything is idle and released once.
    unsafe {
        b.stream_destroy(1, stream).ctx("stream_destroy")?;
        b.free(1, on_1).ctx("free")?;
        b.free(1, back_on_1).ctx("free")?;
        b.free(0, on_0).ctx("free")?;
    }
    Ok(Outcome::Passed)
}

/// Managed memory (`cuMemAllocManaged`; Numba's `managed_array`) is handed out
/// ([`Backend::managed`]) where the backend has it: one allocation with a host and a device
/// address (which `host_memory_device_addresses_serve_copies` uses), 4096-byte aligned, zero
/// where the backend says so, the host's to write; freeing it twice is an error.
pub(super) fn managed_memory_allocates_and_frees(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let managed = match expected(contract.managed, b.managed(), "managed")? {
        Ok(managed) => managed,
        Err(outcome) => return Ok(outcome),
    };
    let n = 8192;
    let m = managed.managed_alloc(0, n).ctx("managed_alloc")?;
    let host = m.host.as_ptr();
    ensure(m.device.is_some(), || {
        "managed memory without a device address".into()
    })?;
    ensure((host as usize).is_multiple_of(4096), || {
        format!("managed memory at {host:?} is not 4096-byte aligned")
    })?;
    let data = pattern(n, 33);
    // SAFETY: the allocation holds n bytes this check owns; no work uses it.
    let (zero, back) = unsafe {
        let zero = std::slice::from_raw_parts(host, n).iter().all(|&x| x == 0);
        std::ptr::copy_nonoverlapping(data.as_ptr(), host, n);
        (zero, std::slice::from_raw_parts(host, n).to_vec())
    };
    ensure(!m.zeroed || zero, || "said zeroed, but is not".into())?;
    ensure(back == data, || "host writes do not stay".into())?;
    // SAFETY: freed once, unused; the second free must be refused.
    unsafe {
        managed.managed_free(0, m.host).ctx("managed_free")?;
        ensure(managed.managed_free(0, m.host).is_err(), || {
            "a second managed_free succeeded".into()
        })?;
    }
    Ok(Outcome::Passed)
}

/// Stream-ordered allocation (`cuMemAllocAsync` / `cuMemFreeAsync`; Numba's
/// `CUDA_MEMORY_MANAGER=cuda_async` pool) is handed out ([`Backend::pool`]) where the backend has
/// a pool: memory allocated on a stream serves that stream's later work and is returned by a
/// free on it; the pool reports its use, and takes a release threshold and a trim.
pub(super) fn stream_ordered_allocation(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let pool = match expected(contract.stream_ordered_pool, b.pool(), "pool")? {
        Ok(pool) => pool,
        Err(outcome) => return Ok(outcome),
    };
    let s = b.stream_create(0).ctx("stream_create")?;
    let verdict = pool_round_trip(b.as_ref(), pool, s)?;
    // SAFETY: the stream is idle (its work was synchronised) and destroyed once.
    unsafe { b.stream_destroy(0, s) }.ctx("stream_destroy")?;
    Ok(verdict)
}

/// [`stream_ordered_allocation`] where the pool works.
fn pool_round_trip(b: &dyn Backend, pool: &dyn StreamOrderedPool, s: StreamHandle) -> Verdict {
    let n = LARGE;
    let data = pattern(n, 44);
    let flags = HostAllocFlags::default();
    let (src, dst) = (
        b.host_alloc(0, n, flags).ctx("host_alloc")?,
        b.host_alloc(0, n, flags).ctx("host_alloc")?,
    );
    // SAFETY: `s` is a live stream of device 0; the page-locked buffers hold n bytes and outlive
    // the work (synchronised below), and the pool memory is used only on `s` before its free.
    let usage = unsafe {
        match pool.alloc_async(0, 0, s) {
            Err(Error::InvalidArgument { .. }) => {}
            other => return Err(format!("alloc_async of 0 bytes gave {other:?}")),
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), src.host.as_ptr(), n);
        let p = pool.alloc_async(0, n, s).ctx("alloc_async")?;
        ensure(!p.is_null() && p.0 % 256 == 0, || {
            format!(
                "stream-ordered memory at {:#x} is not 256-byte aligned",
                p.0
            )
        })?;
        b.copy_htod_async(0, p, src.host.as_ptr(), n, s)
            .ctx("copy_htod_async")?;
        b.copy_dtoh_async(0, dst.host.as_ptr(), p, n, s)
            .ctx("copy_dtoh_async")?;
        let usage = pool.pool_usage(0).ctx("pool_usage")?;
        pool.free_async(0, p, s).ctx("free_async")?;
        b.stream_synchronize(0, s).ctx("stream_synchronize")?;
        usage
    };
    ensure(
        usage.used >= n as u64 && usage.reserved >= usage.used,
        || format!("pool usage {usage:?} with {n} bytes allocated"),
    )?;
    // SAFETY: the stream is synchronised: the copy into `dst` has completed.
    let got = unsafe { std::slice::from_raw_parts(dst.host.as_ptr(), n) };
    ensure(got == data.as_slice(), || {
        "stream-ordered memory lost its bytes".into()
    })?;
    pool.pool_set_release_threshold(0, 0)
        .ctx("pool_set_release_threshold")?;
    pool.pool_trim(0, 0).ctx("pool_trim")?;
    let after = pool.pool_usage(0).ctx("pool_usage")?;
    ensure(after.reserved >= after.used, || format!("{after:?}"))?;
    // SAFETY: the work using them has completed; each is freed once.
    unsafe {
        b.host_free(0, src.host).ctx("host_free")?;
        b.host_free(0, dst.host).ctx("host_free")?;
    }
    Ok(Outcome::Passed)
}

/// Exporting allocations for another process is handed out ([`Backend::ipc`]) where the backend
/// can: an exported allocation (`cuIpcGetMemHandle`; Numba's `DeviceNDArray.get_ipc_handle`)
/// names at least its size; where the exporting process may open its own handle, the mapping
/// shows the allocation's bytes, live, and closes; where it may not (CUDA), opening is an error.
pub(super) fn ipc_handles(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let ipc = match expected(contract.ipc, b.ipc(), "ipc")? {
        Ok(ipc) => ipc,
        Err(outcome) => return Ok(outcome),
    };
    let n = 8192 + 5;
    let data = pattern(n, 55);
    let ptr = upload(b.as_ref(), 0, &data)?;
    let verdict = ipc_round_trip(contract, b.as_ref(), ipc, ptr, &data)?;
    // SAFETY: allocated above, freed once; any mapping of it is closed.
    unsafe { b.free(0, ptr) }.ctx("free")?;
    Ok(verdict)
}

/// [`ipc_handles`] where IPC works.
fn ipc_round_trip(
    contract: &Contract,
    b: &dyn Backend,
    ipc: &dyn IpcMemory,
    ptr: DevicePtr,
    data: &[u8],
) -> Verdict {
    let n = data.len();
    let handle = ipc.ipc_get_handle(0, ptr).ctx("ipc_get_handle")?;
    ensure(handle.bytes >= n as u64 && !handle.data.is_empty(), || {
        format!(
            "the handle of {n} bytes says {} bytes, {} bytes of data",
            handle.bytes,
            handle.data.len()
        )
    })?;
    if !contract.ipc_open_in_exporting_process {
        return match ipc.ipc_open_handle(0, &handle) {
            Err(_) => Ok(Outcome::Passed),
            Ok(mapped) => {
                // SAFETY: opened just above, closed once, unused.
                let _ = unsafe { ipc.ipc_close_handle(0, mapped) };
                Err("the exporting process opened its own handle, which the contract says it cannot".into())
            }
        };
    }
    let mapped = ipc.ipc_open_handle(0, &handle).ctx("ipc_open_handle")?;
    // SAFETY: `mapped` maps the n bytes of `ptr`, both live; no work is pending on either.
    let (seen, live) = unsafe {
        let seen = download(b, 0, mapped, n)?;
        b.memset_d8(0, ptr, 0x6D, 16).ctx("memset_d8")?;
        let live = download(b, 0, mapped, 16)?;
        ipc.ipc_close_handle(0, mapped).ctx("ipc_close_handle")?;
        (seen, live)
    };
    ensure(seen == data, || {
        "the mapping does not show the allocation's bytes".into()
    })?;
    ensure(live == [0x6D; 16], || {
        "the mapping does not show later writes to the allocation".into()
    })?;
    Ok(Outcome::Passed)
}
