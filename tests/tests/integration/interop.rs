//! Interop and several devices (issue 14), through the public API on the simulator: raw
//! pointers in and out, peer copies and peer access on a two-device simulator, managed arrays
//! used from a kernel, the memory pool and stream-ordered allocation, and IPC between two
//! processes (this test binary runs itself as the second process).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{BackendKind, ExternalUse, IpcArrayHandle};
use ndarray::{Array, Array1, ArrayD, array, s};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A simulator with `devices` devices (what `GPU_MEM_SIM_DEVICES=2` configures), and a handle on
/// the backend for its leak counters.
fn sim(devices: usize) -> (Arc<SimBackend>, Runtime) {
    let backend = Arc::new(SimBackend::new(SimConfig::uniform(devices, 64 << 20)));
    let runtime = Runtime::with_backend(backend.clone());
    (backend, runtime)
}

const SCALE: &str = r#"
#include "gpu_mem.h"
extern "C" __global__ void scale(gm_array<float, 1> a, float factor) {
    const long long i = grid(1);
    if (i < a.shape[0]) {
        a(i) = a(i) * factor;
    }
}
"#;

const ADD: &str = r#"
#include "gpu_mem.h"
extern "C" __global__ void add(gm_array<float, 1> out, gm_array<float, 1> a) {
    const long long i = grid(1);
    if (i < out.shape[0]) {
        out(i) = out(i) + a(i);
    }
}
"#;

// ----- 3. raw pointers ---------------------------------------------------------------------

