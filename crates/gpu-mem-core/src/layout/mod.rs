//! Pure layout math: shapes and strides of n-dimensional arrays, with no memory attached.
//!
//! A [`Layout`] is a shape plus one stride per axis, in **elements** (like ndarray), signed. It
//! describes an array relative to its *first logical element* (the element at index all-zeros);
//! whoever owns the memory keeps that element's offset in its allocation separately. Every
//! operation here returns a new layout (plus, for views, the element offset of the new first
//! logical element) and never touches data.
//!
//! The operations reproduce what Numba's `DeviceNDArray` does for the same input (numba-cuda's
//! own array code): which shapes and strides come out, which arrays count as contiguous, and
//! which requests are errors, with Numba's wording in the error messages. Slicing follows
//! ndarray's `s![]` semantics because that is what Rust users compare with on the host.
//!
//! # Invariants
//!
//! Every `Layout` satisfies, by construction:
//! - `shape.len() == strides.len()`;
//! - the product of the non-zero axis lengths fits in `isize` (numpy's "array is too big" rule),
//!   so [`Layout::size`] and every partial product of lengths cannot overflow;
//! - the extent `sum((len - 1) * |stride|)` fits in `isize`, so every element offset, and every
//!   partial sum of `index * stride`, is computable without overflow.
//!
//! The one constructor that enforces them is [`Layout::with_strides`]; all operations build their
//! results through it (or from values proven smaller than the input's).
//!
//! # Modules
//! - [`contiguity`]: C/F contiguity (numpy's relaxed rules), broadcast and negative-stride tests.
//! - [`extent`]: reachable offsets (`min_offset`, `span_len`), byte strides, logical iteration.
//! - [`squeeze`]: `core` (drop broadcast axes), `squeeze`, `squeeze_axes`.
//! - [`reshape`]: `ravel` and `reshape`, including numpy's no-copy reshape test.
//! - [`slice`](mod@slice): ndarray-style slicing and full integer indexing.
//! - [`split`]: splitting a unit-stride 1-d layout into contiguous pieces.
//! - [`view_as`]: reinterpreting the element size.
//! - [`like`]: `device_array_like` strides, Numba's copying 2-d transpose, identity axes.
//! - [`compat`]: Numba's copy-compatibility check between two layouts.

pub mod compat;
pub mod contiguity;
pub mod extent;
pub mod like;
pub mod reshape;
pub mod slice;
pub mod split;
pub mod squeeze;
pub mod view_as;

pub use compat::check_compatible;
pub use ndarray::SliceInfoElem;

use crate::error::{Error, Result, fmt_dims};
use std::fmt;

/// Memory order of a newly created array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Row-major: the last axis varies fastest.
    #[default]
    C,
    /// Column-major: the first axis varies fastest.
    F,
}

/// Numba's `order` argument of `ravel` and `reshape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReshapeOrder {
    /// Row-major.
    #[default]
    C,
    /// Column-major.
    F,
    /// `F` if the array is F-contiguous, else `C` (Numba's rule, which differs from numpy's
    /// for 1-d arrays: they are F-contiguous, so they get F strides).
    A,
}

impl From<Order> for ReshapeOrder {
    fn from(order: Order) -> ReshapeOrder {
        match order {
            Order::C => ReshapeOrder::C,
            Order::F => ReshapeOrder::F,
        }
    }
}

/// Shape and element strides of an n-dimensional array, relative to its first logical element.
#[derive(Eq)]
pub struct Layout {
    shape: Dims<usize>,
    strides: Dims<isize>,
    /// What every copy asks for, computed once from `shape` and `strides` (see [`Extents`]).
    extents: Extents,
}

/// A layout's element count, lowest reachable offset and span (see the `extent` module), kept
/// with it: every copy and launch asks for them, and recomputing walks both axis lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Extents {
    size: usize,
    min_offset: isize,
    span_len: usize,
}

