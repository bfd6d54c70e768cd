//! Bridging ndarray host arrays and gpu-mem layouts.

use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use crate::memory::{try_collect, zeroed_vec};
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
pub(crate) fn contiguous_c<'a, T: Element>(view: ArrayViewD<'a, T>) -> Result<Cow<'a, [T]>> {
    if let Some(slice) = view.to_slice() {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(try_collect(
        view.iter().copied(),
        "a contiguous copy of a host array",
    )?))
}

/// `view` laid out contiguously in Fortran order (borrowed when it already is).
pub(crate) fn contiguous_f<'a, T: Element>(view: ArrayViewD<'a, T>) -> Result<Cow<'a, [T]>> {
    let reversed = view.reversed_axes();
    if let Some(slice) = reversed.to_slice() {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(try_collect(
        reversed.iter().copied(),
        "a contiguous copy of a host array",
    )?))
}

fn shape_error(layout: &Layout, error: ndarray::ShapeError) -> crate::Error {
    crate::Error::InvalidShape {
        shape: crate::error::fmt_dims(layout.shape()),
        reason: error.to_string(),
    }
}

/// Builds a host array with `layout` from the elements of its memory span (`span[0]` is the
/// lowest-addressed element). Keeps the device strides like Numba's `copy_to_host`, so gaps of a
/// strided array are carried along; negative strides become reversed axes; broadcast layouts,
/// which an owned ndarray cannot alias, are materialised (allocated fallibly: a broadcast can
/// stand for more elements than the host can hold, which is an [`Error::HostOutOfMemory`]).
///
/// [`Error::HostOutOfMemory`]: crate::Error::HostOutOfMemory
pub(crate) fn array_from_span<T: Element>(mut span: Vec<T>, layout: &Layout) -> Result<ArrayD<T>> {
    let shape = IxDyn(layout.shape());
    if layout.size() == 0 {
        return ArrayD::from_shape_vec(shape, Vec::new()).map_err(|e| shape_error(layout, e));
    }
    // A stride of isize::MIN has no magnitude in isize; such an axis has length 1 and takes the
    // materialising path below.
    let keeps_strides = !layout.is_broadcast() && layout.strides().iter().all(|&s| s != isize::MIN);
    if keeps_strides {
        let abs: Vec<usize> = layout.strides().iter().map(|s| s.unsigned_abs()).collect();
        let strided = shape.clone().strides(IxDyn(&abs));
        // Checked on a borrowed view first, so the span is only moved when it will be used; a
        // mutable one, checked as an owned array is (a read-only view accepts axes that
        // overlap, which an owned array refuses: those are materialised below).
        if ndarray::ArrayViewMutD::from_shape(strided.clone(), &mut span).is_ok() {
            let mut array =
                ArrayD::from_shape_vec(strided, span).map_err(|e| shape_error(layout, e))?;
            for (axis, stride) in layout.strides().iter().enumerate() {
                if *stride < 0 {
                    array.invert_axis(Axis(axis));
                }
            }
            return Ok(array);
        }
    }
    let base = layout.min_offset();
    let mut values = zeroed_vec::<T>(layout.size(), "a copy of a device array on the host")?;
    for (slot, offset) in values.iter_mut().zip(layout.logical_offsets()) {
        if let Some(value) = usize::try_from(offset - base)
            .ok()
            .and_then(|i| span.get(i))
        {
            *slot = *value;
        }
    }
    ArrayD::from_shape_vec(shape, values).map_err(|e| shape_error(layout, e))
}
