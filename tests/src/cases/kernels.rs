//! Kernel launches (Numba's kernel-argument rules).
//!
//! The first group uses the ready-made kernels, written once as portable source, and runs on
//! every backend; the rest use closure kernels (the Rust-native form only the simulator runs)
//! and check the simulator's execution model and its error reports for them. Portable-source
//! counterparts of these checks are in `source_kernels`.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::kernels::{
    BARRIER_WAVE_MAX_BLOCK, TPB, barrier_wave, barrier_wave_expected, block_sum, matmul_tiled,
};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig, SimDeviceConfig};
use gpu_mem::{Dim3, Error, Runtime};
use ndarray::{Array1, Array2};
use std::sync::Arc;

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["kernels", Requires::Kernels;
        matmul_tiled_matches_dot,
        block_sum_uses_dynamic_shared_memory,
        barrier_wave_global_fence_and_wave_barrier,
        stream_launch_keeps_arguments_alive,
        host_arguments_in_out_inout,
    ];
    cases.extend(crate::cases!["kernels", Requires::Simulator;
        thread_and_block_indices,
        shared_arrays_are_per_block_in_call_order,
        local_arrays_are_per_thread,
        barrier_reached_by_part_of_a_block_is_an_error,
        different_barriers_are_an_error,
        wave_barrier_divergence_is_an_error,
        out_of_bounds_accesses_are_faults,
        wrong_argument_types_are_faults,
        kernel_panics_are_faults,
        shared_memory_limits_are_enforced,
        invalid_launch_configurations,
        kernels_need_their_backend_form,
        records_scalars_and_mapped_arrays,
        warp_size_64_device,
        stream_kernel_failure_surfaces_at_synchronize,
        device_synchronize_leaves_failures_to_their_streams,
        barriers_really_wait_for_the_block,
        atomics_are_exact_across_blocks,
    ]);
    cases
}

fn device(rt: &Runtime) -> Result<gpu_mem::Device, String> {
    rt.device(0).map_err(fail("device"))
}

fn matmul_tiled_matches_dot(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (m, k, n) = (37usize, 21usize, 45usize);
    let a = Array2::from_shape_fn((m, k), |(i, j)| ((i * 3 + j) % 7) as f32 - 3.0);
    let b = Array2::from_shape_fn((k, n), |(i, j)| ((i + 2 * j) % 5) as f32 * 0.5);
    let (mut da, mut db) = (
        dev.to_device(&a).map_err(fail("a"))?,
        dev.to_device(&b).map_err(fail("b"))?,
    );
    let mut dc = dev
        .device_array::<f32>(&[m, n], Order::C)
        .map_err(fail("c"))?;
    let config = LaunchConfig::new(
        (n.div_ceil(TPB) as u32, m.div_ceil(TPB) as u32),
        (TPB as u32, TPB as u32),
    );
    // SAFETY: the kernel stays inside its arguments.
    unsafe { dev.launch(&matmul_tiled(), config, &mut [&mut da, &mut db, &mut dc]) }
        .map_err(fail("launch"))?;
    let c = dc.copy_to_host().map_err(fail("copy"))?;
    let expected = a.dot(&b).into_dyn();
    ensure!(
        c.iter()
            .zip(expected.iter())
            .all(|(x, y)| (x - y).abs() <= 1e-4 * y.abs().max(1.0)),
        "C != A.B"
    );
    Ok(())
}

fn block_sum_uses_dynamic_shared_memory(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 10_000usize;
    let input = Array1::from_shape_fn(n, |i| (i % 10) as f32);
    let mut d_input = dev.to_device(&input).map_err(fail("input"))?;
    let blocks = n.div_ceil(128);
    let mut partial = dev
        .device_array::<f32>(&[blocks], Order::C)
        .map_err(fail("partial"))?;
    let config = LaunchConfig::for_items(n, 128).with_shared_bytes(128 * 4);
    // SAFETY: the kernel stays inside its arguments.
    unsafe { dev.launch(&block_sum(), config, &mut [&mut d_input, &mut partial]) }
        .map_err(fail("launch"))?;
    let partial = partial.copy_to_host().map_err(fail("copy"))?;
    for (b, value) in partial.iter().enumerate() {
        let expected: f32 = input.iter().skip(b * 128).take(128).sum();
        ensure!(*value == expected, "block {b}: {value} != {expected}");
    }
    Ok(())
}

