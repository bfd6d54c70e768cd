//! Synchronous transfers with Numba's checks.

use crate::{Case, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Error, Runtime};
use ndarray::{Array, Array1, ArrayD, ShapeBuilder, array, s};

pub fn cases() -> Vec<Case> {
    crate::cases!["transfers":
        to_device_keeps_layout,
        to_device_rejects_non_contiguous,
        copy_to_host_keeps_device_strides,
        copy_to_host_into_checks,
        copy_from_host_any_source_layout,
        copy_from_host_checks,
        copy_from_device_rules,
        memset_fills_bytes,
    ]
}

fn grid(rows: usize, cols: usize) -> Result<Array<f32, ndarray::Ix2>, String> {
    Array::from_iter((0..rows * cols).map(|v| v as f32))
        .into_shape_with_order((rows, cols))
        .map_err(fail("shape"))
}

fn to_device_keeps_layout(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let c = grid(2, 3)?;
    let d = dev.to_device(&c).map_err(fail("to_device"))?;
    ensure!(
        d.byte_strides() == [12, 4],
        "C strides {:?}",
        d.byte_strides()
    );
    let mut f = Array::<f64, _>::zeros((2, 3).f());
    f.assign(&c.mapv(f64::from));
    let d = dev.to_device(&f).map_err(fail("to_device F"))?;
    ensure!(
        d.byte_strides() == [8, 16] && d.is_f_contiguous(),
        "F kept {:?}",
        d.byte_strides()
    );
    ensure!(
        d.copy_to_host().map_err(fail("copy"))? == f.clone().into_dyn(),
        "F values"
    );
    let host = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        host.strides() == [1, 2],
        "copy_to_host keeps F strides: {:?}",
        host.strides()
    );
    let from_slice = dev
        .to_device_slice(&[1.5f32, 2.5])
        .map_err(fail("to_device_slice"))?;
    ensure!(
        from_slice.copy_to_host().map_err(fail("copy"))?
            == ndarray::arr1(&[1.5f32, 2.5]).into_dyn(),
        "slice round trip"
    );
    let f_view = d
        .reshape(&[6], Order::F)
        .map_err(fail("reshape with Order"))?;
    ensure!(f_view.shape() == [6], "Order converts into ReshapeOrder");
    let readonly = Array1::from(vec![1u8, 2, 3]);
    let view = readonly.view();
    ensure!(dev.to_device(&view).is_ok(), "read-only views work");
    Ok(())
}

fn to_device_rejects_non_contiguous(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let a = Array::from_iter(0..10i64);
    let g = grid(4, 6)?;
    let cases: Vec<(&str, Result<(), Error>)> = vec![
        ("a[::2]", dev.to_device(&a.slice(s![..;2])).map(drop)),
        ("a[::-1]", dev.to_device(&a.slice(s![..;-1])).map(drop)),
        ("g[:, ::2]", dev.to_device(&g.slice(s![.., ..;2])).map(drop)),
        ("g[::2]", dev.to_device(&g.slice(s![..;2, ..])).map(drop)),
        ("g[:, 1]", dev.to_device(&g.slice(s![.., 1])).map(drop)),
    ];
    for (name, result) in cases {
        match result {
            Err(Error::NonContiguous { .. }) => {}
            other => return Err(format!("{name}: expected NonContiguous, got {other:?}")),
        }
    }
    let msg = dev
        .to_device(&a.slice(s![..;2]))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        msg.contains("non-contiguous buffer"),
        "message says why: {msg}"
    );
    Ok(())
}

fn copy_to_host_keeps_device_strides(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev
        .to_device(&Array::from_iter(0..10i64))
        .map_err(fail("to_device"))?;
    let strided = d
        .slice(s![..;2])
        .map_err(fail("slice"))?
        .copy_to_host()
        .map_err(fail("copy"))?;
    ensure!(
        strided.strides() == [2],
        "device strides kept: {:?}",
        strided.strides()
    );
    ensure!(
        strided == array![0i64, 2, 4, 6, 8].into_dyn(),
        "strided values {strided:?}"
    );
    let rev = d
        .slice(s![..;-1])
        .map_err(fail("slice"))?
        .copy_to_host()
        .map_err(fail("copy"))?;
    ensure!(
        rev == Array::from_iter((0..10i64).rev()).into_dyn(),
        "negative strides come back reversed: {rev:?}"
    );
    Ok(())
}

