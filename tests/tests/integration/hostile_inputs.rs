//! Hostile-input property test of the public layout and transfer API (issue 9, item 3).
//!
//! Random host arrays (including 0-d, empty and broadcast ones) go to a simulated device; then a
//! random sequence of operations with random, often absurd arguments (huge and overflowing
//! lengths, steps of `isize::MIN`, inferred dimensions, zero sections) is applied to the device
//! array and, where the call succeeds, to an ndarray model of it. Every `Ok` result must hold
//! exactly the model's values; every failure must be an `Error`. A panic anywhere fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use ndarray::{ArrayD, Axis, IxDyn, ShapeBuilder, Slice, SliceInfoElem};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

fn device() -> Device {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Runtime::with_backend(Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20))))
        })
        .device(0)
        .unwrap()
}

/// Bounds and indices: mostly small, sometimes extreme.
fn bound() -> impl Strategy<Value = isize> {
    prop_oneof![
        6 => -6isize..7,
        1 => Just(isize::MIN),
        1 => Just(isize::MAX),
        1 => Just(isize::MIN + 1),
        1 => Just(1isize << 40),
        1 => Just(-(1isize << 40)),
    ]
}

fn step() -> impl Strategy<Value = isize> {
    prop_oneof![
        6 => -3isize..4,
        1 => Just(isize::MIN),
        1 => Just(isize::MAX),
        1 => Just(isize::MIN + 1),
        1 => Just(1isize << 40),
    ]
}

fn dim() -> impl Strategy<Value = isize> {
    prop_oneof![
        6 => -2isize..7,
        1 => Just(isize::MAX),
        1 => Just(isize::MIN),
        1 => Just(1isize << 40),
        1 => Just(1isize << 62),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Slice(Vec<SliceInfoElem>),
    Reshape(Vec<isize>, bool),
    Ravel(bool),
    Split(usize),
    ViewAsBytes,
    Transpose,
    CopyInto,
    CopyFromHost(i32),
    StreamRoundTrip,
}

fn elem() -> impl Strategy<Value = SliceInfoElem> {
    prop_oneof![
        3 => (bound(), proptest::option::of(bound()), step())
            .prop_map(|(start, end, step)| SliceInfoElem::Slice { start, end, step }),
        1 => bound().prop_map(SliceInfoElem::Index),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec(elem(), 0..5).prop_map(Op::Slice),
        2 => (proptest::collection::vec(dim(), 0..4), any::<bool>()).prop_map(|(s, f)| Op::Reshape(s, f)),
        1 => any::<bool>().prop_map(Op::Ravel),
        1 => prop_oneof![0usize..5, Just(usize::MAX), Just(1usize << 40)].prop_map(Op::Split),
        1 => Just(Op::ViewAsBytes),
        1 => Just(Op::Transpose),
        1 => Just(Op::CopyInto),
        1 => (1i32..1000).prop_map(Op::CopyFromHost),
        1 => Just(Op::StreamRoundTrip),
    ]
}

/// The starting array: C or F ordered values `0..n`, or a broadcast of a smaller array.
#[derive(Debug, Clone)]
struct Start {
    shape: Vec<usize>,
    fortran: bool,
    broadcast_axis: Option<usize>,
}

fn start() -> impl Strategy<Value = Start> {
    (
        proptest::collection::vec(0usize..5, 0..4),
        any::<bool>(),
        proptest::option::of(0usize..4),
    )
        .prop_map(|(shape, fortran, broadcast_axis)| Start {
            shape,
            fortran,
            broadcast_axis,
        })
}

fn values(shape: &[usize], fortran: bool) -> ArrayD<i32> {
    let size: usize = shape.iter().product();
    let data: Vec<i32> = (0..size as i32).collect();
    if fortran {
        ArrayD::from_shape_vec(IxDyn(shape).f(), data).unwrap()
    } else {
        ArrayD::from_shape_vec(IxDyn(shape), data).unwrap()
    }
}

/// numpy's clamping of one slice, as an in-bounds ndarray `Slice` (`None` for a zero step).
fn clamp(len: usize, start: isize, end: Option<isize>, step: isize) -> Option<Slice> {
    if step == 0 {
        return None;
    }
    let ilen = len as isize;
    let c = |b: isize| {
        if b < 0 {
            b.saturating_add(ilen).max(0)
        } else {
            b.min(ilen)
        }
    };
    let start = c(start);
    let end = c(end.unwrap_or(ilen)).max(start);
    // A step longer than the axis selects the same single element as one of the axis' length.
    let magnitude = step.unsigned_abs().min(len.max(1)) as isize;
    Some(Slice::new(
        start,
        Some(end),
        if step < 0 { -magnitude } else { magnitude },
    ))
}

/// The model of `DeviceArray::slice`; `None` when the call must fail.
fn slice_model(host: &ArrayD<i32>, info: &[SliceInfoElem]) -> Option<ArrayD<i32>> {
    if info.len() > host.ndim() {
        return None;
    }
    let mut view = host.view();
    let mut axis = 0;
    for e in info {
        let len = view.len_of(Axis(axis));
        match *e {
            SliceInfoElem::Slice { start, end, step } => {
                view.slice_axis_inplace(Axis(axis), clamp(len, start, end, step)?);
                axis += 1;
            }
            SliceInfoElem::Index(i) => {
                let at = if i < 0 {
                    i.checked_add(len as isize)?
                } else {
                    i
                };
                if !(0..len as isize).contains(&at) {
                    return None;
                }
                view = view.index_axis_move(Axis(axis), at as usize);
            }
            SliceInfoElem::NewAxis => return None,
        }
    }
    Some(view.to_owned())
}

/// `host`'s values in C (or F) order.
fn flat(host: &ArrayD<i32>, fortran: bool) -> Vec<i32> {
    if fortran {
        host.t().iter().copied().collect()
    } else {
        host.iter().copied().collect()
    }
}

/// The values of a contiguous array in memory order (what Numba's reshape reinterprets).
fn memory_order(array: &DeviceArray<i32>, host: &ArrayD<i32>) -> Option<Vec<i32>> {
    if host.is_empty() {
        return Some(Vec::new());
    }
    if array.layout().is_broadcast() {
        return None;
    }
    if array.is_c_contiguous() {
        Some(flat(host, false))
    } else if array.is_f_contiguous() {
        Some(flat(host, true))
    } else {
        None
    }
}

/// The array's values: for these small arrays (at most a few hundred elements, on a device of
/// 1 MiB) a copy to the host has nothing to fail for, so an error fails the case.
fn copied(array: &DeviceArray<i32>, what: &str) -> Result<ArrayD<i32>, TestCaseError> {
    array
        .copy_to_host()
        .map_err(|e| TestCaseError::fail(format!("{what}: copy to the host failed: {e}")))
}

fn check_equal(what: &str, got: &ArrayD<i32>, want: &ArrayD<i32>) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.shape(), want.shape(), "{}", what);
    prop_assert_eq!(got, want, "{}", what);
    Ok(())
}

