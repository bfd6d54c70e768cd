//! Layouts of new arrays derived from existing ones: `device_array_like` and Numba's 2-d `T`.
//!
//! Guarantees: [`Layout::like`] has the same shape and dense strides (every element at a
//! distinct offset in `0..size`, no negative strides), following Numba's
//! `_contiguous_strides_like_array`. [`Layout::transposed_2d`] is the
//! layout of the **new** C-contiguous array Numba's `T` copies into (§2.10); it is not a view.

use super::{Layout, Order};
use crate::error::{Error, Result};

impl Layout {
    /// Strides for a new array shaped like this one (`device_array_like`).
    ///
    /// A contiguous layout, or one with at most one axis, gets the default strides: F if it is
    /// F- but not C-contiguous, else C. Any other layout gets numpy's `empty_like` strides as
    /// Numba computes them: axes sorted by stride ascending (stable for ties) receive
    /// contiguous strides in that order, so a transposed or gapped array keeps its axis order
    /// without its gaps. Numba sorts by the *signed* stride, so a reversed axis counts as the
    /// fastest-varying one; this follows Numba.
    pub fn like(&self) -> Layout {
        let c = self.is_c_contiguous();
        let f = self.is_f_contiguous();
        if c || f || self.ndim() <= 1 {
            let order = if f && !c { Order::F } else { Order::C };
            return self.contiguous_like(order);
        }
        let mut axes: Vec<usize> = (0..self.ndim()).collect();
        // `sort_by_key` is stable: equal strides keep their axis order, as in Python.
        axes.sort_by_key(|&axis| self.strides[axis]);
        let mut strides = vec![0isize; self.ndim()];
        let mut acc: isize = 1;
        for axis in axes {
            strides[axis] = acc;
            // Partial products of the lengths fit in isize (layout invariant); a zero length
            // makes the rest 0.
            acc = acc.saturating_mul(isize::try_from(self.shape[axis]).unwrap_or(isize::MAX));
        }
        Layout::from_parts(self.shape.clone(), strides)
    }

    /// The layout of the array Numba's `T` / `transpose()` produces for a 2-d array: a new
    /// C-contiguous `(cols, rows)` array holding a copy.
    ///
    /// Errors: [`Error::Unsupported`] "transposing a non-2D DeviceNDArray isn't supported"
    /// unless the layout is 2-d.
    pub fn transposed_2d(&self) -> Result<Layout> {
        match *self.shape.as_slice() {
            [rows, cols] => Layout::contiguous(&[cols, rows], Order::C),
            _ => Err(Error::Unsupported {
                operation: "transpose",
                reason: format!(
                    "transposing a non-2D DeviceNDArray isn't supported (ndim {})",
                    self.ndim()
                ),
            }),
        }
    }

    /// `axes` is `0..ndim` in order, so `transpose(axes)` returns the array itself (any ndim).
    pub fn is_identity_axes(&self, axes: &[usize]) -> bool {
        axes.len() == self.ndim() && axes.iter().enumerate().all(|(i, &axis)| i == axis)
    }

    /// Contiguous strides of this shape; the shape is already valid, so this cannot fail.
    fn contiguous_like(&self, order: Order) -> Layout {
        let n = self.ndim();
        let mut strides = vec![0isize; n];
        let mut acc: isize = 1;
        let mut set = |axis: usize| {
            strides[axis] = acc;
            acc = acc.saturating_mul(isize::try_from(self.shape[axis]).unwrap_or(isize::MAX));
        };
        match order {
            Order::C => (0..n).rev().for_each(&mut set),
            Order::F => (0..n).for_each(&mut set),
        }
        Layout::from_parts(self.shape.clone(), strides)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};
    use crate::error::Error;

    fn s(step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice {
            start: 0,
            end: None,
            step,
        }
    }

