//! Resident device memory: the host blocks of freed allocations back new ones, yet a freed
//! address stays invalid, new allocations still read as zero wherever they are not written,
//! capacity accounting stays exact and the cache never makes the device hold more than its
//! capacity. These also run under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::backend::{DevicePtr, HostAllocFlags};
use gpu_mem_core::backend::{Memory, Streams, Transfer};
use gpu_mem_core::{Backend, Error};
use gpu_mem_sim::{SimBackend, SimConfig};

fn sim(memory: u64) -> SimBackend {
    SimBackend::new(SimConfig::uniform(1, memory))
}

/// Allocates `len` bytes, fills them with `value` and frees them, leaving the block cached.
fn dirty_block(b: &SimBackend, len: usize, value: u8) -> DevicePtr {
    let p = b.alloc(0, len).unwrap();
    // SAFETY: `p` is a live allocation of `len` bytes, freed once.
    unsafe {
        b.memset_d8(0, p, value, len).unwrap();
        b.free(0, p).unwrap();
    }
    p
}

fn read(b: &SimBackend, p: DevicePtr, len: usize) -> Vec<u8> {
    let mut out = vec![0x55u8; len];
    // SAFETY: `out` holds `len` bytes; the simulator checks the device range.
    unsafe { b.copy_dtoh(0, out.as_mut_ptr(), p, len).unwrap() };
    out
}

#[test]
fn a_freed_block_is_reused_but_its_address_stays_invalid() {
    let b = sim(1 << 20);
    let old = dirty_block(&b, 1000, 0xab);
    assert_eq!(b.cached_memory(0).unwrap(), 1024, "rounded to 256 bytes");
    assert_eq!(b.mem_info(0).unwrap().free, 1 << 20, "cached is not used");
    let new = b.alloc(0, 1000).unwrap();
    assert_eq!(b.cached_memory(0).unwrap(), 0, "the block was reused");
    assert_ne!(old, new, "addresses are never reused");
    assert_eq!(b.mem_info(0).unwrap().free, (1 << 20) - 1000);
    assert_eq!(b.live_allocations(0).unwrap(), 1);
    let mut host = [0u8; 8];
    // SAFETY: `host` is live; the stale device address must be refused.
    let stale = unsafe { b.copy_dtoh(0, host.as_mut_ptr(), old, 8) };
    assert!(
        matches!(stale, Err(Error::InvalidPointer { .. })),
        "{stale:?}"
    );
    // SAFETY: as above.
    let stale = unsafe { b.memset_d8(0, DevicePtr(old.0 + 8), 0, 8) };
    assert!(
        matches!(stale, Err(Error::InvalidPointer { .. })),
        "{stale:?}"
    );
    assert_eq!(
        read(&b, new, 1000),
        vec![0; 1000],
        "a reused block reads as zero"
    );
    // SAFETY: `new` came from `alloc` and is freed once.
    unsafe { b.free(0, new).unwrap() };
    assert_eq!(b.live_allocations(0).unwrap(), 0);
    b.trim_memory_cache(0).unwrap();
    assert_eq!(b.cached_memory(0).unwrap(), 0);
}

#[test]
fn partial_writes_to_a_reused_block_leave_the_rest_zero() {
    let b = sim(1 << 20);
    dirty_block(&b, 512, 0xff);
    let p = b.alloc(0, 512).unwrap();
    let src = [7u8; 16];
    // SAFETY: `src` holds 16 bytes; the range lies inside the allocation.
    unsafe {
        b.copy_htod(0, DevicePtr(p.0 + 100), src.as_ptr(), 16)
            .unwrap()
    };
    let out = read(&b, p, 512);
    assert_eq!(&out[..100], &[0; 100][..]);
    assert_eq!(&out[100..116], &src[..]);
    assert!(out[116..].iter().all(|&x| x == 0));

    // A memset of part of a reused block, and a device-to-device copy into one.
    // SAFETY: `p` is freed once.
    unsafe { b.free(0, p).unwrap() };
    dirty_block(&b, 256, 0xee);
    let q = b.alloc(0, 512).unwrap(); // reuses the 512-byte block
    let r = b.alloc(0, 256).unwrap(); // reuses the 256-byte block
    // SAFETY: the ranges lie inside live allocations.
    unsafe {
        b.memset_d8(0, DevicePtr(q.0 + 500), 3, 12).unwrap();
        b.copy_dtod(0, DevicePtr(r.0 + 8), DevicePtr(q.0 + 496), 16)
            .unwrap();
    }
    let out = read(&b, q, 512);
    assert!(out[..500].iter().all(|&x| x == 0));
    assert_eq!(&out[500..], &[3; 12]);
    let out = read(&b, r, 256);
    assert_eq!(&out[..12], &[0; 12]);
    assert_eq!(&out[12..24], &[3; 12]);
    assert!(out[24..].iter().all(|&x| x == 0));
    // SAFETY: freed once each.
    unsafe {
        b.free(0, q).unwrap();
        b.free(0, r).unwrap();
    }
}

