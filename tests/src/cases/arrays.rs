//! Allocation, attributes and layout operations of device arrays.

use crate::{Case, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Error, Runtime};
use ndarray::{Array, ArrayD, IxDyn, ShapeBuilder, arr0, array};

pub fn cases() -> Vec<Case> {
    crate::cases!["arrays":
        device_array_shapes_and_strides,
        broadcast_targets_keep_the_last_write,
        device_array_like_rules,
        attributes_match_numba,
        contiguity_flags,
        slicing_views_share_memory,
        reshape_ravel_split,
        reshape_errors,
        view_as_other_type,
        transpose_is_a_copy,
        element_get_set_and_index_errors,
        zero_d_and_zero_size,
        records_round_trip,
        memory_info_and_release,
        out_of_memory_is_an_error,
    ]
}

fn arange(n: usize) -> ArrayD<i64> {
    Array::from_iter(0..n as i64).into_dyn()
}

fn device_array_shapes_and_strides(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev
        .device_array::<f64>(&[5], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        d.shape() == [5] && d.byte_strides() == [8],
        "(5,) f8: {:?}",
        d.byte_strides()
    );
    let d = dev
        .device_array::<i32>(&[2, 3], Order::F)
        .map_err(fail("alloc"))?;
    ensure!(
        d.byte_strides() == [4, 8],
        "F (2,3) i4 strides {:?}",
        d.byte_strides()
    );
    let d = dev
        .device_array_with_strides::<i32>(&[2, 3], &[1, 2])
        .map_err(fail("alloc"))?;
    ensure!(
        d.byte_strides() == [4, 8],
        "explicit strides {:?}",
        d.byte_strides()
    );
    let d = dev
        .device_array::<f64>(&[3, 0, 2], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        d.byte_strides() == [0, 16, 8] && d.alloc_size() == 0,
        "(3,0,2): {:?}",
        d.byte_strides()
    );
    let d = dev
        .device_array::<f64>(&[], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        d.ndim() == 0 && d.size() == 1 && d.alloc_size() == 8,
        "0-d alloc_size {}",
        d.alloc_size()
    );
    let err = dev.device_array_with_strides::<f64>(&[2, 3], &[1]).err();
    ensure!(
        matches!(err, Some(Error::InvalidStrides { .. })),
        "strides not match ndim: {err:?}"
    );
    Ok(())
}

fn device_array_like_rules(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::<f64, _>::zeros((10, 12));
    let gapped = host.slice(ndarray::s![..;2, ..;2]);
    let d = dev.device_array_like(&gapped).map_err(fail("like"))?;
    ensure!(
        d.shape() == [5, 6] && d.byte_strides() == [48, 8],
        "like gapped: {:?}",
        d.byte_strides()
    );
    let d = dev.device_array_like(&gapped.t()).map_err(fail("like"))?;
    ensure!(
        d.shape() == [6, 5] && d.byte_strides() == [8, 48],
        "like gapped.T: {:?}",
        d.byte_strides()
    );
    let f = Array::<f32, _>::zeros((3, 4).f());
    let d = dev.device_array_like(&f).map_err(fail("like"))?;
    ensure!(
        d.byte_strides() == [4, 12],
        "like F: {:?}",
        d.byte_strides()
    );
    let h3 = Array::<f64, _>::zeros((2, 3, 4));
    let p = h3.view().permuted_axes([1, 0, 2]);
    let d = dev.device_array_like(&p).map_err(fail("like"))?;
    ensure!(
        d.shape() == [3, 2, 4] && d.byte_strides() == [32, 96, 8],
        "like permuted: {:?}",
        d.byte_strides()
    );
    let src = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    let d = dev
        .device_array_like(&src.slice(ndarray::s![..;-1]).map_err(fail("slice"))?)
        .map_err(fail("like"))?;
    ensure!(
        d.byte_strides() == [8],
        "like reversed: {:?}",
        d.byte_strides()
    );
    Ok(())
}

