//! The backend against a stand-in `libcuda` (tests/mock/libcuda_mock.c), built here with `cc`.
//!
//! The stand-in is host memory, not a GPU: these tests prove the backend's side of the driver
//! contract (contexts current on every calling thread, matching alloc/free pairs, byte counts,
//! flags, handle use, error translation, context release), never anything about hardware.
//! The raw-`Backend` contract every backend keeps runs here too (`contract::*` trials, see
//! `mock_contract`); the trials below it are the driver protocol only a stand-in can watch.
//! Without a C compiler the trials are reported as ignored.

#[path = "support/mock.rs"]
mod mock;

use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, HostRegisterFlags};
use gpu_mem_core::backend::{Events, Memory, Streams, Transfer};
use gpu_mem_core::testing::contract::{self, Contract, Expect, Outcome};
use gpu_mem_core::{Backend, BackendKind, Error};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use mock::{Mock, build, ensure};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr::NonNull;
use std::sync::Arc;

const CHILD_VAR: &str = "GPU_MEM_CUDA_MOCK_TEST_CHILD";
const GIB: u64 = 1 << 30;

type TestFn = fn(&Mock) -> Result<(), Failed>;

fn main() {
    let args = Arguments::from_args();
    if let Some(path) = std::env::var_os(CHILD_VAR) {
        let path = PathBuf::from(path);
        let trial = Trial::test("child_open_through_env", move || {
            child_open_through_env(&path)
        });
        libtest_mimic::run(&args, vec![trial]).exit();
    }

    let dir = std::env::temp_dir().join(format!("gpu-mem-cuda-mock-{}", std::process::id()));
    let built = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            Ok((
                build(&dir, "current", &[])?,
                build(&dir, "old", &["-DMOCK_OLD_DRIVER"])?,
            ))
        });
    let reason = built
        .as_ref()
        .err()
        .map(|e| format!("cannot build the mock driver: {e}"));
    let (current, old) = built.unwrap_or_default();

    let tests: &[(&str, bool, TestFn)] = &[
        (
            "device_info_translates_attributes",
            false,
            device_info_translates_attributes,
        ),
        ("roundtrip_with_plain_allocation", false, roundtrip_plain),
        (
            "roundtrip_with_stream_ordered_allocation",
            false,
            roundtrip_stream_ordered,
        ),
        (
            "host_alloc_flags_reach_the_driver",
            false,
            host_alloc_flags_reach_the_driver,
        ),
        (
            "misaligned_host_allocation_is_refused_and_freed",
            false,
            misaligned_host_allocation_is_refused_and_freed,
        ),
        (
            "small_host_allocations_sharing_a_page_are_accepted",
            false,
            small_host_allocations_sharing_a_page_are_accepted,
        ),
        ("register_and_unregister", false, register_and_unregister),
        ("streams_and_events", false, streams_and_events),
        (
            "every_thread_gets_the_context_current",
            false,
            every_thread_gets_the_context_current,
        ),
        (
            "dropping_releases_primary_contexts",
            false,
            dropping_releases_primary_contexts,
        ),
        (
            "native_errors_carry_driver_text",
            false,
            native_errors_carry_driver_text,
        ),
        ("old_driver_without_pools_or_v2_release", true, old_driver),
        (
            "device_fault_loses_the_device_until_reset",
            false,
            device_fault_loses_the_device_until_reset,
        ),
        (
            "a_fault_first_seen_by_a_release_still_releases",
            false,
            a_fault_first_seen_by_a_release_still_releases,
        ),
        (
            "misuse_at_synchronisation_is_not_an_async_failure",
            false,
            misuse_at_synchronisation_is_not_an_async_failure,
        ),
        (
            "callers_context_is_restored",
            false,
            callers_context_is_restored,
        ),
        (
            "host_register_unsupported_is_reported",
            false,
            host_register_unsupported_is_reported,
        ),
        (
            "driver_is_loaded_once_per_process",
            false,
            driver_is_loaded_once,
        ),
    ];
    let mut trials = Vec::new();
    for &(name, use_old, test) in tests {
        let library = if use_old {
            old.clone()
        } else {
            current.clone()
        };
        let trial = Trial::test(name, move || test(&Mock::copy_of(&library, name)?));
        trials.push(match &reason {
            Some(r) => {
                println!("ignoring {name}: {r}");
                trial.with_ignored_flag(true)
            }
            None => trial,
        });
    }
    for check in contract::checks() {
        let name = format!("contract::{}", check.name);
        trials.push(match &reason {
            // A skip never reads as a pass: ignored, with the reason.
            Some(r) => {
                let r = r.clone();
                Trial::ignorable_test(name, move || Ok(Completion::ignored_with(r)))
            }
            None => {
                let library = current.clone();
                Trial::ignorable_test(name, move || run_contract_check(check, &library))
            }
        });
    }
    let library = current;
    let trial = Trial::test("open_through_gpu_mem_cuda_library", move || {
        open_through_env(&library)
    });
    trials.push(match &reason {
        Some(_) => trial.with_ignored_flag(true),
        None => trial,
    });
    let conclusion = libtest_mimic::run(&args, trials);
    // The mock copies are scratch files of this run only.
    let _ = std::fs::remove_dir_all(&dir);
    conclusion.exit();
}

