//! Collective communication over gpu-mem arrays and streams: a [`Communicator`] per rank, and
//! NCCL's calls on it — [`all_reduce`](Communicator::all_reduce), [`reduce`](Communicator::reduce),
//! [`broadcast`](Communicator::broadcast), [`all_gather`](Communicator::all_gather),
//! [`reduce_scatter`](Communicator::reduce_scatter), [`send`](Communicator::send) /
//! [`recv`](Communicator::recv) — each with an in-place form, and [`group`] for calls issued
//! together.
//!
//! The engine is NCCL on CUDA and RCCL on ROC, loaded at run time like the drivers; on the
//! simulator, a model of NCCL's contract between simulated devices of one process. gpu-mem adds
//! no network layer of its own: it makes the engines as checked as its copies.
//!
//! # Contract
//!
//! * **Checked before anything is enqueued.** The element type is NCCL's
//!   ([`CollectiveElement`]: a type NCCL lacks does not compile); every array is on the
//!   communicator's device, in device memory (not mapped host memory), one contiguous block (C
//!   or Fortran order), and of the size the call needs (equal sizes for an all-reduce, `ranks`
//!   times the part for the gathering and scattering calls); an out-of-place destination does
//!   not partly overlap its source. A failed check is an [`Error::Collective`] naming the call
//!   and the rank.
//! * **Stream order and lifetimes.** A call is work of the stream it is given, ordered after
//!   that stream's earlier work; the stream keeps the arrays alive until a synchronization has
//!   shown the call complete, exactly as for copies. Calls in a [`group`] are issued by the
//!   engine at the group's end, and the arrays are kept until the stream's next
//!   synchronization after that.
//! * **Every rank calls.** As in NCCL, each call must be made by every rank of the
//!   communicator (send and receive by the pair), in the same order, with the same sizes, type,
//!   reduction and root. One thread driving several ranks groups the calls ([`group`]), or NCCL
//!   waits for ever. The simulator reports mismatches, and a rank that never calls (after a
//!   timeout), as the stream's [`Error::AsyncFailure`]; NCCL's own checks are NCCL's.
//! * **One call at a time per communicator**, as NCCL requires: a communicator serialises the
//!   calls made through it (so sharing one between threads is safe, if slow).

use crate::array::DeviceArray;
use crate::backend::{
    Backend, CollectiveCall, Collectives, CommHandle, DevicePtr, Enqueued, require,
};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::memory::{KeepAlive, Storage};
use crate::stream::{Stream, StreamInner};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

pub use crate::backend::{CollectiveType, ReduceOp, UNIQUE_ID_BYTES, UniqueId};

/// An element type NCCL reduces and moves. Implemented for `i8`, `u8`, `i32`, `u32`, `i64`,
/// `u64`, `f32` and `f64`:
///
/// ```no_run
/// # use gpu_mem_core::collective::Communicator;
/// # fn f(c: &Communicator, s: &gpu_mem_core::Stream, a: &mut gpu_mem_core::DeviceArray<f32>) {
/// c.all_reduce_in_place(s, a, gpu_mem_core::backend::ReduceOp::Sum);
/// # }
/// ```
///
/// a type NCCL lacks is refused at compile time:
///
/// ```compile_fail
/// # use gpu_mem_core::collective::Communicator;
/// # fn f(c: &Communicator, s: &gpu_mem_core::Stream, a: &mut gpu_mem_core::DeviceArray<i16>) {
/// c.all_reduce_in_place(s, a, gpu_mem_core::backend::ReduceOp::Sum);
/// # }
/// ```
pub trait CollectiveElement: Element {
    /// NCCL's type for `Self`.
    const TYPE: CollectiveType;
}

macro_rules! collective_elements {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl CollectiveElement for $t {
            const TYPE: CollectiveType = CollectiveType::$v;
        })*
    };
}

collective_elements!(
    i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64,
);

/// The collectives capability of `device`'s backend, or the error naming what is missing.
fn engine_of(device: &Device) -> Result<&dyn Collectives> {
    let backend = device.backend();
    require(backend.as_ref(), backend.collectives(), "collectives")
}

/// The engine behind `device`'s collectives and its version ("NCCL 2.32.3"), or why it cannot
/// be used (no engine for the backend, the library missing or too old).
pub fn engine(device: &Device) -> Result<String> {
    engine_of(device)?.engine()
}

