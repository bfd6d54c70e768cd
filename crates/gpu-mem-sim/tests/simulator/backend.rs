//! The simulator through the raw `Backend` trait, where it goes beyond the contract every
//! backend keeps (`contract`): it checks every device address and handle it is given. These also
//! run under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::Error;
use gpu_mem_core::backend::{DevicePtr, HostRegisterFlags};
use gpu_mem_core::backend::{Events, ManagedMemory, Memory, Streams, Transfer};
use gpu_mem_sim::{SimBackend, SimConfig};

fn sim(devices: usize, memory: u64) -> SimBackend {
    SimBackend::new(SimConfig::uniform(devices, memory))
}

/// Every device range is looked up: past an allocation's end, a host address, a freed
/// allocation and another device's allocation are refused, and addresses are never reused.
#[test]
fn device_addresses_are_checked() {
    let b = sim(2, 1 << 20);
    let p = b.alloc(0, 64).unwrap();
    let mut host = [0u8; 128];
    // SAFETY: `host` is a live buffer of 128 bytes; the device range is checked by the simulator.
    let past_end = unsafe { b.copy_dtoh(0, host.as_mut_ptr(), p, 65) };
    assert!(
        matches!(past_end, Err(Error::InvalidPointer { .. })),
        "{past_end:?}"
    );
    // SAFETY: as above.
    let host_as_device =
        unsafe { b.copy_dtoh(0, host.as_mut_ptr(), DevicePtr(host.as_ptr() as u64), 8) };
    assert!(matches!(host_as_device, Err(Error::InvalidPointer { .. })));
    // SAFETY: a pointer of device 0 used on device 1 is refused by the address check.
    let wrong_device = unsafe { b.copy_dtoh(1, host.as_mut_ptr(), p, 4) };
    assert!(matches!(wrong_device, Err(Error::InvalidPointer { .. })));
    // SAFETY: `p` came from `alloc`; the second free must be refused.
    unsafe {
        b.free(0, p).unwrap();
        assert!(matches!(b.free(0, p), Err(Error::InvalidPointer { .. })));
    }
    // SAFETY: a use after free is caught by the address check.
    let after_free = unsafe { b.copy_dtoh(0, host.as_mut_ptr(), p, 8) };
    assert!(matches!(after_free, Err(Error::InvalidPointer { .. })));
    let q = b.alloc(0, 64).unwrap();
    assert_ne!(p, q, "addresses are never reused");
    // SAFETY: `q` came from `alloc`.
    unsafe { b.free(0, q).unwrap() };
}

/// Managed memory is the simulator's own mapped window: registering it, whole or in part, is
/// refused (as CUDA's ALREADY_REGISTERED), so its window is not replaced, which once left
/// managed memory impossible to free. (Page-locked memory is the contract's `registration_rules`.)
#[test]
fn managed_memory_cannot_be_registered() {
    let b = sim(1, 1 << 20);
    let managed = b.managed_alloc(0, 8192).unwrap();
    let host = managed.host;
    // SAFETY: the allocation holds 8192 bytes and stays allocated; a refused registration
    // changes nothing.
    let inside = unsafe { host.add(4096) };
    for (start, bytes) in [(host, 8192), (inside, 100)] {
        // SAFETY: as above.
        let again = unsafe {
            b.host_register(
                0,
                start,
                bytes,
                HostRegisterFlags {
                    mapped: true,
                    portable: false,
                },
            )
        };
        assert!(
            matches!(again, Err(Error::HostRegistration { .. })),
            "{again:?}"
        );
    }
    // SAFETY: allocated above, freed once, unused.
    unsafe { b.managed_free(0, managed.host).unwrap() };
    assert_eq!(b.live_host_memory(0).unwrap(), (0, 0));
    assert_eq!(b.live_allocations(0).unwrap(), 0);
}

