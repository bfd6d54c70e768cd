//! Managed-memory hints: prefetch and advice, where the backend has managed memory.

use super::{
    Context, Contract, Factory, Outcome, Verdict, download, ensure, expected, offset, pattern,
};
use crate::backend::{
    Backend, DevicePtr, ManagedAdvice, ManagedLocation, ManagedMemory, StreamHandle,
};
use crate::error::{Error, Result};

/// Managed memory takes prefetches (`cuMemPrefetchAsync`) to the device and to the host on a
/// stream of its device, and every advice (`cuMemAdvise`): each works, or is
/// `NotSupportedByBackend` where the device cannot act on it (the check is then skipped, naming
/// it). Neither changes a byte, as the host and the device see it after the stream's
/// synchronization. A range reaching past the allocation or outside it, an empty range, a
/// location or device that does not exist, and a stream of another device are errors.
pub(super) fn managed_prefetch_and_advise(contract: &Contract, factory: Factory<'_>) -> Verdict {
    let b = factory()?;
    let managed = match expected(contract.managed, b.managed(), "managed")? {
        Ok(managed) => managed,
        Err(outcome) => return Ok(outcome),
    };
    let n = 8192 + 5;
    let m = managed.managed_alloc(0, n).ctx("managed_alloc")?;
    let ptr = m.device.ok_or("managed memory without a device address")?;
    let data = pattern(n, 71);
    // SAFETY: the allocation holds n bytes this check owns; no work uses it yet.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m.host.as_ptr(), n) };
    let s = b.stream_create(0).ctx("stream_create")?;
    let verdict = hints(b.as_ref(), managed, ptr, n, s).and_then(|unsupported| {
        // SAFETY: the stream's work on the allocation was synchronised; no work uses it.
        let (on_host, on_device) = unsafe {
            let on_host = std::slice::from_raw_parts(m.host.as_ptr(), n).to_vec();
            (on_host, download(b.as_ref(), 0, ptr, n)?)
        };
        ensure(on_host == data && on_device == data, || {
            "prefetch or advice changed the memory's bytes".into()
        })?;
        refusals(b.as_ref(), managed, ptr, n, s)?;
        Ok(if unsupported.is_empty() {
            Outcome::Passed
        } else {
            Outcome::Skipped(format!(
                "the device cannot act on {}",
                unsupported.join(", ")
            ))
        })
    });
    // SAFETY: the stream is synchronised (its work is done) and destroyed once; the memory is
    // freed once, after it.
    unsafe {
        b.stream_synchronize(0, s).ctx("stream_synchronize")?;
        b.stream_destroy(0, s).ctx("stream_destroy")?;
        managed.managed_free(0, m.host).ctx("managed_free")?;
    }
    verdict
}

/// Every prefetch and advice on `ptr..ptr+n`, the stream synchronised after; the hints the
/// device could not act on (`NotSupportedByBackend`).
fn hints(
    b: &dyn Backend,
    managed: &dyn ManagedMemory,
    ptr: DevicePtr,
    n: usize,
    s: StreamHandle,
) -> Result<Vec<String>, String> {
    let mut unsupported = Vec::new();
    let mut take = |what: String, result: Result<()>| match result {
        Ok(()) => Ok(()),
        Err(Error::NotSupportedByBackend { .. }) => {
            unsupported.push(what);
            Ok(())
        }
        Err(error) => Err(format!("{what} failed: {error}")),
    };
    let (device, host) = (ManagedLocation::Device(0), ManagedLocation::Host);
    for (to, start, bytes) in [(device, 0, n), (host, 4096, n - 4096), (device, n - 1, 1)] {
        // SAFETY: `s` is a live stream of device 0; the range lies in the managed allocation,
        // which outlives the stream's work (synchronised below, before the free).
        let result = unsafe { managed.managed_prefetch(0, offset(ptr, start), bytes, to, s) };
        take(format!("a prefetch to {to:?}"), result)?;
    }
    for advice in [
        ManagedAdvice::SetReadMostly,
        ManagedAdvice::SetPreferredLocation(device),
        ManagedAdvice::SetPreferredLocation(host),
        ManagedAdvice::SetAccessedBy(device),
        ManagedAdvice::SetAccessedBy(host),
        ManagedAdvice::UnsetAccessedBy(device),
        ManagedAdvice::UnsetAccessedBy(host),
        ManagedAdvice::UnsetPreferredLocation,
        ManagedAdvice::UnsetReadMostly,
    ] {
        let result = managed.managed_advise(0, ptr, n, advice);
        take(format!("{advice:?}"), result)?;
    }
    // SAFETY: `s` is a live stream of device 0.
    unsafe { b.stream_synchronize(0, s) }.ctx("stream_synchronize")?;
    Ok(unsupported)
}

/// Bad ranges, locations, devices and streams are errors, not panics.
fn refusals(
    b: &dyn Backend,
    managed: &dyn ManagedMemory,
    ptr: DevicePtr,
    n: usize,
    s: StreamHandle,
) -> Result<(), String> {
    let count = b.device_count();
    let nowhere = ManagedLocation::Device(count);
    let host = ManagedLocation::Host;
    // SAFETY: `s` is a live stream of device 0; the allocation outlives the stream's work
    // (synchronised before the free). Every range here is refused by the backend's own checks.
    let prefetches = unsafe {
        [
            (
                "past the allocation",
                managed.managed_prefetch(0, ptr, n + 1, host, s),
            ),
            ("of 0 bytes", managed.managed_prefetch(0, ptr, 0, host, s)),
            (
                "to no device",
                managed.managed_prefetch(0, ptr, n, nowhere, s),
            ),
            (
                "right after the allocation",
                managed.managed_prefetch(0, offset(ptr, n), 1, host, s),
            ),
        ]
    };
    let advice = [
        (
            "past the allocation",
            managed.managed_advise(0, ptr, n + 1, ManagedAdvice::SetReadMostly),
        ),
        (
            "of 0 bytes",
            managed.managed_advise(0, ptr, 0, ManagedAdvice::SetReadMostly),
        ),
        (
            "to no device",
            managed.managed_advise(0, ptr, n, ManagedAdvice::SetAccessedBy(nowhere)),
        ),
        (
            "of no device",
            managed.managed_advise(count, ptr, n, ManagedAdvice::SetReadMostly),
        ),
    ];
    for (what, result) in prefetches.into_iter().chain(advice) {
        ensure(result.is_err(), || {
            format!("a prefetch or advice {what} was accepted")
        })?;
    }
    if count >= 2 {
        let other = b.stream_create(1).ctx("stream_create(1)")?;
        // SAFETY: `other` is a live stream of device 1, refused for device 0's memory, then
        // destroyed once (nothing was enqueued on it).
        let refused = unsafe {
            let refused = managed.managed_prefetch(0, ptr, n, host, other);
            b.stream_destroy(1, other).ctx("stream_destroy")?;
            refused
        };
        ensure(refused.is_err(), || {
            "a prefetch on a stream of another device was accepted".into()
        })?;
    }
    Ok(())
}
