//! The simulator on real kernels beside plain Rust loops computing the same outputs.
//!
//! `cargo bench -p gpu-mem-conformance --bench corpus` (also run by `cargo xtask bench kernels`)
//! launches kernels of the corpus (`tests/corpus/<collection>/*.cu`: NVIDIA's cuda-samples,
//! Rodinia, PolyBench-ACC and HeCBench, device code verbatim, each naming its licence and origin
//! on line 1) through the public API, with the launch shapes and sequences of the corpus cases
//! (`tests/src/cases/corpus`) at larger sizes, and times each beside a plain single-threaded
//! Rust reference: a straightforward serial loop over the same inputs that computes the same
//! outputs (the suites' own CPU versions where they have one; no threads, no SIMD intrinsics).
//!
//! What is timed for the simulator is the benchmark's host code from the first launch to the
//! end of a `synchronize`: every launch of the kernel's sequence (Rodinia's gaussian makes
//! hundreds), with its argument checks. Not timed: the uploads of the inputs, the one-time
//! compile (a warm-up run comes first), the downloads, and the uploads that put back inputs a
//! sequence updates in place before each run (the reference's copies of them are not timed
//! either). The simulator's result is checked against the reference's before anything is
//! timed; a kernel whose results differ is reported with the reason and left out of the
//! summary. The simulator and the reference then run in turns, so that a slow stretch of a
//! shared machine falls on both alike, and each one's median is printed with the ratio
//! (simulator / reference), the number of launches, and how the simulator built the kernel's
//! module (`stackless`: threads as coroutines of the rewritten kernel; `calls`: each thread a
//! call of the kernel, on a stack of its own where it may wait), as its `tracing` events say.
//! Targets (printed as met or not; the run does not fail on them): a geometric mean of the
//! ratios of at most 3x, and no ratio above 10x. `-- --json` (or `GPU_MEM_BENCH_JSON=1`) adds
//! one JSON object with every figure.

use gpu_mem::prelude::*;
use gpu_mem::{BackendChoice, BackendKind, Runtime};
// (`support` names them as `crate::ensure` and `crate::fail`.)
use gpu_mem_conformance::{ensure, fail};
use ndarray::ArrayView1;
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::time::Instant;
use support::{Lcg, check_close, check_equal, download, launch, upload, zeros};

/// The corpus cases' helpers: inputs, launches, transfers and comparisons.
#[path = "../src/cases/corpus/support.rs"]
#[allow(dead_code)] // (the cases use more of them than this benchmark)
mod support;

const VECTOR_ADD: &str = include_str!("../corpus/cuda-samples/vectorAdd.cu");
const BLACK_SCHOLES: &str = include_str!("../corpus/cuda-samples/BlackScholes.cu");
const ATAX: &str = include_str!("../corpus/polybench/atax.cu");
const GEMVER: &str = include_str!("../corpus/polybench/gemver.cu");
const MM3: &str = include_str!("../corpus/polybench/3mm.cu");
const JACOBI_2D: &str = include_str!("../corpus/polybench/jacobi2D.cu");
const GAUSSIAN: &str = include_str!("../corpus/rodinia/gaussian.cu");
const PATHFINDER: &str = include_str!("../corpus/rodinia/pathfinder.cu");
const MATRIX_MUL: &str = include_str!("../corpus/cuda-samples/matrixMul.cu");
const TRANSPOSE: &str = include_str!("../corpus/cuda-samples/transpose.cu");
const REDUCTION: &str = include_str!("../corpus/cuda-samples/reduction.cu");
const CONVOLUTION: &str = include_str!("../corpus/cuda-samples/convolutionSeparable.cu");
const SCALAR_PROD: &str = include_str!("../corpus/cuda-samples/scalarProd.cu");
const SHFL_SCAN: &str = include_str!("../corpus/cuda-samples/shfl_scan.cu");
const REDUCTION_WARP: &str = include_str!("../corpus/cuda-samples/reduction_warp.cu");
const SHUFFLE: &str = include_str!("../corpus/hecbench/shuffle.cu");
const ATOMICS: &str = include_str!("../corpus/cuda-samples/simpleAtomicIntrinsics.cu");
const HISTOGRAM256: &str = include_str!("../corpus/cuda-samples/histogram256.cu");
const ATOMIC_REDUCTION: &str = include_str!("../corpus/hecbench/atomicReduction.cu");

/// Rounds timed after the checked warm-up round.
const ROUNDS: usize = 21;

/// Rounds to time: [`ROUNDS`], or `GPU_MEM_BENCH_ROUNDS` where a profile wants the kernels to
/// run long enough to outweigh their compile.
fn rounds() -> usize {
    std::env::var("GPU_MEM_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ROUNDS)
}

const DATA_PARALLEL: &str = "data-parallel";
const SHARED: &str = "shared+barriers";
const WARP: &str = "warp collectives";
const ATOMIC: &str = "atomics";

/// What a benchmark's operation is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Put back what the simulator's sequence updates in place (untimed).
    ResetSim,
    /// The launches and a synchronize (timed).
    Sim,
    /// Put back what the reference updates in place (untimed).
    ResetRef,
    /// The reference loop (timed).
    Ref,
    /// Download the simulator's outputs and compare them with the reference's (untimed).
    Check,
}

type Op = Box<dyn FnMut(Phase) -> Result<(), String>>;

/// One real kernel (or sequence of kernels) and its reference.
struct Bench {
    name: &'static str,
    form: &'static str,
    launches: usize,
    op: Op,
    /// Where the kernel's time is its atomics: the reference's operations as the host's atomic
    /// instructions, on one thread (timed; it starts from the kernel's input each time). No CPU
    /// simulator that keeps atomics atomic runs faster than that, so the bench prints the
    /// simulator's time beside this floor too.
    floor: Option<Box<dyn FnMut()>>,
}

impl Bench {
    /// The same, with `floor` (see [`Bench::floor`]).
    fn with_floor(self, floor: impl FnMut() + 'static) -> Bench {
        Bench {
            floor: Some(Box::new(floor)),
            ..self
        }
    }
}

fn bench(
    name: &'static str,
    form: &'static str,
    launches: usize,
    op: impl FnMut(Phase) -> Result<(), String> + 'static,
) -> Bench {
    Bench {
        name,
        form,
        launches,
        op: Box::new(op),
        floor: None,
    }
}

/// Waits for the device (the launches are synchronous; this is the host code's last step).
fn sync(dev: &Device) -> Result<(), String> {
    dev.synchronize().map_err(fail("synchronize"))
}

/// Writes `values` over the device array `array` (the untimed reset of an input).
fn restore<T: Element>(array: &mut DeviceArray<T>, values: &[T]) -> Result<(), String> {
    array
        .copy_from_host(&ArrayView1::from(values))
        .map_err(fail("restore"))
}

/// The module of a PolyBench source with its size macros defined in front of it (every
/// `.cuh` defines its sizes only if none is defined: the `-DN=...` way of choosing one).
fn sized(code: &str, defines: &[(&str, usize)]) -> Module {
    let mut text: String = defines
        .iter()
        .map(|(name, value)| format!("#define {name} {value}\n"))
        .collect();
    text.push_str(code);
    Module::from_source(text)
}

