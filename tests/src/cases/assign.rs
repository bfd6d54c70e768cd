//! Assignment to views (Numba's `d[key] = value`): scalars, host and
//! device arrays, broadcasting, strided and reversed targets, and Numba's error wording.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Error, Runtime};
use ndarray::{Array, Array1, ArrayD, IxDyn, array, s};

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["assign":
        dense_targets,
        broadcast_rows_and_columns_of_dense_targets,
        numba_errors,
        zero_d_and_empty,
    ];
    cases.extend(crate::cases!["assign", Requires::Kernels;
        strided_scalar_fill,
        strided_targets_from_host,
        strided_targets_from_device,
        overlapping_device_value,
        three_d_and_mapped_targets,
        overlapping_views_with_gaps_are_not_dense,
        targets_reaching_an_element_twice_take_the_last_value,
    ]);
    cases.extend(crate::cases!["assign":
        overlapping_views_copy_as_memmove_and_read_back,
    ]);
    cases
}

fn arange(n: usize) -> Array1<i64> {
    Array::from_iter(0..n as i64)
}

fn grid(rows: usize, cols: usize) -> Result<ArrayD<i64>, String> {
    Ok(arange(rows * cols)
        .into_shape_with_order((rows, cols))
        .map_err(fail("shape"))?
        .into_dyn())
}

fn dense_targets(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    // d[2] = 5; d[-1] = 5 (an integer index gives a 0-d view)
    d.slice(s![2])
        .map_err(fail("d[2]"))?
        .fill(5)
        .map_err(fail("d[2]=5"))?;
    d.slice(s![-1])
        .map_err(fail("d[-1]"))?
        .fill(5)
        .map_err(fail("d[-1]=5"))?;
    // d[1:4] = [7, 8, 9]
    d.slice(s![1..4])
        .map_err(fail("d[1:4]"))?
        .assign(&array![7i64, 8, 9])
        .map_err(fail("d[1:4]=[7,8,9]"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![0i64, 7, 8, 9, 4, 5, 6, 7, 8, 5].into_dyn(),
        "d[2]=5, d[-1]=5, d[1:4]=[7,8,9]: {got}"
    );
    // d[::-1] = arange(10) gives 9..0
    d.slice(s![..;-1])
        .map_err(fail("d[::-1]"))?
        .assign(&arange(10))
        .map_err(fail("d[::-1]=arange(10)"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == Array::from_iter((0..10i64).rev()).into_dyn(),
        "d[::-1]=arange(10): {got}"
    );
    // A whole F-order array from a C-order value, and a fill of a non-uniform value.
    let mut f = dev
        .device_array::<f64>(&[3, 4], Order::F)
        .map_err(fail("alloc"))?;
    let value = grid(3, 4)?.mapv(|v| v as f64);
    f.assign(&value).map_err(fail("F = C value"))?;
    ensure!(f.copy_to_host().map_err(fail("copy"))? == value, "F target");
    f.fill(2.5).map_err(fail("fill"))?;
    ensure!(
        f.copy_to_host()
            .map_err(fail("copy"))?
            .iter()
            .all(|&v| v == 2.5),
        "fill 2.5"
    );
    Ok(())
}

fn broadcast_rows_and_columns_of_dense_targets(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut d = dev
        .device_array::<f64>(&[3, 4], Order::C)
        .map_err(fail("alloc"))?;
    // d[:] = arange(3.).reshape(3, 1): rows broadcast
    let column = array![[0.0f64], [1.0], [2.0]];
    d.assign(&column).map_err(fail("d[:]=(3,1)"))?;
    let want = ndarray::Array2::from_shape_fn((3, 4), |(i, _)| i as f64).into_dyn();
    ensure!(
        d.copy_to_host().map_err(fail("copy"))? == want,
        "rows broadcast"
    );
    // d[:] = arange(4.): every row
    d.assign(&array![0.0f64, 1.0, 2.0, 3.0])
        .map_err(fail("d[:]=arange(4.)"))?;
    let want = ndarray::Array2::from_shape_fn((3, 4), |(_, j)| j as f64).into_dyn();
    ensure!(
        d.copy_to_host().map_err(fail("copy"))? == want,
        "columns broadcast"
    );
    // (3,4) d[1] = arange(4.)
    d.slice(s![1, ..])
        .map_err(fail("d[1]"))?
        .assign(&array![10.0f64, 11.0, 12.0, 13.0])
        .map_err(fail("d[1]=arange(4.)"))?;
    ensure!(
        d.get(&[1, 2]).map_err(fail("get"))? == 12.0 && d.get(&[0, 2]).map_err(fail("get"))? == 2.0,
        "d[1] = row"
    );
    Ok(())
}

fn numba_errors(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut d = dev
        .device_array::<f64>(&[5], Order::C)
        .map_err(fail("alloc"))?;
    let err = d.assign(&array![1.0f64, 3.0]).err().map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("Can't copy sequence with size 2 to array axis 0 with dimension 5"),
        "(5,) d[:]=[1,3]: {err:?}"
    );
    let mut d35 = dev
        .device_array::<f64>(&[35], Order::C)
        .map_err(fail("alloc"))?;
    let err = d35.assign(&ArrayD::<f64>::ones(IxDyn(&[1, 2, 3]))).err();
    ensure!(
        matches!(
            err,
            Some(Error::AssignRank {
                value_ndim: 3,
                target_ndim: 1
            })
        ) && err.as_ref().map(|e| e.to_string()).as_deref()
            == Some("Can't assign 3-D array to 1-D self"),
        "(35,) d[:]=ones((1,2,3)): {err:?}"
    );
    // A leading size-1 axis is refused too (numpy would accept it).
    let mut d10 = dev
        .device_array::<f64>(&[10], Order::C)
        .map_err(fail("alloc"))?;
    let err = d10
        .assign(&ndarray::Array2::<f64>::ones((1, 10)))
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("Can't assign 2-D array to 1-D self"),
        "d1[:]=ones((1,10)): {err:?}"
    );
    let mut d34 = dev
        .device_array::<f64>(&[3, 4], Order::C)
        .map_err(fail("alloc"))?;
    let err = d34
        .assign(&array![0.0f64, 1.0, 2.0])
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("Can't copy sequence with size 3 to array axis 1 with dimension 4"),
        "(3,4) d[:]=arange(3.): {err:?}"
    );
    let src = dev
        .to_device(&array![1.0f64, 2.0])
        .map_err(fail("to_device"))?;
    ensure!(
        matches!(
            d.assign_device(&src),
            Err(Error::AssignShape {
                size: 2,
                axis: 0,
                dimension: 5
            })
        ),
        "device value of the wrong shape"
    );
    // A non-contiguous host value is refused, as Numba's auto_device refuses it.
    let strided = arange(10);
    let err = d.assign(&strided.slice(s![..;2]).mapv(|v| v as f64).slice(s![..;1]));
    ensure!(err.is_ok(), "a contiguous (5,) value works: {err:?}");
    let mut di = dev
        .device_array::<i64>(&[5], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        matches!(
            di.assign(&strided.slice(s![..;2])),
            Err(Error::NonContiguous { .. })
        ),
        "d[:] = arange(10)[::2] is refused"
    );
    // d[10] = 1: the index is checked before anything is written.
    ensure!(
        matches!(di.slice(s![10]), Err(Error::IndexOutOfBounds { .. })),
        "d[10] = 1"
    );
    Ok(())
}

