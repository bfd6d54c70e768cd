//! Work that waits behind failed work, against the stand-in runtime, whose packet processor
//! (like a GPU's) completes a barrier-AND packet only when its signals reach 0: a dispatch
//! enqueued behind a copy that then fails never runs, and since packets launch in order,
//! nothing after it on the queue runs either. Each case runs its launches on a helper thread
//! and fails after a deadline rather than hanging.

use super::launch::{args, kernel};
use super::{Mock, ensure, pinned};
use gpu_mem_core::Error;
use gpu_mem_core::backend::{DevicePtr, StreamHandle};
use gpu_mem_core::backend::{Events, Launch, Memory, Streams, Transfer};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig};
use gpu_mem_roc::RocBackend;
use libtest_mimic::Failed;
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// How long a case waits for its helper thread.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `work` on a helper thread; its result, or a failure once [`DEADLINE`] passed.
fn within_deadline<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Failed> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(result) => result.map_err(Failed::from),
        Err(_) => Err(format!("{what}: still waiting after {DEADLINE:?}").into()),
    }
}

/// A backend whose device queue holds a kernel stuck behind a failed copy, and what the case
/// needs to launch that kernel again.
struct Stuck {
    b: Arc<RocBackend>,
    /// The stream of the failed copy and the stuck kernel.
    stream: StreamHandle,
    kernel: Kernel,
    launch_args: Vec<LaunchArg>,
    buffers: Buffers,
}

/// A synchronous launch of `kernel` on device 0, failing after [`DEADLINE`] (`when` says
/// after what, for messages).
fn launch_now(
    b: &Arc<RocBackend>,
    kernel: Kernel,
    launch_args: Vec<LaunchArg>,
    when: &str,
) -> Result<(), Failed> {
    let launcher = Arc::clone(b);
    let what = format!("a synchronous launch {when}");
    within_deadline(&what.clone(), move || {
        // SAFETY: the stand-in runs no code.
        unsafe { launcher.launch(0, &kernel, &LaunchConfig::new(1, 64), &launch_args, None) }
            .map_err(|e| format!("{what} failed: {e}"))
    })
}

/// Enqueues a copy that then fails and a kernel behind it, which never runs. The kernel is
/// compiled and loaded first (a synchronous launch), and the copy is held until the kernel is
/// enqueued behind it.
fn stuck_behind_a_failed_copy(mock: &Mock) -> Result<Stuck, Failed> {
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let launch_args = args(array, record);
    let k = kernel();
    let s = b.stream_create(0)?;
    // SAFETY: the stand-in runs no code.
    unsafe { b.launch(0, &k, &LaunchConfig::new(1, 64), &launch_args, None) }?;
    let n = 4096;
    let h = pinned(&b, n, false)?;
    let d = b.alloc(0, n)?;
    mock.hold_copies(true)?;
    mock.fail_next_copy()?;
    // SAFETY: the buffers are freed only at the end of the case (the kernel never runs); the
    // stand-in runs no kernel code.
    let enqueued = unsafe {
        b.copy_htod_async(0, d, h.as_ptr(), n, s)
            .and_then(|_| b.launch(0, &k, &LaunchConfig::new(1, 64), &launch_args, Some(s)))
    };
    mock.hold_copies(false)?;
    enqueued.map_err(|e| format!("enqueueing the copy and the kernel: {e}"))?;
    Ok(Stuck {
        b: Arc::new(b),
        stream: s,
        kernel: k,
        launch_args,
        buffers: Buffers {
            host: h,
            device: vec![d, array, record],
        },
    })
}

/// What a case allocated, freed at its end (the stuck work never runs, so nothing reads them).
struct Buffers {
    host: std::ptr::NonNull<u8>,
    device: Vec<DevicePtr>,
}

impl Buffers {
    fn free(self, b: &RocBackend) -> Result<(), Failed> {
        // SAFETY: allocated by `b` on device 0; only work that never runs names them.
        unsafe {
            b.host_free(0, self.host)?;
            for d in self.device {
                b.free(0, d)?;
            }
        }
        Ok(())
    }
}

/// The stream reports the failed copy; the wait that finds its kernel stuck marks the queue, so
/// a synchronous launch afterwards runs, on a new queue, instead of failing behind it.
pub fn a_launch_after_a_stuck_dispatch_runs_on_a_new_queue(mock: &Mock) -> Result<(), Failed> {
    let Stuck {
        b,
        stream,
        kernel,
        launch_args,
        buffers,
    } = stuck_behind_a_failed_copy(mock)?;
    // SAFETY: a live stream of device 0.
    match unsafe { b.stream_synchronize(0, stream) } {
        Err(Error::AsyncFailure { .. }) => {}
        other => return Err(format!("expected the failed copy, got {other:?}").into()),
    }
    let before = mock.stats()?;
    launch_now(&b, kernel, launch_args, "after the stuck dispatch")?;
    let after = mock.stats()?;
    ensure(
        after.dispatches == before.dispatches + 1 && after.live_queues == before.live_queues + 1,
        || format!("no new queue ran the later launch: {before:?} -> {after:?}"),
    )?;
    buffers.free(&b)
}

