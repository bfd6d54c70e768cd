//! Dropping axes that do not change which elements are reached.
//!
//! Guarantees: [`Layout::core`] is Numba's `array_core` (every stride-0 axis removed, so a
//! broadcast array becomes the region that is actually stored); [`Layout::squeeze`] removes every
//! length-1 axis; [`Layout::squeeze_axes`] removes exactly the named length-1 axes and refuses
//! any other with Numba's message. The first logical element stays the same in all three.

use super::{Dims, Layout};
use crate::error::{Error, Result};

impl Layout {
    /// Numba's `array_core`: drops every axis whose stride is 0 (a broadcast axis stores one
    /// element for all its indices), keeps the rest. A zero-size or 0-d layout is returned as is,
    /// as Numba does.
    pub fn core(&self) -> Layout {
        if self.ndim() == 0 || self.size() == 0 {
            return self.clone();
        }
        self.keep_axes(|_, stride| stride != 0)
    }

    /// Drops every length-1 axis.
    pub fn squeeze(&self) -> Layout {
        self.keep_axes(|len, _| len != 1)
    }

    /// Drops the given axes, which must all have length 1 (repeats are allowed, as in Numba).
    ///
    /// Errors: an axis `>= ndim` or an axis whose length is not 1 gives
    /// [`Error::InvalidArgument`] (`axis`), the latter with Numba's wording.
    pub fn squeeze_axes(&self, axes: &[usize]) -> Result<Layout> {
        for &axis in axes {
            match self.shape.get(axis) {
                None => {
                    return Err(Error::InvalidArgument {
                        name: "axis",
                        reason: format!(
                            "axis {axis} is out of bounds for array of dimension {}",
                            self.ndim()
                        ),
                    });
                }
                Some(&len) if len != 1 => {
                    return Err(Error::InvalidArgument {
                        name: "axis",
                        reason: format!(
                            "cannot select an axis to squeeze out which has size not equal to one (axis {axis} has size {len})"
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        let mut shape = Vec::with_capacity(self.ndim());
        let mut strides = Vec::with_capacity(self.ndim());
        for (axis, (&len, &stride)) in self.shape.iter().zip(&self.strides).enumerate() {
            if !axes.contains(&axis) {
                shape.push(len);
                strides.push(stride);
            }
        }
        Ok(Layout::from_parts(shape, strides))
    }

    /// The layout restricted to the axes for which `keep(len, stride)` holds. Removing axes
    /// never grows the element count or the extent, so the invariants hold.
    fn keep_axes(&self, keep: impl Fn(usize, isize) -> bool) -> Layout {
        let pairs = || self.shape.iter().copied().zip(self.strides.iter().copied());
        if pairs().all(|(len, stride)| keep(len, stride)) {
            // The usual case (a copy checks several layouts): nothing to drop.
            return self.clone();
        }
        let mut shape = Dims::new();
        let mut strides = Dims::new();
        for (len, stride) in pairs().filter(|&(len, stride)| keep(len, stride)) {
            shape.push(len);
            strides.push(stride);
        }
        Layout::from_parts(shape, strides)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order};
    use crate::error::Error;

    #[test]
    fn core_drops_broadcast_axes() {
        let b = Layout::with_strides(&[4, 3], &[0, 1]).unwrap();
        let core = b.core();
        assert_eq!(
            (core.shape(), core.strides()),
            (&[3usize][..], &[1isize][..])
        );
        assert!(core.is_contiguous());
        let c = Layout::contiguous(&[2, 3], Order::C).unwrap();
        assert_eq!(c.core(), c);
        assert_eq!(Layout::scalar().core(), Layout::scalar());
    }

    #[test]
    fn squeeze_variants() {
        let l = Layout::with_strides(&[1, 3, 1], &[3, 1, 1]).unwrap();
        assert_eq!(l.squeeze().shape(), &[3]);
        assert_eq!(l.squeeze_axes(&[2]).unwrap().shape(), &[1, 3]);
        assert_eq!(l.squeeze_axes(&[0, 2, 0]).unwrap().shape(), &[3]);
        let err = l.squeeze_axes(&[1]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }));
        assert!(
            err.to_string()
                .contains("cannot select an axis to squeeze out which has size not equal to one"),
            "{err}"
        );
        assert!(matches!(
            l.squeeze_axes(&[3]),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