fn barrier_wave_global_fence_and_wave_barrier(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let warp = dev.info().map_err(fail("info"))?.warp_size as usize;
    for block in [BARRIER_WAVE_MAX_BLOCK, 96, 40] {
        let n = block * 3 + 7;
        let mut out = dev
            .device_array::<f32>(&[n], Order::C)
            .map_err(fail("out"))?;
        let mut scratch = dev
            .device_array::<f32>(&[n], Order::C)
            .map_err(fail("scratch"))?;
        // SAFETY: the kernel stays inside its arguments.
        unsafe {
            dev.launch(
                &barrier_wave(),
                LaunchConfig::for_items(n, block as u32),
                &mut [&mut out, &mut scratch],
            )
        }
        .map_err(fail("launch"))?;
        let (out, scratch) = (
            out.copy_to_host().map_err(fail("copy"))?,
            scratch.copy_to_host().map_err(fail("copy"))?,
        );
        for i in 0..n {
            let expected = barrier_wave_expected(i, block, warp);
            ensure!(
                out[[i]] == expected,
                "block {block}: out[{i}] = {} != {expected}",
                out[[i]]
            );
            ensure!(scratch[[i]] == i as f32, "scratch[{i}]");
        }
    }
    Ok(())
}

fn stream_launch_keeps_arguments_alive(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let n = 4096usize;
    let input = Array1::from_elem(n, 1.0f32);
    let mut d_input = stream.to_device(&input).map_err(fail("to_device"))?;
    let mut partial = dev
        .device_array::<f32>(&[n / 256], Order::C)
        .map_err(fail("alloc"))?;
    let config = LaunchConfig::for_items(n, 256).with_shared_bytes(1024);
    for _ in 0..3 {
        // SAFETY: the kernel stays inside its arguments; the stream orders the launches.
        unsafe { stream.launch(&block_sum(), config, &mut [&mut d_input, &mut partial]) }
            .map_err(fail("launch"))?;
    }
    drop(d_input); // freed only after the launches have run
    let mut out = dev
        .pinned_array::<f32>(&[n / 256])
        .map_err(fail("pinned"))?;
    stream
        .copy_to_host(&partial, &mut out)
        .map_err(fail("copy"))?;
    stream.synchronize().map_err(fail("sync"))?;
    ensure!(
        out.view()
            .map_err(fail("view"))?
            .iter()
            .all(|v| *v == 256.0),
        "partial sums after stream launches"
    );
    Ok(())
}

fn host_arguments_in_out_inout(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 1024usize;
    let input = Array1::from_shape_fn(n, |i| i as f32);
    let config = LaunchConfig::for_items(n, 256).with_shared_bytes(1024);
    // In + Out: input copied in only, partial copied back only.
    let mut partial = Array1::from_elem(n / 256, -1.0f32);
    // SAFETY: the kernel stays inside its arguments.
    unsafe {
        dev.launch(
            &block_sum(),
            config,
            &mut [&mut In(&input), &mut Out(&mut partial)],
        )
    }
    .map_err(fail("launch"))?;
    let expected: Vec<f32> = (0..n / 256)
        .map(|b| input.iter().skip(b * 256).take(256).sum())
        .collect();
    ensure!(partial.to_vec() == expected, "Out copied back: {partial:?}");
    // A bare host array is InOut: the kernel's writes come back.
    let mut bare = Array1::from_elem(n / 256, 5.0f32);
    // SAFETY: as above.
    unsafe { dev.launch(&block_sum(), config, &mut [&mut In(&input), &mut bare]) }
        .map_err(fail("launch"))?;
    ensure!(bare.to_vec() == expected, "bare host array copied back");
    let mut inout = Array1::from_elem(n / 256, 0.0f32);
    // SAFETY: as above.
    unsafe {
        dev.launch(
            &block_sum(),
            config,
            &mut [&mut In(&input), &mut InOut(&mut inout)],
        )
    }
    .map_err(fail("launch"))?;
    ensure!(inout.to_vec() == expected, "InOut copied back");
    // In does not copy back: the kernel writes partial sums into a second `In` array's copy.
    let untouched = Array1::from_elem(n / 256, 7.0f32);
    // SAFETY: as above.
    unsafe {
        dev.launch(
            &block_sum(),
            config,
            &mut [&mut In(&input), &mut In(&untouched)],
        )
    }
    .map_err(fail("launch"))?;
    ensure!(untouched.iter().all(|v| *v == 7.0), "In is not copied back");
    let strided = Array1::from_elem(2 * n, 1.0f32);
    // SAFETY: refused before launching (non-contiguous host argument).
    let result = unsafe {
        dev.launch(
            &block_sum(),
            config,
            &mut [
                &mut In(&strided.slice(ndarray::s![..;2])),
                &mut Out(&mut partial),
            ],
        )
    };
    ensure!(
        matches!(result, Err(Error::NonContiguous { .. })),
        "non-contiguous host argument: {result:?}"
    );
    Ok(())
}

