//! [`ManagedArray::prefetch`] and [`ManagedArray::advise`]: hints about where managed memory
//! should live (CUDA's `cuMemPrefetchAsync` and `cuMemAdvise`), named with [`MemoryLocation`]
//! and [`Advice`].
//!
//! Neither changes a byte of the array, so neither changes what host code or kernels may do with
//! it: the driver keeps accesses coherent while it migrates. A prefetch is stream work: ordered
//! after what the stream had before it, and the stream keeps the memory alive until it has run,
//! as for a copy. Advice is synchronous. Both refuse with an error, before the backend is asked,
//! a stream of another device and a location on a device of another backend; the backend
//! refuses a device it cannot act on with [`Error::NotSupportedByBackend`].
//!
//! Backends: CUDA passes both to the driver (`cuMemPrefetchAsync_v2`, `cuMemAdvise_v2`, driver
//! 12.2 or later) and refuses them where a device named reports
//! `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0`; ROC's managed memory is fine-grained
//! system memory that never migrates, so both are validated and recorded only; the simulator
//! validates them, records them per allocation and runs a prefetch as a job of its stream.

use crate::backend::{Enqueued, ManagedAdvice, ManagedLocation, require};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::host::ManagedArray;
use crate::memory::KeepAlive;
use crate::stream::Stream;
use std::sync::Arc;

/// Where managed memory may live: host memory, or the memory of a device of the array's backend.
/// `&Device` converts into it.
#[derive(Debug, Clone)]
pub enum MemoryLocation {
    /// Host (system) memory.
    Host,
    /// The device's memory.
    Device(Device),
}

impl From<&Device> for MemoryLocation {
    fn from(device: &Device) -> MemoryLocation {
        MemoryLocation::Device(device.clone())
    }
}

/// Advice about how a managed array will be used (CUDA's `cuMemAdvise`, one variant per
/// `CUmem_advise` value). A hint to the driver's migration policy, never a change of the data.
#[derive(Debug, Clone)]
pub enum Advice {
    /// Mostly read: readers may get copies of their own (`CU_MEM_ADVISE_SET_READ_MOSTLY`).
    SetReadMostly,
    /// Undoes [`Advice::SetReadMostly`].
    UnsetReadMostly,
    /// Keep the memory here where possible (`CU_MEM_ADVISE_SET_PREFERRED_LOCATION`).
    SetPreferredLocation(MemoryLocation),
    /// No preferred location any more.
    UnsetPreferredLocation,
    /// Keep the memory mapped for this processor (`CU_MEM_ADVISE_SET_ACCESSED_BY`).
    SetAccessedBy(MemoryLocation),
    /// Undoes [`Advice::SetAccessedBy`] for the processor.
    UnsetAccessedBy(MemoryLocation),
}

impl<T: Element> ManagedArray<T> {
    /// Migrates the array's memory to `to` (host memory, or a device of the array's backend:
    /// `&Device` converts) as work of `stream` (a stream of the array's device), ordered after
    /// the work already on it (CUDA's `cuMemPrefetchAsync`). The data stays as it is; host code
    /// and kernels may use the array meanwhile. An empty array has nothing to move.
    ///
    /// Errors: a stream of another device is [`Error::DeviceMismatch`], as is a device of
    /// another backend; a backend or device that cannot migrate managed memory on request is
    /// [`Error::NotSupportedByBackend`] (on ROC the memory never moves, and the call only
    /// validates).
    pub fn prefetch(&self, to: impl Into<MemoryLocation>, stream: &Stream) -> Result<()> {
        let device = self.device();
        device.check_same(stream.device(), "stream")?;
        let to = location(
            device,
            to.into(),
            "prefetch location (a device of another backend)",
        )?;
        let Some(ptr) = self.buffer.device_ptr() else {
            return Ok(());
        };
        let bytes = self.buffer.bytes();
        if bytes == 0 {
            return Ok(());
        }
        let buffer = &self.buffer;
        stream.submit(
            || [KeepAlive::Host(Arc::clone(buffer))],
            // The prefetch reads and writes no byte: host code need not wait for it.
            &[],
            |handle| {
                let backend = device.backend();
                let managed = require(backend.as_ref(), backend.managed(), "managed memory")?;
                // SAFETY: the handle is the stream's own, live while `stream` is borrowed, and
                // of this device (checked above); `ptr..ptr+bytes` is the device address of
                // this managed buffer, which the stream keeps alive until the prefetch has run.
                unsafe { managed.managed_prefetch(device.ordinal(), ptr, bytes, to, handle) }
                    .map(|()| Enqueued::Queued)
            },
        )?;
        Ok(())
    }

    /// Gives the driver `advice` about the whole array (CUDA's `cuMemAdvise`): synchronous, and
    /// no change of the data. An empty array takes any advice and keeps none.
    ///
    /// Errors: a location on a device of another backend is [`Error::DeviceMismatch`]; a
    /// backend or device that cannot take the advice is [`Error::NotSupportedByBackend`].
    pub fn advise(&self, advice: Advice) -> Result<()> {
        let device = self.device();
        let what = "advice location (a device of another backend)";
        let advice = match advice {
            Advice::SetReadMostly => ManagedAdvice::SetReadMostly,
            Advice::UnsetReadMostly => ManagedAdvice::UnsetReadMostly,
            Advice::SetPreferredLocation(at) => {
                ManagedAdvice::SetPreferredLocation(location(device, at, what)?)
            }
            Advice::UnsetPreferredLocation => ManagedAdvice::UnsetPreferredLocation,
            Advice::SetAccessedBy(at) => ManagedAdvice::SetAccessedBy(location(device, at, what)?),
            Advice::UnsetAccessedBy(at) => {
                ManagedAdvice::UnsetAccessedBy(location(device, at, what)?)
            }
        };
        let Some(ptr) = self.buffer.device_ptr() else {
            return Ok(());
        };
        let bytes = self.buffer.bytes();
        if bytes == 0 {
            return Ok(());
        }
        let backend = device.backend();
        require(backend.as_ref(), backend.managed(), "managed memory")?.managed_advise(
            device.ordinal(),
            ptr,
            bytes,
            advice,
        )
    }
}

/// `at` as the backend names it, for an array of `device`: a device of another backend is
/// [`Error::DeviceMismatch`] (`what`).
fn location(device: &Device, at: MemoryLocation, what: &'static str) -> Result<ManagedLocation> {
    match at {
        MemoryLocation::Host => Ok(ManagedLocation::Host),
        MemoryLocation::Device(other) if other.same_backend(device) => {
            Ok(ManagedLocation::Device(other.ordinal()))
        }
        MemoryLocation::Device(other) => Err(Error::DeviceMismatch {
            what,
            expected: device.ordinal(),
            found: other.ordinal(),
        }),
    }
}