fn zero_d_and_empty(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut z = dev.to_device(&ndarray::arr0(1i32)).map_err(fail("0-d"))?;
    z.fill(5).map_err(fail("d[()]=5"))?;
    ensure!(z.get(&[]).map_err(fail("get"))? == 5, "0-d fill");
    z.assign(&ndarray::arr0(7i32)).map_err(fail("d[()]=arr0"))?;
    ensure!(z.get(&[]).map_err(fail("get"))? == 7, "0-d assign");
    let mut e = dev
        .device_array::<f32>(&[0], Order::C)
        .map_err(fail("alloc"))?;
    let src = dev
        .device_array::<f32>(&[0], Order::C)
        .map_err(fail("alloc"))?;
    e.assign_device(&src)
        .map_err(fail("empty d[:] = empty device array"))?;
    e.fill(1.0).map_err(fail("empty fill"))?;
    let d = dev.to_device(&arange(4)).map_err(fail("to_device"))?;
    d.slice(s![3..3])
        .map_err(fail("d[3:3]"))?
        .fill(1)
        .map_err(fail("d[3:3]=1"))?;
    ensure!(
        d.copy_to_host().map_err(fail("copy"))? == arange(4).into_dyn(),
        "empty view"
    );
    Ok(())
}

fn strided_scalar_fill(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    // d[::2] = 0 leaves the odd elements alone.
    let d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    d.slice(s![..;2])
        .map_err(fail("d[::2]"))?
        .fill(0)
        .map_err(fail("d[::2]=0"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![0i64, 1, 0, 3, 0, 5, 0, 7, 0, 9].into_dyn(),
        "d[::2]=0: {got}"
    );
    // (3,4) d[:, 1] = 5
    let d = dev.to_device(&grid(3, 4)?).map_err(fail("to_device"))?;
    d.slice(s![.., 1])
        .map_err(fail("d[:,1]"))?
        .fill(5)
        .map_err(fail("d[:,1]=5"))?;
    let mut want = grid(3, 4)?;
    want.slice_mut(s![.., 1]).fill(5);
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(got == want, "d[:,1]=5: {got}");
    // A struct element type, a reversed strided view.
    let r = dev
        .to_device(&Array::from_elem(7, [1u8, 2, 3]))
        .map_err(fail("to_device"))?;
    r.slice(s![..;-3])
        .map_err(fail("r[::-3]"))?
        .fill([9, 8, 7])
        .map_err(fail("r[::-3] = v"))?;
    let got = r.copy_to_host().map_err(fail("copy"))?;
    let want: Vec<[u8; 3]> = (0..7)
        .map(|i| if i % 3 == 0 { [9, 8, 7] } else { [1, 2, 3] })
        .collect();
    ensure!(got.iter().copied().eq(want), "r[::-3] = v: {got:?}");
    Ok(())
}

fn strided_targets_from_host(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&grid(3, 8)?).map_err(fail("to_device"))?;
    // d[:, ::2] = arange(3).reshape(3, 1) and then d[1:, 1::2] = [100, 101, 102, 103]
    d.slice(s![.., ..;2])
        .map_err(fail("view"))?
        .assign(&array![[-1i64], [-2], [-3]])
        .map_err(fail("columns broadcast into a strided view"))?;
    d.slice(s![1.., 1..;2])
        .map_err(fail("view"))?
        .assign(&array![100i64, 101, 102, 103])
        .map_err(fail("rows broadcast into a strided view"))?;
    let mut want = grid(3, 8)?;
    for i in 0..3 {
        for j in 0..8 {
            if j % 2 == 0 {
                want[[i, j]] = -(i as i64) - 1;
            } else if i > 0 {
                want[[i, j]] = 100 + (j as i64 - 1) / 2;
            }
        }
    }
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(got == want, "strided targets: {got}");
    // d[::-2] = [a, b, c, d, e]
    let v = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    v.slice(s![..;-2])
        .map_err(fail("view"))?
        .assign(&array![50i64, 51, 52, 53, 54])
        .map_err(fail("d[::-2] = ..."))?;
    let got = v.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![0i64, 54, 2, 53, 4, 52, 6, 51, 8, 50].into_dyn(),
        "d[::-2]: {got}"
    );
    Ok(())
}

