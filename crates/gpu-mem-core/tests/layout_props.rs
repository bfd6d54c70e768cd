//! Property tests of `gpu_mem_core::layout` against ndarray on real host arrays.
//!
//! Each test builds an `ArrayD<i64>` holding `0..n` in some memory layout, applies the same
//! operation with ndarray and with `Layout`, and compares shapes, strides and the values that
//! `Layout::logical_offsets` reaches in the host array's memory.

// Test helpers outside `#[test]` functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use gpu_mem_core::error::Error;
use gpu_mem_core::layout::{Layout, Order, ReshapeOrder, SliceInfoElem, check_compatible};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use proptest::prelude::*;

/// A host array together with its memory and the offset of its first logical element in it.
struct Host {
    array: ArrayD<i64>,
    memory: Vec<i64>,
    first: isize,
}

/// Element offset of `ptr` from the start of `memory` (pointer values only; nothing is read).
fn elem_offset(memory: &[i64], ptr: *const i64) -> isize {
    let bytes = ptr as isize - memory.as_ptr() as isize;
    bytes / std::mem::size_of::<i64>() as isize
}

/// `0..size` in C or F order, then optionally with axes permuted (rotated) and inverted, so
/// layouts with any axis order and negative strides are covered.
fn host(shape: &[usize], fortran: bool, rotate: usize, invert: &[bool]) -> Host {
    let size: usize = shape.iter().product();
    let data: Vec<i64> = (0..size as i64).collect();
    let base = if fortran {
        ArrayD::from_shape_vec(IxDyn(shape).f(), data).unwrap()
    } else {
        ArrayD::from_shape_vec(IxDyn(shape), data).unwrap()
    };
    let ndim = shape.len();
    let mut array = if ndim > 0 {
        let perm: Vec<usize> = (0..ndim).map(|i| (i + rotate) % ndim).collect();
        base.permuted_axes(perm)
    } else {
        base
    };
    for (axis, &inv) in invert.iter().enumerate().take(ndim) {
        if inv {
            array.invert_axis(ndarray::Axis(axis));
        }
    }
    let memory = array.as_slice_memory_order().unwrap().to_vec();
    let first = {
        let mem = array.as_slice_memory_order().unwrap();
        elem_offset(mem, array.as_ptr())
    };
    Host {
        array,
        memory,
        first,
    }
}

fn layout_of<S: ndarray::Data<Elem = i64>>(a: &ndarray::ArrayBase<S, IxDyn>) -> Layout {
    Layout::with_strides(a.shape(), a.strides()).unwrap()
}

/// Values reached by `layout` whose first logical element is at `first` in `memory`.
fn values(memory: &[i64], first: isize, layout: &Layout) -> Vec<i64> {
    layout
        .logical_offsets()
        .map(|k| memory[usize::try_from(first + k).unwrap()])
        .collect()
}

/// Strides of the axes longer than 1 (the only ones whose stride is ever used).
fn used_strides(shape: &[usize], strides: &[isize]) -> Vec<(usize, isize)> {
    shape
        .iter()
        .zip(strides)
        .filter(|&(&len, _)| len > 1)
        .map(|(&len, &stride)| (len, stride))
        .collect()
}

/// Every offset reached, by a plain walk over all multi-indices.
fn brute_offsets(shape: &[usize], strides: &[isize]) -> Vec<isize> {
    let mut out = vec![0isize];
    for (&len, &stride) in shape.iter().zip(strides) {
        out = out
            .iter()
            .flat_map(|&base| (0..len as isize).map(move |i| base + i * stride))
            .collect();
    }
    out
}

fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..=5, 0..=4)
}

/// Raw per-axis choices, turned into slice elements by `slice_elems`.
type Seed = (u8, i8, i8, i8, u8);

fn seeds() -> impl Strategy<Value = Vec<Seed>> {
    prop::collection::vec(any::<Seed>(), 4)
}

/// In-bounds slice elements for `shape` (possibly fewer than its axes; NewAxis sometimes).
fn slice_elems(shape: &[usize], seeds: &[Seed], take: usize) -> Vec<SliceInfoElem> {
    let mut out = Vec::new();
    for (axis, &len) in shape.iter().enumerate().take(take) {
        let (kind, a, b, c, d) = seeds[axis];
        let n = len as i64;
        // A bound in -n..=n.
        let bound = |x: i8| -> isize { ((x as i64).rem_euclid(2 * n + 1) - n) as isize };
        if kind % 7 == 6 {
            out.push(SliceInfoElem::NewAxis);
        }
        if kind % 3 == 0 && len > 0 {
            // An index in -n..n.
            let i = (a as i64).rem_euclid(2 * n) - n;
            out.push(SliceInfoElem::Index(i as isize));
        } else {
            let step = [1, -1, 2, -2, 3, -3][(d % 6) as usize];
            let end = if c % 4 == 0 { None } else { Some(bound(c)) };
            out.push(SliceInfoElem::Slice {
                start: bound(b),
                end,
                step,
            });
        }
    }
    out
}

