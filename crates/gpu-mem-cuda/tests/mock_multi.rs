//! Peer access and copies, managed memory (and its prefetch and advice, `managed_hints`), the
//! default pool and IPC (issue 14) against the stand-in `libcuda` (tests/mock/libcuda_mock.c),
//! built here with `cc`.
//!
//! The stand-in is host memory, not a GPU: these tests prove the backend's side of the driver
//! contract (which context is current, which contexts and streams are passed, flags, byte
//! counts, handles, what a missing symbol does), never anything about hardware. Without a C
//! compiler the trials are reported as ignored.

#[path = "mock/managed_hints.rs"]
mod managed_hints;
#[path = "support/mock.rs"]
mod mock;

use gpu_mem_core::backend::{DevicePtr, IpcMemHandle};
use gpu_mem_core::backend::{
    IpcMemory, ManagedMemory, Memory, PeerAccess, StreamOrderedPool, Streams, Transfer,
};
use gpu_mem_core::{Backend, Error};
use libtest_mimic::{Arguments, Failed, Trial};
use mock::{Mock, build, ensure};

type TestFn = fn(&Mock) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    let dir = std::env::temp_dir().join(format!("gpu-mem-cuda-mock-multi-{}", std::process::id()));
    let built = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            Ok([
                build(&dir, "multi", &[])?,
                build(&dir, "multi_old", &["-DMOCK_OLD_DRIVER"])?,
                build(&dir, "multi_no_peer", &["-DMOCK_NO_PEER"])?,
            ])
        });
    let reason = built
        .as_ref()
        .err()
        .map(|e| format!("cannot build the mock driver: {e}"));
    let libraries = built.unwrap_or_default();

    // (name, which build: 0 current, 1 old, 2 without peer/managed, test)
    let tests: &[(&str, usize, TestFn)] = &[
        ("peer_access_is_queried_and_enabled", 0, peer_access),
        ("peer_copies_pass_both_contexts", 0, peer_copies),
        ("reset_forgets_peer_access", 0, reset_forgets_peer_access),
        ("managed_memory_is_global_and_freed", 0, managed_memory),
        ("managed_memory_unsupported_device", 0, managed_unsupported),
        (
            "managed_hints_reach_the_driver",
            0,
            managed_hints::hints_reach_the_driver,
        ),
        (
            "managed_hints_need_concurrent_access",
            0,
            managed_hints::hints_need_concurrent_access,
        ),
        (
            "old_driver_has_no_managed_hints",
            1,
            managed_hints::old_driver_has_no_hints,
        ),
        ("default_pool_usage_threshold_trim", 0, default_pool),
        ("pool_without_device_support", 0, pool_unsupported),
        ("ipc_export_open_close", 0, ipc_roundtrip),
        ("old_driver_lacks_pools_keeps_ipc", 1, old_driver),
        ("driver_without_peer_or_managed", 2, no_peer_driver),
    ];
    let mut trials = Vec::new();
    for &(name, which, test) in tests {
        let library = libraries[which].clone();
        let trial = Trial::test(name, move || test(&Mock::copy_of(&library, name)?));
        trials.push(match &reason {
            Some(r) => {
                println!("ignoring {name}: {r}");
                trial.with_ignored_flag(true)
            }
            None => trial,
        });
    }
    let conclusion = libtest_mimic::run(&args, trials);
    // The mock copies are scratch files of this run only.
    let _ = std::fs::remove_dir_all(&dir);
    conclusion.exit();
}

// ----- helpers -------------------------------------------------------------------------------

fn call2(mock: &Mock, name: &str, a: i32, b: i32) -> Result<i32, Failed> {
    // SAFETY: the mock_* functions called here take two ints and return an int.
    let f = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(i32, i32) -> i32>(name)
    }?;
    // SAFETY: as above.
    Ok(unsafe { f(a, b) })
}

fn call_u64(mock: &Mock, name: &str, arg: i32) -> Result<u64, Failed> {
    // SAFETY: the mock_* functions called here take an int and return unsigned long long.
    let f = unsafe { mock.library.get::<unsafe extern "C" fn(i32) -> u64>(name) }?;
    // SAFETY: as above.
    Ok(unsafe { f(arg) })
}