fn strided_targets_from_device(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&grid(4, 6)?).map_err(fail("to_device"))?;
    let src = dev
        .to_device(&grid(4, 6)?.mapv(|v| v + 1000))
        .map_err(fail("src"))?;
    // d[::2, 1::2] = src[1::2, ::-2] (both strided), then d[3] = src[0, :] via a broadcast row.
    let target = d.slice(s![..;2, 1..;2]).map_err(fail("target"))?;
    let value = src.slice(s![1..;2, ..;-2]).map_err(fail("value"))?;
    let mut target = target;
    target
        .assign_device(&value)
        .map_err(fail("strided <- strided"))?;
    let mut want = grid(4, 6)?;
    let host_src = grid(4, 6)?.mapv(|v| v + 1000);
    want.slice_mut(s![..;2, 1..;2])
        .assign(&host_src.slice(s![1..;2, ..;-2]));
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(got == want, "strided device value: {got}");
    let row = src.slice(s![0..1, ..]).map_err(fail("row"))?;
    d.slice(s![2.., ..])
        .map_err(fail("rows"))?
        .assign_device(&row)
        .map_err(fail("broadcast device row"))?;
    let bcast = host_src.slice(s![0..1, ..]).to_owned();
    want.slice_mut(s![2.., ..]).assign(&bcast);
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(got == want, "broadcast device row: {got}");
    Ok(())
}

