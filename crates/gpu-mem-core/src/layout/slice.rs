//! Slicing with ndarray's `s![]` elements, and full integer indexing.
//!
//! Guarantees: [`Layout::slice`] selects the same elements, in the same order, as
//! `ndarray::ArrayBase::slice` with the same [`SliceInfoElem`]s: `start..end` is taken first
//! (negative bounds count from the end of the axis), then stepped through, from its end when the
//! step is negative. On purpose it differs from ndarray in that
//! - out-of-range bounds are clamped like numpy instead of panicking (`20..30` of a 10-long axis
//!   is empty);
//! - a zero step is [`Error::ZeroStep`], an out-of-range `Index` is [`Error::IndexOutOfBounds`],
//!   too many non-`NewAxis` elements is [`Error::TooManyIndices`];
//! - missing trailing axes are taken whole;
//! - a sliced axis always gets `stride * step`, the stride numpy and Numba report (`i10[3:3]` has
//!   strides `(8,)`), where ndarray writes 0 for result axes of length <= 1. This changes no
//!   reachable element: such an axis is never stepped along.
//!
//! The returned offset is that of the new first logical element from the old one. A result
//! with no elements gets offset 0, so it never points outside the original.

use super::{Layout, SliceInfoElem};
use crate::error::{Error, Result};

impl Layout {
    /// Applies `info` like ndarray's `slice` (see the module docs for the differences) and
    /// returns the new layout and the element offset of its first logical element.
    pub fn slice(&self, info: &[SliceInfoElem]) -> Result<(Layout, isize)> {
        let consumed = info
            .iter()
            .filter(|elem| !matches!(elem, SliceInfoElem::NewAxis))
            .count();
        if consumed > self.ndim() {
            return Err(Error::TooManyIndices {
                extra: consumed - self.ndim(),
                ndim: self.ndim(),
            });
        }
        let mut shape = Vec::with_capacity(info.len() + self.ndim());
        let mut strides = Vec::with_capacity(shape.capacity());
        let mut offset: isize = 0;
        let mut axis = 0;
        for elem in info {
            match *elem {
                SliceInfoElem::NewAxis => {
                    shape.push(1);
                    strides.push(0);
                }
                SliceInfoElem::Index(index) => {
                    let (len, stride) = (self.shape[axis], self.strides[axis]);
                    let at = resolve_index(index, axis, len)?;
                    offset = offset.saturating_add(at.saturating_mul(stride));
                    axis += 1;
                }
                SliceInfoElem::Slice { start, end, step } => {
                    let (len, stride) = (self.shape[axis], self.strides[axis]);
                    let cut = slice_axis(len, stride, start, end, step)
                        .ok_or(Error::ZeroStep { axis })?;
                    shape.push(cut.len);
                    strides.push(cut.stride);
                    offset = offset.saturating_add(cut.offset);
                    axis += 1;
                }
            }
        }
        shape.extend_from_slice(&self.shape[axis..]);
        strides.extend_from_slice(&self.strides[axis..]);
        let layout = Layout::from_parts(shape, strides);
        // An empty selection reaches nothing; do not let it point past the original.
        let offset = if layout.size() == 0 { 0 } else { offset };
        Ok((layout, offset))
    }

    /// Element offset of the element at `index` (one integer per axis; negative counts from
    /// the end, as in Python).
    ///
    /// Errors: more indices than axes is [`Error::TooManyIndices`], fewer is
    /// [`Error::InvalidArgument`] (`index`), an index outside its axis is
    /// [`Error::IndexOutOfBounds`] with the index as given.
    pub fn offset_of(&self, index: &[isize]) -> Result<isize> {
        if index.len() > self.ndim() {
            return Err(Error::TooManyIndices {
                extra: index.len() - self.ndim(),
                ndim: self.ndim(),
            });
        }
        if index.len() < self.ndim() {
            return Err(Error::InvalidArgument {
                name: "index",
                reason: format!(
                    "an element needs {} indices, {} given",
                    self.ndim(),
                    index.len()
                ),
            });
        }
        let mut offset: isize = 0;
        for (axis, ((&i, &len), &stride)) in
            index.iter().zip(&self.shape).zip(&self.strides).enumerate()
        {
            let at = resolve_index(i, axis, len)?;
            // Within the extent, which fits in isize by construction.
            offset = offset.saturating_add(at.saturating_mul(stride));
        }
        Ok(offset)
    }
}