fn run(start: Start, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dev = device();
    let mut host = values(&start.shape, start.fortran);
    let mut array = match start.broadcast_axis.filter(|&a| a < start.shape.len()) {
        Some(axis) => {
            // Broadcast along `axis`: one row repeated.
            let mut small_shape = start.shape.clone();
            small_shape[axis] = 1;
            let small = values(&small_shape, start.fortran);
            let wide = small.broadcast(IxDyn(&start.shape)).unwrap();
            host = wide.to_owned();
            dev.to_device(&wide)
                .map_err(|e| TestCaseError::fail(format!("broadcast upload: {e}")))?
        }
        None => dev
            .to_device(&host)
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
    };
    check_equal(
        "upload",
        &array
            .copy_to_host()
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
        &host,
    )?;
    for op in ops {
        match op {
            Op::Slice(info) => {
                if let Ok(view) = array.slice(&info) {
                    let Some(want) = slice_model(&host, &info) else {
                        return Err(TestCaseError::fail(format!(
                            "slice {info:?} of {:?} accepted",
                            host.shape()
                        )));
                    };
                    check_equal("slice", &copied(&view, "slice")?, &want)?;
                    array = view;
                    host = want;
                }
            }
            Op::Reshape(shape, fortran) => {
                let order = if fortran { Order::F } else { Order::C };
                if let Ok(view) = array.reshape(&shape, order) {
                    prop_assert_eq!(view.size(), host.len());
                    // Numba returns the array unchanged only for its own shape, given verbatim.
                    let verbatim = shape.len() == array.ndim()
                        && shape
                            .iter()
                            .zip(array.shape())
                            .all(|(&a, &b)| a == b as isize);
                    if verbatim {
                        array = view;
                        continue;
                    }
                    // Numba's reshape of a contiguous array reinterprets its memory in order.
                    let Some(memory) = memory_order(&array, &host) else {
                        return Err(TestCaseError::fail(
                            "reshape of a non-contiguous array accepted",
                        ));
                    };
                    let new_shape = view.shape().to_vec();
                    let want = if fortran {
                        ArrayD::from_shape_vec(IxDyn(&new_shape).f(), memory).unwrap()
                    } else {
                        ArrayD::from_shape_vec(IxDyn(&new_shape), memory).unwrap()
                    };
                    check_equal("reshape", &copied(&view, "reshape")?, &want)?;
                    array = view;
                    host = want;
                }
            }
            Op::Ravel(fortran) => {
                let order = if fortran { Order::F } else { Order::C };
                if let Ok(view) = array.ravel(order)
                    && view.shape() != array.shape()
                    && let Some(memory) = memory_order(&array, &host)
                {
                    let want = ArrayD::from_shape_vec(IxDyn(&[host.len()]), memory).unwrap();
                    check_equal("ravel", &copied(&view, "ravel")?, &want)?;
                }
            }
            Op::Split(section) => {
                if let Ok(pieces) = array.split(section) {
                    let mut joined = Vec::new();
                    for piece in &pieces {
                        joined.extend(copied(piece, "split piece")?.iter().copied());
                    }
                    if host.ndim() == 1 {
                        prop_assert_eq!(joined, flat(&host, false));
                    }
                }
            }
            Op::ViewAsBytes => {
                if let Ok(bytes) = array.view_as::<u8>() {
                    prop_assert_eq!(bytes.nbytes(), array.nbytes());
                    if let Ok(back) = bytes.view_as::<i32>() {
                        check_equal(
                            "view_as round trip",
                            &copied(&back, "view_as round trip")?,
                            &host,
                        )?;
                    }
                }
            }
            Op::Transpose => {
                if let Ok(t) = array.t() {
                    prop_assert_eq!(host.ndim(), 2);
                    let want = host.t().to_owned();
                    check_equal("t", &copied(&t, "t")?, &want)?;
                }
            }
            Op::CopyInto => {
                // A C-order target: an array of another layout is refused (as Numba's
                // `copy_to_host(ary)` checks the strides); nothing else may fail.
                let mut target = ArrayD::<i32>::zeros(IxDyn(host.shape()));
                match array.copy_to_host_into(&mut target) {
                    Ok(()) => check_equal("copy_to_host_into", &target, &host)?,
                    Err(gpu_mem::Error::IncompatibleStrides { .. }) => {}
                    Err(e) => return Err(TestCaseError::fail(format!("copy_to_host_into: {e}"))),
                }
            }
            Op::CopyFromHost(offset) => {
                let new = host.mapv(|v| v.wrapping_add(offset));
                if array.copy_from_host(&new).is_ok() && !array.layout().is_broadcast() {
                    check_equal("copy_from_host", &copied(&array, "copy_from_host")?, &new)?;
                    host = new;
                }
                // A failed or aliased write leaves the model unknown: stop here.
                if array.layout().is_broadcast() {
                    return Ok(());
                }
            }
            Op::StreamRoundTrip => {
                let stream = dev
                    .stream()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let mut target = ArrayD::<i32>::zeros(IxDyn(host.shape()));
                let copied = stream.copy_to_host(&array, &mut target);
                stream
                    .synchronize()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                if copied.is_ok() {
                    check_equal("stream copy_to_host", &target, &host)?;
                }
            }
        }
    }
    Ok(())
}

