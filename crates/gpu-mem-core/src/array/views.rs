//! Views and layout changes of device arrays: slicing, reshape, ravel, split, squeeze,
//! `view_as`, and the transpose copy. The layout math lives in [`crate::layout`]; this module
//! only applies it to arrays and checks alignment.

use crate::array::DeviceArray;
use crate::array::device_array::DEVICE_ALIGN;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, ReshapeOrder, SliceInfoElem};

impl<T: Element> DeviceArray<T> {
    fn view_at(&self, layout: Layout, element_offset: isize) -> Result<DeviceArray<T>> {
        let offset = element_offset
            .checked_mul(T::itemsize() as isize)
            .and_then(|bytes| (self.offset as isize).checked_add(bytes))
            .and_then(|bytes| usize::try_from(bytes).ok())
            .ok_or_else(|| Error::Overflow {
                what: "view offset".into(),
            })?;
        Ok(self.with_layout(layout, offset))
    }

    /// A view of every element (shares memory).
    pub fn view(&self) -> DeviceArray<T> {
        self.with_layout(self.layout.clone(), self.offset)
    }

    /// A view selected by ndarray's `s![..]` (Numba's `d[...]` with slices and integers):
    /// `d.slice(s![1.., ..;2])`. Out-of-range slice ends are clamped like numpy's; out-of-range
    /// integer indices are [`Error::IndexOutOfBounds`]; a zero step is [`Error::ZeroStep`].
    pub fn slice(&self, info: impl AsRef<[SliceInfoElem]>) -> Result<DeviceArray<T>> {
        let (layout, offset) = self.layout.slice(info.as_ref())?;
        self.view_at(layout, offset)
    }

    /// The same memory with a new shape (Numba's `reshape`): one entry may be negative (inferred).
    /// Never copies; a non-contiguous array is refused ([`Error::Unsupported`]) as in Numba.
    pub fn reshape(
        &self,
        shape: &[isize],
        order: impl Into<ReshapeOrder>,
    ) -> Result<DeviceArray<T>> {
        let layout = self.layout.reshape(shape, order.into())?;
        Ok(self.with_layout(layout, self.offset))
    }

    /// A 1-d view of every element (Numba's `ravel`); refused for non-contiguous arrays.
    pub fn ravel(&self, order: impl Into<ReshapeOrder>) -> Result<DeviceArray<T>> {
        let layout = self.layout.ravel(order.into())?;
        Ok(self.with_layout(layout, self.offset))
    }

    /// Splits a 1-d unit-stride array into views of `section` elements, the last one shorter
    /// (Numba's `split`).
    pub fn split(&self, section: usize) -> Result<Vec<DeviceArray<T>>> {
        self.layout
            .split(section)?
            .into_iter()
            .map(|(layout, offset)| self.view_at(layout, offset))
            .collect()
    }

    /// Drops all size-1 axes (Numba's `squeeze()`).
    pub fn squeeze(&self) -> DeviceArray<T> {
        self.with_layout(self.layout.squeeze(), self.offset)
    }

    /// Drops the given size-1 axes (Numba's `squeeze(axis)`).
    pub fn squeeze_axes(&self, axes: &[usize]) -> Result<DeviceArray<T>> {
        let layout = self.layout.squeeze_axes(axes)?;
        Ok(self.with_layout(layout, self.offset))
    }

    /// The same memory seen as another element type (Numba's `view(dtype)`).
    pub fn view_as<U: Element>(&self) -> Result<DeviceArray<U>> {
        let layout = self
            .layout
            .view_as(T::itemsize(), U::itemsize())
            .map_err(|e| match e {
                Error::ViewAs { shape, reason, .. } => Error::ViewAs {
                    from: T::dtype(),
                    to: U::dtype(),
                    shape,
                    reason,
                },
                other => other,
            })?;
        // Host copies of the view are staged in memory aligned to no more than device memory
        // is (and built into `&[U]` there): a type that needs more cannot be copied soundly,
        // even where this one address happens to suit it.
        if std::mem::align_of::<U>() > DEVICE_ALIGN {
            return Err(Error::ViewAs {
                from: T::dtype(),
                to: U::dtype(),
                shape: self.shape().to_vec(),
                reason: "the new type needs more alignment than device memory has (256 bytes)",
            });
        }
        if !self
            .storage
            .is_aligned(self.offset, std::mem::align_of::<U>())
        {
            return Err(Error::ViewAs {
                from: T::dtype(),
                to: U::dtype(),
                shape: self.shape().to_vec(),
                reason: "the array's first element is not aligned for the new type",
            });
        }
        Ok(DeviceArray {
            storage: self.storage.clone(),
            offset: self.offset,
            layout,
            _element: std::marker::PhantomData,
        })
    }

    /// The transpose of a 2-d array, as a **new C-contiguous copy** (Numba's `d.T` on a GPU:
    /// a copy, not a view; writes to it do not reach `self`). Other dimensions are refused.
    #[track_caller]
    pub fn t(&self) -> Result<DeviceArray<T>> {
        let layout = self.layout.transposed_2d()?;
        let host = self.copy_to_host()?;
        let transposed = host.t().as_standard_layout().into_owned();
        let mut out = DeviceArray::<T>::allocate(self.device(), layout)?;
        out.copy_from_host(&transposed)?;
        Ok(out)
    }

    /// Numba's `transpose(axes)`: the identity permutation gives a view of `self`; any other
    /// permutation of a 2-d array gives [`DeviceArray::t`]'s copy; other axes of a 2-d array are
    /// [`Error::InvalidAxes`] ("invalid axes list (0, 0)"), other dimensions
    /// [`Error::Unsupported`] ("transposing a non-2D DeviceNDArray isn't supported").
    pub fn transpose(&self, axes: &[usize]) -> Result<DeviceArray<T>> {
        // (An empty list is no axes at all, as in Numba, not the identity of a 0-d array.)
        if !axes.is_empty() && self.layout.is_identity_axes(axes) {
            return Ok(self.view());
        }
        if self.ndim() == 2 && axes == [1, 0] {
            return self.t();
        }
        if self.ndim() != 2 {
            // Let the layout module word the refusal.
            self.layout.transposed_2d()?;
        }
        Err(Error::InvalidAxes {
            axes: axes.to_vec(),
        })
    }
}
