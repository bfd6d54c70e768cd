//! Streams: [`Stream`], an ordered queue of device work, with the bookkeeping that makes async
//! copies sound; [`Event`]s, markers in a stream's work (`event`); and the host memory its copies
//! accept ([`HostSource`], [`HostDestination`], `host_memory`). The device constructors
//! `Device::stream` and `Device::event` are here too.
//!
//! This module depends on `memory`, `device`, `backend`, `layout`, `element`, `error` and
//! `sync`; arrays, host arrays and kernels sit above it. So the work put on a stream that names
//! those is written with them: the asynchronous copies of device arrays in
//! `array/stream_transfer.rs`, work of other libraries in `array/raw.rs`, kernel launches in
//! `kernel/launch.rs`, each through [`Stream::submit`]. `event` knows nothing of streams:
//! recording into and waiting on a stream are written here, so the dependency runs one way.
//! Likewise `memory` knows nothing of streams: a stream is a `memory::WorkQueue` to the host
//! buffers it uses, and registers how to reclaim the memory its work keeps alive
//! (`memory::set_reclaim`) for allocations that find no room.
//!
//! Every operation enqueued through a `Stream` gets a ticket (the stream's submission count after
//! it). The stream keeps what the operation touches — device allocations, page-locked host
//! buffers, staging buffers — alive until a synchronization has shown that ticket complete, or
//! the backend reported the operation complete as it was enqueued (`Enqueued::Completed`). Host
//! buffers also record the ticket (see `memory::PendingUses`), so host code that touches them
//! waits for exactly the streams that may still use them. Dropping a stream synchronizes it.

use crate::backend::{Enqueued, StreamHandle};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::{Access, KeepAlive, PendingUses, WorkQueue};
use smallvec::SmallVec;
use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

mod callback;
mod event;
mod host_memory;
mod per_thread;
mod staging;

pub use event::Event;
pub use host_memory::{HostDestination, HostSource};
pub(crate) use host_memory::{HostMemory, HostMemoryMut, LockedMemory, Sealed};

impl Device {
    /// Waits for all work on all streams of this device (Numba's `cuda.synchronize()`); what the
    /// streams' finished work kept alive (memory of dropped arrays, staging buffers) goes too.
    pub fn synchronize(&self) -> Result<()> {
        // Each stream's count is read before the device is waited for: the work counted then is
        // complete after it. (Without the submission lock: a submission publishes its ticket
        // only once its work is enqueued, and the caller may be inside one, in
        // `enqueue_external`.)
        let streams: Vec<(Arc<StreamInner>, u64)> = streams_of(self)
            .into_iter()
            .map(|inner| {
                let target = inner.submitted.load(Ordering::Acquire);
                (inner, target)
            })
            .collect();
        self.backend().synchronize(self.ordinal())?;
        for (inner, target) in streams {
            inner.mark_complete_if_free(target);
        }
        Ok(())
    }

    /// Creates a stream on this device (Numba's `cuda.stream()`).
    pub fn stream(&self) -> Result<Stream> {
        Stream::new(self)
    }

    /// Creates an event (Numba's `cuda.event(timing)`).
    pub fn event(&self, timing: bool) -> Result<Event> {
        Event::new(self, timing)
    }
}

/// The bookkeeping of every live stream, for what concerns all streams of a device: a device-wide
/// synchronization completes their work, and an allocation that finds the device (or the
/// page-locked limit) full first waits for the work that keeps dropped memory alive.
static LIVE_STREAMS: Mutex<Vec<Weak<StreamInner>>> = Mutex::new(Vec::new());

fn live_streams() -> MutexGuard<'static, Vec<Weak<StreamInner>>> {
    crate::sync::lock(&LIVE_STREAMS)
}

/// The live streams of `device`.
fn streams_of(device: &Device) -> Vec<Arc<StreamInner>> {
    // Upgraded under the lock, sorted out after it: a stream whose last other reference went
    // meanwhile is dropped here (destroying its handle), which must not happen under the lock.
    let live: Vec<Arc<StreamInner>> = live_streams().iter().filter_map(Weak::upgrade).collect();
    live.into_iter()
        .filter(|inner| inner.device.same_as(device))
        .collect()
}

