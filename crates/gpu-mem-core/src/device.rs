//! [`Device`]: one device of one backend, the entry point for allocating arrays and streams.
//!
//! Depends on `backend`, `accounting`, `error` and `sync` only: what a device makes (streams, arrays, host
//! arrays, launches) is written with those types, in `impl Device` blocks of their modules.

use crate::accounting::DeviceUsage;
use crate::backend::{Backend, DeviceInfo, MemInfo, PoolUsage, require};
use crate::error::{BackendKind, Error, Result};
use std::fmt;
use std::sync::{Arc, Mutex};

/// A device of a backend. Cheap to clone; every array, stream and event keeps one.
#[derive(Clone)]
pub struct Device {
    shared: Arc<DeviceShared>,
}

struct DeviceShared {
    backend: Arc<dyn Backend>,
    ordinal: usize,
    /// Errors raised inside `Drop` implementations (which cannot return them), kept until
    /// [`Device::take_release_errors`] or [`Device::check_release_errors`] collects them.
    release_errors: Mutex<Vec<Error>>,
    /// The device's memory accounting, shared with every other handle of the same device.
    usage: Arc<DeviceUsage>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("backend", &self.shared.backend.kind())
            .field("ordinal", &self.shared.ordinal)
            .finish()
    }
}

impl Device {
    /// Opens device `ordinal` of `backend`.
    pub fn new(backend: Arc<dyn Backend>, ordinal: usize) -> Result<Device> {
        let count = backend.device_count();
        if ordinal >= count {
            return Err(Error::NoSuchDevice {
                backend: backend.kind(),
                device: ordinal,
                count,
            });
        }
        let usage = crate::accounting::for_device(&backend, ordinal);
        Ok(Device {
            shared: Arc::new(DeviceShared {
                backend,
                ordinal,
                release_errors: Mutex::new(Vec::new()),
                usage,
            }),
        })
    }

    /// The backend behind this device. Crate-private: the core's types own every handle they
    /// pass to it, so no safe code outside the core can hand the backend an unchecked handle.
    ///
    /// ```compile_fail,E0624
    /// # fn f(dev: &gpu_mem_core::Device) {
    /// let _ = dev.backend();
    /// # }
    /// ```
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    /// The device's memory accounting (what every allocation on it counts in).
    pub(crate) fn usage(&self) -> &Arc<DeviceUsage> {
        &self.shared.usage
    }

    /// The stream-ordered pool's usage, where the backend has a pool that answers.
    pub(crate) fn pool_usage(&self) -> Option<PoolUsage> {
        let backend = self.backend();
        backend.pool()?.pool_usage(self.ordinal()).ok()
    }

    /// Which backend kind this device belongs to.
    pub fn kind(&self) -> BackendKind {
        self.shared.backend.kind()
    }

    /// The device ordinal within its backend.
    pub fn ordinal(&self) -> usize {
        self.shared.ordinal
    }

    /// Static facts: name, architecture, warp size, memory size.
    pub fn info(&self) -> Result<DeviceInfo> {
        self.shared.backend.device_info(self.shared.ordinal)
    }

    /// Free and total device memory (Numba's `get_memory_info()`).
    pub fn mem_info(&self) -> Result<MemInfo> {
        self.shared.backend.mem_info(self.shared.ordinal)
    }

    /// `true` when `other` is the same device of the same backend.
    pub fn same_as(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
            || (Arc::ptr_eq(&self.shared.backend, &other.shared.backend)
                && self.shared.ordinal == other.shared.ordinal)
    }

    /// `true` when `other` is a device of the same backend instance (so the two can copy to
    /// each other directly and may address each other's memory).
    pub(crate) fn same_backend(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.shared.backend, &other.shared.backend)
    }

    /// `true` when this device can address `peer`'s memory directly once peer access is enabled
    /// (Numba's `Device.can_access_peer`, `cuDeviceCanAccessPeer`). A device can always access
    /// itself; devices of different backends never can.
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        if self.same_as(peer) {
            return Ok(true);
        }
        if !self.same_backend(peer) {
            return Ok(false);
        }
        let backend = self.backend();
        require(backend.as_ref(), backend.peer(), "peer access")?
            .can_access_peer(self.ordinal(), peer.ordinal())
    }

    /// Lets this device's kernels address `peer`'s memory (`cuCtxEnablePeerAccess`; HSA: allow
    /// access to the peer's pool). Enabling it again is not an error; enabling it for the device
    /// itself is a no-op. Peer copies ([`DeviceArray::copy_from_device`](crate::DeviceArray::copy_from_device)
    /// between devices) work without it.
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        if self.same_as(peer) {
            return Ok(());
        }
        if !self.same_backend(peer) {
            return Err(Error::DeviceMismatch {
                what: "peer device (another backend)",
                expected: self.ordinal(),
                found: peer.ordinal(),
            });
        }
        let backend = self.backend();
        require(backend.as_ref(), backend.peer(), "peer access")?
            .enable_peer_access(self.ordinal(), peer.ordinal())
    }

    pub(crate) fn check_same(&self, other: &Device, what: &'static str) -> Result<()> {
        if self.same_as(other) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what,
                expected: self.ordinal(),
                found: other.ordinal(),
            })
        }
    }

    /// Records an error that happened while releasing a resource in `Drop`: it is logged now and
    /// kept for [`Device::check_release_errors`].
    pub(crate) fn report_release_error(&self, what: &'static str, error: Error) {
        tracing::error!(backend = %self.kind(), device = self.ordinal(), "{what} failed during drop: {error}");
        crate::sync::lock(&self.shared.release_errors).push(error);
    }

    /// Takes the errors that happened while releasing resources in `Drop`.
    pub fn take_release_errors(&self) -> Vec<Error> {
        std::mem::take(&mut *crate::sync::lock(&self.shared.release_errors))
    }

    /// `Err` summarising the errors that happened while releasing resources in `Drop`, if any.
    pub fn check_release_errors(&self) -> Result<()> {
        let errors = self.take_release_errors();
        match errors.first() {
            None => Ok(()),
            Some(first) => Err(Error::DeferredRelease {
                count: errors.len(),
                first: first.to_string(),
            }),
        }
    }
}
