//! Kernels written once as portable source (`tests/kernels/*.cu`) and launched on every backend
//! that can launch kernels: the simulator compiles them with the host C++ compiler, CUDA with
//! NVRTC, ROC with hiprtc (the book's kernels chapter). The second group checks the simulator's diagnostics on
//! the same source: faults, divergence, wrong arguments, compile errors, shared-memory limits.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::sim::{SimBackend, SimConfig, SimDeviceConfig};
use gpu_mem::{Error, KernelArg, Runtime};
use ndarray::{Array1, Array2, ArrayD, s};
use std::sync::Arc;

const INDICES: &str = include_str!("../../kernels/indices.cu");
const TRANSPOSE: &str = include_str!("../../kernels/transpose.cu");
const WARP_REDUCE: &str = include_str!("../../kernels/warp_reduce.cu");
const VOTES: &str = include_str!("../../kernels/votes.cu");
const ATOMICS: &str = include_str!("../../kernels/atomics.cu");
const SPIN_WAIT: &str = include_str!("../../kernels/spin_wait.cu");
const LOCAL_AND_ARGS: &str = include_str!("../../kernels/local_and_args.cu");
const FAULTS: &str = include_str!("../../kernels/faults.cu");
const RING: &str = include_str!("../../kernels/ring.cu");
const BYTES_AND_ZERO_D: &str = include_str!("../../kernels/bytes_and_zero_d.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["source", Requires::Kernels;
        thread_and_block_indices,
        shared_memory_transpose,
        warp_shuffles_and_atomics,
        warp_and_block_votes,
        every_atomic_on_global_and_shared_memory,
        spin_wait_across_warps_finishes,
        local_arrays_records_scalars_strided_views,
        bytes_as_bool_and_char_and_zero_d_arrays,
        smart_and_mapped_arrays_as_arguments,
        barriers_really_wait_for_the_block,
        stream_launches_run_in_order,
        clones_given_other_sources_run_their_own,
    ];
    cases.extend(crate::cases!["source", Requires::Simulator;
        warp_of_64_lanes,
        out_of_bounds_index_is_a_fault,
        divergence_names_the_line,
        collective_divergence_is_an_error,
        different_barriers_are_an_error,
        stream_kernel_fault_surfaces_at_synchronize,
        wrong_arguments_are_refused_before_running,
        compile_errors_carry_the_line,
        undefined_device_functions_are_compile_errors,
        static_shared_memory_counts_against_the_limit,
    ]);
    cases
}

fn device(rt: &Runtime) -> Result<gpu_mem::Device, String> {
    rt.device(0).map_err(fail("device"))
}

fn thread_and_block_indices(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let warp = dev.info().map_err(fail("info"))?.warp_size as i32;
    let (gx, gy, gz, bx, by, bz) = (3u32, 2u32, 2u32, 4u32, 3u32, 2u32);
    let shape = [(gz * bz) as usize, (gy * by) as usize, (gx * bx) as usize];
    let mut out = dev
        .device_array::<i64>(&shape, Order::C)
        .map_err(fail("out"))?;
    let total = shape.iter().product::<usize>();
    let mut lanes = dev
        .device_array::<i32>(&[total], Order::C)
        .map_err(fail("lanes"))?;
    let kernel = Kernel::from_source(INDICES, "indices");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new((gx, gy, gz), (bx, by, bz)),
            &mut [&mut out, &mut lanes],
        )
    }
    .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    for ((z, y, x), value) in out
        .view()
        .into_dimensionality::<ndarray::Ix3>()
        .map_err(fail("dims"))?
        .indexed_iter()
    {
        let (b, t) = (
            [x as u32 / bx, y as u32 / by, z as u32 / bz],
            [x as u32 % bx, y as u32 % by, z as u32 % bz],
        );
        let expected = b[0] as i64 * 1_000_000
            + b[1] as i64 * 10_000
            + b[2] as i64 * 100
            + t[0] as i64 * 10
            + t[1] as i64
            + t[2] as i64;
        ensure!(*value == expected, "({z}, {y}, {x}): {value} != {expected}");
    }
    // Lanes count threads of a block in x-fastest order (the lane of a 3-d block's thread).
    let lanes = lanes.copy_to_host().map_err(fail("copy lanes"))?;
    ensure!(
        lanes.iter().all(|v| v / 1000 == warp && v % 1000 < warp),
        "lane ids and warp size: {lanes:?}"
    );
    Ok(())
}

