//! [`SmartArray`]: an array that lives on the host and/or the device and moves between them
//! only when the side asked for is stale (Numba 0.24–0.45's `SmartArray`).
//!
//! Unlike Numba's, writing through [`SmartArray::host_mut`] or [`SmartArray::device_mut`]
//! marks the other side stale by itself, so a host edit can never leave a stale device copy in
//! use (Numba's `a[i] = v` pitfall); [`SmartArray::mark_changed`] remains for changes made
//! behind its back: through raw pointers or `unsafe` views, and through views taken from
//! [`SmartArray::device`] (a device view is a handle that can write, like the array itself —
//! write through [`SmartArray::device_mut`] instead, or call `mark_changed(Where::Device)`).

use crate::array::DeviceArray;
use crate::device::Device;
use crate::element::Element;
use crate::error::Result;
use crate::kernel::{KernelArg, Prepared};
use crate::layout::Order;
use ndarray::{ArrayD, ArrayViewMutD, IxDyn};

/// A side of a [`SmartArray`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Where {
    /// Host memory (Numba's `'host'`).
    Host,
    /// Device memory (Numba's `'gpu'`).
    Device,
}

/// A borrowed side of a [`SmartArray`], as [`SmartArray::get`] returns it.
#[derive(Debug)]
pub enum SmartRef<'a, T: Element> {
    /// The host array.
    Host(&'a ArrayD<T>),
    /// The device array.
    Device(&'a DeviceArray<T>),
}

/// Transfers a [`SmartArray`] has made so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransferCounts {
    /// Host-to-device copies.
    pub to_device: u64,
    /// Device-to-host copies.
    pub to_host: u64,
}

/// An array kept on the host and/or the device; see the module docs.
///
/// Its shape, layout and device are fixed when it is made: `host_mut` and `device_mut` give
/// views to write through, not the arrays themselves, so they cannot be replaced by arrays of
/// another shape or device:
///
/// ```compile_fail
/// # fn f(sa: &mut gpu_mem_core::SmartArray<f32>) -> gpu_mem_core::Result<()> {
/// *sa.host_mut()? = ndarray::ArrayD::zeros(ndarray::IxDyn(&[5]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SmartArray<T: Element> {
    device: Device,
    shape: Vec<usize>,
    order: Order,
    host: Option<ArrayD<T>>,
    on_device: Option<DeviceArray<T>>,
    host_valid: bool,
    device_valid: bool,
    transfers: TransferCounts,
}

impl<T: Element> SmartArray<T> {
    /// Adopts `host` (Numba's `SmartArray(obj, where='host')`): the host side is valid, nothing
    /// is on the device yet. A non-contiguous array is made contiguous (C order) first.
    pub fn new(device: &Device, host: ArrayD<T>) -> SmartArray<T> {
        let order = if host.is_standard_layout() {
            Order::C
        } else if host.t().is_standard_layout() {
            Order::F
        } else {
            Order::C
        };
        let host = if host.is_standard_layout() || host.t().is_standard_layout() {
            host
        } else {
            host.as_standard_layout().into_owned()
        };
        SmartArray {
            device: device.clone(),
            shape: host.shape().to_vec(),
            order,
            host: Some(host),
            on_device: None,
            host_valid: true,
            device_valid: false,
            transfers: TransferCounts::default(),
        }
    }

    /// A zero-filled array that starts on the device (Numba's `SmartArray(shape=..., dtype=...,
    /// where='gpu')`, whose contents were undefined).
    #[track_caller]
    pub fn on_device(device: &Device, shape: &[usize], order: Order) -> Result<SmartArray<T>> {
        let mut array = device.device_array::<T>(shape, order)?;
        array.memset(0)?;
        Ok(SmartArray {
            device: device.clone(),
            shape: shape.to_vec(),
            order,
            host: None,
            on_device: Some(array),
            host_valid: false,
            device_valid: true,
            transfers: TransferCounts::default(),
        })
    }

    /// The shape (fixed at creation).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Whether a side holds the current data.
    pub fn is_valid(&self, side: Where) -> bool {
        match side {
            Where::Host => self.host_valid,
            Where::Device => self.device_valid,
        }
    }

    /// The transfers made so far.
    pub fn transfers(&self) -> TransferCounts {
        self.transfers
    }

