//! The hardware abstraction every backend implements.
//!
//! [`Backend`] is object safe and is used as `Arc<dyn Backend>`: the core types
//! ([`DeviceArray`](crate::DeviceArray), [`Stream`](crate::Stream), ...) are written once against
//! it, and nothing backend-specific leaks into them. Handles ([`DevicePtr`], [`StreamHandle`],
//! [`EventHandle`]) are plain numbers whose meaning belongs to the backend that made them.
//!
//! The trait is split by concern, one file each. What every backend provides is a supertrait:
//! [`Memory`], [`Transfer`], [`Streams`], [`Events`], [`Launch`]. What only some provide is a
//! capability — [`PeerAccess`], [`IpcMemory`], [`ManagedMemory`], [`StreamOrderedPool`],
//! [`Collectives`] — that a backend decides once and hands out through an accessor ([`Backend::peer`], ...) answering
//! `None` where it lacks it; the core turns that `None` into [`Error::NotSupportedByBackend`]
//! naming the feature (`require`, the one place that builds it) and falls back where it can.
//!
//! This module is the bottom of the core with `error`, `element` and `layout`: it depends on
//! `error` only. The data that crosses the traits is its own: addresses, handles and flags in
//! `types`, managed-memory locations and advice in `advice`, and what a kernel launch carries
//! in `kernel` (which `crate::kernel` re-exports).
//!
//! # Contract
//!
//! * Every method takes the device ordinal it acts on; a backend makes whatever context it needs
//!   current itself (CUDA: the device's primary context on the calling thread).
//! * Methods without a stream are synchronous and ordered after all work already enqueued on the
//!   device's streams (the CUDA legacy-default-stream rule, which Numba relies on).
//! * `*_async` methods enqueue on a stream and return at once; the caller — the core types, not
//!   the user — keeps every buffer such work touches allocated and unaliased by host code until
//!   it has completed (each [`Stream`](crate::Stream) keeps what its work uses alive).
//! * Every method taking a [`StreamHandle`] or [`EventHandle`] is `unsafe`: the core owns each
//!   handle inside a [`Stream`](crate::Stream) or [`Event`](crate::Event), so safe code never
//!   passes one. Errors are returned, never panicked; work that fails after it was enqueued is
//!   reported by its stream's next synchronization as [`Error::AsyncFailure`].

mod advice;
mod call_site;
mod collective;
mod event;
mod ipc;
pub(crate) mod kernel;
mod launch;
mod managed;
mod memory;
mod peer;
mod pool;
mod stream;
mod transfer;
mod types;

pub use advice::{ManagedAdvice, ManagedHints, ManagedLocation};
pub(crate) use call_site::CallSite;
pub use call_site::call_site;
pub use collective::{
    CollectiveCall, CollectiveType, Collectives, CommHandle, ReduceOp, UNIQUE_ID_BYTES, UniqueId,
};
pub use event::Events;
pub use ipc::IpcMemory;
pub use launch::Launch;
pub use managed::ManagedMemory;
pub use memory::Memory;
pub use peer::PeerAccess;
pub use pool::StreamOrderedPool;
pub use stream::Streams;
pub use transfer::Transfer;
pub use types::*;

use crate::error::{BackendKind, Error, Result};
use std::fmt::Debug;

