//! Managed-memory prefetch and advice on two stand-in GPUs: validated as CUDA's are, recorded
//! per allocation (`RocBackend::managed_hints`), and never passed to the runtime (fine-grained
//! system memory does not migrate, and KFD refuses SVM attributes on pool memory): no copy, no
//! violation, the bytes as they were.

use super::multi::TwoGpus;
use super::{Mock, ensure, pattern, pinned};
use gpu_mem_core::Error;
use gpu_mem_core::backend::{
    DevicePtr, ManagedAdvice, ManagedHints, ManagedLocation, ManagedMemory, Memory, Streams,
};
use libtest_mimic::Failed;

pub fn managed_hints(mock: &Mock) -> Result<(), Failed> {
    let _two = TwoGpus::new(mock)?;
    let b = mock.backend()?;
    let n = 2 * 4096 + 7;
    let m = b.managed_alloc(0, n)?;
    let base = m.device.ok_or("managed memory without a device address")?;
    let data = pattern(n, 17);
    // SAFETY: the allocation has n bytes of host memory this test owns; no work uses it.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m.host.as_ptr(), n) };
    let s = b.stream_create(0)?;
    let on_1 = b.stream_create(1)?;
    let before = mock.stats()?;
    let inner = DevicePtr(base.0 + 4096);
    let gpu1 = ManagedLocation::Device(1);
    // SAFETY: the streams are live; the ranges lie in the live managed allocation.
    unsafe {
        b.managed_prefetch(0, inner, 100, gpu1, s)?;
        b.managed_prefetch(0, base, n, ManagedLocation::Host, s)?;
    }
    b.managed_advise(0, base, n, ManagedAdvice::SetReadMostly)?;
    b.managed_advise(0, inner, 1, ManagedAdvice::SetPreferredLocation(gpu1))?;
    b.managed_advise(0, base, n, ManagedAdvice::SetAccessedBy(gpu1))?;
    b.managed_advise(
        0,
        base,
        n,
        ManagedAdvice::SetAccessedBy(ManagedLocation::Device(0)),
    )?;
    b.managed_advise(0, base, n, ManagedAdvice::UnsetAccessedBy(gpu1))?;
    let want = ManagedHints {
        read_mostly: true,
        preferred_location: Some(gpu1),
        accessed_by: vec![ManagedLocation::Device(0)],
        last_advice: Some(ManagedAdvice::UnsetAccessedBy(gpu1)),
        prefetched_to: Some(ManagedLocation::Host),
        prefetches: 2,
    };
    let seen = b.managed_hints(0, DevicePtr(base.0 + n as u64 - 1))?;
    ensure(seen == want, || {
        format!("recorded {seen:?}, expected {want:?}")
    })?;

    // Refused with errors: a range past the allocation, another device's view of it, an empty
    // range, a device that does not exist, a stream of another device, page-locked memory.
    let pinned_mem = pinned(&b, 4096, true)?;
    let host = ManagedLocation::Host;
    // SAFETY: every call is refused; the streams and memory are live.
    let prefetches = unsafe {
        [
            b.managed_prefetch(0, base, n + 1, host, s),
            b.managed_prefetch(1, base, n, host, on_1),
            b.managed_prefetch(0, base, 0, host, s),
            b.managed_prefetch(0, base, n, ManagedLocation::Device(2), s),
            b.managed_prefetch(0, base, n, host, on_1),
            b.managed_prefetch(0, DevicePtr(pinned_mem.as_ptr() as u64), 64, host, s),
        ]
    };
    let advice = b.managed_advise(
        0,
        base,
        n,
        ManagedAdvice::SetPreferredLocation(ManagedLocation::Device(2)),
    );
    let kinds: Vec<String> = prefetches
        .iter()
        .chain([&advice])
        .map(|r| match r {
            Err(Error::InvalidPointer { .. }) => "pointer".into(),
            Err(Error::InvalidArgument { .. }) => "argument".into(),
            Err(Error::NoSuchDevice { .. }) => "device".into(),
            Err(Error::InvalidHandle { .. }) => "handle".into(),
            other => format!("{other:?}"),
        })
        .collect();
    let want_kinds = [
        "pointer", "pointer", "argument", "device", "handle", "pointer", "device",
    ];
    ensure(kinds == want_kinds, || format!("refusals: {kinds:?}"))?;
    ensure(b.managed_hints(0, base)? == want, || {
        "a refused hint was recorded".into()
    })?;

    // Nothing reached the runtime, and the bytes are as they were.
    let after = mock.stats()?;
    ensure(
        after.copies_started == before.copies_started && after.violations == before.violations,
        || format!("the hints reached the runtime: {before:?} -> {after:?}"),
    )?;
    // SAFETY: no work uses the allocation.
    let now = unsafe { std::slice::from_raw_parts(m.host.as_ptr(), n) };
    ensure(now == data.as_slice(), || "the hints changed bytes".into())?;

    // A new allocation starts without hints; a freed one has none to read.
    // SAFETY: nothing uses the streams or the memory; each is released once.
    unsafe {
        b.stream_destroy(0, s)?;
        b.stream_destroy(1, on_1)?;
        b.host_free(0, pinned_mem)?;
        b.managed_free(0, m.host)?;
    }
    ensure(b.managed_hints(0, base).is_err(), || {
        "hints of freed memory".into()
    })?;
    let again = b.managed_alloc(0, n)?;
    let fresh = b.managed_hints(0, again.device.ok_or("no device address")?)?;
    ensure(fresh == ManagedHints::default(), || {
        format!("a new allocation starts with {fresh:?}")
    })?;
    // SAFETY: unused, freed once.
    unsafe { b.managed_free(0, again.host) }?;
    Ok(())
}
