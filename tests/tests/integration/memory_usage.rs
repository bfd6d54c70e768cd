//! Memory statistics, snapshots, leak reports and out-of-memory explanations on the simulator:
//! each test allocates, frees and leaks on its own simulated device, and checks that what the
//! statistics, the snapshot's locations, the leak report and the error say is what it did.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig, SimDeviceConfig};
use gpu_mem::usage::{MemoryKind, leaks};
use gpu_mem::{Backend, Error, MapFlags};
use std::sync::Arc;

fn device(capacity: u64) -> (Runtime, Device) {
    let backend: Arc<dyn Backend> = Arc::new(SimBackend::new(SimConfig::uniform(2, capacity)));
    let runtime = Runtime::with_backend(backend);
    let device = runtime.device(0).unwrap();
    (runtime, device)
}

/// `file:line:` of the line after the macro's: where the next statement allocates.
macro_rules! next_line {
    () => {
        format!("{}:{}:", file!(), line!() + 1)
    };
}

#[test]
fn device_allocations_are_counted_with_peaks() {
    let (_rt, dev) = device(1 << 20);
    let a = dev.device_array::<f32>(&[256], Order::C).unwrap();
    let b = dev.device_array::<u8>(&[100], Order::C).unwrap();
    let s = dev.memory_stats().kind(MemoryKind::Device);
    assert_eq!((s.current_bytes, s.current_count), (1124, 2));
    assert_eq!((s.allocations, s.frees), (2, 0));
    drop(a);
    let s = dev.memory_stats().kind(MemoryKind::Device);
    assert_eq!((s.current_bytes, s.peak_bytes), (100, 1124));
    assert_eq!((s.current_count, s.peak_count, s.frees), (1, 2, 1));
    dev.reset_peak_memory_stats();
    let stats = dev.memory_stats();
    let s = stats.kind(MemoryKind::Device);
    assert_eq!((s.peak_bytes, s.peak_count), (100, 1));
    assert_eq!(stats.device_total.current_bytes, 100);
    assert_eq!(stats.host_total.current_bytes, 0);
    // Another handle of the same device sees the same accounting; the other device its own.
    assert_eq!(_rt.device(0).unwrap().memory_stats(), stats);
    assert_eq!(
        _rt.device(1)
            .unwrap()
            .memory_stats()
            .device_total
            .allocations,
        0
    );
    drop(b);
    assert_eq!(dev.memory_stats().device_total.current_bytes, 0);
}

#[test]
fn each_kind_of_memory_is_counted_as_itself() {
    let (_rt, dev) = device(1 << 20);
    let stream = dev.stream().unwrap();
    let pooled = stream.device_array::<f64>(&[8], Order::C).unwrap();
    let pinned = dev.pinned_array::<f32>(&[16]).unwrap();
    let mapped = dev.mapped_array::<f32>(&[32], MapFlags::default()).unwrap();
    let registered = dev.pinned(ndarray::Array1::<f32>::zeros(64)).unwrap();
    let managed = dev.managed_array::<u16>(&[10]).unwrap();
    let own = dev.device_array::<u8>(&[40], Order::C).unwrap();
    let ptr = own.device_ptr();
    // SAFETY: `ptr` is `own`'s first element, which `own` (the owner) keeps allocated.
    let foreign =
        unsafe { DeviceArray::<u8>::from_raw_parts(&dev, ptr, &[40], &[1], own.view()) }.unwrap();
    let stats = dev.memory_stats();
    let held = |kind| stats.kind(kind).current_bytes;
    assert_eq!(held(MemoryKind::Pool), 64);
    assert_eq!(held(MemoryKind::PageLocked), 64);
    assert_eq!(held(MemoryKind::Mapped), 128);
    assert_eq!(held(MemoryKind::Registered), 256);
    assert_eq!(held(MemoryKind::Managed), 20);
    assert_eq!(held(MemoryKind::Device), 40);
    assert_eq!(held(MemoryKind::Foreign), 40);
    assert_eq!(stats.device_total.current_bytes, 64 + 40 + 40);
    assert_eq!(stats.host_total.current_bytes, 64 + 128 + 256 + 20);
    // Every kind names this file's line that made it (each allocating call is
    // `#[track_caller]` down to the accounting).
    for allocation in dev.memory_snapshot().allocations {
        assert!(allocation.location.starts_with(file!()), "{allocation:?}");
    }
    // A stream-ordered free counts as freed when it is enqueued.
    assert!(stream.free(pooled).unwrap());
    assert_eq!(dev.memory_stats().kind(MemoryKind::Pool).current_bytes, 0);
    drop((pinned, mapped, registered, managed, foreign, own));
    stream.synchronize().unwrap();
    let stats = dev.memory_stats();
    assert_eq!(
        stats.device_total.current_count,
        0,
        "{}",
        dev.memory_summary()
    );
    assert_eq!(
        stats.host_total.current_count,
        0,
        "{}",
        dev.memory_summary()
    );
}

