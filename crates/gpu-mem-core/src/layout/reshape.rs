//! `ravel` and `reshape`, Numba's way.
//!
//! Guarantees: neither ever describes a copy. The result keeps the first logical element of the
//! input, so it is a view of the same memory. Only contiguous layouts are reshaped, because
//! Numba refuses every other case. The order argument picks the **stride layout over the same
//! memory**, not the order in which numpy would read elements: an F array reshaped in C order
//! gets C strides over its memory. `ravel` keeps the element order only when it is the
//! memory order. Every refusal carries Numba's wording.

use super::{Layout, Order, ReshapeOrder};
use crate::error::{Error, Result, fmt_dims};

impl Layout {
    /// Numba's `ravel(order)`: shape `(size,)`, stride 1, sharing memory.
    ///
    /// `C` needs a C-contiguous layout, `F` an F-contiguous one, `A` either. Anything else is
    /// [`Error::Unsupported`] "ravel on non-contiguous array" (Numba never copies here).
    pub fn ravel(&self, order: ReshapeOrder) -> Result<Layout> {
        let ok = match order {
            ReshapeOrder::C => self.is_c_contiguous(),
            ReshapeOrder::F => self.is_f_contiguous(),
            ReshapeOrder::A => self.is_contiguous(),
        };
        if !ok {
            return Err(Error::Unsupported {
                operation: "ravel",
                reason: format!(
                    "ravel on non-contiguous array (shape {}, strides {} in elements, order {order:?})",
                    fmt_dims(&self.shape),
                    fmt_dims(&self.strides)
                ),
            });
        }
        Layout::with_strides(&[self.size()], &[1])
    }

    /// Numba's `reshape(*new_shape, order)`; any negative entry is the one unknown dimension.
    ///
    /// Steps, in Numba's order:
    /// 1. the current shape requested verbatim returns the layout unchanged (even if it is not
    ///    contiguous);
    /// 2. two unknowns, or an unknown that cannot be inferred, are [`Error::Reshape`];
    /// 3. `A` becomes `F` if the layout is F-contiguous, else `C`;
    /// 4. a different element count is [`Error::Reshape`] "reshape changes the size of the array";
    /// 5. a contiguous layout gets contiguous strides of the new shape in that order;
    /// 6. any other layout is [`Error::Unsupported`]: "reshape would require copy" when numpy's
    ///    no-copy reshape fails, and "operation requires copying" when it succeeds (Numba also
    ///    refuses it, because the memory is not one extent).
    pub fn reshape(&self, new_shape: &[isize], order: ReshapeOrder) -> Result<Layout> {
        if self.is_shape(new_shape) {
            return Ok(self.clone());
        }
        let reshape_err = |reason: &'static str| Error::Reshape {
            from: self.shape.to_vec(),
            to: new_shape.to_vec(),
            reason,
        };
        let resolved = resolve_unknown(new_shape, self.size()).map_err(|e| match e {
            Resolve::Err(reason) => reshape_err(reason),
            Resolve::Overflow => Error::Overflow {
                what: format!("element count of requested shape {}", fmt_dims(new_shape)),
            },
        })?;
        let order = match order {
            ReshapeOrder::A if self.is_f_contiguous() => Order::F,
            ReshapeOrder::A | ReshapeOrder::C => Order::C,
            ReshapeOrder::F => Order::F,
        };
        if checked_count(&resolved) != Some(self.size()) {
            return Err(reshape_err("reshape changes the size of the array"));
        }
        if self.is_contiguous() {
            return Layout::contiguous(&resolved, order);
        }
        let reason = if nocopy_reshape_possible(self, &resolved, order) {
            "operation requires copying"
        } else {
            "reshape would require copy"
        };
        Err(Error::Unsupported {
            operation: "reshape",
            reason: format!(
                "{reason} (shape {} with strides {} in elements to {})",
                fmt_dims(&self.shape),
                fmt_dims(&self.strides),
                fmt_dims(new_shape)
            ),
        })
    }

    /// `new_shape` is exactly the current shape (no unknown entries).
    fn is_shape(&self, new_shape: &[isize]) -> bool {
        self.shape.len() == new_shape.len()
            && self
                .shape
                .iter()
                .zip(new_shape)
                .all(|(&len, &want)| usize::try_from(want) == Ok(len))
    }
}