/// Waits for the work of `device`'s streams that keeps memory alive whose arrays are gone
/// (dropped while work on them was enqueued), which then goes; `true` when there was any. Called
/// when an allocation finds no room, before it tries once more, as Numba frees its pending
/// deallocations then (registered with `memory::set_reclaim` as streams are created). Work
/// that only uses memory still held elsewhere is not waited for (it would free nothing), nor is
/// a stream whose bookkeeping is busy (the caller may be inside that stream's
/// `enqueue_external`). A failure of that work stays for its stream's owner. The staging
/// buffers a stream keeps for its pageable copies go too, once no copy uses them.
fn release_kept_memory(device: &Device) -> bool {
    let mut released = false;
    for inner in streams_of(device) {
        let worth_it = match crate::sync::try_lock(&inner.keep_alive) {
            Some(list) => keeps_dropped_memory(&list),
            None => false,
        };
        let staging_in_use = crate::sync::try_lock(&inner.staging)
            .is_some_and(|kept| kept.iter().any(|buffer| Arc::strong_count(buffer) > 1));
        if worth_it || staging_in_use {
            // (An error is kept for the stream's owner, see `StreamInner::synchronize`.)
            let _ = inner.synchronize();
            released = true;
        }
        released |= inner.release_idle_staging() > 0;
    }
    released
}

/// Whether some memory in `list` is held by nothing else (its arrays were dropped).
fn keeps_dropped_memory(list: &[(u64, KeepAlive)]) -> bool {
    list.iter().any(|(_, kept)| match kept {
        KeepAlive::Storage(crate::memory::Storage::Device(alloc)) => {
            Arc::strong_count(alloc) == count_holds(list, alloc)
        }
        KeepAlive::Storage(crate::memory::Storage::Mapped(buffer)) | KeepAlive::Host(buffer) => {
            Arc::strong_count(buffer) == count_host_holds(list, buffer)
        }
        _ => false,
    })
}

/// `StreamInner::settled` after work the tickets do not count: equal to no submission count.
const UNSETTLED: u64 = u64::MAX;

/// The shared part of a stream: handle, tickets and what in-flight work keeps alive.
pub(crate) struct StreamInner {
    device: Device,
    handle: StreamHandle,
    /// Tickets handed out so far.
    submitted: AtomicU64,
    /// Every ticket up to this one is known to be complete.
    completed: AtomicU64,
    /// Resources used by in-flight work, with the ticket after which they may be released.
    keep_alive: Mutex<Vec<(u64, KeepAlive)>>,
    /// The latest failure of enqueued work not yet returned by [`Stream::synchronize`].
    unreported: Mutex<Option<String>>,
    /// Whether `unreported` may hold something (read without the lock on every synchronize).
    has_unreported: AtomicBool,
    /// The ticket of the latest operation the backend reported [`Enqueued::Completed`] (0 for a
    /// new stream); while it is also the latest submitted, the stream is idle with nothing kept
    /// and nothing to report, and [`Stream::synchronize`] returns without asking the backend.
    /// Anything else put on the handle (an event recorded or waited for, a stream-ordered
    /// allocation) sets it to [`UNSETTLED`].
    settled: AtomicU64,
    /// Set once the handle may carry work gpu-mem does not know of (it was handed out, or the
    /// stream was adopted): every synchronization then asks the backend.
    handle_shared: AtomicBool,
    /// `Some` for a stream adopted with [`Stream::from_raw_handle`]: what keeps the foreign
    /// handle alive. Such a handle is never destroyed by gpu-mem; the owner is dropped with this
    /// value (after the stream's last synchronization), or leaked with it when that failed.
    owner: Option<KeepAlive>,
    /// Where [`Stream::add_callback`] sends callbacks, once the stream has a callback thread.
    callbacks: Mutex<Option<std::sync::mpsc::Sender<callback::Pending>>>,
    /// Page-locked buffers of pageable copies, kept for reuse (`staging`).
    staging: Mutex<Vec<Arc<crate::memory::HostBuffer>>>,
}

impl fmt::Debug for StreamInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.device)
            .field("handle", &format_args!("{:#x}", self.handle.0))
            .field("submitted", &self.submitted.load(Ordering::Relaxed))
            .field("completed", &self.completed.load(Ordering::Relaxed))
            .field("borrowed", &self.owner.is_some())
            .finish()
    }
}