fn copy_to_host_into_checks(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev.to_device(&grid(3, 4)?).map_err(fail("to_device"))?;
    let mut same = Array::<f32, _>::zeros((3, 4));
    d.copy_to_host_into(&mut same)
        .map_err(fail("same layout"))?;
    ensure!(same == grid(3, 4)?, "copied values");
    let mut squeezed = Array::<f32, _>::zeros((1, 3, 4));
    d.copy_to_host_into(&mut squeezed)
        .map_err(fail("(1,3,4) target"))?;
    let mut middle = Array::<f32, _>::zeros((3, 1, 4));
    d.copy_to_host_into(&mut middle)
        .map_err(fail("(3,1,4) target"))?;
    ensure!(
        middle
            .into_shape_with_order((3, 4))
            .map_err(fail("shape"))?
            == grid(3, 4)?,
        "(3,1,4) values in order"
    );
    let err = d
        .copy_to_host_into(&mut Array::<f32, _>::zeros((4, 3)))
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("incompatible shape: (3, 4) vs. (4, 3)"),
        "shape message {err:?}"
    );
    let err = d
        .copy_to_host_into(&mut Array::<f32, _>::zeros(5))
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("incompatible shape: (3, 4) vs. (5,)"),
        "shape message {err:?}"
    );
    let err = d
        .copy_to_host_into(&mut Array::<f32, _>::zeros((3, 4).f()))
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("incompatible strides: (16, 4) vs. (4, 12)"),
        "strides message {err:?}"
    );
    let src = dev
        .to_device(&Array::from_iter(0..10i64))
        .map_err(fail("to_device"))?;
    let mut h = Array::<i64, _>::zeros(10);
    src.slice(s![..;2])
        .map_err(fail("slice"))?
        .copy_to_host_into(&mut h.slice_mut(s![..;2]))
        .map_err(fail("strided into strided"))?;
    ensure!(
        h == array![0i64, 0, 2, 0, 4, 0, 6, 0, 8, 0],
        "strided target gets its elements (gaps untouched): {h:?}"
    );
    let err = src
        .slice(s![..;2])
        .map_err(fail("slice"))?
        .copy_to_host_into(&mut Array::<i64, _>::zeros(5))
        .err();
    ensure!(
        matches!(err, Some(Error::IncompatibleStrides { .. })),
        "d[::2] into contiguous (5,): {err:?}"
    );
    let e = dev
        .device_array::<f64>(&[0], Order::C)
        .map_err(fail("alloc"))?;
    let mut target = Array::<f64, _>::zeros(0);
    e.copy_to_host_into(&mut target)
        .map_err(fail("empty into empty"))?;
    Ok(())
}

fn copy_from_host_any_source_layout(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut f = dev
        .device_array::<f32>(&[3, 4], Order::F)
        .map_err(fail("alloc"))?;
    f.copy_from_host(&grid(3, 4)?).map_err(fail("F <- C"))?;
    ensure!(
        f.copy_to_host().map_err(fail("copy"))? == grid(3, 4)?.into_dyn(),
        "F <- C values"
    );
    let src = Array::from_iter(0..10i64);
    let mut five = dev
        .device_array::<i64>(&[5], Order::C)
        .map_err(fail("alloc"))?;
    five.copy_from_host(&src.slice(s![..;2]))
        .map_err(fail("strided host source"))?;
    ensure!(
        five.copy_to_host().map_err(fail("copy"))? == array![0i64, 2, 4, 6, 8].into_dyn(),
        "strided source"
    );
    let mut ten = dev
        .device_array::<i64>(&[10], Order::C)
        .map_err(fail("alloc"))?;
    ten.copy_from_host(&src.slice(s![..;-1]))
        .map_err(fail("reversed host source"))?;
    ensure!(
        ten.copy_to_host().map_err(fail("copy"))? == Array::from_iter((0..10i64).rev()).into_dyn(),
        "reversed"
    );
    five.copy_from_host(&array![[1i64, 2, 3, 4, 5]])
        .map_err(fail("(5,) <- (1,5)"))?;
    let mut part = ten.slice(s![5..]).map_err(fail("slice"))?;
    part.copy_from_host(&array![0i64, 0, 0, 0, 0])
        .map_err(fail("into contiguous slice"))?;
    let got = ten.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got == array![9i64, 8, 7, 6, 5, 0, 0, 0, 0, 0].into_dyn(),
        "only the slice changed: {got:?}"
    );
    Ok(())
}

