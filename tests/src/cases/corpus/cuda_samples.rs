//! Real CUDA kernels from NVIDIA's cuda-samples (`tests/corpus/cuda-samples/*.cu`: the samples'
//! device code verbatim, BSD-3-Clause, each file naming its origin on line 1), launched through
//! the public API with the samples' own launch shapes (block sizes, shared-memory sizes, template
//! arguments) on smaller problems, and checked against plain serial references written here.
//!
//! Inputs come from a fixed-seed generator, so every run sees the same data. Integer results
//! are compared exactly; float results within a tolerance chosen per computation (see each
//! case), as a fraction of the magnitude the rounding error of that computation scales with.

use super::support::{
    Lcg, SHARED_SIZE_LIMIT, check_equal, check_scaled, check_sorted, device, download, launch_sort,
    sort_input, sort_shared, upload, zeros,
};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Device, Module, Runtime};
use ndarray::{Array1, s};
use std::f64::consts::PI;

const VECTOR_ADD: &str = include_str!("../../../corpus/cuda-samples/vectorAdd.cu");
const ATOMICS: &str = include_str!("../../../corpus/cuda-samples/simpleAtomicIntrinsics.cu");
const MATRIX_MUL: &str = include_str!("../../../corpus/cuda-samples/matrixMul.cu");
const TRANSPOSE: &str = include_str!("../../../corpus/cuda-samples/transpose.cu");
const REDUCTION: &str = include_str!("../../../corpus/cuda-samples/reduction.cu");
const REDUCTION_WARP: &str = include_str!("../../../corpus/cuda-samples/reduction_warp.cu");
const THREAD_FENCE: &str = include_str!("../../../corpus/cuda-samples/threadFenceReduction.cu");
const SHFL_SCAN: &str = include_str!("../../../corpus/cuda-samples/shfl_scan.cu");
const INTEGRAL_IMAGE: &str = include_str!("../../../corpus/cuda-samples/shfl_integral_image.cu");
const CONVOLUTION: &str = include_str!("../../../corpus/cuda-samples/convolutionSeparable.cu");
const HISTOGRAM64: &str = include_str!("../../../corpus/cuda-samples/histogram64.cu");
const HISTOGRAM256: &str = include_str!("../../../corpus/cuda-samples/histogram256.cu");
const SCALAR_PROD: &str = include_str!("../../../corpus/cuda-samples/scalarProd.cu");
const BLACK_SCHOLES: &str = include_str!("../../../corpus/cuda-samples/BlackScholes.cu");
const SIMPLE_TEMPLATES: &str = include_str!("../../../corpus/cuda-samples/simpleTemplates.cu");
const WALSH: &str = include_str!("../../../corpus/cuda-samples/fastWalshTransform.cu");
const BITONIC: &str = include_str!("../../../corpus/cuda-samples/sortingNetworks_bitonicSort.cu");
const BINOMIAL: &str = include_str!("../../../corpus/cuda-samples/binomialOptions.cu");

/// The cases of this module: one per kernel (entry point) of the corpus, plus the samples'
/// multi-kernel pipelines where the kernels only make sense together.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::cuda_samples", Requires::Kernels;
        vector_add,
        simple_atomic_intrinsics,
        matrix_mul_block_32,
        matrix_mul_block_16,
        transpose_copy,
        transpose_copy_shared_mem,
        transpose_naive,
        transpose_coalesced,
        transpose_no_bank_conflicts,
        transpose_diagonal,
        transpose_fine_grained,
        transpose_coarse_grained,
        reduction_reduce0,
        reduction_reduce1,
        reduction_reduce2,
        reduction_reduce3,
        reduction_reduce4,
        reduction_reduce5,
        reduction_reduce6,
        reduction_reduce7,
        reduction_cg_reduce,
        reduction_multi_warp_cg_reduce,
        thread_fence_reduce_multi_pass,
        thread_fence_reduce_single_pass,
        shfl_scan_block_scans,
        shfl_scan_whole_array_with_uniform_add,
        shfl_integral_image_rows,
        shfl_integral_image_vertical,
        convolution_rows,
        convolution_columns,
        convolution_separable_rows_then_columns,
        histogram64_kernel,
        histogram64_merge,
        histogram256_kernel,
        histogram256_merge,
        scalar_prod,
        black_scholes,
        simple_templates_float,
        simple_templates_int,
        fast_walsh_batch1,
        fast_walsh_modulate,
        fast_walsh_dyadic_convolution,
        bitonic_sort_shared,
        bitonic_sort_shared1,
        bitonic_sort_long_arrays,
        binomial_options,
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// [`check_scaled`] relative to the expected values themselves.
fn check_rel(what: &str, got: &[f32], want: &[f64], tol: f64) -> Result<(), String> {
    let scale: Vec<f64> = want.iter().map(|w| w.abs()).collect();
    check_scaled(what, got, want, &scale, tol)
}

/// Sums of `data` by block: element `j` is added by block `owner(j)` (which elements a block's
/// threads read, from the kernel's indexing).
fn block_sums<T: Copy + Default + std::ops::AddAssign>(
    data: &[T],
    blocks: usize,
    owner: impl Fn(usize) -> usize,
) -> Vec<T> {
    let mut sums = vec![T::default(); blocks];
    for (j, &value) in data.iter().enumerate() {
        sums[owner(j)] += value;
    }
    sums
}

