//! Host memory: page-locked allocations and registrations.

use super::{
    Context, Contract, Expect, Factory, Outcome, Verdict, download, ensure, not_supported, offset,
    pattern, upload,
};
use crate::backend::{Backend, DevicePtr, HostAllocFlags, HostRegisterFlags};
use crate::error::{Error, Result};
use std::ptr::NonNull;

/// Host memory of `n` bytes aligned to a page, owned by a check, for registration.
struct PageBuffer {
    storage: Vec<u8>,
    start: usize,
    n: usize,
}

impl PageBuffer {
    fn new(n: usize, seed: u8) -> PageBuffer {
        let mut storage = vec![0u8; n + 4096];
        let start = storage.as_ptr().align_offset(4096);
        storage[start..start + n].copy_from_slice(&pattern(n, seed));
        PageBuffer { storage, start, n }
    }

    /// The start (`Vec::as_mut_ptr` makes no reference, so earlier pointers stay usable).
    fn ptr(&mut self) -> NonNull<u8> {
        // SAFETY: `start` < 4096 lies inside the storage of n + 4096 bytes, which is not null.
        unsafe { NonNull::new_unchecked(self.storage.as_mut_ptr().add(self.start)) }
    }

    fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.n]
    }
}

/// Page-locked memory (`cuMemHostAlloc`, Numba's `pinned_array` and `mapped_array`) is 256-byte
/// aligned (small allocations share pages on CUDA), for every mix of the portable, mapped and write-combined flags; it reads as zeros
/// when the backend says so, is the caller's to write, and has a device address exactly when
/// mapped (which `host_memory_device_addresses_serve_copies` uses). Where mapping is not
/// provided, asking for it is `NotSupportedByBackend`.
pub(super) fn page_locked_memory_follows_its_flags(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    // (Under Miri, which interprets every byte's copy and comparison, a tenth.)
    let n = if cfg!(miri) { 1_000 } else { 10_000 };
    for bits in 0..8u8 {
        let flags = HostAllocFlags {
            portable: bits & 1 != 0,
            mapped: bits & 2 != 0,
            write_combined: bits & 4 != 0,
        };
        if flags.mapped && contract.mapped_host == Expect::NotSupported {
            not_supported(b.host_alloc(0, n, flags), "a mapped host_alloc")?;
            continue;
        }
        let alloc = b.host_alloc(0, n, flags).ctx("host_alloc")?;
        let host = alloc.host.as_ptr();
        ensure((host as usize).is_multiple_of(256), || {
            format!("{flags:?}: {host:?} is not 256-byte aligned")
        })?;
        let data = pattern(n, bits);
        // SAFETY: the allocation holds n bytes this check owns; no work uses them.
        let (first, back) = unsafe {
            let first = std::slice::from_raw_parts(host, n).to_vec();
            std::ptr::copy_nonoverlapping(data.as_ptr(), host, n);
            (first, std::slice::from_raw_parts(host, n).to_vec())
        };
        ensure(!alloc.zeroed || first.iter().all(|&x| x == 0), || {
            format!("{flags:?}: said zeroed, but is not")
        })?;
        ensure(back == data, || {
            format!("{flags:?}: host writes do not stay")
        })?;
        ensure(alloc.device.is_some() == flags.mapped, || {
            format!("{flags:?} gave device address {:?}", alloc.device)
        })?;
        // SAFETY: allocated above, freed once, unused by any work.
        unsafe { b.host_free(0, alloc.host) }.ctx("host_free")?;
    }
    Ok(Outcome::Passed)
}