#[test]
fn snapshots_name_the_line_that_allocated() {
    let (_rt, dev) = device(1 << 20);
    let host = ndarray::Array1::<f32>::ones(1000);
    let at_to_device = next_line!();
    let a = dev.to_device(&host).unwrap();
    let at_pinned = next_line!();
    let p = dev.pinned_array::<u8>(&[4096]).unwrap();
    let stream = dev.stream().unwrap();
    let at_pool = next_line!();
    let q = stream.device_array::<u8>(&[512], Order::C).unwrap();
    let snapshot = dev.memory_snapshot();
    assert!(snapshot.listed);
    let find = |kind| {
        snapshot
            .allocations
            .iter()
            .find(|a| a.kind == kind)
            .unwrap_or_else(|| panic!("no {kind} allocation in {snapshot:?}"))
    };
    let device = find(MemoryKind::Device);
    assert_eq!(device.bytes, 4000);
    assert!(
        device.location.starts_with(&at_to_device),
        "{} vs {at_to_device}",
        device.location
    );
    assert!(
        find(MemoryKind::PageLocked)
            .location
            .starts_with(&at_pinned)
    );
    let pooled = find(MemoryKind::Pool);
    assert!(pooled.location.starts_with(&at_pool));
    assert_eq!(pooled.stream, Some(stream.handle().0));
    assert!(snapshot.allocations.iter().all(|a| a.age_seconds >= 0.0));
    // The summary lists the kinds used and the largest allocation first.
    let summary = dev.memory_summary();
    assert!(summary.contains("page-locked"), "{summary}");
    let largest = summary
        .lines()
        .skip_while(|l| !l.starts_with("largest"))
        .nth(1)
        .unwrap();
    assert!(
        largest.contains("4.0 KiB") && largest.contains(&at_pinned),
        "{summary}"
    );
    drop((a, p, q));
}

#[test]
fn a_forgotten_array_is_a_leak_with_its_location() {
    let (_rt, dev) = device(1 << 20);
    let kept = dev.device_array::<u32>(&[8], Order::C).unwrap();
    let at = next_line!();
    let leaked = dev.device_array::<u32>(&[300], Order::C).unwrap();
    std::mem::forget(leaked);
    drop(kept);
    let alive = leaks(&dev);
    assert_eq!(alive.len(), 1, "{alive:?}");
    assert_eq!(alive[0].bytes, 1200);
    assert!(alive[0].location.starts_with(&at));
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gpu_mem::assert_no_leaks(&dev)
    }))
    .unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("1 allocation(s) still alive"), "{message}");
    assert!(message.contains(&at), "{message}");
    // The runtime's drop reports it too (as a warning); the count is what it found.
    assert_eq!(gpu_mem::usage::warn_about_leaks(_rt.backend()), 1);
}

#[test]
fn memory_kept_by_in_flight_work_is_not_a_leak() {
    let (_rt, dev) = device(1 << 20);
    let stream = dev.stream().unwrap();
    let host = ndarray::Array1::<f32>::ones(1 << 12);
    let array = stream.to_device(&host).unwrap();
    drop(array);
    gpu_mem::assert_no_leaks(&dev);
}

#[test]
fn out_of_memory_says_what_holds_the_device() {
    let (_rt, dev) = device(64 << 10);
    let at = next_line!();
    let big = dev.device_array::<u8>(&[48 << 10], Order::C).unwrap();
    let error = dev.device_array::<u8>(&[32 << 10], Order::C).unwrap_err();
    let Error::OutOfMemory { report, .. } = &error else {
        panic!("{error}")
    };
    let report = report.as_ref().expect("a report");
    assert_eq!(report.held, vec![("device", 48 << 10)]);
    assert_eq!(report.largest[0].0, 48 << 10);
    assert!(report.largest[0].2.starts_with(&at));
    let text = error.to_string();
    assert!(text.contains("held by gpu-mem: 48.0 KiB device"), "{text}");
    assert!(text.contains(&at), "{text}");
    assert_eq!(dev.memory_stats().oom.failures, 1);
    drop(big);
}