/// What the stand-in (two devices of 1 GiB, every optional feature) is expected to do under the
/// raw-`Backend` contract.
fn mock_contract() -> Contract {
    let pool_allocator = std::env::var("GPU_MEM_CUDA_ALLOCATOR").is_ok_and(|v| v == "pool");
    Contract {
        capacity: Some(GIB),
        exact_accounting: true,
        // CUDA's documented rule: cuIpcOpenMemHandle refuses a handle of its own process.
        ipc_open_in_exporting_process: false,
        ipc: if pool_allocator {
            Expect::Skip(
                "GPU_MEM_CUDA_ALLOCATOR=pool: `alloc` gives pool memory, which cuIpcGetMemHandle cannot export",
            )
        } else {
            Expect::Works
        },
        collectives: if cfg!(feature = "nccl") {
            Expect::Skip(
                "the stand-in driver has no NCCL beside it (tests/mock_nccl.rs checks the call protocol against a stand-in NCCL)",
            )
        } else {
            Expect::NotSupported
        },
        ..Contract::new(2)
    }
}

/// Runs one check of the contract on a private copy of the stand-in, then checks that the
/// backends it made gave everything back to the driver once dropped.
fn run_contract_check(check: contract::Check, library: &Path) -> Result<Completion, Failed> {
    let mock = Mock::copy_of(library, &format!("contract_{}", check.name))?;
    let factory = || {
        mock.backend()
            .map(|b| Arc::new(b) as Arc<dyn Backend>)
            .map_err(|e| {
                e.message()
                    .unwrap_or("no backend on the stand-in")
                    .to_string()
            })
    };
    if let Outcome::Skipped(reason) = check.run(&mock_contract(), &factory)? {
        return Ok(Completion::ignored_with(reason));
    }
    let left = (
        mock.call::<i32>("mock_live_device_allocations")?,
        mock.call::<i32>("mock_live_host_allocations")?,
        mock.call::<i32>("mock_live_ipc_mappings")?,
        mock.call_with("mock_primary_refs", 0)?,
        mock.call_with("mock_primary_refs", 1)?,
    );
    ensure(left == (0, 0, 0, 0, 0), || {
        format!(
            "left in the driver (device and host allocations, IPC mappings, context references): {left:?}"
        )
    })?;
    Ok(Completion::Completed)
}

fn device_info_translates_attributes(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    ensure(
        b.kind() == BackendKind::Cuda && b.device_count() == 2,
        || "kind / count".into(),
    )?;
    let info = b.device_info(1)?;
    ensure(
        info.ordinal == 1 && info.name == "gpu-mem mock device 1",
        || format!("{info:?}"),
    )?;
    ensure(info.arch == "sm_90" && info.warp_size == 32, || {
        format!("{info:?}")
    })?;
    ensure(
        info.total_memory == GIB && info.max_threads_per_block == 1024,
        || format!("{info:?}"),
    )?;
    ensure(
        info.max_shared_memory_per_block == 49152 && info.can_map_host_memory,
        || format!("{info:?}"),
    )?;
    match b.device_info(2) {
        Err(Error::NoSuchDevice {
            device: 2,
            count: 2,
            ..
        }) => Ok(()),
        other => Err(format!("device 2 should not exist: {other:?}").into()),
    }
}

