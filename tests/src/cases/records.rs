//! Fields of device records and record arrays: `rec['f']`,
//! `rec['f'] = v`, nested records, subarray fields, `d_struct[i]` and `ary['f']`.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Error, Field, Runtime, field};
use ndarray::{Array, array, s};

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["records":
        record_fields_read_and_write,
        nested_records_and_subarrays,
        record_array_elements_and_field_views,
        bad_fields_are_errors,
    ];
    cases.extend(crate::cases!["records", Requires::Kernels;
        assign_to_a_field_of_every_record,
    ]);
    cases
}

#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Inner {
    i: i32,
    j: [[f32; 2]; 2],
}

#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Outer {
    a: i32,
    b: f32,
    h: [f32; 2],
    y: Inner,
}

fn outer(n: i32) -> Outer {
    Outer {
        a: n,
        b: n as f32 + 0.5,
        h: [1.0, 2.0],
        y: Inner {
            i: 7,
            j: [[0.0; 2]; 2],
        },
    }
}

fn record_fields_read_and_write(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut rec = dev.to_device_record(&outer(10)).map_err(fail("record"))?;
    ensure!(
        rec.get(field!(Outer, a)).map_err(fail("rec['a']"))? == 10,
        "rec['a']"
    );
    ensure!(
        rec.get(field!(Outer, b)).map_err(fail("rec['b']"))? == 10.5,
        "rec['b']"
    );
    rec.set(field!(Outer, b), 21.5)
        .map_err(fail("rec['b'] = 21.5"))?;
    let back = rec.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        back == Outer {
            b: 21.5,
            ..outer(10)
        },
        "only the field changes: {back:?}"
    );
    Ok(())
}

fn nested_records_and_subarrays(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let rec = dev.to_device_record(&outer(1)).map_err(fail("record"))?;
    // rec['h'] is a (2,) device array with strides (4,), a view.
    let h = rec.subarray(field!(Outer, h)).map_err(fail("rec['h']"))?;
    ensure!(
        h.shape() == [2] && h.byte_strides() == [4],
        "rec['h'] {:?} {:?}",
        h.shape(),
        h.byte_strides()
    );
    let mut h = h;
    h.set(&[1], 9.0).map_err(fail("rec['h'][1] = 9"))?;
    // d_arr[0]['y']['i'] = 1 and d_arr[0]['y']['j'][0, 0] = 2.0
    let d_arr = dev
        .to_device(&Array::from_elem(2, outer(3)))
        .map_err(fail("record array"))?;
    let mut y = d_arr
        .record(&[0])
        .map_err(fail("d_arr[0]"))?
        .record(field!(Outer, y))
        .map_err(fail("['y']"))?;
    y.set(field!(Inner, i), 1).map_err(fail("['y']['i'] = 1"))?;
    let j = y.subarray(field!(Inner, j)).map_err(fail("['y']['j']"))?;
    // A (2, 2) subarray field: its rows as one (2,) array of [f32; 2], seen as (2, 2) f32.
    let mut j00 = j
        .view_as::<f32>()
        .map_err(fail("view_as"))?
        .reshape(&[2, 2], ReshapeOrder::C)
        .map_err(fail("reshape"))?;
    j00.set(&[0, 0], 2.0).map_err(fail("['y']['j'][0,0] = 2"))?;
    let first = d_arr.get(&[0]).map_err(fail("get"))?;
    ensure!(
        first.y.i == 1 && first.y.j[0][0] == 2.0 && first.a == 3,
        "nested writes: {first:?}"
    );
    ensure!(
        d_arr.get(&[1]).map_err(fail("get"))? == outer(3),
        "the other record is untouched"
    );
    ensure!(
        rec.copy_to_host().map_err(fail("copy"))?.h == [1.0, 9.0],
        "subarray view writes reach the record"
    );
    // A nested field path works too.
    ensure!(
        rec.get(field!(Outer, y.i)).map_err(fail("rec['y']['i']"))? == 7,
        "nested path"
    );
    Ok(())
}