/// `f32` values as `f64`, for the comparisons.
fn wide(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

/// C = A B (rows x inner times inner x cols), the i-k-j loop.
fn matmul_ikj(a: &[f32], b: &[f32], c: &mut [f32], (rows, inner, cols): (usize, usize, usize)) {
    c.fill(0.0);
    for (i, c_row) in c.chunks_mut(cols).enumerate().take(rows) {
        for k in 0..inner {
            let aik = a[i * inner + k];
            for (cij, bkj) in c_row.iter_mut().zip(&b[k * cols..(k + 1) * cols]) {
                *cij += aik * bkj;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Data-parallel kernels
// ---------------------------------------------------------------------------------------------

/// cuda-samples vectorAdd: C = A + B, blocks of 256.
fn vector_add(dev: &Device) -> Result<Bench, String> {
    let n = 1usize << 20;
    let mut rng = Lcg::from_state(1);
    let (a, b) = (rng.units(n), rng.units(n));
    let (mut d_a, mut d_b) = (upload(dev, &a, "A")?, upload(dev, &b, "B")?);
    let mut d_c = zeros::<f32>(dev, n, "C")?;
    let kernel = Kernel::from_source(VECTOR_ADD, "vectorAdd");
    let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
    let mut c = vec![0.0f32; n];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: A, B and C have numElements elements; the kernel touches index i only
            // when i < numElements.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    config,
                    &mut [&mut d_a, &mut d_b, &mut d_c, &mut Scalar(n as i32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            for ((c, a), b) in c.iter_mut().zip(&a).zip(&b) {
                *c = a + b;
            }
            Ok(())
        }
        Phase::Check => check_equal("C", &download(&d_c, "C")?, &c),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("vectorAdd", DATA_PARALLEL, 1, op))
}

/// The sample's reference (BlackScholes_gold.cpp) in `f32`: the cumulative normal distribution
/// by the polynomial approximation the kernel uses.
fn cnd(d: f32) -> f32 {
    const A1: f32 = 0.319_381_53;
    const A2: f32 = -0.356_563_78;
    const A3: f32 = 1.781_477_9;
    const A4: f32 = -1.821_256;
    const A5: f32 = 1.330_274_5;
    const RSQRT2PI: f32 = 0.398_942_3;
    let k = 1.0 / (1.0 + 0.231_641_9 * d.abs());
    let cnd =
        RSQRT2PI * (-0.5 * d * d).exp() * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))));
    if d > 0.0 { 1.0 - cnd } else { cnd }
}

/// cuda-samples BlackScholes: call and put prices of European options, two per thread (float2),
/// blocks of 128.
fn black_scholes(dev: &Device) -> Result<Bench, String> {
    let options = 1usize << 20;
    let (riskfree, volatility) = (0.02f32, 0.30f32);
    let mut rng = Lcg::from_state(90);
    let mut values =
        |low: f32, high: f32| -> Vec<f32> { (0..options).map(|_| rng.range(low, high)).collect() };
    let (stock, strike, years) = (values(5.0, 30.0), values(1.0, 100.0), values(0.25, 10.0));
    let pairs = |v: &[f32]| -> Vec<[f32; 2]> { v.chunks(2).map(|p| [p[0], p[1]]).collect() };
    let (mut d_s, mut d_x, mut d_t) = (
        upload(dev, &pairs(&stock), "stock")?,
        upload(dev, &pairs(&strike), "strike")?,
        upload(dev, &pairs(&years), "years")?,
    );
    let mut d_call = zeros::<[f32; 2]>(dev, options / 2, "call")?;
    let mut d_put = zeros::<[f32; 2]>(dev, options / 2, "put")?;
    let kernel = Kernel::from_source(BLACK_SCHOLES, "BlackScholesGPU");
    let config = LaunchConfig::new((options / 2).div_ceil(128) as u32, 128);
    let (mut call, mut put) = (vec![0.0f32; options], vec![0.0f32; options]);
    // The prices are differences of terms of size S and X: their error scales with S + X.
    let scale: Vec<f64> = stock
        .iter()
        .zip(&strike)
        .map(|(s, x)| f64::from(s + x))
        .collect();
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::Sim => {
                // SAFETY: the five float2 arrays hold optN / 2 elements; the kernel touches
                // element opt only when opt < optN / 2.
                unsafe {
                    launch(
                        &dev,
                        &kernel,
                        config,
                        &mut [
                            &mut d_call,
                            &mut d_put,
                            &mut d_s,
                            &mut d_x,
                            &mut d_t,
                            &mut Scalar(riskfree),
                            &mut Scalar(volatility),
                            &mut Scalar(options as i32),
                        ],
                    )
                }?;
                sync(&dev)
            }
            Phase::Ref => {
                for i in 0..options {
                    let (s, x, t) = (stock[i], strike[i], years[i]);
                    let sqrt_t = t.sqrt();
                    let d1 = ((s / x).ln() + (riskfree + 0.5 * volatility * volatility) * t)
                        / (volatility * sqrt_t);
                    let d2 = d1 - volatility * sqrt_t;
                    let (cnd1, cnd2) = (cnd(d1), cnd(d2));
                    let exp_rt = (-riskfree * t).exp();
                    call[i] = s * cnd1 - x * exp_rt * cnd2;
                    put[i] = x * exp_rt * (1.0 - cnd2) - s * (1.0 - cnd1);
                }
                Ok(())
            }
            Phase::Check => {
                let flat = |v: Vec<[f32; 2]>| -> Vec<f32> { v.into_iter().flatten().collect() };
                // The case's tolerance: the kernel's fast intrinsics are a few ulp off.
                support::check_scaled(
                    "call",
                    &flat(download(&d_call, "call")?),
                    &wide(&call),
                    &scale,
                    5e-5,
                )?;
                support::check_scaled(
                    "put",
                    &flat(download(&d_put, "put")?),
                    &wide(&put),
                    &scale,
                    5e-5,
                )
            }
            Phase::ResetSim | Phase::ResetRef => Ok(()),
        }
    };
    Ok(bench("BlackScholes", DATA_PARALLEL, 1, op))
}

/// PolyBench atax, y = A^T (A x): `atax_kernel1` then `atax_kernel2`, on 32 x 1 blocks (the
/// case's exact launch: on the original 32 x 8 blocks eight threads race on each element).
fn atax(dev: &Device) -> Result<Bench, String> {
    let (nx, ny) = (2048usize, 2048usize);
    let module = sized(ATAX, &[("NX", nx), ("NY", ny)]);
    let (kernel1, kernel2) = (module.kernel("atax_kernel1"), module.kernel("atax_kernel2"));
    let mut rng = Lcg::new(22);
    let (a, x) = (rng.units(nx * ny), rng.units(ny));
    let (mut d_a, mut d_x) = (upload(dev, &a, "A")?, upload(dev, &x, "x")?);
    let mut d_y = zeros::<f32>(dev, ny, "y")?;
    let mut d_tmp = zeros::<f32>(dev, nx, "tmp")?;
    let (mut y, mut tmp) = (vec![0.0f32; ny], vec![0.0f32; nx]);
    let block = (32u32, 1u32);
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: threads with i >= NX do nothing; the others read row i of A (NX x NY)
            // and x (NY), and write tmp[i] (NX).
            unsafe {
                launch(
                    &dev,
                    &kernel1,
                    LaunchConfig::new((support::blocks_for(nx, block.0), 1), block),
                    &mut [
                        &mut Scalar(nx as i32),
                        &mut Scalar(ny as i32),
                        &mut d_a,
                        &mut d_x,
                        &mut d_tmp,
                    ],
                )
            }?;
            // SAFETY: threads with j >= NY do nothing; the others read column j of A and tmp
            // (NX), and write y[j] (NY).
            unsafe {
                launch(
                    &dev,
                    &kernel2,
                    LaunchConfig::new((support::blocks_for(ny, block.0), 1), block),
                    &mut [
                        &mut Scalar(nx as i32),
                        &mut Scalar(ny as i32),
                        &mut d_a,
                        &mut d_y,
                        &mut d_tmp,
                    ],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            // PolyBench's CPU version (atax_cpu).
            y.fill(0.0);
            for (i, row) in a.chunks(ny).enumerate() {
                tmp[i] = 0.0;
                for (aij, xj) in row.iter().zip(&x) {
                    tmp[i] += aij * xj;
                }
                for (yj, aij) in y.iter_mut().zip(row) {
                    *yj += aij * tmp[i];
                }
            }
            Ok(())
        }
        Phase::Check => {
            // Sums of positive f32 products.
            check_close("tmp", &download(&d_tmp, "tmp")?, &wide(&tmp), 1e-4, 0.0)?;
            check_close("y", &download(&d_y, "y")?, &wide(&y), 1e-4, 0.0)
        }
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("atax", DATA_PARALLEL, 2, op))
}