impl WorkQueue for StreamInner {
    fn is_done(&self, ticket: u64) -> bool {
        self.completed.load(Ordering::Acquire) >= ticket
    }

    /// Waits until `ticket` is complete (by synchronizing the stream if it is not known to be).
    fn wait_ticket(&self, ticket: u64) -> Result<()> {
        if self.is_done(ticket) {
            return Ok(());
        }
        self.synchronize()
    }
}

impl StreamInner {
    pub(crate) fn synchronize(&self) -> Result<()> {
        // Read the target under the submission lock: an operation whose uses are already
        // recorded on host buffers is then counted, so waiting for its ticket cannot return
        // before it was enqueued.
        let (target, nothing_kept) = {
            let submitting = self.lock_keep_alive();
            (
                self.submitted.load(Ordering::Acquire),
                submitting.is_empty(),
            )
        };
        // SAFETY: `handle` came from `stream_create` on this device and is destroyed only when
        // this inner value is dropped (`StreamInner`'s drop), not while `self` is borrowed.
        let result = unsafe {
            self.device
                .backend()
                .stream_synchronize(self.device.ordinal(), self.handle)
        };
        // `Ok(())` is rebuilt rather than `result` moved: the error type is large, and a result
        // written piece by piece by the callee and then copied out whole stalls.
        let error = match result {
            Ok(()) => {
                self.mark_complete(target, nothing_kept);
                return Ok(());
            }
            Err(error) => error,
        };
        if let Error::AsyncFailure { reason, .. } = &error {
            // A failure of enqueued work is reported once that work has finished: the stream is
            // idle either way, so what it kept alive can go.
            self.mark_complete(target, nothing_kept);
            // Whoever synchronized (perhaps host code reaching a buffer) gets the error; keep it
            // for the stream's owner too, so `Stream::synchronize` does not report success.
            *crate::sync::lock(&self.unreported) = Some(reason.clone());
            self.has_unreported.store(true, Ordering::Release);
        }
        Err(error)
    }

    /// Records that every ticket up to `target` is complete and releases what they kept.
    fn mark_complete(&self, target: u64, nothing_kept: bool) {
        // Plain loads first: after operations that completed as they were enqueued there is
        // nothing to raise or release (no locked instruction, no lock).
        if self.completed.load(Ordering::Acquire) < target {
            self.completed.fetch_max(target, Ordering::AcqRel);
        }
        if !nothing_kept {
            self.release_completed(target);
        }
    }

    /// As [`StreamInner::mark_complete`], releasing what the work kept only if the bookkeeping
    /// is free now (a busy one keeps it for the stream's next synchronization).
    fn mark_complete_if_free(&self, target: u64) {
        if self.completed.load(Ordering::Acquire) < target {
            self.completed.fetch_max(target, Ordering::AcqRel);
        }
        let released: Vec<(u64, KeepAlive)> = match self.keep_alive.try_lock() {
            Ok(mut list) => {
                let done = list.partition_point(|(t, _)| *t <= target);
                list.drain(..done).collect()
            }
            Err(_) => return,
        };
        // Dropped outside the lock: releasing may free device or host memory.
        drop(released);
    }

    fn release_completed(&self, upto: u64) {
        let mut released: SmallVec<[(u64, KeepAlive); 4]> = SmallVec::new();
        {
            let mut list = self.lock_keep_alive();
            // Entries are pushed in ticket order: the completed ones are a prefix. (The list
            // keeps its capacity: no allocation per operation.)
            let done = list.partition_point(|(t, _)| *t <= upto);
            for entry in list.drain(..done) {
                released.push(entry);
            }
        }
        // Dropped outside the lock: releasing may free device or host memory.
        drop(released);
    }

    /// Whether every reference to `alloc` but the caller's one is this stream's own in-flight
    /// work. Counted and compared under the keep-alive lock: entries leave the list only under
    /// it, and one that left but is not dropped yet still counts in `strong_count` (so the
    /// answer can only be a cautious "no"), never the other way round, as it could if the list
    /// were counted first and the references read after the lock was released.
    pub(crate) fn only_this_stream_holds(&self, alloc: &Arc<crate::memory::DeviceAlloc>) -> bool {
        let list = self.lock_keep_alive();
        Arc::strong_count(alloc) == 1 + count_holds(&list, alloc)
    }

