//! Stream hand-offs: the worker and synchronizing host threads share a stream's queue (a thread
//! that synchronizes runs jobs the worker has not started), so these check order, progress
//! without a synchronize, and many threads enqueueing and synchronizing one stream at once.
//! These also run under Miri (`cargo +nightly miri test -p gpu-mem-sim`).

use gpu_mem_core::Backend;
use gpu_mem_core::backend::{DevicePtr, HostAllocFlags};
use gpu_mem_core::backend::{Events, Memory, Streams, Transfer};
use gpu_mem_sim::{SimBackend, SimConfig};
use std::time::{Duration, Instant};

fn sim() -> SimBackend {
    SimBackend::new(SimConfig::uniform(1, 1 << 20))
}

const ROUNDS: usize = if cfg!(miri) { 8 } else { 2_000 };

#[test]
fn work_runs_without_a_synchronize() {
    let b = sim();
    let s = b.stream_create(0).unwrap();
    let p = b.alloc(0, 64).unwrap();
    // SAFETY: the allocation outlives the work (the stream is synchronized before the free).
    unsafe { b.memset_d8_async(0, p, 9, 64, s).unwrap() };
    let start = Instant::now();
    // SAFETY: the stream is live.
    while !unsafe { b.stream_query(0, s) }.unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never ran the job"
        );
        std::thread::yield_now();
    }
    let mut out = [0u8; 64];
    // SAFETY: `out` holds 64 bytes; the range is live; everything is freed once.
    unsafe {
        b.copy_dtoh(0, out.as_mut_ptr(), p, 64).unwrap();
        b.stream_synchronize(0, s).unwrap();
        b.free(0, p).unwrap();
        b.stream_destroy(0, s).unwrap();
    }
    assert_eq!(out, [9; 64]);
}

#[test]
fn a_synchronize_right_after_enqueue_keeps_the_order() {
    let b = sim();
    let s = b.stream_create(0).unwrap();
    let p = b.alloc(0, 256).unwrap();
    let host = b.host_alloc(0, 256, HostAllocFlags::default()).unwrap();
    for round in 0..ROUNDS {
        let value = (round % 251) as u8;
        // SAFETY: the page-locked buffer and the allocation outlive the work (synchronized
        // before they are read or freed).
        unsafe {
            b.memset_d8_async(0, p, value, 256, s).unwrap();
            b.memset_d8_async(0, DevicePtr(p.0 + 128), value.wrapping_add(1), 128, s)
                .unwrap();
            b.copy_dtoh_async(0, host.host.as_ptr(), p, 256, s).unwrap();
            b.stream_synchronize(0, s).unwrap();
        }
        // SAFETY: the copy has completed; the buffer holds 256 initialised bytes.
        let bytes = unsafe { std::slice::from_raw_parts(host.host.as_ptr(), 256) };
        assert!(bytes[..128].iter().all(|&x| x == value), "round {round}");
        assert!(bytes[128..].iter().all(|&x| x == value.wrapping_add(1)));
    }
    // SAFETY: everything is freed once, after its work.
    unsafe {
        b.free(0, p).unwrap();
        b.host_free(0, host.host).unwrap();
        b.stream_destroy(0, s).unwrap();
    }
}

#[test]
fn threads_sharing_a_stream_all_get_their_work_done() {
    let b = sim();
    let s = b.stream_create(0).unwrap();
    let threads = 4usize;
    let p = b.alloc(0, 64 * threads).unwrap();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let b = &b;
            scope.spawn(move || {
                let mine = DevicePtr(p.0 + (64 * t) as u64);
                let mut out = [0u8; 64];
                for round in 0..ROUNDS {
                    let value = ((round + t) % 256) as u8;
                    // SAFETY: each thread uses its own 64 bytes of a live allocation; the
                    // synchronize orders the memset before the read.
                    unsafe {
                        b.memset_d8_async(0, mine, value, 64, s).unwrap();
                        if round % 3 == 0 {
                            continue; // leave some work to the worker or other threads
                        }
                        b.stream_synchronize(0, s).unwrap();
                        b.copy_dtoh(0, out.as_mut_ptr(), mine, 64).unwrap();
                    }
                    assert_eq!(out, [value; 64], "thread {t} round {round}");
                }
            });
        }
    });
    // SAFETY: the stream and allocation are live, then freed once.
    unsafe {
        b.stream_synchronize(0, s).unwrap();
        assert!(b.stream_query(0, s).unwrap());
        b.free(0, p).unwrap();
        b.stream_destroy(0, s).unwrap();
    }
}

#[test]
fn a_stream_waiting_for_another_streams_event_is_run_by_its_synchronize() {
    let b = sim();
    let (s1, s2) = (b.stream_create(0).unwrap(), b.stream_create(0).unwrap());
    let e = b.event_create(0, false).unwrap();
    let p = b.alloc(0, 64).unwrap();
    let mut out = [0u8; 64];
    for round in 0..ROUNDS.min(200) {
        let value = (round % 200) as u8;
        // SAFETY: all handles are live; the allocation outlives the work.
        unsafe {
            b.memset_d8_async(0, p, value, 64, s1).unwrap();
            b.event_record(0, e, s1).unwrap();
            b.stream_wait_event(0, s2, e).unwrap();
            b.memset_d8_async(0, DevicePtr(p.0 + 32), value + 1, 32, s2)
                .unwrap();
            b.stream_synchronize(0, s2).unwrap();
            b.copy_dtoh(0, out.as_mut_ptr(), p, 64).unwrap();
        }
        assert_eq!(&out[..32], &[value; 32][..]);
        assert_eq!(&out[32..], &[value + 1; 32][..]);
    }
    // SAFETY: everything is destroyed once, after its work.
    unsafe {
        b.synchronize(0).unwrap();
        b.free(0, p).unwrap();
        b.event_destroy(0, e).unwrap();
        b.stream_destroy(0, s1).unwrap();
        b.stream_destroy(0, s2).unwrap();
    }
}

/// A small copy may run at once on the enqueuing thread, but only on an idle stream: after a
/// large job still queued it waits its turn, so stream order holds.
#[test]
fn a_small_job_never_overtakes_queued_work() {
    let b = sim();
    let s = b.stream_create(0).unwrap();
    let big = 256 << 10;
    let p = b.alloc(0, big).unwrap();
    for round in 0..ROUNDS.min(50) {
        let value = (round % 250) as u8;
        let mut out = [0u8; 64];
        // SAFETY: the allocation and `out` outlive the work (synchronized before both are read
        // or freed).
        unsafe {
            // Queued (too large to run at once), then small ones right behind it.
            b.memset_d8_async(0, p, value, big, s).unwrap();
            b.memset_d8_async(0, p, value.wrapping_add(1), 32, s)
                .unwrap();
            b.copy_dtoh_async(0, out.as_mut_ptr(), p, 64, s).unwrap();
            b.stream_synchronize(0, s).unwrap();
        }
        let mut expected = [value; 64];
        expected[..32].fill(value.wrapping_add(1));
        assert_eq!(out, expected, "round {round}");
    }
    // SAFETY: no work is pending; each is freed once.
    unsafe {
        b.free(0, p).unwrap();
        b.stream_destroy(0, s).unwrap();
    }
}