/// The allocator the backend picks reaches the driver: `cuMemAlloc` by default (Numba's
/// choice), the pool only with GPU_MEM_CUDA_ALLOCATOR=pool (run this test binary with it set to
/// cover the pool path) and where the device has pools; each allocation is freed by its own
/// kind of free. (The bytes round trip is the contract's.)
fn roundtrip(mock: &Mock, pools: bool) -> Result<(), Failed> {
    mock.set_pools(pools)?;
    let b = mock.backend()?;
    let pool_asked = std::env::var("GPU_MEM_CUDA_ALLOCATOR").is_ok_and(|v| v == "pool");
    ensure(
        b.uses_stream_ordered_alloc(0)? == (pools && pool_asked),
        || format!("allocator choice: pools {pools}, pool asked {pool_asked}"),
    )?;
    let a = b.alloc(0, 1000)?;
    let c = b.alloc(0, 1000)?;
    let expected_kind = if pools && pool_asked { 2 } else { 1 };
    // SAFETY: mock_allocation_kind takes a device pointer (u64) and returns int.
    let kind_of = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(u64) -> i32>("mock_allocation_kind")
    }?;
    // SAFETY: as above.
    let kinds = unsafe { (kind_of(a.0), kind_of(c.0)) };
    ensure(kinds == (expected_kind, expected_kind), || {
        format!("allocation kinds {kinds:?}")
    })?;
    // SAFETY: both pointers came from alloc on device 0 and nothing uses them.
    unsafe {
        b.free(0, a)?;
        b.free(0, c)?;
    }
    let live: i32 = mock.call("mock_live_device_allocations")?;
    let plain: i32 = mock.call("mock_plain_frees")?;
    let asynchronous: i32 = mock.call("mock_async_frees")?;
    ensure(live == 0, || format!("{live} allocations leaked"))?;
    let want = if pools && pool_asked { (0, 2) } else { (2, 0) };
    ensure((plain, asynchronous) == want, || {
        format!("frees plain/async = {plain}/{asynchronous}, want {want:?}")
    })
}

fn roundtrip_plain(mock: &Mock) -> Result<(), Failed> {
    roundtrip(mock, false)
}

fn roundtrip_stream_ordered(mock: &Mock) -> Result<(), Failed> {
    roundtrip(mock, true)
}

/// Every mix of `HostAllocFlags` reaches `cuMemHostAlloc` as its bits. (Alignment and the
/// mapped view are the contract's.)
fn host_alloc_flags_reach_the_driver(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    for bits in 0..8u32 {
        let flags = HostAllocFlags {
            portable: bits & 1 != 0,
            mapped: bits & 2 != 0,
            write_combined: bits & 4 != 0,
        };
        let alloc = b.host_alloc(0, 10_000, flags)?;
        let seen: u32 = mock.call("mock_last_host_alloc_flags")?;
        ensure(seen == bits, || {
            format!("{flags:?} reached the driver as {seen:#x}, expected {bits:#x}")
        })?;
        // SAFETY: allocated above, freed once, unused.
        unsafe { b.host_free(0, alloc.host)? };
    }
    Ok(())
}

fn misaligned_host_allocation_is_refused_and_freed(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let before: i32 = mock.call("mock_live_host_allocations")?;
    mock.call::<()>("mock_misalign_next_host_alloc")?;
    match b.host_alloc(0, 10_000, HostAllocFlags::default()) {
        Err(Error::InvalidPointer {
            kind: "host",
            address,
            reason,
            ..
        }) if address % 4096 == 64 && reason.contains("256-byte aligned") => {}
        other => return Err(format!("a misaligned host allocation: {other:?}").into()),
    }
    let after: i32 = mock.call("mock_live_host_allocations")?;
    ensure(after == before, || {
        format!("live host allocations {before} before, {after} after the refusal")
    })?;
    // The next allocation is aligned again and works.
    let alloc = b.host_alloc(0, 100, HostAllocFlags::default())?;
    // SAFETY: allocated above, freed once, unused.
    unsafe { b.host_free(0, alloc.host)? };
    Ok(())
}

