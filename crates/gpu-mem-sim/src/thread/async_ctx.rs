//! [`AsyncThreadCtx`]: what a thread of an async closure kernel sees. Everything a
//! [`ThreadCtx`] offers (it dereferences to one), except that waiting for other threads —
//! barriers, warp collectives, spin-wait hints — is a future the kernel awaits.
//!
//! A thread that awaits one returns to the executor, which keeps the thread's state (the
//! closure's future) and polls it again once the barrier or collective releases it. A thread is
//! then a few dozen bytes of future instead of a stack: the block's threads run in rounds of
//! plain calls (`crate::executor`), which is what makes barriers cheap. These futures complete
//! only through the executor that runs the kernel, and nothing else can wake a simulated thread:
//! a thread that returns `Pending` for anything else (a timer, a channel), awaits two waits at
//! once or drops one before it completes is reported as a fault instead of hanging.

use crate::thread::{BarrierScope, Collective, Fence, ThreadCtx};
use gpu_mem_core::Element;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A collective a thread starts waiting at. Kept in the thread's future until it is first polled,
/// and read there in place, field by field: its fields are stored one by one when the future is
/// made, and a wider copy of them right after would stall on store forwarding.
#[derive(Debug)]
pub(crate) struct Arrival {
    pub(crate) location: &'static Location<'static>,
    /// Lanes of the warp that must take part (warp scope).
    pub(crate) mask: u64,
    /// This thread's value, argument and width.
    pub(crate) value: u64,
    pub(crate) arg: i64,
    pub(crate) width: u32,
    pub(crate) op: Collective,
}

/// What the executor of async threads provides behind [`AsyncThreadCtx`]'s futures.
pub(crate) trait Suspend {
    /// Records that the thread waits at the barrier at `location`; the thread then returns
    /// `Pending` to the executor. `false` (after recording a fault) when the thread waits
    /// somewhere already.
    fn arrive_at_barrier(
        &self,
        scope: BarrierScope,
        fence: Fence,
        location: &'static Location<'static>,
    ) -> bool;
    /// The same for a collective.
    fn arrive_at_collective(&self, arrival: &Arrival) -> bool;
    /// The result of the wait the thread was released from (0 for a barrier); `None` while it
    /// still waits.
    fn released(&self) -> Option<u64>;
    /// Records that the thread lets the others run once; it returns `Pending` and is polled
    /// again in the block's next round.
    fn yield_now(&self);
    /// A wait that arrived was dropped before it completed: the thread no longer waits there
    /// (a fault, unless the block had released it already or is ending the thread).
    fn abandon(&self);
}

/// The context a thread of an async closure kernel runs with (see [`crate::SimKernel::sim_async`]).
///
/// It dereferences to [`ThreadCtx`] for indices, arrays and atomics; the methods that wait for
/// other threads return futures here: `t.syncthreads().await`. (Calling [`ThreadCtx`]'s blocking
/// form explicitly is a fault in an async kernel.)
pub struct AsyncThreadCtx<'a> {
    ctx: ThreadCtx<'a>,
    suspend: &'a dyn Suspend,
}

impl std::fmt::Debug for AsyncThreadCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.ctx.fmt(f)
    }
}

impl<'a> Deref for AsyncThreadCtx<'a> {
    type Target = ThreadCtx<'a>;

    fn deref(&self) -> &ThreadCtx<'a> {
        &self.ctx
    }
}