    /// Keeps `keep` alive until the stream's next synchronization that covers work enqueued on
    /// its handle *now*: an empty operation with a ticket of its own. For work another library
    /// put on the handle after its gpu-mem submission (a grouped NCCL call is issued at the
    /// group's end), whose earlier ticket a synchronization inside the group may have passed.
    #[cfg_attr(not(feature = "collectives"), allow(dead_code))]
    pub(crate) fn keep_until_synchronized(&self, keep: Vec<KeepAlive>) {
        let mut list = self.lock_keep_alive();
        let ticket = self.submitted.load(Ordering::Acquire) + 1;
        self.submitted.store(ticket, Ordering::Release);
        self.settled.store(UNSETTLED, Ordering::Release);
        list.extend(keep.into_iter().map(|k| (ticket, k)));
    }

    fn lock_keep_alive(&self) -> MutexGuard<'_, Vec<(u64, KeepAlive)>> {
        crate::sync::lock(&self.keep_alive)
    }
}

/// How many entries of `list` keep `buffer` alive.
fn count_host_holds(list: &[(u64, KeepAlive)], buffer: &Arc<crate::memory::HostBuffer>) -> usize {
    list.iter()
        .filter(|(_, k)| match k {
            KeepAlive::Host(b) | KeepAlive::Storage(crate::memory::Storage::Mapped(b)) => {
                Arc::ptr_eq(b, buffer)
            }
            _ => false,
        })
        .count()
}

/// How many entries of `list` keep `alloc` alive.
fn count_holds(list: &[(u64, KeepAlive)], alloc: &Arc<crate::memory::DeviceAlloc>) -> usize {
    list.iter()
        .filter(|(_, k)| {
            matches!(k, KeepAlive::Storage(crate::memory::Storage::Device(a)) if Arc::ptr_eq(a, alloc))
        })
        .count()
}

