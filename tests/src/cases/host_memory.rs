//! Pinned, mapped and registered host memory.

use crate::{Case, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Error, Runtime};
use ndarray::{Array, ShapeBuilder, array};

pub fn cases() -> Vec<Case> {
    crate::cases!["host_memory":
        pinned_array_behaves_like_host_memory,
        mapped_array_is_shared_with_the_device,
        pinned_guard_registers_and_returns_the_array,
        mapped_guard_gives_zero_copy_device_views,
        double_registration_is_refused,
        pinned_and_mapped_array_like,
    ]
}

fn pinned_array_behaves_like_host_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut p = dev
        .pinned_array::<f64>(&[2, 3])
        .map_err(fail("pinned_array"))?;
    ensure!(
        p.view().map_err(fail("view"))?.iter().all(|v| *v == 0.0),
        "starts zeroed"
    );
    p.view_mut()
        .map_err(fail("view_mut"))?
        .assign(&array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let d = dev
        .to_device(&p.view().map_err(fail("view"))?)
        .map_err(fail("to_device"))?;
    ensure!(
        d.copy_to_host().map_err(fail("copy"))?
            == array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]].into_dyn(),
        "round trip"
    );
    let f = dev
        .pinned_array_with_order::<f32>(&[2, 3], Order::F)
        .map_err(fail("pinned F"))?;
    ensure!(f.layout().is_f_contiguous(), "F order pinned array");
    Ok(())
}

fn mapped_array_is_shared_with_the_device(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    for flags in [
        MapFlags::default(),
        MapFlags {
            portable: true,
            write_combined: true,
        },
    ] {
        let mut m = dev
            .mapped_array::<u32>(&[8], flags)
            .map_err(fail("mapped_array"))?;
        m.write(&Array::from_iter(0..8u32)).map_err(fail("write"))?;
        let mut dv = m.device_view();
        ensure!(dv.is_mapped(), "device view is mapped memory");
        ensure!(
            dv.copy_to_host().map_err(fail("copy"))? == Array::from_iter(0..8u32).into_dyn(),
            "device sees host writes"
        );
        dv.memset(0).map_err(fail("memset"))?;
        ensure!(
            m.read().map_err(fail("read"))?.iter().all(|v| *v == 0),
            "host sees device memset"
        );
        dv.set(&[3], 33).map_err(fail("set"))?;
        ensure!(
            m.read().map_err(fail("read"))?[[3]] == 33,
            "host sees a device element write"
        );
    }
    Ok(())
}