fn thread_and_block_indices(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (gx, gy, bx, by) = (3u32, 2u32, 4u32, 5u32);
    let (w, h) = ((gx * bx) as usize, (gy * by) as usize);
    let mut out = dev
        .device_array::<u32>(&[h, w, 4], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("indices", |t| {
        let out = t.array::<u32>(0);
        let (x, y) = t.grid2();
        let (sx, sy) = t.gridsize2();
        out.set([y, x, 0], t.linear_thread_idx());
        out.set([y, x, 1], t.block_idx().x + 10 * t.block_idx().y);
        out.set([y, x, 2], (sx * 100 + sy) as u32);
        out.set(
            [y, x, 3],
            t.grid3().2 as u32 + t.grid_dim().z + t.block_dim().z,
        );
    });
    // SAFETY: the kernel stays inside its argument.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new((gx, gy), (bx, by)),
            &mut [&mut out],
        )
    }
    .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    for y in 0..h {
        for x in 0..w {
            let (tx, ty) = (x as u32 % bx, y as u32 % by);
            ensure!(
                out[[y, x, 0]] == tx + ty * bx,
                "linear thread index at ({x},{y})"
            );
            ensure!(
                out[[y, x, 1]] == x as u32 / bx + 10 * (y as u32 / by),
                "block index at ({x},{y})"
            );
            ensure!(out[[y, x, 2]] == (w * 100 + h) as u32, "gridsize");
            ensure!(out[[y, x, 3]] == 2, "z index and dims");
        }
    }
    Ok(())
}

fn shared_arrays_are_per_block_in_call_order(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut out = dev
        .device_array::<i32>(&[4, 64], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("shared_order", |t| {
        let out = t.array::<i32>(0);
        let first = t.shared_array::<i32, 1>([64]);
        let second = t.shared_array::<i32, 2>([8, 8]);
        let tid = t.thread_idx().x as usize;
        let block = t.block_idx().x as i32;
        first.set([tid], block * 1000 + tid as i32);
        second.set([tid / 8, tid % 8], -(tid as i32));
        t.syncthreads();
        // Read another thread's writes: same buffer for the whole block, distinct buffers.
        let other = 63 - tid;
        out.set(
            [block as usize, tid],
            first.get([other]) + second.get([other / 8, other % 8]),
        );
    });
    // SAFETY: the kernel stays inside its argument.
    unsafe { dev.launch(&kernel, LaunchConfig::new(4, 64), &mut [&mut out]) }
        .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    for b in 0..4 {
        for tid in 0..64 {
            let other = 63 - tid as i32;
            ensure!(
                out[[b, tid]] == b as i32 * 1000 + other - other,
                "block {b} thread {tid}: {}",
                out[[b, tid]]
            );
        }
    }
    Ok(())
}

fn local_arrays_are_per_thread(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut out = dev
        .device_array::<i64>(&[128], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("local", |t| {
        let out = t.array::<i64>(0);
        let local = t.local_array::<i64, 1>([8]);
        let i = t.grid1();
        for k in 0..8 {
            local.set([k], (i * 10 + k) as i64);
        }
        t.syncthreads(); // other threads run in between; their locals are their own
        out.set([i], (0..8).map(|k| local.get([k])).sum());
    });
    // SAFETY: the kernel stays inside its argument.
    unsafe { dev.launch(&kernel, LaunchConfig::new(2, 64), &mut [&mut out]) }
        .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        (0..128).all(|i| out[[i]] == (i * 80 + 28) as i64),
        "local arrays: {out:?}"
    );
    Ok(())
}

fn barrier_reached_by_part_of_a_block_is_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::sim("half_barrier", |t| {
        if t.thread_idx().x < 16 {
            t.syncthreads();
        }
    });
    // SAFETY: no memory is touched.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(3, 64), &mut []) };
    match result {
        Err(Error::BarrierDivergence {
            kernel,
            block,
            detail,
        }) => {
            ensure!(
                kernel == "half_barrier" && block == [0, 0, 0],
                "names kernel and block: {kernel} {block:?}"
            );
            ensure!(
                detail.contains("16 of 64"),
                "says how many arrived: {detail}"
            );
        }
        other => return Err(format!("expected BarrierDivergence, got {other:?}")),
    }
    Ok(())
}