impl UniqueId {
    /// A new id from `device`'s engine (`ncclGetUniqueId`), for
    /// [`Communicator::init_rank`]: made by one rank and sent to the others (see
    /// [`UniqueId::to_hex`] and [`UniqueId::to_bytes`]).
    pub fn generate(device: &Device) -> Result<UniqueId> {
        engine_of(device)?.unique_id()
    }
}

/// One rank of a communicator: the device it runs on, its rank and the number of ranks.
/// Dropping it destroys the engine's communicator (`ncclCommDestroy`).
#[derive(Debug)]
pub struct Communicator {
    device: Device,
    handle: CommHandle,
    rank: usize,
    nranks: usize,
    /// Held across each call: NCCL communicators take one call at a time.
    calls: Mutex<()>,
}

impl Communicator {
    /// One communicator over `devices` of this process (`ncclCommInitAll`): rank `i` runs on
    /// `devices[i]`. The devices belong to one backend and are distinct.
    pub fn init_all(devices: &[Device]) -> Result<Vec<Communicator>> {
        let fail = |reason: String| Error::Collective {
            call: "ncclCommInitAll",
            rank: 0,
            nranks: devices.len(),
            reason,
        };
        let Some(first) = devices.first() else {
            return Err(fail("no devices given".into()));
        };
        for (i, d) in devices.iter().enumerate() {
            if !first.same_backend(d) {
                return Err(fail(format!("device {i} belongs to another backend")));
            }
            if devices[..i].iter().any(|e| e.same_as(d)) {
                return Err(fail(format!(
                    "device {} is given twice (one rank per device)",
                    d.ordinal()
                )));
            }
        }
        let ordinals: Vec<usize> = devices.iter().map(Device::ordinal).collect();
        let handles = engine_of(first)?
            .comm_init_all(&ordinals)
            .map_err(|e| wrap("ncclCommInitAll", 0, devices.len(), e))?;
        if handles.len() != devices.len() {
            return Err(fail(format!(
                "the engine made {} communicators for {} devices",
                handles.len(),
                devices.len()
            )));
        }
        Ok(handles
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (handle, device))| Communicator {
                device: device.clone(),
                handle,
                rank,
                nranks: devices.len(),
                calls: Mutex::new(()),
            })
            .collect())
    }

    /// Joins rank `rank` of `nranks` of the communicator named by `id` on `device`
    /// (`ncclCommInitRank`); returns once all ranks have joined. One process (or thread) per
    /// rank; `id` comes from [`UniqueId::generate`] on one of them.
    pub fn init_rank(
        device: &Device,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<Communicator> {
        if nranks == 0 || rank >= nranks {
            return Err(Error::Collective {
                call: "ncclCommInitRank",
                rank,
                nranks,
                reason: format!("rank {rank} is not below the number of ranks ({nranks})"),
            });
        }
        let handle = engine_of(device)?
            .comm_init_rank(device.ordinal(), id, nranks, rank)
            .map_err(|e| wrap("ncclCommInitRank", rank, nranks, e))?;
        Ok(Communicator {
            device: device.clone(),
            handle,
            rank,
            nranks,
            calls: Mutex::new(()),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.nranks
    }

    /// The device this rank runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `Ok` while the communicator is usable; the error that made it unusable otherwise
    /// (`ncclCommGetAsyncError`: a peer gone or a network failure after the calls were
    /// enqueued; on the simulator, a rank that never called). NCCL reports such errors here,
    /// not through the streams, which may then never complete: a program waiting on work across
    /// nodes polls this (or `Stream::query`) rather than blocking in `synchronize`.
    pub fn check(&self) -> Result<()> {
        let engine = engine_of(&self.device)?;
        // SAFETY: the handle came from an init call of this backend for this device and is
        // destroyed only when `self` drops.
        unsafe { engine.comm_check(self.device.ordinal(), self.handle) }
            .map_err(|e| wrap("ncclCommGetAsyncError", self.rank, self.nranks, e))
    }

    /// `recv` = `op` over every rank's `send` (`ncclAllReduce`); both have the same size.
    pub fn all_reduce<T: CollectiveElement>(
        &self,
        stream: &Stream,
        send: &DeviceArray<T>,
        recv: &mut DeviceArray<T>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "ncclAllReduce";
        let (s, r) = self.pair(CALL, send, recv, 1, 1)?;
        let call = CollectiveCall::AllReduce {
            send: s,
            recv: r,
            count: send.size(),
            op,
        };
        self.run(stream, call, T::TYPE, &[send.storage(), recv.storage()])
    }

    /// [`Communicator::all_reduce`] in place: `buf` = `op` over every rank's `buf`.
    pub fn all_reduce_in_place<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let p = self.buffer("ncclAllReduce", buf, "buf")?;
        let call = CollectiveCall::AllReduce {
            send: p,
            recv: p,
            count: buf.size(),
            op,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// `recv` of rank `root` = `op` over every rank's `send` (`ncclReduce`). Every rank passes
    /// a `recv` of `send`'s size; only the root's is written.
    pub fn reduce<T: CollectiveElement>(
        &self,
        stream: &Stream,
        send: &DeviceArray<T>,
        recv: &mut DeviceArray<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclReduce";
        self.check_rank(CALL, root, "root")?;
        let (s, r) = self.pair(CALL, send, recv, 1, 1)?;
        let call = CollectiveCall::Reduce {
            send: s,
            recv: r,
            count: send.size(),
            op,
            root,
        };
        self.run(stream, call, T::TYPE, &[send.storage(), recv.storage()])
    }

    /// [`Communicator::reduce`] in place: `buf` of `root` = `op` over every rank's `buf`.
    pub fn reduce_in_place<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclReduce";
        self.check_rank(CALL, root, "root")?;
        let p = self.buffer(CALL, buf, "buf")?;
        let call = CollectiveCall::Reduce {
            send: p,
            recv: p,
            count: buf.size(),
            op,
            root,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// Every rank's `recv` = `send` of rank `root` (`ncclBroadcast`); every rank passes a
    /// `send` of `recv`'s size, only the root's is read.
    pub fn broadcast<T: CollectiveElement>(
        &self,
        stream: &Stream,
        send: &DeviceArray<T>,
        recv: &mut DeviceArray<T>,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclBroadcast";
        self.check_rank(CALL, root, "root")?;
        let (s, r) = self.pair(CALL, send, recv, 1, 1)?;
        let call = CollectiveCall::Broadcast {
            send: s,
            recv: r,
            count: send.size(),
            root,
        };
        self.run(stream, call, T::TYPE, &[send.storage(), recv.storage()])
    }

    /// [`Communicator::broadcast`] in place: every rank's `buf` = `buf` of `root`.
    pub fn broadcast_in_place<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclBroadcast";
        self.check_rank(CALL, root, "root")?;
        let p = self.buffer(CALL, buf, "buf")?;
        let call = CollectiveCall::Broadcast {
            send: p,
            recv: p,
            count: buf.size(),
            root,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// `recv` = every rank's `send`, one after another in rank order (`ncclAllGather`): `recv`
    /// has `size()` times `send`'s elements.
    pub fn all_gather<T: CollectiveElement>(
        &self,
        stream: &Stream,
        send: &DeviceArray<T>,
        recv: &mut DeviceArray<T>,
    ) -> Result<()> {
        let (s, r) = self.pair("ncclAllGather", send, recv, 1, self.nranks)?;
        let call = CollectiveCall::AllGather {
            send: s,
            recv: r,
            count: send.size(),
        };
        self.run(stream, call, T::TYPE, &[send.storage(), recv.storage()])
    }

    /// [`Communicator::all_gather`] in place: this rank's part is already at part `rank()` of
    /// `buf` (whose size is a multiple of `size()`), and the other parts are filled in.
    pub fn all_gather_in_place<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllGather";
        let (p, part) = self.parts(CALL, buf)?;
        let call = CollectiveCall::AllGather {
            send: self.part_ptr(CALL, p, part, T::itemsize())?,
            recv: p,
            count: part,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// `recv` = part `rank()` of `op` over every rank's `send` (`ncclReduceScatter`): `send`
    /// has `size()` times `recv`'s elements.
    pub fn reduce_scatter<T: CollectiveElement>(
        &self,
        stream: &Stream,
        send: &DeviceArray<T>,
        recv: &mut DeviceArray<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let (s, r) = self.pair("ncclReduceScatter", send, recv, self.nranks, 1)?;
        let call = CollectiveCall::ReduceScatter {
            send: s,
            recv: r,
            count: recv.size(),
            op,
        };
        self.run(stream, call, T::TYPE, &[send.storage(), recv.storage()])
    }

    /// [`Communicator::reduce_scatter`] in place: the result lands in part `rank()` of `buf`
    /// (whose size is a multiple of `size()`); the other parts are left as they were.
    pub fn reduce_scatter_in_place<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "ncclReduceScatter";
        let (p, part) = self.parts(CALL, buf)?;
        let call = CollectiveCall::ReduceScatter {
            send: p,
            recv: self.part_ptr(CALL, p, part, T::itemsize())?,
            count: part,
            op,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// Sends `buf` to rank `peer` (`ncclSend`), which receives it with
    /// [`Communicator::recv`] of the same size and type.
    pub fn send<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &DeviceArray<T>,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclSend";
        self.check_rank(CALL, peer, "peer")?;
        let p = self.buffer(CALL, buf, "buf")?;
        let call = CollectiveCall::Send {
            buf: p,
            count: buf.size(),
            peer,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    /// Receives into `buf` what rank `peer` sends (`ncclRecv`).
    pub fn recv<T: CollectiveElement>(
        &self,
        stream: &Stream,
        buf: &mut DeviceArray<T>,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "ncclRecv";
        self.check_rank(CALL, peer, "peer")?;
        let p = self.buffer(CALL, buf, "buf")?;
        let call = CollectiveCall::Recv {
            buf: p,
            count: buf.size(),
            peer,
        };
        self.run(stream, call, T::TYPE, &[buf.storage()])
    }

    // ----- checks ----------------------------------------------------------------------------

    fn error(&self, call: &'static str, reason: String) -> Error {
        Error::Collective {
            call,
            rank: self.rank,
            nranks: self.nranks,
            reason,
        }
    }

    fn check_rank(&self, call: &'static str, rank: usize, what: &str) -> Result<()> {
        if rank < self.nranks {
            Ok(())
        } else {
            Err(self.error(
                call,
                format!("{what} {rank} is not a rank of this communicator"),
            ))
        }
    }

    /// The device address of `array`'s first element, after checking it is one contiguous
    /// block of device memory on this rank's device.
    fn buffer<T: Element>(
        &self,
        call: &'static str,
        array: &DeviceArray<T>,
        what: &str,
    ) -> Result<DevicePtr> {
        if !array.device().same_as(&self.device) {
            return Err(self.error(
                call,
                format!(
                    "`{what}` is on device {}, the communicator's rank runs on device {}",
                    array.device().ordinal(),
                    self.device.ordinal()
                ),
            ));
        }
        if array.storage().host_buffer().is_some() {
            return Err(self.error(
                call,
                format!("`{what}` is mapped host memory; collectives take device memory"),
            ));
        }
        if !(array.is_c_contiguous() || array.is_f_contiguous()) {
            return Err(self.error(
                call,
                format!(
                    "`{what}` (shape {:?}, strides {:?}) is not one contiguous block",
                    array.shape(),
                    array.strides()
                ),
            ));
        }
        Ok(array.span().0)
    }

    /// The addresses of `send` and `recv` once their sizes relate as `send_parts` to
    /// `recv_parts`, and `recv` does not partly overlap `send`.
    fn pair<T: Element>(
        &self,
        call: &'static str,
        send: &DeviceArray<T>,
        recv: &DeviceArray<T>,
        send_parts: usize,
        recv_parts: usize,
    ) -> Result<(DevicePtr, DevicePtr)> {
        let s = self.buffer(call, send, "send")?;
        let r = self.buffer(call, recv, "recv")?;
        let (ns, nr) = (send.size(), recv.size());
        if ns.checked_mul(recv_parts) != nr.checked_mul(send_parts) {
            let rule = match (send_parts, recv_parts) {
                (1, 1) => "the same size".to_string(),
                (1, n) => format!("`recv` {n} (the number of ranks) times `send`'s size"),
                (n, _) => format!("`send` {n} (the number of ranks) times `recv`'s size"),
            };
            return Err(self.error(
                call,
                format!("`send` has {ns} elements and `recv` {nr}; they need {rule}"),
            ));
        }
        if s != r
            && send.storage().same_as(recv.storage())
            && spans_intersect(send.span(), recv.span())
        {
            return Err(self.error(
                call,
                "`send` and `recv` overlap without being the same memory (use the in-place form)"
                    .into(),
            ));
        }
        Ok((s, r))
    }

    /// The address of `buf` and the size of one rank's part of it.
    fn parts<T: Element>(
        &self,
        call: &'static str,
        buf: &DeviceArray<T>,
    ) -> Result<(DevicePtr, usize)> {
        let p = self.buffer(call, buf, "buf")?;
        if !buf.size().is_multiple_of(self.nranks) {
            return Err(self.error(
                call,
                format!(
                    "`buf` has {} elements, not a multiple of the number of ranks ({})",
                    buf.size(),
                    self.nranks
                ),
            ));
        }
        Ok((p, buf.size() / self.nranks))
    }

    /// The address of this rank's part of `part` elements at `base`.
    fn part_ptr(
        &self,
        call: &'static str,
        base: DevicePtr,
        part: usize,
        itemsize: usize,
    ) -> Result<DevicePtr> {
        part.checked_mul(itemsize)
            .and_then(|b| b.checked_mul(self.rank))
            .and_then(|b| base.checked_add(b as u64))
            .ok_or_else(|| self.error(call, "the part's address overflows".into()))
    }

    /// Enqueues `call` on `stream`, keeping `storages` alive until it is done.
    fn run(
        &self,
        stream: &Stream,
        call: CollectiveCall,
        dtype: CollectiveType,
        storages: &[&Storage],
    ) -> Result<()> {
        let name = call.name();
        if !stream.device().same_as(&self.device) {
            return Err(self.error(
                name,
                format!(
                    "the stream is on device {}, this rank runs on device {}",
                    stream.device().ordinal(),
                    self.device.ordinal()
                ),
            ));
        }
        let engine = engine_of(&self.device)?;
        let _one_call = crate::sync::lock(&self.calls);
        let in_group = GROUP.with(|g| g.borrow().is_some());
        if in_group {
            group_join(&self.device).map_err(|e| wrap(name, self.rank, self.nranks, e))?;
        }
        let keep = || storages.iter().map(|s| s.keep_alive()).collect::<Vec<_>>();
        stream
            .submit(keep, &[], |handle| {
                // SAFETY: the communicator (live until `self` drops) and stream are this device's;
                // every range lies in the arrays checked above (device memory, not mapped), kept
                // alive by the stream until the work is complete (`submit`).
                unsafe { engine.enqueue(self.device.ordinal(), self.handle, &call, dtype, handle) }
                    .map(|()| Enqueued::Queued)
            })
            .map_err(|e| wrap(name, self.rank, self.nranks, e))?;
        if in_group {
            let kept = keep();
            GROUP.with(|g| {
                if let Some(state) = g.borrow_mut().as_mut() {
                    state.kept.push((Arc::clone(stream.inner()), kept));
                }
            });
        }
        Ok(())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let Ok(engine) = engine_of(&self.device) else {
            return;
        };
        // SAFETY: the handle came from an init call of this backend for this device, and is
        // destroyed only here, once; work still enqueued with it keeps its arrays alive through
        // its stream, and the engine finishes that work before it frees the communicator.
        if let Err(error) = unsafe { engine.comm_destroy(self.device.ordinal(), self.handle) } {
            self.device
                .report_release_error("communicator destroy", error);
        }
    }
}

/// Whether the byte ranges `(start, len)` of `a` and `b` share a byte.
fn spans_intersect(a: (DevicePtr, usize), b: (DevicePtr, usize)) -> bool {
    let (a0, a1) = (a.0.0, a.0.0.saturating_add(a.1 as u64));
    let (b0, b1) = (b.0.0, b.0.0.saturating_add(b.1 as u64));
    a.1 > 0 && b.1 > 0 && a0 < b1 && b0 < a1
}

/// `error` as an [`Error::Collective`] of `call` on `rank` (kept as it is when it already is one,
/// or when it says the backend has no collectives at all).
fn wrap(call: &'static str, rank: usize, nranks: usize, error: Error) -> Error {
    match error {
        Error::Collective { .. } | Error::NotSupportedByBackend { .. } => error,
        other => Error::Collective {
            call,
            rank,
            nranks,
            reason: other.to_string(),
        },
    }
}

// ----- groups ------------------------------------------------------------------------------

/// The group open on this thread: the backends whose group was started, and what the calls made
/// in it keep alive, per stream, until after the group's end.
struct GroupState {
    started: Vec<Arc<dyn Backend>>,
    kept: Vec<(Arc<StreamInner>, Vec<KeepAlive>)>,
}

thread_local! {
    static GROUP: RefCell<Option<GroupState>> = const { RefCell::new(None) };
}

/// Starts the group of `device`'s backend, once per group.
fn group_join(device: &Device) -> Result<()> {
    let backend = device.backend();
    let known = GROUP.with(|g| {
        g.borrow().as_ref().is_some_and(|state| {
            state
                .started
                .iter()
                .any(|b| std::ptr::addr_eq(Arc::as_ptr(b), Arc::as_ptr(backend)))
        })
    });
    if known {
        return Ok(());
    }
    engine_of(device)?.group_start()?;
    GROUP.with(|g| {
        if let Some(state) = g.borrow_mut().as_mut() {
            state.started.push(Arc::clone(backend));
        }
    });
    Ok(())
}

/// Ends the group on drop, also when the closure of [`group`] unwinds.
struct GroupGuard {
    ended: bool,
}

impl GroupGuard {
    /// Ends the group: `ncclGroupEnd` on every backend it started, then keeps what its calls
    /// use alive until each stream's next synchronization. The first error is returned.
    fn end(&mut self) -> Result<()> {
        self.ended = true;
        let Some(state) = GROUP.with(|g| g.borrow_mut().take()) else {
            return Ok(());
        };
        let mut first = Ok(());
        for backend in &state.started {
            let result = match backend.collectives() {
                Some(engine) => engine.group_end(),
                None => Ok(()),
            };
            if let Err(error) = result
                && first.is_ok()
            {
                first = Err(wrap("ncclGroupEnd", 0, 0, error));
            }
        }
        for (stream, kept) in state.kept {
            stream.keep_until_synchronized(kept);
        }
        first
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.ended
            && let Err(error) = self.end()
        {
            tracing::error!("ending a collective group failed during unwinding: {error}");
        }
    }
}

/// Runs `calls` as one group (`ncclGroupStart` … `ncclGroupEnd`): the collective calls it makes
/// on this thread are issued together at its end, which is how one thread drives several ranks
/// (and how sends and receives between a pair are made at once). Groups nest; the outermost
/// one issues. The arrays the calls use are kept alive until each stream's next
/// synchronization after the group's end.
pub fn group<R>(calls: impl FnOnce() -> Result<R>) -> Result<R> {
    let nested = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.is_some() {
            true
        } else {
            *g = Some(GroupState {
                started: Vec::new(),
                kept: Vec::new(),
            });
            false
        }
    });
    if nested {
        return calls();
    }
    let mut guard = GroupGuard { ended: false };
    let result = calls();
    let ended = guard.end();
    let value = result?;
    ended?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_round_trip_through_hex_and_bytes() {
        let mut bytes = [0u8; crate::backend::UNIQUE_ID_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let id = UniqueId(bytes);
        let hex = id.to_hex();
        assert_eq!(hex.len(), 256);
        assert_eq!(UniqueId::from_hex(&format!(" {hex}\n")), Some(id));
        assert_eq!(UniqueId::from_bytes(&id.to_bytes()), Some(id));
        assert_eq!(UniqueId::from_hex(&hex[..254]), None);
        assert_eq!(UniqueId::from_hex(&hex.replace('0', "g")), None);
        assert_eq!(UniqueId::from_bytes(&bytes[..127]), None);
    }

    #[test]
    fn spans_intersect_only_when_they_share_a_byte() {
        let s = |a: u64, n: usize| (DevicePtr(a), n);
        assert!(spans_intersect(s(0, 8), s(4, 8)));
        assert!(!spans_intersect(s(0, 8), s(8, 8)));
        assert!(!spans_intersect(s(0, 0), s(0, 8)));
    }
}