fn pinned_guard_registers_and_returns_the_array(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array::from_iter(0..1000i32);
    let pinned = dev.pinned(host).map_err(fail("pinned"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let d = stream.to_device(&pinned).map_err(fail("async to_device"))?;
    stream.synchronize().map_err(fail("sync"))?;
    ensure!(
        d.copy_to_host().map_err(fail("copy"))? == Array::from_iter(0..1000i32).into_dyn(),
        "async from pinned"
    );
    let back = pinned.into_inner().map_err(fail("into_inner"))?;
    // Numba unpins immediately, so the same array can be pinned again at once.
    let again = dev.register(back).map_err(fail("register again"))?;
    again.deregister().map_err(fail("deregister"))?;
    let empty = dev
        .pinned(Array::<f32, _>::zeros(0))
        .map_err(fail("pinned empty"))?;
    ensure!(
        empty.into_inner().map_err(fail("into_inner"))?.is_empty(),
        "empty arrays pin trivially"
    );
    Ok(())
}

fn mapped_guard_gives_zero_copy_device_views(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut a = dev
        .mapped(Array::from_iter(0..5i64))
        .map_err(fail("mapped"))?;
    let mut b = dev
        .mapped(Array::<f64, _>::zeros((2, 3)))
        .map_err(fail("mapped"))?;
    let da = a.device_view().map_err(fail("device_view"))?;
    let mut db = b.device_view().map_err(fail("device_view"))?;
    ensure!(
        da.byte_strides() == [8] && db.byte_strides() == [24, 8],
        "views keep host layout"
    );
    ensure!(
        da.copy_to_host().map_err(fail("copy"))? == Array::from_iter(0..5i64).into_dyn(),
        "device reads host data"
    );
    db.memset(0xff).map_err(fail("memset"))?;
    ensure!(
        b.view().is_err(),
        "no host view while a device view may write the memory"
    );
    ensure!(
        db.copy_to_host()
            .map_err(fail("copy"))?
            .iter()
            .all(|v| v.is_nan()),
        "the device write is in the host memory"
    );
    let b = match b.into_inner() {
        Err(rejected) => rejected.value,
        Ok(_) => return Err("into_inner must refuse while a device view exists".into()),
    };
    // So must deregister, giving the guard back (its array is not lost).
    let b = match b.deregister() {
        Err(rejected) => rejected.value,
        Ok(()) => return Err("deregister must refuse while a device view exists".into()),
    };
    drop(db);
    let host = b
        .into_inner()
        .map_err(fail("into_inner once views are gone"))?;
    ensure!(
        host.iter().all(|v| v.is_nan()),
        "host sees the device writes"
    );
    let mut pinned_only = dev
        .pinned(Array::from_iter(0..3u8))
        .map_err(fail("pinned"))?;
    ensure!(
        pinned_only.device_view().is_err(),
        "a pinned (not mapped) array has no device view"
    );
    drop(da);
    drop(a);
    Ok(())
}

fn double_registration_is_refused(rt: &Runtime) -> Result<(), String> {
    use gpu_mem::backend::HostRegisterFlags;
    // The safe API owns what it registers, so one range cannot be registered twice through it;
    // the backend's own rule (CUDA's `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`) is checked
    // through the backend interface, on memory this case owns.
    let backend = rt.backend();
    let mut memory = vec![0u64; 512];
    let bytes = memory.len() * std::mem::size_of::<u64>();
    let host = std::ptr::NonNull::new(memory.as_mut_ptr().cast::<u8>())
        .ok_or("a vector's pointer is never null")?;
    let flags = HostRegisterFlags::default();
    // SAFETY: `memory` outlives every registration below, each undone before it is dropped.
    unsafe { backend.host_register(0, host, bytes, flags) }.map_err(fail("register"))?;
    // SAFETY: as above.
    let again = unsafe { backend.host_register(0, host, bytes, flags) };
    // SAFETY: registered above; no work was enqueued on it.
    let undone = unsafe { backend.host_unregister(0, host) };
    match again {
        Err(Error::HostRegistration { .. }) => {}
        Err(other) => return Err(format!("a second registration gave {other}")),
        Ok(_) => {
            // SAFETY: as above (the second registration took, undo it too).
            let _ = unsafe { backend.host_unregister(0, host) };
            return Err("the same range was registered twice".to_string());
        }
    }
    undone.map_err(fail("unregister"))?;
    // Once unregistered, the range may be registered again.
    // SAFETY: as above.
    unsafe { backend.host_register(0, host, bytes, flags) }.map_err(fail("register again"))?;
    // SAFETY: as above.
    unsafe { backend.host_unregister(0, host) }.map_err(fail("unregister again"))?;
    drop(memory);
    Ok(())
}

fn pinned_and_mapped_array_like(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    // Numba §1.3's stride rule: C stays C, F stays F, gapped and transposed views keep their axis
    // order without gaps (zeros((10,12))[::2, ::2].T gives strides (8, 48) for f8).
    let c = Array::<f64, _>::zeros((3, 4));
    let p = dev
        .pinned_array_like(&c)
        .map_err(fail("pinned_array_like"))?;
    ensure!(
        p.shape() == [3, 4] && p.layout().strides() == [4, 1],
        "C: {:?}",
        p.layout()
    );
    let f = Array::<f32, _>::zeros((3, 4).f());
    let m = dev
        .mapped_array_like(&f, MapFlags::default())
        .map_err(fail("mapped_array_like"))?;
    ensure!(m.layout().strides() == [1, 3], "F: {:?}", m.layout());
    // Page-locked and mapped arrays are host arrays to Numba: "like" takes them too.
    let d_like = dev
        .device_array_like(&m)
        .map_err(fail("device_array_like(mapped)"))?;
    ensure!(
        d_like.shape() == [3, 4] && d_like.strides() == [1, 3],
        "like a mapped F array: {:?}",
        d_like.strides()
    );
    let p_like = dev
        .pinned_array_like(&p)
        .map_err(fail("pinned_array_like(pinned)"))?;
    ensure!(p_like.shape() == [3, 4], "like a pinned array");
    let big = Array::<f64, _>::zeros((10, 12));
    let gapped = big.slice(ndarray::s![..;2, ..;2]);
    let gapped_t = gapped.t();
    let p = dev.pinned_array_like(&gapped_t).map_err(fail("like .T"))?;
    ensure!(
        p.shape() == [6, 5] && p.layout().byte_strides(8) == [8, 48],
        "gapped .T: {:?}",
        p.layout()
    );
    // Like a device array, and usable: a mapped array like d is written by the device.
    let d = dev
        .to_device(&array![[1i32, 2], [3, 4]])
        .map_err(fail("to_device"))?;
    let mut m = dev
        .mapped_array_like(&d, MapFlags::default())
        .map_err(fail("mapped_array_like(d)"))?;
    m.device_view()
        .copy_from_device(&d)
        .map_err(fail("copy into mapped"))?;
    ensure!(
        m.read().map_err(fail("read"))? == array![[1i32, 2], [3, 4]].into_dyn(),
        "mapped_array_like is shared with the device"
    );
    let mut p = dev
        .pinned_array_like(&d)
        .map_err(fail("pinned_array_like(d)"))?;
    ensure!(
        p.view_mut().map_err(fail("view_mut"))?.shape() == [2, 2],
        "pinned view"
    );
    let _ = m.write(&array![[0i32, 0], [0, 0]]);
    Ok(())
}