/// Registered host memory (`cuMemHostRegister`; Numba's `cuda.pinned(array)`) serves
/// asynchronous copies both ways, from and to any offset inside the registered range, and the
/// range is the caller's again once unregistered. Where registration is not provided, it is
/// `NotSupportedByBackend`.
pub(super) fn registered_memory_serves_async_copies(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let n = 3 * 4096 + 100;
    let mut buffer = PageBuffer::new(n, 9);
    let flags = HostRegisterFlags::default();
    match contract.host_register {
        Expect::Works => {}
        Expect::Skip(reason) => return Ok(Outcome::Skipped(reason.into())),
        Expect::NotSupported => {
            // SAFETY: `buffer` outlives the call; a refused registration keeps nothing.
            let refused = unsafe { b.host_register(0, buffer.ptr(), n, flags) };
            not_supported(refused, "host_register")?;
            return Ok(Outcome::Passed);
        }
    }
    let expected = buffer.bytes().to_vec();
    let host = buffer.ptr();
    // SAFETY: `buffer` stays alive and unmoved until unregistered below.
    let mapped = unsafe { b.host_register(0, host, n, flags) }.ctx("host_register")?;
    ensure(mapped.is_none(), || {
        format!("an unmapped registration gave device address {mapped:?}")
    })?;
    let d = b.alloc(0, n).ctx("alloc")?;
    let s = b.stream_create(0).ctx("stream_create")?;
    // SAFETY: the registered range and `d` hold n bytes and outlive the work (synchronised
    // below); the host does not touch the range meanwhile.
    unsafe {
        b.copy_htod_async(0, d, host.as_ptr().add(100), n - 100, s)
            .ctx("copy_htod_async from registered memory")?;
        b.copy_dtoh_async(0, host.as_ptr().add(4096), d, 1000, s)
            .ctx("copy_dtoh_async into registered memory")?;
        b.stream_synchronize(0, s).ctx("stream_synchronize")?;
        b.stream_destroy(0, s).ctx("stream_destroy")?;
        b.host_unregister(0, host).ctx("host_unregister")?;
    }
    // SAFETY: `d` holds n bytes; no work is pending.
    let on_device = unsafe { download(b.as_ref(), 0, d, n - 100) }?;
    let mut after = expected.clone();
    after[4096..5096].copy_from_slice(&expected[100..1100]);
    ensure(on_device == expected[100..], || {
        "a copy from registered memory moved the wrong bytes".into()
    })?;
    ensure(buffer.bytes() == after.as_slice(), || {
        "a copy into registered memory moved the wrong bytes".into()
    })?;
    // SAFETY: allocated above, unused.
    unsafe { b.free(0, d) }.ctx("free")?;
    Ok(Outcome::Passed)
}

/// `cuMemHostRegister`'s rules: a range is registered once (again is
/// [`Error::HostRegistration`], as `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`), and undone
/// only at its start, once (otherwise `HostRegistration`, as
/// `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`); undone, it can be registered anew.
pub(super) fn registration_rules(contract: &Contract, factory: Factory<'_>) -> Verdict {
    if let Some(skip) = without_registration(contract) {
        return Ok(skip);
    }
    let b = factory()?;
    let n = 2 * 4096;
    let mut buffer = PageBuffer::new(n, 3);
    let mut other = PageBuffer::new(4096, 4);
    let host = buffer.ptr();
    // SAFETY: `host + 4096` lies inside `buffer`'s 8192 bytes.
    let inside = unsafe { host.add(4096) };
    let flags = HostRegisterFlags::default();
    // SAFETY: `buffer` and `other` stay alive and unmoved until after the unregistrations
    // below; the refused calls keep nothing.
    unsafe {
        b.host_register(0, host, n, flags).ctx("host_register")?;
        refused_registration("registering again", b.host_register(0, host, n, flags))?;
        refused_registration(
            "unregistering inside the range",
            b.host_unregister(0, inside),
        )?;
        refused_registration(
            "unregistering memory never registered",
            b.host_unregister(0, other.ptr()),
        )?;
        b.host_unregister(0, host).ctx("host_unregister")?;
        refused_registration("unregistering twice", b.host_unregister(0, host))?;
        b.host_register(0, host, n, flags)
            .ctx("host_register after unregistering")?;
        b.host_unregister(0, host).ctx("host_unregister")?;
    }
    Ok(Outcome::Passed)
}