fn shared_memory_transpose(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (rows, cols) = (70usize, 45usize);
    let a = Array2::from_shape_fn((rows, cols), |(i, j)| (i * 1000 + j) as f32);
    let mut d_a = dev.to_device(&a).map_err(fail("a"))?;
    let mut d_t = dev
        .device_array::<f32>(&[cols, rows], Order::C)
        .map_err(fail("t"))?;
    let config = LaunchConfig::new(
        (cols.div_ceil(32) as u32, rows.div_ceil(32) as u32),
        (32, 8),
    );
    let kernel = Kernel::from_source(TRANSPOSE, "transpose");
    // SAFETY: the kernel checks its bounds.
    unsafe { dev.launch(&kernel, config, &mut [&mut d_a, &mut d_t]) }.map_err(fail("launch"))?;
    let t = d_t.copy_to_host().map_err(fail("copy"))?;
    ensure!(t == a.t().to_owned().into_dyn(), "transpose differs");
    Ok(())
}

fn warp_shuffles_and_atomics(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let warp = dev.info().map_err(fail("info"))?.warp_size as usize;
    let n = 1000usize;
    let input = Array1::from_shape_fn(n, |i| (i % 17) as i32 - 5);
    let mut d_input = dev.to_device(&input).map_err(fail("input"))?;
    let mut total = dev
        .to_device(&Array1::<i32>::zeros(1))
        .map_err(fail("total"))?;
    let threads = n.div_ceil(128) * 128;
    let mut exchange = dev
        .device_array::<i32>(&[threads, 3], Order::C)
        .map_err(fail("exchange"))?;
    let kernel = Kernel::from_source(WARP_REDUCE, "warp_reduce");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(n, 128),
            &mut [&mut d_input, &mut total, &mut exchange],
        )
    }
    .map_err(fail("launch"))?;
    let total = total.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        total[[0]] == input.sum(),
        "sum {} != {}",
        total[[0]],
        input.sum()
    );
    let exchange = exchange.copy_to_host().map_err(fail("copy exchange"))?;
    for i in 0..threads {
        let lane = i % warp;
        let (first, xor, up) = (
            exchange[[i, 0]] as usize,
            exchange[[i, 1]] as usize,
            exchange[[i, 2]] as usize,
        );
        ensure!(first == i - lane, "thread {i}: __shfl_sync read {first}");
        ensure!(xor == i ^ 1, "thread {i}: __shfl_xor_sync read {xor}");
        let expected_up = if lane == 0 { i } else { i - 1 };
        ensure!(up == expected_up, "thread {i}: __shfl_up_sync read {up}");
    }
    Ok(())
}

fn warp_and_block_votes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let warp = dev.info().map_err(fail("info"))?.warp_size as usize;
    let block = 128usize;
    let n = block * 3;
    // Block 0: all positive; block 1: none; block 2: every third.
    let value = Array1::from_shape_fn(n, |i| match i / block {
        0 => 1,
        1 => 0,
        _ => i32::from(i % 3 == 0),
    });
    let mut d_value = dev.to_device(&value).map_err(fail("value"))?;
    let mut out = dev
        .device_array::<i64>(&[n, 6], Order::C)
        .map_err(fail("out"))?;
    let kernel = Kernel::from_source(VOTES, "votes");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(n, block as u32),
            &mut [&mut d_value, &mut out],
        )
    }
    .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    for i in 0..n {
        let warp_start = i - i % warp;
        let lanes = warp_start..warp_start + warp;
        let ballot = lanes
            .clone()
            .filter(|&l| value[l] > 0)
            .fold(0u64, |bits, l| bits | 1 << (l - warp_start));
        let block_start = i - i % block;
        let count = (block_start..block_start + block)
            .filter(|&l| value[l] > 0)
            .count() as i64;
        let expected = [
            (ballot & 0xffff_ffff) as i64,
            i64::from(lanes.clone().all(|l| value[l] > 0)),
            i64::from(lanes.clone().any(|l| value[l] > 0)),
            count,
            i64::from(count == block as i64),
            i64::from(count > 0),
        ];
        let got: Vec<i64> = (0..6).map(|k| out[[i, k]]).collect();
        ensure!(got == expected, "thread {i}: {got:?} != {expected:?}");
    }
    Ok(())
}

