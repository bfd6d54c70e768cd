//! The simulator's kernel speed beside Numba's CUDA simulator and a plain Rust loop.
//!
//! `cargo bench -p gpu-mem --bench kernels` runs the library kernels from their portable source
//! (compiled by the host C++ compiler) and, side by side, the same kernels written as Rust
//! closures and as async Rust closures (this file's twins), for the tiled matmul at n = 32..512
//! and the block sum of
//! 2^14..2^22 `f32`. It prints each median next to a plain single-threaded i-k-j loop (matmul)
//! and the figures measured on this machine class with Numba 0.68.1 + numba-cuda 0.30.4 in its
//! CUDA simulator (the lower end of the measured ranges), the scaling exponent of each series,
//! and what compiling costs. Targets: at least 10,000x Numba's simulator (matmul n=64, block sum
//! 65,536), and the source matmul at n=256 within [`MATMUL_256_TARGET`] times the plain loop. Each kernel's result is
//! checked before it is timed; the forms of one size (and the loop) are run in turns, so that the
//! ratios between them hold on a shared machine. `-- --json` (or `GPU_MEM_BENCH_JSON=1`) adds one JSON object with
//! every figure.

use gpu_mem::kernels::{TPB, block_sum, matmul_tiled};
use gpu_mem::prelude::*;
use ndarray::{Array1, Array2};
use std::hint::black_box;
use std::time::Instant;

/// The most the source matmul at n=256 may take, as a multiple of the plain i-k-j loop.
const MATMUL_256_TARGET: f64 = 3.0;

/// Numba 0.68.1 + numba-cuda 0.30.4 CUDA simulator on this machine class, seconds (lower end
/// of the measured ranges: matmul n=64 5.3-8.4 s, block-sum 87-115 s).
const NUMBA_MATMUL_32: f64 = 1.38;
const NUMBA_MATMUL_64: f64 = 5.3;
const NUMBA_BLOCK_SUM_65536: f64 = 87.0;