fn attributes_match_numba(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    let v = d.slice(ndarray::s![..;2]).map_err(fail("slice"))?;
    ensure!(
        v.shape() == [5] && v.byte_strides() == [16],
        "i10[::2] {:?}",
        v.byte_strides()
    );
    ensure!(
        v.nbytes() == 40 && v.alloc_size() == 72,
        "nbytes {} alloc {}",
        v.nbytes(),
        v.alloc_size()
    );
    let r = d.slice(ndarray::s![..;-1]).map_err(fail("slice"))?;
    ensure!(
        r.byte_strides() == [-8] && r.alloc_size() == 80,
        "i10[::-1] {:?}",
        r.byte_strides()
    );
    ensure!(
        r.device_ptr().0 == d.device_ptr().0 + 72,
        "reversed view points at its first element"
    );
    let bc = ndarray::Array::from_iter(0..3i64);
    let bc = bc.broadcast((4, 3)).ok_or("broadcast")?;
    let d = dev.to_device(&bc).map_err(fail("to_device broadcast"))?;
    ensure!(
        d.byte_strides() == [0, 8] && d.alloc_size() == 24 && d.nbytes() == 96,
        "broadcast attrs {:?}",
        d.byte_strides()
    );
    ensure!(!d.is_c_contiguous(), "broadcast is not C-contiguous");
    let back = d.copy_to_host().map_err(fail("copy back"))?;
    ensure!(
        back == array![[0i64, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2]].into_dyn(),
        "broadcast round trip {back:?}"
    );
    let z = dev
        .device_array::<f64>(&[], Order::C)
        .map_err(fail("0-d"))?;
    ensure!(z.len().is_err(), "len of 0-d is an error");
    Ok(())
}

fn contiguity_flags(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let c = dev
        .device_array::<f64>(&[2, 5], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(c.is_c_contiguous() && !c.is_f_contiguous(), "C 2x5");
    let f = dev
        .device_array::<f64>(&[2, 5], Order::F)
        .map_err(fail("alloc"))?;
    ensure!(!f.is_c_contiguous() && f.is_f_contiguous(), "F 2x5");
    for shape in [[1usize, 4], [4, 1], [0, 3]] {
        let a = dev
            .device_array::<f64>(&shape, Order::C)
            .map_err(fail("alloc"))?;
        ensure!(a.is_c_contiguous() && a.is_f_contiguous(), "{shape:?} both");
    }
    let relaxed = dev
        .device_array_with_strides::<f64>(&[1, 10], &[100, 1])
        .map_err(fail("alloc"))?;
    ensure!(
        relaxed.is_c_contiguous() && relaxed.is_f_contiguous(),
        "(1,10) strides (800,8) both"
    );
    let row = c.slice(ndarray::s![1, ..]).map_err(fail("row"))?;
    ensure!(
        row.is_c_contiguous() && row.is_f_contiguous(),
        "d2[1,:] both"
    );
    let col = c.slice(ndarray::s![.., 1]).map_err(fail("col"))?;
    ensure!(
        !col.is_c_contiguous() && !col.is_f_contiguous(),
        "d2[:,1] neither"
    );
    Ok(())
}

fn slicing_views_share_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter(0..12i64)
        .into_shape_with_order((3, 4))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    let cases: Vec<(Vec<ndarray::SliceInfoElem>, ArrayD<i64>)> = vec![
        (
            ndarray::s![1.., ..;2].as_ref().to_vec(),
            host.slice(ndarray::s![1.., ..;2]).to_owned().into_dyn(),
        ),
        (
            ndarray::s![.., ..;-1].as_ref().to_vec(),
            host.slice(ndarray::s![.., ..;-1]).to_owned().into_dyn(),
        ),
        (
            ndarray::s![.., 1].as_ref().to_vec(),
            host.slice(ndarray::s![.., 1]).to_owned().into_dyn(),
        ),
        (
            ndarray::s![-1, 1..3].as_ref().to_vec(),
            host.slice(ndarray::s![-1, 1..3]).to_owned().into_dyn(),
        ),
    ];
    for (info, expected) in cases {
        let view = d.slice(&info).map_err(fail("slice"))?;
        let got = view.copy_to_host().map_err(fail("copy"))?;
        ensure!(got == expected, "slice {info:?}: {got:?} vs {expected:?}");
        ensure!(view.shares_memory_with(&d), "views share memory");
    }
    let mut view = d.slice(ndarray::s![1, ..]).map_err(fail("row"))?;
    view.copy_from_host(&array![40i64, 41, 42, 43])
        .map_err(fail("write through view"))?;
    let all = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        all.slice(ndarray::s![1, ..]) == array![40i64, 41, 42, 43],
        "write through view reached parent: {all:?}"
    );
    let empty = d
        .slice(ndarray::s![5..9, ..])
        .map_err(fail("clamped slice"))?;
    ensure!(
        empty.shape() == [0, 4],
        "out-of-range slice is clamped to empty: {:?}",
        empty.shape()
    );
    ensure!(
        matches!(
            d.slice(ndarray::s![3, ..]),
            Err(Error::IndexOutOfBounds { .. })
        ),
        "index 3 of 3 rows"
    );
    Ok(())
}