fn allocation_kind(mock: &Mock, ptr: DevicePtr) -> Result<i32, Failed> {
    // SAFETY: mock_allocation_kind takes a device pointer (u64) and returns int.
    let f = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(u64) -> i32>("mock_allocation_kind")
    }?;
    // SAFETY: as above.
    Ok(unsafe { f(ptr.0) })
}

/// Rewrites a handle so the mock takes it for another process's.
fn as_foreign(mock: &Mock, handle: &mut IpcMemHandle) -> Result<(), Failed> {
    ensure(handle.data.len() == 64, || {
        format!("handle of {} bytes", handle.data.len())
    })?;
    // SAFETY: mock_ipc_as_foreign(unsigned char *h) rewrites the 64 bytes at h.
    let f = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(*mut u8)>("mock_ipc_as_foreign")
    }?;
    // SAFETY: `data` holds 64 writable bytes (checked above).
    unsafe { f(handle.data.as_mut_ptr()) };
    Ok(())
}

fn expect_unsupported<T: std::fmt::Debug>(
    result: gpu_mem_core::Result<T>,
    feature: &str,
    reason_has: &str,
) -> Result<(), Failed> {
    match result {
        Err(Error::NotSupportedByBackend {
            feature: f, reason, ..
        }) if f == feature && reason.contains(reason_has) => Ok(()),
        other => Err(format!(
            "expected NotSupportedByBackend({feature}, …{reason_has}…), got {other:?}"
        )
        .into()),
    }
}

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + seed) % 251) as u8).collect()
}

// ----- peer access -----------------------------------------------------------------------------

fn peer_access(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    // The mock refuses cuDeviceCanAccessPeer(d, d): a device's access to itself is answered
    // without the driver.
    ensure(b.can_access_peer(0, 0)? && b.can_access_peer(0, 1)?, || {
        "can_access_peer".into()
    })?;
    ensure(!b.peer_access_enabled(0, 1), || {
        "enabled before asking".into()
    })?;
    b.enable_peer_access(0, 1)?;
    ensure(call2(mock, "mock_peer_enabled", 0, 1)? == 1, || {
        "cuCtxEnablePeerAccess did not run in device 0's context for device 1's".into()
    })?;
    ensure(call2(mock, "mock_peer_enabled", 1, 0)? == 0, || {
        "the opposite direction was enabled".into()
    })?;
    ensure(
        b.peer_access_enabled(0, 1) && !b.peer_access_enabled(1, 0),
        || "bookkeeping".into(),
    )?;
    // Pool memory is outside what cuCtxEnablePeerAccess covers: device 1's default pool must
    // let device 0 in too.
    ensure(call2(mock, "mock_pool_access", 1, 0)? == 1, || {
        "cuMemPoolSetAccess did not grant device 0 access to device 1's pool".into()
    })?;
    ensure(call2(mock, "mock_pool_access", 0, 1)? == 0, || {
        "the opposite pool access was granted".into()
    })?;
    // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is success; a device and itself is a no-op.
    b.enable_peer_access(0, 1)?;
    b.enable_peer_access(1, 1)?;
    match b.enable_peer_access(0, 2) {
        Err(Error::NoSuchDevice { device: 2, .. }) => {}
        other => return Err(format!("device 2: {other:?}").into()),
    }
    mock.call_with("mock_set_peer_possible", 0)?;
    ensure(!b.can_access_peer(1, 0)?, || {
        "cuDeviceCanAccessPeer's 0 was not passed on".into()
    })?;
    expect_unsupported(
        b.enable_peer_access(1, 0),
        "peer access",
        "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
    )?;
    ensure(!b.peer_access_enabled(1, 0), || {
        "a refused enable was recorded".into()
    })
}