/// Registration does not overlap page-locked memory: a range inside a registered one, and
/// memory page-locked by `host_alloc` already, are refused with [`Error::HostRegistration`]
/// (`CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`), so a page is never locked twice and an
/// unregistration never unlocks what another still uses.
pub(super) fn overlapping_registrations_are_refused(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    if let Some(skip) = without_registration(contract) {
        return Ok(skip);
    }
    let b = factory()?;
    let n = 2 * 4096;
    let mut buffer = PageBuffer::new(n, 5);
    let host = buffer.ptr();
    let flags = HostRegisterFlags::default();
    let pinned = b
        .host_alloc(0, n, HostAllocFlags::default())
        .ctx("host_alloc")?;
    let mut broken = Vec::new();
    // SAFETY: `buffer` and the page-locked allocation stay alive until after the releases
    // below; whatever a wrongly accepted registration took is given back.
    unsafe {
        b.host_register(0, host, n, flags).ctx("host_register")?;
        for (what, start, bytes) in [
            ("a range inside a registered one", host.add(4096), 100),
            ("page-locked memory", pinned.host, n),
        ] {
            let result = b.host_register(0, start, bytes, flags);
            if result.is_ok() {
                let _ = b.host_unregister(0, start);
            }
            if let Err(e) = refused_registration(&format!("registering {what}"), result) {
                broken.push(e);
            }
        }
        b.host_unregister(0, host).ctx("host_unregister")?;
        b.host_free(0, pinned.host).ctx("host_free")?;
    }
    ensure(broken.is_empty(), || broken.join("; "))?;
    Ok(Outcome::Passed)
}

/// The outcome of a registration check where the contract expects no registration.
fn without_registration(contract: &Contract) -> Option<Outcome> {
    match contract.host_register {
        Expect::Works => None,
        Expect::Skip(reason) => Some(Outcome::Skipped(reason.into())),
        Expect::NotSupported => Some(Outcome::Skipped(
            "the backend registers no host memory, so it has no registration rules".into(),
        )),
    }
}

/// `Ok(())` when `result` is the refusal [`Error::HostRegistration`].
fn refused_registration<T: std::fmt::Debug>(what: &str, result: Result<T>) -> Result<(), String> {
    match result {
        Err(Error::HostRegistration { .. }) => Ok(()),
        other => Err(format!("{what} gave {other:?}, not HostRegistration")),
    }
}

