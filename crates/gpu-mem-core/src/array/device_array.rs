//! The [`DeviceArray`] type and its attributes.

use crate::backend::DevicePtr;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::Storage;
use std::fmt;
use std::marker::PhantomData;

/// An n-dimensional array in device memory (Numba's `DeviceNDArray`).
///
/// Created by [`Device::to_device`], [`Device::device_array`] and friends; views made by
/// [`slice`](DeviceArray::slice), [`reshape`](DeviceArray::reshape), [`ravel`](DeviceArray::ravel),
/// [`split`](DeviceArray::split) and [`view_as`](DeviceArray::view_as) share its memory, like
/// Numba's. Shapes are in elements and strides in elements (they may be negative or zero), as in
/// ndarray; [`DeviceArray::byte_strides`] gives Numba's byte strides.
pub struct DeviceArray<T: Element> {
    pub(crate) storage: Storage,
    /// Byte offset of the first logical element from the storage base.
    pub(crate) offset: usize,
    pub(crate) layout: Layout,
    pub(crate) _element: PhantomData<fn() -> T>,
}

impl<T: Element> fmt::Debug for DeviceArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceArray")
            .field("dtype", &T::dtype())
            .field("shape", &self.layout.shape())
            .field("strides", &self.layout.strides())
            .field("device", self.storage.device())
            .field("ptr", &format_args!("{:#x}", self.device_ptr().0))
            .finish()
    }
}

impl<T: Element> DeviceArray<T> {
    /// Allocates uninitialised (zeroed on the simulator) device memory for `layout`.
    #[track_caller]
    pub(crate) fn allocate(device: &Device, layout: Layout) -> Result<Self> {
        check_element::<T>(DEVICE_ALIGN, "device allocations")?;
        let bytes = span_bytes::<T>(&layout)?;
        let alloc = crate::memory::DeviceAlloc::new(device, bytes)?;
        let offset = first_element_offset::<T>(&layout);
        Ok(DeviceArray {
            storage: Storage::Device(std::sync::Arc::new(alloc)),
            offset,
            layout,
            _element: PhantomData,
        })
    }

    /// A new array over the same memory.
    pub(crate) fn with_layout(&self, layout: Layout, offset: usize) -> DeviceArray<T> {
        DeviceArray {
            storage: self.storage.clone(),
            offset,
            layout,
            _element: PhantomData,
        }
    }

    /// The memory behind the array (what a stream keeps alive for work on it).
    #[cfg_attr(not(feature = "collectives"), allow(dead_code))]
    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The device holding the memory.
    pub fn device(&self) -> &Device {
        self.storage.device()
    }

    /// The layout (shape and element strides).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// Strides in elements (ndarray's convention).
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }

    /// Strides in bytes (Numba's `strides`).
    pub fn byte_strides(&self) -> Vec<isize> {
        self.layout.byte_strides(T::itemsize())
    }

    /// Number of axes.
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }

    /// Number of elements (1 for a 0-d array).
    pub fn size(&self) -> usize {
        self.layout.size()
    }

    /// Length of the first axis; an error for a 0-d array, like Numba's `len()`.
    pub fn len(&self) -> Result<usize> {
        self.layout
            .shape()
            .first()
            .copied()
            .ok_or(Error::InvalidArgument {
                name: "array",
                reason: "len() of a 0-d array".into(),
            })
    }

    /// `true` when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// `size * itemsize` (Numba's `nbytes`).
    pub fn nbytes(&self) -> usize {
        // Saturating: a broadcast array's size can be far larger than any memory.
        self.layout.size().saturating_mul(T::itemsize())
    }

    /// Bytes spanned by the strides: what a transfer moves (Numba's `alloc_size`).
    pub fn alloc_size(&self) -> usize {
        self.layout.span_len() * T::itemsize()
    }

    /// The element type's name (Numba's `dtype`).
    pub fn dtype(&self) -> &'static str {
        T::dtype()
    }

    /// C-contiguous by numpy's relaxed rules.
    pub fn is_c_contiguous(&self) -> bool {
        self.layout.is_c_contiguous()
    }

    /// Fortran-contiguous by numpy's relaxed rules.
    pub fn is_f_contiguous(&self) -> bool {
        self.layout.is_f_contiguous()
    }

    /// Device address of the first logical element (null for a zero-size array), for interop.
    pub fn device_ptr(&self) -> DevicePtr {
        if self.storage.base().is_null() {
            return DevicePtr::NULL;
        }
        DevicePtr(self.storage.base().0 + self.offset as u64)
    }

    /// `true` when the memory is host memory mapped into the device (zero copy), or managed
    /// memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// `true` when the memory is managed memory ([`Device::managed_array`]).
    pub fn is_managed(&self) -> bool {
        matches!(&self.storage, Storage::Mapped(b) if b.kind() == crate::memory::HostBufferKind::Managed)
    }

    /// `true` when `self` and `other` share memory.
    pub fn shares_memory_with<U: Element>(&self, other: &DeviceArray<U>) -> bool {
        self.storage.same_as(&other.storage)
    }

    /// Device address of the lowest byte the array spans, and the span's length in bytes.
    pub(crate) fn span(&self) -> (DevicePtr, usize) {
        let bytes = self.alloc_size();
        if bytes == 0 {
            return (DevicePtr::NULL, 0);
        }
        let low = self.offset as i64 + self.layout.min_offset() as i64 * T::itemsize() as i64;
        (
            DevicePtr(self.storage.base().0.wrapping_add(low as u64)),
            bytes,
        )
    }
}

/// Alignment every backend guarantees for device allocations.
pub(crate) const DEVICE_ALIGN: usize = 256;

/// Refuses element types that memory aligned to `max_align` bytes (`what`) cannot hold: ones
/// aligned beyond it (a slice of them would be misaligned), and zero-sized ones (no element
/// occupies memory, so shapes would be unbounded).
pub(crate) fn check_element<T: Element>(max_align: usize, what: &str) -> Result<()> {
    if std::mem::align_of::<T>() > max_align {
        return Err(Error::InvalidArgument {
            name: "element type",
            reason: format!(
                "{} needs {}-byte alignment; {what} are aligned to {max_align} bytes",
                T::dtype(),
                std::mem::align_of::<T>()
            ),
        });
    }
    if T::itemsize() == 0 {
        return Err(Error::InvalidArgument {
            name: "element type",
            reason: format!(
                "{} is zero-sized; arrays need elements of at least one byte",
                T::dtype()
            ),
        });
    }
    Ok(())
}

/// Bytes needed to hold `layout`'s span of `T`s.
pub(crate) fn span_bytes<T: Element>(layout: &Layout) -> Result<usize> {
    layout
        .span_len()
        .checked_mul(T::itemsize())
        .ok_or_else(|| Error::Overflow {
            what: format!("bytes for {} elements of {}", layout.span_len(), T::dtype()),
        })
}

/// Byte offset of the first logical element from the lowest address the layout reaches.
pub(crate) fn first_element_offset<T: Element>(layout: &Layout) -> usize {
    layout.min_offset().unsigned_abs() * T::itemsize()
}
