//! Several GPUs, managed memory, IPC and the memory pool against the stand-in runtime (which can
//! report a second GPU agent with its own VRAM pool, see `mock_hsa_set_gpu_count`). The stand-in
//! checks the backend's side: access grants per allocation and agent, the agents named for each
//! side of a copy, the full allocation length for IPC, detaching exactly what was attached.

use super::{Mock, Stats, ensure, pattern, pinned};
use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::backend::{
    IpcMemory, Launch, ManagedMemory, Memory, PeerAccess, Streams, Transfer,
};
use gpu_mem_core::{Backend, Error};
use gpu_mem_roc::RocBackend;
use libtest_mimic::Failed;

/// The stand-in's GPU agent handles (device 0 and device 1).
const GPU0_AGENT: u64 = 2;
const GPU1_AGENT: u64 = 3;
/// The backend's staging size for copies through host memory.
const CHUNK: usize = 4 << 20;

/// Two GPUs while alive; back to one (and peer access allowed) when dropped, even on failure.
pub(crate) struct TwoGpus<'a>(&'a Mock);

impl<'a> TwoGpus<'a> {
    pub(crate) fn new(mock: &'a Mock) -> Result<TwoGpus<'a>, Failed> {
        mock.set_gpu_count(2)?;
        Ok(TwoGpus(mock))
    }
}

impl Drop for TwoGpus<'_> {
    fn drop(&mut self) {
        let _ = self.0.set_gpu_count(1);
        let _ = self.0.set_peer_never(false);
    }
}

impl Mock {
    fn set_gpu_count(&self, n: i32) -> Result<(), Failed> {
        let f: unsafe extern "C" fn(i32) = self.control("mock_hsa_set_gpu_count")?;
        // SAFETY: plain integer argument.
        unsafe { f(n) };
        Ok(())
    }

    fn set_peer_never(&self, never: bool) -> Result<(), Failed> {
        let f: unsafe extern "C" fn(i32) = self.control("mock_hsa_set_peer_never")?;
        // SAFETY: plain integer argument.
        unsafe { f(i32::from(never)) };
        Ok(())
    }

    fn lock_calls(&self) -> Result<i32, Failed> {
        let f: unsafe extern "C" fn() -> i32 = self.control("mock_hsa_lock_calls")?;
        // SAFETY: no arguments.
        Ok(unsafe { f() })
    }

    /// Whether the stand-in lets `agent` access the allocation holding `addr` now.
    fn can_reach(&self, agent: u64, addr: u64) -> Result<bool, Failed> {
        let f: unsafe extern "C" fn(u64, usize) -> i32 = self.control("mock_hsa_can_reach")?;
        // SAFETY: plain integer arguments; the stand-in only looks the address up.
        Ok(unsafe { f(agent, addr as usize) } != 0)
    }
}

/// Fills `n` bytes of device memory with `pattern(n, seed)` through a synchronous copy.
fn upload(b: &RocBackend, device: usize, n: usize, seed: u8) -> Result<DevicePtr, Failed> {
    let data = pattern(n, seed);
    let d = b.alloc(device, n)?;
    // SAFETY: `d` is a live allocation of `n` bytes; `data` holds `n` bytes.
    unsafe { b.copy_htod(device, d, data.as_ptr(), n) }?;
    Ok(d)
}

/// The `n` bytes at `d` on `device`.
fn download(b: &RocBackend, device: usize, d: DevicePtr, n: usize) -> Result<Vec<u8>, Failed> {
    let mut out = vec![0u8; n];
    // SAFETY: `d` lies in a live allocation of `n` bytes; `out` is writable for `n`.
    unsafe { b.copy_dtoh(device, out.as_mut_ptr(), d, n) }?;
    Ok(out)
}

fn copies(mock: &Mock) -> Result<i32, Failed> {
    Ok(mock.stats()?.copies_started)
}

fn no_bad_agents(before: &Stats, mock: &Mock) -> Result<(), Failed> {
    let after = mock.stats()?;
    ensure(after.bad_agent_copies == before.bad_agent_copies, || {
        "an async copy named an agent that does not own its side".into()
    })
}