enum Resolve {
    Err(&'static str),
    Overflow,
}

/// Replaces the one negative entry by `size / product(known)`, with Numba's checks.
fn resolve_unknown(new_shape: &[isize], size: usize) -> std::result::Result<Vec<usize>, Resolve> {
    let mut unknown = None;
    let mut known = Vec::with_capacity(new_shape.len());
    for (axis, &len) in new_shape.iter().enumerate() {
        match usize::try_from(len) {
            Ok(len) => known.push(len),
            Err(_) if unknown.is_none() => {
                unknown = Some(axis);
                known.push(1);
            }
            Err(_) => return Err(Resolve::Err("can only specify one unknown dimension")),
        }
    }
    let Some(axis) = unknown else {
        return Ok(known);
    };
    let known_size = checked_count(&known).ok_or(Resolve::Overflow)?;
    if known_size == 0 || !size.is_multiple_of(known_size) {
        return Err(Resolve::Err(
            "cannot infer valid shape for unknown dimension",
        ));
    }
    known[axis] = size / known_size;
    Ok(known)
}

/// Product of the lengths, `None` on overflow. A zero anywhere makes it 0 whatever the others
/// are, as Python's unbounded integers would.
fn checked_count(shape: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape
        .iter()
        .try_fold(1usize, |acc, &len| acc.checked_mul(len))
}

/// numpy's no-copy reshape test (`_attempt_nocopy_reshape`), answering only whether it
/// succeeds. The element count of `new_shape` equals the layout's.
///
/// Length-1 axes are dropped from both sides (their strides are free). Then the remaining old
/// and new axes are cut into the shortest consecutive groups with equal products; a group of
/// old axes can be re-split into any new axes exactly when those old axes are mutually
/// contiguous in the requested order (C: `stride[k] == len[k+1] * stride[k+1]`;
/// F: `stride[k+1] == len[k] * stride[k]`).
fn nocopy_reshape_possible(layout: &Layout, new_shape: &[usize], order: Order) -> bool {
    if layout.size() == 0 {
        return true;
    }
    let old: Vec<(usize, isize)> = layout.axes_longer_than_one().collect();
    let new: Vec<usize> = new_shape.iter().copied().filter(|&len| len != 1).collect();
    let (mut oi, mut ni) = (0, 0);
    while oi < old.len() && ni < new.len() {
        // Grow the group on whichever side has the smaller product until they match.
        let (mut oj, mut nj) = (oi + 1, ni + 1);
        let mut old_prod = old[oi].0;
        let mut new_prod = new[ni];
        while old_prod != new_prod {
            // The counts match, so the lists never run out and the products never overflow;
            // refuse rather than panic if that were ever violated.
            if new_prod < old_prod {
                let Some(&len) = new.get(nj) else {
                    return false;
                };
                let Some(prod) = new_prod.checked_mul(len) else {
                    return false;
                };
                new_prod = prod;
                nj += 1;
            } else {
                let Some(&(len, _)) = old.get(oj) else {
                    return false;
                };
                let Some(prod) = old_prod.checked_mul(len) else {
                    return false;
                };
                old_prod = prod;
                oj += 1;
            }
        }
        if !group_mergeable(&old[oi..oj], order) {
            return false;
        }
        oi = oj;
        ni = nj;
    }
    true
}

/// Consecutive old axes that can be treated as one axis in the given order.
fn group_mergeable(group: &[(usize, isize)], order: Order) -> bool {
    group.windows(2).all(|pair| {
        let [(len0, stride0), (len1, stride1)] = [pair[0], pair[1]];
        let times = |len: usize, stride: isize| {
            isize::try_from(len)
                .ok()
                .and_then(|len| len.checked_mul(stride))
        };
        match order {
            Order::C => times(len1, stride1) == Some(stride0),
            Order::F => times(len0, stride0) == Some(stride1),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Layout, Order, ReshapeOrder, SliceInfoElem};
    use crate::error::Error;

    fn s(start: isize, end: Option<isize>, step: isize) -> SliceInfoElem {
        SliceInfoElem::Slice { start, end, step }
    }
    const ALL: SliceInfoElem = SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    };

    fn unsupported_reason(err: Error) -> String {
        match err {
            Error::Unsupported { reason, .. } => reason,
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    fn reshape_reason(err: Error) -> &'static str {
        match err {
            Error::Reshape { reason, .. } => reason,
            other => panic!("expected Reshape, got {other:?}"),
        }
    }

    #[test]
    fn ravel_table_2_5() {
        let c = Layout::contiguous(&[2, 3], Order::C).unwrap();
        for order in [ReshapeOrder::C, ReshapeOrder::A] {
            let r = c.ravel(order).unwrap();
            assert_eq!((r.shape(), r.strides()), (&[6usize][..], &[1isize][..]));
        }
        let err = c.ravel(ReshapeOrder::F).unwrap_err();
        assert!(unsupported_reason(err).contains("ravel on non-contiguous array"));

        let f = Layout::contiguous(&[2, 3], Order::F).unwrap();
        for order in [ReshapeOrder::F, ReshapeOrder::A] {
            let r = f.ravel(order).unwrap();
            // Memory order: [0,3,1,4,2,5] for F (2,3) holding arange row-major.
            assert_eq!(r.shape(), &[6]);
        }
        assert!(f.ravel(ReshapeOrder::C).is_err());

        let d = Layout::contiguous(&[10], Order::C).unwrap();
        let (step2, _) = d.slice(&[s(0, None, 2)]).unwrap();
        assert!(step2.ravel(ReshapeOrder::C).is_err());
        let d2 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        let (left, _) = d2.slice(&[ALL, s(0, Some(2), 1)]).unwrap();
        assert!(left.ravel(ReshapeOrder::A).is_err());

        assert_eq!(
            Layout::scalar().ravel(ReshapeOrder::C).unwrap().shape(),
            &[1]
        );
        let empty = Layout::contiguous(&[0, 3], Order::C).unwrap();
        assert_eq!(empty.ravel(ReshapeOrder::C).unwrap().shape(), &[0]);
    }

    #[test]
    fn reshape_table_2_6() {
        let d = Layout::contiguous(&[10], Order::C).unwrap();
        for shape in [[2, 5], [2, -1]] {
            let r = d.reshape(&shape, ReshapeOrder::C).unwrap();
            assert_eq!(
                (r.shape(), r.strides()),
                (&[2usize, 5][..], &[5isize, 1][..])
            );
        }
        assert_eq!(d.reshape(&[-1], ReshapeOrder::C).unwrap().shape(), &[10]);
        assert_eq!(
            d.reshape(&[-2, 5], ReshapeOrder::C).unwrap().shape(),
            &[2, 5]
        );
        assert_eq!(
            reshape_reason(d.reshape(&[-1, -1], ReshapeOrder::C).unwrap_err()),
            "can only specify one unknown dimension"
        );
        for shape in [[3, -1], [0, -1]] {
            assert_eq!(
                reshape_reason(d.reshape(&shape, ReshapeOrder::C).unwrap_err()),
                "cannot infer valid shape for unknown dimension"
            );
        }
        assert_eq!(
            reshape_reason(d.reshape(&[3, 3], ReshapeOrder::C).unwrap_err()),
            "reshape changes the size of the array"
        );
        let f = d.reshape(&[2, 5], ReshapeOrder::F).unwrap();
        assert_eq!(f.strides(), &[1, 2]);
        assert_eq!(
            f.logical_offsets().collect::<Vec<_>>(),
            vec![0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
        );
        // order='A' on a 1-d array gives F strides (Numba; numpy gives C).
        assert_eq!(
            d.reshape(&[2, 5], ReshapeOrder::A).unwrap().strides(),
            &[1, 2]
        );

        let (step2, _) = d.slice(&[s(0, None, 2)]).unwrap();
        let reason = unsupported_reason(step2.reshape(&[5, 1], ReshapeOrder::C).unwrap_err());
        assert!(reason.starts_with("operation requires copying"), "{reason}");
        let same = step2.reshape(&[5], ReshapeOrder::C).unwrap();
        assert_eq!(same.strides(), &[2]);

        let d2 = Layout::contiguous(&[3, 4], Order::C).unwrap();
        let (left, _) = d2.slice(&[ALL, s(0, Some(2), 1)]).unwrap();
        let reason = unsupported_reason(left.reshape(&[6], ReshapeOrder::C).unwrap_err());
        assert!(reason.starts_with("reshape would require copy"), "{reason}");
        let reason = unsupported_reason(left.reshape(&[3, 2, 1], ReshapeOrder::C).unwrap_err());
        assert!(reason.starts_with("operation requires copying"), "{reason}");

        let zero_d = Layout::scalar();
        assert_eq!(zero_d.reshape(&[1], ReshapeOrder::C).unwrap().shape(), &[1]);
        assert_eq!(zero_d.reshape(&[], ReshapeOrder::C).unwrap(), zero_d);
        let one = Layout::contiguous(&[1], Order::C).unwrap();
        assert_eq!(one.reshape(&[], ReshapeOrder::C).unwrap(), Layout::scalar());

        let empty = Layout::contiguous(&[0], Order::C).unwrap();
        for shape in [[0, 5], [-1, 5]] {
            let r = empty.reshape(&shape, ReshapeOrder::C).unwrap();
            assert_eq!(
                (r.shape(), r.strides()),
                (&[0usize, 5][..], &[5isize, 1][..])
            );
        }
    }

    #[test]
    fn reshape_f_array_in_c_order_uses_memory_order() {
        // F (2,6) reshape(3,4) in C order: strides (32,8) bytes, values in memory order.
        let f = Layout::contiguous(&[2, 6], Order::F).unwrap();
        let r = f.reshape(&[3, 4], ReshapeOrder::C).unwrap();
        assert_eq!(r.strides(), &[4, 1]);
        // Memory offset k holds logical element (k % 2, k / 2) = value 6*(k%2) + k/2.
        let values: Vec<isize> = r.logical_offsets().map(|k| 6 * (k % 2) + k / 2).collect();
        assert_eq!(&values[..4], &[0, 6, 1, 7]);
    }

    #[test]
    fn nocopy_f_order_groups() {
        // F-order (4,3) sliced to (2,3) rows: strides (1,4); merging in F needs 4 == 2*1.
        let l = Layout::with_strides(&[2, 3], &[1, 4]).unwrap();
        let reason = unsupported_reason(l.reshape(&[6], ReshapeOrder::F).unwrap_err());
        assert!(reason.starts_with("reshape would require copy"));
        let reason = unsupported_reason(l.reshape(&[2, 3, 1], ReshapeOrder::F).unwrap_err());
        assert!(reason.starts_with("operation requires copying"));
    }
}
