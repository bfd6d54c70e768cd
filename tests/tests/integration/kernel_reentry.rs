//! Regression test for issue 9, item 4: a simulator kernel that calls back into gpu-mem from
//! inside itself (`Device::synchronize()`, `copy_to_host`) used to deadlock on a stream launch,
//! and every later synchronous call on the device hung behind it. Now each such call is an error
//! that names the call and the kernel, and the device keeps working.
//! The same holds for what a kernel's captures do when its stream job drops them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::Backend;
use gpu_mem::backend::{Launch, Streams};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs `scenario` on its own thread and fails the test (instead of hanging it) if it does not
/// finish in time.
fn within_a_minute<T: Send + 'static>(scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(scenario());
    });
    match outcome.recv_timeout(Duration::from_secs(60)) {
        Ok(value) => value,
        Err(_) => panic!("deadlock: the scenario did not finish within 60 s"),
    }
}

fn record(log: &Mutex<Vec<String>>, result: Result<()>) {
    let line = match result {
        Ok(()) => "ok".to_string(),
        Err(error) => error.to_string(),
    };
    log.lock().unwrap().push(line);
}

#[test]
fn a_kernel_calling_back_into_gpu_mem_gets_errors_not_a_deadlock() {
    let log = within_a_minute(|| {
        let rt = Runtime::with_backend(Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20))));
        let dev = rt.device(0).unwrap();
        let data = dev.to_device(&ndarray::array![1u32, 2, 3]).unwrap();
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let kernel = {
            let dev = dev.clone();
            let inner = dev.to_device(&ndarray::array![4u32, 5]).unwrap();
            let log = Arc::clone(&log);
            Kernel::sim("calls_back", move |ctx: &ThreadCtx<'_>| {
                if ctx.thread_idx().x == 0 && ctx.block_idx().x == 0 {
                    record(&log, dev.synchronize());
                    record(&log, inner.copy_to_host().map(drop));
                }
            })
        };
        let stream = dev.stream().unwrap();
        // SAFETY: the kernel touches no launch arguments.
        unsafe { stream.launch(&kernel, LaunchConfig::new(2u32, 4u32), &mut []) }.unwrap();
        stream.synchronize().unwrap();
        // The device still works after the refused calls.
        dev.synchronize().unwrap();
        assert_eq!(
            data.copy_to_host().unwrap(),
            ndarray::array![1u32, 2, 3].into_dyn()
        );
        // A synchronous launch makes the same calls on the caller's thread: refused too.
        // SAFETY: as above.
        unsafe { dev.launch(&kernel, LaunchConfig::new(1u32, 1u32), &mut []) }.unwrap();
        drop(kernel);
        dev.synchronize().unwrap();
        // After the kernel, the same thread may call the API again.
        assert!(dev.synchronize().is_ok());
        log.lock().unwrap().clone()
    });
    assert_eq!(log.len(), 4, "{log:?}");
    for (line, call) in log
        .iter()
        .zip(["synchronize", "device-to-host copy"].iter().cycle())
    {
        assert!(
            line.contains(&format!("`{call}`")) && line.contains("`calls_back`"),
            "expected an error naming `{call}` and the kernel, got: {line}"
        );
    }
}

/// A kernel gate: the kernel's threads wait at it until the test opens it, so that the test
/// can drop its own references while the launch is in flight.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    fn wait(&self) {
        let mut open = self.0.0.lock().unwrap();
        while !*open {
            open = self.0.1.wait(open).unwrap();
        }
    }
}

/// Calls `Backend::synchronize` when dropped, and records what it returned.
struct SynchronizesOnDrop {
    backend: Arc<SimBackend>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for SynchronizesOnDrop {
    fn drop(&mut self) {
        record(&self.log, self.backend.synchronize(0));
    }
}

#[test]
fn a_kernels_captures_dropped_by_its_stream_job_cannot_wait_for_it() {
    // Through the `Backend` trait nothing keeps a clone of a launched kernel, so the stream job
    // holds the last one and drops the kernel's captures when it is done. A capture whose `Drop`
    // waits for the device waited for that very job: it never returned.
    let log = within_a_minute(|| {
        let backend = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20)));
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let capture = SynchronizesOnDrop {
            backend: Arc::clone(&backend),
            log: Arc::clone(&log),
        };
        let gate = Gate::default();
        let kernel = Kernel::sim("drops_a_waiter", {
            let gate = gate.clone();
            move |_| {
                let _ = &capture;
                gate.wait();
            }
        });
        let stream = backend.stream_create(0).unwrap();
        // SAFETY: the kernel has no arguments; the stream is this backend's.
        unsafe {
            backend.launch(
                0,
                &kernel,
                &LaunchConfig::new(1u32, 1u32),
                &[],
                Some(stream),
            )
        }
        .unwrap();
        drop(kernel);
        gate.open();
        // SAFETY: the stream is live and synchronized once before it is destroyed.
        unsafe {
            backend.stream_synchronize(0, stream).unwrap();
            backend.stream_destroy(0, stream).unwrap();
        }
        // The device keeps working.
        backend.synchronize(0).unwrap();
        log.lock().unwrap().clone()
    });
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].contains("`synchronize`") && log[0].contains("`drops_a_waiter`"),
        "expected the refusal naming the call and the kernel, got: {}",
        log[0]
    );
}

/// Holds a reference to the backend; when dropped, drops it and then says so.
struct HoldsTheBackend {
    backend: Option<Arc<SimBackend>>,
    dropped: mpsc::Sender<()>,
}

impl Drop for HoldsTheBackend {
    fn drop(&mut self) {
        drop(self.backend.take());
        let _ = self.dropped.send(());
    }
}

#[test]
fn a_stream_job_dropping_the_last_reference_to_the_backend_shuts_it_down() {
    // The backend's drop shuts every stream down and waits for its worker; for the stream whose
    // job drops it, that worker is the current thread (it panicked joining itself).
    let (dropped, was_dropped) = mpsc::channel();
    let backend = Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20)));
    let capture = HoldsTheBackend {
        backend: Some(Arc::clone(&backend)),
        dropped,
    };
    let gate = Gate::default();
    let kernel = Kernel::sim("holds_the_backend", {
        let gate = gate.clone();
        move |_| {
            let _ = &capture;
            gate.wait();
        }
    });
    let stream = backend.stream_create(0).unwrap();
    // SAFETY: the kernel has no arguments; the stream is this backend's.
    unsafe {
        backend.launch(
            0,
            &kernel,
            &LaunchConfig::new(1u32, 1u32),
            &[],
            Some(stream),
        )
    }
    .unwrap();
    drop(kernel);
    drop(backend);
    gate.open();
    // The capture went with the job and dropped the backend to the end.
    assert_eq!(was_dropped.recv_timeout(Duration::from_secs(60)), Ok(()));
}