fn overlapping_device_value(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut d = dev.to_device(&arange(9)).map_err(fail("to_device"))?;
    let reversed = d.slice(s![..;-1]).map_err(fail("view"))?;
    d.assign_device(&reversed).map_err(fail("d[:] = d[::-1]"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == Array::from_iter((0..9i64).rev()).into_dyn(),
        "d[:] = d[::-1] reverses: {got}"
    );
    // Shifted overlap through a strided target: d[1::2] = d[0:8:2]
    let shifted = d.slice(s![0..8;2]).map_err(fail("view"))?;
    d.slice(s![1..;2])
        .map_err(fail("view"))?
        .assign_device(&shifted)
        .map_err(fail("d[1::2] = d[0:8:2]"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![8i64, 8, 6, 6, 4, 4, 2, 2, 0].into_dyn(),
        "d[1::2] = d[0:8:2]: {got}"
    );
    Ok(())
}

fn three_d_and_mapped_targets(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter(0..24i32)
        .into_shape_with_order((2, 3, 4))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    // d[:, 1, ::2] = [[-1, -2]]  (a (1, 2) value broadcast over axis 0)
    d.slice(s![.., 1, ..;2])
        .map_err(fail("view"))?
        .assign(&array![[-1i32, -2]])
        .map_err(fail("3-d strided"))?;
    // d[::-1, :, 3] = 7
    d.slice(s![..;-1, .., 3])
        .map_err(fail("view"))?
        .fill(7)
        .map_err(fail("fill"))?;
    let mut want = host.clone();
    want.slice_mut(s![.., 1, ..;2]).assign(&array![[-1i32, -2]]);
    want.slice_mut(s![.., .., 3]).fill(7);
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(got == want.into_dyn(), "3-d targets: {got}");
    // Mapped memory: the host sees the kernel's writes.
    let mut mapped = dev
        .mapped_array::<f32>(&[4, 4], MapFlags::default())
        .map_err(fail("mapped_array"))?;
    mapped
        .write(&ndarray::Array2::<f32>::ones((4, 4)))
        .map_err(fail("write"))?;
    mapped
        .device_view()
        .slice(s![.., 2])
        .map_err(fail("slice"))?
        .fill(3.0)
        .map_err(fail("mapped fill"))?;
    let seen = mapped.read().map_err(fail("read"))?;
    ensure!(
        seen.iter()
            .enumerate()
            .all(|(i, &v)| v == if i % 4 == 2 { 3.0 } else { 1.0 }),
        "mapped target: {seen}"
    );
    Ok(())
}

/// A view whose axes overlap and leave gaps can reach as many offsets as its span holds (shape
/// `(2, 2, 2)`, strides `(1, 1, 5)`: offsets 0-2 and 5-7, never 3 or 4). It is not dense:
/// filling it leaves the gap alone, and a byte-wise memset is refused.
fn overlapping_views_with_gaps_are_not_dense(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut parent = dev
        .device_array_with_strides::<f32>(&[2, 2, 2, 2], &[1, 1, 5, 3])
        .map_err(fail("alloc"))?;
    parent.fill(0.0).map_err(fail("fill parent"))?;
    parent.set(&[0, 0, 0, 1], 42.0).map_err(fail("set"))?;
    let mut child = parent.slice(s![.., .., .., 0]).map_err(fail("slice"))?;
    child.fill(7.5).map_err(fail("fill child"))?;
    let kept = parent.get(&[0, 0, 0, 1]).map_err(fail("get"))?;
    ensure!(
        kept == 42.0,
        "the element in the gap was overwritten: {kept}"
    );
    // (An ndarray cannot hold overlapping strides: read the elements one by one.)
    for index in ndarray::indices((2, 2, 2)) {
        let (i, j, k) = index;
        let v = child
            .get(&[i as isize, j as isize, k as isize])
            .map_err(fail("get child"))?;
        ensure!(v == 7.5, "child[{i}, {j}, {k}] after fill: {v}");
    }
    let memset = child.memset(0);
    ensure!(
        matches!(memset, Err(Error::NonContiguous { .. })),
        "memset of the overlapping view: {memset:?}"
    );
    let stream = dev.stream().map_err(fail("stream"))?;
    let on_stream = stream.memset(&mut child, 0);
    ensure!(
        matches!(on_stream, Err(Error::NonContiguous { .. })),
        "stream memset of the overlapping view: {on_stream:?}"
    );
    ensure!(
        parent.get(&[0, 0, 0, 1]).map_err(fail("get"))? == 42.0,
        "the gap after the refused memsets"
    );
    Ok(())
}

/// A target that reaches an element more than once (a broadcast row, axes that overlap) takes
/// the value of the last index reaching it, whole: the copy kernel's threads wrote such an
/// element at once, byte by byte, and could leave a value no source row has.
fn targets_reaching_an_element_twice_take_the_last_value(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let rows = 512usize;
    let row = ndarray::arr1(&[0i64; 3]);
    let mut d = dev
        .to_device(&row.broadcast((rows, 3)).ok_or("broadcast")?)
        .map_err(fail("to_device"))?;
    let value = ndarray::Array2::from_shape_fn((rows, 3), |(i, j)| {
        (i as i64 % 120 + 1) * 0x0101_0101_0101_0101 + j as i64
    });
    d.assign(&value).map_err(fail("assign"))?;
    let seen = d.copy_to_host().map_err(fail("copy"))?;
    let last = value.row(rows - 1);
    let all_last = last
        .broadcast((rows, 3))
        .ok_or("broadcast")?
        .to_owned()
        .into_dyn();
    ensure!(
        seen == all_last,
        "broadcast target: {} (the last row is {last})",
        seen.index_axis(ndarray::Axis(0), 0)
    );
    // Axes that overlap: (2, 2) with strides (1, 1) reach offset 1 twice.
    let mut o = dev
        .device_array_with_strides::<i64>(&[2, 2], &[1, 1])
        .map_err(fail("alloc"))?;
    o.assign(&ndarray::arr2(&[[10i64, 11], [12, 13]]))
        .map_err(fail("assign overlapping"))?;
    let got: Vec<i64> = [[0, 0], [0, 1], [1, 1]]
        .iter()
        .map(|i| o.get(i).map_err(fail("get")))
        .collect::<Result<_, _>>()?;
    ensure!(got == [10, 12, 13], "overlapping target: {got:?}");
    Ok(())
}

/// Overlapping views of one allocation: a device copy from one into the other moves what the
/// source held before the copy (a device-to-device copy has `memcpy`'s semantics, which
/// overlapping ranges break), synchronously and on a stream; and a view whose axes overlap
/// comes back to the host as an array with its values (it was an error).
fn overlapping_views_copy_as_memmove_and_read_back(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    // Spans several copy chunks; fewer elements under Miri, which takes minutes for 2^16.
    let n = if cfg!(miri) { 1 << 10 } else { 1 << 16 };
    let expected: Vec<i64> = std::iter::once(0).chain(0..n as i64 - 1).collect();
    let d = dev.to_device(&arange(n)).map_err(fail("to_device"))?;
    d.slice(s![1..])
        .map_err(fail("slice"))?
        .copy_from_device(&d.slice(s![..-1]).map_err(fail("slice"))?)
        .map_err(fail("copy_from_device"))?;
    let seen = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        seen.iter().copied().eq(expected.iter().copied()),
        "synchronous: {:?}",
        seen.iter().take(6).collect::<Vec<_>>()
    );
    let d = dev.to_device(&arange(n)).map_err(fail("to_device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    stream
        .copy_from_device(
            &mut d.slice(s![1..]).map_err(fail("slice"))?,
            &d.slice(s![..-1]).map_err(fail("slice"))?,
        )
        .map_err(fail("stream copy_from_device"))?;
    stream.synchronize().map_err(fail("synchronize"))?;
    let seen = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        seen.iter().copied().eq(expected.iter().copied()),
        "on a stream: {:?}",
        seen.iter().take(6).collect::<Vec<_>>()
    );
    let mut o = dev
        .device_array_with_strides::<f32>(&[2, 2], &[1, 1])
        .map_err(fail("alloc"))?;
    for (k, v) in [1.0f32, 2.0, 3.0].iter().enumerate() {
        let index = if k == 2 { [1, 1] } else { [0, k as isize] };
        o.set(&index, *v).map_err(fail("set"))?;
    }
    let host = o.copy_to_host().map_err(fail("copy overlapping view"))?;
    ensure!(
        host == ndarray::arr2(&[[1.0f32, 2.0], [2.0, 3.0]]).into_dyn(),
        "overlapping view on the host: {host}"
    );
    // A reversed host view is refused on a stream as it is without one (and by Numba).
    let reversed = arange(8);
    let reversed = reversed.slice(s![..;-1]);
    match stream.to_device(&reversed) {
        Err(Error::NonContiguous { .. }) => {}
        other => return Err(format!("a reversed host view on a stream: {other:?}")),
    }
    Ok(())
}