fn huge_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..4,
        1 => Just(1usize << 40),
        1 => Just(isize::MAX as usize),
        1 => Just(usize::MAX),
    ]
}

fn huge_stride() -> impl Strategy<Value = isize> {
    prop_oneof![
        4 => -7isize..8,
        1 => Just(isize::MAX),
        1 => Just(isize::MIN),
        1 => Just(1isize << 40),
    ]
}

/// Arrays made from hostile shapes and strides: creating, copying, slicing and reshaping them
/// must give results or errors, never a panic or an abort.
fn hostile_layout(
    shape: Vec<usize>,
    strides: Vec<isize>,
    info: Vec<SliceInfoElem>,
) -> Result<(), TestCaseError> {
    let dev = device();
    let Ok(array) = dev.device_array_with_strides::<u16>(&shape, &strides) else {
        return Ok(());
    };
    if let Ok(host) = array.copy_to_host() {
        prop_assert_eq!(host.shape(), array.shape());
        prop_assert!(host.iter().all(|&v| v == 0));
    }
    if let Ok(view) = array.slice(&info)
        && let Ok(host) = view.copy_to_host()
    {
        prop_assert_eq!(host.shape(), view.shape());
    }
    let _ = array.reshape(&[-1], Order::C).map(|r| r.copy_to_host());
    let _ = array.ravel(Order::F);
    let _ = array.view_as::<u64>().map(|v| v.copy_to_host());
    let _ = array.split(2);
    let mut target = ArrayD::<u16>::zeros(IxDyn(&[2]));
    let _ = array.copy_to_host_into(&mut target);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 8 } else { 8000 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn operations_are_correct_or_errors(start in start(), ops in proptest::collection::vec(op(), 0..5)) {
        run(start, ops)?;
    }

    #[test]
    fn hostile_layouts_are_errors_not_panics(
        shape in proptest::collection::vec(huge_len(), 0..4),
        strides in proptest::collection::vec(huge_stride(), 0..4),
        info in proptest::collection::vec(elem(), 0..3),
    ) {
        hostile_layout(shape, strides, info)?;
    }
}

/// The issue's reproductions.
#[test]
fn issue_reproductions_are_errors() {
    let dev = device();
    let bc = dev
        .device_array_with_strides::<u16>(&[isize::MAX as usize, 1], &[0, 7])
        .unwrap();
    assert!(matches!(
        bc.copy_to_host(),
        Err(Error::HostOutOfMemory { .. })
    ));
    let bc = dev
        .device_array_with_strides::<u64>(&[1 << 40], &[0])
        .unwrap();
    assert!(matches!(
        bc.copy_to_host(),
        Err(Error::HostOutOfMemory { .. })
    ));
    let one = dev.device_array::<u8>(&[1], Order::C).unwrap();
    let stepped = one
        .slice([SliceInfoElem::Slice {
            start: 0,
            end: None,
            step: isize::MIN,
        }])
        .unwrap();
    assert_eq!(
        stepped.copy_to_host().unwrap(),
        ndarray::arr1(&[0u8]).into_dyn()
    );
}
