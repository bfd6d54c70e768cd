//! DLPack on a simulator of the test's own, whose allocations it counts: the exported memory
//! stays alive until the consumer's deleter runs; malformed, read-only and other-version tensors
//! are refused and their deleters still run; host exports follow DLPack's device-id and
//! empty-data rules. (The round trips on every backend are conformance cases, `cases/dlpack.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::MapFlags;
use gpu_mem::dlpack::DlpackTensor;
use gpu_mem::prelude::*;
use ndarray::Array1;

/// DLPack's device type number of host memory (dlpack.h).
const CPU: u32 = 1;

/// A simulator of its own (to count its allocations) and a device array on it.
fn exported_setup() -> (
    std::sync::Arc<gpu_mem::sim::SimBackend>,
    Runtime,
    DeviceArray<u32>,
) {
    let backend = std::sync::Arc::new(gpu_mem::sim::SimBackend::new(
        gpu_mem::sim::SimConfig::uniform(1, 1 << 20),
    ));
    let rt = Runtime::with_backend(backend.clone());
    let d = rt
        .device(0)
        .unwrap()
        .to_device(&Array1::from_iter(0..100u32))
        .unwrap();
    (backend, rt, d)
}

#[test]
fn the_consumer_deleter_releases_exported_memory() {
    let (backend, _rt, d) = exported_setup();
    let raw = d.to_dlpack().unwrap().into_raw();
    drop(d);
    assert_eq!(
        backend.live_allocations(0).unwrap(),
        1,
        "the consumer holds it"
    );
    // The consumer is done: it calls the deleter (here through `from_raw` and drop).
    // SAFETY: `raw` came from `into_raw` and is owned again here, once.
    drop(unsafe { DlpackTensor::from_raw(raw) });
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
}

/// A tensor whose shape pointer is null while it has axes is refused (it was read as a 0-d
/// array of one element), and its deleter still runs.
#[test]
fn tensors_with_axes_and_no_shape_are_refused() {
    let (backend, rt, d) = exported_setup();
    let dev = rt.device(0).unwrap();
    let mut raw = d.to_dlpack().unwrap().into_raw();
    drop(d);
    // SAFETY: `raw` came from `into_raw` and nothing else uses it; the shape array stays owned
    // by the tensor (its deleter frees it), only the descriptor's pointer to it is cleared.
    unsafe { raw.as_mut().dl_tensor.shape = std::ptr::null_mut() };
    // SAFETY: `raw` is owned again here, once; it describes this device's memory.
    let tensor = unsafe { DlpackTensor::from_raw(raw) };
    // SAFETY: as above.
    let imported = unsafe { DeviceArray::<u32>::from_dlpack(&dev, tensor) };
    match imported {
        Err(gpu_mem::Error::InvalidArgument { reason, .. }) => {
            assert!(reason.contains("null shape"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.live_allocations(0).unwrap(), 0, "the deleter ran");
}

/// A tensor its producer marks read-only is refused (a device array can be written), and its
/// deleter still runs.
#[test]
fn read_only_tensors_are_refused() {
    let (backend, rt, d) = exported_setup();
    let dev = rt.device(0).unwrap();
    let mut raw = d.to_dlpack().unwrap().into_raw();
    drop(d);
    // SAFETY: `raw` came from `into_raw` and nothing else uses it.
    unsafe { raw.as_mut().flags |= gpu_mem::dlpack::DlpackFlags::READ_ONLY };
    // SAFETY: `raw` is owned again here, once; it describes this device's memory.
    let tensor = unsafe { DlpackTensor::from_raw(raw) };
    // SAFETY: as above.
    let imported = unsafe { DeviceArray::<u32>::from_dlpack(&dev, tensor) };
    match imported {
        Err(gpu_mem::Error::InvalidArgument { reason, .. }) => {
            assert!(reason.contains("read-only"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.live_allocations(0).unwrap(), 0, "the deleter ran");
}

/// A tensor of another DLPack major version is refused before anything but its version is
/// read, and its deleter still runs.
#[test]
fn tensors_of_another_major_version_are_refused() {
    let (backend, rt, d) = exported_setup();
    let dev = rt.device(0).unwrap();
    let mut raw = d.to_dlpack().unwrap().into_raw();
    drop(d);
    // SAFETY: `raw` came from `into_raw` and nothing else uses it.
    unsafe { raw.as_mut().version.major += 1 };
    // SAFETY: `raw` is owned again here, once; its deleter is gpu-mem's own.
    let tensor = unsafe { DlpackTensor::from_raw(raw) };
    // SAFETY: the tensor is refused before its descriptor is read.
    let imported = unsafe { DeviceArray::<u32>::from_dlpack(&dev, tensor) };
    match imported {
        Err(gpu_mem::Error::InvalidArgument { reason, .. }) => {
            assert!(reason.contains("major version"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.live_allocations(0).unwrap(), 0, "the deleter ran");
}

/// Host memory exports with device id 0 whichever GPU it was allocated for, and a tensor of no
/// elements with a null data pointer (both as DLPack says).
#[test]
fn host_exports_follow_dlpacks_device_id_and_empty_data_rules() {
    let backend = std::sync::Arc::new(gpu_mem::sim::SimBackend::new(
        gpu_mem::sim::SimConfig::uniform(2, 1 << 20),
    ));
    let rt = Runtime::with_backend(backend);
    let second = rt.device(1).unwrap();
    let pinned = second.pinned_array::<f32>(&[2]).unwrap();
    let tensor = pinned.to_dlpack().unwrap();
    assert_eq!(tensor.tensor().device.device_type.0, CPU);
    assert_eq!(tensor.tensor().device.device_id, 0);
    let mapped = second
        .mapped_array::<f32>(&[2], MapFlags::default())
        .unwrap();
    assert_eq!(mapped.to_dlpack().unwrap().tensor().device.device_id, 0);
    // Device memory keeps its GPU's id.
    let on_device = second.to_device(&Array1::from(vec![1u8, 2])).unwrap();
    assert_eq!(on_device.to_dlpack().unwrap().tensor().device.device_id, 1);
    for empty in [
        second
            .pinned_array::<f64>(&[0])
            .unwrap()
            .to_dlpack()
            .unwrap(),
        second
            .pinned_array::<f64>(&[3, 0])
            .unwrap()
            .to_dlpack()
            .unwrap(),
    ] {
        assert!(empty.tensor().data.is_null(), "{:?}", empty.tensor().data);
    }
}
