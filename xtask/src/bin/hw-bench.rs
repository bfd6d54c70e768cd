//! `hw-bench`: gpu-mem's side of the hardware bundle's benchmarks (`cargo xtask hw-bundle`).
//!
//! Prints one JSON document on standard output; the bundle's `numba_compare.py` runs the same
//! work with numba-cuda and prints both figures and their ratio.
//!
//! ```text
//! hw-bench transfers [--min BYTES] [--max BYTES]   to_device / copy_to_host, pageable and pinned
//! hw-bench matmul [--sizes 256,512,...]            tiled matmul: first launch (with compile) and
//!                                                  kernel time from events
//! hw-bench alloc [--rounds N]                      device allocation strategies (CUDA: cuMemAlloc
//!                                                  vs the stream-ordered pool), one process each
//! hw-bench round-trip                              a one-thread launch and stream synchronize,
//!                                                  and an empty stream's synchronize
//! hw-bench all                                     the four above in one document
//! ```
//!
//! The backend is `GPU_MEM_BACKEND` (auto by default), as for every gpu-mem program. Sizes are
//! powers of 4 from `--min` to `--max` (default 4 KiB .. 256 MiB). Every figure is the median of
//! repeated runs, in milliseconds.

use gpu_mem::kernels::{TPB, matmul_tiled};
use gpu_mem::ndarray::{Array1, Array2};
use gpu_mem::prelude::*;
use std::process::{Command, ExitCode};
use std::time::Instant;

/// The allocation strategies `alloc` compares, as `GPU_MEM_CUDA_ALLOCATOR` values.
const ALLOCATORS: [&str; 2] = ["plain", "pool"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("hw-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<String, String> {
    let command = args.first().map(String::as_str).unwrap_or("all");
    let options = Options::parse(args.get(1..).unwrap_or(&[]))?;
    match command {
        "transfers" => Ok(document(&[("transfers", transfers(&options)?)])),
        "matmul" => Ok(document(&[("matmul", matmul(&options)?)])),
        "alloc" => Ok(document(&[("alloc", alloc(&options)?)])),
        "alloc-one" => alloc_one(&options),
        "round-trip" => Ok(document(&[("round_trip", round_trip()?)])),
        "all" => Ok(document(&[
            ("transfers", transfers(&options)?),
            ("matmul", matmul(&options)?),
            ("round_trip", round_trip()?),
            ("alloc", alloc(&options)?),
        ])),
        "-h" | "--help" => Err(
            "commands: transfers | matmul | round-trip | alloc | all (see the source's docs)"
                .into(),
        ),
        other => Err(format!("unknown command `{other}`")),
    }
}

#[derive(Debug)]
struct Options {
    min: usize,
    max: usize,
    sizes: Vec<usize>,
    rounds: usize,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            min: 4 << 10,
            max: 256 << 20,
            sizes: vec![256, 512, 1024, 2048, 4096],
            rounds: 200,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--min" => options.min = parse_bytes(value)?,
                "--max" => options.max = parse_bytes(value)?,
                "--rounds" => {
                    options.rounds = value.parse().map_err(|e| format!("--rounds: {e}"))?
                }
                "--sizes" => {
                    options.sizes = value
                        .split(',')
                        .map(|s| s.trim().parse().map_err(|e| format!("--sizes {s}: {e}")))
                        .collect::<Result<_, _>>()?;
                }
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        if options.min == 0 || options.min > options.max {
            return Err("need 0 < --min <= --max".into());
        }
        Ok(options)
    }
}

/// `4096`, `4KiB`, `256MiB`, `1GiB`.
fn parse_bytes(text: &str) -> Result<usize, String> {
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let value: usize = digits.parse().map_err(|e| format!("{text}: {e}"))?;
    let shift = match unit {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => return Err(format!("{text}: unit must be B, KiB, MiB or GiB")),
    };
    Ok(value << shift)
}

fn document(parts: &[(&str, String)]) -> String {
    let backend = std::env::var("GPU_MEM_BACKEND").unwrap_or_else(|_| "auto".into());
    let mut out = format!("{{\"backend_choice\": \"{backend}\"");
    for (name, json) in parts {
        out.push_str(&format!(", \"{name}\": {json}"));
    }
    out.push('}');
    out
}

fn e(error: gpu_mem::Error) -> String {
    error.to_string()
}