fn different_barriers_are_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::sim("two_barriers", |t| {
        if t.thread_idx().x % 2 == 0 {
            t.syncthreads();
        } else {
            t.barrier(Fence::Global);
        }
    });
    // SAFETY: no memory is touched.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), &mut []) };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("two_barriers") && message.contains("different barriers"),
        "{message}"
    );
    Ok(())
}

fn wave_barrier_divergence_is_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::sim("lane_exit", |t| {
        if t.lane_id() != 3 {
            t.wavebarrier();
        }
    });
    // SAFETY: no memory is touched.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 64), &mut []) };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("wave barrier") && message.contains("lane_exit"),
        "{message}"
    );
    let fine = Kernel::sim("all_lanes", |t| {
        t.wavebarrier();
        t.syncthreads();
        t.wavebarrier();
    });
    // SAFETY: no memory is touched.
    unsafe { dev.launch(&fine, LaunchConfig::new(2, 96), &mut []) }
        .map_err(fail("uniform wave barriers"))?;
    Ok(())
}

fn out_of_bounds_accesses_are_faults(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut a = dev
        .device_array::<f32>(&[10, 10], Order::C)
        .map_err(fail("alloc"))?;
    let global = Kernel::sim("oob_global", |t| {
        let a = t.array::<f32>(0);
        let i = t.grid1();
        a.set([i, 3], 1.0);
    });
    // SAFETY: the out-of-bounds write is caught by the simulator before it happens.
    let result = unsafe { dev.launch(&global, LaunchConfig::new(2, 8), &mut [&mut a]) };
    // Block 1's first thread to fault is thread 2 (row 10) when the threads run in index order;
    // in another order (the simulator's `GPU_MEM_SIM_THREAD_ORDER`) it is any of threads 2 to
    // 7, and the block's rows 8 and 9 are written only if their threads ran before it. The
    // block stops at its first fault, as on a GPU.
    let index_order = std::env::var("GPU_MEM_SIM_THREAD_ORDER")
        .map_or(true, |order| matches!(order.trim(), "" | "index"));
    let row = match result {
        Err(Error::KernelFault {
            kernel,
            block,
            thread,
            message,
        }) => {
            ensure!(kernel == "oob_global", "kernel name");
            let row = 8 + thread[0] as usize;
            let rows = if index_order { 10..11 } else { 10..16 };
            ensure!(
                block == [1, 0, 0] && rows.contains(&row) && thread[1..] == [0, 0],
                "first faulting thread: block {block:?} thread {thread:?}"
            );
            ensure!(
                message.contains(&format!("[{row}, 3]")) && message.contains("[10, 10]"),
                "index and shape: {message}"
            );
            row
        }
        other => return Err(format!("expected KernelFault, got {other:?}")),
    };
    let written = a.copy_to_host().map_err(fail("copy"))?;
    let in_column = (0..10).filter(|&i| written[[i, 3]] == 1.0).count();
    ensure!(
        (0..8).all(|i| written[[i, 3]] == 1.0)
            && written.iter().filter(|v| **v == 1.0).count() == in_column
            && (in_column == 10 || !index_order),
        "in-bounds writes happened before the fault at row {row}: {in_column} in column 3"
    );
    let shared = Kernel::sim("oob_shared", |t| {
        let s = t.shared_array::<f32, 2>([4, 4]);
        s.set([4, 0], 1.0);
    });
    // SAFETY: as above.
    let message = unsafe { dev.launch(&shared, LaunchConfig::new(1, 1), &mut []) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(message.contains("shared array index [4, 0]"), "{message}");
    let local = Kernel::sim("oob_local", |t| {
        let l = t.local_array::<u8, 1>([3]);
        let _ = l.get([7]);
    });
    // SAFETY: as above.
    let message = unsafe { dev.launch(&local, LaunchConfig::new(1, 1), &mut []) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(message.contains("local array index [7]"), "{message}");
    Ok(())
}

fn wrong_argument_types_are_faults(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut a = dev
        .device_array::<f32>(&[4], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("wrong_type", |t| {
        let _ = t.array::<i32>(0).get([0]);
    });
    // SAFETY: the mismatch is caught before any access.
    let message = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 1), &mut [&mut a]) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("array of i32") && message.contains("array of f32"),
        "{message}"
    );
    let missing = Kernel::sim("missing_arg", |t| {
        let _ = t.scalar::<f64>(3);
    });
    // SAFETY: as above.
    let message = unsafe { dev.launch(&missing, LaunchConfig::new(1, 1), &mut [&mut a]) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(message.contains("argument 3"), "{message}");
    Ok(())
}

// The kernel body panics on purpose: the simulator must turn it into a fault.
#[allow(clippy::panic)]
fn kernel_panics_are_faults(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::sim("panicky", |t| {
        if t.thread_idx().x == 5 {
            std::panic::panic_any("deliberate failure in thread 5".to_string());
        }
        t.syncthreads();
    });
    // SAFETY: no memory is touched.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 8), &mut []) };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("panicky")
            && message.contains("deliberate failure")
            && message.contains("[5, 0, 0]"),
        "{message}"
    );
    Ok(())
}

