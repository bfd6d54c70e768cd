//! A stream whose latest operation the simulator completed while it was enqueued (a short copy
//! on an idle stream) is synchronized without asking the backend. These check that everything
//! else put on the stream still makes `synchronize` wait or report: an event wait, an earlier
//! failure, work put on the handle after it was handed out; and that the data is right.
//! The tests without kernels also run under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::backend::{Streams, Transfer};
use gpu_mem_core::{Backend, Device, Order, Stream};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::sync::Arc;

/// Big enough that a fill of it goes to the stream's worker (the simulator runs fills up to
/// 64 KiB at once) and lasts long (tens of milliseconds) against a synchronize that skips it,
/// which returns in microseconds: even a test thread preempted between the synchronize and the
/// check rarely misses that.
const BIG: usize = if cfg!(miri) { 128 << 10 } else { 256 << 20 };

fn backend() -> Arc<SimBackend> {
    Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 30)))
}

#[test]
fn completed_copies_round_trip() {
    let dev = Device::new(backend(), 0).unwrap();
    let stream = dev.stream().unwrap();
    let mut d = dev.device_array::<u32>(&[256], Order::C).unwrap();
    let mut pinned = dev.pinned_array::<u32>(&[256]).unwrap();
    for round in 0..4u32 {
        pinned
            .view_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as u32 * 3 + round);
        stream.copy_from_host(&mut d, &pinned).unwrap();
        pinned.view_mut().unwrap().fill(0);
        stream.copy_to_host(&d, &mut pinned).unwrap();
        stream.synchronize().unwrap();
        let view = pinned.view().unwrap();
        assert!(
            view.iter()
                .enumerate()
                .all(|(i, v)| *v == i as u32 * 3 + round),
            "round {round}"
        );
    }
}

/// Makes a new stream of `dev` wait for an event behind a long fill on another stream, after
/// `before` ran on the waiting stream; checks that synchronizing it waits for the event.
fn check_event_wait(dev: &Device, before: impl FnOnce(&Stream)) {
    let (busy, waiting) = (dev.stream().unwrap(), dev.stream().unwrap());
    let mut big = dev.device_array::<u8>(&[BIG], Order::C).unwrap();
    busy.memset(&mut big, 7).unwrap();
    let done = busy.record_event_with(false).unwrap();
    before(&waiting);
    waiting.wait_event(&done).unwrap();
    waiting.synchronize().unwrap();
    assert!(
        done.query().unwrap(),
        "synchronize returned before the event the stream waits for"
    );
    busy.synchronize().unwrap();
}

#[test]
fn synchronize_waits_for_an_event_wait_after_a_completed_copy() {
    let dev = Device::new(backend(), 0).unwrap();
    let mut small = dev.device_array::<u8>(&[64], Order::C).unwrap();
    let pinned = dev.pinned_array::<u8>(&[64]).unwrap();
    // Completed at once: the waiting stream is idle.
    check_event_wait(&dev, |waiting| {
        waiting.copy_from_host(&mut small, &pinned).unwrap()
    });
}

#[test]
fn a_new_stream_waits_for_an_event_wait_too() {
    let dev = Device::new(backend(), 0).unwrap();
    // Nothing is submitted on the waiting stream: the wait is its only work.
    check_event_wait(&dev, |_| {});
}

#[test]
fn synchronize_waits_for_work_put_on_a_handed_out_handle() {
    let sim = backend();
    let dev = Device::new(Arc::clone(&sim) as Arc<dyn Backend>, 0).unwrap();
    let stream = dev.stream().unwrap();
    let mut small = dev.device_array::<u8>(&[64], Order::C).unwrap();
    let pinned = dev.pinned_array::<u8>(&[64]).unwrap();
    stream.copy_from_host(&mut small, &pinned).unwrap();
    let handle = stream.handle();
    let big = dev.device_array::<u8>(&[BIG], Order::C).unwrap();
    // SAFETY: the allocation outlives the fill (the stream is synchronized before it drops).
    unsafe { sim.memset_d8_async(0, big.device_ptr(), 3, BIG, handle) }.unwrap();
    stream.synchronize().unwrap();
    // SAFETY: the handle is live (the stream is).
    let idle = unsafe { sim.stream_query(0, handle) }.unwrap();
    assert!(idle, "synchronize returned before work put on the handle");
    drop(big);
}

#[cfg(not(miri))]
#[test]
fn a_failure_before_a_completed_copy_is_reported() {
    use gpu_mem_core::{Kernel, LaunchConfig};
    use gpu_mem_sim::SimKernel;
    let dev = Device::new(backend(), 0).unwrap();
    let stream = dev.stream().unwrap();
    let mut a = dev.device_array::<f32>(&[4], Order::C).unwrap();
    let oob = Kernel::sim("oob", |t| t.array::<f32>(0).set([t.grid1() + 4], 1.0));
    // SAFETY: the simulator catches the out-of-bounds write before it happens.
    unsafe { stream.launch(&oob, LaunchConfig::new(1, 1), &mut [&mut a]) }.unwrap();
    // A query reports the failure once the work is done (and leaves it to the synchronization).
    let queried = loop {
        match stream.query() {
            Ok(false) => std::thread::yield_now(),
            other => break other,
        }
    };
    assert!(queried.is_err(), "the query did not report the failure");
    // The stream is idle: the copy runs at once, after the failure was kept.
    let mut small = dev.device_array::<u8>(&[64], Order::C).unwrap();
    let pinned = dev.pinned_array::<u8>(&[64]).unwrap();
    stream.copy_from_host(&mut small, &pinned).unwrap();
    assert!(
        stream.synchronize().is_err(),
        "the kernel's failure was not reported"
    );
}