    fn sync_host(&mut self) -> Result<()> {
        if self.host_valid {
            return Ok(());
        }
        let host = match self.host.take() {
            Some(host) => host,
            None => {
                let size = self
                    .shape
                    .iter()
                    .try_fold(1usize, |n, &len| n.checked_mul(len))
                    .ok_or_else(|| crate::Error::Overflow {
                        what: format!("element count of shape {:?}", self.shape),
                    })?;
                let values = crate::memory::zeroed_vec::<T>(size, "the host side of a SmartArray")?;
                let shape_error = |e: ndarray::ShapeError| crate::Error::InvalidShape {
                    shape: crate::error::fmt_dims(&self.shape),
                    reason: e.to_string(),
                };
                match self.order {
                    Order::C => {
                        ArrayD::from_shape_vec(IxDyn(&self.shape), values).map_err(shape_error)?
                    }
                    Order::F => {
                        let shape: Vec<usize> = self.shape.iter().rev().copied().collect();
                        ArrayD::from_shape_vec(IxDyn(&shape), values)
                            .map_err(shape_error)?
                            .reversed_axes()
                    }
                }
            }
        };
        let mut host = host;
        if let Some(device) = &self.on_device {
            device.copy_to_host_into(&mut host)?;
            self.transfers.to_host += 1;
        }
        self.host = Some(host);
        self.host_valid = true;
        Ok(())
    }

    #[track_caller]
    fn sync_device(&mut self) -> Result<()> {
        if self.device_valid {
            return Ok(());
        }
        let host = self.host.as_ref();
        let mut device = match self.on_device.take() {
            Some(device) => device,
            None => self.device.device_array::<T>(&self.shape, self.order)?,
        };
        if let Some(host) = host {
            device.copy_from_host(host)?;
            self.transfers.to_device += 1;
        }
        self.on_device = Some(device);
        self.device_valid = true;
        Ok(())
    }

    /// The host array, copied back first only if the host side is stale (Numba's
    /// `get('host')`).
    pub fn host(&mut self) -> Result<&ArrayD<T>> {
        self.sync_host()?;
        self.host.as_ref().ok_or_else(missing)
    }

    /// The host array for writing: synced first, and the device side is marked stale. A view:
    /// its values may change, not its shape or layout, which the array keeps for its life (as
    /// Numba's does).
    pub fn host_mut(&mut self) -> Result<ArrayViewMutD<'_, T>> {
        self.sync_host()?;
        self.device_valid = false;
        self.host
            .as_mut()
            .map(|host| host.view_mut())
            .ok_or_else(missing)
    }

    /// The device array, copied over first only if the device side is stale (Numba's
    /// `get('gpu')`), for reading: the host side stays valid. Views taken from it can still
    /// write device memory (`s.device()?.view().fill(x)`); after such a write, call
    /// [`SmartArray::mark_changed`] with [`Where::Device`], or write through
    /// [`SmartArray::device_mut`], which marks the host side stale itself.
    #[track_caller]
    pub fn device(&mut self) -> Result<&DeviceArray<T>> {
        self.sync_device()?;
        self.on_device.as_ref().ok_or_else(missing)
    }

    /// The device array for writing: synced first, and the host side is marked stale. A view of
    /// it (writes through it are the array's), so that the array itself, its shape and its
    /// device, stay what they are.
    #[track_caller]
    pub fn device_mut(&mut self) -> Result<DeviceArray<T>> {
        self.sync_device()?;
        self.host_valid = false;
        self.on_device
            .as_ref()
            .map(DeviceArray::view)
            .ok_or_else(missing)
    }

    /// Numba's `get(where)`.
    #[track_caller]
    pub fn get(&mut self, side: Where) -> Result<SmartRef<'_, T>> {
        Ok(match side {
            Where::Host => SmartRef::Host(self.host()?),
            Where::Device => SmartRef::Device(self.device()?),
        })
    }

    /// Declares that `side` was changed, so the other side is stale (Numba's
    /// `mark_changed(where)`). A side that has no storage yet holds no data to be current: the
    /// other side is still marked stale, and the next access of either copies what exists.
    pub fn mark_changed(&mut self, side: Where) {
        match side {
            Where::Host => {
                self.host_valid = self.host.is_some();
                self.device_valid = false;
            }
            Where::Device => {
                self.device_valid = self.on_device.is_some();
                self.host_valid = false;
            }
        }
    }
}

fn missing() -> crate::Error {
    crate::Error::InvalidArgument {
        name: "SmartArray",
        reason: "a side was valid without storage".into(),
    }
}

/// Launching with a `SmartArray` moves it to the device only when the device copy is stale,
/// leaves it there, and marks the host side stale (the kernel may write it).
impl<T: Element> KernelArg for SmartArray<T> {
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        let prepared = crate::kernel::args::prepare_array(self.device()?, device)?;
        self.mark_changed(Where::Device);
        Ok(prepared)
    }
}