/// Nobody waits: launches on another stream fill the queue behind the stuck dispatch. The launch
/// that finds no room fails (instead of waiting forever for room that never comes) and marks
/// the queue, and the next launch runs on a new one.
pub fn a_full_queue_behind_a_stuck_dispatch_fails_the_launch(mock: &Mock) -> Result<(), Failed> {
    let Stuck {
        b,
        kernel,
        launch_args,
        buffers,
        ..
    } = stuck_behind_a_failed_copy(mock)?;
    let filler_stream = b.stream_create(0)?;
    let filler = Arc::clone(&b);
    let (k2, args2) = (kernel.clone(), launch_args.clone());
    let (count, error) = within_deadline("launches behind a stuck dispatch", move || {
        for i in 0..4096 {
            // SAFETY: the stand-in runs no code.
            let launched = unsafe {
                filler.launch(
                    0,
                    &k2,
                    &LaunchConfig::new(1, 64),
                    &args2,
                    Some(filler_stream),
                )
            };
            if let Err(e) = launched {
                return Ok((i, e));
            }
        }
        Err("4096 launches accepted behind a stuck dispatch (the queue has 1024 slots)".into())
    })?;
    match &error {
        Error::AsyncFailure { reason, .. } if reason.contains("queue is full behind") => {}
        other => return Err(format!("launch {count} failed with {other:?}").into()),
    }
    ensure(count >= 1000, || {
        format!("the queue was reported full after only {count} launches: {error}")
    })?;
    let before = mock.stats()?;
    launch_now(&b, kernel, launch_args, "after the full queue")?;
    let after = mock.stats()?;
    ensure(after.live_queues == before.live_queues + 1, || {
        format!("no new queue: {before:?} -> {after:?}")
    })?;
    buffers.free(&b)
}

/// The calling thread's CPU time (user + system) from `/proc/thread-self/stat`, in clock ticks
/// of 10 ms.
fn thread_cpu_time() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").map_err(|e| e.to_string())?;
    // The fields after the command name, which ends with the last ')': utime and stime are the
    // 12th and 13th of them.
    let rest = stat.rsplit_once(')').ok_or("no ')' in stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("field {i} of {rest:?}"))
    };
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// A wait on an event recorded after many kernels still queued on one stream (each holds the
/// one before it, twice: as its stream's previous operation and as the queue's previous packet)
/// looks through the chain for failed work once per signal, not once per path (2^n, which kept
/// the waiting thread busy for as long as kernels were left).
pub fn a_long_chain_of_pending_kernels_is_waited_for(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let launch_args = args(array, record);
    let k = kernel();
    let s = b.stream_create(0)?;
    // 64 kernels of 10 ms each keep the chain pending across several wait ticks (1/10 s).
    let previous = mock.set_dispatch_delay_us(10_000)?;
    let b = Arc::new(b);
    let waiter = Arc::clone(&b);
    let waited = within_deadline("waiting for 64 queued kernels", move || {
        for _ in 0..64 {
            // SAFETY: the stand-in runs no code.
            unsafe { waiter.launch(0, &k, &LaunchConfig::new(1, 64), &launch_args, Some(s)) }
                .map_err(|e| e.to_string())?;
        }
        let event = waiter.event_create(0, false).map_err(|e| e.to_string())?;
        let started = std::time::Instant::now();
        let cpu_before = thread_cpu_time()?;
        // SAFETY: a live event and stream of device 0.
        unsafe {
            waiter
                .event_record(0, event, s)
                .and_then(|()| waiter.event_synchronize(0, event))
        }
        .map_err(|e| e.to_string())?;
        let busy = thread_cpu_time()? - cpu_before;
        let waited = started.elapsed();
        // SAFETY: as above.
        unsafe {
            waiter
                .event_destroy(0, event)
                .and_then(|()| waiter.stream_synchronize(0, s))
        }
        .map_err(|e| e.to_string())?;
        Ok((busy, waited))
    });
    mock.set_dispatch_delay_us(previous)?;
    let (busy, waited) = waited?;
    ensure(busy < Duration::from_millis(150), || {
        format!("the waiting thread was busy for {busy:?} of its {waited:?} wait")
    })?;
    // SAFETY: the stream's work completed; nothing uses the memory any more.
    unsafe {
        b.stream_destroy(0, s)?;
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}
