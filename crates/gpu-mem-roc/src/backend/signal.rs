//! Completion signals with the dependencies they were enqueued behind.
//!
//! Every asynchronous operation gets a fresh signal created at 1; the runtime decrements it to 0
//! when the operation is done, or sets it negative when it failed (hsa_ext_amd.h, async copy).
//!
//! Lifetime rule: the runtime may still read a signal while any operation that *depends* on it
//! has not started. So a [`Signal`] owns `Arc`s of the signals it depends on and releases them
//! only once it is itself observed complete; a signal is destroyed (`hsa_signal_destroy`) when
//! its last `Arc` goes. An operation whose dependency failed never starts, so the runtime keeps
//! its dependencies forever: such signals are leaked on purpose ([`Signal::leak`]), never
//! destroyed.
//!
//! A kernel dispatch's signal also carries what the dispatch needs until it has run (its
//! kernarg buffer, its loaded code object): released together with the dependencies, once the
//! signal is observed complete, so nothing the packet processor may read is freed early. It
//! also knows its AQL queue, so a wait notices when the runtime reported the queue broken (the
//! signal then never completes).

use super::queue_health::QueueHealth;
use crate::driver::Hsa;
use gpu_mem_core::Result;
use gpu_mem_core::sync::lock;
use gpu_mem_hsa_sys as sys;
use std::any::Any;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Something an operation needs until it has completed (released with the dependencies).
pub type KeepAlive = Box<dyn Any + Send + Sync>;

/// What a signal's value says about its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Still 1 (or more): not finished, or waiting for a dependency.
    Pending,
    /// 0: finished successfully.
    Done,
    /// Negative: the runtime reported a failure.
    Failed(i64),
}

fn state_of(value: sys::hsa_signal_value_t) -> State {
    match value {
        v if v < 0 => State::Failed(v),
        0 => State::Done,
        _ => State::Pending,
    }
}

/// One HSA signal, destroyed when the last `Arc` drops.
#[derive(Debug)]
pub struct Signal {
    hsa: Arc<Hsa>,
    raw: sys::hsa_signal_t,
    /// What the operation was (for failure messages).
    pub operation: &'static str,
    /// Whether the operation was an async copy (its timestamps can be read back).
    pub is_copy: bool,
    /// Signals this operation waits on; cleared once it completed.
    deps: Mutex<Vec<Arc<Signal>>>,
    /// For a kernel dispatch: the queue it was submitted to.
    queue: Option<Arc<QueueHealth>>,
    /// Resources the operation uses until it completed; dropped with `deps`.
    keep: Mutex<Option<KeepAlive>>,
}

impl Signal {
    /// Creates a signal at 1 that any agent may wait on, remembering `deps`.
    pub fn new(
        hsa: &Arc<Hsa>,
        operation: &'static str,
        is_copy: bool,
        deps: Vec<Arc<Signal>>,
    ) -> Result<Arc<Signal>> {
        // SAFETY: no consumer agents are named.
        let raw = unsafe { hsa.signal_create(1, &[]) }?;
        Ok(Arc::new(Signal {
            hsa: Arc::clone(hsa),
            raw,
            operation,
            is_copy,
            deps: Mutex::new(deps),
            queue: None,
            keep: Mutex::new(None),
        }))
    }

    /// A signal at 1 for a kernel dispatch on `queue`, keeping `keep` until it completed.
    pub fn for_dispatch(
        hsa: &Arc<Hsa>,
        operation: &'static str,
        deps: Vec<Arc<Signal>>,
        queue: Arc<QueueHealth>,
        keep: KeepAlive,
    ) -> Result<Arc<Signal>> {
        // SAFETY: no consumer agents are named.
        let raw = unsafe { hsa.signal_create(1, &[]) }?;
        Ok(Arc::new(Signal {
            hsa: Arc::clone(hsa),
            raw,
            operation,
            is_copy: false,
            deps: Mutex::new(deps),
            queue: Some(queue),
            keep: Mutex::new(Some(keep)),
        }))
    }

    /// Adds a signal this one is held behind (kept alive and checked for failure like the
    /// dependencies given at creation).
    pub fn add_dependency(&self, dep: Arc<Signal>) {
        let mut deps = lock(&self.deps);
        if !deps.iter().any(|d| Arc::ptr_eq(d, &dep)) {
            deps.push(dep);
        }
    }

    /// Keeps `keep` alive until this operation has completed (with what it already holds).
    pub fn hold(&self, keep: KeepAlive) {
        let mut slot = lock(&self.keep);
        *slot = Some(match slot.take() {
            Some(previous) => Box::new((previous, keep)),
            None => keep,
        });
    }

    /// For a dispatch: marks its queue stuck behind failed work ([`QueueHealth::block`]).
    pub fn block_queue(&self) {
        if let Some(queue) = &self.queue {
            queue.block();
        }
    }