/// PolyBench gemver: `gemver_kernel1` (A += u1 v1^T + u2 v2^T), `gemver_kernel2`
/// (x += beta A^T y + z), `gemver_kernel3` (w += alpha A x), with gemver.cuh's blocks.
fn gemver(dev: &Device) -> Result<Bench, String> {
    let n = 1024usize;
    let (alpha, beta) = (43532.0f32, 12313.0f32);
    let module = sized(GEMVER, &[("N", n)]);
    let kernels = ["gemver_kernel1", "gemver_kernel2", "gemver_kernel3"].map(|k| module.kernel(k));
    let mut rng = Lcg::new(25);
    let a0 = rng.units(n * n);
    let [u1, v1, u2, v2, y, z] = [(); 6].map(|()| rng.units(n));
    let mut d_a = upload(dev, &a0, "A")?;
    let mut d_u1 = upload(dev, &u1, "u1")?;
    let mut d_v1 = upload(dev, &v1, "v1")?;
    let mut d_u2 = upload(dev, &u2, "u2")?;
    let mut d_v2 = upload(dev, &v2, "v2")?;
    let mut d_y = upload(dev, &y, "y")?;
    let mut d_z = upload(dev, &z, "z")?;
    let zero = vec![0.0f32; n];
    let (mut d_x, mut d_w) = (zeros::<f32>(dev, n, "x")?, zeros::<f32>(dev, n, "w")?);
    let (mut a, mut x, mut w) = (a0.clone(), zero.clone(), zero.clone());
    let grid1 = LaunchConfig::new(((n / 32) as u32, (n / 8) as u32), (32, 8));
    let line = LaunchConfig::new(((n / 256) as u32, 1), (256, 1));
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::ResetSim => {
            restore(&mut d_a, &a0)?;
            restore(&mut d_x, &zero)?;
            restore(&mut d_w, &zero)
        }
        Phase::Sim => {
            let n_i = n as i32;
            // SAFETY: the (N/32, N/8) grid of 32 x 8 blocks covers A (N x N) exactly; each
            // thread updates its element and reads u1[i], u2[i], v1[j], v2[j] (N each).
            unsafe {
                launch(
                    &dev,
                    &kernels[0],
                    grid1,
                    &mut [
                        &mut Scalar(n_i),
                        &mut Scalar(alpha),
                        &mut Scalar(beta),
                        &mut d_a,
                        &mut d_v1,
                        &mut d_v2,
                        &mut d_u1,
                        &mut d_u2,
                    ],
                )
            }?;
            // SAFETY: threads with i >= N do nothing; the others read column i of A and y, z
            // (N), and update x[i].
            unsafe {
                launch(
                    &dev,
                    &kernels[1],
                    line,
                    &mut [
                        &mut Scalar(n_i),
                        &mut Scalar(alpha),
                        &mut Scalar(beta),
                        &mut d_a,
                        &mut d_x,
                        &mut d_y,
                        &mut d_z,
                    ],
                )
            }?;
            // SAFETY: as above, with row i of A, x, and w[i].
            unsafe {
                launch(
                    &dev,
                    &kernels[2],
                    line,
                    &mut [
                        &mut Scalar(n_i),
                        &mut Scalar(alpha),
                        &mut Scalar(beta),
                        &mut d_a,
                        &mut d_x,
                        &mut d_w,
                    ],
                )
            }?;
            sync(&dev)
        }
        Phase::ResetRef => {
            a.copy_from_slice(&a0);
            x.fill(0.0);
            w.fill(0.0);
            Ok(())
        }
        Phase::Ref => {
            // PolyBench's CPU version (gemver), the x loop taken row by row of A.
            for (i, row) in a.chunks_mut(n).enumerate() {
                for (j, aij) in row.iter_mut().enumerate() {
                    *aij += u1[i] * v1[j] + u2[i] * v2[j];
                }
            }
            for (row, yj) in a.chunks(n).zip(&y) {
                for (xi, aji) in x.iter_mut().zip(row) {
                    *xi += beta * aji * yj;
                }
            }
            for (xi, zi) in x.iter_mut().zip(&z) {
                *xi += zi;
            }
            for (wi, row) in w.iter_mut().zip(a.chunks(n)) {
                for (aij, xj) in row.iter().zip(&x) {
                    *wi += alpha * aij * xj;
                }
            }
            Ok(())
        }
        Phase::Check => {
            check_close("A", &download(&d_a, "A")?, &wide(&a), 1e-6, 0.0)?;
            check_close("x", &download(&d_x, "x")?, &wide(&x), 1e-4, 0.0)?;
            check_close("w", &download(&d_w, "w")?, &wide(&w), 1e-4, 0.0)
        }
    };
    Ok(bench("gemver", DATA_PARALLEL, 3, op))
}

/// PolyBench 3mm, G = (A B)(C D): `mm3_kernel1` (E = A B), `mm3_kernel2` (F = C D),
/// `mm3_kernel3` (G = E F), on 32 x 8 blocks and the grids `mm3Cuda` computes.
fn mm3(dev: &Device) -> Result<Bench, String> {
    const BLOCK: (u32, u32) = (32, 8);
    let n = 192usize;
    let module = sized(
        MM3,
        &[("NI", n), ("NJ", n), ("NK", n), ("NL", n), ("NM", n)],
    );
    let kernels = ["mm3_kernel1", "mm3_kernel2", "mm3_kernel3"].map(|k| module.kernel(k));
    let mut rng = Lcg::new(21);
    let [a, b, c, d] = [(); 4].map(|()| rng.units(n * n));
    let mut d_a = upload(dev, &a, "A")?;
    let mut d_b = upload(dev, &b, "B")?;
    let mut d_c = upload(dev, &c, "C")?;
    let mut d_d = upload(dev, &d, "D")?;
    let mut d_e = zeros::<f32>(dev, n * n, "E")?;
    let mut d_f = zeros::<f32>(dev, n * n, "F")?;
    let mut d_g = zeros::<f32>(dev, n * n, "G")?;
    let (mut e, mut f, mut g) = (
        vec![0.0f32; n * n],
        vec![0.0f32; n * n],
        vec![0.0f32; n * n],
    );
    let config = LaunchConfig::new(
        (
            support::blocks_for(n, BLOCK.0),
            support::blocks_for(n, BLOCK.1),
        ),
        BLOCK,
    );
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            let s = n as i32;
            let step = |kernel: &Kernel,
                        x: &mut DeviceArray<f32>,
                        y: &mut DeviceArray<f32>,
                        z: &mut DeviceArray<f32>| {
                // SAFETY: the grid covers the n x n output and threads outside it do nothing;
                // the others read a row of the first n x n input and a column of the second.
                unsafe {
                    launch(
                        &dev,
                        kernel,
                        config,
                        &mut [
                            &mut Scalar(s),
                            &mut Scalar(s),
                            &mut Scalar(s),
                            &mut Scalar(s),
                            &mut Scalar(s),
                            x,
                            y,
                            z,
                        ],
                    )
                }
            };
            step(&kernels[0], &mut d_a, &mut d_b, &mut d_e)?;
            step(&kernels[1], &mut d_c, &mut d_d, &mut d_f)?;
            step(&kernels[2], &mut d_e, &mut d_f, &mut d_g)?;
            sync(&dev)
        }
        Phase::Ref => {
            matmul_ikj(&a, &b, &mut e, (n, n, n));
            matmul_ikj(&c, &d, &mut f, (n, n, n));
            matmul_ikj(&e, &f, &mut g, (n, n, n));
            Ok(())
        }
        Phase::Check => {
            // Sums of positive f32 products (G's terms themselves such sums).
            check_close("E", &download(&d_e, "E")?, &wide(&e), 1e-4, 0.0)?;
            check_close("F", &download(&d_f, "F")?, &wide(&f), 1e-4, 0.0)?;
            check_close("G", &download(&d_g, "G")?, &wide(&g), 1e-4, 0.0)
        }
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("3mm", DATA_PARALLEL, 3, op))
}

/// PolyBench jacobi-2d-imper: TSTEPS times `runJacobiCUDA_kernel1` (B = the 5-point average of
/// A over the interior) then `runJacobiCUDA_kernel2` (A = B over the interior), 32 x 8 blocks.
fn jacobi_2d(dev: &Device) -> Result<Bench, String> {
    const BLOCK: (u32, u32) = (32, 8);
    let (n, tsteps) = (256usize, 20usize);
    let module = sized(JACOBI_2D, &[("TSTEPS", tsteps), ("N", n)]);
    let kernels = [
        module.kernel("runJacobiCUDA_kernel1"),
        module.kernel("runJacobiCUDA_kernel2"),
    ];
    let mut rng = Lcg::new(26);
    let (a0, b0) = (rng.units(n * n), rng.units(n * n));
    let (mut d_a, mut d_b) = (upload(dev, &a0, "A")?, upload(dev, &b0, "B")?);
    let (mut a, mut b) = (a0.clone(), b0.clone());
    let config = LaunchConfig::new(
        (
            support::blocks_for(n, BLOCK.0),
            support::blocks_for(n, BLOCK.1),
        ),
        BLOCK,
    );
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::ResetSim => {
                restore(&mut d_a, &a0)?;
                restore(&mut d_b, &b0)
            }
            Phase::Sim => {
                for _ in 0..tsteps {
                    for kernel in &kernels {
                        // SAFETY: only interior points (0 < i, j < N-1) work, reading A within
                        // one point of theirs and B at the point (or the reverse), both N x N.
                        unsafe {
                            launch(
                                &dev,
                                kernel,
                                config,
                                &mut [&mut Scalar(n as i32), &mut d_a, &mut d_b],
                            )
                        }?;
                    }
                }
                sync(&dev)
            }
            Phase::ResetRef => {
                a.copy_from_slice(&a0);
                b.copy_from_slice(&b0);
                Ok(())
            }
            Phase::Ref => {
                // PolyBench's CPU version (runJacobi2DCpu).
                for _ in 0..tsteps {
                    for i in 1..n - 1 {
                        for j in 1..n - 1 {
                            b[i * n + j] = 0.2
                                * (a[i * n + j]
                                    + a[i * n + j - 1]
                                    + a[i * n + j + 1]
                                    + a[(i + 1) * n + j]
                                    + a[(i - 1) * n + j]);
                        }
                    }
                    for i in 1..n - 1 {
                        a[i * n + 1..i * n + n - 1].copy_from_slice(&b[i * n + 1..i * n + n - 1]);
                    }
                }
                Ok(())
            }
            Phase::Check => {
                check_close("A", &download(&d_a, "A")?, &wide(&a), 1e-5, 1e-6)?;
                check_close("B", &download(&d_b, "B")?, &wide(&b), 1e-5, 1e-6)
            }
        }
    };
    Ok(bench("jacobi2D", DATA_PARALLEL, 2 * tsteps, op))
}

