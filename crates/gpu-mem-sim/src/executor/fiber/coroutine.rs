//! Fibers as corosensei coroutines, for targets without a native switch (and on x86-64 Unix
//! when `GPU_MEM_SIM_FIBERS=portable`): a fiber "switches" by suspending to the driver loop of
//! [`enter`], which resumes the fiber it names.

use super::{Fiber, stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, UnsafeCell};

/// Where a suspending fiber asks the driver to go.
enum Hop {
    To(*const Fiber),
    Main,
}

type Coro = Coroutine<(), Hop, (), stack::ColoredStack>;

/// The coroutine context of `fiber` (see `super::imp`).
#[inline(always)]
fn own(fiber: &Fiber) -> &Context {
    super::imp::portable(&fiber.context)
}

pub(super) struct Context {
    /// `None` only between taking the stack out and laying it out again.
    coroutine: UnsafeCell<Option<Coro>>,
    /// The coroutine's yielder, set when it starts.
    yielder: Cell<*const Yielder<(), Hop>>,
    /// The stack while no coroutine holds it.
    stack: Cell<Option<stack::ColoredStack>>,
}

impl Context {
    pub(super) fn new(stack: stack::ColoredStack) -> Context {
        Context {
            coroutine: UnsafeCell::new(None),
            yielder: Cell::new(std::ptr::null()),
            stack: Cell::new(Some(stack)),
        }
    }

    /// # Safety
    /// The fiber is not running; `fiber` outlives the coroutine.
    pub(super) unsafe fn prepare(&self, fiber: *const Fiber) {
        let Some(stack) = self.stack.take() else {
            return;
        };
        let coroutine = Coro::with_stack(stack, move |yielder: &Yielder<(), Hop>, ()| {
            // SAFETY: the contract of `prepare`.
            unsafe { own(&*fiber).yielder.set(yielder) };
            let _ =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::fiber_main(fiber)));
            super::abort("a panic reached a simulator fiber's root")
        });
        // SAFETY: the fiber is not running, so nothing borrows its coroutine.
        unsafe { *self.coroutine.get() = Some(coroutine) };
    }

    /// # Safety
    /// As [`Context::prepare`]; the suspended frames own nothing.
    pub(super) unsafe fn reset(&self, fiber: *const Fiber) {
        // SAFETY: not running, so not borrowed.
        let coroutine = unsafe { &mut *self.coroutine.get() }.take();
        if let Some(mut coroutine) = coroutine {
            if !coroutine.done() {
                // SAFETY: the caller's contract: the frames are dropped without unwinding (a
                // coroutine not started yet holds only its closure, a raw pointer).
                unsafe { coroutine.force_reset() };
            }
            self.stack.set(Some(coroutine.into_stack()));
        }
        // SAFETY: the caller's contract.
        unsafe { self.prepare(fiber) };
    }

    pub(super) fn take_stack(&mut self) -> Option<stack::ColoredStack> {
        if let Some(mut coroutine) = self.coroutine.get_mut().take() {
            if !coroutine.done() {
                // SAFETY: the OS thread is ending; a fiber parked at the top of its loop owns
                // nothing on its stack (one not started yet, only its closure: a raw pointer).
                unsafe { coroutine.force_reset() };
            }
            return Some(coroutine.into_stack());
        }
        self.stack.take()
    }
}

/// # Safety
/// See `super::enter`.
pub(super) unsafe fn enter(to: &Fiber) {
    let mut current: *const Fiber = to;
    loop {
        // SAFETY: fibers live until their OS thread ends; only the driver resumes coroutines,
        // one at a time, so this is the only borrow.
        let coroutine = unsafe { &mut *own(&*current).coroutine.get() };
        let Some(coroutine) = coroutine else {
            super::abort("a simulator fiber without a coroutine was resumed");
        };
        match coroutine.resume(()) {
            CoroutineResult::Yield(Hop::To(next)) => current = next,
            CoroutineResult::Yield(Hop::Main) | CoroutineResult::Return(()) => return,
        }
    }
}

/// # Safety
/// See `super::switch`.
#[inline]
pub(super) unsafe fn switch(from: &Fiber, to: &Fiber) {
    // SAFETY: `from` runs, so its coroutine has started and set its yielder.
    unsafe { (*own(from).yielder.get()).suspend(Hop::To(to)) };
}

/// # Safety
/// See `super::to_main`.
pub(super) unsafe fn to_main(from: &Fiber) {
    // SAFETY: as in `switch`.
    unsafe { (*own(from).yielder.get()).suspend(Hop::Main) };
}

#[cfg(feature = "bench-internals")]
/// Not measured here (see `native.rs`): each switch passes through corosensei's driver loop,
/// which the executor's own figures include too.
pub(crate) fn first_barrier_floor(
    _threads: usize,
    _next_block: &dyn Fn() -> bool,
) -> Option<Result<(), String>> {
    None
}