/// The accumulators of `atomics.cu`: acc, facc, dacc.
type Accumulators = (DeviceArray<u32>, DeviceArray<f32>, DeviceArray<f64>);

/// The accumulators of `atomics.cu` (after `keys` and `hist`): acc, facc, dacc, zeroed but for
/// `acc(3)` and `acc(4)` when `min_and` (the min and and accumulators start at all ones).
fn atomic_accumulators(dev: &gpu_mem::Device, min_and: bool) -> Result<Accumulators, String> {
    let mut start = Array1::<u32>::zeros(11);
    if min_and {
        start[3] = u32::MAX;
        start[4] = u32::MAX;
    }
    Ok((
        dev.to_device(&start).map_err(fail("acc"))?,
        dev.to_device(&Array1::<f32>::zeros(1))
            .map_err(fail("facc"))?,
        dev.to_device(&Array1::<f64>::zeros(1))
            .map_err(fail("dacc"))?,
    ))
}

fn every_atomic_on_global_and_shared_memory(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 3000usize;
    let keys = Array1::from_shape_fn(n, |i| ((i * 7) % 16) as i32);
    let mut d_keys = dev.to_device(&keys).map_err(fail("keys"))?;
    let mut hist = dev
        .to_device(&Array1::<u32>::zeros(16))
        .map_err(fail("hist"))?;
    let (mut acc, mut facc, mut dacc) = atomic_accumulators(&dev, true)?;
    let kernel = Kernel::from_source(ATOMICS, "atomics");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(n, 256),
            &mut [&mut d_keys, &mut hist, &mut acc, &mut facc, &mut dacc],
        )
    }
    .map_err(fail("launch"))?;
    let hist = hist.copy_to_host().map_err(fail("hist"))?;
    for k in 0..16 {
        let expected = keys.iter().filter(|&&x| x == k as i32).count() as u32;
        ensure!(
            hist[[k]] == expected,
            "histogram bin {k}: {} != {expected}",
            hist[[k]]
        );
    }
    let acc = acc.copy_to_host().map_err(fail("acc"))?;
    let sum = (0..n as u32).fold(0u32, u32::wrapping_add);
    let (mut inc, mut dec) = (0u32, 0u32);
    for _ in 0..n {
        inc = if inc >= 1000 { 0 } else { inc + 1 };
        dec = if dec == 0 || dec > 1000 {
            1000
        } else {
            dec - 1
        };
    }
    let xor = (0..n as u32).fold(0, |a, b| a ^ b);
    let expected = [
        sum,
        0u32.wrapping_sub(sum),
        n as u32 - 1,
        0,
        0,
        u32::MAX,
        xor,
        inc,
        dec,
    ];
    for (k, want) in expected.iter().enumerate() {
        ensure!(acc[[k]] == *want, "acc({k}) = {} != {want}", acc[[k]]);
    }
    ensure!((acc[[9]] as usize) < n, "atomicExch left {}", acc[[9]]);
    ensure!(acc[[10]] == n as u32, "atomicCAS counter {}", acc[[10]]);
    let facc = facc.copy_to_host().map_err(fail("facc"))?;
    let dacc = dacc.copy_to_host().map_err(fail("dacc"))?;
    ensure!(facc[[0]] == n as f32 * 0.5, "float add {}", facc[[0]]);
    ensure!(dacc[[0]] == n as f64 * 0.25, "double add {}", dacc[[0]]);
    Ok(())
}

fn spin_wait_across_warps_finishes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let blocks = 6usize;
    let mut flags = dev
        .to_device(&Array1::<i32>::zeros(blocks))
        .map_err(fail("flags"))?;
    let mut data = dev
        .to_device(&Array1::<i32>::zeros(blocks))
        .map_err(fail("data"))?;
    let mut out = dev
        .to_device(&Array1::<i32>::zeros(blocks))
        .map_err(fail("out"))?;
    let kernel = Kernel::from_source(SPIN_WAIT, "spin_wait");
    // SAFETY: the kernel stays inside its arguments.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(blocks as u32, 128),
            &mut [&mut flags, &mut data, &mut out],
        )
    }
    .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    ensure!(
        out.iter().enumerate().all(|(b, v)| *v == 1000 + b as i32),
        "{out:?}"
    );
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Shift {
    x: f64,
    unused: f64,
}