pub fn peer_access_and_copies(mock: &Mock) -> Result<(), Failed> {
    let _two = TwoGpus::new(mock)?;
    let start = mock.stats()?;
    let b = mock.backend()?;
    ensure(b.device_count() == 2, || {
        format!("{} devices", b.device_count())
    })?;
    ensure(b.can_access_peer(0, 1)? && b.can_access_peer(1, 0)?, || {
        "peers with DISALLOWED_BY_DEFAULT pools must be reported accessible".into()
    })?;
    mock.set_peer_never(true)?;
    ensure(!b.can_access_peer(0, 1)?, || {
        "a NEVER_ALLOWED peer pool was reported accessible".into()
    })?;
    ensure(b.can_access_peer(0, 0)?, || {
        "a device reaches its own pool".into()
    })?;
    ensure(
        matches!(
            b.enable_peer_access(0, 1),
            Err(Error::NotSupportedByBackend { .. })
        ),
        || "enabling a never-allowed peer must be refused".into(),
    )?;
    mock.set_peer_never(false)?;
    ensure(b.can_access_peer(2, 0).is_err(), || {
        "device 2 does not exist".into()
    })?;

    // Before any grant: copies between the GPUs are staged through host memory (two copies per
    // chunk), and neither GPU reaches the other's memory.
    let n = CHUNK + 12_345; // two chunks
    let a = upload(&b, 1, n, 7)?;
    let dst = b.alloc(0, n)?;
    ensure(!mock.can_reach(GPU0_AGENT, a.0)?, || {
        "GPU 0 reaches GPU 1's memory without a grant".into()
    })?;
    let c0 = copies(mock)?;
    // SAFETY: both ranges lie in live allocations of their devices.
    unsafe { b.copy_peer(0, dst, 1, a, n) }?;
    ensure(copies(mock)? - c0 == 4, || {
        format!(
            "staged copy of 2 chunks took {} copies",
            copies(mock).unwrap_or(-1) - c0
        )
    })?;
    ensure(download(&b, 0, dst, n)? == pattern(n, 7), || {
        "staged peer copy: wrong data".into()
    })?;

    // Staged on a stream, then read back on the same stream: the stand-in's copies are slow, so
    // a missing dependency shows up as wrong data.
    let host = pinned(&b, n, false)?;
    let s = b.stream_create(0)?;
    let a2 = upload(&b, 1, n, 9)?;
    // SAFETY: the buffers stay alive and untouched until the stream is synchronised.
    unsafe {
        b.copy_peer_async(0, dst, 1, a2, n, s)?;
        b.copy_dtoh_async(0, host.as_ptr(), dst, n, s)?;
        b.stream_synchronize(0, s)?;
    }
    // SAFETY: the stream finished; `host` holds `n` bytes.
    let got = unsafe { std::slice::from_raw_parts(host.as_ptr(), n) };
    ensure(got == pattern(n, 9).as_slice(), || {
        "staged async peer copy ran out of order".into()
    })?;
    ensure(mock.stats()?.live_system == start.live_system + 2, || {
        "the async copy's staging buffer outlived its copies (only the host buffer and the sync bounce buffer should be live)".into()
    })?;

    // Enabling 0 -> 1 grants GPU 0 every existing and every later allocation of GPU 1, and
    // nothing of GPU 0 to GPU 1.
    b.enable_peer_access(0, 1)?;
    b.enable_peer_access(0, 1)?; // twice is not an error
    let later = b.alloc(1, 4096)?;
    for (what, addr) in [("existing", a.0), ("later", later.0)] {
        ensure(mock.can_reach(GPU0_AGENT, addr)?, || {
            format!("GPU 0 cannot reach an {what} allocation of GPU 1 after enabling")
        })?;
        ensure(mock.can_reach(GPU1_AGENT, addr)?, || {
            "the grant took the owner's access away".into()
        })?;
    }
    ensure(!mock.can_reach(GPU1_AGENT, dst.0)?, || {
        "enabling 0 -> 1 granted GPU 1 access to GPU 0".into()
    })?;
    // One direction only: still staged (each agent must reach both buffers).
    let c0 = copies(mock)?;
    // SAFETY: as above.
    unsafe { b.copy_peer(0, dst, 1, a, 4096) }?;
    ensure(copies(mock)? - c0 == 2, || {
        "one-way access must stage".into()
    })?;

    // Both directions: one direct copy between the GPU agents, sync and async.
    b.enable_peer_access(1, 0)?;
    ensure(mock.can_reach(GPU1_AGENT, dst.0)?, || {
        "GPU 1 cannot reach GPU 0's existing allocation".into()
    })?;
    let c0 = copies(mock)?;
    // SAFETY: as above.
    unsafe { b.copy_peer(0, dst, 1, a, n) }?;
    ensure(copies(mock)? - c0 == 1, || {
        "mutual access must copy directly".into()
    })?;
    ensure(download(&b, 0, dst, n)? == pattern(n, 7), || {
        "direct peer copy: wrong data".into()
    })?;
    // SAFETY: as above.
    unsafe {
        b.copy_peer_async(0, dst, 1, a2, n, s)?;
        b.copy_dtoh_async(0, host.as_ptr(), dst, n, s)?;
        b.stream_synchronize(0, s)?;
    }
    // SAFETY: the stream finished.
    let got = unsafe { std::slice::from_raw_parts(host.as_ptr(), n) };
    ensure(got == pattern(n, 9).as_slice(), || {
        "direct async peer copy ran out of order".into()
    })?;
    no_bad_agents(&start, mock)?;
    // SAFETY: everything is idle and freed once.
    unsafe {
        b.stream_destroy(0, s)?;
        b.host_free(0, host)?;
        for (d, p) in [(1, a), (1, a2), (1, later), (0, dst)] {
            b.free(d, p)?;
        }
    }
    Ok(())
}