fn shared_memory_limits_are_enforced(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let limit = dev
        .info()
        .map_err(fail("info"))?
        .max_shared_memory_per_block;
    let kernel = Kernel::sim("dyn", |_| {});
    // SAFETY: nothing is touched.
    let result = unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 1).with_shared_bytes(limit + 1),
            &mut [],
        )
    };
    ensure!(
        matches!(result, Err(Error::InvalidLaunch { .. })),
        "dynamic shared memory over the limit: {result:?}"
    );
    let big = Kernel::sim("big_static", |t| {
        let _ = t.shared_array::<f64, 1>([4096]); // 32 KiB
        let _ = t.shared_array::<f64, 1>([4096]); // 64 KiB in all: over 48 KiB
    });
    // SAFETY: nothing is touched.
    let message = unsafe { dev.launch(&big, LaunchConfig::new(1, 1), &mut []) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(message.contains("over the limit"), "{message}");
    let small = Runtime::with_backend(Arc::new(SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            shared_memory: 1024,
            ..SimDeviceConfig::default()
        }],
    })));
    let small_dev = small.device(0).map_err(fail("device"))?;
    ensure!(
        small_dev
            .info()
            .map_err(fail("info"))?
            .max_shared_memory_per_block
            == 1024,
        "settable limit"
    );
    let fits = Kernel::sim("fits", |t| {
        let _ = t.shared_array::<u8, 1>([1024]);
    });
    // SAFETY: nothing is touched.
    unsafe { small_dev.launch(&fits, LaunchConfig::new(1, 1), &mut []) }
        .map_err(fail("exactly at the limit"))?;
    Ok(())
}

fn invalid_launch_configurations(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::sim("noop", |_| {});
    for (grid, block) in [
        (Dim3::new(0, 1, 1), Dim3::new(1, 1, 1)),
        (Dim3::new(1, 1, 1), Dim3::new(2048, 1, 1)),
        (Dim3::new(1, 1, 1), Dim3::new(32, 32, 2)),
    ] {
        // SAFETY: nothing is touched.
        let result = unsafe { dev.launch(&kernel, LaunchConfig::new(grid, block), &mut []) };
        match result {
            Err(Error::InvalidLaunch { kernel, .. }) => {
                ensure!(kernel == "noop", "names the kernel")
            }
            other => {
                return Err(format!(
                    "grid {grid} block {block}: expected InvalidLaunch, got {other:?}"
                ));
            }
        }
    }
    Ok(())
}

