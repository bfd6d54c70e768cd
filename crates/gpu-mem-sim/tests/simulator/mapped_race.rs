//! Regression test for issue 9, item 1: a stream copy into mapped memory racing with a
//! synchronous memset of a device view of the same memory. The simulator serialises every access
//! to a mapped window with the window's lock; under Miri a missing lock is a reported data race.

use gpu_mem_core::{Device, MapFlags};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::sync::{Arc, Barrier};

/// Both sides start together after a barrier, so nothing orders the memset's fill before or after
/// the stream's write except the simulator's own locking (a barrier only orders what comes before
/// it). Several rounds give both interleavings a chance.
const ROUNDS: usize = 4;

fn device() -> Device {
    let backend = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20)));
    Device::new(backend, 0).unwrap()
}

#[test]
fn stream_copy_into_mapped_memory_and_memset_of_its_view_do_not_race() {
    let dev = device();
    let src = dev.to_device(&ndarray::Array1::from_elem(64, 7u8)).unwrap();
    let stream = dev.stream().unwrap();
    for _ in 0..ROUNDS {
        let mut mapped = dev.mapped_array::<u8>(&[64], MapFlags::default()).unwrap();
        let mut view = mapped.device_view();
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            let setter = s.spawn(|| {
                start.wait();
                view.memset(1)
            });
            let copier = s.spawn(|| {
                start.wait();
                stream.copy_to_host(&src, &mut mapped)
            });
            setter.join().unwrap().unwrap();
            copier.join().unwrap().unwrap();
        });
        stream.synchronize().unwrap();
        let data = mapped.read().unwrap();
        // Either order is allowed; a torn mix of both is not.
        let first = data[0];
        assert!(first == 7 || first == 1, "{first}");
        assert!(data.iter().all(|&b| b == first), "{data:?}");
    }
}

#[test]
fn registered_mapped_memory_is_locked_too() {
    let dev = device();
    let src = dev.to_device(&ndarray::Array1::from_elem(64, 7u8)).unwrap();
    let stream = dev.stream().unwrap();
    for _ in 0..ROUNDS {
        let mut registered = dev.mapped(ndarray::Array1::<u8>::zeros(64)).unwrap();
        let mut view = registered.device_view().unwrap();
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            let setter = s.spawn(|| {
                start.wait();
                view.memset(1)
            });
            let copier = s.spawn(|| {
                start.wait();
                stream.copy_to_host(&src, &mut registered)
            });
            setter.join().unwrap().unwrap();
            copier.join().unwrap().unwrap();
        });
        stream.synchronize().unwrap();
        drop(view);
        let data = registered.view().unwrap().to_owned();
        let first = data[0];
        assert!(first == 7 || first == 1, "{first}");
        assert!(data.iter().all(|&b| b == first), "{data:?}");
    }
}
