//! [`Registered`]: an existing host array page-locked (and optionally mapped) for as long as the
//! guard lives — Numba's `cuda.pinned(ary)`, `cuda.mapped(ary)` and ROC's `roc.register(ary)`.
//!
//! The guard takes the array by value, so the memory cannot be freed or moved while the driver
//! (or an in-flight copy) uses it, even if the guard is leaked. Dropping the guard unregisters
//! at once (Numba unpins immediately, not through its deferred queue); [`Registered::into_inner`]
//! unregisters and hands the array back.

use crate::array::DeviceArray;
use crate::array::host_layout::layout_of;
use crate::backend::HostRegisterFlags;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::host::mapped::device_view_of;
use crate::layout::Layout;
use crate::memory::{Access, HostBuffer};
use ndarray::{Array, ArrayView, ArrayViewMut, Dimension, ShapeBuilder};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// A value handed back with the error that stopped an operation, so nothing is lost.
pub struct Rejected<A> {
    /// Why the operation failed.
    pub error: Error,
    /// The value the operation took.
    pub value: A,
}

impl<A> fmt::Debug for Rejected<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<A> fmt::Display for Rejected<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<A> std::error::Error for Rejected<A> {}

impl<A> From<Rejected<A>> for Error {
    fn from(rejected: Rejected<A>) -> Error {
        rejected.error
    }
}

/// A host array registered with the device; see the module docs.
pub struct Registered<T: Element, D: Dimension> {
    /// The registration. Declared before `array` so that dropping the guard unregisters before
    /// the array can be freed; it also holds a clone of `array` for mapped device views.
    pub(crate) buffer: Arc<HostBuffer>,
    /// The array itself; its heap buffer never moves.
    array: Arc<Array<T, D>>,
    /// The array's first logical element, taken from `&mut` access before sharing, so views
    /// may write through it.
    first: NonNull<T>,
    pub(crate) layout: Layout,
}

impl<T: Element, D: Dimension> fmt::Debug for Registered<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("layout", &self.layout)
            .field("buffer", &self.buffer)
            .finish()
    }
}

// SAFETY: the guard owns the array; `first` points into it and is only dereferenced under the
// same borrow rules as the array itself (`&self` reads, `&mut self` writes).
unsafe impl<T: Element, D: Dimension> Send for Registered<T, D> {}
// SAFETY: shared access only creates read-only views, after waiting for stream writers and
// (for a mapped registration) only while no device view exists; device views are made through
// `&mut self`.
unsafe impl<T: Element, D: Dimension> Sync for Registered<T, D> {}

impl Device {
    /// Page-locks `array` for fast and asynchronous transfers (Numba's `cuda.pinned(ary)`).
    #[track_caller]
    pub fn pinned<T: Element, D: Dimension + 'static>(
        &self,
        array: Array<T, D>,
    ) -> std::result::Result<Registered<T, D>, Rejected<Array<T, D>>> {
        Registered::new(self, array, HostRegisterFlags::default())
    }

    /// Registers `array` with the device (ROC's `roc.register(ary)`; the same as
    /// [`Device::pinned`]). Drop the guard or call [`Registered::deregister`] to undo it.
    #[track_caller]
    pub fn register<T: Element, D: Dimension + 'static>(
        &self,
        array: Array<T, D>,
    ) -> std::result::Result<Registered<T, D>, Rejected<Array<T, D>>> {
        Registered::new(self, array, HostRegisterFlags::default())
    }

    /// Maps `array` into the device address space (Numba's `cuda.mapped(ary)`):
    /// [`Registered::device_view`] is a zero-copy device array over it.
    #[track_caller]
    pub fn mapped<T: Element, D: Dimension + 'static>(
        &self,
        array: Array<T, D>,
    ) -> std::result::Result<Registered<T, D>, Rejected<Array<T, D>>> {
        Registered::new(
            self,
            array,
            HostRegisterFlags {
                portable: false,
                mapped: true,
            },
        )
    }
}