/// The median of `f`'s durations in milliseconds, over enough repetitions to fill about
/// `budget_ms` (at least 3, at most 50).
fn median_ms(budget_ms: f64, mut f: impl FnMut() -> Result<f64, String>) -> Result<f64, String> {
    let mut samples = vec![f()?];
    let limit = (budget_ms / samples[0].max(1e-3)).clamp(3.0, 50.0) as usize;
    while samples.len() < limit {
        samples.push(f()?);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn since_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn transfer_sizes(options: &Options) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut bytes = options.min;
    while bytes <= options.max {
        sizes.push(bytes);
        // (At the top of the range the next size would not fit: the list ends.)
        match bytes.checked_mul(4) {
            Some(next) => bytes = next,
            None => break,
        }
    }
    sizes
}

/// to_device / copy_to_host with pageable (ndarray) and pinned host memory.
fn transfers(options: &Options) -> Result<String, String> {
    let runtime = Runtime::from_env().map_err(e)?;
    let device = runtime.device(0).map_err(e)?;
    let stream = device.stream().map_err(e)?;
    let mut rows = Vec::new();
    for bytes in transfer_sizes(options) {
        let host = Array1::<u8>::from_elem(bytes, 7);
        let mut back = Array1::<u8>::zeros(bytes);
        let mut pinned = device.pinned_array::<u8>(&[bytes]).map_err(e)?;
        let mut dev = device.to_device(&host).map_err(e)?;
        let to_device_pageable = median_ms(200.0, || {
            let t = Instant::now();
            dev.copy_from_host(&host).map_err(e)?;
            Ok(since_ms(t))
        })?;
        let copy_to_host_pageable = median_ms(200.0, || {
            let t = Instant::now();
            dev.copy_to_host_into(&mut back).map_err(e)?;
            Ok(since_ms(t))
        })?;
        let to_device_pinned = median_ms(200.0, || {
            let t = Instant::now();
            stream.copy_from_host(&mut dev, &pinned).map_err(e)?;
            stream.synchronize().map_err(e)?;
            Ok(since_ms(t))
        })?;
        let copy_to_host_pinned = median_ms(200.0, || {
            let t = Instant::now();
            stream.copy_to_host(&dev, &mut pinned).map_err(e)?;
            stream.synchronize().map_err(e)?;
            Ok(since_ms(t))
        })?;
        if back.iter().any(|&b| b != 7) {
            return Err(format!("copy_to_host of {bytes} bytes returned wrong data"));
        }
        eprintln!("hw-bench: transfers {bytes} B done");
        rows.push(format!(
            "{{\"bytes\": {bytes}, \"to_device_pageable_ms\": {to_device_pageable:.6}, \
             \"copy_to_host_pageable_ms\": {copy_to_host_pageable:.6}, \
             \"to_device_pinned_ms\": {to_device_pinned:.6}, \
             \"copy_to_host_pinned_ms\": {copy_to_host_pinned:.6}}}"
        ));
    }
    Ok(format!("[{}]", rows.join(", ")))
}

/// Tiled matmul: the first launch (compilation included, synchronised) and the kernel time
/// between two timing events.
fn matmul(options: &Options) -> Result<String, String> {
    let runtime = Runtime::from_env().map_err(e)?;
    let device = runtime.device(0).map_err(e)?;
    let stream = device.stream().map_err(e)?;
    let kernel = matmul_tiled();
    let mut rows = Vec::new();
    for (index, &n) in options.sizes.iter().enumerate() {
        let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 11) as f32 - 5.0);
        let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 5 + j * 2) % 13) as f32 * 0.5);
        let mut da = device.to_device(&a).map_err(e)?;
        let mut db = device.to_device(&b).map_err(e)?;
        let mut dc = device.device_array::<f32>(&[n, n], Order::C).map_err(e)?;
        let blocks = n.div_ceil(TPB) as u32;
        let config = LaunchConfig::new((blocks, blocks), (TPB as u32, TPB as u32));
        let mut launch = || -> Result<(), String> {
            // SAFETY: matmul_tiled indexes A, B and C only inside their (n, n) shapes, and
            // nothing else uses these arrays meanwhile.
            unsafe { stream.launch(&kernel, config, &mut [&mut da, &mut db, &mut dc]) }.map_err(e)
        };
        let t = Instant::now();
        launch()?;
        stream.synchronize().map_err(e)?;
        let first_launch_ms = since_ms(t);
        let kernel_ms = median_ms(500.0, || {
            let start = device.event(true).map_err(e)?;
            let end = device.event(true).map_err(e)?;
            start.record(&stream).map_err(e)?;
            launch()?;
            end.record(&stream).map_err(e)?;
            end.synchronize().map_err(e)?;
            Ok(f64::from(end.elapsed_since(&start).map_err(e)?))
        })?;
        let c = dc.copy_to_host().map_err(e)?;
        let (i, j) = (n / 3, n / 2);
        let expected: f32 = (0..n).map(|k| a[(i, k)] * b[(k, j)]).sum();
        let got = c[[i, j]];
        if (got - expected).abs() > 1e-3 * expected.abs().max(1.0) {
            return Err(format!(
                "matmul n={n}: C[{i},{j}] = {got}, expected {expected}"
            ));
        }
        eprintln!("hw-bench: matmul n={n} done");
        // Only the first size includes compilation; later sizes reuse the module.
        rows.push(format!(
            "{{\"n\": {n}, \"first_launch_ms\": {first_launch_ms:.6}, \"includes_compile\": {}, \
             \"kernel_ms\": {kernel_ms:.6}, \"gflops\": {:.3}}}",
            index == 0,
            2.0 * (n as f64).powi(3) / (kernel_ms * 1e6)
        ));
    }
    Ok(format!("[{}]", rows.join(", ")))
}