/// Rodinia gaussian: for each of the Size - 1 columns, `Fan1` (the multipliers) then `Fan2`
/// (the elimination), as ForwardSub launches them: 2 (Size - 1) launches.
fn gaussian(dev: &Device) -> Result<Bench, String> {
    const MAXBLOCKSIZE: u32 = 512;
    const BLOCK_SIZE_XY: u32 = 4;
    let size = 128usize;
    let mut rng = Lcg::new(3);
    // Diagonally dominant, so that elimination without pivoting is well conditioned.
    let a0: Vec<f32> = (0..size * size)
        .map(|k| rng.unit() - 0.5 + if k / size == k % size { 4.0 } else { 0.0 })
        .collect();
    let b0: Vec<f32> = (0..size).map(|_| rng.unit() + 0.5).collect();
    let mut d_m = zeros::<f32>(dev, size * size, "m")?;
    let (mut d_a, mut d_b) = (upload(dev, &a0, "a")?, upload(dev, &b0, "b")?);
    let (mut m, mut a, mut b) = (vec![0.0f32; size * size], a0.clone(), b0.clone());
    let s = size as u32;
    let grid = s.div_ceil(MAXBLOCKSIZE);
    let grid_xy = s.div_ceil(BLOCK_SIZE_XY);
    let module = Module::from_source(GAUSSIAN);
    let (fan1, fan2) = (module.kernel("Fan1"), module.kernel("Fan2"));
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::ResetSim => {
                restore(&mut d_a, &a0)?;
                restore(&mut d_b, &b0)
            }
            Phase::Sim => {
                for t in 0..size - 1 {
                    // SAFETY: Fan1's threads past Size-1-t return; the others write
                    // m[t+1.., t] and read a in rows t.. of the Size x Size matrices.
                    unsafe {
                        launch(
                            &dev,
                            &fan1,
                            LaunchConfig::new(grid, MAXBLOCKSIZE),
                            &mut [
                                &mut d_m,
                                &mut d_a,
                                &mut Scalar(size as i32),
                                &mut Scalar(t as i32),
                            ],
                        )
                    }?;
                    // SAFETY: Fan2's threads outside rows t+1.. and columns t.. return; the
                    // others stay in the Size x Size matrices and the Size elements of b.
                    unsafe {
                        launch(
                            &dev,
                            &fan2,
                            LaunchConfig::new((grid_xy, grid_xy), (BLOCK_SIZE_XY, BLOCK_SIZE_XY)),
                            &mut [
                                &mut d_m,
                                &mut d_a,
                                &mut d_b,
                                &mut Scalar(size as i32),
                                &mut Scalar((size - t) as i32),
                                &mut Scalar(t as i32),
                            ],
                        )
                    }?;
                }
                sync(&dev)
            }
            Phase::ResetRef => {
                a.copy_from_slice(&a0);
                b.copy_from_slice(&b0);
                Ok(())
            }
            Phase::Ref => {
                // Elimination without pivoting, keeping the multipliers.
                for t in 0..size - 1 {
                    for i in t + 1..size {
                        m[i * size + t] = a[i * size + t] / a[t * size + t];
                    }
                    for i in t + 1..size {
                        let mi = m[i * size + t];
                        for j in t..size {
                            a[i * size + j] -= mi * a[t * size + j];
                        }
                        b[i] -= mi * b[t];
                    }
                }
                Ok(())
            }
            Phase::Check => {
                check_close("m", &download(&d_m, "m")?, &wide(&m), 1e-4, 1e-5)?;
                check_close("a", &download(&d_a, "a")?, &wide(&a), 1e-4, 1e-5)?;
                check_close("b", &download(&d_b, "b")?, &wide(&b), 1e-4, 1e-5)
            }
        }
    };
    Ok(bench("gaussian", DATA_PARALLEL, 2 * (size - 1), op))
}

// ---------------------------------------------------------------------------------------------
// Shared memory and barriers
// ---------------------------------------------------------------------------------------------

/// Rodinia pathfinder: `dynproc_kernel`, a pyramid of `pyramid_height` rows of the dynamic
/// program per launch, launched as `calc_path` does (blocks of 256, buffers swapped), on the
/// original's 100 rows and pyramid height 20 and 20,000 of its 100,000 columns.
fn pathfinder(dev: &Device) -> Result<Bench, String> {
    const BLOCK_SIZE: usize = 256;
    let (cols, rows, pyramid_height) = (20_000usize, 100usize, 20usize);
    let border = pyramid_height;
    let small_block = BLOCK_SIZE - pyramid_height * 2;
    let block_cols = cols.div_ceil(small_block);
    let mut rng = Lcg::new(6);
    let data: Vec<i32> = (0..rows * cols).map(|_| rng.below(10) as i32).collect();
    let mut d_wall = upload(dev, &data[cols..], "wall")?;
    let mut d_result = [
        upload(dev, &data[..cols], "result 0")?,
        zeros::<i32>(dev, cols, "result 1")?,
    ];
    let kernel = Kernel::from_source(PATHFINDER, "dynproc_kernel");
    let config = LaunchConfig::new(block_cols as u32, BLOCK_SIZE as u32);
    let steps: Vec<usize> = (0..rows - 1).step_by(pyramid_height).collect();
    let launches = steps.len();
    let (mut best, mut next) = (vec![0i32; cols], vec![0i32; cols]);
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::ResetSim => restore(&mut d_result[0], &data[..cols]),
            Phase::Sim => {
                for (k, &t) in steps.iter().enumerate() {
                    let [r0, r1] = &mut d_result;
                    let (src, dst) = if k % 2 == 0 { (r0, r1) } else { (r1, r0) };
                    // SAFETY: threads load and store only columns inside 0..cols (IN_RANGE and
                    // the valid range), and read wall rows startStep..startStep+iteration of
                    // the rows - 1 given.
                    unsafe {
                        launch(
                            &dev,
                            &kernel,
                            config,
                            &mut [
                                &mut Scalar(pyramid_height.min(rows - t - 1) as i32),
                                &mut d_wall,
                                src,
                                dst,
                                &mut Scalar(cols as i32),
                                &mut Scalar(rows as i32),
                                &mut Scalar(t as i32),
                                &mut Scalar(border as i32),
                            ],
                        )
                    }?;
                }
                sync(&dev)
            }
            Phase::Ref => {
                // The cheapest path to each cell of the last row (Rodinia's CPU loop).
                best.copy_from_slice(&data[..cols]);
                for row in data.chunks(cols).skip(1) {
                    for c in 0..cols {
                        let left = best[c.saturating_sub(1)];
                        let right = best[(c + 1).min(cols - 1)];
                        next[c] = left.min(best[c]).min(right) + row[c];
                    }
                    std::mem::swap(&mut best, &mut next);
                }
                Ok(())
            }
            Phase::Check => {
                let last = &d_result[steps.len() % 2];
                check_equal("path costs", &download(last, "result")?, &best)
            }
            Phase::ResetRef => Ok(()),
        }
    };
    Ok(bench("pathfinder", SHARED, launches, op))
}

/// cuda-samples matrixMul: `MatrixMulCUDA<32>`, one 32 x 32 tile of C per block through shared
/// memory, grid wB / 32 x hA / 32.
fn matrix_mul(dev: &Device) -> Result<Bench, String> {
    const BLOCK: u32 = 32;
    let n = 256usize;
    let mut rng = Lcg::from_state(3);
    let a: Vec<f32> = (0..n * n).map(|_| rng.range(-1.0, 1.0)).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.range(-1.0, 1.0)).collect();
    let (mut d_a, mut d_b) = (upload(dev, &a, "A")?, upload(dev, &b, "B")?);
    let mut d_c = zeros::<f32>(dev, n * n, "C")?;
    let kernel = Kernel::from_source(MATRIX_MUL, format!("MatrixMulCUDA<{BLOCK}>"));
    let config = LaunchConfig::new((n as u32 / BLOCK, n as u32 / BLOCK), (BLOCK, BLOCK));
    let mut c = vec![0.0f32; n * n];
    // The sums' rounding grows with the sum of the terms' magnitudes.
    let (abs_a, abs_b): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|v| v.abs()).collect(),
        b.iter().map(|v| v.abs()).collect(),
    );
    let mut scale = vec![0.0f32; n * n];
    matmul_ikj(&abs_a, &abs_b, &mut scale, (n, n, n));
    let scale = wide(&scale);
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: the sizes are multiples of the block, so each block reads whole tiles
            // of A and B (n x n) and writes one tile of C (n x n).
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    config,
                    &mut [
                        &mut d_c,
                        &mut d_a,
                        &mut d_b,
                        &mut Scalar(n as i32),
                        &mut Scalar(n as i32),
                    ],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            matmul_ikj(&a, &b, &mut c, (n, n, n));
            Ok(())
        }
        Phase::Check => support::check_scaled("C", &download(&d_c, "C")?, &wide(&c), &scale, 1e-5),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("matrixMul", SHARED, 1, op))
}

