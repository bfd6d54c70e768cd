//! Large copies between device memory and page-locked, mapped or registered host memory go
//! through the simulated copy engine (in chunks shared between threads, see the crate's `bytes`
//! and `assist` modules); copies to and from pageable memory are CPU copies. Whichever moves them,
//! every byte arrives, synchronously and on a stream, in both directions and device to device.
//! (Tens of MiB per copy: not run under Miri.)

#![cfg(not(miri))]

use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostRegisterFlags};
use gpu_mem_core::backend::{Memory, Streams, Transfer};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::ptr::NonNull;

/// Past the size from which the copy engine streams, with a ragged end.
const LEN: usize = (16 << 20) + 4096 * 3 + 77;

fn pattern(seed: u8) -> impl Iterator<Item = u8> {
    (0..LEN).map(move |i| ((i % 253) as u8) ^ seed)
}

/// Copies `host` to `dev` and back into `back`, synchronously (`stream` None) or on `stream`;
/// checks what came back and what the device holds (read back through a pageable buffer).
fn round_trip(
    b: &SimBackend,
    dev: DevicePtr,
    host: *mut u8,
    back: *mut u8,
    seed: u8,
    on_stream: bool,
) {
    let expected: Vec<u8> = pattern(seed).collect();
    // SAFETY: `host` and `back` hold `LEN` bytes; `dev` is a live allocation of `LEN` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(expected.as_ptr(), host, LEN);
        std::ptr::write_bytes(back, 0, LEN);
        if on_stream {
            let stream = b.stream_create(0).unwrap();
            b.copy_htod_async(0, dev, host, LEN, stream).unwrap();
            b.copy_dtoh_async(0, back, dev, LEN, stream).unwrap();
            b.stream_synchronize(0, stream).unwrap();
            b.stream_destroy(0, stream).unwrap();
        } else {
            b.copy_htod(0, dev, host, LEN).unwrap();
            b.copy_dtoh(0, back, dev, LEN).unwrap();
        }
    }
    // SAFETY: `back` holds `LEN` initialised bytes.
    let came_back = unsafe { std::slice::from_raw_parts(back, LEN) };
    assert!(
        came_back == &expected[..],
        "seed {seed}, stream {on_stream}"
    );
    let mut pageable = vec![0u8; LEN];
    // SAFETY: `pageable` holds `LEN` bytes.
    unsafe { b.copy_dtoh(0, pageable.as_mut_ptr(), dev, LEN).unwrap() };
    assert!(pageable == expected, "device contents, seed {seed}");
}

#[test]
fn large_copies_arrive_whole_through_every_kind_of_host_memory() {
    let b = SimBackend::new(SimConfig::uniform(1, 256 << 20));
    let dev = b.alloc(0, LEN).unwrap();
    let pinned = b.host_alloc(0, LEN, HostAllocFlags::default()).unwrap();
    let mapped = b
        .host_alloc(
            0,
            LEN,
            HostAllocFlags {
                mapped: true,
                ..HostAllocFlags::default()
            },
        )
        .unwrap();
    let mut registered = vec![0u8; LEN + 4096];
    let registered_ptr = NonNull::new(registered.as_mut_ptr()).unwrap();
    // SAFETY: `registered` outlives the registration (unregistered below).
    unsafe {
        b.host_register(0, registered_ptr, LEN, HostRegisterFlags::default())
            .unwrap()
    };
    let mut pageable = vec![0u8; LEN + 4096];
    let hosts = [
        ("pinned", pinned.host.as_ptr()),
        ("mapped", mapped.host.as_ptr()),
        ("registered", registered_ptr.as_ptr()),
        ("pageable", pageable.as_mut_ptr()),
    ];
    let mut seed = 1;
    for (from_name, from) in hosts {
        for (to_name, to) in hosts {
            if from == to {
                continue;
            }
            for on_stream in [false, true] {
                eprintln!("{from_name} -> device -> {to_name}, stream {on_stream}");
                round_trip(&b, dev, from, to, seed, on_stream);
                seed = seed.wrapping_add(1);
            }
        }
    }
    // Device to device, synchronously and on a stream.
    let other = b.alloc(0, LEN).unwrap();
    let expected: Vec<u8> = pattern(seed).collect();
    let mut out = vec![0u8; LEN];
    // SAFETY: every range holds `LEN` bytes; everything is freed once, after its last use.
    unsafe {
        b.copy_htod(0, dev, expected.as_ptr(), LEN).unwrap();
        b.copy_dtod(0, other, dev, LEN).unwrap();
        b.copy_dtoh(0, out.as_mut_ptr(), other, LEN).unwrap();
        assert!(out == expected, "device to device");
        b.memset_d8(0, other, 0, LEN).unwrap();
        let stream = b.stream_create(0).unwrap();
        b.copy_dtod_async(0, other, dev, LEN, stream).unwrap();
        b.stream_synchronize(0, stream).unwrap();
        b.stream_destroy(0, stream).unwrap();
        b.copy_dtoh(0, out.as_mut_ptr(), other, LEN).unwrap();
        assert!(out == expected, "device to device on a stream");
        b.host_unregister(0, registered_ptr).unwrap();
        b.host_free(0, pinned.host).unwrap();
        b.host_free(0, mapped.host).unwrap();
        b.free(0, other).unwrap();
        b.free(0, dev).unwrap();
    }
}