impl<'a> AsyncThreadCtx<'a> {
    pub(crate) fn new(ctx: ThreadCtx<'a>, suspend: &'a dyn Suspend) -> AsyncThreadCtx<'a> {
        AsyncThreadCtx { ctx, suspend }
    }

    fn barrier_of(
        &self,
        scope: BarrierScope,
        fence: Fence,
        location: &'static Location<'static>,
    ) -> BarrierWait<'_> {
        BarrierWait {
            suspend: self.suspend,
            location,
            scope,
            fence,
            stage: Stage::New,
        }
    }

    fn collective_of<R: Outcome>(
        &self,
        op: Collective,
        mask: u64,
        (value, arg, width): (u64, i64, u32),
        location: &'static Location<'static>,
    ) -> CollectiveWait<'_, R> {
        CollectiveWait {
            suspend: self.suspend,
            arrival: Arrival {
                location,
                mask,
                value,
                arg,
                width,
                op,
            },
            stage: Stage::New,
            early: None,
            outcome: PhantomData,
        }
    }

    /// Waits for every thread of the block (`cuda.syncthreads()`).
    #[track_caller]
    pub fn syncthreads(&self) -> impl Future<Output = ()> + '_ {
        self.barrier_of(BarrierScope::Block, Fence::Local, Location::caller())
    }

    /// A block barrier that also orders global memory for [`Fence::Global`] (ROC's `barrier`).
    #[track_caller]
    pub fn barrier(&self, fence: Fence) -> impl Future<Output = ()> + '_ {
        self.barrier_of(BarrierScope::Block, fence, Location::caller())
    }

    /// Waits for the threads of the caller's warp (ROC's `wavebarrier()`, CUDA's `__syncwarp()`).
    #[track_caller]
    pub fn wavebarrier(&self) -> impl Future<Output = ()> + '_ {
        self.barrier_of(BarrierScope::Warp, Fence::Local, Location::caller())
    }

    /// Numba's `syncthreads_count(predicate)`: how many threads of the block passed `true`.
    #[track_caller]
    pub fn syncthreads_count(&self, predicate: bool) -> impl Future<Output = u32> + '_ {
        let operands = (predicate.into(), 0, 0);
        let op = Collective::SyncCount;
        self.collective_of::<Count>(op, u64::MAX, operands, Location::caller())
    }

    /// Numba's `syncthreads_and(predicate)`: whether every thread of the block passed `true`.
    #[track_caller]
    pub fn syncthreads_and(&self, predicate: bool) -> impl Future<Output = bool> + '_ {
        let operands = (predicate.into(), 0, 0);
        let op = Collective::SyncAnd;
        self.collective_of::<Flag>(op, u64::MAX, operands, Location::caller())
    }

    /// Numba's `syncthreads_or(predicate)`: whether some thread of the block passed `true`.
    #[track_caller]
    pub fn syncthreads_or(&self, predicate: bool) -> impl Future<Output = bool> + '_ {
        let operands = (predicate.into(), 0, 0);
        let op = Collective::SyncOr;
        self.collective_of::<Flag>(op, u64::MAX, operands, Location::caller())
    }

    #[track_caller]
    fn shuffle<T: Element>(
        &self,
        op: Collective,
        mask: u64,
        value: T,
        arg: i64,
    ) -> CollectiveWait<'_, Shuffled<T>> {
        let location = Location::caller();
        let bits = super::ctx::shuffle_bits(&self.ctx, op, value);
        let operands = (bits.unwrap_or(0), arg, self.ctx.warp_size());
        let mut wait = self.collective_of(op, mask, operands, location);
        if bits.is_none() {
            // Too large to shuffle (a fault was recorded): the thread keeps its value.
            wait.early = Some(value);
        }
        wait
    }

    /// `__shfl_sync(mask, value, src_lane)`: the value of lane `src_lane` of the caller's warp.
    #[track_caller]
    pub fn shfl_sync<T: Element>(
        &self,
        mask: u64,
        value: T,
        src_lane: u32,
    ) -> impl Future<Output = T> + '_ {
        self.shuffle(Collective::Shfl, mask, value, src_lane.into())
    }

    /// `__shfl_up_sync`: the value of lane `lane - delta` (own value below lane `delta`).
    #[track_caller]
    pub fn shfl_up_sync<T: Element>(
        &self,
        mask: u64,
        value: T,
        delta: u32,
    ) -> impl Future<Output = T> + '_ {
        self.shuffle(Collective::ShflUp, mask, value, delta.into())
    }

    /// `__shfl_down_sync`: the value of lane `lane + delta` (own value past the warp's end).
    #[track_caller]
    pub fn shfl_down_sync<T: Element>(
        &self,
        mask: u64,
        value: T,
        delta: u32,
    ) -> impl Future<Output = T> + '_ {
        self.shuffle(Collective::ShflDown, mask, value, delta.into())
    }

    /// `__shfl_xor_sync`: the value of lane `lane ^ lane_mask`.
    #[track_caller]
    pub fn shfl_xor_sync<T: Element>(
        &self,
        mask: u64,
        value: T,
        lane_mask: u32,
    ) -> impl Future<Output = T> + '_ {
        self.shuffle(Collective::ShflXor, mask, value, lane_mask.into())
    }

    /// `__ballot_sync(mask, predicate)`: bit `l` is set when lane `l` passed `true`.
    #[track_caller]
    pub fn ballot_sync(&self, mask: u64, predicate: bool) -> impl Future<Output = u64> + '_ {
        let operands = (predicate.into(), 0, self.ctx.warp_size());
        let op = Collective::Ballot;
        self.collective_of::<Bits>(op, mask, operands, Location::caller())
    }

    /// `__all_sync(mask, predicate)`: whether every participating lane passed `true`.
    #[track_caller]
    pub fn all_sync(&self, mask: u64, predicate: bool) -> impl Future<Output = bool> + '_ {
        let operands = (predicate.into(), 0, self.ctx.warp_size());
        let op = Collective::All;
        self.collective_of::<Flag>(op, mask, operands, Location::caller())
    }

    /// `__any_sync(mask, predicate)`: whether some participating lane passed `true`.
    #[track_caller]
    pub fn any_sync(&self, mask: u64, predicate: bool) -> impl Future<Output = bool> + '_ {
        let operands = (predicate.into(), 0, self.ctx.warp_size());
        let op = Collective::Any;
        self.collective_of::<Flag>(op, mask, operands, Location::caller())
    }

    /// Lets the other threads of the block run once (a spin-wait hint, CUDA's `__nanosleep`).
    /// A thread of an async kernel that waits for another thread's write must await it in its
    /// loop: only awaiting lets the others run.
    pub fn nanosleep(&self) -> impl Future<Output = ()> + '_ {
        YieldNow {
            suspend: self.suspend,
            yielded: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    New,
    /// Arrived: the thread waits here.
    Waiting,
    /// Refused (the thread waited somewhere else; a fault was recorded): it never completes.
    Refused,
    Done,
}

