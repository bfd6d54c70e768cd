//! [`KeepAlive`]: what a stream holds for its in-flight work.
//!
//! Defined with the memory it holds, below streams: a stream keeps these values and drops them
//! once its work is known complete; arrays, host arrays and launches hand them to it. It builds
//! on `storage` ([`Storage::keep_alive`] is written here), not the other way round.

use crate::memory::{HostBuffer, Storage};
use std::any::Any;
use std::sync::Arc;

/// Something enqueued work needs alive until it completes (device memory, a host buffer, a
/// kernel's code): held by the stream, dropped on a host thread once the work is known complete.
/// The common kinds are reference counts held directly, so keeping them allocates nothing.
#[derive(Debug)]
#[allow(dead_code, reason = "the values are held only to be dropped later")]
pub(crate) enum KeepAlive {
    /// The memory behind an array.
    Storage(Storage),
    /// A page-locked host buffer.
    Host(Arc<HostBuffer>),
    /// Anything else (a kernel's code, the owner of an adopted stream).
    Other(Box<dyn Any + Send + Sync>),
}

impl Storage {
    /// A handle that keeps the memory alive while enqueued work uses it.
    pub(crate) fn keep_alive(&self) -> KeepAlive {
        KeepAlive::Storage(self.clone())
    }
}
