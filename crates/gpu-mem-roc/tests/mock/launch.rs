//! `Launch::launch` against the stand-in runtime: the kernel is compiled by the real hiprtc
//! for the stand-in GPU's ISA (gfx90a); loading, kernel symbols, kernarg buffers, the AQL queue
//! and its packet processor are the stand-in's, which logs every packet it takes (it runs no
//! GPU code, so results in memory are not checked: the packet is).

use super::{Dispatch, Mock, ensure};
use gpu_mem_core::Error;
use gpu_mem_core::backend::{DevicePtr, HostAllocFlags, StreamHandle};
use gpu_mem_core::backend::{Launch, Memory, Streams, Transfer};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig};
use libtest_mimic::Failed;
use std::any::TypeId;

/// Why launch tests cannot run here (no hiprtc, or one that cannot target gfx90a), if so.
pub fn unavailable() -> Option<String> {
    if let Err(e) = gpu_mem_roc::driver::Hip::shared() {
        return Some(format!("hiprtc not installed: {e}"));
    }
    match gpu_mem_roc::hiprtc::supported_isas() {
        Ok(list) if list.isas.iter().any(|i| i == "gfx90a") => None,
        Ok(list) => Some(format!("hiprtc cannot target gfx90a ({:?})", list.isas)),
        Err(e) => Some(format!("cannot list hiprtc's ISAs: {e}")),
    }
}

/// A kernel with a 2-d array, a record pointer, a scalar and 256 bytes of static LDS.
const SOURCE: &str = r#"
#include "gpu_mem.h"
extern "C" __global__ void scale2d(gm_array<float, 2> a, const float* factor, float offset) {
    GM_SHARED float tile[64];
    float* extra = gm_dynamic_shared<float>();
    gm_idx2 p = grid(2);
    int t = threadIdx.x % 64;
    tile[t] = factor[0];
    extra[t] = offset;
    syncthreads();
    if (p.y < a.shape[0] && p.x < a.shape[1]) {
        a(p.y, p.x) = a(p.y, p.x) * tile[t] + extra[t];
    }
}
"#;

/// Header of a dispatch packet with nothing to wait for: type, system-scope acquire and
/// release fences, no barrier bit.
const DISPATCH_HEADER: u16 = 2 | 2 << 9 | 2 << 11;
/// The barrier bit.
const BARRIER_BIT: u16 = 1 << 8;

pub fn kernel() -> Kernel {
    Kernel::new("scale2d").with_source(SOURCE, "scale2d")
}