/// `u8` data for `bool` and `char` parameters, and a 0-d array for a `T*` one: what the GPU
/// backends take, the simulator takes too.
fn bytes_as_bool_and_char_and_zero_d_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mask = Array1::from_iter((0..40u8).map(|i| u8::from(i % 3 == 0)));
    let text = Array1::from_iter((0..40u8).map(|i| b'a' + i % 26));
    let mut d_mask = dev.to_device(&mask).map_err(fail("mask"))?;
    let mut d_text = dev.to_device(&text).map_err(fail("text"))?;
    let mut out = dev
        .device_array::<i32>(&[40], Order::C)
        .map_err(fail("out"))?;
    let mut total = dev.to_device(&ndarray::arr0(0i32)).map_err(fail("total"))?;
    let kernel = Kernel::from_source(BYTES_AND_ZERO_D, "bytes_and_zero_d");
    // SAFETY: the kernel stays inside its arguments (one thread per element of `out`).
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::for_items(40, 32),
            &mut [
                &mut d_mask,
                &mut Scalar(1u8),
                &mut d_text,
                &mut out,
                &mut total,
            ],
        )
    }
    .map_err(fail("launch"))?;
    let out = out.copy_to_host().map_err(fail("copy"))?;
    let want: Vec<i32> = (0..40)
        .map(|i| if mask[i] != 1 { i32::from(text[i]) } else { -1 })
        .collect();
    ensure!(out.iter().copied().eq(want.iter().copied()), "{out:?}");
    let total = total.copy_to_host().map_err(fail("total"))?;
    let taken = want.iter().filter(|v| **v >= 0).count() as i32;
    ensure!(total.iter().eq([&taken]), "total {total:?}, want {taken}");
    Ok(())
}

fn local_arrays_records_scalars_strided_views(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let full = Array2::from_shape_fn((12, 10), |(i, j)| (i * 10 + j) as f64);
    let d_full = dev.to_device(&full).map_err(fail("full"))?;
    // Every other row, columns 1..9: a strided, non-contiguous view.
    let mut view = d_full.slice(s![..;2, 1..9]).map_err(fail("view"))?;
    let mut shift = dev
        .to_device_record(&Shift {
            x: 0.5,
            unused: 0.0,
        })
        .map_err(fail("record"))?;
    let mut sums = dev
        .device_array::<f64>(&[6], Order::C)
        .map_err(fail("sums"))?;
    let kernel = Kernel::from_source(LOCAL_AND_ARGS, "local_and_args");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 32),
            &mut [&mut view, &mut shift, &mut Scalar(2.0f64), &mut sums],
        )
    }
    .map_err(fail("launch"))?;
    let after = d_full.copy_to_host().map_err(fail("copy"))?;
    let mut expected = full.clone();
    expected
        .slice_mut(s![..;2, 1..9])
        .mapv_inplace(|v| v * 2.0 + 0.5);
    ensure!(
        after == expected.into_dyn(),
        "only the view changed: {after:?}"
    );
    let sums = sums.copy_to_host().map_err(fail("sums"))?;
    for r in 0..6 {
        let want: f64 = (1..9).map(|c| full[[2 * r, c]] * 2.0 + 0.5).sum();
        ensure!(sums[[r]] == want, "row {r}: {} != {want}", sums[[r]]);
    }
    Ok(())
}

fn smart_and_mapped_arrays_as_arguments(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 64usize;
    let mut keys = SmartArray::new(
        &dev,
        ArrayD::from_shape_fn(ndarray::IxDyn(&[n]), |i| (i[0] % 16) as i32),
    );
    let mut hist = dev
        .mapped_array::<u32>(&[16], MapFlags::default())
        .map_err(fail("mapped"))?;
    hist.write(&Array1::<u32>::zeros(16).into_dyn())
        .map_err(fail("zero"))?;
    let (mut acc, mut facc, mut dacc) = atomic_accumulators(&dev, false)?;
    let kernel = Kernel::from_source(ATOMICS, "atomics");
    // SAFETY: the kernel checks its bounds.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(1, 64),
            &mut [&mut keys, &mut hist, &mut acc, &mut facc, &mut dacc],
        )
    }
    .map_err(fail("launch"))?;
    let hist = hist.read().map_err(fail("read"))?;
    ensure!(hist.iter().all(|&c| c == 4), "mapped histogram: {hist:?}");
    Ok(())
}