fn peer_copies(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let n = 3000usize;
    let (a, c) = (b.alloc(0, n)?, b.alloc(1, n)?);
    let data = pattern(n, 1);
    let mut back = vec![0u8; n];
    let syncs_before: i32 = mock.call("mock_ctx_syncs")?;
    // SAFETY: `a` (device 0) and `c` (device 1) are live n-byte allocations; host buffers are
    // live Vecs of n bytes.
    unsafe {
        b.copy_htod(0, a, data.as_ptr(), n)?;
        b.copy_peer(1, c, 0, a, n)?;
        b.copy_dtoh(1, back.as_mut_ptr(), c, n)?;
    }
    ensure(back == data, || "peer copy data".into())?;
    ensure(mock.call::<i32>("mock_peer_copies")? == 1, || {
        "cuMemcpyPeer not called once".into()
    })?;
    ensure(
        mock.call::<u64>("mock_last_peer_bytes")? == n as u64,
        || "byte count".into(),
    )?;
    let syncs: i32 = mock.call("mock_ctx_syncs")?;
    ensure(syncs - syncs_before == 4, || {
        format!(
            "the synchronous peer copy should synchronise both contexts before and after it, saw {} cuCtxSynchronize",
            syncs - syncs_before
        )
    })?;
    // Ranges swapped between the devices: the mock checks each range against its context.
    // SAFETY: the mock only validates; nothing is written out of range.
    let swapped = unsafe { b.copy_peer(0, c, 1, a, n) };
    ensure(swapped.is_err(), || {
        "a copy naming the wrong contexts succeeded".into()
    })?;

    // On a stream of the destination device.
    let s1 = b.stream_create(1)?;
    let data2 = pattern(n, 7);
    // SAFETY: as above; the stream is live and of device 1.
    unsafe {
        b.copy_htod(0, a, data2.as_ptr(), n)?;
        b.copy_peer_async(1, c, 0, a, n, s1)?;
        b.stream_synchronize(1, s1)?;
        b.copy_dtoh(1, back.as_mut_ptr(), c, n)?;
    }
    ensure(back == data2, || "async peer copy data".into())?;
    ensure(
        mock.call::<i32>("mock_peer_async_copies")? == 1
            && mock.call::<u64>("mock_last_peer_stream")? == s1.0,
        || "cuMemcpyPeerAsync not called on the given stream".into(),
    )?;
    // A stream of the source device is refused by the driver (it must be the destination's).
    let s0 = b.stream_create(0)?;
    // SAFETY: the ranges are live; the mock refuses before copying.
    let wrong = unsafe { b.copy_peer_async(1, c, 0, a, n, s0) };
    ensure(wrong.is_err(), || {
        "a stream of the source device was accepted".into()
    })?;
    // SAFETY: nothing uses the streams or allocations any more.
    unsafe {
        b.stream_destroy(1, s1)?;
        b.stream_destroy(0, s0)?;
        b.free(0, a)?;
        b.free(1, c)?;
    }
    Ok(())
}

fn reset_forgets_peer_access(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    b.enable_peer_access(0, 1)?;
    b.enable_peer_access(1, 0)?;
    // SAFETY: nothing of device 1 is alive in this backend or elsewhere in the test.
    unsafe { b.reset_device(1)? };
    ensure(
        !b.peer_access_enabled(0, 1) && !b.peer_access_enabled(1, 0),
        || "peer access survived the peer's reset".into(),
    )
}

// ----- managed memory --------------------------------------------------------------------------

fn managed_memory(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let n = 5000usize;
    let alloc = b.managed_alloc(0, n)?;
    ensure(mock.call::<u32>("mock_last_managed_flags")? == 1, || {
        "not CU_MEM_ATTACH_GLOBAL".into()
    })?;
    let device = alloc
        .device
        .ok_or("managed memory without a device address")?;
    ensure(device.0 == alloc.host.as_ptr() as u64, || {
        "host and device address differ".into()
    })?;
    ensure(device.0.is_multiple_of(4096), || "not page aligned".into())?;
    let data = pattern(n, 3);
    // SAFETY: the managed allocation has n bytes of host memory this test owns.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), alloc.host.as_ptr(), n) };
    let mut back = vec![0u8; n];
    // Attached globally: device 1 reaches it too.
    // SAFETY: the range is the live managed allocation; `back` has n bytes.
    unsafe { b.copy_dtoh(1, back.as_mut_ptr(), device, n)? };
    ensure(back == data, || "managed data through device 1".into())?;
    // SAFETY: allocated above, unused; the second free is refused before the driver.
    unsafe {
        b.managed_free(0, alloc.host)?;
        match b.managed_free(0, alloc.host) {
            Err(Error::InvalidPointer {
                kind: "managed", ..
            }) => {}
            other => return Err(format!("double free: {other:?}").into()),
        }
    }
    ensure(
        mock.call::<i32>("mock_live_device_allocations")? == 0,
        || "leak".into(),
    )?;
    match b.managed_alloc(0, 0) {
        Err(Error::InvalidArgument { name: "bytes", .. }) => Ok(()),
        other => Err(format!("0 bytes: {other:?}").into()),
    }
}

