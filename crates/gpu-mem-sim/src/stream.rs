//! Simulated streams: each stream is a worker thread that runs its jobs in order, so stream
//! work really is asynchronous and a missing synchronization shows up as a race, as on a GPU.
//!
//! Hand-offs are built for latency, like a GPU's (a few microseconds from enqueue to a
//! synchronize returning): jobs go through a lock-free channel, completion is an atomic counter,
//! and nobody takes a lock or sleeps on the fast path. The worker takes a job after a short
//! launch latency ([`PICKUP_DELAY`]); a thread that synchronizes before then runs the job itself
//! (it would only wait otherwise), so a small copy plus `synchronize` costs no hand-off at all.
//! A worker that finishes a job keeps looking for the next one for a while (more work usually
//! follows at once), and a waiter spins while the work it waits for runs. Spinning is bounded
//! ([`SPIN_LIMIT`]), after which the thread sleeps, so an idle stream or a long kernel never
//! burns a core; after the first [`SPIN_TIGHT`] a spinning thread yields between checks, so on a
//! machine with fewer cores than busy threads it does not keep the thread it waits for off the
//! CPU. A thread spinning for a job that another thread runs takes chunks of that job's large
//! copies meanwhile (`crate::copy::assist`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::copy::Assist;
use gpu_mem_core::sync::{lock, try_lock, wait};

/// A unit of stream work; an `Err` is reported at the next synchronization.
pub(crate) type Job = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// How long a spinning thread only spins, checking as fast as it can.
const SPIN_TIGHT: Duration = Duration::from_micros(if cfg!(miri) { 0 } else { 50 });

/// How long a thread spins in all (yielding between checks after [`SPIN_TIGHT`]) before it
/// sleeps: longer than most small transfers, far shorter than a wake-up matters for long work.
/// (Under Miri, whose clock advances with every step it interprets, spinning is kept short.)
const SPIN_LIMIT: Duration = Duration::from_micros(if cfg!(miri) { 20 } else { 250 });

/// Spins until `ready()` for at most [`SPIN_LIMIT`], checking about every `pauses` spin-loop
/// hints; returns whether it became ready.
fn spin_until(pauses: u32, mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            for _ in 0..pauses {
                std::hint::spin_loop();
            }
            if ready() {
                return true;
            }
        }
        let spun = start.elapsed();
        if spun >= SPIN_LIMIT {
            return ready();
        }
        if spun >= SPIN_TIGHT {
            std::thread::yield_now();
        }
    }
}

/// Where threads sleep until a condition on atomics holds, after spinning for it. The fast path
/// (the condition holds, or comes true while spinning) takes no lock; the lock and condition
/// variable are only used once a thread has gone to sleep.
#[derive(Debug, Default)]
struct Parking {
    sleepers: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Parking {
    /// Returns once `ready()` holds: spins first, then sleeps. `ready` must read the atomics it
    /// checks with `SeqCst`, and whoever makes it true must call [`Parking::notify`] after a
    /// `SeqCst` write.
    fn wait_until(&self, pauses: u32, ready: impl Fn() -> bool) {
        if spin_until(pauses, &ready) {
            return;
        }
        // Announce the sleeper before the last check, so a notifier either sees it or made
        // `ready()` true before that check (both are `SeqCst`): no wake-up is lost.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut guard = lock(&self.lock);
        while !ready() {
            guard = wait(&self.wake, guard);
        }
        drop(guard);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes the sleepers, if any (call after the `SeqCst` write that may satisfy them).
    fn notify(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders this notification after a sleeper's last check.
            drop(lock(&self.lock));
            self.wake.notify_all();
        }
    }
}

/// Counts work in flight on a whole device, for the legacy-default-stream rule (synchronous
/// operations wait for every stream of the device).
#[derive(Debug, Default)]
pub(crate) struct DeviceActivity {
    in_flight: AtomicU64,
    idle: Parking,
}

impl DeviceActivity {
    fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn end(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify();
        }
    }

    /// Blocks until no stream of the device has work in flight.
    pub(crate) fn wait_idle(&self) {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            self.idle
                .wait_until(1, || self.in_flight.load(Ordering::SeqCst) == 0);
        }
    }
}