/// An ordered queue of asynchronous device work (Numba's `cuda.stream()`).
///
/// Async operations are methods of the stream (`to_device`, `copy_to_host`, ...). They return
/// once the work is enqueued; their results are visible after [`Stream::synchronize`] — and host
/// buffers they use cannot be touched before that from safe code: accessing such a buffer waits
/// for the stream. Dropping a `Stream` waits for its work.
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl Stream {
    /// Creates a stream on `device`.
    pub fn new(device: &Device) -> Result<Stream> {
        let handle = device.backend().stream_create(device.ordinal())?;
        Ok(Stream::with_handle(device, handle, None))
    }

    /// A gpu-mem stream over a stream handle another library (or another gpu-mem [`Stream`])
    /// created, without taking it over: `owner` — an `Arc<cudarc::driver::CudaStream>`, a guard
    /// of the foreign library, another `Arc<Stream>` — is kept alive exactly as long as the
    /// returned stream and dropped after it. Everything else is as for [`Stream::new`]: work is
    /// enqueued on `handle`, what it uses is kept alive until a synchronization shows it done,
    /// and dropping the stream synchronizes it. Dropping it never destroys `handle`; it then
    /// drops `owner` (or leaks it, with the stream's bookkeeping, when that last synchronization
    /// fails with anything but a failure of the work itself, as [`Stream`]'s drop does).
    ///
    /// # Safety
    /// 1. `handle` is a live stream of `device` that `device`'s backend accepts wherever it
    ///    accepts a handle from its own stream creation: on CUDA any `CUstream` of the device's
    ///    primary context (the legacy default stream, null, included; the per-thread stream
    ///    `0x2` is not, since which stream it names depends on the calling thread, and gpu-mem
    ///    synchronizes and drops from any thread); on ROC and the simulator, a handle created by
    ///    the same backend instance for the same device (e.g. another `Stream`'s
    ///    [`Stream::handle`]).
    /// 2. Nobody destroys the handle before `owner` is dropped (which gpu-mem does only after
    ///    the returned stream's last synchronization, so none of its work is in flight then).
    ///
    /// Work that others enqueue on the same handle is ordered with gpu-mem's by the stream
    /// itself; gpu-mem's synchronizations also wait for it, and its bookkeeping is not told of
    /// it (use [`Stream::enqueue_external`] to hand gpu-mem arrays to such work).
    pub unsafe fn from_raw_handle<O: Any + Send + Sync>(
        device: &Device,
        handle: StreamHandle,
        owner: O,
    ) -> Stream {
        Stream::with_handle(device, handle, Some(KeepAlive::Other(Box::new(owner))))
    }

    fn with_handle(device: &Device, handle: StreamHandle, owner: Option<KeepAlive>) -> Stream {
        let stream = Stream {
            inner: Arc::new(StreamInner {
                device: device.clone(),
                handle,
                submitted: AtomicU64::new(0),
                completed: AtomicU64::new(0),
                keep_alive: Mutex::new(Vec::new()),
                unreported: Mutex::new(None),
                has_unreported: AtomicBool::new(false),
                settled: AtomicU64::new(0),
                handle_shared: AtomicBool::new(owner.is_some()),
                owner,
                callbacks: Mutex::new(None),
                staging: Mutex::new(Vec::new()),
            }),
        };
        // Before the stream can keep anything alive: an allocation that finds no room may then
        // wait for its work.
        crate::memory::set_reclaim(release_kept_memory);
        let mut live = live_streams();
        live.retain(|weak| weak.strong_count() > 0);
        live.push(Arc::downgrade(&stream.inner));
        drop(live);
        stream
    }

    /// `false` for a stream adopted with [`Stream::from_raw_handle`], whose handle gpu-mem does
    /// not destroy.
    pub fn owns_handle(&self) -> bool {
        self.inner.owner.is_none()
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The backend's handle (for interop with native code). From then on gpu-mem assumes work
    /// it does not know of may be put on the stream, so each [`Stream::synchronize`] asks the
    /// backend.
    pub fn handle(&self) -> StreamHandle {
        self.inner.handle_shared.store(true, Ordering::Relaxed);
        self.inner.handle
    }

    pub(crate) fn inner(&self) -> &Arc<StreamInner> {
        &self.inner
    }

    /// Runs `put` — gpu-mem's own backend call that puts work on the stream outside
    /// [`Stream::submit`] (an event recorded or waited for, a stream-ordered allocation) — with
    /// the handle, then records that the tickets do not count that work: the next
    /// synchronization asks the backend. (After the call, so that an operation completed at
    /// enqueue in between, which implies the stream was idle, cannot hide it; `UNSETTLED` is
    /// no ticket, not even a fresh stream's 0.)
    ///
    /// The mark is stored under the submission lock: an operation submitted on another thread
    /// while `put` ran may be reported complete at enqueue, and `submit` stores its ticket as
    /// settled under that lock; storing after it keeps the mark, or the work `put` enqueued
    /// would go unwaited for. (Not `put` itself under the lock: it is a backend call that may
    /// take a while, and nothing it does needs the bookkeeping.)
    pub(crate) fn put_on_stream<R>(&self, put: impl FnOnce(StreamHandle) -> R) -> R {
        let result = put(self.inner.handle);
        let _submitting = self.inner.lock_keep_alive();
        self.inner.settled.store(UNSETTLED, Ordering::Release);
        result
    }

    /// Whether everything on the stream is known complete, kept nothing and failed nowhere:
    /// the latest operation was reported complete at enqueue (so the stream was idle then), and
    /// nothing else was put on the handle since. Submissions racing with this check on other
    /// threads are not waited for, as with any synchronization.
    fn is_settled(&self) -> bool {
        let inner = &*self.inner;
        let submitted = inner.submitted.load(Ordering::Acquire);
        inner.settled.load(Ordering::Acquire) == submitted
            && !inner.handle_shared.load(Ordering::Relaxed)
            && !inner.has_unreported.load(Ordering::Acquire)
    }

    /// Blocks until all enqueued work has completed, then releases what it kept alive.
    pub fn synchronize(&self) -> Result<()> {
        if self.is_settled() {
            return Ok(());
        }
        let result = self.inner.synchronize();
        // A plain load first: the swap (a locked instruction) only when there is something.
        let unreported = if self.inner.has_unreported.load(Ordering::Acquire)
            && self.inner.has_unreported.swap(false, Ordering::AcqRel)
        {
            crate::sync::lock(&self.inner.unreported).take()
        } else {
            None
        };
        match (result, unreported) {
            // Rebuilt, not moved (see `StreamInner::synchronize`).
            (Ok(()), None) => Ok(()),
            (Ok(()), Some(reason)) => Err(Error::AsyncFailure {
                operation: "earlier work",
                stream: self.inner.handle.0,
                reason,
            }),
            (Err(error), _) => Err(error),
        }
    }

    /// `true` when all enqueued work has completed (Numba's `Stream.query`, CUDA's
    /// `cuStreamQuery`). Does not block. When that work has completed with a failure, the
    /// failure is the error (as `cuStreamQuery` returns it), on every query until the stream's
    /// [`Stream::synchronize`] reports it.
    pub fn query(&self) -> Result<bool> {
        let target = self.inner.submitted.load(Ordering::Acquire);
        // SAFETY: the handle is live for as long as `inner` is (see `StreamInner::synchronize`).
        let queried = unsafe {
            self.inner
                .device
                .backend()
                .stream_query(self.inner.device.ordinal(), self.inner.handle)
        };
        let done = match queried {
            Ok(done) => done,
            Err(error) => {
                if let Error::AsyncFailure { .. } = error {
                    // The work is over (it failed): what it kept can go.
                    self.inner.mark_complete(target, false);
                }
                return Err(error);
            }
        };
        if done {
            self.inner.completed.fetch_max(target, Ordering::AcqRel);
            self.inner.release_completed(target);
        }
        Ok(done)
    }

    /// A guard that synchronizes the stream when it goes out of scope normally (Numba's
    /// `auto_synchronize()`); during a panic it does not synchronize, as Numba skips the sync when
    /// the `with` body raises. Call [`AutoSynchronize::finish`] to get the synchronization error.
    pub fn auto_synchronize(&self) -> AutoSynchronize<'_> {
        AutoSynchronize {
            stream: self,
            finished: false,
        }
    }

    /// Records a new timing event at the current end of the stream (Numba's
    /// `cuda.event()`, whose default is `timing=True`, then `event.record(stream)`): one that
    /// [`Event::elapsed_since`] can measure from.
    pub fn record_event(&self) -> Result<Event> {
        self.record_event_with(true)
    }

    /// Records a new event at the current end of the stream, timed only if `timing` (Numba's
    /// `cuda.event(timing=timing)`). An event used only to order streams or to wait for work
    /// should not ask for timing: a GPU records it more cheaply.
    pub fn record_event_with(&self, timing: bool) -> Result<Event> {
        let event = Event::new(self.device(), timing)?;
        event.record(self)?;
        Ok(event)
    }

    /// Makes later work on this stream wait for `event` (Numba's `event.wait(stream)`).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.device().check_same(event.device(), "event")?;
        let device = &self.inner.device;
        // The wait is work on the stream that synchronizing it must wait for.
        self.put_on_stream(|stream| {
            // SAFETY: both handles are live (each is destroyed only when its owner drops, and
            // both owners are borrowed here) and belong to this device (checked above).
            unsafe {
                device
                    .backend()
                    .stream_wait_event(device.ordinal(), stream, event.handle())
            }
        })
    }

    /// Runs `enqueue` (which enqueues exactly one operation on this stream), records the
    /// operation's `uses` of host buffers first (so no host access can slip in between; `None`
    /// stands for storage without a host side, and is skipped), and keeps
    /// what `keep` returns alive until the operation has completed. Returns the operation's
    /// ticket.
    ///
    /// An operation the backend reports [`Enqueued::Completed`] marks its ticket complete at once
    /// (the backend promises every earlier operation on the stream is complete too), so host
    /// code reaching its buffers does not wait, and `keep` is never called: nothing needs keeping.
    pub(crate) fn submit<K: IntoIterator<Item = KeepAlive>>(
        &self,
        keep: impl FnOnce() -> K,
        uses: &[Option<(&PendingUses, Access)>],
        enqueue: impl FnOnce(StreamHandle) -> Result<Enqueued>,
    ) -> Result<u64> {
        // Hold the list lock across record + enqueue + ticket so tickets follow enqueue order and
        // `synchronize` never sees a recorded use without its submission.
        let mut list = self.inner.lock_keep_alive();
        let ticket = self.inner.submitted.load(Ordering::Acquire) + 1;
        let mut undo: SmallVec<[_; 4]> = SmallVec::new();
        for (pending, access) in uses.iter().flatten() {
            undo.push(pending.record(&self.inner, ticket, *access));
        }
        let enqueued = match enqueue(self.inner.handle) {
            Ok(enqueued) => enqueued,
            Err(error) => {
                for ((pending, _), undo) in uses.iter().flatten().zip(undo) {
                    pending.forget(&self.inner, ticket, undo);
                }
                return Err(error);
            }
        };
        self.inner.submitted.store(ticket, Ordering::Release);
        match enqueued {
            Enqueued::Queued => list.extend(keep().into_iter().map(|k| (ticket, k))),
            Enqueued::Completed => {
                // A store, not `fetch_max`: under the list lock, every other writer raises the
                // count to a ticket already handed out, which is below this one.
                self.inner.completed.store(ticket, Ordering::Release);
                self.inner.settled.store(ticket, Ordering::Release);
                // Every earlier operation is complete too: what they kept can go (dropped
                // outside the lock, as in `release_completed`).
                if !list.is_empty() {
                    let released: Vec<(u64, KeepAlive)> = std::mem::take(&mut *list);
                    drop(list);
                    drop(released);
                }
            }
        }
        Ok(ticket)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        match self.synchronize() {
            Ok(()) => {}
            // The work failed but has finished: report the failure and release as usual.
            Err(error @ Error::AsyncFailure { .. }) => {
                self.inner.device.report_release_error("stream work", error);
            }
            Err(error) => {
                self.inner
                    .device
                    .report_release_error("stream synchronize", error);
                // The work may still be running: keep the stream's bookkeeping (and so every
                // host buffer's wait on it) and what the work uses alive for good rather than
                // free memory under it.
                std::mem::forget(Arc::clone(&self.inner));
            }
        }
        // The handle itself is destroyed with the bookkeeping (`StreamInner`'s drop): host code
        // reaching a buffer of this stream's work may hold that a little longer, and synchronize
        // the handle meanwhile.
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.owner.is_some() {
            // Adopted: the handle is its owner's to destroy; the owner is dropped right after
            // this function (the stream's work is complete).
            return;
        }
        // The stream's work is complete: `Stream`'s drop synchronized it, and a stream whose
        // synchronization failed otherwise is never dropped (its bookkeeping is leaked); no
        // work is put on a stream after its `Stream` is gone.
        // SAFETY: the handle came from `stream_create` on this device and is destroyed only
        // here, when nothing can reach it any more, its work complete (above).
        let result = unsafe {
            self.device
                .backend()
                .stream_destroy(self.device.ordinal(), self.handle)
        };
        if let Err(error) = result {
            self.device.report_release_error("stream destroy", error);
        }
    }
}