/// A shape with the same element count as `size`, of `ndim` axes when possible.
fn same_size_shape(size: usize, ndim: usize, seeds: &[Seed]) -> Vec<usize> {
    if size == 0 {
        let ndim = ndim.max(1);
        let zero_at = seeds[0].0 as usize % ndim;
        return (0..ndim)
            .map(|i| {
                if i == zero_at {
                    0
                } else {
                    seeds[i].4 as usize % 4
                }
            })
            .collect();
    }
    if ndim == 0 {
        return if size == 1 { vec![] } else { vec![size] };
    }
    let mut remaining = size;
    let mut out = Vec::with_capacity(ndim);
    for seed in seeds.iter().take(ndim - 1) {
        let divisors: Vec<usize> = (1..=remaining)
            .filter(|&d| remaining.is_multiple_of(d))
            .collect();
        let d = divisors[seed.4 as usize % divisors.len()];
        out.push(d);
        remaining /= d;
    }
    out.push(remaining);
    out
}

proptest! {
    // Under Miri (`cargo +nightly miri test`) the interpreter is ~1000x slower and isolated from
    // the file system, so run a few cases and keep no failure-persistence file.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 512 },
        max_global_rejects: 200_000,
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn contiguous_strides_and_flags(shape in shape_strategy()) {
        let c = Layout::contiguous(&shape, Order::C).unwrap();
        let f = Layout::contiguous(&shape, Order::F).unwrap();
        let hc = host(&shape, false, 0, &[]);
        let hf = host(&shape, true, 0, &[]);
        prop_assert_eq!(c.shape(), hc.array.shape());
        prop_assert_eq!(f.shape(), hf.array.shape());
        // ndarray zeroes every stride of an empty array; otherwise both use the product rule.
        if c.size() > 0 {
            prop_assert_eq!(c.strides(), hc.array.strides());
            prop_assert_eq!(f.strides(), hf.array.strides());
        }
        prop_assert!(c.is_c_contiguous() && f.is_f_contiguous());
        prop_assert_eq!(c.is_f_contiguous(), hc.array.t().is_standard_layout());
        prop_assert_eq!(f.is_c_contiguous(), hf.array.is_standard_layout());
        prop_assert_eq!(c.size(), hc.array.len());
        prop_assert_eq!(values(&hc.memory, hc.first, &c), hc.array.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(values(&hf.memory, hf.first, &f), hf.array.iter().copied().collect::<Vec<_>>());
    }

    #[test]
    fn slice_matches_ndarray(
        shape in shape_strategy(),
        fortran in any::<bool>(),
        rotate in 0usize..4,
        invert in prop::collection::vec(any::<bool>(), 4),
        seeds in seeds(),
        take in 0usize..=4,
    ) {
        let h = host(&shape, fortran, rotate, &invert);
        let layout = layout_of(&h.array);
        let shape = h.array.shape().to_vec();
        prop_assert_eq!(values(&h.memory, h.first, &layout), h.array.iter().copied().collect::<Vec<_>>());

        let partial = slice_elems(&shape, &seeds, take);
        let full = slice_elems(&shape, &seeds, shape.len());
        // ndarray needs every axis; the layout takes missing trailing axes whole.
        let mut padded = partial.clone();
        for _ in take.min(shape.len())..shape.len() {
            padded.push(SliceInfoElem::Slice { start: 0, end: None, step: 1 });
        }
        for info in [&padded, &full] {
            let view = h.array.slice(&info[..]);
            let (sliced, offset) = layout.slice(info).unwrap();
            prop_assert_eq!(sliced.shape(), view.shape());
            prop_assert_eq!(
                used_strides(sliced.shape(), sliced.strides()),
                used_strides(view.shape(), view.strides())
            );
            let got = values(&h.memory, h.first + offset, &sliced);
            prop_assert_eq!(&got, &view.iter().copied().collect::<Vec<_>>());
            if sliced.size() > 0 {
                let memory = h.array.as_slice_memory_order().unwrap();
                prop_assert_eq!(h.first + offset, elem_offset(memory, view.as_ptr()));
            }
            prop_assert_eq!(sliced.is_c_contiguous(), view.is_standard_layout());
            prop_assert_eq!(sliced.is_f_contiguous(), view.t().is_standard_layout());
        }
        let (a, oa) = layout.slice(&partial).unwrap();
        let (b, ob) = layout.slice(&padded).unwrap();
        prop_assert_eq!((a, oa), (b, ob));
    }

    #[test]
    fn broadcast_contiguity(shape in shape_strategy(), extra in 2usize..4) {
        let h = host(&shape, false, 0, &[]);
        let mut big = vec![extra];
        big.extend_from_slice(&shape);
        let view = h.array.broadcast(IxDyn(&big)).unwrap();
        let layout = layout_of(&view);
        prop_assert_eq!(layout.is_c_contiguous(), view.is_standard_layout());
        prop_assert_eq!(layout.is_f_contiguous(), view.t().is_standard_layout());
        prop_assert!(layout.is_broadcast());
        let expected_core: &[usize] = if layout.size() > 0 { &shape } else { &big };
        let core = layout.core();
        prop_assert_eq!(core.shape(), expected_core);
    }

    #[test]
    fn extent_matches_brute_force(
        dims in prop::collection::vec((0usize..=5, -6isize..=6), 0..=4),
    ) {
        let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<isize> = dims.iter().map(|d| d.1).collect();
        let layout = Layout::with_strides(&shape, &strides).unwrap();
        let all = brute_offsets(&shape, &strides);
        prop_assert_eq!(layout.logical_offsets().collect::<Vec<_>>(), all.clone());
        if layout.size() == 0 {
            prop_assert_eq!((layout.min_offset(), layout.span_len()), (0, 0));
        } else {
            let lo = *all.iter().min().unwrap();
            let hi = *all.iter().max().unwrap();
            prop_assert_eq!(layout.min_offset(), lo);
            prop_assert_eq!(layout.span_len(), (hi - lo + 1) as usize);
        }
        // A layout is contiguous exactly when it reaches 0..size once each, in C or F order.
        let c = Layout::contiguous(&shape, Order::C).unwrap();
        let f = Layout::contiguous(&shape, Order::F).unwrap();
        let same_as = |other: &Layout| {
            layout.size() == 0 || layout.logical_offsets().eq(other.logical_offsets())
        };
        prop_assert_eq!(layout.is_c_contiguous(), same_as(&c));
        prop_assert_eq!(layout.is_f_contiguous(), same_as(&f));
        // Dense exactly when the span's offsets are reached once each.
        let mut reached = all.clone();
        reached.sort_unstable();
        let once_each = reached.windows(2).all(|w| w[1] == w[0] + 1);
        prop_assert_eq!(layout.is_dense(), layout.size() == 0 || once_each);
        // `never_overlaps` is sound (every index reaches an offset of its own when it says so)
        // and holds for every dense layout.
        let distinct = reached.windows(2).all(|w| w[1] != w[0]);
        if layout.never_overlaps() {
            prop_assert!(distinct, "{:?} {:?} reaches {:?}", shape, strides, all);
        }
        if layout.is_dense() {
            prop_assert!(layout.never_overlaps());
        }
    }

    #[test]
    fn reshape_contiguous_matches_to_shape(
        shape in shape_strategy(),
        fortran in any::<bool>(),
        new_ndim in 0usize..=4,
        seeds in seeds(),
        unknown in any::<u8>(),
    ) {
        let h = host(&shape, fortran, 0, &[]);
        let layout = layout_of(&h.array);
        let new_shape = same_size_shape(layout.size(), new_ndim, &seeds);
        let request: Vec<isize> = new_shape.iter().map(|&d| d as isize).collect();
        // C order on any contiguous array, F order on F arrays: both read memory order, which
        // is what ndarray's row-/column-major reshape of the same array produces.
        let (order, nd_order) = if fortran && !layout.is_c_contiguous() {
            (ReshapeOrder::F, ndarray::Order::ColumnMajor)
        } else {
            (ReshapeOrder::C, ndarray::Order::RowMajor)
        };
        let reshaped = layout.reshape(&request, order).unwrap();
        let expected = h.array.to_shape((IxDyn(&new_shape), nd_order)).unwrap();
        prop_assert!(expected.is_view());
        prop_assert_eq!(reshaped.shape(), expected.shape());
        if reshaped.size() > 0 {
            prop_assert_eq!(
                used_strides(reshaped.shape(), reshaped.strides()),
                used_strides(expected.shape(), expected.strides())
            );
        }
        prop_assert_eq!(values(&h.memory, h.first, &reshaped), expected.iter().copied().collect::<Vec<_>>());

        // One unknown dimension resolves to the same layout, when it is inferable.
        if !request.is_empty() && reshaped != layout {
            let mut with_unknown = request.clone();
            let at = unknown as usize % request.len();
            with_unknown[at] = -1;
            let known: usize = new_shape.iter().enumerate().filter(|&(i, _)| i != at).map(|(_, &d)| d).product();
            match layout.reshape(&with_unknown, order) {
                Ok(r) => prop_assert_eq!(r, reshaped),
                Err(Error::Reshape { reason, .. }) => {
                    prop_assert_eq!(reason, "cannot infer valid shape for unknown dimension");
                    prop_assert_eq!(known, 0);
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
        // ravel keeps the memory order too.
        let raveled = layout.ravel(ReshapeOrder::A).unwrap();
        prop_assert_eq!(raveled.strides(), &[1]);
        prop_assert_eq!(values(&h.memory, h.first, &raveled), h.memory.clone());
    }

    // Most random slices of small arrays are contiguous; those cases are skipped.
    #[test]
    fn reshape_of_views_refuses_like_numba(
        shape in prop::collection::vec(2usize..=5, 2..=4),
        seeds in seeds(),
        new_ndim in 0usize..=4,
    ) {
        let h = host(&shape, false, 0, &[]);
        let full = slice_elems(&shape, &seeds, shape.len());
        let view = h.array.slice(&full[..]);
        let (layout, _) = layout_of(&h.array).slice(&full).unwrap();
        prop_assume!(!layout.is_contiguous());
        let new_shape = same_size_shape(layout.size(), new_ndim, &seeds);
        prop_assume!(new_shape.as_slice() != layout.shape());
        let request: Vec<isize> = new_shape.iter().map(|&d| d as isize).collect();
        let err = layout.reshape(&request, ReshapeOrder::C).unwrap_err();
        let Error::Unsupported { reason, .. } = err else {
            return Err(TestCaseError::fail("expected Unsupported"));
        };
        // numpy's no-copy test succeeds exactly when ndarray can reshape without copying.
        let no_copy = view.to_shape((IxDyn(&new_shape), ndarray::Order::RowMajor)).unwrap().is_view();
        let expected = if no_copy { "operation requires copying" } else { "reshape would require copy" };
        prop_assert!(reason.starts_with(expected), "{} vs {}", reason, expected);
    }

    #[test]
    fn split_pieces_cover_the_array(len in 0usize..40, section in 1usize..45) {
        let layout = Layout::contiguous(&[len], Order::C).unwrap();
        let pieces = layout.split(section).unwrap();
        prop_assert_eq!(pieces.len(), len.div_ceil(section));
        let mut all = Vec::new();
        for (piece, offset) in &pieces {
            prop_assert!(piece.is_c_contiguous() && piece.ndim() == 1);
            prop_assert!(piece.size() <= section && piece.size() > 0);
            all.extend(piece.logical_offsets().map(|k| k + offset));
        }
        prop_assert_eq!(all, (0..len as isize).collect::<Vec<_>>());
    }

    #[test]
    fn like_is_dense_with_the_same_shape(
        shape in shape_strategy(),
        fortran in any::<bool>(),
        rotate in 0usize..4,
        invert in prop::collection::vec(any::<bool>(), 4),
        seeds in seeds(),
    ) {
        let h = host(&shape, fortran, rotate, &invert);
        let full = slice_elems(h.array.shape(), &seeds, h.array.ndim());
        let (layout, _) = layout_of(&h.array).slice(&full).unwrap();
        let like = layout.like();
        prop_assert_eq!(like.shape(), layout.shape());
        // (Zero-size shapes get the product rule's strides, which can be 0 on long axes.)
        if like.size() > 0 {
            prop_assert!(!like.has_negative_strides() && !like.is_broadcast());
        }
        let mut offsets: Vec<isize> = like.logical_offsets().collect();
        offsets.sort_unstable();
        prop_assert_eq!(offsets, (0..like.size() as isize).collect::<Vec<_>>());
        if layout.is_contiguous() || layout.ndim() <= 1 {
            prop_assert!(like.is_contiguous());
        }
        let again = like.like();
        prop_assert_eq!(
            used_strides(again.shape(), again.strides()),
            used_strides(like.shape(), like.strides())
        );
        prop_assert!(check_compatible(&like, &like, 8).is_ok());
    }

    #[test]
    fn view_as_keeps_the_bytes(shape in shape_strategy(), old in 0usize..4, new in 0usize..4) {
        let (old, new) = (1usize << old, 1usize << new);
        let layout = Layout::contiguous(&shape, Order::C).unwrap();
        match layout.view_as(old, new) {
            Ok(viewed) => {
                prop_assert_eq!(viewed.size() * new, layout.size() * old);
                prop_assert!(viewed.is_c_contiguous());
                prop_assert_eq!(viewed.ndim(), layout.ndim());
            }
            Err(Error::ViewAs { .. }) => {
                let last_bytes = shape.last().map(|&l| l * old);
                prop_assert!(last_bytes.is_none_or(|b| b % new != 0));
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }
}
