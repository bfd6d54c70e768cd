//! Contiguity and stride-pattern tests.
//!
//! Guarantees: C/F contiguity follows numpy's relaxed rules, which Numba's `is_c_contiguous()` /
//! `is_f_contiguous()` document: axes of length 1 are ignored (their
//! stride never matters), a zero-size layout is both C and F, a 0-d layout is both, and an axis
//! of length > 1 with stride 0 (a broadcast axis) makes the layout neither. A layout that is
//! contiguous has every reachable element at offsets `0..size` from its first logical element.
//! A dense layout (contiguous up to the order and direction of its axes) reaches every offset of
//! its span exactly once.

use super::Layout;

impl Layout {
    /// C-contiguous under numpy's relaxed rules (see the module docs).
    pub fn is_c_contiguous(&self) -> bool {
        contiguous_along(self.shape.iter().zip(&self.strides).rev(), self.size())
    }

    /// F-contiguous under numpy's relaxed rules (see the module docs).
    pub fn is_f_contiguous(&self) -> bool {
        contiguous_along(self.shape.iter().zip(&self.strides), self.size())
    }

    /// C- or F-contiguous.
    pub fn is_contiguous(&self) -> bool {
        self.is_c_contiguous() || self.is_f_contiguous()
    }

    /// Every element of the span is reached exactly once: the layout is a contiguous one with
    /// its axes permuted and possibly reversed (a transpose, a negative step), so the span's
    /// bytes are the elements' bytes. `span_len() == size()` alone is not enough: overlapping
    /// axes with gaps between them can reach as many offsets as the span has (shape
    /// `(2, 2, 2)`, strides `(1, 5, 3)` reach 0-2 and 5-7, twice some, never 3 or 4).
    pub fn is_dense(&self) -> bool {
        if self.size() == 0 {
            return true;
        }
        let mut expected = 1usize;
        for (stride, len) in self.axes_by_stride() {
            if stride != expected {
                return false;
            }
            expected = expected.saturating_mul(len);
        }
        true
    }

    /// Every index reaches an offset of its own (no element is reached twice), by a sufficient
    /// test: with the axes of length > 1 sorted by stride magnitude, each stride is larger than
    /// the farthest the faster axes reach. Dense, stepped and gapped layouts pass; broadcast
    /// ones and axes that overlap (shape `(2, 2)`, strides `(1, 1)`) do not, and neither do the
    /// rare interleaved layouts that reach distinct offsets without nesting (shape `(2, 3)`,
    /// strides `(3, 2)`: offsets 0, 2, 4, 3, 5, 7), which callers treat as overlapping.
    pub fn never_overlaps(&self) -> bool {
        if self.size() == 0 {
            return true;
        }
        let mut reach = 0usize;
        for (stride, len) in self.axes_by_stride() {
            if stride <= reach {
                return false;
            }
            reach = reach.saturating_add(stride.saturating_mul(len - 1));
        }
        true
    }

    /// Some axis of length > 1 is walked backwards.
    pub fn has_negative_strides(&self) -> bool {
        self.axes_longer_than_one().any(|(_, stride)| stride < 0)
    }

    /// Some axis of length > 1 has stride 0 (it repeats one element: a broadcast axis).
    pub fn is_broadcast(&self) -> bool {
        self.axes_longer_than_one().any(|(_, stride)| stride == 0)
    }

    /// `(|stride|, length)` of the axes longer than 1, fastest (smallest stride) first.
    fn axes_by_stride(&self) -> Vec<(usize, usize)> {
        let mut axes: Vec<(usize, usize)> = self
            .axes_longer_than_one()
            .map(|(len, stride)| (stride.unsigned_abs(), len))
            .collect();
        axes.sort_unstable();
        axes
    }

    /// The axes whose stride matters: those of length > 1.
    pub(crate) fn axes_longer_than_one(&self) -> impl Iterator<Item = (usize, isize)> + '_ {
        self.shape
            .iter()
            .zip(&self.strides)
            .filter(|&(&len, _)| len > 1)
            .map(|(&len, &stride)| (len, stride))
    }
}

/// Walks the axes from the fastest-varying to the slowest and checks each stride equals the
/// number of elements of the faster axes.
fn contiguous_along<'a>(axes: impl Iterator<Item = (&'a usize, &'a isize)>, size: usize) -> bool {
    if size == 0 {
        return true;
    }
    let mut expected: isize = 1;
    for (&len, &stride) in axes {
        if len == 1 {
            continue;
        }
        if stride != expected {
            return false;
        }
        // `size` fits in isize (layout invariant), so this partial product does too.
        expected = expected.saturating_mul(isize::try_from(len).unwrap_or(isize::MAX));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};

    fn s(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice { start, end, step }
    }

    fn flags(l: &Layout) -> (bool, bool) {
        (l.is_c_contiguous(), l.is_f_contiguous())
    }

    #[test]
    fn table_2_2() {
        let c25 = Layout::contiguous(&[2, 5], Order::C).unwrap();
        assert_eq!(flags(&c25), (true, false));
        let f25 = Layout::contiguous(&[2, 5], Order::F).unwrap();
        assert_eq!(flags(&f25), (false, true));
        let d1 = Layout::contiguous(&[10], Order::C).unwrap();
        assert_eq!(flags(&d1), (true, true));
        assert_eq!(
            flags(&Layout::contiguous(&[1, 4], Order::C).unwrap()),
            (true, true)
        );
        assert_eq!(
            flags(&Layout::contiguous(&[4, 1], Order::C).unwrap()),
            (true, true)
        );
        // d[::2], d[::-1]
        let (step2, _) = d1.slice(&[s(0, None, 2)]).unwrap();
        assert_eq!(flags(&step2), (false, false));
        let (rev, _) = d1.slice(&[s(0, None, -1)]).unwrap();
        assert_eq!(flags(&rev), (false, false));
        // d2[:,1], d2[:,:2] of a (3,4) array
        let d2 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        let (col, _) = d2.slice(&[s(0, None, 1), SliceInfoElem::Index(1)]).unwrap();
        assert_eq!(flags(&col), (false, false));
        let (left, _) = d2.slice(&[s(0, None, 1), s(0, Some(2), 1)]).unwrap();
        assert_eq!(flags(&left), (false, false));
        // d2[1,:]
        let (row, _) = d2.slice(&[SliceInfoElem::Index(1)]).unwrap();
        assert_eq!(flags(&row), (true, true));
        // (0,3)
        assert_eq!(
            flags(&Layout::contiguous(&[0, 3], Order::C).unwrap()),
            (true, true)
        );
        // 0-d
        assert_eq!(flags(&Layout::scalar()), (true, true));
        // broadcast (4,3) strides (0,1)
        let b = Layout::with_strides(&[4, 3], &[0, 1]).unwrap();
        assert_eq!(flags(&b), (false, false));
        assert!(b.is_broadcast());
        // DeviceNDArray((1,10),(800,8),f8): relaxed strides.
        let relaxed = Layout::with_strides(&[1, 10], &[100, 1]).unwrap();
        assert_eq!(flags(&relaxed), (true, true));
    }

    #[test]
    fn negative_and_broadcast_ignore_length_one_axes() {
        let l = Layout::with_strides(&[1, 3], &[-5, 1]).unwrap();
        assert!(!l.has_negative_strides());
        assert!(l.is_c_contiguous());
        let l = Layout::with_strides(&[1, 3], &[0, 1]).unwrap();
        assert!(!l.is_broadcast());
        let l = Layout::with_strides(&[3], &[-1]).unwrap();
        assert!(l.has_negative_strides());
        assert!(!l.is_contiguous());
    }
}