    /// A numpy-style transpose, for building inputs.
    fn permuted(l: &Layout, axes: &[usize]) -> Layout {
        let shape: Vec<usize> = axes.iter().map(|&a| l.shape()[a]).collect();
        let strides: Vec<isize> = axes.iter().map(|&a| l.strides()[a]).collect();
        Layout::with_strides(&shape, &strides).unwrap()
    }

    #[test]
    fn table_1_3() {
        let c = Layout::contiguous(&[3, 4], Order::C).unwrap();
        assert_eq!(c.like().byte_strides(4), vec![16, 4]);
        let f = Layout::contiguous(&[3, 4], Order::F).unwrap();
        assert_eq!(f.like().byte_strides(4), vec![4, 12]);

        let z = Layout::contiguous(&[10, 12], Order::C).unwrap();
        let (gapped, _) = z.slice(&[s(2), s(2)]).unwrap();
        let like = gapped.like();
        assert_eq!(
            (like.shape(), like.byte_strides(8)),
            (&[5usize, 6][..], vec![48, 8])
        );
        let t = permuted(&gapped, &[1, 0]);
        let like = t.like();
        assert_eq!(
            (like.shape(), like.byte_strides(8)),
            (&[6usize, 5][..], vec![8, 48])
        );

        let i10 = Layout::contiguous(&[10], Order::C).unwrap();
        let (rev, _) = i10.slice(&[s(-1)]).unwrap();
        assert_eq!(rev.like().byte_strides(8), vec![8]);

        let z3 = Layout::contiguous(&[2, 3, 4], Order::C).unwrap();
        let like = permuted(&z3, &[1, 0, 2]).like();
        assert_eq!(
            (like.shape(), like.byte_strides(8)),
            (&[3usize, 2, 4][..], vec![32, 96, 8])
        );

        assert_eq!(Layout::scalar().like(), Layout::scalar());
    }

    #[test]
    fn table_2_10() {
        let a = Layout::contiguous(&[3, 4], Order::C).unwrap();
        let t = a.transposed_2d().unwrap();
        assert_eq!(
            (t.shape(), t.byte_strides(4)),
            (&[4usize, 3][..], vec![12, 4])
        );
        // d[::2, ::2].T of a (10,12) int64: (6,5) with strides (40,8); its like() is the same.
        let z = Layout::contiguous(&[10, 12], Order::C).unwrap();
        let (gapped, _) = z.slice(&[s(2), s(2)]).unwrap();
        let t = gapped.transposed_2d().unwrap();
        assert_eq!(
            (t.shape(), t.byte_strides(8)),
            (&[6usize, 5][..], vec![40, 8])
        );
        assert_eq!(t.like(), t);
        assert!(t.is_c_contiguous());
        for l in [
            Layout::scalar(),
            Layout::contiguous(&[3], Order::C).unwrap(),
            Layout::contiguous(&[2, 3, 4], Order::C).unwrap(),
        ] {
            let err = l.transposed_2d().unwrap_err();
            assert!(matches!(err, Error::Unsupported { .. }));
            assert!(
                err.to_string()
                    .contains("transposing a non-2D DeviceNDArray isn't supported")
            );
        }
        let three = Layout::contiguous(&[2, 3, 4], Order::C).unwrap();
        assert!(three.is_identity_axes(&[0, 1, 2]));
        assert!(!three.is_identity_axes(&[2, 1, 0]));
        assert!(!three.is_identity_axes(&[0, 1]));
        assert!(Layout::scalar().is_identity_axes(&[]));
    }

    #[test]
    fn like_of_broadcast_and_reversed() {
        // Broadcast (4,3) strides (0,1): the stride-0 axis sorts first.
        let b = Layout::with_strides(&[4, 3], &[0, 1]).unwrap();
        assert_eq!(b.like().strides(), &[1, 4]);
        // Numba sorts signed strides: a reversed axis comes first.
        let r = Layout::with_strides(&[3, 2], &[-4, 1]).unwrap();
        assert_eq!(r.like().strides(), &[1, 3]);
    }
}