/// cuda-samples transpose: `transposeNoBankConflicts`, 32 x 32 tiles through padded shared
/// memory, blocks of 32 x 16 threads.
fn transpose(dev: &Device) -> Result<Bench, String> {
    const TILE_DIM: usize = 32;
    const BLOCK_ROWS: u32 = 16;
    let (width, height) = (1024usize, 512usize);
    let input: Vec<f32> = (0..width * height).map(|i| i as f32).collect();
    let mut d_in = upload(dev, &input, "input")?;
    let mut d_out = zeros::<f32>(dev, width * height, "output")?;
    let config = LaunchConfig::new(
        ((width / TILE_DIM) as u32, (height / TILE_DIM) as u32),
        (TILE_DIM as u32, BLOCK_ROWS),
    );
    let kernel = Kernel::from_source(TRANSPOSE, "transposeNoBankConflicts");
    let mut out = vec![0.0f32; width * height];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: width and height are multiples of TILE_DIM, so each block reads and
            // writes whole tiles of the width x height arrays.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    config,
                    &mut [
                        &mut d_out,
                        &mut d_in,
                        &mut Scalar(width as i32),
                        &mut Scalar(height as i32),
                    ],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            for y in 0..height {
                for x in 0..width {
                    out[x * height + y] = input[y * width + x];
                }
            }
            Ok(())
        }
        Phase::Check => check_equal("transposed", &download(&d_out, "output")?, &out),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("transpose", SHARED, 1, op))
}

/// The reduction sample's input: `rand() & 0xFF` per element.
fn reduction_input(n: usize, seed: u64) -> Vec<i32> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| (rng.next_u32() % 256) as i32).collect()
}

/// cuda-samples reduction: `reduce3<int>` (two elements per thread, a tree in dynamic shared
/// memory with a barrier per level), 256 threads, one partial sum per block.
fn reduce3(dev: &Device) -> Result<Bench, String> {
    const THREADS: usize = 256;
    let n = 1usize << 17;
    let blocks = n / (2 * THREADS);
    let data = reduction_input(n, 13);
    let mut d_in = upload(dev, &data, "data")?;
    let mut d_out = zeros::<i32>(dev, blocks, "partial sums")?;
    let kernel = Module::from_source(REDUCTION)
        .with_name_expressions(["reduce3<int>"])
        .kernel("reduce3<int>");
    let config = LaunchConfig::new(blocks as u32, THREADS as u32).with_shared_bytes(THREADS * 4);
    let mut partial = vec![0i32; blocks];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: the kernel reads g_idata[i] only for i < n, writes g_odata[blockIdx.x]
            // (one element per block) and uses a T per thread of dynamic shared memory.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    config,
                    &mut [&mut d_in, &mut d_out, &mut Scalar(n as u32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            for (sum, chunk) in partial.iter_mut().zip(data.chunks(2 * THREADS)) {
                *sum = chunk.iter().sum();
            }
            Ok(())
        }
        Phase::Check => check_equal("g_odata", &download(&d_out, "g_odata")?, &partial),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("reduction reduce3", SHARED, 1, op))
}

/// cuda-samples convolutionSeparable: `convolutionRowsKernel` then `convolutionColumnsKernel`
/// (radius 8, tiles with halos in shared memory), as the sample runs them.
fn convolution_separable(dev: &Device) -> Result<Bench, String> {
    const RADIUS: usize = 8;
    let (width, height) = (512usize, 512usize);
    // Small integers (`rand() % 16`, as the sample): every sum is exact in any order.
    let small = |n: usize, seed: u64| -> Vec<f32> {
        let mut rng = Lcg::from_state(seed);
        (0..n).map(|_| (rng.next_u32() % 16) as f32).collect()
    };
    let filter = small(2 * RADIUS + 1, 60);
    let image = small(width * height, 63);
    let module = Module::from_source(CONVOLUTION);
    let rows = module.kernel("convolutionRowsKernel");
    let columns = module.kernel("convolutionColumnsKernel");
    dev.copy_to_symbol(&rows, "c_Kernel", &filter[..])
        .map_err(fail("c_Kernel"))?;
    let mut d_input = upload(dev, &image, "image")?;
    let mut d_buffer = zeros::<f32>(dev, width * height, "buffer")?;
    let mut d_output = zeros::<f32>(dev, width * height, "output")?;
    let rows_config = LaunchConfig::new(((width / (8 * 16)) as u32, (height / 4) as u32), (16, 4));
    let columns_config =
        LaunchConfig::new(((width / 16) as u32, (height / (8 * 8)) as u32), (16, 8));
    let (mut buffer, mut output) = (vec![0.0f32; width * height], vec![0.0f32; width * height]);
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::Sim => {
                let pass = |kernel: &Kernel,
                            config: LaunchConfig,
                            dst: &mut DeviceArray<f32>,
                            src: &mut DeviceArray<f32>| {
                    // SAFETY: the image sizes are multiples of the kernels' tiles (the sample's
                    // asserts) and the halo reads outside the image are guarded; dst and src
                    // hold width x height floats.
                    unsafe {
                        launch(
                            &dev,
                            kernel,
                            config,
                            &mut [
                                dst,
                                src,
                                &mut Scalar(width as i32),
                                &mut Scalar(height as i32),
                                &mut Scalar(width as i32),
                            ],
                        )
                    }
                };
                pass(&rows, rows_config, &mut d_buffer, &mut d_input)?;
                pass(&columns, columns_config, &mut d_output, &mut d_buffer)?;
                sync(&dev)
            }
            Phase::Ref => {
                // The sample's CPU version (convolutionRowCPU, convolutionColumnCPU), over the
                // taps inside the image: src[d] * filter[R + x - d] for d in x - R..=x + R.
                for y in 0..height {
                    for x in 0..width {
                        let (from, to) = (x.saturating_sub(RADIUS), (x + RADIUS).min(width - 1));
                        let mut sum = 0.0;
                        for d in from..=to {
                            sum += image[y * width + d] * filter[RADIUS + x - d];
                        }
                        buffer[y * width + x] = sum;
                    }
                }
                for y in 0..height {
                    let (from, to) = (y.saturating_sub(RADIUS), (y + RADIUS).min(height - 1));
                    for x in 0..width {
                        let mut sum = 0.0;
                        for d in from..=to {
                            sum += buffer[d * width + x] * filter[RADIUS + y - d];
                        }
                        output[y * width + x] = sum;
                    }
                }
                Ok(())
            }
            Phase::Check => check_equal("output", &download(&d_output, "output")?, &output),
            Phase::ResetSim | Phase::ResetRef => Ok(()),
        }
    };
    Ok(bench("convolutionSeparable", SHARED, 2, op))
}

/// cuda-samples scalarProd: `scalarProdGPU`, dot products of vector pairs through ACCUM_N
/// shared accumulators and a tree, at the sample's size (256 pairs of 4096 on 128 blocks of 256).
fn scalar_prod(dev: &Device) -> Result<Bench, String> {
    let (vectors, elements, blocks) = (256usize, 4096usize, 128u32);
    let mut rng = Lcg::from_state(80);
    let (a, b) = (rng.units(vectors * elements), rng.units(vectors * elements));
    let (mut d_a, mut d_b) = (upload(dev, &a, "A")?, upload(dev, &b, "B")?);
    let mut d_c = zeros::<f32>(dev, vectors, "C")?;
    let kernel = Kernel::from_source(SCALAR_PROD, "scalarProdGPU");
    let mut c = vec![0.0f32; vectors];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: pair v occupies elements [v * elementN, (v + 1) * elementN) of A and B;
            // C has one element per pair.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    LaunchConfig::new(blocks, 256),
                    &mut [
                        &mut d_c,
                        &mut d_a,
                        &mut d_b,
                        &mut Scalar(vectors as i32),
                        &mut Scalar(elements as i32),
                    ],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            // The sample's CPU version (scalarProdCPU), in float.
            for ((cv, x), y) in c.iter_mut().zip(a.chunks(elements)).zip(b.chunks(elements)) {
                let mut sum = 0.0f32;
                for (p, q) in x.iter().zip(y) {
                    sum += p * q;
                }
                *cv = sum;
            }
            Ok(())
        }
        // Sums of 4096 positive products: the serial float sum is itself off by up to ~1e-5.
        Phase::Check => check_close("C", &download(&d_c, "C")?, &wide(&c), 1e-4, 0.0),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("scalarProd", SHARED, 1, op))
}

// ---------------------------------------------------------------------------------------------
// Warp collectives
// ---------------------------------------------------------------------------------------------