fn time(runs: usize, mut f: impl FnMut() -> gpu_mem::Result<()>) -> gpu_mem::Result<f64> {
    f()?; // warm-up: compile, thread stacks, caches
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Runs each of `ops` once per round, `runs` rounds after a warm-up round, and returns each
/// one's median. The operations take turns, so a slow stretch of a shared machine falls on all
/// of them alike and the ratios between them hold within one run.
fn medians(
    runs: usize,
    ops: &mut [&mut dyn FnMut() -> gpu_mem::Result<()>],
) -> gpu_mem::Result<Vec<f64>> {
    let mut samples = vec![Vec::with_capacity(runs); ops.len()];
    for round in 0..=runs {
        for (op, samples) in ops.iter_mut().zip(&mut samples) {
            let start = Instant::now();
            op()?;
            if round > 0 {
                samples.push(start.elapsed().as_secs_f64());
            }
        }
    }
    Ok(samples
        .into_iter()
        .map(|mut samples| {
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect())
}

fn wrong(name: &'static str, reason: String) -> gpu_mem::Error {
    gpu_mem::Error::InvalidArgument { name, reason }
}

/// The closure twin of `matmul_tiled.cu` (simulator only).
fn matmul_closure() -> Kernel {
    Kernel::sim("matmul_tiled_closure", |t| {
        let (a, b, c) = (t.array::<f32>(0), t.array::<f32>(1), t.array::<f32>(2));
        let sa = t.shared_array::<f32, 2>([TPB, TPB]);
        let sb = t.shared_array::<f32, 2>([TPB, TPB]);
        let (x, y) = t.grid2();
        let (tx, ty) = (t.thread_idx().x as usize, t.thread_idx().y as usize);
        let (rows, inner, cols) = (a.shape()[0], a.shape()[1], b.shape()[1]);
        let mut acc = 0.0f32;
        for i in 0..inner.div_ceil(TPB) {
            let (col, row) = (tx + i * TPB, ty + i * TPB);
            sa.set(
                [ty, tx],
                if y < rows && col < inner {
                    a.get([y, col])
                } else {
                    0.0
                },
            );
            sb.set(
                [ty, tx],
                if x < cols && row < inner {
                    b.get([row, x])
                } else {
                    0.0
                },
            );
            t.syncthreads();
            for j in 0..TPB {
                acc += sa.get([ty, j]) * sb.get([j, tx]);
            }
            t.syncthreads();
        }
        if y < c.shape()[0] && x < c.shape()[1] {
            c.set([y, x], acc);
        }
    })
}

/// The closure twin of `block_sum.cu` (simulator only).
fn block_sum_closure() -> Kernel {
    Kernel::sim("block_sum_closure", |t| {
        let (input, partial) = (t.array::<f32>(0), t.array::<f32>(1));
        let cache = t.dynamic_shared::<f32>();
        let tid = t.thread_idx().x as usize;
        let i = t.grid1();
        cache.set([tid], if i < input.len() { input.get([i]) } else { 0.0 });
        t.syncthreads();
        let mut stride = t.block_dim().x as usize / 2;
        while stride > 0 {
            if tid < stride {
                cache.set([tid], cache.get([tid]) + cache.get([tid + stride]));
            }
            t.syncthreads();
            stride /= 2;
        }
        let block = t.block_idx().x as usize;
        if tid == 0 && block < partial.len() {
            partial.set([block], cache.get([0]));
        }
    })
}

/// The async closure twin of `matmul_tiled.cu` (simulator only).
fn matmul_async() -> Kernel {
    Kernel::sim_async("matmul_tiled_async", async |t| {
        let (a, b, c) = (t.array::<f32>(0), t.array::<f32>(1), t.array::<f32>(2));
        let sa = t.shared_array::<f32, 2>([TPB, TPB]);
        let sb = t.shared_array::<f32, 2>([TPB, TPB]);
        let (x, y) = t.grid2();
        let (tx, ty) = (t.thread_idx().x as usize, t.thread_idx().y as usize);
        let (rows, inner, cols) = (a.shape()[0], a.shape()[1], b.shape()[1]);
        let mut acc = 0.0f32;
        for i in 0..inner.div_ceil(TPB) {
            let (col, row) = (tx + i * TPB, ty + i * TPB);
            let from_a = y < rows && col < inner;
            sa.set([ty, tx], if from_a { a.get([y, col]) } else { 0.0 });
            let from_b = x < cols && row < inner;
            sb.set([ty, tx], if from_b { b.get([row, x]) } else { 0.0 });
            t.syncthreads().await;
            for j in 0..TPB {
                acc += sa.get([ty, j]) * sb.get([j, tx]);
            }
            t.syncthreads().await;
        }
        if y < c.shape()[0] && x < c.shape()[1] {
            c.set([y, x], acc);
        }
    })
}

/// The async closure twin of `block_sum.cu` (simulator only).
fn block_sum_async() -> Kernel {
    Kernel::sim_async("block_sum_async", async |t| {
        let (input, partial) = (t.array::<f32>(0), t.array::<f32>(1));
        let cache = t.dynamic_shared::<f32>();
        let tid = t.thread_idx().x as usize;
        let i = t.grid1();
        cache.set([tid], if i < input.len() { input.get([i]) } else { 0.0 });
        t.syncthreads().await;
        let mut stride = t.block_dim().x as usize / 2;
        while stride > 0 {
            if tid < stride {
                cache.set([tid], cache.get([tid]) + cache.get([tid + stride]));
            }
            t.syncthreads().await;
            stride /= 2;
        }
        let block = t.block_idx().x as usize;
        if tid == 0 && block < partial.len() {
            partial.set([block], cache.get([0]));
        }
    })
}

fn inputs(n: usize) -> (Array2<f32>, Array2<f32>) {
    let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 5 + j * 2) % 13) as f32 * 0.5);
    (a, b)
}

