//! Regression cases for the soundness rules (the book's soundness chapter): host memory is never read while a
//! stream may write it, nor written while one may use it; mapped memory is reached from the
//! host only by copy or `unsafe` views; nothing leaks and no failure is lost.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig};
use gpu_mem::{Error, Runtime};
use ndarray::{Array1, Array2, Axis, s};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["soundness":
        copying_mapped_memory_onto_itself,
        registered_host_views_wait_for_device_views,
        empty_page_locked_arrays_have_aligned_views,
        registered_arrays_with_negative_strides,
        view_as_checks_the_host_address_of_mapped_memory,
        view_as_refuses_types_aligned_beyond_device_memory,
        arrays_of_elements_memory_cannot_hold_are_refused,
    ];
    cases.extend(crate::cases!["soundness", Requires::Simulator;
        concurrent_readers_all_wait_for_a_pending_write,
        a_failed_stream_releases_its_memory_when_dropped,
        a_failure_found_by_host_access_still_reaches_the_stream,
        a_kernel_owning_memory_can_be_dropped_after_a_stream_launch,
    ]);
    cases
}

fn copying_mapped_memory_onto_itself(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut mapped = dev
        .mapped_array::<u32>(&[256], MapFlags::default())
        .map_err(fail("mapped"))?;
    mapped
        .write(&Array1::from_iter(0..256u32))
        .map_err(fail("write"))?;
    let mut view = mapped.device_view();
    let stream = dev.stream().map_err(fail("stream"))?;
    stream
        .copy_to_host(&view, &mut mapped)
        .map_err(fail("device view into its own memory"))?;
    stream
        .copy_from_host(&mut view, &mapped)
        .map_err(fail("its own memory into the device view"))?;
    stream.synchronize().map_err(fail("sync"))?;
    ensure!(
        mapped.read().map_err(fail("read"))? == Array1::from_iter(0..256u32).into_dyn(),
        "data unchanged"
    );
    Ok(())
}

fn registered_host_views_wait_for_device_views(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut reg = dev
        .mapped(Array1::<u32>::zeros(4))
        .map_err(fail("mapped"))?;
    let mut device_view = reg.device_view().map_err(fail("device_view"))?;
    ensure!(
        reg.view().is_err(),
        "no host reference while the device may write the memory"
    );
    ensure!(reg.view_mut().is_err(), "no host write view either");
    device_view.memset(0xff).map_err(fail("memset"))?;
    drop(device_view);
    ensure!(
        reg.view()
            .map_err(fail("view"))?
            .iter()
            .all(|v| *v == u32::MAX),
        "host sees the device write afterwards"
    );
    Ok(())
}

fn empty_page_locked_arrays_have_aligned_views(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut pinned = dev.pinned_array::<f64>(&[0]).map_err(fail("pinned"))?;
    ensure!(
        pinned.view().map_err(fail("view"))?.as_slice() == Some(&[][..]),
        "empty view"
    );
    ensure!(
        pinned.view_mut().map_err(fail("view_mut"))?.is_empty(),
        "empty mutable view"
    );
    let mapped = dev
        .mapped_array::<u64>(&[0, 3], MapFlags::default())
        .map_err(fail("mapped"))?;
    ensure!(
        mapped.read().map_err(fail("read"))?.shape() == [0, 3],
        "empty mapped read"
    );
    Ok(())
}

fn registered_arrays_with_negative_strides(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut array = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as i32);
    array.invert_axis(Axis(0));
    let expected = array.clone();
    let mut reg = dev.pinned(array).map_err(fail("pinned"))?;
    ensure!(
        reg.view().map_err(fail("view"))? == expected,
        "view keeps the logical order"
    );
    reg.view_mut().map_err(fail("view_mut"))?[[0, 0]] = -1;
    let back = reg.into_inner().map_err(fail("into_inner"))?;
    ensure!(
        back[[0, 0]] == -1 && back[[2, 3]] == 3,
        "writes land on the logical element: {back:?}"
    );
    Ok(())
}