fn managed_unsupported(mock: &Mock) -> Result<(), Failed> {
    mock.call_with("mock_set_managed_supported", 0)?;
    let b = mock.backend()?;
    expect_unsupported(
        b.managed_alloc(0, 64),
        "managed memory",
        "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0",
    )?;
    ensure(
        mock.call::<u32>("mock_last_managed_flags")? == u32::MAX,
        || "cuMemAllocManaged was called anyway".into(),
    )
}

// ----- the default pool ------------------------------------------------------------------------

fn default_pool(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let s = b.stream_create(0)?;
    let n = 1000usize;
    // SAFETY: the stream is live and of device 0.
    let p = unsafe { b.alloc_async(0, n, s)? };
    ensure(allocation_kind(mock, p)? == 2, || {
        "not a cuMemAllocAsync allocation".into()
    })?;
    // Before its first stream-ordered allocation the backend gave the pool a release threshold
    // of the device's memory (the driver's is 0).
    let total = b.device_info(0)?.total_memory;
    let usage = b.pool_usage(0)?;
    ensure(
        usage.used == n as u64 && usage.reserved == n as u64 && usage.release_threshold == total,
        || format!("{usage:?}, device memory {total}"),
    )?;
    // SAFETY: allocated above on this stream; nothing else uses it.
    unsafe { b.free_async(0, p, s)? };
    ensure(mock.call::<i32>("mock_async_frees")? == 1, || {
        "cuMemFreeAsync not called".into()
    })?;
    b.synchronize(0)?;
    let usage = b.pool_usage(0)?;
    ensure(usage.used == 0 && usage.reserved == n as u64, || {
        format!("that threshold keeps freed memory for reuse: {usage:?}")
    })?;
    b.pool_set_release_threshold(0, 0)?;
    // SAFETY: as above.
    unsafe {
        let q = b.alloc_async(0, n, s)?;
        b.free_async(0, q, s)?;
    }
    b.synchronize(0)?;
    let usage = b.pool_usage(0)?;
    ensure(usage.used == 0 && usage.reserved == 0, || {
        format!("threshold 0 keeps nothing after a synchronize: {usage:?}")
    })?;

    b.pool_set_release_threshold(0, 1 << 20)?;
    ensure(call_u64(mock, "mock_pool_threshold", 0)? == 1 << 20, || {
        "threshold not set on device 0's pool".into()
    })?;
    ensure(call_u64(mock, "mock_pool_threshold", 1)? == 0, || {
        "device 1's pool changed".into()
    })?;
    // SAFETY: as above.
    unsafe {
        let q = b.alloc_async(0, n, s)?;
        b.free_async(0, q, s)?;
    }
    b.synchronize(0)?;
    let usage = b.pool_usage(0)?;
    ensure(
        usage.used == 0 && usage.reserved == n as u64 && usage.release_threshold == 1 << 20,
        || format!("freed memory should stay reserved: {usage:?}"),
    )?;
    b.pool_trim(0, 0)?;
    ensure(mock.call::<u64>("mock_last_trim")? == 0, || {
        "cuMemPoolTrimTo(0) not called".into()
    })?;
    ensure(b.pool_usage(0)?.reserved == 0, || "trim kept memory".into())?;

    // A stream of another device is refused by the driver.
    let s1 = b.stream_create(1)?;
    // SAFETY: a live stream, of the wrong device: the mock refuses it.
    ensure(unsafe { b.alloc_async(0, n, s1) }.is_err(), || {
        "a stream of device 1 served an allocation of device 0".into()
    })?;
    // Memory from cuMemAlloc has no stream-ordered free: refused, and still allocated.
    let plain = b.alloc(0, n)?;
    // SAFETY: `plain` is live and unused; the refusal happens before the driver.
    let refused = unsafe { b.free_async(0, plain, s) };
    expect_unsupported(refused, "stream-ordered free", "cuMemAlloc")?;
    ensure(allocation_kind(mock, plain)? == 1, || {
        "the refused free freed".into()
    })?;
    // SAFETY: nothing uses these any more.
    unsafe {
        b.free(0, plain)?;
        b.stream_destroy(0, s)?;
        b.stream_destroy(1, s1)?;
    }
    Ok(())
}