/// Inclusive prefix sums.
fn inclusive_scan(values: &[i64]) -> Vec<i64> {
    values
        .iter()
        .scan(0i64, |sum, &v| {
            *sum += v;
            Some(*sum)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// vectorAdd, simpleAtomicIntrinsics
// ---------------------------------------------------------------------------------------------

fn vector_add(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // Not a multiple of the block: the last block's bounds check matters.
    let n = 5000usize;
    let mut rng = Lcg::from_state(1);
    let a = Array1::from(rng.units(n));
    let b = rng.units(n);
    let mut d_b = upload(&dev, &b, "b")?;
    let mut d_c = dev.device_array::<f32>(&[n], Order::C).map_err(fail("C"))?;
    // The sample: 256 threads per block, (n + 255) / 256 blocks.
    let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
    let kernel = Kernel::from_source(VECTOR_ADD, "vectorAdd");
    // SAFETY: A, B and C have numElements elements; the kernel touches index i only when
    // i < numElements.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [&mut In(&a), &mut d_b, &mut d_c, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("launch"))?;
    // `+ 0.0f` leaves a sum of non-negative floats unchanged, so one f32 addition each: exact.
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    check_equal("C", &download(&d_c, "c")?, &want)
}

fn simple_atomic_intrinsics(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample: 64 blocks of 256 threads; 8 blocks here.
    let (blocks, threads) = (8u32, 256u32);
    let n = blocks * threads;
    let mut init = vec![0i32; 11];
    // As the sample: so that the AND and XOR tests give something other than 0.
    init[8] = 0xff;
    init[10] = 0xff;
    let mut d_data = upload(&dev, &init, "init")?;
    let kernel = Kernel::from_source(ATOMICS, "testKernel");
    // SAFETY: every thread touches g_odata[0..=10] only, and the array has 11 elements.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(blocks, threads),
            &mut [&mut d_data],
        )
    }
    .map_err(fail("launch"))?;
    let got = download(&d_data, "data")?;
    // Each operation applied once per thread, in any order (these results do not depend on it).
    let inc = (0..n).fold(0u32, |old, _| if old >= 17 { 0 } else { old + 1 });
    let dec = (0..n).fold(
        0u32,
        |old, _| if old == 0 || old > 137 { 137 } else { old - 1 },
    );
    let and = (0..n).fold(0xffu32, |acc, tid| acc & (2 * tid + 7));
    // `1 << tid` for tid >= 32 is undefined in C++; threads 0..31 alone already set every bit.
    let or = (0..n).fold(0u32, |acc, tid| acc | 1u32.checked_shl(tid).unwrap_or(0));
    let xor = (0..n).fold(0xffu32, |acc, tid| acc ^ tid);
    let count = n as i32;
    let exact = [
        (0, "atomicAdd", 10 * count),
        (1, "atomicSub", -10 * count),
        (3, "atomicMax", count - 1),
        (4, "atomicMin", 0),
        (5, "atomicInc", inc as i32),
        (6, "atomicDec", dec as i32),
        (8, "atomicAnd", and as i32),
        (9, "atomicOr", or as i32),
        (10, "atomicXor", xor as i32),
    ];
    for (i, op, want) in exact {
        ensure!(
            got[i] == want,
            "{op}: g_odata[{i}] = {}, expected {want}",
            got[i]
        );
    }
    // atomicExch and the atomicCAS chain end on whichever thread came last: some thread id.
    for (i, op) in [(2, "atomicExch"), (7, "atomicCAS")] {
        ensure!(
            (0..count).contains(&got[i]),
            "{op}: g_odata[{i}] = {} is no thread id below {count}",
            got[i]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// matrixMul
// ---------------------------------------------------------------------------------------------

/// `MatrixMulCUDA<block>`: C (hA x wB) = A (hA x wA) * B (wA x wB), one block x block tile of C
/// per block, as the sample launches it (grid wB / block x hA / block).
fn matrix_mul(rt: &Runtime, block: u32, (wa, ha, wb): (usize, usize, usize)) -> Result<(), String> {
    let dev = device(rt)?;
    let mut rng = Lcg::from_state(3);
    let a: Vec<f32> = (0..ha * wa).map(|_| rng.range(-1.0, 1.0)).collect();
    let b: Vec<f32> = (0..wa * wb).map(|_| rng.range(-1.0, 1.0)).collect();
    let (mut d_a, mut d_b) = (upload(&dev, &a, "a")?, upload(&dev, &b, "b")?);
    let mut d_c = dev
        .device_array::<f32>(&[ha * wb], Order::C)
        .map_err(fail("C"))?;
    let kernel = Kernel::from_source(MATRIX_MUL, format!("MatrixMulCUDA<{block}>"));
    let config = LaunchConfig::new((wb as u32 / block, ha as u32 / block), (block, block));
    // SAFETY: wA, hA and wB are multiples of BLOCK_SIZE, so each block reads whole tiles of A
    // (hA x wA) and B (wA x wB) and writes one tile of C (hA x wB).
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [
                &mut d_c,
                &mut d_a,
                &mut d_b,
                &mut Scalar(wa as i32),
                &mut Scalar(wb as i32),
            ],
        )
    }
    .map_err(fail("launch"))?;
    let (mut want, mut scale) = (Vec::new(), Vec::new());
    for i in 0..ha {
        for j in 0..wb {
            let terms: Vec<f64> = (0..wa)
                .map(|k| f64::from(a[i * wa + k]) * f64::from(b[k * wb + j]))
                .collect();
            want.push(terms.iter().sum());
            scale.push(terms.iter().map(|t| t.abs()).sum());
        }
    }
    // A float sum of wA products (fused or not, in tile order): its error is a few units of
    // rounding (2^-24) of the sum of the terms' magnitudes.
    check_scaled("C", &download(&d_c, "c")?, &want, &scale, 1e-5)
}

fn matrix_mul_block_32(rt: &Runtime) -> Result<(), String> {
    // The sample's default: block_size 32, A 320 x 320, B 640 x 320 (width x height); here
    // A 64 x 64 and B 128 x 64.
    matrix_mul(rt, 32, (64, 64, 128))
}

fn matrix_mul_block_16(rt: &Runtime) -> Result<(), String> {
    matrix_mul(rt, 16, (64, 48, 32))
}

// ---------------------------------------------------------------------------------------------
// transpose
// ---------------------------------------------------------------------------------------------

const TILE_DIM: usize = 32;
const BLOCK_ROWS: u32 = 16;

/// Runs one of transpose.cu's kernels on a `height` x `width` row-major matrix of distinct
/// values with the sample's launch (grid width / TILE_DIM x height / TILE_DIM, blocks of
/// TILE_DIM x BLOCK_ROWS threads) and returns the input and the output.
fn run_transpose(
    rt: &Runtime,
    entry: &str,
    width: usize,
    height: usize,
) -> Result<(Vec<f32>, Vec<f32>), String> {
    let dev = device(rt)?;
    let input: Vec<f32> = (0..width * height).map(|i| i as f32).collect();
    let mut d_in = upload(&dev, &input, "input")?;
    let mut d_out = zeros::<f32>(&dev, width * height, "device array")?;
    let config = LaunchConfig::new(
        ((width / TILE_DIM) as u32, (height / TILE_DIM) as u32),
        (TILE_DIM as u32, BLOCK_ROWS),
    );
    let kernel = Kernel::from_source(TRANSPOSE, entry);
    // SAFETY: width and height are multiples of TILE_DIM (as the sample requires), so each
    // block reads and writes whole TILE_DIM x TILE_DIM tiles of the width x height arrays.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [
                &mut d_out,
                &mut d_in,
                &mut Scalar(width as i32),
                &mut Scalar(height as i32),
            ],
        )
    }
    .map_err(|e| format!("{entry} {width}x{height}: launch: {e}"))?;
    Ok((input, download(&d_out, "out")?))
}

/// The transpose (width rows of height) of a height x width matrix.
fn transposed(input: &[f32], width: usize, height: usize) -> Vec<f32> {
    (0..width * height)
        .map(|o| input[(o % height) * width + o / height])
        .collect()
}

/// A full transpose kernel, on a square matrix and on a wider than high one.
fn full_transpose(rt: &Runtime, entry: &str) -> Result<(), String> {
    for (width, height) in [(64, 64), (96, 64)] {
        let (input, got) = run_transpose(rt, entry, width, height)?;
        check_equal(
            &format!("{entry} {width}x{height}"),
            &got,
            &transposed(&input, width, height),
        )?;
    }
    Ok(())
}

fn transpose_copy(rt: &Runtime) -> Result<(), String> {
    let (input, got) = run_transpose(rt, "copy", 64, 64)?;
    check_equal("copy", &got, &input)
}

fn transpose_copy_shared_mem(rt: &Runtime) -> Result<(), String> {
    // Its bounds checks compare x with height and y with width: square matrices only.
    let (input, got) = run_transpose(rt, "copySharedMem", 64, 64)?;
    check_equal("copySharedMem", &got, &input)
}

fn transpose_naive(rt: &Runtime) -> Result<(), String> {
    full_transpose(rt, "transposeNaive")
}

fn transpose_coalesced(rt: &Runtime) -> Result<(), String> {
    full_transpose(rt, "transposeCoalesced")
}

fn transpose_no_bank_conflicts(rt: &Runtime) -> Result<(), String> {
    full_transpose(rt, "transposeNoBankConflicts")
}

fn transpose_diagonal(rt: &Runtime) -> Result<(), String> {
    // Square and not: the kernel maps block indices differently for the two.
    full_transpose(rt, "transposeDiagonal")
}

fn transpose_fine_grained(rt: &Runtime) -> Result<(), String> {
    // A partial transpose (square matrices): each tile is transposed where it stands.
    let n = 64;
    let (input, got) = run_transpose(rt, "transposeFineGrained", n, n)?;
    let want: Vec<f32> = (0..n * n)
        .map(|o| {
            let (row, col) = (o / n, o % n);
            let (tile_row, tile_col) = (row / TILE_DIM * TILE_DIM, col / TILE_DIM * TILE_DIM);
            input[(tile_row + col % TILE_DIM) * n + tile_col + row % TILE_DIM]
        })
        .collect();
    check_equal("transposeFineGrained", &got, &want)
}