fn warp_of_64_lanes(_rt: &Runtime) -> Result<(), String> {
    let rt = Runtime::with_backend(Arc::new(SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            warp_size: 64,
            ..SimDeviceConfig::default()
        }],
    })));
    thread_and_block_indices(&rt)?;
    warp_shuffles_and_atomics(&rt)?;
    warp_and_block_votes(&rt)?;
    spin_wait_across_warps_finishes(&rt)
}

fn out_of_bounds_index_is_a_fault(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // A view of the middle of a larger array: the element past its end exists in memory and
    // must stay untouched.
    let full = dev
        .to_device(&Array1::<f32>::zeros(40))
        .map_err(fail("full"))?;
    let mut view = full.slice(s![..32]).map_err(fail("view"))?;
    let kernel = Kernel::from_source(FAULTS, "past_the_end");
    // SAFETY: the simulator checks the out-of-bounds write this kernel makes.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), &mut [&mut view]) };
    match result {
        Err(Error::KernelFault {
            kernel,
            block,
            thread,
            message,
        }) => {
            ensure!(kernel == "past_the_end", "names the kernel: {kernel}");
            ensure!(
                block == [0, 0, 0] && thread == [31, 0, 0],
                "names block and thread: {block:?} {thread:?}"
            );
            ensure!(
                message.contains("index (32)") && message.contains("shape (32)"),
                "names index and shape: {message}"
            );
        }
        other => return Err(format!("expected KernelFault, got {other:?}")),
    }
    let host = full.copy_to_host().map_err(fail("copy"))?;
    ensure!(host[[32]] == 0.0, "nothing written past the view: {host:?}");
    ensure!(
        host.iter().take(32).skip(1).all(|&v| v == 1.0),
        "in-bounds writes happened"
    );
    Ok(())
}

fn divergence_names_the_line(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut a = dev.device_array::<f32>(&[1], Order::C).map_err(fail("a"))?;
    let kernel = Kernel::from_source(FAULTS, "half_barrier");
    // SAFETY: the simulator reports the divergence.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 64), &mut [&mut a]) };
    match result {
        Err(Error::BarrierDivergence { kernel, detail, .. }) => {
            ensure!(kernel == "half_barrier", "names the kernel: {kernel}");
            // The source's file is named after its first kernel (the module's name).
            ensure!(
                detail.contains("16 of 64") && detail.contains("past_the_end.cu:13"),
                "says who arrived where: {detail}"
            );
        }
        other => return Err(format!("expected BarrierDivergence, got {other:?}")),
    }
    Ok(())
}

fn collective_divergence_is_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut a = dev
        .device_array::<i32>(&[32], Order::C)
        .map_err(fail("a"))?;
    let kernel = Kernel::from_source(FAULTS, "lane_vote");
    // SAFETY: the simulator reports the divergence.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), &mut [&mut a]) };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("__any_sync")
            && message.contains("exited")
            && message.contains("lane_vote"),
        "{message}"
    );
    Ok(())
}

fn wrong_arguments_are_refused_before_running(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(TRANSPOSE, "transpose");
    let mut doubles = dev
        .device_array::<f64>(&[4, 4], Order::C)
        .map_err(fail("doubles"))?;
    let mut floats = dev
        .device_array::<f32>(&[4, 4], Order::C)
        .map_err(fail("floats"))?;
    let mut flat = dev
        .device_array::<f32>(&[16], Order::C)
        .map_err(fail("flat"))?;
    let check = |what: &str, args: &mut [&mut dyn KernelArg], needle: &str| {
        // SAFETY: refused before anything runs.
        let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), args) };
        match result {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                ensure!(
                    kernel == "transpose" && reason.contains(needle),
                    "{what}: {reason}"
                );
                Ok(())
            }
            other => Err(format!("{what}: expected InvalidLaunch, got {other:?}")),
        }
    };
    check("element type", &mut [&mut doubles, &mut floats], "f64")?;
    check("rank", &mut [&mut flat, &mut floats], "dimension")?;
    check("count", &mut [&mut floats], "takes 2 parameter")?;
    Ok(())
}

