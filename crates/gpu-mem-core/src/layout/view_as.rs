//! Reinterpreting the element size: Numba's `view(dtype)`.
//!
//! Guarantees: the result covers the same bytes starting at the same first byte. With the same
//! element size any layout is returned unchanged. Otherwise the layout must be C-contiguous,
//! the last axis is resized so its byte length is unchanged and gets stride 1, and the other
//! strides keep their byte value. Because strides here are counted in elements, a byte stride
//! that is not a multiple of the new size is an error (Numba, counting bytes, has no such case).
//!
//! [`Error::ViewAs`] names element types, which this module does not know: it fills `from` and
//! `to` with descriptions of the sizes ("2-byte element"), for the array layer to replace with
//! the type names.

use super::Layout;
use crate::error::{Error, Result};

impl Layout {
    /// The layout of the same bytes seen as elements of `new_itemsize` bytes instead of
    /// `old_itemsize`.
    pub fn view_as(&self, old_itemsize: usize, new_itemsize: usize) -> Result<Layout> {
        if old_itemsize == new_itemsize {
            return Ok(self.clone());
        }
        let err = |reason: &'static str| Error::ViewAs {
            from: size_name(old_itemsize),
            to: size_name(new_itemsize),
            shape: self.shape.to_vec(),
            reason,
        };
        if old_itemsize == 0 || new_itemsize == 0 {
            return Err(err("element sizes must be non-zero"));
        }
        let Some((&last_len, outer)) = self.shape.split_last() else {
            // Numba fails with an unrelated IndexError here.
            return Err(err(
                "a 0-d array cannot change to a dtype of a different size",
            ));
        };
        if !self.is_c_contiguous() {
            return Err(err(
                "To change to a dtype of a different size, the array must be C-contiguous",
            ));
        }
        let last_bytes = last_len
            .checked_mul(old_itemsize)
            .ok_or_else(|| Error::Overflow {
                what: format!("byte length {last_len} * {old_itemsize} of the last axis"),
            })?;
        if !last_bytes.is_multiple_of(new_itemsize) {
            return Err(err(
                "When changing to a larger dtype, its size must be a divisor of the total size in bytes of the last axis of the array.",
            ));
        }
        let old = isize::try_from(old_itemsize).ok();
        let new = isize::try_from(new_itemsize).ok();
        let mut strides = Vec::with_capacity(self.ndim());
        for (&len, &stride) in outer.iter().zip(&self.strides[..outer.len()]) {
            if len == 1 {
                // Never stepped along, so its stride is free (Numba, counting bytes, keeps any):
                // 0 stands for it here.
                strides.push(0);
                continue;
            }
            let bytes = old.and_then(|old| stride.checked_mul(old));
            match (bytes, new) {
                (Some(bytes), Some(new)) if bytes % new == 0 => strides.push(bytes / new),
                _ => {
                    return Err(err(
                        "a byte stride is not a multiple of the new element size",
                    ));
                }
            }
        }
        strides.push(1);
        let mut shape = outer.to_vec();
        shape.push(last_bytes / new_itemsize);
        Layout::with_strides(&shape, &strides)
    }
}

/// A static description of an element size, for [`Error::ViewAs`].
fn size_name(itemsize: usize) -> &'static str {
    match itemsize {
        0 => "0-byte element",
        1 => "1-byte element",
        2 => "2-byte element",
        4 => "4-byte element",
        8 => "8-byte element",
        16 => "16-byte element",
        32 => "32-byte element",
        64 => "64-byte element",
        _ => "element",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};
    use crate::error::Error;

    fn reason(err: Error) -> &'static str {
        match err {
            Error::ViewAs { reason, .. } => reason,
            other => panic!("expected ViewAs, got {other:?}"),
        }
    }

    /// (shape, byte strides in the new size).
    fn viewed(l: &Layout, old: usize, new: usize) -> (Vec<usize>, Vec<isize>) {
        let v = l.view_as(old, new).unwrap();
        (v.shape().to_vec(), v.byte_strides(new))
    }

    #[test]
    fn table_2_11() {
        let i2 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        assert_eq!(viewed(&i2, 2, 4), (vec![3, 2], vec![8, 4]));
        assert_eq!(viewed(&i2, 2, 8), (vec![3, 1], vec![8, 8]));
        assert_eq!(viewed(&i2, 2, 2), (vec![3, 4], vec![8, 2]));
        let f8 = Layout::contiguous(&[3], Order::C).unwrap();
        assert_eq!(viewed(&f8, 8, 1), (vec![24], vec![1]));
        // d[:, ::2] (i2) -> u2 works (same size), strides (16,4).
        let (strided, _) = i2
            .slice(&[
                SliceInfoElem::Slice {
                    start: 0,
                    end: None,
                    step: 1,
                },
                SliceInfoElem::Slice {
                    start: 0,
                    end: None,
                    step: 2,
                },
            ])
            .unwrap();
        assert_eq!(viewed(&strided, 2, 2), (vec![3, 2], vec![8, 4]));
        // ... but not to a different size, and neither an F array.
        assert_eq!(
            reason(strided.view_as(2, 4).unwrap_err()),
            "To change to a dtype of a different size, the array must be C-contiguous"
        );
        let f = Layout::contiguous(&[3, 4], Order::F).unwrap();
        assert_eq!(
            reason(f.view_as(2, 4).unwrap_err()),
            "To change to a dtype of a different size, the array must be C-contiguous"
        );
        let i2_43 = Layout::contiguous(&[4, 3], Order::C).unwrap();
        assert_eq!(
            reason(i2_43.view_as(2, 4).unwrap_err()),
            "When changing to a larger dtype, its size must be a divisor of the total size in bytes of the last axis of the array."
        );
        // 0-d: same size is fine, a different size is an error (Numba crashes).
        assert_eq!(Layout::scalar().view_as(8, 8).unwrap(), Layout::scalar());
        assert!(matches!(
            Layout::scalar().view_as(8, 4),
            Err(Error::ViewAs { .. })
        ));
    }

    #[test]
    fn odd_strides_of_length_one_axes() {
        // C-contiguous under relaxed rules; the byte stride 6 is no multiple of 4, but an axis
        // of length 1 is never stepped along, so its stride does not matter (Numba accepts it).
        let l = Layout::with_strides(&[1, 4], &[3, 1]).unwrap();
        let v = l.view_as(2, 4).unwrap();
        assert_eq!(v.shape(), &[1, 2]);
        assert!(v.is_c_contiguous());
        // On an axis longer than 1 such a stride breaks contiguity: refused.
        let l = Layout::with_strides(&[2, 1, 4], &[3, 1, 1]).unwrap();
        assert!(l.view_as(2, 4).is_err());
        // Zero-size arrays are contiguous; the last axis stays 0 long.
        let e = Layout::contiguous(&[2, 0], Order::C).unwrap();
        assert_eq!(e.view_as(8, 4).unwrap().shape(), &[2, 0]);
    }
}