/// Stream and event handles are looked up too: one destroyed is refused afterwards.
#[test]
fn destroyed_handles_are_refused() {
    let b = sim(1, 1 << 20);
    let s = b.stream_create(0).unwrap();
    let e = b.event_create(0, false).unwrap();
    // SAFETY: each handle came from this backend and is destroyed once; the later uses are
    // refused by the handle check.
    unsafe {
        b.event_destroy(0, e).unwrap();
        b.stream_destroy(0, s).unwrap();
        assert!(matches!(
            b.stream_destroy(0, s),
            Err(Error::InvalidHandle { .. })
        ));
        assert!(matches!(
            b.stream_synchronize(0, s),
            Err(Error::InvalidHandle { .. })
        ));
        assert!(matches!(
            b.event_destroy(0, e),
            Err(Error::InvalidHandle { .. })
        ));
    }
}

/// Prefetch and advice on managed memory are recorded per allocation (`managed_hints`): advice
/// at once, a prefetch when its stream reaches it, after the work before it.
#[test]
#[cfg_attr(miri, ignore = "closure kernels run on fibers, which Miri cannot run")]
fn managed_hints_are_recorded_in_stream_order() {
    use gpu_mem_core::backend::{Launch, ManagedAdvice, ManagedLocation, StreamHandle};
    use gpu_mem_core::{Kernel, LaunchConfig};
    use gpu_mem_sim::SimKernel;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let b = sim(2, 1 << 20);
    let m = b.managed_alloc(0, 8192).unwrap();
    let base = m.device.unwrap();
    let inner = DevicePtr(base.0 + 4096);
    let s = b.stream_create(0).unwrap();
    // A kernel holding the stream until the test lets it go.
    let gate = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&gate);
    let hold = Kernel::sim("hold", move |_| {
        while !held.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let to = ManagedLocation::Device(1);
    // SAFETY: the kernel touches no memory; the stream is live; the range lies in the managed
    // allocation, freed only after the stream is synchronised.
    unsafe {
        b.launch(0, &hold, &LaunchConfig::new(1, 1), &[], Some(s))
            .unwrap();
        b.managed_prefetch(0, inner, 100, to, s).unwrap();
    }
    b.managed_advise(0, base, 8192, ManagedAdvice::SetReadMostly)
        .unwrap();
    let queued = b.managed_hints(0, inner).unwrap();
    assert!(queued.read_mostly, "advice is recorded at once: {queued:?}");
    assert_eq!(
        (queued.prefetched_to, queued.prefetches),
        (None, 0),
        "a prefetch behind a running kernel already counted"
    );
    gate.store(true, Ordering::Release);
    // SAFETY: the stream is live.
    unsafe { b.stream_synchronize(0, s).unwrap() };
    let done = b.managed_hints(0, base).unwrap();
    assert_eq!((done.prefetched_to, done.prefetches), (Some(to), 1));
    // Refused: memory that is not managed, a stream of the other device, no such location.
    let plain = b.alloc(0, 256).unwrap();
    let other: StreamHandle = b.stream_create(1).unwrap();
    // SAFETY: every call is refused; the streams and memory are live.
    unsafe {
        let host = ManagedLocation::Host;
        assert!(matches!(
            b.managed_prefetch(0, plain, 256, host, s),
            Err(Error::InvalidPointer { .. })
        ));
        assert!(matches!(
            b.managed_prefetch(0, base, 8192, host, other),
            Err(Error::InvalidHandle { .. })
        ));
        assert!(matches!(
            b.managed_prefetch(0, base, 8192, ManagedLocation::Device(2), s),
            Err(Error::NoSuchDevice { .. })
        ));
    }
    assert!(b.managed_hints(0, plain).is_err());
    // SAFETY: nothing is in flight; each is released once.
    unsafe {
        b.stream_destroy(1, other).unwrap();
        b.stream_destroy(0, s).unwrap();
        b.free(0, plain).unwrap();
        b.managed_free(0, m.host).unwrap();
    }
}