/// A launch of the tiled matmul `kernel` at size `n`, after one checked against `ndarray`.
fn matmul_op<'d>(
    device: &'d Device,
    kernel: &'d Kernel,
    n: usize,
) -> gpu_mem::Result<impl FnMut() -> gpu_mem::Result<()> + 'd> {
    let (a, b) = inputs(n);
    let (mut da, mut db) = (device.to_device(&a)?, device.to_device(&b)?);
    let mut dc = device.device_array::<f32>(&[n, n], Order::C)?;
    let blocks = n.div_ceil(TPB) as u32;
    let config = LaunchConfig::new((blocks, blocks), (TPB as u32, TPB as u32));
    // SAFETY: the kernel stays inside A, B and C (bounds-checked by the simulator).
    unsafe { device.launch(kernel, config, &mut [&mut da, &mut db, &mut dc])? };
    let expected = a.dot(&b).into_dyn();
    let c = dc.copy_to_host()?;
    if c.iter()
        .zip(expected.iter())
        .any(|(x, y)| (x - y).abs() > 1e-3 * y.abs().max(1.0))
    {
        return Err(wrong(
            "matmul",
            format!("{}: wrong result at n={n}", kernel.name()),
        ));
    }
    // SAFETY: as above.
    Ok(move || unsafe { device.launch(kernel, config, &mut [&mut da, &mut db, &mut dc]) })
}

/// A launch of the block-sum `kernel` over `n` items, after one checked against a sum on the host.
fn block_sum_op<'d>(
    device: &'d Device,
    kernel: &'d Kernel,
    n: usize,
) -> gpu_mem::Result<impl FnMut() -> gpu_mem::Result<()> + 'd> {
    let block = 256u32;
    let input = Array1::from_shape_fn(n, |i| (i % 17) as f32);
    let mut d_input = device.to_device(&input)?;
    let mut partial = device.device_array::<f32>(&[n.div_ceil(256)], Order::C)?;
    let config = LaunchConfig::for_items(n, block).with_shared_bytes(block as usize * 4);
    // SAFETY: the kernel stays inside its arguments (bounds-checked by the simulator).
    unsafe { device.launch(kernel, config, &mut [&mut d_input, &mut partial])? };
    let total: f64 = partial.copy_to_host()?.iter().map(|v| *v as f64).sum();
    let expected: f64 = input.iter().map(|v| *v as f64).sum();
    if (total - expected).abs() > 1e-6 * expected {
        return Err(wrong(
            "block_sum",
            format!("{}: {total} != {expected}", kernel.name()),
        ));
    }
    // SAFETY: as above.
    Ok(move || unsafe { device.launch(kernel, config, &mut [&mut d_input, &mut partial]) })
}

/// The block sum's reference: the per-block partial sums of `n` values, computed by one thread
/// with a plain loop over the same input.
fn block_sum_loop_op(n: usize) -> impl FnMut() -> gpu_mem::Result<()> {
    let input: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
    let mut partial = vec![0f32; n.div_ceil(256)];
    move || {
        for (sum, chunk) in partial.iter_mut().zip(black_box(&input).chunks(256)) {
            *sum = chunk.iter().sum();
        }
        black_box(&partial);
        Ok(())
    }
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

/// The plain loop at size `n`.
fn plain_op(n: usize) -> impl FnMut() -> gpu_mem::Result<()> {
    let (a, b) = inputs(n);
    let a: Vec<f32> = a.iter().copied().collect();
    let b: Vec<f32> = b.iter().copied().collect();
    let mut c = vec![0.0f32; n * n];
    move || {
        ikj_loop(black_box(&a), black_box(&b), &mut c, n);
        black_box(&c);
        Ok(())
    }
}

/// A cold compile (first launch of a new source into an empty cache), the launch of a new kernel
/// object with the same source (in-process cache, median of 21 objects), and a relaunch of the
/// same kernel.
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
    // Each run a new object: what it costs beyond a relaunch is finding the library built.
    let same_source = time(21, || {
        launch(&Kernel::from_source(source.clone(), "empty")).map(drop)
    })?;
    let relaunch = time(21, || launch(&first).map(drop))?;
    Ok((cold, same_source, relaunch))
}

/// The slope of log(time) against log(size) between the first and last point.
fn exponent(points: &[(usize, f64)]) -> f64 {
    match (points.first(), points.last()) {
        (Some(&(n0, t0)), Some(&(n1, t1))) if n1 > n0 && t0 > 0.0 => {
            (t1 / t0).ln() / (n1 as f64 / n0 as f64).ln()
        }
        _ => f64::NAN,
    }
}