#[test]
fn a_retry_after_in_flight_work_is_counted_with_what_it_released() {
    // Above the size the simulator copies at once (64 KiB), so the copies are queued; room for
    // three: the fourth copy's array needs the memory of one dropped before, which its copy's
    // bookkeeping keeps until an allocation finds no room and waits for it.
    const CHUNK: usize = 300 << 10;
    let (_rt, dev) = device(3 * CHUNK as u64 + 4096);
    let stream = dev.stream().unwrap();
    let pinned = dev.pinned_array::<u8>(&[CHUNK]).unwrap();
    for _ in 0..8 {
        drop(stream.to_device(&pinned).unwrap());
    }
    let oom = dev.memory_stats().oom;
    assert!(oom.retries >= 1, "{oom:?}");
    assert_eq!(oom.retries_succeeded, oom.retries, "{oom:?}");
    assert!(oom.reclaimed_bytes >= CHUNK as u64, "{oom:?}");
    assert_eq!(oom.failures, 0);
    assert!(dev.memory_summary().contains("found room"));
    let too_big = dev.device_array::<u8>(&[4 * CHUNK], Order::C);
    assert!(matches!(too_big, Err(Error::OutOfMemory { .. })));
    assert_eq!(dev.memory_stats().oom.failures, 1);
}

#[test]
fn pageable_copies_on_a_stream_reuse_one_staging_buffer() {
    let (_rt, dev) = device(16 << 20);
    let stream = dev.stream().unwrap();
    let host = ndarray::Array1::<f32>::from_iter((0..10_000).map(|i| i as f32));
    let mut back = ndarray::Array1::<f32>::zeros(10_000);
    for _ in 0..5 {
        let on_device = stream.to_device(&host).unwrap();
        stream.copy_to_host(&on_device, &mut back).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(back, host);
    }
    // 40,000 bytes each way: one 64 KiB buffer, made once, kept by the stream.
    let s = dev.memory_stats().kind(MemoryKind::PageLocked);
    assert_eq!((s.allocations, s.current_bytes), (1, 64 << 10), "{s:?}");
    drop(stream);
    assert_eq!(
        dev.memory_stats()
            .kind(MemoryKind::PageLocked)
            .current_bytes,
        0
    );
}

#[test]
fn idle_staging_buffers_give_way_to_a_page_locked_allocation() {
    let backend: Arc<dyn Backend> = Arc::new(SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            memory: 4 << 20,
            pinned_limit: 1 << 20,
            ..SimDeviceConfig::default()
        }],
    }));
    let rt = Runtime::with_backend(backend);
    let dev = rt.device(0).unwrap();
    let stream = dev.stream().unwrap();
    let host = ndarray::Array1::<u8>::ones(600 << 10);
    drop(stream.to_device(&host).unwrap());
    stream.synchronize().unwrap();
    // The stream keeps a 1 MiB buffer, the whole limit: a pinned array needs it back.
    assert_eq!(dev.memory_stats().host_total.current_bytes, 1 << 20);
    let pinned = dev.pinned_array::<u8>(&[512 << 10]).unwrap();
    let stats = dev.memory_stats();
    assert_eq!(stats.host_total.current_bytes, 512 << 10);
    assert!(stats.oom.retries_succeeded >= 1, "{:?}", stats.oom);
    drop(pinned);
}

/// `stream.launch`, attributed to the caller of this function.
#[track_caller]
fn launch_on(
    stream: &Stream,
    kernel: &gpu_mem::Kernel,
    config: LaunchConfig,
    args: &mut [&mut dyn gpu_mem::KernelArg],
) -> gpu_mem::Result<()> {
    // SAFETY: the test's kernel, the tiled matmul, stays inside its three n x n arguments.
    unsafe { stream.launch(kernel, config, args) }
}

#[test]
fn a_launchs_staged_arguments_name_the_launch() {
    use gpu_mem::kernels::{TPB, matmul_tiled};
    let (_rt, dev) = device(16 << 20);
    let stream = dev.stream().unwrap();
    let n = 2 * TPB;
    let a = ndarray::Array2::<f32>::ones((n, n));
    let mut c = dev.device_array::<f32>(&[n, n], Order::C).unwrap();
    let config = LaunchConfig::new((2, 2), (TPB as u32, TPB as u32));
    let kernel = matmul_tiled();
    let args: &mut [&mut dyn gpu_mem::KernelArg] = &mut [&mut In(&a), &mut In(&a), &mut c];
    let at = next_line!();
    let launched = launch_on(&stream, &kernel, config, args);
    launched.unwrap();
    // The two host arrays' device copies live until the stream is done with them.
    let staged: Vec<_> = dev
        .memory_snapshot()
        .allocations
        .into_iter()
        .filter(|x| x.bytes == (n * n * 4) as u64 && x.location.starts_with(&at))
        .collect();
    stream.synchronize().unwrap();
    assert_eq!(staged.len(), 2, "{:?}", dev.memory_snapshot().allocations);
}