/// Jobs waiting to run; holding the lock is the right to run them, so the worker and a
/// synchronizing host thread (see [`SimStream::synchronize`]) never run two jobs of one stream at
/// once or out of order.
type Queue = Mutex<mpsc::Receiver<(&'static str, Job)>>;

#[derive(Debug)]
struct Shared {
    submitted: AtomicU64,
    completed: AtomicU64,
    /// Set once the stream is shut down (no job is enqueued after it).
    closed: AtomicBool,
    queue: Queue,
    /// Whether some thread holds `queue` (readable without trying the lock).
    running: AtomicBool,
    /// Where the worker sleeps when it has had no work for a while.
    work: Parking,
    /// Where synchronizing threads sleep when the work they wait for is long.
    done: Parking,
    activity: Arc<DeviceActivity>,
    /// Where a running job's copy asks the thread waiting for it to help.
    assist: Assist,
    /// First failure since the last synchronization.
    error: Mutex<Option<(&'static str, String)>>,
    /// Whether `error` may hold a failure (read without the lock on every synchronize).
    failed: AtomicBool,
}

impl Shared {
    fn pending(&self) -> bool {
        self.completed.load(Ordering::SeqCst) < self.submitted.load(Ordering::SeqCst)
    }

    /// Runs a job (its caller holds the queue), keeping its failure for the next
    /// synchronization.
    fn execute(&self, what: &'static str, job: impl FnOnce() -> Result<(), String>) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .unwrap_or_else(|_| Err("the operation panicked".into()));
        if let Err(message) = result {
            tracing::warn!("simulated stream job {what} failed: {message}");
            lock(&self.error).get_or_insert((what, message));
            self.failed.store(true, Ordering::SeqCst);
        }
    }

    /// The first failure since the last call, cleared.
    fn take_failure(&self) -> Result<(), (&'static str, String)> {
        // A plain load first: the swap (a locked instruction) only after a failure.
        if !self.failed.load(Ordering::SeqCst) || !self.failed.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        match lock(&self.error).take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Runs one queued job (its caller holds the queue) and reports its completion.
    fn run(&self, what: &'static str, job: Job) {
        // A queued job may be long: the thread waiting for the stream meanwhile helps with its
        // copies. (Short jobs run at once, see `SimStream::run_if_idle`, and need no help.)
        self.assist.running(|| self.execute(what, job));
        self.completed.fetch_add(1, Ordering::SeqCst);
        self.done.notify();
        self.activity.end();
    }

    /// The queue, unless another thread is running jobs from it.
    fn try_queue(&self) -> Option<QueueGuard<'_>> {
        let queue = try_lock(&self.queue)?;
        self.running.store(true, Ordering::SeqCst);
        Some(QueueGuard {
            shared: self,
            queue,
        })
    }
}

/// The right to run a stream's jobs; releasing it wakes a worker waiting for it.
struct QueueGuard<'a> {
    shared: &'a Shared,
    queue: MutexGuard<'a, mpsc::Receiver<(&'static str, Job)>>,
}

impl QueueGuard<'_> {
    /// Runs queued jobs until `target` have completed or the queue is empty.
    fn drain(&self, target: u64) {
        let shared = self.shared;
        while shared.completed.load(Ordering::SeqCst) < target {
            match self.queue.try_recv() {
                Ok((what, job)) => shared.run(what, job),
                Err(_) => return,
            }
        }
    }
}

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        self.shared.running.store(false, Ordering::SeqCst);
        self.shared.done.notify();
    }
}

/// How long a job waits in the queue before the worker takes it, unless a thread synchronizing
/// with the stream takes it first. A GPU's launch latency is a few microseconds too; the host
/// thread that enqueues a small copy and synchronizes at once runs it itself, instead of paying
/// for two hand-offs between threads (which would make a small page-locked copy slower than a
/// pageable one).
const PICKUP_DELAY: Duration = Duration::from_micros(2);

/// Spin-loop hints between two looks of an idle worker for new work: each look takes the
/// counters' cache line from the host thread that writes them, which would slow the host down.
const IDLE_PAUSES: u32 = 16;

/// The worker: runs jobs in order until the stream is shut down and its queue is empty.
fn work(shared: &Shared) {
    loop {
        // More work often follows at once: `wait_until` looks for it for a while before sleeping.
        shared.work.wait_until(IDLE_PAUSES, || {
            shared.pending() || shared.closed.load(Ordering::SeqCst)
        });
        if !shared.pending() {
            if shared.closed.load(Ordering::SeqCst) {
                return;
            }
            continue;
        }
        let seen = Instant::now();
        while shared.pending() && seen.elapsed() < PICKUP_DELAY {
            for _ in 0..IDLE_PAUSES {
                std::hint::spin_loop();
            }
            // A synchronizing thread may be running the job already.
            shared.assist.help();
        }
        if !shared.pending() {
            continue;
        }
        match shared.try_queue() {
            Some(queue) => queue.drain(u64::MAX),
            // A short job runs at once on the thread that enqueued it (`run_if_idle`), which
            // holds the queue without announcing it: wait for the queue itself rather than spin
            // through this loop, in case that job waits for memory another stream's long copy
            // holds.
            None if !shared.running.load(Ordering::SeqCst) => drop(lock(&shared.queue)),
            None => {
                // A synchronizing thread is running the jobs: wait until it makes progress or
                // lets go of the queue (it runs only the jobs it waits for).
                let now = shared.completed.load(Ordering::SeqCst);
                shared.done.wait_until(1, || {
                    shared.assist.help();
                    shared.completed.load(Ordering::SeqCst) != now
                        || !shared.running.load(Ordering::SeqCst)
                });
            }
        }
    }
}

