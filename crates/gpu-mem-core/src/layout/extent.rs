//! Which element offsets a layout reaches.
//!
//! Guarantees: offsets are relative to the first logical element. [`Layout::min_offset`] is the
//! lowest reachable offset (never positive) and [`Layout::span_len`] the number of elements from
//! the lowest to the highest reachable offset inclusive (Numba's `alloc_size / itemsize`); both
//! are 0 for a zero-size layout, which reaches nothing. [`Layout::logical_offsets`] yields every
//! element's offset in row-major order over the shape. None of these can overflow (the extent of
//! a layout fits in `isize` by construction).

use super::Layout;

impl Layout {
    /// Lowest reachable element offset (<= 0); 0 for a zero-size layout.
    pub fn min_offset(&self) -> isize {
        self.extents.min_offset
    }

    /// Elements from the lowest to the highest reachable offset inclusive; 0 for a zero-size
    /// layout. A broadcast `(4, 3)` with strides `(0, 1)` spans 3.
    pub fn span_len(&self) -> usize {
        self.extents.span_len
    }

    /// Strides in bytes for elements of `itemsize` bytes (saturating; a layout built for a
    /// real allocation cannot reach the limit).
    pub fn byte_strides(&self, itemsize: usize) -> Vec<isize> {
        let itemsize = isize::try_from(itemsize).unwrap_or(isize::MAX);
        self.strides
            .iter()
            .map(|&stride| stride.saturating_mul(itemsize))
            .collect()
    }

    /// Offset of every element, in row-major order over the shape. A 0-d layout yields `0`
    /// once; a zero-size layout yields nothing.
    pub fn logical_offsets(&self) -> impl Iterator<Item = isize> + '_ {
        LogicalOffsets {
            layout: self,
            index: vec![0; self.ndim()],
            offset: 0,
            remaining: self.size(),
        }
    }
}

/// Largest index of an axis of length `len` (>= 1), as `isize`.
pub(super) fn last_index(len: usize) -> isize {
    isize::try_from(len.saturating_sub(1)).unwrap_or(isize::MAX)
}

/// Row-major odometer over a layout's indices, tracking the element offset incrementally.
#[derive(Debug, Clone)]
pub struct LogicalOffsets<'a> {
    layout: &'a Layout,
    index: Vec<usize>,
    offset: isize,
    remaining: usize,
}

impl Iterator for LogicalOffsets<'_> {
    type Item = isize;

    fn next(&mut self) -> Option<isize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.offset;
        if self.remaining > 0 {
            self.advance();
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for LogicalOffsets<'_> {}

impl LogicalOffsets<'_> {
    /// Moves to the next index: bump the last axis, carrying into earlier axes. Offsets stay
    /// within the layout's extent, so the arithmetic cannot overflow.
    fn advance(&mut self) {
        let shape = self.layout.shape();
        let strides = self.layout.strides();
        for axis in (0..shape.len()).rev() {
            let stride = strides[axis];
            if self.index[axis] + 1 < shape[axis] {
                self.index[axis] += 1;
                self.offset = self.offset.saturating_add(stride);
                return;
            }
            // Wrap this axis back to 0 and carry.
            let back = last_index(shape[axis]).saturating_mul(stride);
            self.offset = self.offset.saturating_sub(back);
            self.index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};

    fn s(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice { start, end, step }
    }

    /// (span_len * itemsize, size * itemsize) = Numba's (alloc_size, nbytes).
    fn bytes(l: &Layout, itemsize: usize) -> (usize, usize) {
        (l.span_len() * itemsize, l.size() * itemsize)
    }

    #[test]
    fn table_2_1() {
        let a34 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        assert_eq!(a34.byte_strides(4), vec![16, 4]);
        assert_eq!(bytes(&a34, 4), (48, 48));

        let i10 = Layout::contiguous(&[10], Order::C).unwrap();
        let (step2, off) = i10.slice(&[s(0, None, 2)]).unwrap();
        assert_eq!(
            (step2.shape(), step2.byte_strides(8), off),
            (&[5usize][..], vec![16], 0)
        );
        assert_eq!(bytes(&step2, 8), (72, 40));

        let (rev, off) = i10.slice(&[s(0, None, -1)]).unwrap();
        assert_eq!((rev.byte_strides(8), off), (vec![-8], 9));
        assert_eq!(bytes(&rev, 8), (80, 80));
        assert_eq!(rev.min_offset(), -9);

        let (col, off) = a34
            .slice(&[s(0, None, 1), SliceInfoElem::Index(1)])
            .unwrap();
        assert_eq!(
            (col.shape(), col.byte_strides(4), off),
            (&[3usize][..], vec![16], 1)
        );
        assert_eq!(bytes(&col, 4), (36, 12));

        let zero_d = Layout::scalar();
        assert_eq!((zero_d.ndim(), zero_d.size()), (0, 1));
        assert_eq!(bytes(&zero_d, 8), (8, 8));

        let empty = Layout::contiguous(&[3, 0], Order::C).unwrap();
        assert_eq!(empty.byte_strides(8), vec![0, 8]);
        assert_eq!(bytes(&empty, 8), (0, 0));
        assert_eq!(empty.min_offset(), 0);

        let bc = Layout::with_strides(&[4, 3], &[0, 1]).unwrap();
        assert_eq!(bc.byte_strides(8), vec![0, 8]);
        assert_eq!(bytes(&bc, 8), (24, 96));
    }

    #[test]
    fn logical_offsets_row_major() {
        let f = Layout::contiguous(&[2, 3], Order::F).unwrap();
        assert_eq!(
            f.logical_offsets().collect::<Vec<_>>(),
            vec![0, 2, 4, 1, 3, 5]
        );
        assert_eq!(
            Layout::scalar().logical_offsets().collect::<Vec<_>>(),
            vec![0]
        );
        let empty = Layout::contiguous(&[2, 0], Order::C).unwrap();
        assert_eq!(empty.logical_offsets().count(), 0);
        let rev = Layout::with_strides(&[3], &[-2]).unwrap();
        assert_eq!(rev.logical_offsets().collect::<Vec<_>>(), vec![0, -2, -4]);
    }
}
