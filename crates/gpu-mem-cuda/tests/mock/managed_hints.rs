//! Managed-memory prefetch and advice against the stand-in: what reaches `cuMemPrefetchAsync_v2`
//! and `cuMemAdvise_v2` (pointer, size, location, advice, stream, the context current), what is
//! refused before the driver, and devices without concurrent managed access. (That hints change
//! no byte, and their errors in general, are the raw-`Backend` contract's.)

use super::expect_unsupported;
use crate::mock::{Mock, ensure};
use gpu_mem_core::Error;
use gpu_mem_core::backend::{
    DevicePtr, ManagedAdvice, ManagedLocation, ManagedMemory, Memory, StreamHandle, Streams,
};
use libtest_mimic::Failed;

/// What the stand-in recorded of one hint.
#[derive(Debug, PartialEq, Eq)]
struct Hint {
    ptr: u64,
    bytes: u64,
    /// The device whose context was current.
    device: u64,
    /// `CUmemLocation`: type (1 device, 2 host) and id.
    location: (u64, u64),
    /// `CUmem_advise` (0 for a prefetch).
    advice: u64,
}

/// The last prefetch (`advice == false`) or advice the stand-in saw.
fn last_hint(mock: &Mock, advice: bool) -> Result<Hint, Failed> {
    // SAFETY: mock_last_hint(int which, unsigned long long out[6]) writes six values.
    let f = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(i32, *mut u64)>("mock_last_hint")
    }?;
    let mut out = [0u64; 6];
    // SAFETY: `out` holds six writable values.
    unsafe { f(i32::from(advice), out.as_mut_ptr()) };
    Ok(Hint {
        ptr: out[0],
        bytes: out[1],
        device: out[2],
        location: (out[3], out[4]),
        advice: out[5],
    })
}

fn counts(mock: &Mock) -> Result<(i32, i32), Failed> {
    Ok((
        mock.call::<i32>("mock_prefetches")?,
        mock.call::<i32>("mock_advices")?,
    ))
}

const DEVICE: u64 = 1;
const HOST: u64 = 2;

/// Prefetches and every advice reach the driver with the range, location and stream given, in
/// the context of the allocation's device; bad arguments are refused before it.
pub fn hints_reach_the_driver(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let n = 3 * 4096 + 100;
    let m = b.managed_alloc(0, n)?;
    let base = m.device.ok_or("managed memory without a device address")?;
    let inner = DevicePtr(base.0 + 4096);
    let s = b.stream_create(0)?;
    // SAFETY: the stream is live; the ranges lie in the live managed allocation, freed below
    // after the stream is synchronised.
    unsafe {
        b.managed_prefetch(0, inner, 2048, ManagedLocation::Device(1), s)?;
        let seen = last_hint(mock, false)?;
        let want = Hint {
            ptr: inner.0,
            bytes: 2048,
            device: 0,
            location: (DEVICE, 1),
            advice: 0,
        };
        ensure(seen == want, || {
            format!("prefetch reached the driver as {seen:?}")
        })?;
        ensure(
            mock.call::<u64>("mock_last_prefetch_stream")? == s.0,
            || "the prefetch went to another stream".into(),
        )?;
        b.managed_prefetch(0, base, n, ManagedLocation::Host, s)?;
        ensure(last_hint(mock, false)?.location.0 == HOST, || {
            "a host prefetch is not CU_MEM_LOCATION_TYPE_HOST".into()
        })?;
    }
    // Each advice: its CUmem_advise value and the location passed (the allocation's device for
    // advice that names none).
    let advice = [
        (ManagedAdvice::SetReadMostly, 1, (DEVICE, 0)),
        (
            ManagedAdvice::SetPreferredLocation(ManagedLocation::Host),
            3,
            (HOST, 0),
        ),
        (
            ManagedAdvice::SetAccessedBy(ManagedLocation::Device(1)),
            5,
            (DEVICE, 1),
        ),
        (
            ManagedAdvice::UnsetAccessedBy(ManagedLocation::Device(1)),
            6,
            (DEVICE, 1),
        ),
        (ManagedAdvice::UnsetPreferredLocation, 4, (DEVICE, 0)),
        (ManagedAdvice::UnsetReadMostly, 2, (DEVICE, 0)),
    ];
    for (given, code, location) in advice {
        b.managed_advise(0, base, n, given)?;
        let seen = last_hint(mock, true)?;
        let want = Hint {
            ptr: base.0,
            bytes: n as u64,
            device: 0,
            location,
            advice: code,
        };
        ensure(seen == want, || {
            format!("{given:?} reached the driver as {seen:?}")
        })?;
    }
    ensure(counts(mock)? == (2, 6), || {
        format!("counts {:?}", counts(mock))
    })?;
    refused_before_the_driver(mock, &b, base, n, s)?;
    // SAFETY: the stream's work is waited for; nothing uses the memory or the stream after.
    unsafe {
        b.stream_synchronize(0, s)?;
        b.stream_destroy(0, s)?;
        b.managed_free(0, m.host)?;
    }
    Ok(())
}

