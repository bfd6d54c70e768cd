//! The simulator through the raw `Backend` trait: capacity, address checks, CUDA's host
//! registration rules, stream order, events, several devices and leak accounting. These also run
//! under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostRegisterFlags};
use gpu_mem_core::{Backend, Error};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::ptr::NonNull;

fn sim(devices: usize, memory: u64) -> SimBackend {
    SimBackend::new(SimConfig::uniform(devices, memory))
}

#[test]
fn capacity_and_out_of_memory() {
    let b = sim(1, 4096);
    let p = b.alloc(0, 3000).unwrap();
    let err = b.alloc(0, 2000).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested: 2000,
                free: 1096,
                total: 4096,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(b.mem_info(0).unwrap().free, 1096);
    // SAFETY: `p` came from `alloc` and is freed once.
    unsafe { b.free(0, p).unwrap() };
    assert_eq!(b.mem_info(0).unwrap().free, 4096);
    assert_eq!(b.live_allocations(0).unwrap(), 0);
    assert!(matches!(b.alloc(0, 0), Err(Error::InvalidArgument { .. })));
}

#[test]
fn device_addresses_are_checked() {
    let b = sim(1, 1 << 20);
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

#[test]
fn copies_round_trip_and_memset() {
    let b = sim(1, 1 << 20);
    let p = b.alloc(0, 16).unwrap();
    let q = b.alloc(0, 16).unwrap();
    let src: Vec<u8> = (0..16).collect();
    let mut out = [0u8; 16];
    // SAFETY: all host buffers are live and sized; device ranges lie in live allocations.
    unsafe {
        b.copy_htod(0, p, src.as_ptr(), 16).unwrap();
        b.copy_dtod(0, q, p, 16).unwrap();
        b.memset_d8(0, DevicePtr(q.0 + 4), 0xee, 4).unwrap();
        b.copy_dtoh(0, out.as_mut_ptr(), q, 16).unwrap();
        b.free(0, p).unwrap();
        b.free(0, q).unwrap();
    }
    assert_eq!(&out[..4], &[0, 1, 2, 3]);
    assert_eq!(&out[4..8], &[0xee; 4]);
    assert_eq!(&out[8..], &src[8..]);
}

#[test]
fn host_registration_follows_cuda_rules() {
    let b = sim(1, 1 << 20);
    let mut buffer = vec![0u8; 256];
    let base = NonNull::new(buffer.as_mut_ptr()).unwrap();
    // SAFETY: `buffer` stays alive until after the unregistration below.
    unsafe {
        let mapped = b
            .host_register(
                0,
                base,
                256,
                HostRegisterFlags {
                    mapped: true,
                    portable: false,
                },
            )
            .unwrap();
        let inner = NonNull::new(base.as_ptr().add(16)).unwrap();
        let again = b.host_register(0, inner, 16, HostRegisterFlags::default());
        assert!(
            matches!(again, Err(Error::HostRegistration { .. })),
            "overlap refused: {again:?}"
        );
        // The mapped address reaches the host memory.
        let device = mapped.unwrap();
        b.memset_d8(0, device, 7, 256).unwrap();
        assert!(matches!(
            b.host_unregister(0, inner),
            Err(Error::HostRegistration { .. })
        ));
        b.host_unregister(0, base).unwrap();
    }
    assert!(buffer.iter().all(|v| *v == 7));
    assert_eq!(b.live_host_memory(0).unwrap(), (0, 0));
}

/// Page-locked and managed memory is locked already: registering it is refused (as CUDA's
/// ALREADY_REGISTERED), so the page-locked limit is not spent twice and the memory's own
/// window is not replaced (which left managed memory impossible to free).
#[test]
fn memory_locked_already_cannot_be_registered() {
    let b = sim(1, 1 << 20);
    let pinned = b.host_alloc(0, 8192, HostAllocFlags::default()).unwrap();
    let managed = b.managed_alloc(0, 8192).unwrap();
    for (what, host) in [("pinned", pinned.host), ("managed", managed.host)] {
        // SAFETY: both stay allocated; a refused registration changes nothing.
        let inside = unsafe { NonNull::new(host.as_ptr().add(4096)).unwrap() };
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
                "{what}: {again:?}"
            );
        }
    }
    // SAFETY: allocated above, freed once, unused.
    unsafe {
        b.managed_free(0, managed.host).unwrap();
        b.host_free(0, pinned.host).unwrap();
    }
    assert_eq!(b.live_host_memory(0).unwrap(), (0, 0));
    assert_eq!(b.live_allocations(0).unwrap(), 0);
}