/// cuda-samples shfl_scan: the sample's three launches over its 65,536 elements: block scans
/// with `__shfl_up_sync` (`shfl_scan_test`), a scan of the block sums, and `uniform_add`.
fn shfl_scan(dev: &Device) -> Result<Bench, String> {
    const BLOCK: usize = 256;
    const SHARED_BYTES: usize = BLOCK / 32 * 4;
    let n = 1usize << 16;
    let blocks = n / BLOCK;
    let mut rng = Lcg::from_state(40);
    let input: Vec<i32> = (0..n).map(|_| (rng.next_u32() % 10) as i32).collect();
    let mut d_data = upload(dev, &input, "data")?;
    let mut d_sums = zeros::<i32>(dev, blocks, "partial sums")?;
    // The sample passes no partial_sums (NULL) to the second scan; one element stands in.
    let mut d_unused = zeros::<i32>(dev, 1, "unused")?;
    let mut d_rest = d_data
        .slice(ndarray::s![BLOCK..])
        .map_err(fail("data + blockSize"))?;
    let module = Module::from_source(SHFL_SCAN);
    let (scan, add) = (
        module.kernel("shfl_scan_test"),
        module.kernel("uniform_add"),
    );
    let p_block = blocks.min(BLOCK);
    let mut out = vec![0i32; n];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::ResetSim => restore(&mut d_data, &input),
        Phase::Sim => {
            let scan_pass = |(blocks, threads): (usize, usize),
                             data: &mut DeviceArray<i32>,
                             sums: &mut DeviceArray<i32>| {
                let config = LaunchConfig::new(blocks as u32, threads as u32)
                    .with_shared_bytes(SHARED_BYTES);
                // SAFETY: data has blocks x threads elements (one per thread); partial_sums
                // has `blocks` elements where it is written (the second pass writes none past
                // its one block's); the warp sums fit the shared bytes given.
                unsafe { launch(&dev, &scan, config, &mut [data, &mut Scalar(32i32), sums]) }
            };
            scan_pass((blocks, BLOCK), &mut d_data, &mut d_sums)?;
            scan_pass(
                (blocks.div_ceil(p_block), p_block),
                &mut d_sums,
                &mut d_unused,
            )?;
            // SAFETY: the view starts blockSize elements in, and the (blocks - 1) x blockSize
            // threads each add to one of its elements; partial_sums has `blocks`.
            unsafe {
                launch(
                    &dev,
                    &add,
                    LaunchConfig::new((blocks - 1) as u32, BLOCK as u32),
                    &mut [&mut d_rest, &mut d_sums, &mut Scalar(n as i32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            let mut sum = 0i32;
            for (o, v) in out.iter_mut().zip(&input) {
                sum += v;
                *o = sum;
            }
            Ok(())
        }
        Phase::Check => check_equal("scan", &download(&d_data, "data")?, &out),
        Phase::ResetRef => Ok(()),
    };
    Ok(bench("shfl_scan", WARP, 3, op))
}

/// cuda-samples reduction: `reduce6<int, 256, true>`, a grid-stride loop, a shared-memory tree
/// to the last warp and `__shfl_down_sync` within it, on the sample's 64 blocks (--maxblocks).
fn reduce6(dev: &Device) -> Result<Bench, String> {
    const THREADS: usize = 256;
    const BLOCKS: usize = 64;
    let entry = "reduce6<int, 256, true>";
    let n = 1usize << 22;
    let data = reduction_input(n, 26);
    let mut d_in = upload(dev, &data, "data")?;
    let mut d_out = zeros::<i32>(dev, BLOCKS, "partial sums")?;
    let kernel = Module::from_source(REDUCTION_WARP)
        .with_name_expressions([entry])
        .kernel(entry);
    let config = LaunchConfig::new(BLOCKS as u32, THREADS as u32).with_shared_bytes(THREADS * 4);
    let mut partial = vec![0i32; BLOCKS];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: the kernel reads g_idata[i] only for i < n, writes g_odata[blockIdx.x]
            // (one element per block) and uses a T per thread of dynamic shared memory.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    config,
                    &mut [&mut d_in, &mut d_out, &mut Scalar(n as u32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            // Block b sums the 2 x 256-element slices b, b + 64, b + 128, ... (the grid stride).
            partial.fill(0);
            for (slice, chunk) in data.chunks(2 * THREADS).enumerate() {
                partial[slice % BLOCKS] += chunk.iter().sum::<i32>();
            }
            Ok(())
        }
        Phase::Check => check_equal("g_odata", &download(&d_out, "g_odata")?, &partial),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("reduction reduce6", WARP, 1, op))
}

/// HeCBench shuffle: `transpose_shfl`, which reverses each block of 32 elements through
/// `__shfl_sync`, blocks of 32.
fn transpose_shfl(dev: &Device) -> Result<Bench, String> {
    const GROUP: usize = 32;
    let total = 1usize << 18;
    let matrix: Vec<f32> = (0..total).map(|i| i as f32 * 10.0).collect();
    let mut d_matrix = upload(dev, &matrix, "matrix")?;
    let mut d_out = zeros::<f32>(dev, total, "transposed")?;
    let kernel = Kernel::from_source(SHUFFLE, "transpose_shfl");
    let config = LaunchConfig::new((total / GROUP) as u32, GROUP as u32);
    let mut out = vec![0.0f32; total];
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::Sim => {
                // SAFETY: total / 32 blocks of 32 threads, each reading and writing its own
                // element of arrays of total elements.
                unsafe { launch(&dev, &kernel, config, &mut [&mut d_out, &mut d_matrix]) }?;
                sync(&dev)
            }
            Phase::Ref => {
                for (o, i) in out.chunks_mut(GROUP).zip(matrix.chunks(GROUP)) {
                    for (o, i) in o.iter_mut().zip(i.iter().rev()) {
                        *o = *i;
                    }
                }
                Ok(())
            }
            Phase::Check => check_equal("transposed", &download(&d_out, "out")?, &out),
            Phase::ResetSim | Phase::ResetRef => Ok(()),
        }
    };
    Ok(bench("shuffle transpose_shfl", WARP, 1, op))
}

// ---------------------------------------------------------------------------------------------
// Atomics
// ---------------------------------------------------------------------------------------------

/// cuda-samples simpleAtomicIntrinsics: every thread applies eleven atomics (add, sub, exch,
/// max, min, inc, dec, CAS, and, or, xor) to the same eleven integers; 1024 blocks of 256.
fn simple_atomic_intrinsics(dev: &Device) -> Result<Bench, String> {
    let (blocks, threads) = (1024u32, 256u32);
    let n = (blocks * threads) as i32;
    let mut init = [0i32; 11];
    init[8] = 0xff;
    init[10] = 0xff;
    let mut d_data = upload(dev, &init, "g_odata")?;
    let kernel = Kernel::from_source(ATOMICS, "testKernel");
    let mut data = init;
    let dev = dev.clone();
    let op = move |phase: Phase| {
        match phase {
            Phase::ResetSim => restore(&mut d_data, &init),
            Phase::Sim => {
                // SAFETY: every thread touches g_odata[0..=10] only, and the array has 11
                // elements.
                unsafe {
                    launch(
                        &dev,
                        &kernel,
                        LaunchConfig::new(blocks, threads),
                        &mut [&mut d_data],
                    )
                }?;
                sync(&dev)
            }
            Phase::ResetRef => {
                data = init;
                Ok(())
            }
            Phase::Ref => {
                // The sample's CPU version (computeGold): the threads' operations in turn.
                for tid in 0..n {
                    data[0] += 10;
                    data[1] -= 10;
                    data[2] = tid;
                    data[3] = data[3].max(tid);
                    data[4] = data[4].min(tid);
                    let inc = data[5] as u32;
                    data[5] = if inc >= 17 { 0 } else { inc as i32 + 1 };
                    let dec = data[6] as u32;
                    data[6] = if dec == 0 || dec > 137 {
                        137
                    } else {
                        dec as i32 - 1
                    };
                    if data[7] == tid - 1 {
                        data[7] = tid;
                    }
                    data[8] &= 2 * tid + 7;
                    // (`1 << tid` is 0 on a GPU from 32 on.)
                    data[9] |= 1u32.checked_shl(tid as u32).unwrap_or(0) as i32;
                    data[10] ^= tid;
                }
                Ok(())
            }
            Phase::Check => {
                let got = download(&d_data, "g_odata")?;
                for i in [0, 1, 3, 4, 5, 6, 8, 9, 10] {
                    ensure!(
                        got[i] == data[i],
                        "g_odata[{i}] = {}, reference {}",
                        got[i],
                        data[i]
                    );
                }
                // atomicExch and the atomicCAS chain end on whichever thread came last.
                for i in [2, 7] {
                    ensure!(
                        (0..n).contains(&got[i]),
                        "g_odata[{i}] = {} is no thread id",
                        got[i]
                    );
                }
                Ok(())
            }
        }
    };
    // The floor: the same operations, in the same order, as the atomic instructions the
    // simulator's atomics are (sequentially consistent, a compare-and-swap loop where the host
    // has no instruction for the operation).
    let floor = move || {
        let cells = init.map(AtomicI32::new);
        for tid in 0..n {
            cells[0].fetch_add(10, SeqCst);
            cells[1].fetch_sub(10, SeqCst);
            cells[2].swap(tid, SeqCst);
            cells[3].fetch_max(tid, SeqCst);
            cells[4].fetch_min(tid, SeqCst);
            let _ = cells[5].fetch_update(SeqCst, SeqCst, |v| {
                Some(if v as u32 >= 17 { 0 } else { v + 1 })
            });
            let _ = cells[6].fetch_update(SeqCst, SeqCst, |v| {
                Some(if v == 0 || v as u32 > 137 { 137 } else { v - 1 })
            });
            let _ = cells[7].compare_exchange(tid - 1, tid, SeqCst, SeqCst);
            cells[8].fetch_and(2 * tid + 7, SeqCst);
            cells[9].fetch_or(1u32.checked_shl(tid as u32).unwrap_or(0) as i32, SeqCst);
            cells[10].fetch_xor(tid, SeqCst);
        }
        std::hint::black_box(&cells);
    };
    Ok(bench("simpleAtomicIntrinsics", ATOMIC, 1, op).with_floor(floor))
}

/// cuda-samples histogram256: `histogram256Kernel` (per-warp sub-histograms in shared memory
/// with shared atomics, 240 blocks of 192) then `mergeHistogram256Kernel` (256 blocks of 256),
/// on 2 MiB of random bytes.
fn histogram256(dev: &Device) -> Result<Bench, String> {
    const BLOCKS: usize = 240;
    let mut rng = Lcg::from_state(72);
    let bytes: Vec<u8> = (0..1usize << 21)
        .map(|_| (rng.next_u32() % 256) as u8)
        .collect();
    let words: Vec<u32> = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut d_data = upload(dev, &words, "words")?;
    let mut d_partial = zeros::<u32>(dev, BLOCKS * 256, "partial histograms")?;
    let mut d_hist = zeros::<u32>(dev, 256, "histogram")?;
    let module = Module::from_source(HISTOGRAM256);
    let (kernel, merge) = (
        module.kernel("histogram256Kernel"),
        module.kernel("mergeHistogram256Kernel"),
    );
    let mut hist = vec![0u32; 256];
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::Sim => {
            // SAFETY: the kernel reads d_Data[pos] for pos < dataCount (its length) and writes
            // 240 x 256 partial counts (d_PartialHistograms' length).
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    LaunchConfig::new(BLOCKS as u32, 192),
                    &mut [&mut d_partial, &mut d_data, &mut Scalar(words.len() as u32)],
                )
            }?;
            // SAFETY: the merge reads the 256 x 240 partial counts and writes one total per
            // block (bin) of the 256.
            unsafe {
                launch(
                    &dev,
                    &merge,
                    LaunchConfig::new(256, 256),
                    &mut [&mut d_hist, &mut d_partial, &mut Scalar(BLOCKS as u32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            // The sample's CPU version (histogram256CPU).
            hist.fill(0);
            for &b in &bytes {
                hist[usize::from(b)] += 1;
            }
            Ok(())
        }
        Phase::Check => check_equal("histogram", &download(&d_hist, "histogram")?, &hist),
        Phase::ResetSim | Phase::ResetRef => Ok(()),
    };
    Ok(bench("histogram256", ATOMIC, 2, op))
}

/// HeCBench atomicReduction: `atomic_reduction`, a grid-stride sum ending in one `atomicAdd`
/// per thread, blocks of 256 and min(n / 256, 2048) blocks; the result zeroed before each run
/// (untimed).
fn atomic_reduction(dev: &Device) -> Result<Bench, String> {
    const BLOCK: usize = 256;
    let n = 1usize << 22;
    let mut rng = Lcg::new(22);
    let input: Vec<i32> = (0..n).map(|_| rng.below(7) as i32 - 3).collect();
    let mut d_in = upload(dev, &input, "in")?;
    let mut d_out = zeros::<i32>(dev, 1, "out")?;
    let kernel = Kernel::from_source(ATOMIC_REDUCTION, "atomic_reduction");
    let blocks = n.div_ceil(BLOCK).min(2048);
    let mut sum = 0i32;
    let dev = dev.clone();
    let op = move |phase: Phase| match phase {
        Phase::ResetSim => d_out.fill(0).map_err(fail("out")),
        Phase::Sim => {
            // SAFETY: every thread reads in[i] for i < n (its length) and adds to the one
            // element of out.
            unsafe {
                launch(
                    &dev,
                    &kernel,
                    LaunchConfig::new(blocks as u32, BLOCK as u32),
                    &mut [&mut d_in, &mut d_out, &mut Scalar(n as i32)],
                )
            }?;
            sync(&dev)
        }
        Phase::Ref => {
            sum = input.iter().sum();
            Ok(())
        }
        Phase::Check => check_equal("out", &download(&d_out, "out")?, &[sum]),
        Phase::ResetRef => Ok(()),
    };
    Ok(bench("atomicReduction", ATOMIC, 1, op))
}

// ---------------------------------------------------------------------------------------------
// How the simulator built each module, from its `tracing` events
// ---------------------------------------------------------------------------------------------

mod plans {
    use std::fmt::Debug;
    use std::sync::Mutex;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    /// The `threads` field of the events that say a module was built or loaded, since the
    /// last [`take`].
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

    /// The simulator's messages for a module compiled, or loaded from its disk cache (other
    /// events with a `threads` field name ways that were refused).
    const LOADED: [&str; 2] = [
        "compiled simulator kernel",
        "simulator kernel from the disk cache",
    ];

    #[derive(Default)]
    struct Fields {
        message: String,
        threads: Option<String>,
    }

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
            match field.name() {
                "message" => self.message = format!("{value:?}"),
                "threads" => self.threads = Some(format!("{value:?}")),
                _ => {}
            }
        }
    }

    /// Keeps the simulator's build events and prints warnings and errors to stderr.
    struct Plans;

    impl Subscriber for Plans {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            *metadata.level() <= Level::WARN || metadata.target().starts_with("gpu_mem_sim")
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields::default();
            event.record(&mut fields);
            let metadata = event.metadata();
            if *metadata.level() <= Level::WARN {
                eprintln!(
                    "{} {}: {}",
                    metadata.level(),
                    metadata.target(),
                    fields.message
                );
            } else if let Some(threads) = fields.threads
                && LOADED.contains(&fields.message.as_str())
            {
                BUILT
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(threads.to_lowercase());
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Makes this the process's subscriber (before anything is compiled).
    pub fn install() {
        if tracing::subscriber::set_global_default(Plans).is_err() {
            eprintln!("corpus: another tracing subscriber is set: execution paths not shown");
        }
    }

    /// The ways the modules built or loaded since the last call took ("-" if none was: a
    /// module loaded before in this process).
    pub fn take() -> String {
        let mut built = std::mem::take(&mut *BUILT.lock().unwrap_or_else(|e| e.into_inner()));
        built.dedup();
        if built.is_empty() {
            "-".to_string()
        } else {
            built.join("+")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// Uploads a kernel's inputs and makes its benchmark.
type Setup = fn(&Device) -> Result<Bench, String>;

/// Each kernel's collection and its benchmark.
const BENCHES: [(&str, Setup); 19] = [
    ("cuda-samples", vector_add),
    ("cuda-samples", black_scholes),
    ("polybench", atax),
    ("polybench", gemver),
    ("polybench", mm3),
    ("polybench", jacobi_2d),
    ("rodinia", gaussian),
    ("rodinia", pathfinder),
    ("cuda-samples", matrix_mul),
    ("cuda-samples", transpose),
    ("cuda-samples", reduce3),
    ("cuda-samples", convolution_separable),
    ("cuda-samples", scalar_prod),
    ("cuda-samples", shfl_scan),
    ("cuda-samples", reduce6),
    ("hecbench", transpose_shfl),
    ("cuda-samples", simple_atomic_intrinsics),
    ("cuda-samples", histogram256),
    ("hecbench", atomic_reduction),
];

/// One kernel's figures.
struct Row {
    name: String,
    collection: &'static str,
    form: &'static str,
    launches: usize,
    path: String,
    /// Medians in seconds (simulator, reference), where the kernel was timed.
    times: Option<(f64, f64)>,
    /// With `--memcheck`, `--racecheck` or `--initcheck`: the same on a simulator whose kernels are checked
    /// that way, beside the reference again.
    checked_times: Option<(f64, f64)>,
    /// Why the kernel is left out of the summary, if it is.
    excluded: Option<String>,
    /// The median of the kernel's [`Bench::floor`], where it has one.
    floor: Option<f64>,
}

/// The warm-up round (compile, first touches), then the comparison of the results.
fn warm_up(op: &mut Op) -> Result<Result<(), String>, String> {
    op(Phase::ResetSim)?;
    op(Phase::Sim)?;
    op(Phase::ResetRef)?;
    op(Phase::Ref)?;
    Ok(op(Phase::Check))
}

/// [`rounds`] rounds of the simulator's run and the reference's, in turns; each one's median.
fn medians(op: &mut Op) -> Result<(f64, f64), String> {
    let rounds = rounds();
    let (mut sim, mut reference) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        op(Phase::ResetSim)?;
        let start = Instant::now();
        op(Phase::Sim)?;
        sim.push(start.elapsed().as_secs_f64());
        op(Phase::ResetRef)?;
        let start = Instant::now();
        op(Phase::Ref)?;
        reference.push(start.elapsed().as_secs_f64());
    }
    Ok((median(sim), median(reference)))
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// [`rounds`] rounds of a [`Bench::floor`]; their median.
fn floor_median(floor: &mut dyn FnMut()) -> f64 {
    median(
        (0..rounds())
            .map(|_| {
                let start = Instant::now();
                floor();
                start.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// The medians of `setup`'s kernel on `dev` (a checked simulator's) beside its reference.
fn checked_medians(dev: &Device, setup: Setup) -> Result<(f64, f64), String> {
    let mut bench = setup(dev)?;
    warm_up(&mut bench.op)??;
    medians(&mut bench.op)
}

/// Sets up one kernel and times it; `None` if `chosen` says no to its name.
fn run_one(
    dev: &Device,
    collection: &'static str,
    setup: Setup,
    chosen: &dyn Fn(&str) -> bool,
) -> Option<Row> {
    plans::take();
    let mut row = Row {
        name: String::new(),
        collection,
        form: "",
        launches: 0,
        path: "-".to_string(),
        times: None,
        checked_times: None,
        excluded: None,
        floor: None,
    };
    let mut bench = match setup(dev) {
        Ok(bench) => bench,
        Err(error) => {
            row.name = format!("({collection})");
            row.excluded = Some(format!("setup failed: {error}"));
            return Some(row);
        }
    };
    if !chosen(bench.name) {
        return None;
    }
    row.name = bench.name.to_string();
    row.form = bench.form;
    row.launches = bench.launches;
    let checked = warm_up(&mut bench.op);
    row.path = plans::take();
    match checked {
        Err(error) => row.excluded = Some(format!("failed: {error}")),
        Ok(checked) => {
            match medians(&mut bench.op) {
                Ok(times) => row.times = Some(times),
                Err(error) => row.excluded = Some(format!("failed while timed: {error}")),
            }
            row.floor = bench.floor.as_mut().map(|floor| floor_median(floor));
            if let Err(mismatch) = checked {
                row.excluded = Some(format!("result differs from the reference: {mismatch}"));
            }
        }
    }
    Some(row)
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> Result<(), String> {
    // `cargo bench` passes `--bench`; `--json` (or GPU_MEM_BENCH_JSON=1, what `cargo xtask
    // bench --json` sets) adds a JSON summary; arguments that are not options choose kernels
    // by a part of their names (any case), all of them if none is given.
    let json = std::env::args().any(|a| a == "--json")
        || std::env::var_os("GPU_MEM_BENCH_JSON").is_some_and(|v| v == "1");
    // `--memcheck` (or GPU_MEM_BENCH_MEMCHECK=1): each kernel also on a simulator that checks
    // every access (`Checks::memcheck`), its cost as a ratio of the two ratios to the reference
    // (target: 2x); `--racecheck`: the same with races on shared memory looked for too (5x);
    // `--initcheck`: with reads of memory never written looked for (held to memcheck's 2x:
    // once an allocation was written whole, its accesses cost what memcheck's do).
    let racecheck = std::env::args().any(|a| a == "--racecheck");
    let initcheck = std::env::args().any(|a| a == "--initcheck");
    let memcheck = racecheck
        || initcheck
        || std::env::args().any(|a| a == "--memcheck")
        || std::env::var_os("GPU_MEM_BENCH_MEMCHECK").is_some_and(|v| v == "1");
    let (check, target) = if racecheck {
        ("racecheck", 5.0)
    } else if initcheck {
        ("initcheck", 2.0)
    } else {
        ("memcheck", 2.0)
    };
    let checked_runtime = memcheck.then(|| {
        let mut config = gpu_mem::sim::SimConfig::default();
        for device in &mut config.devices {
            device.checks = gpu_mem::sim::Checks {
                memcheck: !racecheck && !initcheck,
                racecheck,
                initcheck,
            };
        }
        Runtime::with_backend(std::sync::Arc::new(gpu_mem::sim::SimBackend::new(config)))
    });
    let checked_dev = match &checked_runtime {
        Some(runtime) => Some(support::device(runtime)?),
        None => None,
    };
    plans::install();
    let runtime =
        Runtime::open(BackendChoice::Only(BackendKind::Sim)).map_err(fail("simulator"))?;
    let dev = support::device(&runtime)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "gpu-mem simulator on real corpus kernels ({cores} cores), medians of {} rounds in turns; reference = plain single-threaded Rust loop; timed: launches + synchronize\n",
        rounds()
    );
    println!(
        "{:<24} {:<13} {:<17} {:>8} {:<16} {:>12} {:>12} {:>9}",
        "kernel", "collection", "form", "launches", "path", "simulator", "reference", "sim/ref"
    );
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(|a| a.to_lowercase())
        .collect();
    let chosen = |name: &str| {
        let name = name.to_lowercase();
        wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str()))
    };
    let mut rows = Vec::with_capacity(BENCHES.len());
    for (collection, setup) in BENCHES {
        let Some(mut row) = run_one(&dev, collection, setup, &chosen) else {
            continue;
        };
        if let (Some(checked), None) = (&checked_dev, &row.excluded) {
            match checked_medians(checked, setup) {
                Ok(times) => row.checked_times = Some(times),
                Err(error) => row.excluded = Some(format!("failed under {check}: {error}")),
            }
        }
        let figures = match row.times {
            Some((sim, reference)) => format!(
                "{:>9.3} ms {:>9.3} ms {:>8.1}x",
                sim * 1e3,
                reference * 1e3,
                sim / reference
            ),
            None => format!("{:>12} {:>12} {:>9}", "-", "-", "-"),
        };
        println!(
            "{:<24} {:<13} {:<17} {:>8} {:<16} {figures}",
            row.name, row.collection, row.form, row.launches, row.path
        );
        if let (Some((sim, reference)), Some((checked, checked_ref))) =
            (row.times, row.checked_times)
        {
            println!(
                "    {check}: {:>9.3} ms, {:.2}x the unchecked simulator",
                checked * 1e3,
                (checked / checked_ref) / (sim / reference)
            );
        }
        if let (Some((sim, _)), Some(floor)) = (row.times, row.floor) {
            println!(
                "    floor, the reference's operations as host atomics: {:>9.3} ms; the simulator takes {:.2}x that",
                floor * 1e3,
                sim / floor
            );
        }
        if let Some(reason) = &row.excluded {
            println!("    excluded from the summary: {reason}");
        }
        rows.push(row);
    }
    let ratios: Vec<(&str, f64)> = rows
        .iter()
        .filter(|row| row.excluded.is_none())
        .filter_map(|row| {
            row.times
                .map(|(sim, reference)| (row.name.as_str(), sim / reference))
        })
        .collect();
    let geomean = if ratios.is_empty() {
        f64::NAN
    } else {
        (ratios.iter().map(|(_, r)| r.ln()).sum::<f64>() / ratios.len() as f64).exp()
    };
    let (max_name, max_ratio) = ratios
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or(("-", f64::NAN));
    let excluded = rows.len() - ratios.len();
    let geomean_met = geomean <= 3.0;
    let max_met = max_ratio <= 10.0;
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    println!(
        "\n{} of {} kernels in the summary{}",
        ratios.len(),
        rows.len(),
        if excluded > 0 {
            format!(" ({excluded} excluded, reasons above)")
        } else {
            String::new()
        }
    );
    println!(
        "geometric mean of sim/ref: {geomean:.2}x (target <= 3x): {}",
        verdict(geomean_met)
    );
    println!(
        "largest sim/ref: {max_ratio:.2}x, {max_name} (target: none above 10x): {}",
        verdict(max_met)
    );
    println!("\ntargets {}", verdict(geomean_met && max_met));
    let costs: Vec<(&str, f64)> = rows
        .iter()
        .filter(|row| row.excluded.is_none())
        .filter_map(|row| {
            let ((sim, reference), (checked, checked_ref)) = (row.times?, row.checked_times?);
            Some((
                row.name.as_str(),
                (checked / checked_ref) / (sim / reference),
            ))
        })
        .collect();
    if !costs.is_empty() {
        let mean = (costs.iter().map(|(_, r)| r.ln()).sum::<f64>() / costs.len() as f64).exp();
        let (worst, most) = costs
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or(("-", f64::NAN));
        println!(
            "{check} / unchecked: geometric mean {mean:.2}x, largest {most:.2}x ({worst}) (target <= {target}x): {}",
            verdict(mean <= target && most <= target)
        );
    }
    if json {
        let kernels: Vec<String> = rows
            .iter()
            .map(|row| {
                let (sim, reference, ratio) = match row.times {
                    Some((s, r)) => (format!("{s:e}"), format!("{r:e}"), format!("{:e}", s / r)),
                    None => ("null".into(), "null".into(), "null".into()),
                };
                let floor = row.floor.map_or("null".into(), |f| format!("{f:e}"));
                format!(
                    "{{\"name\":{},\"collection\":{},\"form\":{},\"launches\":{},\"path\":{},\"simulator_seconds\":{sim},\"reference_seconds\":{reference},\"ratio\":{ratio},\"floor_seconds\":{floor},\"excluded\":{}}}",
                    json_string(&row.name),
                    json_string(row.collection),
                    json_string(row.form),
                    row.launches,
                    json_string(&row.path),
                    row.excluded.as_deref().map_or("null".into(), json_string),
                )
            })
            .collect();
        let number = |v: f64| {
            if v.is_finite() {
                format!("{v:e}")
            } else {
                "null".into()
            }
        };
        println!(
            "{{\"bench\":\"corpus\",\"rounds\":{},\"kernels\":[{}],\"summarised\":{},\"geomean_ratio\":{},\"max_ratio\":{},\"max_ratio_kernel\":{},\"geomean_target\":3,\"max_target\":10,\"geomean_target_met\":{geomean_met},\"max_target_met\":{max_met},\"targets_met\":{}}}",
            rounds(),
            kernels.join(","),
            ratios.len(),
            number(geomean),
            number(max_ratio),
            json_string(max_name),
            geomean_met && max_met
        );
    }
    Ok(())
}