/// Page-locked allocations under a page share pages: the H200's driver (580.159) gave 8, 24
/// and 48 bytes at 512 bytes past a page boundary, as the mock does. They are 256-byte aligned,
/// which is all the trait promises, and must be accepted (`pinned_array` of three `f64`s failed
/// on that GPU while 4096 bytes were demanded).
fn small_host_allocations_sharing_a_page_are_accepted(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    for bytes in [8usize, 24, 48, 4095] {
        let alloc = b.host_alloc(0, bytes, HostAllocFlags::default())?;
        let address = alloc.host.as_ptr() as usize;
        ensure(address % 4096 == 512, || {
            format!("{bytes} bytes at {address:#x}: not where the mock puts small allocations")
        })?;
        // SAFETY: the allocation holds `bytes` bytes this test owns; nothing else uses them.
        unsafe {
            std::ptr::write_bytes(alloc.host.as_ptr(), 0x5a, bytes);
            ensure(*alloc.host.as_ptr().add(bytes - 1) == 0x5a, || {
                format!("{bytes} bytes: the last byte did not keep its value")
            })?;
            b.host_free(0, alloc.host)?;
        }
    }
    Ok(())
}

/// Registration flags reach `cuMemHostRegister`, and the mapped view is the host address (UVA).
/// (The registration rules are the contract's.)
fn register_and_unregister(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let mut buffer = vec![0u8; 8192];
    let host = NonNull::new(buffer.as_mut_ptr()).ok_or("null Vec")?;
    // SAFETY: `buffer` outlives the registrations (each undone below before it drops).
    unsafe {
        let device = b.host_register(
            0,
            host,
            buffer.len(),
            HostRegisterFlags {
                portable: true,
                mapped: true,
            },
        )?;
        let seen: u32 = mock.call("mock_last_register_flags")?;
        ensure(seen == 0x3, || {
            format!("register flags {seen:#x}, expected PORTABLE|DEVICEMAP")
        })?;
        ensure(device == Some(DevicePtr(host.as_ptr() as u64)), || {
            format!("device view {device:?}")
        })?;
        b.host_unregister(0, host)?;
        b.host_register(0, host, buffer.len(), HostRegisterFlags::default())?;
        let seen: u32 = mock.call("mock_last_register_flags")?;
        ensure(seen == 0, || format!("plain register flags {seen:#x}"))?;
        b.host_unregister(0, host)?;
    }
    Ok(())
}

/// Streams are created blocking (flags 0, so the legacy default stream orders them), events
/// with `CU_EVENT_DISABLE_TIMING` exactly when untimed. (Their behaviour is the contract's.)
fn streams_and_events(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let stream = b.stream_create(0)?;
    let flags: u32 = mock.call("mock_last_stream_flags")?;
    ensure(flags == 0, || {
        format!("stream flags {flags}, expected 0 (blocking)")
    })?;
    let untimed = b.event_create(0, false)?;
    let flags: u32 = mock.call("mock_last_event_flags")?;
    ensure(flags == 0x2, || {
        format!("untimed event flags {flags:#x}, expected DISABLE_TIMING")
    })?;
    let timed = b.event_create(0, true)?;
    let flags: u32 = mock.call("mock_last_event_flags")?;
    ensure(flags == 0, || format!("timed event flags {flags:#x}"))?;
    // SAFETY: every handle is idle and destroyed once.
    unsafe {
        b.event_destroy(0, untimed)?;
        b.event_destroy(0, timed)?;
        b.stream_destroy(0, stream)?;
    }
    Ok(())
}

fn every_thread_gets_the_context_current(mock: &Mock) -> Result<(), Failed> {
    let b = Arc::new(mock.backend()?);
    let mut workers = Vec::new();
    for device in [0usize, 1, 0, 1] {
        let b = Arc::clone(&b);
        // The mock's current context is thread local and starts empty on each new thread.
        workers.push(std::thread::spawn(move || -> Result<(), String> {
            let p = b.alloc(device, 64).map_err(|e| e.to_string())?;
            let data = [device as u8; 64];
            let mut back = [0u8; 64];
            // SAFETY: 64-byte host arrays and a 64-byte allocation of this device.
            unsafe {
                b.copy_htod(device, p, data.as_ptr(), 64)
                    .map_err(|e| e.to_string())?;
                b.copy_dtoh(device, back.as_mut_ptr(), p, 64)
                    .map_err(|e| e.to_string())?;
                // The other device's context must not see this device's memory.
                let other = 1 - device;
                if b.copy_dtoh(other, back.as_mut_ptr(), p, 64).is_ok() {
                    return Err(format!(
                        "device {other} read device {device}'s memory: wrong context current"
                    ));
                }
                b.free(device, p).map_err(|e| e.to_string())?;
            }
            if back != data {
                Err("round trip mismatch".into())
            } else {
                Ok(())
            }
        }));
    }
    for w in workers {
        w.join().map_err(|_| "worker panicked")??;
    }
    Ok(())
}

