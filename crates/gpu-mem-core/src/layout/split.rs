//! Numba's `split(section)`.
//!
//! Guarantees: only a 1-d layout with unit stride is split; the pieces are contiguous views,
//! in order, each `section` long except a shorter last one, and together they cover the input
//! exactly once. Errors are checked in Numba's order (dimensions, then stride, then the section).

use super::{Layout, Order};
use crate::error::{Error, Result, fmt_dims};

impl Layout {
    /// Splits into `ceil(size / section)` contiguous pieces; returns each piece's layout and the
    /// element offset of its first element. An empty layout gives no pieces.
    ///
    /// Errors: [`Error::Unsupported`] "only support 1d array" or "only support unit stride";
    /// [`Error::InvalidArgument`] for `section == 0` (Numba divides by zero there).
    pub fn split(&self, section: usize) -> Result<Vec<(Layout, isize)>> {
        if self.ndim() != 1 {
            return Err(Error::Unsupported {
                operation: "split",
                reason: format!("only support 1d array (shape {})", fmt_dims(&self.shape)),
            });
        }
        let size = self.size();
        if size > 0 && self.strides[0] != 1 {
            return Err(Error::Unsupported {
                operation: "split",
                reason: format!(
                    "only support unit stride (stride {} in elements)",
                    self.strides[0]
                ),
            });
        }
        if section == 0 {
            return Err(Error::InvalidArgument {
                name: "section",
                reason: "must be at least 1 (Numba raises ZeroDivisionError)".to_string(),
            });
        }
        let mut pieces = Vec::with_capacity(size.div_ceil(section));
        let mut start = 0usize;
        while start < size {
            let len = section.min(size - start);
            let piece = Layout::contiguous(&[len], Order::C)?;
            // start < size, which fits in isize (layout invariant).
            let offset = isize::try_from(start).map_err(|_| Error::Overflow {
                what: format!("offset {start} of a split piece"),
            })?;
            pieces.push((piece, offset));
            start += len;
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, SliceInfoElem};
    use crate::error::Error;

    fn sizes(l: &Layout, section: usize) -> Vec<usize> {
        l.split(section)
            .unwrap()
            .iter()
            .map(|(p, _)| p.size())
            .collect()
    }

    #[test]
    fn table_2_7() {
        let d = Layout::contiguous(&[10], Order::C).unwrap();
        assert_eq!(sizes(&d, 3), vec![3, 3, 3, 1]);
        assert_eq!(sizes(&d, 5), vec![5, 5]);
        assert_eq!(sizes(&d, 10), vec![10]);
        assert_eq!(sizes(&d, 20), vec![10]);
        let offsets: Vec<isize> = d.split(3).unwrap().iter().map(|p| p.1).collect();
        assert_eq!(offsets, vec![0, 3, 6, 9]);
        assert!(matches!(
            d.split(0),
            Err(Error::InvalidArgument {
                name: "section",
                ..
            })
        ));
        let empty = Layout::contiguous(&[0], Order::C).unwrap();
        assert!(empty.split(3).unwrap().is_empty());
        let d2 = Layout::contiguous(&[2, 5], Order::C).unwrap();
        let err = d2.split(1).unwrap_err();
        assert!(err.to_string().contains("only support 1d array"), "{err}");
        let (step2, _) = d
            .slice(&[SliceInfoElem::Slice {
                start: 0,
                end: None,
                step: 2,
            }])
            .unwrap();
        let err = step2.split(1).unwrap_err();
        assert!(
            err.to_string().contains("only support unit stride"),
            "{err}"
        );
        // N=100, split(50): two halves.
        let n = Layout::contiguous(&[100], Order::C).unwrap();
        assert_eq!(sizes(&n, 50), vec![50, 50]);
    }
}