fn transpose_coarse_grained(rt: &Runtime) -> Result<(), String> {
    // A partial transpose: the tiles move to their transposed places, their insides do not.
    for (width, height) in [(64usize, 64usize), (96, 64)] {
        let (input, got) = run_transpose(rt, "transposeCoarseGrained", width, height)?;
        let want: Vec<f32> = (0..width * height)
            .map(|o| {
                let (row, col) = (o / height, o % height);
                let source_row = col / TILE_DIM * TILE_DIM + row % TILE_DIM;
                let source_col = row / TILE_DIM * TILE_DIM + col % TILE_DIM;
                input[source_row * width + source_col]
            })
            .collect();
        check_equal(
            &format!("transposeCoarseGrained {width}x{height}"),
            &got,
            &want,
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// reduction (reduction_kernel.cu, split in two files), threadFenceReduction
// ---------------------------------------------------------------------------------------------

/// The sample's default: 256 threads per block at most (its --threads option).
const REDUCE_MAX_THREADS: usize = 256;

/// The sample's choice of threads and blocks (reduction.cpp, getNumBlocksAndThreads), for
/// problems that fit in one grid, with at most `max` threads per block: kernels 0-2 take one
/// element per thread, the others two, and kernels from 6 on use at most `max_blocks` blocks
/// (each thread then loops over the grid).
fn reduction_shape(kernel: u32, n: usize, max: usize, max_blocks: usize) -> (usize, usize) {
    let (threads, blocks) = if kernel < 3 {
        let threads = if n < max { n.next_power_of_two() } else { max };
        (threads, n.div_ceil(threads))
    } else {
        let threads = if n < 2 * max {
            n.div_ceil(2).next_power_of_two()
        } else {
            max
        };
        (threads, n.div_ceil(2 * threads))
    };
    let blocks = if kernel >= 6 {
        blocks.min(max_blocks)
    } else {
        blocks
    };
    (threads, blocks)
}

/// The sample's dynamic shared memory for kernels 0-6 and cg_reduce: a T per thread, two warps'
/// worth for blocks of one warp.
fn reduction_shared_bytes(threads: usize) -> usize {
    let slots = if threads <= 32 { 2 * threads } else { threads };
    slots * size_of::<i32>()
}

/// The sample's input: `rand() & 0xFF` per element.
fn reduction_input(n: usize, seed: u64) -> Vec<i32> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| (rng.next_u32() % 256) as i32).collect()
}

/// Launches a `(T *g_idata, T *g_odata, unsigned int n)` reduction kernel on `data` and returns
/// the blocks' partial sums.
fn run_reduction<T: Element>(
    dev: &Device,
    kernel: &Kernel,
    data: &[T],
    (threads, blocks): (usize, usize),
    shared_bytes: usize,
) -> Result<Vec<T>, String> {
    let mut d_in = upload(dev, data, "data")?;
    let mut d_out = zeros::<T>(dev, blocks, "device array")?;
    let config = LaunchConfig::new(blocks as u32, threads as u32).with_shared_bytes(shared_bytes);
    // SAFETY: the kernels read g_idata[i] only for i < n (the input's length), write
    // g_odata[blockIdx.x] (one element per block), and use at most the dynamic shared memory the
    // sample gives them, which `shared_bytes` is.
    unsafe {
        dev.launch(
            kernel,
            config,
            &mut [&mut d_in, &mut d_out, &mut Scalar(data.len() as u32)],
        )
    }
    .map_err(fail("launch"))?;
    download(&d_out, "out")
}

fn reduction_module() -> Module {
    Module::from_source(REDUCTION).with_name_expressions((0..4).map(|k| format!("reduce{k}<int>")))
}

/// reduce0-3 as the sample runs them (256 threads), on a power of 2 (the sample's default
/// size is one) and on a size that leaves the last block part empty.
fn reduce_first_kernels(rt: &Runtime, k: u32) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = reduction_module().kernel(format!("reduce{k}<int>"));
    for n in [1 << 13, 3000] {
        let data = reduction_input(n, 10 + u64::from(k));
        let (threads, blocks) = reduction_shape(k, n, REDUCE_MAX_THREADS, 64);
        let per_block = if k < 3 { threads } else { 2 * threads };
        let got = run_reduction(
            &dev,
            &kernel,
            &data,
            (threads, blocks),
            reduction_shared_bytes(threads),
        )?;
        check_equal(
            &format!("reduce{k}<int> n={n}: g_odata"),
            &got,
            &block_sums(&data, blocks, |j| j / per_block),
        )?;
    }
    Ok(())
}

fn reduction_reduce0(rt: &Runtime) -> Result<(), String> {
    reduce_first_kernels(rt, 0)
}

fn reduction_reduce1(rt: &Runtime) -> Result<(), String> {
    reduce_first_kernels(rt, 1)
}

fn reduction_reduce2(rt: &Runtime) -> Result<(), String> {
    reduce_first_kernels(rt, 2)
}

fn reduction_reduce3(rt: &Runtime) -> Result<(), String> {
    reduce_first_kernels(rt, 3)
}

/// The instantiations of reduction_warp.cu the cases launch: int data and 256 threads, as the
/// sample's defaults pick, but reduce7 with 1024 (the sample's --threads=1024): with fewer
/// than 32 warps its final warpReduceSum shuffles down from lanes outside its mask, whose
/// values are undefined (NVIDIA/cuda-samples issue 398; only SM 8.0's __reduce_add_sync path
/// for int avoids that). multi_warp_cg_reduce with the sample's two groups per block.
const REDUCTION_WARP_ENTRIES: [&str; 8] = [
    "reduce4<int, 256>",
    "reduce5<int, 256>",
    "reduce6<int, 256, true>",
    "reduce6<int, 256, false>",
    "reduce7<int, 1024, true>",
    "reduce7<int, 1024, false>",
    "cg_reduce<int>",
    "multi_warp_cg_reduce<int, 256, 128>",
];

fn reduction_warp_module() -> Module {
    Module::from_source(REDUCTION_WARP).with_name_expressions(REDUCTION_WARP_ENTRIES)
}

/// One of reduction_warp.cu's kernels, as the sample launches kernel `k` with blocks of up to
/// `max_threads` (`entry(n is a power of 2)` names the instantiation), on `n` elements with at
/// most `max_blocks` blocks; `owner` says which block sums element j, given the block count.
fn reduce_later_kernel(
    rt: &Runtime,
    (k, max_threads): (u32, usize),
    entry: impl Fn(bool) -> &'static str,
    shared_bytes: impl Fn(usize) -> usize,
    owner: impl Fn(bool, usize, usize, usize) -> usize,
) -> Result<(), String> {
    let dev = device(rt)?;
    let module = reduction_warp_module();
    // The sample's --maxblocks option, set low so that the grid-stride loops run several times.
    let max_blocks = 4;
    for n in [1usize << 13, 5000] {
        let pow2 = n.is_power_of_two();
        let data = reduction_input(n, 20 + u64::from(k));
        let (threads, blocks) = reduction_shape(k, n, max_threads, max_blocks);
        let kernel = module.kernel(entry(pow2));
        let got = run_reduction(
            &dev,
            &kernel,
            &data,
            (threads, blocks),
            shared_bytes(threads),
        )?;
        let want = block_sums(&data, blocks, |j| owner(pow2, j, threads, blocks));
        check_equal(&format!("{} n={n}: g_odata", entry(pow2)), &got, &want)?;
    }
    Ok(())
}

/// Kernels 3-5 read elements i and i + blockDim.x of a 2 * blockDim.x slice per block.
fn two_per_thread(_: bool, j: usize, threads: usize, _: usize) -> usize {
    j / (2 * threads)
}

/// Kernels 6, 7 and 9 loop over the grid: two elements per thread per pass for a power-of-2
/// size, one otherwise.
fn grid_stride(pow2: bool, j: usize, threads: usize, blocks: usize) -> usize {
    let per_pass = if pow2 { 2 * threads } else { threads };
    (j / per_pass) % blocks
}

fn reduction_reduce4(rt: &Runtime) -> Result<(), String> {
    reduce_later_kernel(
        rt,
        (4, REDUCE_MAX_THREADS),
        |_| REDUCTION_WARP_ENTRIES[0],
        reduction_shared_bytes,
        two_per_thread,
    )
}

fn reduction_reduce5(rt: &Runtime) -> Result<(), String> {
    reduce_later_kernel(
        rt,
        (5, REDUCE_MAX_THREADS),
        |_| REDUCTION_WARP_ENTRIES[1],
        reduction_shared_bytes,
        two_per_thread,
    )
}

fn reduction_reduce6(rt: &Runtime) -> Result<(), String> {
    reduce_later_kernel(
        rt,
        (6, REDUCE_MAX_THREADS),
        |pow2| REDUCTION_WARP_ENTRIES[if pow2 { 2 } else { 3 }],
        reduction_shared_bytes,
        grid_stride,
    )
}

fn reduction_reduce7(rt: &Runtime) -> Result<(), String> {
    // The sample gives reduce7 one T per warp, plus one.
    reduce_later_kernel(
        rt,
        (7, 1024),
        |pow2| REDUCTION_WARP_ENTRIES[if pow2 { 4 } else { 5 }],
        |threads| (threads / 32 + 1) * size_of::<i32>(),
        grid_stride,
    )
}

fn reduction_cg_reduce(rt: &Runtime) -> Result<(), String> {
    // One element per thread per pass over the grid, power of 2 or not.
    reduce_later_kernel(
        rt,
        (8, REDUCE_MAX_THREADS),
        |_| REDUCTION_WARP_ENTRIES[6],
        reduction_shared_bytes,
        |_, j, threads, blocks| (j / threads) % blocks,
    )
}