fn record_array_elements_and_field_views(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter((0..6).map(outer))
        .into_shape_with_order((2, 3))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    let rec = d.record(&[1, -1]).map_err(fail("d[1, -1]"))?;
    ensure!(
        rec.copy_to_host().map_err(fail("copy"))? == outer(5),
        "d[1, -1]"
    );
    // ary['a'] is a strided view: record strides counted in i32s.
    let a = d.field(field!(Outer, a)).map_err(fail("ary['a']"))?;
    let record = std::mem::size_of::<Outer>() as isize;
    ensure!(
        a.shape() == [2, 3] && a.byte_strides() == [3 * record, record],
        "ary['a'] strides {:?}",
        a.byte_strides()
    );
    ensure!(
        a.copy_to_host().map_err(fail("copy"))? == array![[0, 1, 2], [3, 4, 5]].into_dyn(),
        "ary['a'] values"
    );
    let mut b = d.field(field!(Outer, b)).map_err(fail("ary['b']"))?;
    b.set(&[0, 2], -1.0).map_err(fail("ary['b'][0, 2] = -1"))?;
    ensure!(
        d.get(&[0, 2]).map_err(fail("get"))?
            == Outer {
                b: -1.0,
                ..outer(2)
            },
        "a field view writes into its record"
    );
    // Views of views: ary[::-1]['a'].
    let rev = d
        .slice(s![.., ..;-1])
        .map_err(fail("slice"))?
        .field(field!(Outer, a))
        .map_err(fail("field"))?;
    ensure!(
        rev.copy_to_host().map_err(fail("copy"))? == array![[2, 1, 0], [5, 4, 3]].into_dyn(),
        "reversed field view"
    );
    Ok(())
}

fn bad_fields_are_errors(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let rec = dev.to_device_record(&outer(1)).map_err(fail("record"))?;
    let past_end = Field::<Outer, f64>::at(std::mem::size_of::<Outer>() - 4);
    ensure!(
        matches!(rec.get(past_end), Err(Error::InvalidArgument { .. })),
        "a field past the end of the record"
    );
    let misaligned = Field::<Outer, i32>::at(2);
    ensure!(
        matches!(rec.get(misaligned), Err(Error::InvalidArgument { .. })),
        "a misaligned field"
    );
    // Outer is 48 bytes; an [f32; 5] field (20 bytes) cannot be strided in its own units.
    let d = dev
        .to_device(&Array::from_elem(3, outer(0)))
        .map_err(fail("to_device"))?;
    let odd = Field::<Outer, [f32; 5]>::at(0);
    ensure!(
        matches!(d.field(odd), Err(Error::Unsupported { .. })),
        "a field whose size does not divide the record's"
    );
    Ok(())
}

fn assign_to_a_field_of_every_record(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let d = dev
        .to_device(&Array::from_iter((0..5).map(outer)))
        .map_err(fail("to_device"))?;
    // ary['b'] = 0.25 and ary['a'][::2] = [-1, -2, -3]: strided targets inside records.
    d.field(field!(Outer, b))
        .map_err(fail("ary['b']"))?
        .fill(0.25)
        .map_err(fail("fill"))?;
    d.field(field!(Outer, a))
        .map_err(fail("ary['a']"))?
        .slice(s![..;2])
        .map_err(fail("slice"))?
        .assign(&array![-1, -2, -3])
        .map_err(fail("assign"))?;
    let got = d.copy_to_host().map_err(fail("copy"))?;
    let want = [-1, 1, -2, 3, -3];
    ensure!(
        got.iter().zip(want).enumerate().all(|(n, (r, a))| *r
            == Outer {
                a,
                b: 0.25,
                ..outer(n as i32)
            }),
        "field assignment: {got:?}"
    );
    Ok(())
}