fn view_as_checks_the_host_address_of_mapped_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    // A byte buffer's base may have any alignment (Miri picks addresses with just the type's
    // alignment), so the view starts where the host address is surely not 4-aligned.
    let bytes = Array1::from_iter(0..68u8);
    let base = bytes.as_ptr() as usize;
    let skip = (1..4).find(|k| !(base + k).is_multiple_of(4)).unwrap_or(1);
    let odd = bytes.slice_move(s![skip..skip + 64]);
    let mut reg = dev.mapped(odd).map_err(fail("mapped"))?;
    let view = reg.device_view().map_err(fail("device_view"))?;
    let as_u32 = view.view_as::<u32>();
    ensure!(
        matches!(as_u32, Err(Error::ViewAs { .. })),
        "misaligned view refused: {as_u32:?}"
    );
    Ok(())
}

/// A type that needs 512-byte alignment, more than device memory promises (256).
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(512))]
struct Wide([u8; 512]);

fn view_as_refuses_types_aligned_beyond_device_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let bytes = dev
        .device_array::<u8>(&[1024], Order::C)
        .map_err(fail("alloc"))?;
    // One of these starts on a 512-byte boundary: that address would suit `Wide`, but copies of
    // the view are staged in memory aligned to no more than device memory is.
    for start in [0, 256] {
        let part = bytes.slice(s![start..start + 512]).map_err(fail("slice"))?;
        let wide = part.view_as::<Wide>();
        ensure!(
            matches!(wide, Err(Error::ViewAs { .. })),
            "a 512-aligned view at byte {start} refused: {wide:?}"
        );
    }
    Ok(())
}

/// Element types device memory cannot hold are refused however the array is made: aligned
/// beyond device memory (a host copy of them would be a misaligned slice), or zero-sized (shapes
/// would be unbounded: a copy to the host would try to build 2^62 elements).
fn arrays_of_elements_memory_cannot_hold_are_refused(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let refused = |what: &str, result: Result<(), Error>| match result {
        Err(Error::InvalidArgument {
            name: "element type",
            ..
        }) => Ok(()),
        other => Err(format!("{what}: {other:?}")),
    };
    refused(
        "device_array of a 512-aligned type",
        dev.device_array::<Wide>(&[2], Order::C).map(drop),
    )?;
    refused(
        "device_array of ()",
        dev.device_array::<()>(&[1 << 62], Order::C).map(drop),
    )?;
    let stream = dev.stream().map_err(fail("stream"))?;
    refused(
        "stream.device_array of ()",
        stream.device_array::<()>(&[1 << 62], Order::C).map(drop),
    )?;
    refused(
        "pinned_array of ()",
        dev.pinned_array::<()>(&[1 << 62]).map(drop),
    )?;
    // Memory another library allocated: a 512-aligned type over it, even at a 512-byte boundary.
    let bytes = dev
        .device_array::<u8>(&[2048], Order::C)
        .map_err(fail("alloc"))?;
    let ptr = bytes.device_ptr();
    let at = (ptr.0 + 511) & !511;
    // SAFETY: refused before anything is read; `bytes` outlives the call.
    let foreign = unsafe {
        DeviceArray::<Wide>::from_raw_parts(&dev, gpu_mem::backend::DevicePtr(at), &[1], &[512], ())
    };
    refused("from_raw_parts of a 512-aligned type", foreign.map(drop))?;
    drop(bytes);
    // A broadcast array's byte count saturates instead of overflowing.
    let huge = dev
        .to_device(
            &ndarray::arr0(0f64)
                .broadcast(1usize << 61)
                .ok_or("broadcast")?,
        )
        .map_err(fail("to_device"))?;
    ensure!(
        huge.nbytes() == usize::MAX,
        "nbytes of 2^61 f64s: {}",
        huge.nbytes()
    );
    Ok(())
}

/// A kernel that holds its stream until `go` is set (it touches no memory).
fn gate(go: Arc<AtomicBool>) -> Kernel {
    Kernel::sim("gate", move |_| {
        while !go.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    })
}