fn reshape_ravel_split(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    let r = d
        .reshape(&[2, -1], ReshapeOrder::C)
        .map_err(fail("reshape"))?;
    ensure!(
        r.shape() == [2, 5] && r.byte_strides() == [40, 8],
        "reshape(2,-1) {:?}",
        r.byte_strides()
    );
    let f = d
        .reshape(&[2, 5], ReshapeOrder::F)
        .map_err(fail("reshape F"))?;
    let got = f.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![[0i64, 2, 4, 6, 8], [1, 3, 5, 7, 9]].into_dyn(),
        "reshape F values {got:?}"
    );
    let a = d
        .reshape(&[2, 5], ReshapeOrder::A)
        .map_err(fail("reshape A"))?;
    ensure!(
        a.byte_strides() == [8, 16],
        "1-d reshape order A gives F strides: {:?}",
        a.byte_strides()
    );
    let flat = r.ravel(ReshapeOrder::C).map_err(fail("ravel"))?;
    ensure!(
        flat.copy_to_host().map_err(fail("copy"))? == arange(10),
        "ravel values"
    );
    let pieces = d.split(3).map_err(fail("split"))?;
    let sizes: Vec<usize> = pieces.iter().map(|p| p.size()).collect();
    ensure!(sizes == [3, 3, 3, 1], "split sizes {sizes:?}");
    let last = pieces[3].copy_to_host().map_err(fail("copy"))?;
    ensure!(last == array![9i64].into_dyn(), "last piece {last:?}");
    ensure!(
        d.split(20).map_err(fail("split"))?.len() == 1,
        "split(20) gives one piece"
    );
    ensure!(d.split(0).is_err(), "split(0) is an error, not a crash");
    ensure!(r.split(2).is_err(), "split of 2-d is an error");
    ensure!(
        d.slice(ndarray::s![..;2])
            .map_err(fail("slice"))?
            .split(2)
            .is_err(),
        "split of strided is an error"
    );
    Ok(())
}