/// A barrier being waited at. (Its own type, not a collective's: every thread's future holds
/// the largest wait it awaits, and a barrier's is small.)
struct BarrierWait<'a> {
    suspend: &'a dyn Suspend,
    location: &'static Location<'static>,
    scope: BarrierScope,
    fence: Fence,
    stage: Stage,
}

impl Future for BarrierWait<'_> {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        match self.stage {
            Stage::New => {
                // A refused arrival (the thread waits elsewhere) is a recorded fault: the launch
                // fails once the block is done, and this wait never completes.
                let arrived = self
                    .suspend
                    .arrive_at_barrier(self.scope, self.fence, self.location);
                self.stage = if arrived {
                    Stage::Waiting
                } else {
                    Stage::Refused
                };
                Poll::Pending
            }
            Stage::Waiting => match self.suspend.released() {
                Some(_) => {
                    self.stage = Stage::Done;
                    Poll::Ready(())
                }
                None => Poll::Pending,
            },
            // Refused, or polled after it completed (only a hand-written poll can): it stays
            // pending, which the executor reports as a wait it does not know.
            Stage::Refused | Stage::Done => Poll::Pending,
        }
    }
}

impl Drop for BarrierWait<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.stage == Stage::Waiting {
            self.suspend.abandon();
        }
    }
}

/// How a collective's result (a word) becomes its output.
trait Outcome {
    type Output;
    fn from_result(result: u64) -> Self::Output;
}

/// `syncthreads_count`.
struct Count;
/// The votes.
struct Flag;
/// `ballot_sync`.
struct Bits;
/// A shuffle of `T`.
struct Shuffled<T>(PhantomData<T>);

impl Outcome for Count {
    type Output = u32;
    fn from_result(result: u64) -> u32 {
        u32::try_from(result).unwrap_or(u32::MAX)
    }
}

impl Outcome for Flag {
    type Output = bool;
    fn from_result(result: u64) -> bool {
        result != 0
    }
}

impl Outcome for Bits {
    type Output = u64;
    fn from_result(result: u64) -> u64 {
        result
    }
}

impl<T: Element> Outcome for Shuffled<T> {
    type Output = T;
    fn from_result(result: u64) -> T {
        super::ctx::from_shuffle_bits(result)
    }
}

/// A collective being waited at; its output is the collective's result.
struct CollectiveWait<'a, R: Outcome> {
    suspend: &'a dyn Suspend,
    arrival: Arrival,
    stage: Stage,
    /// The output when it completes without waiting (a value too large to shuffle).
    early: Option<R::Output>,
    outcome: PhantomData<R>,
}

impl<R: Outcome> Future for CollectiveWait<'_, R> {
    type Output = R::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R::Output> {
        // Nothing in it is pinned structurally (see its `Unpin`).
        let this = Pin::into_inner(self);
        match this.stage {
            Stage::New => {
                if let Some(value) = this.early.take() {
                    this.stage = Stage::Done;
                    return Poll::Ready(value);
                }
                // As for a barrier: a refused arrival is a recorded fault.
                this.stage = if this.suspend.arrive_at_collective(&this.arrival) {
                    Stage::Waiting
                } else {
                    Stage::Refused
                };
                Poll::Pending
            }
            Stage::Waiting => match this.suspend.released() {
                Some(result) => {
                    this.stage = Stage::Done;
                    Poll::Ready(R::from_result(result))
                }
                None => Poll::Pending,
            },
            // As for a barrier.
            Stage::Refused | Stage::Done => Poll::Pending,
        }
    }
}

impl<R: Outcome> Drop for CollectiveWait<'_, R> {
    #[inline]
    fn drop(&mut self) {
        if self.stage == Stage::Waiting {
            self.suspend.abandon();
        }
    }
}

impl<R: Outcome> Unpin for CollectiveWait<'_, R> {}

/// Letting the other threads of the block run once ([`AsyncThreadCtx::nanosleep`]).
struct YieldNow<'a> {
    suspend: &'a dyn Suspend,
    yielded: bool,
}

impl Future for YieldNow<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        self.suspend.yield_now();
        Poll::Pending
    }
}
