//! Ownership of device and host memory, and the tracking that keeps it alive and untouched while
//! asynchronous work uses it (the book's soundness chapter): device allocations, page-locked
//! host buffers, foreign memory, the [`Storage`] behind an array, and what a stream keeps alive
//! for its work ([`KeepAlive`]).
//!
//! This module depends on `device`, `backend`, `element`, `error` and `sync` only. It does not
//! depend on `stream`: the work queues that use host buffers are seen through [`WorkQueue`], and
//! the reclaiming of memory kept by in-flight work through the function `stream` registers
//! (`reclaim`). Nor on `array`: the arrays' storage is defined here, and arrays build on it.

mod device_alloc;
mod foreign;
mod host_buffer;
mod host_vec;
mod keep_alive;
mod pending;
mod reclaim;
mod storage;

pub(crate) use device_alloc::DeviceAlloc;
pub use device_alloc::RawDeviceMemory;
pub(crate) use foreign::{ForeignMemory, Release};
pub(crate) use host_buffer::{HostBuffer, HostBufferKind};
pub(crate) use host_vec::{try_collect, zeroed_vec};
pub(crate) use keep_alive::KeepAlive;
pub(crate) use pending::{Access, PendingUses, WorkQueue};
pub(crate) use reclaim::{allocate_or_release, set_reclaim, trim_pool};
pub(crate) use storage::Storage;