fn reshape_errors(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    let msg = |r: gpu_mem::Result<gpu_mem::DeviceArray<i64>>| {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    };
    ensure!(
        msg(d.reshape(&[-1, -1], ReshapeOrder::C))
            .contains("can only specify one unknown dimension"),
        "two unknowns"
    );
    ensure!(
        msg(d.reshape(&[3, -1], ReshapeOrder::C))
            .contains("cannot infer valid shape for unknown dimension"),
        "not divisible"
    );
    ensure!(
        msg(d.reshape(&[3, 3], ReshapeOrder::C)).contains("reshape changes the size of the array"),
        "size change"
    );
    let strided = d.slice(ndarray::s![..;2]).map_err(fail("slice"))?;
    ensure!(
        msg(strided.reshape(&[5, 1], ReshapeOrder::C)).contains("operation requires copying"),
        "strided reshape"
    );
    ensure!(
        strided.reshape(&[5], ReshapeOrder::C).is_ok(),
        "same-shape reshape of strided is fine"
    );
    ensure!(
        msg(strided.ravel(ReshapeOrder::C)).contains("ravel on non-contiguous array"),
        "ravel strided"
    );
    let two = d
        .reshape(&[2, 5], ReshapeOrder::C)
        .map_err(fail("reshape"))?;
    ensure!(
        two.ravel(ReshapeOrder::F).is_err(),
        "ravel('F') of C array is refused as in Numba"
    );
    let sub = two.slice(ndarray::s![.., ..2]).map_err(fail("slice"))?;
    ensure!(
        msg(sub.reshape(&[4], ReshapeOrder::C)).contains("reshape would require copy"),
        "d2[:, :2].reshape(4)"
    );
    Ok(())
}

fn view_as_other_type(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter(0..12i16)
        .into_shape_with_order((3, 4))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    let i4 = d.view_as::<i32>().map_err(fail("view i4"))?;
    ensure!(
        i4.shape() == [3, 2] && i4.byte_strides() == [8, 4],
        "i2->i4 {:?}",
        i4.byte_strides()
    );
    let i8 = d.view_as::<i64>().map_err(fail("view i8"))?;
    ensure!(
        i8.shape() == [3, 1] && i8.byte_strides() == [8, 8],
        "i2->i8 {:?}",
        i8.byte_strides()
    );
    let u2 = d.view_as::<u16>().map_err(fail("view u2"))?;
    let back = u2.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        back == host.mapv(|v| v as u16).into_dyn(),
        "same-size view keeps data"
    );
    let odd = dev
        .to_device(&Array::<i16, _>::zeros((4, 3)))
        .map_err(fail("to_device"))?;
    ensure!(
        odd.view_as::<i32>().is_err(),
        "(4,3) i2 -> i4 divisor error"
    );
    let f = dev
        .device_array::<i16>(&[3, 4], Order::F)
        .map_err(fail("alloc"))?;
    ensure!(
        f.view_as::<i32>().is_err(),
        "F array to a bigger type needs C-contiguity"
    );
    Ok(())
}

fn transpose_is_a_copy(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter(0..12i64)
        .into_shape_with_order((3, 4))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    let mut t = d.t().map_err(fail("t"))?;
    ensure!(
        t.shape() == [4, 3] && t.is_c_contiguous(),
        "T shape {:?}",
        t.shape()
    );
    ensure!(
        t.copy_to_host().map_err(fail("copy"))? == host.t().to_owned().into_dyn(),
        "T values"
    );
    t.set(&[0, 0], -1).map_err(fail("set"))?;
    ensure!(
        d.get(&[0, 0]).map_err(fail("get"))? == 0,
        "writes to T do not reach the original"
    );
    let big = dev
        .to_device(
            &Array::from_iter(0..120i64)
                .into_shape_with_order((10, 12))
                .map_err(fail("shape"))?,
        )
        .map_err(fail("to_device"))?;
    let tv = big
        .slice(ndarray::s![..;2, ..;2])
        .map_err(fail("slice"))?
        .t()
        .map_err(fail("t"))?;
    ensure!(
        tv.shape() == [6, 5] && tv.byte_strides() == [40, 8],
        "d[::2, ::2].T strides {:?}",
        tv.byte_strides()
    );
    ensure!(
        d.transpose(&[0, 1])
            .map_err(fail("identity"))?
            .shares_memory_with(&d),
        "identity transpose is a view"
    );
    let one = dev.to_device(&arange(3)).map_err(fail("to_device"))?;
    ensure!(one.t().is_err(), "T of 1-d is refused as in Numba");
    for axes in [[0usize, 0], [0, 2]] {
        let err = d.transpose(&axes).err().map(|e| e.to_string());
        let want = format!("invalid axes list ({}, {})", axes[0], axes[1]);
        ensure!(
            err.as_deref() == Some(want.as_str()),
            "transpose({axes:?}): {err:?}"
        );
    }
    let three = dev
        .device_array::<f32>(&[2, 3, 4], Order::C)
        .map_err(fail("alloc"))?;
    let err = three.transpose(&[2, 1, 0]).err().map(|e| e.to_string());
    ensure!(
        err.as_deref()
            .is_some_and(|e| e.contains("transposing a non-2D DeviceNDArray isn't supported")),
        "transpose((2,1,0)) of 3-d: {err:?}"
    );
    Ok(())
}