/// Asks the scheduler to treat the calling (worker) thread as a batch thread: one that does not
/// preempt the thread that wakes it. Otherwise, on a machine with fewer free cores than busy
/// threads, a worker woken by an enqueue can take the enqueuing thread's core just when that
/// thread is about to run the job itself (see [`SimStream::synchronize`]), and the round trip
/// costs a scheduler time slice instead of a microsecond. Best effort: elsewhere, or if refused,
/// the worker keeps the default policy.
fn batch_scheduling() {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` reads `param`, a valid `sched_param`, and changes only
        // the calling thread's policy (pid 0); SCHED_BATCH keeps its nice value and needs no
        // privilege.
        let status = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        if status != 0 {
            tracing::debug!("a stream worker keeps the default scheduling policy");
        }
    }
}

/// One simulated stream.
#[derive(Debug)]
pub(crate) struct SimStream {
    sender: Mutex<Option<mpsc::Sender<(&'static str, Job)>>>,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl SimStream {
    pub(crate) fn spawn(name: String, activity: Arc<DeviceActivity>) -> Result<SimStream, String> {
        let (sender, receiver) = mpsc::channel::<(&'static str, Job)>();
        let shared = Arc::new(Shared {
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            queue: Mutex::new(receiver),
            running: AtomicBool::new(false),
            work: Parking::default(),
            done: Parking::default(),
            activity,
            assist: Assist::default(),
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
        });
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                batch_scheduling();
                work(&worker_shared)
            })
            .map_err(|e| format!("cannot start a stream worker thread: {e}"))?;
        Ok(SimStream {
            sender: Mutex::new(Some(sender)),
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// Enqueues a job.
    pub(crate) fn enqueue(&self, what: &'static str, job: Job) -> Result<(), String> {
        let sender = lock(&self.sender);
        let Some(sender) = sender.as_ref() else {
            return Err("the stream was destroyed".into());
        };
        let shared = &*self.shared;
        shared.activity.begin();
        shared.submitted.fetch_add(1, Ordering::SeqCst);
        if sender.send((what, job)).is_err() {
            // Unreachable while the sender exists (the queue lives as long as the stream).
            shared.submitted.fetch_sub(1, Ordering::SeqCst);
            shared.activity.end();
            return Err("the stream's queue is gone".into());
        }
        shared.work.notify();
        Ok(())
    }

    /// Runs `job` on the calling thread at once when the stream has nothing in flight — as the
    /// worker would have run it next — and gives it back otherwise. For short operations, whose
    /// hand-off to the worker would cost more than the work: an asynchronous operation may
    /// complete at any time after it is enqueued, and host code that touches its buffers waits
    /// for the stream first, so doing it now is one of the orders a GPU could take. A failure is
    /// kept for the next synchronization, as for queued jobs.
    ///
    /// `Ok(true)`: it ran and no failure (its own or an earlier job's) waits to be reported.
    pub(crate) fn run_if_idle<F>(&self, what: &'static str, job: F) -> Result<bool, F>
    where
        F: FnOnce() -> Result<(), String>,
    {
        let shared = &*self.shared;
        if shared.pending() || shared.closed.load(Ordering::SeqCst) {
            return Err(job);
        }
        // Holding the queue keeps the worker and synchronizing threads from running another job
        // of this stream meanwhile (one enqueued now by another thread waits for this one).
        let Some(queue) = try_lock(&shared.queue) else {
            return Err(job);
        };
        if shared.pending() {
            return Err(job);
        }
        shared.execute(what, job);
        drop(queue);
        Ok(!shared.failed.load(Ordering::SeqCst))
    }

    /// Waits for every job enqueued so far; returns (and clears) the first failure.
    ///
    /// Jobs the worker has not started yet are run by the calling thread, which would only wait
    /// otherwise: in order, one at a time, exactly as the worker would have run them.
    pub(crate) fn synchronize(&self) -> Result<(), (&'static str, String)> {
        self.wait();
        self.shared.take_failure()
    }

    /// Waits for every job enqueued so far, as [`SimStream::synchronize`] does, leaving a
    /// failure for the stream's own synchronization: the first one, if any (a device-wide
    /// synchronization reports it without taking it from the stream's owner).
    pub(crate) fn wait_and_peek(&self) -> Result<(), (&'static str, String)> {
        self.wait();
        self.peek_failure()
    }

    /// The failure [`SimStream::synchronize`] would return, if any (left in place).
    pub(crate) fn peek_failure(&self) -> Result<(), (&'static str, String)> {
        if !self.shared.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        match &*lock(&self.shared.error) {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn wait(&self) {
        let shared = &*self.shared;
        let target = shared.submitted.load(Ordering::SeqCst);
        if shared.completed.load(Ordering::SeqCst) < target {
            if let Some(queue) = shared.try_queue() {
                queue.drain(target);
            }
            // While the worker runs the jobs, help with their copies.
            shared.done.wait_until(1, || {
                shared.assist.help();
                shared.completed.load(Ordering::SeqCst) >= target
            });
        }
    }

    /// What [`SimStream::synchronize`] returns when every job enqueued so far has completed;
    /// `None` (without waiting) when some has not.
    pub(crate) fn finished(&self) -> Option<Result<(), (&'static str, String)>> {
        let shared = &*self.shared;
        if shared.pending() {
            return None;
        }
        Some(shared.take_failure())
    }

    /// `false` once the stream was shut down (destroyed, or its backend dropped).
    pub(crate) fn is_open(&self) -> bool {
        !self.shared.closed.load(Ordering::Acquire)
    }

    /// `true` when every job enqueued so far has completed.
    pub(crate) fn is_idle(&self) -> bool {
        !self.shared.pending()
    }

    /// Finishes the queued work and stops the worker.
    pub(crate) fn shut_down(&self) {
        lock(&self.sender).take();
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.work.notify();
        let worker = lock(&self.worker).take();
        let Some(worker) = worker else {
            return;
        };
        if worker.thread().id() == std::thread::current().id() {
            // Shut down from one of its own jobs (which held the last reference to the
            // backend): the worker cannot wait for itself; it finishes the queue and ends.
            return;
        }
        if worker.join().is_err() {
            tracing::error!("a simulated stream worker panicked");
        }
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceActivity, SimStream};
    use std::sync::Arc;
    use std::time::Duration;

    /// CPU time the thread named `name` (at most 15 bytes) has used so far: `/proc` counts it in
    /// clock ticks, 10 ms each. A new thread names itself once it first runs (on a busy machine,
    /// some time after it was spawned), so this waits up to 10 s for the name to appear.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn thread_cpu_ticks(name: &str) -> u64 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(ticks) = named_thread_cpu_ticks(name) {
                return ticks;
            }
            if std::time::Instant::now() > deadline {
                panic!("no thread named {name}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// [`thread_cpu_ticks`] of the thread named `name`, or `None` when there is none (yet).
    #[cfg(all(target_os = "linux", not(miri)))]
    fn named_thread_cpu_ticks(name: &str) -> Option<u64> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap_or_else(|e| panic!("{e}"));
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // Fields after the name (which ends at the last ')'): state is the first, utime
            // and stime the 12th and 13th.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<u64> = after
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            return Some(fields.iter().sum());
        }
        None
    }

    /// While a job run at once by the enqueuing thread waits (here: sleeps, as one blocked on
    /// another stream's copy does), the worker, with a job queued behind it, waits without
    /// spinning, and runs that job afterwards.
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn the_worker_does_not_spin_while_a_job_runs_at_once() {
        const NAME: &str = "gm-test-nospin";
        let stream = SimStream::spawn(NAME.into(), Arc::new(DeviceActivity::default()))
            .unwrap_or_else(|e| panic!("{e}"));
        let (started, start) = std::sync::mpsc::channel();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut spent = 0;
        std::thread::scope(|scope| {
            let stream = &stream;
            let inline = scope.spawn(move || {
                stream
                    .run_if_idle("inline", || {
                        let _ = started.send(());
                        std::thread::sleep(Duration::from_millis(200));
                        Ok(())
                    })
                    .is_ok()
            });
            let _ = start.recv();
            let ran = Arc::clone(&ran);
            stream
                .enqueue(
                    "queued",
                    Box::new(move || {
                        ran.store(true, std::sync::atomic::Ordering::SeqCst);
                        Ok(())
                    }),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let before = thread_cpu_ticks(NAME);
            assert!(
                inline.join().unwrap_or(false),
                "the idle stream ran the job at once"
            );
            spent = thread_cpu_ticks(NAME) - before;
        });
        assert!(stream.synchronize().is_ok());
        assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
        // A spinning worker uses a core for the whole 200 ms (20 ticks).
        assert!(
            spent < 10,
            "the worker used {spent} ticks of CPU while the job slept"
        );
        stream.shut_down();
    }
}
