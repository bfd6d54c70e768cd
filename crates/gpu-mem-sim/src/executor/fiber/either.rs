//! The two switches of x86-64 Unix, chosen once per process: the native one (`native.rs`), or
//! the corosensei coroutines every other target runs (`coroutine.rs`) when
//! `GPU_MEM_SIM_FIBERS=portable`, so that the portable fibers are tested here without a build
//! of their own. All the fibers of a process are of one kind: a switch never meets the other.

use super::{Fiber, coroutine, native, stack};
use std::sync::LazyLock;

/// The variable that chooses the fibers.
pub(super) const VARIABLE: &str = "GPU_MEM_SIM_FIBERS";

/// Whether this process runs the portable fibers, or why its `GPU_MEM_SIM_FIBERS` is refused.
static PORTABLE: LazyLock<Result<bool, String>> =
    LazyLock::new(|| match std::env::var(VARIABLE).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("" | "native") => Ok(false),
        Ok("portable") => Ok(true),
        Ok(other) => Err(format!(
            "{VARIABLE}={other} names no kind of fibers: native (the default) or portable"
        )),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{VARIABLE} is not valid UTF-8")),
    });

/// Whether this process's fibers are the portable ones (a refused choice makes none: see
/// [`chosen`]).
fn runs_portable() -> bool {
    PORTABLE.as_ref().is_ok_and(|&portable| portable)
}

/// Checks the choice before the first fiber is made: why not, when it names no kind.
pub(super) fn chosen() -> Result<(), String> {
    PORTABLE.as_ref().map(drop).map_err(Clone::clone)
}

pub(super) enum Context {
    Native(native::Context),
    Portable(coroutine::Context),
}

impl Context {
    pub(super) fn new(stack: stack::ColoredStack) -> Context {
        if runs_portable() {
            Context::Portable(coroutine::Context::new(stack))
        } else {
            Context::Native(native::Context::new(stack))
        }
    }

    /// # Safety
    /// As the chosen kind's `prepare`.
    pub(super) unsafe fn prepare(&self, fiber: *const Fiber) {
        match self {
            // SAFETY: the caller's contract.
            Context::Native(context) => unsafe { context.prepare(fiber) },
            // SAFETY: the caller's contract.
            Context::Portable(context) => unsafe { context.prepare(fiber) },
        }
    }

    /// # Safety
    /// As the chosen kind's `reset`.
    pub(super) unsafe fn reset(&self, fiber: *const Fiber) {
        match self {
            // SAFETY: the caller's contract.
            Context::Native(context) => unsafe { context.reset(fiber) },
            // SAFETY: the caller's contract.
            Context::Portable(context) => unsafe { context.reset(fiber) },
        }
    }

    pub(super) fn take_stack(&mut self) -> Option<stack::ColoredStack> {
        match self {
            Context::Native(context) => context.take_stack(),
            Context::Portable(context) => context.take_stack(),
        }
    }
}

/// The native context of a fiber of this process.
#[inline(always)]
pub(super) fn native(context: &Context) -> &native::Context {
    match context {
        Context::Native(context) => context,
        Context::Portable(_) => super::abort("a portable fiber met a native switch"),
    }
}

/// The coroutine context of a fiber of this process.
#[inline(always)]
pub(super) fn portable(context: &Context) -> &coroutine::Context {
    match context {
        Context::Portable(context) => context,
        Context::Native(_) => super::abort("a native fiber met a portable switch"),
    }
}

/// The native switch's prefetch (corosensei keeps its stack pointer to itself).
#[inline(always)]
pub(super) fn prefetch(context: &Context) {
    if let Context::Native(context) = context {
        native::prefetch(context);
    }
}

/// # Safety
/// See `super::enter`.
pub(super) unsafe fn enter(to: &Fiber) {
    match to.context {
        // SAFETY: the caller's contract.
        Context::Native(_) => unsafe { native::enter(to) },
        // SAFETY: the caller's contract.
        Context::Portable(_) => unsafe { coroutine::enter(to) },
    }
}

/// # Safety
/// See `super::switch`.
#[inline]
pub(super) unsafe fn switch(from: &Fiber, to: &Fiber) {
    match from.context {
        // SAFETY: the caller's contract.
        Context::Native(_) => unsafe { native::switch(from, to) },
        // SAFETY: the caller's contract.
        Context::Portable(_) => unsafe { coroutine::switch(from, to) },
    }
}

/// # Safety
/// See `super::to_main`.
pub(super) unsafe fn to_main(from: &Fiber) {
    match from.context {
        // SAFETY: the caller's contract.
        Context::Native(_) => unsafe { native::to_main(from) },
        // SAFETY: the caller's contract.
        Context::Portable(_) => unsafe { coroutine::to_main(from) },
    }
}

#[cfg(feature = "bench-internals")]
/// Runs blocks of `threads` threads on native fibers through a first barrier with no scheduling
/// at all, on the calling OS thread, while `next_block` hands out blocks (`floor.rs`); none for
/// the portable fibers.
pub(crate) fn first_barrier_floor(
    threads: usize,
    next_block: &dyn Fn() -> bool,
) -> Option<Result<(), String>> {
    if runs_portable() {
        coroutine::first_barrier_floor(threads, next_block)
    } else {
        Some(super::floor::first_barriers(threads, next_block))
    }
}

#[cfg(test)]
mod tests {
    use super::{Context, VARIABLE};

    /// The fibers made are of the kind the variable names (CI runs the executor's tests once
    /// with `GPU_MEM_SIM_FIBERS=portable`).
    #[test]
    fn fibers_are_of_the_kind_the_variable_names() {
        let fiber = super::super::take().expect("a fiber");
        // SAFETY: `take` hands out fibers that live until their OS thread ends.
        let context = unsafe { &(*fiber).context };
        let portable = std::env::var(VARIABLE).is_ok_and(|v| v == "portable");
        assert_eq!(matches!(context, Context::Portable(_)), portable);
        super::super::give_back_all(&mut vec![fiber]);
    }
}
