//! A stream: an ordered chain of completion signals.
//!
//! Each operation enqueued on a stream depends on the completion signal of the one before it
//! (and on the events the stream was told to wait for), so the runtime runs them in order
//! without any host involvement. Completed signals are reaped from the front; a failure poisons
//! the stream: everything behind it can never run, is leaked (see `signal`), and every later
//! synchronisation reports the failure.

use super::RocBackend;
use super::signal::{self, Signal, State};
use gpu_mem_core::backend::{EventHandle, StreamHandle, Streams};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Reap completed signals once this many are pending (the runtime slows down, and Numba saw
/// hangs, with very long dependency chains).
const REAP_THRESHOLD: usize = 64;

/// Most operations a stream holds in flight: enqueuing one more first waits for the oldest.
/// Every operation owns an HSA signal, and ROCr backs each with a kernel-driver event from a
/// per-process budget (a few thousand) that unbounded enqueuing would exhaust; CUDA likewise
/// blocks a launch once about a thousand are queued.
pub const MAX_IN_FLIGHT: usize = 1024;

/// The host-side state of one stream.
#[derive(Debug)]
pub struct Stream {
    /// The handle value, for messages.
    pub handle: u64,
    /// How long each wait lasts before failed dependencies are re-checked (timestamp ticks).
    tick: u64,
    /// Enqueued operations not yet observed complete, oldest first.
    pending: VecDeque<Arc<Signal>>,
    /// Signals the next operation must also wait for (from `stream_wait_event`).
    waits: Vec<Arc<Signal>>,
    /// Set once an operation failed; later work never runs.
    failure: Option<String>,
}

impl Stream {
    pub fn new(handle: u64, tick: u64) -> Stream {
        Stream {
            handle,
            tick,
            pending: VecDeque::new(),
            waits: Vec::new(),
            failure: None,
        }
    }

    fn failure_error(&self, reason: String) -> Error {
        Error::AsyncFailure {
            operation: "stream work",
            stream: self.handle,
            reason,
        }
    }

    /// The signals the next operation must wait on: the newest pending one (which itself
    /// waits for everything before it) and the event waits, after [`Stream::make_room`] for it.
    /// Fails on a poisoned stream.
    pub fn dependencies(&mut self) -> Result<Vec<Arc<Signal>>> {
        self.make_room()?;
        Ok(self.newest())
    }

    /// Makes room for one more operation: reaps completed ones, and with [`MAX_IN_FLIGHT`]
    /// pending waits for the oldest. A call enqueuing several operations calls it before each.
    /// Fails on a poisoned stream.
    pub fn make_room(&mut self) -> Result<()> {
        if let Some(reason) = &self.failure {
            return Err(self.failure_error(reason.clone()));
        }
        if self.pending.len() >= REAP_THRESHOLD {
            self.reap()?;
        }
        while self.pending.len() >= MAX_IN_FLIGHT {
            let oldest = self.pending.front().cloned();
            if let Some(oldest) = oldest
                && self.wait_one(&oldest, self.tick)?
            {
                self.pending.pop_front();
            }
        }
        Ok(())
    }

    /// The newest pending signal and the event waits.
    fn newest(&self) -> Vec<Arc<Signal>> {
        let mut deps: Vec<Arc<Signal>> = self.pending.back().cloned().into_iter().collect();
        deps.extend(self.waits.iter().cloned());
        deps
    }

    /// Records that `signal` (created with [`Stream::dependencies`]) was enqueued.
    pub fn push(&mut self, signal: Arc<Signal>) {
        self.waits.clear();
        self.pending.push_back(signal);
    }

    /// Adds signals the next operation must wait for.
    pub fn wait_for(&mut self, signals: &[Arc<Signal>]) {
        self.waits.extend(signals.iter().cloned());
    }

    /// Every signal a marker recorded now must wait for (newest pending plus event waits). A
    /// marker adds no operation, so it never waits for room.
    pub fn marker(&mut self) -> Result<Vec<Arc<Signal>>> {
        if let Some(reason) = &self.failure {
            return Err(self.failure_error(reason.clone()));
        }
        self.reap()?;
        Ok(self.newest())
    }

    /// Drops completed signals from the front without blocking; poisons on failure.
    pub fn reap(&mut self) -> Result<()> {
        while let Some(front) = self.pending.front() {
            match front.state()? {
                State::Done => {
                    self.pending.pop_front();
                }
                State::Failed(value) => {
                    let reason = front.describe_failure(value);
                    self.poison(reason.clone());
                    return Err(self.failure_error(reason));
                }
                State::Pending => break,
            }
        }
        // Event waits whose signals completed need not be carried along.
        let mut kept = Vec::with_capacity(self.waits.len());
        for w in self.waits.drain(..) {
            if w.state()? != State::Done {
                kept.push(w);
            }
        }
        self.waits = kept;
        Ok(())
    }

    /// `true` when nothing is pending (reaps first).
    pub fn is_idle(&mut self) -> Result<bool> {
        if let Some(reason) = &self.failure {
            return Err(self.failure_error(reason.clone()));
        }
        self.reap()?;
        Ok(self.pending.is_empty())
    }

    /// Blocks until every enqueued operation completed, oldest first (a failed operation stops
    /// the wait: nothing behind it can run).
    pub fn drain(&mut self, tick: u64) -> Result<()> {
        if let Some(reason) = &self.failure {
            return Err(self.failure_error(reason.clone()));
        }
        while let Some(front) = self.pending.front().cloned() {
            if self.wait_one(&front, tick)? {
                self.pending.pop_front();
            }
        }
        Ok(())
    }

    /// [`Stream::drain`], then waits for the event waits too: what a host-side operation on the
    /// stream (the memset fill) must wait for, as a queued operation would through its
    /// dependencies.
    pub fn drain_with_waits(&mut self, tick: u64) -> Result<()> {
        self.drain(tick)?;
        while let Some(wait) = self.waits.last().cloned() {
            if self.wait_one(&wait, tick)? {
                self.waits.pop();
            }
        }
        Ok(())
    }

    /// Waits up to `tick` for `signal`: `true` once it completed; a failure poisons the stream.
    fn wait_one(&mut self, signal: &Arc<Signal>, tick: u64) -> Result<bool> {
        match signal::wait(signal, tick)? {
            State::Done => Ok(true),
            State::Failed(value) => {
                let reason = signal.describe_failure(value);
                self.poison(reason.clone());
                Err(self.failure_error(reason))
            }
            State::Pending => Ok(false),
        }
    }

    /// Marks the stream failed and leaks every signal the runtime may still wait on.
    fn poison(&mut self, reason: String) {
        tracing::error!(stream = self.handle, %reason, "stream failed");
        // Pending operations behind the failure never start, so the runtime keeps waiting on
        // their dependencies: leak them. Event waits were not handed to the runtime yet.
        for signal in self.pending.drain(..) {
            // A dispatch among them sits in its queue waiting for the failed work, and the
            // packet processor launches in order: that queue is stuck for good.
            signal.block_queue();
            Signal::leak(signal);
        }
        self.waits.clear();
        self.failure = Some(reason);
    }
}

// SAFETY: each operation on a stream depends on the previous one's completion signal, so the
// runtime runs them in order; `stream_synchronize` and `stream_query` report completion only
// once every signal of the stream is observed complete (a failure poisons the stream and is
// reported, never as completion); `stream_wait_event` makes later work depend on the event's
// signals.
unsafe impl Streams for RocBackend {
    fn stream_create(&self, device: usize) -> Result<StreamHandle> {
        self.gpu(device)?;
        let handle = self.new_handle();
        let stream = Arc::new(Mutex::new(Stream::new(handle, self.wait_tick())));
        lock(&self.streams).insert(handle, (device, stream));
        Ok(StreamHandle(handle))
    }

    unsafe fn stream_destroy(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let s = self.stream(device, stream)?;
        // Destroying waits for the stream's work (its signals must outlive it); a failure is
        // reported, and the stream is gone either way.
        let drained = lock(&s).drain(self.wait_tick());
        lock(&self.streams).remove(&stream.0);
        drained
    }

    unsafe fn stream_synchronize(&self, device: usize, stream: StreamHandle) -> Result<()> {
        let s = self.stream(device, stream)?;
        let mut s = lock(&s);
        s.drain(self.wait_tick())
    }

    unsafe fn stream_query(&self, device: usize, stream: StreamHandle) -> Result<bool> {
        let s = self.stream(device, stream)?;
        let mut s = lock(&s);
        s.is_idle()
    }

    unsafe fn stream_wait_event(
        &self,
        device: usize,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<()> {
        let s = self.stream(device, stream)?;
        // An event never recorded has nothing to wait for (as in CUDA).
        if let Some(recorded) = self.recorded(device, event)? {
            lock(&s).wait_for(&recorded.signals);
        }
        Ok(())
    }
}