/// Page-locked stream copies of a few hundred KiB to a few MiB are shared between the thread
/// running the job and the one waiting for the stream (the worker, or the synchronizing host
/// thread): every byte arrives whichever takes which chunks, whether the host synchronizes at
/// once (it runs the jobs, the worker helps) or after queueing several (the worker runs them,
/// the host helps), and device to device as well.
#[test]
fn page_locked_stream_copies_shared_between_threads_are_exact() {
    let b = SimBackend::new(SimConfig::uniform(1, 64 << 20));
    let stream = b.stream_create(0).unwrap();
    for len in [256 << 10, (1 << 20) + 77, (4 << 20) + 4096 * 3 + 5] {
        let dev = b.alloc(0, len).unwrap();
        let other = b.alloc(0, len).unwrap();
        let host = b.host_alloc(0, len, HostAllocFlags::default()).unwrap();
        let back = b.host_alloc(0, len, HostAllocFlags::default()).unwrap();
        for round in 0..8u8 {
            let expected: Vec<u8> = (0..len).map(|i| ((i % 251) as u8) ^ round).collect();
            // SAFETY: every range holds `len` bytes and stays alive and untouched by the host
            // until the stream is synchronized.
            unsafe {
                std::ptr::copy_nonoverlapping(expected.as_ptr(), host.host.as_ptr(), len);
                std::ptr::write_bytes(back.host.as_ptr(), 0, len);
                if round % 2 == 0 {
                    // Synchronize after each copy: this thread runs it.
                    b.copy_htod_async(0, dev, host.host.as_ptr(), len, stream)
                        .unwrap();
                    b.stream_synchronize(0, stream).unwrap();
                    b.copy_dtoh_async(0, back.host.as_ptr(), dev, len, stream)
                        .unwrap();
                    b.stream_synchronize(0, stream).unwrap();
                } else {
                    // Queue all three first: the worker runs them while this thread waits.
                    b.copy_htod_async(0, dev, host.host.as_ptr(), len, stream)
                        .unwrap();
                    b.copy_dtod_async(0, other, dev, len, stream).unwrap();
                    b.copy_dtoh_async(0, back.host.as_ptr(), other, len, stream)
                        .unwrap();
                    b.stream_synchronize(0, stream).unwrap();
                }
            }
            // SAFETY: `back` holds `len` bytes, written by the completed copies.
            let came_back = unsafe { std::slice::from_raw_parts(back.host.as_ptr(), len) };
            assert!(came_back == &expected[..], "{len} bytes, round {round}");
        }
        // SAFETY: nothing in flight uses them any more.
        unsafe {
            b.host_free(0, host.host).unwrap();
            b.host_free(0, back.host).unwrap();
            b.free(0, dev).unwrap();
            b.free(0, other).unwrap();
        }
    }
    // SAFETY: the stream is idle.
    unsafe { b.stream_destroy(0, stream).unwrap() };
}