pub fn managed_memory(mock: &Mock) -> Result<(), Failed> {
    let _two = TwoGpus::new(mock)?;
    let b = mock.backend()?;
    let n = 3 * 4096 + 5;
    ensure(
        matches!(b.managed_alloc(0, 0), Err(Error::InvalidArgument { .. })),
        || "an empty managed allocation must be refused".into(),
    )?;
    let m = b.managed_alloc(0, n)?;
    let addr = m.host.as_ptr() as u64;
    ensure(m.device == Some(DevicePtr(addr)), || {
        format!(
            "managed memory must keep its address: {:?} vs {addr:#x}",
            m.device
        )
    })?;
    ensure(
        mock.can_reach(GPU0_AGENT, addr)? && mock.can_reach(GPU1_AGENT, addr)?,
        || "managed memory must be reachable from every GPU".into(),
    )?;
    // Written by the host, read by a copy engine as host memory of the stream's device (no
    // page-locking needed), and by the other device too.
    let data = pattern(n, 21);
    // SAFETY: `m.host` is a live allocation of `n` bytes owned by this test.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m.host.as_ptr(), n) };
    let locks = mock.lock_calls()?;
    for device in [0, 1] {
        let d = b.alloc(device, n)?;
        let s = b.stream_create(device)?;
        // SAFETY: both ranges live and untouched until the stream is synchronised.
        unsafe {
            b.copy_htod_async(device, d, m.host.as_ptr(), n, s)?;
            b.stream_synchronize(device, s)?;
            b.stream_destroy(device, s)?;
        }
        ensure(download(&b, device, d, n)? == data, || {
            format!("device {device} read wrong managed data")
        })?;
        // SAFETY: idle, freed once.
        unsafe { b.free(device, d) }?;
    }
    ensure(mock.lock_calls()? == locks, || {
        "managed memory must not need page-locking".into()
    })?;
    // Each kind of host memory is freed by its own call only.
    let pinned_mem = pinned(&b, 4096, false)?;
    // SAFETY: refused calls free nothing; the successful ones free each allocation once.
    unsafe {
        ensure(b.host_free(0, m.host).is_err(), || {
            "host_free accepted managed memory".into()
        })?;
        ensure(b.managed_free(0, pinned_mem).is_err(), || {
            "managed_free accepted host_alloc memory".into()
        })?;
        ensure(b.managed_free(1, m.host).is_err(), || {
            "managed_free accepted another device's allocation".into()
        })?;
        b.managed_free(0, m.host)?;
        b.host_free(0, pinned_mem)?;
    }
    Ok(())
}