fn json_series(points: &[(usize, f64)]) -> String {
    let items: Vec<String> = points
        .iter()
        .map(|(n, t)| format!("{{\"n\":{n},\"seconds\":{t:e}}}"))
        .collect();
    format!("[{}]", items.join(","))
}

fn main() -> gpu_mem::Result<()> {
    // `cargo bench` passes `--bench`; `--json` (or GPU_MEM_BENCH_JSON=1, what `cargo xtask
    // bench --json` sets) adds a JSON summary; other arguments are ignored.
    let json = std::env::args().any(|a| a == "--json")
        || std::env::var_os("GPU_MEM_BENCH_JSON").is_some_and(|v| v == "1");
    let runtime = Runtime::open(BackendChoice::Only(gpu_mem::BackendKind::Sim))?;
    let device = runtime.device(0)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "gpu-mem simulator kernels ({cores} cores), medians; source = portable source (C++), closure = Rust closure twin, async = async Rust closure twin\n"
    );

    let (source_mm, closure_mm, async_mm) = (matmul_tiled(), matmul_closure(), matmul_async());
    let mut mm_source = Vec::new();
    let mut mm_closure = Vec::new();
    let mut mm_async = Vec::new();
    let mut mm_plain = Vec::new();
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10}",
        "tiled matmul",
        "source",
        "closure",
        "async",
        "i-k-j loop",
        "src/loop",
        "cl/loop",
        "as/loop"
    );
    for n in [32usize, 64, 128, 256, 512] {
        // Many runs of the small sizes: a launch of a few hundred microseconds is easily caught
        // by a moment when another process holds a core.
        let runs = match n {
            0..=64 => 31,
            65..=256 => 9,
            _ => 3,
        };
        let times = medians(
            runs,
            &mut [
                &mut matmul_op(&device, &source_mm, n)?,
                &mut matmul_op(&device, &closure_mm, n)?,
                &mut matmul_op(&device, &async_mm, n)?,
                &mut plain_op(n),
            ],
        )?;
        let (s, c, a, p) = (times[0], times[1], times[2], times[3]);
        println!(
            "{:<16} {:>9.3} ms {:>9.3} ms {:>9.3} ms {:>9.3} ms {:>9.1}x {:>9.1}x {:>9.1}x",
            format!("n={n}"),
            s * 1e3,
            c * 1e3,
            a * 1e3,
            p * 1e3,
            s / p,
            c / p,
            a / p
        );
        mm_source.push((n, s));
        mm_closure.push((n, c));
        mm_async.push((n, a));
        mm_plain.push((n, p));
    }
    println!(
        "scaling exponent (time ~ n^e): source {:.2}, closure {:.2}, async {:.2}, loop {:.2}\n",
        exponent(&mm_source),
        exponent(&mm_closure),
        exponent(&mm_async),
        exponent(&mm_plain)
    );

    let (source_bs, closure_bs, async_bs) = (block_sum(), block_sum_closure(), block_sum_async());
    let mut bs_source = Vec::new();
    let mut bs_closure = Vec::new();
    let mut bs_async = Vec::new();
    let mut bs_plain = Vec::new();
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>12}",
        "block sum f32", "source", "closure", "async", "plain loop"
    );
    for log in [14u32, 16, 18, 20, 22] {
        let n = 1usize << log;
        let runs = match log {
            0..=16 => 21,
            17..=18 => 7,
            _ => 3,
        };
        let times = medians(
            runs,
            &mut [
                &mut block_sum_op(&device, &source_bs, n)?,
                &mut block_sum_op(&device, &closure_bs, n)?,
                &mut block_sum_op(&device, &async_bs, n)?,
                &mut block_sum_loop_op(n),
            ],
        )?;
        let (s, c, a, p) = (times[0], times[1], times[2], times[3]);
        println!(
            "{:<16} {:>9.3} ms {:>9.3} ms {:>9.3} ms {:>9.3} ms",
            format!("2^{log}"),
            s * 1e3,
            c * 1e3,
            a * 1e3,
            p * 1e3
        );
        bs_source.push((n, s));
        bs_closure.push((n, c));
        bs_async.push((n, a));
        bs_plain.push((n, p));
    }
    println!(
        "scaling exponent: source {:.2}, closure {:.2}, async {:.2}, loop {:.2}\n",
        exponent(&bs_source),
        exponent(&bs_closure),
        exponent(&bs_async),
        exponent(&bs_plain)
    );

    let find = |points: &[(usize, f64)], n: usize| {
        points
            .iter()
            .find(|(m, _)| *m == n)
            .map_or(f64::NAN, |(_, t)| *t)
    };
    let numba = [
        (
            "tiled matmul n=32",
            find(&mm_source, 32),
            NUMBA_MATMUL_32,
            false,
        ),
        (
            "tiled matmul n=64",
            find(&mm_source, 64),
            NUMBA_MATMUL_64,
            true,
        ),
        (
            "block-sum 65,536 f32",
            find(&bs_source, 1 << 16),
            NUMBA_BLOCK_SUM_65536,
            true,
        ),
    ];
    let mut ok = true;
    println!(
        "{:<24} {:>12} {:>14} {:>10}",
        "vs Numba's simulator", "source", "Numba sim", "speed-up"
    );
    for (name, ours, theirs, target) in numba {
        let speedup = theirs / ours;
        if target {
            ok &= speedup >= 10_000.0;
        }
        println!(
            "{name:<24} {:>9.3} ms {:>12.2} s {:>9.0}x{}",
            ours * 1e3,
            theirs,
            speedup,
            if target { " (target >= 10,000x)" } else { "" }
        );
    }
    let ratio_256 = find(&mm_source, 256) / find(&mm_plain, 256);
    ok &= ratio_256 <= MATMUL_256_TARGET;
    println!(
        "tiled matmul n=256 from source: {ratio_256:.1}x the plain loop (target <= {MATMUL_256_TARGET}x)"
    );

    let (cold, same_source, relaunch) = compile_costs(&device)?;
    println!(
        "\nsource kernels: cold compile + load {:.0} ms; launch of a new kernel object, same source {:.1} us; relaunch of a 1x1 kernel {:.1} us",
        cold * 1e3,
        same_source * 1e6,
        relaunch * 1e6
    );
    println!("\ntargets {}", if ok { "met" } else { "NOT met" });
    if json {
        println!(
            "{{\"bench\":\"kernels\",\"matmul\":{{\"source\":{},\"closure\":{},\"async_closure\":{},\"ikj_loop\":{}}},\"block_sum\":{{\"source\":{},\"closure\":{},\"async_closure\":{},\"plain_loop\":{}}},\"scaling_exponents\":{{\"matmul\":{{\"source\":{:e},\"closure\":{:e},\"async_closure\":{:e},\"ikj_loop\":{:e}}},\"block_sum\":{{\"source\":{:e},\"closure\":{:e},\"async_closure\":{:e},\"plain_loop\":{:e}}}}},\"numba_seconds\":{{\"matmul_32\":{NUMBA_MATMUL_32:e},\"matmul_64\":{NUMBA_MATMUL_64:e},\"block_sum_65536\":{NUMBA_BLOCK_SUM_65536:e}}},\"matmul_256_ratio\":{ratio_256:e},\"numba_speedup_matmul_32\":{:e},\"numba_speedup_matmul_64\":{:e},\"numba_speedup_block_sum_65536\":{:e},\"compile_cold_seconds\":{cold:e},\"compile_same_source_seconds\":{same_source:e},\"relaunch_seconds\":{relaunch:e},\"targets_met\":{ok}}}",
            json_series(&mm_source),
            json_series(&mm_closure),
            json_series(&mm_async),
            json_series(&mm_plain),
            json_series(&bs_source),
            json_series(&bs_closure),
            json_series(&bs_async),
            json_series(&bs_plain),
            exponent(&mm_source),
            exponent(&mm_closure),
            exponent(&mm_async),
            exponent(&mm_plain),
            exponent(&bs_source),
            exponent(&bs_closure),
            exponent(&bs_async),
            exponent(&bs_plain),
            NUMBA_MATMUL_32 / find(&mm_source, 32),
            NUMBA_MATMUL_64 / find(&mm_source, 64),
            NUMBA_BLOCK_SUM_65536 / find(&bs_source, 1 << 16),
        );
    }
    Ok(())
}
