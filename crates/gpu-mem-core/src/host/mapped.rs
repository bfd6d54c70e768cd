//! [`MappedArray`]: page-locked host memory mapped into the device address space.

use crate::array::{DeviceArray, LayoutSource};
use crate::backend::HostAllocFlags;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::host::pinned::allocate_zeroed;
use crate::layout::{Layout, Order};
use crate::memory::{Access, HostBuffer, Storage};
use ndarray::{ArrayBase, ArrayD, ArrayViewD, ArrayViewMutD, Data, Dimension};
use std::marker::PhantomData;
use std::sync::Arc;

/// Options of [`Device::mapped_array`] (Numba's `portable=` and `wc=`, which Numba accepts but
/// never passes to the driver; gpu-mem passes them on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MapFlags {
    /// Usable from every device's context.
    pub portable: bool,
    /// Write-combined: fast for the device to read and the host to write, slow for the host to
    /// read. Ignored by the ROC backend, which has no such memory.
    pub write_combined: bool,
}

/// A host array the device reads and writes in place, with no copy (Numba's
/// `cuda.mapped_array`). [`MappedArray::device_view`] gives the device side; kernels and copies
/// use it directly.
#[derive(Debug)]
pub struct MappedArray<T: Element> {
    pub(crate) buffer: Arc<HostBuffer>,
    pub(crate) layout: Layout,
    _element: PhantomData<T>,
}

impl Device {
    /// Allocates a zero-filled, C-ordered mapped host array (Numba's `cuda.mapped_array(shape,
    /// dtype, portable=, wc=)`).
    #[track_caller]
    pub fn mapped_array<T: Element>(
        &self,
        shape: &[usize],
        flags: MapFlags,
    ) -> Result<MappedArray<T>> {
        self.mapped_array_with_order(shape, Order::C, flags)
    }

    /// Allocates a zero-filled mapped host array in C or Fortran order.
    #[track_caller]
    pub fn mapped_array_with_order<T: Element>(
        &self,
        shape: &[usize],
        order: Order,
        flags: MapFlags,
    ) -> Result<MappedArray<T>> {
        self.mapped_array_with_layout(Layout::contiguous(shape, order)?, flags)
    }

    /// Allocates a zero-filled mapped host array shaped like `like`, a host or device array
    /// (Numba's `cuda.mapped_array_like(ary, portable=, wc=)`), with the strides
    /// `device_array_like` gives.
    #[track_caller]
    pub fn mapped_array_like<L: LayoutSource>(
        &self,
        like: &L,
        flags: MapFlags,
    ) -> Result<MappedArray<L::Elem>> {
        self.mapped_array_with_layout(like.source_layout()?.like(), flags)
    }

    /// `layout` is dense with non-negative strides.
    #[track_caller]
    fn mapped_array_with_layout<T: Element>(
        &self,
        layout: Layout,
        flags: MapFlags,
    ) -> Result<MappedArray<T>> {
        let alloc_flags = HostAllocFlags {
            portable: flags.portable,
            mapped: true,
            write_combined: flags.write_combined,
        };
        let buffer = allocate_zeroed::<T>(self, &layout, Some(alloc_flags))?;
        if buffer.bytes() > 0 && buffer.device_ptr().is_none() {
            return Err(Error::NotSupportedByBackend {
                backend: self.kind(),
                feature: "mapped host memory",
                reason: "the driver returned no device address for the mapped allocation".into(),
            });
        }
        Ok(MappedArray {
            buffer: Arc::new(buffer),
            layout,
            _element: PhantomData,
        })
    }
}

/// A device array over mapped host memory.
pub(crate) fn device_view_of<T: Element>(
    buffer: &Arc<HostBuffer>,
    layout: &Layout,
) -> DeviceArray<T> {
    DeviceArray {
        storage: Storage::Mapped(Arc::clone(buffer)),
        offset: 0,
        layout: layout.clone(),
        _element: PhantomData,
    }
}

/// The methods every array of host memory that the device reaches in place shares
/// ([`MappedArray`], [`ManagedArray`](crate::ManagedArray)): the device side as a view, host
/// access by copy (ordered after the device's work), and `unsafe` zero-copy host views.
macro_rules! device_reachable_host_array {
    ($array:ident) => {
        impl<T: Element> $array<T> {
            /// The shape.
            pub fn shape(&self) -> &[usize] {
                self.layout.shape()
            }

            /// Shape and strides.
            pub fn layout(&self) -> &Layout {
                &self.layout
            }

            /// The device the memory belongs to.
            pub fn device(&self) -> &Device {
                self.buffer.device()
            }

            /// The device side: a [`DeviceArray`] over the same memory (no copy). It keeps the
            /// memory alive on its own.
            pub fn device_view(&self) -> DeviceArray<T> {
                $crate::host::mapped::device_view_of(&self.buffer, &self.layout)
            }

            /// Copies the current contents to a new host array. The copy goes through the
            /// backend, so it is ordered after the device's stream work and never races with
            /// device writes.
            pub fn read(&self) -> Result<ArrayD<T>> {
                self.device_view().copy_to_host()
            }

            /// Overwrites the contents with `values` (same shape), through the backend like
            /// [`Self::read`].
            pub fn write<S: Data<Elem = T>, D: Dimension>(
                &mut self,
                values: &ArrayBase<S, D>,
            ) -> Result<()> {
                if values.shape() != self.layout.shape() {
                    return Err(Error::IncompatibleShape {
                        expected: self.layout.shape().to_vec(),
                        found: values.shape().to_vec(),
                    });
                }
                self.device_view().copy_from_host(values)
            }

            /// A zero-copy host view.
            ///
            /// # Safety
            /// No device work (kernels, copies through [`Self::device_view`], work enqueued
            /// before this call and not yet complete) may write the memory while the view lives:
            /// call [`Device::synchronize`] first if kernels may be running.
            pub unsafe fn host_view(&self) -> Result<ArrayViewD<'_, T>> {
                self.buffer.pending().wait_for_host(Access::Read)?;
                // SAFETY: stream writers were waited for; the caller excludes other device
                // writers.
                Ok(unsafe { $crate::host::pinned::view_of(&self.buffer, &self.layout) })
            }

            /// A zero-copy mutable host view.
            ///
            /// # Safety
            /// No device work may read or write the memory while the view lives.
            pub unsafe fn host_view_mut(&mut self) -> Result<ArrayViewMutD<'_, T>> {
                self.buffer.pending().wait_for_host(Access::Write)?;
                // SAFETY: stream users were waited for; the caller excludes other device users.
                Ok(unsafe { $crate::host::pinned::view_mut_of(&self.buffer, &self.layout) })
            }
        }
    };
}

pub(crate) use device_reachable_host_array;

device_reachable_host_array!(MappedArray);