fn dropping_releases_primary_contexts(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    ensure(mock.call_with("mock_primary_refs", 0)? == 0, || {
        "context retained before first use".into()
    })?;
    b.mem_info(0)?;
    b.mem_info(1)?;
    b.mem_info(1)?;
    let refs = (
        mock.call_with("mock_primary_refs", 0)?,
        mock.call_with("mock_primary_refs", 1)?,
    );
    ensure(refs == (1, 1), || {
        format!("primary context references {refs:?}, expected one per used device")
    })?;
    drop(b);
    let refs = (
        mock.call_with("mock_primary_refs", 0)?,
        mock.call_with("mock_primary_refs", 1)?,
    );
    ensure(refs == (0, 0), || format!("after drop: {refs:?}"))
}

fn native_errors_carry_driver_text(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let data = [0u8; 16];
    // SAFETY: the device address is deliberately not allocated; the mock checks ranges and
    // returns CUDA_ERROR_INVALID_VALUE without touching it.
    match unsafe { b.copy_htod(0, DevicePtr(0x10), data.as_ptr(), 16) } {
        Err(Error::Native {
            call: "cuMemcpyHtoD_v2",
            code: 1,
            code_name,
            description,
            ..
        }) => ensure(
            code_name == "CUDA_ERROR_INVALID_VALUE" && description == "invalid argument",
            || format!("{code_name}: {description}"),
        ),
        other => Err(format!("expected a Native error, got {other:?}").into()),
    }
}

fn old_driver(mock: &Mock) -> Result<(), Failed> {
    mock.set_pools(true)?;
    let b = mock.backend()?;
    let driver = b.driver();
    ensure(driver.driver_get_version()? == 10020, || {
        "not the old mock".into()
    })?;
    ensure(
        !driver.has("cuMemAllocAsync") && driver.has("cuDevicePrimaryCtxRelease"),
        || format!("{:?}", driver.symbol_presence()),
    )?;
    ensure(!b.uses_stream_ordered_alloc(0)?, || {
        "stream-ordered allocation chosen without the symbols".into()
    })?;
    // SAFETY: the symbol is missing, so nothing reaches a driver.
    match unsafe { driver.mem_alloc_async(64, std::ptr::null_mut()) } {
        Err(Error::MissingSymbol {
            symbol: "cuMemAllocAsync",
            feature,
            ..
        }) => ensure(feature.contains("stream-ordered"), || feature.to_string())?,
        other => return Err(format!("expected MissingSymbol, got {other:?}").into()),
    }
    let p = b.alloc(0, 64)?;
    // SAFETY: allocated above, unused.
    unsafe { b.free(0, p)? };
    drop(b);
    ensure(mock.call_with("mock_primary_refs", 0)? == 0, || {
        "the 7.0 release export was not used".into()
    })
}