fn compile_errors_carry_the_line(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let source = "#include \"gpu_mem.h\"\n\nextern \"C\" __global__ void broken(gm_array<float, 1> a) {\n    a(0) = undefined_name;\n}\n";
    let kernel = Kernel::from_source(source, "broken");
    let mut a = dev.device_array::<f32>(&[1], Order::C).map_err(fail("a"))?;
    // SAFETY: it does not compile.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 1), &mut [&mut a]) };
    match result {
        Err(Error::KernelCompile { kernel, log, .. }) => ensure!(
            kernel == "broken" && log.contains("broken.cu:4") && log.contains("undefined_name"),
            "{log}"
        ),
        other => return Err(format!("expected KernelCompile, got {other:?}")),
    }
    Ok(())
}

/// A `__device__` function declared and never defined is a compile error. (The library linked
/// and loaded, and the first thread to call the function ended the process: the dynamic linker
/// exits on a symbol it cannot bind.)
fn undefined_device_functions_are_compile_errors(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let source = "#include \"gpu_mem.h\"\n__device__ int helper(int);\nextern \"C\" __global__ void calls_undefined(gm_array<int, 1> a) {\n    if (a(0) == 7) a(0) = helper(1);\n}\n";
    let kernel = Kernel::from_source(source, "calls_undefined");
    // Zero: the call is never reached, so nothing ends the process whatever happens.
    let mut a = dev.to_device(&Array1::<i32>::zeros(1)).map_err(fail("a"))?;
    // SAFETY: it does not build.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 1), &mut [&mut a]) };
    match result {
        Err(Error::KernelCompile { log, .. }) => ensure!(log.contains("helper"), "{log}"),
        other => return Err(format!("expected KernelCompile, got {other:?}")),
    }
    Ok(())
}

fn static_shared_memory_counts_against_the_limit(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let source = "#include \"gpu_mem.h\"\nextern \"C\" __global__ void big(gm_array<float, 1> a) {\n    __shared__ float tile[8192];\n    tile[threadIdx.x] = 1.0f;\n    syncthreads();\n    a(0) = tile[0];\n}\n";
    let kernel = Kernel::from_source(source, "big");
    let mut a = dev.device_array::<f32>(&[1], Order::C).map_err(fail("a"))?;
    // 32 KiB static fits the 48 KiB limit; 32 KiB more of dynamic shared memory does not.
    // SAFETY: the kernel stays inside its arguments.
    unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), &mut [&mut a]) }
        .map_err(fail("fits"))?;
    let too_much = LaunchConfig::new(1, 32).with_shared_bytes(32 << 10);
    // SAFETY: refused.
    let result = unsafe { dev.launch(&kernel, too_much, &mut [&mut a]) };
    match result {
        Err(Error::InvalidLaunch { reason, .. }) => {
            ensure!(reason.contains("static __shared__"), "{reason}")
        }
        other => return Err(format!("expected InvalidLaunch, got {other:?}")),
    }
    // Exactly what remains of the limit fits, whatever way the kernel's threads run (this one
    // runs stackless: the frame arenas of that form were counted as the kernel's arrays).
    let limit = dev
        .info()
        .map_err(fail("info"))?
        .max_shared_memory_per_block;
    let exact = LaunchConfig::new(1, 32).with_shared_bytes(limit - (32 << 10));
    // SAFETY: the kernel stays inside its arguments.
    unsafe { dev.launch(&kernel, exact, &mut [&mut a]) }.map_err(fail("exactly the limit"))?;
    let over = LaunchConfig::new(1, 32).with_shared_bytes(limit - (32 << 10) + 1);
    // SAFETY: refused.
    let refused = unsafe { dev.launch(&kernel, over, &mut [&mut a]) }.is_err();
    ensure!(refused, "one byte over the limit was accepted");
    Ok(())
}