fn copy_from_host_checks(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut ten = dev
        .device_array::<i64>(&[10], Order::C)
        .map_err(fail("alloc"))?;
    let err = ten
        .copy_from_host(&Array::from_iter(0..5i64))
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("incompatible shape: (10,) vs. (5,)"),
        "{err:?}"
    );
    ten.copy_from_host(&Array::<i64, _>::zeros(0))
        .map_err(fail("empty source is a no-op"))?;
    let mut strided = ten.slice(s![..;2]).map_err(fail("slice"))?;
    ensure!(
        matches!(
            strided.copy_from_host(&Array::<i64, _>::zeros(5)),
            Err(Error::NonContiguous { .. })
        ),
        "strided destination"
    );
    let mut grid_d = dev
        .device_array::<i64>(&[4, 3], Order::C)
        .map_err(fail("alloc"))?;
    let bc = Array::from_iter(0..3i64);
    let err = grid_d
        .copy_from_host(&bc.broadcast((4, 3)).ok_or("broadcast")?)
        .err()
        .map(|e| e.to_string());
    ensure!(
        err.as_deref() == Some("incompatible shape: (4, 3) vs. (3,)"),
        "broadcast source into dense: {err:?}"
    );
    Ok(())
}

fn copy_from_device_rules(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let src = dev.to_device(&grid(3, 4)?).map_err(fail("to_device"))?;
    let mut dst = dev
        .device_array::<f32>(&[3, 4], Order::C)
        .map_err(fail("alloc"))?;
    dst.copy_from_device(&src).map_err(fail("same layout"))?;
    ensure!(
        dst.copy_to_host().map_err(fail("copy"))? == grid(3, 4)?.into_dyn(),
        "D2D values"
    );
    let mut f = dev
        .device_array::<f32>(&[3, 4], Order::F)
        .map_err(fail("alloc"))?;
    ensure!(
        matches!(
            f.copy_from_device(&src),
            Err(Error::IncompatibleStrides { .. })
        ),
        "C into F is rejected as in Numba"
    );
    let mut small = dev
        .device_array::<f32>(&[2, 4], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        matches!(
            small.copy_from_device(&src),
            Err(Error::IncompatibleShape { .. })
        ),
        "shape mismatch"
    );
    let strided = src.slice(s![.., ..;2]).map_err(fail("slice"))?;
    let mut dst2 = dev
        .device_array::<f32>(&[3, 2], Order::C)
        .map_err(fail("alloc"))?;
    ensure!(
        matches!(
            dst2.copy_from_device(&strided),
            Err(Error::NonContiguous { .. })
        ),
        "strided source"
    );
    // Zeros written first: a fresh device_array is uninitialised on a GPU (on an H200 it held
    // what an earlier case of the process left there).
    let ten = dev
        .to_device(&Array::from_elem(10, 0.0f32))
        .map_err(fail("to_device"))?;
    let five = dev
        .to_device(&Array::from_elem(5, 7.0f32))
        .map_err(fail("to_device"))?;
    ten.slice(s![..5])
        .map_err(fail("slice"))?
        .copy_from_device(&five)
        .map_err(fail("into slice"))?;
    let got: ArrayD<f32> = ten.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got.iter().take(5).all(|v| *v == 7.0) && got.iter().skip(5).all(|v| *v == 0.0),
        "only the slice changed: {got:?}"
    );
    Ok(())
}

fn memset_fills_bytes(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut d = dev
        .device_array::<u32>(&[6], Order::C)
        .map_err(fail("alloc"))?;
    d.memset(0xab).map_err(fail("memset"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        got.iter().all(|v| *v == 0xabab_abab),
        "memset values {got:?}"
    );
    let mut strided = d.slice(s![..;2]).map_err(fail("slice"))?;
    ensure!(
        matches!(strided.memset(0), Err(Error::NonContiguous { .. })),
        "memset of strided view is refused"
    );
    Ok(())
}