#[test]
fn raw_pointers_round_trip_with_an_owner() {
    let (backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let host = Array::from_iter(0..12i32)
        .into_shape_with_order((3, 4))
        .unwrap();
    let original = dev.to_device(&host).unwrap();
    let raw = original.raw_parts();
    assert_eq!(raw.shape, vec![3, 4]);
    assert_eq!(raw.strides, vec![4, 1]);
    assert_eq!(raw.itemsize, 4);
    assert_eq!(raw.span_bytes, 48);
    // A transposed view through the same pointer: element (i, j) at ptr + (i + 4 j) * 4... of
    // the foreign array of shape (4, 3) and strides (1, 4).
    // SAFETY: the pointer addresses `original`'s live allocation, kept alive by the owner (the
    // array itself), and covers every element of the (4, 3) / (1, 4) layout.
    let foreign =
        unsafe { DeviceArray::<i32>::from_raw_parts(&dev, raw.ptr, &[4, 3], &[1, 4], original) }
            .unwrap();
    assert!(foreign.is_foreign());
    assert_eq!(
        foreign.copy_to_host().unwrap(),
        host.t().to_owned().into_dyn()
    );
    // The owner keeps the memory: one allocation is live until the foreign array is dropped.
    assert_eq!(backend.live_allocations(0).unwrap(), 1);
    let col = foreign.slice(s![1, ..]).unwrap();
    drop(foreign);
    assert_eq!(col.copy_to_host().unwrap(), array![1, 5, 9].into_dyn());
    drop(col);
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
}

#[test]
fn raw_pointers_with_a_deleter_release_after_the_last_user() {
    let (_backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let keep = dev.to_device(&Array1::from_iter(0..256u32)).unwrap();
    let deleted = Arc::new(AtomicUsize::new(0));
    let seen = deleted.clone();
    let ptr = keep.raw_parts().ptr;
    // Negative strides: the first element is the last in memory.
    let last = gpu_mem::backend::DevicePtr(ptr.0 + 255 * 4);
    // SAFETY: the range lies in `keep`'s allocation, which outlives the deleter call below.
    let mut foreign = unsafe {
        DeviceArray::<u32>::from_raw_parts_with_deleter(&dev, last, &[256], &[-1], move |base| {
            assert_eq!(base, ptr, "the deleter gets the lowest address");
            seen.fetch_add(1, Ordering::SeqCst);
        })
    }
    .unwrap();
    assert_eq!(foreign.get(&[0]).unwrap(), 255);
    let stream = dev.stream().unwrap();
    let mut out = dev.pinned_array::<u32>(&[256]).unwrap();
    let forward = foreign.slice(s![..;-1]).unwrap();
    stream.copy_to_host(&forward, &mut out).unwrap();
    drop(forward);
    // External work on the stream keeps the memory too.
    // SAFETY: the closure enqueues nothing that touches memory.
    unsafe {
        stream
            .enqueue_external(vec![ExternalUse::writes(&mut foreign)], |handle| {
                assert_ne!(handle.0, 0);
                Ok(())
            })
            .unwrap();
    }
    drop(foreign);
    stream.synchronize().unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 1, "deleter ran once");
    assert_eq!(out.view().unwrap()[0], 0);
    assert_eq!(out.view().unwrap()[255], 255);
    drop(keep);
}

#[test]
fn an_empty_raw_array_gives_its_deleter_the_pointer_it_was_made_with() {
    // An empty array reaches no element and keeps no address; its deleter was called with null,
    // so whatever the pointer owned leaked.
    let (_backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let given = gpu_mem::backend::DevicePtr(0x1000);
    let (tell, told) = std::sync::mpsc::channel();
    // SAFETY: an empty array reads no memory; the address is only handed back.
    let empty = unsafe {
        DeviceArray::<u32>::from_raw_parts_with_deleter(&dev, given, &[0], &[1], move |ptr| {
            let _ = tell.send(ptr);
        })
    }
    .unwrap();
    assert_eq!(empty.shape(), &[0]);
    drop(empty);
    assert_eq!(
        told.try_recv(),
        Ok(given),
        "the deleter gets the pointer handed over"
    );
}

#[test]
fn raw_pointer_misuse_is_refused_before_anything_is_built() {
    let (_b, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    // SAFETY: both are refused before the pointer is used.
    let null = unsafe {
        DeviceArray::<f64>::from_raw_parts(&dev, gpu_mem::backend::DevicePtr::NULL, &[2], &[1], ())
    };
    assert!(
        matches!(null, Err(Error::InvalidArgument { .. })),
        "{null:?}"
    );
    // SAFETY: as above.
    let misaligned = unsafe {
        DeviceArray::<f64>::from_raw_parts(
            &dev,
            gpu_mem::backend::DevicePtr(0x1003),
            &[2],
            &[1],
            (),
        )
    };
    assert!(matches!(misaligned, Err(Error::InvalidArgument { .. })));
    // A foreign address the simulator does not know is refused at the first access.
    // SAFETY: the simulator checks every device access, so a bogus address is an error.
    let bogus = unsafe {
        DeviceArray::<f64>::from_raw_parts(
            &dev,
            gpu_mem::backend::DevicePtr(0x1000),
            &[2],
            &[1],
            (),
        )
    }
    .unwrap();
    assert!(matches!(
        bogus.copy_to_host(),
        Err(Error::InvalidPointer { .. })
    ));
}

// ----- 4. several devices ------------------------------------------------------------------

#[test]
fn peer_copies_between_two_simulated_devices() {
    let (backend, rt) = sim(2);
    let (d0, d1) = (rt.device(0).unwrap(), rt.device(1).unwrap());
    assert!(d0.can_access_peer(&d1).unwrap());
    let host = Array::from_iter((0..1000).map(|i| i as f32));
    let a = d0.to_device(&host).unwrap();
    let mut b = d1.device_array::<f32>(&[1000], Order::C).unwrap();
    b.copy_from_device(&a).unwrap();
    assert_eq!(b.copy_to_host().unwrap(), host.clone().into_dyn());

    // Asynchronous, on a stream of the destination device, from a strided-free view.
    let s1 = d1.stream().unwrap();
    let mut c = d1.device_array::<f32>(&[500], Order::C).unwrap();
    let half = a.slice(s![500..]).unwrap();
    s1.copy_from_device(&mut c, &half).unwrap();
    drop(half);
    drop(a);
    s1.synchronize().unwrap();
    assert_eq!(
        c.copy_to_host().unwrap(),
        host.slice(s![500..]).to_owned().into_dyn()
    );

    // And back the other way.
    let mut back = d0.device_array::<f32>(&[500], Order::C).unwrap();
    back.copy_from_device(&c).unwrap();
    assert_eq!(
        back.copy_to_host().unwrap(),
        host.slice(s![500..]).to_owned().into_dyn()
    );
    drop((b, c, back, s1));
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
    assert_eq!(backend.live_allocations(1).unwrap(), 0);
}

#[test]
fn kernels_reach_a_peer_only_after_peer_access_is_enabled() {
    let (_b, rt) = sim(2);
    let (d0, d1) = (rt.device(0).unwrap(), rt.device(1).unwrap());
    let mut on1 = d1.to_device(&Array1::from_elem(64, 1.0f32)).unwrap();
    let mut on0 = d0.to_device(&Array1::from_elem(64, 2.0f32)).unwrap();
    let add = Kernel::from_source(ADD, "add");
    let cfg = LaunchConfig::for_items(64, 32);
    // SAFETY: the kernel touches out(i), a(i) for i < 64 only.
    let before = unsafe { d1.launch(&add, cfg, &mut [&mut on1, &mut on0]) };
    let message = before.unwrap_err().to_string();
    assert!(message.contains("peer access"), "{message}");
    d1.enable_peer_access(&d0).unwrap();
    d1.enable_peer_access(&d0).unwrap(); // twice is fine
    // SAFETY: as above.
    unsafe { d1.launch(&add, cfg, &mut [&mut on1, &mut on0]).unwrap() };
    assert_eq!(
        on1.copy_to_host().unwrap(),
        Array1::from_elem(64, 3.0f32).into_dyn()
    );
}

// ----- 6. managed memory -------------------------------------------------------------------

#[test]
fn managed_arrays_are_used_by_host_and_kernels() {
    let (backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let before = dev.mem_info().unwrap().free;
    let mut m = dev.managed_array::<f32>(&[100]).unwrap();
    assert_eq!(
        dev.mem_info().unwrap().free,
        before - 400,
        "counted as device memory"
    );
    assert!(m.device_view().is_managed());
    m.write(&Array1::from_iter((0..100).map(|i| i as f32)))
        .unwrap();
    let scale = Kernel::from_source(SCALE, "scale");
    // SAFETY: the kernel touches a(i) for i < 100 only.
    unsafe {
        dev.launch(
            &scale,
            LaunchConfig::for_items(100, 32),
            &mut [&mut m, &mut Scalar(3.0f32)],
        )
        .unwrap()
    };
    assert_eq!(m.read().unwrap()[7], 21.0);
    // On a stream: the host view waits for the kernel (through the stream's bookkeeping).
    let stream = dev.stream().unwrap();
    let mut view = m.device_view();
    // SAFETY: as above.
    unsafe {
        stream
            .launch(
                &scale,
                LaunchConfig::for_items(100, 32),
                &mut [&mut view, &mut Scalar(2.0f32)],
            )
            .unwrap()
    };
    stream.synchronize().unwrap();
    // SAFETY: the stream was synchronized and no other device work touches `m`.
    let host = unsafe { m.host_view().unwrap() };
    assert_eq!(host[7], 42.0);
    assert_eq!(host[99], 99.0 * 6.0);
    drop(host);
    // SAFETY: no device work uses the memory now.
    unsafe { m.host_view_mut().unwrap()[0] = -1.0 };
    assert_eq!(view.get(&[0]).unwrap(), -1.0);
    drop((m, view, stream));
    assert_eq!(dev.mem_info().unwrap().free, before);
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
}

// ----- 7. memory pool ----------------------------------------------------------------------

#[test]
fn the_pool_is_sized_trimmed_and_queried_and_allocates_on_a_stream() {
    let (backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let pool = dev.memory_pool();
    let start = pool.usage().unwrap();
    assert_eq!(start.used, 0);
    assert_eq!(
        start.release_threshold,
        64 << 20,
        "default: the capacity (under 1 GiB)"
    );
    let stream = dev.stream().unwrap();
    let mut a = stream.device_array::<f64>(&[1 << 14], Order::C).unwrap();
    stream.memset(&mut a, 0).unwrap();
    let usage = pool.usage().unwrap();
    assert_eq!(usage.used, 8 << 14);
    assert!(stream.free(a).unwrap(), "freed on the stream");
    stream.synchronize().unwrap();
    let usage = pool.usage().unwrap();
    assert_eq!(usage.used, 0);
    assert_eq!(usage.reserved, 8 << 14, "kept for reuse");
    pool.trim(0).unwrap();
    assert_eq!(pool.usage().unwrap().reserved, 0);
    // A release threshold of zero keeps nothing.
    pool.set_release_threshold(0).unwrap();
    drop(dev.device_array::<u8>(&[1 << 16], Order::C).unwrap());
    assert_eq!(pool.usage().unwrap().reserved, 0);
    pool.set_release_threshold(u64::MAX).unwrap();
    assert_eq!(
        pool.usage().unwrap().release_threshold,
        64 << 20,
        "at most the capacity"
    );
    // An array with another view is not freed on the stream, but when its last user goes.
    let b = stream.device_array::<u8>(&[4096], Order::C).unwrap();
    let view = b.slice(s![..10]).unwrap();
    assert!(!stream.free(b).unwrap());
    assert_eq!(backend.live_allocations(0).unwrap(), 1);
    drop(view);
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
}

// ----- 5. IPC between two processes --------------------------------------------------------

const CHILD_ENV: &str = "GPU_MEM_TEST_IPC_HANDLE";
const CHILD_SLICE_ENV: &str = "GPU_MEM_TEST_IPC_SLICE";
const CHILD_EMPTY_ENV: &str = "GPU_MEM_TEST_IPC_EMPTY";

/// The second process of `ipc_shares_device_memory_between_processes`: opens the handle, checks
/// what the parent wrote, doubles it in place with a kernel and exits.
#[test]
#[ignore = "run by ipc_shares_device_memory_between_processes as its second process"]
fn ipc_child() {
    let hex = std::env::var(CHILD_ENV).expect("run by the parent test only");
    let handle = IpcArrayHandle::from_hex(&hex).unwrap();
    let rt = Runtime::open_kind(BackendKind::Sim).unwrap();
    let dev = rt.device(0).unwrap();
    let mut shared = dev.open_ipc_array::<f32>(&handle).unwrap();
    assert_eq!(shared.shape(), &[2048]);
    let seen: ArrayD<f32> = shared.copy_to_host().unwrap();
    assert_eq!(
        seen,
        Array1::from_iter((0..2048).map(|i| i as f32)).into_dyn()
    );
    let scale = Kernel::from_source(SCALE, "scale");
    // SAFETY: the kernel touches a(i) for i < 2048 only.
    unsafe {
        dev.launch(
            &scale,
            LaunchConfig::for_items(2048, 128),
            &mut [&mut shared, &mut Scalar(2.0f32)],
        )
        .unwrap()
    };
    assert!(dev.open_ipc_array::<f64>(&handle).is_err(), "wrong dtype");
    drop(shared);
    ipc_child_slices_and_bad_handles(&handle);
}

/// The second process's checks of handles naming part of an allocation, or none of it, and of
/// handles edited to lie: every mapping opened is closed again, and a lie is an error.
fn ipc_child_slices_and_bad_handles(whole: &IpcArrayHandle) {
    let (backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let live = || backend.live_ipc_mappings(0).unwrap();
    let handle_from = |var: &str| IpcArrayHandle::from_hex(&std::env::var(var).unwrap()).unwrap();
    // A slice: its elements, and the mapping (which starts before them) closed on drop.
    let part = dev
        .open_ipc_array::<f32>(&handle_from(CHILD_SLICE_ENV))
        .unwrap();
    assert_eq!(live(), 1);
    assert_eq!(
        part.copy_to_host().unwrap(),
        Array1::from_iter((1000..1100).map(|i| 2.0 * i as f32)).into_dyn()
    );
    drop(part);
    assert_eq!(live(), 0, "the slice's mapping is closed");
    // No element at all.
    let empty_handle = handle_from(CHILD_EMPTY_ENV);
    let empty = dev.open_ipc_array::<f32>(&empty_handle).unwrap();
    assert_eq!(empty.shape(), &[0]);
    drop(empty);
    assert_eq!(live(), 0, "the empty array's mapping is closed");
    assert!(dev.take_release_errors().is_empty());
    // An offset far past the allocation (no element, so no span to check it by).
    let mut far = empty_handle.clone();
    far.offset = u64::MAX - 3;
    assert!(matches!(
        dev.open_ipc_array::<f32>(&far),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(live(), 0);
    // A handle claiming more memory than its file holds.
    let mut forged = whole.clone();
    let size = u64::from_le_bytes(forged.memory.data[24..32].try_into().unwrap());
    forged.memory.data[24..32].copy_from_slice(&(size * 4).to_le_bytes());
    forged.memory.bytes *= 4;
    forged.shape = vec![whole.shape[0] * 4];
    assert!(dev.open_ipc_array::<f32>(&forged).is_err(), "forged size");
    assert_eq!(live(), 0);
}

#[test]
fn ipc_shares_device_memory_between_processes() {
    let (backend, rt) = sim(1);
    let dev = rt.device(0).unwrap();
    let host = Array1::from_iter((0..2048).map(|i| i as f32));
    let d = dev.to_device(&host).unwrap();
    let handle = d.ipc_handle().unwrap();
    let round = IpcArrayHandle::from_bytes(&handle.to_bytes()).unwrap();
    assert_eq!(round, handle);
    // The exporting process cannot open its own handle (as on CUDA).
    assert!(dev.open_ipc_array::<f32>(&handle).is_err());
    // Small allocations share their page, so the simulator refuses them by name.
    let small = dev.to_device(&array![1u8, 2, 3]).unwrap();
    assert!(matches!(
        small.ipc_handle(),
        Err(Error::NotSupportedByBackend { .. })
    ));
    // Whatever block backs it: a small allocation given a freed page-sized block from the
    // simulator's cache is refused alike.
    drop(dev.device_array::<u8>(&[4096], Order::C).unwrap());
    let reused = dev.device_array::<u8>(&[3900], Order::C).unwrap();
    assert!(matches!(
        reused.ipc_handle(),
        Err(Error::NotSupportedByBackend { .. })
    ));

    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "interop::ipc_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, handle.to_hex())
        .env(
            CHILD_SLICE_ENV,
            d.slice(s![1000..1100])
                .unwrap()
                .ipc_handle()
                .unwrap()
                .to_hex(),
        )
        .env(
            CHILD_EMPTY_ENV,
            d.slice(s![0..0]).unwrap().ipc_handle().unwrap().to_hex(),
        )
        .env("GPU_MEM_BACKEND", "sim")
        .status()
        .unwrap();
    assert!(status.success(), "the second process failed: {status}");
    // The child's kernel wrote our memory.
    assert_eq!(d.copy_to_host().unwrap(), (&host * 2.0).into_dyn());
    assert_eq!(d.get(&[1000]).unwrap(), 2000.0);
    drop(d);
    drop((small, reused));
    assert_eq!(backend.live_allocations(0).unwrap(), 0);
    // Freed memory goes back to the cache with private pages, and is reused safely.
    let again = dev.device_array::<f32>(&[2048], Order::C).unwrap();
    assert_eq!(
        again.copy_to_host().unwrap(),
        Array1::<f32>::zeros(2048).into_dyn()
    );
}
