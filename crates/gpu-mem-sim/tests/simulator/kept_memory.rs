//! Memory that enqueued work keeps alive after its arrays were dropped goes once that work is
//! known complete: at a device-wide synchronization, and, when an allocation finds no room, after
//! waiting for the work (as Numba frees its pending deallocations before failing). These also
//! run under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::{Device, Error, Order};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::sync::Arc;

/// Above the size the simulator copies at once (64 KiB), so the copies are queued.
const CHUNK: usize = if cfg!(miri) { 80 << 10 } else { 300 << 10 };

fn device(capacity: u64) -> Device {
    Device::new(
        Arc::new(SimBackend::new(SimConfig::uniform(1, capacity))),
        0,
    )
    .unwrap()
}

fn used(dev: &Device) -> u64 {
    let info = dev.mem_info().unwrap();
    info.total - info.free
}

#[test]
fn memory_of_dropped_arrays_goes_at_a_device_synchronize() {
    let dev = device(16 << 20);
    let stream = dev.stream().unwrap();
    let pinned = dev.pinned_array::<u8>(&[CHUNK]).unwrap();
    for _ in 0..3 {
        drop(stream.to_device(&pinned).unwrap());
    }
    dev.synchronize().unwrap();
    assert_eq!(used(&dev), 0, "the dropped arrays' memory is still held");
}

#[test]
fn an_allocation_that_finds_no_room_waits_for_work_keeping_memory() {
    // Room for three chunks: the fourth copy's array needs the memory of one dropped before.
    let dev = device(3 * CHUNK as u64 + 4096);
    let stream = dev.stream().unwrap();
    let pinned = dev.pinned_array::<u8>(&[CHUNK]).unwrap();
    for round in 0..8 {
        let copied = stream.to_device(&pinned);
        assert!(copied.is_ok(), "round {round}: {:?}", copied.err());
        drop(copied);
    }
    // What does not fit even then is still refused.
    let too_big = dev.device_array::<u8>(&[4 * CHUNK], Order::C);
    assert!(
        matches!(too_big, Err(Error::OutOfMemory { .. })),
        "{too_big:?}"
    );
    stream.synchronize().unwrap();
    assert_eq!(used(&dev), 0);
}

/// Inside another library's work being enqueued on a stream (whose submissions are held
/// meanwhile), device-wide calls do not wait for that stream's bookkeeping: a device
/// synchronization, and an allocation that finds no room.
#[test]
fn device_calls_inside_external_work_do_not_wait_for_themselves() {
    let dev = device(2 * CHUNK as u64);
    let stream = dev.stream().unwrap();
    let pinned = dev.pinned_array::<u8>(&[CHUNK]).unwrap();
    drop(stream.to_device(&pinned).unwrap());
    let (done, finished) = std::sync::mpsc::channel();
    let inner = dev.clone();
    std::thread::spawn(move || {
        // SAFETY: the closure enqueues no work on the handle.
        let result = unsafe {
            stream.enqueue_external(Vec::new(), |_| {
                inner.synchronize()?;
                let too_big = inner.device_array::<u8>(&[2 * CHUNK], Order::C);
                assert!(matches!(too_big, Err(Error::OutOfMemory { .. })));
                Ok(())
            })
        };
        let _ = done.send(result.is_ok());
        drop(pinned);
    });
    let finished = finished.recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(finished, Ok(true), "the external work hung or failed");
}