#[test]
fn page_locked_allocations_are_tracked() {
    let b = sim(1, 1 << 20);
    let alloc = b
        .host_alloc(
            0,
            100,
            HostAllocFlags {
                mapped: true,
                ..HostAllocFlags::default()
            },
        )
        .unwrap();
    assert_eq!(alloc.host.as_ptr() as usize % 4096, 0, "page aligned");
    assert!(alloc.device.is_some());
    assert_eq!(b.live_host_memory(0).unwrap(), (1, 0));
    // SAFETY: `alloc.host` came from `host_alloc`; the second free must be refused.
    unsafe {
        b.host_free(0, alloc.host).unwrap();
        assert!(matches!(
            b.host_free(0, alloc.host),
            Err(Error::InvalidPointer { .. })
        ));
    }
    assert_eq!(b.live_host_memory(0).unwrap(), (0, 0));
}

#[test]
fn streams_run_in_order_and_events_complete() {
    let b = sim(1, 1 << 20);
    let s = b.stream_create(0).unwrap();
    let e0 = b.event_create(0, true).unwrap();
    let e1 = b.event_create(0, true).unwrap();
    let p = b.alloc(0, 8).unwrap();
    let host = b.host_alloc(0, 8, HostAllocFlags::default()).unwrap();
    // SAFETY: the handles came from this backend on device 0 and are live.
    unsafe { b.event_record(0, e0, s) }.unwrap();
    // SAFETY: the page-locked buffer and the allocation outlive the stream work (synchronized
    // below before they are freed).
    unsafe {
        for value in 1..=5u8 {
            b.memset_d8_async(0, p, value, 8, s).unwrap();
        }
        b.copy_dtoh_async(0, host.host.as_ptr(), p, 8, s).unwrap();
    }
    // SAFETY: the handles came from this backend on device 0 and are live.
    unsafe { b.event_record(0, e1, s) }.unwrap();
    // SAFETY: the handles came from this backend on device 0 and are live.
    unsafe { b.stream_synchronize(0, s) }.unwrap();
    // SAFETY: the handles came from this backend on device 0 and are live.
    assert!(unsafe { b.stream_query(0, s) }.unwrap());
    // SAFETY: the handles came from this backend on device 0 and are live.
    assert!(unsafe { b.event_query(0, e1) }.unwrap());
    // SAFETY: the copy has completed; the buffer holds 8 initialised bytes.
    let bytes = unsafe { std::slice::from_raw_parts(host.host.as_ptr(), 8) };
    assert_eq!(bytes, &[5; 8], "last memset wins");
    // SAFETY: the handles came from this backend on device 0 and are live.
    assert!(unsafe { b.event_elapsed_ms(0, e0, e1) }.unwrap() >= 0.0);
    // SAFETY: every handle came from this backend and is destroyed once, after its work.
    unsafe {
        b.free(0, p).unwrap();
        b.host_free(0, host.host).unwrap();
        b.event_destroy(0, e0).unwrap();
        b.event_destroy(0, e1).unwrap();
        b.stream_destroy(0, s).unwrap();
        assert!(matches!(
            b.stream_destroy(0, s),
            Err(Error::InvalidHandle { .. })
        ));
    }
}

#[test]
fn devices_are_separate() {
    let b = sim(2, 1 << 16);
    assert_eq!(b.device_count(), 2);
    let p0 = b.alloc(0, 1 << 15).unwrap();
    assert_eq!(b.mem_info(1).unwrap().free, 1 << 16, "device 1 unaffected");
    let mut out = [0u8; 4];
    // SAFETY: a pointer of device 0 used on device 1 is refused by the address check.
    let wrong_device = unsafe { b.copy_dtoh(1, out.as_mut_ptr(), p0, 4) };
    assert!(matches!(wrong_device, Err(Error::InvalidPointer { .. })));
    assert!(matches!(
        b.alloc(2, 4),
        Err(Error::NoSuchDevice {
            device: 2,
            count: 2,
            ..
        })
    ));
    // SAFETY: `p0` came from `alloc` on device 0.
    unsafe { b.free(0, p0).unwrap() };
}