#[test]
fn a_full_overwrite_of_a_reused_block_keeps_the_data() {
    let b = sim(1 << 20);
    dirty_block(&b, 4096, 0x11);
    let p = b.alloc(0, 4096).unwrap();
    let src: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    // SAFETY: `src` holds 4096 bytes; the allocation too.
    unsafe { b.copy_htod(0, p, src.as_ptr(), 4096).unwrap() };
    assert_eq!(read(&b, p, 4096), src);
    // SAFETY: freed once.
    unsafe { b.free(0, p).unwrap() };

    // The same through a stream, with a read enqueued behind it.
    dirty_block(&b, 4096, 0x22);
    let p = b.alloc(0, 4096).unwrap();
    let s = b.stream_create(0).unwrap();
    let host = b.host_alloc(0, 4096, HostAllocFlags::default()).unwrap();
    // SAFETY: `src` and the page-locked buffer outlive the work (synchronized below).
    unsafe {
        b.copy_htod_async(0, p, src.as_ptr(), 4096, s).unwrap();
        b.copy_dtoh_async(0, host.host.as_ptr(), p, 4096, s)
            .unwrap();
        b.stream_synchronize(0, s).unwrap();
    }
    // SAFETY: the copy has completed; the buffer holds 4096 initialised bytes.
    let back = unsafe { std::slice::from_raw_parts(host.host.as_ptr(), 4096) };
    assert_eq!(back, &src[..]);
    // SAFETY: everything is freed once, after its work.
    unsafe {
        b.free(0, p).unwrap();
        b.host_free(0, host.host).unwrap();
        b.stream_destroy(0, s).unwrap();
    }
}

#[test]
fn the_cache_never_takes_capacity_from_allocations() {
    let capacity = 64 << 10;
    let b = sim(capacity);
    dirty_block(&b, 40 << 10, 1);
    assert_eq!(b.cached_memory(0).unwrap(), 40 << 10);
    // A different size cannot reuse the cached block, and both together exceed the capacity:
    // the cached block is given back and the allocation succeeds.
    let p = b.alloc(0, 60 << 10).unwrap();
    assert_eq!(b.cached_memory(0).unwrap(), 0);
    assert_eq!(read(&b, p, 60 << 10), vec![0; 60 << 10]);
    let err = b.alloc(0, 8 << 10).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested: 8192,
                free: 4096,
                total: 65536,
                ..
            }
        ),
        "{err}"
    );
    // SAFETY: freed once.
    unsafe { b.free(0, p).unwrap() };
    assert_eq!(b.mem_info(0).unwrap().free, capacity);
    assert!(b.cached_memory(0).unwrap() <= capacity);
    // Many small blocks: live plus cached stays within the capacity.
    let ptrs: Vec<DevicePtr> = (0..16).map(|_| b.alloc(0, 4 << 10).unwrap()).collect();
    assert!(matches!(b.alloc(0, 1), Err(Error::OutOfMemory { .. })));
    for p in &ptrs[..8] {
        // SAFETY: freed once each.
        unsafe { b.free(0, *p).unwrap() };
    }
    let big = b.alloc(0, 32 << 10).unwrap();
    assert!(
        b.cached_memory(0).unwrap() + b.mem_info(0).unwrap().total - b.mem_info(0).unwrap().free
            <= capacity
    );
    // SAFETY: freed once each.
    unsafe {
        b.free(0, big).unwrap();
        for p in &ptrs[8..] {
            b.free(0, *p).unwrap();
        }
    }
    assert_eq!(b.live_allocations(0).unwrap(), 0);
    assert_eq!(b.mem_info(0).unwrap().free, capacity);
}
