//! A user's allocator under a device (`Device::set_allocator`, Numba's External Memory
//! Management plugins): a bump allocator over one block of raw device memory serves the
//! device's arrays, which work as any others, are counted in the statistics, and are given back
//! to it; its errors reach the caller.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::backend::DevicePtr;
use gpu_mem::prelude::*;
use gpu_mem::usage::MemoryKind;
use gpu_mem::{DeviceAllocator, Error, RawDeviceMemory};
use std::sync::{Arc, Mutex};

/// Hands out 256-byte-aligned pieces of one block, front to back, and counts what it gets back.
#[derive(Debug)]
struct Bump {
    block: RawDeviceMemory,
    next: Mutex<usize>,
    freed: Mutex<Vec<(u64, usize)>>,
}

// SAFETY: each piece lies inside the block (device memory of the device it was asked for, kept
// alive by `self`), starts 256-byte aligned (the block does, and offsets are multiples of 256),
// and no two pieces overlap (the offset only grows).
unsafe impl DeviceAllocator for Bump {
    fn name(&self) -> &str {
        "bump"
    }

    fn allocate(&self, ordinal: usize, bytes: usize) -> gpu_mem::Result<DevicePtr> {
        assert_eq!(ordinal, self.block.ordinal());
        let mut next = self.next.lock().unwrap();
        let start = *next;
        let end = start + bytes.div_ceil(256) * 256;
        if end > self.block.bytes() {
            return Err(Error::OutOfMemory {
                backend: gpu_mem::BackendKind::Sim,
                device: ordinal,
                requested: bytes as u64,
                free: (self.block.bytes() - start) as u64,
                total: self.block.bytes() as u64,
                report: None,
            });
        }
        *next = end;
        Ok(DevicePtr(self.block.ptr().0 + start as u64))
    }

    unsafe fn free(&self, _: usize, ptr: DevicePtr, bytes: usize) -> gpu_mem::Result<()> {
        self.freed.lock().unwrap().push((ptr.0, bytes));
        Ok(())
    }
}

#[test]
fn arrays_come_from_the_devices_allocator_and_go_back_to_it() {
    let rt = Runtime::open_kind(gpu_mem::BackendKind::Sim).unwrap();
    let dev = rt.device(0).unwrap();
    let bump = Arc::new(Bump {
        block: RawDeviceMemory::new(&dev, 1 << 20).unwrap(),
        next: Mutex::new(0),
        freed: Mutex::new(Vec::new()),
    });
    let base = bump.block.ptr().0;
    dev.set_allocator(bump.clone());
    assert_eq!(dev.allocator_name().as_deref(), Some("bump"));
    // Another handle of the device uses it too.
    let other = rt.device(0).unwrap();
    let host = ndarray::Array1::from_iter((0..1000).map(|i| i as f32));
    let a = other.to_device(&host).unwrap();
    let b = dev.device_array::<u8>(&[10], Order::C).unwrap();
    assert_eq!(a.device_ptr().0, base);
    assert_eq!(b.device_ptr().0, base + 4096);
    assert_eq!(a.copy_to_host().unwrap(), host.into_dyn());
    let stats = dev.memory_stats().kind(MemoryKind::Device);
    assert_eq!((stats.current_count, stats.current_bytes), (2, 4010));
    drop(a);
    assert_eq!(*bump.freed.lock().unwrap(), [(base, 4000)]);
    // Out of room in the allocator is the error the caller gets, explained.
    let error = dev.device_array::<u8>(&[2 << 20], Order::C).unwrap_err();
    assert!(
        matches!(
            error,
            Error::OutOfMemory {
                report: Some(_),
                ..
            }
        ),
        "{error}"
    );
    dev.clear_allocator();
    let c = dev.device_array::<u8>(&[10], Order::C).unwrap();
    let inside = (base..base + (1 << 20)).contains(&c.device_ptr().0);
    assert!(
        !inside,
        "after clear_allocator arrays come from the backend"
    );
    drop((b, c));
    assert_eq!(bump.freed.lock().unwrap().len(), 2);
}

/// Hands out an address that is not 256-byte aligned.
#[derive(Debug)]
struct Crooked(RawDeviceMemory);

// SAFETY: the one address it returns lies inside its block; it is refused by the core anyway.
unsafe impl DeviceAllocator for Crooked {
    fn name(&self) -> &str {
        "crooked"
    }

    fn allocate(&self, _: usize, _: usize) -> gpu_mem::Result<DevicePtr> {
        Ok(DevicePtr(self.0.ptr().0 + 8))
    }

    unsafe fn free(&self, _: usize, _: DevicePtr, _: usize) -> gpu_mem::Result<()> {
        Ok(())
    }
}

#[test]
fn a_misaligned_address_is_refused() {
    let rt = Runtime::open_kind(gpu_mem::BackendKind::Sim).unwrap();
    let dev = rt.device(0).unwrap();
    dev.set_allocator(Arc::new(Crooked(RawDeviceMemory::new(&dev, 4096).unwrap())));
    let error = dev.device_array::<u8>(&[16], Order::C).unwrap_err();
    assert!(matches!(error, Error::InvalidPointer { .. }), "{error}");
}