impl Extents {
    fn of(shape: &[usize], strides: &[isize]) -> Extents {
        // Cannot overflow (see the module invariants); saturating keeps that a non-panic anyway.
        let size = shape
            .iter()
            .fold(1usize, |acc, &len| acc.saturating_mul(len));
        if size == 0 {
            return Extents {
                size,
                min_offset: 0,
                span_len: 0,
            };
        }
        let (mut min_offset, mut span_len) = (0isize, 1usize);
        for (&len, &stride) in shape.iter().zip(strides).filter(|&(&len, _)| len > 1) {
            let reach = extent::last_index(len).saturating_mul(stride);
            if stride < 0 {
                min_offset = min_offset.saturating_add(reach);
            }
            span_len = span_len.saturating_add(reach.unsigned_abs());
        }
        Extents {
            size,
            min_offset,
            span_len,
        }
    }
}

impl PartialEq for Layout {
    // By hand: the derived comparison calls the C library's `memcmp` for each axis list, which
    // costs more than comparing the few axes of an array (every copy between page-locked and
    // device memory compares two layouts).
    fn eq(&self, other: &Layout) -> bool {
        same_axes(&self.shape, &other.shape)
            && same_axes(&self.strides, &other.strides)
            && self.extents == other.extents
    }
}

impl std::hash::Hash for Layout {
    // By hand, beside the hand-written `PartialEq`: the same fields.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shape.hash(state);
        self.strides.hash(state);
        self.extents.hash(state);
    }
}

/// `a == b` for the short axis lists of a layout, compared in place (no library call).
#[inline]
pub(crate) fn same_axes<T: Copy + PartialEq>(a: &[T], b: &[T]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut same = true;
    for (x, y) in a.iter().zip(b) {
        same &= x == y;
    }
    same
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layout")
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .finish()
    }
}

/// A layout's per-axis values, inline up to four axes: building and cloning the layouts of the
/// usual ranks allocates nothing (a copy's checks build several).
pub(crate) type Dims<T> = smallvec::SmallVec<[T; 4]>;

impl Clone for Layout {
    // By hand: `SmallVec`'s own clone goes element by element through `Extend`.
    fn clone(&self) -> Layout {
        Layout {
            shape: Dims::from_slice(&self.shape),
            strides: Dims::from_slice(&self.strides),
            extents: self.extents,
        }
    }
}

impl Layout {
    /// A contiguous layout of `shape` in `order`, by the plain product rule: the C strides of
    /// `(3, 0, 2)` are `(0, 2, 1)`, as Numba computes them (numpy would give `(2, 2, 1)`).
    ///
    /// Errors with [`Error::Overflow`] if the element count (of the non-zero lengths) does not
    /// fit in `isize`.
    pub fn contiguous(shape: &[usize], order: Order) -> Result<Layout> {
        let mut strides: Dims<isize> = smallvec::smallvec![0; shape.len()];
        let mut acc: isize = 1;
        let axis_at = |i: usize| match order {
            Order::C => shape.len() - 1 - i,
            Order::F => i,
        };
        for axis in (0..shape.len()).map(axis_at) {
            strides[axis] = acc;
            let len = isize::try_from(shape[axis]).map_err(|_| overflow_count(shape))?;
            // A zero length makes every later stride 0 by the product rule; the check of the
            // non-zero lengths below still rejects shapes numpy would call too big.
            acc = acc.checked_mul(len).ok_or_else(|| overflow_count(shape))?;
        }
        Layout::with_strides(shape, &strides)
    }

    /// A layout with the given element strides.
    ///
    /// Errors: [`Error::InvalidStrides`] ("strides not match ndim") if the lengths differ;
    /// [`Error::Overflow`] if the element count or the extent of the strides does not fit in
    /// `isize`.
    pub fn with_strides(shape: &[usize], strides: &[isize]) -> Result<Layout> {
        if shape.len() != strides.len() {
            return Err(Error::InvalidStrides {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                reason: "strides not match ndim".to_string(),
            });
        }
        // Product of the non-zero lengths: bounds every partial product of lengths.
        let mut count: isize = 1;
        for &len in shape.iter().filter(|&&len| len != 0) {
            count = isize::try_from(len)
                .ok()
                .and_then(|len| count.checked_mul(len))
                .ok_or_else(|| overflow_count(shape))?;
        }
        // Extent: bounds every reachable offset and every partial sum of index * stride.
        let mut extent: isize = 0;
        for (&len, &stride) in shape.iter().zip(strides) {
            let last = isize::try_from(len.saturating_sub(1)).map_err(|_| overflow_count(shape))?;
            if last == 0 {
                // A length-0 or length-1 axis is never stepped along; its stride is free.
                continue;
            }
            let reach = stride
                .checked_abs()
                .and_then(|abs| abs.checked_mul(last))
                .and_then(|reach| extent.checked_add(reach));
            extent = reach.ok_or_else(|| Error::Overflow {
                what: format!(
                    "extent of shape {} with strides {}",
                    fmt_dims(shape),
                    fmt_dims(strides)
                ),
            })?;
        }
        Ok(Layout::from_parts(
            Dims::from_slice(shape),
            Dims::from_slice(strides),
        ))
    }