fn kernels_need_their_backend_form(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // No code at all: refused with a message saying what to add.
    let empty = Kernel::new("no_code");
    // SAFETY: nothing is touched.
    let result = unsafe { dev.launch(&empty, LaunchConfig::new(1, 1), &mut []) };
    match result {
        Err(Error::NotSupportedByBackend { reason, .. }) => ensure!(
            reason.contains("no_code") && reason.contains("with_source"),
            "{reason}"
        ),
        other => return Err(format!("expected NotSupportedByBackend, got {other:?}")),
    }
    // Portable source alone runs on the simulator, compiled by the host compiler.
    let source_only = Kernel::new("gpu_only")
        .with_source("extern \"C\" __global__ void gpu_only() {}", "gpu_only");
    // SAFETY: nothing is touched.
    unsafe { dev.launch(&source_only, LaunchConfig::new(1, 1), &mut []) }
        .map_err(fail("source-only kernel"))?;
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Particle {
    x: f32,
    v: f32,
}

fn records_scalars_and_mapped_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut record = dev
        .to_device_record(&Particle { x: 1.0, v: 2.0 })
        .map_err(fail("record"))?;
    let mut mapped = dev
        .mapped_array::<f32>(&[32], MapFlags::default())
        .map_err(fail("mapped"))?;
    let kernel = Kernel::sim("step", |t| {
        let p = t.record::<Particle>(0);
        let dt = t.scalar::<f32>(1);
        let out = t.array::<f32>(2);
        let i = t.grid1();
        out.set([i], i as f32 * dt);
        t.syncthreads();
        if i == 0 {
            let mut value = p.get();
            value.x += value.v * dt;
            p.set(value);
        }
    });
    // SAFETY: the kernel stays inside its arguments.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 32),
            &mut [&mut record, &mut Scalar(0.5f32), &mut mapped],
        )
    }
    .map_err(fail("launch"))?;
    ensure!(
        record.copy_to_host().map_err(fail("record"))? == Particle { x: 2.0, v: 2.0 },
        "record updated in place"
    );
    let host = mapped.read().map_err(fail("read"))?;
    ensure!(
        host.iter().enumerate().all(|(i, v)| *v == i as f32 * 0.5),
        "mapped array written with no copy: {host:?}"
    );
    Ok(())
}

fn warp_size_64_device(_rt: &Runtime) -> Result<(), String> {
    let rt = Runtime::with_backend(Arc::new(SimBackend::new(SimConfig {
        devices: vec![
            SimDeviceConfig {
                warp_size: 32,
                ..SimDeviceConfig::default()
            },
            SimDeviceConfig {
                warp_size: 64,
                ..SimDeviceConfig::default()
            },
        ],
    })));
    for (ordinal, warp) in [(0usize, 32usize), (1, 64)] {
        let dev = rt.device(ordinal).map_err(fail("device"))?;
        ensure!(
            dev.info().map_err(fail("info"))?.warp_size as usize == warp,
            "device {ordinal} warp size"
        );
        let mut out = dev
            .device_array::<u32>(&[128, 2], Order::C)
            .map_err(fail("alloc"))?;
        let kernel = Kernel::sim("lanes", |t| {
            let out = t.array::<u32>(0);
            let i = t.grid1();
            out.set([i, 0], t.lane_id());
            out.set([i, 1], t.warp_id());
        });
        // SAFETY: the kernel stays inside its argument.
        unsafe { dev.launch(&kernel, LaunchConfig::new(1, 128), &mut [&mut out]) }
            .map_err(fail("launch"))?;
        let out = out.copy_to_host().map_err(fail("copy"))?;
        ensure!(
            (0..128).all(|i| out[[i, 0]] as usize == i % warp && out[[i, 1]] as usize == i / warp),
            "lanes for warp {warp}"
        );
        let mut result = dev
            .device_array::<f32>(&[BARRIER_WAVE_MAX_BLOCK], Order::C)
            .map_err(fail("alloc"))?;
        let mut scratch = dev
            .device_array::<f32>(&[BARRIER_WAVE_MAX_BLOCK], Order::C)
            .map_err(fail("alloc"))?;
        // SAFETY: as above.
        unsafe {
            dev.launch(
                &barrier_wave(),
                LaunchConfig::new(1, BARRIER_WAVE_MAX_BLOCK as u32),
                &mut [&mut result, &mut scratch],
            )
        }
        .map_err(fail("barrier_wave"))?;
        let result = result.copy_to_host().map_err(fail("copy"))?;
        ensure!(
            (0..BARRIER_WAVE_MAX_BLOCK)
                .all(|i| result[[i]] == barrier_wave_expected(i, BARRIER_WAVE_MAX_BLOCK, warp)),
            "barrier_wave with warp {warp}"
        );
    }
    Ok(())
}

fn stream_kernel_failure_surfaces_at_synchronize(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut a = dev
        .device_array::<u8>(&[4], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("late_fault", |t| {
        t.array::<u8>(0).set([100], 1);
    });
    // SAFETY: the out-of-bounds write is caught by the simulator.
    unsafe { stream.launch(&kernel, LaunchConfig::new(1, 1), &mut [&mut a]) }
        .map_err(fail("enqueue"))?;
    let message = stream
        .synchronize()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("late_fault") && message.contains("[100]"),
        "{message}"
    );
    stream
        .synchronize()
        .map_err(fail("the failure is reported once"))?;
    Ok(())
}