pub fn ipc_handles(mock: &Mock) -> Result<(), Failed> {
    let _two = TwoGpus::new(mock)?;
    let b = mock.backend()?;
    b.enable_peer_access(1, 0)?;
    let n = 10_000; // not a multiple of the 4 KiB granule
    let a = upload(&b, 0, n, 33)?;
    let handle = b.ipc_get_handle(0, a)?;
    ensure(handle.data.len() == 32, || {
        format!(
            "{}-byte handle; hsa_amd_ipc_memory_t is 32",
            handle.data.len()
        )
    })?;
    ensure(handle.bytes == 12_288, || {
        format!(
            "handle length {}: must be the full (granule-rounded) allocation",
            handle.bytes
        )
    })?;
    ensure(b.ipc_get_handle(0, DevicePtr(a.0 + 256)).is_err(), || {
        "only allocation bases can be exported".into()
    })?;
    ensure(b.ipc_get_handle(1, a).is_err(), || {
        "exported through the wrong device".into()
    })?;
    let mapped = b.ipc_open_handle(0, &handle)?;
    ensure(mapped != a, || "the stand-in maps at a new address".into())?;
    ensure(mock.stats()?.live_ipc_mappings == 1, || {
        "one mapping expected".into()
    })?;
    ensure(
        mock.can_reach(GPU0_AGENT, mapped.0)? && mock.can_reach(GPU1_AGENT, mapped.0)?,
        || "the mapping must be reachable by its device and the peers enabled for it".into(),
    )?;
    // The same memory through both addresses.
    ensure(download(&b, 0, mapped, n)? == pattern(n, 33), || {
        "mapping reads wrong data".into()
    })?;
    let update = pattern(n, 44);
    // SAFETY: the mapping covers `n` bytes; `update` holds `n`.
    unsafe { b.copy_htod(0, mapped, update.as_ptr(), n) }?;
    ensure(download(&b, 0, a, n)? == update, || {
        "writes through the mapping do not reach the exported allocation".into()
    })?;
    // SAFETY: refused calls touch nothing.
    unsafe {
        ensure(b.free(0, mapped).is_err(), || {
            "free accepted an IPC mapping".into()
        })?;
        ensure(b.ipc_close_handle(0, a).is_err(), || {
            "closed an allocation that is not a mapping".into()
        })?;
    }
    let mut short = handle.clone();
    short.data.truncate(16);
    ensure(
        matches!(
            b.ipc_open_handle(0, &short),
            Err(Error::InvalidArgument { .. })
        ),
        || "a 16-byte handle must be refused".into(),
    )?;
    // The runtime maps the whole allocation whatever length the handle claims (as ROCr does):
    // a handle claiming more than that must be refused, and its mapping given back.
    let mut forged = handle.clone();
    forged.bytes = handle.bytes * 4;
    ensure(b.ipc_open_handle(0, &forged).is_err(), || {
        "a handle claiming more bytes than its allocation has was opened".into()
    })?;
    ensure(mock.stats()?.live_ipc_mappings == 1, || {
        "the refused attach was left mapped".into()
    })?;
    let memory = b.mem_info(0)?;
    ensure(memory.total - memory.free == n as u64, || {
        format!("the mapping counted as device memory use: {memory:?}")
    })?;
    // Attached again at the same address (the stand-in, like CUDA's driver, hands out the one
    // mapping again): each attach is closed once, and the first close leaves it usable.
    let again = b.ipc_open_handle(0, &handle)?;
    ensure(again == mapped, || format!("{again:?} is not {mapped:?}"))?;
    // SAFETY: one attach of the mapping stays open while it is read below.
    unsafe { b.ipc_close_handle(0, again) }?;
    ensure(mock.stats()?.live_ipc_mappings == 1, || {
        "the first close of a mapping attached twice detached both".into()
    })?;
    ensure(download(&b, 0, mapped, n)? == update, || {
        "the mapping reads wrong data after one of two closes".into()
    })?;
    // SAFETY: the mapping is idle and closed once; the allocation freed once.
    unsafe {
        b.ipc_close_handle(0, mapped)?;
        ensure(b.ipc_close_handle(0, mapped).is_err(), || {
            "closed twice".into()
        })?;
        b.free(0, a)?;
    }
    ensure(mock.stats()?.live_ipc_mappings == 0, || {
        "mapping left attached".into()
    })?;
    Ok(())
}