pub fn args(array: DevicePtr, record: DevicePtr) -> Vec<LaunchArg> {
    vec![
        LaunchArg::Array {
            ptr: array,
            shape: vec![16, 40],
            strides: vec![40, 1],
            min_offset: 0,
            span_len: 640,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        LaunchArg::Record {
            ptr: record,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
        LaunchArg::Scalar {
            bytes: 1.5f32.to_ne_bytes().to_vec(),
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        },
    ]
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// The kernel descriptor fields (group, private, kernarg sizes) at the packet's kernel object.
fn descriptor(d: &Dispatch) -> Result<(u32, u32, u32), Failed> {
    let object = u64_at(&d.packet, 32);
    ensure(object != 0, || "null kernel object".into())?;
    let mut kd = [0u8; 12];
    // SAFETY: the stand-in runs in this process and its kernel objects point into code-object
    // copies it never frees; the first 12 bytes of a kernel descriptor are three u32.
    unsafe { std::ptr::copy_nonoverlapping(object as usize as *const u8, kd.as_mut_ptr(), 12) };
    Ok((u32_at(&kd, 0), u32_at(&kd, 4), u32_at(&kd, 8)))
}

fn next_dispatch(mock: &Mock, index: i32) -> Result<Dispatch, Failed> {
    mock.dispatch(index)?
        .ok_or_else(|| Failed::from(format!("dispatch {index} was not processed")))
}

/// A synchronous launch writes a complete, correct dispatch packet and kernarg segment, and
/// frees the kernarg buffer once it has completed.
pub fn dispatch_packet_and_kernargs(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let before = mock.stats()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let config = LaunchConfig::new((3, 2), (16, 8)).with_shared_bytes(256);
    // SAFETY: the stand-in runs no code; the arguments are live allocations.
    unsafe { b.launch(0, &kernel(), &config, &args(array, record), None) }?;
    let after = mock.stats()?;
    ensure(after.dispatches == before.dispatches + 1, || {
        format!(
            "{} dispatches processed",
            after.dispatches - before.dispatches
        )
    })?;
    ensure(after.live_kernarg == before.live_kernarg, || {
        "the kernarg buffer of a finished synchronous launch is still allocated".into()
    })?;
    let d = next_dispatch(mock, before.dispatches)?;
    let p = &d.packet;
    ensure(u16_at(p, 0) == DISPATCH_HEADER, || {
        format!("header {:#x}, expected {DISPATCH_HEADER:#x}", u16_at(p, 0))
    })?;
    ensure(u16_at(p, 2) == 2, || {
        format!("setup {} (dimensions)", u16_at(p, 2))
    })?;
    let workgroup = [u16_at(p, 4), u16_at(p, 6), u16_at(p, 8)];
    ensure(workgroup == [16, 8, 1], || {
        format!("workgroup {workgroup:?}")
    })?;
    // HSA grid sizes are in work-items: blocks x block size.
    let grid = [u32_at(p, 12), u32_at(p, 16), u32_at(p, 20)];
    ensure(grid == [48, 16, 1], || format!("grid {grid:?} work-items"))?;
    let (kd_group, kd_private, kd_kernarg) = descriptor(&d)?;
    ensure(kd_group >= 256, || {
        format!("static LDS {kd_group} < the kernel's 256-byte tile: not hiprtc's descriptor")
    })?;
    ensure(u32_at(p, 28) == kd_group + 256, || {
        format!(
            "group segment {} != static {kd_group} + 256 dynamic",
            u32_at(p, 28)
        )
    })?;
    ensure(u32_at(p, 24) == kd_private, || {
        format!("private segment {} != {kd_private}", u32_at(p, 24))
    })?;
    ensure(u64_at(p, 40) != 0 && u64_at(p, 56) != 0, || {
        "kernarg address and completion signal must be set".into()
    })?;
    ensure(u16_at(p, 10) == 0 && u64_at(p, 48) == 0, || {
        "reserved fields must be 0".into()
    })?;
    // Kernargs: gm_array<float, 2> (data, shape[2], strides[2]), the record pointer, the f32.
    ensure(d.kernarg_size == kd_kernarg && kd_kernarg >= 52, || {
        format!(
            "kernarg segment {} / descriptor {kd_kernarg}",
            d.kernarg_size
        )
    })?;
    let k = &d.kernarg;
    let expected = [
        (0, array.0),
        (8, 16),
        (16, 40),
        (24, 40),
        (32, 1),
        (40, record.0),
    ];
    for (at, value) in expected {
        ensure(u64_at(k, at) == value, || {
            format!(
                "kernarg bytes {at}..{}: {:#x}, expected {value:#x}",
                at + 8,
                u64_at(k, at)
            )
        })?;
    }
    ensure(k[48..52] == 1.5f32.to_ne_bytes(), || {
        format!("scalar bytes {:?}", &k[48..52])
    })?;
    println!(
        "    hiprtc descriptor: kernarg segment {kd_kernarg} B, static LDS {kd_group} B, private \
         {kd_private} B; dispatch took the mock {} us",
        (d.end_ns - d.start_ns) / 1000
    );
    let hidden = &k[52..(d.kernarg_size as usize).min(k.len())];
    ensure(hidden.iter().all(|b| *b == 0), || {
        "code object v4 hidden arguments must be zero".into()
    })?;
    // SAFETY: unused allocations.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

/// A stream launch waits (barrier-AND) for the stream's earlier async copy, a following
/// launch on the same stream relies on the queue's barrier bit, a following copy waits for the
/// kernels; kernarg buffers live until completion; the kernel loads once; dropping the backend
/// destroys its queue and executable.
pub fn stream_order_and_lifetimes(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let start = mock.stats()?;
    let n = 640 * 4;
    let host = b.host_alloc(0, n, HostAllocFlags::default())?.host;
    let (array, record) = (b.alloc(0, n)?, b.alloc(0, 4)?);
    let s = b.stream_create(0)?;
    let k = kernel();
    let config = LaunchConfig::new((3, 2), (16, 8));
    // Compiled and loaded first, so that the copy is still running when the launch is
    // submitted (a finished dependency needs no barrier packet).
    // SAFETY: the stand-in runs no code.
    unsafe { b.launch(0, &k, &config, &args(array, record), None) }?;
    let s0 = mock.stats()?;
    // SAFETY: everything stays alive until the stream is synchronised below.
    unsafe {
        b.copy_htod_async(0, array, host.as_ptr(), n, s)?;
        b.launch(0, &k, &config, &args(array, record), Some(s))?;
        b.launch(0, &k, &config, &args(array, record), Some(s))?;
        b.copy_dtoh_async(0, host.as_ptr(), array, n, s)?;
    }
    let pending = mock.stats()?;
    ensure(pending.live_kernarg == s0.live_kernarg + 2, || {
        format!(
            "{} kernarg buffers alive while both launches are pending",
            pending.live_kernarg - s0.live_kernarg
        )
    })?;
    // SAFETY: the handles came from this backend on device 0 and are live.
    unsafe { b.stream_synchronize(0, s) }?;
    let done = mock.stats()?;
    ensure(done.dispatches == s0.dispatches + 2, || {
        "two dispatches".into()
    })?;
    ensure(done.barrier_packets == s0.barrier_packets + 1, || {
        format!(
            "{} barrier-AND packets: one for the copy, none between the two launches",
            done.barrier_packets - s0.barrier_packets
        )
    })?;
    ensure(done.executables_loaded == s0.executables_loaded, || {
        format!(
            "{} more loads for two launches of a loaded kernel",
            done.executables_loaded - s0.executables_loaded
        )
    })?;
    ensure(done.live_kernarg == s0.live_kernarg, || {
        "kernarg buffers not freed after the stream completed".into()
    })?;
    let (first, second) = (
        next_dispatch(mock, s0.dispatches)?,
        next_dispatch(mock, s0.dispatches + 1)?,
    );
    let copy_in = mock.copy_end_ns(s0.copies_started)?;
    let copy_out = mock.copy_end_ns(s0.copies_started + 1)?;
    ensure(copy_in != 0 && first.start_ns >= copy_in, || {
        format!(
            "the kernel started {} ns before the copy it waits for ended",
            copy_in.saturating_sub(first.start_ns)
        )
    })?;
    ensure(second.start_ns >= first.end_ns, || {
        "the second kernel overlapped the first".into()
    })?;
    // The first waits for the copy through a barrier-AND packet; the second for the first
    // through the barrier bit (it is the queue's previous packet).
    ensure(u16_at(&first.packet, 0) & BARRIER_BIT == 0, || {
        "the first kernel's packet has the barrier bit".into()
    })?;
    ensure(u16_at(&second.packet, 0) & BARRIER_BIT != 0, || {
        "the second kernel's packet lacks the barrier bit".into()
    })?;
    ensure(copy_out >= second.end_ns, || {
        "the copy after the kernels finished before them".into()
    })?;
    // SAFETY: idle stream, unused memory.
    unsafe {
        b.stream_destroy(0, s)?;
        b.free(0, array)?;
        b.free(0, record)?;
        b.host_free(0, host)?;
    }
    drop(b);
    let end = mock.stats()?;
    ensure(
        end.live_executables == start.live_executables
            && end.live_readers == start.live_readers
            && end.live_queues == start.live_queues,
        || format!("executables / readers / queues left after drop: {start:?} -> {end:?}"),
    )?;
    Ok(())
}

/// Configurations past the agent's limits, mismatched arguments, kernels without source and
/// bad streams are refused before anything is dispatched.
pub fn invalid_launches_are_refused(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let good = args(array, record);
    let before = mock.stats()?;
    let too_many: Vec<LaunchArg> = (0..40)
        .map(|_| LaunchArg::Scalar {
            bytes: vec![0; 8],
            elem: TypeId::of::<u64>(),
            dtype: "u64",
        })
        .collect();
    // `float offset` given as 8 bytes.
    let mut wrong_size = good.clone();
    wrong_size[2] = too_many[0].clone();
    let cases: Vec<(LaunchConfig, &[LaunchArg], &str)> = vec![
        (LaunchConfig::new(1, 2048), &good, "Try reducing group-size"),
        (LaunchConfig::new(1, (8, 8, 32)), &good, "1024 per block"),
        (
            LaunchConfig::new(1, 64).with_shared_bytes(64 * 1024),
            &good,
            "shared memory",
        ),
        (LaunchConfig::new((0, 1), 64), &good, "at least 1"),
        // The code object's metadata lists the parameters: a launch must match them.
        (
            LaunchConfig::new(1, 64),
            &too_many,
            "takes 3 arguments, 40 were given",
        ),
        (
            LaunchConfig::new(1, 64),
            &wrong_size,
            "argument 2 (scalar u64) is 8 bytes; the kernel's parameter 2 takes 4",
        ),
    ];
    for (config, launch_args, needle) in cases {
        // SAFETY: refused before any dispatch.
        match unsafe { b.launch(0, &kernel(), &config, launch_args, None) } {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                ensure(kernel == "scale2d" && reason.contains(needle), || {
                    format!("{config:?}: {kernel}: {reason}")
                })?
            }
            other => {
                return Err(format!("{config:?}: expected InvalidLaunch, got {other:?}").into());
            }
        }
    }
    let sim_only = Kernel::new("sim_only").with_sim_form(std::sync::Arc::new(()));
    // SAFETY: refused.
    match unsafe { b.launch(0, &sim_only, &LaunchConfig::new(1, 1), &[], None) } {
        Err(Error::NotSupportedByBackend { reason, .. }) => {
            ensure(reason.contains("sim_only"), || reason.clone())?
        }
        other => return Err(format!("expected NotSupportedByBackend, got {other:?}").into()),
    }
    // SAFETY: refused.
    let bogus = unsafe {
        b.launch(
            0,
            &kernel(),
            &LaunchConfig::new(1, 1),
            &good,
            Some(StreamHandle(0xbad)),
        )
    };
    ensure(matches!(bogus, Err(Error::InvalidHandle { .. })), || {
        format!("bogus stream: {bogus:?}")
    })?;
    let after = mock.stats()?;
    ensure(
        after.dispatches == before.dispatches && after.live_kernarg == before.live_kernarg,
        || format!("refused launches dispatched or allocated: {before:?} -> {after:?}"),
    )?;
    // SAFETY: unused allocations.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

/// A queue error the runtime reports (a kernel fault) fails the synchronous launch instead of
/// waiting forever for a signal that never completes.
pub fn queue_error_fails_the_launch(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    mock.fail_next_dispatch()?;
    // SAFETY: the stand-in runs no code.
    let result = unsafe {
        b.launch(
            0,
            &kernel(),
            &LaunchConfig::new(1, 64),
            &args(array, record),
            None,
        )
    };
    match result {
        Err(Error::Native {
            code, code_name, ..
        }) => ensure(
            code == 0x29 && code_name == "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
            || format!("{code:#x} {code_name}"),
        )?,
        other => return Err(format!("expected the queue's error, got {other:?}").into()),
    }
    // The broken queue is replaced: later launches run.
    let before = mock.stats()?;
    // SAFETY: the stand-in runs no code.
    unsafe {
        b.launch(
            0,
            &kernel(),
            &LaunchConfig::new(1, 64),
            &args(array, record),
            None,
        )
    }
    .map_err(|e| format!("a launch after the queue error failed: {e}"))?;
    let after = mock.stats()?;
    ensure(
        after.dispatches == before.dispatches + 1 && after.live_queues == before.live_queues + 1,
        || format!("no new queue ran the later launch: {before:?} -> {after:?}"),
    )?;
    // SAFETY: the failed kernel never ran; nothing else uses the memory.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

fn f32_array(ptr: DevicePtr, shape: &[usize]) -> LaunchArg {
    let mut strides = vec![1isize; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * shape[axis + 1] as isize;
    }
    LaunchArg::Array {
        ptr,
        shape: shape.to_vec(),
        strides,
        min_offset: 0,
        span_len: shape.iter().product(),
        itemsize: 4,
        elem: TypeId::of::<f32>(),
        dtype: "f32",
    }
}

/// gpu-mem's own portable kernels go through the launch path (compile with the prelude, load,
/// `<entry>.kd` lookup, dispatch): each packet's group segment is the static shared arrays the
/// source declares plus the dynamic bytes asked for.
pub fn library_kernels_dispatch(mock: &Mock) -> Result<(), Failed> {
    use gpu_mem_core::kernel::portable::{BARRIER_WAVE, BLOCK_SUM, MATMUL_TILED};
    let b = mock.backend()?;
    let buffer = b.alloc(0, 64 * 64 * 4)?;
    // (source, entry, arguments, launch, static shared bytes the source declares)
    let cases = [
        (
            MATMUL_TILED,
            "matmul_tiled",
            vec![
                f32_array(buffer, &[40, 24]),
                f32_array(buffer, &[24, 33]),
                f32_array(buffer, &[40, 33]),
            ],
            LaunchConfig::new((3, 3), (16, 16)),
            2 * 16 * 16 * 4usize,
        ),
        (
            BLOCK_SUM,
            "block_sum",
            vec![f32_array(buffer, &[1000]), f32_array(buffer, &[4])],
            LaunchConfig::new(4, 256).with_shared_bytes(256 * 4),
            0,
        ),
        (
            BARRIER_WAVE,
            "barrier_wave",
            vec![f32_array(buffer, &[500]), f32_array(buffer, &[500])],
            LaunchConfig::new(2, 256),
            2 * 256 * 4,
        ),
    ];
    for (source, entry, launch_args, config, static_shared) in cases {
        let before = mock.stats()?;
        let kernel = Kernel::new(entry).with_source(source, entry);
        // SAFETY: the stand-in runs no code.
        unsafe { b.launch(0, &kernel, &config, &launch_args, None) }
            .map_err(|e| format!("{entry}: {e}"))?;
        let d = next_dispatch(mock, before.dispatches)?;
        let (kd_group, _, kd_kernarg) = descriptor(&d)?;
        let group = u32_at(&d.packet, 28);
        ensure(
            kd_group as usize == static_shared
                && group as usize == static_shared + config.shared_bytes,
            || format!("{entry}: descriptor LDS {kd_group}, packet group segment {group}"),
        )?;
        let explicit: usize = launch_args
            .iter()
            .map(|a| match a {
                LaunchArg::Array { shape, .. } => 8 + 16 * shape.len(),
                _ => 8,
            })
            .sum();
        ensure(kd_kernarg as usize >= explicit, || {
            format!("{entry}: kernarg segment {kd_kernarg} < {explicit} bytes of gm_array")
        })?;
        println!(
            "    {entry}: LDS {kd_group} + {} B, kernarg segment {kd_kernarg} B",
            config.shared_bytes
        );
    }
    // SAFETY: unused.
    unsafe { b.free(0, buffer) }?;
    Ok(())
}

/// A kernel calling `printf` (and one calling `assert`): hiprtc's code object lists
/// `hidden_hostcall_buffer` (and `hidden_multigrid_sync_arg`) among its hidden arguments. The
/// backend sets neither up, so the launch is refused before anything is allocated or
/// dispatched, naming the kernel and the argument, instead of handing the kernel a null buffer.
pub fn hostcall_kernels_are_refused(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let buffer = b.alloc(0, 256)?;
    let cases = [
        (
            "printer",
            r#"
#include "gpu_mem.h"
extern "C" __global__ void printer(gm_array<float, 1> a) {
    if (threadIdx.x == 0) printf("a[0] = %f\n", a.data[0]);
}
"#,
        ),
        (
            "checker",
            r#"
#include "gpu_mem.h"
#include <cassert>
extern "C" __global__ void checker(gm_array<float, 1> a) {
    assert(a.data[threadIdx.x] >= 0.0f);
}
"#,
        ),
    ];
    for (entry, source) in cases {
        let before = mock.stats()?;
        let kernel = Kernel::new(entry).with_source(source, entry);
        // SAFETY: refused before any dispatch (and the stand-in runs no code).
        let result = unsafe {
            b.launch(
                0,
                &kernel,
                &LaunchConfig::new(1, 64),
                &[f32_array(buffer, &[64])],
                None,
            )
        };
        match result {
            Err(Error::NotSupportedByBackend { reason, .. }) => {
                ensure(
                    reason.contains(&format!("`{entry}`"))
                        && reason.contains("hidden_hostcall_buffer"),
                    || format!("{entry}: {reason}"),
                )?;
                println!("    {entry}: {reason}");
            }
            other => {
                return Err(format!(
                    "{entry}: expected a refusal naming hidden_hostcall_buffer, got {other:?}"
                )
                .into());
            }
        }
        let after = mock.stats()?;
        ensure(
            after.dispatches == before.dispatches && after.live_kernarg == before.live_kernarg,
            || format!("{entry}: refused launch dispatched or allocated: {before:?} -> {after:?}"),
        )?;
    }
    // SAFETY: unused.
    unsafe { b.free(0, buffer) }?;
    Ok(())
}

/// Kernels of different streams overlap (no barrier bit between them), kernels of one stream
/// do not, and a stream's kernel that is not the queue's previous packet waits for its
/// predecessor through a barrier-AND packet.
pub fn streams_overlap_and_stay_ordered(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let (s1, s2) = (b.stream_create(0)?, b.stream_create(0)?);
    let k = kernel();
    let config = LaunchConfig::new((3, 2), (16, 8));
    // SAFETY: warm-up (compile and load) outside the measured part.
    unsafe { b.launch(0, &k, &config, &args(array, record), None) }?;
    let s0 = mock.stats()?;
    // Kernels long enough that the host submits all three while the first runs.
    let delay = mock.set_dispatch_delay_us(200_000)?;
    // SAFETY: the stand-in runs no code; everything lives until the synchronisation below.
    let submitted = unsafe {
        b.launch(0, &k, &config, &args(array, record), Some(s1)) // A1
            .and_then(|()| b.launch(0, &k, &config, &args(array, record), Some(s2))) // B1
            .and_then(|()| b.launch(0, &k, &config, &args(array, record), Some(s1))) // A2
            .and_then(|()| b.stream_synchronize(0, s1))
            .and_then(|()| b.stream_synchronize(0, s2))
    };
    mock.set_dispatch_delay_us(delay)?;
    submitted?;
    let done = mock.stats()?;
    ensure(done.dispatches == s0.dispatches + 3, || {
        "three dispatches".into()
    })?;
    let a1 = next_dispatch(mock, s0.dispatches)?;
    let b1 = next_dispatch(mock, s0.dispatches + 1)?;
    let a2 = next_dispatch(mock, s0.dispatches + 2)?;
    ensure(b1.start_ns < a1.end_ns, || {
        format!(
            "stream 2's kernel started {} us after stream 1's ended: streams do not overlap",
            (b1.start_ns - a1.end_ns) / 1000
        )
    })?;
    ensure(u16_at(&b1.packet, 0) & BARRIER_BIT == 0, || {
        "a kernel of another stream carries the barrier bit".into()
    })?;
    ensure(a2.start_ns >= a1.end_ns, || {
        "stream 1's second kernel overlapped its first".into()
    })?;
    ensure(done.barrier_packets == s0.barrier_packets + 1, || {
        format!(
            "{} barrier-AND packets; expected one (A2 behind A1, which is not the queue's \
             previous packet)",
            done.barrier_packets - s0.barrier_packets
        )
    })?;
    // SAFETY: idle streams, unused memory.
    unsafe {
        b.stream_destroy(0, s1)?;
        b.stream_destroy(0, s2)?;
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

/// Several threads launch on their own streams at once: every dispatch runs, each stream's
/// kernels stay in order, and the doorbell is never rung lower than before (`run_checked`
/// compares the stand-in's count of doorbell stores below an earlier one).
pub fn concurrent_submitters(mock: &Mock) -> Result<(), Failed> {
    const THREADS: usize = 6;
    const PER_THREAD: usize = 12;
    let b = std::sync::Arc::new(mock.backend()?);
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let k = kernel();
    let config = LaunchConfig::new(1, 64);
    // SAFETY: warm-up (compile and load).
    unsafe { b.launch(0, &k, &config, &args(array, record), None) }?;
    let s0 = mock.stats()?;
    let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (b, k, start) = (b.clone(), k.clone(), start.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let s = b.stream_create(0).map_err(|e| e.to_string())?;
                start.wait();
                for _ in 0..PER_THREAD {
                    // SAFETY: the stand-in runs no code; the memory outlives the threads.
                    unsafe { b.launch(0, &k, &config, &args(array, record), Some(s)) }
                        .map_err(|e| e.to_string())?;
                }
                // SAFETY: the stream came from this backend.
                unsafe {
                    b.stream_synchronize(0, s).map_err(|e| e.to_string())?;
                    b.stream_destroy(0, s).map_err(|e| e.to_string())
                }
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "a submitter panicked")??;
    }
    let done = mock.stats()?;
    ensure(
        done.dispatches == s0.dispatches + (THREADS * PER_THREAD) as i32,
        || format!("{} dispatches ran", done.dispatches - s0.dispatches),
    )?;
    ensure(done.doorbell_regressions == s0.doorbell_regressions, || {
        format!(
            "the doorbell went down {} time(s)",
            done.doorbell_regressions - s0.doorbell_regressions
        )
    })?;
    // SAFETY: unused.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

/// A kernel's memory fault (which ROCr hands to system event handlers, and without one reports
/// and aborts the process) fails the stream that launched it with the fault's address and
/// reason; the process goes on, and later work, on that device and on other streams, runs on a
/// new queue.
pub fn memory_fault_fails_its_stream(mock: &Mock) -> Result<(), Failed> {
    let b = std::sync::Arc::new(mock.backend()?);
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let k = kernel();
    let config = LaunchConfig::new(1, 64);
    // SAFETY: warm-up (compile, load, queue).
    unsafe { b.launch(0, &k, &config, &args(array, record), None) }?;
    let before = mock.stats()?;
    mock.fault_next_dispatch()?;
    let faulting = b.stream_create(0)?;
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (b, k) = (b.clone(), k.clone());
        std::thread::spawn(move || {
            // SAFETY: the stand-in runs no code; the memory outlives the launch.
            let result = unsafe {
                b.launch(0, &k, &config, &args(array, record), Some(faulting))
                    .and_then(|()| b.stream_synchronize(0, faulting))
            };
            let _ = tx.send(result);
        });
    }
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .map_err(|_| {
            "the faulting launch's stream did not report anything within 20 s (the fault never \
             reached the backend)"
        })?;
    let after = mock.stats()?;
    ensure(after.fault_aborts == before.fault_aborts, || {
        "no handler took the memory fault: ROCr would have aborted the process".into()
    })?;
    match result {
        Err(Error::AsyncFailure { reason, .. }) => ensure(
            reason.contains("memory fault")
                && reason.contains("0xdead0000")
                && reason.contains("page not present"),
            || format!("the stream's error does not describe the fault: {reason}"),
        )?,
        other => return Err(format!("expected the stream to fail, got {other:?}").into()),
    }
    // The device still works: a synchronous launch and one on another stream run, on a new
    // queue.
    let other = b.stream_create(0)?;
    // SAFETY: as above.
    unsafe {
        b.launch(0, &k, &config, &args(array, record), None)?;
        b.launch(0, &k, &config, &args(array, record), Some(other))?;
        b.stream_synchronize(0, other)?;
    }
    let end = mock.stats()?;
    ensure(
        end.dispatches == before.dispatches + 2 && end.live_queues == before.live_queues + 1,
        || format!("later work did not run on a new queue: {before:?} -> {end:?}"),
    )?;
    // The faulting stream stays failed.
    // SAFETY: the handle came from this backend.
    let again = unsafe { b.stream_synchronize(0, faulting) };
    ensure(matches!(again, Err(Error::AsyncFailure { .. })), || {
        format!("the faulting stream synchronised after the fault: {again:?}")
    })?;
    // SAFETY: idle or failed streams; the memory is unused.
    unsafe {
        b.stream_destroy(0, other)?;
        let _ = b.stream_destroy(0, faulting);
        b.free(0, array)?;
        b.free(0, record)?;
    }
    Ok(())
}

const OTHER: &str = r#"
#include "gpu_mem.h"
extern "C" __global__ void other(const float* x) {
    GM_SHARED float big[1024];
    big[threadIdx.x] = x[0];
}
"#;

/// A clone of a launched kernel given other source (same id) compiles and runs that source,
/// not the code object loaded for the original.
pub fn a_clone_with_other_source_runs_its_own_code(mock: &Mock) -> Result<(), Failed> {
    let b = mock.backend()?;
    let before = mock.stats()?;
    let (array, record) = (b.alloc(0, 640 * 4)?, b.alloc(0, 4)?);
    let first = kernel();
    let config = LaunchConfig::new((3, 2), (16, 8)).with_shared_bytes(256);
    // SAFETY: the stand-in runs no code; the arguments are live allocations.
    unsafe { b.launch(0, &first, &config, &args(array, record), None) }?;
    let second = first.clone().with_source(OTHER, "other");
    let record_arg = vec![LaunchArg::Record {
        ptr: record,
        itemsize: 4,
        elem: TypeId::of::<f32>(),
        dtype: "f32",
    }];
    // SAFETY: as above.
    unsafe { b.launch(0, &second, &LaunchConfig::new(1, 64), &record_arg, None) }?;
    let (one, two) = (
        next_dispatch(mock, before.dispatches)?,
        next_dispatch(mock, before.dispatches + 1)?,
    );
    // SAFETY: the dispatches are done.
    unsafe {
        b.free(0, array)?;
        b.free(0, record)?;
    }
    ensure(u64_at(&one.packet, 32) != u64_at(&two.packet, 32), || {
        "the kernel with other source ran the original's code object".into()
    })
}
