//! An async closure kernel as a launch carries it: its futures' type erased behind
//! [`PolledBody`], so that the executor (`crate::executor`) can run a block's threads as
//! futures without knowing the closure's type.
//!
//! Each thread's future is made when the thread is first polled (so the closure's own code, if
//! any runs before its first await, runs as that thread, where its panic is that thread's
//! fault) and lives pinned in place in one vector per block until it completes or the block
//! ends it.

use crate::thread::AsyncThreadCtx;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The async closure as a [`gpu_mem_core::Kernel`] carries it.
pub(crate) struct AsyncBody(pub(crate) Box<dyn PolledBody>);

/// An async closure kernel, its futures' type erased: the executor hands it a block's
/// contexts, and it hands back the block's threads as futures to poll.
pub(crate) trait PolledBody: Send + Sync {
    /// Calls `drive` with the threads of the block whose contexts are `ctxs`; every thread's
    /// future has been dropped when it returns.
    fn run_block(&self, ctxs: &[AsyncThreadCtx<'_>], drive: &mut dyn FnMut(&mut dyn PolledThreads));
}

/// A block's threads as futures, by linear index.
pub(crate) trait PolledThreads {
    /// Polls thread `linear` (first making its future); `Ready` when it has ended (its future
    /// is dropped then).
    fn poll(&mut self, linear: usize) -> Poll<()>;
    /// Ends thread `linear` where it stands: drops its future.
    fn end(&mut self, linear: usize);
}

pub(crate) struct AsyncClosure<F>(pub(crate) F);

impl<F> PolledBody for AsyncClosure<F>
where
    F: AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync,
{
    fn run_block(
        &self,
        ctxs: &[AsyncThreadCtx<'_>],
        drive: &mut dyn FnMut(&mut dyn PolledThreads),
    ) {
        let make = |linear: usize| (self.0)(&ctxs[linear]);
        let mut slots = unstarted(&make, ctxs.len());
        drive(&mut Threads {
            make,
            slots: &mut slots,
        });
    }
}

/// A thread's future, from before it is made until after it is dropped.
enum Slot<Fut> {
    Unstarted,
    Running(Fut),
    Ended,
}

/// `count` unstarted slots for the futures `make` makes (the future's type is only known by
/// inference, through `make`).
fn unstarted<Fut>(_make: &impl Fn(usize) -> Fut, count: usize) -> Vec<Slot<Fut>> {
    (0..count).map(|_| Slot::Unstarted).collect()
}

/// A block's threads: each future pinned where it lies. The slots are neither resized nor moved
/// out of while a future lives in one, and a future is dropped in place (its slot set to
/// `Ended`, or the vector dropped).
struct Threads<'v, M, Fut> {
    make: M,
    slots: &'v mut [Slot<Fut>],
}

/// Slot `linear` of `slots`, pinned.
fn pinned<Fut>(slots: &mut [Slot<Fut>], linear: usize) -> Option<Pin<&mut Slot<Fut>>> {
    let slot = slots.get_mut(linear)?;
    // SAFETY: see `Threads`: a future never moves once made, and is dropped in place.
    Some(unsafe { Pin::new_unchecked(slot) })
}

impl<M: Fn(usize) -> Fut, Fut: Future<Output = ()>> PolledThreads for Threads<'_, M, Fut> {
    #[inline]
    fn poll(&mut self, linear: usize) -> Poll<()> {
        let Some(mut slot) = pinned(self.slots, linear) else {
            return Poll::Ready(());
        };
        if matches!(*slot, Slot::Unstarted) {
            // Made where it will stay.
            slot.set(Slot::Running((self.make)(linear)));
        }
        // SAFETY: only used to project onto the future below; nothing is moved out.
        let future = match unsafe { slot.as_mut().get_unchecked_mut() } {
            // SAFETY: a projection of the pinned slot onto its future, which is never moved out
            // (the slot is only ever replaced whole, through `Pin::set`, which drops it in place).
            Slot::Running(future) => unsafe { Pin::new_unchecked(future) },
            Slot::Unstarted | Slot::Ended => return Poll::Ready(()),
        };
        // The executor polls a thread again when the block releases it, not on a wake-up.
        let mut context = Context::from_waker(Waker::noop());
        let poll = future.poll(&mut context);
        if poll.is_ready() {
            slot.set(Slot::Ended);
        }
        poll
    }

    fn end(&mut self, linear: usize) {
        if let Some(mut slot) = pinned(self.slots, linear) {
            slot.set(Slot::Ended);
        }
    }
}