fn barriers_really_wait_for_the_block(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(RING, "ring");
    for block in [256usize, 96, 1024] {
        let mut out = dev
            .device_array::<i32>(&[3, block], Order::C)
            .map_err(fail("out"))?;
        // SAFETY: the kernel stays inside its argument.
        unsafe { dev.launch(&kernel, LaunchConfig::new(3, block as u32), &mut [&mut out]) }
            .map_err(fail("launch"))?;
        let out = out.copy_to_host().map_err(fail("copy"))?;
        for ((_, t), v) in out
            .view()
            .into_dimensionality::<ndarray::Ix2>()
            .map_err(fail("dims"))?
            .indexed_iter()
        {
            let want = ((t + 1) % block + 1) as i32;
            ensure!(*v == want, "block size {block}, thread {t}: {v} != {want}");
        }
    }
    Ok(())
}

fn stream_launches_run_in_order(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let kernel = Kernel::from_source(ATOMICS, "atomics");
    let n = 512usize;
    let mut keys = dev
        .to_device(&Array1::from_shape_fn(n, |i| (i % 16) as i32))
        .map_err(fail("keys"))?;
    let mut hist = dev
        .to_device(&Array1::<u32>::zeros(16))
        .map_err(fail("hist"))?;
    let (mut acc, mut facc, mut dacc) = atomic_accumulators(&dev, false)?;
    for _ in 0..3 {
        // SAFETY: the kernel checks its bounds; the stream keeps the arrays alive.
        unsafe {
            stream.launch(
                &kernel,
                LaunchConfig::for_items(n, 128),
                &mut [&mut keys, &mut hist, &mut acc, &mut facc, &mut dacc],
            )
        }
        .map_err(fail("enqueue"))?;
    }
    stream.synchronize().map_err(fail("synchronize"))?;
    let hist = hist.copy_to_host().map_err(fail("hist"))?;
    ensure!(
        hist.iter().all(|&c| c == 3 * (n / 16) as u32),
        "three launches counted: {hist:?}"
    );
    Ok(())
}

/// Clones of one kernel given different sources are different kernels: each launch runs its
/// own source (the simulator's cache of compiled programs was keyed by the kernel's id, which
/// clones share, so the second ran the first one's code).
fn clones_given_other_sources_run_their_own(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let writes = |value: i32| {
        format!(
            "#include \"gpu_mem.h\"\nextern \"C\" __global__ void put(gm_array<int, 1> out) {{ out(0) = {value}; }}\n"
        )
    };
    // A name no file could have (a `/`, and longer than a file name may be) is only a name.
    let base = Kernel::new(format!("ops/put/{}", "x".repeat(300)));
    let one = base.clone().with_source(writes(1), "put");
    let two = base.with_source(writes(2), "put");
    let mut out = dev
        .to_device(&Array1::<i32>::zeros(1))
        .map_err(fail("out"))?;
    for (kernel, want) in [(&one, 1), (&two, 2), (&one, 1)] {
        // SAFETY: one thread writes the array's one element.
        unsafe { dev.launch(kernel, LaunchConfig::new(1u32, 1u32), &mut [&mut out]) }
            .map_err(fail("launch"))?;
        let got = out.copy_to_host().map_err(fail("copy"))?[0];
        ensure!(got == want, "the kernel writing {want} wrote {got}");
    }
    Ok(())
}

fn different_barriers_are_an_error(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut a = dev.device_array::<f32>(&[1], Order::C).map_err(fail("a"))?;
    let kernel = Kernel::from_source(FAULTS, "two_barriers");
    // SAFETY: the simulator reports the divergence.
    let result = unsafe { dev.launch(&kernel, LaunchConfig::new(1, 32), &mut [&mut a]) };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("two_barriers")
            && message.contains("different barriers")
            && message.contains("past_the_end.cu:"),
        "{message}"
    );
    Ok(())
}

fn stream_kernel_fault_surfaces_at_synchronize(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut a = dev.device_array::<f32>(&[8], Order::C).map_err(fail("a"))?;
    let kernel = Kernel::from_source(FAULTS, "past_the_end");
    // SAFETY: the out-of-bounds write is caught by the simulator.
    unsafe { stream.launch(&kernel, LaunchConfig::new(1, 8), &mut [&mut a]) }
        .map_err(fail("enqueue"))?;
    let message = stream
        .synchronize()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("past_the_end") && message.contains("index (8)"),
        "{message}"
    );
    stream
        .synchronize()
        .map_err(fail("the failure is reported once"))?;
    Ok(())
}