/// A device-wide synchronization reports a stream's failure, and each stream's owner is still told
/// of its own at the stream's synchronization (none is lost to the device-wide one).
fn device_synchronize_leaves_failures_to_their_streams(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let streams = [
        dev.stream().map_err(fail("stream"))?,
        dev.stream().map_err(fail("stream"))?,
    ];
    let mut arrays = [
        dev.device_array::<u8>(&[4], Order::C)
            .map_err(fail("alloc"))?,
        dev.device_array::<u8>(&[4], Order::C)
            .map_err(fail("alloc"))?,
    ];
    let kernel = Kernel::sim("stream_fault", |t| {
        t.array::<u8>(0).set([100], 1);
    });
    for (stream, array) in streams.iter().zip(&mut arrays) {
        // SAFETY: the out-of-bounds write is caught by the simulator.
        unsafe { stream.launch(&kernel, LaunchConfig::new(1, 1), &mut [array]) }
            .map_err(fail("enqueue"))?;
    }
    ensure!(
        dev.synchronize().is_err(),
        "the device-wide synchronization reports a failure"
    );
    ensure!(
        streams[0].query().is_err(),
        "a query of a stream whose work failed reports the failure"
    );
    for (i, stream) in streams.iter().enumerate() {
        let message = stream
            .synchronize()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        ensure!(
            message.contains("stream_fault"),
            "stream {i} still reports its failure: {message:?}"
        );
    }
    Ok(())
}

fn barriers_really_wait_for_the_block(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // Thread t writes slot t, then after the barrier reads slot (t + 1) % n: without a real
    // barrier, early threads would read slots not yet written.
    let mut out = dev
        .device_array::<i32>(&[2, 256], Order::C)
        .map_err(fail("alloc"))?;
    let kernel = Kernel::sim("ring", |t| {
        let out = t.array::<i32>(0);
        let s = t.shared_array::<i32, 1>([256]);
        let tid = t.thread_idx().x as usize;
        s.set([tid], tid as i32 + 1);
        t.syncthreads();
        out.set([t.block_idx().x as usize, tid], s.get([(tid + 1) % 256]));
    });
    // SAFETY: the kernel stays inside its argument.
    unsafe { dev.launch(&kernel, LaunchConfig::new(2, 256), &mut [&mut out]) }
        .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        (0..256).all(|t| out[[0, t]] == ((t + 1) % 256) as i32 + 1 && out[[1, t]] == out[[0, t]]),
        "ring after barrier"
    );
    Ok(())
}

fn atomics_are_exact_across_blocks(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut totals = dev
        .to_device(&Array1::from(vec![0u64, 0]))
        .map_err(fail("totals"))?;
    let mut extremes = dev
        .to_device(&Array1::from(vec![f32::MIN, f32::MAX]))
        .map_err(fail("extremes"))?;
    let mut sum = dev
        .to_device(&Array1::from(vec![0.0f64]))
        .map_err(fail("sum"))?;
    let kernel = Kernel::sim("atomics", |t| {
        let (totals, extremes, sum) = (t.array::<u64>(0), t.array::<f32>(1), t.array::<f64>(2));
        let i = t.grid1() as u64;
        totals.atomic_add([0], 1);
        totals.atomic_add([1], i);
        extremes.atomic_max([0], i as f32);
        extremes.atomic_min([1], i as f32);
        sum.atomic_add([0], 0.5);
    });
    let (blocks, threads) = (64u32, 128u32);
    // SAFETY: every access is an atomic on an in-bounds element.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(blocks, threads),
            &mut [&mut totals, &mut extremes, &mut sum],
        )
    }
    .map_err(fail("launch"))?;
    let n = (blocks * threads) as u64;
    let totals = totals.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        totals[[0]] == n && totals[[1]] == n * (n - 1) / 2,
        "atomic adds lost updates: {totals:?}"
    );
    let extremes = extremes.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        extremes[[0]] == (n - 1) as f32 && extremes[[1]] == 0.0,
        "atomic max/min: {extremes:?}"
    );
    ensure!(
        sum.copy_to_host().map_err(fail("copy"))?[[0]] == n as f64 * 0.5,
        "atomic float add"
    );
    Ok(())
}