/// Bad ranges, locations and streams are refused with errors, none taken by the driver: the
/// stream of another device by the driver itself (the backend passes streams it did not create,
/// adopted ones, on to it), everything else before it.
fn refused_before_the_driver(
    mock: &Mock,
    b: &gpu_mem_cuda::CudaBackend,
    base: DevicePtr,
    n: usize,
    s: StreamHandle,
) -> Result<(), Failed> {
    let before = counts(mock)?;
    let other = b.stream_create(1)?;
    let plain = b.alloc(0, 4096)?;
    let host = ManagedLocation::Host;
    // SAFETY: every call is refused before the driver; the handles and memory are live.
    let prefetches = unsafe {
        [
            b.managed_prefetch(0, base, n + 1, host, s),
            b.managed_prefetch(0, base, 0, host, s),
            b.managed_prefetch(0, base, n, ManagedLocation::Device(2), s),
            b.managed_prefetch(0, base, n, host, other),
            b.managed_prefetch(1, base, n, host, other),
            b.managed_prefetch(0, plain, 64, host, s),
            b.managed_prefetch(7, base, n, host, s),
        ]
    };
    let advice = [
        b.managed_advise(0, base, n + 1, ManagedAdvice::SetReadMostly),
        b.managed_advise(1, base, n, ManagedAdvice::SetReadMostly),
        b.managed_advise(
            0,
            base,
            n,
            ManagedAdvice::SetAccessedBy(ManagedLocation::Device(2)),
        ),
        b.managed_advise(0, plain, 64, ManagedAdvice::SetReadMostly),
    ];
    let kinds: Vec<String> = prefetches
        .iter()
        .chain(&advice)
        .map(|r| match r {
            Err(Error::InvalidPointer { .. }) => "pointer".into(),
            Err(Error::InvalidArgument { .. }) => "argument".into(),
            Err(Error::NoSuchDevice { .. }) => "device".into(),
            Err(Error::Native { call, .. }) => format!("{call} refused"),
            other => format!("{other:?}"),
        })
        .collect();
    let want = [
        "pointer",
        "argument",
        "device",
        "cuMemPrefetchAsync refused",
        "pointer",
        "pointer",
        "device",
        "pointer",
        "pointer",
        "device",
        "pointer",
    ];
    ensure(kinds == want, || format!("refusals: {kinds:?}"))?;
    ensure(counts(mock)? == before, || {
        "the driver took a refused hint".into()
    })?;
    // SAFETY: unused, released once.
    unsafe {
        b.free(0, plain)?;
        b.stream_destroy(1, other)?;
    }
    Ok(())
}

/// Without `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`, prefetches and advice that would map
/// or move memory for a device are `NotSupportedByBackend` naming the attribute; read-mostly
/// advice and a host preferred location still reach the driver.
pub fn hints_need_concurrent_access(mock: &Mock) -> Result<(), Failed> {
    mock.call_with("mock_set_concurrent_managed", 0)?;
    let b = mock.backend()?;
    let m = b.managed_alloc(0, 4096)?;
    let base = m.device.ok_or("managed memory without a device address")?;
    let s = b.stream_create(0)?;
    let attribute = "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0";
    for to in [ManagedLocation::Host, ManagedLocation::Device(1)] {
        // SAFETY: the stream and the allocation are live; refused before the driver.
        let refused = unsafe { b.managed_prefetch(0, base, 4096, to, s) };
        expect_unsupported(refused, "managed memory prefetch", attribute)?;
    }
    let device = ManagedLocation::Device(0);
    for advice in [
        ManagedAdvice::SetPreferredLocation(device),
        ManagedAdvice::SetAccessedBy(device),
    ] {
        expect_unsupported(
            b.managed_advise(0, base, 4096, advice),
            "managed memory advice",
            attribute,
        )?;
    }
    b.managed_advise(0, base, 4096, ManagedAdvice::SetReadMostly)?;
    b.managed_advise(
        0,
        base,
        4096,
        ManagedAdvice::SetPreferredLocation(ManagedLocation::Host),
    )?;
    b.managed_advise(0, base, 4096, ManagedAdvice::UnsetAccessedBy(device))?;
    ensure(counts(mock)? == (0, 3), || {
        format!("counts {:?}", counts(mock))
    })?;
    // SAFETY: nothing was enqueued; released once.
    unsafe {
        b.stream_destroy(0, s)?;
        b.managed_free(0, m.host)?;
    }
    Ok(())
}

/// A driver older than 12.2 exports neither `_v2` call: both hints are `NotSupportedByBackend`
/// naming the call, and managed memory still works.
pub fn old_driver_has_no_hints(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let m = b.managed_alloc(0, 4096)?;
    let base = m.device.ok_or("managed memory without a device address")?;
    let s = b.stream_create(0)?;
    // SAFETY: the stream and the allocation are live; refused before the driver.
    let prefetch = unsafe { b.managed_prefetch(0, base, 4096, ManagedLocation::Host, s) };
    expect_unsupported(prefetch, "managed memory prefetch", "cuMemPrefetchAsync")?;
    expect_unsupported(
        b.managed_advise(0, base, 4096, ManagedAdvice::SetReadMostly),
        "managed memory advice",
        "cuMemAdvise",
    )?;
    // SAFETY: nothing was enqueued; released once.
    unsafe {
        b.stream_destroy(0, s)?;
        b.managed_free(0, m.host)?;
    }
    Ok(())
}