fn reduction_multi_warp_cg_reduce(rt: &Runtime) -> Result<(), String> {
    // The sample: two multi-warp groups per block, a T of dynamic shared memory for each.
    reduce_later_kernel(
        rt,
        (9, REDUCE_MAX_THREADS),
        |_| REDUCTION_WARP_ENTRIES[7],
        |_| 2 * size_of::<i32>(),
        grid_stride,
    )
}

/// threadFenceReduction's defaults: 128 threads per block; its --maxblocks set to 8 here so
/// that the threads loop over the grid.
const FENCE_THREADS: usize = 128;
const FENCE_MAX_BLOCKS: usize = 8;

fn thread_fence_module() -> Module {
    Module::from_source(THREAD_FENCE).with_name_expressions([
        "reduceMultiPass<128, true>",
        "reduceMultiPass<128, false>",
        "reduceSinglePass<128, true>",
        "reduceSinglePass<128, false>",
    ])
}

/// The sample's getNumBlocksAndThreads (threadFenceReduction.cu) for n >= 2 * 128.
fn thread_fence_blocks(n: usize) -> usize {
    (n / (2 * FENCE_THREADS)).clamp(1, FENCE_MAX_BLOCKS)
}

fn thread_fence_reduce_multi_pass(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let module = thread_fence_module();
    for n in [1usize << 13, 5000] {
        let pow2 = n.is_power_of_two();
        let data = Lcg::from_state(30).units(n);
        let blocks = thread_fence_blocks(n);
        let kernel = module.kernel(format!("reduceMultiPass<128, {pow2}>"));
        let got = run_reduction(
            &dev,
            &kernel,
            &data,
            (FENCE_THREADS, blocks),
            FENCE_THREADS * size_of::<f32>(),
        )?;
        let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
        let want = block_sums(&wide, blocks, |j| (j / (2 * FENCE_THREADS)) % blocks);
        // Float sums of a few hundred values in [0, 1), all positive: within 1e-5 relative.
        check_rel(&format!("reduceMultiPass n={n}"), &got, &want, 1e-5)?;
    }
    Ok(())
}