/// `gpu_mem_cuda::open()` honours `GPU_MEM_CUDA_LIBRARY` (checked in a child process, because
/// setting the variable in this multi-threaded one would be unsound).
fn open_through_env(library: &Path) -> Result<(), Failed> {
    let output = Command::new(std::env::current_exe()?)
        .env(CHILD_VAR, library)
        .env("GPU_MEM_CUDA_LIBRARY", library)
        .args(["--exact", "child_open_through_env"])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure(
        output.status.success() && stdout.contains("1 passed"),
        || {
            format!(
                "child failed ({}):\n{stdout}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        },
    )
}

fn child_open_through_env(library: &Path) -> Result<(), Failed> {
    let backend = gpu_mem_cuda::open()?;
    ensure(
        backend.kind() == BackendKind::Cuda && backend.device_count() == 2,
        || format!("{backend:?}"),
    )?;
    let probe = gpu_mem_cuda::probe()?;
    ensure(
        probe.library == library.to_string_lossy() && probe.device_count == 2,
        || format!("{probe:?}"),
    )
}

fn lost_fault(result: Result<impl std::fmt::Debug, Error>, what: &str) -> Result<String, Failed> {
    match result {
        Err(Error::DeviceLost {
            device: 0,
            fault,
            recovery,
            ..
        }) if recovery.contains("reset_device") => Ok(fault),
        other => Err(format!("{what}: expected DeviceLost on device 0, got {other:?}").into()),
    }
}

/// CUDA_ERROR_ILLEGAL_ADDRESS at a stream synchronisation destroys the context: the stream
/// reports an async failure (its work will never run, so its buffers may go), every later call
/// on the device is DeviceLost naming the original fault (not a bare 700), releases still
/// succeed, the other device is unaffected, and a reset brings the device back.
fn device_fault_loses_the_device_until_reset(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let stream = b.stream_create(0)?;
    let event = b.event_create(0, false)?;
    let dev = b.alloc(0, 256)?;
    let pinned = b.host_alloc(0, 256, HostAllocFlags::default())?;
    let other = b.alloc(1, 256)?;
    mock.call_with("mock_fail_next_sync", 700)?;
    // SAFETY: the stream came from this backend on device 0 and is live.
    match unsafe { b.stream_synchronize(0, stream) } {
        Err(Error::AsyncFailure { reason, .. })
            if reason.contains("CUDA_ERROR_ILLEGAL_ADDRESS") => {}
        other => return Err(format!("the faulting synchronisation gave {other:?}").into()),
    }
    ensure(b.device_lost(0)?.is_some(), || {
        "device 0 not marked lost".into()
    })?;
    let fault = lost_fault(b.alloc(0, 64), "alloc after the fault")?;
    ensure(
        fault.contains("cuStreamSynchronize") && fault.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        || format!("the fault does not name the original error: {fault}"),
    )?;
    lost_fault(b.mem_info(0), "mem_info after the fault")?;
    lost_fault(b.stream_create(0), "stream_create after the fault")?;
    // Synchronisations keep reporting the fault as the work's failure.
    // SAFETY: as above.
    match unsafe { b.stream_synchronize(0, stream) } {
        Err(Error::AsyncFailure { reason, .. }) if reason.contains("is lost") => {}
        other => return Err(format!("a later synchronisation gave {other:?}").into()),
    }
    ensure(b.device_lost(1)?.is_none(), || {
        "device 1 marked lost too".into()
    })?;
    // SAFETY: device 1's allocation is live; freed once.
    unsafe { b.free(1, other)? };
    // A reset is refused while objects of the old context are alive.
    // SAFETY: nothing else in this test process uses device 0 of this mock copy.
    match unsafe { b.reset_device(0) } {
        Err(Error::InvalidArgument { reason, .. }) if reason.contains("alive") => {}
        other => return Err(format!("reset with live objects: {other:?}").into()),
    }
    // Releases succeed without the driver (the dead context took the objects with it).
    // SAFETY: each handle is released once.
    unsafe {
        b.free(0, dev)?;
        b.host_free(0, pinned.host)?;
        b.event_destroy(0, event)?;
        b.stream_destroy(0, stream)?;
    }
    // SAFETY: as above.
    unsafe { b.reset_device(0)? };
    ensure(mock.call_with("mock_resets", 0)? == 1, || {
        "cuDevicePrimaryCtxReset was not called once".into()
    })?;
    ensure(b.device_lost(0)?.is_none(), || {
        "still lost after reset".into()
    })?;
    let p = b.alloc(0, 64)?;
    // SAFETY: allocated just above.
    unsafe { b.free(0, p)? };
    Ok(())
}

/// A release that is the first call to meet a device fault still succeeds (the dead context
/// took the object with it), and takes the object out of the bookkeeping, so the reset that
/// recovers the device is not refused for it.
fn a_fault_first_seen_by_a_release_still_releases(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let dev = b.alloc(0, 256)?;
    let mut buffer = vec![0u8; 8192];
    let host = NonNull::new(buffer.as_mut_ptr()).ok_or("null Vec")?;
    // SAFETY: `buffer` outlives the registration (released below).
    unsafe { b.host_register(0, host, buffer.len(), HostRegisterFlags::default())? };
    mock.call_with("mock_fault_device0", 700)?;
    // SAFETY: registered above, unregistered once, unused by any work.
    unsafe { b.host_unregister(0, host) }
        .map_err(|e| format!("unregistering when the fault surfaced: {e}"))?;
    ensure(b.device_lost(0)?.is_some(), || {
        "the fault the release met did not mark the device lost".into()
    })?;
    // SAFETY: allocated above, freed once.
    unsafe { b.free(0, dev)? };
    // SAFETY: nothing of device 0 is alive any more.
    unsafe { b.reset_device(0) }.map_err(|e| format!("reset after the releases: {e}"))?;
    ensure(b.device_lost(0)?.is_none(), || {
        "still lost after reset".into()
    })?;
    drop(buffer);
    Ok(())
}

/// Errors that say nothing about the stream's work (misuse, a destroyed context) are not
/// async failures: core then keeps the work's buffers alive rather than free them under it.
fn misuse_at_synchronisation_is_not_an_async_failure(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let stream = b.stream_create(0)?;
    for code in [709, 4] {
        mock.call_with("mock_fail_next_sync", code)?;
        // SAFETY: the stream is live.
        match unsafe { b.stream_synchronize(0, stream) } {
            Err(Error::Native { code: c, .. }) if c == i64::from(code) => {}
            other => return Err(format!("code {code} at synchronisation gave {other:?}").into()),
        }
    }
    ensure(b.device_lost(0)?.is_none(), || {
        "a non-fault marked the device lost".into()
    })?;
    // SAFETY: destroyed once.
    unsafe { b.stream_destroy(0, stream)? };
    Ok(())
}

/// A caller's own current context is put back after every backend call.
fn callers_context_is_restored(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let driver = b.driver();
    // The caller's context: device 1's primary context, retained by the caller itself.
    let handle = driver.device_get(1)?;
    let theirs = driver.primary_ctx_retain(handle)?;
    // SAFETY: retained just above.
    unsafe { driver.ctx_set_current(theirs)? };
    let p = b.alloc(0, 64)?;
    let now = driver.ctx_get_current()?;
    ensure(now == theirs, || {
        format!("alloc left context {now:?} current instead of the caller's {theirs:?}")
    })?;
    // SAFETY: allocated above on device 0.
    unsafe { b.free(0, p)? };
    ensure(driver.ctx_get_current()? == theirs, || {
        "free did not restore the caller's context".into()
    })?;
    // A thread without a context keeps the device's, so the next call needs no switch.
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(), String> {
            let p = b.alloc(0, 64).map_err(|e| e.to_string())?;
            let current = driver.ctx_get_current().map_err(|e| e.to_string())?;
            // SAFETY: allocated above on device 0.
            unsafe { b.free(0, p) }.map_err(|e| e.to_string())?;
            if current.is_null() {
                Err("no context left current on a thread that had none".into())
            } else {
                Ok(())
            }
        })
        .join()
        .map_err(|_| "worker panicked".to_string())?
    })?;
    // SAFETY: balances the caller's retain; unbinding first.
    unsafe {
        driver.ctx_set_current(std::ptr::null_mut())?;
        driver.primary_ctx_release(handle)?;
    }
    Ok(())
}

