//! Simulated streams: each stream is a worker thread that runs its jobs in order, so stream
//! work really is asynchronous and a missing synchronization shows up as a race, as on a GPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A unit of stream work; an `Err` is reported at the next synchronization.
pub(crate) type Job = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Counts work in flight on a whole device, for the legacy-default-stream rule (synchronous
/// operations wait for every stream of the device).
#[derive(Debug, Default)]
pub(crate) struct DeviceActivity {
    in_flight: Mutex<u64>,
    idle: Condvar,
}

impl DeviceActivity {
    fn lock(&self) -> MutexGuard<'_, u64> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn begin(&self) {
        *self.lock() += 1;
    }

    fn end(&self) {
        let mut n = self.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Blocks until no stream of the device has work in flight.
    pub(crate) fn wait_idle(&self) {
        let mut n = self.lock();
        while *n > 0 {
            n = self.idle.wait(n).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[derive(Debug, Default)]
struct Progress {
    submitted: u64,
    completed: u64,
    /// First failure since the last synchronization.
    error: Option<(&'static str, String)>,
}

#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
    /// `progress.completed`, readable without the lock, for short spin-waits.
    completed: AtomicU64,
}

/// How long a waiter spins before it sleeps: stream work is often a few microseconds, far less
/// than a thread wake-up, so a short spin keeps small transfers fast (a GPU's stream latency is a
/// few microseconds too) without burning a core on long waits.
const SPIN: Duration = Duration::from_micros(20);

/// Spins for at most [`SPIN`] until `ready()`; returns whether it became ready.
fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return ready();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One simulated stream.
#[derive(Debug)]
pub(crate) struct SimStream {
    sender: Mutex<Option<mpsc::Sender<(&'static str, Job)>>>,
    shared: Arc<Shared>,
    activity: Arc<DeviceActivity>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl SimStream {
    pub(crate) fn spawn(name: String, activity: Arc<DeviceActivity>) -> Result<SimStream, String> {
        let (sender, receiver) = mpsc::channel::<(&'static str, Job)>();
        let shared = Arc::new(Shared::default());
        let worker_shared = Arc::clone(&shared);
        let worker_activity = Arc::clone(&activity);
        let worker = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                loop {
                    // More work often follows at once: look for it briefly before sleeping.
                    let mut next = None;
                    spin_until(|| match receiver.try_recv() {
                        Ok(item) => {
                            next = Some(item);
                            true
                        }
                        Err(mpsc::TryRecvError::Empty) => false,
                        Err(mpsc::TryRecvError::Disconnected) => true,
                    });
                    let (what, job) = match next {
                        Some(item) => item,
                        None => match receiver.recv() {
                            Ok(item) => item,
                            Err(_) => break,
                        },
                    };
                    let result = job();
                    let mut progress = worker_shared.lock();
                    progress.completed += 1;
                    worker_shared
                        .completed
                        .store(progress.completed, Ordering::Release);
                    if let Err(message) = result {
                        tracing::warn!("simulated stream job {what} failed: {message}");
                        progress.error.get_or_insert((what, message));
                    }
                    drop(progress);
                    worker_shared.changed.notify_all();
                    worker_activity.end();
                }
            })
            .map_err(|e| format!("cannot start a stream worker thread: {e}"))?;
        Ok(SimStream {
            sender: Mutex::new(Some(sender)),
            shared,
            activity,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// Enqueues a job.
    pub(crate) fn enqueue(&self, what: &'static str, job: Job) -> Result<(), String> {
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sender) = sender.as_ref() else {
            return Err("the stream was destroyed".into());
        };
        self.shared.lock().submitted += 1;
        self.activity.begin();
        if sender.send((what, job)).is_err() {
            let mut progress = self.shared.lock();
            progress.submitted -= 1;
            drop(progress);
            self.activity.end();
            return Err("the stream's worker thread has stopped".into());
        }
        Ok(())
    }

    /// Waits for every job enqueued so far; returns (and clears) the first failure.
    pub(crate) fn synchronize(&self) -> Result<(), (&'static str, String)> {
        let target = self.shared.lock().submitted;
        spin_until(|| self.shared.completed.load(Ordering::Acquire) >= target);
        let mut progress = self.shared.lock();
        while progress.completed < target {
            progress = self
                .shared
                .changed
                .wait(progress)
                .unwrap_or_else(|p| p.into_inner());
        }
        match progress.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// `true` when every job enqueued so far has completed.
    pub(crate) fn is_idle(&self) -> bool {
        let progress = self.shared.lock();
        progress.completed >= progress.submitted
    }

    /// Finishes the queued work and stops the worker.
    pub(crate) fn shut_down(&self) {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        let worker = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(worker) = worker
            && worker.join().is_err()
        {
            tracing::error!("a simulated stream worker panicked");
        }
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.shut_down();
    }
}