fn element_get_set_and_index_errors(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut d = dev.to_device(&arange(10)).map_err(fail("to_device"))?;
    d.set(&[2], 50).map_err(fail("set"))?;
    d.set(&[-1], 90).map_err(fail("set -1"))?;
    ensure!(
        d.get(&[2]).map_err(fail("get"))? == 50 && d.get(&[9]).map_err(fail("get"))? == 90,
        "set/get"
    );
    ensure!(
        matches!(d.get(&[10]), Err(Error::IndexOutOfBounds { .. })),
        "index 10 of 10"
    );
    ensure!(
        matches!(d.get(&[0, 0]), Err(Error::TooManyIndices { .. })),
        "too many indices"
    );
    let zero_step = [ndarray::SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 0,
    }];
    ensure!(
        matches!(d.slice(zero_step), Err(Error::ZeroStep { .. })),
        "step 0 is an error"
    );
    Ok(())
}

fn zero_d_and_zero_size(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let z = dev.to_device(&arr0(1.5f64)).map_err(fail("0-d"))?;
    ensure!(
        z.ndim() == 0 && z.copy_to_host().map_err(fail("copy"))?[IxDyn(&[])] == 1.5,
        "0-d round trip"
    );
    ensure!(
        z.ravel(ReshapeOrder::C).map_err(fail("ravel"))?.shape() == [1],
        "ravel 0-d gives (1,)"
    );
    // Numba: `transpose(())` of a 0-d array is "transposing a non-2D DeviceNDArray isn't
    // supported" (an empty axes list is no list, not the identity).
    ensure!(
        matches!(z.transpose(&[]), Err(Error::Unsupported { .. })),
        "transpose(()) of 0-d is refused"
    );
    let e = dev
        .to_device(&Array::<f64, _>::zeros((3, 0)))
        .map_err(fail("empty"))?;
    ensure!(
        e.shape() == [3, 0] && e.alloc_size() == 0 && e.device_ptr().is_null(),
        "empty array has a null pointer"
    );
    ensure!(
        e.copy_to_host().map_err(fail("copy"))?.shape() == [3, 0],
        "empty copy back"
    );
    ensure!(e.split(2).is_err(), "split of 2-d empty is refused");
    let e1 = dev
        .device_array::<f64>(&[0], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        e1.split(3).map_err(fail("split"))?.is_empty(),
        "split of empty gives nothing"
    );
    let r = e1
        .reshape(&[0, 5], ReshapeOrder::C)
        .map_err(fail("reshape"))?;
    ensure!(r.shape() == [0, 5], "(0,) -> (0,5)");
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Rec {
    a: i32,
    b: f32,
    h: [f32; 2],
}

fn records_round_trip(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let value = Rec {
        a: 10,
        b: 11.5,
        h: [1.0, 2.0],
    };
    let mut rec = dev.to_device_record(&value).map_err(fail("record"))?;
    ensure!(
        rec.alloc_size() == std::mem::size_of::<Rec>(),
        "record alloc_size"
    );
    ensure!(
        rec.copy_to_host().map_err(fail("copy"))? == value,
        "record round trip"
    );
    rec.copy_from_host(&Rec { a: 3, ..value })
        .map_err(fail("write"))?;
    let mut into = Rec {
        a: 0,
        b: 0.0,
        h: [0.0; 2],
    };
    rec.copy_to_host_into(&mut into)
        .map_err(fail("copy into"))?;
    ensure!(into.a == 3 && into.b == 11.5, "record copy into {into:?}");
    let records = dev
        .to_device(&Array::from_elem(3, value))
        .map_err(fail("record array"))?;
    ensure!(
        records.get(&[1]).map_err(fail("get"))? == value,
        "array of records"
    );
    Ok(())
}

fn memory_info_and_release(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let before = dev.mem_info().map_err(fail("mem_info"))?;
    ensure!(
        before.free <= before.total && before.total > 0,
        "mem_info {before:?}"
    );
    {
        let _a = dev
            .device_array::<u8>(&[1 << 20], Order::C)
            .map_err(fail("alloc"))?;
        let during = dev.mem_info().map_err(fail("mem_info"))?;
        ensure!(
            during.free < before.free || rt.kind() != gpu_mem::BackendKind::Sim,
            "allocation shows in mem_info"
        );
    }
    if rt.kind() == gpu_mem::BackendKind::Sim {
        let after = dev.mem_info().map_err(fail("mem_info"))?;
        ensure!(
            after.free == before.free,
            "memory returned on drop: {before:?} vs {after:?}"
        );
    }
    dev.check_release_errors().map_err(fail("release errors"))?;
    Ok(())
}

fn out_of_memory_is_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let total = dev.mem_info().map_err(fail("mem_info"))?.total;
    let too_many = (total / 8 + 1) as usize * 2;
    match dev.device_array::<f64>(&[too_many], Order::C) {
        Err(Error::OutOfMemory { requested, .. }) => {
            ensure!(requested >= total, "requested {requested} vs total {total}");
        }
        Err(Error::Native { .. }) if rt.kind() != gpu_mem::BackendKind::Sim => {}
        other => return Err(format!("expected OutOfMemory, got {other:?}")),
    }
    Ok(())
}