/// A kernel of one thread that bumps one counter: what a launch costs when the kernel is free.
const TOUCH: &str = "__global__ void touch(int* counter) { counter[0] += 1; }";

/// The stream round trip: a one-thread launch followed by the stream's synchronize (the latency
/// a dependent host step waits), and the synchronize of a stream with nothing queued.
fn round_trip() -> Result<String, String> {
    let runtime = Runtime::from_env().map_err(e)?;
    let device = runtime.device(0).map_err(e)?;
    let stream = device.stream().map_err(e)?;
    let kernel = Kernel::from_source(TOUCH, "touch");
    let mut counter = device.to_device(&Array1::<i32>::zeros(1)).map_err(e)?;
    let mut launches = 0;
    let mut launch_sync = || -> Result<f64, String> {
        let t = Instant::now();
        // SAFETY: `touch` writes element 0 of a one-element array that nothing else uses.
        unsafe { stream.launch(&kernel, LaunchConfig::new(1, 1), &mut [&mut counter]) }
            .map_err(e)?;
        stream.synchronize().map_err(e)?;
        launches += 1;
        Ok(since_ms(t))
    };
    // The first launch compiles and loads the module: not a round trip.
    launch_sync()?;
    let launch_sync_ms = median_ms(200.0, &mut launch_sync)?;
    let empty_sync_ms = median_ms(100.0, || {
        let t = Instant::now();
        stream.synchronize().map_err(e)?;
        Ok(since_ms(t))
    })?;
    let count = counter.copy_to_host().map_err(e)?[0];
    if count != launches {
        return Err(format!("round trip: {launches} launches counted {count}"));
    }
    eprintln!("hw-bench: round trip done");
    Ok(format!(
        "{{\"launch_sync_ms\": {launch_sync_ms:.6}, \"empty_sync_ms\": {empty_sync_ms:.6}}}"
    ))
}

/// Runs `alloc-one` once per allocation strategy, each in its own process (the strategy is
/// read when the backend opens).
fn alloc(options: &Options) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut rows = Vec::new();
    for allocator in ALLOCATORS {
        let output = Command::new(&exe)
            .args(["alloc-one", "--rounds", &options.rounds.to_string()])
            .env("GPU_MEM_CUDA_ALLOCATOR", allocator)
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if output.status.success() && !stdout.is_empty() {
            rows.push(format!(
                "{{\"allocator\": \"{allocator}\", \"result\": {stdout}}}"
            ));
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let reason = stderr
                .lines()
                .last()
                .unwrap_or("no output")
                .replace('"', "'");
            rows.push(format!(
                "{{\"allocator\": \"{allocator}\", \"error\": \"{reason}\"}}"
            ));
        }
    }
    Ok(format!("[{}]", rows.join(", ")))
}

/// Allocation cost under the strategy this process's backend chose: allocate + free of one
/// size (median), and the "allocate, use on a stream, synchronize, drop" cycle that a release
/// threshold of 0 turns into a round trip to the OS every time.
fn alloc_one(options: &Options) -> Result<String, String> {
    let runtime = Runtime::from_env().map_err(e)?;
    let device = runtime.device(0).map_err(e)?;
    let stream = device.stream().map_err(e)?;
    let mut rows = Vec::new();
    for bytes in [4usize << 10, 1 << 20, 64 << 20] {
        let rounds = options.rounds.max(3);
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let array = device.device_array::<u8>(&[bytes], Order::C).map_err(e)?;
            drop(array);
            samples.push(since_ms(t));
        }
        samples.sort_by(f64::total_cmp);
        let alloc_free_ms = samples[samples.len() / 2];
        let mut cycle = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let mut array = device.device_array::<u8>(&[bytes], Order::C).map_err(e)?;
            stream.memset(&mut array, 1).map_err(e)?;
            stream.synchronize().map_err(e)?;
            drop(array);
            cycle.push(since_ms(t));
        }
        cycle.sort_by(f64::total_cmp);
        let cycle_ms = cycle[cycle.len() / 2];
        rows.push(format!(
            "{{\"bytes\": {bytes}, \"alloc_free_ms\": {alloc_free_ms:.6}, \
             \"alloc_use_sync_free_ms\": {cycle_ms:.6}}}"
        ));
    }
    Ok(format!("[{}]", rows.join(", ")))
}