fn host_register_unsupported_is_reported(mock: &Mock) -> Result<(), Failed> {
    // SAFETY: mock_set_host_register_supported(int) returns nothing.
    let set = unsafe {
        mock.library
            .get::<unsafe extern "C" fn(i32)>("mock_set_host_register_supported")
    }?;
    // SAFETY: as above.
    unsafe { set(0) };
    let b = mock.backend()?;
    let mut host = vec![0u8; 4096];
    let ptr = NonNull::new(host.as_mut_ptr()).ok_or("null vec")?;
    // SAFETY: the vector outlives the (refused) registration.
    match unsafe { b.host_register(0, ptr, 4096, HostRegisterFlags::default()) } {
        Err(Error::NotSupportedByBackend { reason, .. })
            if reason.contains("HOST_REGISTER_SUPPORTED") => {}
        other => return Err(format!("register on an unsupported device: {other:?}").into()),
    }
    ensure(
        mock.call::<u32>("mock_last_register_flags")? == u32::MAX,
        || "cuMemHostRegister was called anyway".into(),
    )
}

/// Every backend over one library shares one driver: opened once, never unloaded.
fn driver_is_loaded_once(mock: &Mock) -> Result<(), Failed> {
    let first = gpu_mem_cuda::CudaDriver::load_from(&mock.path)?;
    let second = gpu_mem_cuda::CudaDriver::load_from(&mock.path)?;
    ensure(std::ptr::eq(first, second), || {
        "two driver instances for one library".into()
    })?;
    let a = mock.backend()?;
    drop(a);
    let b = mock.backend()?;
    ensure(std::ptr::eq(b.driver(), first), || {
        "a backend got its own driver instance".into()
    })
}