/// A Python-style index made non-negative and checked against the axis length.
fn resolve_index(index: isize, axis: usize, len: usize) -> Result<isize> {
    let out_of_bounds = Error::IndexOutOfBounds {
        index,
        axis,
        size: len,
    };
    let len = isize::try_from(len).map_err(|_| Error::Overflow {
        what: format!("length {len} of axis {axis}"),
    })?;
    let at = if index < 0 { index + len } else { index };
    if (0..len).contains(&at) {
        Ok(at)
    } else {
        Err(out_of_bounds)
    }
}

/// One axis after slicing.
#[derive(Debug, PartialEq, Eq)]
struct AxisCut {
    len: usize,
    stride: isize,
    /// Offset of the axis' new first element from its old one.
    offset: isize,
}

/// ndarray's per-axis slice with numpy's clamping. `None` when `step == 0`.
fn slice_axis(
    len: usize,
    stride: isize,
    start: isize,
    end: Option<isize>,
    step: isize,
) -> Option<AxisCut> {
    if step == 0 {
        return None;
    }
    // Lengths fit in isize (layout invariant).
    let ilen = isize::try_from(len).unwrap_or(isize::MAX);
    let clamp = |bound: isize| {
        if bound < 0 {
            bound.saturating_add(ilen).max(0)
        } else {
            bound.min(ilen)
        }
    };
    let start = clamp(start);
    let end = clamp(end.unwrap_or(ilen)).max(start);
    let span = end - start;
    // ceil(span / |step|) without overflow.
    let abs_step = step.unsigned_abs();
    let span_u = span.unsigned_abs();
    let new_len = span_u / abs_step + usize::from(span_u % abs_step != 0);
    let offset = match (span, step > 0) {
        (0, _) => 0,
        // Walking backwards starts at the last element of start..end.
        (_, false) => (end - 1).saturating_mul(stride),
        (_, true) => start.saturating_mul(stride),
    };
    // numpy's stride * step. It can only overflow when the result has one element (otherwise
    // it is bounded by the input's extent), and then it is never used: fall back to ndarray's 0.
    // isize::MIN (e.g. a step of isize::MIN on a length-1 axis) has no magnitude in isize, which
    // strides must have: it is treated the same way.
    let new_stride = stride
        .checked_mul(step)
        .filter(|&s| s != isize::MIN)
        .unwrap_or(0);
    Some(AxisCut {
        len: new_len,
        stride: new_stride,
        offset,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};
    use crate::error::Error;

    fn s(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice { start, end, step }
    }
    const ALL: SliceInfoElem = SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    };
    use SliceInfoElem::Index;

    /// (shape, byte strides) of a slice, itemsize given.
    fn view(l: &Layout, info: &[SliceInfoElem], itemsize: usize) -> (Vec<usize>, Vec<isize>) {
        let (v, _) = l.slice(info).unwrap();
        (v.shape().to_vec(), v.byte_strides(itemsize))
    }

    #[test]
    fn table_2_8_views() {
        let i10 = Layout::contiguous(&[10], Order::C).unwrap();
        assert_eq!(view(&i10, &[s(1, Some(4), 1)], 8), (vec![3], vec![8]));
        assert_eq!(view(&i10, &[s(0, None, 2)], 8), (vec![5], vec![16]));
        assert_eq!(view(&i10, &[s(0, None, -1)], 8), (vec![10], vec![-8]));
        // Python's [8:2:-2] selects 8, 6, 4; in ndarray terms that is 3..9 stepped by -2.
        let (v, off) = i10.slice(&[s(3, Some(9), -2)]).unwrap();
        assert_eq!(
            (v.shape(), v.byte_strides(8), off),
            (&[3usize][..], vec![-16], 8)
        );
        assert_eq!(view(&i10, &[s(3, Some(3), 1)], 8), (vec![0], vec![8]));
        assert_eq!(view(&i10, &[s(20, Some(30), 1)], 8), (vec![0], vec![8]));

        let a34 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        assert_eq!(view(&a34, &[Index(1)], 4), (vec![4], vec![4]));
        assert_eq!(view(&a34, &[ALL, Index(1)], 4), (vec![3], vec![16]));
        assert_eq!(
            view(&a34, &[s(1, None, 1), s(0, None, 2)], 4),
            (vec![2, 2], vec![16, 8])
        );
        assert_eq!(
            view(&a34, &[ALL, s(0, None, -1)], 4),
            (vec![3, 4], vec![16, -4])
        );

        let z234 = Layout::contiguous(&[2, 3, 4], Order::C).unwrap();
        assert_eq!(view(&z234, &[Index(1)], 8), (vec![3, 4], vec![32, 8]));
        assert_eq!(view(&z234, &[ALL, Index(1)], 8), (vec![2, 4], vec![96, 8]));
        assert_eq!(
            view(&z234, &[ALL, ALL, Index(1)], 8),
            (vec![2, 3], vec![96, 32])
        );
    }

    #[test]
    fn table_2_8_offsets_and_errors() {
        let i10 = Layout::contiguous(&[10], Order::C).unwrap();
        // d[::-1] points at base + 72 bytes = element 9.
        assert_eq!(i10.slice(&[s(0, None, -1)]).unwrap().1, 9);
        assert!(matches!(
            i10.slice(&[s(0, None, 0)]),
            Err(Error::ZeroStep { axis: 0 })
        ));
        assert!(matches!(
            i10.slice(&[Index(10)]),
            Err(Error::IndexOutOfBounds {
                index: 10,
                axis: 0,
                size: 10
            })
        ));
        assert!(matches!(
            i10.slice(&[Index(-11)]),
            Err(Error::IndexOutOfBounds { index: -11, .. })
        ));
        assert_eq!(i10.slice(&[Index(-10)]).unwrap(), (Layout::scalar(), 0));
        assert!(matches!(
            i10.slice(&[Index(0), Index(0)]),
            Err(Error::TooManyIndices { extra: 1, ndim: 1 })
        ));
        // d[()] on an n-d array is a full view.
        assert_eq!(i10.slice(&[]).unwrap(), (i10.clone(), 0));
        // 0-d: d[0] is "1 extra indices given".
        assert!(matches!(
            Layout::scalar().slice(&[Index(0)]),
            Err(Error::TooManyIndices { extra: 1, ndim: 0 })
        ));
        // Empty arrays: d[0] is an IndexError.
        let empty = Layout::contiguous(&[0], Order::C).unwrap();
        assert!(matches!(
            empty.slice(&[Index(0)]),
            Err(Error::IndexOutOfBounds { .. })
        ));
        // Slices of empty slices stay empty.
        let (e, _) = i10.slice(&[s(3, Some(3), 1)]).unwrap();
        let (ee, off) = e.slice(&[s(0, None, -1)]).unwrap();
        assert_eq!(
            (ee.shape(), ee.strides(), off),
            (&[0usize][..], &[-1isize][..], 0)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn new_axis_and_every_index() {
        let a = Layout::contiguous(&[2, 3], Order::C).unwrap();
        let (v, off) = a
            .slice(&[SliceInfoElem::NewAxis, Index(1), SliceInfoElem::NewAxis])
            .unwrap();
        assert_eq!(
            (v.shape(), v.strides(), off),
            (&[1usize, 1, 3][..], &[0isize, 0, 1][..], 3)
        );
        // Every index in [-n, n) of a 1-3-d array, against offset_of.
        let c = Layout::contiguous(&[2, 3, 4], Order::F).unwrap();
        for i in -2..2isize {
            for j in -3..3isize {
                for k in -4..4isize {
                    let (v, off) = c.slice(&[Index(i), Index(j), Index(k)]).unwrap();
                    assert_eq!(v, Layout::scalar());
                    assert_eq!(off, c.offset_of(&[i, j, k]).unwrap());
                    let pos = |x: isize, n: isize| if x < 0 { x + n } else { x };
                    assert_eq!(off, pos(i, 2) + 2 * pos(j, 3) + 6 * pos(k, 4));
                }
            }
        }
        assert!(matches!(
            c.offset_of(&[0, 0]),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            c.offset_of(&[0, 3, 0]),
            Err(Error::IndexOutOfBounds {
                index: 3,
                axis: 1,
                size: 3
            })
        ));
        assert!(matches!(
            c.offset_of(&[0, 0, 0, 0]),
            Err(Error::TooManyIndices { extra: 1, ndim: 3 })
        ));
    }

    #[test]
    fn huge_steps_do_not_overflow() {
        let a = Layout::with_strides(&[10], &[3]).unwrap();
        let (v, off) = a.slice(&[s(0, None, isize::MAX)]).unwrap();
        assert_eq!((v.shape(), off), (&[1usize][..], 0));
        let (v, off) = a
            .slice(&[s(isize::MIN, Some(isize::MAX), isize::MIN)])
            .unwrap();
        assert_eq!((v.shape(), off), (&[1usize][..], 27));
    }
}