/// A target that broadcasts (stride 0) is written as a sequence of assignments would write it:
/// the last index along the broadcast axis wins; one of 2^62 elements over one byte is filled at
/// once; and one whose indices overlap far more than that is refused, not walked for ever.
fn broadcast_targets_keep_the_last_write(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut rows = dev
        .device_array_with_strides::<i32>(&[3, 4], &[0, 1])
        .map_err(fail("broadcast rows"))?;
    rows.assign(
        &Array::from_shape_vec((3, 4), (0..12).collect::<Vec<i32>>()).map_err(fail("host"))?,
    )
    .map_err(fail("assign"))?;
    let row = rows
        .slice(s![0, ..])
        .map_err(fail("slice"))?
        .copy_to_host()
        .map_err(fail("copy"))?;
    ensure!(
        row.iter().copied().eq([8, 9, 10, 11]),
        "the last row's values stay: {row}"
    );
    let mut huge = dev
        .device_array_with_strides::<u8>(&[1 << 62], &[0])
        .map_err(fail("broadcast byte"))?;
    huge.fill(7).map_err(fail("fill"))?;
    let first = huge
        .slice(s![..1])
        .map_err(fail("slice"))?
        .copy_to_host()
        .map_err(fail("copy"))?;
    ensure!(first.iter().eq([&7u8]), "the byte was filled: {first}");
    let mut folded = dev
        .device_array_with_strides::<u8>(&[1 << 20, 1 << 20], &[1, 1])
        .map_err(fail("overlapping view"))?;
    match folded.fill(1) {
        Err(Error::Unsupported { .. }) => {}
        other => return Err(format!("2^40 indices over 2 MiB gave {other:?}")),
    }
    Ok(())
}
