//! DLPack round trips (issue 14, item 1) on every available backend: device, pinned and mapped
//! arrays export with the right device type, shape, strides and dtype; the exported memory stays
//! alive until the consumer's deleter runs; an imported tensor becomes a device array that keeps
//! the producer's tensor until its last view is gone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::dlpack::DlpackTensor;
use gpu_mem::prelude::*;
use gpu_mem::{BackendKind, MapFlags};
use gpu_mem_conformance::{backends_under_test, fresh_runtime};
use ndarray::{Array, Array1};

/// DLPack device type numbers (dlpack.h).
const CPU: u32 = 1;
const CUDA: u32 = 2;
const CUDA_HOST: u32 = 3;
const ROCM: u32 = 10;
const ROCM_HOST: u32 = 11;
const EXT_DEV: u32 = 12;

fn each_backend(check: impl Fn(&Runtime)) {
    let mut ran = 0;
    for (kind, available) in backends_under_test() {
        match available {
            Ok(()) => {
                check(&fresh_runtime(kind).unwrap());
                ran += 1;
            }
            Err(reason) => eprintln!("dlpack: {kind} not available: {reason}"),
        }
    }
    assert!(ran > 0, "no backend ran");
}

fn device_type(kind: BackendKind) -> (u32, u32) {
    match kind {
        BackendKind::Cuda => (CUDA, CUDA_HOST),
        BackendKind::Roc => (ROCM, ROCM_HOST),
        BackendKind::Sim => (EXT_DEV, CPU),
    }
}

#[test]
fn device_arrays_round_trip_through_dlpack() {
    each_backend(|rt| {
        let dev = rt.device(0).unwrap();
        let (device_kind, _) = device_type(rt.kind());
        let host = Array::from_iter(0..24i64)
            .into_shape_with_order((4, 6))
            .unwrap();
        let d = dev.to_device(&host).unwrap();
        let view = d.slice(s![1.., ..;2]).unwrap();
        let tensor = view.to_dlpack().unwrap();
        let t = tensor.tensor();
        assert_eq!(t.device.device_type.0, device_kind);
        assert_eq!(t.device.device_id, 0);
        assert_eq!((t.dtype.code.0, t.dtype.bits, t.dtype.lanes), (0, 64, 1));
        assert_eq!(tensor.shape(), vec![3, 3]);
        assert_eq!(tensor.strides(), Some(vec![6, 2]));
        assert_eq!(t.data as usize as u64, view.device_ptr().0);
        let expected = host.slice(s![1.., ..;2]).to_owned().into_dyn();
        drop((d, view));
        // The producer's arrays are gone; the tensor keeps the memory. Import it back.
        // SAFETY: the tensor describes live memory of this device (gpu-mem made it).
        let back = unsafe { DeviceArray::<i64>::from_dlpack(&dev, tensor) }.unwrap();
        assert!(back.is_foreign());
        assert_eq!(back.copy_to_host().unwrap(), expected);
        // Importing as the wrong type is refused (and the tensor's deleter still runs).
        let again = dev.to_device(&Array1::from_elem(3, 1.5f32)).unwrap();
        // SAFETY: as above.
        let wrong = unsafe { DeviceArray::<i32>::from_dlpack(&dev, again.to_dlpack().unwrap()) };
        assert!(
            matches!(wrong, Err(Error::InvalidArgument { .. })),
            "{wrong:?}"
        );
    });
}

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

#[test]
fn pinned_and_mapped_arrays_export_their_host_memory() {
    each_backend(|rt| {
        let dev = rt.device(0).unwrap();
        let (_, host_kind) = device_type(rt.kind());
        let mut p = dev.pinned_array::<f32>(&[2, 3]).unwrap();
        p.view_mut().unwrap().fill(2.5);
        let tensor = p.to_dlpack().unwrap();
        let t = tensor.tensor();
        assert_eq!(t.device.device_type.0, host_kind);
        assert_eq!((t.dtype.code.0, t.dtype.bits), (2, 32));
        assert_eq!(tensor.shape(), vec![2, 3]);
        assert_eq!(tensor.strides(), Some(vec![3, 1]));
        // SAFETY: host memory of six f32s, kept alive by the tensor; nothing writes it.
        let seen = unsafe { std::slice::from_raw_parts(t.data.cast::<f32>(), 6) };
        assert_eq!(seen, &[2.5; 6]);
        drop(p);
        // SAFETY: as above: the tensor still keeps the memory after the array is gone.
        let seen = unsafe { std::slice::from_raw_parts(tensor.tensor().data.cast::<f32>(), 6) };
        assert_eq!(seen[5], 2.5);

        let mut m = dev.mapped_array::<u16>(&[4], MapFlags::default()).unwrap();
        m.write(&Array1::from(vec![1u16, 2, 3, 4])).unwrap();
        let tensor = m.to_dlpack().unwrap();
        assert_eq!(tensor.tensor().device.device_type.0, host_kind);
        assert_eq!(tensor.tensor().dtype.code.0, 1);
        // SAFETY: four u16s of host memory kept alive by the tensor; no device work runs.
        let seen = unsafe { std::slice::from_raw_parts(tensor.tensor().data.cast::<u16>(), 4) };
        assert_eq!(seen, &[1, 2, 3, 4]);
        // The device side exports as device memory.
        let dv = m.device_view().to_dlpack().unwrap();
        assert_eq!(dv.tensor().device.device_type.0, device_type(rt.kind()).0);
    });
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
