//! DLPack exports and imports on every backend: device, pinned and mapped arrays export with
//! the backend's device types, shape, strides and dtype; the exported memory stays alive until
//! the consumer is done; an imported tensor becomes a device array. (The deleter and refusal
//! checks, which count a simulator's allocations, are in `tests/tests/integration/dlpack.rs`.)

use crate::{Case, ensure, fail};
use gpu_mem::dlpack::DlpackTensor;
use gpu_mem::prelude::*;
use gpu_mem::{BackendKind, Error, MapFlags, Runtime};
use ndarray::{Array, Array1};

pub fn cases() -> Vec<Case> {
    crate::cases!["dlpack":
        device_arrays_round_trip_through_dlpack,
        pinned_and_mapped_arrays_export_their_host_memory,
    ]
}

/// DLPack's device type numbers (dlpack.h): the backend's device memory, its host memory.
fn device_types(kind: BackendKind) -> (u32, u32) {
    const CPU: u32 = 1;
    const CUDA: u32 = 2;
    const CUDA_HOST: u32 = 3;
    const ROCM: u32 = 10;
    const ROCM_HOST: u32 = 11;
    const EXT_DEV: u32 = 12;
    match kind {
        BackendKind::Cuda => (CUDA, CUDA_HOST),
        BackendKind::Roc => (ROCM, ROCM_HOST),
        BackendKind::Sim => (EXT_DEV, CPU),
    }
}

fn device_arrays_round_trip_through_dlpack(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let (device_kind, _) = device_types(rt.kind());
    let host = Array::from_iter(0..24i64)
        .into_shape_with_order((4, 6))
        .map_err(fail("shape"))?;
    let d = dev.to_device(&host).map_err(fail("to_device"))?;
    let view = d.slice(s![1.., ..;2]).map_err(fail("slice"))?;
    let tensor = view.to_dlpack().map_err(fail("to_dlpack"))?;
    let t = tensor.tensor();
    ensure!(
        t.device.device_type.0 == device_kind && t.device.device_id == 0,
        "device {:?}",
        (t.device.device_type.0, t.device.device_id)
    );
    ensure!(
        (t.dtype.code.0, t.dtype.bits, t.dtype.lanes) == (0, 64, 1),
        "dtype {:?}",
        (t.dtype.code.0, t.dtype.bits, t.dtype.lanes)
    );
    ensure!(tensor.shape() == [3, 3], "shape {:?}", tensor.shape());
    ensure!(
        tensor.strides() == Some(vec![6, 2]),
        "strides {:?}",
        tensor.strides()
    );
    ensure!(
        t.data as usize as u64 == view.device_ptr().0,
        "data pointer is not the view's"
    );
    let expected = host.slice(s![1.., ..;2]).to_owned().into_dyn();
    drop((d, view));
    // The producer's arrays are gone; the tensor keeps the memory. Import it back.
    // SAFETY: the tensor describes live memory of this device (gpu-mem made it).
    let back = unsafe { DeviceArray::<i64>::from_dlpack(&dev, tensor) }.map_err(fail("import"))?;
    ensure!(back.is_foreign(), "an import is foreign memory");
    ensure!(
        back.copy_to_host().map_err(fail("copy"))? == expected,
        "imported values"
    );
    // Importing as the wrong type is refused (and the tensor's deleter still runs).
    let again = dev
        .to_device(&Array1::from_elem(3, 1.5f32))
        .map_err(fail("to_device"))?;
    let exported: DlpackTensor = again.to_dlpack().map_err(fail("to_dlpack"))?;
    // SAFETY: as above.
    let wrong = unsafe { DeviceArray::<i32>::from_dlpack(&dev, exported) };
    ensure!(
        matches!(wrong, Err(Error::InvalidArgument { .. })),
        "{wrong:?}"
    );
    Ok(())
}

fn pinned_and_mapped_arrays_export_their_host_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let (device_kind, host_kind) = device_types(rt.kind());
    let mut p = dev.pinned_array::<f32>(&[2, 3]).map_err(fail("pinned"))?;
    p.view_mut().map_err(fail("view_mut"))?.fill(2.5);
    let tensor = p.to_dlpack().map_err(fail("to_dlpack"))?;
    let t = tensor.tensor();
    ensure!(
        t.device.device_type.0 == host_kind,
        "device type {}",
        t.device.device_type.0
    );
    ensure!((t.dtype.code.0, t.dtype.bits) == (2, 32), "dtype");
    ensure!(tensor.shape() == [2, 3], "shape {:?}", tensor.shape());
    ensure!(
        tensor.strides() == Some(vec![3, 1]),
        "strides {:?}",
        tensor.strides()
    );
    // SAFETY: host memory of six f32s, kept alive by the tensor; nothing writes it.
    let seen = unsafe { std::slice::from_raw_parts(t.data.cast::<f32>(), 6) };
    ensure!(seen == [2.5; 6], "{seen:?}");
    drop(p);
    // SAFETY: as above: the tensor still keeps the memory after the array is gone.
    let seen = unsafe { std::slice::from_raw_parts(tensor.tensor().data.cast::<f32>(), 6) };
    ensure!(seen[5] == 2.5, "the memory outlives the array");

    let mut m = dev
        .mapped_array::<u16>(&[4], MapFlags::default())
        .map_err(fail("mapped"))?;
    m.write(&Array1::from(vec![1u16, 2, 3, 4]))
        .map_err(fail("write"))?;
    let tensor = m.to_dlpack().map_err(fail("to_dlpack"))?;
    ensure!(
        tensor.tensor().device.device_type.0 == host_kind && tensor.tensor().dtype.code.0 == 1,
        "mapped host export"
    );
    // SAFETY: four u16s of host memory kept alive by the tensor; no device work runs.
    let seen = unsafe { std::slice::from_raw_parts(tensor.tensor().data.cast::<u16>(), 4) };
    ensure!(seen == [1, 2, 3, 4], "{seen:?}");
    // The device side exports as device memory.
    let dv = m
        .device_view()
        .to_dlpack()
        .map_err(fail("device view to_dlpack"))?;
    ensure!(
        dv.tensor().device.device_type.0 == device_kind,
        "the device side's type"
    );
    Ok(())
}