impl Event {
    /// Records the event at the current end of `stream` (Numba's `event.record(stream)`).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.device().check_same(stream.device(), "stream")?;
        // Synchronizing the stream must leave the event complete too.
        stream.put_on_stream(|handle| {
            // SAFETY: the event's handle lives as long as `self`, the stream's as long as
            // `stream` (both borrowed here), and both belong to this device (checked above).
            unsafe { self.record_on(handle) }
        })
    }

    /// Makes `stream` wait for this event (Numba's `event.wait(stream)`).
    pub fn wait(&self, stream: &Stream) -> Result<()> {
        stream.wait_event(self)
    }
}

/// Synchronizes its stream on scope exit; see [`Stream::auto_synchronize`].
#[derive(Debug)]
pub struct AutoSynchronize<'a> {
    stream: &'a Stream,
    finished: bool,
}

impl AutoSynchronize<'_> {
    /// The stream.
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// Synchronizes now and returns its result.
    pub fn finish(mut self) -> Result<()> {
        self.finished = true;
        self.stream.synchronize()
    }
}

impl std::ops::Deref for AutoSynchronize<'_> {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        self.stream
    }
}

impl Drop for AutoSynchronize<'_> {
    fn drop(&mut self) {
        if self.finished || std::thread::panicking() {
            return;
        }
        if let Err(error) = self.stream.synchronize() {
            self.stream
                .device()
                .report_release_error("auto_synchronize", error);
        }
    }
}