/// The device address of host memory the device reaches — mapped page-locked memory
/// (`CU_MEMHOSTALLOC_DEVICEMAP`; Numba's `mapped_array`), managed memory (`managed_array`) and a
/// mapped registration (`CU_MEMHOSTREGISTER_DEVICEMAP`; `cuda.mapped`) — serves device copies
/// and fills like any device pointer: they change the host bytes, and host writes show through
/// it. (The core reads and writes such arrays through it: `MappedArray::read` is a `copy_dtoh`
/// from the device address.)
pub(super) fn host_memory_device_addresses_serve_copies(
    contract: &Contract,
    factory: Factory<'_>,
) -> Verdict {
    let b = factory()?;
    let b = b.as_ref();
    let n = 4096 + 256;
    // Each kind is tried whatever the others gave, and every failure is named.
    let mut tried = Vec::new();
    if contract.mapped_host == Expect::Works {
        tried.push((
            "mapped page-locked memory",
            (|| {
                let flags = HostAllocFlags {
                    mapped: true,
                    ..HostAllocFlags::default()
                };
                let alloc = b.host_alloc(0, n, flags).ctx("host_alloc")?;
                let device = alloc.device.ok_or("no device address")?;
                // SAFETY: `device` maps the allocation's n bytes, which no work uses.
                let reached = unsafe { reaches_host(b, alloc.host, device, n) };
                // SAFETY: allocated above, freed once, unused.
                unsafe { b.host_free(0, alloc.host) }.ctx("host_free")?;
                reached
            })(),
        ));
    }
    if contract.managed == Expect::Works {
        tried.push((
            "managed memory",
            (|| {
                let managed = b.managed().ok_or("Backend::managed answered None")?;
                let m = managed.managed_alloc(0, n).ctx("managed_alloc")?;
                let device = m.device.ok_or("no device address")?;
                // SAFETY: `device` is the managed allocation's n bytes, which no work uses.
                let reached = unsafe { reaches_host(b, m.host, device, n) };
                // SAFETY: allocated above, freed once, unused.
                unsafe { managed.managed_free(0, m.host) }.ctx("managed_free")?;
                reached
            })(),
        ));
    }
    if (contract.host_register, contract.mapped_host) == (Expect::Works, Expect::Works) {
        tried.push((
            "mapped registered memory",
            (|| {
                let mut buffer = PageBuffer::new(n, 17);
                let host = buffer.ptr();
                let flags = HostRegisterFlags {
                    mapped: true,
                    portable: false,
                };
                // SAFETY: `buffer` stays alive and unmoved until unregistered below.
                let device = unsafe { b.host_register(0, host, n, flags) }
                    .ctx("host_register")?
                    .ok_or("no device address")?;
                // SAFETY: `device` maps the n registered bytes, which no work uses.
                let reached = unsafe { reaches_host(b, host, device, n) };
                // SAFETY: registered above, unregistered once, unused.
                unsafe { b.host_unregister(0, host) }.ctx("host_unregister")?;
                reached
            })(),
        ));
    }
    if tried.is_empty() {
        return Ok(Outcome::Skipped(
            "the backend maps no host memory into the device".into(),
        ));
    }
    let broken: Vec<String> = tried
        .into_iter()
        .filter_map(|(what, r)| r.err().map(|e| format!("{what}: {e}")))
        .collect();
    ensure(broken.is_empty(), || broken.join("; "))?;
    Ok(Outcome::Passed)
}

/// Checks device fills and copies through `device` change the `n` bytes at `host`, and host
/// writes show through `device`.
///
/// # Safety
/// `device` is the device address of the `n` bytes at `host`, which this check owns and no
/// enqueued work uses.
unsafe fn reaches_host(
    b: &dyn Backend,
    host: NonNull<u8>,
    device: DevicePtr,
    n: usize,
) -> Result<(), String> {
    let data = pattern(300, 71);
    let other = upload(b, 0, &data)?;
    // SAFETY: the ranges lie in the n bytes at `host` / `device` (the caller's) or in the 300 of
    // `other`; the host reads and writes only between the synchronous calls.
    let copied = unsafe {
        std::ptr::write_bytes(host.as_ptr(), 0, n);
        b.memset_d8(0, device, 7, 64)
            .ctx("memset_d8 through the device address")
            .and_then(|()| {
                b.copy_dtod(0, offset(device, 1000), other, 300)
                    .ctx("copy_dtod into the device address")
            })
            .and_then(|()| {
                std::ptr::write_bytes(host.as_ptr().add(2000), 0x99, 8);
                download(b, 0, offset(device, 2000), 8)
            })
            .map(|back| (back, std::slice::from_raw_parts(host.as_ptr(), n).to_vec()))
    };
    // SAFETY: allocated above, unused.
    unsafe { b.free(0, other) }.ctx("free")?;
    let (back, bytes) = copied?;
    ensure(bytes[..64].iter().all(|&x| x == 7), || {
        "a fill through the device address did not reach the host bytes".into()
    })?;
    ensure(bytes[1000..1300] == data[..], || {
        "a copy through the device address did not reach the host bytes".into()
    })?;
    ensure(back == [0x99; 8], || {
        "host writes do not show through the device address".into()
    })
}