    /// The error status the runtime reported for this dispatch's queue, if any.
    fn queue_failure(&self) -> Option<u32> {
        self.queue.as_ref().and_then(|q| q.failure())
    }

    /// The raw handle.
    pub fn raw(&self) -> sys::hsa_signal_t {
        self.raw
    }

    /// The current state (`hsa_signal_load_scacquire`, so a `Done` read also acquires the
    /// operation's results). A completed signal drops its dependencies.
    pub fn state(&self) -> Result<State> {
        // SAFETY: `raw` is live for as long as `self` exists.
        let value = unsafe { self.hsa.signal_load_scacquire(self.raw) }?;
        let state = state_of(value);
        if state == State::Done {
            self.release_deps();
        }
        // A dispatch on a queue the runtime reported broken never completes.
        if state == State::Pending && self.queue_failure().is_some() {
            return Ok(State::Failed(QUEUE_FAILED));
        }
        Ok(state)
    }

    /// Why this operation failed with signal `value`, for error messages.
    pub fn describe_failure(&self, value: i64) -> String {
        match self.queue.as_ref().and_then(|q| q.describe()) {
            Some(reason) => format!("{} failed: {reason}", self.operation),
            None => format!("{} failed (signal value {value})", self.operation),
        }
    }

    /// Blocks for at most `timeout_ticks` system-timestamp ticks until the value drops below 1.
    pub fn wait_for(&self, timeout_ticks: u64) -> Result<State> {
        // SAFETY: `raw` is live for as long as `self` exists.
        let value = unsafe {
            self.hsa.signal_wait_scacquire(
                self.raw,
                sys::HSA_SIGNAL_CONDITION_LT,
                1,
                timeout_ticks,
                sys::HSA_WAIT_STATE_BLOCKED,
            )
        }?;
        let state = state_of(value);
        if state == State::Done {
            self.release_deps();
        }
        Ok(state)
    }

    fn release_deps(&self) {
        let released = std::mem::take(&mut *lock(&self.deps));
        drop(released);
        let kept = lock(&self.keep).take();
        drop(kept);
    }

    /// The first failed signal this one (transitively) waits on, if any: then this operation
    /// can never start.
    ///
    /// Walks the pending part of the dependency graph once per signal, without recursion: a
    /// stream's kernels form a chain as long as the work enqueued (each holds its predecessor,
    /// often twice: as its stream's previous operation and as the queue's previous packet).
    pub fn failed_dependency(&self) -> Result<Option<(&'static str, i64)>> {
        // Visited signals are kept alive while the walk runs, so an address is not reused.
        let mut seen: HashSet<*const Signal> = HashSet::new();
        let mut visited: Vec<Arc<Signal>> = Vec::new();
        let mut work: Vec<Arc<Signal>> = lock(&self.deps).clone();
        while let Some(dep) = work.pop() {
            if !seen.insert(Arc::as_ptr(&dep)) {
                continue;
            }
            match dep.state()? {
                State::Failed(v) => return Ok(Some((dep.operation, v))),
                State::Done => {}
                State::Pending => work.extend(lock(&dep.deps).iter().cloned()),
            }
            visited.push(dep);
        }
        Ok(None)
    }

    /// Never destroys this signal: the runtime may wait on it forever (a dependency failed).
    pub fn leak(signal: Arc<Signal>) {
        tracing::warn!(
            operation = signal.operation,
            handle = signal.raw.handle,
            "leaking an HSA signal the runtime may still reference after a failure"
        );
        std::mem::forget(signal);
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone, and by the lifetime rule above no pending
        // operation depends on this signal any more.
        if let Err(e) = unsafe { self.hsa.signal_destroy(self.raw) } {
            tracing::warn!(error = %e, "hsa_signal_destroy failed");
        }
    }
}

/// The value [`wait`] reports for a dispatch whose queue the runtime reported broken (its
/// signal never completes then).
pub const QUEUE_FAILED: i64 = -1;

/// Waits until `signal` completes or fails, or one of its dependencies fails (in which case it
/// never would). `tick` is how long each wait lasts before dependencies are re-checked.
pub fn wait(signal: &Signal, tick: u64) -> Result<State> {
    loop {
        match signal.wait_for(tick)? {
            State::Pending => {
                if let Some(status) = signal.queue_failure() {
                    tracing::debug!(
                        operation = signal.operation,
                        status,
                        "the runtime reported the dispatch's queue broken"
                    );
                    return Ok(State::Failed(QUEUE_FAILED));
                }
                if let Some((operation, value)) = signal.failed_dependency()? {
                    tracing::debug!(
                        operation,
                        value,
                        "dependency failed; operation will never run"
                    );
                    // A dispatch that never runs holds back its whole queue.
                    signal.block_queue();
                    return Ok(State::Failed(value));
                }
            }
            done_or_failed => return Ok(done_or_failed),
        }
    }
}