fn thread_fence_reduce_single_pass(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let module = thread_fence_module();
    for n in [1usize << 13, 5000] {
        let pow2 = n.is_power_of_two();
        let data = Lcg::from_state(31).units(n);
        let blocks = thread_fence_blocks(n);
        let kernel = module.kernel(format!("reduceSinglePass<128, {pow2}>"));
        // As the sample's setRetirementCount(0).
        dev.copy_to_symbol(&kernel, "retirementCount", &[0u32])
            .map_err(fail("retirementCount"))?;
        let total: f64 = data.iter().map(|&v| f64::from(v)).sum();
        // Twice: the last block resets the counter, so the second run must work too.
        for run in 0..2 {
            let got = run_reduction(
                &dev,
                &kernel,
                &data,
                (FENCE_THREADS, blocks),
                FENCE_THREADS * size_of::<f32>(),
            )?;
            check_rel(
                &format!("reduceSinglePass n={n} run {run}: g_odata[0]"),
                &got[..1],
                &[total],
                1e-5,
            )?;
            let counter: Vec<u32> = dev
                .copy_from_symbol(&kernel, "retirementCount")
                .map_err(fail("read retirementCount"))?;
            ensure!(
                counter == [0],
                "retirementCount after run {run}: {counter:?}, expected [0]"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// shfl_scan, shfl_integral_image
// ---------------------------------------------------------------------------------------------

/// The sample: blocks of 256 threads, a warp-sum slot of dynamic shared memory per 32 threads.
const SCAN_BLOCK: usize = 256;
const SCAN_SHARED: usize = SCAN_BLOCK / 32 * size_of::<i32>();

fn scan_input(n: usize) -> Vec<i32> {
    let mut rng = Lcg::from_state(40);
    (0..n).map(|_| (rng.next_u32() % 10) as i32).collect()
}

/// `shfl_scan_test<<<blocks, threads, SCAN_SHARED>>>(data, 32, partial_sums)`.
fn launch_scan(
    dev: &Device,
    kernel: &Kernel,
    (blocks, threads): (usize, usize),
    data: &mut DeviceArray<i32>,
    partial_sums: &mut DeviceArray<i32>,
) -> Result<(), String> {
    let config = LaunchConfig::new(blocks as u32, threads as u32).with_shared_bytes(SCAN_SHARED);
    // SAFETY: data has blocks * threads elements (one per thread); partial_sums has `blocks`
    // elements (written at blockIdx.x); the warp sums fit the SCAN_SHARED bytes given.
    unsafe {
        dev.launch(
            kernel,
            config,
            &mut [data, &mut Scalar(32i32), partial_sums],
        )
    }
    .map_err(fail("shfl_scan_test"))
}

fn shfl_scan_block_scans(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 32 * SCAN_BLOCK;
    let blocks = n / SCAN_BLOCK;
    let input = scan_input(n);
    let mut d_data = upload(&dev, &input, "input")?;
    let mut d_sums = zeros::<i32>(&dev, blocks, "device array")?;
    let kernel = Kernel::from_source(SHFL_SCAN, "shfl_scan_test");
    launch_scan(
        &dev,
        &kernel,
        (blocks, SCAN_BLOCK),
        &mut d_data,
        &mut d_sums,
    )?;
    let wide: Vec<i64> = input.iter().map(|&v| i64::from(v)).collect();
    let want: Vec<i32> = wide
        .chunks(SCAN_BLOCK)
        .flat_map(inclusive_scan)
        .map(|v| v as i32)
        .collect();
    check_equal("scanned blocks", &download(&d_data, "data")?, &want)?;
    let totals: Vec<i32> = want.chunks(SCAN_BLOCK).map(|c| c[SCAN_BLOCK - 1]).collect();
    check_equal("partial_sums", &download(&d_sums, "sums")?, &totals)
}

fn shfl_scan_whole_array_with_uniform_add(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample's three launches, on 8192 elements instead of 65536: block scans, a scan of
    // the block sums, and uniform_add of those into every block after the first.
    let n = 32 * SCAN_BLOCK;
    let blocks = n / SCAN_BLOCK;
    let input = scan_input(n);
    let mut d_data = upload(&dev, &input, "input")?;
    let mut d_sums = zeros::<i32>(&dev, blocks, "device array")?;
    let module = Module::from_source(SHFL_SCAN);
    let scan = module.kernel("shfl_scan_test");
    launch_scan(&dev, &scan, (blocks, SCAN_BLOCK), &mut d_data, &mut d_sums)?;
    // The sample passes no partial_sums (NULL) here; one unused element stands in for it.
    let mut d_unused = zeros::<i32>(&dev, 1, "device array")?;
    let p_block = blocks.min(SCAN_BLOCK);
    launch_scan(
        &dev,
        &scan,
        (blocks.div_ceil(p_block), p_block),
        &mut d_sums,
        &mut d_unused,
    )?;
    let mut d_rest = d_data
        .slice(s![SCAN_BLOCK..])
        .map_err(fail("data + blockSize"))?;
    let add = module.kernel("uniform_add");
    // SAFETY: the view starts blockSize elements in, and the (blocks - 1) x blockSize threads
    // each add to one of its (blocks - 1) x blockSize elements; partial_sums has `blocks`.
    unsafe {
        dev.launch(
            &add,
            LaunchConfig::new((blocks - 1) as u32, SCAN_BLOCK as u32),
            &mut [&mut d_rest, &mut d_sums, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("uniform_add"))?;
    let wide: Vec<i64> = input.iter().map(|&v| i64::from(v)).collect();
    let want: Vec<i32> = inclusive_scan(&wide).iter().map(|&v| v as i32).collect();
    check_equal("scan", &download(&d_data, "data")?, &want)
}

/// shfl_intimage_rows is written for the sample's 1920-pixel rows (120 uint4 of bytes in,
/// 480 uint4 of unsigned sums out per row, one block of 120 threads per row).
const IMAGE_WIDTH: usize = 1920;

fn shfl_integral_image_rows(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let rows = 4; // The sample: 1080.
    let mut rng = Lcg::from_state(50);
    let bytes: Vec<u8> = (0..rows * IMAGE_WIDTH)
        .map(|_| (rng.next_u32() % 256) as u8)
        .collect();
    let packed: Vec<[u32; 4]> = words(&bytes)
        .chunks(4)
        .map(|w| [w[0], w[1], w[2], w[3]])
        .collect();
    let mut d_img = upload(&dev, &packed, "packed")?;
    let mut d_out = zeros::<[u32; 4]>(&dev, rows * IMAGE_WIDTH / 4, "device array")?;
    let kernel = Kernel::from_source(INTEGRAL_IMAGE, "shfl_intimage_rows");
    let config = LaunchConfig::new(rows as u32, (IMAGE_WIDTH / 16) as u32);
    // SAFETY: block b reads the 120 uint4 of row b of img (rows x 120) and writes the 480 uint4
    // of row b of integral_image (rows x 480).
    unsafe { dev.launch(&kernel, config, &mut [&mut d_img, &mut d_out]) }
        .map_err(fail("launch"))?;
    let got: Vec<u32> = download(&d_out, "out")?.into_iter().flatten().collect();
    let want: Vec<u32> = bytes
        .chunks(IMAGE_WIDTH)
        .flat_map(|row| {
            row.iter().scan(0u32, |sum, &b| {
                *sum += u32::from(b);
                Some(*sum)
            })
        })
        .collect();
    check_equal("row sums", &got, &want)
}

fn shfl_integral_image_vertical(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The kernel's 135 steps of 8 rows are the sample's 1080 rows; the width is free (one
    // block of 32 x 8 threads per 32 columns): 64 columns here instead of 1920.
    let (width, height) = (64usize, 1080usize);
    let input = Lcg::from_state(51).all_below32(width * height, 1 << 16);
    let mut d_img = upload(&dev, &input, "input")?;
    let kernel = Kernel::from_source(INTEGRAL_IMAGE, "shfl_vertical_shfl");
    let config = LaunchConfig::new(((width / 32) as u32, 1), (32, 8));
    // SAFETY: thread (x, y) of block b touches column 32 b + x of rows y, y + 8, ... below
    // 135 * 8 = height, all inside the width x height image.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [
                &mut d_img,
                &mut Scalar(width as i32),
                &mut Scalar(height as i32),
            ],
        )
    }
    .map_err(fail("launch"))?;
    let mut want = input;
    let mut above = vec![0u32; width];
    for row in want.chunks_mut(width) {
        for (value, sum) in row.iter_mut().zip(&mut above) {
            *sum = sum.wrapping_add(*value);
            *value = *sum;
        }
    }
    check_equal("column sums", &download(&d_img, "img")?, &want)
}

// ---------------------------------------------------------------------------------------------
// convolutionSeparable
// ---------------------------------------------------------------------------------------------

const KERNEL_RADIUS: usize = 8;

/// The sample's data: small integers (`rand() % 16`) for the image and the filter, so every
/// product and sum is an integer below 2^24 and the float results are exact in any order.
fn small_integers(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| (rng.next_u32() % 16) as f32).collect()
}

/// `dst(y, x) = sum over k in -R..=R of filter[R - k] * src(y + k dy, x + k dx)`, zero outside.
fn convolve(
    src: &[f32],
    filter: &[f32],
    (width, height): (usize, usize),
    (dx, dy): (isize, isize),
) -> Vec<f32> {
    let radius = KERNEL_RADIUS as isize;
    (0..width * height)
        .map(|o| {
            let (y, x) = ((o / width) as isize, (o % width) as isize);
            (-radius..=radius)
                .filter_map(|k| {
                    let (sx, sy) = (x + k * dx, y + k * dy);
                    let inside =
                        (0..width as isize).contains(&sx) && (0..height as isize).contains(&sy);
                    inside.then(|| {
                        filter[(radius - k) as usize] * src[sy as usize * width + sx as usize]
                    })
                })
                .sum()
        })
        .collect()
}

/// convolutionRowsKernel's launch (convolutionRowsGPU): 16 x 4 threads, 8 results per thread.
fn rows_config(width: usize, height: usize) -> LaunchConfig {
    LaunchConfig::new(((width / (8 * 16)) as u32, (height / 4) as u32), (16, 4))
}

/// convolutionColumnsKernel's launch (convolutionColumnsGPU): 16 x 8 threads, 8 results each.
fn columns_config(width: usize, height: usize) -> LaunchConfig {
    LaunchConfig::new(((width / 16) as u32, (height / (8 * 8)) as u32), (16, 8))
}

/// Launches a convolution kernel (d_Dst, d_Src, imageW, imageH, pitch = imageW).
fn launch_convolution(
    dev: &Device,
    kernel: &Kernel,
    config: LaunchConfig,
    dst: &mut DeviceArray<f32>,
    src: &mut DeviceArray<f32>,
    (width, height): (usize, usize),
) -> Result<(), String> {
    // SAFETY: the image sizes are multiples of the kernels' tiles (the sample's asserts), and
    // the halo reads outside the image are guarded; dst and src hold width x height floats.
    unsafe {
        dev.launch(
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
    .map_err(fail("launch"))
}

/// One convolution kernel on a fresh image; `rows` picks the row or the column filter.
fn convolution_pass(
    rt: &Runtime,
    rows: bool,
    (width, height): (usize, usize),
) -> Result<(), String> {
    let dev = device(rt)?;
    let filter = small_integers(2 * KERNEL_RADIUS + 1, 60);
    let image = small_integers(width * height, 61);
    let (entry, config, step) = if rows {
        ("convolutionRowsKernel", rows_config(width, height), (1, 0))
    } else {
        (
            "convolutionColumnsKernel",
            columns_config(width, height),
            (0, 1),
        )
    };
    let kernel = Kernel::from_source(CONVOLUTION, entry);
    dev.copy_to_symbol(&kernel, "c_Kernel", &filter[..])
        .map_err(fail("c_Kernel"))?;
    let mut d_src = upload(&dev, &image, "image")?;
    let mut d_dst = zeros::<f32>(&dev, width * height, "device array")?;
    launch_convolution(
        &dev,
        &kernel,
        config,
        &mut d_dst,
        &mut d_src,
        (width, height),
    )?;
    let want = convolve(&image, &filter, (width, height), step);
    check_equal(entry, &download(&d_dst, "dst")?, &want)
}

fn convolution_rows(rt: &Runtime) -> Result<(), String> {
    // Two blocks across: their halos overlap. (The sample: 3072 x 3072.)
    convolution_pass(rt, true, (256, 32))
}

fn convolution_columns(rt: &Runtime) -> Result<(), String> {
    convolution_pass(rt, false, (32, 128))
}

fn convolution_separable_rows_then_columns(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (width, height) = (256usize, 128usize);
    // The filter of the two single-pass cases: on the simulator a module's `__constant__`
    // c_Kernel is one per process (docs/src/backends/sim.md, "Where it differs from a GPU")
    // and the cases run in parallel, so with another filter here one case's write could land
    // between another's write and its launch.
    let filter = small_integers(2 * KERNEL_RADIUS + 1, 60);
    let image = small_integers(width * height, 63);
    // One module: both kernels read the one c_Kernel, set once.
    let module = Module::from_source(CONVOLUTION);
    let (rows, columns) = (
        module.kernel("convolutionRowsKernel"),
        module.kernel("convolutionColumnsKernel"),
    );
    dev.copy_to_symbol(&rows, "c_Kernel", &filter[..])
        .map_err(fail("c_Kernel"))?;
    let mut d_input = upload(&dev, &image, "image")?;
    let mut d_buffer = zeros::<f32>(&dev, width * height, "device array")?;
    let mut d_output = zeros::<f32>(&dev, width * height, "device array")?;
    let size = (width, height);
    launch_convolution(
        &dev,
        &rows,
        rows_config(width, height),
        &mut d_buffer,
        &mut d_input,
        size,
    )?;
    launch_convolution(
        &dev,
        &columns,
        columns_config(width, height),
        &mut d_output,
        &mut d_buffer,
        size,
    )?;
    let want = convolve(
        &convolve(&image, &filter, size, (1, 0)),
        &filter,
        size,
        (0, 1),
    );
    check_equal("rows then columns", &download(&d_output, "output")?, &want)
}

// ---------------------------------------------------------------------------------------------
// histogram64, histogram256
// ---------------------------------------------------------------------------------------------

/// histogram_common.h: 64 threads per block for histogram64, 6 warps of 32 for histogram256;
/// the merge kernels run 256 threads per bin.
const HIST64_THREADS: usize = 64;
const HIST256_THREADS: usize = 192;
const MERGE_THREADS: u32 = 256;

/// Little-endian 32-bit words of `bytes` (a length multiple of 4), as a GPU reads them.
fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| (rng.next_u32() % 256) as u8).collect()
}

/// Per-block histograms of `bytes` read in units of `unit` bytes, unit p by block owner(p).
fn partial_histograms(
    bytes: &[u8],
    unit: usize,
    blocks: usize,
    bins: usize,
    bin_of: impl Fn(u8) -> usize,
    owner: impl Fn(usize) -> usize,
) -> Vec<u32> {
    let mut counts = vec![0u32; blocks * bins];
    for (p, chunk) in bytes.chunks(unit).enumerate() {
        for &b in chunk {
            counts[owner(p) * bins + bin_of(b)] += 1;
        }
    }
    counts
}

/// Launches a `(uint *out, T *data, uint count)` histogram or merge kernel.
fn launch_histogram<T: Element>(
    dev: &Device,
    kernel: &Kernel,
    config: LaunchConfig,
    out: &mut DeviceArray<u32>,
    data: &mut DeviceArray<T>,
    count: usize,
) -> Result<(), String> {
    // SAFETY: the histogram kernels read data[pos] for pos < count (data's length) and write
    // gridDim.x x bins partial counts (out's length); the merge kernels read the bins x count
    // partial counts and write one total per block (bin).
    unsafe { dev.launch(kernel, config, &mut [out, data, &mut Scalar(count as u32)]) }
        .map_err(fail("launch"))
}

fn histogram64_kernel(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample's block count: byteCount / (64 threads * 240 bytes each), rounded up.
    let byte_count: usize = 3 * 64 * 240 + 4096;
    let blocks = byte_count.div_ceil(HIST64_THREADS * 240);
    let bytes = random_bytes(byte_count, 70);
    let quads: Vec<[u32; 4]> = words(&bytes)
        .chunks(4)
        .map(|w| [w[0], w[1], w[2], w[3]])
        .collect();
    let mut d_data = upload(&dev, &quads, "quads")?;
    let mut d_partial = zeros::<u32>(&dev, blocks * 64, "device array")?;
    let kernel = Kernel::from_source(HISTOGRAM64, "histogram64Kernel");
    let config = LaunchConfig::new(blocks as u32, HIST64_THREADS as u32);
    launch_histogram(
        &dev,
        &kernel,
        config,
        &mut d_partial,
        &mut d_data,
        quads.len(),
    )?;
    // Bins of the top 6 bits of each byte; block b reads the uint4 at positions
    // b * 64 + t + k * 64 * blocks.
    let want = partial_histograms(
        &bytes,
        16,
        blocks,
        64,
        |b| usize::from(b >> 2),
        |p| (p / HIST64_THREADS) % blocks,
    );
    check_equal(
        "partial histograms",
        &download(&d_partial, "partial")?,
        &want,
    )
}

/// A merge kernel: one block of 256 threads per bin adds that bin of every partial histogram.
fn histogram_merge(
    rt: &Runtime,
    entry: &str,
    source: &str,
    bins: usize,
    count: usize,
) -> Result<(), String> {
    let dev = device(rt)?;
    let partial = Lcg::from_state(71).all_below32(count * bins, 1000);
    let mut d_partial = upload(&dev, &partial, "partial")?;
    let mut d_hist = zeros::<u32>(&dev, bins, "device array")?;
    let kernel = Kernel::from_source(source, entry);
    let config = LaunchConfig::new(bins as u32, MERGE_THREADS);
    launch_histogram(&dev, &kernel, config, &mut d_hist, &mut d_partial, count)?;
    let want: Vec<u32> = (0..bins)
        .map(|bin| partial.iter().skip(bin).step_by(bins).sum())
        .collect();
    check_equal(entry, &download(&d_hist, "hist")?, &want)
}

fn histogram64_merge(rt: &Runtime) -> Result<(), String> {
    // More partial histograms than threads: each thread adds several.
    histogram_merge(rt, "mergeHistogram64Kernel", HISTOGRAM64, 64, 300)
}

fn histogram256_kernel(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample's grid (PARTIAL_HISTOGRAM256_COUNT blocks of 192) on 256 KiB instead of 64 MiB.
    let blocks = 240;
    let bytes = random_bytes(1 << 18, 72);
    let words = words(&bytes);
    let mut d_data = upload(&dev, &words, "words")?;
    let mut d_partial = zeros::<u32>(&dev, blocks * 256, "device array")?;
    let kernel = Kernel::from_source(HISTOGRAM256, "histogram256Kernel");
    let config = LaunchConfig::new(blocks as u32, HIST256_THREADS as u32);
    launch_histogram(
        &dev,
        &kernel,
        config,
        &mut d_partial,
        &mut d_data,
        words.len(),
    )?;
    let want = partial_histograms(&bytes, 4, blocks, 256, usize::from, |p| {
        (p / HIST256_THREADS) % blocks
    });
    check_equal(
        "partial histograms",
        &download(&d_partial, "partial")?,
        &want,
    )
}

fn histogram256_merge(rt: &Runtime) -> Result<(), String> {
    histogram_merge(rt, "mergeHistogram256Kernel", HISTOGRAM256, 256, 240)
}

// ---------------------------------------------------------------------------------------------
// scalarProd, BlackScholes
// ---------------------------------------------------------------------------------------------

fn scalar_prod(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample: 256 vector pairs of 4096 on 128 blocks of 256 threads (two pairs per block);
    // here 16 pairs of 2048 on 8 blocks.
    let (vectors, elements, blocks) = (16usize, 2048usize, 8u32);
    let mut rng = Lcg::from_state(80);
    let a = rng.units(vectors * elements);
    let b = rng.units(vectors * elements);
    let (mut d_a, mut d_b) = (upload(&dev, &a, "a")?, upload(&dev, &b, "b")?);
    let mut d_c = zeros::<f32>(&dev, vectors, "device array")?;
    let kernel = Kernel::from_source(SCALAR_PROD, "scalarProdGPU");
    // SAFETY: pair v occupies elements [v * elementN, (v + 1) * elementN) of A and B; C has
    // one element per pair.
    unsafe {
        dev.launch(
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
    }
    .map_err(fail("launch"))?;
    let want: Vec<f64> = a
        .chunks(elements)
        .zip(b.chunks(elements))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .map(|(p, q)| f64::from(*p) * f64::from(*q))
                .sum()
        })
        .collect();
    // Float sums of 2048 positive products (two per accumulator, then a tree): the sample
    // accepts 1e-6 in L1 norm; 1e-5 per element.
    check_rel("C", &download(&d_c, "c")?, &want, 1e-5)
}

/// The standard normal distribution function, by Simpson's rule on the density from 0 (steps of
/// at most 0.01: error far below 1e-9).
fn normal_cdf(d: f64) -> f64 {
    let density = |t: f64| (-0.5 * t * t).exp() / (2.0 * PI).sqrt();
    let steps = 2 * ((d.abs() / 0.02).ceil() as usize).max(1);
    let h = d.abs() / steps as f64;
    let inner: f64 = (1..steps)
        .map(|i| density(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    let area = h / 3.0 * (density(0.0) + inner + density(d.abs()));
    if d >= 0.0 { 0.5 + area } else { 0.5 - area }
}

/// Black and Scholes' call and put prices of a European option.
fn black_scholes_prices(s: f64, x: f64, t: f64, r: f64, v: f64) -> (f64, f64) {
    let sqrt_t = t.sqrt();
    let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * sqrt_t);
    let d2 = d1 - v * sqrt_t;
    let strike_now = x * (-r * t).exp();
    let call = s * normal_cdf(d1) - strike_now * normal_cdf(d2);
    let put = strike_now * normal_cdf(-d2) - s * normal_cdf(-d1);
    (call, put)
}

fn black_scholes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample: 4,000,000 options, two per thread, blocks of 128; 2500 here (the last block
    // partly idle: the kernel's bounds check matters).
    let options = 2500usize;
    let (riskfree, volatility) = (0.02f32, 0.30f32);
    let mut rng = Lcg::from_state(90);
    let pairs = |rng: &mut Lcg, low: f32, high: f32| -> Vec<[f32; 2]> {
        (0..options / 2)
            .map(|_| [rng.range(low, high), rng.range(low, high)])
            .collect()
    };
    let stock = pairs(&mut rng, 5.0, 30.0);
    let strike = pairs(&mut rng, 1.0, 100.0);
    let years = pairs(&mut rng, 0.25, 10.0);
    let mut d_call = zeros::<[f32; 2]>(&dev, options / 2, "device array")?;
    let mut d_put = zeros::<[f32; 2]>(&dev, options / 2, "device array")?;
    let (mut d_s, mut d_x, mut d_t) = (
        upload(&dev, &stock, "stock")?,
        upload(&dev, &strike, "strike")?,
        upload(&dev, &years, "years")?,
    );
    let kernel = Kernel::from_source(BLACK_SCHOLES, "BlackScholesGPU");
    let config = LaunchConfig::new((options / 2).div_ceil(128) as u32, 128);
    // SAFETY: the five float2 arrays hold optN / 2 elements; the kernel touches element opt only
    // when opt < optN / 2.
    unsafe {
        dev.launch(
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
    }
    .map_err(fail("launch"))?;
    let flat = |v: Vec<[f32; 2]>| -> Vec<f32> { v.into_iter().flatten().collect() };
    let (stock, strike, years) = (flat(stock), flat(strike), flat(years));
    let (mut calls, mut puts, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    for ((&s, &x), &t) in stock.iter().zip(&strike).zip(&years) {
        let (s, x) = (f64::from(s), f64::from(x));
        let (call, put) = black_scholes_prices(
            s,
            x,
            f64::from(t),
            f64::from(riskfree),
            f64::from(volatility),
        );
        calls.push(call);
        puts.push(put);
        scale.push(s + x);
    }
    // The prices are differences of terms of size S and X, so their error scales with S + X.
    // The kernel uses fast intrinsics (__logf, __expf, __fdividef: a few ulp, more for large
    // arguments) and a polynomial for the normal distribution (error below 7.5e-8): 5e-5 of
    // S + X covers them with room; a wrong formula is off by far more.
    check_scaled(
        "call",
        &flat(download(&d_call, "call")?),
        &calls,
        &scale,
        5e-5,
    )?;
    check_scaled("put", &flat(download(&d_put, "put")?), &puts, &scale, 5e-5)
}

// ---------------------------------------------------------------------------------------------
// simpleTemplates
// ---------------------------------------------------------------------------------------------

/// `testKernel<T>` as the sample's `runTest<T>(len)`: one block of len threads, len floats of
/// dynamic shared memory; each output is len * input.
fn simple_templates<T: Element + PartialEq>(
    rt: &Runtime,
    entry: &str,
    input: &[T],
    times_len: impl Fn(T) -> T,
) -> Result<(), String> {
    let dev = device(rt)?;
    let len = input.len();
    let mut d_in = upload(&dev, input, "input")?;
    let mut d_out = zeros::<T>(&dev, len, "device array")?;
    let kernel = Kernel::from_source(SIMPLE_TEMPLATES, entry);
    let config = LaunchConfig::new(1, len as u32).with_shared_bytes(len * size_of::<f32>());
    // SAFETY: one block of len threads, thread tid touching element tid of both arrays (len
    // elements) and of the len-element dynamic shared array.
    unsafe { dev.launch(&kernel, config, &mut [&mut d_in, &mut d_out]) }.map_err(fail("launch"))?;
    let want: Vec<T> = input.iter().map(|&v| times_len(v)).collect();
    check_equal(entry, &download(&d_out, "out")?, &want)
}

fn simple_templates_float(rt: &Runtime) -> Result<(), String> {
    // runTest<float>(32). One float product each: exact.
    let input: Vec<f32> = Lcg::from_state(100)
        .units(32)
        .iter()
        .map(|v| v * 100.0 - 50.0)
        .collect();
    simple_templates(rt, "testKernel<float>", &input, |v| 32.0 * v)
}

fn simple_templates_int(rt: &Runtime) -> Result<(), String> {
    // runTest<int>(64).
    let input: Vec<i32> = Lcg::from_state(101)
        .all_below32(64, 2000)
        .iter()
        .map(|&v| v as i32 - 1000)
        .collect();
    simple_templates(rt, "testKernel<int>", &input, |v| 64 * v)
}

// ---------------------------------------------------------------------------------------------
// fastWalshTransform
// ---------------------------------------------------------------------------------------------

/// fwtBatch1Kernel handles vectors up to 2^ELEMENTARY_LOG2SIZE in shared memory.
const ELEMENTARY_LOG2SIZE: u32 = 11;

/// The Walsh-Hadamard transform in natural (Hadamard) order, by its definition:
/// `out[k] = sum over j of (-1)^popcount(j & k) x[j]`.
fn walsh_hadamard(x: &[f32]) -> Vec<f64> {
    (0..x.len())
        .map(|k| {
            x.iter()
                .enumerate()
                .map(|(j, &v)| {
                    let v = f64::from(v);
                    if (j & k).count_ones() % 2 == 0 { v } else { -v }
                })
                .sum()
        })
        .collect()
}

/// `fwtBatch1Kernel<<<batches, N / 4, N * sizeof(float)>>>(data, data, log2N)`, in place as
/// the sample runs it.
fn launch_fwt_batch1(
    dev: &Device,
    kernel: &Kernel,
    data: &mut DeviceArray<f32>,
    batches: usize,
    log2n: u32,
) -> Result<(), String> {
    let n = 1usize << log2n;
    let mut alias = data.view();
    let config =
        LaunchConfig::new(batches as u32, (n / 4) as u32).with_shared_bytes(n * size_of::<f32>());
    // SAFETY: block b reads and writes the N elements of batch b (data has batches x N), and
    // uses N floats of dynamic shared memory; input and output are the same array, as in the
    // sample, and each block reads its batch before writing it.
    unsafe {
        dev.launch(
            kernel,
            config,
            &mut [data, &mut alias, &mut Scalar(log2n as i32)],
        )
    }
    .map_err(fail("fwtBatch1Kernel"))
}

/// The sample's fwtBatchGPU: radix-4 passes in global memory (fwtBatch2Kernel) until the
/// vectors fit in shared memory, then fwtBatch1Kernel.
fn fwt_batch(
    dev: &Device,
    module: &Module,
    data: &mut DeviceArray<f32>,
    mut batches: usize,
    mut log2n: u32,
) -> Result<(), String> {
    let mut n = 1usize << log2n;
    let grid = ((n / (4 * 256)) as u32, batches as u32);
    let batch2 = module.kernel("fwtBatch2Kernel");
    while log2n > ELEMENTARY_LOG2SIZE {
        let mut alias = data.view();
        // SAFETY: each thread reads and writes four elements at stride N / 4 inside its
        // batch's N elements (N = blockDim.x * gridDim.x * 4 stays the first N, the batches of
        // gridDim.y); in place, each thread's four elements being its own.
        unsafe {
            dev.launch(
                &batch2,
                LaunchConfig::new(grid, 256),
                &mut [&mut *data, &mut alias, &mut Scalar((n / 4) as i32)],
            )
        }
        .map_err(fail("fwtBatch2Kernel"))?;
        log2n -= 2;
        n >>= 2;
        batches <<= 2;
    }
    launch_fwt_batch1(dev, &module.kernel("fwtBatch1Kernel"), data, batches, log2n)
}

fn fast_walsh_batch1(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(WALSH, "fwtBatch1Kernel");
    let batches = 3;
    // Odd and even sizes: the odd one ends with a radix-2 stage.
    for log2n in [9u32, 10] {
        let n = 1usize << log2n;
        let input = Lcg::from_state(110 + u64::from(log2n)).units(batches * n);
        let mut d_data = upload(&dev, &input, "input")?;
        launch_fwt_batch1(&dev, &kernel, &mut d_data, batches, log2n)?;
        let got = download(&d_data, "data")?;
        for (b, (x, y)) in input.chunks(n).zip(got.chunks(n)).enumerate() {
            let total: f64 = x.iter().map(|v| f64::from(v.abs())).sum();
            // log2N float butterflies: each output's error is a few ulp of the sum of |x|.
            check_scaled(
                &format!("batch {b} of 2^{log2n}"),
                y,
                &walsh_hadamard(x),
                &vec![total; n],
                4e-6,
            )?;
        }
    }
    Ok(())
}

fn fast_walsh_modulate(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // More elements than the sample's fixed 128 x 256 threads: the threads loop.
    let n = 40_000usize;
    let mut rng = Lcg::from_state(120);
    let (a, b) = (rng.units(n), rng.units(n));
    let (mut d_a, mut d_b) = (upload(&dev, &a, "a")?, upload(&dev, &b, "b")?);
    let kernel = Kernel::from_source(WALSH, "modulateKernel");
    // SAFETY: the threads touch elements below N of A and B, which hold N each.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(128, 256),
            &mut [&mut d_a, &mut d_b, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("launch"))?;
    // Two float multiplications and a division, each correctly rounded: exact.
    let rcp = 1.0f32 / n as f32;
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * (y * rcp)).collect();
    check_equal("A", &download(&d_a, "a")?, &want)
}

fn fast_walsh_dyadic_convolution(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample's main: a dyadic convolution by transforms, with a data length of 2^13
    // (there 2^23) and its filter length of 2^7, so both fwtBatch kernels run.
    let (log2_data, kernel_len) = (13u32, 128usize);
    let n = 1usize << log2_data;
    let mut rng = Lcg::from_state(130);
    let data = rng.units(n);
    let mut filter = rng.units(kernel_len);
    filter.resize(n, 0.0);
    let module = Module::from_source(WALSH);
    let mut d_data = upload(&dev, &data, "data")?;
    let mut d_filter = upload(&dev, &filter, "filter")?;
    fwt_batch(&dev, &module, &mut d_data, 1, log2_data)?;
    fwt_batch(&dev, &module, &mut d_filter, 1, log2_data)?;
    // SAFETY: both arrays hold N elements and the threads touch elements below N.
    unsafe {
        dev.launch(
            &module.kernel("modulateKernel"),
            LaunchConfig::new(128, 256),
            &mut [&mut d_data, &mut d_filter, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("modulateKernel"))?;
    fwt_batch(&dev, &module, &mut d_data, 1, log2_data)?;
    // result[i] = sum over j of data[i xor j] * filter[j].
    let want: Vec<f64> = (0..n)
        .map(|i| {
            (0..kernel_len)
                .map(|j| f64::from(data[i ^ j]) * f64::from(filter[j]))
                .sum()
        })
        .collect();
    // Three float transforms of 2^13 positive values and a product: measured within 1e-6 of
    // the exact result (relative, all results positive); the sample accepts 1e-6 in L2 norm.
    check_rel(
        "dyadic convolution",
        &download(&d_data, "data")?,
        &want,
        1e-5,
    )
}

// ---------------------------------------------------------------------------------------------
// sortingNetworks (bitonic sort)
// ---------------------------------------------------------------------------------------------

fn bitonic_module() -> Module {
    Module::from_source(BITONIC)
}

fn bitonic_sort_shared(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = bitonic_module().kernel("bitonicSortShared");
    let n = 4 * SHARED_SIZE_LIMIT;
    // Arrays up to SHARED_SIZE_LIMIT, several per block, in both directions (the sample's
    // DIR is 0, descending).
    for (length, dir) in [(256usize, 1u32), (SHARED_SIZE_LIMIT, 0)] {
        let (keys, values) = sort_input(n, 140 + u64::from(dir));
        let (dk, dv) = sort_shared(&dev, &kernel, (&keys, &values), &[length as u32, dir])?;
        let what = format!("arrays of {length}, dir {dir}");
        check_sorted(&what, (&keys, &values), (&dk, &dv), length, |_| dir == 1)?;
    }
    Ok(())
}

fn bitonic_sort_shared1(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The first step for long arrays: chunks of SHARED_SIZE_LIMIT sorted in alternating
    // directions (descending for even blocks, ascending for odd ones).
    let n = 4 * SHARED_SIZE_LIMIT;
    let (keys, values) = sort_input(n, 150);
    let kernel = bitonic_module().kernel("bitonicSortShared1");
    let (dk, dv) = sort_shared(&dev, &kernel, (&keys, &values), &[])?;
    check_sorted(
        "bitonicSortShared1",
        (&keys, &values),
        (&dk, &dv),
        SHARED_SIZE_LIMIT,
        |chunk| chunk % 2 == 1,
    )
}

fn bitonic_sort_long_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let module = bitonic_module();
    let (length, batch) = (4 * SHARED_SIZE_LIMIT, 2usize);
    let n = length * batch;
    let blocks = n / SHARED_SIZE_LIMIT;
    let threads = (SHARED_SIZE_LIMIT / 2) as u32;
    for dir in [0u32, 1] {
        let (keys, values) = sort_input(n, 160 + u64::from(dir));
        let shared1 = module.kernel("bitonicSortShared1");
        let (mut dk, mut dv) = sort_shared(&dev, &shared1, (&keys, &values), &[])?;
        // The sample's bitonicSort host loop: merges in global memory while the stride is at
        // least SHARED_SIZE_LIMIT, then one shared-memory merge for the rest of that size.
        let (global, shared) = (
            module.kernel("bitonicMergeGlobal"),
            module.kernel("bitonicMergeShared"),
        );
        let mut size = 2 * SHARED_SIZE_LIMIT;
        while size <= length {
            let mut stride = size / 2;
            while stride > 0 {
                let (mut ak, mut av) = (dk.view(), dv.view());
                if stride >= SHARED_SIZE_LIMIT {
                    let scalars = [length as u32, size as u32, stride as u32, dir];
                    launch_sort(
                        &dev,
                        &global,
                        (n / 512, 256),
                        [&mut dk, &mut dv, &mut ak, &mut av],
                        &scalars,
                    )?;
                    stride >>= 1;
                } else {
                    let scalars = [length as u32, size as u32, dir];
                    launch_sort(
                        &dev,
                        &shared,
                        (blocks, threads),
                        [&mut dk, &mut dv, &mut ak, &mut av],
                        &scalars,
                    )?;
                    break;
                }
            }
            size <<= 1;
        }
        let what = format!("arrays of {length}, dir {dir}");
        check_sorted(&what, (&keys, &values), (&dk, &dv), length, |_| dir == 1)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// binomialOptions
// ---------------------------------------------------------------------------------------------

/// binomialOptions_common.h: the tree's time steps.
const NUM_STEPS: usize = 2048;

/// The kernel's per-option input, __TOptionData {S, X, vDt, puByDf, pdByDf}, for a
/// Cox-Ross-Rubinstein tree of NUM_STEPS steps: up and down factors e^(+-V sqrt(dt)),
/// risk-neutral probabilities, one step's discount folded in.
fn binomial_option_data(s: f32, x: f32, t: f32, r: f32, v: f32) -> [f32; 5] {
    let dt = f64::from(t) / NUM_STEPS as f64;
    let v_dt = f64::from(v) * dt.sqrt();
    let growth = (f64::from(r) * dt).exp();
    let (up, down) = (v_dt.exp(), (-v_dt).exp());
    let p_up = (growth - down) / (up - down);
    [
        s,
        x,
        v_dt as f32,
        (p_up / growth) as f32,
        ((1.0 - p_up) / growth) as f32,
    ]
}

/// The call's value by backward induction through the tree, in f64 from the kernel's inputs.
fn binomial_call(option: &[f32; 5]) -> f64 {
    let [s, x, v_dt, pu_by_df, pd_by_df] = option.map(f64::from);
    let n = NUM_STEPS as f64;
    let mut values: Vec<f64> = (0..=NUM_STEPS)
        .map(|i| (s * (v_dt * (2.0 * i as f64 - n)).exp() - x).max(0.0))
        .collect();
    while values.len() > 1 {
        values = values
            .windows(2)
            .map(|w| pu_by_df * w[1] + pd_by_df * w[0])
            .collect();
    }
    values[0]
}

fn binomial_options(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample: 1024 options (one block of 128 threads each); 3 here, with its R and V.
    let mut rng = Lcg::from_state(170);
    let options: Vec<[f32; 5]> = (0..3)
        .map(|_| {
            let (s, x, t) = (
                rng.range(5.0, 30.0),
                rng.range(1.0, 100.0),
                rng.range(0.25, 10.0),
            );
            binomial_option_data(s, x, t, 0.06, 0.10)
        })
        .collect();
    let module = Module::from_source(BINOMIAL);
    let kernel = module.kernel("binomialOptionsKernel");
    dev.copy_to_symbol(&kernel, "d_OptionData", &options[..])
        .map_err(fail("d_OptionData"))?;
    // SAFETY: block b reads d_OptionData[b] and writes d_CallValue[b], b < optN <= MAX_OPTIONS;
    // the kernel has no parameters.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(options.len() as u32, 128),
            &mut [],
        )
    }
    .map_err(fail("launch"))?;
    let values: Vec<f32> = dev
        .copy_from_symbol(&kernel, "d_CallValue")
        .map_err(fail("d_CallValue"))?;
    ensure!(
        values.len() >= options.len(),
        "d_CallValue has {} values",
        values.len()
    );
    let want: Vec<f64> = options.iter().map(binomial_call).collect();
    let scale: Vec<f64> = options.iter().map(|o| f64::from(o[0] + o[1])).collect();
    // 2048 float steps of a discounted average (errors do not grow), expiry values through
    // __expf: an f32 emulation of the steps stays within 5e-7 of S + X; 1e-5 of it here.
    check_scaled("call values", &values[..options.len()], &want, &scale, 1e-5)
}