fn concurrent_readers_all_wait_for_a_pending_write(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let src = dev
        .to_device(&Array1::from_elem(1 << 16, 0xabu8))
        .map_err(fail("to_device"))?;
    let mut pinned = dev.pinned_array::<u8>(&[1 << 16]).map_err(fail("pinned"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let go = Arc::new(AtomicBool::new(false));
    // SAFETY: the gate kernel touches no memory.
    unsafe { stream.launch(&gate(Arc::clone(&go)), LaunchConfig::new(1, 1), &mut []) }
        .map_err(fail("gate"))?;
    stream
        .copy_to_host(&src, &mut pinned)
        .map_err(fail("copy"))?;
    let pinned = &pinned;
    let seen = std::thread::scope(|scope| {
        let a = scope.spawn(|| pinned.view().map(|v| v[0]));
        let b = scope.spawn(|| pinned.view().map(|v| v[0]));
        std::thread::sleep(Duration::from_millis(100));
        go.store(true, Ordering::Release);
        (a.join(), b.join())
    });
    match seen {
        (Ok(Ok(a)), Ok(Ok(b))) => ensure!(
            a == 0xab && b == 0xab,
            "both readers waited for the copy: {a:#x} {b:#x}"
        ),
        other => return Err(format!("readers failed: {other:?}")),
    }
    Ok(())
}

fn small_simulator() -> Result<Runtime, String> {
    Ok(Runtime::with_backend(Arc::new(SimBackend::new(
        SimConfig::uniform(1, 64 << 20),
    ))))
}

fn a_failed_stream_releases_its_memory_when_dropped(_rt: &Runtime) -> Result<(), String> {
    let rt = small_simulator()?;
    let dev = rt.device(0).map_err(fail("device"))?;
    let before = dev.mem_info().map_err(fail("mem_info"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut big = dev
        .device_array::<u8>(&[4 << 20], Order::C)
        .map_err(fail("alloc"))?;
    let faulty = Kernel::sim("faulty", |t| t.array::<u8>(0).set([usize::MAX], 1));
    // SAFETY: the out-of-bounds write is caught by the simulator.
    unsafe { stream.launch(&faulty, LaunchConfig::new(1, 1), &mut [&mut big]) }
        .map_err(fail("enqueue"))?;
    drop(big);
    drop(stream);
    let errors = dev.take_release_errors();
    ensure!(
        errors.iter().any(|e| e.to_string().contains("faulty")),
        "the failure is kept: {errors:?}"
    );
    ensure!(
        dev.mem_info().map_err(fail("mem_info"))? == before,
        "the array's memory was released"
    );
    Ok(())
}

fn a_failure_found_by_host_access_still_reaches_the_stream(_rt: &Runtime) -> Result<(), String> {
    let rt = small_simulator()?;
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut a = dev
        .device_array::<u8>(&[16], Order::C)
        .map_err(fail("alloc"))?;
    let mut pinned = dev.pinned_array::<u8>(&[16]).map_err(fail("pinned"))?;
    let faulty = Kernel::sim("faulty", |t| t.array::<u8>(0).set([99], 1));
    // SAFETY: the out-of-bounds write is caught by the simulator.
    unsafe { stream.launch(&faulty, LaunchConfig::new(1, 1), &mut [&mut a]) }
        .map_err(fail("enqueue"))?;
    stream.copy_to_host(&a, &mut pinned).map_err(fail("copy"))?;
    ensure!(
        pinned.view().is_err(),
        "the host access that synchronizes sees the failure"
    );
    let message = stream
        .synchronize()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("faulty"),
        "the stream's owner still gets it: {message:?}"
    );
    stream.synchronize().map_err(fail("reported once"))?;
    Ok(())
}

fn a_kernel_owning_memory_can_be_dropped_after_a_stream_launch(
    _rt: &Runtime,
) -> Result<(), String> {
    let rt = small_simulator()?;
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let owned = dev
        .device_array::<u8>(&[64], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("owner", move |_| {
        let _ = owned.size();
    });
    // SAFETY: the kernel touches no argument memory.
    unsafe { stream.launch(&kernel, LaunchConfig::new(1, 1), &mut []) }.map_err(fail("launch"))?;
    drop(kernel);
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _ = done.send(stream.synchronize());
        });
        match wait.recv_timeout(Duration::from_secs(20)) {
            Ok(result) => result.map_err(fail("sync")),
            Err(_) => Err(
                "synchronize hung: the kernel's memory was freed on the stream's own worker"
                    .to_string(),
            ),
        }
    })?;
    Ok(())
}