    /// The 0-d layout: shape `()`, strides `()`, one element.
    pub fn scalar() -> Layout {
        Layout::from_parts(Dims::new(), Dims::new())
    }

    /// Length of every axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Stride of every axis, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Number of axes.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements: the product of the shape, 1 for a 0-d layout.
    pub fn size(&self) -> usize {
        self.extents.size
    }

    /// Builds a layout from parts known to satisfy the invariants (they were derived from a
    /// valid layout by operations that cannot grow the count or the extent).
    fn from_parts(shape: impl Into<Dims<usize>>, strides: impl Into<Dims<isize>>) -> Layout {
        let (shape, strides) = (shape.into(), strides.into());
        let extents = Extents::of(&shape, &strides);
        Layout {
            shape,
            strides,
            extents,
        }
    }
}

fn overflow_count(shape: &[usize]) -> Error {
    Error::Overflow {
        what: format!("element count of shape {}", fmt_dims(shape)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_c_and_f() {
        // §1.2: device_array((2,3), int32, order='F') -> strides (4,8) bytes.
        let f = Layout::contiguous(&[2, 3], Order::F).unwrap();
        assert_eq!(f.strides(), &[1, 2]);
        let c = Layout::contiguous(&[2, 3], Order::C).unwrap();
        assert_eq!(c.strides(), &[3, 1]);
    }

    #[test]
    fn device_array_table_1_2() {
        // device_array(5): (5,), strides (8,) f8.
        let l = Layout::contiguous(&[5], Order::C).unwrap();
        assert_eq!((l.shape(), l.strides()), (&[5usize][..], &[1isize][..]));
        // strides=(4,8) for (2,3) int32.
        let l = Layout::with_strides(&[2, 3], &[1, 2]).unwrap();
        assert_eq!(l.strides(), &[1, 2]);
        // shape=np.array([10,10]) -> strides (80,8).
        assert_eq!(
            Layout::contiguous(&[10, 10], Order::C).unwrap().strides(),
            &[10, 1]
        );
        // strides=(8,) for a 2-d shape -> "strides not match ndim".
        let err = Layout::with_strides(&[2, 3], &[1]).unwrap_err();
        assert!(err.to_string().contains("strides not match ndim"), "{err}");
        // device_array(()) -> 0-d, size 1, alloc_size = itemsize.
        let l = Layout::contiguous(&[], Order::C).unwrap();
        assert_eq!(l, Layout::scalar());
        assert_eq!((l.size(), l.span_len()), (1, 1));
        // device_array(0) -> (0,), strides (8,), alloc_size 0.
        let l = Layout::contiguous(&[0], Order::C).unwrap();
        assert_eq!((l.strides(), l.span_len()), (&[1isize][..], 0));
        // device_array((3,0,2)) -> strides (0,16,8).
        let l = Layout::contiguous(&[3, 0, 2], Order::C).unwrap();
        assert_eq!(l.strides(), &[0, 2, 1]);
        assert_eq!(l.size(), 0);
    }

    #[test]
    fn overflow_is_an_error() {
        let big = usize::MAX / 2;
        assert!(matches!(
            Layout::contiguous(&[big, 3], Order::C),
            Err(Error::Overflow { .. })
        ));
        assert!(matches!(
            Layout::contiguous(&[big, big, 0], Order::C),
            Err(Error::Overflow { .. })
        ));
        assert!(matches!(
            Layout::with_strides(&[3, 2], &[isize::MAX, 1]),
            Err(Error::Overflow { .. })
        ));
        assert!(matches!(
            Layout::with_strides(&[2], &[isize::MIN]),
            Err(Error::Overflow { .. })
        ));
        // A length-1 axis may have any stride: it is never stepped along.
        assert!(Layout::with_strides(&[1, 2], &[isize::MIN, 1]).is_ok());
    }
}
