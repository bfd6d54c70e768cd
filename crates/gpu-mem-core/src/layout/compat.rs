//! Numba's `check_array_compatibility`, without the dtype part.
//!
//! Guarantees: two layouts pass when, after dropping length-1 axes, they have the same shape and
//! (only if there are elements) the same byte strides, so a copy between them is a plain copy
//! of one memory region onto another. The errors print the *unsqueezed* shapes or byte strides,
//! as Numba does.

use super::{Layout, same_axes};
use crate::error::{Error, Result};

/// Checks that `src` can be copied into `dst` element for element: equal squeezed shapes,
/// then, if the size is non-zero, equal squeezed byte strides.
///
/// Errors: [`Error::IncompatibleShape`] (`dst` shape first), [`Error::IncompatibleStrides`]
/// (`dst` byte strides first).
pub fn check_compatible(dst: &Layout, src: &Layout, itemsize: usize) -> Result<()> {
    // The common case, without building squeezed layouts: the same shape and strides.
    if same_axes(dst.shape(), src.shape())
        && (dst.size() == 0 || same_axes(dst.strides(), src.strides()))
    {
        return Ok(());
    }
    let (dst_sq, src_sq) = (dst.squeeze(), src.squeeze());
    if dst_sq.shape() != src_sq.shape() {
        return Err(Error::IncompatibleShape {
            expected: dst.shape().to_vec(),
            found: src.shape().to_vec(),
        });
    }
    // Strides of a zero-size copy are irrelevant and may differ.
    if dst.size() > 0 && dst_sq.byte_strides(itemsize) != src_sq.byte_strides(itemsize) {
        return Err(Error::IncompatibleStrides {
            expected: dst.byte_strides(itemsize),
            found: src.byte_strides(itemsize),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order};
    use super::check_compatible;
    use crate::error::Error;

    #[test]
    fn shapes_and_strides() {
        let d10 = Layout::contiguous(&[10], Order::C).unwrap();
        let s5 = Layout::contiguous(&[5], Order::C).unwrap();
        let err = check_compatible(&d10, &s5, 8).unwrap_err();
        assert_eq!(err.to_string(), "incompatible shape: (10,) vs. (5,)");

        // Length-1 axes do not matter.
        let row = Layout::contiguous(&[1, 10], Order::C).unwrap();
        assert!(check_compatible(&d10, &row, 8).is_ok());

        let c = Layout::contiguous(&[2, 3], Order::C).unwrap();
        let f = Layout::contiguous(&[2, 3], Order::F).unwrap();
        let err = check_compatible(&c, &f, 8).unwrap_err();
        assert!(matches!(err, Error::IncompatibleStrides { .. }));
        assert_eq!(err.to_string(), "incompatible strides: (24, 8) vs. (8, 16)");

        // Zero-size: strides are not compared.
        let e1 = Layout::contiguous(&[0, 3], Order::C).unwrap();
        let e2 = Layout::contiguous(&[0, 3], Order::F).unwrap();
        assert!(check_compatible(&e1, &e2, 8).is_ok());
    }
}
