//! Bridging ndarray host arrays and gpu-mem layouts.

use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use ndarray::{ArrayBase, ArrayD, ArrayViewD, Axis, Data, Dimension, IxDyn, RawData, ShapeBuilder};
use std::borrow::Cow;

/// The layout of an ndarray array (element strides, as ndarray reports them).
pub(crate) fn layout_of<S: RawData, D: Dimension>(array: &ArrayBase<S, D>) -> Result<Layout> {
    Layout::with_strides(array.shape(), array.strides())
}

/// Numba's `array_core`: the view without its broadcast (stride-0) axes.
pub(crate) fn core_view<'a, S, D>(array: &'a ArrayBase<S, D>) -> ArrayViewD<'a, S::Elem>
where
    S: Data,
    D: Dimension,
{
    let mut view = array.view().into_dyn();
    for axis in (0..view.ndim()).rev() {
        if view.strides()[axis] == 0 && view.shape()[axis] > 0 {
            view = view.index_axis_move(Axis(axis), 0);
        }
    }
    view
}

/// `view` laid out contiguously in C order (borrowed when it already is).
pub(crate) fn contiguous_c<'a, T: Element>(view: ArrayViewD<'a, T>) -> Cow<'a, [T]> {
    if let Some(slice) = view.to_slice() {
        return Cow::Borrowed(slice);
    }
    Cow::Owned(view.iter().copied().collect())
}

/// `view` laid out contiguously in Fortran order (borrowed when it already is).
pub(crate) fn contiguous_f<'a, T: Element>(view: ArrayViewD<'a, T>) -> Cow<'a, [T]> {
    let reversed = view.reversed_axes();
    if let Some(slice) = reversed.to_slice() {
        return Cow::Borrowed(slice);
    }
    Cow::Owned(reversed.iter().copied().collect())
}

/// Builds a host array with `layout` from the elements of its memory span (`span[0]` is the
/// lowest-addressed element). Keeps the device strides like Numba's `copy_to_host`, so gaps of a
/// strided array are carried along; negative strides become reversed axes; broadcast layouts,
/// which an owned ndarray cannot alias, are materialised.
pub(crate) fn array_from_span<T: Element>(span: Vec<T>, layout: &Layout) -> Result<ArrayD<T>> {
    let shape = IxDyn(layout.shape());
    if layout.size() == 0 {
        return Ok(ArrayD::from_elem(shape, T::zeroed()));
    }
    if !layout.is_broadcast() {
        let abs: Vec<usize> = layout.strides().iter().map(|s| s.unsigned_abs()).collect();
        if let Ok(mut array) =
            ArrayD::from_shape_vec(shape.clone().strides(IxDyn(&abs)), span.clone())
        {
            for (axis, stride) in layout.strides().iter().enumerate() {
                if *stride < 0 {
                    array.invert_axis(Axis(axis));
                }
            }
            return Ok(array);
        }
    }
    let base = layout.min_offset();
    let values: Vec<T> = layout
        .logical_offsets()
        .map(|offset| {
            span.get((offset - base) as usize)
                .copied()
                .unwrap_or_else(T::zeroed)
        })
        .collect();
    ArrayD::from_shape_vec(shape, values).map_err(|e| crate::Error::InvalidShape {
        shape: crate::error::fmt_dims(layout.shape()),
        reason: e.to_string(),
    })
}
