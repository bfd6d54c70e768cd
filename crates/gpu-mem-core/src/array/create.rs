//! Creating device arrays on a [`Device`]: `to_device`, `device_array`, `device_array_like`.

use crate::array::DeviceArray;
use crate::array::host_layout::{core_view, layout_of};
use crate::array::transfer::non_contiguous;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, Order};
use ndarray::{ArrayBase, Data, Dimension, RawData};

/// Anything with a shape and strides that `device_array_like` can copy: device arrays and
/// ndarray host arrays.
pub trait LayoutSource {
    /// The element type.
    type Elem: Element;
    /// Shape and element strides.
    fn source_layout(&self) -> Result<Layout>;
}

impl<T: Element> LayoutSource for DeviceArray<T> {
    type Elem = T;
    fn source_layout(&self) -> Result<Layout> {
        Ok(self.layout.clone())
    }
}

impl<S, D> LayoutSource for ArrayBase<S, D>
where
    S: RawData,
    S::Elem: Element,
    D: Dimension,
{
    type Elem = S::Elem;
    fn source_layout(&self) -> Result<Layout> {
        layout_of(self)
    }
}

impl Device {
    /// Copies a host array to a new device array (Numba's `cuda.to_device(ary)`).
    ///
    /// The device array keeps the host array's shape and strides (C or F order, and broadcast
    /// axes, for which only the core is stored). The host array must be contiguous once its
    /// broadcast axes are removed ([`Error::NonContiguous`] otherwise, as in Numba). A 0-d
    /// array (`ndarray::arr0(x)`) gives a 0-d device array.
    #[track_caller]
    pub fn to_device<S, D>(&self, host: &ArrayBase<S, D>) -> Result<DeviceArray<S::Elem>>
    where
        S: Data,
        S::Elem: Element,
        D: Dimension,
    {
        let layout = layout_of(host)?;
        let core = core_view(host);
        let core_layout = layout_of(&core)?;
        if !core_layout.is_contiguous() {
            return Err(non_contiguous(&layout));
        }
        let device = DeviceArray::<S::Elem>::allocate(self, layout)?;
        if device.alloc_size() > 0 {
            let src = core
                .as_slice_memory_order()
                .ok_or_else(|| non_contiguous(&core_layout))?;
            let (dst, bytes) = device.span();
            let src: &[u8] = bytemuck::cast_slice(src);
            let bytes = bytes.min(src.len());
            // SAFETY: `src` is a live host slice of at least `bytes` bytes; the destination is the
            // new array's span inside its fresh allocation.
            unsafe {
                self.backend()
                    .copy_htod(self.ordinal(), dst, src.as_ptr(), bytes)?
            };
        }
        Ok(device)
    }

    /// Copies a slice to a new 1-d device array (Numba's `cuda.to_device(list)`).
    #[track_caller]
    pub fn to_device_slice<T: Element>(&self, values: &[T]) -> Result<DeviceArray<T>> {
        self.to_device(&ndarray::ArrayView1::from(values))
    }

    /// Allocates an uninitialised device array (Numba's `cuda.device_array(shape, dtype,
    /// order=...)`). The simulator fills new memory with zeros; GPUs leave it undefined.
    #[track_caller]
    pub fn device_array<T: Element>(
        &self,
        shape: &[usize],
        order: Order,
    ) -> Result<DeviceArray<T>> {
        DeviceArray::allocate(self, Layout::contiguous(shape, order)?)
    }

    /// Allocates a device array with explicit element strides (Numba's `strides=`).
    #[track_caller]
    pub fn device_array_with_strides<T: Element>(
        &self,
        shape: &[usize],
        strides: &[isize],
    ) -> Result<DeviceArray<T>> {
        DeviceArray::allocate(self, Layout::with_strides(shape, strides)?)
    }

    /// Allocates a device array with `like`'s shape and element type and contiguous strides
    /// (Numba's `cuda.device_array_like`): F order if `like` is only F-contiguous, C order
    /// otherwise; axes of non-contiguous arrays are ordered as numpy's `empty_like` does.
    #[track_caller]
    pub fn device_array_like<L: LayoutSource>(&self, like: &L) -> Result<DeviceArray<L::Elem>> {
        DeviceArray::allocate(self, like.source_layout()?.like())
    }
}

impl<T: Element> DeviceArray<T> {
    /// Checks that `self` lives on `device`.
    pub fn check_device(&self, device: &Device) -> Result<()> {
        if self.device().same_as(device) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what: "array",
                expected: device.ordinal(),
                found: self.device().ordinal(),
            })
        }
    }
}