fn pool_unsupported(mock: &Mock) -> Result<(), Failed> {
    mock.set_pools(false)?;
    let b = mock.backend()?;
    let s = b.stream_create(0)?;
    // SAFETY: the stream is live; refused before the driver.
    let refused = unsafe { b.alloc_async(0, 64, s) };
    expect_unsupported(refused, "memory pools", "MEMORY_POOLS_SUPPORTED = 0")?;
    expect_unsupported(b.pool_usage(0), "memory pools", "MEMORY_POOLS_SUPPORTED")?;
    expect_unsupported(
        b.pool_set_release_threshold(0, 1),
        "memory pools",
        "MEMORY_POOLS_SUPPORTED",
    )?;
    expect_unsupported(b.pool_trim(0, 0), "memory pools", "MEMORY_POOLS_SUPPORTED")?;
    // SAFETY: created above, unused.
    unsafe { b.stream_destroy(0, s)? };
    Ok(())
}

// ----- IPC ---------------------------------------------------------------------------------------

fn ipc_roundtrip(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let n = 5000usize;
    let a = b.alloc(0, n)?;
    let data = pattern(n, 5);
    // SAFETY: `a` is a live n-byte allocation; `data` has n bytes.
    unsafe { b.copy_htod(0, a, data.as_ptr(), n)? };
    let mut handle = b.ipc_get_handle(0, a)?;
    ensure(handle.bytes == n as u64 && handle.data.len() == 64, || {
        format!("{} bytes, {} handle bytes", handle.bytes, handle.data.len())
    })?;
    // Not the base of an allocation.
    ensure(b.ipc_get_handle(0, DevicePtr(a.0 + 256)).is_err(), || {
        "an interior pointer was exported".into()
    })?;
    // The process that made a handle cannot open it (as on CUDA).
    match b.ipc_open_handle(1, &handle) {
        Err(Error::Native { code: 201, .. }) => {}
        other => return Err(format!("own handle: {other:?}").into()),
    }
    as_foreign(mock, &mut handle)?;
    // A handle claiming more than its memory has is refused (and its mapping closed): arrays
    // over it would reach past what the driver mapped.
    let inflated = IpcMemHandle {
        bytes: handle.bytes * 2,
        data: handle.data.clone(),
    };
    match b.ipc_open_handle(1, &inflated) {
        Err(Error::InvalidArgument { reason, .. }) if reason.contains("claims 10000 bytes") => {}
        other => return Err(format!("an inflated handle: {other:?}").into()),
    }
    ensure(mock.call::<i32>("mock_live_ipc_mappings")? == 0, || {
        "the refused mapping stayed open".into()
    })?;
    let opened = b.ipc_open_handle(1, &handle)?;
    ensure(mock.call::<u32>("mock_last_ipc_open_flags")? == 1, || {
        "not CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS".into()
    })?;
    let mut back = vec![0u8; n];
    // The mapping belongs to device 1: the mock accepts it only with device 1's context current.
    // SAFETY: the mapping has n bytes; `back` too.
    unsafe { b.copy_dtoh(1, back.as_mut_ptr(), opened, n)? };
    ensure(back == data, || "IPC mapping contents".into())?;
    ensure(mock.call::<i32>("mock_live_ipc_mappings")? == 1, || {
        "mapping count".into()
    })?;
    // Opened again (as for a second slice of the same allocation): CUDA returns the same
    // mapping, counted; each open is closed once, and the mapping stays until the last close.
    let again = b.ipc_open_handle(1, &handle)?;
    ensure(again == opened, || format!("{again:?} is not {opened:?}"))?;
    // SAFETY: the mapping stays open (one open remains) while it is read below.
    unsafe { b.ipc_close_handle(1, again)? };
    ensure(mock.call::<i32>("mock_live_ipc_mappings")? == 1, || {
        "the first close of a mapping opened twice unmapped it".into()
    })?;
    let mut back = vec![0u8; n];
    // SAFETY: the mapping has n bytes; `back` too.
    unsafe { b.copy_dtoh(1, back.as_mut_ptr(), opened, n)? };
    ensure(back == data, || {
        "IPC mapping contents after one close".into()
    })?;
    // SAFETY: opened above, unused; the second close is refused before the driver.
    unsafe {
        b.ipc_close_handle(1, opened)?;
        match b.ipc_close_handle(1, opened) {
            Err(Error::InvalidPointer { .. }) => {}
            other => return Err(format!("double close: {other:?}").into()),
        }
    }
    ensure(mock.call::<i32>("mock_live_ipc_mappings")? == 0, || {
        "mapping not closed".into()
    })?;
    let short = IpcMemHandle {
        bytes: 8,
        data: vec![0; 10],
    };
    match b.ipc_open_handle(0, &short) {
        Err(Error::InvalidArgument { name: "handle", .. }) => {}
        other => return Err(format!("short handle: {other:?}").into()),
    }
    // Pool memory cannot be exported with cuIpcGetMemHandle.
    let s = b.stream_create(0)?;
    // SAFETY: the stream is live and of device 0.
    let pooled = unsafe { b.alloc_async(0, 4096, s)? };
    expect_unsupported(
        b.ipc_get_handle(0, pooled),
        "IPC memory handles",
        "stream-ordered pool",
    )?;
    // SAFETY: nothing uses these any more.
    unsafe {
        b.free_async(0, pooled, s)?;
        b.stream_destroy(0, s)?;
        b.free(0, a)?;
    }
    Ok(())
}

