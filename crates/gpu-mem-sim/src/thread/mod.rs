//! What runs inside a simulated thread: the device-side vocabulary of closure kernels.
//!
//! [`ThreadCtx`] is what a Rust closure kernel sees — its indices, its arguments as
//! [`GlobalArray`]s, shared and local arrays, barriers, warp collectives and atomics — and
//! [`ThreadOps`] is what the executor (`crate::executor`) provides behind it. Kernels written as
//! portable source reach the same executor through the prelude's host branch
//! (`crate::source::runtime`), so both forms have the same semantics.
//!
//! The closure form is the Rust-native way to write simulator-only kernels; a kernel that must
//! also run on a GPU is written once as portable source ([`gpu_mem_core::Kernel::with_source`]).
//! An async closure ([`SimKernel::sim_async`], [`AsyncThreadCtx`]) awaits its barriers and
//! collectives instead of blocking in them, so its threads need no stack of their own.

mod async_body;
mod async_ctx;
mod atomics;
mod collective;
mod ctx;
mod global;
mod local;

pub(crate) use async_body::AsyncBody;
use async_body::AsyncClosure;
pub(crate) use async_body::{PolledBody, PolledThreads};
pub use async_ctx::AsyncThreadCtx;
pub(crate) use async_ctx::{Arrival, Suspend};
pub use atomics::{AtomicElement, AtomicInteger};
pub use collective::{BarrierScope, Collective, Fence};
pub(crate) use collective::{Combine, Reduction};
pub use ctx::{ArgView, BlockCtx, Site, ThreadCtx, ThreadOps};
pub use global::{GlobalArray, GlobalRecord};
pub use local::{LocalArray, SharedArray};

use gpu_mem_core::Kernel;
use std::sync::Arc;

/// The simulator's closure form of a kernel: run once per simulated thread.
pub type SimKernelFn = dyn Fn(&ThreadCtx<'_>) + Send + Sync;

/// The closure as a [`Kernel`] carries it (the core does not interpret it).
pub(crate) struct ClosureBody(pub(crate) Box<SimKernelFn>);

/// Closure kernels: `Kernel::sim(name, |t| ...)` (bring this trait into scope, as
/// `gpu_mem::prelude` does).
pub trait SimKernel: Sized {
    /// A simulator kernel from a closure run once per simulated thread.
    fn sim(name: impl Into<String>, body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static) -> Self;
    /// Adds (or replaces) the closure form.
    fn with_sim(self, body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static) -> Self;
    /// A simulator kernel from an async closure run once per simulated thread, which awaits its
    /// barriers and collectives: `Kernel::sim_async(name, async |t| { ...; t.syncthreads().await; })`.
    /// Its threads are futures, not stacks, so a barrier costs a return and a call; a
    /// spin-wait must await [`AsyncThreadCtx::nanosleep`] to let the other threads run.
    fn sim_async(
        name: impl Into<String>,
        body: impl AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Self;
    /// Adds (or replaces) the closure form with an async closure (see [`SimKernel::sim_async`]).
    fn with_sim_async(
        self,
        body: impl AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Self;
}

impl SimKernel for Kernel {
    fn sim(
        name: impl Into<String>,
        body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Kernel {
        Kernel::new(name).with_sim(body)
    }

    fn with_sim(self, body: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static) -> Kernel {
        self.with_sim_form(Arc::new(ClosureBody(Box::new(body))))
    }

    fn sim_async(
        name: impl Into<String>,
        body: impl AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Kernel {
        Kernel::new(name).with_sim_async(body)
    }

    fn with_sim_async(
        self,
        body: impl AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync + 'static,
    ) -> Kernel {
        self.with_sim_form(Arc::new(AsyncBody(Box::new(AsyncClosure(body)))))
    }
}

/// A kernel's closure form, shared with the kernel (a launch keeps it until it has run).
pub(crate) enum ClosureForm {
    /// `SimKernel::sim`: each thread a call.
    Blocking(Arc<ClosureBody>),
    /// `SimKernel::sim_async`: each thread a future.
    Async(Arc<AsyncBody>),
}

/// The closure form of `kernel`, if it has one.
pub(crate) fn closure_form(kernel: &Kernel) -> Option<ClosureForm> {
    let form = kernel.sim_form_shared()?;
    match form.downcast::<ClosureBody>() {
        Ok(body) => Some(ClosureForm::Blocking(body)),
        Err(form) => form.downcast::<AsyncBody>().ok().map(ClosureForm::Async),
    }
}