/// HSA has no stream-ordered allocator and the backend adds no pool of its own: it hands out no
/// pool capability, the core's pool calls report `NotSupportedByBackend`, and its stream-ordered
/// allocation falls back to an ordinary `alloc` (checked through the core's own types over this
/// backend).
pub fn no_memory_pool(mock: &Mock) -> Result<(), Failed> {
    let b = std::sync::Arc::new(mock.backend()?);
    ensure(b.pool().is_none(), || {
        "the ROC backend hands out a stream-ordered pool".into()
    })?;
    let unsupported = |r: gpu_mem_core::Result<()>, what: &str| {
        ensure(
            matches!(
                &r,
                Err(Error::NotSupportedByBackend {
                    feature: "memory pools",
                    ..
                })
            ),
            || format!("{what}: {r:?}"),
        )
    };
    let pool = gpu_mem_core::Device::new(b.clone(), 0)?.memory_pool();
    unsupported(pool.usage().map(drop), "MemoryPool::usage")?;
    unsupported(
        pool.set_release_threshold(0),
        "MemoryPool::set_release_threshold",
    )?;
    unsupported(pool.trim(0), "MemoryPool::trim")?;

    let vram = mock.stats()?.live_vram;
    let dev = gpu_mem_core::Device::new(b.clone(), 0)?;
    let stream = dev.stream()?;
    let array = stream.device_array::<f32>(&[1000], gpu_mem_core::Order::C)?;
    ensure(mock.stats()?.live_vram == vram + 1, || {
        "the fallback must allocate from the device pool".into()
    })?;
    ensure(!stream.free(array)?, || {
        "stream.free must report that the memory is freed the ordinary way".into()
    })?;
    stream.synchronize()?;
    ensure(mock.stats()?.live_vram == vram, || {
        "the fallback allocation was not freed".into()
    })?;
    Ok(())
}

/// Memory pinned for device 0 only (not portable) is not reachable by device 1's GPU: a
/// synchronous copy to device 1 goes through a bounce buffer and succeeds, and an asynchronous
/// one is refused with an error naming the rule.
pub fn another_devices_pinned_memory(mock: &Mock) -> Result<(), Failed> {
    let _two = TwoGpus::new(mock)?;
    let b = mock.backend()?;
    let n = 4096;
    let host = b.host_alloc(0, n, Default::default())?;
    let device1 = b.alloc(1, n)?;
    let stream = b.stream_create(1)?;
    // SAFETY: both buffers hold `n` bytes and outlive the copies.
    let sync = unsafe { b.copy_htod(1, device1, host.host.as_ptr(), n) };
    // SAFETY: as above; refused before anything is enqueued.
    let refused = unsafe { b.copy_htod_async(1, device1, host.host.as_ptr(), n, stream) };
    // SAFETY: nothing uses them any more.
    unsafe {
        b.stream_destroy(1, stream)?;
        b.free(1, device1)?;
        b.host_free(0, host.host)?;
    }
    ensure(sync.is_ok(), || {
        format!("a copy to device 1 from device 0's pinned memory failed: {sync:?}")
    })?;
    ensure(
        matches!(&refused, Err(Error::InvalidPointer { reason, .. }) if reason.contains("this device")),
        || format!("an async copy from another device's pinned memory: {refused:?}"),
    )
}

/// A kernel on one GPU given another GPU's memory: refused until peer access to it is enabled
/// (the memory was never granted to the launching GPU's agent, and the kernel would fault).
pub fn kernel_arguments_of_a_peer_need_peer_access(mock: &Mock) -> Result<(), Failed> {
    use gpu_mem_core::kernel::LaunchConfig;
    let _two = TwoGpus::new(mock)?;
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let args = super::launch::args(array, record);
    let config = LaunchConfig::new(1, 64);
    // SAFETY: refused before any dispatch.
    match unsafe { b.launch(1, &super::launch::kernel(), &config, &args, None) } {
        Err(Error::InvalidLaunch { reason, .. }) => ensure(
            reason.contains("argument 0 is memory of device 0") && reason.contains("peer access"),
            || reason.clone(),
        )?,
        other => return Err(format!("expected InvalidLaunch, got {other:?}").into()),
    }
    b.enable_peer_access(1, 0)?;
    // Past the check now. (The stand-in runtime has no queue for its second GPU, so the launch
    // still fails, later, for that.)
    // SAFETY: the kernel stays inside its arguments (the stand-in runs no code).
    let enabled = unsafe { b.launch(1, &super::launch::kernel(), &config, &args, None) };
    ensure(
        !matches!(&enabled, Err(Error::InvalidLaunch { reason, .. }) if reason.contains("peer access")),
        || format!("refused with peer access enabled: {enabled:?}"),
    )?;
    // SAFETY: the launch completed; each allocation is freed once.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}