impl<T: Element, D: Dimension + 'static> Registered<T, D> {
    #[track_caller]
    fn new(
        device: &Device,
        mut array: Array<T, D>,
        flags: HostRegisterFlags,
    ) -> std::result::Result<Self, Rejected<Array<T, D>>> {
        let layout = match layout_of(&array) {
            Ok(layout) => layout,
            Err(error) => {
                return Err(Rejected {
                    error,
                    value: array,
                });
            }
        };
        let first = array.as_mut_ptr();
        let low = first.wrapping_offset(layout.min_offset());
        let bytes = layout.span_len() * T::itemsize();
        let (Some(first), Some(low)) = (NonNull::new(first), NonNull::new(low.cast::<u8>())) else {
            return Err(Rejected {
                error: Error::InvalidArgument {
                    name: "array",
                    reason: "null data pointer".into(),
                },
                value: array,
            });
        };
        let array = Arc::new(array);
        let keep: Box<dyn std::any::Any + Send> = Box::new(Arc::clone(&array));
        // SAFETY: `low..low+bytes` is the span of the array's own heap buffer, which does not
        // move when the `Array` value moves into the `Arc`, and which `keep` keeps alive for as
        // long as the registration exists.
        match unsafe { HostBuffer::register(device, keep, low, bytes, flags) } {
            Ok(buffer) => Ok(Registered {
                buffer: Arc::new(buffer),
                array,
                first,
                layout,
            }),
            Err((error, keep)) => {
                drop(keep);
                Err(Rejected {
                    error,
                    value: Arc::unwrap_or_clone(array),
                })
            }
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// `true` when the memory is mapped into the device (made by [`Device::mapped`]).
    pub fn is_mapped(&self) -> bool {
        matches!(self.buffer.kind(), crate::memory::HostBufferKind::Registered(f) if f.mapped)
    }

    /// The zero-copy device side of a mapped array; an error for a pinned-only registration.
    /// While device views exist the host side is reachable only through the device view
    /// ([`Registered::view`] and [`Registered::view_mut`] refuse), because the device may write
    /// the memory at any time.
    pub fn device_view(&mut self) -> Result<DeviceArray<T>> {
        if !self.is_mapped() {
            return Err(Error::InvalidArgument {
                name: "registration",
                reason: "the array was pinned, not mapped; use Device::mapped for a device view"
                    .into(),
            });
        }
        let mut view = device_view_of::<T>(&self.buffer, &self.layout);
        view.offset = (-self.layout.min_offset()) as usize * T::itemsize();
        Ok(view)
    }

    /// Refuses host access while device views of a mapped registration exist (after waiting for
    /// stream work, whose hold on the buffer ends with it).
    fn check_no_device_views(&self) -> Result<()> {
        if !self.is_mapped() {
            return Ok(());
        }
        self.buffer.pending().wait_for_host(Access::Write)?;
        if Arc::strong_count(&self.buffer) > 1 {
            return Err(Error::InvalidArgument {
                name: "registration",
                reason: "device views of the mapped array exist; drop them (or copy through them) \
                         before viewing it from the host"
                    .into(),
            });
        }
        Ok(())
    }

    /// A read-only view of the array; waits for in-flight copies into it first. For a mapped
    /// registration, an error while device views of it exist.
    pub fn view(&self) -> Result<ArrayView<'_, T, D>> {
        self.buffer.pending().wait_for_host(Access::Read)?;
        self.check_no_device_views()?;
        let shape = self.ndarray_shape()?;
        // SAFETY: `lowest()` and the non-negative strides describe the owned array's elements
        // (axes with negative strides are flipped back below); writers enqueued on streams were
        // waited for and new ones need `&mut self`.
        let mut view = unsafe { ArrayView::from_shape_ptr(shape, self.lowest().cast_const()) };
        self.flip_negative_axes(|axis| view.invert_axis(axis));
        Ok(view)
    }

    /// A mutable view of the array; waits for every in-flight copy that uses it first. For a
    /// mapped registration, an error while device views of it exist.
    pub fn view_mut(&mut self) -> Result<ArrayViewMut<'_, T, D>> {
        self.buffer.pending().wait_for_host(Access::Write)?;
        self.check_no_device_views()?;
        let shape = self.ndarray_shape()?;
        // SAFETY: as in `view`, and all in-flight users were waited for; `&mut self` excludes
        // other views and new device work.
        let mut view = unsafe { ArrayViewMut::from_shape_ptr(shape, self.lowest()) };
        self.flip_negative_axes(|axis| view.invert_axis(axis));
        Ok(view)
    }

    fn ndarray_shape(&self) -> Result<ndarray::StrideShape<D>> {
        let dim = D::from_dimension(&ndarray::IxDyn(self.layout.shape())).ok_or_else(|| {
            Error::InvalidArgument {
                name: "array",
                reason: "dimension mismatch".into(),
            }
        })?;
        let mut strides = dim.clone();
        for (slot, stride) in strides.slice_mut().iter_mut().zip(self.layout.strides()) {
            // `from_shape_ptr` takes non-negative strides from the lowest address; negative axes
            // are inverted afterwards.
            *slot = stride.unsigned_abs();
        }
        Ok(dim.strides(strides))
    }

    /// The lowest-addressed element of the array.
    fn lowest(&self) -> *mut T {
        self.first
            .as_ptr()
            .wrapping_offset(self.layout.min_offset())
    }

    /// Calls `invert` for every axis with a negative stride (and more than one element).
    fn flip_negative_axes(&self, mut invert: impl FnMut(ndarray::Axis)) {
        for (axis, (&stride, &len)) in self
            .layout
            .strides()
            .iter()
            .zip(self.layout.shape())
            .enumerate()
        {
            if stride < 0 && len > 1 {
                invert(ndarray::Axis(axis));
            }
        }
    }

    /// Unregisters now and returns the array (Numba's `deregister`). Waits for in-flight copies.
    /// Fails — handing the guard back — while device views of a mapped array still exist.
    // The error hands the guard back by value (like `Arc::try_unwrap`), so it is as large as
    // the guard; boxing it would only add an allocation to a rare path.
    #[allow(clippy::result_large_err)]
    pub fn into_inner(self) -> std::result::Result<Array<T, D>, Rejected<Self>> {
        if let Err(error) = self.buffer.pending().wait_for_host(Access::Write) {
            return Err(Rejected { error, value: self });
        }
        let Registered {
            buffer,
            array,
            first,
            layout,
        } = self;
        match Arc::try_unwrap(buffer) {
            // Dropping the buffer unregisters the memory and releases its clone of the array.
            Ok(buffer) => drop(buffer),
            Err(buffer) => {
                return Err(Rejected {
                    error: Error::InvalidArgument {
                        name: "registration",
                        reason: "device views of the mapped array or in-flight work still use it"
                            .into(),
                    },
                    value: Registered {
                        buffer,
                        array,
                        first,
                        layout,
                    },
                });
            }
        }
        // The registration (the only other owner) is gone, so this does not copy.
        Ok(Arc::unwrap_or_clone(array))
    }

    /// Unregisters now, dropping the array (use [`Registered::into_inner`] to keep it). When it
    /// cannot be unregistered yet (device views of it exist), the guard comes back with the
    /// error, as from `into_inner`.
    #[allow(clippy::result_large_err)] // As `into_inner`'s.
    pub fn deregister(self) -> std::result::Result<(), Rejected<Self>> {
        self.into_inner().map(drop)
    }
}