/// One GPU API (CUDA, ROC, the simulator) seen through the operations a memory HAL needs.
///
/// The required concerns are its supertraits, each with its own safety contract; the optional
/// capabilities are reached through the accessors below, which answer `None` by default.
///
/// # Safety
///
/// The core's `unsafe` code trusts what a backend returns, so implementing this trait is
/// `unsafe`: an implementation must uphold every point below — and those of its supertraits and
/// of every capability it hands out — for every device ordinal it accepts, whatever the caller
/// does with the safe methods.
///
/// * **Device count.** [`Backend::device_count`] returns the same number for the backend's whole
///   life, and every method taking a device ordinal below it acts on that device (or returns an
///   error); ordinals at or past it are refused with an error.
/// * **Completion.** [`Backend::synchronize`] returns `Ok` only once all work enqueued on the
///   device's streams has completed: every read and write of host and device memory made by
///   that work has happened and is visible to the calling thread. Every other wait or query
///   that reports work complete ([`Streams`], [`Events`]) means the same. A synchronous method
///   (one without a stream) returns only once its own accesses have completed. The core frees
///   and reuses memory on the strength of these answers.
/// * **Memory accesses.** A method touches host memory only inside the ranges its caller passes
///   (and only while its contract says the caller keeps them valid) and never writes through a
///   `*const` source.
/// * **Who frees what.** What a method makes is given back by its counterpart only, once:
///   device memory by [`Memory::free`] (or [`StreamOrderedPool::free_async`]), page-locked
///   memory by [`Memory::host_free`], registrations by [`Memory::host_unregister`], managed
///   memory by [`ManagedMemory::managed_free`], IPC mappings by
///   [`IpcMemory::ipc_close_handle`], streams and events by their `*_destroy`. Until then the
///   backend neither frees it nor hands it out again.
/// * **Capabilities.** Each accessor ([`Backend::peer`], [`Backend::ipc`], [`Backend::managed`],
///   [`Backend::pool`]) gives the same answer, `Some` or `None`, for the backend's whole life,
///   and a `Some` acts on this backend's devices, handles and allocations.
/// * **Errors.** Failures are returned as [`Error`]s; no method unwinds across the trait.
///
/// A backend written without `unsafe` is therefore refused by the compiler:
///
/// ```compile_fail,E0200
/// #[derive(Debug)]
/// struct Careless;
/// impl gpu_mem_core::Backend for Careless {}
/// ```
pub unsafe trait Backend:
    Memory + Transfer + Streams + Events + Launch + Send + Sync + Debug
{
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Number of devices this backend drives.
    fn device_count(&self) -> usize;

    /// Static facts about a device.
    fn device_info(&self, device: usize) -> Result<DeviceInfo>;

    /// Free and total device memory in bytes.
    fn mem_info(&self, device: usize) -> Result<MemInfo>;

    /// Waits until all work on all streams of the device has completed.
    fn synchronize(&self, device: usize) -> Result<()>;

    // ----- optional capabilities -----------------------------------------------------------

    /// Peer access and copies between this backend's devices, where it has them.
    fn peer(&self) -> Option<&dyn PeerAccess> {
        None
    }

    /// Sharing device allocations with other processes, where the backend can.
    fn ipc(&self) -> Option<&dyn IpcMemory> {
        None
    }

    /// Managed (unified) memory, where the backend has it.
    fn managed(&self) -> Option<&dyn ManagedMemory> {
        None
    }

    /// Stream-ordered allocation from the device's memory pool, where the backend has one.
    fn pool(&self) -> Option<&dyn StreamOrderedPool> {
        None
    }

    /// Collective communication between devices (NCCL, RCCL, the simulator's model), where the
    /// backend has it.
    fn collectives(&self) -> Option<&dyn Collectives> {
        None
    }
}

/// `capability`, one of `backend`'s accessors' answers, or — where it is `None` — the
/// [`Error::NotSupportedByBackend`] naming `feature` that the core returns for a capability the
/// backend lacks (the one place that error is built).
pub(crate) fn require<'a, C: ?Sized>(
    backend: &dyn Backend,
    capability: Option<&'a C>,
    feature: &'static str,
) -> Result<&'a C> {
    match capability {
        Some(capability) => Ok(capability),
        None => Err(unsupported(backend.kind(), feature)),
    }
}

/// The error for a feature `backend` does not provide.
fn unsupported(backend: BackendKind, feature: &'static str) -> Error {
    Error::NotSupportedByBackend {
        backend,
        feature,
        reason: format!("the {backend} backend does not provide {feature} yet"),
    }
}