// ----- old drivers -------------------------------------------------------------------------------

fn old_driver(mock: &Mock) -> Result<(), Failed> {
    mock.set_pools(true)?;
    let b = mock.backend()?;
    ensure(
        !b.driver().has("cuMemPoolGetAttribute") && b.driver().has("cuIpcOpenMemHandle"),
        || format!("{:?}", b.driver().symbol_presence()),
    )?;
    let s = b.stream_create(0)?;
    // No MEMORY_POOLS_SUPPORTED attribute before 11.2: no pools, whatever else is exported.
    // SAFETY: the stream is live; refused before the driver.
    expect_unsupported(unsafe { b.alloc_async(0, 64, s) }, "memory pools", "")?;
    expect_unsupported(b.pool_usage(0), "memory pools", "")?;
    // IPC opens through the 4.1 export (the only one this driver has).
    let a = b.alloc(0, 4096)?;
    let mut handle = b.ipc_get_handle(0, a)?;
    as_foreign(mock, &mut handle)?;
    let opened = b.ipc_open_handle(0, &handle)?;
    // SAFETY: nothing uses these any more.
    unsafe {
        b.ipc_close_handle(0, opened)?;
        b.free(0, a)?;
        b.stream_destroy(0, s)?;
    }
    Ok(())
}

fn no_peer_driver(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    // A missing symbol is NotSupportedByBackend (so the core copies through the host), naming it.
    expect_unsupported(
        b.can_access_peer(0, 1),
        "peer access",
        "cuDeviceCanAccessPeer",
    )?;
    expect_unsupported(
        b.enable_peer_access(0, 1),
        "peer access",
        "cuCtxEnablePeerAccess",
    )?;
    let (a, c) = (b.alloc(0, 64)?, b.alloc(1, 64)?);
    // SAFETY: both ranges are live; refused before the driver.
    let refused = unsafe { b.copy_peer(1, c, 0, a, 64) };
    expect_unsupported(refused, "peer copies", "cuMemcpyPeer")?;
    expect_unsupported(
        b.managed_alloc(0, 64),
        "managed memory",
        "cuMemAllocManaged",
    )?;
    // Everything else still works.
    let data = [9u8; 64];
    // SAFETY: `a` is a live 64-byte allocation.
    unsafe {
        b.copy_htod(0, a, data.as_ptr(), 64)?;
        b.free(0, a)?;
        b.free(1, c)?;
    }
    Ok(())
}
